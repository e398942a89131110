//! Statistics: process-wide counters kept on slow paths, plus a walk of the page
//! descriptors for live bytes. The fast paths count nothing: `used` per page is kept
//! anyway, and summing it over the (few thousand) descriptors is cheap enough for a
//! monitoring loop.

use crate::counters::COUNTERS;
use crate::diag::{Bytes, StderrWriter};
use crate::size_class::{class_size, CLASS_COUNT};
use crate::span::arena;
use crate::span::page::{FREE, HUGE, LARGE, MARKER_LIMIT};
use crate::span::segment::{HEADER_SLICES, SLICES_PER_SEGMENT};
use core::fmt::{self, Write};
use core::sync::atomic::Ordering;

/// Per size class figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// Block size of the class.
    pub block_size: u64,
    /// Pages of this class in use (owned or abandoned).
    pub pages: u64,
    /// Blocks handed out and not yet freed.
    pub live_blocks: u64,
    /// Blocks the pages can hold.
    pub capacity_blocks: u64,
    /// Part of `live_blocks` freed by other threads and not yet taken in.
    pub remote_freed_blocks: u64,
}

/// A snapshot of the allocator's state. All byte counts are bytes.
#[derive(Clone, Copy, Debug)]
pub struct Stats {
    /// Bytes in live blocks, counted at block size (what programs hold, after
    /// rounding to size classes). Blocks freed by other threads are not counted, though
    /// their pages have not taken them in yet (reading stats changes nothing): the length
    /// of each page's remote-free list is read from its head word.
    pub allocated: u64,
    /// Bytes of small and medium blocks in use (part of `allocated`).
    pub allocated_small: u64,
    /// Bytes of large blocks (spans of their own, up to 16 MiB).
    pub allocated_large: u64,
    /// Bytes of huge blocks (mappings of their own), in whole OS pages of the requests.
    pub allocated_huge: u64,
    /// Bytes of memory that may be resident: spans handed out or free but not yet
    /// purged, segment headers, and the pages of huge blocks. An upper bound of what is
    /// resident: a span counts from the moment it is handed out, touched or not.
    pub committed: u64,
    /// The most `committed` has been (bytes; `malloc_info`'s `system max`).
    pub committed_peak: u64,
    /// Part of `committed` that is free and waiting for its purge delay.
    pub free_committed: u64,
    /// Part of `committed` in empty pages the threads' heaps keep for their next pages
    /// (`front::stash`, at most 1 MiB a heap, 4 MiB while its batches are bigger; they
    /// go back to the arena when the heap is swept, taken over, or its thread exits).
    pub stashed: u64,
    /// Address space reserved from the OS.
    pub reserved: u64,
    /// Total bytes given back to the OS by purging (cumulative).
    pub purged: u64,
    /// Number of `madvise` calls made by purging (cumulative).
    pub purge_calls: u64,
    /// Segments (32 MiB regions) reserved.
    pub segments: u64,
    /// Pages in use (owned by a thread or abandoned).
    pub pages: u64,
    /// Pages nobody owns right now.
    pub pages_abandoned: u64,
    /// Pages abandoned, claimed back, and drained (`collect_events`: a drainer took an
    /// abandoned page's remote frees in; cumulative).
    pub abandon_events: u64,
    pub reclaim_events: u64,
    pub collect_events: u64,
    /// Threads with a heap now, and ever.
    pub threads: u64,
    pub threads_created: u64,
    /// Large and huge blocks allocated (cumulative).
    pub large_allocs: u64,
    pub huge_allocs: u64,
    /// Passes of the background purger's loop (cumulative): each is a wake-up, whether
    /// a timed or requested futex wake ended its sleep or it went round without one.
    pub purger_wakeups: u64,
    /// CPU time the background purger thread has used (ns, user + system, as of its
    /// last pass; `CLOCK_THREAD_CPUTIME_ID`).
    pub purger_cpu_ns: u64,
    /// The part of `purger_cpu_ns` spent in the kernel (ns; `getrusage(RUSAGE_THREAD)`,
    /// whose user/system split follows the kernel's tick samples): mostly the kernel's
    /// work of freeing the pages the purger gives back and flushing them from the other
    /// CPUs' TLBs, which any allocator that returns memory pays somewhere.
    /// `purger_cpu_ns - purger_sys_ns` is ebb's own work.
    pub purger_sys_ns: u64,
    /// System calls made to decommit memory (cumulative; one `process_madvise` gives
    /// back many ranges: `span::decommit_batch`).
    pub decommit_calls: u64,
    /// Invalid or double frees detected (cumulative).
    pub invalid_frees: u64,
    /// Heaps of idle threads whose pages the background purger took over, and attempts
    /// (cumulative).
    pub steals: u64,
    pub steal_attempts: u64,
    /// Heaps the purger's scans for idle heaps read (cumulative): only heaps that hold
    /// pages of their own (`process/registry.rs`, the holders list).
    pub idle_walk_visits: u64,
    /// Those scans (cumulative).
    pub idle_walks: u64,
    /// Abandoned pages the purger's walks for due inside purges read (cumulative): only
    /// pages whose free blocks still await that purge (`handoff::abandon`).
    pub inside_walk_visits: u64,
    /// Bytes of free committed spans whose pages moved into new huge blocks instead of
    /// fresh ones (cumulative; `span::lend`).
    pub lent_to_huge: u64,
    /// Bytes of kept huge pages moved into new huge blocks or large spans instead of
    /// fresh pages (cumulative; `span::huge`).
    pub kept_moved: u64,
    /// Times page moves between free memory and huge blocks paused because the
    /// process had more kernel mappings than their budget (cumulative;
    /// `span::move_budget`), and the mappings it had at the last count (0: never
    /// counted).
    pub move_pauses: u64,
    pub mappings_counted: u64,
    /// Busy heaps that let go of their non-current pages when the purger asked
    /// (cumulative; `heap::sweep`).
    pub sweeps: u64,
    /// Blocks served from the pages all threads share, before the threads had pages of
    /// their own for the class (cumulative; `front/shared.rs`).
    pub shared_start_blocks: u64,
    /// 2 MiB units advised for huge pages by dense growth: faulted in because small
    /// pages filled the one before, or lying whole and untouched inside a new large
    /// block (cumulative; `span/large_pages.rs` "Dense growth", "Large blocks").
    pub dense_huge_units: u64,
    /// Resident bytes of ebb's memory as RSS counts them (`/proc/self/pagemap`, which
    /// leaves out pages that map the kernel's zero page; `mincore` without it): segments (headers,
    /// spans, free slices not yet purged), huge blocks, kept huge mappings, heaps,
    /// check bitmaps and the segment map.
    pub resident: u64,
    /// Part of `resident` that is metadata: segment headers, heaps, check bitmaps and
    /// the segment map.
    pub metadata: u64,
    /// Freed huge mappings kept for reuse: bytes mapped, and the part resident (as RSS
    /// counts it: pages that map the zero page, read but never written, do not count).
    pub huge_kept: u64,
    pub huge_kept_resident: u64,
    /// Heaps of live threads, and spare heaps (of exited threads, kept for reuse).
    pub heaps_live: u64,
    pub heaps_spare: u64,
    /// Blocks freed by other threads that their page's owner has not taken in yet (the
    /// lengths of the remote-free lists), and their bytes: part of `allocated`.
    pub remote_freed_blocks: u64,
    pub remote_freed_bytes: u64,
    /// Per size class.
    pub classes: [ClassStats; CLASS_COUNT],
}

/// Take a snapshot. Costs a walk over every page descriptor (512 per 32 MiB segment).
///
/// Reading never changes allocator state: no page is drained, claimed or freed. A
/// block another thread freed stays in its page's `used` until the page's owner (or,
/// for an abandoned page, a drainer) takes the remote free in, so live blocks are
/// `used` minus the length of the page's remote-free list (read from its head word, a
/// snapshot that may be a few blocks off while a page changes hands).
pub fn snapshot() -> Stats {
    let c = &COUNTERS;
    let purger_cpu_ns = c.purger_cpu_ns.load(Ordering::Relaxed);
    let mut s = Stats {
        allocated: 0,
        allocated_small: 0,
        allocated_large: 0,
        allocated_huge: c.huge_used.load(Ordering::Relaxed),
        committed: arena::committed_bytes(),
        // Raised where committed memory grows; a kept huge mapping's count moves
        // between two counters, so the sum can pass the peak for a moment.
        committed_peak: c.committed_peak.load(Ordering::Relaxed),
        free_committed: arena::free_committed_bytes() + c.huge_cached.load(Ordering::Relaxed),
        reserved: c.reserved.load(Ordering::Relaxed) + c.huge_bytes.load(Ordering::Relaxed),
        purged: c.purged.load(Ordering::Relaxed),
        purge_calls: c.purge_calls.load(Ordering::Relaxed),
        segments: c.segments.load(Ordering::Relaxed),
        pages: 0,
        pages_abandoned: 0,
        stashed: 0,
        abandon_events: c.pages_abandoned.load(Ordering::Relaxed),
        reclaim_events: c.pages_reclaimed.load(Ordering::Relaxed),
        collect_events: c.pages_collected.load(Ordering::Relaxed),
        threads: c.threads.load(Ordering::Relaxed),
        threads_created: c.threads_created.load(Ordering::Relaxed),
        large_allocs: c.large_allocs.load(Ordering::Relaxed),
        huge_allocs: c.huge_allocs.load(Ordering::Relaxed),
        purger_wakeups: c.purger_wakeups.load(Ordering::Relaxed),
        purger_cpu_ns,
        // The purger writes the two counters one after the other: a snapshot between
        // the stores would see a new kernel part beside an old total.
        purger_sys_ns: c.purger_sys_ns.load(Ordering::Relaxed).min(purger_cpu_ns),
        decommit_calls: crate::os::decommit_calls(),
        invalid_frees: c.invalid_frees.load(Ordering::Relaxed),
        steals: c.steals.load(Ordering::Relaxed),
        steal_attempts: c.steal_attempts.load(Ordering::Relaxed),
        idle_walk_visits: c.idle_walk_visits.load(Ordering::Relaxed),
        inside_walk_visits: c.inside_walk_visits.load(Ordering::Relaxed),
        lent_to_huge: c.lent_to_huge.load(Ordering::Relaxed),
        kept_moved: c.kept_moved.load(Ordering::Relaxed),
        move_pauses: c.move_pauses.load(Ordering::Relaxed),
        mappings_counted: c.mappings_counted.load(Ordering::Relaxed),
        idle_walks: c.idle_walks.load(Ordering::Relaxed),
        sweeps: c.sweeps.load(Ordering::Relaxed),
        shared_start_blocks: c.shared_start_blocks.load(Ordering::Relaxed),
        dense_huge_units: c.dense_huge_units.load(Ordering::Relaxed),
        resident: 0,
        metadata: 0,
        huge_kept: 0,
        huge_kept_resident: 0,
        heaps_live: 0,
        heaps_spare: 0,
        remote_freed_blocks: 0,
        remote_freed_bytes: 0,
        classes: [ClassStats::default(); CLASS_COUNT],
    };
    for (i, class) in s.classes.iter_mut().enumerate() {
        class.block_size = class_size(i) as u64;
    }
    for seg in arena::segments() {
        for i in HEADER_SLICES..SLICES_PER_SEGMENT {
            // SAFETY: segments are never unmapped; descriptor fields read here are atomics
            // or written before the owner word is published.
            let page = unsafe { &(*seg).pages[i] };
            // SAFETY: as above.
            if !unsafe { (*seg).starts_span(i) } {
                continue; // a free slice or not the first of its span
            }
            let owner = page.owner.load(Ordering::Acquire);
            match owner {
                // A span in use whose owner word is FREE is a heap's stashed page.
                FREE => s.stashed += page.span_bytes() as u64,
                HUGE => {}
                LARGE => s.allocated_large += page.block_size() as u64,
                _ => {
                    let size = page.block_size() as u64;
                    if size == 0 {
                        continue;
                    }
                    let class = &mut s.classes[page.class as usize % CLASS_COUNT];
                    // Blocks freed by other threads and not yet taken in still count in
                    // `used`; their number rides in the list's head word (read, never
                    // taken): counted as remote-freed, not as live.
                    let remote = (page.remote_frees_pending() as u64).min(page.used() as u64);
                    let used = page.used() as u64 - remote;
                    class.remote_freed_blocks += remote;
                    s.remote_freed_blocks += remote;
                    s.remote_freed_bytes += remote * size;
                    class.pages += 1;
                    class.live_blocks += used;
                    class.capacity_blocks += page.reserved as u64;
                    s.pages += 1;
                    s.allocated_small += used * size;
                    if owner < MARKER_LIMIT {
                        s.pages_abandoned += 1;
                    }
                }
            }
        }
    }
    s.allocated = s.allocated_small + s.allocated_large + s.allocated_huge;
    s.committed_peak = s.committed_peak.max(s.committed);
    let residency = crate::observe::measure();
    s.resident = residency.resident;
    s.metadata = residency.metadata;
    s.huge_kept = residency.huge_kept;
    s.huge_kept_resident = residency.huge_kept_resident;
    (s.heaps_live, s.heaps_spare) = crate::observe::heap_counts();
    s
}

/// Where the exit report goes: a duplicate of the stderr the process started with,
/// taken when the report is registered, because programs such as coreutils close fd 2
/// in their own `atexit` handler, which runs before ours. -1: fd 2 itself.
static EXIT_REPORT_FD: core::sync::atomic::AtomicI32 = core::sync::atomic::AtomicI32::new(-1);

/// Register the `EBB_SHOW_STATS=1` report at exit.
pub fn register_exit_report() {
    EXIT_REPORT_FD.store(crate::os::dup_stderr_cloexec(), Ordering::Relaxed);
    crate::os::at_exit(print_at_exit);
}

impl Stats {
    /// Write a human-readable report.
    pub fn write_to(&self, w: &mut impl Write) -> fmt::Result {
        writeln!(w, "ebb stats:")?;
        writeln!(
            w,
            "  allocated {} (small {}, large {}, huge {})",
            Bytes(self.allocated),
            Bytes(self.allocated_small),
            Bytes(self.allocated_large),
            Bytes(self.allocated_huge)
        )?;
        writeln!(
            w,
            "  committed {} (at most {}; free, awaiting purge {}; empty pages kept by heaps {}), reserved {}",
            Bytes(self.committed),
            Bytes(self.committed_peak),
            Bytes(self.free_committed),
            Bytes(self.stashed),
            Bytes(self.reserved)
        )?;
        writeln!(
            w,
            "  resident {} (measured; metadata {}), kept huge mappings {} ({} resident)",
            Bytes(self.resident),
            Bytes(self.metadata),
            Bytes(self.huge_kept),
            Bytes(self.huge_kept_resident)
        )?;
        writeln!(
            w,
            "  freed by other threads, not yet taken in: {} blocks, {}",
            self.remote_freed_blocks,
            Bytes(self.remote_freed_bytes)
        )?;
        writeln!(
            w,
            "  heaps {} live, {} spare",
            self.heaps_live, self.heaps_spare
        )?;
        writeln!(
            w,
            "  purged {} in {} calls",
            Bytes(self.purged),
            self.purge_calls
        )?;
        writeln!(
            w,
            "  segments {}, pages {} ({} abandoned), threads {} now / {} ever",
            self.segments, self.pages, self.pages_abandoned, self.threads, self.threads_created
        )?;
        writeln!(
            w,
            "  page events: {} abandoned, {} reclaimed, {} collected",
            self.abandon_events, self.reclaim_events, self.collect_events
        )?;
        writeln!(
            w,
            "  purger: {} wake-ups, {}.{:03} ms of CPU ({}.{:03} ms of it in the kernel); {} decommit system calls",
            self.purger_wakeups,
            self.purger_cpu_ns / 1_000_000,
            self.purger_cpu_ns / 1_000 % 1_000,
            self.purger_sys_ns / 1_000_000,
            self.purger_sys_ns / 1_000 % 1_000,
            self.decommit_calls
        )?;
        writeln!(
            w,
            "  idle heaps taken over: {} of {} attempts ({} heaps read in {} walks); busy heaps swept: {}",
            self.steals, self.steal_attempts, self.idle_walk_visits, self.idle_walks, self.sweeps
        )?;
        writeln!(
            w,
            "  abandoned pages read by the walks for inside purges: {}",
            self.inside_walk_visits
        )?;
        writeln!(
            w,
            "  blocks from shared start pages: {}; 2 MiB units advised for huge pages: {}",
            self.shared_start_blocks, self.dense_huge_units
        )?;
        writeln!(
            w,
            "  large blocks {}, huge blocks {} ({} moved in from free spans, {} from kept huge pages), invalid frees {}",
            self.large_allocs,
            self.huge_allocs,
            Bytes(self.lent_to_huge),
            Bytes(self.kept_moved),
            self.invalid_frees
        )?;
        if self.mappings_counted != 0 {
            writeln!(
                w,
                "  kernel mappings at the last count {}; page moves paused {} times over their budget",
                self.mappings_counted, self.move_pauses
            )?;
        }
        writeln!(
            w,
            "  {:>9} {:>7} {:>12} {:>12}",
            "class", "pages", "live blocks", "live bytes"
        )?;
        for c in self.classes.iter().filter(|c| c.pages > 0) {
            writeln!(
                w,
                "  {:>9} {:>7} {:>12} {:>12}",
                c.block_size,
                c.pages,
                c.live_blocks,
                Bytes(c.live_blocks * c.block_size).to_padded()
            )?;
        }
        Ok(())
    }
}

/// Print a snapshot to stderr.
pub fn print() {
    let mut w = StderrWriter::new();
    let _ = snapshot().write_to(&mut w);
}

/// `atexit` handler for `EBB_SHOW_STATS=1` (text) or `=json` (one JSON line).
pub extern "C" fn print_at_exit() {
    let fd = EXIT_REPORT_FD.load(Ordering::Relaxed);
    let mut w = StderrWriter::to_fd(if fd >= 0 { fd } else { 2 });
    let s = snapshot();
    if crate::options::get().stats_json {
        let _ = s.write_json(&mut w);
        let _ = w.write_char('\n');
    } else {
        let _ = s.write_to(&mut w);
    }
}

#[cfg(feature = "std")]
impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.write_to(f)
    }
}
