//! Free committed runs of the arena lend their pages to a new huge block.
//!
//! The arena keeps free spans committed for reuse (`retain.rs`), and the huge pool keeps
//! freed huge mappings (`huge_pool.rs`), each for its own kind of request: a large block
//! freed in a segment waits there for another large block, while a huge request beside
//! it faults in fresh pages. A program that replaces buffers on both sides of
//! `LARGE_MAX` at random (issue 16's 5-25 MiB shape: 20 live, the new one allocated
//! before the old one is freed) so carried a segment's worth of free committed spans
//! through its peak: 22 MiB above the 389 MiB live at the moment of the peak, where
//! jemalloc held 24 MiB in all.
//!
//! Before a new huge mapping faults in fresh pages, the longest free committed runs (at
//! least [`MIN_RUN_SLICES`]) move their pages into it with `os::move_pages` (no copy, no
//! fault; the run stays mapped, reading as zero): what the arena held free becomes part
//! of the block, and the runs go back to the arena uncommitted, as after a decommit.
//! While the pages move, the runs are *hidden* exactly as the decommit scan hides the
//! runs it decommits (`decommit.rs`, "Hidden runs"): neither free nor counted, so no
//! span can be carved out of them. A run whose pages could not move stays committed.
//!
//! A run is lent from its end: allocation takes committed runs first fit from their
//! start, so the slices it would take next stay. Units resident whole as huge pages
//! (dense growth and fresh units, `large_pages::exclude_whole_units`) and units kept whole for them
//! (`large_pages::kept_units`, `EBB_LARGE_PAGES=1`) are skipped: moving part of a huge
//! page splits it, and what dense growth faulted in as one huge page for small pages
//! would come back 4 KiB at a time. Not in the secure build, whose free slices may
//! hold guard pages.

use crate::counters::COUNTERS;
use crate::span::arena::{segments, SPAN_LOCK};
use crate::span::decommit_batch::DecommitBatch;
use crate::span::segment::{Segment, HEADER_SLICES, SLICES_PER_SEGMENT, SLICE_SIZE};
use crate::span::{header_purge, large_pages};
use core::sync::atomic::Ordering;

/// Runs shorter than this (1 MiB) are not lent: a system call per run, and the page
/// tables of a short run cost about as much to move as its faults.
pub const MIN_RUN_SLICES: usize = 16;
/// Runs lent to one block at most.
pub const MAX_RUNS: usize = 8;

/// A run hidden for its pages to move: slices `start..start + count` of `seg`.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    seg: *mut Segment,
    start: usize,
    count: usize,
}

impl Run {
    const EMPTY: Run = Run {
        seg: core::ptr::null_mut(),
        start: 0,
        count: 0,
    };

    /// The run's first byte.
    pub fn base(&self) -> *mut u8 {
        // SAFETY: a run is only made from a live normal segment (never unmapped).
        unsafe { (*self.seg).slice_start(self.start) }
    }

    pub fn bytes(&self) -> usize {
        self.count * SLICE_SIZE
    }
}

/// Runs taken by [`take`], at most [`MAX_RUNS`].
pub struct Runs {
    runs: [Run; MAX_RUNS],
    len: usize,
}

impl Runs {
    pub fn as_slice(&self) -> &[Run] {
        &self.runs[..self.len]
    }
}

/// Hide free committed runs of at least [`MIN_RUN_SLICES`] slices, longest first, until
/// they hold `want` bytes (rounded down to slices) or none is left: the caller moves
/// their pages out and hands them to [`give_back`].
pub fn take(want: usize) -> Runs {
    let mut out = Runs {
        runs: [Run::EMPTY; MAX_RUNS],
        len: 0,
    };
    if cfg!(feature = "secure") || !crate::os::HAS_REMAP {
        return out;
    }
    let mut left = want / SLICE_SIZE;
    let mut reuse = SPAN_LOCK.lock();
    if left < MIN_RUN_SLICES || reuse.committed_free() < MIN_RUN_SLICES {
        return out;
    }
    // One pass over the segments under the lock (a huge request may meet thousands of
    // them), keeping the longest runs; then the longest first until `want` is met.
    let mut found = [(core::ptr::null_mut::<Segment>(), 0usize, 0usize); MAX_RUNS];
    let found_len = longest_runs(&mut found);
    found[..found_len].sort_unstable_by_key(|f| core::cmp::Reverse(f.2));
    for &(seg, start, len) in &found[..found_len] {
        // A run no longer than what is still wanted goes whole; a longer one lends its
        // tail, so the part first fit takes next stays.
        let count = len.min(left);
        if count < MIN_RUN_SLICES {
            break;
        }
        let start = start + len - count;
        // SAFETY: segments are never unmapped; the lock guards the bitmaps.
        let seg_ref = unsafe { &mut *seg };
        debug_assert!(
            seg_ref.free_slices.all(start, count, true)
                && seg_ref.committed_slices.all(start, count, true)
        );
        // Hidden (`decommit.rs`): neither free nor counted, still committed.
        seg_ref.free_slices.assign_range(start, count, false);
        seg_ref.free_count -= count as u32;
        reuse.hidden(count);
        out.runs[out.len] = Run { seg, start, count };
        out.len += 1;
        left -= count;
    }
    out
}

/// Fill `found` with the longest free committed runs of at least [`MIN_RUN_SLICES`]
/// slices outside the units skipped (module doc), as `(segment, first slice, slices)`,
/// in no order; returns how many (span lock held by the caller). Words of the bitmaps
/// with no candidate slice are skipped whole.
fn longest_runs(found: &mut [(*mut Segment, usize, usize); MAX_RUNS]) -> usize {
    let mut len = 0;
    for seg in segments() {
        // SAFETY: segments are valid; the caller holds the span lock.
        let seg_ref = unsafe { &*seg };
        if (seg_ref.free_count as usize) < MIN_RUN_SLICES {
            continue;
        }
        let kept = large_pages::kept_units(&seg_ref.free_slices);
        let mut lendable = seg_ref.free_slices;
        lendable.and_assign(&seg_ref.committed_slices);
        large_pages::exclude_whole_units(&mut lendable, seg_ref);
        let candidate = |i: usize| lendable.get(i) && !large_pages::is_kept(kept, i);
        let mut i = HEADER_SLICES;
        while i < SLICES_PER_SEGMENT {
            if lendable.word(i / 64) >> (i % 64) == 0 {
                i = (i / 64 + 1) * 64;
                continue;
            }
            if !candidate(i) {
                i += 1;
                continue;
            }
            let start = i;
            while i < SLICES_PER_SEGMENT && candidate(i) {
                i += 1;
            }
            let run = i - start;
            if run < MIN_RUN_SLICES {
                continue;
            }
            if len < MAX_RUNS {
                found[len] = (seg, start, run);
                len += 1;
            } else if let Some(shortest) = found.iter_mut().min_by_key(|f| f.2) {
                if run > shortest.2 {
                    *shortest = (seg, start, run);
                }
            }
        }
    }
    len
}

/// Make the runs of `runs` free again: uncommitted where `moved` says their pages moved
/// out (they read as zero and nothing of them is resident, as after a decommit),
/// committed as before where they did not. Returns the bytes that moved out.
pub fn give_back(runs: &Runs, moved: &[bool]) -> usize {
    let mut bytes = 0;
    let mut reuse = SPAN_LOCK.lock();
    let mut descriptors = DecommitBatch::new();
    for (run, &done) in runs.as_slice().iter().zip(moved) {
        // SAFETY: segments are never unmapped; the lock guards the bitmaps.
        let seg_ref = unsafe { &mut *run.seg };
        debug_assert!(
            seg_ref.free_slices.all(run.start, run.count, false)
                && seg_ref.committed_slices.all(run.start, run.count, true),
            "a hidden run changed while its pages moved"
        );
        if !done {
            reuse.unhidden(run.count);
        }
        seg_ref
            .committed_slices
            .assign_range(run.start, run.count, !done);
        seg_ref.free_slices.assign_range(run.start, run.count, true);
        seg_ref.free_count += run.count as u32;
        if done {
            bytes += run.bytes();
            // SAFETY: the span lock is held until the batch is finished; a normal
            // segment.
            unsafe {
                header_purge::purge_descriptors(seg_ref, run.start, run.count, &mut descriptors)
            };
        }
    }
    descriptors.finish();
    drop(reuse);
    COUNTERS
        .committed
        .fetch_sub(bytes as u64, Ordering::Relaxed);
    COUNTERS
        .lent_to_huge
        .fetch_add(bytes as u64, Ordering::Relaxed);
    bytes
}
