//! The arena: process-wide ownership of segments, spans and abandoned pages.
//!
//! Heaps get spans (runs of slices) here and give them back when a page empties, so a
//! slice freed by one thread is reused by any thread. Pages nobody owns (their thread
//! exited, or they filled up) are *abandoned*: they stay where they are, keep their live
//! blocks, and any thread can claim them. Abandoned pages with free blocks sit in one
//! list per size class, where heaps that need a page of that class look first.
//!
//! One lock guards the span bitmaps and the abandoned lists. It is taken only on slow
//! paths (a page runs out, a page empties, a large block), never by malloc or free of a
//! small block, and never held across a system call that can take long or a call that
//! can allocate.
//!
//! # Remote frees into abandoned pages
//! A thread that frees into an abandoned page pushes the block on the page's
//! `thread_free` list. If the list was empty it *notifies*: sets the page's bit in its
//! segment's `collect_mask` and raises [`COLLECT_PENDING`]. A collector (the background
//! purger, or any heap that needs a page) then claims the page, folds the remote frees
//! in, and frees the page if it is empty or lists it as having room. Because every push
//! onto an empty list notifies and every collector empties the list before it lets go,
//! no remote free is ever left without a pending notification.

use crate::heap::Heap;
use crate::os;
use crate::page::{Page, ABANDONED, COLLECTING, FREE, LARGE, PURGE_INSIDE_MIN};
use crate::purge;
use crate::segment::{Segment, SLICES_PER_SEGMENT, SLICE_SIZE};
use crate::size_class::{class_of, class_size, page_slices, CLASS_COUNT};
use crate::stats::COUNTERS;
use crate::sync::Mutex;
use core::ptr::null_mut;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

/// A doubly linked list of pages through `Page::next`/`prev`.
#[derive(Clone, Copy)]
pub struct PageList {
    pub first: *mut Page,
    pub last: *mut Page,
}

impl PageList {
    pub const fn new() -> Self {
        Self {
            first: null_mut(),
            last: null_mut(),
        }
    }

    /// # Safety
    /// `page` must be valid and in no list.
    pub unsafe fn push_front(&mut self, page: *mut Page) {
        // SAFETY: per the contract; list members are valid.
        unsafe {
            (*page).prev = null_mut();
            (*page).next = self.first;
            if self.first.is_null() {
                self.last = page;
            } else {
                (*self.first).prev = page;
            }
        }
        self.first = page;
    }

    /// # Safety
    /// `page` must be valid and in no list.
    pub unsafe fn push_back(&mut self, page: *mut Page) {
        // SAFETY: per the contract; list members are valid.
        unsafe {
            (*page).next = null_mut();
            (*page).prev = self.last;
            if self.last.is_null() {
                self.first = page;
            } else {
                (*self.last).next = page;
            }
        }
        self.last = page;
    }

    /// # Safety
    /// `page` must be in this list.
    pub unsafe fn remove(&mut self, page: *mut Page) {
        // SAFETY: per the contract; list members are valid.
        unsafe {
            let (prev, next) = ((*page).prev, (*page).next);
            if prev.is_null() {
                self.first = next;
            } else {
                (*prev).next = next;
            }
            if next.is_null() {
                self.last = prev;
            } else {
                (*next).prev = prev;
            }
            (*page).next = null_mut();
            (*page).prev = null_mut();
        }
    }
}

/// State under the arena lock.
pub struct ArenaState {
    /// Abandoned pages with room, per size class.
    pub abandoned: [PageList; CLASS_COUNT],
    /// Heaps of threads that exited, ready for reuse.
    pub spare_heaps: *mut Heap,
    /// All live heaps.
    pub heaps: *mut Heap,
    /// Freed huge mappings kept for reuse (`huge.rs`).
    pub huge_cache: [crate::huge::CachedMapping; crate::huge::CACHE_SLOTS],
}

// SAFETY: the raw pointers are only followed under the lock.
unsafe impl Send for ArenaState {}

pub static ARENA: Mutex<ArenaState> = Mutex::new(ArenaState {
    abandoned: [PageList::new(); CLASS_COUNT],
    spare_heaps: null_mut(),
    heaps: null_mut(),
    huge_cache: [crate::huge::CachedMapping::EMPTY; crate::huge::CACHE_SLOTS],
});

/// Head of the append-only segment list.
static SEGMENTS: AtomicPtr<Segment> = AtomicPtr::new(null_mut());
/// Some segment has a bit set in its `collect_mask`.
pub static COLLECT_PENDING: AtomicBool = AtomicBool::new(false);
/// Earliest time a free committed slice becomes due for purging (`u64::MAX`: none).
pub static NEXT_PURGE: AtomicU64 = AtomicU64::new(u64::MAX);

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
/// (`owner == FREE`), and whether its memory reads as zero.
fn alloc_span_locked(count: usize, align: usize) -> Option<(*mut Page, bool)> {
    debug_assert!(count > 0 && count < SLICES_PER_SEGMENT);
    let mut found = None;
    for seg in segments() {
        // SAFETY: segments are valid; the bitmaps are guarded by the arena lock we hold.
        let seg_ref = unsafe { &mut *seg };
        if (seg_ref.free_count as usize) < count {
            continue;
        }
        if let Some(index) = seg_ref.free_slices.find_run(count, align.max(1), 1) {
            found = Some((seg, index));
            break;
        }
    }
    let (seg, index) = match found {
        Some(f) => f,
        None => {
            let seg = Segment::reserve();
            if seg.is_null() {
                return None;
            }
            COUNTERS
                .reserved
                .fetch_add(crate::segment::SEGMENT_SIZE as u64, Ordering::Relaxed);
            COUNTERS.segments.fetch_add(1, Ordering::Relaxed);
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
        let is_zero = seg_ref.committed_slices.all(index, count, false);
        let newly = count
            - (index..index + count)
                .filter(|&i| seg_ref.committed_slices.get(i))
                .count();
        COUNTERS
            .committed
            .fetch_add((newly * SLICE_SIZE) as u64, Ordering::Relaxed);
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
        Some((page, is_zero))
    }
}

/// Take a span for a large block (`bytes` rounded up to slices, start aligned to
/// `align` bytes). The page is owned by nobody (`LARGE`); any thread frees it.
pub fn alloc_large(bytes: usize, align: usize) -> Option<*mut Page> {
    let count = bytes.div_ceil(SLICE_SIZE);
    let align_slices = (align / SLICE_SIZE).max(1);
    if count + align_slices > SLICES_PER_SEGMENT {
        return None;
    }
    let result = {
        let _guard = ARENA.lock();
        alloc_span_locked(count, align_slices)
    };
    let (page, _) = result?;
    // SAFETY: the span is ours: the arena gave it to us and nobody else has its address.
    unsafe {
        (*page)
            .block_size
            .store(count * SLICE_SIZE, Ordering::Relaxed);
        (*page).reserved = 1;
        (*page).capacity = 1;
        (*page).set_used(1);
        (*page).owner.store(LARGE, Ordering::Release);
    }
    COUNTERS.large_allocs.fetch_add(1, Ordering::Relaxed);
    Some(page)
}

/// Grow or shrink a large block's span in place to `bytes`; false if the slices after
/// it are not free.
///
/// # Safety
/// `page` must be a live large span owned by the caller's block.
pub unsafe fn resize_large(page: *mut Page, bytes: usize) -> bool {
    let new_count = bytes.div_ceil(SLICE_SIZE);
    let seg = crate::segment::segment_of_page(page);
    let _guard = ARENA.lock();
    // SAFETY: the caller owns the span; the segment bitmaps are guarded by the lock.
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
            let newly = (index + old_count..index + new_count)
                .filter(|&i| !seg_ref.committed_slices.get(i))
                .count();
            COUNTERS
                .committed
                .fetch_add((newly * SLICE_SIZE) as u64, Ordering::Relaxed);
            seg_ref
                .free_slices
                .assign_range(index + old_count, extra, false);
            seg_ref
                .committed_slices
                .assign_range(index + old_count, extra, true);
            seg_ref.free_count -= extra as u32;
            seg_ref.set_span_page(index + old_count, extra, page);
        } else {
            free_slices_locked(seg, index + new_count, old_count - new_count, os::now_ms());
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
/// Arena lock held; the slices are an allocated span (or its tail) nobody uses.
unsafe fn free_slices_locked(seg: *mut Segment, index: usize, count: usize, unused_since: u64) {
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
            (*desc).owner.store(FREE, Ordering::Release);
        }
        seg_ref.free_slices.assign_range(index, count, true);
        seg_ref.free_count += count as u32;
    }
    purge::schedule(now);
}

/// Give a page's span back to the arena (the caller owns the page and it is unused,
/// or it is a large block being freed).
///
/// # Safety
/// The caller must own `page` and no block in it may be in use.
pub unsafe fn free_span(page: *mut Page) {
    // SAFETY: per the contract.
    unsafe { free_span_unused_since(page, os::now_ms()) }
}

/// `free_span` for a span whose blocks have not been used since `unused_since`: its
/// purge delay is counted from then (a stealer frees the pages of a heap that has been
/// idle for the purge delay already; making that memory wait a second delay would
/// double the time it takes an idle process to give memory back).
///
/// # Safety
/// As `free_span`.
pub unsafe fn free_span_unused_since(page: *mut Page, unused_since: u64) {
    let seg = crate::segment::segment_of_page(page);
    {
        let mut arena = ARENA.lock();
        // SAFETY: the caller owns the page; the lock guards the list and bitmaps.
        unsafe {
            if (*page).listed {
                arena.abandoned[(*page).class as usize].remove(page);
                (*page).listed = false;
            }
            let index = (*seg).page_index(page);
            free_slices_locked(seg, index, (*page).slice_count as usize, unused_since);
        }
    }
    purge::after_slow_path();
}

/// Find a page with room for `class` for `heap`: claim an abandoned one, or carve a
/// fresh span. Returns the page owned by `heap` (not yet in its queue), or null.
pub fn take_page(class: usize, heap: *mut Heap) -> *mut Page {
    collect_pending();
    let page = {
        let mut arena = ARENA.lock();
        let mut found = null_mut();
        let mut candidate = arena.abandoned[class].first;
        while !candidate.is_null() {
            // SAFETY: listed pages are valid descriptors; the lock guards the links.
            let next = unsafe { (*candidate).next };
            // SAFETY: as above; the CAS decides ownership.
            let claimed = unsafe {
                (*candidate)
                    .owner
                    .compare_exchange(
                        ABANDONED,
                        (*heap).owner_word,
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    )
                    .is_ok()
            };
            if claimed {
                // SAFETY: we own it now and hold the lock for the list.
                unsafe {
                    arena.abandoned[class].remove(candidate);
                    (*candidate).listed = false;
                }
                COUNTERS.pages_reclaimed.fetch_add(1, Ordering::Relaxed);
                found = candidate;
                break;
            }
            candidate = next;
        }
        if found.is_null() {
            if let Some((page, _)) = alloc_span_locked(page_slices(class), 1) {
                // SAFETY: the span is ours; set it up before publishing the owner.
                unsafe {
                    let bytes = (*page).span_bytes();
                    (*page).init_blocks(class, class_size(class), bytes);
                    (*page).owner.store((*heap).owner_word, Ordering::Release);
                }
                found = page;
            }
        }
        found
    };
    purge::after_slow_path();
    page
}

/// Give up ownership of `page` (owned by `heap`): it keeps its blocks and any thread
/// may claim it. Pages with room are listed so heaps needing the class find them. An
/// unused page goes back to the arena, its purge delay counted from `unused_since`.
///
/// # Safety
/// `heap` must own `page`, and the page must be in no heap queue.
pub unsafe fn abandon(page: *mut Page, heap: *mut Heap, unused_since: u64) {
    // SAFETY: we own the page until the store below.
    unsafe {
        // Whoever claims it next decides whether it is current (a steal clears the
        // heap's tables without touching the pages).
        (*page).set_is_current(false);
        (*page).collect();
        if (*page).is_unused() {
            free_span_unused_since(page, unused_since);
            return;
        }
        let now = os::now_ms();
        let idle = unused_since < now;
        if idle {
            // Taken from an idle owner: its free blocks have not been used for the purge
            // delay either.
            let bytes = (*page).purge_free_blocks();
            if bytes > 0 {
                COUNTERS.purged.fetch_add(bytes as u64, Ordering::Relaxed);
                COUNTERS.purge_calls.fetch_add(1, Ordering::Relaxed);
            }
        }
        if (*page).has_room() {
            let mut arena = ARENA.lock();
            list_locked(&mut arena, page, if idle { PURGED_INSIDE } else { now });
        }
        (*page).last_owner.store(heap as usize, Ordering::Relaxed);
        release_abandoned(page);
    }
    COUNTERS.pages_abandoned.fetch_add(1, Ordering::Relaxed);
}

/// Publish an abandoned page, then re-check for remote frees that raced with it.
///
/// This is one side of a Dekker pair: the freer does `push; load owner`, we do
/// `store owner; load thread_free`. With SeqCst on both, at least one side sees the
/// other, so a free that saw us as owner is either collected or notified.
unsafe fn release_abandoned(page: *mut Page) {
    // SAFETY: the caller owns the page.
    unsafe {
        (*page).owner.store(ABANDONED, Ordering::SeqCst);
        if !(*page).thread_free.load(Ordering::SeqCst).is_null() {
            notify(page);
        }
    }
}

/// Ask a collector to look at abandoned `page`, which has remote frees.
pub fn notify(page: *mut Page) {
    let seg = crate::segment::segment_of_page(page);
    // SAFETY: page is a descriptor inside the live segment seg.
    unsafe {
        let index = (*seg).page_index(page);
        (*seg).collect_mask[index / 64].fetch_or(1 << (index % 64), Ordering::Release);
    }
    COLLECT_PENDING.store(true, Ordering::SeqCst);
    purge::wake_for_collect();
}

/// Claim and collect every page with pending notifications.
pub fn collect_pending() {
    if !COLLECT_PENDING.load(Ordering::Relaxed) || !COLLECT_PENDING.swap(false, Ordering::Acquire) {
        return;
    }
    for seg in segments() {
        for word in 0..8 {
            // SAFETY: seg is a live segment.
            let mut bits = unsafe { (*seg).collect_mask[word].swap(0, Ordering::Acquire) };
            while bits != 0 {
                let index = word * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                // SAFETY: index < 512.
                let page = unsafe { (*seg).pages.as_mut_ptr().add(index) };
                collect_page(page);
            }
        }
    }
}

/// Fold the remote frees of an abandoned page in; free it if it became empty, list it
/// if it has room. No-op if someone else owns the page (they will see the frees).
pub fn collect_page(page: *mut Page) {
    if !claim_for_collect(page) {
        return;
    }
    // SAFETY: we own the page (COLLECTING).
    unsafe { (*page).collect_thread_free() };
    finish_collect(page, true);
}

/// Take an abandoned page for collecting (`ABANDONED` -> `COLLECTING`).
pub fn claim_for_collect(page: *mut Page) -> bool {
    // SAFETY: page is a descriptor in a live segment; the CAS decides ownership.
    unsafe {
        (*page)
            .owner
            .compare_exchange(ABANDONED, COLLECTING, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }
}

/// Let go of a page taken with `claim_for_collect`: free it if unused, list it if it
/// has room, and publish it as abandoned again. `collected`: blocks were freed into it
/// since it was listed.
pub fn finish_collect(page: *mut Page, collected: bool) {
    COUNTERS.pages_collected.fetch_add(1, Ordering::Relaxed);
    // SAFETY: we own the page (COLLECTING).
    unsafe {
        if (*page).is_unused() {
            free_span(page);
            return;
        }
        if !(*page).listed && (*page).has_room() {
            let mut arena = ARENA.lock();
            list_locked(&mut arena, page, os::now_ms());
        } else if (*page).listed && collected && (*page).block_size() >= PURGE_INSIDE_MIN {
            // New free blocks: their insides wait out the purge delay again.
            let now = os::now_ms();
            (*page).freed_at.store(now, Ordering::Relaxed);
            purge::schedule(now);
        }
        release_abandoned(page);
    }
}

/// `freed_at` of a listed abandoned page whose free blocks have been purged inside.
const PURGED_INSIDE: u64 = u64::MAX;
/// The first class whose blocks are purged inside (see `Page::purge_free_blocks`).
const FIRST_INSIDE_CLASS: usize = class_of(PURGE_INSIDE_MIN);

/// Put an abandoned page on the list of its class. For pages of big blocks `freed_at`
/// (unused while the page is in use) records when: their free blocks are purged inside
/// once nobody has claimed the page for the purge delay.
///
/// `listed_at` is normally now; `PURGED_INSIDE` if the caller just purged the page.
///
/// # Safety
/// The caller owns `page` and holds the arena lock (`arena`); the page is not listed.
unsafe fn list_locked(arena: &mut ArenaState, page: *mut Page, listed_at: u64) {
    // SAFETY: per the contract.
    unsafe {
        arena.abandoned[(*page).class as usize].push_back(page);
        (*page).listed = true;
        if (*page).block_size() >= PURGE_INSIDE_MIN {
            (*page).freed_at.store(listed_at, Ordering::Relaxed);
            if listed_at != PURGED_INSIDE {
                purge::schedule(listed_at);
            }
        }
    }
}

/// Purge the inside of the free blocks of listed abandoned pages of big blocks that
/// nobody claimed for the purge delay (all of them if `force`): a few survivors must
/// not keep a page of 512 KiB blocks resident. Returns the next time one becomes due.
fn purge_abandoned_insides(now: u64, delay: u64, force: bool) -> u64 {
    let mut next_due = u64::MAX;
    // One pass under the lock over every class (the lock is what the slow paths of all
    // threads contend for), then the purging outside it.
    let mut batch: [*mut Page; 32] = [null_mut(); 32];
    let mut count = 0;
    {
        let arena = ARENA.lock();
        'classes: for class in FIRST_INSIDE_CLASS..CLASS_COUNT {
            let mut page = arena.abandoned[class].first;
            while !page.is_null() {
                // SAFETY: listed pages are valid descriptors; the lock guards the links.
                let listed_at = unsafe { (*page).freed_at.load(Ordering::Relaxed) };
                if listed_at != PURGED_INSIDE {
                    if !force && listed_at.saturating_add(delay) > now {
                        next_due = next_due.min(listed_at + delay);
                    } else if count == batch.len() {
                        next_due = now; // more than a batch: come back soon
                        break 'classes;
                    } else {
                        batch[count] = page;
                        count += 1;
                    }
                }
                // SAFETY: as above.
                page = unsafe { (*page).next };
            }
        }
    }
    {
        for &page in &batch[..count] {
            if !claim_for_collect(page) {
                continue; // claimed meanwhile: in use again, or another collector has it
            }
            // SAFETY: we own the page (COLLECTING).
            unsafe {
                (*page).collect_thread_free();
                if (*page).listed {
                    let bytes = (*page).purge_free_blocks();
                    COUNTERS.purged.fetch_add(bytes as u64, Ordering::Relaxed);
                    COUNTERS.purge_calls.fetch_add(1, Ordering::Relaxed);
                    (*page).freed_at.store(PURGED_INSIDE, Ordering::Relaxed);
                }
            }
            finish_collect(page, false);
        }
    }
    next_due
}

/// Decommit free slices whose purge delay has passed (all free slices if `force`), and
/// the insides of free big blocks in abandoned pages nobody claimed for as long.
/// Returns the next time something becomes due, or `u64::MAX`.
pub fn purge(now: u64, force: bool) -> u64 {
    let delay = crate::options::get().purge_delay_ms;
    let mut next_due = u64::MAX;
    // Start from "nothing due"; spans freed while we scan lower it again (fetch_min),
    // and what we find still pending is merged in at the end.
    NEXT_PURGE.store(u64::MAX, Ordering::SeqCst);
    // Runs to decommit, found under the lock and decommitted outside it.
    let mut runs: [(usize, usize); 32] = [(0, 0); 32];
    for seg in segments() {
        loop {
            let mut run_count = 0;
            {
                let _guard = ARENA.lock();
                // SAFETY: seg is live; bitmaps and free descriptors are guarded by the lock.
                let seg_ref = unsafe { &mut *seg };
                let mut i = 1;
                while i < SLICES_PER_SEGMENT && run_count < runs.len() {
                    // Skip to the next slice that is free and committed, a word at a time.
                    let word = i / 64;
                    let candidates = (seg_ref.free_slices.word(word)
                        & seg_ref.committed_slices.word(word))
                        >> (i % 64);
                    if candidates == 0 {
                        i = (word + 1) * 64;
                        continue;
                    }
                    i += candidates.trailing_zeros() as usize;
                    let due = seg_ref.pages[i].freed_at.load(Ordering::Relaxed) + delay;
                    if !force && due > now {
                        next_due = next_due.min(due);
                        i += 1;
                        continue;
                    }
                    let start = i;
                    while i < SLICES_PER_SEGMENT
                        && seg_ref.free_slices.get(i)
                        && seg_ref.committed_slices.get(i)
                        && (force
                            || seg_ref.pages[i].freed_at.load(Ordering::Relaxed) + delay <= now)
                    {
                        i += 1;
                    }
                    // Hide the run from span allocation while it is decommitted.
                    seg_ref.free_slices.assign_range(start, i - start, false);
                    seg_ref.free_count -= (i - start) as u32;
                    runs[run_count] = (start, i - start);
                    run_count += 1;
                }
            }
            if run_count == 0 {
                break;
            }
            let mut bytes = 0;
            for &(start, count) in &runs[..run_count] {
                // SAFETY: the run is free and hidden from allocation, so no one uses it.
                unsafe { os::decommit((*seg).slice_start(start), count * SLICE_SIZE) };
                bytes += count * SLICE_SIZE;
            }
            {
                let _guard = ARENA.lock();
                // SAFETY: as above.
                let seg_ref = unsafe { &mut *seg };
                for &(start, count) in &runs[..run_count] {
                    seg_ref.committed_slices.assign_range(start, count, false);
                    seg_ref.free_slices.assign_range(start, count, true);
                    seg_ref.free_count += count as u32;
                }
            }
            COUNTERS
                .committed
                .fetch_sub(bytes as u64, Ordering::Relaxed);
            COUNTERS.purged.fetch_add(bytes as u64, Ordering::Relaxed);
            COUNTERS
                .purge_calls
                .fetch_add(run_count as u64, Ordering::Relaxed);
            if run_count < runs.len() {
                break;
            }
        }
    }
    next_due = next_due.min(purge_abandoned_insides(now, delay, force));
    next_due = next_due.min(crate::huge::purge_cache(now, delay, force));
    NEXT_PURGE.fetch_min(next_due, Ordering::SeqCst);
    NEXT_PURGE.load(Ordering::SeqCst)
}

/// Count committed-but-free bytes (stats).
pub fn free_committed_bytes() -> u64 {
    let _guard = ARENA.lock();
    let mut bytes = 0u64;
    for seg in segments() {
        // SAFETY: bitmaps guarded by the lock we hold.
        let seg_ref = unsafe { &*seg };
        for i in crate::segment::HEADER_SLICES..SLICES_PER_SEGMENT {
            if seg_ref.free_slices.get(i) && seg_ref.committed_slices.get(i) {
                bytes += SLICE_SIZE as u64;
            }
        }
    }
    bytes
}

/// Take the arena lock before `fork` so the child does not inherit it mid-update.
pub unsafe extern "C" fn fork_prepare() {
    ARENA.lock_raw();
}

pub unsafe extern "C" fn fork_parent() {
    // SAFETY: fork_prepare took the lock in this thread.
    unsafe { ARENA.unlock_raw() };
}

pub unsafe extern "C" fn fork_child() {
    // SAFETY: the only thread of the child is the one that took the lock.
    unsafe { ARENA.reset_after_fork() };
    purge::reset_after_fork();
    // SAFETY: we are the child and the lock is free.
    unsafe { crate::heap::abandon_foreign_heaps_after_fork() };
}
