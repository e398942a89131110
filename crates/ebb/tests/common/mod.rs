//! Helpers shared by the integration tests: a small PRNG, block patterns, size and
//! alignment generators, and readers for process figures.
//!
//! Every test binary includes this with `mod common;` and installs ebb itself.

#![allow(dead_code)]

use std::alloc::Layout;

pub mod pages;
pub mod shadow;
pub mod stress_blocks;

/// xorshift64* — tiny, fast, good enough to drive tests. Never seeded with 0.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        // splitmix the seed so nearby seeds give unrelated streams.
        Rng(splitmix(seed) | 1)
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0; the bias is irrelevant here).
    #[inline]
    pub fn below(&mut self, n: usize) -> usize {
        debug_assert!(n > 0);
        ((self.next_u64() >> 11) % n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    #[inline]
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `num / den`.
    #[inline]
    pub fn chance(&mut self, num: usize, den: usize) -> bool {
        self.below(den) < num
    }
}

#[inline]
pub fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The pattern word covering bytes `8k..8k+8` of a block with this seed.
#[inline(always)]
fn word(seed: u64, k: usize) -> u64 {
    let x = seed ^ (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (x ^ (x >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9)
}

/// The pattern byte at offset `i` of a block with this seed.
#[inline(always)]
pub fn pattern_byte(seed: u64, i: usize) -> u8 {
    (word(seed, i / 8) >> (8 * (i % 8))) as u8
}

/// Write the pattern of `seed` into bytes `from..to` of the block at `p`.
///
/// # Safety
/// `p..p+to` must be writable.
pub unsafe fn fill(p: *mut u8, seed: u64, from: usize, to: usize) {
    let mut i = from;
    unsafe {
        while i < to && i % 8 != 0 {
            *p.add(i) = pattern_byte(seed, i);
            i += 1;
        }
        while i + 8 <= to {
            (p.add(i) as *mut u64).write_unaligned(word(seed, i / 8).to_le());
            i += 8;
        }
        while i < to {
            *p.add(i) = pattern_byte(seed, i);
            i += 1;
        }
    }
}

/// Offset of the first byte in `from..to` that does not match the pattern, if any.
///
/// # Safety
/// `p..p+to` must be readable.
pub unsafe fn first_mismatch(p: *const u8, seed: u64, from: usize, to: usize) -> Option<usize> {
    let mut i = from;
    unsafe {
        while i < to && i % 8 != 0 {
            if *p.add(i) != pattern_byte(seed, i) {
                return Some(i);
            }
            i += 1;
        }
        while i + 8 <= to {
            if (p.add(i) as *const u64).read_unaligned() != word(seed, i / 8).to_le() {
                for j in i..i + 8 {
                    if *p.add(j) != pattern_byte(seed, j) {
                        return Some(j);
                    }
                }
            }
            i += 8;
        }
        while i < to {
            if *p.add(i) != pattern_byte(seed, i) {
                return Some(i);
            }
            i += 1;
        }
    }
    None
}

/// Panic with a useful message if bytes `from..to` of the block do not hold the pattern.
///
/// # Safety
/// `p..p+to` must be readable.
#[track_caller]
pub unsafe fn verify(p: *const u8, seed: u64, from: usize, to: usize, what: &str) {
    if let Some(i) = unsafe { first_mismatch(p, seed, from, to) } {
        let got = unsafe { *p.add(i) };
        panic!(
            "{what}: block {p:p} (bytes {from}..{to}) corrupted at offset {i}: \
             found {got:#04x}, expected {:#04x}",
            pattern_byte(seed, i)
        );
    }
}

/// Offset of the first non-zero byte in `p..p+len`, if any.
///
/// # Safety
/// `p..p+len` must be readable.
pub unsafe fn first_nonzero(p: *const u8, len: usize) -> Option<usize> {
    let mut i = 0;
    unsafe {
        while i < len && (p as usize + i) % 8 != 0 {
            if *p.add(i) != 0 {
                return Some(i);
            }
            i += 1;
        }
        while i + 64 <= len {
            let w = p.add(i) as *const u64;
            let mut acc = 0;
            for j in 0..8 {
                acc |= *w.add(j);
            }
            if acc != 0 {
                break;
            }
            i += 64;
        }
        while i < len {
            if *p.add(i) != 0 {
                return Some(i);
            }
            i += 1;
        }
    }
    None
}

// ---------------------------------------------------------------------------------
// Size classes, replicated from ebb's documented scheme: multiples of 8 up to 128,
// then eight classes per power of two up to MEDIUM_MAX; from 1 KiB to 8 KiB, two fine
// classes below the first of each doubling (2^k + 16 and 2^k + 3 * 2^k / 32).

pub fn class_sizes() -> Vec<usize> {
    let mut v: Vec<usize> = (1..=16).map(|i| i * 8).collect();
    let mut k = 128usize;
    while k < ebb::MEDIUM_MAX {
        if (1024..8192).contains(&k) {
            v.extend([k + 16, k + 3 * k / 32]);
        }
        for j in 1..=8 {
            v.push(k + j * (k / 8));
        }
        k *= 2;
    }
    assert_eq!(*v.last().unwrap(), ebb::MEDIUM_MAX);
    assert_eq!(v.len(), ebb::CLASS_COUNT, "size class scheme changed");
    v
}

/// Interesting sizes: every class boundary and its neighbours, and powers of two (and
/// their neighbours) up to `LARGE_MAX`, plus the large/huge limits.
pub fn boundary_sizes() -> Vec<usize> {
    let mut v = Vec::new();
    for c in class_sizes() {
        v.extend([c - 1, c, c + 1]);
    }
    let mut p = 1usize;
    while p <= ebb::LARGE_MAX {
        v.extend([p - 1, p, p + 1]);
        p *= 2;
    }
    v.extend([ebb::LARGE_MAX - 1, ebb::LARGE_MAX, ebb::LARGE_MAX + 1]);
    v.retain(|&s| s > 0);
    v.sort_unstable();
    v.dedup();
    v
}

pub const KIB: usize = 1024;
pub const MIB: usize = 1024 * 1024;

/// A layout, panicking on invalid input (the generators only make valid ones).
pub fn layout(size: usize, align: usize) -> Layout {
    Layout::from_size_align(size, align).expect("valid layout")
}

// ---------------------------------------------------------------------------------
// Process figures

/// Resident set size of this process in bytes (VmRSS in /proc/self/status).
pub fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Check figures of a stats snapshot that must agree with each other whatever runs.
pub fn check_stats_consistent(s: &ebb::Stats) {
    assert_eq!(
        s.allocated,
        s.allocated_small + s.allocated_large + s.allocated_huge,
        "allocated is the sum of its parts: {s:?}"
    );
    assert!(s.threads <= s.threads_created, "{s:?}");
    assert!(s.pages_abandoned <= s.pages, "{s:?}");
    let mut pages = 0;
    let mut small = 0;
    for c in s.classes.iter() {
        assert!(c.live_blocks <= c.capacity_blocks, "{c:?}");
        pages += c.pages;
        small += c.live_blocks * c.block_size;
    }
    assert_eq!(pages, s.pages, "per-class pages add up");
    assert_eq!(small, s.allocated_small, "per-class live bytes add up");
}

/// Freed huge mappings are kept only while huge requests reuse freed huge memory
/// (`span::huge_pool::Demand`): a huge block freed and another asked for right after is
/// that sign. Leaves one kept 20 MiB mapping (reuse is then remembered for two purge
/// delays).
pub fn arm_huge_reuse() {
    let layout = Layout::from_size_align(20 << 20, 8).unwrap();
    for _ in 0..2 {
        // SAFETY: a non-zero layout; the block is written within bounds, freed once.
        unsafe {
            let p = std::hint::black_box(std::alloc::alloc(layout));
            assert!(!p.is_null());
            p.write(1);
            std::alloc::dealloc(std::hint::black_box(p), layout);
        }
    }
}

/// Run `test` of the calling test binary alone in a child process with `child_env` set
/// (the child runs the body; the parent only checks that it passed) and `env` added:
/// for options read once at start, such as `EBB_PURGE_DELAY`.
pub fn run_test_in_child(test: &str, child_env: &str, env: &[(&str, &str)]) {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(child_env, "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "{test} in a child with {env:?}: {:?}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
