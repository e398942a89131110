//! The secure build's checks on free (`secure` feature; the rest is in `crate::secure`).
//!
//! Every free, on the fast path, before the block goes anywhere:
//! - the pointer must be the start of a block carved in its page (one multiply,
//!   `secure::is_multiple`, and one compare);
//! - the block's first word must not be a valid encoded link: a free block always
//!   holds one (its list link, encoded with the page's key), a block in use never does
//!   (the pop clears the word), so finding one is a double free, whichever list of
//!   whichever thread the block is on;
//! - with `EBB_ZERO_ON_FREE`, the block is then zeroed.
//!
//! A free that fails the test goes to [`free_rejected_and_leave`], which tells the
//! cases apart by the page's owner word: large and huge blocks (whose descriptors carry
//! no block constants) are checked there and freed as usual; everything else is
//! reported and the process aborts, whatever `EBB_ABORT_ON_ERROR` says.

use crate::front::heap::Heap;
use crate::front::slow;
use crate::secure;
use crate::size_class::MEDIUM_MAX;
use crate::span::page::{Page, FREE, HUGE, LARGE};
use core::sync::atomic::Ordering;

/// True if freeing `ptr` into `page` passes the secure checks (and the block was
/// zeroed if asked); false if the free needs a closer look.
///
/// # Safety
/// `page` is the descriptor `ptr` maps to (`segment::page_of`).
#[inline(always)]
pub unsafe fn free_passes(page: *mut Page, ptr: *mut u8) -> bool {
    // SAFETY: a descriptor's fields are readable at any time; `capacity` only grows
    // while the page holds blocks, and a block reaches its freer after it was carved
    // (the program's own synchronisation), so a stale value is never too small. The
    // block's first word is readable once it is a carved block of the page.
    unsafe {
        let start = (*page).start as usize;
        let size = (*page).block_size();
        let offset = (ptr as usize).wrapping_sub(start);
        let carved = core::ptr::read_volatile(&(*page).capacity) as usize * size;
        if offset >= carved || !secure::is_multiple(offset, (*page).block_magic) {
            return false;
        }
        let word = *(ptr as *const usize);
        if secure::looks_like_link((*page).key, start, (*page).span_bytes(), ptr as usize, word) {
            return false;
        }
        if secure::zero_on_free() && size <= MEDIUM_MAX {
            core::ptr::write_bytes(ptr, 0, size);
        }
        true
    }
}

/// A free that failed [`free_passes`]: free a large or huge block that checks out,
/// abort on anything else. Leaves the window `free` entered on `heap`.
///
/// # Safety
/// As `alloc::free`, inside the window `free` entered on `heap`; `page` is `ptr`'s.
#[cold]
#[inline(never)]
pub unsafe fn free_rejected_and_leave(ptr: *mut u8, page: *mut Page, heap: *mut Heap) {
    // SAFETY: per the contract.
    unsafe {
        free_rejected(ptr, page);
        (*heap).leave();
    }
}

/// [`free_rejected_and_leave`] without the window (first-class heaps' frees).
///
/// # Safety
/// `page` is the descriptor `ptr` maps to.
#[cold]
#[inline(never)]
pub unsafe fn free_rejected(ptr: *mut u8, page: *mut Page) {
    // SAFETY: per the contract; the descriptor's fields are readable at any time.
    unsafe {
        let start = (*page).start;
        match (*page).owner.load(Ordering::Acquire) {
            FREE => secure::fatal(
                "free",
                ptr,
                "double free or invalid pointer (its span is not in use)",
            ),
            LARGE | HUGE if ptr == start => {}
            LARGE | HUGE => {
                secure::fatal("free", ptr, "invalid pointer (not the start of its block)")
            }
            _ => {
                let offset = (ptr as usize).wrapping_sub(start as usize);
                let carved = (*page).capacity as usize * (*page).block_size();
                if offset >= carved || !secure::is_multiple(offset, (*page).block_magic) {
                    secure::fatal("free", ptr, "invalid pointer (not the start of a block)");
                }
                secure::fatal("free", ptr, "double free (the block is already free)");
            }
        }
        slow::free_slow(page, ptr);
    }
}
