//! Small helpers: a deterministic PRNG, peak RSS, a minimal JSON writer, scaling.

use std::fmt::Write;

/// xorshift64* seeded through splitmix64: deterministic, fast, good enough for sizes
/// and indices.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }

    #[inline]
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (n > 0), by multiply-shift.
    #[inline]
    pub fn below(&mut self, n: usize) -> usize {
        (((self.next() >> 32) * n as u64) >> 32) as usize
    }

    /// Uniform in `lo..=hi`.
    #[inline]
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
}

/// `base * scale`, rounded, at least `min`.
pub fn scaled(base: usize, scale: f64, min: usize) -> usize {
    ((base as f64 * scale).round() as usize).max(min)
}

/// Mix a value into a running checksum (order-dependent).
#[inline]
pub fn mix(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(0x100_0000_01b3).rotate_left(17)
}

/// Peak resident set size of this process in KiB (VmHWM from /proc/self/status).
pub fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Number of worker threads for the multi-threaded workloads: the core count, at least 2.
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .max(2)
}

/// A one-line JSON object writer (keys and string values are plain ASCII here).
pub struct Json {
    out: String,
}

impl Json {
    pub fn new() -> Json {
        Json {
            out: String::from("{"),
        }
    }

    fn key(&mut self, key: &str) {
        if self.out.len() > 1 {
            self.out.push_str(", ");
        }
        let _ = write!(self.out, "\"{key}\": ");
    }

    pub fn str(&mut self, key: &str, value: &str) -> &mut Json {
        self.key(key);
        self.out.push('"');
        for c in value.chars() {
            match c {
                '"' => self.out.push_str("\\\""),
                '\\' => self.out.push_str("\\\\"),
                c if (c as u32) < 0x20 => {
                    let _ = write!(self.out, "\\u{:04x}", c as u32);
                }
                c => self.out.push(c),
            }
        }
        self.out.push('"');
        self
    }

    pub fn num(&mut self, key: &str, value: f64) -> &mut Json {
        self.key(key);
        let _ = write!(self.out, "{value}");
        self
    }

    pub fn int(&mut self, key: &str, value: u64) -> &mut Json {
        self.key(key);
        let _ = write!(self.out, "{value}");
        self
    }

    /// A value that is already JSON.
    pub fn raw(&mut self, key: &str, value: &str) -> &mut Json {
        self.key(key);
        self.out.push_str(value);
        self
    }

    pub fn finish(&mut self) -> String {
        let mut s = std::mem::take(&mut self.out);
        s.push('}');
        s
    }
}
