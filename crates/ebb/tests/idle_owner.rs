//! Memory freed into the pages of a thread that then sleeps must go back to the OS
//! without that thread (or anyone) calling the allocator again.

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

use std::sync::mpsc;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

fn committed() -> u64 {
    ebb::stats().committed
}

/// Owner allocates 256 MiB of 1 KiB blocks, frees every other one itself (so its pages
/// come back into its own heap), hands the rest to another thread, and parks. The other
/// thread frees them all. Committed memory must fall back near where it started.
#[test]
fn sleeping_owner_memory_is_returned() {
    let before = committed();
    let (to_freer, from_owner) = mpsc::channel::<Vec<Box<[u8; 1024]>>>();
    let (park_tx, park_rx) = mpsc::channel::<()>();
    let owner = std::thread::spawn(move || {
        let mut blocks: Vec<Box<[u8; 1024]>> =
            (0..256 * 1024).map(|i| Box::new([i as u8; 1024])).collect();
        let mut keep = Vec::with_capacity(blocks.len() / 2);
        let mut n = 0;
        blocks.retain(|_| {
            n += 1;
            n % 2 == 0
        });
        keep.append(&mut blocks);
        drop(blocks);
        to_freer.send(keep).unwrap();
        // Park: no allocator call until the test ends.
        park_rx.recv().unwrap();
    });
    let blocks = from_owner.recv().unwrap();
    let peak = committed();
    assert!(
        peak > before + 200 * MIB,
        "workload did not allocate: {peak}"
    );
    let freer = std::thread::spawn(move || drop(blocks));
    freer.join().unwrap();

    // The test thread only reads stats from here on (no allocation in the loop).
    // Most of the memory comes back through abandoned pages (the owner let them go
    // when they filled) without a steal; what the owner still holds (its current and
    // taken-back pages) needs its heap taken over, after the purge delay: wait for both.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut stats = ebb::stats();
    while (stats.committed > before + 16 * MIB || stats.steals == 0) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        stats = ebb::stats();
    }
    let now_committed = stats.committed;
    park_tx.send(()).unwrap();
    owner.join().unwrap();
    assert!(
        now_committed <= before + 16 * MIB,
        "committed {} MiB, started at {} MiB (steals {}/{}, abandoned pages {})",
        now_committed / MIB,
        before / MIB,
        stats.steals,
        stats.steal_attempts,
        stats.pages_abandoned
    );
    assert!(
        stats.steals > 0,
        "the sleeping owner's heap was never taken over"
    );
}
