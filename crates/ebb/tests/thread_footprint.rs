//! A thread that holds a few blocks of many small classes costs about its blocks and
//! its heap, not an OS page per class: its first blocks of each class come from the
//! shared start pages (`front/shared.rs`). Measured with ebb's own statistics
//! (`resident`: ebb's memory measured with `mincore`, heaps counted whole).
//!
//! One test per binary: it measures process-wide statistics.

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

use std::sync::{Arc, Barrier};

const THREADS: usize = 100;
/// One block of each size: 21 classes from 16 B to 2 KiB, 12,560 bytes in all.
const SIZES: [usize; 21] = [
    16, 32, 48, 64, 96, 128, 160, 192, 256, 320, 384, 448, 512, 640, 768, 896, 1024, 1280, 1536,
    1792, 2048,
];

/// Resident bytes of ebb's memory per thread while `THREADS` threads each hold one
/// block of every size in `SIZES`.
fn resident_per_thread() -> u64 {
    let hold = Arc::new(Barrier::new(THREADS + 1));
    let release = Arc::new(Barrier::new(THREADS + 1));
    ebb::collect(true);
    let before = ebb::stats();
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (hold, release) = (Arc::clone(&hold), Arc::clone(&release));
            std::thread::spawn(move || {
                let blocks: Vec<Vec<u8>> = SIZES.iter().map(|&n| vec![0xA5u8; n]).collect();
                hold.wait();
                release.wait();
                drop(blocks);
            })
        })
        .collect();
    hold.wait();
    let after = ebb::stats();
    release.wait();
    for t in threads {
        t.join().unwrap();
    }
    after.resident.saturating_sub(before.resident) / THREADS as u64
}

#[test]
fn threads_with_few_blocks_share_pages() {
    let live: u64 = SIZES.iter().sum::<usize>() as u64;
    // What a thread may cost: its heap, counted whole by the stats (two OS pages), and
    // its blocks twice over (class rounding, the shared pages' partly carved tails),
    // plus an OS page. A page of its own per class would cost 21 OS pages at least.
    let heap = 8192;
    let bound = heap + 2 * live + 4096;
    let own_pages_floor = (SIZES.len() * 4096) as u64;
    assert!(bound < own_pages_floor);

    // The least of three rounds: about 1 run in 5-10 measured ~4 KiB per thread more
    // in its one round (also before this test took three; the cause is not pinned
    // down: memory faulted in once, not per thread), while a thread with pages of its
    // own pays 21 OS pages in every round, so the least still tells the two apart.
    let shared = (0..3).map(|_| resident_per_thread()).min().unwrap();
    let stats = ebb::stats();
    assert!(
        stats.shared_start_blocks >= (THREADS * SIZES.len()) as u64,
        "the threads' blocks did not come from the shared start pages ({} blocks)",
        stats.shared_start_blocks
    );
    assert!(
        shared <= bound,
        "{shared} bytes resident per thread, more than {bound} (live {live})"
    );

    // The negative control: without the shared start, the same threads cost more than
    // the bound, so the check above can fail.
    ebb::set_options(ebb::Options {
        shared_start: false,
        ..ebb::options()
    });
    let own = resident_per_thread();
    assert!(
        own > bound,
        "without the shared start a thread cost only {own} bytes (bound {bound})"
    );
    eprintln!("resident per thread: {shared} bytes shared, {own} bytes own pages (live {live})");
}
