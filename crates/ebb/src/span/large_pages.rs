//! Transparent huge pages (`EBB_LARGE_PAGES=1`): segments asked to be backed by 2 MiB
//! pages, and purges that do not split a huge page that is mostly in use.
//!
//! # Alignment
//! Segments start on 32 MiB boundaries and huge mappings on 32 MiB windows
//! (`segment.rs`, `huge.rs`), so every 2 MiB *unit* of a segment (32 slices) is an
//! aligned huge page: nothing here re-aligns anything. The kernel only backs a whole
//! aligned 2 MiB range inside one mapping with a huge page, so a huge mapping's last
//! partial unit stays in 4 KiB pages.
//!
//! # Advice
//! A new segment (and a new huge mapping) is advised `MADV_HUGEPAGE` whole, once, when
//! it is reserved ([`advise`]): the flag is per mapping in the kernel, so advising each
//! range as it is committed would split ebb's one mapping into thousands (and cost a
//! system call per span). With the kernel in `madvise` mode only advised memory gets
//! huge pages; in `always` mode everything aligned does, advised or not, and the
//! purge rule below is what the option changes.
//!
//! # Purging in 2 MiB units
//! `MADV_DONTNEED` on part of a huge page splits it into 4 KiB pages for good (until
//! khugepaged collapses it again, which it may do in the background). So while a unit
//! is mostly in use (at least [`KEEP_MIN_USED_SLICES`] of its slices are not free) the
//! decommit scan leaves its free slices committed: at most half a unit stays resident
//! unused, and the used part keeps its huge-page TLB entry. A unit whose use falls
//! below that is purged as before (its free runs; a wholly free unit in one call, which
//! gives the huge page back whole). The rule lives in [`kept_units`], which the scan
//! (`decommit.rs`) asks once per segment and lock hold. A kept free slice is not a
//! pending purge: the purger does not wake for it. Its unit is looked at again when a
//! span in it is freed (which schedules a purge), so the scan re-decides exactly when
//! the unit's use can have fallen. `collect(true)` (force) purges kept units too.
//!
//! # Dense growth (`EBB_DENSE_HUGE_PAGES`, on by default; `=0` turns it off)
//! A narrower way to huge pages than `EBB_LARGE_PAGES`: a program that fills segments
//! with small-block pages densely, in address order (a heap built up and kept: an
//! interpreter's hash table of hundreds of thousands of keys, a parsed document).
//! When a small page is taken and the unit holding its last slice has no free slice
//! left, the next unit of the segment, if it is wholly free and was never touched (no
//! slice committed), is faulted in at once as one huge page ([`after_small_span`],
//! `os::populate_huge_pages`: `MADV_HUGEPAGE`, a zero written, `MADV_NOHUGEPAGE`). Its
//! slices then count as free and committed, so the next spans are taken from it first
//! (and the purge gives it back after the delay if they are not); filling it does the
//! same for the one after. Only a process with [`DENSE_MIN_COMMITTED`] (32 MiB)
//! committed in segments does this, and only at the fill front of a heap that fills
//! its pages: the page just taken is a one-slice page (blocks up to 8 KiB), no free
//! slice lies before it in allocation order (`nothing_free_before`), every slice after
//! the next unit is untouched, and three quarters of the unit it fills is in live
//! blocks (`mostly_live`).
//!
//! Fresh units (also dense growth's option, from a lower floor, [`FRESH_MIN_COMMITTED`],
//! 16 MiB, and only while the process has one heap): when a one-slice page is taken in a
//! unit no span holds memory in (every other slice of it free and uncommitted), the
//! unit is advised `MADV_HUGEPAGE` before the page is handed out
//! ([`advise_fresh_unit`]), so the page's first write maps the unit as one huge page.
//! First fit takes such a unit only when no free slice lies before it in any segment,
//! so this is the heap's fill front wherever the fill-front rule above cannot see it:
//! units filled around large blocks and the collector's holes (an interpreter's first
//! segment, filled before the 32 MiB floor), units refilled out of order. Any free of
//! one of its slices advises it `MADV_NOHUGEPAGE` again ([`after_slices_freed`], as
//! for large blocks), so refaults after a purge are 4 KiB pages and khugepaged leaves
//! it alone. The unit is resident whole from its first page on: with one heap that is
//! the fill front's unit plus the untouched tails of the heap's partly filled pages (one
//! per class at most). Spans that may leave part of their memory unwritten (pages of
//! blocks over 8 KiB, large blocks) keep out of an advised unit's free slices while
//! they find room elsewhere ([`exclude_whole_units`], as for dense units): placed there,
//! ninja's current pages of 64-256 KiB blocks, 8-32 slices of which a block or two was
//! written, held 4.6 MiB resident unwritten at its peak. With many heaps it is one
//! partly filled page per class and thread in every unit, and the rule is off: without the one-heap test, mixed-c-rust
//! grew +5.5% from round 5 to 50 at 217 MiB (+20 MiB) and many-threads held 45 KB
//! per idle thread (target 40). Lua at 200,000 keys: page faults 12.9-14.0 k ->
//! 9.3-9.9 k, CPU 0.96 x (docs/REAL-PROGRAMS.md "Fresh units").
//!
//! Large blocks (also dense growth, same option and floor): the units lying whole
//! inside a new large block (or added to one grown in place) that were never touched
//! are advised `MADV_HUGEPAGE`, not faulted in ([`before_large_span_taken`]): the
//! block's first touch of each maps one huge page, and what it never writes stays
//! unmapped but for the unit holding its write front. Any free of its slices advises
//! the unit `MADV_NOHUGEPAGE` again ([`after_slices_freed`]), so pages placed there
//! later and refaults after a purge get 4 KiB pages, as with dense units. (An
//! interpreter's hash tables and arrays: Lua's node arrays of 6-12 MiB, perl's bucket
//! arrays; docs/REAL-PROGRAMS.md "Large blocks".)
//!
//! Huge blocks (same option, same floor): a fresh huge mapping's whole units are
//! advised before its header is written ([`before_huge_block`]); a new segment's unit 0
//! too, past the fresh-unit floor with one heap ([`before_segment_header`]: the header
//! is written at the reservation, so the fresh-unit rule never sees that unit
//! untouched). Lua at 400,000 keys: 16.6 k -> 7.7 k faults (docs/REAL-PROGRAMS.md
//! "progs3").
//!
//! Never advised: memory touched sparsely (a few pages in many segments), memory
//! reused after a purge, which is where everything-advised lost (RSS of small
//! multi-threaded programs, creep: docs/BENCHMARKS.md "Transparent huge pages"). Each part of the rule was measured
//! (docs/REAL-PROGRAMS.md "Dense growth"):
//! - the final `MADV_NOHUGEPAGE`: left advised, khugepaged collapses a unit whole again
//!   after ebb purged parts of it (it fills up to 511 missing 4 KiB pages of 512 by
//!   default), and RSS crept (worker-pool scenario: +7.7% from build 2 to 10, +0.9%
//!   without);
//! - counting the unit committed: units faulted in but passed over for older free
//!   slices were never purged;
//! - large blocks advised, not faulted in: faulting in the untouched units inside a
//!   new large block made a growing `Vec`'s unwritten capacity resident;
//! - the 32 MiB floor: the unit at the fill front, resident whole, added 3-10 MiB to
//!   the speed suite's 7-16 MiB front ends;
//! - only pages of blocks up to 8 KiB in a faulted-in unit ([`fills_densely`],
//!   [`exclude_whole_units`]; the segment's `dense_units` says which units): a page of
//!   384 KiB blocks or a large block placed there made its unwritten part resident
//!   (sleeping-owner-strings: each item's `Vec<String>`, doubled to 384 KiB and
//!   shrunk in place to ~240 KiB, left 19 MiB of unwritten tails resident in all,
//!   1.149 x live against 1.076 without dense growth). Such spans take other free
//!   slices, and a faulted-in unit only when no other room is left.
//! - the fill front and the live quarter: without them, refilling a hole in front of
//!   memory in use faulted in the next unit, which (committed, so taken first) drew
//!   new pages away from purged holes, and 8 threads' partly used pages of many
//!   classes left each unit about 2 MiB resident (mixed-c-rust +6.5% RSS from round 5
//!   to 50 against +2.5% off; with both +2.6% against +4.1% off).
//!
//! A purge of part of a huge page splits it, as with any page.
//!
//! The insides of free blocks (`Page::purge_free_blocks`) are purged as before: they
//! are purged only for idle owners and unclaimed pages, where giving memory back
//! matters more than the TLB.

use crate::counters::COUNTERS;
use crate::os;
use crate::span::bitmap::Bitmap512;
use crate::span::segment::{Segment, SLICES_PER_SEGMENT, SLICE_SIZE};
use core::sync::atomic::Ordering;

/// Slices in a huge page (32: 2 MiB of 64 KiB slices).
pub const UNIT_SLICES: usize = if os::HUGE_PAGE_SIZE == 0 {
    SLICES_PER_SEGMENT
} else {
    os::HUGE_PAGE_SIZE / SLICE_SIZE
};
/// Units per segment (16).
pub const UNITS_PER_SEGMENT: usize = SLICES_PER_SEGMENT / UNIT_SLICES;
/// A unit with at least this many slices in use (not free) keeps its free slices
/// committed (half: the most the rule leaves resident unused is what is in use).
pub const KEEP_MIN_USED_SLICES: usize = UNIT_SLICES / 2;

const _: () = assert!(UNIT_SLICES <= 64 && 64 % UNIT_SLICES == 0);
const _: () = assert!(UNITS_PER_SEGMENT <= 16);
const _: () = assert!(os::HUGE_PAGE_SIZE == 0 || UNIT_SLICES * SLICE_SIZE == os::HUGE_PAGE_SIZE);

/// True if the option is on and the target has huge pages.
#[inline]
pub fn enabled() -> bool {
    os::HUGE_PAGE_SIZE != 0 && crate::options::get().large_pages
}

/// Advise a fresh reservation `MADV_HUGEPAGE` if the option is on. A refusal is not an
/// error: the memory works, in 4 KiB pages.
///
/// # Safety
/// `[ptr, ptr + size)` must be a reservation of the OS layer, page aligned.
pub unsafe fn advise(ptr: *mut u8, size: usize) {
    if enabled() {
        // SAFETY: per the contract.
        let _ = unsafe { os::advise_huge_pages(ptr, size) };
    }
}

/// Dense growth starts once this much of the segments is committed: below it, the
/// unit at the fill front (resident whole, up to 2 MiB more than in use) would add
/// 5-30% to a small program's RSS (the speed suite's compiler front ends and
/// typechecker at 7-16 MiB grew by 3-10 MiB), and a small heap has few TLB misses.
pub const DENSE_MIN_COMMITTED: usize = 32 << 20;

/// Fresh units are advised once this much of the segments is committed: a program
/// below it keeps 4 KiB pages everywhere (a small heap has few TLB misses, and the
/// fill front's unit is resident whole: with 8 MiB the speed suite's `frontend`, 7.4
/// MiB peak RSS, grew to 8.9). Lower than [`DENSE_MIN_COMMITTED`] because Lua's and
/// perl's first segment fills below that one (Lua at 200,000 keys: 9.3 k faults with
/// 16 MiB or 8 MiB, 12.4 k with dense growth alone).
pub const FRESH_MIN_COMMITTED: usize = 16 << 20;

/// Dense growth's option applies: the target has huge pages, the option is on, and
/// `EBB_LARGE_PAGES` (which advises everything) is off.
fn dense_option() -> bool {
    // The secure build keeps guard pages in free slices: no huge page fits there.
    !cfg!(feature = "secure")
        && os::HUGE_PAGE_SIZE != 0
        && crate::options::get().dense_huge_pages
        && !enabled()
}

/// Dense growth applies: [`dense_option`], and the process is past
/// [`DENSE_MIN_COMMITTED`].
fn dense_active() -> bool {
    dense_option() && COUNTERS.committed.load(Ordering::Relaxed) >= DENSE_MIN_COMMITTED as u64
}

/// Dense growth: `last` is the last slice of a small-block page just taken from
/// `segment` (span lock held). Advises the page's unit if it is fresh
/// ([`advise_fresh_unit`]); faults the next unit in as one huge page if
/// [`dense_next_unit`] says so, and returns it: the caller counts its slices as
/// committed and free (so the next spans are taken from it first, and the purge
/// gives it back if they are not, like any free committed slice).
pub fn after_small_span(segment: &mut Segment, last: usize) -> Option<usize> {
    if !dense_option() {
        return None;
    }
    let committed = COUNTERS.committed.load(Ordering::Relaxed);
    if committed >= FRESH_MIN_COMMITTED as u64 {
        advise_fresh_unit(segment, last);
    }
    if committed < DENSE_MIN_COMMITTED as u64 {
        return None;
    }
    let unit = dense_next_unit(&segment.free_slices, &segment.committed_slices, last)?;
    if !nothing_free_before(segment, last) || !mostly_live(segment, last) {
        return None;
    }
    let start = segment.slice_start(unit * UNIT_SLICES);
    // SAFETY: the unit lies inside the segment's reservation, is 2 MiB aligned
    // (segments are 32 MiB aligned), free and never touched (span lock held, so
    // nobody takes it meanwhile); a refusal leaves it in 4 KiB pages.
    if !unsafe { os::populate_huge_pages(start, UNIT_SLICES * SLICE_SIZE) } {
        return None;
    }
    COUNTERS.dense_huge_units.fetch_add(1, Ordering::Relaxed);
    segment.dense_units |= 1 << unit;
    Some(unit)
}

/// Fresh units: `slice` of `segment` was just taken for a one-slice page (span lock
/// held, marked committed, its memory not yet handed out). If every other slice of its
/// unit is free and was never touched (or was purged), the unit is advised
/// `MADV_HUGEPAGE`, so the page's first write maps it as one huge page, and marked in
/// `advised_units`, so the first free of any of its slices takes the advice back.
/// True if it advised the unit.
pub fn advise_fresh_unit(segment: &mut Segment, slice: usize) -> bool {
    let unit = slice / UNIT_SLICES;
    let first = unit * UNIT_SLICES;
    if unit == 0
        || (segment.advised_units | segment.dense_units) & (1 << unit) != 0
        || !fresh_but(
            &segment.free_slices,
            &segment.committed_slices,
            first,
            slice,
        )
        // One heap: see the module doc, "Fresh units".
        || COUNTERS.threads.load(Ordering::Relaxed) > 1
    {
        return false;
    }
    let start = segment.slice_start(first);
    // SAFETY: a whole unit inside the segment's reservation, 2 MiB aligned (segments are
    // 32 MiB aligned); advice only.
    if !unsafe { os::advise_huge_pages(start, UNIT_SLICES * SLICE_SIZE) } {
        return false;
    }
    segment.advised_units |= 1 << unit;
    COUNTERS.dense_huge_units.fetch_add(1, Ordering::Relaxed);
    true
}

/// Fresh units, a new segment's unit 0: a segment is being reserved at `base` (nothing
/// written yet, not even its header). Past [`FRESH_MIN_COMMITTED`], with one heap, unit
/// 0 is advised `MADV_HUGEPAGE`, so the header's first write maps it as one huge page;
/// returns the segment's `advised_units` (bit 0 if advised), so the first free of one of
/// its slices takes the advice back, as for [`advise_fresh_unit`]. The header is
/// written before any page is taken, so [`advise_fresh_unit`] can never see unit 0
/// untouched: without this, every segment's unit 0 (the descriptors' 128 KiB and the
/// first 30 pages taken there) stayed in 4 KiB pages, ~500 faults per segment, a
/// third of what Lua at 400,000 keys still faulted in 4 KiB pages. What it costs: the
/// unit is resident whole from the reservation on, while first fit fills slices 2-31
/// before any other slice of the segment, so at most the newest segment's unit holds
/// up to 1.9 MiB not yet used.
///
/// # Safety
/// `base` must be a fresh segment reservation of the OS layer (32 MiB aligned).
pub unsafe fn before_segment_header(base: *mut u8) -> u16 {
    if !dense_option()
        || COUNTERS.committed.load(Ordering::Relaxed) < FRESH_MIN_COMMITTED as u64
        // One heap: see the module doc, "Fresh units".
        || COUNTERS.threads.load(Ordering::Relaxed) > 1
    {
        return 0;
    }
    // SAFETY: per the contract: unit 0 lies inside the reservation, 2 MiB aligned;
    // advice only.
    if !unsafe { os::advise_huge_pages(base, UNIT_SLICES * SLICE_SIZE) } {
        return 0;
    }
    COUNTERS.dense_huge_units.fetch_add(1, Ordering::Relaxed);
    1
}

/// True if every slice of the unit starting at slice `first` but `slice` is free and
/// uncommitted (a unit no span holds memory in), and `slice` is taken and committed.
pub fn fresh_but(free: &Bitmap512, committed: &Bitmap512, first: usize, slice: usize) -> bool {
    let end = first + UNIT_SLICES;
    !free.get(slice)
        && committed.get(slice)
        && free.all(first, slice - first, true)
        && free.all(slice + 1, end - slice - 1, true)
        && committed.all(first, slice - first, false)
        && committed.all(slice + 1, end - slice - 1, false)
}

/// True if a span of `count` slices, a page of blocks if `small`, may be placed in a
/// unit dense growth faulted in: a page of blocks of at most 8 KiB (one slice up to 4
/// KiB, four above, or for a class replaced at random). Every 4 KiB of such a page
/// holds the start of a block or lies inside a block of at most two OS pages, so a
/// page whose blocks are handed out is written nearly whole; a bigger block (a page
/// of 384 KiB blocks, a large block) may be written only in part (a `Vec` grown by
/// doubling and shrunk in place keeps its unwritten tail), and inside a huge page that
/// tail would be resident. (One-slice pages only until the 4-8 KiB classes moved to
/// four: sqlite's page cache, 4,232-byte blocks, then lost its huge pages, +5% CPU.)
#[inline]
pub fn fills_densely(small: bool, count: usize) -> bool {
    small && count <= SMALL_BLOCK_PAGE_SLICES_MAX
}

/// The most slices of a page of blocks up to `size_class::SMALL_PAGE_BLOCK_MAX`: pages
/// of bigger blocks are longer (8 slices and up).
const SMALL_BLOCK_PAGE_SLICES_MAX: usize = crate::size_class::SPREAD_PAGE_SLICES;
const _: () = {
    use crate::size_class::{class_of, page_slices, SMALL_PAGE_BLOCK_MAX};
    assert!(page_slices(class_of(SMALL_PAGE_BLOCK_MAX)) <= SMALL_BLOCK_PAGE_SLICES_MAX);
    assert!(page_slices(class_of(SMALL_PAGE_BLOCK_MAX) + 1) > SMALL_BLOCK_PAGE_SLICES_MAX);
};

/// Clear from `runs` (free slices of `segment`) the ones in units resident whole: those
/// dense growth faulted in that are still committed, and every free slice of a unit
/// advised for huge pages ([`advise_fresh_unit`], [`before_segment_header`]: the first
/// write to the unit mapped all of it, its free slices too, though they count as
/// uncommitted). The span being placed may not fill them (see [`fills_densely`]), and
/// they are resident whether it does or not. (Fresh units alone: ninja's empty current
/// pages of 64-256 KiB blocks, pages of 8-32 slices of which a block or two was ever
/// written, sat in advised units and held 5.6 MiB resident against 1.0 without the
/// advice, peak RSS 75.5 MB against 70.8: docs/REAL-PROGRAMS.md "Fresh units and pages
/// of big blocks".)
pub fn exclude_whole_units(runs: &mut Bitmap512, segment: &Segment) {
    let mut units = segment.dense_units | segment.advised_units;
    while units != 0 {
        let unit = units.trailing_zeros() as usize;
        units &= units - 1;
        let first = unit * UNIT_SLICES;
        if segment.advised_units & (1 << unit) != 0 {
            runs.assign_range(first, UNIT_SLICES, false);
            continue;
        }
        for slice in first..first + UNIT_SLICES {
            if segment.committed_slices.get(slice) {
                runs.assign_range(slice, 1, false);
            }
        }
    }
}

/// True if `segment` has units [`exclude_whole_units`] keeps spans out of.
#[inline]
pub fn has_whole_units(segment: &Segment) -> bool {
    segment.dense_units | segment.advised_units != 0
}

/// Slices `index..index + count` of `segment` are being taken for a span (span lock
/// held, before they are marked committed): a dense unit with one of them uncommitted
/// was purged in part, so it is split into 4 KiB pages and no longer kept from
/// sparse spans.
pub fn before_span_taken(segment: &mut Segment, index: usize, count: usize) {
    if segment.dense_units == 0 {
        return;
    }
    for unit in index / UNIT_SLICES..=(index + count - 1) / UNIT_SLICES {
        let (from, to) = (
            (unit * UNIT_SLICES).max(index),
            ((unit + 1) * UNIT_SLICES).min(index + count),
        );
        if !segment.committed_slices.all(from, to - from, true) {
            segment.dense_units &= !(1 << unit);
        }
    }
}

/// Large blocks (dense growth's other half): slices `index..index + count` of
/// `segment` are being taken for a large block (span lock held, before they are marked
/// committed; for a block grown in place, the whole new span). Every unit wholly inside
/// it that was never touched (no slice committed) is advised `MADV_HUGEPAGE`, so its
/// first touch maps one huge page; partly touched units and the block's partial units
/// at either end stay in 4 KiB pages. A block written only in part (a growing array's
/// spare capacity) has resident what it touched, rounded up to 2 MiB: at most one
/// unit's worth more per block, and only past [`DENSE_MIN_COMMITTED`].
#[inline(always)]
pub fn before_large_span_taken(segment: &mut Segment, index: usize, count: usize) {
    // The floor first: the one test a process below it pays per large block.
    if COUNTERS.committed.load(Ordering::Relaxed) >= DENSE_MIN_COMMITTED as u64 {
        advise_large_units(segment, index, count);
    }
}

/// [`before_large_span_taken`] past the floor.
#[inline(never)]
fn advise_large_units(segment: &mut Segment, index: usize, count: usize) {
    if !dense_active() {
        return;
    }
    let first = index.div_ceil(UNIT_SLICES);
    let end = (index + count) / UNIT_SLICES;
    let mut unit = first;
    while unit < end {
        // A run of consecutive units to advise in one call (one VMA split, not one per unit).
        let mut run_end = unit;
        while run_end < end
            && segment.advised_units & (1 << run_end) == 0
            && segment
                .committed_slices
                .all(run_end * UNIT_SLICES, UNIT_SLICES, false)
        {
            run_end += 1;
        }
        if run_end > unit {
            let start = segment.slice_start(unit * UNIT_SLICES);
            // SAFETY: whole units inside the segment's reservation, 2 MiB aligned
            // (segments are 32 MiB aligned); advice only.
            if unsafe { os::advise_huge_pages(start, (run_end - unit) * UNIT_SLICES * SLICE_SIZE) }
            {
                for u in unit..run_end {
                    segment.advised_units |= 1 << u;
                }
                COUNTERS
                    .dense_huge_units
                    .fetch_add((run_end - unit) as u64, Ordering::Relaxed);
            }
            unit = run_end;
        } else {
            unit += 1;
        }
    }
}

/// Huge blocks (dense growth's third part): a fresh mapping of `mapped` bytes at `base`
/// (32 MiB aligned, nothing written yet, not even its header) is about to hold one
/// block. Past [`DENSE_MIN_COMMITTED`] its whole 2 MiB units are advised
/// `MADV_HUGEPAGE` in one call, so each one's first touch maps one huge page: the
/// rule large blocks in segments follow, for the blocks that outgrew them. (An
/// interpreter's hash table of a few hundred thousand keys is a 6-12 MiB array that
/// finds no room in a segment and gets a mapping of its own; read at random for the
/// rest of the run, it is where 4 KiB pages cost the most TLB misses: Lua at 200,000
/// keys faulted 1.5 k times in one.) Unit 0 holds the header and the block's first
/// 1.9 MiB: advised too, since a block is written from its start; what the block
/// never writes there is resident, at most one unit per block, as for a large block's
/// write front. The mapping's last partial unit stays in 4 KiB pages (the kernel maps
/// huge pages only over whole aligned units of one mapping). Nothing is taken back:
/// the mapping is the block's alone and is unmapped or kept whole when it is freed.
/// Kept pages reused later are already resident.
///
/// # Safety
/// `[base, base + mapped)` must be a fresh reservation of the OS layer, 2 MiB aligned.
pub unsafe fn before_huge_block(base: *mut u8, mapped: usize) {
    // The floor first: the one test a process below it pays per huge block.
    if COUNTERS.committed.load(Ordering::Relaxed) < DENSE_MIN_COMMITTED as u64 || !dense_option() {
        return;
    }
    let units = mapped / (UNIT_SLICES * SLICE_SIZE);
    // SAFETY: per the contract: whole aligned units inside the reservation; advice only.
    if units != 0 && unsafe { os::advise_huge_pages(base, units * UNIT_SLICES * SLICE_SIZE) } {
        COUNTERS
            .dense_huge_units
            .fetch_add(units as u64, Ordering::Relaxed);
    }
}

/// Slices `index..index + count` of `segment` are freed (span lock held): every unit
/// [`before_large_span_taken`] or [`advise_fresh_unit`] advised that they touch is advised `MADV_NOHUGEPAGE`
/// again, so memory reused there by pages (and refaulted after a purge) maps 4 KiB
/// pages and khugepaged does not fill it back up; the huge pages already mapped stay.
#[inline(always)]
pub fn after_slices_freed(segment: &mut Segment, index: usize, count: usize) {
    if segment.advised_units != 0 {
        unadvise_freed_units(segment, index, count);
    }
}

/// [`after_slices_freed`] for a segment with advised units (out of line: a free of
/// a span pays one test of `advised_units` when it has none).
#[cold]
#[inline(never)]
fn unadvise_freed_units(segment: &mut Segment, index: usize, count: usize) {
    let first = index / UNIT_SLICES;
    let last = (index + count - 1) / UNIT_SLICES;
    for unit in first..=last {
        if segment.advised_units & (1 << unit) != 0 {
            segment.advised_units &= !(1 << unit);
            let start = segment.slice_start(unit * UNIT_SLICES);
            // SAFETY: a whole unit inside the segment's reservation; advice only.
            let _ = unsafe { os::unadvise_huge_pages(start, UNIT_SLICES * SLICE_SIZE) };
        }
    }
}

/// True if no slice is free before slice `last` of `segment` in the order allocation
/// takes free runs (segment order, then slice order): the heap is growing at its fill
/// front, not refilling holes. Without this a unit faulted in at the front of one
/// segment, taken first because it is committed, drew new pages away from purged holes
/// elsewhere, and the heap grew by a unit every few rounds of a churning program
/// (mixed-c-rust: +6.5% RSS from round 5 to 50 against +2.5% without dense growth).
fn nothing_free_before(segment: &Segment, last: usize) -> bool {
    if segment.free_slices.next(0, true) < last {
        return false;
    }
    for seg in crate::span::arena::segments() {
        if core::ptr::eq(seg, segment) {
            return true;
        }
        // SAFETY: segments are never unmapped; `free_count` is read under the span
        // lock the caller holds.
        if unsafe { (*seg).free_count } != 0 {
            return false;
        }
    }
    true
}

/// True if the blocks handed out in the unit holding slice `last` (a page just taken,
/// which is left out, as are the segment's header slices) fill at least
/// three quarters of it: its pages were filled before new ones were taken. Pages
/// opened by many threads for many classes at once are each used in part, and in a
/// huge page their unused parts would be resident (mixed-c-rust: a unit faulted in at
/// each step of the fill front stayed resident at about 2 MiB, where 4 KiB pages
/// made resident only what the blocks touched).
fn mostly_live(segment: &Segment, last: usize) -> bool {
    let unit = last / UNIT_SLICES;
    let first = (unit * UNIT_SLICES).max(crate::span::segment::HEADER_SLICES);
    let new_page =
        segment.span_page[last].load(Ordering::Relaxed) as *const crate::span::page::Page;
    let mut live = 0usize;
    let mut counted = 0usize;
    let mut i = first;
    while i < (unit + 1) * UNIT_SLICES {
        let page = &segment.pages[i];
        let slices = (page.slice_count as usize).max(1);
        if !core::ptr::eq(page, new_page) {
            live += page.used() as usize * page.block_size.load(Ordering::Relaxed);
            counted += slices.min((unit + 1) * UNIT_SLICES - i);
        }
        i += slices;
    }
    live * DENSE_MIN_LIVE_DEN >= counted * SLICE_SIZE * DENSE_MIN_LIVE_NUM
}

/// [`mostly_live`]'s bound: three quarters of the unit in live blocks.
const DENSE_MIN_LIVE_NUM: usize = 3;
const DENSE_MIN_LIVE_DEN: usize = 4;

/// The unit to advise after a small page ending at slice `last` was taken: the next
/// one, if `last`'s unit has no free slice and the next is wholly free and was never
/// touched (no committed slice), so its first touch can map a huge page.
pub fn dense_next_unit(free: &Bitmap512, committed: &Bitmap512, last: usize) -> Option<usize> {
    let unit = last / UNIT_SLICES;
    let next = unit + 1;
    if next >= UNITS_PER_SEGMENT {
        return None;
    }
    let full = free.all(unit * UNIT_SLICES, UNIT_SLICES, false);
    // Untouched up to the segment's end: `unit` is the fill front, not a hole being
    // filled again in front of memory still in use.
    let untouched = free.all(next * UNIT_SLICES, UNIT_SLICES, true)
        && committed.all(
            next * UNIT_SLICES,
            SLICES_PER_SEGMENT - next * UNIT_SLICES,
            false,
        );
    (full && untouched).then_some(next)
}

/// Bit `u` set: unit `u` of a segment whose free slices are `free` is mostly in use,
/// so the (unforced) purge leaves its free slices alone. 0 when the option is off.
pub fn kept_units(free: &Bitmap512) -> u16 {
    if !enabled() {
        return 0;
    }
    kept_units_of(free)
}

/// `kept_units` without the option test.
fn kept_units_of(free: &Bitmap512) -> u16 {
    let mut kept = 0u16;
    for unit in 0..UNITS_PER_SEGMENT {
        let first = unit * UNIT_SLICES;
        let word = free.word(first / 64) >> (first % 64);
        let free_slices = if UNIT_SLICES == 64 {
            word.count_ones() as usize
        } else {
            (word & ((1u64 << UNIT_SLICES) - 1)).count_ones() as usize
        };
        if UNIT_SLICES - free_slices >= KEEP_MIN_USED_SLICES {
            kept |= 1 << unit;
        }
    }
    kept
}

/// The slices of bitmap word `word` (slices `64 * word ..`) that lie in kept units.
#[inline]
pub fn kept_mask(kept: u16, word: usize) -> u64 {
    if kept == 0 {
        return 0;
    }
    let mut mask = 0u64;
    for slot in 0..64 / UNIT_SLICES {
        let unit = word * 64 / UNIT_SLICES + slot;
        if kept & (1 << unit) != 0 {
            mask |= (if UNIT_SLICES == 64 {
                u64::MAX
            } else {
                (1u64 << UNIT_SLICES) - 1
            }) << (slot * UNIT_SLICES);
        }
    }
    mask
}

/// True if slice `index` lies in a kept unit.
#[inline]
pub fn is_kept(kept: u16, index: usize) -> bool {
    kept & (1 << (index / UNIT_SLICES)) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_mostly_used_are_kept() {
        assert_eq!(UNIT_SLICES, 32);
        let mut free = Bitmap512::new();
        // Unit 0: all free. Unit 1: 8 free (24 used): kept. Unit 2: 17 free (15 used):
        // purged. Unit 3: 16 free (16 used): kept. Units 4..: none free: kept.
        free.assign_range(0, 32, true);
        free.assign_range(40, 8, true);
        free.assign_range(64, 17, true);
        free.assign_range(96 + 3, 16, true);
        let kept = kept_units_of(&free);
        assert_eq!(kept & 0xf, 0b1010);
        assert_eq!(kept >> 4, 0xfff);
        assert_eq!(kept_mask(kept, 0), 0xffff_ffff_0000_0000);
        assert_eq!(kept_mask(kept, 1), 0xffff_ffff_0000_0000);
        assert_eq!(kept_mask(kept, 2), u64::MAX);
        assert_eq!(kept_mask(0, 2), 0);
        assert!(is_kept(kept, 63) && !is_kept(kept, 64) && is_kept(kept, 96));
    }

    #[test]
    fn a_fresh_unit_holds_nothing_but_the_page_just_taken() {
        let mut free = Bitmap512::new();
        let mut committed = Bitmap512::new();
        // Unit 2 (slices 64..96), untouched; a page takes slice 70.
        free.assign_range(64, UNIT_SLICES, true);
        free.assign_range(70, 1, false);
        committed.assign_range(70, 1, true);
        assert!(fresh_but(&free, &committed, 64, 70));
        // At either end of the unit too.
        for at in [64, 95] {
            let mut f = Bitmap512::new();
            let mut c = Bitmap512::new();
            f.assign_range(64, UNIT_SLICES, true);
            f.assign_range(at, 1, false);
            c.assign_range(at, 1, true);
            assert!(fresh_but(&f, &c, 64, at), "slice {at}");
        }
        // Another slice committed (touched before, free again): not fresh.
        committed.assign_range(90, 1, true);
        assert!(!fresh_but(&free, &committed, 64, 70));
        committed.assign_range(90, 1, false);
        // Another span in the unit (not free, not committed: a run being purged): not fresh.
        free.assign_range(65, 1, false);
        assert!(!fresh_but(&free, &committed, 64, 70));
        free.assign_range(65, 1, true);
        // The neighbours' state does not count.
        committed.assign_range(63, 1, true);
        committed.assign_range(96, 1, true);
        assert!(fresh_but(&free, &committed, 64, 70));
    }

    #[test]
    fn dense_growth_advises_the_next_untouched_unit() {
        // A fresh segment: header slices 0..2 used, the rest free and untouched.
        let mut free = Bitmap512::new();
        let mut committed = Bitmap512::new();
        free.assign_range(2, SLICES_PER_SEGMENT - 2, true);
        committed.assign_range(0, 2, true);
        let take = |free: &mut Bitmap512, committed: &mut Bitmap512, at: usize| {
            free.assign_range(at, 1, false);
            committed.assign_range(at, 1, true);
            dense_next_unit(free, committed, at)
        };
        // Unit 0 filling: nothing until its last slice is taken.
        for at in 2..31 {
            assert_eq!(take(&mut free, &mut committed, at), None, "slice {at}");
        }
        assert_eq!(take(&mut free, &mut committed, 31), Some(1));
        // Unit 1 fills next; its first page does not re-advise it (it is not full).
        assert_eq!(take(&mut free, &mut committed, 32), None);
        for at in 33..63 {
            assert_eq!(take(&mut free, &mut committed, at), None, "slice {at}");
        }
        assert_eq!(take(&mut free, &mut committed, 63), Some(2));
        // A unit touched before (one slice committed, now free again) is not advised:
        // its 4 KiB pages are mapped already, and a sparse reuse is no sign of growth.
        committed.assign_range(64 + 5, 1, true);
        free.assign_range(63, 1, true);
        assert_eq!(take(&mut free, &mut committed, 63), None);
        // Nor is a unit with a span in it, nor anything past the last unit.
        committed.assign_range(64 + 5, 1, false);
        free.assign_range(64 + 7, 1, false);
        free.assign_range(63, 1, true);
        assert_eq!(take(&mut free, &mut committed, 63), None);
        assert_eq!(
            dense_next_unit(&Bitmap512::new(), &committed, SLICES_PER_SEGMENT - 1),
            None
        );
        free.assign_range(64 + 7, 1, true);
        // A unit filled again in front of one still touched further on is a hole
        // being refilled, not the fill front: nothing is faulted in.
        committed.assign_range(SLICES_PER_SEGMENT - 1, 1, true);
        assert_eq!(take(&mut free, &mut committed, 63), None);
        committed.assign_range(SLICES_PER_SEGMENT - 1, 1, false);
        free.assign_range(63, 1, true);
        assert_eq!(take(&mut free, &mut committed, 63), Some(2));
        // A hole left in a unit keeps it from counting as full.
        free.assign_range(63, 1, true);
        free.assign_range(40, 1, true);
        assert_eq!(take(&mut free, &mut committed, 63), None);
    }
}
