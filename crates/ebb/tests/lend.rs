//! Free memory moves between the arena and the huge pool instead of faulting in fresh
//! pages beside it (`span/lend.rs`, `huge::fill_span_from_kept`):
//! - a new huge block takes the pages of free committed runs of the arena, which go
//!   back to it uncommitted (and read as zero when taken again);
//! - a large block whose slices were uncommitted takes kept huge pages.
//!
//! Both show as pages resident in the new block before anything is written to it, and
//! calloc'd blocks built that way still read as zero. Its own process: the arena and
//! the huge pool are process-wide; the purge delay is made long so nothing is
//! decommitted meanwhile.

use std::alloc::{GlobalAlloc, Layout};

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

mod common;
use common::pages::{four_kib_pages, kernel_moves_pages, resident_pages, PAGE};

const MIB: usize = 1 << 20;

fn page_aligned(p: *mut u8) -> usize {
    (p as usize).next_multiple_of(PAGE)
}

#[test]
fn free_memory_moves_between_large_spans_and_huge_blocks() {
    if !four_kib_pages() || !kernel_moves_pages() {
        eprintln!("skipped: 4 KiB pages and MREMAP_DONTUNMAP needed");
        return;
    }
    let mut options = ebb::options();
    options.purge_delay_ms = 600_000;
    ebb::set_options(options);

    let large = Layout::from_size_align(6 * MIB, 8).unwrap();
    let huge = Layout::from_size_align(20 * MIB, 8).unwrap();
    // SAFETY: plain allocation through ebb; every pointer used within its layout and
    // freed once.
    unsafe {
        // 1. Four large blocks, written whole, then freed: about 24 MiB of free
        //    committed spans in the arena.
        let blocks: Vec<*mut u8> = (0..4).map(|_| A.alloc(large)).collect();
        for &b in &blocks {
            assert!(!b.is_null());
            b.write_bytes(0xab, large.size());
        }
        for &b in &blocks {
            A.dealloc(b, large);
        }
        let before = ebb::stats();
        assert!(
            before.free_committed >= 20 * MIB as u64,
            "the freed large blocks are not free committed memory: {} MiB",
            before.free_committed / MIB as u64
        );

        // 2. A huge block takes their pages: resident before anything is written.
        let h = A.alloc(huge);
        assert!(!h.is_null());
        let after = ebb::stats();
        let lent = after.lent_to_huge - before.lent_to_huge;
        assert!(
            lent >= 16 * MIB as u64,
            "the huge block took {} MiB of the free spans' pages",
            lent / MIB as u64
        );
        assert!(
            after.free_committed + lent <= before.free_committed + MIB as u64,
            "free committed {} -> {} MiB with {} MiB lent",
            before.free_committed / MIB as u64,
            after.free_committed / MIB as u64,
            lent / MIB as u64
        );
        let start = page_aligned(h);
        let resident = resident_pages(start, 16 * MIB);
        assert!(
            resident >= (lent as usize / PAGE).min(16 * MIB / PAGE) * 9 / 10,
            "{resident} pages of the huge block resident: the lent pages did not move in"
        );
        assert_eq!(
            *h.add(start - h as usize),
            0xab,
            "the lent pages' contents did not move"
        );

        // 3. The runs went back uncommitted: large blocks calloc'd out of them read as
        //    zero (their pages moved out: nothing there, no memset needed). They stay
        //    allocated through step 4.
        let again: Vec<*mut u8> = (0..4).map(|_| A.alloc_zeroed(large)).collect();
        for &b in &again {
            assert!(!b.is_null());
            assert!(
                std::slice::from_raw_parts(b, large.size())
                    .iter()
                    .all(|&x| x == 0),
                "a calloc'd large block over a lent run holds old data"
            );
        }

        // 4. The other way. Every free committed run goes back to the OS (a forced
        //    purge), then freed huge memory is kept: a huge block freed when no huge
        //    request followed a huge free goes back, the request right after it makes
        //    the next one freed kept (`huge_pool::Demand`).
        ebb::collect(true);
        h.write_bytes(0xcd, huge.size());
        A.dealloc(h, huge);
        let h2 = A.alloc(huge);
        assert!(!h2.is_null());
        h2.write_bytes(0xce, huge.size());
        A.dealloc(h2, huge);
        let kept_before = ebb::stats().huge_kept;
        assert!(
            kept_before >= huge.size() as u64,
            "the second huge block freed was not kept: {kept_before} B"
        );
        // A large block (it may start a segment of its own) over uncommitted slices
        // takes kept pages: resident before it is written, and one calloc'd that way
        // is zero all the same (its span no longer reads as zero: memset).
        let small_large = Layout::from_size_align(2 * MIB, 8).unwrap();
        let z = A.alloc(small_large);
        assert!(!z.is_null());
        let kept_after = ebb::stats().huge_kept;
        assert!(
            kept_after + small_large.size() as u64 <= kept_before,
            "the large block took no kept pages: kept {kept_before} -> {kept_after} B"
        );
        let start = page_aligned(z);
        assert_eq!(
            resident_pages(start, MIB),
            MIB / PAGE,
            "kept pages moved into the large block are not resident"
        );
        assert_eq!(
            *z.add(start - z as usize),
            0xce,
            "the kept pages' contents did not move"
        );
        let zeroed = A.alloc_zeroed(small_large);
        assert!(!zeroed.is_null());
        assert!(
            ebb::stats().huge_kept < kept_after,
            "the second large block took no kept pages"
        );
        assert!(
            std::slice::from_raw_parts(zeroed, small_large.size())
                .iter()
                .all(|&x| x == 0),
            "a calloc'd large block built of kept pages holds old data"
        );
        A.dealloc(z, small_large);
        A.dealloc(zeroed, small_large);
        for &b in &again {
            A.dealloc(b, large);
        }
    }
}
