//! A heap's page queues, one per size class (owner only; they keep `page_count` for the
//! stealer).
//!
//! Order: the first page is the class's current page (`Heap::current`), the one the
//! fast path allocates from. `find_page` moves a page it finds room in to the front;
//! pages taken back by a free (`reclaim`) go to the back. So full pages the heap keeps
//! (`FULL_PAGE_SLICES_KEPT`) are the ones nearest the front, i.e. the most recently
//! current: `find_page` walks from the front and keeps the first `keep_full` full pages
//! it meets, abandoning the older ones behind them.

use crate::front::heap::Heap;
use crate::process::registry;
use crate::span::deadline;
use crate::span::page::Page;
use core::sync::atomic::Ordering;

/// Push `page` at the front of its queue and make it current.
///
/// # Safety
/// The caller owns `heap` and `page`; the page is in no list and has class `class`.
pub unsafe fn queue_push_front(heap: *mut Heap, class: usize, page: *mut Page) {
    // SAFETY: the caller owns heap and page; the page is in no list.
    unsafe {
        (*heap).queues[class].push_front(page);
        (*heap).set_current(class, page);
        let count = (*heap).page_count.load(Ordering::Relaxed);
        (*heap).page_count.store(count + 1, Ordering::Relaxed);
        if count == 0 {
            // Step H1: the purger's idle walk reads only heaps that hold pages.
            registry::note_holder(core::ptr::addr_of_mut!((*heap).link));
            deadline::schedule_idle_check(deadline::coarse_now_ms());
        }
    }
}

/// Push `page` at the back of its queue (current only if the queue was empty).
///
/// # Safety
/// As `queue_push_front`.
pub unsafe fn queue_push_back(heap: *mut Heap, class: usize, page: *mut Page) {
    // SAFETY: the caller owns heap and page; the page is in no list.
    unsafe {
        if (*heap).queues[class].first.is_null() {
            queue_push_front(heap, class, page);
            return;
        }
        (*heap).queues[class].push_back(page);
        let count = (*heap).page_count.load(Ordering::Relaxed);
        (*heap).page_count.store(count + 1, Ordering::Relaxed);
    }
}

/// Take `page` out of its queue (the next page becomes current if it was).
///
/// # Safety
/// The caller owns `heap` and `page`, which is in `queues[class]`.
pub unsafe fn queue_remove(heap: *mut Heap, class: usize, page: *mut Page) {
    // SAFETY: per the contract.
    unsafe {
        queue_take_off(heap, class, page);
        (*heap).refresh_current(class);
    }
}

/// Take `page` out of its queue, leaving the tables alone: for emptying a heap whose
/// tables were cleared (`heap::abandon_all`), where `queue_remove` would make the next
/// page current again. A stealer empties a heap whose owner it proved outside every
/// call only as of its marks: the owner's malloc fast path, which trusts the table,
/// would pop from that next page while the stealer abandons it.
///
/// # Safety
/// As `queue_remove`.
pub unsafe fn queue_take_off(heap: *mut Heap, class: usize, page: *mut Page) {
    // SAFETY: the caller owns heap and page; the page is in this queue.
    unsafe {
        (*heap).queues[class].remove(page);
        let count = (*heap).page_count.load(Ordering::Relaxed);
        debug_assert!(count > 0);
        (*heap).page_count.store(count - 1, Ordering::Relaxed);
    }
}

/// How many pages of a class a heap may hold before a free into one of its old pages
/// stops taking that page back. Measured (mixed-c-rust, 8 threads): 1 spare page keeps
/// RSS flat from round 5 to 50 (+2%) at +1.5% instructions in a single-threaded
/// compiler-like workload; 8 let RSS creep (+4% and 10% more in absolute terms), and
/// unbounded reclaim crept +7% (each thread hoarding its own partly used pages).
pub const RECLAIM_QUEUE_LIMIT: usize = 2;

/// True if the heap's queue for `class` holds at most RECLAIM_QUEUE_LIMIT pages with
/// room. Full pages (the ones `find_page` keeps) do not count: they are not the
/// partly used pages whose hoarding the limit prevents, and counting them would stop
/// a thread that frees what it allocated from ever taking its old pages back.
///
/// # Safety
/// `heap` must be the calling thread's heap.
#[inline]
pub unsafe fn queue_is_short(heap: *mut Heap, class: usize) -> bool {
    // SAFETY: per the contract, the queues are ours.
    unsafe {
        let mut page = (*heap).queues[class].first;
        let mut n = 0;
        while !page.is_null() {
            n += usize::from((*page).used() < (*page).reserved);
            if n > RECLAIM_QUEUE_LIMIT {
                return false;
            }
            page = (*page).next;
        }
        true
    }
}
