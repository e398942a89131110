//! `ebb::stats()` counts a kept huge mapping's pages as RSS does: a huge block the
//! program only read maps the kernel's zero page, which `mincore` reports present and
//! RSS leaves out. Counted by `mincore`, a read-only 64 MiB `calloc` block, freed and
//! kept, made `resident` exceed RSS by 58 MB (`tests/retention.rs`
//! `stats_read_remote_frees_and_heaps_without_draining` failed whenever the zero-page
//! test ran before it).
//!
//! Its own process, so that no other test's huge blocks are kept or armed the huge
//! pool's record of reuse (`span::huge_pool::Demand`).

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

use std::alloc::Layout;

const MIB: usize = 1 << 20;

#[test]
fn a_kept_huge_mapping_only_read_is_not_resident() {
    let size = 64 * MIB;
    let layout = Layout::from_size_align(size, 16).unwrap();
    // SAFETY: a non-zero layout; each block is used within bounds and freed once.
    unsafe {
        // A huge block freed, then a request right after: the program replaces big
        // buffers, so the next freed mapping is kept (tests/huge_demand.rs).
        let first = std::hint::black_box(std::alloc::alloc(layout));
        assert!(!first.is_null());
        first.write_bytes(1, MIB);
        std::alloc::dealloc(std::hint::black_box(first), layout);
        let read_only = std::hint::black_box(std::alloc::alloc_zeroed(layout));
        assert!(!read_only.is_null());
        let mut sum = 0u64;
        for off in (0..size).step_by(4096) {
            sum += std::ptr::read_volatile(read_only.add(off)) as u64;
        }
        assert_eq!(sum, 0);
        std::alloc::dealloc(std::hint::black_box(read_only), layout);
    }
    let stats = ebb::stats();
    assert!(
        stats.huge_kept >= size as u64,
        "the read-only block's mapping was not kept, so this test checks nothing: {stats:?}"
    );
    // Its first page holds the block header, written; the rest is the zero page.
    assert!(
        stats.huge_kept_resident < 4 * MIB as u64,
        "{} KiB of zero pages counted resident in a kept huge mapping: {stats:?}",
        stats.huge_kept_resident >> 10
    );
}
