//! Deadlines the background purger serves, and waking it.
//!
//! Any layer that creates work for the purger records a deadline here — a free span's
//! purge (`schedule_purge`), a heap that may go idle holding pages (`schedule_idle_check`),
//! remote frees into an abandoned page (`wake_for_drain`) — and wakes the purger only if
//! it would otherwise sleep past it. The purger thread itself (`process::purger`) reads
//! the deadlines and publishes when it will wake next.
//!
//! This is the only state the layers below `process` share with the purger, so none of
//! them needs to know the purger exists beyond this module.

use crate::os;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

/// The purger thread's state (`PURGER`).
pub const NOT_STARTED: u8 = 0;
pub const STARTING: u8 = 1;
pub const RUNNING: u8 = 2;
pub const FAILED: u8 = 3;
/// Asked to end, and about to be joined (`process::purger::stop`).
pub const STOPPING: u8 = 4;
/// `NOT_STARTED`, `STARTING`, `RUNNING`, `FAILED` or `STOPPING`.
pub static PURGER: AtomicU8 = AtomicU8::new(NOT_STARTED);
/// Futex word: bumped by every wake-up request.
pub static WAKE: AtomicU32 = AtomicU32::new(0);
/// When the purger will next wake by itself (`u64::MAX`: never, it sleeps until woken).
pub static PURGER_WAKES_AT: AtomicU64 = AtomicU64::new(u64::MAX);
/// Something was scheduled, so the purger should exist.
pub static WANTED: AtomicU8 = AtomicU8::new(0);
/// Earliest time a free committed slice becomes due for purging (`u64::MAX`: none).
pub static NEXT_PURGE: AtomicU64 = AtomicU64::new(u64::MAX);
/// Earliest time a heap may have become idle enough to take over (`u64::MAX`: none).
pub static NEXT_STEAL: AtomicU64 = AtomicU64::new(u64::MAX);

/// The purger's clock reading (ms) at the start of its latest pass, or a later reading
/// by [`coarse_now_ms`].
static TICK_MS: AtomicU64 = AtomicU64::new(0);

/// The time (ms) to stamp freed memory, abandoned pages and deadlines with, read from
/// the clock only when the purger will not refresh it soon.
///
/// Slow paths that run once per page or per large block (a page emptied or abandoned,
/// a large block freed, a page drained) stamp what they free; reading the clock there
/// (`clock_gettime`) is a cost per allocation in churn. While the purger runs a pass or
/// sleeps at most a retention period (`retain::period_ms`) past its last tick, the
/// tick is at most about a period old, so a stamp is early by at most that much (a
/// purge can come up to a period early, never late). Otherwise (no purger, or one
/// sleeping long or without a timeout) the clock is read and the tick moved on.
pub fn coarse_now_ms() -> u64 {
    if PURGER.load(Ordering::Relaxed) == RUNNING {
        let tick = TICK_MS.load(Ordering::Relaxed);
        let wakes_at = PURGER_WAKES_AT.load(Ordering::Relaxed);
        let period = crate::span::retain::period_ms(crate::options::get().purge_delay_ms);
        // 0: awake, in a pass (it ticked at its start, or whoever woke it did).
        if wakes_at == 0 || wakes_at <= tick.saturating_add(period) {
            return tick;
        }
    }
    let now = os::now_ms();
    TICK_MS.fetch_max(now, Ordering::Relaxed);
    now
}

/// The purger's pass starts at `now` (a clock reading).
pub fn tick(now: u64) {
    TICK_MS.fetch_max(now, Ordering::Relaxed);
}

/// A heap got its first page at `now`: it may go idle holding pages, so the purger must
/// look at it after the purge delay (woken if it sleeps without a timeout).
pub fn schedule_idle_check(now: u64) {
    let due = now + crate::options::get().purge_delay_ms;
    lower(&NEXT_STEAL, due);
    wake_if_later_than(due);
}

/// When the purger last looked at idle heaps (ms; [`steal_checked`]).
static LAST_STEAL_CHECK: AtomicU64 = AtomicU64::new(0);

/// The purger looked at idle heaps at `now`.
pub fn steal_checked(now: u64) {
    LAST_STEAL_CHECK.store(now, Ordering::Relaxed);
}

/// Ask the purger to look at idle heaps now (`handoff::freed_into`: a heap whose
/// blocks other threads free may be taken over sooner, counted from this look). Within
/// a quarter retention period of its last look, the look is due at the end of that
/// quarter period and waits for the purger's next pass (woken only if that pass is
/// more than a quarter delay later: the batching interval of `process::purger`).
///
/// Why not always now: each heap is noted once per life, and a program that starts
/// threads by the hundred a second (mstress: 400, each freeing into its predecessors'
/// pages) woke the purger for each, ~250 passes a second with a walk of the heaps in
/// most. A heap noted alone (issue 14's sleeping owner) is still looked at at once.
pub fn schedule_steal_check_now() {
    let now = coarse_now_ms();
    let delay = crate::options::get().purge_delay_ms;
    let gap = crate::span::retain::period_ms(delay) / 4;
    let batched_until = LAST_STEAL_CHECK.load(Ordering::Relaxed).saturating_add(gap);
    if now >= batched_until {
        lower(&NEXT_STEAL, now);
        wake_if_later_than(now);
    } else {
        lower(&NEXT_STEAL, batched_until);
        wake_if_later_than(batched_until.saturating_add(delay / 4));
    }
}

/// Memory became free at `now`: its purge is due at `now + delay`.
pub fn schedule_purge(now: u64) {
    let due = now + crate::options::get().purge_delay_ms;
    lower(&NEXT_PURGE, due);
    wake_if_later_than(due);
}

/// Free spans came back to the arena at `now`: the decommit scan looks at them one
/// retention period later (`retain.rs`: kept if the program has been reusing that
/// much, returned otherwise; the full purge delay is the upper bound).
pub fn schedule_retention_scan(now: u64) {
    let due = now + crate::span::retain::period_ms(crate::options::get().purge_delay_ms);
    lower(&NEXT_PURGE, due);
    wake_if_later_than(due);
}

/// Lower `deadline` (`NEXT_PURGE`, `NEXT_STEAL`) to `due`, writing only if it is later.
///
/// Every page drained or listed and every span freed schedules a deadline, from every
/// thread: an unconditional `fetch_min` made each of them take the line for writing
/// (mixed-c, 8 threads handing buffers around: the `lock cmpxchg` on `NEXT_PURGE` was
/// 15% of `finish_drain`'s samples). Skipping the write when the deadline is already
/// due no later loses nothing, because the memory each caller schedules for is
/// published under a lock that the purger's scan takes too (the arena's span lock,
/// the abandoned lists' lock, the huge pool's lock), and the purger lowers the
/// deadline to `u64::MAX` before that scan (`process::purger::purge`): if the scan
/// takes the lock after the caller, it finds the memory; if before, the reset
/// happened before this load, which reads `u64::MAX` (and writes) or a deadline set
/// since, at whose pass the purger scans again.
#[inline]
fn lower(deadline: &AtomicU64, due: u64) {
    if due < deadline.load(Ordering::SeqCst) {
        deadline.fetch_min(due, Ordering::SeqCst);
    }
}

/// Say that the purger is wanted (`WANTED`), reading before writing: the flag is set
/// once per process and read on every deadline.
#[inline]
fn want_purger() {
    if WANTED.load(Ordering::Relaxed) == 0 {
        WANTED.store(1, Ordering::Relaxed);
    }
}

fn wake_if_later_than(due: u64) {
    want_purger();
    if PURGER.load(Ordering::Acquire) == RUNNING && due < PURGER_WAKES_AT.load(Ordering::SeqCst) {
        wake();
    }
}

/// Remote frees into an abandoned page want draining: wake a purger that sleeps
/// without a timeout (one with a wake time drains then: see `process::purger`).
pub fn wake_for_drain() {
    want_purger();
    if PURGER.load(Ordering::Acquire) == RUNNING
        && PURGER_WAKES_AT.load(Ordering::SeqCst) == u64::MAX
    {
        wake();
    }
}

/// Wake the purger now.
pub fn wake() {
    WAKE.fetch_add(1, Ordering::Release);
    os::wake(&WAKE, 1);
}

/// True if the background purger thread is running.
pub fn purger_running() -> bool {
    PURGER.load(Ordering::Acquire) == RUNNING
}
