//! `calloc` of a huge block built out of kept (reused) pages clears them in place
//! (`front::alloc::alloc_zeroed_any`): the pages stay resident and read as zero. It used
//! to give them back to the OS instead, so the program faulted every page in again as it
//! wrote the block (four threads replacing calloc'd 1-30 MiB buffers: 23 s against
//! glibc's 4.6 s, 3.75 million faults).
//!
//! Its own process: the huge pool and its reuse record are process-wide.

use std::alloc::{GlobalAlloc, Layout};

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

mod common;
use common::pages::{four_kib_pages, resident_pages, PAGE};

const MIB: usize = 1 << 20;

#[test]
fn calloc_of_kept_huge_pages_clears_them_in_place() {
    if !four_kib_pages() {
        return;
    }
    let mut options = ebb::options();
    options.purge_delay_ms = 600_000;
    ebb::set_options(options);
    let layout = Layout::from_size_align(40 * MIB, 8).unwrap();
    // SAFETY: plain allocation through ebb; each block written within its layout and
    // freed once.
    unsafe {
        // Huge memory is kept once a request follows a huge free (`huge_pool::Demand`):
        // the first block goes back, the second is kept.
        for fill in [1u8, 2] {
            let p = A.alloc(layout);
            assert!(!p.is_null());
            p.write_bytes(fill, layout.size());
            A.dealloc(p, layout);
        }
        assert!(
            ebb::stats().huge_kept >= layout.size() as u64,
            "the second huge block was not kept"
        );
        let z = A.alloc_zeroed(layout);
        assert!(!z.is_null());
        assert!(
            ebb::stats().huge_kept < layout.size() as u64,
            "the calloc'd block was not built of the kept pages"
        );
        // Before anything reads it (a read of a page given back maps the zero page,
        // which mincore counts): the pages cleared in place are present; pages given
        // back would be absent until the program faulted each in again.
        let start = (z as usize).next_multiple_of(PAGE);
        let len = 32 * MIB;
        assert_eq!(
            resident_pages(start, len),
            len / PAGE,
            "the calloc'd block's kept pages were given back to the OS"
        );
        assert!(
            std::slice::from_raw_parts(z, layout.size())
                .iter()
                .all(|&b| b == 0),
            "a calloc'd block of kept pages holds old data"
        );
        A.dealloc(z, layout);
    }
}
