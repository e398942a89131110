//! Heaps whose blocks other threads are freeing: a hint for the takeover of idle heaps.
//!
//! A heap keeps its current page of each class and a few full ones (`front/slow.rs`,
//! `FULL_PAGE_SLICES_KEPT`); blocks other threads free into them wait on the pages'
//! remote lists until the owner's next slow path of the class, or until the purger
//! takes the heap over, which for a quiet heap comes one purge delay after it went
//! quiet. A loader that builds data and then sleeps while other threads replace it
//! item by item (issue 14's sleeping owner) strands every block freed into those pages
//! for that long, and the other threads fault in fresh memory meanwhile.
//!
//! What tells the purger that this is happening, without a cost on the free path: the
//! drainer (`drain::drain_page`) takes in remote frees of abandoned pages and knows
//! which heap last owned each (`Page::last_owner`). If another thread frees blocks that
//! a heap allocated into the pages that heap let go of, it is likely freeing its blocks
//! in the pages the heap still holds too. The drainer records that heap here
//! ([`note`]); the takeover pass (`front::takeover`) then takes it over once it has
//! been quiet for one retention period instead of a whole purge delay.
//!
//! The record is a small table of heap addresses, a slot per heap by its address. A
//! slot taken by another heap drops the record (the heap is then taken over after the
//! usual delay: a hint lost, nothing wrong). An entry stays until its heap is taken
//! over or exits ([`forget`]), so a heap is recorded, and the purger woken for it, once
//! per takeover however many frees follow. Heaps are never unmapped, so a stale entry
//! (a heap address reused by a new thread) is only a wrong hint.

use crate::span::deadline;
use core::sync::atomic::{AtomicUsize, Ordering};

/// Slots of the table. A hint per heap; more heaps than slots only lose hints.
pub const SLOTS: usize = 16;

/// Heap addresses, a slot per heap by its address (0: empty).
pub struct Table([AtomicUsize; SLOTS]);

/// The process's table.
pub static FREED_INTO: Table = Table::new();

impl Table {
    pub const fn new() -> Table {
        Table([const { AtomicUsize::new(0) }; SLOTS])
    }

    /// The slot of a heap (by its address: heaps are page aligned).
    fn slot(&self, heap: usize) -> &AtomicUsize {
        &self.0[(heap >> 12) % SLOTS]
    }

    /// Record `heap` (not 0); true if this call recorded it (the slot was empty).
    pub fn record(&self, heap: usize) -> bool {
        debug_assert!(heap != 0);
        let slot = self.slot(heap);
        // Read first: a heap recorded already costs no write to a shared line.
        slot.load(Ordering::Relaxed) == 0
            && slot
                .compare_exchange(0, heap, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// True if `heap` is recorded.
    pub fn holds(&self, heap: usize) -> bool {
        heap != 0 && self.slot(heap).load(Ordering::Relaxed) == heap
    }

    /// Drop `heap`'s record, if it has one.
    pub fn forget(&self, heap: usize) {
        let _ = self
            .slot(heap)
            .compare_exchange(heap, 0, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// Drop every record.
    pub fn clear(&self) {
        for slot in &self.0 {
            slot.store(0, Ordering::Relaxed);
        }
    }
}

/// Another thread's frees into a page `heap` abandoned were taken in: record it and,
/// the first time, ask the purger to look at idle heaps now (so the heap's quiet time
/// is measured from about now, not from its last look, up to a purge delay ago; looks
/// asked for within a quarter retention period of the last are batched:
/// `deadline::schedule_steal_check_now`). `heap` 0 (no last owner) is ignored.
pub fn note(heap: usize) {
    if heap != 0 && FREED_INTO.record(heap) {
        deadline::schedule_steal_check_now();
    }
}

/// True if `heap` is recorded.
pub fn is_noted(heap: usize) -> bool {
    FREED_INTO.holds(heap)
}

/// `heap` was taken over or its thread exited: drop its record.
pub fn forget(heap: usize) {
    FREED_INTO.forget(heap);
}

/// Drop every record (a fork child: the heaps recorded belong to threads that did not
/// survive, and their pages are abandoned anyway).
pub fn reset_after_fork() {
    FREED_INTO.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heap_is_recorded_once_and_forgotten() {
        let table = Table::new();
        let a = 0x7000_0000_3000usize;
        let b = a + SLOTS * 4096; // the same slot as `a`
        assert!(!table.holds(a));
        assert!(table.record(a));
        assert!(!table.record(a), "recorded once");
        assert!(table.holds(a));
        assert!(!table.record(b), "the slot is a's: b's hint is dropped");
        assert!(!table.holds(b));
        table.forget(b); // not b's entry: a stays
        assert!(table.holds(a));
        table.forget(a);
        assert!(!table.holds(a));
        assert!(!table.holds(0), "an empty slot holds no heap");
        assert!(table.record(b));
        table.clear();
        assert!(!table.holds(b));
    }
}
