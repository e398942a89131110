//! Fresh units (span/large_pages.rs, dense growth's option): past a 16 MiB floor, in a
//! process with one heap, a one-slice page taken in a 2 MiB unit no span has touched
//! advises that unit `MADV_HUGEPAGE` (its first write maps one huge page), and the
//! advice is taken back once any of its slices is freed; with a second thread's heap
//! live, no unit is advised. A test binary of its own without the test harness
//! (`harness = false` in Cargo.toml): the harness runs tests on threads of their own,
//! so the process would never have one heap; and `EBB_LARGE_PAGES`, which advises
//! whole segments, is never turned on here, so an advised mapping in a segment can
//! only come from this rule (no large block is allocated). It asserts which mappings
//! carry the advice (`/proc/self/smaps`), never timings.

const UNIT: usize = 2 << 20;
/// The largest block of one-slice pages (`size_class::ONE_SLICE_BLOCK_MAX`): the rule is
/// theirs.
const BLOCK: usize = 4096;
/// `large_pages::FRESH_MIN_COMMITTED`.
const FLOOR: u64 = 16 << 20;

fn thp_in_kernel() -> bool {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .map(|mode| !mode.contains("[never]"))
        .unwrap_or(false)
}

/// The `VmFlags` of the mapping holding `p` carry `hg` (`MADV_HUGEPAGE`).
fn advised(p: *const u8) -> bool {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut inside = false;
    for line in smaps.lines() {
        let head = line.split_whitespace().next().unwrap_or("");
        if let Some((a, b)) = head.split_once('-') {
            if let (Ok(start), Ok(end)) =
                (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
            {
                inside = (start..end).contains(&(p as usize));
                continue;
            }
        }
        if inside {
            if let Some(flags) = line.strip_prefix("VmFlags:") {
                return flags.split_whitespace().any(|f| f == "hg");
            }
        }
    }
    panic!("no mapping holds {p:p}");
}

fn alloc_written() -> *mut u8 {
    let p = ebb::alloc(BLOCK, 8);
    assert!(!p.is_null());
    // SAFETY: a live block of BLOCK bytes.
    unsafe { std::ptr::write_bytes(p, 0x5a, BLOCK) };
    p
}

/// Allocate 4 KiB blocks (one-slice pages) into `blocks` until one lands in an advised
/// mapping past the floor, looking once per unit the fill front enters; at most
/// `limit` blocks. Returns that block.
fn fill_until_advised(blocks: &mut Vec<*mut u8>, limit: usize) -> Option<*mut u8> {
    let mut last_unit = 0;
    for _ in 0..limit {
        let p = alloc_written();
        blocks.push(p);
        let unit = p as usize / UNIT;
        if unit != last_unit {
            last_unit = unit;
            if ebb::stats().committed >= FLOOR && advised(p) {
                return Some(p);
            }
        }
    }
    None
}

fn main() {
    if !thp_in_kernel() {
        eprintln!("skipped: no transparent huge pages in this kernel");
        return;
    }
    fresh_units_are_advised_past_the_floor_until_a_slice_of_them_is_freed();
    a_new_segments_first_unit_is_advised_before_its_header_is_written();
    pages_of_big_blocks_and_large_blocks_keep_out_of_advised_units();
    no_fresh_unit_is_advised_while_two_heaps_live();
    println!("fresh_units: 4 tests passed");
}

fn fresh_units_are_advised_past_the_floor_until_a_slice_of_them_is_freed() {
    let mut options = ebb::options();
    options.large_pages = false;
    options.dense_huge_pages = true;
    // Nothing purged behind the test's back: free slices stay where they are.
    options.purge_delay_ms = 60_000;
    options.background = false;
    ebb::set_options(options);
    let mut blocks = vec![alloc_written()];
    // Below the floor: the fresh process has a few MiB committed at most.
    assert!(ebb::stats().committed < FLOOR);
    assert_eq!(
        ebb::stats().threads,
        1,
        "this test needs a process of one heap"
    );
    let below_floor = !advised(blocks[0]);
    // Past it (up to 48 MiB of 4 KiB blocks).
    let found = fill_until_advised(&mut blocks, 12000);
    for &p in &blocks {
        // SAFETY: live blocks of ours.
        unsafe { ebb::free(p) };
    }
    // Empty pages go back to the arena: their slices are freed.
    ebb::collect(true);
    let p = found.expect("no unit entered past the floor was advised for huge pages");
    assert!(below_floor, "a unit was advised below the floor");
    assert!(
        !advised(p),
        "the advice outlived the unit's pages (its slices were freed)"
    );
}

/// Past the floor, a segment reserved with one heap has its unit 0 (the header and
/// the first pages placed after it) advised: the header is written at the reservation,
/// so the fresh-unit rule would never find that unit untouched.
fn a_new_segments_first_unit_is_advised_before_its_header_is_written() {
    const SEGMENT: usize = 32 << 20;
    let mut blocks = Vec::new();
    // Past the floor first, then on until a block lands in a segment made past it.
    let mut segments = u64::MAX;
    let mut in_new_segment = None;
    for _ in 0..12_000 {
        let p = alloc_written();
        blocks.push(p);
        let stats = ebb::stats();
        if segments == u64::MAX && stats.committed >= FLOOR {
            segments = stats.segments;
        } else if stats.segments > segments {
            in_new_segment = Some(p);
            break;
        }
    }
    let p = in_new_segment.expect("no segment was reserved past the floor");
    let header = (p as usize & !(SEGMENT - 1)) as *const u8;
    let (header_advised, block_advised) = (advised(header), advised(p));
    let block_unit = (p as usize - header as usize) / UNIT;
    for &p in &blocks {
        // SAFETY: live blocks of ours.
        unsafe { ebb::free(p) };
    }
    ebb::collect(true);
    assert_eq!(
        block_unit, 0,
        "the new segment's first page is not in unit 0"
    );
    assert!(header_advised, "a new segment's unit 0 was not advised");
    assert!(
        block_advised,
        "the page after the header is not in the advised unit"
    );
    assert!(
        !advised(header),
        "the advice outlived the unit's pages (its slices were freed)"
    );
}

/// An advised unit is resident whole from its first page's write on, its free slices
/// too: a page of big blocks (written a block at a time) or a large block (a `Vec`'s
/// unwritten capacity) placed there would have its unwritten part resident. They go
/// elsewhere while there is room, and the unit's free slices are left to the one-slice
/// pages that fill it.
fn pages_of_big_blocks_and_large_blocks_keep_out_of_advised_units() {
    let mut blocks = Vec::new();
    let first = fill_until_advised(&mut blocks, 12000)
        .expect("no unit entered past the floor was advised for huge pages");
    let unit = first as usize / UNIT;
    // 128 KiB blocks live in 16-slice pages, 1 MiB ones are large blocks (spans of
    // their own): either fits in the 31 free slices of `first`'s unit.
    let big: Vec<*mut u8> = [128 << 10, 1 << 20]
        .iter()
        .map(|&size| {
            let p = ebb::alloc(size, 8);
            assert!(!p.is_null());
            p
        })
        .collect();
    let placed: Vec<(usize, bool)> = big
        .iter()
        .map(|&p| (p as usize / UNIT, advised(p)))
        .collect();
    // The next one-slice pages still go to the advised unit (a 64 KiB page holds 16
    // blocks of 4 KiB: 20 more need a new page).
    let mut next_in_unit = true;
    for _ in 0..20 {
        let next = alloc_written();
        blocks.push(next);
        next_in_unit &= next as usize / UNIT == unit;
    }
    for &p in blocks.iter().chain(big.iter()) {
        // SAFETY: live blocks of ours.
        unsafe { ebb::free(p) };
    }
    ebb::collect(true);
    for (size, (at, in_advised)) in ["128 KiB", "1 MiB"].iter().zip(placed) {
        assert!(
            at != unit && !in_advised,
            "a {size} block was placed in an advised unit's free slices"
        );
    }
    assert!(
        next_in_unit,
        "the next one-slice pages left the advised unit for room elsewhere"
    );
}

fn no_fresh_unit_is_advised_while_two_heaps_live() {
    // A second thread makes a heap (one allocation) and keeps it while the main thread
    // grows past the floor again.
    let (made, hold) = (
        std::sync::mpsc::channel::<()>(),
        std::sync::mpsc::channel::<()>(),
    );
    let (made_tx, made_rx) = made;
    let (hold_tx, hold_rx) = hold;
    let other = std::thread::spawn(move || {
        let p = ebb::alloc(64, 8);
        made_tx.send(()).unwrap();
        hold_rx.recv().unwrap();
        // SAFETY: a live block of ours.
        unsafe { ebb::free(p) };
    });
    made_rx.recv().unwrap();
    assert!(ebb::stats().threads >= 2);
    let mut blocks = Vec::new();
    let found = fill_until_advised(&mut blocks, 8000);
    hold_tx.send(()).unwrap();
    other.join().unwrap();
    for &p in &blocks {
        // SAFETY: live blocks of ours.
        unsafe { ebb::free(p) };
    }
    ebb::collect(true);
    assert!(
        found.is_none(),
        "a unit was advised for huge pages while two threads had heaps"
    );
}
