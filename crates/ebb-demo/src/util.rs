//! Small helpers: a deterministic PRNG, /proc/self/status readings, byte formatting.

use std::fmt;

/// xorshift64* seeded through splitmix64: fast, deterministic, good enough for workloads.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() >> 32) * n) >> 32
    }

    /// Uniform in `lo..hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below((hi - lo) as u64) as usize
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// Memory figures from /proc/self/status, in KiB (0 where unavailable).
#[derive(Clone, Copy, Debug, Default)]
pub struct Mem {
    /// Resident set size now (VmRSS).
    pub rss_kib: u64,
    /// Peak resident set size (VmHWM).
    pub hwm_kib: u64,
}

/// Reads /proc/self/status into a stack buffer: no heap allocation, so measuring does
/// not itself call the allocator (which could trigger a purge on ebb's slow path).
pub fn mem() -> Mem {
    use std::io::Read;
    let mut m = Mem::default();
    let mut buf = [0u8; 8192];
    let mut len = 0;
    if let Ok(mut f) = std::fs::File::open("/proc/self/status") {
        while len < buf.len() {
            match f.read(&mut buf[len..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => len += n,
            }
        }
    }
    let text = std::str::from_utf8(&buf[..len]).unwrap_or("");
    for line in text.lines() {
        let field = |prefix: &str| -> Option<u64> {
            line.strip_prefix(prefix)?
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()
        };
        if let Some(v) = field("VmRSS:") {
            m.rss_kib = v;
        } else if let Some(v) = field("VmHWM:") {
            m.hwm_kib = v;
        }
    }
    m
}

/// Human-readable byte count (binary units, one decimal).
pub struct Bytes(pub u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0 as f64;
        let s = if b >= (1u64 << 30) as f64 {
            format!("{:.1} GiB", b / (1u64 << 30) as f64)
        } else if b >= (1u64 << 20) as f64 {
            format!("{:.1} MiB", b / (1u64 << 20) as f64)
        } else if b >= 1024.0 {
            format!("{:.1} KiB", b / 1024.0)
        } else {
            format!("{} B", self.0)
        };
        f.pad(&s)
    }
}

/// Human-readable count (k, M).
pub struct Count(pub u64);

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0 as f64;
        let s = if n >= 1e6 {
            format!("{:.1} M", n / 1e6)
        } else if n >= 1e4 {
            format!("{:.0} k", n / 1e3)
        } else {
            format!("{}", self.0)
        };
        f.pad(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_proc_status() {
        let m = mem();
        assert!(m.rss_kib > 0 && m.hwm_kib >= m.rss_kib, "{m:?}");
    }

    #[test]
    fn formats() {
        assert_eq!(Bytes(512).to_string(), "512 B");
        assert_eq!(Bytes(3 << 20).to_string(), "3.0 MiB");
        assert_eq!(Count(2_500_000).to_string(), "2.5 M");
        let mut r = Rng::new(1);
        assert!((0..1000).all(|_| (8..1000).contains(&r.range(8, 1000))));
    }
}
