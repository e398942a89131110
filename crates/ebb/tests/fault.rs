//! Clean failure: fault injection (`ebb::fault_injection`, the OS layer's `fault.rs`)
//! refuses each OS memory call site in turn; the call that needed it fails with null
//! (or falls back to a path that needs no more), the heap stays consistent, and
//! allocation works again once the OS says yes.
//!
//! ebb is called directly (not as the global allocator), so the test harness's own
//! allocations never meet an injected fault; the tests take turns on one lock since
//! the injector is process-wide.

use ebb::{FaultKind, ALL_FAULT_KINDS};
use std::sync::Mutex;

const MIB: usize = 1 << 20;
static TURN: Mutex<()> = Mutex::new(());

/// Take the injector for one test, with the background purger off (its OS calls
/// would take a number meant for the test) and no free memory kept from the tests
/// before: a huge block an earlier test freed stays mapped for reuse, and served the
/// 100 MiB `huge_mapping_refused` expects refused (6 runs in 10 with 4 test threads).
///
/// A failed assertion while faults are armed must fail the test, not hang it: where
/// ebb is the process's malloc too (the workspace's tests build it with `override`),
/// the panic hook's backtrace allocates, is refused, and the allocation-error hook
/// then waits for the backtrace lock the panic hook holds. So the injector is disarmed
/// before any panic is reported.
fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            disarm();
            report(info);
        }));
    });
    let guard = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let mut options = ebb::options();
    options.background = false;
    ebb::set_options(options);
    disarm();
    ebb::collect(true);
    guard
}

fn arm(kinds: u8, fail_from: u64, fail_until: u64) {
    ebb::fault_injection(fail_from, fail_until, kinds, usize::MAX);
}

fn disarm() {
    ebb::fault_injection(u64::MAX, u64::MAX, 0, usize::MAX);
}

/// Fill `size` bytes at `p` with a pattern derived from `seed`.
fn fill(p: *mut u8, size: usize, seed: u8) {
    // SAFETY: callers pass live blocks of at least `size` bytes.
    unsafe { std::slice::from_raw_parts_mut(p, size) }
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = seed ^ (i % 251) as u8);
}

fn holds(p: *const u8, size: usize, seed: u8) -> bool {
    // SAFETY: callers pass live blocks of at least `size` bytes.
    unsafe { std::slice::from_raw_parts(p, size) }
        .iter()
        .enumerate()
        .all(|(i, &b)| b == seed ^ (i % 251) as u8)
}

fn all_zero(p: *const u8, size: usize) -> bool {
    // SAFETY: callers pass live blocks of at least `size` bytes.
    unsafe { std::slice::from_raw_parts(p, size) }
        .iter()
        .all(|&b| b == 0)
}

/// Small, large and huge allocations all work (and are freed again).
fn allocation_works() {
    for size in [16, 3000, 200 * 1024, 2 * MIB, 40 * MIB] {
        let p = ebb::alloc(size, 16);
        assert!(
            !p.is_null(),
            "{size} bytes failed after the OS said yes again"
        );
        fill(p, size.min(1 << 16), 7);
        // SAFETY: p is live and ours.
        unsafe { ebb::free(p) };
    }
}

#[test]
fn segment_reservation_refused_under_a_budget_then_freed_memory_is_reused() {
    let _turn = exclusive();
    // A budget of two segments' worth: large blocks fill what exists, then the
    // reservation of another segment is refused and the allocation returns null.
    ebb::fault_injection(u64::MAX, u64::MAX, ALL_FAULT_KINDS, 64 * MIB);
    let before = ebb::faults_refused();
    let mut blocks = Vec::new();
    loop {
        let p = ebb::alloc(4 * MIB, 16);
        if p.is_null() {
            break;
        }
        fill(p, 4096, blocks.len() as u8);
        blocks.push(p);
        assert!(blocks.len() < 2000, "the budget was never enforced");
    }
    assert!(ebb::faults_refused() > before);
    // The heap is consistent: every block kept its contents.
    for (i, &p) in blocks.iter().enumerate() {
        assert!(holds(p, 4096, i as u8));
    }
    // Freeing memory makes allocation work again, under the same budget.
    let p = blocks.pop().unwrap();
    // SAFETY: p is live and ours.
    unsafe { ebb::free(p) };
    let again = ebb::alloc(4 * MIB, 16);
    assert!(
        !again.is_null(),
        "a freed span was not reused under the budget"
    );
    blocks.push(again);
    for p in blocks {
        // SAFETY: live and ours.
        unsafe { ebb::free(p) };
    }
    disarm();
    allocation_works();
}

#[test]
fn heap_mapping_refused() {
    let _turn = exclusive();
    std::thread::spawn(|| {
        // A new thread's first allocation maps its heap: refuse that.
        arm(FaultKind::Reserve as u8, 1, 2);
        let before = ebb::faults_refused();
        let p = ebb::alloc(24, 8);
        let refused = ebb::faults_refused() - before;
        disarm();
        if refused > 0 {
            assert!(
                p.is_null(),
                "the heap mapping was refused but malloc succeeded"
            );
        }
        // A spare heap may have served it; either way the thread allocates afterwards.
        if !p.is_null() {
            // SAFETY: live and ours.
            unsafe { ebb::free(p) };
        }
        allocation_works();
    })
    .join()
    .unwrap();
}

#[test]
fn huge_mapping_refused() {
    let _turn = exclusive();
    arm(FaultKind::Reserve as u8, 1, u64::MAX);
    let before = ebb::faults_refused();
    let p = ebb::alloc(100 * MIB, 16);
    let q = ebb::alloc_zeroed(100 * MIB, 4096);
    let refused = ebb::faults_refused() - before;
    disarm();
    assert!(
        p.is_null() && q.is_null() && refused >= 2,
        "mapped while refused: {p:?}, {q:?}; refusals {refused}"
    );
    allocation_works();
}

/// Grow a huge block with the OS calls numbered `[fail_from, fail_until)` (remaps and
/// reservations) refused; returns whether the realloc succeeded.
fn grow_huge_with_refusals(fail_from: u64, fail_until: u64) -> bool {
    // No kept huge memory (earlier tests' freed blocks): the block is a new mapping and
    // neither the grow nor the copy path is served from kept pages without an OS call.
    ebb::collect(true);
    let size = 40 * MIB;
    let p = ebb::alloc(size, 16);
    assert!(!p.is_null());
    fill(p, size, 3);
    let kinds = FaultKind::Reserve as u8 | FaultKind::Remap as u8;
    arm(kinds, fail_from, fail_until);
    let before = ebb::faults_refused();
    // SAFETY: p is live and ours.
    let q = unsafe { ebb::realloc(p, 3 * size, 16) };
    assert!(ebb::faults_refused() > before, "no OS call was refused");
    disarm();
    let (live, ok) = if q.is_null() { (p, false) } else { (q, true) };
    assert!(holds(live, size, 3), "realloc lost the contents");
    // SAFETY: live and ours.
    unsafe { ebb::free(live) };
    allocation_works();
    ok
}

#[test]
fn huge_remap_in_place_refused_moves_the_pages() {
    let _turn = exclusive();
    // Call 1, the in-place mremap, fails; the move to a new reservation succeeds.
    assert!(grow_huge_with_refusals(1, 2));
}

#[test]
fn huge_move_reservation_refused_copies() {
    let _turn = exclusive();
    // In-place remap and the move's reservation fail; the copy path succeeds.
    assert!(grow_huge_with_refusals(1, 3));
}

#[test]
fn huge_remap_move_refused_copies() {
    let _turn = exclusive();
    // In-place remap fails, the reservation succeeds, the moving mremap fails.
    assert!(grow_huge_with_refusals(1, 2) && grow_huge_with_refusals(3, 4));
}

#[test]
fn huge_realloc_refused_everywhere_keeps_the_block() {
    let _turn = exclusive();
    assert!(!grow_huge_with_refusals(1, u64::MAX));
}

#[test]
fn decommit_refused_keeps_dirty_slices_committed() {
    let _turn = exclusive();
    // A dirty large block, freed; the purge's madvise is refused, so the slices keep
    // their bytes and must not be taken for zeroed memory afterwards.
    let size = 2 * MIB;
    let p = ebb::alloc(size, 16);
    assert!(!p.is_null());
    fill(p, size, 0x5a);
    // SAFETY: live and ours.
    unsafe { ebb::free(p) };
    arm(FaultKind::Decommit as u8, 1, u64::MAX);
    let before = ebb::faults_refused();
    ebb::collect(true);
    assert!(
        ebb::faults_refused() > before,
        "the purge made no decommit call"
    );
    disarm();
    let mut zeroed = Vec::new();
    for _ in 0..8 {
        let z = ebb::alloc_zeroed(size, 16);
        assert!(!z.is_null());
        assert!(all_zero(z, size), "alloc_zeroed returned dirty memory");
        zeroed.push(z);
    }
    for z in zeroed {
        // SAFETY: live and ours.
        unsafe { ebb::free(z) };
    }
    allocation_works();
}

#[test]
fn page_purge_decommit_refused() {
    let _turn = exclusive();
    // Small and medium pages with free blocks, purged with every madvise refused.
    let mut live = Vec::new();
    for i in 0..4000usize {
        let size = [48, 1000, 40_000, 300_000][i % 4];
        let p = ebb::alloc(size, 16);
        assert!(!p.is_null());
        fill(p, size, i as u8);
        live.push((p, size, i as u8));
    }
    for (p, _, _) in live.iter().skip(1).step_by(2) {
        // SAFETY: live and ours.
        unsafe { ebb::free(*p) };
    }
    live = live.into_iter().step_by(2).collect();
    arm(FaultKind::Decommit as u8, 1, u64::MAX);
    ebb::collect(true);
    disarm();
    for &(p, size, seed) in &live {
        assert!(holds(p, size, seed));
        // SAFETY: live and ours.
        unsafe { ebb::free(p) };
    }
    for size in [48, 1000, 40_000, 300_000] {
        let z = ebb::alloc_zeroed(size, 16);
        assert!(!z.is_null() && all_zero(z, size));
        // SAFETY: live and ours.
        unsafe { ebb::free(z) };
    }
    allocation_works();
}

#[test]
fn reused_huge_zeroing_decommit_refused() {
    let _turn = exclusive();
    // A freed huge mapping is kept; alloc_zeroed reuses it and zeroes it with madvise,
    // which is refused: it must write the zeros instead. (Freed huge mappings are kept
    // only once huge requests reuse freed huge memory: a block freed and another asked
    // for right after is that sign.)
    let size = 20 * MIB;
    for _ in 0..2 {
        let p = ebb::alloc(size, 16);
        assert!(!p.is_null());
        // SAFETY: live and ours.
        unsafe { ebb::free(p) };
    }
    let p = ebb::alloc(size, 16);
    assert!(!p.is_null());
    fill(p, size, 9);
    // SAFETY: live and ours.
    unsafe { ebb::free(p) };
    arm(FaultKind::Decommit as u8, 1, u64::MAX);
    let z = ebb::alloc_zeroed(size, 16);
    disarm();
    assert!(!z.is_null());
    assert!(all_zero(z, size), "a reused huge block was not zeroed");
    // SAFETY: live and ours.
    unsafe { ebb::free(z) };
    allocation_works();
}

#[test]
fn huge_page_advice_refused_leaves_memory_working() {
    let _turn = exclusive();
    // EBB_LARGE_PAGES=1 advises each new reservation MADV_HUGEPAGE; a refusal is only
    // advice not taken: the mapping is used in small pages.
    let mut options = ebb::options();
    options.large_pages = true;
    ebb::set_options(options);
    ebb::collect(true); // no kept huge mapping: the next huge block is a new reservation
    arm(FaultKind::Advise as u8, 1, u64::MAX);
    let before = ebb::faults_refused();
    let size = 40 * MIB;
    let p = ebb::alloc(size, 16);
    let refused = ebb::faults_refused() - before;
    disarm();
    options.large_pages = false;
    ebb::set_options(options);
    assert!(refused > 0, "the reservation was not advised");
    assert!(!p.is_null(), "a refused advice failed the allocation");
    fill(p, size, 4);
    assert!(holds(p, size, 4));
    // SAFETY: live and ours.
    unsafe { ebb::free(p) };
    allocation_works();
}
