//! The purger's walk for due inside purges reads only the abandoned pages still
//! awaiting one (`handoff::abandon`, the awaiting and settled lists): once a page's
//! free blocks are purged inside, later passes do not read it again, however many such
//! pages stay listed. (Before the split every pass read every listed page, and every
//! batch of a pass read them all again.)
//!
//! One test in this file: the counts below are process-wide.

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

/// Blocks big enough to have their insides purged (`PURGE_INSIDE_MIN` is 8 KiB + 1).
const BLOCK: usize = 24 * 1024;
/// Blocks the thread takes: many pages' worth.
const BLOCKS: usize = 2048;
/// One block in this many survives, so every page keeps a few and stays listed.
const KEEP_EVERY: usize = 16;

#[test]
fn purged_pages_are_not_read_again() {
    // Only the forced passes below purge: the background purger waits a minute.
    let mut options = ebb::options();
    options.purge_delay_ms = 60_000;
    ebb::set_options(options);
    // A thread fills pages of big blocks, frees all but a few per page and exits: its
    // pages are abandoned with room, so they are listed, awaiting their inside purge.
    let kept: Vec<usize> = std::thread::spawn(|| {
        let blocks: Vec<Box<[u8; BLOCK]>> = (0..BLOCKS).map(|_| Box::new([7u8; BLOCK])).collect();
        let mut kept = Vec::new();
        for (i, b) in blocks.into_iter().enumerate() {
            if i % KEEP_EVERY == 0 {
                kept.push(Box::into_raw(b) as usize);
            }
        }
        kept
    })
    .join()
    .unwrap();

    let before = ebb::stats();
    ebb::collect(true);
    let first = ebb::stats();
    let purged_first = first.purged - before.purged;
    let visits_first = first.inside_walk_visits - before.inside_walk_visits;
    // The forced pass purged the listed pages' free blocks, reading each of them.
    assert!(
        purged_first >= (BLOCKS / 2 * BLOCK) as u64,
        "the forced purge gave back {purged_first} bytes"
    );
    let pages_at_least = (BLOCKS / KEEP_EVERY) as u64 / 8;
    assert!(
        visits_first >= pages_at_least,
        "the first pass read {visits_first} listed pages (the thread left more than {pages_at_least})"
    );

    // They are all still listed (each keeps survivors), and none awaits a purge now.
    for round in 0..3 {
        let before = ebb::stats();
        ebb::collect(true);
        let now = ebb::stats();
        let visits = now.inside_walk_visits - before.inside_walk_visits;
        assert!(
            visits < pages_at_least,
            "pass {round} after the purge read {visits} listed pages again (first pass: {visits_first})"
        );
    }

    for p in kept {
        // SAFETY: each pointer came from `Box::into_raw` of a `Box<[u8; BLOCK]>` above.
        let b = unsafe { Box::from_raw(p as *mut [u8; BLOCK]) };
        assert_eq!(b[BLOCK - 1], 7);
    }
}
