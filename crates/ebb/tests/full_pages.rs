//! A heap keeps its last few full pages of a class (`FULL_PAGE_SLICES_KEPT` slices'
//! worth) instead of abandoning each one the moment it fills: its own frees into them
//! stay local, and the next malloc that runs out of room finds the freed blocks there.
//! Only full pages beyond that are abandoned, and the heap takes those back when it
//! frees into them. (One test per binary: it counts the process-wide page events.)

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

/// 4 KiB blocks live in one-slice (64 KiB) pages of 16 blocks.
const BLOCK: usize = 4096;
const PER_PAGE: usize = 16;

#[test]
fn full_pages_are_kept_up_to_the_limit_then_abandoned() {
    // The thread's blocks come from its own pages from the first one (not the shared
    // start pages), so that the pages counted below are all of them.
    ebb::set_options(ebb::Options {
        shared_start: false,
        ..ebb::options()
    });
    std::thread::spawn(|| {
        let keep = ebb::FULL_PAGE_SLICES_KEPT;
        let pages = keep + 4;
        let mut blocks: Vec<*mut u8> = Vec::with_capacity(PER_PAGE * pages);
        let before = ebb::stats();
        for _ in 0..PER_PAGE * pages {
            let p = ebb::alloc(BLOCK, 8);
            assert!(!p.is_null());
            blocks.push(p);
        }
        let filled = ebb::stats();
        // The slow path ran once per page after the first; each time it kept the
        // `keep` most recent full pages and abandoned the older ones.
        assert_eq!(
            filled.abandon_events - before.abandon_events,
            (pages - 1 - keep) as u64
        );

        // Free a block of a kept page (the second-to-last one filled): a plain local
        // free, no reclaim or collect. Every page is full, so the next malloc runs the
        // slow path, which finds the block in that page.
        let victim = blocks[PER_PAGE * (pages - 2) + 3];
        // SAFETY: victim came from ebb::alloc and is freed once.
        unsafe { ebb::free(victim) };
        let freed = ebb::stats();
        assert_eq!(freed.reclaim_events, filled.reclaim_events);
        assert_eq!(freed.collect_events, filled.collect_events);
        let again = ebb::alloc(BLOCK, 8);
        assert_eq!(
            again, victim,
            "the kept page's free block is handed out next"
        );
        let reused = ebb::stats();
        assert_eq!(reused.abandon_events, filled.abandon_events);
        assert_eq!(reused.reclaim_events, filled.reclaim_events);

        // Free everything, oldest first. The first frees land in the abandoned pages:
        // each is taken back (the kept pages are full, so they do not count against
        // the reclaim limit) and emptied by local frees; nothing goes through the
        // remote-free collection.
        for &p in &blocks {
            // SAFETY: every block is live (victim was handed out again).
            unsafe { ebb::free(p) };
        }
        let end = ebb::stats();
        assert_eq!(
            end.reclaim_events - reused.reclaim_events,
            (pages - 1 - keep) as u64
        );
        assert_eq!(end.collect_events, reused.collect_events);
    })
    .join()
    .unwrap();
}
