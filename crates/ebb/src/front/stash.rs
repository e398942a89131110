//! The stash: a few empty one-slice pages a heap keeps for its next pages.
//!
//! A page of small blocks that a free empties (not the class's current page, which
//! stays) used to go back to the process-wide arena at once (`slow::retire`), and the
//! heap's next page came from the arena again. A thread that allocates a batch of
//! blocks and then frees the batch (a request's objects, a parsed file's tree, the
//! `sweep` workload's malloc-1000-then-free-1000) paid that round trip for every page of
//! every batch: `SPAN_LOCK` twice, a search of the slice bitmaps, and a page carved
//! from whatever the arena handed out, which with two threads was as often as not the
//! page the *other* thread had just given back, its lines in the other core's cache.
//! Measured at 1 KiB blocks, batches of 1,000 (`sweep`'s shape, 400,000 blocks a
//! thread; the batch phase alone, medians of 6): one thread 6.3 ms, tcmalloc 4.5;
//! two threads at once 16 ms, tcmalloc 7.5, mimalloc 2 9.4.
//!
//! So `retire` first offers the page here: a heap keeps a few empty
//! one-slice pages (of any class) and `slow::take_page` takes one before it asks the
//! arena (after the abandoned pages of the class, which hold live blocks and are
//! reused first so that partly used pages fill up). A stashed page of the class asked
//! for is used as it is, its blocks carved and on its free lists, as if it had stayed
//! in the queue; another is re-initialised for the class, as a page fresh from the
//! arena is.
//!
//! Bounded in memory: a heap's stash keeps [`STASH_MIN_PAGES`] slices (1 MiB) until the
//! heap's batches show they need more: when a page was turned away by the full stash
//! and the heap then finds the stash empty when it needs a page, the same batch went
//! through the arena after all, and the bound doubles, up to [`STASH_MAX_PAGES`] (4
//! MiB, tcmalloc's bound for one thread's cache). A batch of a thousand 4 KiB blocks
//! spans 63 pages: with 16 its frees gave 47 back to the arena and its next mallocs
//! took 47 again (`bench/callgrind/batch.c`, `batch 4096 400000 0`, medians of 15
//! interleaved: 19.5 ms, tcmalloc 14.7; growing to 64: 14.1; on two threads 31.1, 23.8,
//! 19.9). A heap that freed one big batch once keeps 1 MiB of it from the other
//! threads, not 4. What the stash holds goes back to the arena, and its bound to the
//! minimum, wherever the heap lets go of pages it is not using: the purger's sweep of a
//! busy heap (about once per purge delay: `slow::sweep`), a takeover of an idle one and
//! thread exit (`heap::abandon_all`), and `ebb::collect`
//! (`empty_pages::release_unused_pages`). Stashed pages count in the heap's
//! `page_count`, so the purger's idle walk finds a heap that holds nothing else.
//!
//! A stashed page's owner word is `FREE` (it holds no block): a free into it is
//! reported as a free of memory not in use, as for a page in the arena, and the
//! reports count it as an empty page. The secure build keeps no stash (its spans'
//! guard pages are set up by the arena's hand-out).

use crate::front::heap::Heap;
use crate::process::registry;
use crate::size_class::class_size;
use crate::span::page::{Page, DRAINING, FREE};
use crate::span::{arena, deadline};
use core::ptr::null_mut;
use core::sync::atomic::Ordering;

/// Empty one-slice pages a heap's stash starts with and returns to (1 MiB of 64 KiB
/// slices). Enough for a batch of a thousand 1 KiB blocks; a bound, since these pages
/// serve no other heap until the heap lets them go.
pub const STASH_MIN_PAGES: u32 = 16;

/// The most a heap's stash grows to (4 MiB): a batch of a thousand 4 KiB blocks.
pub const STASH_MAX_PAGES: u32 = 64;

/// Doublings from `STASH_MIN_PAGES` to `STASH_MAX_PAGES`.
pub const MAX_DOUBLINGS: u8 = (STASH_MAX_PAGES / STASH_MIN_PAGES).ilog2() as u8;
const _: () = assert!(STASH_MIN_PAGES << MAX_DOUBLINGS == STASH_MAX_PAGES);

/// How many pages `heap`'s stash keeps now.
///
/// # Safety
/// `heap` is the calling thread's heap, or one the caller has exclusive use of.
pub unsafe fn bound(heap: *const Heap) -> u32 {
    // SAFETY: per the contract.
    let doublings = unsafe { (*heap).stash_doublings };
    debug_assert!(doublings <= MAX_DOUBLINGS);
    STASH_MIN_PAGES << doublings
}

/// Keep `page`, emptied and out of every queue, in `heap`'s stash. False if the stash
/// is full or the page is not a one-slice page (the caller gives it to the arena).
///
/// # Safety
/// `heap` is the calling thread's heap, entered for a slow path, and owns `page`,
/// which is unused (its frees gathered) and in no list.
pub unsafe fn push(heap: *mut Heap, page: *mut Page) -> bool {
    if cfg!(feature = "secure") {
        return false;
    }
    // SAFETY: per the contract the heap and the page are ours.
    unsafe {
        debug_assert!((*page).is_unused());
        debug_assert!(!(*page).listed);
        if (*page).slice_count != 1 {
            return false;
        }
        let bound = bound(heap);
        debug_assert!((*heap).stash_len <= bound);
        if (*heap).stash_len >= bound {
            (*heap).stash_overflowed = true;
            return false;
        }
        (*page).owner.store(FREE, Ordering::Relaxed);
        // When it was last used, for `release` (the arena reads `freed_at` only for
        // free slices, which this page's are not).
        (*page)
            .freed_at
            .store(deadline::coarse_now_ms(), Ordering::Relaxed);
        (*page).next = (*heap).stash;
        (*page).prev = null_mut();
        (*heap).stash = page;
        (*heap).stash_len += 1;
        let count = (*heap).page_count.load(Ordering::Relaxed);
        (*heap).page_count.store(count + 1, Ordering::Relaxed);
        if count == 0 {
            // As `queue::queue_push_front`'s step H1: the purger's idle walk reads only
            // heaps that hold pages.
            registry::note_holder(core::ptr::addr_of_mut!((*heap).link));
            deadline::schedule_idle_check(deadline::coarse_now_ms());
        }
    }
    true
}

/// Take a stashed page, one of `class` if one of the most recently stashed
/// `STASH_MIN_PAGES` is (then `true`: its blocks are
/// carved and all free, its lists as the last free left them, so it is used as it is),
/// else the most recently stashed (`false`: the caller initialises it with
/// `Page::init_blocks`); null if the stash is empty. The owner word is `FREE` until
/// the caller publishes its own.
///
/// # Safety
/// `heap` is the calling thread's heap, entered for a slow path.
pub unsafe fn take(heap: *mut Heap, class: usize) -> (*mut Page, bool) {
    // SAFETY: per the contract the heap and its stash are ours.
    unsafe {
        // At most `STASH_MIN_PAGES` descriptors read for a page of the class, as before
        // the bound could grow: a grown stash of other classes' pages costs no more
        // than a small one to pass over (taking the head then re-carves it).
        let mut prev: *mut Page = null_mut();
        let mut page = (*heap).stash;
        let mut looked = 0;
        while !page.is_null() && (*page).class as usize != class {
            looked += 1;
            if looked == STASH_MIN_PAGES {
                page = null_mut();
                break;
            }
            prev = page;
            page = (*page).next;
        }
        let same_class = !page.is_null();
        if !same_class {
            prev = null_mut();
            page = (*heap).stash;
            if page.is_null() {
                return (null_mut(), false);
            }
        }
        if prev.is_null() {
            (*heap).stash = (*page).next;
        } else {
            (*prev).next = (*page).next;
        }
        (*heap).stash_len -= 1;
        (*page).next = null_mut();
        let count = (*heap).page_count.load(Ordering::Relaxed);
        debug_assert!(count > 0);
        (*heap).page_count.store(count - 1, Ordering::Relaxed);
        debug_assert_eq!((*page).owner.load(Ordering::Relaxed), FREE);
        debug_assert_eq!((*page).slice_count, 1);
        debug_assert!((*page).is_unused());
        (page, same_class)
    }
}

/// Take a stashed page for a page of `class` and publish it as `heap`'s (owned, in no
/// queue), or null if the stash is empty: one of `class` as it is, another carved
/// again for `class`.
///
/// # Safety
/// `heap` is the calling thread's heap, entered for a slow path, and `class` one of
/// one-slice pages.
pub unsafe fn take_for(heap: *mut Heap, class: usize) -> *mut Page {
    // SAFETY: per the contract.
    unsafe {
        let (page, carved) = take(heap, class);
        if page.is_null() {
            grow_if_outrun(heap);
            return page;
        }
        if !carved {
            // Its blocks were written: carving it again must not take them for zero
            // (calloc would skip its memset).
            (*page).is_zero = false;
            let bytes = (*page).span_bytes();
            (*page).init_blocks(class, class_size(class), bytes);
        }
        (*page).owner.store((*heap).owner_word, Ordering::Release);
        page
    }
}

/// The stash is empty and the heap needs a page: if the stash turned pages away since
/// its bound last grew, those went to the arena and this one will come from it, a
/// round trip the stash is for. Double the bound (up to `STASH_MAX_PAGES`).
///
/// # Safety
/// `heap` is the calling thread's heap, entered for a slow path.
unsafe fn grow_if_outrun(heap: *mut Heap) {
    // SAFETY: per the contract the heap is ours.
    unsafe {
        if (*heap).stash_overflowed {
            (*heap).stash_overflowed = false;
            (*heap).stash_doublings = ((*heap).stash_doublings + 1).min(MAX_DOUBLINGS);
        }
    }
}

/// Give every stashed page back to the arena, unused since `unused_since` or since it
/// was stashed, whichever came first: a heap taken over once idle for the purge delay
/// (`unused_since` is when it fell quiet) or swept while busy had stopped using these
/// pages before, and counting their delay from then lets the retention scan give them
/// back with the pages the heap emptied before it fell quiet. (From `unused_since`
/// alone, the Rust tool of the real-programs suite still held 1.4 MiB of them as free
/// spans waiting for their delay 1.85 s after dropping 90% of its trees.)
///
/// # Safety
/// The caller has exclusive use of `heap`: its owner in a slow path, or a stealer that
/// proved the owner idle (`heap::abandon_all`).
pub unsafe fn release(heap: *mut Heap, unused_since: u64) {
    // SAFETY: per the contract the heap is ours. Its batches earn a bigger stash again.
    unsafe {
        (*heap).stash_doublings = 0;
        (*heap).stash_overflowed = false;
    }
    loop {
        // SAFETY: per the contract.
        let (page, _) = unsafe { take(heap, usize::MAX) };
        if page.is_null() {
            break;
        }
        // SAFETY: a stashed page is ours and in no list; `free_span` wants a holder's
        // marker in the owner word, not `FREE`.
        unsafe {
            let stashed_at = (*page).freed_at.load(Ordering::Relaxed);
            (*page).owner.store(DRAINING, Ordering::Relaxed);
            arena::free_span(page, unused_since.min(stashed_at));
        }
    }
}
