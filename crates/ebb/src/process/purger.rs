//! Purging: returning free memory to the OS after the purge delay, with or without
//! allocator calls.
//!
//! Freed spans stay committed while the program keeps reusing that much memory (so
//! churn reuses them cheaply; `span::retain`), for `EBB_PURGE_DELAY` ms at most, and
//! are then decommitted. Two things run the purge:
//! - any allocator slow path that notices the earliest deadline has passed
//!   ([`after_slow_path`]), and
//! - a background thread, started lazily the first time there is something to purge or
//!   drain. It sleeps on a futex until the next deadline, and *indefinitely* while
//!   there is nothing to do, so a clean heap costs no wake-ups. Freeing a span (or a
//!   notification of remote frees into an abandoned page) wakes it only if it is
//!   sleeping indefinitely or past the new deadline.
//!
//! **A single-threaded process** gets the thread too, by default: without it, memory it
//! frees in the last purge delay before it stops calling the allocator (a daemon going
//! idle) would stay committed until its next slow path, and the promise is memory back
//! with no help from the program. It starts it once its first free memory has waited
//! [`ALONE_START_GRACE_MS`], so the many processes that live a few milliseconds never
//! pay for a thread (its memory goes back at their exit). The thread is not free to such a process, though,
//! even asleep. The kernel gives every system call on a file descriptor of a process
//! whose file table is shared a reference count on the file (`fdget`/`fput`: two
//! atomics), and on a regular file also the file's position lock; glibc, once
//! `pthread_create` has run, wraps every cancellable system call (`read`, `write`, ...)
//! in cancellation-state atomics and makes stdio take its locks. Measured on this
//! project's machine (docs/REAL-PROGRAMS.md, section "python1"): a 41-byte `write` to
//! `/dev/null` 198 → 238 ns, to a file 760 → 860 ns, with one thread asleep in
//! `pause()`; CPython writing its JSON output unbuffered (1.3 M `write`s) paid 1.5-4% of
//! its CPU. No other allocator we compare with starts a thread. A program that makes
//! millions of such calls and never idles can ask for `EBB_BACKGROUND=threads`: the
//! purger then starts only once a second thread has had a heap (the program pays the
//! multi-threaded costs anyway from then on), and until then the process purges from
//! its own slow paths (due purges, kept huge mappings; there are no remote frees to
//! drain and no other heap to take over).
//!
//! The purger also takes over the pages of threads that have been idle for the purge
//! delay (`front::takeover`), so memory stranded in a sleeping thread's heap is taken and
//! purged too. It wakes for that only while some heap owns pages and has not been taken
//! over yet: when every thread is idle and every free span purged, it sleeps without a
//! timeout.
//!
//! **The thread holds no file descriptor of the program's.** It starts with every
//! signal blocked and leaves the process's descriptor table for an empty one of its own
//! (`os::detach_files`): while two threads share the table, the kernel pays two atomics
//! per descriptor call (and a regular file's position lock); alone, it takes its
//! single-user path. That took most of the cost above away (a `write` to `/dev/null`
//! 238 → 201 ns, 197 without the thread). What stays is glibc's: its cancellation
//! wrappers and stdio locks once a second thread exists.
//!
//! The purger must never keep a process alive, nor end it in the program's stead:
//! 1. When the last thread with a heap exits (say `main` calls `pthread_exit` and the
//!    workers finish), that thread stops the purger and joins it before it goes on
//!    exiting ([`stop`]), so glibc ends the process from the program's own thread, with
//!    its descriptors (a purger with an empty table running the `atexit` handlers and
//!    stdio flushes would lose their output). A thread with a heap that comes later
//!    starts a purger again; until then, what was freed last stays committed (threads
//!    that never allocate outlived every thread that did: rare, since `pthread_create`
//!    itself allocates in the creating thread).
//! 2. A purger that finds no thread with a heap all the same (the last one left while
//!    the purger was still starting, so `stop` found none running) looks at the
//!    process's thread count and ends itself once it is the only thread left, with a
//!    backoff (10 ms doubling to 10 s).
//!
//! `EBB_BACKGROUND=0` disables the thread (and with it the takeover of idle heaps).
//! After `fork` the child has no purger; it starts one again lazily.

use crate::counters::COUNTERS;
use crate::handoff::abandon;
use crate::handoff::drain::{self, DRAIN_PENDING};
use crate::os;
use crate::span::deadline::{
    self, FAILED, NEXT_PURGE, NEXT_STEAL, NOT_STARTED, PURGER, PURGER_WAKES_AT, RUNNING, STARTING,
    STOPPING, WAKE, WANTED,
};
use crate::span::{decommit, huge};
use core::sync::atomic::{AtomicU64, Ordering};

/// How long the purger lets remote frees into abandoned pages gather before it drains
/// again (ms; at most a quarter of the purge delay).
const DRAIN_BATCH_MS: u64 = 10;
/// The backoff of the purger's check whether it is alone in the process (ms).
const ALONE_CHECK_FIRST_MS: u64 = 10;
const ALONE_CHECK_MAX_MS: u64 = 10_000;
/// Stack of the purger thread.
const PURGER_STACK_BYTES: usize = 256 * 1024;

/// Purge what is due (everything if `force`): free slices, the insides of unclaimed
/// abandoned pages' free blocks, kept huge mappings. Returns the next time something
/// becomes due, or `u64::MAX`.
pub fn purge(now: u64, force: bool) -> u64 {
    let delay = crate::options::get().purge_delay_ms;
    // Start from "nothing due"; memory freed while we scan lowers it again (fetch_min),
    // and what we find still pending is merged in at the end.
    NEXT_PURGE.store(u64::MAX, Ordering::SeqCst);
    let mut next_due = decommit::decommit_due(now, delay, force);
    next_due = next_due.min(abandon::purge_unclaimed_insides(now, delay, force));
    next_due = next_due.min(huge::purge_cache(now, delay, force));
    NEXT_PURGE.fetch_min(next_due, Ordering::SeqCst);
    NEXT_PURGE.load(Ordering::SeqCst)
}

/// Called at the end of slow paths, with no lock held: purge if something is due, and
/// start the background purger if it is wanted and not running.
pub fn after_slow_path() {
    let options = crate::options::get();
    // With a running purger, slow paths leave due purges to it (unless the delay is 0,
    // which asks for purging at once).
    let inline = options.purge_delay_ms == 0 || PURGER.load(Ordering::Relaxed) != RUNNING;
    let next_purge = NEXT_PURGE.load(Ordering::Relaxed);
    // No clock read while nothing is scheduled (every malloc slow path comes here).
    if inline && next_purge != u64::MAX && next_purge <= os::now_ms() {
        purge(os::now_ms(), false);
    }
    if WANTED.load(Ordering::Relaxed) != 0 && PURGER.load(Ordering::Relaxed) == NOT_STARTED {
        start_if_worth_it();
    }
    if super::restart_pending() {
        super::restart_after_fork();
    }
}

/// `COUNTERS.threads_created` before this process's first heap (0), or in a fork child
/// the count inherited, less the forking thread's heap: more heaps than one since then
/// means a second thread has allocated in this process.
static HEAPS_BEFORE: AtomicU64 = AtomicU64::new(0);

/// True if a thread other than the first has had a heap in this process (with
/// `EBB_BACKGROUND=threads`, the purger is then worth its cost: module documentation).
fn second_thread_allocated() -> bool {
    COUNTERS.threads_created.load(Ordering::Relaxed) > HEAPS_BEFORE.load(Ordering::Relaxed) + 1
}

/// How long a process of one thread lets its first purge wait before it starts the
/// purger (ms). Starting a thread and ending it at exit costs a process 80-130 µs on
/// this project's VM, which a process that lives a millisecond or two pays in full
/// (`ls`, `cat`, the gcc driver, every step of a shell script or a `make`:
/// docs/REAL-PROGRAMS.md, "What the purger's start cost every process"); its memory
/// goes back at exit anyway. Past the grace, the next slow path starts the thread.
/// The cost: a process of one thread that frees memory in its first 50 ms and then
/// never again reaches a slow path (an allocation that finds its page empty, a free
/// that empties a page) keeps that memory committed until it does or exits.
const ALONE_START_GRACE_MS: u64 = 50;

/// When this process first wanted the purger (ms; 0: not yet). Reset in a fork child.
static FIRST_WANTED_MS: AtomicU64 = AtomicU64::new(0);

/// Start the background purger if the options ask for it in a process like this one.
/// (Every slow path of a single-threaded process comes here: the thread count first.)
#[inline]
fn start_if_worth_it() {
    let options = crate::options::get();
    if !options.background {
        return;
    }
    if second_thread_allocated() {
        start();
        return;
    }
    if !options.background_alone {
        return;
    }
    // One thread: not within the grace (a clock read per slow path, only until the
    // purger starts).
    let now = os::now_ms();
    let first = match FIRST_WANTED_MS.load(Ordering::Relaxed) {
        0 => {
            FIRST_WANTED_MS.store(now.max(1), Ordering::Relaxed);
            now
        }
        first => first,
    };
    if now >= first.saturating_add(ALONE_START_GRACE_MS) {
        start();
    }
}

/// A large block's span is about to go back to the arena: if that is the first thing
/// the background purger will want, start it now, before the span is free. Starting
/// it allocates (glibc's `pthread_create` takes the thread's TLS from malloc), and
/// served from the span just freed, that block would sit at the freed block's address:
/// a second free of the large block would then free it silently instead of being
/// reported as a double free (README "Security"). A slow path only (large frees).
#[inline]
pub fn before_span_free() {
    if PURGER.load(Ordering::Relaxed) == NOT_STARTED {
        start_if_worth_it();
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
    // Register for `membarrier` (the takeover of idle heaps needs it) while this thread
    // may still be the process's only one: with one user of the address space the
    // kernel registers at once, with more it waits for an RCU grace period (10-25 ms on
    // this project's VM) in a wait that not even the process's exit interrupts. Done
    // from the purger, as before, every process that ever freed a span paid that much
    // wall time at exit: `ls /` 15 ms against glibc's 1.1 (docs/REAL-PROGRAMS.md, "What
    // the purger's start cost every process"). With threads already running, a program
    // thread must not wait for the grace period: the purger registers on its first
    // takeover instead (`steal::available`), in the background.
    if os::process_thread_count() == Some(1) {
        crate::handoff::steal::init();
    }
    // pthread_create may call malloc; we hold no lock here, so re-entry is fine.
    let state = match os::spawn_joinable(purger_main, PURGER_STACK_BYTES) {
        Some(thread) => {
            PURGER_THREAD.store(thread, Ordering::Relaxed);
            RUNNING
        }
        None => FAILED,
    };
    PURGER.store(state, Ordering::Release);
}

/// The running purger's thread handle (for [`stop`]'s join).
static PURGER_THREAD: AtomicU64 = AtomicU64::new(0);

/// The last thread with a heap is exiting (step 1 of the module documentation): end the
/// purger and wait until it is gone, so that glibc ends the process from the calling
/// thread. Returns false if no purger was running. The caller holds no lock: the purger
/// may be in a pass that takes the arena's.
pub fn stop() -> bool {
    if PURGER
        .compare_exchange(RUNNING, STOPPING, Ordering::SeqCst, Ordering::Relaxed)
        .is_err()
    {
        return false;
    }
    deadline::wake();
    os::join(PURGER_THREAD.load(Ordering::Relaxed));
    PURGER.store(NOT_STARTED, Ordering::Release);
    true
}

/// True if no thread but the purger is left (and no thread has a heap).
fn alone_in_process() -> bool {
    COUNTERS.threads.load(Ordering::Acquire) == 0 && os::process_thread_count() == Some(1)
}

extern "C" fn purger_main(_: *mut core::ffi::c_void) -> *mut core::ffi::c_void {
    os::name_thread(b"ebb-purger\0");
    // The kernel may refuse (before Linux 5.9, or a seccomp filter): the table stays
    // shared, which costs the program speed only.
    let _ = os::detach_files();
    let mut exit_check_ms = ALONE_CHECK_FIRST_MS;
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
            exit_check_ms = ALONE_CHECK_FIRST_MS;
        }
        let seen = WAKE.load(Ordering::SeqCst);
        // After reading the futex word: a `stop` that stored STOPPING after this check
        // bumps the word after it too, and the wait below returns at once.
        if PURGER.load(Ordering::SeqCst) == STOPPING {
            return core::ptr::null_mut();
        }
        let delay = crate::options::get().purge_delay_ms;
        let now = os::now_ms();
        deadline::tick(now);
        // Woken early (to drain, mostly), do only what is due: a purge scans every
        // committed free slice of every segment, and doing it on each drain wake-up
        // was 14% of a thread-churn workload (mstress).
        if NEXT_STEAL.load(Ordering::SeqCst) <= now {
            NEXT_STEAL.store(u64::MAX, Ordering::SeqCst);
            deadline::steal_checked(now);
            let steal_due = match super::hooks() {
                Some(hooks) => (hooks.take_over_idle)(now, delay),
                None => u64::MAX,
            };
            NEXT_STEAL.fetch_min(steal_due, Ordering::SeqCst);
        }
        let drained = drain::drain_notified();
        let now = os::now_ms();
        deadline::tick(now);
        let purge_due = if NEXT_PURGE.load(Ordering::SeqCst) <= now {
            purge(now, false)
        } else {
            NEXT_PURGE.load(Ordering::SeqCst)
        };
        let steal_due = NEXT_STEAL.load(Ordering::SeqCst);
        let wake_at = next_wake(
            now,
            delay,
            purge_due.min(steal_due),
            drained || DRAIN_PENDING.load(Ordering::Acquire),
        );
        PURGER_WAKES_AT.store(wake_at, Ordering::SeqCst);
        // Re-check after publishing (Dekker with `deadline::schedule_purge`,
        // `schedule_idle_check` and `wake_for_drain`): a deadline set after our scan either sees our new wake
        // time and wakes us, or we see it here. Only a deadline *earlier than the ones
        // we planned with* counts: comparing with `wake_at` alone, which batching puts
        // up to delay/4 after the deadline, made the purger loop here without sleeping
        // until that deadline passed (issue 20: 6-11% of real programs' CPU).
        // A drain request wakes only a purger with no wake time; with one it waits.
        if NEXT_PURGE.load(Ordering::SeqCst) < purge_due.min(wake_at)
            || NEXT_STEAL.load(Ordering::SeqCst) < steal_due.min(wake_at)
            || (wake_at == u64::MAX && DRAIN_PENDING.load(Ordering::SeqCst))
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
            exit_check_ms = (exit_check_ms * 2).min(ALONE_CHECK_MAX_MS);
        }
        // The kernel's part is read first, as of an earlier moment than the total, so
        // it is never more than the whole (`stats::snapshot` clamps what it reads
        // between the two stores).
        let sys_ns = os::thread_sys_time_ns();
        let cpu_ns = os::thread_cpu_time_ns();
        COUNTERS
            .purger_sys_ns
            .store(sys_ns.min(cpu_ns), Ordering::Relaxed);
        COUNTERS.purger_cpu_ns.store(cpu_ns, Ordering::Relaxed);
        os::wait(&WAKE, seen, timeout);
        PURGER_WAKES_AT.store(0, Ordering::SeqCst);
    }
}

/// When the purger should wake next, given the earliest deadline `next` it knows of
/// (`u64::MAX`: none) and whether remote frees into abandoned pages await draining or
/// this pass drained some (`draining`).
///
/// Never sooner than `delay / 4` after `now` for a deadline (so a stream of frees each
/// scheduling a purge costs one wake-up per quarter delay, not one per free), and
/// `DRAIN_BATCH_MS` for draining: under steady cross-thread traffic, draining at
/// once made the purger a busy thread competing with the program (and slow paths
/// drain too when they need pages). A pass that drained keeps that batch time even
/// with nothing pending after it: a purger with a wake time is not woken by the
/// notifications that follow (`deadline::wake_for_drain`), where one without a timeout
/// was woken by each, a wake-up per notification (mstress: 135 wake-ups a second
/// against 75; the traffic's end costs one wake-up that finds nothing). Always in the
/// future: a wake time at or before `now` would be a loop without a sleep.
fn next_wake(now: u64, delay: u64, next: u64, draining: bool) -> u64 {
    let mut wake_at = if next == u64::MAX {
        u64::MAX
    } else {
        next.max(now + (delay / 4).max(1))
    };
    if draining {
        wake_at = wake_at.min(now + DRAIN_BATCH_MS.min(delay / 4).max(1));
    }
    debug_assert!(wake_at > now);
    wake_at
}

/// In a fork child: the purger thread did not survive.
pub fn reset_after_fork() {
    if PURGER.load(Ordering::Relaxed) != FAILED {
        PURGER.store(NOT_STARTED, Ordering::Relaxed);
    }
    // The child is single-threaded whatever the parent was, and gets its own grace.
    FIRST_WANTED_MS.store(0, Ordering::Relaxed);
    let created = COUNTERS.threads_created.load(Ordering::Relaxed);
    HEAPS_BEFORE.store(created.saturating_sub(1), Ordering::Relaxed);
    PURGER_WAKES_AT.store(u64::MAX, Ordering::Relaxed);
}
