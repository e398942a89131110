//! The stash (`front::stash`): a heap keeps up to 16 empty one-slice pages its thread
//! emptied (more, up to 64, while its batches outrun it), takes its next pages from them before the arena, and gives them back when
//! it lets go of what it does not use: `ebb::collect`, thread exit, and the purger's
//! takeover of an idle heap. Everything runs in one test, in order: the figures read
//! are process-wide.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

const KIB: u64 = 1024;
/// `front::stash::STASH_MIN_PAGES` one-slice pages: a stash's bound until its
/// heap's batches outrun it.
const STASH_BOUND: u64 = 1024 * KIB;
/// `front::stash::STASH_MAX_PAGES` one-slice pages: the most a stash grows to.
const STASH_MAX_BOUND: u64 = 4 * 1024 * KIB;
/// Blocks of a batch: 1,000 KiB of 1 KiB blocks, 16 one-slice pages.
const BATCH: usize = 1000;

fn kib_layout() -> Layout {
    Layout::from_size_align(1024, 8).unwrap()
}

/// Allocate a batch of 1 KiB blocks, each filled with `fill`.
fn batch(fill: u8) -> Vec<*mut u8> {
    (0..BATCH)
        .map(|_| {
            // SAFETY: a non-zero size; the block is written within it.
            unsafe {
                let p = A.alloc(kib_layout());
                assert!(!p.is_null());
                p.write_bytes(fill, 1024);
                p
            }
        })
        .collect()
}

fn free_all(blocks: &[*mut u8]) {
    for &p in blocks {
        // SAFETY: allocated by `batch` with this layout, freed once.
        unsafe { A.dealloc(p, kib_layout()) };
    }
}

fn stashed() -> u64 {
    ebb::stats().stashed
}

fn poll_until(mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// On a thread of its own (the test harness's threads have heaps of their own too).
fn on_a_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(f).join().unwrap()
}

#[test]
fn stashed_pages_serve_the_heap_and_go_back_when_it_lets_go() {
    let mut options = ebb::options();
    options.purge_delay_ms = 100;
    ebb::set_options(options);
    let before = stashed();

    // 1. A page stashed by one class and taken by another is carved as new memory:
    //    calloc'd blocks read as zero. First, while the batch's pages are fresh from
    //    the OS: their `is_zero`, kept into the stash, would let calloc skip the
    //    memset over the first class's bytes.
    on_a_thread(move || {
        let blocks = batch(0xcd);
        free_all(&blocks);
        assert!(stashed() > before);
        let small = Layout::from_size_align(512, 8).unwrap();
        let zeroed: Vec<*mut u8> = (0..2 * BATCH)
            .map(|_| {
                // SAFETY: a non-zero size.
                let p = unsafe { A.alloc_zeroed(small) };
                assert!(!p.is_null());
                p
            })
            .collect();
        for &p in &zeroed {
            // SAFETY: a live block of 512 bytes.
            let bytes = unsafe { std::slice::from_raw_parts(p, 512) };
            assert!(
                bytes.iter().all(|&b| b == 0),
                "calloc of a block in a restashed page read non-zero bytes"
            );
        }
        for &p in &zeroed {
            // SAFETY: allocated above with this layout, freed once.
            unsafe { A.dealloc(p, small) };
        }
        assert!(
            stashed() > before,
            "the 512-byte blocks' pages were not kept"
        );
    });
    // Thread exit gave that stash back (`heap::abandon_all`), before `join` returned.
    assert_eq!(stashed(), before, "an exited thread's stash stayed");

    // 2. A batch freed by its own thread leaves emptied pages in the thread's stash,
    //    no more than the bound; `collect` gives them back.
    let (kept, after_collect) = on_a_thread(|| {
        let blocks = batch(0xab);
        free_all(&blocks);
        let kept = stashed();
        ebb::collect(false);
        (kept, stashed())
    });
    assert!(
        kept >= before + 4 * 64 * KIB,
        "the emptied pages were not kept: {kept} bytes stashed (before: {before})"
    );
    assert!(
        kept <= before + STASH_BOUND,
        "the stash passed its bound: {kept} bytes"
    );
    assert_eq!(after_collect, before, "collect left pages in the stash");

    // 2b. Batches bigger than the stash (a thousand 4 KiB blocks: 63 pages) grow its
    //     bound, to no more than its maximum; letting go of the stash sets it back.
    let (grown, reset) = on_a_thread(|| {
        let big = Layout::from_size_align(4096, 8).unwrap();
        let big_batch = || -> Vec<*mut u8> {
            (0..BATCH)
                .map(|_| {
                    // SAFETY: a non-zero size.
                    let p = unsafe { A.alloc(big) };
                    assert!(!p.is_null());
                    p
                })
                .collect()
        };
        let free_big = |blocks: Vec<*mut u8>| {
            for p in blocks {
                // SAFETY: allocated by `big_batch` with this layout, freed once.
                unsafe { A.dealloc(p, big) };
            }
        };
        let mut grown = Vec::new();
        for _ in 0..4 {
            free_big(big_batch());
            grown.push(stashed());
        }
        ebb::collect(false);
        free_big(big_batch());
        let reset = stashed();
        ebb::collect(false);
        (grown, reset)
    });
    assert!(
        grown[0] <= before + STASH_BOUND,
        "the first batch passed the starting bound: {grown:?}"
    );
    assert!(
        grown.iter().any(|&kept| kept > before + STASH_BOUND),
        "batches bigger than the stash did not grow it: {grown:?} bytes stashed"
    );
    assert!(
        grown.iter().all(|&kept| kept <= before + STASH_MAX_BOUND),
        "the stash passed its maximum: {grown:?}"
    );
    assert!(
        reset <= before + STASH_BOUND,
        "collect did not set the bound back: {reset} bytes stashed"
    );

    // 3. A thread that sleeps after freeing its batch: the purger takes its idle heap
    //    over, stash included, without the thread calling the allocator again.
    let (park_tx, park_rx) = mpsc::channel::<()>();
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let sleeper = std::thread::spawn(move || {
        let blocks = batch(0xef);
        free_all(&blocks);
        drop(blocks);
        ready_tx.send(()).unwrap();
        park_rx.recv().unwrap();
    });
    ready_rx.recv().unwrap();
    assert!(
        poll_until(|| stashed() == before),
        "a sleeping thread's stash stayed: {} bytes",
        stashed()
    );
    park_tx.send(()).unwrap();
    sleeper.join().unwrap();

    // 4. A free into a stashed page (a double free of a block of the batch) is reported
    //    as a free of memory not in use, and changes nothing.
    let mut options = ebb::options();
    options.abort_on_error = false;
    ebb::set_options(options);
    let invalid_before = ebb::stats().invalid_frees;
    let still_stashed = on_a_thread(move || {
        let blocks = batch(0x12);
        // Past the thread's first blocks (the shared start pages) and its first page.
        let first = blocks[BATCH / 4];
        free_all(&blocks);
        let kept = stashed();
        // SAFETY: deliberately invalid (freed above); ebb reports it and returns.
        unsafe { A.dealloc(first, kib_layout()) };
        let again = batch(0x34);
        let distinct: std::collections::HashSet<usize> =
            again.iter().map(|&p| p as usize).collect();
        assert_eq!(distinct.len(), BATCH, "a block was handed out twice");
        free_all(&again);
        kept
    });
    assert!(still_stashed > before);
    assert_eq!(
        ebb::stats().invalid_frees,
        invalid_before + 1,
        "the free into a stashed page was not reported"
    );
}
