//! Model of protocol H: which heaps the purger's idle walk visits (the registry's
//! holders list, `process/registry.rs`; the steps `holder_must_list` and
//! `holder_may_unlist` in `crates/ebb/src/protocol/`, compiled here with loom's
//! atomics).
//!
//! # The model
//! One heap with its real words: the page count (`page_count`, written by its owner
//! only) and the `listed` flag as atomics; whether it is on the holders list
//! (`on_holders`) under a loom `Mutex` standing for the registry lock. It starts as a
//! holder (count 1, listed, linked). Two threads:
//!
//! * the owner (`front/queue.rs`): its pages are taken (`queue_take_off` stores the
//!   count 1 → 0; the takeover that does it runs on the purger in production, which
//!   then publishes the count with the registry lock and the handshake; here the owner
//!   stores it, a weaker ordering for the walker), then it takes a page again
//!   (`queue_push_front`: count 0 → 1) and runs step H1 (`registry::note_holder`);
//! * the walker (`registry::Registry::walk_holders`, under the lock): a count read as 0
//!   runs step H2 and unlinks the heap if that says so.
//!
//! # Properties checked
//! After both finish: a heap that holds pages is on the list (`count > 0 ⇒
//! on_holders`), and `listed ⇒ on_holders` (the owner never skips the lock for a heap
//! that is off the list). The negative control (`Fault::SkipHolderFence`: the owner
//! reads `listed` without its fence) must break the first.

use crate::protocol;
#[cfg(test)]
use crate::protocol::shim::Fault;
use crate::Coverage;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

/// The walker unlinked the heap (its re-read count was 0).
pub const WALKER_UNLINKED: &str = "walker unlinked the heap";
/// The walker's re-read saw the owner's new count and kept the heap.
pub const WALKER_KEPT_ON_RECHECK: &str = "walker kept the heap on its re-read";
/// The walker read a count of 1 at once.
pub const WALKER_SAW_PAGES: &str = "walker saw pages";
/// The owner found its heap listed (no lock).
pub const OWNER_SAW_LISTED: &str = "owner saw its heap listed";
/// The owner took the lock and linked its heap again.
pub const OWNER_RELINKED: &str = "owner linked its heap again";
/// The owner took the lock and found the heap still linked.
pub const OWNER_FOUND_LINKED: &str = "owner found its heap linked";

struct Heap {
    page_count: AtomicUsize,
    listed: AtomicBool,
    /// `Link::on_holders`, under the registry lock.
    on_holders: Mutex<bool>,
}

/// One execution; panics if a property fails. `coverage` records the branches taken.
pub fn model(coverage: &std::sync::Arc<Coverage>) {
    let heap = Arc::new(Heap {
        page_count: AtomicUsize::new(1),
        listed: AtomicBool::new(true),
        on_holders: Mutex::new(true),
    });
    let owner = {
        let heap = heap.clone();
        let coverage = coverage.clone();
        thread::spawn(move || {
            // `queue_take_off` (count 1 → 0), then `queue_push_front` (0 → 1).
            heap.page_count.store(0, Ordering::Relaxed);
            heap.page_count.store(1, Ordering::Relaxed);
            // `registry::note_holder`.
            if !protocol::holder_must_list(&heap.listed) {
                coverage.hit(OWNER_SAW_LISTED);
                return;
            }
            let mut on_holders = heap.on_holders.lock().unwrap();
            heap.listed.store(true, Ordering::Relaxed);
            if *on_holders {
                coverage.hit(OWNER_FOUND_LINKED);
            } else {
                *on_holders = true;
                coverage.hit(OWNER_RELINKED);
            }
        })
    };
    {
        // `Registry::walk_holders` for this heap.
        let mut on_holders = heap.on_holders.lock().unwrap();
        if *on_holders {
            if heap.page_count.load(Ordering::Relaxed) != 0 {
                coverage.hit(WALKER_SAW_PAGES);
            } else if protocol::holder_may_unlist(&heap.listed, &heap.page_count) {
                *on_holders = false;
                coverage.hit(WALKER_UNLINKED);
            } else {
                coverage.hit(WALKER_KEPT_ON_RECHECK);
            }
        }
    }
    owner.join().unwrap();
    let on_holders = *heap.on_holders.lock().unwrap();
    let count = heap.page_count.load(Ordering::Relaxed);
    let listed = heap.listed.load(Ordering::Relaxed);
    assert!(
        count == 0 || on_holders,
        "a heap that holds pages is off the holders list (count {count}, listed {listed})"
    );
    assert!(
        !listed || on_holders,
        "a listed heap is off the holders list"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{check, expect_failure};

    /// Every interleaving.
    #[test]
    fn holder_is_never_off_the_list() {
        let coverage = Coverage::new();
        let seen = coverage.clone();
        check(None, move || model(&seen));
        coverage.assert_reached(&[
            WALKER_UNLINKED,
            WALKER_KEPT_ON_RECHECK,
            WALKER_SAW_PAGES,
            OWNER_SAW_LISTED,
            OWNER_RELINKED,
            OWNER_FOUND_LINKED,
        ]);
    }

    /// Negative control: the owner reads `listed` without the fence: its read misses
    /// the walker's clear while the walker's re-read misses the new count (store
    /// buffering), and the heap holds pages off the list: the purger never looks at it
    /// again, so its pages are never taken over.
    #[test]
    fn holder_without_fence_falls_off_the_list() {
        expect_failure(None, &["off the holders list"], || {
            protocol::shim::with_faults(&[Fault::SkipHolderFence], || model(&Coverage::new()))
        });
    }
}
