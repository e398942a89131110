//! Remote frees into abandoned pages, and draining them.
//!
//! A thread that frees into a page another heap owns, or nobody owns, pushes the block
//! on the page's `thread_free` list (`free_remote`). If the page is abandoned and the
//! list was empty it *notifies*: sets the page's bit in its segment's `drain_mask` and
//! raises [`DRAIN_PENDING`]. A *drainer* (the background purger, or any heap about to
//! take a page) then claims the page (`ABANDONED` → `DRAINING`), takes the remote frees
//! in, and frees the page if it is empty or lists it if it has room. Because every push
//! onto an empty list of an abandoned page notifies and every drainer empties the list
//! before it lets go and re-checks it after (`abandon::publish`), no remote free is
//! ever left without a pending notification. The steps are in `protocol`.

use crate::counters::COUNTERS;
use crate::handoff::abandon::{self, ABANDONED_LISTS};
use crate::handoff::freed_into;
use crate::protocol;
use crate::span::arena::{free_span, segments};
use crate::span::deadline;
use crate::span::page::{Block, Page, ABANDONED, DRAINING};
use crate::span::segment::{segment_of_page, DRAIN_MASK_WORDS};
use core::sync::atomic::{AtomicBool, Ordering};

/// Some segment has a bit set in its `drain_mask`.
pub static DRAIN_PENDING: AtomicBool = AtomicBool::new(false);

/// Free `block` into `page`, which the caller does not own: push it on the page's
/// remote-free list, and notify a drainer if the page is abandoned and the list was
/// empty.
///
/// # Safety
/// `block` must be a block of `page` in use, and the caller must give it up.
pub unsafe fn free_remote(page: *mut Page, block: *mut u8) {
    // SAFETY: per the contract; pushing is allowed to anyone.
    unsafe {
        if (*page).free_remote(block as *mut Block).is_null() {
            after_push_onto_empty(page);
        }
    }
}

/// The rest of [`free_remote`] when the push found the list empty: notify a drainer if
/// the page is abandoned. A push onto a list that held blocks never notifies (whoever
/// made the list non-empty did, or its owner will see it), so the fast caller
/// (`front::alloc`'s cross-thread free) pushes inline and calls only this.
///
/// # Safety
/// `page` is a page descriptor the caller just pushed a block on, finding the list empty.
#[inline]
pub unsafe fn after_push_onto_empty(page: *mut Page) {
    // SAFETY: page is a live descriptor.
    if protocol::must_notify_after_push(unsafe { &(*page).owner }, true) {
        notify(page);
    }
}

/// Ask a drainer to look at abandoned `page`, which has remote frees.
pub fn notify(page: *mut Page) {
    let seg = segment_of_page(page);
    // SAFETY: page is a descriptor inside the live segment seg.
    unsafe {
        let index = (*seg).page_index(page);
        protocol::signal(
            &(*seg).drain_mask[index / 64],
            1 << (index % 64),
            &DRAIN_PENDING,
        );
    }
    deadline::wake_for_drain();
}

/// Claim and drain every page with a pending notification. Returns whether any was
/// pending.
pub fn drain_notified() -> bool {
    if !protocol::take_signal(&DRAIN_PENDING) {
        return false;
    }
    for seg in segments() {
        for word in 0..DRAIN_MASK_WORDS {
            // SAFETY: seg is a live segment.
            let mut bits = protocol::take_signalled(unsafe { &(*seg).drain_mask[word] });
            while bits != 0 {
                let index = word * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                // SAFETY: index < 512.
                let page = unsafe { (*seg).pages.as_mut_ptr().add(index) };
                drain_page(page);
            }
        }
    }
    true
}

/// Take the remote frees of an abandoned page in; free it if it became empty, list it
/// if it has room. No-op if someone else owns the page (they will see the frees).
pub fn drain_page(page: *mut Page) {
    if !claim_for_drain(page) {
        return;
    }
    // SAFETY: we own the page (DRAINING).
    unsafe {
        if (*page).take_remote_frees() != 0 {
            // Another thread frees blocks its last owner allocated: a hint that the
            // pages that heap still holds get such frees too (`freed_into`).
            freed_into::note((*page).last_owner.load(Ordering::Relaxed));
        }
        finish_drain(page, true);
    }
}

/// Take an abandoned page for draining (`ABANDONED` -> `DRAINING`).
pub fn claim_for_drain(page: *mut Page) -> bool {
    // SAFETY: page is a descriptor in a live segment; the CAS decides ownership.
    unsafe { protocol::claim(&(*page).owner, ABANDONED, DRAINING) }
}

/// Let go of a page taken with `claim_for_drain`: free it if unused, list it if it has
/// room, and publish it as abandoned again. `took_frees`: blocks were freed into it
/// since it was listed.
///
/// # Safety
/// The caller holds the page (`DRAINING`) and has taken its remote frees in.
pub unsafe fn finish_drain(page: *mut Page, took_frees: bool) {
    COUNTERS.pages_collected.fetch_add(1, Ordering::Relaxed);
    // SAFETY: we own the page (DRAINING).
    unsafe {
        debug_assert_eq!((*page).owner.load(Ordering::Relaxed), DRAINING);
        if (*page).is_unused() {
            // A deleted first-class heap's large span: its block, if sampled, is gone.
            crate::profile::span_released(page);
            abandon::unlist(page);
            free_span(page, deadline::coarse_now_ms());
            return;
        }
        if !(*page).listed && (*page).has_room() {
            let mut lists = ABANDONED_LISTS.lock();
            abandon::list_locked(&mut lists, page, deadline::coarse_now_ms());
        } else if (*page).listed && took_frees && crate::span::holes::purged_inside(&*page) {
            // New free blocks: their insides wait out the purge delay again.
            let mut lists = ABANDONED_LISTS.lock();
            abandon::rearm_locked(&mut lists, page, deadline::coarse_now_ms());
        }
        abandon::publish(page);
    }
}
