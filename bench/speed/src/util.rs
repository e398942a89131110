//! Small helpers: a deterministic PRNG, peak RSS, a minimal JSON writer, scaling.

use std::fmt::Write;
#[cfg(feature = "count-ops")]
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

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

/// CPU time (user + system) of the whole process so far, every thread's that ran, in ms.
pub fn cpu_ms() -> f64 {
    // SAFETY: getrusage fills the zeroed struct it is given; RUSAGE_SELF always exists.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    ms(usage.ru_utime) + ms(usage.ru_stime)
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

/// std's System allocator (C malloc) with a count of the calls of each kind, for the
/// `count-ops` build: the number of allocator operations a workload performs, which
/// scripts/cachegrind.sh divides the cache misses of the uncounted build by.
#[cfg(feature = "count-ops")]
pub struct CountingSystem;

#[cfg(feature = "count-ops")]
static OPS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

#[cfg(feature = "count-ops")]
impl CountingSystem {
    /// `{"alloc": .., "dealloc": .., "realloc": .., "alloc_zeroed": ..}` so far.
    pub fn ops_json() -> String {
        let [a, d, r, z] = [0, 1, 2, 3].map(|i| OPS[i].load(Relaxed));
        format!("{{\"alloc\": {a}, \"dealloc\": {d}, \"realloc\": {r}, \"alloc_zeroed\": {z}}}")
    }
}

// SAFETY: every method forwards to System with the same arguments; counting touches no
// allocation.
#[cfg(feature = "count-ops")]
unsafe impl std::alloc::GlobalAlloc for CountingSystem {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        OPS[0].fetch_add(1, Relaxed);
        // SAFETY: the caller's guarantees for `alloc` are System's.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        OPS[1].fetch_add(1, Relaxed);
        // SAFETY: ptr came from System with this layout (every block here does).
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        OPS[2].fetch_add(1, Relaxed);
        // SAFETY: as for dealloc; new_size is the caller's, valid for System too.
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        OPS[3].fetch_add(1, Relaxed);
        // SAFETY: as for alloc.
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }
}
