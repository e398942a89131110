//! Huge blocks: above `LARGE_MAX`, each block gets a mapping of its own, unmapped on
//! free and moved with `mremap` (no copy) on realloc.
//!
//! The mapping is a segment of kind `Huge`: it starts on a 32 MiB boundary with the
//! usual header in its first slice, so `free` finds it through the segment map like any
//! other block. The block starts at `huge_offset` (one slice, or the alignment if that
//! is larger) and the mapping is a whole number of slices; no other segment ever
//! shares a window with it, since every segment starts on a window of its own.
//!
//! A freed mapping of up to [`POOL_MAX_BYTES`] is kept for its purge delay (only while
//! huge requests have recently reused freed huge memory: `huge_pool::Demand`), its pages
//! touched (`huge_pool.rs`: at most that many bytes in [`POOL_SLOTS`] pieces, in
//! [`CACHE`] under its own lock), and the next huge request is built out of kept pages:
//! the smallest kept mapping that holds it, its rest kept (`take_fit`), else the largest
//! kept mapping grown in place by fresh pages right after it (`grow_kept`), else a fresh
//! mapping; kept pages move into what was added with `mremap` (`fill_from_kept`), only
//! what is still missing faulting in fresh. A program that replaces 5-25 MiB buffers at random
//! so faults in about its peak once, not every page of every block. A kept mapping
//! stays in the segment map with its descriptor `FREE`, so a stale `free` is still
//! reported.

use crate::counters::COUNTERS;
use crate::os;
use crate::span::deadline;
use crate::span::huge_pool::{Piece, Pool, POOL_MAX_BYTES, POOL_SLOTS};
use crate::span::lend;
use crate::span::move_budget;
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
            crate::span::arena::note_committed_peak();
        } else {
            COUNTERS
                .huge_used
                .fetch_sub((old - used) as u64, Ordering::Relaxed);
        }
    }
}

/// The freed huge memory kept for reuse (`huge_pool.rs`). Its lock guards the pool and
/// the segment map's windows of the pieces in it, and is never held with another or
/// across a system call.
pub static CACHE: Mutex<Pool> = Mutex::new(Pool::new());

/// A leftover smaller than this stays with the block that takes a kept piece: one slice,
/// so every leftover is kept apart. Touched pages left with a block are resident and
/// reused by nobody; 2 MiB of them per block (the earlier floor) was ~4 MiB of
/// `c-huge`'s peak (scale 0.5: 404.4 -> 400.8 MiB), and the slots the leftovers now
/// take are paid for by evicting the smallest piece when slots run short
/// (`Pool::evict`).
const MIN_LEFTOVER: usize = SLICE_SIZE;

/// The kept pieces as `(base, bytes)` (`base == 0`: an empty slot), copied under the
/// lock (stats and the retention report).
pub fn kept_mappings() -> [(usize, usize); POOL_SLOTS] {
    let pool = CACHE.lock();
    let mut out = [(0, 0); POOL_SLOTS];
    for (piece, out) in pool.pieces.iter().zip(out.iter_mut()) {
        *out = (piece.base, piece.len);
    }
    out
}

/// Forget the segment map's windows that start inside `[lo, hi)`, which is leaving
/// the pool (the window `lo` falls in, if `lo` is not on a boundary, belongs to the
/// block or piece before it). Called with the cache lock held.
fn forget_windows(lo: usize, hi: usize) {
    let from = lo.next_multiple_of(SEGMENT_SIZE);
    if hi > from {
        segment::unmap_windows(from, hi - from);
    }
}

/// Take the smallest kept segment piece at a base aligned to `align` that holds
/// `needed` bytes, with no system call: its head becomes the mapping (whose header the
/// caller sets up again) and the rest stays kept. Returns `(base, mapped)`.
fn take_fit(needed: usize, align: usize) -> Option<(*mut u8, usize)> {
    let mut pool = CACHE.lock();
    let index = pool.fit(needed, align)?;
    let len = pool.pieces[index].len;
    let take = if len - needed < MIN_LEFTOVER {
        len
    } else {
        needed
    };
    let piece = pool.take_head(index, take);
    forget_windows(piece.base + take, piece.end());
    drop(pool);
    COUNTERS
        .huge_cached
        .fetch_sub(take as u64, Ordering::Relaxed);
    Some((piece.base as *mut u8, take))
}

/// Build a mapping of `needed` bytes out of kept pages with no new mapping: the largest
/// kept segment piece at a base aligned to `align` grows in place, fresh pages mapped
/// right after it (the address space there is often free: a block's mapping starts a
/// 32 MiB window and rarely fills it), then the tails of other pieces move into the
/// part it gained (`fill_from_kept`). Returns `(base, mapped)`, or None with the piece
/// kept as before (given back instead if frees filled every slot meanwhile) if the
/// space after it is taken.
///
/// A request no single piece holds (a program that replaces 5-25 MiB buffers at random:
/// a third of them) otherwise costs a fresh reservation over twice its size, two trims
/// of it and a move of the piece into it before the other pieces' tails move in: four
/// system calls, each splitting or merging the kernel's mappings. Growing is one.
fn grow_kept(needed: usize, align: usize) -> Option<(*mut u8, usize)> {
    let piece = {
        let mut pool = CACHE.lock();
        let index = pool.largest(Some(align))?;
        let len = pool.pieces[index].len;
        if len >= needed {
            // `take_fit` takes such a piece; another thread took its place meanwhile.
            return None;
        }
        pool.take_head(index, len)
    };
    // The piece's windows still lead to its header (FREE): a stale `free` is reported.
    // Fresh pages right after it (a piece made of pages moved from several mappings is
    // several of the kernel's mappings, which `mremap` cannot grow in place).
    let gained = needed - piece.len;
    let grown = segment::in_map_range((piece.base + needed - 1) as *const u8)
        && !os::reserve_at(piece.end() as *mut u8, gained).is_null();
    if !grown {
        let mut pool = CACHE.lock();
        // Back where it was, its age kept (the purger's deadline for it stands), unless
        // frees filled every slot meanwhile: then it goes back to the OS.
        if pool.pieces.iter().any(|p| p.base == 0) {
            let merged = pool.insert(piece.base, piece.len, piece.freed_at);
            segment::map_windows(merged.base as *mut Segment, merged.base, merged.len);
            return None;
        }
        forget_windows(piece.base, piece.end());
        drop(pool);
        release(piece);
        return None;
    }
    let grown = piece.base as *mut u8;
    COUNTERS
        .huge_cached
        .fetch_sub(piece.len as u64, Ordering::Relaxed);
    COUNTERS
        .huge_bytes
        .fetch_add(gained as u64, Ordering::Relaxed);
    // SAFETY: the part gained is fresh address space of our mapping; what kept pages
    // do not fill, free runs of the arena may.
    unsafe {
        let (_, filled) = fill_from_kept(grown, piece.len, needed, None);
        fill_from_free_runs(grown, filled, needed);
    }
    Some((grown, needed))
}

/// Fill `[dest + from, dest + needed)`, fresh pages of the caller's mapping, with kept
/// pages moved there with `mremap` (no copy, no fault): with `anchor` (a new mapping
/// aligned to it, `from` its header's end), the largest kept segment piece at an aligned
/// base goes first, header and all; then the largest pieces (their tails) until the
/// range is full or nothing is kept. Returns whether any page moved in (the range then
/// no longer reads as zero) and the offset from which the range is still fresh.
///
/// # Safety
/// `[dest + from, dest + needed)` (and the header before it, with `anchor`) must be
/// fresh, unused pages of a mapping of the caller's.
unsafe fn fill_from_kept(
    dest: *mut u8,
    from: usize,
    needed: usize,
    anchor: Option<usize>,
) -> (bool, usize) {
    // Any kept page moved in is one fault fewer and one kept page fewer: stopping
    // short while pages are kept would fault in fresh ones beside them (peak RSS).
    const MIN_MOVE: usize = SLICE_SIZE;
    if !move_budget::allowed() {
        return (false, from);
    }
    // (source, bytes, offset in the mapping)
    let mut moves = [(0usize, 0usize, 0usize); POOL_SLOTS];
    let mut count = 0;
    let mut filled = from;
    {
        let mut pool = CACHE.lock();
        if let Some(index) = anchor.and_then(|align| pool.largest(Some(align))) {
            let len = pool.pieces[index].len.min(needed);
            let piece = pool.take_head(index, len);
            forget_windows(piece.base, piece.end());
            moves[0] = (piece.base, len, 0);
            count = 1;
            filled = len;
        }
        while needed - filled >= MIN_MOVE && count < POOL_SLOTS {
            let Some(index) = pool.largest(None) else {
                break;
            };
            let len = pool.pieces[index].len.min(needed - filled);
            let piece = pool.take_tail(index, len);
            forget_windows(piece.end() - len, piece.end());
            moves[count] = (piece.end() - len, len, filled);
            count += 1;
            filled += len;
        }
    }
    let mut moved = false;
    for &(source, len, offset) in &moves[..count] {
        COUNTERS
            .huge_cached
            .fetch_sub(len as u64, Ordering::Relaxed);
        COUNTERS.huge_bytes.fetch_sub(len as u64, Ordering::Relaxed);
        // SAFETY: the source left the pool and is ours; the destination is part of
        // the caller's fresh reservation, unused.
        unsafe {
            let to = dest.add(offset);
            if !os::remap(source as *mut u8, len, len, to).is_null() {
                moved = true;
                COUNTERS.kept_moved.fetch_add(len as u64, Ordering::Relaxed);
                continue;
            }
            // The pages stay where they were: give them back. Kernels before 6.17 move
            // no range that spans two VMAs and may have unmapped the destination
            // before failing, later ones may have moved part of it: map fresh pages
            // over the whole destination.
            os::release(source as *mut u8, len);
            let _ = os::remap_fresh(to, len);
        }
    }
    move_budget::moved(count as u32);
    (moved, filled)
}

/// Fill a large block's span `[start, start + bytes)`, whose slices were all
/// uncommitted, with kept pages (the largest pieces' tails, moved with `mremap`), so
/// the block faults in nothing while freed huge memory is kept beside it. Returns
/// whether any page moved in (the span then no longer reads as zero).
///
/// # Safety
/// The span must be the caller's, in a normal segment, whole slices, uncommitted and
/// unused.
pub unsafe fn fill_span_from_kept(start: *mut u8, bytes: usize) -> bool {
    // SAFETY: per the contract the range is fresh, unused memory of the caller's.
    unsafe { fill_from_kept(start, 0, bytes, None).0 }
}

/// Fill `[dest + from, dest + needed)`, fresh pages of the caller's mapping, with the
/// pages of the arena's longest free committed runs (`lend.rs`): memory the arena
/// holds free becomes the block's instead of staying beside it. Returns whether any
/// page moved in; what is not filled stays fresh.
///
/// # Safety
/// `[dest + from, dest + needed)` must be fresh, unused pages of a mapping of the
/// caller's, `from` and `needed` whole slices.
unsafe fn fill_from_free_runs(dest: *mut u8, from: usize, needed: usize) -> bool {
    if needed.saturating_sub(from) < lend::MIN_RUN_SLICES * SLICE_SIZE || !move_budget::allowed() {
        return false;
    }
    let runs = lend::take(needed - from);
    if runs.as_slice().is_empty() {
        return false;
    }
    let mut moved = [false; lend::MAX_RUNS];
    let mut offset = from;
    for (run, done) in runs.as_slice().iter().zip(&mut moved) {
        // SAFETY: the run is hidden from allocation, so its pages are nobody's; the
        // destination is fresh address space of the caller's mapping, inside
        // `[from, needed)` (the runs hold at most `needed - from` bytes).
        *done = unsafe { os::move_pages(run.base(), dest.add(offset), run.bytes()) };
        offset += run.bytes();
    }
    debug_assert!(offset <= needed);
    move_budget::moved(runs.as_slice().len() as u32);
    lend::give_back(&runs, &moved) != 0
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
/// A mapping some pages were moved into (`fill_from_kept`, `realloc`'s large block
/// grown into a huge one) is several of the kernel's mappings, and `mremap` resizes
/// none of those: it grows in place by fresh pages mapped right after it, and moves at
/// its own size into the fresh reservation (Linux 6.17 and later move a range spanning
/// several mappings; before, the caller copies). Without that, the C `realloc`
/// workload's buffer, whose first 16 MiB moved in from its large span, was copied at
/// 32 and at 64 MiB.
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
        if new_base.is_null()
            && segment::in_map_range(base.wrapping_add(needed - 1))
            && !os::reserve_at(base.add(mapped), needed - mapped).is_null()
        {
            new_base = base;
        }
        if new_base.is_null() {
            let dest = os::reserve_aligned(needed, align);
            if dest.is_null() || !segment::in_map_range(dest.wrapping_add(needed - 1)) {
                if !dest.is_null() {
                    os::release(dest, needed);
                }
                return null_mut();
            }
            if os::remap(base, mapped, needed, dest).is_null()
                && os::remap(base, mapped, mapped, dest).is_null()
            {
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

/// A huge request (a new block, or one grown) was made; `served`: kept pages went into
/// it. Records the sign of reuse that decides whether freed mappings are kept.
fn note_request(served: bool) {
    let now = deadline::coarse_now_ms();
    let delay = crate::options::get().purge_delay_ms;
    CACHE.lock().demand.requested(now, delay, served);
}

/// Keep the mapping of segment `seg` for reuse. False if it is too big, or if no huge
/// request has reused freed huge memory lately (`huge_pool::Demand`).
fn keep(seg: *mut Segment, mapped: usize) -> bool {
    let now = deadline::coarse_now_ms();
    let mut evicted = [Piece::EMPTY; POOL_SLOTS];
    {
        let mut pool = CACHE.lock();
        pool.demand.freed(now);
        if mapped > POOL_MAX_BYTES || !pool.demand.keeps(now) {
            pool.demand.released(now);
            return false;
        }
        for out in evicted.iter_mut() {
            let Some(piece) = pool.evict(1, POOL_MAX_BYTES, mapped) else {
                break;
            };
            forget_windows(piece.base, piece.end());
            *out = piece;
        }
        let merged = pool.insert(seg as usize, mapped, now);
        // The windows of the merged piece lead to its header, whose descriptor is FREE.
        segment::map_windows(merged.base as *mut Segment, merged.base, merged.len);
    }
    COUNTERS
        .huge_cached
        .fetch_add(mapped as u64, Ordering::Relaxed);
    for piece in evicted.into_iter().filter(|p| p.base != 0) {
        release(piece);
    }
    // Due after its hold (`Demand::hold`), a retention period at the least.
    deadline::schedule_retention_scan(now);
    true
}

/// Unmap a piece taken out of the pool (its windows already forgotten).
fn release(piece: Piece) {
    COUNTERS
        .huge_cached
        .fetch_sub(piece.len as u64, Ordering::Relaxed);
    COUNTERS
        .huge_bytes
        .fetch_sub(piece.len as u64, Ordering::Relaxed);
    // SAFETY: the piece left the pool: nobody uses it.
    unsafe { os::release(piece.base as *mut u8, piece.len) };
}

/// Unmap kept pieces whose purge delay has passed (all of them if `force`). Returns
/// when the next one becomes due (`u64::MAX`: none kept).
pub fn purge_cache(now: u64, delay: u64, force: bool) -> u64 {
    if COUNTERS.huge_cached.load(Ordering::Relaxed) == 0 {
        return u64::MAX;
    }
    let mut due = [Piece::EMPTY; POOL_SLOTS];
    let next_due = {
        let mut pool = CACHE.lock();
        for out in due.iter_mut() {
            let Some(piece) = pool.take_due(now, delay, force) else {
                break;
            };
            forget_windows(piece.base, piece.end());
            *out = piece;
        }
        pool.next_due(delay)
    };
    for piece in due.into_iter().filter(|p| p.base != 0) {
        COUNTERS
            .purged
            .fetch_add(piece.len as u64, Ordering::Relaxed);
        COUNTERS.purge_calls.fetch_add(1, Ordering::Relaxed);
        release(piece);
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
    let align = align.max(SEGMENT_SIZE);
    if COUNTERS.huge_cached.load(Ordering::Relaxed) != 0 {
        if let Some((base, kept)) = take_fit(mapped, align) {
            note_request(true);
            COUNTERS.huge_allocs.fetch_add(1, Ordering::Relaxed);
            // SAFETY: a kept piece taken out of the pool is ours.
            unsafe {
                let block = install(base, kept, offset, false);
                set_used_bytes(base as *mut Segment, size);
                return block;
            }
        }
    }
    if COUNTERS.huge_cached.load(Ordering::Relaxed) != 0 {
        if let Some((base, mapped)) = grow_kept(mapped, align) {
            note_request(true);
            COUNTERS.huge_allocs.fetch_add(1, Ordering::Relaxed);
            // SAFETY: a kept piece grown in place, ours.
            unsafe {
                let block = install(base, mapped, offset, false);
                set_used_bytes(base as *mut Segment, size);
                return block;
            }
        }
    }
    let mut base = os::reserve_aligned(mapped, align);
    if base.is_null() && COUNTERS.huge_cached.load(Ordering::Relaxed) != 0 {
        // Kept mappings hold address space the OS may be short of: give them back
        // and try once more.
        purge_cache(os::now_ms(), 0, true);
        base = os::reserve_aligned(mapped, align);
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
    // SAFETY: as above, and 32 MiB aligned (dense growth's rule for huge blocks).
    unsafe { crate::span::large_pages::before_huge_block(base, mapped) };
    COUNTERS.huge_allocs.fetch_add(1, Ordering::Relaxed);
    COUNTERS
        .huge_bytes
        .fetch_add(mapped as u64, Ordering::Relaxed);
    // SAFETY: a fresh reservation, ours; kept pages moved into it are ours too.
    unsafe {
        let (kept_moved, filled) = if COUNTERS.huge_cached.load(Ordering::Relaxed) != 0 {
            fill_from_kept(base, segment::HEADER_BYTES, mapped, Some(align))
        } else {
            (false, segment::HEADER_BYTES)
        };
        // Only kept pages are a sign of huge reuse (`huge_pool::Demand`).
        note_request(kept_moved);
        let runs_moved = fill_from_free_runs(base, filled, mapped);
        let block = install(base, mapped, offset, !(kept_moved || runs_moved));
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
        // The part added is fresh: kept pages, if any, fault in nothing, nor do free
        // runs of the arena.
        let (moved, filled) = if COUNTERS.huge_cached.load(Ordering::Relaxed) != 0 {
            fill_from_kept(new_base, mapped, needed, None)
        } else {
            (false, mapped)
        };
        note_request(moved);
        fill_from_free_runs(new_base, filled, needed);
        let block = install(new_base, needed, offset, false);
        // The header moved with the pages, `huge_used` included.
        set_used_bytes(new_base as *mut Segment, new_size);
        block
    }
}
