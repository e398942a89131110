//! The heap at its peak: what was live, by stack, when the sampled live bytes were
//! highest, for the question a leak profile cannot answer: what made the program's
//! memory peak (and so its RSS, its container's limit), though freed before exit.
//!
//! The sampler keeps an estimate of the bytes in live sampled blocks
//! (`table::live_bytes`). Whenever a sample takes it past 17/16 of the estimate at the
//! last snapshot, that sample's thread copies every stack's counters (allocated and
//! freed, in objects and bytes) into the snapshot. So the snapshot is taken within
//! 1/16 of the highest estimate the process reached, costs one load and compare per
//! sample otherwise, and is taken at most `ln(peak / rate) / ln(17/16)` times in a
//! process's life (about 180 between one sample and 64 GiB), each a walk over the
//! stacks in use (`table::for_each_used`), not over the whole table.
//!
//! Invariant: `records[..COUNT]` describe buckets `records[k].bucket`, each copied
//! whole by the last snapshot; a snapshot runs under `WRITING` (one thread at a time;
//! a sample that finds it taken skips its turn, and the next one past the threshold
//! takes it). Every field is atomic, so a reader that overlaps a snapshot (only after
//! waiting for one for [`READ_WAIT_MS`]: a fork child can inherit the flag from a
//! thread that did not survive) reads a mix of two snapshots, never invalid memory.

use super::table::{self, Bucket, BUCKETS};
use crate::os;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// One stack's counters at the snapshot.
#[repr(C)]
struct Record {
    bucket: AtomicU32,
    /// `Bucket::counters` as they were.
    counters: [AtomicU64; 6],
}

#[repr(C)]
struct Snapshot {
    records: [Record; BUCKETS],
}

static SNAPSHOT: AtomicUsize = AtomicUsize::new(0);
static MAKING: AtomicBool = AtomicBool::new(false);
/// A snapshot is being taken or read.
static WRITING: AtomicBool = AtomicBool::new(false);
/// Records in the snapshot.
static COUNT: AtomicUsize = AtomicUsize::new(0);
/// The live estimate at the snapshot, and when it was taken (`os::now_ms_by_syscall`).
static PEAK_BYTES: AtomicU64 = AtomicU64::new(0);
static PEAK_AT_MS: AtomicU64 = AtomicU64::new(0);
/// A sample that takes the live estimate past this takes the next snapshot.
static NEXT: AtomicU64 = AtomicU64::new(0);
/// How long a reader waits for a snapshot in progress.
const READ_WAIT_MS: u64 = 50;

/// The snapshot's records, mapped when profiling starts (zeroed: no record).
pub(super) fn make() -> bool {
    if SNAPSHOT.load(Ordering::Acquire) != 0 {
        return true;
    }
    if !MAKING.swap(true, Ordering::AcqRel) {
        let bytes = core::mem::size_of::<Snapshot>().next_multiple_of(os::page_size());
        let memory = os::reserve_aligned(bytes, os::page_size());
        SNAPSHOT.store(memory as usize, Ordering::Release);
        if memory.is_null() {
            MAKING.store(false, Ordering::Release);
        }
    } else {
        while SNAPSHOT.load(Ordering::Acquire) == 0 && MAKING.load(Ordering::Acquire) {
            os::yield_now();
        }
    }
    SNAPSHOT.load(Ordering::Acquire) != 0
}

fn snapshot() -> Option<&'static Snapshot> {
    let s = SNAPSHOT.load(Ordering::Acquire);
    // SAFETY: once made, the mapping is never unmapped, and every field is atomic.
    (s != 0).then(|| unsafe { &*(s as *const Snapshot) })
}

/// A sample made the live estimate `live`: take a snapshot if that is a new peak (by
/// 1/16 over the last one).
#[inline]
pub(super) fn after_sample(live: u64) {
    if live > NEXT.load(Ordering::Relaxed) {
        take(live);
    }
}

#[cold]
fn take(live: u64) {
    let Some(s) = snapshot() else {
        return;
    };
    if WRITING.swap(true, Ordering::Acquire) {
        return;
    }
    let mut count = 0;
    table::for_each_used(|index, b| {
        let Some(r) = s.records.get(count) else {
            return;
        };
        r.bucket.store(index, Ordering::Relaxed);
        for (kept, now) in r.counters.iter().zip(b.counters()) {
            kept.store(now, Ordering::Relaxed);
        }
        count += 1;
    });
    COUNT.store(count, Ordering::Relaxed);
    PEAK_BYTES.store(live, Ordering::Relaxed);
    // Not `now_ms`: libc's `clock_gettime` would leave a return address into libc
    // here, inside the sampling path's stack, for later samples' scans to find.
    PEAK_AT_MS.store(os::now_ms_by_syscall(), Ordering::Relaxed);
    NEXT.store(live + live / 16, Ordering::Relaxed);
    WRITING.store(false, Ordering::Release);
}

/// In a fork child (its first slow path): the child's peak starts from what it holds,
/// not from the parent's history; and a copy the fork interrupted in another thread
/// (which did not survive it) no longer holds the flag.
pub(super) fn after_fork() {
    COUNT.store(0, Ordering::Relaxed);
    PEAK_BYTES.store(0, Ordering::Relaxed);
    NEXT.store(0, Ordering::Relaxed);
    WRITING.store(false, Ordering::Release);
}

/// The estimated live bytes at the snapshot and how many milliseconds ago it was
/// taken, or None before the first sample.
pub fn peak() -> Option<(u64, u64)> {
    let bytes = PEAK_BYTES.load(Ordering::Relaxed);
    let at = PEAK_AT_MS.load(Ordering::Relaxed);
    (bytes != 0).then(|| (bytes, os::now_ms_by_syscall().saturating_sub(at)))
}

/// Call `f` with every stack's counters at the snapshot (a bucket's own counters as
/// they were then).
pub(super) fn for_each_record(mut f: impl FnMut(&Bucket, [u64; 6])) {
    let Some(s) = snapshot() else {
        return;
    };
    let start = os::now_ms_by_syscall();
    let mut held = false;
    while !held && os::now_ms_by_syscall().saturating_sub(start) < READ_WAIT_MS {
        held = !WRITING.swap(true, Ordering::Acquire);
        if !held {
            os::yield_now();
        }
    }
    let count = COUNT.load(Ordering::Relaxed).min(BUCKETS);
    for r in &s.records[..count] {
        let Some(b) = table::bucket(r.bucket.load(Ordering::Relaxed)) else {
            continue;
        };
        f(b, r.counters.each_ref().map(|c| c.load(Ordering::Relaxed)));
    }
    if held {
        WRITING.store(false, Ordering::Release);
    }
}
