//! Memory freed into the pages of a thread that stays busy, but no longer allocates
//! their size, must go back too: the purger asks busy heaps to let go of every page
//! but their current ones (`heap::sweep`), so those pages are abandoned, collected and
//! freed like a sleeping owner's. (Its own binary: it counts process-wide pages.)

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

use std::sync::mpsc;
use std::time::{Duration, Instant};

/// 4 KiB blocks live in one-slice pages of 16 blocks; nothing else in this test uses
/// the class.
const BLOCK: usize = 4096;
const PER_PAGE: usize = 16;

fn pages_of_class(block: usize) -> u64 {
    ebb::stats()
        .classes
        .iter()
        .find(|c| c.block_size == block as u64)
        .map_or(0, |c| c.pages)
}

#[test]
fn busy_owner_lets_go_of_pages_it_no_longer_uses() {
    let mut options = ebb::options();
    options.background = true;
    options.purge_delay_ms = 100;
    ebb::set_options(options);
    let pages = 6;
    let (to_freer, from_owner) = mpsc::channel::<Vec<usize>>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let owner = std::thread::spawn(move || {
        // The current page, and full pages `find_page` keeps or abandons.
        let blocks: Vec<usize> = (0..PER_PAGE * pages)
            .map(|_| ebb::alloc(BLOCK, 8) as usize)
            .collect();
        assert!(blocks.iter().all(|&p| p != 0));
        to_freer.send(blocks).unwrap();
        // Stay busy with another size (slow paths keep running), until told to stop.
        let mut small: Vec<Box<[u8; 48]>> = Vec::new();
        while done_rx.try_recv().is_err() {
            small.extend((0..20_000).map(|i| Box::new([i as u8; 48])));
            small.clear();
            small.shrink_to_fit();
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    let blocks = from_owner.recv().unwrap();
    let peak = pages_of_class(BLOCK);
    assert!(peak >= pages as u64, "pages of 4 KiB blocks: {peak}");
    for p in blocks {
        // SAFETY: each block came from ebb::alloc and is freed once.
        unsafe { ebb::free(p as *mut u8) };
    }
    // Only the owner's current page of the class may stay (it allocates no 4 KiB
    // block again, so nothing makes it look at that page).
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut now = pages_of_class(BLOCK);
    while now > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        now = pages_of_class(BLOCK);
    }
    let stats = ebb::stats();
    done_tx.send(()).unwrap();
    owner.join().unwrap();
    assert!(
        now <= 1,
        "{now} pages of 4 KiB blocks still in use (of {peak}); sweeps {}, steals {}",
        stats.sweeps,
        stats.steals
    );
    assert!(stats.sweeps > 0, "the busy heap was never swept");
}
