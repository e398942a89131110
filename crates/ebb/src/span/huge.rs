//! Huge blocks: above `LARGE_MAX`, each block gets a mapping of its own, unmapped on
//! free and moved with `mremap` (no copy) on realloc.
//!
//! The mapping is a segment of kind `Huge`: it starts on a 32 MiB boundary with the
//! usual header in its first slice, so `free` finds it through the segment map like any
//! other block. The block starts at `huge_offset` (one slice, or the alignment if that
//! is larger) and the mapping is a whole number of slices; no other segment ever
//! shares a window with it, since every segment starts on a window of its own.
//!
//! A freed mapping of up to [`CACHE_MAX_MAPPING`] is kept (at most [`CACHE_SLOTS`] of
//! them, in [`CACHE`] under its own lock) and handed to the next huge request
//! that fits it with little to spare, until its purge delay passes and the purger unmaps
//! it: a program that allocates and frees a 32 MiB buffer in a loop would otherwise pay
//! `mmap`, `munmap` and the page faults of fresh memory every time. A kept mapping stays
//! in the segment map with its descriptor `FREE`, so a stale `free` is still reported.

use crate::counters::COUNTERS;
use crate::os;
use crate::span::deadline;
use crate::span::page::{Page, FREE, HUGE};
use crate::span::segment::{
    self, Segment, SegmentKind, SEGMENT_SIZE, SLICES_PER_SEGMENT, SLICE_SHIFT, SLICE_SIZE,
};
use crate::sync::Mutex;
use core::ptr::null_mut;
use core::sync::atomic::Ordering;

/// Round a huge request up to whole slices, or None on overflow. (Not to whole 32 MiB
/// windows: under `ulimit -v` every mapped byte counts, and the window's tail is left
/// to other mappings, never to another segment, since segments start on windows.)
fn mapping_size(offset: usize, size: usize) -> Option<usize> {
    let total = offset.checked_add(size)?.checked_add(SLICE_SIZE - 1)? & !(SLICE_SIZE - 1);
    (total <= isize::MAX as usize).then_some(total)
}

/// Offset of the block in its mapping for alignment `align`.
fn block_offset(align: usize) -> usize {
    align.max(segment::HEADER_BYTES)
}

/// Record that the block now holds `size` bytes: `huge_used` (what stats call committed
/// and allocated) counts whole OS pages of the request plus the header page, not the
/// whole mapping, whose untouched tail costs address space only.
///
/// # Safety
/// `seg` must be a live huge segment owned by the caller.
unsafe fn set_used_bytes(seg: *mut Segment, size: usize) {
    let page = os::page_size();
    let used = (size.div_ceil(page) + 1) * page;
    // SAFETY: per the contract.
    unsafe {
        let old = (*seg).huge_used;
        (*seg).huge_used = used;
        if used >= old {
            COUNTERS
                .huge_used
                .fetch_add((used - old) as u64, Ordering::Relaxed);
        } else {
            COUNTERS
                .huge_used
                .fetch_sub((old - used) as u64, Ordering::Relaxed);
        }
    }
}

/// Freed mappings kept for reuse at most.
pub const CACHE_SLOTS: usize = 4;
/// The largest mapping kept for reuse (a 32 MiB block takes a 64 MiB mapping): at most
/// 256 MiB is kept in all, and only for the purge delay.
pub const CACHE_MAX_MAPPING: usize = 64 << 20;

/// A freed huge mapping kept for reuse (`base == 0`: an empty slot).
#[derive(Clone, Copy)]
pub struct CachedMapping {
    base: usize,
    mapped: usize,
    freed_at: u64,
}

impl CachedMapping {
    pub const EMPTY: CachedMapping = CachedMapping {
        base: 0,
        mapped: 0,
        freed_at: 0,
    };
}

/// The kept mappings. Its lock guards nothing else and is never held with another.
pub static CACHE: Mutex<[CachedMapping; CACHE_SLOTS]> =
    Mutex::new([CachedMapping::EMPTY; CACHE_SLOTS]);

/// The kept mappings as `(base, mapped bytes)` (`base == 0`: an empty slot), copied
/// under the cache lock (stats and the retention report).
pub fn kept_mappings() -> [(usize, usize); CACHE_SLOTS] {
    let cache = CACHE.lock();
    let mut out = [(0, 0); CACHE_SLOTS];
    for (slot, out) in cache.iter().zip(out.iter_mut()) {
        *out = (slot.base, slot.mapped);
    }
    out
}

/// Take a kept mapping of at least `needed` bytes (and at most a quarter more) whose
/// base is aligned to `align`. Returns `(base, mapped)`.
fn take_cached(needed: usize, align: usize) -> Option<(*mut u8, usize)> {
    let mut cache = CACHE.lock();
    let slot = cache.iter_mut().find(|c| {
        c.base != 0 && c.mapped >= needed && c.mapped - needed <= needed / 4 && c.base % align == 0
    })?;
    let taken = (slot.base as *mut u8, slot.mapped);
    *slot = CachedMapping::EMPTY;
    COUNTERS
        .huge_cached
        .fetch_sub(taken.1 as u64, Ordering::Relaxed);
    Some(taken)
}

/// Keep the mapping of segment `seg` for reuse. False if it is too big.
fn keep(seg: *mut Segment, mapped: usize) -> bool {
    if mapped > CACHE_MAX_MAPPING {
        return false;
    }
    let now = os::now_ms();
    let evicted = {
        let mut cache = CACHE.lock();
        // An empty slot, else the oldest one.
        let slot = cache
            .iter_mut()
            .min_by_key(|c| if c.base == 0 { 0 } else { c.freed_at + 1 })
            .expect("CACHE_SLOTS > 0");
        let evicted = *slot;
        *slot = CachedMapping {
            base: seg as usize,
            mapped,
            freed_at: now,
        };
        evicted
    };
    COUNTERS
        .huge_cached
        .fetch_add(mapped as u64, Ordering::Relaxed);
    if evicted.base != 0 {
        release(evicted);
    }
    deadline::schedule_purge(now);
    true
}

/// Unmap a kept mapping taken out of the cache.
fn release(kept: CachedMapping) {
    COUNTERS
        .huge_cached
        .fetch_sub(kept.mapped as u64, Ordering::Relaxed);
    segment::unmap_windows(kept.base, kept.mapped);
    COUNTERS
        .huge_bytes
        .fetch_sub(kept.mapped as u64, Ordering::Relaxed);
    // SAFETY: the mapping was freed and taken out of the cache: nobody uses it.
    unsafe { os::release(kept.base as *mut u8, kept.mapped) };
}

/// Unmap kept mappings whose purge delay has passed (all of them if `force`). Returns
/// when the next one becomes due (`u64::MAX`: none kept).
pub fn purge_cache(now: u64, delay: u64, force: bool) -> u64 {
    if COUNTERS.huge_cached.load(Ordering::Relaxed) == 0 {
        return u64::MAX;
    }
    let mut due = [CachedMapping::EMPTY; CACHE_SLOTS];
    let mut next_due = u64::MAX;
    {
        let mut cache = CACHE.lock();
        for (slot, out) in cache.iter_mut().zip(due.iter_mut()) {
            if slot.base == 0 {
                continue;
            }
            if force || slot.freed_at + delay <= now {
                *out = *slot;
                *slot = CachedMapping::EMPTY;
            } else {
                next_due = next_due.min(slot.freed_at + delay);
            }
        }
    }
    for kept in due.into_iter().filter(|c| c.base != 0) {
        COUNTERS
            .purged
            .fetch_add(kept.mapped as u64, Ordering::Relaxed);
        COUNTERS.purge_calls.fetch_add(1, Ordering::Relaxed);
        release(kept);
    }
    next_due
}

/// Set up the header and descriptor of a huge mapping at `base` and publish it.
/// `is_zero`: the block's memory reads as zero (a fresh mapping).
///
/// # Safety
/// `[base, base + mapped)` must be a fresh reservation (or one just moved here, or a
/// kept one taken out of the cache).
unsafe fn install(base: *mut u8, mapped: usize, offset: usize, is_zero: bool) -> *mut u8 {
    let seg = base as *mut Segment;
    let block = base.wrapping_add(offset);
    // SAFETY: per the contract the header slices are ours and zero or ours from before.
    unsafe {
        (*seg).kind = SegmentKind::Huge;
        (*seg).mapped = mapped;
        (*seg).huge_offset = offset;
        (*seg).huge_size = mapped - offset;
        // The block's first slice leads to its descriptor, every other slice to
        // pages[0] (the block's own when it is 32 MiB-aligned). Reset first: a kept
        // mapping may have had its block elsewhere.
        let index = (block as usize >> SLICE_SHIFT) & (SLICES_PER_SEGMENT - 1);
        let page = (*seg).pages.as_mut_ptr().add(index);
        (*seg).reset_span_pages();
        (*seg).set_span_page(index, 1, page);
        (*page).start = block;
        (*page).block_size.store(mapped - offset, Ordering::Relaxed);
        (*page).reserved = 1;
        (*page).is_zero = is_zero;
        (*page).used.store(1, Ordering::Relaxed);
        (*page).owner.store(HUGE, Ordering::Release);
    }
    segment::map_windows(seg, base as usize, mapped);
    block
}

/// Allocate a huge block of `size` bytes aligned to `align`. Null on failure.
pub fn alloc(size: usize, align: usize) -> *mut u8 {
    let offset = block_offset(align);
    let Some(mapped) = mapping_size(offset, size) else {
        return null_mut();
    };
    if let Some((base, kept)) = take_cached(mapped, align.max(SEGMENT_SIZE)) {
        COUNTERS.huge_allocs.fetch_add(1, Ordering::Relaxed);
        // SAFETY: a kept mapping taken out of the cache is ours.
        unsafe {
            let block = install(base, kept, offset, false);
            set_used_bytes(base as *mut Segment, size);
            return block;
        }
    }
    let mut base = os::reserve_aligned(mapped, align.max(SEGMENT_SIZE));
    if base.is_null() && COUNTERS.huge_cached.load(Ordering::Relaxed) != 0 {
        // Kept mappings hold address space the OS may be short of: give them back
        // and try once more.
        purge_cache(os::now_ms(), 0, true);
        base = os::reserve_aligned(mapped, align.max(SEGMENT_SIZE));
    }
    if base.is_null() {
        return null_mut();
    }
    if !segment::in_map_range(base.wrapping_add(mapped - 1)) {
        // SAFETY: just reserved, unused.
        unsafe { os::release(base, mapped) };
        return null_mut();
    }
    // SAFETY: just reserved and ours (a no-op unless `EBB_LARGE_PAGES`; a move by
    // `resize` keeps the advice, which belongs to the pages' mapping).
    unsafe { crate::span::large_pages::advise(base, mapped) };
    COUNTERS.huge_allocs.fetch_add(1, Ordering::Relaxed);
    COUNTERS
        .huge_bytes
        .fetch_add(mapped as u64, Ordering::Relaxed);
    // SAFETY: fresh reservation.
    unsafe {
        let block = install(base, mapped, offset, true);
        set_used_bytes(base as *mut Segment, size);
        block
    }
}

/// The huge segment of descriptor `page`.
fn segment_of(page: *mut Page) -> *mut Segment {
    let seg = segment::segment_of_page(page);
    // SAFETY: huge descriptors live in their segment's header.
    debug_assert_eq!(unsafe { (*seg).kind }, SegmentKind::Huge);
    seg
}

/// Free a huge block: keep its mapping for reuse, or unmap it. (The caller runs
/// `process::after_slow_path`: without a background purger, that is where an expired
/// kept mapping goes.)
///
/// # Safety
/// `page` must be the descriptor of a live huge block nobody uses any more.
pub unsafe fn free(page: *mut Page) {
    let seg = segment_of(page);
    // SAFETY: per the contract.
    unsafe {
        let mapped = (*seg).mapped;
        set_used_bytes(seg, 0);
        COUNTERS
            .huge_used
            .fetch_sub(os::page_size() as u64, Ordering::Relaxed);
        // The header page is no longer counted either (a reuse counts it again).
        (*seg).huge_used = 0;
        (*page).set_used(0);
        (*page).owner.store(FREE, Ordering::Release);
        if keep(seg, mapped) {
            COUNTERS.huge_frees.fetch_add(1, Ordering::Relaxed);
            return;
        }
        segment::unmap_windows(seg as usize, mapped);
        COUNTERS.huge_frees.fetch_add(1, Ordering::Relaxed);
        COUNTERS
            .huge_bytes
            .fetch_sub(mapped as u64, Ordering::Relaxed);
        os::release(seg as *mut u8, mapped);
    }
}

/// Usable bytes of a huge block.
///
/// # Safety
/// `page` must be the descriptor of a live huge block.
pub unsafe fn usable_size(page: *mut Page) -> usize {
    // SAFETY: per the contract.
    unsafe { (*segment_of(page)).huge_size }
}

/// Resize a huge block to `new_size` without copying: in place when it fits the
/// mapping (shrinking unmaps whole windows), else by moving the pages with `mremap`
/// to a fresh aligned reservation. Returns the block's address or null (the block is
/// then unchanged).
///
/// # Safety
/// `page` must be the descriptor of a live huge block owned by the caller.
pub unsafe fn resize(page: *mut Page, new_size: usize) -> *mut u8 {
    let seg = segment_of(page);
    // SAFETY: per the contract.
    unsafe {
        let (mapped, offset) = ((*seg).mapped, (*seg).huge_offset);
        let base = seg as *mut u8;
        let Some(needed) = mapping_size(offset, new_size) else {
            return null_mut();
        };
        if needed == mapped {
            set_used_bytes(seg, new_size);
            return base.add(offset);
        }
        if needed < mapped {
            // Shrink in place: give back the tail, and forget the windows it no longer
            // reaches (the window of its new end stays ours).
            let kept_end = (base as usize + needed).next_multiple_of(SEGMENT_SIZE);
            let old_end = base as usize + mapped;
            if old_end > kept_end {
                segment::unmap_windows(kept_end, old_end - kept_end);
            }
            os::release(base.add(needed), mapped - needed);
            COUNTERS
                .huge_bytes
                .fetch_sub((mapped - needed) as u64, Ordering::Relaxed);
            (*seg).mapped = needed;
            (*seg).huge_size = needed - offset;
            (*page).block_size.store(needed - offset, Ordering::Relaxed);
            set_used_bytes(seg, new_size);
            return base.add(offset);
        }
        if !os::HAS_REMAP {
            return null_mut(); // the caller copies
        }
        // Grow in place if the address space after us is free, else move the pages.
        let mut new_base = os::remap(base, mapped, needed, null_mut());
        if new_base.is_null() {
            let dest = os::reserve_aligned(needed, offset.max(SEGMENT_SIZE));
            if dest.is_null() || !segment::in_map_range(dest.wrapping_add(needed - 1)) {
                if !dest.is_null() {
                    os::release(dest, needed);
                }
                return null_mut();
            }
            if os::remap(base, mapped, needed, dest).is_null() {
                os::release(dest, needed);
                return null_mut();
            }
            segment::unmap_windows(base as usize, mapped);
            new_base = dest;
        }
        COUNTERS
            .huge_bytes
            .fetch_add((needed - mapped) as u64, Ordering::Relaxed);
        let block = install(new_base, needed, offset, false);
        // The header moved with the pages, `huge_used` included.
        set_used_bytes(new_base as *mut Segment, new_size);
        block
    }
}
