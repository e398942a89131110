//! The arena: spans (runs of slices) handed out of segments and given back to them.
//!
//! Heaps get the span of a page here and give it back when the page empties, so a
//! slice freed by one thread is reused by any thread; large blocks are spans of their
//! own. This layer knows pages only as span descriptors: who owns a page (a heap, the
//! abandoned lists) is decided above it, and a span comes back here only when its
//! owner has made sure nobody else can reach it.
//!
//! One lock, [`SPAN_LOCK`], guards the slice bitmaps and `free_count` of every segment
//! and the descriptors of free slices. It is taken only on slow paths (a page runs
//! out, a page empties, a large block), never by malloc or free of a small block, and
//! is never held across a system call that can take long or a call that can allocate.
//! No other lock is taken while it is held.

use crate::counters::COUNTERS;
use crate::os::{self, DECOMMIT_ZEROES};
use crate::protocol;
use crate::span::bitmap::Bitmap512;
use crate::span::deadline;
use crate::span::page::{Page, ABANDONED, FREE, HUGE, LARGE};
use crate::span::retain::Reuse;
use crate::span::segment::{
    segment_of_page, Segment, HEADER_BYTES, HEADER_SLICES, SEGMENT_SIZE, SLICES_PER_SEGMENT,
    SLICE_SIZE,
};
use crate::sync::Mutex;
use core::ptr::null_mut;
use core::sync::atomic::{AtomicPtr, Ordering};

/// Guards the segments' slice bitmaps, `free_count` and free descriptors, and holds the
/// pool's reuse record (`retain.rs`).
pub static SPAN_LOCK: Mutex<Reuse> = Mutex::new(Reuse::new());

/// Head of the append-only segment list.
static SEGMENTS: AtomicPtr<Segment> = AtomicPtr::new(null_mut());

/// Iterate over all normal segments (no lock needed: the list only grows).
pub fn segments() -> impl Iterator<Item = *mut Segment> {
    let mut current = SEGMENTS.load(Ordering::Acquire);
    core::iter::from_fn(move || {
        if current.is_null() {
            return None;
        }
        let seg = current;
        // SAFETY: segments are never unmapped.
        current = unsafe { (*seg).next.load(Ordering::Acquire) };
        Some(seg)
    })
}

/// Take `count` contiguous free slices starting at a multiple of `align` slices.
/// Returns the span's first descriptor, set up as a span but owned by nobody yet
/// (`owner == FREE`), and whether its memory reads as zero (see `os::DECOMMIT_ZEROES`).
pub fn alloc_span(count: usize, align: usize) -> Option<(*mut Page, bool)> {
    let found = take_span::<true, false>(count, align, true, core::ptr::null_mut());
    // A page keeps a guard at its end (`secure::guard_span`), none inside.
    #[cfg(feature = "secure")]
    if let Some((page, _)) = found {
        // SAFETY: the span is ours.
        unsafe { unguard_span_slices(page, 0, count - 1) };
    }
    found
}

/// Lift the guard pages kept in slices `from..from + count` of `page`'s span (the
/// secure build keeps guards on free slices: `secure::guard_span`).
///
/// # Safety
/// The caller owns the span, or the slices are free ones it just took.
#[cfg(feature = "secure")]
unsafe fn unguard_span_slices(page: *mut Page, from: usize, count: usize) {
    let seg = segment_of_page(page);
    // SAFETY: per the contract; segments are never unmapped.
    unsafe {
        let index = (*seg).page_index(page);
        crate::span::secure::unguard_slices(
            &(*seg).guard_slices,
            seg as *mut u8,
            SLICE_SIZE,
            index + from,
            count,
        );
    }
}

/// Large blocks above this many slices (4 MiB) never make a new segment: three 8 MiB
/// blocks fill a 32 MiB segment to 75% (its address space is the budget under
/// `ulimit -v`), so one that finds no room in an existing segment gets a mapping of its
/// own (`huge.rs`) instead.
pub const LARGE_NEW_SEGMENT_MAX_SLICES: usize = SLICES_PER_SEGMENT / 8;

/// `alloc_span`, reserving a new segment only if `may_reserve`. If the OS refuses a
/// segment while freed huge mappings are kept, they go back first (they hold address
/// space the OS may be short of) and the search runs again.
/// `SMALL`: the span is a page of blocks (dense growth of one-slice pages advises the
/// next 2 MiB unit for huge pages: `large_pages::after_small_span`); else it is a
/// large block (its whole untouched units are advised:
/// `large_pages::before_large_span_taken`).
/// With `NOTE`, `*committed_before` receives the segment's committed slices as they were
/// before the span was taken (a const parameter: the instances that do not note pay
/// nothing for it; an `Option` cost a 1 MiB malloc+free pair 10 instructions).
fn take_span<const SMALL: bool, const NOTE: bool>(
    count: usize,
    align: usize,
    may_reserve: bool,
    committed_before: *mut Bitmap512,
) -> Option<(*mut Page, bool)> {
    let found = search_or_reserve::<SMALL, NOTE>(count, align, may_reserve, committed_before);
    if found.is_none() && may_reserve && COUNTERS.huge_cached.load(Ordering::Relaxed) != 0 {
        crate::span::huge::purge_cache(os::now_ms(), 0, true);
        return search_or_reserve::<SMALL, NOTE>(count, align, may_reserve, committed_before);
    }
    found
}

fn search_or_reserve<const SMALL: bool, const NOTE: bool>(
    count: usize,
    align: usize,
    may_reserve: bool,
    committed_before: *mut Bitmap512,
) -> Option<(*mut Page, bool)> {
    let small = SMALL;
    debug_assert!(count > 0 && count < SLICES_PER_SEGMENT);
    let mut reuse = SPAN_LOCK.lock();
    // Committed runs first, so the free committed slices retention keeps are the ones
    // reused (`retain.rs`); then any free run, first fit in segment order.
    // A span that may leave part of its memory unwritten keeps out of the units resident
    // whole (dense growth's, fresh units) while it finds room elsewhere (`large_pages`).
    let dense_ok = crate::span::large_pages::fills_densely(small, count);
    let mut found = None;
    if reuse.committed_free() >= count {
        if small && count <= SHORT_RUN_PAGE_SLICES && align <= 1 {
            found = find_committed_in_short_run(count, dense_ok);
        }
        if found.is_none() {
            found = find_free_run(count, align, true, dense_ok);
        }
    }
    if found.is_none() {
        found = find_free_run(count, align, false, dense_ok);
    }
    if found.is_none() && !dense_ok {
        found = find_free_run(count, align, false, true);
    }
    let (seg, index) = match found {
        Some(f) => f,
        None => {
            if !may_reserve {
                return None;
            }
            let seg = Segment::reserve_for(dense_ok);
            if seg.is_null() {
                return None;
            }
            COUNTERS
                .reserved
                .fetch_add(SEGMENT_SIZE as u64, Ordering::Relaxed);
            COUNTERS.segments.fetch_add(1, Ordering::Relaxed);
            note_committed_peak();
            // Append at the tail so the scan order (oldest first) keeps memory packed.
            let mut tail = &SEGMENTS;
            loop {
                let current = tail.load(Ordering::Acquire);
                if current.is_null() {
                    break;
                }
                // SAFETY: segments are never unmapped.
                tail = unsafe { &(*current).next };
            }
            tail.store(seg, Ordering::Release);
            // SAFETY: fresh segment, guarded by the lock.
            let index = unsafe { (*seg).free_slices.find_run(count, align.max(1), 1) }?;
            (seg, index)
        }
    };
    // SAFETY: seg is valid and its bitmaps are guarded by the lock; the descriptors of
    // free slices belong to the arena.
    unsafe {
        let seg_ref = &mut *seg;
        // Uncommitted slices were never touched or were decommitted, which zeroes.
        let is_zero = DECOMMIT_ZEROES && seg_ref.committed_slices.all(index, count, false);
        crate::span::large_pages::before_span_taken(seg_ref, index, count);
        // Not a page: a large block. Only one of a unit or more can hold a whole unit.
        if !small && count >= crate::span::large_pages::UNIT_SLICES {
            crate::span::large_pages::before_large_span_taken(seg_ref, index, count);
        }
        let newly = count
            - (index..index + count)
                .filter(|&i| seg_ref.committed_slices.get(i))
                .count();
        reuse.taken(count - newly, newly);
        if NOTE {
            // SAFETY: with NOTE the caller passes a bitmap of its own.
            *committed_before = seg_ref.committed_slices;
        }
        COUNTERS
            .committed
            .fetch_add((newly * SLICE_SIZE) as u64, Ordering::Relaxed);
        note_committed_peak();
        seg_ref.free_slices.assign_range(index, count, false);
        seg_ref.committed_slices.assign_range(index, count, true);
        seg_ref.free_count -= count as u32;
        let page = seg_ref.pages.as_mut_ptr().add(index);
        for i in 1..count {
            (*page.add(i)).slice_count = 0;
        }
        seg_ref.set_span_page(index, count, page);
        (*page).slice_count = count as u32;
        (*page).used.store(0, Ordering::Relaxed);
        (*page).start = seg_ref.slice_start(index);
        (*page).is_zero = is_zero;
        (*page).listed = false;
        debug_assert_eq!((*page).owner.load(Ordering::Relaxed), FREE);
        if dense_ok {
            if let Some(unit) =
                crate::span::large_pages::after_small_span(seg_ref, index + count - 1)
            {
                faulted_in_unit_locked(&mut reuse, seg_ref, unit);
            }
        }
        Some((page, is_zero))
    }
}

/// A free unit that dense growth just faulted in whole (`large_pages`): its slices
/// become free and committed, freed now, so spans are taken from it before untouched
/// or purged slices, and the purge gives it back after the delay if none is.
fn faulted_in_unit_locked(reuse: &mut Reuse, seg_ref: &mut Segment, unit: usize) {
    let first = unit * crate::span::large_pages::UNIT_SLICES;
    let count = crate::span::large_pages::UNIT_SLICES;
    let now = deadline::coarse_now_ms();
    for i in first..first + count {
        seg_ref.pages[i].freed_at.store(now, Ordering::Relaxed);
    }
    seg_ref.committed_slices.assign_range(first, count, true);
    COUNTERS
        .committed
        .fetch_add((count * SLICE_SIZE) as u64, Ordering::Relaxed);
    note_committed_peak();
    reuse.freed(count);
    deadline::schedule_retention_scan(now);
}

/// Pages of up to this many slices (one-slice pages, and the 4-slice pages of classes
/// replaced at random: `size_class::SPREAD_PAGE_SLICES`) look for a short free run
/// first ([`find_committed_in_short_run`]).
const SHORT_RUN_PAGE_SLICES: usize = crate::size_class::SPREAD_PAGE_SLICES;

/// A free run of at most this many slices is short: a small page takes its committed
/// slices before it breaks a longer run. A page of big blocks that emptied is a long
/// run (48 slices for 384 KiB blocks), mostly resident but for the tails its blocks'
/// users never wrote or gave back (`span::shrink`); a page of the same class takes it
/// again whole without faulting those in, while a one-slice page carved out of it
/// writes its whole slice, and the big page then needs another span. Issue 14's
/// refresher (strings in one-slice pages, each item's vector a 384 KiB block) faulted
/// in 7.5 MiB that way in round 1, with first fit.
const SHORT_RUN_SLICES: usize = 8;

/// The first run of `count` committed free slices that lies inside a free run of at
/// most [`SHORT_RUN_SLICES`] slices, in segment order (span lock held by the caller;
/// no alignment: small pages need none).
fn find_committed_in_short_run(count: usize, dense_ok: bool) -> Option<(*mut Segment, usize)> {
    for seg in segments() {
        // SAFETY: segments are valid; the bitmaps are guarded by the span lock the
        // caller holds.
        let seg_ref = unsafe { &*seg };
        if (seg_ref.free_count as usize) < count {
            continue;
        }
        let mut runs = seg_ref.free_slices;
        runs.and_assign(&seg_ref.committed_slices);
        if !dense_ok {
            crate::span::large_pages::exclude_whole_units(&mut runs, seg_ref);
        }
        if let Some(index) = runs.find_run_in_short(count, &seg_ref.free_slices, SHORT_RUN_SLICES) {
            return Some((seg, index));
        }
    }
    None
}

/// The first run of `count` free slices (committed ones only if `committed`; none of a
/// unit resident whole unless `dense_ok`: `large_pages::exclude_whole_units`) starting
/// at a multiple of `align` slices, in segment order. Inlined: out of line it cost a 1
/// MiB malloc+free pair 46 more instructions (callgrind, 975 -> 1021).
#[inline(always)]
fn find_free_run(
    count: usize,
    align: usize,
    committed: bool,
    dense_ok: bool,
) -> Option<(*mut Segment, usize)> {
    for seg in segments() {
        // SAFETY: segments are valid; the bitmaps are guarded by the span lock the
        // caller holds.
        let seg_ref = unsafe { &*seg };
        if (seg_ref.free_count as usize) < count {
            continue;
        }
        let index =
            if committed || (!dense_ok && crate::span::large_pages::has_whole_units(seg_ref)) {
                let mut runs = seg_ref.free_slices;
                if committed {
                    runs.and_assign(&seg_ref.committed_slices);
                }
                if !dense_ok {
                    crate::span::large_pages::exclude_whole_units(&mut runs, seg_ref);
                }
                runs.find_run(count, align.max(1), 1)
            } else {
                seg_ref.free_slices.find_run(count, align.max(1), 1)
            };
        if let Some(index) = index {
            return Some((seg, index));
        }
    }
    None
}

/// Take a span for a large block (`bytes` rounded up to slices, start aligned to
/// `align` bytes). The page is owned by nobody (`LARGE`); any thread frees it.
pub fn alloc_large(bytes: usize, align: usize) -> Option<*mut Page> {
    let count = bytes.div_ceil(SLICE_SIZE);
    let align_slices = (align / SLICE_SIZE).max(1);
    if count + align_slices > SLICES_PER_SEGMENT {
        return None;
    }
    // Which slices were uncommitted is needed only while huge memory is kept (a copy of
    // the bitmap under the lock otherwise cost a 1 MiB malloc+free pair 30 instructions).
    let fill = cfg!(not(feature = "secure")) && COUNTERS.huge_cached.load(Ordering::Relaxed) != 0;
    if fill {
        return alloc_large_over_kept(count, align_slices);
    }
    let (page, _) = take_span::<false, false>(
        count,
        align_slices,
        count + align_slices <= LARGE_NEW_SEGMENT_MAX_SLICES,
        core::ptr::null_mut(),
    )?;
    Some(large_span_taken(page, count))
}

/// [`alloc_large`] while freed huge memory is kept: the slices of the span that were
/// uncommitted get kept pages. Out of line, so the usual path keeps its small frame
/// (with the bitmap on it, a 1 MiB malloc+free pair took 9 instructions more).
#[cold]
#[inline(never)]
fn alloc_large_over_kept(count: usize, align_slices: usize) -> Option<*mut Page> {
    let mut committed_before = Bitmap512::EMPTY;
    let (page, _) = take_span::<false, true>(
        count,
        align_slices,
        count + align_slices <= LARGE_NEW_SEGMENT_MAX_SLICES,
        &mut committed_before,
    )?;
    if COUNTERS.huge_cached.load(Ordering::Relaxed) != 0 {
        // SAFETY: the span is ours; so are its slices that were uncommitted.
        unsafe { fill_uncommitted_from_kept(page, count, &committed_before) };
    }
    Some(large_span_taken(page, count))
}

/// Set up span `page` of `count` slices, just taken, as a large block.
#[inline(always)]
fn large_span_taken(page: *mut Page, count: usize) -> *mut Page {
    #[cfg(feature = "secure")]
    // SAFETY: the span is ours.
    unsafe {
        unguard_span_slices(page, 0, count)
    };
    // SAFETY: the span is ours: the arena gave it to us and nobody else has its address.
    unsafe {
        (*page)
            .block_size
            .store(count * SLICE_SIZE, Ordering::Relaxed);
        (*page).reserved = 1;
        (*page).capacity = 1;
        (*page).set_used(1);
        // The secure build's free checks read these (a first-class heap's large spans
        // are freed through the checks for pages).
        #[cfg(feature = "secure")]
        {
            (*page).key = crate::span::secure::new_key();
            (*page).block_magic = crate::span::secure::start_magic(count * SLICE_SIZE);
            (*page).large_canary = false;
            (*page).block_limit = crate::span::secure::start_limit(count * SLICE_SIZE, 1);
        }
        (*page).owner.store(LARGE, Ordering::Release);
    }
    COUNTERS.large_allocs.fetch_add(1, Ordering::Relaxed);
    page
}

/// The slices of large span `page` (`count` of them) that were uncommitted before it was
/// taken would fault in fresh pages while freed huge mappings are kept: kept pages move
/// into them instead (`huge::fill_span_from_kept`; the other way round, `span::lend`).
///
/// # Safety
/// `page` is a large span the caller just took, nobody else's; `committed_before` is its
/// segment's committed slices before it was taken.
unsafe fn fill_uncommitted_from_kept(page: *mut Page, count: usize, committed_before: &Bitmap512) {
    let seg = segment_of_page(page);
    // SAFETY: per the contract; segments are never unmapped.
    let index = unsafe { (*seg).page_index(page) };
    let mut i = index;
    while i < index + count {
        if committed_before.get(i) {
            i += 1;
            continue;
        }
        let start = i;
        while i < index + count && !committed_before.get(i) {
            i += 1;
        }
        // SAFETY: slices of our span that were uncommitted: nothing resident, unused.
        let moved = unsafe {
            crate::span::huge::fill_span_from_kept(
                (*seg).slice_start(start),
                (i - start) * SLICE_SIZE,
            )
        };
        if moved {
            // SAFETY: as above.
            unsafe { (*page).is_zero = false };
        }
        if COUNTERS.huge_cached.load(Ordering::Relaxed) == 0 {
            break;
        }
    }
}

/// Grow or shrink a large block's span in place to `bytes`; false if the slices after
/// it are not free.
///
/// # Safety
/// `page` must be a live large span owned by the caller's block.
pub unsafe fn resize_large(page: *mut Page, bytes: usize) -> bool {
    // The secure build's canary after the block moves with its end.
    #[cfg(feature = "secure")]
    // SAFETY: per the contract.
    unsafe {
        if (*page).large_canary {
            if !resize_large_span(page, bytes + crate::span::secure::LARGE_CANARY) {
                return false;
            }
            crate::span::secure::set_large_canary(page, bytes);
            return true;
        }
    }
    // SAFETY: per the contract.
    unsafe { resize_large_span(page, bytes) }
}

/// `resize_large` of the span alone.
///
/// # Safety
/// As `resize_large`.
unsafe fn resize_large_span(page: *mut Page, bytes: usize) -> bool {
    let new_count = bytes.div_ceil(SLICE_SIZE);
    let seg = segment_of_page(page);
    let mut reuse = SPAN_LOCK.lock();
    // SAFETY: the caller owns the span; the segment bitmaps are guarded by the span lock.
    unsafe {
        let seg_ref = &mut *seg;
        let index = seg_ref.page_index(page);
        let old_count = (*page).slice_count as usize;
        if new_count == old_count {
            return true;
        }
        if new_count > old_count {
            let extra = new_count - old_count;
            if index + new_count > SLICES_PER_SEGMENT
                || !seg_ref.free_slices.all(index + old_count, extra, true)
            {
                return false;
            }
            if new_count >= crate::span::large_pages::UNIT_SLICES {
                crate::span::large_pages::before_large_span_taken(seg_ref, index, new_count);
            }
            let newly = (index + old_count..index + new_count)
                .filter(|&i| !seg_ref.committed_slices.get(i))
                .count();
            reuse.taken(extra - newly, newly);
            COUNTERS
                .committed
                .fetch_add((newly * SLICE_SIZE) as u64, Ordering::Relaxed);
            note_committed_peak();
            seg_ref
                .free_slices
                .assign_range(index + old_count, extra, false);
            seg_ref
                .committed_slices
                .assign_range(index + old_count, extra, true);
            seg_ref.free_count -= extra as u32;
            seg_ref.set_span_page(index + old_count, extra, page);
            #[cfg(feature = "secure")]
            unguard_span_slices(page, old_count, extra);
        } else {
            free_slices_locked(
                &mut reuse,
                seg,
                index + new_count,
                old_count - new_count,
                deadline::coarse_now_ms(),
            );
        }
        (*page).slice_count = new_count as u32;
        (*page)
            .block_size
            .store(new_count * SLICE_SIZE, Ordering::Relaxed);
    }
    true
}

/// Return slices to their segment's free bitmap and start their purge delay, counted
/// from `unused_since` (normally now).
///
/// # Safety
/// Span lock held (`reuse` is its data); the slices are an allocated span (or its tail)
/// nobody uses.
unsafe fn free_slices_locked(
    reuse: &mut Reuse,
    seg: *mut Segment,
    index: usize,
    count: usize,
    unused_since: u64,
) {
    let now = unused_since;
    // SAFETY: per the contract.
    unsafe {
        let seg_ref = &mut *seg;
        let header = seg_ref.pages.as_mut_ptr();
        seg_ref.set_span_page(index, count, header);
        for i in index..index + count {
            let desc = seg_ref.pages.as_mut_ptr().add(i);
            (*desc).slice_count = 0;
            (*desc).listed = false;
            (*desc).freed_at.store(now, Ordering::Relaxed);
            protocol::release_free(&(*desc).owner);
        }
        seg_ref.free_slices.assign_range(index, count, true);
        seg_ref.free_count += count as u32;
        crate::span::large_pages::after_slices_freed(seg_ref, index, count);
    }
    // A span in use is committed whole.
    reuse.freed(count);
    deadline::schedule_retention_scan(now);
}

/// Give a span back to the arena, its purge delay counted from `unused_since` (now,
/// or when an idle heap stopped using it: a stealer frees the pages of a heap that has
/// been idle for the purge delay already, and making that memory wait a second delay
/// would double the time an idle process takes to give memory back).
///
/// # Safety
/// The caller must own `page` (a heap, a drainer, or the block of a large span), no
/// block in it may be in use, and it must be on no list (`listed` false).
pub unsafe fn free_span(page: *mut Page, unused_since: u64) {
    let seg = segment_of_page(page);
    let mut reuse = SPAN_LOCK.lock();
    // SAFETY: per the contract; the lock guards the bitmaps.
    unsafe {
        debug_assert!(!(*page).listed, "a listed page goes back to the arena");
        // Its holder: a heap, a drainer, a stealer, or a large block's freer; never a
        // page anyone could still claim or one already free.
        debug_assert!(!matches!(
            (*page).owner.load(Ordering::Relaxed),
            FREE | ABANDONED | HUGE
        ));
        let index = (*seg).page_index(page);
        // The guard page stays (`secure::guard_span`).
        #[cfg(feature = "secure")]
        {
            (*page).guarded = false;
            (*page).large_canary = false;
        }
        free_slices_locked(
            &mut reuse,
            seg,
            index,
            (*page).slice_count as usize,
            unused_since,
        );
    }
}

/// [`free_span`] for a span whose pages were moved out (`os::move_pages`: `realloc` of
/// a large block into a huge one): its slices are free and uncommitted, as if the
/// decommit scan had given them back (nothing of them is resident, they read as zero,
/// and retaking them is reuse that faults, as after a purge).
///
/// # Safety
/// As [`free_span`]; every page of the span was moved out since it was last written.
pub unsafe fn free_span_moved_out(page: *mut Page, unused_since: u64) {
    let seg = segment_of_page(page);
    let mut reuse = SPAN_LOCK.lock();
    // SAFETY: per the contract; the lock guards the bitmaps.
    unsafe {
        debug_assert!(!(*page).listed, "a listed page goes back to the arena");
        debug_assert_eq!((*page).owner.load(Ordering::Relaxed), LARGE);
        let index = (*seg).page_index(page);
        let count = (*page).slice_count as usize;
        debug_assert!((*seg).committed_slices.all(index, count, true));
        free_slices_locked(&mut reuse, seg, index, count, unused_since);
        // Out of the committed pool into the purged one, as a decommitted run.
        reuse.hidden(count);
        (*seg).committed_slices.assign_range(index, count, false);
        COUNTERS
            .committed
            .fetch_sub((count * SLICE_SIZE) as u64, Ordering::Relaxed);
    }
}

/// True if `page`'s span touches a 2 MiB unit dense growth advised for huge pages
/// (`Segment::advised_units`): freeing the span would take the advice back
/// (`large_pages::after_slices_freed`).
///
/// # Safety
/// `page` is the first descriptor of a span of a normal segment that the caller holds.
pub unsafe fn span_in_advised_unit(page: *mut Page) -> bool {
    let seg = segment_of_page(page);
    let _guard = SPAN_LOCK.lock();
    // SAFETY: per the contract; the lock guards `advised_units`.
    unsafe {
        let units = (*seg).advised_units;
        if units == 0 {
            return false;
        }
        let index = (*seg).page_index(page);
        let unit = crate::span::large_pages::UNIT_SLICES;
        let last = index + (*page).slice_count.max(1) as usize - 1;
        (index / unit..=last / unit).any(|u| units & (1 << u) != 0)
    }
}

/// Bytes that may be resident, as stats count them: committed slices, segment headers,
/// huge blocks' used pages and the kept huge mappings.
pub fn committed_bytes() -> u64 {
    let c = &COUNTERS;
    c.committed.load(Ordering::Relaxed)
        + c.segments.load(Ordering::Relaxed) * HEADER_BYTES as u64
        + c.huge_used.load(Ordering::Relaxed)
        + c.huge_cached.load(Ordering::Relaxed)
}

/// Raise `COUNTERS.committed_peak` to [`committed_bytes`] (called where it grows: slices
/// committed, a segment reserved, a huge block's pages grown; slow paths only).
pub fn note_committed_peak() {
    let now = committed_bytes();
    if now > COUNTERS.committed_peak.load(Ordering::Relaxed) {
        COUNTERS.committed_peak.fetch_max(now, Ordering::Relaxed);
    }
}

/// Count committed-but-free bytes (stats).
pub fn free_committed_bytes() -> u64 {
    let _guard = SPAN_LOCK.lock();
    let mut bytes = 0u64;
    for seg in segments() {
        // SAFETY: bitmaps guarded by the lock we hold.
        let seg_ref = unsafe { &*seg };
        for i in HEADER_SLICES..SLICES_PER_SEGMENT {
            if seg_ref.free_slices.get(i) && seg_ref.committed_slices.get(i) {
                bytes += SLICE_SIZE as u64;
            }
        }
    }
    bytes
}

/// Take the span lock before `fork` (see `process::fork_prepare`).
pub fn lock_for_fork() {
    SPAN_LOCK.lock_raw();
}

/// Release the lock taken by `lock_for_fork`, in the parent.
///
/// # Safety
/// The calling thread took the lock with `lock_for_fork`.
pub unsafe fn unlock_after_fork() {
    // SAFETY: per the contract.
    unsafe { SPAN_LOCK.unlock_raw() };
}

/// In the fork child: the lock is free (its holder was the forking thread).
///
/// # Safety
/// Only in the child of a fork whose prepare handler took the lock.
pub unsafe fn reset_after_fork() {
    // SAFETY: per the contract.
    unsafe { SPAN_LOCK.reset_after_fork() };
}
