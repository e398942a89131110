//! # ebb-loom: model-checked hand-off protocols of ebb
//!
//! [loom](https://docs.rs/loom) explores every interleaving (up to a preemption bound) and
//! every value a weak-memory load may return of a small concurrent program, and reports
//! any non-atomic access that is not ordered by happens-before. This crate holds such
//! programs — *models* — of the two places where ebb hands a page's private state from
//! one thread to another without a lock, and of the list that tells the purger which
//! heaps may hold pages:
//!
//! * [`steal`]: the idle-heap takeover (`protocol::Handshake`, run by
//!   `front/takeover.rs`) against the owner's fast and slow paths (`front/alloc.rs`,
//!   `front/slow.rs`).
//! * [`collect`]: remote frees into abandoned pages and their draining
//!   (`handoff/abandon.rs`, `handoff/drain.rs`, `span/page.rs` `free_remote`,
//!   `take_remote_frees`).
//! * [`holders`]: which heaps the purger's idle walk visits (the registry's holders
//!   list, `process/registry.rs`): a heap that holds pages never falls off it.
//!
//! **The protocol steps are production's own code.** `crates/ebb/src/protocol/` (the
//! steps: `push_remote`, `must_notify_after_push`, `publish_abandoned`, `claim`,
//! `take_list`, `signal`, `take_signal`, `take_signalled`, `release_free`,
//! `holder_must_list`, `holder_may_unlist`, `Handshake`
//! with `enter`, `leave`, `wait_while_stealing`, `try_steal`, `mark_stolen`,
//! `unmark_stolen`) is compiled into this crate as [`protocol`], with `cfg(loom)` set
//! by `build.rs`, so its atomics are loom's: every ordering and re-check the models
//! check is the one production runs. The models supply what production keeps in
//! other layers — the page's private lists, the heap's queue and table, the abandoned
//! list — as loom cells, and call the protocol functions where production does.
//!
//! Each model is run as it is meant to work (it must pass, and must reach every branch
//! of the protocol: see [`Coverage`]) and with one step of the protocol removed (a
//! *negative control*: it must fail, for the expected reason, or the model proves
//! nothing).
//!
//! ## Negative controls
//! Each removes one step of production's protocol through the test-only switch
//! `protocol::shim::with_faults` (`Fault::SkipPublishRecheck`, `WeakRemotePush`,
//! `NoOwnerBarrier`, `SkipStep2Check`, `SkipStep4Check`, `SkipHolderFence`): the step that checks the
//! fault runs without its ordering or re-check, and the model must fail. Outside loom
//! the switch is the constant `false`.
//!
//! ## Findings (see the modules for the interleavings; all fixed in production since,
//! the tests named below stay as negative controls)
//! * `alloc::alloc_zeroed` read the page's `free_is_zero` after `malloc` returned, i.e.
//!   outside the heap's `in_op` window, so a steal can complete in between and the read
//!   races with the stealer's (and then a claiming heap's) writes to the page
//!   ([`steal::alloc_zeroed_model`]; tests `alloc_zeroed_*`).
//! * `Page::free_remote` pushed with an AcqRel CAS (now SeqCst), which is not part of the SeqCst order
//!   the push/owner-load vs. store-owner/load-list Dekker pair relies on; formally a
//!   remote free can be stranded (hardware does not do it on x86 or AArch64). See
//!   [`collect`].
//!
//! * The takeover's undo (step 4) rebuilt the table with `Heap::set_current`, which
//!   rewrites the current page's `used` word while the owner's fast path (the reason
//!   for the undo) may be incrementing it; and step 5 took pages off the queue with
//!   `queue_remove`, whose `refresh_current` made the next page current, so the owner's
//!   malloc popped from a page the stealer was abandoning. Either lost a page count
//!   (sqlite under `EBB_PURGE_DELAY=0`: a page freed under a live block). Found in
//!   production first, then modelled ([`steal::undo_model`], [`steal::take_model`];
//!   tests `undo_*`, `take_*`).
//!
//! ## What is modelled
//! * A page's private state — `free`, `local_free`, `used`, `listed`, the link word of
//!   each block — is a `loom::cell::UnsafeCell`, so loom reports any access by two
//!   threads that the protocol does not order. The free lists are block *sets* (bit
//!   masks) except `thread_free`, which is the real CAS-pushed LIFO through block link
//!   words, because its publication of the links is part of what is checked.
//! * The atomics are production's, in production's code (`protocol`).
//! * Ghost state (plain `std` atomics, invisible to loom) records who holds a page's
//!   private state and which blocks were collected; the models assert on it
//!   (mutual exclusion, one owner at a time, every remote free collected once).
//!
//! ## What is abstracted away
//! * `membarrier()` (an asymmetric barrier: every running thread of the process passes a
//!   full barrier before it returns) cannot be expressed in loom. The shim models it
//!   the standard way: the stealer's `membarrier` (`shim::stealer_barrier`) is
//!   `fence(SeqCst)`, and the owner's compiler fence after its `in_op` store
//!   (`shim::owner_barrier`) is `fence(SeqCst)` too (see [`steal`] for why this is the
//!   symmetric equivalent).
//! * SeqCst *accesses*: loom implements the single total order only for SeqCst fences,
//!   not for SeqCst loads and stores, so a Dekker pair written with SeqCst accesses
//!   alone fails under loom even where C++20/Rust guarantee it. Where production relies
//!   on "SeqCst store (or RMW), then SeqCst load of another location", the protocol
//!   calls `shim::dekker_fence()` between them: nothing in production, `fence(SeqCst)`
//!   under loom (equivalent for that pattern).
//! * Two threads spinning on `yield_now` at once make loom explore unfair schedules
//!   forever, so no model has two (see [`steal::Owner::Idle`]).
//! * `os::yield_now` (and the futex waits of the purger) become `loom::thread::yield_now`;
//!   `purge::wake_for_collect` is not modelled: the purger it wakes is the final
//!   `collect_pending` pass each model runs after joining its threads ("eventually").
//! * Size classes, segments, spans, the direct/current tables (one entry for one class),
//!   carving (`extend`; pages are fully carved) and the statistics counters are left out.
//!
//! ## Keep in step with the production code
//! A change to an ordering or a re-check in `crates/ebb/src/protocol/` is checked by
//! the models as it stands. What the models still write by hand is the glue between
//! the steps (which step production calls when, the private lists, queues, tables and
//! the abandoned list), each citing the function it stands for: a change to *that*
//! (say, `front/slow.rs` calling the steps in another order) must be made in the model
//! too. Run: `cargo test --release -p ebb-loom`. Larger explorations:
//! `LOOM_MAX_PREEMPTIONS=4 cargo test --release -p ebb-loom` (slow).

/// ebb's protocol steps, compiled here with `cfg(loom)` (its shim then uses loom's
/// atomics and barriers): the models call the production code itself.
#[path = "../../ebb/src/protocol/mod.rs"]
pub mod protocol;

pub mod collect;
pub mod holders;
pub mod steal;

use std::collections::BTreeMap;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Run `model` under loom, exploring every interleaving with at most `preemptions`
/// preemptions (`None`: all interleavings), or `LOOM_MAX_PREEMPTIONS` if that is set.
/// Never stops early: a time or permutation limit from the environment would let a
/// model pass unexplored. Returns the number of executions explored (also printed; see
/// it with `--nocapture`).
pub fn check<F>(preemptions: Option<usize>, model: F) -> usize
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    let bound = builder.preemption_bound.or(preemptions);
    builder.preemption_bound = bound;
    builder.max_duration = None;
    builder.max_permutations = None;
    let executions = Arc::new(AtomicUsize::new(0));
    let counter = executions.clone();
    builder.check(move || {
        counter.fetch_add(1, Ordering::Relaxed);
        model()
    });
    let executions = executions.load(Ordering::Relaxed);
    match bound {
        Some(bound) => println!("explored {executions} executions (preemption bound {bound})"),
        None => println!("explored all {executions} executions"),
    }
    executions
}

/// Run a model that must fail (a negative control) and return loom's or the model's
/// panic message, which must contain one of `expected`. Panics if the model passes, or
/// fails for another reason (for example loom's branch limit).
pub fn expect_failure<F>(preemptions: Option<usize>, expected: &[&str], model: F) -> String
where
    F: Fn() + Sync + Send + 'static,
{
    // The panic hook still prints the failure (libtest captures it unless --nocapture).
    let result = panic::catch_unwind(AssertUnwindSafe(|| {
        check(preemptions, model);
    }));
    let payload = match result {
        Ok(()) => panic!("negative control passed: the model did not detect the bug"),
        Err(payload) => payload,
    };
    let message = if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else {
        "<non-string panic>".to_string()
    };
    assert!(
        expected.iter().any(|e| message.contains(e)),
        "negative control failed for an unexpected reason: {message}"
    );
    println!(
        "the model caught the bug: {}",
        message.lines().next().unwrap_or("")
    );
    message
}

/// Which branches of a protocol the explored executions took: a model whose
/// interesting branches are never reached (say, a steal that never succeeds) would pass
/// without checking anything, so the passing tests assert that each was reached.
#[derive(Default)]
pub struct Coverage {
    hits: Mutex<BTreeMap<&'static str, usize>>,
}

impl Coverage {
    pub fn new() -> Arc<Coverage> {
        Arc::new(Coverage::default())
    }

    /// An execution took the branch `what`.
    pub fn hit(&self, what: &'static str) {
        *self.hits.lock().unwrap().entry(what).or_insert(0) += 1;
    }

    /// Panic unless every branch in `expected` was taken by some execution.
    pub fn assert_reached(&self, expected: &[&str]) {
        let hits = self.hits.lock().unwrap();
        for (what, count) in hits.iter() {
            println!("  {count:>8}  {what}");
        }
        let missing: Vec<_> = expected.iter().filter(|e| !hits.contains_key(*e)).collect();
        assert!(missing.is_empty(), "branches never reached: {missing:?}");
    }
}

/// Read a model `UnsafeCell` (a checked non-atomic read).
#[track_caller]
pub(crate) fn get<T: Copy>(cell: &loom::cell::UnsafeCell<T>) -> T {
    // SAFETY: loom checks that no write is concurrent with this read; that is the point.
    cell.with(|p| unsafe { *p })
}

/// Write a model `UnsafeCell` (a checked non-atomic write).
#[track_caller]
pub(crate) fn set<T>(cell: &loom::cell::UnsafeCell<T>, value: T) {
    // SAFETY: as above, for every other access.
    cell.with_mut(|p| unsafe { *p = value })
}

/// Messages of loom's data-race reports (accesses to an `UnsafeCell` that are not
/// ordered by happens-before).
pub const RACE: &str = "Causality violation";
