//! Self-checking blocks for the multi-threaded stress tests (`stress.rs`): a block
//! carries its seed and pattern, so any thread that frees it checks it first.

use super::*;
use std::alloc::{alloc, dealloc, realloc};
use std::sync::{Mutex, MutexGuard};
use std::thread;

pub static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn threads_to_use() -> usize {
    thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .max(4)
}

/// A block that carries its own check: the first 8 bytes hold the seed, the rest the
/// seed's pattern. Sent between threads as plain numbers.
#[derive(Debug)]
pub struct Blk {
    pub ptr: usize,
    pub size: usize,
    pub align: usize,
}

pub const HEADER: usize = 8;

impl Blk {
    /// Allocate and fill a block (`size >= HEADER`).
    pub fn new(size: usize, align: usize, seed: u64) -> Blk {
        assert!(size >= HEADER);
        // SAFETY: non-zero layout; written within bounds.
        unsafe {
            let p = alloc(layout(size, align));
            assert!(!p.is_null(), "alloc({size}, {align})");
            assert_eq!(p as usize % align, 0, "alloc({size}, {align}) misaligned");
            (p as *mut u64).write_unaligned(seed);
            fill(p, seed, HEADER, size);
            Blk {
                ptr: p as usize,
                size,
                align,
            }
        }
    }

    pub fn random(rng: &mut Rng) -> Blk {
        let size = stress_size(rng);
        let align = match rng.below(100) {
            0..=79 => 8,
            80..=94 => 16,
            95..=98 => 64,
            _ => 4096,
        };
        Blk::new(size, align, rng.next_u64())
    }

    /// Check the contents against the seed stored in the block.
    pub fn verify(&self, what: &str) {
        let p = self.ptr as *const u8;
        // SAFETY: the block is live with `size` bytes.
        unsafe {
            let seed = (p as *const u64).read_unaligned();
            verify(p, seed, HEADER, self.size, what);
        }
    }

    /// Verify, then free.
    pub fn free(self, what: &str) {
        self.verify(what);
        // SAFETY: live block with this layout, freed once (self is consumed).
        unsafe { dealloc(self.ptr as *mut u8, layout(self.size, self.align)) };
    }

    /// Verify, resize, check the kept part, and fill the rest.
    pub fn resize(&mut self, new_size: usize) {
        self.verify("before realloc");
        let new_size = new_size.max(HEADER);
        // SAFETY: live block with this layout; the new size is valid for the alignment.
        unsafe {
            let q = realloc(self.ptr as *mut u8, layout(self.size, self.align), new_size);
            assert!(!q.is_null());
            assert_eq!(q as usize % self.align, 0);
            let seed = (q as *const u64).read_unaligned();
            verify(q, seed, HEADER, self.size.min(new_size), "after realloc");
            if new_size > self.size {
                fill(q, seed, self.size, new_size);
            }
            self.ptr = q as usize;
            self.size = new_size;
        }
    }
}

/// Mostly small, some medium, rare large (sizes >= HEADER).
pub fn stress_size(rng: &mut Rng) -> usize {
    match rng.below(100_000) {
        0..=89_999 => rng.range(HEADER, 256),
        90_000..=98_999 => rng.range(257, 4 * KIB),
        99_000..=99_899 => rng.range(4 * KIB, 64 * KIB),
        99_900..=99_989 => rng.range(64 * KIB, ebb::MEDIUM_MAX),
        _ => rng.range(ebb::MEDIUM_MAX + 1, 4 * MIB),
    }
}

/// Checks at the end of a test: everything was freed, so after a forced collect the
/// live figures are back near where they started, and the figures agree.
pub fn check_after(before: &ebb::Stats, spawned: u64) {
    ebb::collect(true);
    let s = ebb::stats();
    check_stats_consistent(&s);
    assert!(
        s.threads_created >= before.threads_created + spawned,
        "spawned {spawned} threads: created {} -> {}",
        before.threads_created,
        s.threads_created
    );
    assert!(
        s.threads < before.threads + 16,
        "heaps of exited threads are retired: {} live heaps (were {})",
        s.threads,
        before.threads
    );
    assert_eq!(
        s.invalid_frees, before.invalid_frees,
        "invalid frees reported"
    );
    assert!(
        s.allocated <= before.allocated + 16 * MIB as u64,
        "everything was freed, yet allocated went {} -> {} (small {}, large {}, huge {})",
        before.allocated,
        s.allocated,
        s.allocated_small,
        s.allocated_large,
        s.allocated_huge
    );
    assert!(
        s.committed <= s.reserved,
        "{} > {}",
        s.committed,
        s.reserved
    );
    assert!(s.free_committed <= s.committed);
    assert!(s.allocated <= s.committed);
}
