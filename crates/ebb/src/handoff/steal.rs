//! Taking over the pages of idle threads, so nothing stays stranded in a heap whose
//! thread sleeps, blocks or parks.
//!
//! A heap's pages are private to its thread: the fast paths touch them without atomic
//! read-modify-writes. To take them over while the thread is alive, the background
//! purger must know the owner is *outside* every allocator call and will notice the
//! takeover on its next call. The owner pays two plain stores per call (`Heap::enter`
//! and `Heap::leave` bump `in_op`); the stealer pays two `membarrier` system calls —
//! an asymmetric Dekker handshake.
//!
//! # Protocol (stealer `S`, owner `O` of heap `H`)
//! 1. `S` claims `H` (`steal_state`: NONE -> STEALING). `O`'s slow paths wait while
//!    STEALING, so from here on `O` can only run fast paths, which never change the
//!    queues.
//! 2. `membarrier()`, then `S` reads `in_op`. Non-zero: `O` is inside a call (maybe a slow
//!    path that started before step 1) — give up. Zero: `O` is at most running fast
//!    paths that started after step 1.
//! 3. `S` marks: the owner word of every queued page becomes `STOLEN`, and every table
//!    entry the empty page. A fast path that starts after the marks are visible goes to
//!    a slow path (malloc finds no block; free finds a foreign owner) and waits there.
//! 4. `membarrier()`, then `S` reads `in_op` again. Non-zero: a fast path may be using a
//!    page it read before the marks — undo the marks and give up. Zero: every call `O`
//!    makes from now on sees the marks, so `S` has the pages to itself.
//! 5. `S` abandons every page (collect, free if empty, list if it has room) and clears
//!    the queues; STEALING -> NONE. `O`'s waiting calls go on with an empty heap; a free
//!    into one of its old pages takes the page back as any former owner does.
//!
//! Why the reads are sound: `membarrier` makes every running thread of the process pass
//! a full barrier before it returns. If `O`'s `in_op` store was before that barrier, `S`
//! sees it; if after, `O`'s later loads see every store `S` made before the call. A
//! thread that is not running passes through the scheduler's barriers instead.

use crate::arena::ARENA;
use crate::heap::{self, Heap};
use crate::os;
use crate::page::STOLEN;
use crate::size_class::CLASS_COUNT;
use crate::stats::COUNTERS;
use core::sync::atomic::{AtomicU8, Ordering};

pub const NONE: u32 = 0;
pub const STEALING: u32 = 1;
pub const DEAD: u32 = 2;

const UNKNOWN: u8 = 0;
const AVAILABLE: u8 = 1;
const UNAVAILABLE: u8 = 2;
static MEMBARRIER: AtomicU8 = AtomicU8::new(UNKNOWN);

/// Register for `membarrier` (from the purger thread at start). False if the kernel
/// refuses, in which case nothing is ever stolen.
pub fn init() -> bool {
    let ok = os::membarrier_register();
    MEMBARRIER.store(if ok { AVAILABLE } else { UNAVAILABLE }, Ordering::Release);
    ok
}

/// Forget the registration (a fork child must register again).
pub fn reset_after_fork() {
    MEMBARRIER.store(UNKNOWN, Ordering::Relaxed);
}

fn available() -> bool {
    match MEMBARRIER.load(Ordering::Acquire) {
        AVAILABLE => true,
        UNAVAILABLE => false,
        _ => init(),
    }
}

/// Owner side: wait while a stealer works on our heap (slow paths only).
///
/// # Safety
/// `heap` must be the calling thread's heap.
#[inline]
pub unsafe fn wait_while_stealing(heap: *mut Heap) {
    // SAFETY: per the contract the heap is valid.
    unsafe {
        while (*heap).steal_state.load(Ordering::Acquire) == STEALING {
            os::yield_now();
        }
    }
}

/// Mark a heap as going away (thread exit): wait for a stealer to finish, then make
/// sure none starts.
///
/// # Safety
/// `heap` must be the calling thread's heap.
pub unsafe fn mark_dead(heap: *mut Heap) {
    // SAFETY: per the contract the heap is valid.
    unsafe {
        while (*heap)
            .steal_state
            .compare_exchange(NONE, DEAD, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            os::yield_now();
        }
    }
}

/// Take over the pages of every heap that owns pages and has run no slow path for
/// `idle_ms` (except the calling thread's own). `idle_ms == 0` takes every heap that is
/// outside the allocator right now (`collect(true)`). Returns when the next heap becomes
/// idle enough (`u64::MAX`: no heap owns pages).
pub fn steal_idle(now: u64, idle_ms: u64) -> u64 {
    if !available() {
        return u64::MAX;
    }
    let mine = crate::tls::heap();
    let mut next_due = u64::MAX;
    loop {
        // Pick candidates under the lock; heaps are never unmapped, so the pointers stay
        // valid after it is released (a heap that dies meanwhile is DEAD and skipped).
        let mut candidates: [(*mut Heap, u64); 32] = [(core::ptr::null_mut(), 0); 32];
        let mut count = 0;
        let mut more = false;
        {
            let arena = ARENA.lock();
            let mut h = arena.heaps;
            while !h.is_null() {
                // SAFETY: live heaps are linked under the lock; we touch atomics only.
                let (pages, state) = unsafe {
                    (
                        (*h).page_count.load(Ordering::Relaxed),
                        (*h).steal_state.load(Ordering::Relaxed),
                    )
                };
                if h != mine && pages > 0 && state == NONE {
                    // SAFETY: as above.
                    let quiet_since = unsafe { quiet_since(h, now) };
                    let due = quiet_since.saturating_add(idle_ms);
                    if due <= now {
                        if count == candidates.len() {
                            more = true;
                            break;
                        }
                        candidates[count] = (h, quiet_since.min(now));
                        count += 1;
                    } else {
                        next_due = next_due.min(due);
                        // Busy: ask it to let go of the pages it is not using (see
                        // `heap::sweep`); it does so on its next malloc slow path.
                        // SAFETY: as above.
                        unsafe { (*h).sweep_wanted.store(true, Ordering::Relaxed) };
                    }
                }
                // SAFETY: as above.
                h = unsafe { (*h).next };
            }
        }
        for &(h, quiet_since) in &candidates[..count] {
            if !try_steal(h, quiet_since) {
                // Busy right now: look again after another idle period.
                next_due = next_due.min(now.saturating_add(idle_ms.max(1)));
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
unsafe fn quiet_since(heap: *mut Heap, now: u64) -> u64 {
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

/// Run the protocol above on one heap, idle since `quiet_since`. True if its pages
/// were taken over.
fn try_steal(heap: *mut Heap, quiet_since: u64) -> bool {
    COUNTERS.steal_attempts.fetch_add(1, Ordering::Relaxed);
    // SAFETY: heaps are never unmapped; every access to the owner's private state below
    // happens only after the handshake proved the owner is outside the allocator and
    // will wait for us (steps 1-4).
    unsafe {
        let h = &*heap;
        // 1.
        if h.steal_state
            .compare_exchange(NONE, STEALING, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        // 2.
        if !os::membarrier() || h.in_op.load(Ordering::SeqCst) != 0 {
            h.steal_state.store(NONE, Ordering::Release);
            return false;
        }
        // 3.
        for class in 0..CLASS_COUNT {
            let mut page = (*heap).queues[class].first;
            while !page.is_null() {
                (*page).owner.store(STOLEN, Ordering::SeqCst);
                page = (*page).next;
            }
        }
        h.clear_tables();
        // 4.
        if !os::membarrier() || h.in_op.load(Ordering::SeqCst) != 0 {
            for class in 0..CLASS_COUNT {
                let mut page = (*heap).queues[class].first;
                while !page.is_null() {
                    (*page).owner.store(h.owner_word, Ordering::SeqCst);
                    page = (*page).next;
                }
                h.refresh_current(class);
            }
            h.steal_state.store(NONE, Ordering::Release);
            return false;
        }
        // 5.
        // Pages found unused have been since the heap went quiet (its owner made no
        // slow-path call since; a remote free meanwhile only made the page emptier).
        heap::abandon_all(heap, quiet_since);
        h.steal_state.store(NONE, Ordering::Release);
    }
    COUNTERS.steals.fetch_add(1, Ordering::Relaxed);
    true
}
