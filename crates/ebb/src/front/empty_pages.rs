//! Empty pages of big blocks go back when the heap takes a span; `ebb::collect` gives
//! back every empty page of the calling thread's heap ([`release_unused_pages`]).
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
//! **And when a free empties one** ([`current_page_emptied`]). Taking spans is not
//! what a program does at its peak: `cc1` held 4.7 MiB in empty pages at its peak RSS
//! (for 5.6 MiB of live blocks; `EBB_REPORT_SIGNAL`), built up since its last span. So
//! the current page of a class above 8 KiB carries `page::CURRENT` only while its
//! class's bit is set in `Heap::emptied_current` (`heap::flags_current` says which
//! classes always carry it): the free that empties a page without the flag leaves the
//! fast path, the page stays current, its class's bit is set and the page flagged, and
//! the heap's other emptied current pages (the classes with their bit set) are held to
//! [`KEPT_EMPTIED_BYTES`] of carved blocks (what they may hold resident), the page just
//! emptied counted first, then the smallest classes. A class found refilled there
//! loses its bit and its page the flag, so its next emptying is seen again; the budget
//! looks at the heap's empty pages whenever their set may have grown, and a heap
//! allocating and freeing one block at a time runs the fast path after its first
//! emptying. What goes is purged inside first (`Page::purge_free_blocks`): given back
//! as it is, a span stays resident among the free spans until the retention scan, and
//! the next page of its class is carved from other memory (tried: `cc1`'s peak RSS
//! 2.4 MiB higher than keeping everything). Measured on `cc1` (real-programs suite):
//! peak RSS 135.0 → 131.5 MiB (glibc 127.1); ebb's part at the peak 13 → 10 MiB, its
//! empty pages 4.7 → 1.9 MiB. With 2 MiB of one block per page as the budget here,
//! 133.3; with 2 MiB of carved blocks, 132.3. Only classes above 64 KiB: no gain (134.3).
//! Without the flag until the next page change (a first version), every emptying free
//! left the fast path: a malloc+free pair of one 16-256 KiB block cost 85-98
//! instructions against 64-77 (callgrind), 130-143 through the whole slow path.
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
use crate::front::heap::{empty_heap, Heap};
use crate::front::queue::queue_remove;
use crate::front::{slow, stash, tls};
use crate::process::purger::after_slow_path;
use crate::size_class::{class_of, class_size, CLASS_COUNT, SMALL_PAGE_BLOCK_MAX};
use crate::span::page::{empty_page, DRAINING};
use crate::span::{arena, deadline};
use core::sync::atomic::Ordering;

/// The first class whose pages span more than one slice: blocks above 8 KiB.
pub const FIRST_LET_GO_CLASS: usize = class_of(SMALL_PAGE_BLOCK_MAX) + 1;

/// Empty pages of classes above 8 KiB a heap keeps, in bytes of one block per page,
/// the smallest classes first (module doc, "A budget").
pub const KEPT_EMPTY_BYTES: usize = 2048 * 1024;

/// Empty current pages a heap keeps when a free empties one, in bytes of their carved
/// blocks (what they may hold resident), the page just emptied and then the smallest
/// classes first (module doc, "And when a free empties one").
pub const KEPT_EMPTIED_BYTES: usize = 1024 * 1024;

// `Heap::emptied_current` has a bit per class above 8 KiB.
const _: () = assert!(CLASS_COUNT - FIRST_LET_GO_CLASS <= 64);

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
            let_go_page(heap, class, page);
            (*heap).emptied_current &= !(1u64 << (class - FIRST_LET_GO_CLASS));
        }
        let_go += 1;
    }
    let_go
}

/// A free emptied `heap`'s current page of `class` (above 8 KiB), which had no
/// `CURRENT` flag: keep it and flag it, and give back the heap's other emptied current
/// pages beyond [`KEPT_EMPTIED_BYTES`] of carved blocks, the smallest classes kept
/// first, if it is the process's only heap (module doc, "And when a free empties one").
///
/// # Safety
/// `heap` is the calling thread's heap, entered on its slow path; its current page of
/// `class` holds no block.
pub unsafe fn current_page_emptied(heap: *mut Heap, class: usize) {
    debug_assert!(class >= FIRST_LET_GO_CLASS);
    // SAFETY: per the contract, the heap is ours.
    unsafe {
        let this = 1u64 << (class - FIRST_LET_GO_CLASS);
        let mut others = (*heap).emptied_current & !this;
        (*heap).emptied_current |= this;
        let page = (*heap).current_page(class);
        // Seen: its next emptyings stay on the fast path until the bit is cleared.
        (*page).set_is_current(true);
        if others == 0 || COUNTERS.threads.load(Ordering::Relaxed) > 1 {
            return;
        }
        let empty = empty_page();
        let mut kept = carved_bytes(page);
        let mut let_go = false;
        while others != 0 {
            let bit = others & others.wrapping_neg();
            others &= !bit;
            let other = FIRST_LET_GO_CLASS + bit.trailing_zeros() as usize;
            let page = (*heap).current_page(other);
            // SAFETY: a page the heap's table names is the heap's own; `used` counts
            // the blocks freed by other threads until the owner takes them in.
            if page == empty || (*page).used() != 0 {
                // Refilled (its next emptying is to be seen again), or let go since.
                (*heap).emptied_current &= !bit;
                if page != empty {
                    (*page).set_is_current(false);
                }
                continue;
            }
            kept += carved_bytes(page);
            if kept <= KEPT_EMPTIED_BYTES || arena::span_in_advised_unit(page) {
                continue;
            }
            (*page).gather_frees();
            (*page).purge_free_blocks();
            let_go_page(heap, other, page);
            (*heap).emptied_current &= !bit;
            let_go = true;
        }
        if let_go {
            crate::process::purger::after_slow_path();
        }
    }
}

/// The bytes of the blocks carved in `page`: what it may hold resident.
///
/// # Safety
/// `page` is a descriptor the calling thread owns.
unsafe fn carved_bytes(page: *mut crate::span::page::Page) -> usize {
    // SAFETY: per the contract.
    unsafe { (*page).capacity as usize * (*page).block_size() }
}

/// Give `heap`'s empty page `page` of `class` back to the arena.
///
/// # Safety
/// `heap` is the calling thread's heap, entered on its slow path; `page` is in its
/// queue of `class` and holds no block.
unsafe fn let_go_page(heap: *mut Heap, class: usize, page: *mut crate::span::page::Page) {
    // SAFETY: per the contract.
    unsafe {
        queue_remove(heap, class, page);
        (*page).gather_frees();
        debug_assert!((*page).is_unused());
        // Not ours any more: a late free finds a marker, not this heap.
        (*page).owner.store(DRAINING, Ordering::Relaxed);
        arena::free_span(page, deadline::coarse_now_ms());
    }
}

/// Free every unused page of the calling thread's heap but the only page of a class
/// (every one if `force`), for `ebb::collect`.
pub fn release_unused_pages(force: bool) {
    let heap = tls::heap();
    if heap == empty_heap() {
        return;
    }
    slow::slow_path_enter(heap);
    // SAFETY: this is our heap.
    unsafe {
        stash::release(heap, deadline::coarse_now_ms());
        for class in 0..CLASS_COUNT {
            let mut page = (*heap).queues[class].first;
            while !page.is_null() {
                let next = (*page).next;
                (*page).gather_frees();
                let only = page == (*heap).queues[class].first && next.is_null();
                if (*page).is_unused() && (force || !only) {
                    queue_remove(heap, class, page);
                    (*page).owner.store(DRAINING, Ordering::Relaxed);
                    arena::free_span(page, deadline::coarse_now_ms());
                }
                page = next;
            }
        }
        after_slow_path();
        (*heap).leave();
    }
}
