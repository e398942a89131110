//! Which size classes' hole purges find holes, and deferring the ones that do not.
//!
//! Finding a page's holes (`holes::purge_into`) walks its free lists: one dependent load
//! per free block, and right after other threads freed those blocks each load is a
//! cache line fetched from another core. In the worker-pool scenario that walk was
//! nearly half of the purger's CPU time (perf, `cpu-clock`: 403 of 867 samples of the
//! purger thread in the walk, the rest mostly the kernel's `MADV_DONTNEED`), and it found
//! nothing: its 16-64 B tokens survive one in twenty, evenly, so every OS page of every
//! token page keeps a survivor. Pages of classes whose survivors are clustered (trees
//! built together, sparse-survivors) are full of holes, and there the walk pays.
//!
//! So each class remembers how many of its hole walks in a row found no hole. Once
//! [`BARREN_WALKS`] in a row found none, the class's small pages are purged inside only
//! after [`DEFER_FACTOR`] purge delays instead of one, counted from when they were
//! abandoned: the pages a program reuses or frees whole by then (a pool's next build)
//! are never walked, and an idle process still gets its holes back within seconds. Any
//! walk that finds a hole puts the class back to the normal delay. Only pages of one
//! slice (blocks up to 8 KiB, many per OS page) are deferred; big-block pages have few
//! blocks to walk and give back most of each free block.
//!
//! The counts are hints read and written with relaxed atomics by whoever purges (the
//! purger, a stealer): a lost update only moves a page's purge by a delay either way.

use crate::size_class::CLASS_COUNT;
use crate::span::page::Page;
use core::sync::atomic::{AtomicU8, Ordering};

/// Hole walks in a row that found no hole after which a class's pages are deferred.
pub const BARREN_WALKS: u8 = 4;
/// Purge delays a deferred page waits (from when it was abandoned) before its walk.
pub const DEFER_FACTOR: u64 = 8;

/// Per class: hole walks in a row that found no hole (saturating at `BARREN_WALKS`).
static BARREN: [AtomicU8; CLASS_COUNT] = [const { AtomicU8::new(0) }; CLASS_COUNT];

/// A hole walk of a page of `class` found holes (`found`) or none.
pub fn record(class: usize, found: bool) {
    let slot = &BARREN[class % CLASS_COUNT];
    if found {
        if slot.load(Ordering::Relaxed) != 0 {
            slot.store(0, Ordering::Relaxed);
        }
    } else {
        let n = slot.load(Ordering::Relaxed);
        if n < BARREN_WALKS {
            slot.store(n + 1, Ordering::Relaxed);
        }
    }
}

/// True if the recent hole walks of `class` found nothing.
pub fn is_barren(class: usize) -> bool {
    BARREN[class % CLASS_COUNT].load(Ordering::Relaxed) >= BARREN_WALKS
}

/// True if `page`'s inside purge is a hole walk that should wait (module doc).
pub fn defers(page: &Page) -> bool {
    page.slice_count == 1
        && crate::span::holes::can_have_holes(page)
        && is_barren(page.class as usize)
}

/// How long after being abandoned `page` waits for its inside purge, for a purge
/// delay of `delay` ms.
pub fn inside_delay(page: &Page, delay: u64) -> u64 {
    if defers(page) {
        delay.saturating_mul(DEFER_FACTOR)
    } else {
        delay
    }
}

/// Forget what the walks found (tests).
#[cfg(test)]
pub fn reset(class: usize) {
    BARREN[class % CLASS_COUNT].store(0, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_class_is_barren_after_walks_in_a_row_that_found_nothing() {
        let class = CLASS_COUNT - 1;
        reset(class);
        for _ in 1..BARREN_WALKS {
            record(class, false);
            assert!(!is_barren(class));
        }
        record(class, false);
        assert!(is_barren(class));
        record(class, false);
        assert!(is_barren(class), "stays barren (saturates)");
        record(class, true);
        assert!(!is_barren(class), "one walk that finds holes ends it");
        reset(class);
    }
}
