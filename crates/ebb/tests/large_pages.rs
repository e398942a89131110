//! `EBB_LARGE_PAGES` (span/large_pages.rs): segments and huge mappings advised
//! `MADV_HUGEPAGE` and 2 MiB aligned, and a purge that leaves a mostly used 2 MiB unit
//! whole while it purges a mostly empty one; with the option off, the purge is today's.
//!
//! ebb is called directly (not as the global allocator); in a workspace build its
//! `override` feature is on (ebb-capi's), so the harness's own mallocs share the arena,
//! but they are small and few. The tests take turns, since the purge and the option
//! are process-wide. They assert which OS pages are resident (`mincore`), never
//! how long anything takes.

use std::sync::{Mutex, MutexGuard};

const MIB: usize = 1 << 20;
const UNIT: usize = 2 * MIB;
static TURN: Mutex<()> = Mutex::new(());

/// Take a turn with the option set to `large_pages`, the purge delay 0 and no
/// background purger (the tests purge with `collect`).
fn turn(large_pages: bool) -> MutexGuard<'static, ()> {
    let guard = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let mut options = ebb::options();
    options.large_pages = large_pages;
    options.dense_huge_pages = false; // on by default; the dense test turns it on
    options.purge_delay_ms = 0;
    options.background = false;
    ebb::set_options(options);
    guard
}

/// For each OS page of `[p, p + len)`: resident?
fn resident(p: *mut u8, len: usize) -> Vec<bool> {
    let page = 4096;
    assert_eq!(p as usize % page, 0);
    let mut out = vec![0u8; len.div_ceil(page)];
    // SAFETY: the range is a live block of ours; `out` has a byte per page.
    let rc = unsafe { libc::mincore(p as *mut libc::c_void, len, out.as_mut_ptr()) };
    assert_eq!(rc, 0, "mincore failed");
    out.iter().map(|b| b & 1 != 0).collect()
}

fn all_resident(p: *mut u8, len: usize) -> bool {
    resident(p, len).iter().all(|&r| r)
}

fn none_resident(p: *mut u8, len: usize) -> bool {
    resident(p, len).iter().all(|&r| !r)
}

/// Free slices just purged, which an allocation made meanwhile by another thread of
/// the test binary (the harness allocates through ebb in a workspace build) may have
/// taken again: at most half of their OS pages resident. (An eighth, a 64 KiB page of
/// blocks in a 512 KiB range, failed once in a full workspace run with 32 of 128
/// pages resident: a 128 KiB block, the size `read_to_string` of `/proc/self/smaps`
/// grows its buffer through in another test.) A purge that did not happen leaves them
/// all resident.
fn purged_but_for_a_new_page(p: *mut u8, len: usize) -> bool {
    let pages = resident(p, len);
    pages.iter().filter(|&&r| r).count() <= pages.len() / 2
}

/// The `/proc/self/smaps` entry of the mapping holding `p`: its start and its lines.
fn mapping_of(p: *const u8) -> (usize, String) {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut current: Option<(usize, usize, String)> = None;
    for line in smaps.lines() {
        let head = line.split_whitespace().next().unwrap_or("");
        if let Some((a, b)) = head.split_once('-') {
            if let (Ok(start), Ok(end)) =
                (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
            {
                if let Some((s, e, text)) = current.take() {
                    if (s..e).contains(&(p as usize)) {
                        return (s, text);
                    }
                }
                current = Some((start, end, String::new()));
                continue;
            }
        }
        if let Some((_, _, text)) = current.as_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    match current {
        Some((s, e, text)) if (s..e).contains(&(p as usize)) => (s, text),
        _ => panic!("no mapping holds {p:p}"),
    }
}

/// True if the mapping holding `p` carries the huge-page advice (`hg` in `VmFlags`).
fn advised(p: *const u8) -> bool {
    let (_, text) = mapping_of(p);
    let flags = text
        .lines()
        .find_map(|l| l.strip_prefix("VmFlags:"))
        .expect("smaps has VmFlags");
    flags.split_whitespace().any(|f| f == "hg")
}

/// A 2 MiB block on a 2 MiB boundary (so it is one unit), every byte written.
fn unit_block() -> *mut u8 {
    let p = ebb::alloc(UNIT, UNIT);
    assert!(!p.is_null());
    assert_eq!(p as usize % UNIT, 0);
    // SAFETY: a live block of UNIT bytes.
    unsafe { std::ptr::write_bytes(p, 0x5a, UNIT) };
    assert!(all_resident(p, UNIT));
    p
}

/// Shrink a large block in place (its tail slices go back to the arena, committed).
fn shrink(p: *mut u8, to: usize) {
    // SAFETY: p is a live block of ours.
    let q = unsafe { ebb::realloc(p, to, UNIT) };
    assert_eq!(q, p, "the shrink was not in place");
}

/// Two units: A keeps 24 of its 32 slices (1.5 MiB), B 10 (640 KiB). Returns them.
fn mostly_used_and_mostly_empty_units() -> (*mut u8, *mut u8) {
    let a = unit_block();
    let b = unit_block();
    shrink(a, UNIT * 3 / 4);
    shrink(b, 1100 * 1024);
    shrink(b, 600 * 1024);
    (a, b)
}

fn free(p: *mut u8) {
    // SAFETY: a live block of ours.
    unsafe { ebb::free(p) };
}

#[test]
fn segments_and_huge_mappings_are_aligned_and_advised() {
    let _turn = turn(true);
    if !thp_in_kernel() {
        eprintln!("skipped: no transparent huge pages in this kernel");
        return;
    }
    // A segment made now, with the option on. (Segments made before may not be
    // advised: in a workspace build `override` is on, and the test harness's own
    // mallocs reach ebb before any test runs.)
    let before = ebb::stats().segments;
    let mut blocks = Vec::new();
    let fresh = loop {
        let p = ebb::alloc(3 * MIB, 8); // big enough to make a segment (4 MiB would not)
        assert!(!p.is_null());
        blocks.push(p);
        if ebb::stats().segments > before {
            break p;
        }
        assert!(blocks.len() < 64, "no new segment was made");
    };
    let (start, _) = mapping_of(fresh);
    assert_eq!(
        start % UNIT,
        0,
        "a segment's mapping starts off a 2 MiB boundary"
    );
    assert!(advised(fresh), "a new segment is not advised MADV_HUGEPAGE");
    ebb::collect(true); // no kept huge mapping: the next one is a fresh reservation
    let huge = ebb::alloc(40 * MIB, 8);
    assert!(!huge.is_null());
    let (start, _) = mapping_of(huge);
    assert_eq!(start % UNIT, 0);
    assert!(advised(huge), "a huge mapping is not advised MADV_HUGEPAGE");
    blocks.push(huge);
    for p in blocks {
        free(p);
    }
}

#[test]
fn purge_keeps_a_mostly_used_unit_whole_and_purges_a_mostly_empty_one() {
    let _turn = turn(true);
    let (a, b) = mostly_used_and_mostly_empty_units();
    ebb::collect(false);
    // A's unit is 3/4 used: its free quarter stays committed, the huge page whole.
    assert!(
        all_resident(a, UNIT),
        "the free tail of a mostly used unit was purged"
    );
    // B's unit is under half used: its free slices go back as before.
    let kept = 640 * 1024;
    assert!(all_resident(b, kept), "live data was purged");
    assert!(
        none_resident(b.wrapping_add(kept), UNIT - kept),
        "the free part of a mostly empty unit stayed resident"
    );
    // A forced purge (`collect(true)`) gives back the kept free slices too. Up to three
    // tries: between the purge and the look, a harness thread's allocation may take the
    // slices again, or khugepaged may collapse the unit (still advised: 3/4 of it is in
    // use) back into a huge page; a purge that does not happen fails every try.
    let tail = a.wrapping_add(UNIT * 3 / 4);
    let purged = (0..3).any(|_| {
        ebb::collect(true);
        purged_but_for_a_new_page(tail, UNIT / 4)
    });
    assert!(
        purged,
        "a forced purge left the free quarter resident: {} of {} OS pages",
        resident(tail, UNIT / 4).iter().filter(|&&r| r).count(),
        UNIT / 4 / 4096
    );
    assert!(all_resident(a, UNIT * 3 / 4));
    // Once a unit's use falls below half, the next purge gives its free slices back.
    free(a);
    let a_again = unit_block();
    shrink(a_again, UNIT * 3 / 4);
    ebb::collect(false);
    assert!(all_resident(a_again, UNIT));
    free(a_again);
    ebb::collect(false);
    assert!(
        none_resident(a_again, UNIT),
        "a wholly free unit stayed resident"
    );
    free(b);
}

#[test]
fn option_off_purges_every_free_slice() {
    let _turn = turn(false);
    let (a, b) = mostly_used_and_mostly_empty_units();
    ebb::collect(false);
    assert!(all_resident(a, UNIT * 3 / 4));
    // (It failed once under load, in a full workspace run: the harness's own
    // allocations may take a purged slice again meanwhile, as in the test above.)
    assert!(
        purged_but_for_a_new_page(a.wrapping_add(UNIT * 3 / 4), UNIT / 4),
        "with the option off a mostly used unit's free slices must be purged"
    );
    assert!(purged_but_for_a_new_page(
        b.wrapping_add(640 * 1024),
        UNIT - 640 * 1024
    ));
    ebb::collect(true); // no kept huge mapping
    let huge = ebb::alloc(40 * MIB, 8);
    assert!(!advised(huge), "advised with the option off");
    free(huge);
    free(a);
    free(b);
}

fn thp_in_kernel() -> bool {
    std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists()
}

/// Dense growth (`EBB_DENSE_HUGE_PAGES`): once one-slice pages fill a unit, the next
/// one is faulted in whole; a span that may leave memory unwritten (a large block, a
/// page of blocks over 4 KiB) is then placed elsewhere, not in that resident unit.
#[test]
fn dense_growth_keeps_sparse_spans_out_of_the_unit_it_faulted_in() {
    let _turn = turn(false);
    if !thp_in_kernel() {
        eprintln!("skipped: no transparent huge pages in this kernel");
        return;
    }
    let mut options = ebb::options();
    options.dense_huge_pages = true;
    // The faulted-in unit is free committed memory: with `turn`'s delay of 0 a purge
    // pass on a slow path may decommit it before it is looked at (seen under load).
    options.purge_delay_ms = 60_000;
    ebb::set_options(options);
    // Past the 32 MiB floor: 40 MiB of 4 KiB blocks (one-slice pages), each written.
    let alloc_small = |blocks: &mut Vec<*mut u8>| {
        let p = ebb::alloc(4096, 8);
        assert!(!p.is_null());
        // SAFETY: a live block of 4 KiB.
        unsafe { std::ptr::write_bytes(p, 0x5a, 4096) };
        blocks.push(p);
    };
    let mut small = Vec::new();
    for _ in 0..10240 {
        alloc_small(&mut small);
    }
    // No free committed slice is left but the unit faulted in below.
    ebb::collect(true);
    // The page just taken ends its unit; the next unit is the one faulted in, wholly
    // free and resident. The harness's own threads allocate through ebb too, and one of
    // their pages may be what made the counter move (seen once in a workspace run at
    // load 5): then the unit after ours is not the one, and the fill goes on.
    let (unit, unit_resident) = loop {
        let before = ebb::stats().dense_huge_units;
        while ebb::stats().dense_huge_units == before {
            alloc_small(&mut small);
            assert!(small.len() < 40_000, "dense growth faulted in no unit");
        }
        let unit = (*small.last().unwrap() as usize & !(UNIT - 1)) + UNIT;
        let unit_resident = all_resident(unit as *mut u8, UNIT);
        if unit_resident || small.len() >= 20_000 {
            break (unit, unit_resident);
        }
    };
    let inside = |p: *mut u8| (unit..unit + UNIT).contains(&(p as usize));
    let large = ebb::alloc(MIB, 8);
    let medium = ebb::alloc(40 * 1024, 8); // a page of 8 slices
    assert!(!large.is_null() && !medium.is_null());
    let (large_inside, medium_inside) = (inside(large), inside(medium));
    // One-slice pages do fill it (16 blocks: a page).
    let before_next = small.len();
    for _ in 0..16 {
        alloc_small(&mut small);
    }
    let small_inside = small[before_next..].iter().any(|&p| inside(p));
    options.dense_huge_pages = false;
    ebb::set_options(options);
    free(large);
    free(medium);
    for p in small {
        free(p);
    }
    ebb::collect(true);
    assert!(
        unit_resident,
        "the unit after the filled one was not faulted in"
    );
    assert!(
        !large_inside,
        "a large block was placed in a unit dense growth faulted in whole"
    );
    assert!(
        !medium_inside,
        "a page of 40 KiB blocks was placed in a unit dense growth faulted in whole"
    );
    assert!(
        small_inside,
        "4 KiB blocks were not placed in the faulted-in unit"
    );
}

/// Past dense growth's 32 MiB floor: 40 MiB of 8 KiB blocks, each written (the caller
/// frees them).
fn past_the_dense_floor() -> Vec<*mut u8> {
    let mut small = Vec::new();
    for _ in 0..5120 {
        let p = ebb::alloc(8192, 8);
        assert!(!p.is_null());
        // SAFETY: a live block of 8 KiB.
        unsafe { std::ptr::write_bytes(p, 0x5a, 8192) };
        small.push(p);
    }
    small
}

/// Dense growth's large blocks: past the 32 MiB floor, the whole units inside a new
/// large block, untouched, are advised `MADV_HUGEPAGE` (their first touch maps a huge
/// page), a partial unit at its start is not, and the advice is taken back when the
/// block is freed (memory reused there by pages, or refaulted after a purge, maps
/// 4 KiB pages again).
#[test]
fn dense_growth_advises_the_whole_units_of_a_large_block_until_it_is_freed() {
    let _turn = turn(false);
    if !thp_in_kernel() {
        eprintln!("skipped: no transparent huge pages in this kernel");
        return;
    }
    let mut options = ebb::options();
    options.dense_huge_pages = true;
    ebb::set_options(options);
    let small = past_the_dense_floor();
    // Every free slice purged: the block's units are untouched when it takes them.
    ebb::collect(true);
    // 6 MiB starting one slice past a unit boundary: units 1 and 2 of it are whole.
    let units_before = ebb::stats().dense_huge_units;
    let block = ebb::alloc(6 * MIB, 64 * 1024);
    assert!(!block.is_null());
    let first_whole = (block as usize + UNIT - 1) & !(UNIT - 1);
    let whole_units = (block as usize + 6 * MIB - first_whole) / UNIT;
    let advised_while_live: Vec<bool> = (0..whole_units)
        .map(|u| advised((first_whole + u * UNIT) as *const u8))
        .collect();
    let start_advised = block as usize != first_whole && advised(block);
    // The unit the block starts in may hold other spans, and dense growth may have
    // advised it for small pages before the block came (a large block lands in such a
    // unit when nothing else has room): advised by the block only if it advised more
    // units than its whole ones (`dense_huge_units` counts what each advice covers).
    let units_advised = ebb::stats().dense_huge_units - units_before;
    let start_advised_by_block = start_advised && units_advised > whole_units as u64;
    free(block);
    let advised_after_free: Vec<bool> = (0..whole_units)
        .map(|u| advised((first_whole + u * UNIT) as *const u8))
        .collect();
    options.dense_huge_pages = false;
    ebb::set_options(options);
    for p in small {
        free(p);
    }
    ebb::collect(true);
    assert!(
        whole_units >= 2,
        "a 6 MiB block holds {whole_units} whole units"
    );
    assert!(
        advised_while_live.iter().all(|&a| a),
        "whole units of a new large block not advised: {advised_while_live:?}"
    );
    assert!(
        !start_advised_by_block,
        "the block's partial first unit was advised ({units_advised} units advised \
         for {whole_units} whole ones)"
    );
    assert!(
        advised_after_free.iter().all(|&a| !a),
        "the advice outlived the block: {advised_after_free:?}"
    );
}

/// Dense growth's huge blocks: past the 32 MiB floor, a new huge block's mapping is
/// advised `MADV_HUGEPAGE` over its whole 2 MiB units (its last partial unit not);
/// with dense growth off, not at all.
#[test]
fn dense_growth_advises_the_whole_units_of_a_huge_block() {
    let _turn = turn(false);
    if !thp_in_kernel() {
        eprintln!("skipped: no transparent huge pages in this kernel");
        return;
    }
    let small = past_the_dense_floor();
    // No kept huge mapping: the next ones are fresh reservations.
    ebb::collect(true);
    // Past LARGE_MAX (16 MiB): a mapping of its own, ending 1 MiB into a unit.
    let size = 24 * MIB + MIB - 200 * 1024;
    let off = ebb::alloc(size, 8);
    assert!(!off.is_null());
    let off_advised = advised(off);
    let mut options = ebb::options();
    options.dense_huge_pages = true;
    ebb::set_options(options);
    let on = ebb::alloc(size, 8);
    assert!(!on.is_null());
    let (start, _) = mapping_of(on);
    let units = (on as usize + size - start) / UNIT;
    let advised_units: Vec<bool> = (0..units)
        .map(|u| advised((start + u * UNIT) as *const u8))
        .collect();
    let tail_advised = advised((on as usize + size - 1) as *const u8);
    options.dense_huge_pages = false;
    ebb::set_options(options);
    free(off);
    free(on);
    for p in small {
        free(p);
    }
    ebb::collect(true);
    assert!(
        !off_advised,
        "a huge block was advised with dense growth off"
    );
    assert_eq!(units, 12, "a mapping of 24.8 MiB holds {units} whole units");
    assert!(
        advised_units.iter().all(|&a| a),
        "whole units of a new huge block not advised: {advised_units:?}"
    );
    assert!(
        !tail_advised,
        "the huge block's partial last unit was advised"
    );
}
