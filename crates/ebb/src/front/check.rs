//! Check mode (`EBB_CHECK=1`): validation of every free.
//!
//! Heaps made in check mode tag the owner word of their pages (`CHECK_TAG`), so the
//! free fast path never matches and every free comes here; with check mode off none of
//! this code runs. What is detected, and reported as
//! `ebb: free(0x...): <what>` (then the process goes on, or aborts with
//! `EBB_ABORT_ON_ERROR=1`):
//! - a pointer outside every ebb region (always, even without check mode);
//! - a pointer inside ebb memory that is not the start of a block;
//! - a free into a span that is not in use (double free of a large/huge/retired page,
//!   always);
//! - a double free of a block still on a free list of its page, when the page is owned
//!   by the freeing thread or by nobody (for a page owned by another live thread only
//!   the block boundary is checked: its lists are that thread's private state).

use crate::diag::report_invalid_free;
use crate::handoff::drain;
use crate::span::page::{Block, Page, ABANDONED, FREE, HUGE, LARGE};
use core::sync::atomic::Ordering;

/// True if `block` is the start of a block carved in `page` (whose block size and
/// start never change while the page is in use).
fn is_block_start(page: *mut Page, block: *mut u8, carved: usize) -> bool {
    // SAFETY: page is a valid descriptor.
    unsafe {
        let start = (*page).start as usize;
        let size = (*page).block_size();
        let addr = block as usize;
        size != 0 && addr >= start && (addr - start) % size == 0 && (addr - start) / size < carved
    }
}

/// True if `block` is on the list starting at `head` (at most `limit` links).
fn on_list(mut head: *mut Block, block: *mut u8, limit: usize) -> bool {
    let mut steps = 0;
    // SAFETY: the caller owns the lists it passes.
    unsafe {
        while !head.is_null() && steps <= limit {
            if head as *mut u8 == block {
                return true;
            }
            head = (*head).next;
            steps += 1;
        }
    }
    false
}

/// Validate a free into a page the caller owns (or holds as drainer): it must be a
/// block start and not already free. Reports and returns false otherwise.
///
/// # Safety
/// The caller must own `page`.
pub unsafe fn local_free_is_valid(page: *mut Page, block: *mut u8) -> bool {
    // SAFETY: per the contract we own the page and its lists.
    unsafe {
        if !is_block_start(page, block, (*page).capacity as usize) {
            report_invalid_free(
                block,
                "pointer not allocated by ebb (not the start of a block)",
            );
            return false;
        }
        (*page).take_remote_frees();
        let limit = (*page).reserved as usize;
        if on_list((*page).free, block, limit) || on_list((*page).local_free, block, limit) {
            report_invalid_free(block, "double free");
            return false;
        }
    }
    true
}

/// Validate a free into a page the caller does not own. Returns true if the caller
/// should go on with the normal free; false if the free was reported or done here.
///
/// # Safety
/// `page` must be the descriptor `block` maps to.
pub unsafe fn remote_free_is_valid(page: *mut Page, owner: usize, block: *mut u8) -> bool {
    // SAFETY: page is a valid descriptor; ownership is taken before touching lists.
    unsafe {
        match owner {
            FREE => {
                report_invalid_free(block, "double free (its span is not in use)");
                false
            }
            LARGE | HUGE => {
                if block != (*page).start {
                    report_invalid_free(
                        block,
                        "pointer not allocated by ebb (not the start of a block)",
                    );
                    return false;
                }
                true
            }
            ABANDONED if drain::claim_for_drain(page) => {
                if local_free_is_valid(page, block) {
                    (*page).free_local(block as *mut Block);
                }
                drain::finish_drain(page, true);
                false
            }
            _ => {
                if !is_block_start(page, block, (*page).reserved as usize) {
                    report_invalid_free(
                        block,
                        "pointer not allocated by ebb (not the start of a block)",
                    );
                    return false;
                }
                true
            }
        }
    }
}

/// Validate a pointer given to `malloc_usable_size`/`realloc` in check mode.
#[cfg_attr(not(feature = "c-api"), allow(dead_code))] // the C ABI's
///
/// # Safety
/// `page` must be the descriptor `ptr` maps to.
pub unsafe fn is_live_block(page: *mut Page, ptr: *mut u8) -> bool {
    // SAFETY: reads immutable-while-in-use fields of a valid descriptor.
    unsafe {
        match (*page).owner.load(Ordering::Acquire) {
            FREE => false,
            LARGE | HUGE => ptr == (*page).start,
            _ => is_block_start(page, ptr, (*page).reserved as usize),
        }
    }
}
