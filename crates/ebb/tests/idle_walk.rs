//! The purger's walk for idle heaps reads only heaps that hold pages of their own (the
//! registry's holders list, `process/registry.rs`, protocol H): threads whose blocks
//! all come from the shared start pages are not read at all, and a heap that the walk
//! dropped when it had no page comes back on the list when its thread takes pages
//! again, so it is taken over again once it idles.
//!
//! One test in this file: the counts below are process-wide.

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

use std::hint::black_box;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Enough 64-byte blocks to go past the shared start pages (16 KiB a class) onto pages
/// of the thread's own.
const OWN_PAGE_BLOCKS: usize = 4096;

/// Threads that hold a few blocks from the shared start pages only.
const SHARED_ONLY_THREADS: usize = 64;

/// Wait (up to 10 s, polling stats without allocating) for the purger to take over
/// another heap; returns the heaps its walks read meanwhile and the walks.
fn wait_for_a_takeover(round: u32) -> (u64, u64) {
    let before = ebb::stats();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut now = ebb::stats();
    while now.steals == before.steals && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        now = ebb::stats();
    }
    assert!(
        now.steals > before.steals,
        "round {round}: the parked owner's heap was not taken over in 10 s ({} walks)",
        now.idle_walks - before.idle_walks
    );
    (
        now.idle_walk_visits - before.idle_walk_visits,
        now.idle_walks - before.idle_walks,
    )
}

#[test]
fn idle_walk_reads_holders_only_and_relists_a_returning_heap() {
    if !ebb::options().background {
        // Heaps are taken over by the background purger only.
        eprintln!("skipped: EBB_BACKGROUND=0");
        return;
    }
    // Threads that hold only shared-start blocks, parked.
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = std::sync::Arc::new(std::sync::Mutex::new(release_rx));
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let parked: Vec<_> = (0..SHARED_ONLY_THREADS)
        .map(|_| {
            let release_rx = release_rx.clone();
            let ready_tx = ready_tx.clone();
            std::thread::spawn(move || {
                let held: Vec<Box<[u8; 48]>> = (0..8).map(|i| Box::new([i; 48])).collect();
                ready_tx.send(()).unwrap();
                let _ = release_rx.lock().unwrap().recv();
                black_box(held);
            })
        })
        .collect();
    for _ in 0..SHARED_ONLY_THREADS {
        ready_rx.recv().unwrap();
    }
    assert!(
        ebb::stats().shared_start_blocks > 0,
        "the parked threads' blocks did not come from the shared start pages"
    );

    // An owner that takes pages of its own, then parks until told to allocate again.
    let (go_tx, go_rx) = mpsc::channel::<bool>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let owner = std::thread::spawn(move || {
        let mut held = Vec::new();
        while go_rx.recv().unwrap() {
            held.push(
                (0..OWN_PAGE_BLOCKS)
                    .map(|i| Box::new([i as u8; 64]))
                    .collect::<Vec<_>>(),
            );
            done_tx.send(()).unwrap();
        }
        black_box(held);
    });

    for round in 1..=2 {
        go_tx.send(true).unwrap();
        done_rx.recv().unwrap();
        // Parked with pages of its own: in round 2 that is after its heap was taken
        // over and (had a walk run meanwhile) dropped from the list, so the takeover
        // shows it came back on it.
        let (visits, walks) = wait_for_a_takeover(round);
        assert!(walks > 0);
        // The walks read the heaps with pages (the owner's, this thread's, the test
        // harness's), not the parked threads that hold none.
        assert!(
            visits <= walks * (SHARED_ONLY_THREADS as u64 / 4),
            "round {round}: {walks} idle walks read {visits} heaps with \
             {SHARED_ONLY_THREADS} threads holding no page of their own"
        );
    }

    go_tx.send(false).unwrap();
    owner.join().unwrap();
    drop(release_tx);
    for t in parked {
        t.join().unwrap();
    }
}
