//! Walking many free lists side by side, so that the walks that follow find them in
//! the cache.
//!
//! A free list is a chain of dependent loads: each link word is read from the block
//! before, so a walk of one list has one cache miss in flight at a time, and when the
//! blocks were freed on other cores (the pages the purger takes after the program
//! dropped a big structure from all its threads) every block is a miss. Walking several
//! lists in turn, a step of each, keeps one miss per list in flight.

use crate::span::page::{Block, Page};
use core::ptr::{null, null_mut};

/// Lists of free blocks [`warm_lists`] walks at once.
pub const WARM_LANES: usize = 8;

/// Walk lists of free blocks (each given as its page and first block) side by side,
/// one step of each in turn, a lane that reaches a list's end taking the next list:
/// so that a walk of each alone that follows finds their link words in the cache. A
/// list is a chain of dependent loads, one cache miss per block when the lists are of
/// pages another thread last touched: walked alone, one miss at a time; side by side,
/// up to `WARM_LANES`. Nothing is written. Used before the purger's hole walks
/// ([`warm_free_lists`]).
///
/// # Safety
/// The caller owns every page given for the whole call, and each block given heads a
/// list of free blocks of its page that nobody else changes meanwhile.
pub unsafe fn warm_lists(mut lists: impl Iterator<Item = (*const Page, *mut Block)>) {
    let mut lanes = [(null::<Page>(), null_mut::<Block>()); WARM_LANES];
    loop {
        let mut active = false;
        for (page, block) in lanes.iter_mut() {
            if block.is_null() {
                match lists.find(|&(_, head)| !head.is_null()) {
                    Some(list) => (*page, *block) = list,
                    None => continue,
                }
            } else {
                // SAFETY: a block of a free list of a page the caller owns.
                *block = unsafe { (**page).link(*block) };
            }
            active = true;
        }
        if !active {
            return;
        }
    }
}

/// Walk the free lists of `pages` side by side ([`warm_lists`]), so that the purge that
/// follows (`Page::purge_free_blocks_into`, which walks each page's lists alone) finds
/// their link words in the cache. On the Rust tool of the real-programs suite, after it
/// drops 90% of its trees, 83% of the purge's own time was the load of each link, one
/// cache miss after another.
///
/// # Safety
/// The caller owns every page (it holds them for draining) for the whole call.
pub unsafe fn warm_free_lists(pages: &[*mut Page]) {
    let lists = pages.iter().flat_map(|&page| {
        // SAFETY: the caller owns the page, so its lists are stable.
        unsafe {
            [
                (page as *const Page, (*page).free),
                (page as *const Page, (*page).local_free),
            ]
        }
    });
    // SAFETY: per the contract.
    unsafe { warm_lists(lists) };
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec::Vec;

    /// A page of `size`-byte blocks over `buf`, every block carved, `taken` of them
    /// handed out, and the list cut after `cut` blocks: the rest moved to `local_free`.
    fn page_over(buf: &mut [u8], size: usize, taken: usize, cut: usize) -> Page {
        let mut page = Page::new();
        page.start = buf.as_mut_ptr();
        page.slice_count = 1;
        page.init_blocks(crate::size_class::class_of(size), size, buf.len());
        // SAFETY: the test owns the page and its lists.
        unsafe {
            // Carve everything (`extend` carves onto an empty `free`), then one list.
            while page.extend() {
                let mut tail = page.free;
                while !page.link(tail).is_null() {
                    tail = page.link(tail);
                }
                page.set_link(tail, page.local_free);
                page.local_free = page.free;
                page.free = null_mut();
            }
            page.free = core::mem::replace(&mut page.local_free, null_mut());
            for _ in 0..taken {
                if page.free.is_null() {
                    break;
                }
                page.free = page.link(page.free);
            }
            let mut b = page.free;
            for _ in 0..cut {
                if b.is_null() || page.link(b).is_null() {
                    break;
                }
                b = page.link(b);
            }
            if !b.is_null() {
                page.local_free = page.link(b);
                page.set_link(b, null_mut());
            }
        }
        page
    }

    /// Both lists of a page, in order.
    fn lists(p: &Page) -> [Vec<usize>; 2] {
        [p.free, p.local_free].map(|head| {
            let mut out = Vec::new();
            let mut b = head;
            while !b.is_null() {
                out.push(b as usize);
                // SAFETY: test-owned lists.
                b = unsafe { p.link(b) };
            }
            out
        })
    }

    #[test]
    fn warming_the_lists_of_more_pages_than_lanes_leaves_them_as_they_were() {
        // Lists of different lengths (lanes finish at different times and take the
        // next list), pages with both lists, one with none.
        let count = 2 * WARM_LANES + 3;
        let mut bufs: Vec<Vec<u8>> = (0..count).map(|_| std::vec![0u8; 64 * 1024]).collect();
        let mut pages: Vec<Page> = bufs
            .iter_mut()
            .enumerate()
            .map(|(k, buf)| {
                let size = [16, 48, 256, 1024][k % 4];
                let taken = if k == 5 { usize::MAX } else { 7 * k };
                page_over(buf, size, taken, 3 * k)
            })
            .collect();
        assert!(pages
            .iter()
            .any(|p| !p.free.is_null() && !p.local_free.is_null()));
        assert!(pages
            .iter()
            .any(|p| p.free.is_null() && p.local_free.is_null()));
        let before: Vec<_> = pages.iter().map(lists).collect();
        let ptrs: Vec<*mut Page> = pages.iter_mut().map(|p| p as *mut Page).collect();
        // SAFETY: the test owns every page.
        unsafe { warm_free_lists(&ptrs) };
        let after: Vec<_> = pages.iter().map(lists).collect();
        assert_eq!(before, after);
    }
}
