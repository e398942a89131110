//! First-class heaps (`ebb::Heap`): allocation, frees from other threads, destroy,
//! delete (Drop), collections through allocator-api2, a heap whose thread sleeps.

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

mod common;

use std::sync::mpsc;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

/// Tests here measure process-wide figures: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Clone, Copy)]
struct SendPtr(*mut u8);
// SAFETY (test): the pointers are blocks handed to another thread to free.
unsafe impl Send for SendPtr {}

#[test]
fn alloc_sizes_alignments_realloc_and_stats() {
    let _g = serial();
    let heap = ebb::Heap::new();
    let mut blocks = Vec::new();
    for (i, &size) in [0usize, 1, 8, 24, 100, 1024, 5000, 70_000, 600_000, 3 << 20]
        .iter()
        .enumerate()
    {
        for align in [1usize, 8, 16, 64, 4096, 1 << 17] {
            let p = heap.alloc(size, align);
            assert!(!p.is_null());
            assert_eq!(p as usize % align, 0, "size {size} align {align}");
            assert!(unsafe { ebb::usable_size(p) } >= size);
            unsafe { std::ptr::write_bytes(p, i as u8, size) };
            blocks.push((p, size, i as u8));
        }
    }
    let z = heap.alloc_zeroed(4000, 8);
    assert!(unsafe { std::slice::from_raw_parts(z, 4000) }
        .iter()
        .all(|&b| b == 0));
    let s = heap.stats();
    assert_eq!(s.live_blocks, blocks.len() as u64 + 1);
    // 600 KiB and 3 MiB blocks, and every block aligned beyond a slice (128 KiB).
    assert_eq!(s.large_blocks, 2 * 5 + 10);
    // Grow a block through several classes and into a large span: contents kept.
    let mut p = heap.alloc(10, 8);
    unsafe { std::ptr::write_bytes(p, 7, 10) };
    let mut size = 10;
    for new_size in [40, 300, 9000, 200_000, 1 << 20] {
        p = unsafe { heap.realloc(p, size, new_size, 8) };
        assert!(unsafe { std::slice::from_raw_parts(p, 10) }
            .iter()
            .all(|&b| b == 7));
        size = new_size;
    }
    for (p, size, v) in blocks {
        assert!(unsafe { std::slice::from_raw_parts(p, size) }
            .iter()
            .all(|&b| b == v));
        unsafe { heap.free(p) };
    }
    unsafe { heap.free(z) };
    unsafe { heap.free(p) };
    heap.collect();
    let s = heap.stats();
    assert_eq!((s.live_blocks, s.pages), (0, 0), "{s:?}");
    heap.destroy();
}

/// Blocks of a heap freed by other threads with the ordinary `free` go back to the
/// heap's pages; `collect` takes them in and gives the emptied pages back.
#[test]
fn blocks_freed_by_other_threads() {
    let _g = serial();
    let heap = ebb::Heap::new();
    let blocks: Vec<SendPtr> = (0..200_000)
        .map(|i| {
            let p = heap.alloc(48 + (i % 4) * 16, 8);
            unsafe { p.write(i as u8) };
            SendPtr(p)
        })
        .collect();
    let before = heap.stats();
    assert_eq!(before.live_blocks, 200_000);
    let halves: Vec<Vec<SendPtr>> = blocks.chunks(100_000).map(|c| c.to_vec()).collect();
    let threads: Vec<_> = halves
        .into_iter()
        .map(|half| {
            std::thread::spawn(move || {
                for p in half {
                    unsafe { ebb::free(p.0) };
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    heap.collect();
    let after = heap.stats();
    assert_eq!(after.live_blocks, 0, "{after:?}");
    assert_eq!(after.pages, 0, "emptied pages go back: {after:?}");
    // The heap still works afterwards.
    let p = heap.alloc(64, 8);
    assert!(!p.is_null());
    heap.destroy();
}

/// Destroy with millions of live blocks gives every page back (stats and RSS), without
/// freeing a block.
#[test]
fn destroy_returns_all_memory() {
    let _g = serial();
    ebb::collect(true);
    let before = ebb::stats();
    let heap = ebb::Heap::new();
    let mut n = 0u64;
    for i in 0..3_000_000usize {
        let p = heap.alloc(16 + (i % 8) * 8, 8);
        assert!(!p.is_null());
        unsafe { p.write(1) };
        n += 1;
    }
    for _ in 0..20 {
        let p = heap.alloc(1 << 20, 8); // large spans too
        unsafe { std::ptr::write_bytes(p, 1, 1 << 20) };
    }
    let s = heap.stats();
    assert_eq!(s.live_blocks, n + 20);
    let peak = ebb::stats();
    assert!(
        peak.committed > before.committed + 100 * MIB,
        "{} {}",
        peak.committed,
        before.committed
    );
    let rss_peak = common::rss_bytes().unwrap();
    heap.destroy();
    let freed = ebb::stats();
    assert!(
        freed.allocated < before.allocated + MIB,
        "live bytes after destroy: {} (before {})",
        freed.allocated,
        before.allocated
    );
    ebb::collect(true);
    let purged = ebb::stats();
    assert!(
        purged.committed < before.committed + 8 * MIB,
        "{} {}",
        purged.committed,
        before.committed
    );
    let rss = common::rss_bytes().unwrap();
    assert!(rss + 100 * MIB < rss_peak, "rss {rss} peak {rss_peak}");
}

/// Drop hands the blocks over: they stay valid and any thread may free them.
#[test]
fn drop_hands_blocks_over() {
    let _g = serial();
    let heap = ebb::Heap::new();
    let blocks: Vec<SendPtr> = (0..50_000)
        .map(|i| {
            let size = if i % 1000 == 0 { 700_000 } else { 40 };
            let p = heap.alloc(size, 8);
            unsafe { std::ptr::write_bytes(p, i as u8, size.min(64)) };
            SendPtr(p)
        })
        .collect();
    drop(heap);
    // Other heaps reuse the memory only as the blocks are freed: allocate around them.
    let other: Vec<Box<[u8; 40]>> = (0..50_000).map(|_| Box::new([0xee; 40])).collect();
    for (i, p) in blocks.iter().enumerate() {
        assert_eq!(unsafe { p.0.read() }, i as u8);
    }
    let before = ebb::stats().allocated;
    std::thread::spawn(move || {
        for p in blocks {
            unsafe { ebb::free(p.0) };
        }
    })
    .join()
    .unwrap();
    ebb::collect(false);
    let deadline = Instant::now() + Duration::from_secs(5);
    while ebb::stats().allocated > before - 2 * MIB && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        ebb::collect(false);
    }
    assert!(
        ebb::stats().allocated <= before - 2 * MIB,
        "handed-over blocks were not reclaimed"
    );
    assert!(other.iter().all(|b| b.iter().all(|&x| x == 0xee)));
}

#[test]
fn collections_through_allocator_api2() {
    let _g = serial();
    let heap = ebb::Heap::new();
    {
        let mut v = allocator_api2::vec::Vec::new_in(&heap);
        for i in 0..100_000u64 {
            v.push(i);
        }
        let mut map = hashbrown::HashMap::new_in(&heap);
        for i in 0..50_000u64 {
            map.insert(i, i * 3);
        }
        assert_eq!(v.iter().sum::<u64>(), 99_999 * 100_000 / 2);
        assert_eq!(map[&777], 2331);
        let s = heap.stats();
        assert!(s.live_bytes >= 800_000 + 50_000 * 16, "{s:?}");
        // Not from the thread's default heap: its pages carry the heap's owner word.
        assert!(ebb::stats().allocated >= s.live_bytes);
        // A collection's memory may go to another thread's collection? No: &Heap is
        // not Send. Dropping them here frees into the heap.
    }
    heap.collect();
    assert_eq!(heap.stats().live_blocks, 0);
    heap.destroy();
}

/// A heap whose thread sleeps: the purger neither sweeps it nor takes it over (its
/// blocks stay valid and its pages its own), other threads' frees wait for the owner,
/// and destroy after the sleep gives the memory back.
#[test]
fn heap_of_a_sleeping_thread_and_the_purger() {
    let _g = serial();
    let mut options = ebb::options();
    let saved = options;
    options.purge_delay_ms = 50;
    ebb::set_options(options);
    let (to_test, from_owner) = mpsc::channel::<Vec<SendPtr>>();
    let (wake_tx, wake_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<(ebb::HeapStats, ebb::HeapStats, bool)>();
    let owner = std::thread::spawn(move || {
        let heap = ebb::Heap::new();
        let blocks: Vec<SendPtr> = (0..100_000)
            .map(|i| {
                let p = heap.alloc(100, 8);
                unsafe { std::ptr::write_bytes(p, i as u8, 100) };
                SendPtr(p)
            })
            .collect();
        // Default-heap pages too, so the purger has a heap to take over.
        let boxes: Vec<Box<[u8; 100]>> = (0..10_000).map(|_| Box::new([5; 100])).collect();
        let before = heap.stats();
        to_test.send(blocks.clone()).unwrap();
        wake_rx.recv().unwrap(); // sleep: no allocator call
        let intact = blocks.iter().enumerate().skip(1).step_by(2).all(|(i, p)| {
            unsafe { std::slice::from_raw_parts(p.0, 100) }
                .iter()
                .all(|&b| b == i as u8)
        });
        heap.collect();
        let after = heap.stats();
        drop(boxes);
        heap.destroy();
        done_tx.send((before, after, intact)).unwrap();
    });
    let blocks = from_owner.recv().unwrap();
    let steals = ebb::stats().steals;
    // Free every other block from this thread while the owner sleeps.
    for p in blocks.iter().step_by(2) {
        unsafe { ebb::free(p.0) };
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while ebb::stats().steals == steals && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let took_over = ebb::stats().steals > steals;
    wake_tx.send(()).unwrap();
    let (before, after, intact) = done_rx.recv().unwrap();
    owner.join().unwrap();
    ebb::set_options(saved);
    assert!(
        took_over,
        "the purger never took the sleeping thread's default heap over"
    );
    assert!(intact, "blocks of the heap changed while its thread slept");
    assert_eq!(after.live_blocks, 50_000, "{before:?} {after:?}");
    assert_eq!(
        after.pages, before.pages,
        "pages left the heap while it slept"
    );
}
