//! `realloc`: in place when the block's usable size allows (large and huge blocks by
//! growing or shrinking their span or mapping, blocks of a page by giving back the
//! tail's OS pages), else allocate, copy and free.
//!
//! **A growing block leaves no empty page behind.** A block that grows by moving steps
//! through the size classes (a list or string buffer grown by an eighth at a time
//! passes every class), and each class above [`MID_MAX`] keeps the page it took for it,
//! 8 blocks of 72-512 KiB, as its heap's current page once the block moved on: empty,
//! the one block written. CPython's `json.load` of the suite's 28 MiB file left 22 such
//! pages, 4.2 MiB resident at the program's peak. So when the move empties the old
//! block's page, the page goes back to the arena, current or not ([`let_go_emptied`]),
//! where the next, bigger page can take its committed slices and the retention scan
//! returns what is not taken. **Once per class**: a program that grows buffers
//! through the same classes again and again would otherwise free and retake a span per
//! move, and its freed pages, too short for the next class's, wait for the retention
//! scan beside fresh ones: letting go every time left the memory scenario
//! `mixed-c-rust` at 198.7-200.9 MiB after round 50 instead of 194.0-195.4 (drift
//! +4.5-5.8% against +2.1-3.6%, its target 5%) and the speed suite's C `compiler` at
//! 8.2 MB peak instead of 6.9. The second time a class's page empties this way it stays,
//! as before ([`LET_GO_CLASSES`]): `mixed-c-rust` 194.9-196.3 MiB (+3.3-3.8%),
//! `compiler` 7.2 MB. Its price: the C `realloc` workload, which doubles a buffer to
//! 128 MiB twice, peaks at 157.5 MB instead of 151.2 (its second pass takes the pages
//! again where its first pass's large block had grown over them; since the large
//! block's pages move into the huge one, `large_into_huge`, it peaks at 142 MB, its
//! span faulted in again by each pass either way). Cost in time: a span
//! freed, and one taken again if the class is used again, beside a copy of more than
//! 64 KiB, once per class.

use crate::diag::report_invalid_free;
use crate::front::alloc::alloc;
#[cfg(feature = "secure")]
use crate::front::alloc::reserved_tail;
use crate::front::free::{free, free_in};
use crate::front::guarded;
use crate::front::heap::empty_heap;
use crate::front::queue::queue_remove;
use crate::front::tls;
use crate::size_class::{LARGE_MAX, MEDIUM_MAX, MID_MAX};
use crate::span::deadline;
use crate::span::page::{Page, CHECK_TAG};
use crate::span::page::{ABANDONED, DRAINING, HUGE, LARGE, MARKER_LIMIT};
use crate::span::segment;
use crate::span::{arena, huge};
use core::ptr::null_mut;
use core::sync::atomic::{AtomicU32, Ordering};

/// The first class above [`MID_MAX`]: the classes whose emptied pages `realloc` lets go.
const FIRST_LET_GO_CLASS: usize = crate::size_class::class_of(MID_MAX) + 1;
const _: () = assert!(crate::size_class::CLASS_COUNT - FIRST_LET_GO_CLASS <= 32);

/// Classes (bit `class - FIRST_LET_GO_CLASS`) whose page `realloc` let go once already:
/// a page of theirs that empties again stays (module doc). Process-wide: whichever
/// thread grows through a class again shows the program reuses it.
static LET_GO_CLASSES: AtomicU32 = AtomicU32::new(0);

/// Resize a block to `new_size` keeping alignment `align`: in place when its usable
/// size allows (and, for large and huge blocks, by growing or shrinking the span or
/// mapping), else by allocating, copying and freeing. Null on failure (the old block
/// is then untouched).
///
/// # Safety
/// `ptr` must be a live block from this allocator allocated with alignment `align`.
pub unsafe fn realloc(ptr: *mut u8, old_size: usize, new_size: usize, align: usize) -> *mut u8 {
    // SAFETY: per the contract.
    unsafe {
        let seg = segment::segment_holding(ptr);
        if seg.is_null() {
            return match guarded::live_size(ptr, "realloc") {
                // A guarded block moves (into another guarded slot or not, as sampled).
                Some(Some(old)) => {
                    let new = alloc(new_size, align);
                    if !new.is_null() {
                        core::ptr::copy_nonoverlapping(ptr, new, old.min(new_size));
                        free(ptr);
                    }
                    new
                }
                Some(None) => null_mut(),
                None => {
                    report_invalid_free(ptr, "realloc of a pointer not allocated by ebb");
                    null_mut()
                }
            };
        }
        realloc_in(ptr, segment::page_of(seg, ptr), old_size, new_size, align)
    }
}

/// [`realloc`] of a block start the caller does not check (Rust's `realloc`: every
/// block ebb hands out, over-aligned ones included, is a block start): one lookup for
/// the usable size and the resize, and no division for the offset in the block, where
/// `usable_size` then `realloc` looked the block up twice and divided once (the
/// `div` alone was 10% of C `realloc`'s samples in `mstress`: docs/BENCHMARKS.md).
///
/// # Safety
/// As [`realloc`]; `ptr` is the start of its block.
#[inline]
pub unsafe fn realloc_start(ptr: *mut u8, new_size: usize, align: usize) -> *mut u8 {
    let seg = segment::segment_holding(ptr);
    // SAFETY: per the contract; a guarded block (no segment) has its own lookup.
    unsafe {
        if seg.is_null() {
            return realloc(ptr, crate::front::alloc::usable_size(ptr), new_size, align);
        }
        let page = segment::page_of(seg, ptr);
        let old = crate::front::alloc::usable_size_at_start(page, ptr);
        debug_assert_eq!(old, crate::front::alloc::usable_size(ptr));
        realloc_in(ptr, page, old, new_size, align)
    }
}

/// [`realloc`] of a block whose descriptor the caller found (C `realloc`, which looks
/// it up to check the pointer).
///
/// # Safety
/// As [`realloc`]; `page` is `ptr`'s descriptor.
#[inline(always)]
pub unsafe fn realloc_in(
    ptr: *mut u8,
    page: *mut Page,
    old_size: usize,
    new_size: usize,
    align: usize,
) -> *mut u8 {
    // SAFETY: per the contract.
    unsafe {
        let owner = (*page).owner.load(Ordering::Relaxed);
        let usable = (*page).block_size();
        // The common case first, a block of a page a heap owns (check mode's tagged
        // word too): its two answers without the markers' tests, which the match below
        // computed as flags before its first branch (10 instructions of `mstress`'s 95
        // per moving `realloc`). (The secure build checks the canary first, below.)
        #[cfg(not(feature = "secure"))]
        if owner >= MARKER_LIMIT {
            if new_size <= usable && new_size >= usable / 2 {
                // SAFETY: the caller's live block, shrunk (or kept) within `usable`.
                crate::front::shrunk_tails::after_shrink_in_place(ptr, old_size, new_size, usable);
                return ptr;
            }
            return move_block(ptr, page, old_size, new_size, align, usable > MID_MAX);
        }
        let holds_blocks = owner >= MARKER_LIMIT || owner == ABANDONED || owner == DRAINING;
        // The secure build: a block of a page of blocks keeps its canary, checked here.
        #[cfg(feature = "secure")]
        let usable = if holds_blocks {
            crate::span::secure::check_small_canary("realloc", &*page, ptr);
            usable - reserved_tail(page)
        } else {
            usable
        };
        // In place whenever the block stays at least half used: shrinking a large or huge
        // block gives its tail back, growing one takes the slices or address space after
        // it when they are free.
        let fits = new_size <= usable && new_size >= usable / 2;
        match owner {
            // A block of at most LARGE_MAX in a mapping of its own (no segment had room
            // for it) already fits: resizing it to LARGE_MAX + 1 would grow the mapping,
            // and `mremap` may move it (api.c `t_realloc_in_place`, 16 MiB).
            HUGE if fits && new_size.max(LARGE_MAX + 1) > huge::usable_size(page) => return ptr,
            HUGE if fits || new_size > LARGE_MAX => {
                let p = huge::resize(page, new_size.max(LARGE_MAX + 1));
                if !p.is_null() {
                    if crate::profile::is_active() {
                        profile_resized(ptr, p, new_size);
                    } else {
                        crate::profile::moved(ptr, p);
                    }
                    return p;
                }
                if fits {
                    return ptr;
                }
            }
            LARGE if fits => {
                arena::resize_large(page, new_size.max(MEDIUM_MAX + 1));
                if crate::profile::is_active() {
                    profile_resized(ptr, ptr, new_size);
                }
                return ptr;
            }
            LARGE
                if new_size > usable
                    && new_size <= LARGE_MAX
                    && arena::resize_large(page, new_size) =>
            {
                if crate::profile::is_active() {
                    profile_resized(ptr, ptr, new_size);
                }
                return ptr;
            }
            LARGE if new_size > LARGE_MAX => {
                return large_into_huge(ptr, page, old_size, new_size, align);
            }
            _ if holds_blocks && fits => {
                // SAFETY: the caller's live block, shrunk (or kept) within `usable`.
                crate::front::shrunk_tails::after_shrink_in_place(ptr, old_size, new_size, usable);
                return ptr;
            }
            _ => {}
        }
        move_block(
            ptr,
            page,
            old_size,
            new_size,
            align,
            holds_blocks && usable > MID_MAX,
        )
    }
}

/// [`realloc_in`]'s move: allocate, copy, free; `let_go`: the block was of a page of
/// blocks above `MID_MAX`, whose page goes back if the move emptied it
/// ([`let_go_emptied`]). Null on failure (the old block is then untouched).
///
/// # Safety
/// As [`realloc_in`].
#[inline(always)]
unsafe fn move_block(
    ptr: *mut u8,
    page: *mut Page,
    old_size: usize,
    new_size: usize,
    align: usize,
    let_go: bool,
) -> *mut u8 {
    let new = alloc(new_size, align);
    if new.is_null() {
        return null_mut();
    }
    // SAFETY: per the contract `ptr` is live with `old_size` usable bytes, and `new` a
    // fresh block of at least `new_size`; `page` is `ptr`'s descriptor.
    unsafe {
        core::ptr::copy_nonoverlapping(ptr, new, old_size.min(new_size));
        free_in(ptr, page);
        if let_go {
            let_go_emptied(page);
        }
    }
    new
}

/// A large block grown past `LARGE_MAX` into a huge block of its own: its pages move
/// into the new mapping (`os::move_pages`) rather than being copied, so neither the
/// copy nor the faults of the new mapping's first part are paid, and the span goes back
/// to the arena with nothing resident. A buffer doubled to 128 MiB (the speed suite's
/// C `realloc`) moved 16 MiB per pass this way: its copy and 4,100 faults, and at its
/// peak the 16 MiB span it left behind resident beside the huge block. The copy stays
/// for the secure build (the canary after the block, guard pages) and where the OS
/// cannot move pages.
///
/// # Safety
/// `ptr` is the live block of large span `page`, `old_size` its usable size,
/// `new_size > LARGE_MAX`.
#[cold]
#[inline(never)]
unsafe fn large_into_huge(
    ptr: *mut u8,
    page: *mut Page,
    old_size: usize,
    new_size: usize,
    align: usize,
) -> *mut u8 {
    let new = alloc(new_size, align);
    if new.is_null() {
        return null_mut();
    }
    // SAFETY: the old block is the caller's, whole slices (so whole OS pages) at a
    // slice boundary; the new one is a huge block at a page boundary of a fresh
    // mapping of at least `new_size > old_size` bytes, nobody else's.
    unsafe {
        let span = (*page).block_size();
        debug_assert!(old_size <= span && span < new_size);
        let moved = cfg!(not(feature = "secure"))
            && span > MEDIUM_MAX
            && new as usize % crate::os::page_size() == 0
            && crate::span::move_budget::allowed()
            && {
                crate::span::move_budget::moved(1);
                crate::os::move_pages(ptr, new, span)
            };
        if moved {
            crate::front::slow::free_large(page, ptr, true);
        } else {
            core::ptr::copy_nonoverlapping(ptr, new, old_size);
            free(ptr);
        }
    }
    new
}

/// A big block resized in place (`from` moved to `to`, or not) while the heap profiler
/// runs (`profile::resized`). Out of line: its frame is where the sample's stack
/// capture starts.
#[cold]
#[inline(never)]
fn profile_resized(from: *mut u8, to: *mut u8, new_size: usize) {
    let marker = 0u8;
    crate::profile::resized(from, to, new_size, crate::profile::Entry::here(&marker));
}

/// After a block of `page` moved out: if the page is the calling thread's and now holds
/// no block, give its span back to the arena, even if it is the heap's current page or
/// its class's only one (module doc; `slow::retire` keeps those), once per class.
///
/// # Safety
/// `page` is a descriptor of a normal segment (whoever owns it now).
// (Out of line in the secure build: with `Page::gather_frees` inlined into it there,
// it took `realloc` 3 instructions more per call in register moves and spills.)
#[cfg_attr(feature = "secure", cold, inline(never))]
unsafe fn let_go_emptied(page: *mut Page) {
    let heap = tls::heap();
    if heap == empty_heap() {
        return;
    }
    // SAFETY: the heap is ours; the page is touched only if our heap owns it, which
    // the owner word tells once a steal in progress is waited out.
    unsafe {
        (*heap).enter();
        (*heap).handshake.wait_while_stealing();
        let owner = (*page).owner.load(Ordering::Relaxed);
        let bit = 1u32 << ((*page).class as usize - FIRST_LET_GO_CLASS);
        if owner & !CHECK_TAG == heap as usize
            && (*page).used() == 0
            && LET_GO_CLASSES.fetch_or(bit, Ordering::Relaxed) & bit == 0
        {
            queue_remove(heap, (*page).class as usize, page);
            (*page).gather_frees();
            // Not ours any more: a late free finds a marker, not this heap.
            (*page).owner.store(DRAINING, Ordering::Relaxed);
            arena::free_span(page, deadline::coarse_now_ms());
            crate::process::purger::after_slow_path();
        }
        (*heap).leave();
    }
}
