//! The free path: a block of a page the calling thread owns goes on the page's free
//! list inline; everything else leaves through tail calls.
//!
//! free:
//!   segment = SEGMENT_MAP[ptr >> 25]; page = segment.span_page[slice];
//!   if page.owner == heap: push on page.free (page.local_free while the free list is
//!   known zero); page.used -= 1 (slow if it hits 0:
//!   the count is 0 and the page is not current, see page::CURRENT)
//!   else -> slow path (remote push, large span, huge mapping, or invalid pointer).
//!
//! The malloc side and `usable_size` are in `alloc.rs`.

use crate::diag::report_unknown;
use crate::front::freed_key;
use crate::front::guarded;
use crate::front::heap;
use crate::front::shared;
use crate::front::slow;
use crate::front::tls;
use crate::handoff::drain;
use crate::span::page::{Block, ABANDONED, CHECK_TAG, MARKER_LIMIT};
use crate::span::segment;
use core::sync::atomic::Ordering;

/// Free a block. Null is ignored.
///
/// # Safety
/// `ptr` must be null or a live block from this allocator.
#[inline(always)]
pub unsafe fn free(ptr: *mut u8) {
    let seg = segment::segment_of(ptr);
    if seg.is_null() {
        // Null returns here, not in the out-of-line call: C code frees null a lot (the
        // speed suite's `c-compiler`: 2.8 M of its frees at scale 0.1, 9 instructions
        // each in `free_unknown`'s frame, 1.7% of the program's instructions).
        if !ptr.is_null() {
            free_unknown(ptr);
        }
        return;
    }
    let heap = tls::heap();
    // SAFETY: seg is the segment holding ptr; per the contract ptr is a live block. The
    // owner check and the push happen inside the heap's `in_op` window.
    unsafe {
        (*heap).enter();
        free_entered(ptr, segment::page_of(seg, ptr), heap)
    }
}

/// [`free`] of a block whose descriptor the caller found (`realloc` moving a block).
///
/// # Safety
/// As [`free`], `ptr` not null; `page` is its descriptor.
#[inline(always)]
pub unsafe fn free_in(ptr: *mut u8, page: *mut crate::span::page::Page) {
    let heap = tls::heap();
    // SAFETY: per the contract, as in `free`.
    unsafe {
        (*heap).enter();
        free_entered(ptr, page, heap)
    }
}

/// [`free`] past the lookup, inside the window it entered on `heap`.
///
/// # Safety
/// As [`free`]; `page` is `ptr`'s descriptor, `heap` the calling thread's (entered).
#[inline(always)]
unsafe fn free_entered(ptr: *mut u8, page: *mut crate::span::page::Page, heap: *mut heap::Heap) {
    // SAFETY: per the contract. The owner check and the push happen inside the heap's
    // `in_op` window.
    unsafe {
        #[cfg(feature = "secure")]
        if !crate::front::secure::free_passes(page, ptr) {
            return crate::front::secure::free_rejected_and_leave(ptr, page, heap);
        }
        if (*page).owner.load(Ordering::Relaxed) != heap as usize {
            return free_slow_and_leave(ptr, page, heap);
        }
        if freed_key::is_marked(ptr) {
            return free_marked_and_leave(ptr, page, heap);
        }
        freed_key::mark(ptr);
        // A page that empties goes back to the arena, except the heap's current page of
        // its class (`free_local` says which: see `page::CURRENT`).
        if (*page).free_local(ptr as *mut Block) {
            return page_emptied_and_leave(heap, page);
        }
        (*heap).leave();
    }
}

/// Out of line (a tail call from `free`); leaves the window `free` entered.
///
/// The common case first: a block of a page another heap owns (a cross-thread free) is
/// pushed on its `thread_free` right here, inside the window `free` entered, without
/// the slow path's bookkeeping for the caller's own heap (which it does not touch).
/// That path calls nothing but tail calls, so it saves no registers: a push that finds
/// the list empty (`drain::after_push_onto_empty`) and every other case
/// (`free_other_and_leave`) are functions of their own.
///
/// # Safety
/// As `free`, called inside the window `free` entered on `heap`; `page` is `ptr`'s.
#[inline(never)]
unsafe fn free_slow_and_leave(
    ptr: *mut u8,
    page: *mut crate::span::page::Page,
    heap: *mut heap::Heap,
) {
    // SAFETY: forwarded from `free`; anyone may push on a page's `thread_free`.
    unsafe {
        let owner = (*page).owner.load(Ordering::Acquire);
        // `free` saw a word other than this heap's, and only this thread could make the
        // page this heap's. A heap's word, untagged (so not check mode, where every heap's
        // word carries `CHECK_TAG` and every free is validated): another heap's page.
        // The shared start pages keep the freed key (`free_other_and_leave`). Or a page
        // another heap abandoned (`free_slow` takes back only pages this heap abandoned).
        let push = if owner >= MARKER_LIMIT {
            owner & CHECK_TAG == 0 && !shared::owns(owner)
        } else if cfg!(feature = "secure") {
            // The secure build decides for a marker out of line: the options test may
            // call `options::load`, and with the encoded link taking a register more,
            // every push here would pay for saving the call's registers (11
            // instructions per cross-thread free).
            return free_marker_owner_and_leave(ptr, page, heap, owner);
        } else {
            owner == ABANDONED
                && (*page).last_owner.load(Ordering::Relaxed) != heap as usize
                && !crate::options::get().check
        };
        if push {
            if (*page).free_remote(ptr as *mut Block).is_null() {
                return after_push_onto_empty_and_leave(page, heap);
            }
            (*heap).leave();
            return;
        }
        free_other_and_leave(ptr, page, heap, owner)
    }
}

/// `free_slow_and_leave` for a page whose owner word is a marker, in the secure build
/// (the default build decides inline): the push into a page another heap abandoned,
/// else `free_other_and_leave`.
///
/// # Safety
/// As `free_slow_and_leave`; `owner` is the owner word it read.
#[inline(never)]
unsafe fn free_marker_owner_and_leave(
    ptr: *mut u8,
    page: *mut crate::span::page::Page,
    heap: *mut heap::Heap,
    owner: usize,
) {
    // SAFETY: forwarded from `free`; anyone may push on a page's `thread_free`.
    unsafe {
        if owner == ABANDONED
            && (*page).last_owner.load(Ordering::Relaxed) != heap as usize
            && !crate::options::get().check
        {
            return push_remote_and_leave(ptr, page, heap);
        }
        free_other_and_leave(ptr, page, heap, owner)
    }
}

/// The push of `free_marker_owner_and_leave`, a leaf of its own: in the same function
/// as the options test's call, its loop's extra register would make every push save
/// the call's registers.
///
/// # Safety
/// As `free_slow_and_leave`.
#[inline(never)]
unsafe fn push_remote_and_leave(
    ptr: *mut u8,
    page: *mut crate::span::page::Page,
    heap: *mut heap::Heap,
) {
    // SAFETY: forwarded from `free`; anyone may push on a page's `thread_free`.
    unsafe {
        if (*page).free_remote(ptr as *mut Block).is_null() {
            return after_push_onto_empty_and_leave(page, heap);
        }
        (*heap).leave();
    }
}

/// A cross-thread push found the page's `thread_free` empty: notify a drainer if the
/// page is abandoned (`drain::after_push_onto_empty`); leaves the window `free` entered.
///
/// # Safety
/// As `free_slow_and_leave`, right after the push.
#[inline(never)]
unsafe fn after_push_onto_empty_and_leave(
    page: *mut crate::span::page::Page,
    heap: *mut heap::Heap,
) {
    // SAFETY: forwarded.
    unsafe {
        drain::after_push_onto_empty(page);
        (*heap).leave();
    }
}

/// `free_slow_and_leave` for everything but a push into another heap's page or one
/// another heap abandoned: the shared start pages, check mode and the slow path's cases
/// (`slow::free_slow`). `owner`: the owner word it read.
///
/// # Safety
/// As `free_slow_and_leave`.
#[inline(never)]
unsafe fn free_other_and_leave(
    ptr: *mut u8,
    page: *mut crate::span::page::Page,
    heap: *mut heap::Heap,
    owner: usize,
) {
    // SAFETY: forwarded from `free`; anyone may push on a page's `thread_free`.
    unsafe {
        // Another heap's page, or an abandoned one this heap would not take back
        // (`free_slow_inner` takes back only pages it abandoned itself).
        let other = if owner >= MARKER_LIMIT {
            owner & !CHECK_TAG != heap as usize
        } else {
            owner == ABANDONED && (*page).last_owner.load(Ordering::Relaxed) != heap as usize
        };
        if other && !crate::options::get().check {
            // Blocks of shared start pages (front/shared.rs) are a thread's own first
            // blocks: their frees keep the freed key as the owner's do.
            if shared::owns(owner) {
                if freed_key::is_marked(ptr) && shared::holds_freed(page, ptr) {
                    freed_key::report_double_free(page, ptr);
                    (*heap).leave();
                    return;
                }
                freed_key::mark(ptr);
            }
            drain::free_remote(page, ptr);
        } else {
            slow::free_slow(page, ptr);
        }
        (*heap).leave();
    }
}

/// Out of line (a tail call from `free`); leaves the window `free` entered.
///
/// # Safety
/// `page` is owned by `heap`, the calling thread's, inside the window `free` entered.
#[cold]
#[inline(never)]
unsafe fn page_emptied_and_leave(heap: *mut heap::Heap, page: *mut crate::span::page::Page) {
    // SAFETY: forwarded from `free`.
    unsafe {
        slow::page_emptied(page);
        (*heap).leave();
    }
}

/// Out of line (a tail call from `free`); leaves the window `free` entered. The block
/// holds the freed key: a double free if it is on the page's free lists (reported),
/// else a live block whose program stored the key value, freed as usual.
///
/// # Safety
/// As `free`; `page` is `ptr`'s, owned by `heap`, inside the window `free` entered.
#[cold]
#[inline(never)]
unsafe fn free_marked_and_leave(
    ptr: *mut u8,
    page: *mut crate::span::page::Page,
    heap: *mut heap::Heap,
) {
    // SAFETY: forwarded from `free`.
    unsafe {
        if freed_key::is_on_free_list(page, ptr) {
            freed_key::report_double_free(page, ptr);
            (*heap).leave();
            return;
        }
        if (*page).free_local(ptr as *mut Block) {
            return page_emptied_and_leave(heap, page);
        }
        (*heap).leave();
    }
}

/// `free` of a pointer in no ebb segment, not null: a guarded block, or not ours. Also
/// the slow path's answer for a pointer past a huge mapping's end, in the rest of its
/// last window (`segment::mapping_holds`): the OS may have put the guarded pool there.
#[cold]
#[inline(never)]
pub(crate) fn free_unknown(ptr: *mut u8) {
    debug_assert!(!ptr.is_null());
    let marker = 0u8;
    if !guarded::free(ptr, crate::profile::Entry::here(&marker)) {
        report_unknown("free", ptr, segment::in_map_range(ptr));
    }
}
