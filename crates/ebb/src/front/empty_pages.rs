//! Empty pages of big blocks go back when the heap takes a span.
//!
//! A heap keeps the page of a class whose last block was freed while it is the class's
//! current page (the free fast path never leaves for it: `page::CURRENT`), so a thread
//! that allocates and frees one block at a time does not churn spans. For blocks above
//! 8 KiB that keeps at least a block resident per class for nothing but the next block
//! of that size. A program that uses many such sizes a block or two at a time keeps one
//! per class: gcc's `cc1` compiling the real-programs suite's file had 5.5 MiB in empty
//! pages of ~65 classes at its peak, for 3.8 MiB of live blocks, where glibc reuses one
//! free chunk for any size.
//!
//! So when a heap takes a span for a page (`slow::find_page`: its class had no room),
//! it first gives back its current pages of classes above 8 KiB that hold no block
//! ([`let_go_empty_pages`]): the arena takes committed runs first, so the page being
//! taken (whatever its class) and the ones after it are carved from that memory, and
//! the retention scan returns what nobody takes. A heap that allocates and frees blocks
//! of one size keeps its page (it takes no span in between).
//!
//! **A budget.** The smallest classes keep their empty pages up to
//! [`KEPT_EMPTY_BYTES`] of blocks (one block per page), the rest go, the biggest blocks
//! first. A program cycling through a few sizes keeps them: sqlite frees and allocates
//! blocks of 10, 11 and 12 KiB in turn, and giving every empty page back let 3,600
//! pages go and be taken again in one run and doubled its page faults (12 k to 22 k:
//! spans freed before the heap's fill front stop dense growth from backing new units
//! with huge pages, `large_pages::nothing_free_before`), for 36 KiB of blocks. With
//! 256 KiB, sqlite still faulted +7%, and jq +25%; with 1 MiB, Lua (200,000 keys) let
//! go three pages of 384-512 KiB blocks (3-4 MiB spans) while its heap grew, and
//! peaked 1.9 MiB higher with 20% more faults. 2 MiB keeps both as they were and
//! gives gcc most of the gain (peak 1.6 MiB lower; 2.3 MiB with 1 MiB).
//!
//! **Only while the process has one heap.** With eight threads growing and handing
//! over buffers (the memory scenarios `mixed-c-rust` and `mixed-c`), the spans given
//! back were taken by other heaps' pages of small, longer-lived blocks, and each big
//! page taken again needed fresh slices: RSS after round 50 drifted +9.5% and +7.2%
//! from round 5 (target 5%; +3-4% without). One heap's spans come back to it alone.
//!
//! **Not in a unit backed by a huge page** (`span::large_pages`): giving the span back
//! returns no memory (the unit is resident whole) and takes the unit's advice back
//! (`large_pages::after_slices_freed`), so refaults there are 4 KiB pages again.

use crate::counters::COUNTERS;
use crate::front::heap::Heap;
use crate::front::queue::queue_remove;
use crate::size_class::{class_of, class_size, CLASS_COUNT, SMALL_PAGE_BLOCK_MAX};
use crate::span::page::{empty_page, DRAINING};
use crate::span::{arena, deadline};
use core::sync::atomic::Ordering;

/// The first class whose pages span more than one slice: blocks above 8 KiB.
pub const FIRST_LET_GO_CLASS: usize = class_of(SMALL_PAGE_BLOCK_MAX) + 1;

/// Empty pages of classes above 8 KiB a heap keeps, in bytes of one block per page,
/// the smallest classes first (module doc, "A budget").
pub const KEPT_EMPTY_BYTES: usize = 2048 * 1024;

/// Before `heap` takes a span for a page of `taking`: give back its current pages of
/// the classes above 8 KiB that hold no block (module doc), if it is the process's
/// only heap. Returns how many it gave back.
///
/// # Safety
/// `heap` is the calling thread's heap, entered on its slow path.
pub unsafe fn let_go_empty_pages(heap: *mut Heap, taking: usize) -> usize {
    if COUNTERS.threads.load(Ordering::Relaxed) > 1 {
        return 0;
    }
    let empty = empty_page();
    let mut let_go = 0;
    let mut kept = 0;
    for class in FIRST_LET_GO_CLASS..CLASS_COUNT {
        // SAFETY: per the contract, the heap is ours; in check mode its tables name the
        // empty page only, and nothing is let go.
        let page = unsafe { (*heap).current[class].load(Ordering::Relaxed) };
        if class == taking || page == empty {
            continue;
        }
        // SAFETY: a page the heap's table names is the heap's own; `used` counts the
        // blocks freed by other threads until the owner takes them in, so 0 is empty.
        unsafe {
            if (*page).used() != 0 {
                continue;
            }
            kept += class_size(class);
            if kept <= KEPT_EMPTY_BYTES || arena::span_in_advised_unit(page) {
                continue;
            }
            queue_remove(heap, class, page);
            (*page).gather_frees();
            debug_assert!((*page).is_unused());
            // Not ours any more: a late free finds a marker, not this heap.
            (*page).owner.store(DRAINING, Ordering::Relaxed);
            arena::free_span(page, deadline::coarse_now_ms());
        }
        let_go += 1;
    }
    let_go
}
