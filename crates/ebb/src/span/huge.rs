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
//! them, in [`CACHE`] under its own lock) and handed to the next huge request, fitted
//! to it (`take_cached`: the smallest that holds it, its tail given back if more than a
//! quarter would be spare, else the largest, grown with `mremap`), until its purge delay
//! passes and the purger unmaps it: a program that allocates and frees 5-25 MiB buffers
//! in a loop would otherwise pay `mmap`, `munmap` and the page faults of fresh memory
//! every time. A kept mapping stays
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

/// Take the kept mapping that best serves a request for `needed` bytes at a base
/// aligned to `align`, fitted to it: the smallest one that holds `needed` (its tail given
/// back if more than a quarter would be spare), else the largest one, grown (its pages
/// move with `mremap`; only the part added is fresh memory). Returns `(base, mapped)`.
///
/// Any kept mapping is worth taking: its pages are already faulted in, and faulting
/// fresh pages is what a huge request costs (a program replacing 5-25 MiB buffers at
/// random otherwise mostly misses the cache and faults every page of every block).
fn take_cached(needed: usize, align: usize) -> Option<(*mut u8, usize)> {
    let taken = {
        let mut cache = CACHE.lock();
        let index = best_fit(&cache[..], needed, align)?;
        core::mem::replace(&mut cache[index], CachedMapping::EMPTY)
    };
    COUNTERS
        .huge_cached
        .fetch_sub(taken.mapped as u64, Ordering::Relaxed);
    let base = taken.base as *mut u8;
    if taken.mapped >= needed {
        if taken.mapped - needed > needed / 4 {
            // SAFETY: the mapping is out of the cache and unused; `needed` is whole slices.
            unsafe { shrink_mapping(base, taken.mapped, needed) };
            return Some((base, needed));
        }
        return Some((base, taken.mapped));
    }
    // SAFETY: the mapping is out of the cache and unused.
    let grown = unsafe { grow_mapping(base, taken.mapped, needed, align) };
    if grown.is_null() {
        unmap(taken.base, taken.mapped);
        return None;
    }
    Some((grown, needed))
}

/// Index of the kept mapping `take_cached` takes for `needed` bytes at alignment
/// `align`: the smallest that holds `needed`, else the largest; None if none is kept.
fn best_fit(cache: &[CachedMapping], needed: usize, align: usize) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (index, c) in cache.iter().enumerate() {
        if c.base == 0 || c.base % align != 0 {
            continue;
        }
        let better = match best {
            None => true,
            Some(b) => {
                let held = cache[b].mapped;
                if c.mapped >= needed {
                    held < needed || c.mapped < held
                } else {
                    held < needed && c.mapped > held
                }
            }
        };
        if better {
            best = Some(index);
        }
    }
    best
}

/// Give back the tail of mapping `[base, base + mapped)` past `needed` bytes and forget
/// the windows it no longer reaches (the window of its new end stays its own).
///
/// # Safety
/// The mapping must be a huge mapping of the caller's; `needed < mapped`, whole slices.
unsafe fn shrink_mapping(base: *mut u8, mapped: usize, needed: usize) {
    let kept_end = (base as usize + needed).next_multiple_of(SEGMENT_SIZE);
    let old_end = base as usize + mapped;
    if old_end > kept_end {
        segment::unmap_windows(kept_end, old_end - kept_end);
    }
    // SAFETY: per the contract the tail is ours and unused.
    unsafe { os::release(base.add(needed), mapped - needed) };
    COUNTERS
        .huge_bytes
        .fetch_sub((mapped - needed) as u64, Ordering::Relaxed);
}

/// Grow mapping `[base, base + mapped)` to `needed` bytes: in place if the address space
/// after it is free, else by moving its pages to a fresh reservation aligned to `align`
/// (the old windows are then forgotten; the caller maps the new ones with `install`).
/// Returns the new base, or null with the mapping unchanged.
///
/// # Safety
/// The mapping must be a huge mapping of the caller's, `needed > mapped`.
unsafe fn grow_mapping(base: *mut u8, mapped: usize, needed: usize, align: usize) -> *mut u8 {
    if !os::HAS_REMAP {
        return null_mut();
    }
    // SAFETY: per the contract the mapping is ours; `dest` is a fresh reservation.
    unsafe {
        let mut new_base = os::remap(base, mapped, needed, null_mut());
        if new_base.is_null() {
            let dest = os::reserve_aligned(needed, align);
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
        new_base
    }
}

/// Keep the mapping of segment `seg` for reuse. False if it is too big.
fn keep(seg: *mut Segment, mapped: usize) -> bool {
    if mapped > CACHE_MAX_MAPPING {
        return false;
    }
    let now = deadline::coarse_now_ms();
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
    unmap(kept.base, kept.mapped);
}

/// Unmap a huge mapping nobody uses and that is not in the cache.
fn unmap(base: usize, mapped: usize) {
    segment::unmap_windows(base, mapped);
    COUNTERS
        .huge_bytes
        .fetch_sub(mapped as u64, Ordering::Relaxed);
    // SAFETY: the mapping was freed and is not in the cache: nobody uses it.
    unsafe { os::release(base as *mut u8, mapped) };
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
            // Shrink in place.
            shrink_mapping(base, mapped, needed);
            (*seg).mapped = needed;
            (*seg).huge_size = needed - offset;
            (*page).block_size.store(needed - offset, Ordering::Relaxed);
            set_used_bytes(seg, new_size);
            return base.add(offset);
        }
        // Grow in place if the address space after us is free, else move the pages.
        let new_base = grow_mapping(base, mapped, needed, offset.max(SEGMENT_SIZE));
        if new_base.is_null() {
            return null_mut(); // the caller copies
        }
        let block = install(new_base, needed, offset, false);
        // The header moved with the pages, `huge_used` included.
        set_used_bytes(new_base as *mut Segment, new_size);
        block
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(base: usize, mapped: usize) -> CachedMapping {
        CachedMapping {
            base,
            mapped,
            freed_at: 0,
        }
    }

    #[test]
    fn best_fit_takes_the_smallest_that_holds_else_the_largest() {
        const M: usize = 1 << 20;
        let w = SEGMENT_SIZE;
        let cache = [
            kept(w, 40 * M),
            CachedMapping::EMPTY,
            kept(3 * w, 24 * M),
            kept(5 * w, 18 * M),
        ];
        assert_eq!(best_fit(&cache, 20 * M, w), Some(2));
        assert_eq!(best_fit(&cache, 18 * M, w), Some(3));
        assert_eq!(best_fit(&cache, 30 * M, w), Some(0));
        // None holds 50 MiB: the largest is grown.
        assert_eq!(best_fit(&cache, 50 * M, w), Some(0));
        // Only bases aligned to the request's alignment count.
        assert_eq!(best_fit(&cache, 20 * M, 2 * w), None);
        assert_eq!(best_fit(&[CachedMapping::EMPTY; 2], M, w), None);
    }
}
