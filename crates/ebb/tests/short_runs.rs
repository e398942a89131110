//! A page of small blocks takes a short free run of committed slices before it breaks a
//! long one (`span/arena.rs`, `find_committed_in_short_run`): the long run is a page of
//! big blocks that emptied, which a page of the same class takes again whole (its blocks'
//! unwritten and shrunk tails stay unresident), while a one-slice page carved out of it
//! writes its whole slice. First fit in segment order took the long run when it came
//! first.
//!
//! First-class heaps place and free the spans deterministically; the body runs in a
//! child process with a long purge delay, so no free span is decommitted meanwhile (the
//! rule is about committed runs).

mod common;

#[global_allocator]
static GLOBAL: ebb::Ebb = ebb::Ebb;

const CHILD_ENV: &str = "EBB_SHORT_RUNS_TEST_CHILD";
const SLICE: usize = 64 * 1024;
/// A class of 48-slice pages (eight 384 KiB blocks: 3 MiB).
const BIG: usize = 384 * 1024;
const BIG_PAGE: usize = 8 * BIG;
/// A class of one-slice pages nothing else in this process uses.
const SMALL: usize = 5000;

fn slice_of(p: *mut u8) -> usize {
    p as usize & !(SLICE - 1)
}

#[test]
fn a_small_page_takes_a_short_free_run_before_a_big_pages_span() {
    if std::env::var_os(CHILD_ENV).is_none() {
        common::run_test_in_child(
            "a_small_page_takes_a_short_free_run_before_a_big_pages_span",
            CHILD_ENV,
            &[("EBB_PURGE_DELAY", "600000")],
        );
        return;
    }

    // In address order (first fit): a page of big blocks, a live separator, a one-slice
    // page, another separator.
    let big = ebb::Heap::new();
    let big_block = big.alloc(BIG, 8);
    assert!(!big_block.is_null());
    let big_start = big_block as usize;
    let sep1 = ebb::Heap::new();
    let s1 = sep1.alloc(SMALL, 8);
    let small = ebb::Heap::new();
    let small_block = small.alloc(SMALL, 8);
    let sep2 = ebb::Heap::new();
    let s2 = sep2.alloc(SMALL, 8);
    assert!(!s1.is_null() && !small_block.is_null() && !s2.is_null());
    // SAFETY: each block is live and at least SMALL (or BIG) bytes long.
    unsafe {
        std::ptr::write_bytes(big_block, 1, BIG);
        std::ptr::write_bytes(small_block, 2, SMALL);
    }
    let short_slice = slice_of(small_block);
    let in_big = |a: usize| (big_start..big_start + BIG_PAGE).contains(&a);
    assert!(
        !in_big(short_slice),
        "setup: the one-slice page lies outside the big page"
    );
    eprintln!(
        "big page at {big_start:#x}, one-slice page at {short_slice:#x}, separators at {:#x} {:#x}",
        slice_of(s1),
        slice_of(s2)
    );

    // Both spans go back to the arena, committed: a run of 48 slices and a run of one
    // (between the separators, unless the layout differs; see the check below).
    big.destroy();
    small.destroy();

    let taker = ebb::Heap::new();
    let taken = taker.alloc(SMALL, 8);
    assert!(!taken.is_null());
    let taken_slice = slice_of(taken);
    eprintln!("the new one-slice page is at {taken_slice:#x}");
    assert!(
        !in_big(taken_slice),
        "a one-slice page broke the emptied big page's span ({big_start:#x}) while a \
         one-slice run was free at {short_slice:#x}"
    );
    assert_eq!(
        taken_slice, short_slice,
        "the one-slice page took the short run"
    );

    // The big page's class takes its span again whole.
    let again = ebb::Heap::new();
    let big_again = again.alloc(BIG, 8);
    assert_eq!(
        big_again as usize, big_start,
        "the big class reused the emptied big page"
    );
    again.destroy();
    taker.destroy();
    // SAFETY: the separators' blocks are live blocks of their heaps.
    unsafe {
        sep1.free(s1);
        sep2.free(s2);
    }
}
