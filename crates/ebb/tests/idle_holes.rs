//! A few survivors must not keep pages of small blocks resident once their owner is
//! idle: the OS pages that hold no live block are given back as holes
//! (`span::holes`), and refilled when the owner allocates again.
//!
//! One test per binary: it measures the process's RSS.

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

mod common;

use std::collections::HashSet;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
const BLOCK: usize = 48;
const TOTAL: usize = 64 << 20;
/// A page of small blocks is one 64 KiB slice, slice-aligned.
const PAGE: usize = 64 << 10;

/// The owner fills 64 MiB with 48-byte blocks, frees all but the first block of each
/// 64 KiB page and parks. RSS must fall to about one OS page per survivor without any
/// allocator call by the owner. Then the owner allocates 64 MiB of the same blocks
/// again: none may overlap a survivor (whose bytes stay intact), and every one must
/// hold what is written to it (a block handed out from a hole with a stale link would
/// be handed out twice, or overlap).
#[test]
fn survivors_keep_one_os_page_each_and_holes_refill() {
    let os_page = 4096u64;
    let before = common::rss_bytes().expect("VmRSS");
    let (to_main, from_owner) = mpsc::channel::<usize>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let owner = std::thread::spawn(move || {
        let mut blocks: Vec<Box<[u8; BLOCK]>> = (0..TOTAL / BLOCK)
            .map(|i| Box::new([i as u8 | 1; BLOCK]))
            .collect();
        blocks.retain(|b| (b.as_ptr() as usize) % PAGE < BLOCK);
        blocks.shrink_to_fit();
        to_main.send(blocks.len()).unwrap();
        // Park with the survivors alive: no allocator call until told.
        go_rx.recv().unwrap();
        let survivors: HashSet<usize> = blocks.iter().map(|b| b.as_ptr() as usize).collect();
        let mut again: Vec<Box<[u8; BLOCK]>> = Vec::with_capacity(TOTAL / BLOCK);
        for i in 0..TOTAL / BLOCK {
            let b = Box::new([(i % 251) as u8; BLOCK]);
            assert!(
                !survivors.contains(&(b.as_ptr() as usize)),
                "a survivor handed out"
            );
            again.push(b);
        }
        for (i, b) in again.iter().enumerate() {
            assert!(
                b.iter().all(|&x| x == (i % 251) as u8),
                "block {i} overwritten"
            );
        }
        let mut seen: HashSet<usize> = HashSet::with_capacity(again.len());
        assert!(
            again.iter().all(|b| seen.insert(b.as_ptr() as usize)),
            "a block twice"
        );
        assert!(blocks
            .iter()
            .all(|b| b[0] & 1 == 1 && b.iter().all(|&x| x == b[0])));
    });
    let survivors = from_owner.recv().unwrap() as u64;
    assert!(
        survivors >= (TOTAL / PAGE) as u64 / 2,
        "{survivors} survivors"
    );
    let bound = before + survivors * os_page + 12 * MIB;

    let deadline = Instant::now() + Duration::from_secs(10);
    let mut rss = common::rss_bytes().unwrap();
    while rss > bound && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        rss = common::rss_bytes().unwrap();
    }
    let stats = ebb::stats();
    go_tx.send(()).unwrap();
    owner.join().unwrap();
    assert!(
        rss <= bound,
        "RSS {} MiB with {survivors} survivors (bound {} MiB, started at {} MiB); steals {}, \
         purged {} MiB",
        rss / MIB,
        bound / MIB,
        before / MIB,
        stats.steals,
        stats.purged / MIB
    );
}
