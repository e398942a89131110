//! The list a sampling heap's slow path hands to the fast path (see `sampler`): the
//! page's `free` list, cut so the fast path runs dry at the next sample point, counted
//! without walking it.
//!
//! The page's free blocks number `capacity - used` (less those in purged holes) between
//! `free` and `local_free`. So `free`'s length is known without a walk whenever
//! `local_free`'s is: when it is empty, or when it holds just the remote frees the
//! slow path's gather took in (their count comes with the list's head word,
//! `Page::gather_frees`). Then `local_free` stays where it is, parked for the next
//! refill, instead of being joined to `free` by a walk to its tail: with cross-thread
//! frees (larson) that walk read every block another core had just freed, one cache
//! miss after another, and was most of the profiler's cost there (`perf`: 87% of the
//! old cut's time, 12% of the run's, with no sample ever taken). Only when both lists
//! hold the owner's frees (a page claimed from another heap) are they walked, both
//! at once, as far as the shorter one goes.
//!
//! The walk to a cut happens only when the sample point falls inside the list: at the
//! default 512 KiB rate, about once per sample.

use crate::span::page::{Block, Page};
use core::ptr::null_mut;

/// Hand `page`'s `free` list (the block just popped off it already counted) to the
/// fast path, at most `limit` blocks of it: the rest goes to `local_free`, ahead of
/// what waits there. Sets `frees_to_local`, so the owner's frees wait on `local_free`
/// rather than lengthen (LIFO) the list being counted down. Returns the blocks left on
/// `free`. `local_len`: the length of `local_free` if known (`Page::gather_frees`).
///
/// # Safety
/// The caller owns `page` (its heap's slow path), whose lists hold `capacity - used`
/// blocks between them, less those in purged holes; if `local_len` is given, it is the
/// length of `local_free`.
pub unsafe fn hand_out(page: *mut Page, local_len: Option<u32>, limit: i64) -> i64 {
    // SAFETY: per the contract.
    unsafe {
        let (on_free, local) = lengths(page, local_len);
        if on_free <= limit {
            on_free
        } else {
            end_list_at(page, on_free, local, limit);
            limit
        }
    }
}

/// The first half of [`hand_out`]: set `frees_to_local`, move `local_free` to `free` if
/// the pop emptied it, and return the lengths of `free` and `local_free`. The caller
/// hands `free` out whole, or ends it with [`end_list_at`].
///
/// # Safety
/// As [`hand_out`].
#[inline(always)]
pub unsafe fn lengths(page: *mut Page, local_len: Option<u32>) -> (i64, i64) {
    // SAFETY: per the contract, the lists are ours to relink.
    unsafe {
        let page = &mut *page;
        // Frees after the hand-out must not extend the list the fast path counts down.
        page.frees_to_local = true;
        if page.free.is_null() {
            // The popped block was the last on `free`: the waiting frees go next.
            page.free = page.local_free;
            page.local_free = null_mut();
            page.free_is_zero = false;
        }
        if page.free.is_null() {
            return (0, 0);
        }
        let total = free_blocks(page);
        let local = if page.local_free.is_null() {
            0
        } else {
            match local_len {
                Some(n) => n as i64,
                None => total - free_len_in_step(page, total),
            }
        };
        debug_assert!(total > local);
        (total - local, local)
    }
}

/// The free blocks on `page`'s two lists: `capacity - used`, less the blocks in purged
/// holes, which are on no list (rare: a page purged while idle).
///
/// # Safety
/// The caller owns `page`.
#[inline(always)]
pub unsafe fn free_blocks(page: *const Page) -> i64 {
    // SAFETY: per the contract.
    let page = unsafe { &*page };
    let in_holes = if page.holes != 0 {
        crate::span::holes::hole_blocks(page)
    } else {
        0
    };
    (page.capacity as usize)
        .saturating_sub(page.used() as usize)
        .saturating_sub(in_holes) as i64
}

/// The sample point falls inside `free` (`on_free` blocks, `local` on `local_free`):
/// end it after `limit` blocks, the rest parked on `local_free`.
///
/// # Safety
/// As [`hand_out`], after [`lengths`] returned `(on_free, local)`; `limit < on_free`.
#[cold]
pub unsafe fn end_list_at(page: *mut Page, on_free: i64, local: i64, limit: i64) {
    debug_assert!((0..on_free).contains(&limit));
    // SAFETY: per the contract, the lists are ours to relink.
    unsafe {
        let page = &mut *page;
        let rest = if limit == 0 {
            core::mem::replace(&mut page.free, null_mut())
        } else {
            let mut last: *mut Block = page.free;
            for _ in 1..limit {
                last = page.link(last);
            }
            let rest = page.link(last);
            page.set_link(last, null_mut());
            rest
        };
        debug_assert!(!rest.is_null());
        if page.local_free.is_null() {
            page.local_free = rest;
        } else if local < on_free - limit {
            // Walk the shorter list to its tail.
            let tail = tail_of(page, page.local_free);
            page.set_link(tail, rest);
        } else {
            let tail = tail_of(page, rest);
            page.set_link(tail, page.local_free);
            page.local_free = rest;
        }
    }
}

/// The length of `free`, both lists non-empty and neither length known: walk them in
/// step as far as the shorter goes (its length gives the other's).
///
/// # Safety
/// The caller owns the page; its lists hold `total` blocks between them.
unsafe fn free_len_in_step(page: &Page, total: i64) -> i64 {
    let (mut on_free, mut on_local) = (page.free, page.local_free);
    let mut n = 0;
    // SAFETY: per the contract, both lists are the owner's, null-terminated.
    unsafe {
        loop {
            on_free = page.link(on_free);
            on_local = page.link(on_local);
            n += 1;
            if on_free.is_null() {
                return n;
            }
            if on_local.is_null() {
                return total - n;
            }
        }
    }
}

/// The last block of a non-empty list of `page`.
///
/// # Safety
/// The caller owns the page and `list` is one of its free lists (or part of one).
unsafe fn tail_of(page: &Page, list: *mut Block) -> *mut Block {
    let mut tail = list;
    // SAFETY: per the contract.
    unsafe {
        while !page.link(tail).is_null() {
            tail = page.link(tail);
        }
    }
    tail
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use crate::span::page::list_len;
    use std::vec::Vec;

    /// A full page of 64 blocks of 64 bytes over `buf`, every block handed out.
    fn full_page(buf: &mut [u8]) -> (Page, Vec<*mut Block>) {
        let mut page = Page::new();
        page.start = buf.as_mut_ptr();
        page.slice_count = 1;
        page.init_blocks(crate::size_class::class_of(64), 64, buf.len());
        assert!(page.extend());
        let mut taken = Vec::new();
        while !page.free.is_null() {
            let block = page.free;
            // SAFETY: the test owns the page.
            page.free = unsafe { page.link(block) };
            page.inc_used();
            taken.push(block);
        }
        (page, taken)
    }

    /// A full page whose owner freed 7 blocks (waiting on `local_free`, as while
    /// sampling) and another thread 5, gathered, one block popped for the slow path:
    /// `free` holds 6 and `local_free` the 5 remote ones.
    fn gathered(buf: &mut [u8]) -> (Page, Option<u32>) {
        let (mut page, taken) = full_page(buf);
        page.frees_to_local = true;
        // SAFETY: the blocks are in use.
        unsafe {
            for &block in &taken[..7] {
                page.free_local(block);
            }
            for &block in &taken[7..12] {
                page.free_remote(block);
            }
        }
        let local_len = page.gather_frees();
        let block = page.free;
        // SAFETY: the test owns the page; `free` holds the owner's 7.
        page.free = unsafe { page.link(block) };
        page.inc_used();
        (page, local_len)
    }

    #[test]
    fn counts_free_without_the_remote_frees_parked_on_local_free() {
        let mut buf = [0u8; 4096];
        let (mut page, local_len) = gathered(&mut buf);
        assert_eq!(local_len, Some(5), "gather_frees knows the remote count");
        let parked = page.local_free;
        // SAFETY: the test owns the page.
        let handed = unsafe { hand_out(&mut page, local_len, i64::MAX) };
        assert_eq!(handed, 6);
        assert_eq!(list_len(&page, page.free), 6);
        assert_eq!(page.local_free, parked, "the remote frees are not joined");
        assert_eq!(list_len(&page, page.local_free), 5);
        assert!(page.frees_to_local);
    }

    #[test]
    fn counts_in_step_when_neither_length_is_known() {
        let mut buf = [0u8; 4096];
        let (mut page, _) = gathered(&mut buf);
        // SAFETY: the test owns the page.
        let handed = unsafe { hand_out(&mut page, None, i64::MAX) };
        assert_eq!(handed, 6);
        assert_eq!(list_len(&page, page.free), 6);
        assert_eq!(list_len(&page, page.local_free), 5);
    }

    #[test]
    fn cuts_at_the_limit_and_keeps_every_block() {
        for limit in [0, 1, 2, 5] {
            let mut buf = [0u8; 4096];
            let (mut page, local_len) = gathered(&mut buf);
            // SAFETY: the test owns the page.
            let handed = unsafe { hand_out(&mut page, local_len, limit) };
            assert_eq!(handed, limit);
            assert_eq!(list_len(&page, page.free) as i64, limit);
            assert_eq!(list_len(&page, page.local_free) as i64, 11 - limit);
        }
    }

    #[test]
    fn gather_frees_does_not_guess_when_both_lists_hold_the_owners_frees() {
        let mut buf = [0u8; 4096];
        let (mut page, taken) = full_page(&mut buf);
        // SAFETY: the blocks are in use.
        unsafe {
            page.free_local(taken[0]); // on `free` (LIFO)
            page.frees_to_local = true;
            page.free_local(taken[1]); // on `local_free`
            page.free_remote(taken[2]);
        }
        assert_eq!(page.gather_frees(), None);
    }
}
