//! Where sampling meets the allocator: the sample points of a heap, how the fast path
//! is made to stop at them, and how a sampled block is served and freed.
//!
//! Every byte a heap hands out is sampled with probability `1/rate`: each size class
//! of a heap keeps a countdown of bytes to its next sample point, drawn from the
//! exponential distribution (memoryless, so separate countdowns per class sample the
//! heap's byte stream exactly as one would). The fast path is not changed; the slow
//! path arranges that the fast path runs dry exactly at a sample point:
//!
//! * When the slow path gives a page's free list to the fast path (`cut`), it knows
//!   the list's length without walking it (`capacity - used`). If the countdown
//!   outlasts the list, the list goes whole and the countdown drops by its bytes;
//!   otherwise the list is cut after the last block before the sample point (a walk of
//!   those blocks, once per sample), the rest parked on `local_free`.
//! * The fast path also refills from `local_free` (`malloc_local_or_slow`), which
//!   would hand out blocks nobody counted: while a heap samples, its `local_mask` is 0
//!   and that refill sees an empty list, so the slow path does it (and counts).
//! * At a sample point (`sample_point`), the slow path serves the allocation itself
//!   (`serve_sampled`): from a span of its own, owned by nobody (`LARGE`), so its free
//!   takes the free slow path (`freed`), which credits the sample. This is the hook a
//!   second consumer can reuse: "this allocation is a sample point, serve it
//!   specially" (guarded sampling would put guard pages around that span).
//!
//! Blocks above `MEDIUM_MAX` (large and huge) already take slow paths; they share one
//! process-wide countdown (`big_allocated`).

use super::{math, stack, table, ACTIVE, EPOCH, RATE, SEED};
use crate::size_class::CLASS_COUNT;
use crate::span::arena;
use crate::span::page::{Block, Page};
use crate::span::segment::SLICE_SIZE;
use core::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// A heap's sampling state (owner only).
#[repr(C)]
pub struct HeapSampler {
    /// The `EPOCH` this state was set up for (profiling started or stopped since?).
    epoch: u32,
    rate: u64,
    rng: math::Rng,
    /// Bytes of each class until its next sample point (0: not drawn yet).
    left: [i64; CLASS_COUNT],
}

impl HeapSampler {
    pub const fn new() -> Self {
        HeapSampler {
            epoch: 0,
            rate: super::DEFAULT_RATE,
            rng: math::Rng::new(0),
            left: [0; CLASS_COUNT],
        }
    }
}

impl Default for HeapSampler {
    fn default() -> Self {
        Self::new()
    }
}

/// Heaps set up for sampling so far (seeds each one's generator differently).
static HEAP_SERIAL: AtomicU64 = AtomicU64::new(0);

/// Bring a heap's sampling state up to date with `start`/`stop` (on its malloc slow
/// path; one load and compare when nothing changed). `local_mask` is the heap's:
/// 0 while it samples. Returns whether it samples. `allowed`: false in check mode.
#[inline]
pub fn sync(s: &mut HeapSampler, local_mask: &mut usize, allowed: bool) -> bool {
    let epoch = EPOCH.load(Ordering::Acquire);
    if s.epoch != epoch {
        s.epoch = epoch;
        let on = allowed && ACTIVE.load(Ordering::Relaxed);
        *local_mask = if on { 0 } else { usize::MAX };
        if on {
            s.rate = RATE.load(Ordering::Relaxed);
            let serial = HEAP_SERIAL.fetch_add(1, Ordering::Relaxed);
            s.rng = math::Rng::new(SEED.load(Ordering::Relaxed) ^ serial.wrapping_mul(0x9E37_79B9));
            s.left = [0; CLASS_COUNT];
        }
    }
    *local_mask == 0
}

/// True if the heap's state is up to date with `start`/`stop` (`sync` has nothing to do).
#[inline]
pub fn in_step(s: &HeapSampler) -> bool {
    s.epoch == EPOCH.load(Ordering::Relaxed)
}

/// Count one allocation of `block_size` bytes of `class`; true if it is a sample point.
#[inline]
pub fn sample_point(s: &mut HeapSampler, class: usize, block_size: usize) -> bool {
    let mut left = s.left[class];
    if left == 0 {
        left = s.rng.next_interval(s.rate);
    }
    left -= block_size as i64;
    if left <= 0 {
        s.left[class] = s.rng.next_interval(s.rate);
        true
    } else {
        s.left[class] = left;
        false
    }
}

/// `page` (owned by the heap, current for `class`) is about to serve the fast path:
/// count the blocks its free list hands out, cutting it at the next sample point.
///
/// # Safety
/// The caller owns `page` (its heap's slow path), whose lists hold `capacity - used`
/// blocks between them.
pub unsafe fn cut(s: &mut HeapSampler, page: *mut Page, class: usize, block_size: usize) {
    // SAFETY: per the contract, the lists are ours to relink.
    unsafe {
        let page = &mut *page;
        if !page.local_free.is_null() {
            // One list, so the length below is the length of `free`.
            if !page.free.is_null() {
                let mut tail = page.local_free;
                while !page.link(tail).is_null() {
                    tail = page.link(tail);
                }
                page.set_link(tail, page.free);
            }
            page.free = page.local_free;
            page.local_free = core::ptr::null_mut();
            page.free_is_zero = false;
            page.frees_to_local = false;
        }
        // Frees after the cut must not extend the list the fast path is counting down.
        page.frees_to_local = true;
        let blocks = page.capacity.saturating_sub(page.used()) as i64;
        let size = block_size as i64;
        let left = s.left[class];
        // Blocks the fast path may hand out with the countdown staying above 0.
        let before = (left - 1) / size;
        if blocks <= before {
            s.left[class] = left - blocks * size;
            return;
        }
        let mut handed = 0;
        if before == 0 {
            page.local_free = page.free;
            page.free = core::ptr::null_mut();
        } else {
            let mut last: *mut Block = page.free;
            handed = 1;
            while handed < before && !page.link(last).is_null() {
                last = page.link(last);
                handed += 1;
            }
            page.local_free = page.link(last);
            page.set_link(last, core::ptr::null_mut());
        }
        s.left[class] = left - handed * size;
    }
}

/// Serve a sampled allocation of `size` bytes (counted as `block_size`) from a span of
/// its own and record it; null if the arena has no room (the caller then serves it
/// as usual, unsampled). `entry`: see `stack::Entry`.
#[cold]
pub fn serve_sampled(size: usize, block_size: usize, entry: stack::Entry) -> *mut u8 {
    let mut pcs = [0usize; table::MAX_DEPTH];
    let depth = stack::capture(entry, &mut pcs);
    let Some(page) = arena::alloc_large(size.max(1), SLICE_SIZE) else {
        return core::ptr::null_mut();
    };
    // SAFETY: alloc_large returns a live span head whose block starts at `start`.
    let block = unsafe { (*page).start };
    // A reused span may be resident throughout; the block needs only its own pages, so
    // a small sampled block does not pin a whole slice while it lives.
    // SAFETY: the span is ours and nothing lives past the block's pages.
    unsafe {
        if !(*page).is_zero {
            let os_page = crate::os::page_size();
            let used = size.max(1).next_multiple_of(os_page);
            let span = (*page).span_bytes();
            if used < span {
                crate::os::decommit(block.add(used), span - used);
            }
        }
    }
    if !super::is_writer() {
        let weight = math::sample_weight(block_size, RATE.load(Ordering::Relaxed));
        table::record(&pcs[..depth], block as usize, size, weight);
    }
    block
}

/// The process-wide countdown of blocks above `MEDIUM_MAX` and its generator.
static BIG_LEFT: AtomicI64 = AtomicI64::new(0);
static BIG_RNG: AtomicU64 = AtomicU64::new(0);

fn big_interval() -> i64 {
    let state = BIG_RNG.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
    let mut rng = math::Rng::new(state ^ SEED.load(Ordering::Relaxed));
    rng.next_interval(RATE.load(Ordering::Relaxed))
}

/// A block above `MEDIUM_MAX` was allocated at `block`: count it, and record it if a
/// sample point falls in it.
#[cold]
pub fn big_allocated(block: *mut u8, size: usize, entry: stack::Entry) {
    let mut left = BIG_LEFT.load(Ordering::Relaxed);
    if left == 0 {
        // First big block since profiling started: draw (racing threads may both draw).
        left = big_interval();
        BIG_LEFT.store(left, Ordering::Relaxed);
    }
    let before = BIG_LEFT.fetch_sub(size as i64, Ordering::Relaxed);
    if before <= 0 || before - size as i64 > 0 {
        // No sample point here (or another thread is redrawing after one).
        return;
    }
    BIG_LEFT.store(big_interval(), Ordering::Relaxed);
    if super::is_writer() {
        return;
    }
    let mut pcs = [0usize; table::MAX_DEPTH];
    let depth = stack::capture(entry, &mut pcs);
    let rate = RATE.load(Ordering::Relaxed);
    table::record(
        &pcs[..depth],
        block as usize,
        size,
        math::sample_weight(size, rate),
    );
}

/// Reset the big-block countdown (profiling starts).
pub fn reset_big() {
    BIG_LEFT.store(0, Ordering::Relaxed);
}

/// A span-backed block (large, huge, or a sampled one) is being freed.
#[inline]
pub fn freed(block: *mut u8) {
    if table::LIVE_COUNT.load(Ordering::Relaxed) != 0 {
        table::freed(block as usize);
    }
}

/// A huge block moved in `realloc` (remapped without a free).
#[inline]
pub fn moved(from: *mut u8, to: *mut u8) {
    if from != to && table::LIVE_COUNT.load(Ordering::Relaxed) != 0 {
        table::moved(from as usize, to as usize);
    }
}
