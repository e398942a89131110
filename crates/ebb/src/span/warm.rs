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

/// Bring the free lists of `pages` into the cache, so that the purge that follows
/// (`Page::purge_free_blocks_into`, which walks each page's lists alone) finds their
/// link words there. On the Rust tool of the real-programs suite, after it drops 90% of
/// its trees, 83% of the purge's own time was the load of each link, one cache miss
/// after another.
///
/// A page of small blocks that are mostly free ([`sweeps_whole`]) has its carved part
/// prefetched line by line in address order: loads that depend on nothing, which the
/// core keeps many of in flight and the hardware prefetcher runs ahead of, where its
/// list, freed in random order, is a chain of dependent loads. The other pages' lists
/// are walked side by side ([`warm_lists`]).
///
/// # Safety
/// The caller owns every page (it holds them for draining) for the whole call.
pub unsafe fn warm_free_lists(pages: &[*mut Page]) {
    for &page in pages {
        // SAFETY: the caller owns the page.
        let page = unsafe { &*page };
        if sweeps_whole(page) {
            // SAFETY: the carved part of an owned page is mapped (no hole: checked).
            unsafe { prefetch_lines(page.start, page.capacity as usize * page.block_size()) };
        }
    }
    let lists = pages
        .iter()
        // SAFETY: the caller owns the page.
        .filter(|&&page| !sweeps_whole(unsafe { &*page }))
        .flat_map(|&page| {
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

/// Blocks no bigger than this may have their page swept whole: a list walk touches a
/// line per free block, a sweep every line of the page, which costs less only while
/// most lines hold free blocks and a line holds more than a block or two.
const SWEEP_MAX_BLOCK: usize = 128;

/// True if `page`'s carved part is better prefetched whole than its lists walked: small
/// blocks, at least half of them free (the purger's pages after the program dropped most
/// of what it built), and no hole (a hole's memory went back to the OS; the sweep reads
/// only mapped memory). Only where the prefetch instruction exists.
fn sweeps_whole(page: &Page) -> bool {
    let capacity = page.capacity as usize;
    let used = page.used() as usize;
    cfg!(target_arch = "x86_64")
        && page.holes == 0
        && page.block_size() <= SWEEP_MAX_BLOCK
        && capacity >= 2 * used
}

/// Prefetch every cache line of `len` bytes from `start` into the cache.
///
/// # Safety
/// The range is mapped memory (a prefetch never faults, but one of unmapped memory is
/// wasted).
#[inline]
unsafe fn prefetch_lines(start: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let mut offset = 0;
        while offset < len {
            // SAFETY: a prefetch reads nothing architecturally and never faults.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.add(offset) as *const i8) };
            offset += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, len);
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
        // Both ways of warming: pages swept whole (small blocks, mostly free) and
        // pages whose lists are walked.
        assert!(pages.iter().any(sweeps_whole) || !cfg!(target_arch = "x86_64"));
        assert!(pages.iter().any(|p| !sweeps_whole(p) && !p.free.is_null()));
        let before: Vec<_> = pages.iter().map(lists).collect();
        let ptrs: Vec<*mut Page> = pages.iter_mut().map(|p| p as *mut Page).collect();
        // SAFETY: the test owns every page.
        unsafe { warm_free_lists(&ptrs) };
        let after: Vec<_> = pages.iter().map(lists).collect();
        assert_eq!(before, after);
    }
}
