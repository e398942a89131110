//! The tests of `steal.rs`: the models run by loom, and their negative controls.

use super::*;
use crate::protocol::shim::{with_faults, Fault};
use crate::{check, expect_failure, RACE};

/// Every interleaving (the full owner program: about 240k executions, ~10 s).
const ALL: Option<usize> = None;
const MUTEX: &str = "mutual exclusion";

#[test]
fn steal_handshake() {
    let coverage = Coverage::new();
    let c = coverage.clone();
    check(ALL, move || model(Owner::FourCalls, false, &c));
    coverage.assert_reached(&[
        GAVE_UP_STEP2,
        UNDONE_STEP4,
        TOOK_P,
        TOOK_NOTHING,
        WAITED,
        MALLOC_EMPTY,
        FREE_UNDONE,
        FREE_RECLAIMED,
    ]);
}

#[test]
fn steal_handshake_fast_paths() {
    let coverage = Coverage::new();
    let c = coverage.clone();
    check(ALL, move || model(Owner::FastPaths, false, &c));
    coverage.assert_reached(&[
        GAVE_UP_STEP2,
        UNDONE_STEP4,
        TOOK_P,
        MALLOC_EMPTY,
        FREE_UNDONE,
        FREE_RECLAIMED,
    ]);
}

/// Another thread frees a block of an idle owner's P during the steal: it waits
/// while P is STOLEN, and its push races with step 5's collect and
/// `publish_abandoned`'s re-check.
#[test]
fn steal_vs_remote_free() {
    let coverage = Coverage::new();
    let c = coverage.clone();
    check(ALL, move || model(Owner::Idle, true, &c));
    coverage.assert_reached(&[TOOK_P, REMOTE_WAITED, REMOTE_NOTIFIED, RECHECK_NOTIFIED]);
}

/// The same without `publish_abandoned`'s re-check: a free pushed after step 5's
/// collect reads STOLEN (then, its push done, the owner word before ABANDONED), and
/// nobody notifies.
#[test]
fn steal_vs_remote_free_without_recheck_is_caught() {
    let coverage = Coverage::new();
    with_faults(&[Fault::SkipPublishRecheck], || {
        expect_failure(ALL, &["remote free stranded"], move || {
            model(Owner::Idle, true, &coverage)
        })
    });
}

/// The model of `owner`'s program with `fault` injected into production's handshake:
/// it must fail with one of `expected`.
fn expect_caught(fault: Fault, owner: Owner, expected: &[&str]) {
    let coverage = Coverage::new();
    with_faults(&[fault], || {
        expect_failure(ALL, expected, move || model(owner, false, &coverage))
    });
}

/// Without step 4, an owner fast path that read P from the table before the marks
/// pops from P while (or after) the stealer abandons it.
#[test]
fn steal_without_step4_recheck_is_caught() {
    expect_caught(Fault::SkipStep4Check, Owner::FastPaths, &[MUTEX, RACE]);
}

/// Without the owner's fence (membarrier's effect), the fast path's `in_op` store and
/// its table/owner loads form a store-buffering pair with the stealer's marks and
/// `in_op` load: both read old values.
#[test]
fn steal_without_owner_fence_is_caught() {
    expect_caught(Fault::NoOwnerBarrier, Owner::FastPaths, &[MUTEX, RACE]);
}

/// The same on the slow path: `wait_while_stealing` misses STEALING while the stealer
/// misses `in_op`, and both touch the heap's queue.
#[test]
fn steal_without_owner_fence_slow_path_is_caught() {
    expect_caught(Fault::NoOwnerBarrier, Owner::FourCalls, &[MUTEX, RACE]);
}

/// Without step 2, a slow path that passed `wait_while_stealing` before step 1 edits
/// the queue while step 3 reads it.
#[test]
fn steal_without_step2_check_is_caught() {
    expect_caught(Fault::SkipStep2Check, Owner::FourCalls, &[RACE, MUTEX]);
}

/// Negative control: the old `alloc::alloc_zeroed` (flag read after `leave`, a bug
/// this model found; see [`alloc_zeroed_model`]) races with a steal.
#[test]
fn alloc_zeroed_flag_read_after_leave_races_with_steal() {
    let coverage = Coverage::new();
    expect_failure(ALL, &[RACE], move || alloc_zeroed_model(false, &coverage));
}

/// Production: re-enter, check the page is still ours, then read `free_is_zero`.
#[test]
fn alloc_zeroed_flag_read_inside_window_is_safe() {
    let coverage = Coverage::new();
    let c = coverage.clone();
    check(ALL, move || alloc_zeroed_model(true, &c));
    coverage.assert_reached(&[GAVE_UP_STEP2, UNDONE_STEP4, TOOK_P]);
}

/// Negative control: the old undo (`refresh_current`, which rewrites the current page's
/// `used` word) races with the fast path that made the stealer undo (see
/// [`undo_model`]).
#[test]
fn undo_that_rewrites_the_page_count_races_with_fast_path() {
    let coverage = Coverage::new();
    expect_failure(ALL, &[RACE], move || undo_model(true, &coverage));
}

/// Production: the undo restores the table entry only.
#[test]
fn undo_that_restores_the_table_only_is_safe() {
    let coverage = Coverage::new();
    let c = coverage.clone();
    check(ALL, move || undo_model(false, &c));
    coverage.assert_reached(&[GAVE_UP_STEP2, UNDONE_STEP4, TOOK_P, FREE_UNDONE]);
}

/// Negative control: step 5 as it once was (`queue_remove` made the next queued page
/// current) lets the owner's malloc pop from a page being abandoned (see
/// [`take_model`]).
#[test]
fn take_that_makes_the_next_page_current_races_with_malloc() {
    let coverage = Coverage::new();
    expect_failure(ALL, &[RACE], move || take_model(true, &coverage));
}

/// Production: step 5 leaves the table at the empty page.
#[test]
fn take_that_leaves_the_table_empty_is_safe() {
    let coverage = Coverage::new();
    let c = coverage.clone();
    check(ALL, move || take_model(false, &c));
    coverage.assert_reached(&[GAVE_UP_STEP2, UNDONE_STEP4, TOOK_P, MALLOC_EMPTY]);
}
