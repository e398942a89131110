//! Holes: OS pages inside a page of small blocks that hold no live block, given back to
//! the OS while the page's survivors keep it in use.
//!
//! A 64 KiB page with one live 48-byte node pins sixteen 4 KiB OS pages, fifteen of
//! which may hold only free blocks. When such a page has sat unchanged for the purge
//! delay (its owner went idle and was taken over, or nobody claimed it off the abandoned
//! list), [`purge`] finds the OS pages every block of which is free, takes the blocks
//! overlapping them off the free lists (after `MADV_DONTNEED` their link words would
//! read as zero), decommits them and records them in the page's `holes` mask. The blocks
//! in a hole belong to nobody: neither handed out (`used`) nor on a list.
//!
//! The page refills a hole only when it needs the space: `Page::extend`, which runs when
//! the free lists are dry, hands out the blocks of the lowest run of holes
//! ([`refill`]) before it carves new ones. A whole run at a time, so a block that
//! straddles two hole OS pages is never half refilled: every block overlapping a set
//! bit of `holes` is off the lists, every other free block is on one.
//!
//! Pages of one slice (blocks up to 8 KiB) have one bit per 4 KiB OS page. Pages of
//! bigger blocks (`PURGE_INSIDE_MIN`) have one bit per block if they hold at most 32
//! blocks (a free block goes back whole but for the OS pages it shares with its
//! neighbours), else one per 32nd of the span ([`units`]); their free blocks left on
//! the lists have their insides purged per block (`Page::purge_free_blocks`). The mask
//! is the owner's, like the free lists, so it adds no concurrent state: whoever may
//! touch `free` may touch `holes`.

use crate::span::block_divisor::BlockDivisor;
use crate::span::decommit_batch::DecommitBatch;
use crate::span::page::{Block, Page, PURGE_INSIDE_MIN};
use crate::span::segment::SLICE_SIZE;
use core::ptr::null_mut;

/// `Page::holes`: one bit per unit (an OS page, or a 32nd of a big-block page).
pub type HoleMask = u32;
/// Bits in `Page::holes`.
pub const MAX_OS_PAGES: usize = HoleMask::BITS as usize;
/// Blocks in a page of small blocks, at most (8-byte blocks in a page of a class
/// replaced at random, `size_class::SPREAD_PAGE_SLICES`).
const MAX_BLOCKS: usize =
    crate::size_class::SPREAD_PAGE_SLICES * SLICE_SIZE / crate::size_class::MIN_BLOCK;

/// What one bit of `Page::holes` stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Units {
    /// `1 << shift` bytes of the span (an OS page, or a 32nd of a big-block page).
    Bytes(u32),
    /// One block (pages of big blocks with at most 32 of them).
    Blocks,
}

/// How `page.holes` divides `page`, or None if the page cannot have holes. A page of
/// one slice (blocks up to 8 KiB): one OS page per bit; a bigger page of such blocks
/// (a class replaced at random, `size_class::SPREAD_PAGE_SLICES`): a 32nd of the span
/// (8 KiB). A page of big blocks (more than
/// 8 KiB, 8 to 64 slices, at most 64 blocks): one block per bit if it has at most 32,
/// so a free block goes back whole, link word and all, whatever its neighbours hold
/// (only the OS pages it shares with them stay); otherwise a 32nd of the span rounded
/// up to a power of two (16 KiB for 8 slices), so a run of free blocks goes back whole,
/// where `Page::purge_free_blocks` keeps the OS page holding each free block's link
/// word.
#[inline]
pub fn units(page: &Page) -> Option<Units> {
    let os_page = crate::os::page_size();
    if os_page >= SLICE_SIZE || SLICE_SIZE / os_page > MAX_OS_PAGES {
        return None;
    }
    let os_shift = os_page.trailing_zeros();
    if page.slice_count == 1 && page.block_size() < PURGE_INSIDE_MIN {
        return Some(Units::Bytes(os_shift));
    }
    // The bigger pages of small blocks of a class replaced at random
    // (`size_class::SPREAD_PAGE_SLICES`): a 32nd of the span.
    if page.block_size() < PURGE_INSIDE_MIN {
        debug_assert!(page.slice_count as usize <= crate::size_class::SPREAD_PAGE_SLICES);
        let unit = (page.span_bytes() / MAX_OS_PAGES).next_power_of_two();
        return Some(Units::Bytes(unit.trailing_zeros().max(os_shift)));
    }
    if page.slice_count > 1 && page.block_size() >= PURGE_INSIDE_MIN {
        if page.reserved as usize <= MAX_OS_PAGES {
            return Some(Units::Blocks);
        }
        let unit = (page.span_bytes() / MAX_OS_PAGES).next_power_of_two();
        return Some(Units::Bytes(unit.trailing_zeros().max(os_shift)));
    }
    None
}

/// True if `page` (in use, blocks carved) is of the kind that can have holes.
#[inline]
pub fn can_have_holes(page: &Page) -> bool {
    units(page).is_some()
}

/// True if the free blocks of `page` are purged inside after the purge delay: by holes,
/// or block by block for big blocks.
#[inline]
pub fn purged_inside(page: &Page) -> bool {
    page.block_size() >= PURGE_INSIDE_MIN || can_have_holes(page)
}

/// The units block `index` overlaps, as a mask.
#[inline]
fn units_of(index: usize, size: usize, units: Units) -> HoleMask {
    let shift = match units {
        Units::Blocks => return 1 << index,
        Units::Bytes(shift) => shift,
    };
    let first = (index * size) >> shift;
    let last = ((index + 1) * size - 1) >> shift;
    let count = last - first + 1;
    (((1u64 << count) - 1) << first) as HoleMask
}

/// Give back the OS pages of `page` that hold no live block, take their blocks off the
/// free lists and record them in `page.holes`. Returns the bytes decommitted.
///
/// Blocks on the remote-free list count as live (the list is the other threads'); the
/// callers take it in first. Owner only. (The purger's paths gather many pages'
/// decommits into one batch with [`purge_into`].)
#[cfg(test)]
pub fn purge(page: &mut Page) -> usize {
    let mut batch = DecommitBatch::new();
    // SAFETY: the batch is finished before we return, while we still own the page.
    unsafe { purge_into(page, &mut batch) };
    batch.finish()
}

/// [`purge`], the decommits added to `batch` (the holes are recorded and their blocks
/// unlinked at once).
///
/// # Safety
/// Owner only, and `batch` is finished before the page's ownership is given up: until
/// then the holes must not be refilled.
pub unsafe fn purge_into(page: &mut Page, batch: &mut DecommitBatch) {
    let Some(units) = units(page) else {
        return;
    };
    if page.capacity == 0 {
        return;
    }
    let size = page.block_size();
    let start = page.start as usize;
    let capacity = page.capacity as usize;
    debug_assert!(capacity <= MAX_BLOCKS);
    // One bit per free block: on a list, or in a hole already.
    let mut free = [0u64; MAX_BLOCKS / 64];
    let mut mark = |i: usize| free[i / 64] |= 1 << (i % 64);
    let mut listed = 0;
    let divisor = BlockDivisor::new(size);
    for head in [page.free, page.local_free] {
        let mut block = head;
        while !block.is_null() {
            let offset = block as usize - start;
            debug_assert!(offset % size == 0 && offset / size < capacity);
            mark(divisor.index(offset));
            listed += 1;
            // SAFETY: blocks on the owner's lists are free and ours.
            block = unsafe { page.link(block) };
        }
    }
    let old = page.holes;
    if old != 0 {
        for i in 0..capacity {
            if units_of(i, size, units) & old != 0 {
                mark(i);
            }
        }
    }
    let is_free = |i: usize| free[i / 64] & (1 << (i % 64)) != 0;
    // A unit is a hole if it holds a carved block and every block it holds is free.
    let span = page.span_bytes();
    let os_pages = match units {
        Units::Bytes(shift) => span.div_ceil(1 << shift),
        Units::Blocks => capacity,
    };
    debug_assert!(os_pages <= MAX_OS_PAGES);
    let mut new: HoleMask = 0;
    for j in 0..os_pages {
        if old & (1 << j) != 0 {
            continue;
        }
        let (first, last) = match units {
            Units::Bytes(shift) => ((j << shift) / size, (((j + 1) << shift) - 1) / size),
            Units::Blocks => (j, j),
        };
        if first >= capacity {
            break; // never carved: the tail, not a hole
        }
        let last = last.min(capacity - 1);
        if (first..=last).all(is_free) {
            new |= 1 << j;
        }
    }
    // A page at least half free tells whether the class's survivors leave holes
    // (`hole_yield`); a fuller one would have few either way.
    if page.slice_count == 1 && listed * 2 >= capacity {
        crate::span::hole_yield::record(page.class as usize, new != 0);
    }
    if new == 0 {
        return;
    }
    // Unlink before decommitting: the walk reads link words inside the holes.
    // SAFETY: the lists are the owner's and hold blocks of this page.
    unsafe {
        page.free = without_holes(page, page.free, size, units, new);
        page.local_free = without_holes(page, page.local_free, size, units, new);
    }
    page.holes = old | new;
    let mut j = 0;
    while j < os_pages {
        if new & (1 << j) == 0 {
            j += 1;
            continue;
        }
        let run_start = j;
        while j < os_pages && new & (1 << j) != 0 {
            j += 1;
        }
        let (from, to) = match units {
            // The last unit may end past the span (units are powers of two; 9-slice
            // spans are not): clamp. Spans are slice-aligned, so the range is whole OS
            // pages.
            Units::Bytes(shift) => (run_start << shift, (j << shift).min(span)),
            // A run of blocks: the whole OS pages inside it (the pages at its ends may
            // hold a neighbour's bytes).
            Units::Blocks => {
                let os_page = crate::os::page_size();
                (
                    (run_start * size).next_multiple_of(os_page),
                    (j * size) & !(os_page - 1),
                )
            }
        };
        if from < to {
            // SAFETY: every block overlapping these units is free and off every list
            // (and the uncarved tail holds nothing), so no live data and no link word
            // that anyone reads lives there; they are whole OS pages of the page's
            // span, and the caller keeps them so until the batch is finished.
            unsafe { batch.add((start + from) as *mut u8, to - from) };
        }
    }
}

/// `list` without the blocks that overlap the OS pages in `mask`, in the same order.
///
/// # Safety
/// `list` is a list of free blocks of `page`, owned by the caller.
unsafe fn without_holes(
    page: &Page,
    list: *mut Block,
    size: usize,
    units: Units,
    mask: HoleMask,
) -> *mut Block {
    let mut head: *mut Block = null_mut();
    let mut tail: *mut Block = null_mut();
    let mut block = list;
    let start = page.start as usize;
    let divisor = BlockDivisor::new(size);
    // SAFETY: per the contract; blocks kept are written (their link) before any hole is
    // decommitted, and kept blocks lie outside the holes.
    unsafe {
        while !block.is_null() {
            let next = page.link(block);
            let index = divisor.index(block as usize - start);
            if units_of(index, size, units) & mask == 0 {
                if tail.is_null() {
                    head = block;
                } else {
                    page.set_link(tail, block);
                }
                tail = block;
            }
            block = next;
        }
        if !tail.is_null() {
            page.set_link(tail, null_mut());
        }
    }
    head
}

/// Put the blocks of the lowest run of holes back on `free`, in address order, ahead of
/// what is there. Returns false if the page has no holes. Owner only.
pub fn refill(page: &mut Page) -> bool {
    let holes = page.holes;
    if holes == 0 {
        return false;
    }
    let Some(units) = units(page) else {
        debug_assert!(false, "holes in a page that cannot have them");
        return false;
    };
    let size = page.block_size();
    let low = holes.trailing_zeros();
    // The lowest run of set bits.
    let above = holes >> low;
    let run_len = (!above).trailing_zeros();
    let run = if low + run_len >= HoleMask::BITS {
        holes & (HoleMask::MAX << low)
    } else {
        holes & (((1 << run_len) - 1) << low)
    };
    let (first, end) = match units {
        Units::Bytes(shift) => (
            ((low as usize) << shift) / size,
            (((low + run_len) as usize) << shift).div_ceil(size),
        ),
        Units::Blocks => (low as usize, (low + run_len) as usize),
    };
    let end = end.min(page.capacity as usize);
    let mut list = page.free;
    // SAFETY: these blocks are the page's, free and on no list (they overlap the run of
    // holes, whose blocks were taken off the lists); writing their link words commits
    // the OS pages again.
    unsafe {
        for i in (first..end).rev() {
            debug_assert!(units_of(i, size, units) & run != 0);
            let block = page.start.add(i * size) as *mut Block;
            page.set_link(block, list);
            list = block;
        }
        // (The secure build: their canaries went with the holes.)
        #[cfg(feature = "secure")]
        crate::span::secure::write_canaries(page, page.start.add(first * size), end - first);
    }
    page.free = list;
    page.free_is_zero = false;
    page.frees_to_local = false;
    page.holes = holes & !run;
    true
}

/// Blocks in the holes of `page` (the invariant checks of tests; the profiler's cut,
/// which counts a page's listed blocks without walking them). O(capacity).
pub fn hole_blocks(page: &Page) -> usize {
    let units = units(page).unwrap();
    (0..page.capacity as usize)
        .filter(|&i| units_of(i, page.block_size(), units) & page.holes != 0)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::span::page::list_len;
    extern crate std;
    use std::collections::BTreeSet;
    use std::vec::Vec;

    /// A page of one slice (or `slices`) over a private mapping (so decommit is real),
    /// all carved.
    struct TestPage {
        mem: *mut u8,
        bytes: usize,
        page: Page,
    }

    impl TestPage {
        fn new(size: usize) -> TestPage {
            TestPage::with_slices(size, 1)
        }

        fn with_slices(size: usize, slices: usize) -> TestPage {
            let bytes = slices * SLICE_SIZE;
            // SAFETY: a private anonymous mapping, unmapped in drop.
            let mem = unsafe {
                libc::mmap(
                    null_mut(),
                    bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(mem, libc::MAP_FAILED);
            let mut page = Page::new();
            page.start = mem as *mut u8;
            page.slice_count = slices as u32;
            page.init_blocks(crate::size_class::class_of(size), size, bytes);
            while page.extend() {
                // Carve everything onto one list.
                let mut tail = page.free;
                // SAFETY: test-owned list.
                unsafe {
                    while !page.link(tail).is_null() {
                        tail = page.link(tail);
                    }
                    page.set_link(tail, page.local_free);
                }
                page.local_free = page.free;
                page.free = null_mut();
            }
            TestPage {
                mem: mem as *mut u8,
                bytes,
                page,
            }
        }

        fn block(&self, i: usize) -> *mut Block {
            // SAFETY: within the mapping.
            unsafe { self.mem.add(i * self.page.block_size()) as *mut Block }
        }

        fn index(&self, b: *mut Block) -> usize {
            (b as usize - self.mem as usize) / self.page.block_size()
        }

        /// Pop one block the way the malloc paths do (free, then local_free, then
        /// extend), or None if the page is full.
        fn pop(&mut self) -> Option<usize> {
            let p = &mut self.page;
            if p.free.is_null() {
                p.free = p.local_free;
                p.local_free = null_mut();
            }
            if p.free.is_null() && !p.extend() {
                return None;
            }
            let b = p.free;
            // SAFETY: test-owned list.
            unsafe {
                p.free = p.link(b);
                p.clear_link(b);
            }
            p.inc_used();
            Some(self.index(b))
        }

        fn push(&mut self, i: usize) {
            let b = self.block(i);
            // SAFETY: block i is in use (the caller's model says so).
            unsafe { self.page.free_local(b) };
        }

        /// Blocks resident, per OS page (mincore).
        fn resident_os_pages(&self) -> usize {
            let mut vec = [0u8; 1024];
            let n = self.bytes / crate::os::page_size();
            assert!(crate::os::mincore(self.mem, self.bytes, &mut vec[..n]));
            vec[..n].iter().filter(|&&v| v & 1 != 0).count()
        }

        /// The lists' blocks, checked: inside the page, on a block boundary, not in a
        /// hole, not live, no repeats.
        fn check(&self, live: &BTreeSet<usize>) {
            let p = &self.page;
            let units = units(p).unwrap();
            let mut seen = BTreeSet::new();
            for head in [p.free, p.local_free] {
                let mut b = head;
                while !b.is_null() {
                    let offset = b as usize - self.mem as usize;
                    assert!(offset < self.bytes && offset % p.block_size() == 0);
                    let i = offset / p.block_size();
                    assert!(i < p.capacity as usize);
                    assert_eq!(
                        units_of(i, p.block_size(), units) & p.holes,
                        0,
                        "block {i} of a hole on a list"
                    );
                    assert!(!live.contains(&i), "live block {i} on a list");
                    assert!(seen.insert(i), "block {i} twice on the lists");
                    // SAFETY: blocks on the lists are outside holes: their words are ours.
                    b = unsafe { p.link(b) };
                }
            }
            assert_eq!(p.used() as usize, live.len());
            assert_eq!(
                live.len() + seen.len() + hole_blocks(p) + (p.reserved - p.capacity) as usize,
                p.reserved as usize,
                "used + listed + in holes + uncarved == reserved"
            );
        }
    }

    impl Drop for TestPage {
        fn drop(&mut self) {
            // SAFETY: our mapping.
            unsafe { libc::munmap(self.mem as *mut libc::c_void, self.bytes) };
        }
    }

    /// One live block per 16 KiB of 48-byte blocks: everything else goes back, the
    /// survivors' OS pages stay, and the blocks come back out in order, zeroed holes and
    /// all, without a stale link.
    #[test]
    fn purge_leaves_one_os_page_per_survivor_and_refills() {
        let os_page = crate::os::page_size();
        let mut t = TestPage::new(48);
        let reserved = t.page.reserved as usize;
        let mut live = BTreeSet::new();
        while let Some(i) = t.pop() {
            // SAFETY: a handed-out block, ours to write.
            unsafe { core::ptr::write_bytes(t.block(i) as *mut u8, 0xC5, 48) };
            live.insert(i);
        }
        assert_eq!(live.len(), reserved);
        let survivors: Vec<usize> = (0..reserved).filter(|i| i * 48 % (16 << 10) < 48).collect();
        for i in 0..reserved {
            if !survivors.contains(&i) {
                t.push(i);
                live.remove(&i);
            }
        }
        t.check(&live);
        assert_eq!(t.resident_os_pages(), SLICE_SIZE / os_page);
        let purged = purge(&mut t.page);
        t.check(&live);
        let survivor_pages: BTreeSet<usize> = survivors.iter().map(|i| i * 48 / os_page).collect();
        assert_eq!(purged, SLICE_SIZE - survivor_pages.len() * os_page);
        assert_eq!(t.resident_os_pages(), survivor_pages.len());
        for &i in &survivors {
            // SAFETY: live blocks are untouched.
            assert_eq!(unsafe { *(t.block(i) as *const u8).add(47) }, 0xC5);
        }
        // Purging again finds nothing new.
        assert_eq!(purge(&mut t.page), 0);
        // Everything but the survivors comes back out, each block once.
        let mut out = BTreeSet::new();
        while let Some(i) = t.pop() {
            assert!(!live.contains(&i), "live block {i} handed out");
            assert!(out.insert(i), "block {i} handed out twice");
            t.check(&live.union(&out).copied().collect());
        }
        assert_eq!(out.len(), reserved - survivors.len());
        assert_eq!(t.page.holes, 0);
    }

    /// Hole walks tell `hole_yield` what they found: pages whose survivors sit in every
    /// OS page make the class barren, one page with holes ends that. (Fails with the
    /// `record` call in `purge_into` removed.)
    #[test]
    fn hole_walks_record_whether_they_found_holes() {
        use crate::span::hole_yield::{is_barren, reset, BARREN_WALKS};
        // A size no other test here uses: the record is per class and process-wide.
        let size = 88;
        let class = crate::size_class::class_of(size);
        reset(class);
        let os_page = crate::os::page_size();
        let page_with_survivors_every = |step: usize| {
            let mut t = TestPage::new(size);
            let mut live = BTreeSet::new();
            while let Some(i) = t.pop() {
                live.insert(i);
            }
            for i in 0..t.page.reserved as usize {
                if i * size % step >= size {
                    t.push(i);
                    live.remove(&i);
                }
            }
            t
        };
        for walk in 1..=BARREN_WALKS {
            // A survivor in every OS page: no hole.
            let mut t = page_with_survivors_every(os_page / 2);
            assert_eq!(purge(&mut t.page), 0);
            assert_eq!(is_barren(class), walk == BARREN_WALKS, "after {walk} walks");
        }
        // A survivor per 16 KiB: holes.
        let mut t = page_with_survivors_every(16 << 10);
        assert!(purge(&mut t.page) > 0);
        assert!(!is_barren(class));
    }

    /// The holes of a page refill one run at a time, only when the lists are dry.
    #[test]
    fn holes_refill_only_when_lists_are_dry() {
        let os_page = crate::os::page_size();
        let mut t = TestPage::new(1024);
        let per_os_page = os_page / 1024;
        let mut live = BTreeSet::new();
        while let Some(i) = t.pop() {
            live.insert(i);
        }
        // OS pages 0, 1 and 4 free; the rest keep a block each.
        for i in 0..t.page.reserved as usize {
            let j = i / per_os_page;
            if j == 0 || j == 1 || j == 4 || i % per_os_page != 0 {
                t.push(i);
                live.remove(&i);
            }
        }
        purge(&mut t.page);
        assert_eq!(t.page.holes, 0b1_0011);
        t.check(&live);
        let listed = list_len(&t.page, t.page.free) + list_len(&t.page, t.page.local_free);
        for _ in 0..listed {
            let i = t.pop().unwrap();
            assert!(i / per_os_page != 0 && i / per_os_page != 1 && i / per_os_page != 4);
            live.insert(i);
        }
        assert_eq!(
            t.page.holes, 0b1_0011,
            "no refill while the lists had blocks"
        );
        let i = t.pop().unwrap();
        assert_eq!(i, 0, "the lowest run refills first, in address order");
        assert_eq!(t.page.holes, 0b1_0000);
        live.insert(i);
        t.check(&live);
    }

    /// A model of random use with purges in between, for block sizes that straddle OS
    /// pages and ones that do not: the lists, holes and live blocks stay disjoint and
    /// complete, and no block is handed out twice or with a stale link.
    #[test]
    fn model_with_holes() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        // Small blocks in one slice; big ones in 8 slices (holes of 32 KiB) and in 9
        // (72 KiB blocks; holes of 64 KiB, the last one past the span's end).
        for &(size, slices) in &[
            (8usize, 1usize),
            (48, 1),
            (112, 1),
            (640, 1),
            (1536, 1),
            (3072, 1),
            (5120, 1),
            (8192, 1),
            (9216, 8),
            (18432, 8),
            (20480, 8),
            (26624, 8),
            (36864, 8),
            (65536, 8),
            (73728, 9),
        ] {
            let mut t = TestPage::with_slices(size, slices);
            let mut live = BTreeSet::new();
            let mut purges = 0;
            for step in 0..4000 {
                // Phases of filling and of draining, so whole OS pages come free.
                let alloc_odds = if (step / 500) % 2 == 0 { 8 } else { 2 };
                match rnd(10) {
                    r if r < alloc_odds => {
                        if let Some(i) = t.pop() {
                            assert!(live.insert(i), "size {size} step {step}: block {i} twice");
                            // SAFETY: handed out, ours: the whole block is writable.
                            unsafe { core::ptr::write_bytes(t.block(i) as *mut u8, 0x5A, size) };
                        }
                    }
                    r if r < 9 => {
                        if !live.is_empty() {
                            let k = rnd(live.len());
                            let i = *live.iter().nth(k).unwrap();
                            live.remove(&i);
                            t.push(i);
                        }
                    }
                    _ => {
                        purges += usize::from(purge(&mut t.page) > 0);
                        for &i in &live {
                            let b = t.block(i) as *const u8;
                            // SAFETY: live blocks are the model's, whole and readable.
                            let (first, last) = unsafe { (*b, *b.add(size - 1)) };
                            assert_eq!(
                                (first, last),
                                (0x5A, 0x5A),
                                "size {size}: live block {i} lost its data"
                            );
                        }
                    }
                }
                t.check(&live);
            }
            assert!(purges > 0, "size {size}: the model never made a hole");
        }
    }

    /// A page of 16 KiB blocks in 8 slices with one survivor: every 16 KiB unit free of
    /// it goes back whole (link words too), and the blocks come back out once each.
    /// A bigger page of small blocks (a class replaced at random,
    /// `size_class::SPREAD_PAGE_SLICES`) gives back 8 KiB units: 8-byte blocks, so
    /// more blocks than a one-slice page holds, with one survivor in the middle.
    /// (Without units for such pages nothing is given back.)
    #[test]
    fn spread_pages_of_small_blocks_have_holes() {
        let slices = crate::size_class::SPREAD_PAGE_SLICES;
        let mut t = TestPage::with_slices(8, slices);
        let reserved = t.page.reserved as usize;
        assert_eq!(reserved, slices * SLICE_SIZE / 8);
        let mut live = BTreeSet::new();
        while let Some(i) = t.pop() {
            // SAFETY: a handed-out block, ours to write.
            unsafe { core::ptr::write_bytes(t.block(i) as *mut u8, 0x5A, 8) };
            live.insert(i);
        }
        let survivor = reserved / 2 + 3;
        for i in 0..reserved {
            if i != survivor {
                t.push(i);
                live.remove(&i);
            }
        }
        let purged = t.page.purge_free_blocks();
        t.check(&live);
        let unit = slices * SLICE_SIZE / 32;
        assert_eq!(t.page.holes.count_ones(), 31);
        assert_eq!(purged, slices * SLICE_SIZE - unit);
        // SAFETY: the live block is untouched.
        assert_eq!(unsafe { *(t.block(survivor) as *const u8) }, 0x5A);
        let mut out = BTreeSet::new();
        while let Some(i) = t.pop() {
            assert!(
                i != survivor && out.insert(i),
                "block {i} handed out twice or live"
            );
        }
        assert_eq!(out.len(), reserved - 1);
        assert_eq!(t.page.holes, 0);
    }

    #[test]
    fn big_blocks_go_back_whole() {
        let size = 16 << 10;
        let mut t = TestPage::with_slices(size, 8);
        let reserved = t.page.reserved as usize;
        let mut live = BTreeSet::new();
        while let Some(i) = t.pop() {
            // SAFETY: a handed-out block, ours to write.
            unsafe { core::ptr::write_bytes(t.block(i) as *mut u8, 0x3C, size) };
            live.insert(i);
        }
        for i in 0..reserved {
            if i != 5 {
                t.push(i);
                live.remove(&i);
            }
        }
        let purged = t.page.purge_free_blocks();
        t.check(&live);
        // Block 5 (80-96 KiB) is the sixth 16 KiB unit: every other unit is a hole, so
        // no free block keeps even the OS page of its link word (with units of 32 KiB
        // its neighbour, block 4, kept that page).
        let os_page = crate::os::page_size();
        assert_eq!(t.page.holes.count_ones() as usize, 31);
        assert_eq!(purged, 8 * SLICE_SIZE - (16 << 10));
        assert_eq!(t.resident_os_pages(), (16 << 10) / os_page);
        let mut out = BTreeSet::new();
        while let Some(i) = t.pop() {
            assert!(
                i != 5 && out.insert(i),
                "block {i} handed out twice or live"
            );
        }
        assert_eq!(out.len(), reserved - 1);
        assert_eq!(t.page.holes, 0);
    }
}
