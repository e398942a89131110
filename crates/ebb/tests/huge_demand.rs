//! Freed huge mappings are kept only where huge requests reuse them
//! (`span::huge_pool::Demand`): a huge block freed when no huge request has followed a
//! huge free lately goes back to the OS at once; once a request came right after a
//! mapping went back, freed mappings are kept and serve the next requests.
//!
//! Its own process (a test binary of its own), so no other test's huge blocks armed the
//! record before it starts.

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

use std::alloc::Layout;

const MIB: usize = 1 << 20;

#[test]
fn huge_memory_is_kept_only_after_it_was_reused() {
    let size = 40 * MIB;
    let layout = Layout::from_size_align(size, 8).unwrap();
    let kept = || ebb::stats().huge_kept;
    assert_eq!(kept(), 0);
    // SAFETY: a non-zero layout; each block is written within bounds and freed once.
    unsafe {
        // A big input buffer, freed once: nothing reused huge memory, so it goes back.
        let input = std::hint::black_box(std::alloc::alloc(layout));
        assert!(!input.is_null());
        input.write_bytes(7, size);
        std::alloc::dealloc(std::hint::black_box(input), layout);
        assert_eq!(kept(), 0, "a huge mapping nobody reuses was kept");
        // A request right after a mapping went back: the program replaces big buffers,
        // so from now on freed mappings are kept ...
        let first = std::hint::black_box(std::alloc::alloc(layout));
        assert!(!first.is_null());
        first.write_bytes(8, size);
        std::alloc::dealloc(std::hint::black_box(first), layout);
        assert!(
            kept() >= size as u64,
            "a huge mapping freed while huge memory is being reused was not kept: {} MiB",
            kept() / MIB as u64
        );
        // ... and serve the next request (its pages, still holding what was written).
        let second = std::hint::black_box(std::alloc::alloc(layout));
        assert_eq!(second, first, "the kept mapping was not reused");
        assert_eq!(*second.add(size - 1), 8);
        std::alloc::dealloc(second, layout);
    }
}
