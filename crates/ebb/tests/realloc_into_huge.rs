//! `realloc` of a large block (a span of a segment) past `LARGE_MAX` into a huge block
//! of its own moves the block's pages into the new mapping instead of copying them
//! (`front/realloc.rs`, `large_into_huge`): the contents arrive, and the span left
//! behind holds nothing resident (it used to stay resident, committed and free, for
//! the purge delay, beside the huge block: the C `realloc` workload's peak). The huge
//! block, now several of the kernel's mappings, must still grow and keep its contents
//! (`huge::grow_mapping`).
//!
//! Its own process: the arena is process-wide.

use std::alloc::{GlobalAlloc, Layout};

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

mod common;
use common::pages::{four_kib_pages, kernel_moves_pages, resident_pages, PAGE};

const MIB: usize = 1024 * 1024;

fn pattern(i: usize) -> u8 {
    (i % 251) as u8
}

#[test]
fn a_large_block_grown_into_a_huge_one_leaves_nothing_resident_behind() {
    if !four_kib_pages() {
        return;
    }
    let large = 8 * MIB;
    let huge = 24 * MIB;
    let bigger = 72 * MIB;
    // SAFETY: plain allocation through ebb, each pointer used within its layout.
    unsafe {
        let layout = Layout::from_size_align(large, 8).unwrap();
        let p = A.alloc(layout);
        assert!(!p.is_null());
        for i in 0..large {
            *p.add(i) = pattern(i);
        }
        assert_eq!(resident_pages(p as usize, large), large / PAGE);

        let q = A.realloc(p, layout, huge);
        assert!(!q.is_null());
        assert_ne!(q, p, "a large block cannot hold a huge size");
        assert!((0..large).all(|i| *q.add(i) == pattern(i)), "contents lost");
        if kernel_moves_pages() {
            assert_eq!(
                resident_pages(p as usize, large),
                0,
                "the large span left behind is still resident"
            );
        }
        // The span is free: a new large block there works (and reads as zero if it
        // is the same span, its pages having moved out).
        let r = A.alloc(layout);
        assert!(!r.is_null());
        for i in (0..large).step_by(PAGE) {
            *r.add(i) = 1;
        }

        // The huge block grows on, past what its mapping holds, contents kept.
        for i in large..huge {
            *q.add(i) = pattern(i);
        }
        let s = A.realloc(q, Layout::from_size_align(huge, 8).unwrap(), bigger);
        assert!(!s.is_null());
        assert!((0..huge).all(|i| *s.add(i) == pattern(i)), "contents lost");
        for i in (huge..bigger).step_by(PAGE) {
            *s.add(i) = 2;
        }
        A.dealloc(s, Layout::from_size_align(bigger, 8).unwrap());
        A.dealloc(r, layout);
    }
}
