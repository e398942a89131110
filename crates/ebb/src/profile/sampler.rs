//! Where sampling meets the allocator: the sample points of a heap, how the fast path
//! is made to stop at them, and how a sampled block is served and freed.
//!
//! Every byte a heap hands out is sampled with probability `1/rate`: each size class
//! of a heap keeps a countdown of bytes to its next sample point, drawn from the
//! exponential distribution (memoryless, so separate countdowns per class sample the
//! heap's byte stream exactly as one would). The fast path is not changed; the slow
//! path arranges that the fast path runs dry exactly at a sample point:
//!
//! * When the slow path gives a page's free list to the fast path (`cut`,
//!   `handout::hand_out`), it knows the list's length without walking it (from
//!   `capacity - used` and the remote count its gather took in). If the countdown
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
use crate::span::page::Page;
use crate::span::segment::SLICE_SIZE;
use core::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// A heap's sampling state (owner only).
#[repr(C)]
pub struct HeapSampler {
    /// The `EPOCH` this state was set up for (profiling started or stopped since?).
    epoch: u32,
    /// Whether this heap samples (the profiler was on at the last `sync`). Kept here,
    /// not read off `local_mask`, which guarded sampling also zeroes.
    active: bool,
    rate: u64,
    rng: math::Rng,
    /// Bytes of each class until its next sample point (0: not drawn yet).
    left: [i64; CLASS_COUNT],
}

impl HeapSampler {
    pub const fn new() -> Self {
        HeapSampler {
            epoch: 0,
            active: false,
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
/// 0 while it samples. Returns whether it samples. `allowed`: false for a heap that
/// must not sample.
#[inline]
pub fn sync(s: &mut HeapSampler, local_mask: &mut usize, allowed: bool) -> bool {
    let epoch = EPOCH.load(Ordering::Acquire);
    if s.epoch != epoch {
        s.epoch = epoch;
        let on = allowed && ACTIVE.load(Ordering::Relaxed);
        s.active = on;
        *local_mask = if on { 0 } else { usize::MAX };
        if on {
            s.rate = RATE.load(Ordering::Relaxed);
            let serial = HEAP_SERIAL.fetch_add(1, Ordering::Relaxed);
            s.rng = math::Rng::new(SEED.load(Ordering::Relaxed) ^ serial.wrapping_mul(0x9E37_79B9));
            s.left = [0; CLASS_COUNT];
        }
    }
    s.active
}

/// Whether the heap samples (as `sync` last said).
#[inline]
pub fn samples(s: &HeapSampler) -> bool {
    s.active
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

/// Blocks of `class` (of `block_size` bytes) the fast path may hand out before the
/// next sample point, i.e. with the countdown staying above 0 (drawn first if it was
/// not yet).
#[inline]
pub fn blocks_before(s: &mut HeapSampler, class: usize, block_size: usize) -> i64 {
    let mut left = s.left[class];
    if left == 0 {
        left = s.rng.next_interval(s.rate);
        s.left[class] = left;
    }
    (left - 1) / block_size as i64
}

/// Whether the fast path may hand out `blocks` blocks of `class` (of `block_size`
/// bytes) before the next sample point (`blocks <= blocks_before`, without a division;
/// draws the countdown first if it was not yet).
#[inline(always)]
pub fn fits(s: &mut HeapSampler, class: usize, blocks: i64, block_size: usize) -> bool {
    let mut left = s.left[class];
    if left == 0 {
        left = s.rng.next_interval(s.rate);
        s.left[class] = left;
    }
    blocks * (block_size as i64) < left
}

/// If the countdown of `class` is drawn and outlasts `blocks` blocks of `block_size`
/// bytes, charge them and return true (`fits` and `charge` at once, without the draw:
/// no `ln` inlined, so a refill that calls only this saves no registers); false
/// otherwise, nothing changed.
#[inline(always)]
pub fn charge_if_fits(s: &mut HeapSampler, class: usize, blocks: i64, block_size: usize) -> bool {
    let left = s.left[class];
    let bytes = blocks * block_size as i64;
    if left == 0 || bytes >= left {
        return false;
    }
    s.left[class] = left - bytes;
    true
}

/// The fast path was handed `blocks` blocks of `class` (at most `blocks_before`).
#[inline]
pub fn charge(s: &mut HeapSampler, class: usize, blocks: i64, block_size: usize) {
    s.left[class] -= blocks * block_size as i64;
    debug_assert!(s.left[class] > 0);
}

/// `page` (owned by the heap, current for `class`) is about to serve the fast path:
/// hand out its free list up to the next sample point and count it (`handout`).
/// `local_len`: the length of `local_free` if known (`Page::gather_frees`). Returns
/// the blocks left on `free` for the fast path.
///
/// # Safety
/// As `handout::hand_out`.
pub unsafe fn cut(
    s: &mut HeapSampler,
    page: *mut Page,
    class: usize,
    block_size: usize,
    local_len: Option<u32>,
) -> i64 {
    let limit = blocks_before(s, class, block_size);
    // SAFETY: per the contract.
    let handed = unsafe { super::handout::hand_out(page, local_len, limit) };
    charge(s, class, handed, block_size);
    handed
}

/// Serve a sampled allocation of `size` bytes (counted as `block_size`) from a span of
/// its own and record it; null if the arena has no room (the caller then serves it
/// as usual, unsampled). `entry`: see `stack::Entry`.
#[cold]
pub fn serve_sampled(size: usize, block_size: usize, entry: stack::Entry) -> *mut u8 {
    let mut pcs = [0usize; table::MAX_DEPTH];
    let depth = stack::capture(entry, &mut pcs);
    let used = size.max(1).next_multiple_of(crate::os::page_size());
    let page = match span_cache::take(used, size.max(1).div_ceil(SLICE_SIZE)) {
        Some(page) => page,
        None => {
            let Some(page) = arena::alloc_large(size.max(1), SLICE_SIZE) else {
                return core::ptr::null_mut();
            };
            // A reused span may be resident throughout; the block needs only its own
            // pages, so a small sampled block does not pin a whole slice while it lives.
            // SAFETY: the span is ours and nothing lives past the block's pages.
            unsafe {
                let span = (*page).span_bytes();
                if !(*page).is_zero && used < span {
                    crate::os::decommit((*page).start.add(used), span - used);
                }
            }
            page
        }
    };
    // SAFETY: a live span head (from the arena or the cache) whose block starts at
    // `start`, ours until the block is handed out.
    unsafe {
        let block = (*page).start;
        record_stack(&pcs[..depth], page, block, size, block_size);
        block
    }
}

/// Record a sampled block at `block`, served by the caller in a span of one block whose
/// release reaches [`span_released`] (a first-class heap's large span): captures the
/// stack from `entry`.
#[cold]
pub fn record_sampled(block: *mut u8, size: usize, block_size: usize, entry: stack::Entry) {
    let mut pcs = [0usize; table::MAX_DEPTH];
    let depth = stack::capture(entry, &mut pcs);
    // SAFETY: the block is the start of a live span of one block, not handed out yet.
    unsafe { record_stack(&pcs[..depth], span_of(block), block, size, block_size) };
}

/// The span descriptor of `block`, the start of a live span of one block (large or
/// huge): the descriptor its free finds.
fn span_of(block: *mut u8) -> *mut Page {
    let segment = crate::span::segment::segment_of(block);
    // SAFETY: a live block's window leads to its segment.
    unsafe { crate::span::segment::page_of(segment, block) }
}

/// Weights already computed at the current rate, by block size: the size in the high
/// half, the weight's `f32` bits in the low half (0: empty). A sample of a sized class,
/// or a big block of a size sampled before, then costs one load instead of an `exp` and
/// a division (the weight's precision, 1e-7, is far below the sampling noise).
static WEIGHTS: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];

/// `math::sample_weight(size, RATE)`, through `WEIGHTS`.
fn weight(size: usize) -> f64 {
    let Ok(key) = u32::try_from(size) else {
        return math::sample_weight(size, RATE.load(Ordering::Relaxed));
    };
    let entry = &WEIGHTS[(key.wrapping_mul(0x9E37_79B9) >> 26) as usize];
    let seen = entry.load(Ordering::Relaxed);
    if seen >> 32 == u64::from(key) && seen as u32 != 0 {
        return f64::from(f32::from_bits(seen as u32));
    }
    let rate = RATE.load(Ordering::SeqCst);
    let weight = math::sample_weight(size, rate) as f32;
    entry.store(
        u64::from(key) << 32 | u64::from(weight.to_bits()),
        Ordering::SeqCst,
    );
    if RATE.load(Ordering::SeqCst) != rate {
        // `start` changed the rate meanwhile; its `reset_weights` may have run before
        // the store above.
        entry.store(0, Ordering::SeqCst);
    }
    f64::from(weight)
}

/// Forget the weights (the rate may change: profiling starts).
pub fn reset_weights() {
    for entry in &WEIGHTS {
        entry.store(0, Ordering::SeqCst);
    }
}

/// Record a sample and note its live slot in its span (`Page::sample`) for the free.
///
/// # Safety
/// `page` is the span of one block holding `block`, not handed out yet.
unsafe fn record_stack(
    pcs: &[usize],
    page: *mut Page,
    block: *mut u8,
    size: usize,
    block_size: usize,
) {
    // Blocks made for ebb itself are not the program's: a profile being written, the
    // TLS `pthread_create` allocates for one of ebb's threads.
    let slot = if super::is_writer() || crate::os::spawning_here() {
        None
    } else {
        table::record(pcs, block as usize, size, weight(block_size))
    };
    // SAFETY: per the contract, the span is ours.
    unsafe { (*page).sample = slot.map_or(0, |slot| slot + 1) };
}

/// A span of one block goes back to the arena other than through `free` (a first-class
/// heap's large span released, destroyed, or drained after `delete`): its block, if a
/// sample, is no longer live.
///
/// # Safety
/// `page` is a live span descriptor held by the caller.
#[inline]
pub unsafe fn span_released(page: *mut Page) {
    // SAFETY: per the contract.
    unsafe {
        if (*page).reserved == 1 {
            freed(page, (*page).start);
        }
    }
}

/// A large span was freed whose block was a tracked sample of `size` bytes: keep it for
/// the next sample if it is one a sample of a sized class would take (see
/// `span_cache`). True if kept.
///
/// # Safety
/// `page` is the span of a large block being freed by its last user (owner `LARGE`,
/// `used` already 0).
pub unsafe fn keep_sampled_span(page: *mut Page, size: usize) -> bool {
    // SAFETY: per the contract.
    unsafe { span_cache::keep(page, size) }
}

/// Give every kept span back to the arena (profiling stops).
pub fn release_kept_spans() {
    span_cache::release_all();
}

/// Spans that served samples of blocks up to `MEDIUM_MAX` (1-8 slices), kept for the
/// next such samples while profiling runs. Without them every small sample took a span from the arena
/// (the span lock), gave back the pages past its block (`madvise`), and the next page
/// carved there faulted them in again: on `sweep` (a sample every few allocations of
/// 4-64 KiB blocks) that was 17,000 `madvise` calls and most of the profiler's CPU time.
/// A kept span's pages past its last block stay given back; only what its next block
/// leaves unused (if much) is given back again.
///
/// A kept span's owner is `FREE` (a double free of its old block is reported as such)
/// and its slices stay taken in the arena's bitmaps, so nothing else hands them out.
/// A try-lock: a thread that finds it taken uses the arena, so nobody waits on it.
mod span_cache {
    use crate::counters::COUNTERS;
    use crate::size_class::MEDIUM_MAX;
    use crate::span::arena;
    use crate::span::page::{Page, DRAINING, FREE, LARGE};
    use crate::span::segment::SLICE_SIZE;
    use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

    /// Spans kept at most (address space: at most 32 x 512 KiB).
    const KEPT: usize = 32;
    /// Slices of the biggest span kept (a sample of the biggest sized class).
    const MAX_SLICES: usize = MEDIUM_MAX.div_ceil(SLICE_SIZE);
    /// Pages past a reused span's new block left resident rather than given back.
    const SLACK_PAGES: usize = 4;
    /// Resident bytes the kept spans may hold between them (their last blocks' pages).
    const KEPT_RESIDENT: usize = 4 << 20;
    static RESIDENT_TOTAL: AtomicUsize = AtomicUsize::new(0);

    static LOCK: AtomicBool = AtomicBool::new(false);
    static COUNT: AtomicUsize = AtomicUsize::new(0);
    static SPANS: [AtomicPtr<Page>; KEPT] = [const { AtomicPtr::new(core::ptr::null_mut()) }; KEPT];
    /// Bytes from the span's start that may be resident (its last block's pages).
    static RESIDENT: [AtomicUsize; KEPT] = [const { AtomicUsize::new(0) }; KEPT];

    fn try_lock() -> bool {
        !LOCK.load(Ordering::Relaxed)
            && LOCK
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    fn unlock() {
        LOCK.store(false, Ordering::Release);
    }

    /// A kept span of `slices` slices for a block of `used` bytes (whole OS pages), set
    /// up as a large span of one block; None if none is kept (or another thread holds
    /// the lock).
    pub fn take(used: usize, slices: usize) -> Option<*mut Page> {
        if slices > MAX_SLICES || COUNT.load(Ordering::Relaxed) == 0 || !try_lock() {
            return None;
        }
        let n = COUNT.load(Ordering::Relaxed);
        // The best fit among the spans of this size: one whose resident pages the block
        // covers within the slack (nothing to give back), the most resident of those
        // (the fewest pages to fault in); else the least resident (the least to give
        // back). Taking any span of the size gave back the tail of a bigger block's
        // span at most samples of a workload of mixed sizes (mstress: one `madvise`
        // per sample, each a TLB shootdown across its threads).
        let limit = used + SLACK_PAGES * crate::os::page_size();
        let mut best: Option<(usize, usize)> = None;
        for i in (0..n).rev() {
            let page = SPANS[i].load(Ordering::Relaxed);
            // SAFETY: kept spans are live descriptors, ours while kept.
            if unsafe { (*page).slice_count } as usize != slices {
                continue;
            }
            let resident = RESIDENT[i].load(Ordering::Relaxed);
            let better = match best {
                None => true,
                Some((_, have)) if have > limit => resident < have,
                Some((_, have)) => resident <= limit && resident > have,
            };
            if better {
                best = Some((i, resident));
                if resident <= limit && resident >= used {
                    break; // the block covers it exactly: nothing better
                }
            }
        }
        let taken = best.map(|(i, resident)| {
            let page = SPANS[i].load(Ordering::Relaxed);
            RESIDENT_TOTAL.fetch_sub(resident, Ordering::Relaxed);
            SPANS[i].store(SPANS[n - 1].load(Ordering::Relaxed), Ordering::Relaxed);
            RESIDENT[i].store(RESIDENT[n - 1].load(Ordering::Relaxed), Ordering::Relaxed);
            COUNT.store(n - 1, Ordering::Relaxed);
            (page, resident)
        });
        unlock();
        let (page, resident) = taken?;
        // SAFETY: a kept span is ours alone (off every list, its slices taken).
        unsafe {
            if resident > limit {
                crate::os::decommit((*page).start.add(used), resident - used);
            }
            (*page).is_zero = false;
            (*page).set_used(1);
            (*page).owner.store(LARGE, Ordering::Release);
        }
        COUNTERS.large_allocs.fetch_add(1, Ordering::Relaxed);
        Some(page)
    }

    /// See `keep_sampled_span`.
    ///
    /// # Safety
    /// As `keep_sampled_span`.
    pub unsafe fn keep(page: *mut Page, size: usize) -> bool {
        // SAFETY: per the contract, the span is the caller's.
        if !super::super::is_active() || unsafe { (*page).slice_count } as usize > MAX_SLICES {
            return false;
        }
        if COUNT.load(Ordering::Relaxed) >= KEPT || !try_lock() {
            return false;
        }
        let n = COUNT.load(Ordering::Relaxed);
        // SAFETY: as above.
        let span = unsafe { (*page).span_bytes() };
        let resident = size
            .max(1)
            .next_multiple_of(crate::os::page_size())
            .min(span);
        let total = RESIDENT_TOTAL.load(Ordering::Relaxed);
        let kept = n < KEPT && total + resident <= KEPT_RESIDENT;
        if kept {
            // SAFETY: as above.
            unsafe { (*page).owner.store(FREE, Ordering::Release) };
            SPANS[n].store(page, Ordering::Relaxed);
            RESIDENT[n].store(resident, Ordering::Relaxed);
            RESIDENT_TOTAL.store(total + resident, Ordering::Relaxed);
            COUNT.store(n + 1, Ordering::Relaxed);
        }
        unlock();
        kept
    }

    pub fn release_all() {
        while COUNT.load(Ordering::Relaxed) != 0 {
            if !try_lock() {
                crate::os::yield_now();
                continue;
            }
            let n = COUNT.load(Ordering::Relaxed);
            let page = (n > 0).then(|| {
                COUNT.store(n - 1, Ordering::Relaxed);
                RESIDENT_TOTAL
                    .fetch_sub(RESIDENT[n - 1].load(Ordering::Relaxed), Ordering::Relaxed);
                SPANS[n - 1].load(Ordering::Relaxed)
            });
            unlock();
            if let Some(page) = page {
                // SAFETY: a kept span is ours; `free_span` takes it from a holder
                // (`DRAINING`), never from `FREE`.
                unsafe {
                    (*page).owner.store(DRAINING, Ordering::Relaxed);
                    arena::free_span(page, crate::os::now_ms());
                }
            }
        }
    }
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
    // SAFETY: a large or huge block just allocated, not handed out yet.
    unsafe { record_stack(&pcs[..depth], span_of(block), block, size, size) };
}

/// A large or huge block resized in place by `realloc` (its mapping moved, from `from`
/// to `to`, or not): counted as pprof counts a `realloc`, the old block freed and a
/// block of `new_size` allocated, so a buffer grown in place is in the profile at its
/// size now, not at the size it had when it was sampled.
#[cold]
pub fn resized(from: *mut u8, to: *mut u8, new_size: usize, entry: stack::Entry) {
    let page = span_of(to);
    // SAFETY: `to` is the caller's live big block; its span's descriptor (which moved
    // with its pages, `Page::sample` included) is the caller's too.
    unsafe {
        let slot = (*page).sample;
        if slot != 0 {
            (*page).sample = 0;
            table::freed(slot - 1, from as usize);
        }
    }
    big_allocated(to, new_size, entry);
}

/// Reset the big-block countdown (profiling starts).
pub fn reset_big() {
    BIG_LEFT.store(0, Ordering::Relaxed);
}

/// The block of a span of one block (large, huge, or a sampled one) is being freed:
/// the sample's requested size if it was a tracked sample. One load of the span's
/// descriptor (`Page::sample`) when it was not.
///
/// # Safety
/// `page` is the span of `block`, held by the caller (the block's last user).
#[inline]
pub unsafe fn freed(page: *mut Page, block: *mut u8) -> Option<usize> {
    // SAFETY: per the contract.
    let slot = unsafe { (*page).sample };
    if slot == 0 {
        return None;
    }
    // SAFETY: as above.
    unsafe { (*page).sample = 0 };
    table::freed(slot - 1, block as usize)
}

/// A huge block moved in `realloc` (remapped without a free; its span's descriptor
/// moved with its pages, `Page::sample` included).
#[inline]
pub fn moved(from: *mut u8, to: *mut u8) {
    if from != to {
        let page = span_of(to);
        // SAFETY: `to` is a live huge block, its descriptor is the caller's.
        let slot = unsafe { (*page).sample };
        if slot != 0 {
            table::moved(slot - 1, from as usize, to as usize);
        }
    }
}
