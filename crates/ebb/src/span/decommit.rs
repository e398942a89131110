//! The decommit scan: free slices whose purge delay has passed go back to the OS
//! (`os::decommit`), segment by segment, a batch of runs at a time.
//!
//! # Hidden runs
//! A run is found under [`SPAN_LOCK`], then decommitted *outside* it (a system call
//! per run must not stall every thread's slow paths). Meanwhile the run is *hidden*:
//! its bits are cleared in `free_slices` (so `alloc_span` and `resize_large` cannot
//! take it) but still set in `committed_slices`, and `free_count` does not count it.
//! Nothing else reads a hidden run's descriptors. Once decommitted, the run is made
//! free again, now uncommitted, under the lock; a run the OS refused to decommit is
//! made free again still committed, and the scan stops until the next purge.
//!
//! # Which slices
//! Each scan ends a retention period (`retain.rs`): it keeps the first `keep` free
//! committed slices in allocation order (segment order, then slice order), `keep`
//! following what the recent periods reused, and decommits the others once they have
//! been free for one period; any slice free for the whole purge delay goes back.
//!
//! With `EBB_LARGE_PAGES=1` an unforced scan skips the free slices of 2 MiB units
//! that are mostly in use (`large_pages::kept_units`), so it does not split their huge
//! pages; they are not counted as pending either.

use crate::counters::COUNTERS;
use crate::span::arena::{segments, SPAN_LOCK};
use crate::span::decommit_batch::{self, DecommitBatch};
use crate::span::retain::{self, Scan, Verdict};
use crate::span::segment::{SLICES_PER_SEGMENT, SLICE_SIZE};
use crate::span::{header_purge, large_pages};
use core::sync::atomic::Ordering;

/// Runs decommitted per lock hold (found under the lock, decommitted outside it).
const RUNS_PER_BATCH: usize = 32;

/// Decommit the free slices retention does not keep (module doc; all free committed
/// slices if `force`). Returns the next time the scan should run again, or `u64::MAX`.
pub fn decommit_due(now: u64, delay: u64, force: bool) -> u64 {
    let mut next_due = u64::MAX;
    let (keep, remembers) = {
        let mut reuse = SPAN_LOCK.lock();
        let keep = reuse.end_period();
        (keep, reuse.remembers_reuse())
    };
    let mut scan = Scan::new(now, delay, keep);
    // Runs to decommit, found under the lock and decommitted outside it.
    let mut runs: [(usize, usize); RUNS_PER_BATCH] = [(0, 0); RUNS_PER_BATCH];
    for seg in segments() {
        // Each pass over the segment meets its kept slices again: count them once.
        let kept_before = scan.kept;
        loop {
            let mut run_count = 0;
            scan.kept = kept_before;
            {
                let mut reuse = SPAN_LOCK.lock();
                // SAFETY: seg is live; bitmaps and free descriptors are guarded by the lock.
                let seg_ref = unsafe { &mut *seg };
                // Decided before anything is hidden, so hiding a run does not make the
                // rest of its unit look used.
                let kept = if force {
                    0
                } else {
                    large_pages::kept_units(&seg_ref.free_slices)
                };
                let mut i = crate::span::segment::HEADER_SLICES;
                while i < SLICES_PER_SEGMENT && run_count < runs.len() {
                    // Skip to the next slice that is free and committed, a word at a time.
                    let word = i / 64;
                    let candidates = (seg_ref.free_slices.word(word)
                        & seg_ref.committed_slices.word(word)
                        & !large_pages::kept_mask(kept, word))
                        >> (i % 64);
                    if candidates == 0 {
                        i = (word + 1) * 64;
                        continue;
                    }
                    i += candidates.trailing_zeros() as usize;
                    let freed_at = |i: usize| seg_ref.pages[i].freed_at.load(Ordering::Relaxed);
                    if let Verdict::Until(due) = verdict(&mut scan, force, freed_at(i)) {
                        next_due = next_due.min(due);
                        i += 1;
                        continue;
                    }
                    let start = i;
                    i += 1;
                    // The run ends at the first slice not free, not committed, in a kept
                    // unit, or left committed by the rule (`i` then moves past it).
                    let mut end = None;
                    while i < SLICES_PER_SEGMENT
                        && seg_ref.free_slices.get(i)
                        && seg_ref.committed_slices.get(i)
                        && !large_pages::is_kept(kept, i)
                    {
                        if let Verdict::Until(due) = verdict(&mut scan, force, freed_at(i)) {
                            next_due = next_due.min(due);
                            end = Some(i);
                            i += 1;
                            break;
                        }
                        i += 1;
                    }
                    let end = end.unwrap_or(i);
                    // Hide the run while it is decommitted outside the lock: its
                    // slices are neither free nor committed for `alloc_span`, and
                    // `free_count` no longer counts them (module doc).
                    seg_ref.free_slices.assign_range(start, end - start, false);
                    seg_ref.free_count -= (end - start) as u32;
                    reuse.hidden(end - start);
                    runs[run_count] = (start, end - start);
                    run_count += 1;
                }
            }
            if run_count == 0 {
                break;
            }
            let mut bytes = 0;
            let mut decommitted = [false; RUNS_PER_BATCH];
            let mut ranges = [(core::ptr::null_mut(), 0); RUNS_PER_BATCH];
            for (&(start, count), range) in runs[..run_count].iter().zip(&mut ranges) {
                // SAFETY: seg is live; the run is inside it.
                *range = (unsafe { (*seg).slice_start(start) }, count * SLICE_SIZE);
            }
            // One system call for the lot where the OS allows (`os::decommit_ranges`).
            // SAFETY: the runs are free and hidden from allocation, so no one uses them.
            unsafe {
                decommit_batch::decommit_ranges(&ranges[..run_count], &mut decommitted[..run_count])
            };
            for (&(_, count), &done) in runs[..run_count].iter().zip(&decommitted) {
                if done {
                    bytes += count * SLICE_SIZE;
                }
            }
            let refused = decommitted[..run_count].contains(&false);
            {
                let mut reuse = SPAN_LOCK.lock();
                // SAFETY: as above.
                let seg_ref = unsafe { &mut *seg };
                let mut descriptors = DecommitBatch::new();
                for (&(start, count), &done) in runs[..run_count].iter().zip(&decommitted) {
                    if !done {
                        reuse.unhidden(count);
                    }
                    debug_assert!(
                        seg_ref.free_slices.all(start, count, false)
                            && seg_ref.committed_slices.all(start, count, true),
                        "a hidden run changed while it was decommitted"
                    );
                    // A run the OS refused to decommit keeps its data: it stays
                    // committed (so it is never taken for zeroed memory).
                    seg_ref.committed_slices.assign_range(start, count, !done);
                    seg_ref.free_slices.assign_range(start, count, true);
                    seg_ref.free_count += count as u32;
                    if done {
                        // SAFETY: the span lock is held until the batch is finished;
                        // a normal segment.
                        unsafe {
                            header_purge::purge_descriptors(seg_ref, start, count, &mut descriptors)
                        };
                    }
                }
                descriptors.finish();
            }
            COUNTERS
                .committed
                .fetch_sub(bytes as u64, Ordering::Relaxed);
            COUNTERS.purged.fetch_add(bytes as u64, Ordering::Relaxed);
            COUNTERS
                .purge_calls
                .fetch_add(run_count as u64, Ordering::Relaxed);
            if refused {
                // The OS refuses now; the purger tries again after another delay
                // rather than finding the same runs again and again.
                return next_due.min(now.saturating_add(delay.max(1)));
            }
            if run_count < runs.len() {
                break;
            }
        }
    }
    // While reuse is remembered, `keep` decays period by period: look again next
    // period at what the decay lets go.
    if remembers && scan.kept > 0 {
        next_due = next_due.min(now.saturating_add(retain::period_ms(delay)));
    }
    next_due
}

/// The verdict on a free committed slice freed at `freed_at` (everything goes if
/// `force`).
fn verdict(scan: &mut Scan, force: bool, freed_at: u64) -> Verdict {
    if force {
        Verdict::Decommit
    } else {
        scan.decide(freed_at)
    }
}
