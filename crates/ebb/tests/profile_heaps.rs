//! The heap profiler where the thread heaps' slow-path hook does not reach on its own:
//! first-class heaps (`ebb::Heap`) and check mode (`EBB_CHECK=1`, every malloc on the
//! slow path). Each site's estimate within 10% of the truth, frees credited, and a
//! destroyed heap's samples no longer in use.
//!
//! No global allocator here: only the tests' own blocks go through ebb, so the totals
//! over every sampled stack are the sites' totals. Statistical tolerance: sampling at a
//! mean of 64 KiB with the default seed (fixed: each run is the same), the smallest
//! site gets ~700 samples (standard error ~3.8%); 10% is over 2.5 of them.

use std::process::Command;

const RATE: u64 = 64 << 10;

/// Estimated bytes allocated and still in use, over every sampled stack.
fn totals() -> (f64, f64) {
    let (mut alloc, mut inuse) = (0u64, 0u64);
    ebb::profile::for_each_site(|s| {
        alloc += s.alloc_bytes;
        inuse += s.inuse_bytes;
    });
    (alloc as f64, inuse as f64)
}

#[track_caller]
fn assert_within(what: &str, estimate: f64, truth: f64) {
    let error = (estimate - truth).abs() / truth;
    assert!(
        error < 0.10,
        "{what}: estimated {estimate}, true {truth} ({:.1}% off, allowed 10%)",
        error * 100.0
    );
}

/// Allocate `count` blocks of `size` bytes through `alloc`, freeing every other one at
/// once through `free`; returns the kept ones.
fn churn(
    count: usize,
    size: usize,
    alloc: impl Fn(usize) -> *mut u8,
    free: impl Fn(*mut u8),
) -> Vec<usize> {
    let mut kept = Vec::with_capacity(count / 2);
    for i in 0..count {
        let p = alloc(size);
        assert!(!p.is_null());
        // SAFETY: a live block of `size` bytes.
        unsafe { p.write_bytes(i as u8, size) };
        if i % 2 == 0 {
            free(p);
        } else {
            kept.push(p as usize);
        }
    }
    kept
}

#[test]
fn first_class_heap_samples_and_destroy_credits() {
    assert!(ebb::profile::start(RATE));
    let heap = ebb::Heap::new();
    // SAFETY (both closures): blocks of `heap`, freed once.
    let small = churn(
        1_000_000,
        48,
        |n| heap.alloc(n, 8),
        |p| unsafe { heap.free(p) },
    );
    let medium = churn(
        40_000,
        3000,
        |n| heap.alloc(n, 8),
        |p| unsafe { heap.free(p) },
    );
    let (alloc, inuse) = totals();
    let truth = 48.0 * 1e6 + 3000.0 * 4e4;
    assert_within("first-class heap, allocated", alloc, truth);
    assert_within("first-class heap, in use", inuse, truth / 2.0);
    // Every block dies with the heap: no sample may stay in use.
    heap.destroy();
    drop((small, medium));
    let (_, inuse) = totals();
    assert_eq!(inuse, 0.0, "samples of a destroyed heap still in use");
    ebb::profile::stop();
}

/// Runs the check-mode child below in a process of its own (check mode is chosen when
/// the process starts).
#[test]
fn check_mode_samples() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "check_mode_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("EBB_CHECK", "1")
        .env("EBB_PROFILE_CHECK_CHILD", "1")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("check-mode child done"), "{text}");
}

#[test]
fn check_mode_child() {
    if std::env::var_os("EBB_PROFILE_CHECK_CHILD").is_none() {
        return;
    }
    assert!(ebb::options().check, "EBB_CHECK=1 did not take");
    assert!(ebb::profile::start(RATE));
    let alloc = |n| ebb::alloc(n, 8);
    // SAFETY: blocks from `ebb::alloc`, freed once.
    let free = |p| unsafe { ebb::free(p) };
    let small = churn(1_000_000, 48, alloc, free);
    let medium = churn(40_000, 3000, alloc, free);
    let (allocated, inuse) = totals();
    let truth = 48.0 * 1e6 + 3000.0 * 4e4;
    assert_within("check mode, allocated", allocated, truth);
    assert_within("check mode, in use", inuse, truth / 2.0);
    for p in small.into_iter().chain(medium) {
        free(p as *mut u8);
    }
    let (_, inuse) = totals();
    assert_eq!(inuse, 0.0, "freed samples still in use");
    ebb::profile::stop();
    println!("check-mode child done");
}

/// Runs the big-block child below in a process of its own (the sites' totals must be
/// its blocks' alone, and the other tests sample at the same time).
#[test]
fn big_blocks_credited() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "big_blocks_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("EBB_PROFILE_BIG_CHILD", "1")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("big-block child done"), "{text}");
}

/// Large blocks (their span's descriptor keeps the sample's slot) and huge ones moved
/// by `realloc` (the descriptor moves with the mapping): every free credited.
#[test]
fn big_blocks_child() {
    if std::env::var_os("EBB_PROFILE_BIG_CHILD").is_none() {
        return;
    }
    assert!(ebb::profile::start(RATE));
    let alloc = |n| ebb::alloc(n, 8);
    // SAFETY: blocks from `ebb::alloc`, freed once.
    let free = |p| unsafe { ebb::free(p) };
    let large = churn(2_000, 600 << 10, alloc, free);
    let (allocated, inuse) = totals();
    let truth = (600u64 << 10) as f64 * 2e3;
    assert_within("large blocks, allocated", allocated, truth);
    assert_within("large blocks, in use", inuse, truth / 2.0);
    for p in large {
        free(p as *mut u8);
    }
    let (_, inuse) = totals();
    assert_eq!(inuse, 0.0, "freed large samples still in use");
    // Huge blocks (sampled every one at this rate), each grown by `realloc`: the
    // mapping after a block is usually taken (a later block), so most move.
    let huge: Vec<usize> = (0..8).map(|_| alloc(20 << 20) as usize).collect();
    let mut moved = 0;
    let grown: Vec<usize> = huge
        .iter()
        .map(|&p| {
            // SAFETY: a live block from `ebb::alloc` with this alignment.
            let q = unsafe { ebb::realloc(p as *mut u8, 48 << 20, 8) };
            assert!(!q.is_null());
            moved += (q as usize != p) as usize;
            q as usize
        })
        .collect();
    assert!(moved > 0, "no huge block moved: the test checks nothing");
    let (_, inuse) = totals();
    assert!(inuse > 0.0, "grown huge blocks not in use");
    for p in grown {
        free(p as *mut u8);
    }
    let (_, inuse) = totals();
    assert_eq!(
        inuse, 0.0,
        "freed huge samples still in use ({moved} moved)"
    );
    ebb::profile::stop();
    println!("big-block child done");
}
