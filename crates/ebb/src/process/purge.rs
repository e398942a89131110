//! Purging: returning free memory to the OS after the purge delay, with or without
//! allocator calls.
//!
//! Freed spans stay committed for `EBB_PURGE_DELAY` ms (so churn reuses them cheaply)
//! and are then decommitted. Two things run the purge:
//! - any allocator slow path that notices the earliest deadline has passed
//!   ([`after_slow_path`]), and
//! - a background thread, started lazily the first time there is something to purge or
//!   collect. It sleeps on a futex until the next deadline, and *indefinitely* while
//!   there is nothing to do, so a clean heap costs no wake-ups. Freeing a span (or a
//!   notification of remote frees into an abandoned page) wakes it only if it is
//!   sleeping indefinitely or past the new deadline.
//!
//! The purger also takes over the pages of threads that have been idle for the purge
//! delay (`steal.rs`), so memory stranded in a sleeping thread's heap is collected and
//! purged too. It wakes for that only while some heap owns pages and has not been taken
//! over yet: when every thread is idle and every free span purged, it sleeps without a
//! timeout.
//!
//! The purger must never keep a process alive: when the last thread with a heap exits
//! (say `main` calls `pthread_exit`), it looks at the process's thread count and ends
//! itself once it is the only thread left, so the process exits as it would without it.
//! Until then it checks with a backoff (10 ms doubling to 10 s), only while no thread
//! with a heap is alive.
//!
//! `EBB_BACKGROUND=0` disables the thread (and with it the takeover of idle heaps).
//! After `fork` the child has no purger; it starts one again lazily.

use crate::arena::{self, COLLECT_PENDING, NEXT_PURGE};
use crate::os;
use crate::stats::COUNTERS;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

const NOT_STARTED: u8 = 0;
const STARTING: u8 = 1;
const RUNNING: u8 = 2;
const FAILED: u8 = 3;
static PURGER: AtomicU8 = AtomicU8::new(NOT_STARTED);
/// Futex word: bumped by every wake-up request.
static WAKE: AtomicU32 = AtomicU32::new(0);
/// When the purger will next wake by itself (`u64::MAX`: never, it sleeps until woken).
static PURGER_WAKES_AT: AtomicU64 = AtomicU64::new(u64::MAX);
/// Something was scheduled, so the purger should exist.
static WANTED: AtomicU8 = AtomicU8::new(0);
/// How long the purger lets remote frees into abandoned pages gather before it collects
/// again (ms; at most a quarter of the purge delay).
const COLLECT_BATCH_MS: u64 = 10;
/// Earliest time a heap may have become idle enough to take over (`u64::MAX`: none).
static NEXT_STEAL: AtomicU64 = AtomicU64::new(u64::MAX);

/// A heap got its first page: it may go idle holding pages, so the purger must look at
/// it after the delay (woken if it sleeps without a timeout).
pub fn heap_became_active() {
    let due = os::now_ms() + crate::options::get().purge_delay_ms;
    NEXT_STEAL.fetch_min(due, Ordering::SeqCst);
    WANTED.store(1, Ordering::Relaxed);
    if PURGER.load(Ordering::Acquire) == RUNNING && due < PURGER_WAKES_AT.load(Ordering::SeqCst) {
        wake();
    }
}

/// A span became free at `now`: its purge is due at `now + delay`.
pub fn schedule(now: u64) {
    let delay = crate::options::get().purge_delay_ms;
    let due = now + delay;
    NEXT_PURGE.fetch_min(due, Ordering::SeqCst);
    WANTED.store(1, Ordering::Relaxed);
    if PURGER.load(Ordering::Acquire) == RUNNING && due < PURGER_WAKES_AT.load(Ordering::SeqCst) {
        wake();
    }
}

/// Remote frees into an abandoned page want collecting.
pub fn wake_for_collect() {
    WANTED.store(1, Ordering::Relaxed);
    if PURGER.load(Ordering::Acquire) == RUNNING
        && PURGER_WAKES_AT.load(Ordering::SeqCst) == u64::MAX
    {
        wake();
    }
}

fn wake() {
    WAKE.fetch_add(1, Ordering::Release);
    os::futex_wake(&WAKE, 1);
}

/// Called at the end of slow paths, with no lock held: purge if something is due, and
/// start the background purger if it is wanted and not running.
pub fn after_slow_path() {
    let options = crate::options::get();
    // With a running purger, slow paths leave due purges to it (unless the delay is 0,
    // which asks for purging at once).
    let inline = options.purge_delay_ms == 0 || PURGER.load(Ordering::Relaxed) != RUNNING;
    if inline && NEXT_PURGE.load(Ordering::Relaxed) <= os::now_ms() {
        arena::purge(os::now_ms(), false);
    }
    if options.background
        && WANTED.load(Ordering::Relaxed) != 0
        && PURGER.load(Ordering::Relaxed) == NOT_STARTED
    {
        start();
    }
}

#[cold]
fn start() {
    if PURGER
        .compare_exchange(NOT_STARTED, STARTING, Ordering::AcqRel, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    // pthread_create may call malloc; we hold no lock here, so re-entry is fine.
    let state = if os::spawn_detached(purger_main) {
        RUNNING
    } else {
        FAILED
    };
    PURGER.store(state, Ordering::Release);
}

/// A thread with a heap exited: if it was the last one, the purger must check whether it
/// is alone in the process (and then end).
pub fn heap_thread_exited() {
    if COUNTERS.threads.load(Ordering::Acquire) == 0 && PURGER.load(Ordering::Acquire) == RUNNING {
        wake();
    }
}

/// True if no thread but the purger is left (and no thread has a heap).
fn alone_in_process() -> bool {
    COUNTERS.threads.load(Ordering::Acquire) == 0 && os::process_thread_count() == Some(1)
}

extern "C" fn purger_main(_: *mut core::ffi::c_void) -> *mut core::ffi::c_void {
    crate::steal::init();
    let mut exit_check_ms = 10;
    loop {
        // Every pass counts, whether a futex wait ended it or a re-check: a pass that
        // does not sleep is a wake-up the program pays for all the same.
        COUNTERS.purger_wakeups.fetch_add(1, Ordering::Relaxed);
        if COUNTERS.threads.load(Ordering::Acquire) == 0 {
            if alone_in_process() {
                // Return rather than pthread_exit: that unwinds, and a forced unwind
                // through this `extern "C"` frame aborts the process. As the last thread,
                // returning ends the process with status 0, as pthread_exit would.
                return core::ptr::null_mut();
            }
        } else {
            exit_check_ms = 10;
        }
        let seen = WAKE.load(Ordering::Acquire);
        let delay = crate::options::get().purge_delay_ms;
        let now = os::now_ms();
        // Woken early (to collect, mostly), do only what is due: a purge scans every
        // committed free slice of every segment, and doing it on each collect wake-up
        // was 14% of a thread-churn workload (mstress).
        if NEXT_STEAL.load(Ordering::SeqCst) <= now {
            NEXT_STEAL.store(u64::MAX, Ordering::SeqCst);
            let steal_due = crate::steal::steal_idle(now, delay);
            NEXT_STEAL.fetch_min(steal_due, Ordering::SeqCst);
        }
        arena::collect_pending();
        let now = os::now_ms();
        let purge_due = if NEXT_PURGE.load(Ordering::SeqCst) <= now {
            arena::purge(now, false)
        } else {
            NEXT_PURGE.load(Ordering::SeqCst)
        };
        let steal_due = NEXT_STEAL.load(Ordering::SeqCst);
        let wake_at = next_wake(
            now,
            delay,
            purge_due.min(steal_due),
            COLLECT_PENDING.load(Ordering::Acquire),
        );
        PURGER_WAKES_AT.store(wake_at, Ordering::SeqCst);
        // Re-check after publishing (Dekker with `schedule`, `heap_became_active` and
        // `wake_for_collect`): a deadline set after our scan either sees our new wake
        // time and wakes us, or we see it here. Only a deadline *earlier than the ones
        // we planned with* counts: comparing with `wake_at` alone, which batching puts
        // up to delay/4 after the deadline, made the purger loop here without sleeping
        // until that deadline passed (issue 20: 6-11% of real programs' CPU).
        // A collect request wakes only a purger with no wake time; with one it waits.
        if NEXT_PURGE.load(Ordering::SeqCst) < purge_due.min(wake_at)
            || NEXT_STEAL.load(Ordering::SeqCst) < steal_due.min(wake_at)
            || (wake_at == u64::MAX && COLLECT_PENDING.load(Ordering::SeqCst))
        {
            continue;
        }
        let mut timeout = if wake_at == u64::MAX {
            None
        } else {
            Some(wake_at.saturating_sub(os::now_ms()).max(1))
        };
        if COUNTERS.threads.load(Ordering::Acquire) == 0 {
            // The last thread with a heap is gone: look again soon whether we are alone.
            timeout = Some(timeout.map_or(exit_check_ms, |t| t.min(exit_check_ms)));
            exit_check_ms = (exit_check_ms * 2).min(10_000);
        }
        COUNTERS
            .purger_cpu_ns
            .store(os::thread_cpu_time_ns(), Ordering::Relaxed);
        os::futex_wait(&WAKE, seen, timeout);
        PURGER_WAKES_AT.store(0, Ordering::SeqCst);
    }
}

/// When the purger should wake next, given the earliest deadline `next` it knows of
/// (`u64::MAX`: none) and whether remote frees into abandoned pages await collection.
///
/// Never sooner than `delay / 4` after `now` for a deadline (so a stream of frees each
/// scheduling a purge costs one wake-up per quarter delay, not one per free), and
/// `COLLECT_BATCH_MS` for collection: under steady cross-thread traffic, collecting at
/// once made the purger a busy thread competing with the program (and slow paths
/// collect too when they need pages). Always in the future: a wake time at or before
/// `now` would be a loop without a sleep.
fn next_wake(now: u64, delay: u64, next: u64, collect_pending: bool) -> u64 {
    let mut wake_at = if next == u64::MAX {
        u64::MAX
    } else {
        next.max(now + (delay / 4).max(1))
    };
    if collect_pending {
        wake_at = wake_at.min(now + COLLECT_BATCH_MS.min(delay / 4).max(1));
    }
    debug_assert!(wake_at > now);
    wake_at
}

/// In a fork child: the purger thread did not survive.
pub fn reset_after_fork() {
    if PURGER.load(Ordering::Relaxed) != FAILED {
        PURGER.store(NOT_STARTED, Ordering::Relaxed);
    }
    PURGER_WAKES_AT.store(u64::MAX, Ordering::Relaxed);
    crate::steal::reset_after_fork();
}

/// True if the background purger thread is running.
pub fn purger_running() -> bool {
    PURGER.load(Ordering::Acquire) == RUNNING
}
