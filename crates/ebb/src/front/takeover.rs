//! The heap side of taking over idle threads' pages: which heaps are idle, and what a
//! takeover does to a heap (mark its queued pages `STOLEN`, point its tables at the
//! empty page, abandon every page). The handshake that makes it safe while the owner
//! thread lives is `protocol::Handshake`; the purger runs this through
//! `process::Hooks::take_over_idle`.

use crate::counters::COUNTERS;
use crate::front::heap::{self, Heap};
use crate::handoff::{abandon, freed_into, steal};
use crate::process::registry;
use crate::protocol::{self, NONE};
use crate::size_class::CLASS_COUNT;
use core::sync::atomic::{AtomicU64, Ordering};

/// Heaps examined per pass under the registry lock.
const CANDIDATE_BATCH: usize = 32;

/// When a pass last asked busy heaps to sweep (ms; see `take_over_idle`).
static LAST_SWEEP_ASK: AtomicU64 = AtomicU64::new(0);

/// How long a heap whose blocks other threads free (`handoff::freed_into`) must be
/// quiet before it is taken over: one retention period (`span::retain`), a quarter of
/// the `idle_ms` every other heap waits.
///
/// Why sooner: such a heap's current and kept pages fill with blocks freed by others
/// that nobody can reuse until it is taken over, so the freeing threads fault in fresh
/// memory meanwhile, as much as they free into those pages. Issue 14's sleeping owner
/// (a loader builds 372 MiB of short strings and sleeps; a refresher replaces them):
/// 5 MiB stranded in the loader's pages at the end of the refresher's first round,
/// which takes 0.2-0.6 s, against a purge delay of 0.5 s. Why not sooner still: a
/// heap taken over that was only pausing refills its tables on its next slow paths
/// (about one per class it uses, each claiming a page back), and the takeover costs a
/// `membarrier`; a period bounds that to a few per second per heap.
fn freed_into_idle_ms(idle_ms: u64) -> u64 {
    idle_ms / crate::span::retain::PERIODS as u64
}

/// Take over the pages of every heap that owns pages and has run no slow path for
/// `idle_ms` (except the calling thread's own), or for `freed_into_idle_ms` if other
/// threads free its blocks (`handoff::freed_into`). `idle_ms == 0` takes every heap
/// that is outside the allocator right now (`EBB_PURGE_DELAY=0`). Returns when the next
/// heap becomes idle enough (`u64::MAX`: no heap owns pages).
///
/// Busy heaps are asked to sweep (`slow::sweep`) by at most one pass per `idle_ms`: the
/// passes for heaps that others free into come every period.
pub fn take_over_idle(now: u64, idle_ms: u64) -> u64 {
    // The shared start heap needs no handshake (its lock is all): see front/shared.rs.
    let mut next_due = crate::front::shared::maintain(now, idle_ms);
    if !steal::available() {
        return next_due;
    }
    let mine = crate::front::tls::heap();
    let ask_sweep = now
        >= LAST_SWEEP_ASK
            .load(Ordering::Relaxed)
            .saturating_add(idle_ms);
    if ask_sweep {
        LAST_SWEEP_ASK.store(now, Ordering::Relaxed);
    }
    loop {
        // Pick candidates under the lock; heaps are never unmapped, so the pointers stay
        // valid after it is released (a heap that dies meanwhile is DEAD and skipped).
        // (heap, quiet since, how long it must be quiet)
        let mut candidates: [(*mut Heap, u64, u64); CANDIDATE_BATCH] =
            [(core::ptr::null_mut(), 0, 0); CANDIDATE_BATCH];
        let mut count = 0;
        let mut more = false;
        {
            let mut registry = registry::lock();
            let count_of = |link| {
                // SAFETY: listed links are live heaps' (never unmapped).
                unsafe { core::ptr::addr_of!((*Heap::from_link(link)).page_count) }
            };
            let visit = |link| {
                let h = Heap::from_link(link);
                // SAFETY: listed heaps are live, linked under the lock; we touch atomics
                // only.
                let pages = unsafe { (*h).page_count.load(Ordering::Relaxed) };
                if h == mine || pages == 0 {
                    return true;
                }
                // (Read only for a heap with pages: the state is a line of its own.)
                // SAFETY: as above.
                if unsafe { (*h).handshake.state.load(Ordering::Relaxed) } != NONE {
                    return true;
                }
                // SAFETY: as above.
                let quiet_since = unsafe { quiet_since(h, now) };
                let wait = if freed_into::is_noted(h as usize) {
                    freed_into_idle_ms(idle_ms)
                } else {
                    idle_ms
                };
                let due = quiet_since.saturating_add(wait);
                if due <= now {
                    if count == candidates.len() {
                        more = true;
                        return false;
                    }
                    candidates[count] = (h, quiet_since.min(now), wait);
                    count += 1;
                } else {
                    next_due = next_due.min(due);
                    if ask_sweep {
                        // Busy: ask it to let go of the pages it is not using (see
                        // `slow::sweep`); it does so on its next malloc slow path.
                        // SAFETY: as above.
                        unsafe { (*h).sweep_wanted.store(true, Ordering::Relaxed) };
                    }
                }
                true
            };
            // SAFETY: `count_of` gives the page count of the heap embedding the link.
            let visits = unsafe { registry.walk_holders(count_of, visit) };
            COUNTERS
                .idle_walk_visits
                .fetch_add(visits, Ordering::Relaxed);
            COUNTERS.idle_walks.fetch_add(1, Ordering::Relaxed);
        }
        for &(h, quiet_since, wait) in &candidates[..count] {
            // Quiet for less than `idle_ms` (taken for `freed_into`): its pages are
            // abandoned as their owner would, nothing purged at once.
            let unused_since = if quiet_since.saturating_add(idle_ms) <= now {
                quiet_since
            } else {
                abandon::NOT_IDLE
            };
            if try_take_over(h, unused_since) {
                freed_into::forget(h as usize);
            } else {
                // Busy right now: look again after another idle period (its own).
                next_due = next_due.min(now.saturating_add(wait.max(1)));
            }
        }
        if !more {
            return next_due;
        }
    }
}

/// Since when the heap's slow-path count has not moved (updating the bookkeeping).
///
/// # Safety
/// `heap` must be a live heap (its atomics are read and the stealer's own written).
pub(super) unsafe fn quiet_since(heap: *mut Heap, now: u64) -> u64 {
    // SAFETY: per the contract.
    unsafe {
        let activity = (*heap).activity.load(Ordering::Relaxed);
        if (*heap).seen_activity.swap(activity, Ordering::Relaxed) != activity {
            (*heap).quiet_since.store(now, Ordering::Relaxed);
            return now;
        }
        (*heap).quiet_since.load(Ordering::Relaxed)
    }
}

/// Take one heap over, its pages unused since `unused_since` (the quiet time, or
/// `abandon::NOT_IDLE`; the handshake, with this heap's marks). True if its pages were
/// taken.
fn try_take_over(heap: *mut Heap, unused_since: u64) -> bool {
    COUNTERS.steal_attempts.fetch_add(1, Ordering::Relaxed);
    // SAFETY: heaps are never unmapped; the closures touch the owner's private state
    // only where the handshake runs them: after it proved the owner outside the
    // allocator and waiting for us (steps 3-5).
    let h = unsafe { &*heap };
    let mark = || {
        for class in 0..CLASS_COUNT {
            let mut page = h.queues[class].first;
            while !page.is_null() {
                // SAFETY: queued pages are the heap's, valid descriptors.
                unsafe {
                    protocol::mark_stolen(&(*page).owner);
                    page = (*page).next;
                }
            }
        }
        h.clear_tables();
    };
    let undo = || {
        for class in 0..CLASS_COUNT {
            let mut page = h.queues[class].first;
            while !page.is_null() {
                // SAFETY: as above.
                unsafe {
                    protocol::unmark_stolen(&(*page).owner, h.owner_word);
                    page = (*page).next;
                }
            }
            // Not `refresh_current`: the owner may be writing the page's `used` word
            // right now (see `Heap::restore_current`).
            h.restore_current(class);
        }
    };
    // Pages found unused have been since the heap went quiet (its owner made no
    // slow-path call since; a remote free meanwhile only made the page emptier).
    // SAFETY: step 5: the pages are ours.
    let take = || unsafe { heap::abandon_all(heap, unused_since) };
    if !h.handshake.try_steal(mark, undo, take) {
        return false;
    }
    COUNTERS.steals.fetch_add(1, Ordering::Relaxed);
    true
}
