//! Classes replaced at random get bigger pages.
//!
//! When a program replaces blocks of a class at random (a cache, a server's sessions,
//! alloc-test), each free lands on one of the class's pages at random, and only those
//! landing on the current page are handed out again while their lines are in cache (the
//! page's free list is LIFO); the rest wait on their pages until these become current,
//! long after, cold. A class of one-slice pages spread over P pages reuses one freed
//! block in P hot. So once a class shows that shape, its new pages are bigger
//! (`size_class::SPREAD_PAGE_SLICES`, 4 slices): its frees land on the current page.
//! Decided in the malloc slow path ([`count_refill`], from `slow::find_page`); the fast
//! paths are unchanged.
//!
//! Measured (docs/BENCHMARKS.md, "Classes replaced at random get bigger pages"):
//! c-alloctest's L1 data misses 11.02 M -> 9.64 M (tcmalloc 9.32 M), CPU 0.89-0.94.

use crate::front::heap::Heap;
use crate::size_class::page_slices;
use crate::span::page::Page;

/// Count a refill of `class` from `page` (which has room) in the heap's
/// `dense_refills`, and say whether the class has just turned out to be replaced at
/// random: `SPREAD_REFILLS` refills in a row from nearly full pages of one slice.
///
/// The sign: pages that see frees only here and there are nearly full when they come
/// round again (at most an eighth of their blocks free). A program that builds and
/// drops structures in phases frees many blocks of a page at once, and a fresh page
/// taken (or a roomy one found) resets the count, so it keeps its one-slice pages. So
/// does a heap that takes in other threads' frees (`remote`, here or on the fast
/// path's refill, `Heap::took_remote_frees`): a page that other threads free into
/// empties only when the last of them has, and bigger pages kept more memory waiting
/// (larson, batches of blocks freed by the next thread: +25-45% peak RSS with them,
/// whether the bigger pages came from this count or from every second page of a
/// class); their blocks come from other cores' caches anyway.
///
/// # Safety
/// `heap` is the calling thread's heap, `page` one of its pages of `class`.
#[inline]
pub(super) unsafe fn count_refill(
    heap: *mut Heap,
    class: usize,
    page: *mut Page,
    remote: bool,
) -> bool {
    // SAFETY: per the contract.
    unsafe {
        if remote {
            (*heap).took_remote_frees = true;
        }
        if page_slices(class) != 1 || (*page).slice_count != 1 {
            return false;
        }
        let count = &mut (*heap).dense_refills[class];
        let free = (*page).reserved - (*page).used();
        if (*heap).took_remote_frees || free > (*page).reserved / 8 {
            *count = 0;
            return false;
        }
        if *count >= SPREAD_REFILLS {
            return false;
        }
        *count += 1;
        *count == SPREAD_REFILLS
    }
}

/// Refills in a row from nearly full one-slice pages after which a class counts as
/// replaced at random (`count_refill`).
pub const SPREAD_REFILLS: u8 = 16;
