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

const MIB: usize = 1024 * 1024;
const PAGE: usize = 4096;

/// Resident OS pages of `[start, start + len)`, page aligned and mapped.
fn resident_pages(start: usize, len: usize) -> usize {
    let mut out = vec![0u8; len / PAGE];
    // SAFETY: the range is mapped and `out` has one byte per page.
    let rc = unsafe { libc::mincore(start as *mut libc::c_void, len, out.as_mut_ptr()) };
    assert_eq!(rc, 0, "mincore failed");
    out.iter().filter(|&&b| b & 1 != 0).count()
}

/// True if the kernel moves pages out of a mapping that stays (`MREMAP_DONTUNMAP`,
/// Linux 5.7): without it the block is copied, as before.
fn kernel_moves_pages() -> bool {
    // SAFETY: a private mapping of our own, moved within itself and unmapped after.
    unsafe {
        let len = 4 * PAGE;
        let map = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(map, libc::MAP_FAILED);
        let to = (map as *mut u8).add(2 * PAGE) as *mut libc::c_void;
        let moved = libc::mremap(
            map,
            PAGE,
            PAGE,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED | libc::MREMAP_DONTUNMAP,
            to,
        ) != libc::MAP_FAILED;
        libc::munmap(map, len);
        moved
    }
}

fn pattern(i: usize) -> u8 {
    (i % 251) as u8
}

#[test]
fn a_large_block_grown_into_a_huge_one_leaves_nothing_resident_behind() {
    // SAFETY: sysconf has no preconditions.
    if unsafe { libc::sysconf(libc::_SC_PAGESIZE) } != PAGE as libc::c_long {
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
