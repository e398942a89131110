//! A few survivors must not keep pages of big blocks resident once their owner is idle:
//! the free blocks of such pages are purged inside (see `Page::purge_free_blocks`).
//!
//! One test per binary: it measures the process's RSS.

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

mod common;

use std::sync::mpsc;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
const BLOCK: usize = 256 * 1024;
/// 256 KiB blocks live in pages of 4 MiB: 16 per page.
const PER_PAGE: usize = 16;

/// The owner fills 256 MiB with 256 KiB blocks (every byte written), frees all but one
/// block in 16 itself (every page keeps a survivor, so no page can go back whole), and
/// parks. RSS must fall to about the survivors' 16 MiB without any allocator call by
/// the owner.
#[test]
fn sparse_survivors_do_not_keep_big_block_pages_resident() {
    let before = common::rss_bytes().expect("VmRSS");
    let (to_main, from_owner) = mpsc::channel::<usize>();
    let (park_tx, park_rx) = mpsc::channel::<()>();
    let owner = std::thread::spawn(move || {
        let mut blocks: Vec<Vec<u8>> = (0..1024).map(|i| vec![i as u8 | 1; BLOCK]).collect();
        let mut n = 0;
        blocks.retain(|_| {
            n += 1;
            n % PER_PAGE == 0
        });
        let survivors = blocks.len();
        to_main.send(survivors).unwrap();
        // Park with the survivors alive: no allocator call until the test ends.
        park_rx.recv().unwrap();
        assert!(blocks.iter().all(|b| b[0] != 0 && b[BLOCK - 1] == b[0]));
    });
    let survivors = from_owner.recv().unwrap() as u64;
    let live = survivors * BLOCK as u64;
    let bound = before + live + 32 * MIB;

    let deadline = Instant::now() + Duration::from_secs(10);
    let mut rss = common::rss_bytes().unwrap();
    while rss > bound && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        rss = common::rss_bytes().unwrap();
    }
    let stats = ebb::stats();
    park_tx.send(()).unwrap();
    owner.join().unwrap();
    assert!(
        rss <= bound,
        "RSS {} MiB with {} MiB live (started at {} MiB); steals {}, purged {} MiB",
        rss / MIB,
        live / MIB,
        before / MIB,
        stats.steals,
        stats.purged / MIB
    );
}
