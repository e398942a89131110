//! A quiet heap whose blocks another thread frees is taken over after one retention
//! period, not after the whole purge delay (`handoff/freed_into.rs`,
//! `front/takeover.rs`): the blocks freed into the pages it still holds (its current
//! page and the full pages it keeps) become reusable that much sooner.
//!
//! The test body runs in a child process started with a long purge delay, so that the
//! usual takeover (after the delay) cannot come within the test's wait: the two rules
//! are told apart by seconds, not by a tight timing.

mod common;

use std::sync::mpsc;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: ebb::Ebb = ebb::Ebb;

const CHILD_ENV: &str = "EBB_FREED_INTO_TEST_CHILD";
/// The child's purge delay (ms): takeover of a quiet heap after 12 s, of one whose
/// blocks others free a quarter of it (3 s) after the purger first looks at it.
const DELAY_MS: u64 = 12_000;

/// Blocks of 64 bytes the owner allocates: 16 MB, about 250 pages, so most of them are
/// abandoned as they fill and a few are kept (its current page and up to four full ones).
const BLOCKS: usize = 250_000;

#[test]
fn quiet_owner_freed_into_is_taken_over_before_the_purge_delay() {
    if std::env::var_os(CHILD_ENV).is_none() {
        common::run_test_in_child(
            "quiet_owner_freed_into_is_taken_over_before_the_purge_delay",
            CHILD_ENV,
            &[("EBB_PURGE_DELAY", &DELAY_MS.to_string())],
        );
        return;
    }

    let (to_freer, blocks_rx) = mpsc::channel::<Vec<Box<[u8; 64]>>>();
    let (park_tx, park_rx) = mpsc::channel::<()>();
    let owner = std::thread::spawn(move || {
        let blocks: Vec<Box<[u8; 64]>> = (0..BLOCKS).map(|i| Box::new([i as u8; 64])).collect();
        to_freer.send(blocks).unwrap();
        // Quiet from here: no allocator call until the test ends.
        park_rx.recv().unwrap();
    });
    let blocks = blocks_rx.recv().unwrap();
    let quiet_from = Instant::now();
    let before = ebb::stats();
    assert_eq!(before.steals, 0, "a heap was taken over before the test");
    // Another thread frees every block the owner allocated, in order: first into the
    // pages the owner abandoned, last into the ones it still holds; then drains, as its
    // next page would (`take_page`; the purger drains too, but with a wake time set it
    // waits up to a period first).
    std::thread::spawn(move || {
        drop(blocks);
        ebb::collect(false);
    })
    .join()
    .unwrap();

    // Stats only from here on (no allocation in the loop). Wait for the takeover, for
    // at most three quarters of the purge delay since the owner went quiet: the rule
    // for a heap nobody frees into waits the whole delay.
    let limit = Duration::from_millis(DELAY_MS * 3 / 4);
    let mut stats = ebb::stats();
    while stats.steals == 0 && quiet_from.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(50));
        stats = ebb::stats();
    }
    let waited = quiet_from.elapsed();
    let taken = stats.steals > 0;
    // Once it is taken over, the frees stranded in its pages are drained.
    let drained_by = Instant::now() + Duration::from_secs(2);
    while taken && stats.remote_freed_bytes > 64 << 10 && Instant::now() < drained_by {
        std::thread::sleep(Duration::from_millis(20));
        stats = ebb::stats();
    }
    park_tx.send(()).unwrap();
    owner.join().unwrap();
    assert!(
        taken,
        "the quiet owner was not taken over within {waited:?} (purge delay {DELAY_MS} ms): \
         {} bytes freed by the other thread still wait in its pages",
        stats.remote_freed_bytes
    );
    assert!(
        stats.remote_freed_bytes <= 64 << 10,
        "{} bytes freed into the taken-over heap's pages were not taken in",
        stats.remote_freed_bytes
    );
}
