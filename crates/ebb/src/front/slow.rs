//! The slow paths: malloc when the current page has no free block, free when the
//! fast path cannot (another owner, check mode, a large or huge block, a stealer at
//! work, a page that emptied), and letting go of pages (sweep, retire).

use crate::counters::COUNTERS;
use crate::front::heap::{empty_heap, ensure_heap, Heap};
use crate::front::queue::{queue_is_short, queue_push_back, queue_push_front, queue_remove};
use crate::front::{check, freed_key, guarded, shared, spread, stash, tls};
use crate::handoff::{abandon, drain};
use crate::os;
use crate::process::purger::after_slow_path;
use crate::profile;
use crate::protocol;
use crate::size_class::{class_size, page_slices, CLASS_COUNT, SPREAD_PAGE_SLICES};
use crate::span::page::{
    Block, Page, ABANDONED, CHECK_TAG, DRAINING, FREE, HUGE, LARGE, MARKER_LIMIT, STOLEN,
};
use crate::span::{arena, huge};
use crate::span::{deadline, segment};
use core::ptr::null_mut;
use core::sync::atomic::Ordering;

/// Slow-path entry for the calling thread's own heap: wait out a steal in progress and
/// count the activity (the stealer leaves recently active heaps alone). No clock read:
/// the stealer notices when the count stops moving.
#[inline]
pub fn slow_path_enter(heap: *mut Heap) {
    // SAFETY: heap is the calling thread's heap.
    unsafe {
        (*heap).enter();
        (*heap).handshake.wait_while_stealing();
        let activity = (*heap).activity.load(Ordering::Relaxed);
        (*heap)
            .activity
            .store(activity.wrapping_add(1), Ordering::Relaxed);
    }
}

// ---------------------------------------------------------------------------------
// Malloc slow path

/// Find a page of `class` with a free block for `heap`, making it current. Null if the
/// OS refused memory.
///
/// # Safety
/// `heap` must be the calling thread's own heap, entered with `slow_path_enter`.
pub unsafe fn find_page(heap: *mut Heap, class: usize) -> *mut Page {
    // SAFETY: per the contract.
    unsafe { find_page_gathered(heap, class).0 }
}

/// [`find_page`], with what its gather knows of the page's `local_free` length
/// (`Page::gather_frees`), for the sampler's hand-out.
///
/// # Safety
/// As [`find_page`].
unsafe fn find_page_gathered(heap: *mut Heap, class: usize) -> (*mut Page, Option<u32>) {
    // SAFETY: the heap is ours; pages in our queues are owned by us.
    unsafe {
        let keep_full = FULL_PAGE_SLICES_KEPT / page_slices(class);
        let mut full_kept = 0;
        let mut abandoned = false;
        let mut page = (*heap).queues[class].first;
        let mut spread = false;
        while !page.is_null() {
            let next = (*page).next;
            let remote = (*page).has_remote_frees();
            let local_len = (*page).gather_frees();
            if (*page).has_free() || (*page).extend() {
                if spread::count_refill(heap, class, page, remote) {
                    // The class just turned out to be replaced at random: leave this
                    // page's few free blocks for later and take a bigger page now.
                    spread = true;
                    break;
                }
                if page != (*heap).queues[class].first {
                    (*heap).queues[class].remove(page);
                    (*heap).queues[class].push_front(page);
                    (*heap).set_current(class, page);
                }
                if abandoned {
                    after_slow_path();
                }
                return (page, local_len);
            }
            debug_assert!(!(*page).has_room(), "a page with room left behind");
            if full_kept < keep_full {
                // Full, and among the first few (the most recently current: see the
                // queue order in queue.rs): keep it (see FULL_PAGE_SLICES_KEPT).
                full_kept += 1;
            } else {
                // Full and older: let it go, so frees into it make it claimable by anyone.
                queue_remove(heap, class, page);
                abandon::abandon(page, heap as usize, deadline::coarse_now_ms());
                abandoned = true;
            }
            page = next;
        }
        if !spread && (*heap).dense_refills[class] < spread::SPREAD_REFILLS {
            (*heap).dense_refills[class] = 0;
        }
        let page = take_page(class, heap);
        after_slow_path();
        if page.is_null() {
            return (null_mut(), None);
        }
        let local_len = (*page).gather_frees();
        if !(*page).has_free() && !(*page).extend() {
            // A claimed page always has room; a fresh one can always be carved.
            debug_assert!(false, "page without room");
        }
        queue_push_front(heap, class, page);
        (page, local_len)
    }
}

/// Find a page with room for `class` for `heap`: drain notified abandoned pages, claim
/// a listed one of the class, or carve a fresh span (a stashed one first: `stash`).
/// Returns the page owned by `heap` (not in its queue), or null if the OS refused.
fn take_page(class: usize, heap: *mut Heap) -> *mut Page {
    let _ = drain::drain_notified();
    // SAFETY: `heap` is the calling thread's heap.
    let owner_word = unsafe { (*heap).owner_word };
    let page = abandon::claim_listed(class, owner_word);
    if !page.is_null() {
        return page;
    }
    // SAFETY: `heap` is the calling thread's heap.
    let spread = unsafe { (*heap).dense_refills[class] } == spread::SPREAD_REFILLS;
    let slices = if spread {
        SPREAD_PAGE_SLICES
    } else {
        page_slices(class)
    };
    if slices == 1 {
        // SAFETY: `heap` is the calling thread's heap, in a slow path.
        let page = unsafe { stash::take_for(heap, class) };
        if !page.is_null() {
            return page;
        }
    }
    // Only before a span is taken (`empty_pages`' module doc): the walk was 30% of
    // `find_page`'s samples in a thread taking stashed pages back (docs/BENCHMARKS.md).
    // SAFETY: `heap` is the calling thread's heap, in a slow path.
    unsafe { crate::front::empty_pages::let_go_empty_pages(heap, class) };
    let Some((page, _)) = arena::alloc_span(slices, 1) else {
        return null_mut();
    };
    // SAFETY: the span is ours; set it up before publishing the owner.
    unsafe {
        let bytes = (*page).span_bytes();
        (*page).init_blocks(class, class_size(class), bytes);
        (*page).owner.store(owner_word, Ordering::Release);
    }
    page
}

/// How much of its full pages a heap keeps per class, in slices (4 pages of small
/// blocks, none of the bigger pages), instead of abandoning a page the moment it fills.
///
/// Why keep any: when a thread's live blocks of a class stay about constant (a server
/// replacing objects, larson), every page it owns is nearly full and every free opens
/// one hole. Abandoning full pages made the owner's own frees into them remote pushes
/// (CAS, notify, drain) and each hole came back through list-claim-fill-abandon, a
/// cycle per page every few dozen mallocs. Keeping them, those frees are plain local
/// ones and `find_page` finds the holes. Measured, C larson (time, against the build
/// that kept none): 2 pages 0.92-0.96, 4 pages 0.77-0.81, 8 pages 0.76-0.79,
/// unbounded 0.73.
///
/// Why a bound: a kept page's remote frees wait for its owner's next slow path of
/// the class (or the idle-heap steal, or thread exit), so until then their memory
/// serves nobody. Measured, mixed-c-rust (8 threads handing buffers around) after 50
/// rounds: 185 MiB keeping none, 193 keeping 4 pages, 198 keeping 8 pages of each
/// class and one medium page. It is a bound in bytes, so that big pages, where a
/// stranded page would cost most and churn matters least, are never kept.
pub const FULL_PAGE_SLICES_KEPT: usize = 4;

/// Allocate a block of `class` (for a request of `size` bytes) when the fast path
/// found no free block. `entry`: where the allocator was entered, for a sample's
/// stack (`profile::Entry`).
#[cold]
#[inline(never)]
pub fn malloc_slow(class: usize, size: usize, entry: profile::Entry) -> *mut u8 {
    // SAFETY: the fast path that called us is inside the heap's `in_op` window.
    if let Some(block) = unsafe { sampled_local_refill(tls::heap(), class, size, entry) } {
        return block;
    }
    let heap = ensure_heap();
    if heap.is_null() {
        return null_mut();
    }
    slow_path_enter(heap);
    // SAFETY: `heap` is this thread's heap.
    let block = unsafe {
        if (*heap).sweep_wanted.load(Ordering::Relaxed) {
            sweep(heap);
        }
        // The sample-point hook: while the heap samples, this slow path runs at every
        // sample point (see profile/sampler.rs) and serves that allocation itself. In
        // check mode every malloc comes here (no list to cut).
        let h = &mut *heap;
        let checked = h.owner_word & CHECK_TAG != 0;
        let sampling = profile::sync(&mut h.sampler, &mut h.local_mask, true);
        // Guarded sampling rides the same machinery (front/guarded.rs); not in check mode.
        let guarding = guarded::sync(&mut h.local_mask, !checked);
        let block_size = class_size(class);
        let mut sampled = null_mut();
        if sampling && profile::sample_point(&mut h.sampler, class, block_size) {
            sampled = profile::serve_sampled(size, block_size, entry);
        }
        if sampled.is_null() && guarding && guarded::sample_point(&mut h.guard, class) {
            sampled = guarded::alloc(size, block_size, entry);
        }
        if !sampled.is_null() {
            sampled
        } else if let Some(block) = shared::try_alloc(heap, class) {
            block // a thread's first blocks of a class: front/shared.rs
        } else {
            let (page, local_len) = find_page_gathered(heap, class);
            if page.is_null() {
                null_mut()
            } else {
                let block = pop(page);
                if checked {
                    check::mark_allocated(block);
                } else if sampling || guarding {
                    cut(
                        &mut *heap,
                        page,
                        (class, block_size),
                        sampling,
                        guarding,
                        local_len,
                    );
                }
                block
            }
        }
    };
    // SAFETY: as above.
    unsafe { (*heap).leave() };
    block
}

/// While a heap samples, its fast path does not refill from `local_free` (see
/// `profile::sampler`): this does it here, as cheaply, counting the blocks (and serving
/// the allocation itself at a sample point). None if the heap does not sample or the
/// current page has no such refill to give (then the full slow path runs).
///
/// # Safety
/// `heap` is the calling thread's heap (or the empty heap), inside the `in_op` window
/// its fast path entered: the same footing as the fast path's own refill.
#[inline]
unsafe fn sampled_local_refill(
    heap: *mut Heap,
    class: usize,
    size: usize,
    entry: profile::Entry,
) -> Option<*mut u8> {
    // SAFETY: per the contract; the current page is the heap's own (or the empty page,
    // whose lists are null).
    unsafe {
        let h = &mut *heap;
        if h.local_mask != 0 || !profile::in_step(&h.sampler) {
            return None;
        }
        let sampling = profile::samples(&h.sampler);
        let guarding = guarded::enabled();
        let page = h.current.get_unchecked(class).load(Ordering::Relaxed);
        if (*page).local_free.is_null() || !(*page).free.is_null() {
            return None;
        }
        let block_size = class_size(class);
        if let Some(block) = local_refill_counted(h, page, (class, block_size), sampling, guarding)
        {
            return Some(block);
        }
        if sampling && profile::sample_point(&mut h.sampler, class, block_size) {
            let block = profile::serve_sampled(size, block_size, entry);
            if !block.is_null() {
                return Some(block);
            }
        }
        if guarding && guarded::sample_point(&mut h.guard, class) {
            let block = guarded::alloc(size, block_size, entry);
            if !block.is_null() {
                return Some(block);
            }
        }
        (*page).free = (*page).local_free;
        (*page).local_free = null_mut();
        (*page).free_is_zero = false;
        let block = pop(page);
        cut(h, page, (class, block_size), sampling, guarding, Some(0));
        Some(block)
    }
}

/// `local_free` holds every free block of `page` (`free` is empty): if no sample point
/// falls among them, hand them to the fast path, this allocation and the list counted
/// at once (most refills), and pop one. None if a sample point falls among them.
///
/// # Safety
/// `h` owns `page`, its current page of `class` (blocks of `block_size`), inside the
/// `in_op` window; `local_free` non-empty and `free` empty.
#[inline(always)]
unsafe fn local_refill_counted(
    h: &mut Heap,
    page: *mut Page,
    (class, block_size): (usize, usize),
    sampling: bool,
    guarding: bool,
) -> Option<*mut u8> {
    // SAFETY: per the contract.
    unsafe {
        let blocks = profile::free_blocks(page);
        if (sampling && !profile::fits(&mut h.sampler, class, blocks, block_size))
            || (guarding && !guarded::fits(&mut h.guard, class, blocks))
        {
            return None;
        }
        (*page).free = (*page).local_free;
        (*page).local_free = null_mut();
        (*page).free_is_zero = false;
        // (Guarded sampling alone, a class it never guards: nothing to count, so the
        // owner's frees may go on `free`.)
        (*page).frees_to_local = sampling || guarded::eligible(class);
        if sampling {
            profile::charge(&mut h.sampler, class, blocks, block_size);
        }
        if guarding {
            guarded::charge(&mut h.guard, class, blocks);
        }
        Some(pop(page))
    }
}

/// While a heap samples, the fast path's two refills of an empty `free` list come
/// here (`alloc::malloc_sampled_refill_or_slow`) instead of the whole slow path: take
/// `local_free` whole, or carve the page's next batch, and if no sample point falls
/// among those blocks, hand them out counted. None if that cannot be done here (then
/// the slow path runs, to serve a sample or cut the list). Without it
/// each of those refills took the whole slow path (class, entry, heap, queue): with
/// no sample ever taken, typechecker entered it 3x as often as with profiling off
/// (callgrind), 13 K times at scale 0.05, 9 in 10 for `local_free`.
///
/// # Safety
/// `heap` is the calling thread's heap, inside the `in_op` window its fast path
/// entered; `page` its current page of the page's class, `free` empty.
#[inline(never)]
pub unsafe fn sampled_refill(heap: *mut Heap, page: *mut Page) -> Option<*mut u8> {
    // SAFETY: per the contract, the page is the heap's own.
    unsafe {
        let h = &mut *heap;
        if !profile::in_step(&h.sampler) {
            return None;
        }
        if (*page).local_free.is_null() {
            return sampled_carve(h, page);
        }
        // The fast path's other refill, denied while sampling (most entries here): the
        // common case inline, with nothing that needs registers saved (no countdown
        // draw, no holes, no guarded sampling); the rest, and the carve, in functions
        // of their own. All in one function, every refill saved and restored six
        // registers for them.
        let class = (*page).class as usize;
        // (The page's own field: `class_size(class)`, without computing it.)
        let block_size = (*page).block_size();
        debug_assert_eq!(block_size, class_size(class));
        if profile::samples(&h.sampler) && (*page).holes == 0 && !guarded::enabled() {
            // (`profile::free_blocks` without holes.)
            let blocks = ((*page).capacity as usize).saturating_sub((*page).used() as usize);
            if profile::charge_if_fits(&mut h.sampler, class, blocks as i64, block_size) {
                (*page).free = (*page).local_free;
                (*page).local_free = null_mut();
                (*page).free_is_zero = false;
                (*page).frees_to_local = true;
                return Some(pop(page));
            }
        }
        sampled_local_refill_general(h, page, (class, block_size))
    }
}

/// `sampled_refill` of `local_free` in the general case (a countdown to draw, holes,
/// guarded sampling, a sample point among the blocks).
///
/// # Safety
/// As `sampled_refill`, the heap's state in step, `local_free` non-empty.
#[inline(never)]
unsafe fn sampled_local_refill_general(
    h: &mut Heap,
    page: *mut Page,
    (class, block_size): (usize, usize),
) -> Option<*mut u8> {
    let sampling = profile::samples(&h.sampler);
    let guarding = guarded::enabled();
    // SAFETY: per the contract.
    unsafe { local_refill_counted(h, page, (class, block_size), sampling, guarding) }
}

/// `sampled_refill` for a page whose `local_free` is empty: carve its next batch, and
/// hand it out counted if no sample point falls among the blocks.
///
/// # Safety
/// As `sampled_refill`, the heap's state in step.
#[inline(never)]
unsafe fn sampled_carve(h: &mut Heap, page: *mut Page) -> Option<*mut u8> {
    // SAFETY: per the contract, the page is the heap's own.
    unsafe {
        if !(*page).can_carve_in_place() {
            return None;
        }
        let class = (*page).class as usize;
        let block_size = (*page).block_size();
        debug_assert_eq!(block_size, class_size(class));
        let sampling = profile::samples(&h.sampler);
        let guarding = guarded::enabled();
        let before = (*page).capacity;
        if !(*page).carve_in_place() {
            return None;
        }
        let blocks = ((*page).capacity - before) as i64;
        if (sampling && !profile::fits(&mut h.sampler, class, blocks, block_size))
            || (guarding && !guarded::fits(&mut h.guard, class, blocks))
        {
            // A sample point among them: park them on `local_free`, where the slow
            // path's first step (`sampled_local_refill`) serves the sample or cuts
            // the list. (Left on `free`, a sample served first would leave them there
            // uncounted for the fast path.)
            (*page).local_free = (*page).free;
            (*page).free = null_mut();
            (*page).free_is_zero = false;
            (*page).frees_to_local = true;
            return None;
        }
        // The owner's frees must not lengthen the list handed out (see `cut`); they
        // wait on `local_free` anyway if the carved blocks are known zero.
        (*page).frees_to_local |= sampling || guarded::eligible(class);
        if sampling {
            profile::charge(&mut h.sampler, class, blocks, block_size);
        }
        if guarding {
            guarded::charge(&mut h.guard, class, blocks);
        }
        Some(pop(page))
    }
}

/// `page` (current for `class`, blocks of `block_size`) is about to serve the fast
/// path: hand out its free list up to the next sample point of the profiler or of
/// guarded sampling, whichever comes first, and charge both countdowns
/// (`profile/handout.rs`). `local_len`: the length of the page's `local_free` if known
/// (`Page::gather_frees`).
///
/// # Safety
/// `heap` owns `page`, on its slow path; `local_len` as `profile::lengths` wants it.
#[inline]
unsafe fn cut(
    heap: &mut Heap,
    page: *mut Page,
    (class, block_size): (usize, usize),
    sampling: bool,
    guarding: bool,
    local_len: Option<u32>,
) {
    if !sampling && !guarded::eligible(class) {
        // Guarded sampling alone, a class it never guards: nothing to count.
        return;
    }
    // SAFETY: per the contract.
    let (on_free, local) = unsafe { profile::lengths(page, local_len) };
    let mut handed = on_free;
    // Most refills end before any sample point: no division, no walk.
    let sample_inside = sampling && !profile::fits(&mut heap.sampler, class, on_free, block_size);
    if sample_inside || guarding && !guarded::fits(&mut heap.guard, class, on_free) {
        let mut limit = i64::MAX;
        if sampling {
            limit = profile::blocks_before(&mut heap.sampler, class, block_size);
        }
        if guarding {
            limit = limit.min(guarded::blocks_before(&mut heap.guard, class));
        }
        handed = limit;
        // SAFETY: per the contract; `limit < on_free` (the list did not fit).
        unsafe { profile::end_list_at(page, on_free, local, limit) };
    }
    if sampling {
        profile::charge(&mut heap.sampler, class, handed, block_size);
    }
    if guarding {
        guarded::charge(&mut heap.guard, class, handed);
    }
}

/// Let go of every page of the heap but the current one of each class: free the unused
/// ones (the stash's too), abandon the rest (listed for any thread if they have room).
///
/// A busy heap is never taken over, yet the pages it holds besides its current ones
/// (the full pages `find_page` keeps, pages taken back by a free) only come back to
/// it on its next slow path *of their class*: remote frees into them would wait for
/// as long as the thread allocates other sizes. The purger asks for this about once
/// per purge delay, so that memory goes back within about two delays, as a sleeping
/// owner's does. Once per delay, the cost is one walk of the queues and, for pages
/// the heap still uses, claiming them back from the abandoned list.
///
/// # Safety
/// `heap` must be the calling thread's own heap, entered with `slow_path_enter`.
unsafe fn sweep(heap: *mut Heap) {
    // SAFETY: per the contract, the heap and the pages in its queues are ours.
    unsafe {
        (*heap).sweep_wanted.store(false, Ordering::Relaxed);
        let now = deadline::coarse_now_ms();
        stash::release(heap, now);
        for class in 0..CLASS_COUNT {
            let first = (*heap).queues[class].first;
            if first.is_null() {
                continue;
            }
            let mut page = (*first).next;
            while !page.is_null() {
                let next = (*page).next;
                queue_remove(heap, class, page);
                abandon::abandon(page, heap as usize, now);
                page = next;
            }
        }
    }
    COUNTERS.sweeps.fetch_add(1, Ordering::Relaxed);
    after_slow_path();
}

/// Take the first free block of `page` (which must have one).
///
/// # Safety
/// The caller must own `page` and `page.free` must be non-null.
#[inline(always)]
pub unsafe fn pop(page: *mut Page) -> *mut u8 {
    // SAFETY: per the contract.
    unsafe {
        let block = (*page).free;
        debug_assert!(!block.is_null());
        (*page).free = (*page).link(block);
        (*page).clear_link(block);
        crate::front::freed_key::clear(block);
        (*page).inc_used();
        block as *mut u8
    }
}

// ---------------------------------------------------------------------------------
// Free slow path

/// Free `block` of `page` when the fast path could not: the page is not owned by the
/// calling thread's heap, it is in check mode, or a stealer is taking it.
///
/// # Safety
/// `block` must be a block of `page` (checked, and reported if not, in check mode).
#[cold]
#[inline(never)]
pub unsafe fn free_slow(page: *mut Page, block: *mut u8) {
    let heap = tls::heap();
    let own = heap != empty_heap();
    if own {
        slow_path_enter(heap);
    }
    // SAFETY: page is a valid descriptor; ownership decides who touches what.
    unsafe {
        free_slow_inner(heap, page, block);
        if own {
            (*heap).leave();
        }
    }
}

/// Free the block of large span `page`; `moved_out`: its pages were moved out
/// (`os::move_pages`), so the span goes back uncommitted.
///
/// # Safety
/// `page` is the descriptor of a live large span whose block `block` nobody uses any
/// more, checked by the caller.
// (Inlined: a call here cost a 1 MiB malloc+free pair 19 instructions.)
#[inline(always)]
pub(crate) unsafe fn free_large(page: *mut Page, block: *mut u8, moved_out: bool) {
    // SAFETY: per the contract.
    unsafe {
        crate::process::purger::before_span_free();
        let sample = profile::freed(page, block);
        (*page).set_used(0);
        COUNTERS.large_frees.fetch_add(1, Ordering::Relaxed);
        if !sample.is_some_and(|size| profile::keep_sampled_span(page, size)) {
            if moved_out {
                arena::free_span_moved_out(page, deadline::coarse_now_ms());
            } else {
                arena::free_span(page, deadline::coarse_now_ms());
            }
        }
        after_slow_path();
    }
}

/// `free_slow` past its bookkeeping: free `block` by the page's owner word.
///
/// # Safety
/// As `free_slow`; `heap` is the calling thread's heap (or the empty heap).
unsafe fn free_slow_inner(heap: *mut Heap, page: *mut Page, block: *mut u8) {
    // SAFETY: page is a valid descriptor; ownership decides who touches what.
    unsafe {
        let mut owner = (*page).owner.load(Ordering::Acquire);
        while owner == STOLEN {
            // A stealer is taking the page from its (idle) owner: it is about to become
            // abandoned, or to return to its owner.
            os::yield_now();
            owner = (*page).owner.load(Ordering::Acquire);
        }
        if owner >= MARKER_LIMIT && owner & !CHECK_TAG == heap as usize {
            // Our own page: in check mode, or the fast path raced with a steal that was
            // undone.
            if owner & CHECK_TAG == 0 && freed_key::is_marked(block) {
                if freed_key::is_on_free_list(page, block) {
                    freed_key::report_double_free(page, block);
                    return;
                }
            } else if owner & CHECK_TAG != 0 && !check::small_free_is_valid(page, block) {
                return;
            }
            freed_key::mark(block);
            if (*page).free_local(block as *mut Block) {
                retire(heap, page);
            }
            return;
        }
        if crate::options::get().check && !check::remote_free_is_valid(page, owner, block) {
            return;
        }
        // Past a huge mapping's end, in the rest of its last window, lies no segment
        // memory: a guarded block (the pool may lie there) or another mapping's pointer,
        // as for a pointer in no segment.
        if !segment::mapping_holds(segment::segment_of_page(page), block as usize) {
            crate::front::free::free_unknown(block);
            return;
        }
        if (owner == LARGE || owner == HUGE) && block != (*page).start {
            // One block per span: a pointer that is not its start is not a block (the
            // span must not be freed under its live block).
            crate::diag::report_invalid_free(block, "invalid pointer (not the start of a block)");
            return;
        }
        match owner {
            LARGE => {
                #[cfg(feature = "secure")]
                crate::span::secure::check_large_canary(page, block);
                free_large(page, block, false);
            }
            HUGE => {
                profile::freed(page, block);
                huge::free(page);
                // Without a background purger, this is where an expired kept mapping goes.
                after_slow_path();
            }
            FREE => crate::diag::report_invalid_free(block, "block is not in use (double free?)"),
            ABANDONED
                if heap != empty_heap()
                    && (*page).last_owner.load(Ordering::Relaxed) == heap as usize
                    && (COUNTERS.threads.load(Ordering::Relaxed) <= 1
                        || queue_is_short(heap, (*page).class as usize)) =>
            {
                // Our own page that filled up: take it back so later frees are local,
                // unless we hold a spare page of the class already and other heaps
                // exist (alone, a page left abandoned only comes back to us through
                // the drainer and the abandoned list: perl rehashing hash keys made
                // a third of its frees remote pushes that way, 4.8% of its
                // instructions). Hoarding every old
                // page a thread frees into makes each heap keep its own partly used
                // pages (the sum of per-thread peaks); left abandoned, the page is
                // listed for any thread once the free below notifies a drainer.
                if protocol::claim(&(*page).owner, ABANDONED, (*heap).owner_word) {
                    reclaim(heap, page);
                    if (*page).free_local(block as *mut Block) {
                        retire(heap, page);
                    }
                } else {
                    drain::free_remote(page, block);
                }
            }
            ABANDONED if heap != empty_heap() => {
                // Ours, but we hold spare pages of the class: forget that we abandoned
                // it, so our next frees into it take `free`'s direct remote push (no
                // slow path, no queue walk: ~150 instructions less each; tree-rebuild
                // and the Rust tool of the real-programs suite free whole trees into
                // such pages). It comes back to us, or to anyone, through the abandoned
                // list. A CAS: a page re-abandoned meanwhile keeps its new last owner.
                let _ = (*page).last_owner.compare_exchange(
                    heap as usize,
                    0,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
                drain::free_remote(page, block);
            }
            _ => drain::free_remote(page, block),
        }
    }
}

/// Put a page we just claimed back into our queue for its class (not as current).
///
/// # Safety
/// `heap` is the calling thread's heap and has just claimed `page` from `ABANDONED`.
unsafe fn reclaim(heap: *mut Heap, page: *mut Page) {
    // SAFETY: we own the page.
    unsafe {
        abandon::unlist(page);
        queue_push_back(heap, (*page).class as usize, page);
    }
    COUNTERS.pages_reclaimed.fetch_add(1, Ordering::Relaxed);
}

/// A local free emptied `page`, owned by the calling thread's heap.
///
/// # Safety
/// `page` must be owned by the calling thread's heap.
#[cold]
#[inline(never)]
pub unsafe fn page_emptied(page: *mut Page) {
    let heap = tls::heap();
    slow_path_enter(heap);
    // SAFETY: per the contract. A steal that completed meanwhile took the page from us
    // (then it is no longer ours and there is nothing to do).
    unsafe {
        if (*page).owner.load(Ordering::Relaxed) & !CHECK_TAG == heap as usize {
            retire(heap, page);
        }
        (*heap).leave();
    }
}

/// A page of ours became unused: keep it if it is the only page of its class (so a
/// thread that allocates and frees one block does not churn spans), else free it. The
/// current page of a class above 8 KiB (which has no `CURRENT` flag) is kept, and the
/// heap's other empty ones are held to a budget (`empty_pages::current_page_emptied`).
///
/// # Safety
/// `heap` is the calling thread's heap and owns `page`, which is unused and not current
/// unless its class is above 8 KiB.
unsafe fn retire(heap: *mut Heap, page: *mut Page) {
    // SAFETY: we own the page and the heap.
    unsafe {
        debug_assert!(!(*page).is_current(), "the current page is never retired");
        let class = (*page).class as usize;
        if (*heap).current_page(class) == page {
            // Blocks above 8 KiB: their current page has no `CURRENT` flag.
            debug_assert!(!crate::front::heap::flags_current(class));
            crate::front::empty_pages::current_page_emptied(heap, class);
            return;
        }
        let queue = &(*heap).queues[class];
        if queue.first == page && (*page).next.is_null() {
            return;
        }
        queue_remove(heap, class, page);
        (*page).gather_frees();
        debug_assert!((*page).is_unused());
        if stash::push(heap, page) {
            return;
        }
        // Not ours any more: a late free finds a marker, not this heap (`free_span`
        // then writes FREE).
        (*page).owner.store(DRAINING, Ordering::Relaxed);
        arena::free_span(page, deadline::coarse_now_ms());
        after_slow_path();
    }
}
