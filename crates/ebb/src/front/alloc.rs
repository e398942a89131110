//! Entry points that allocate, and usable size. The malloc fast path lives here; the
//! free path is in `free.rs`, realloc in `realloc.rs`.
//!
//! malloc (size <= 512 KiB, alignment <= 16):
//!   heap = TLS; page = heap.current[class], class = heap.small_class[size] (<= 1 KiB),
//!   else MID_CLASS[(size-1)/16] (<= 64 KiB), else class_of(size);
//!   block = page.free; if null -> page.local_free, else carve a few more blocks
//!   (out of line), else slow path; page.free = block.next; page.used += 1.

use crate::front::freed_key;
use crate::front::guarded;
use crate::front::heap;
use crate::front::slow::{self, malloc_slow};
use crate::front::tls;
use crate::os;
use crate::size_class::{
    class_for_aligned, class_of, class_size, LARGE_MAX, MEDIUM_MAX, MID_CLASS, MID_MAX, MID_SHIFT,
    SMALL_MAX,
};
use crate::span::huge;
use crate::span::page::{Block, CHECK_TAG, HUGE, LARGE};
use crate::span::segment::{self, SLICE_SIZE};
use core::sync::atomic::Ordering;

/// The most bytes a request is padded with for the secure build's canary
/// (`span::secure::SMALL_CANARY`); 0, and so no code at all, in other builds. Limits
/// are tested against it; the padding itself is [`pad`].
pub const CANARY: usize = crate::span::CANARY_PAD_MAX;

/// Bytes added to every request before its class is picked: 8 in the secure build
/// while small-block canaries are on (`span::secure::canary_pad`: the last 8 bytes
/// of the block hold the canary, so a request of exactly a class size takes the next
/// class), else 0 (a constant outside the secure build).
#[inline(always)]
pub fn pad() -> usize {
    #[cfg(feature = "secure")]
    return crate::span::secure::canary_pad();
    #[cfg(not(feature = "secure"))]
    0
}

/// `size` with the padding of [`pad`] where its block gets a canary: requests of up to
/// `SMALL_MAX` bytes (whose padded size picks a class; those of the last `CANARY`
/// bytes take the classes above `SMALL_MAX`, which have none). Bigger requests are not
/// padded: their blocks carry no canary (`span::secure::SMALL_CANARY_MAX`), and 8
/// bytes more sent every request of a class's exact size, as the common powers of two,
/// to the next class. `size` in other builds.
#[inline(always)]
pub fn padded(size: usize) -> usize {
    if size <= SMALL_MAX {
        size + pad()
    } else {
        size
    }
}

/// Bytes of `page`'s blocks the program may not use (the canary's).
///
/// # Safety
/// `page` is a descriptor.
#[inline(always)]
pub(super) unsafe fn reserved_tail(page: *mut crate::span::page::Page) -> usize {
    #[cfg(feature = "secure")]
    // SAFETY: per the contract.
    return unsafe { crate::span::secure::canary_bytes(&*page) };
    #[cfg(not(feature = "secure"))]
    {
        let _ = page;
        0
    }
}

/// Alignment every block has without asking: blocks of 16-byte multiples are 16-byte
/// aligned, all others 8-byte aligned.
pub const MIN_ALIGN: usize = 8;

/// Allocate `size` bytes aligned to 8 (16 if `size` is a multiple of 16).
///
/// The whole operation sits between `enter` and `leave` of the heap's `in_op` count, so
/// a stealer can tell the owner is outside the allocator (see `steal.rs`).
#[inline(always)]
pub fn malloc(size: usize) -> *mut u8 {
    malloc_in::<false>(size)
}

/// `malloc` for C: blocks above 8 bytes are 16-byte aligned, as glibc guarantees.
#[cfg(feature = "c-api")]
#[inline(always)]
pub fn malloc_c(size: usize) -> *mut u8 {
    malloc_in::<true>(size)
}

#[inline(always)]
fn malloc_in<const C: bool>(size: usize) -> *mut u8 {
    let heap = tls::heap();
    // (The secure build: the heap's limit, `SMALL_MAX` less the padding.)
    #[cfg(feature = "secure")]
    // SAFETY: `heap` is the thread's heap or the empty heap.
    let limit = unsafe { (*heap).small_limit };
    #[cfg(not(feature = "secure"))]
    let limit = SMALL_MAX;
    if size > limit {
        return malloc_above_small::<C>(size, heap);
    }
    // SAFETY: `heap` is the thread's heap or the empty heap; both have valid tables, and
    // the page pointers in them are owned by this thread (or the never-written empty
    // page, whose free list is null).
    unsafe {
        (*heap).enter();
        let table = if C {
            &(*heap).small_class_c
        } else {
            &(*heap).small_class
        };
        // (The secure build's tables are indexed by the unpadded size: a heap's table
        // has its padding built in, `front::secure::pad_class_tables`.)
        let class = *table.get_unchecked(size) as usize;
        let page = (*heap).current.get_unchecked(class).load(Ordering::Relaxed);
        pop_or_slow::<C>(size, page, heap)
    }
}

/// `malloc` of more than `SMALL_MAX` bytes. Out of line (a tail call), so that the code
/// the small path would otherwise share with it (the pop) is not merged into one copy
/// that the small path has to jump to: that jump is one instruction of a small malloc.
#[inline(never)]
fn malloc_above_small<const C: bool>(size: usize, heap: *mut heap::Heap) -> *mut u8 {
    // SAFETY: as in `malloc_in`.
    unsafe {
        // (The secure build pads no request this big, `padded`: those of `SMALL_MAX`
        // bytes or less that come here, at most `CANARY` below it, would take a class
        // above it with their padding, and take it by the table below without.)
        // Without padding the table covers every size up to `MID_MAX`: 64 KiB
        // requests (the common size of the last 8) took `class_of`'s branch below, 5
        // instructions more, at level light too.
        #[cfg(feature = "secure")]
        let (pad, mid_limit) = (0, MID_MAX);
        #[cfg(not(feature = "secure"))]
        let (pad, mid_limit) = (pad(), MID_MAX - CANARY);
        let page = if size <= mid_limit {
            (*heap).enter();
            let index = (size + pad - 1) >> MID_SHIFT;
            // (Unpadded, sizes up to SMALL_MAX come here too: the limit above counts
            // the most padding. The secure build's table gives them the class above
            // SMALL_MAX, as the slow path does.)
            #[cfg(feature = "secure")]
            let class = *crate::front::secure::MID_CLASS.get_unchecked(index) as usize;
            #[cfg(not(feature = "secure"))]
            let class = *MID_CLASS.get_unchecked(index) as usize;
            (*heap).current.get_unchecked(class).load(Ordering::Relaxed)
        } else if size <= MEDIUM_MAX - CANARY {
            (*heap).enter();
            let class = class_of(size + pad);
            (*heap).current.get_unchecked(class).load(Ordering::Relaxed)
        } else if C {
            return alloc_big_c(size);
        } else {
            return alloc_big(size, SLICE_SIZE);
        };
        pop_or_slow::<C>(size, page, heap)
    }
}

/// Take the first free block of `page` and leave the window `malloc` entered, or go to
/// the slow path (which leaves it).
///
/// # Safety
/// `page` is `heap.current[class]` of the class of `size`, inside the `in_op` window.
#[inline(always)]
unsafe fn pop_or_slow<const C: bool>(
    size: usize,
    page: *mut crate::span::page::Page,
    heap: *mut heap::Heap,
) -> *mut u8 {
    // SAFETY: per the contract.
    unsafe {
        let block = (*page).free;
        if block.is_null() {
            return malloc_local_or_slow(size, page, heap, C);
        }
        #[cfg(not(feature = "secure"))]
        {
            (*page).free = (*page).link_fast(block);
        }
        // The secure build checks the link after storing it: no copy to test (the
        // process aborts if it fails, reading it back for the report).
        #[cfg(feature = "secure")]
        {
            let next = (*page).link_unchecked(block);
            (*page).free = next;
            crate::span::secure::check_fast_head(page, block as usize, next as usize);
        }
        (*page).clear_link(block);
        freed_key::clear(block);
        (*page).inc_used();
        (*heap).leave();
        block as *mut u8
    }
}

/// The heap's current page for a request of `size <= MEDIUM_MAX - CANARY` bytes (`C`:
/// 16-byte aligned above 8 bytes, as glibc guarantees).
///
/// # Safety
/// `heap` is the calling thread's heap (or the empty heap), inside its `in_op` window.
#[inline(always)]
unsafe fn current_page<const C: bool>(
    heap: *mut heap::Heap,
    size: usize,
) -> *mut crate::span::page::Page {
    debug_assert!(size <= MEDIUM_MAX - CANARY);
    // SAFETY: the tables have an entry for every index computed here.
    unsafe {
        if size <= SMALL_MAX - CANARY {
            let table = if C {
                &(*heap).small_class_c
            } else {
                &(*heap).small_class
            };
            // (Padded tables in the secure build, as `malloc`'s.)
            let class = *table.get_unchecked(size) as usize;
            return (*heap).current.get_unchecked(class).load(Ordering::Relaxed);
        }
        let size = padded(size);
        // (Beyond `SMALL_MAX - CANARY`, the classes above `SMALL_MAX`, as `malloc`'s.)
        #[cfg(feature = "secure")]
        let size = size.max(SMALL_MAX + 1);
        // Classes above SMALL_MAX are multiples of 16 bytes: no rounding for C.
        let class = if size <= MID_MAX {
            *MID_CLASS.get_unchecked((size - 1) >> MID_SHIFT) as usize
        } else {
            class_of(size)
        };
        (*heap).current.get_unchecked(class).load(Ordering::Relaxed)
    }
}

/// The page's free list is empty: take the blocks this thread freed into it (so a
/// malloc/free cycle of one block never needs the slow path), else the slow path.
/// Out of line (a tail call), it leaves the heap's `in_op` window the fast path entered.
/// Like every tail-called slow path here, it takes the caller's own first argument
/// first, so the fast path needs no register shuffle.
#[inline(never)]
fn malloc_local_or_slow(
    size: usize,
    page: *mut crate::span::page::Page,
    heap: *mut heap::Heap,
    c: bool,
) -> *mut u8 {
    // SAFETY: `page` came from the heap's table, so it is owned by this thread (or is the
    // empty page, whose lists are always null and which is never written here).
    unsafe {
        // The heap's mask is 0 while it samples: then this refill is the slow path's,
        // which counts the blocks (`profile::sampler`). One `and`, on the flags the
        // null test needs anyway. (The cast exposes the pointer's provenance.)
        let mask = (*heap).local_mask;
        let block = ((*page).local_free as usize & mask) as *mut Block;
        if block.is_null() {
            return malloc_carve_or_slow(size, page, heap, c, mask);
        }
        (*page).local_free = (*page).link(block);
        freed_key::clear(block);
        (*page).free = core::ptr::null_mut();
        core::mem::swap(&mut (*page).free, &mut (*page).local_free);
        (*page).clear_link(block);
        (*page).free_is_zero = false;
        (*page).frees_to_local = false;
        (*page).inc_used();
        (*heap).leave();
        block as *mut u8
    }
}

/// The page's lists are empty: carve its next batch of blocks here (`Page::extend`,
/// a few cache lines' worth, so their link words are still in L1 when they are
/// popped), else the slow path. Not while the heap samples (`mask` 0: the slow path
/// counts what the fast path hands out) nor while other threads' frees wait on the
/// page (`Page::can_carve_in_place`). Out of line from `malloc_local_or_slow`, which
/// then needs no stack frame for the call to `extend`.
#[inline(never)]
fn malloc_carve_or_slow(
    size: usize,
    page: *mut crate::span::page::Page,
    heap: *mut heap::Heap,
    c: bool,
    mask: usize,
) -> *mut u8 {
    // SAFETY: as in `malloc_local_or_slow`: the page is this thread's, inside the
    // window the fast path entered; the empty page never passes `can_carve_in_place`.
    unsafe {
        if mask == 0 {
            return malloc_sampled_refill_or_slow(size, page, heap, c);
        }
        // The secure build at level light carves and hands out the first block in one
        // (`Page::carve_light_and_pop`: no link written and read back for it). The
        // level is asked second: before a thread's first page the table names the empty
        // page, which never carves, and the level may not be read yet.
        #[cfg(feature = "secure")]
        if (*page).can_carve_in_place() && !crate::span::secure::full_set_up() {
            let block = (*page).carve_light_and_pop();
            (*heap).leave();
            return block;
        }
        if (*page).can_carve_in_place() && (*page).carve_in_place() {
            let block = slow::pop(page);
            (*heap).leave();
            return block;
        }
        if (*page).has_remote_frees() {
            return malloc_gather_or_slow(size, page, heap, c);
        }
    }
    malloc_slow_and_leave(size, heap, c)
}

/// The current page's lists are empty and other threads' frees wait on its
/// `thread_free`: take them in here (one `swap`, `Page::gather_frees`, as the slow
/// path's `find_page` would first) and pop, without the slow path's set-up. Out of line
/// (a tail call from `malloc_carve_or_slow`, whose carve keeps its shape).
///
/// What the slow path would also have done is kept: the run counts as one for the
/// idle-heap stealer (`Heap::activity`: a thread living on its remote frees is busy),
/// and a sweep the purger asked for (`Heap::sweep_wanted`) goes to the slow path.
/// Inside the fast path's `in_op` window, like its refill from `local_free`: the page's
/// lists are the owner's to change while no stealer has taken it (`protocol::Handshake`
/// step 4 gives up while the window is open), and taking `thread_free` is the owner's
/// `swap`, whoever pushes meanwhile.
#[inline(never)]
fn malloc_gather_or_slow(
    size: usize,
    page: *mut crate::span::page::Page,
    heap: *mut heap::Heap,
    c: bool,
) -> *mut u8 {
    // SAFETY: as in `malloc_local_or_slow`: the page is this thread's current page (the
    // empty page's `thread_free` is always null, so it never comes here), inside the
    // window the fast path entered; `heap` is this thread's heap.
    unsafe {
        if !(*heap).sweep_wanted.load(Ordering::Relaxed) {
            (*heap).took_remote_frees = true;
            (*page).gather_frees();
            if (*page).has_free() {
                let activity = (*heap).activity.load(Ordering::Relaxed);
                (*heap)
                    .activity
                    .store(activity.wrapping_add(1), Ordering::Relaxed);
                let block = slow::pop(page);
                (*heap).leave();
                return block;
            }
        }
    }
    malloc_slow_and_leave(size, heap, c)
}

/// The fast path's refills while the heap samples (`local_free` whole, or a carve),
/// counted (`slow::sampled_refill`), else the slow path. Out of line (a tail call), so
/// the carve above keeps its shape.
#[inline(never)]
fn malloc_sampled_refill_or_slow(
    size: usize,
    page: *mut crate::span::page::Page,
    heap: *mut heap::Heap,
    c: bool,
) -> *mut u8 {
    // SAFETY: as in `malloc_local_or_slow`, inside the window the fast path entered.
    unsafe {
        if let Some(block) = slow::sampled_refill(heap, page) {
            (*heap).leave();
            return block;
        }
    }
    malloc_slow_and_leave(size, heap, c)
}

/// The secure build's first allocation: read the options, then the slow path (whose
/// stack capture, for this one allocation, has this frame in it).
#[cfg(feature = "secure")]
#[cold]
#[inline(never)]
fn read_options_and_malloc(size: usize, heap: *mut heap::Heap, c: bool) -> *mut u8 {
    crate::span::secure::level();
    malloc_slow_and_leave(size, heap, c)
}

/// The malloc slow path, out of line so the fast path needs no stack frame (this is a
/// tail call); it leaves the heap's `in_op` window the fast path entered.
#[cold]
#[inline(never)]
fn malloc_slow_and_leave(size: usize, heap: *mut heap::Heap, c: bool) -> *mut u8 {
    // The secure build reads its options (the padding) before the class is picked
    // again here: the process's first allocation, which sets it up, comes here, and
    // goes through `read_options_and_malloc` (a call to read them here made this
    // function save five more registers on every slow path).
    #[cfg(feature = "secure")]
    if !crate::span::secure::level_read() {
        return read_options_and_malloc(size, heap, c);
    }
    // This frame is the first below the caller's (the fast path reached it by tail
    // calls): where a sample's stack capture starts (`profile::Entry`), taken first,
    // while the frame pointer register is still the caller's.
    let marker = 0u8;
    let entry = crate::profile::Entry::here(&marker);
    let class = {
        // The fast path's choice: the tables up to `SMALL_MAX` bytes with the padding,
        // the classes above `SMALL_MAX` beyond.
        let padded = padded(size);
        #[cfg(feature = "secure")]
        let above = padded.max(SMALL_MAX + 1);
        #[cfg(not(feature = "secure"))]
        let above = padded;
        // (The secure build: the tables of the padding now, not `heap`'s, which may
        // be the empty heap's, made before the padding was known.)
        #[cfg(feature = "secure")]
        let (table, table_c) = (
            &crate::front::secure::CLASSES,
            &crate::front::secure::CLASSES_C,
        );
        #[cfg(not(feature = "secure"))]
        // SAFETY: `heap` is this thread's heap or the empty heap, whose tables are the
        // same.
        let (table, table_c) = unsafe { (&(*heap).small_class, &(*heap).small_class_c) };
        // (The secure build's heaps take the tables up to `SMALL_MAX` less the
        // padding, `Heap::small_limit`; the bigger requests the classes above.)
        match (padded <= SMALL_MAX, c) {
            (true, false) => table[padded] as usize,
            (true, true) => table_c[padded] as usize,
            (false, false) => class_of(above),
            (false, true) => class_of((above + 15) & !15),
        }
    };
    let block = malloc_slow(class, size, entry);
    // SAFETY: the fast path entered this heap's window.
    unsafe { (*heap).leave() };
    if c && block.is_null() {
        // C callers learn of a failure through errno (set here, so the C fast path
        // needs no test of its own).
        os::set_errno(libc::ENOMEM);
    }
    block
}

/// `alloc_big` for C callers: sets errno to ENOMEM on failure.
#[cold]
#[inline(never)]
fn alloc_big_c(size: usize) -> *mut u8 {
    let p = alloc_big(size, SLICE_SIZE);
    if p.is_null() {
        os::set_errno(libc::ENOMEM);
    }
    p
}

/// Allocate `size` bytes aligned to `align` (any power of two). Null on failure.
#[inline(always)]
pub fn alloc(size: usize, align: usize) -> *mut u8 {
    if align <= MIN_ALIGN {
        return malloc(size);
    }
    if align == 16 {
        // The secure build: the C tables (as `alloc_zeroed`). Bigger requests are not
        // padded (`padded`) and take the classes above `SMALL_MAX` (or, at most
        // `CANARY` below it with no padding, `SMALL_MAX` itself), all of 16-byte
        // multiples: no rounding.
        #[cfg(feature = "secure")]
        return if size <= SMALL_MAX - CANARY {
            malloc_in::<true>(size)
        } else {
            malloc(size)
        };
        // Multiples of 16 map to classes that are multiples of 16; bigger blocks start
        // on slice boundaries anyway (and rounding them could overflow).
        #[cfg(not(feature = "secure"))]
        return malloc(if size <= MEDIUM_MAX - CANARY {
            ((size + pad() + 15) & !15).max(16) - pad()
        } else {
            size
        });
    }
    alloc_aligned(size, align)
}

#[cold]
#[inline(never)]
fn alloc_aligned(size: usize, align: usize) -> *mut u8 {
    debug_assert!(align.is_power_of_two());
    if align <= SLICE_SIZE {
        let pad = pad();
        if let Some(class) = class_for_aligned(padded(size), align) {
            // (A request of the class size less the padding takes the class, whether
            // it is padded or not: the classes above `SMALL_MAX` are `MID_STEP` (16) bytes
            // apart, more than the padding.)
            let p = malloc(class_size(class) - pad);
            #[cfg(feature = "secure")]
            if p as usize % align != 0 {
                return crate::front::secure::padding_changed(p, size, align);
            }
            debug_assert!(p as usize % align == 0);
            return p;
        }
    }
    alloc_big(size, align)
}

/// Blocks above `MEDIUM_MAX`, or with alignment above one slice.
#[cold]
#[inline(never)]
fn alloc_big(size: usize, align: usize) -> *mut u8 {
    if !crate::process::is_initialized() {
        // A process whose first request is big: the set-up the first small request
        // does (the environment's profiler, exit statistics and reports) comes first,
        // or this block would be the one the profiler never saw.
        heap::ensure_heap();
    }
    if size <= LARGE_MAX {
        #[cfg(feature = "secure")]
        let span = crate::span::secure::alloc_large(size, align);
        #[cfg(not(feature = "secure"))]
        let span = crate::span::arena::alloc_large(size.max(1), align);
        if let Some(page) = span {
            // SAFETY: alloc_large returns a valid span head.
            return counted_big(unsafe { (*page).start }, size);
        }
    }
    counted_big(huge::alloc(size, align), size)
}

/// A block above `MEDIUM_MAX`: counted by the heap profiler while it runs.
#[inline(always)]
fn counted_big(block: *mut u8, size: usize) -> *mut u8 {
    if crate::profile::is_active() && !block.is_null() {
        sample_big(block, size);
    }
    block
}

#[cold]
#[inline(never)]
fn sample_big(block: *mut u8, size: usize) {
    let marker = 0u8;
    crate::profile::big_allocated(block, size, crate::profile::Entry::here(&marker));
}

/// Allocate zeroed memory. Memory fresh from the OS is known to be zero and is not
/// written again.
#[inline]
pub fn alloc_zeroed(size: usize, align: usize) -> *mut u8 {
    if size <= MEDIUM_MAX - CANARY {
        if align <= MIN_ALIGN {
            return malloc_zeroed(size);
        }
        if align == 16 {
            // The secure build: the C tables' classes are 16-byte multiples with the
            // padding built in, so no rounding here (two loads of the padding) and no
            // block to make again if the padding changed. Bigger blocks take the
            // general path, out of line: its check of the alignment after zeroing
            // would give this function a stack frame.
            #[cfg(feature = "secure")]
            return if size <= SMALL_MAX - CANARY {
                malloc_zeroed_in::<true>(size)
            } else {
                alloc_zeroed_any(size, align)
            };
            #[cfg(not(feature = "secure"))]
            return malloc_zeroed(((size + pad() + 15) & !15).max(16) - pad());
        }
    }
    alloc_zeroed_any(size, align)
}

/// `malloc` then zero, for `size <= MEDIUM_MAX - CANARY`: on the fast path, whether the block's
/// list is known zero is read while popping it, inside the same `in_op` window (no
/// second page lookup).
#[inline(always)]
fn malloc_zeroed(size: usize) -> *mut u8 {
    malloc_zeroed_in::<false>(size)
}

/// `malloc_zeroed` (`C`: 16-byte aligned above 8 bytes, from the C tables).
#[inline(always)]
fn malloc_zeroed_in<const C: bool>(size: usize) -> *mut u8 {
    debug_assert!(size <= MEDIUM_MAX - CANARY);
    let heap = tls::heap();
    // SAFETY: as in `malloc_in`: the table entries are pages owned by this thread (or the
    // never-written empty page), used only inside the window.
    unsafe {
        (*heap).enter();
        let page = current_page::<C>(heap, size);
        let block = (*page).free;
        if block.is_null() {
            (*heap).leave();
            return alloc_zeroed_any(size, if C { 16 } else { MIN_ALIGN });
        }
        let zero = (*page).free_is_zero;
        (*page).free = (*page).link_fast(block);
        (*page).clear_link(block);
        freed_key::clear(block);
        (*page).inc_used();
        (*heap).leave();
        if zero {
            // Only the link word was ever written.
            (block as *mut usize).write(0);
        } else {
            core::ptr::write_bytes(block as *mut u8, 0, size);
        }
        block as *mut u8
    }
}

/// The general `alloc_zeroed`: allocate, then find out whether the block is known zero.
#[inline(never)]
fn alloc_zeroed_any(size: usize, align: usize) -> *mut u8 {
    let p = alloc(size, align);
    if p.is_null() {
        return p;
    }
    let seg = segment::segment_of(p);
    if seg.is_null() {
        // A guarded block: zeroed when it was handed out (front/guarded.rs).
        return p;
    }
    // SAFETY: p is a live block of at least `size` bytes, so its descriptor is valid.
    unsafe {
        let page = segment::page_of(seg, p);
        match (*page).owner.load(Ordering::Relaxed) {
            HUGE => {
                if !(*page).is_zero {
                    // Kept pages (or free spans' pages) moved in: written with zeros, as
                    // every other allocator clears reused memory. Giving them back
                    // instead (`MADV_DONTNEED`) made the program fault every page in
                    // again as it wrote it: four threads replacing calloc'd 1-30 MiB
                    // buffers took 23 s against glibc's 4.6 s, 3.75 million faults,
                    // each slowed by the others' (one fault per page instead of one
                    // write per byte, and the page-table lock shared by all threads).
                    core::ptr::write_bytes(p, 0, size);
                }
            }
            LARGE => {
                if !(*page).is_zero {
                    core::ptr::write_bytes(p, 0, size);
                }
            }
            _ => {
                // free_is_zero describes the list the block came from, and only the
                // page's owner changes it. `malloc` left its `in_op` window already, so
                // an idle-heap steal may have taken the page since (and another heap
                // carved fresh, zero blocks into it): read the flag inside a window of
                // our own, and only while the page is still ours (see steal.rs; found
                // by the loom model in crates/ebb-loom).
                let heap = tls::heap();
                (*heap).enter();
                let zero = (*page).owner.load(Ordering::Relaxed) & !CHECK_TAG == heap as usize
                    && (*page).free_is_zero;
                (*heap).leave();
                if zero {
                    (p as *mut usize).write(0);
                } else {
                    core::ptr::write_bytes(p, 0, size);
                }
            }
        }
    }
    p
}

/// Usable size of a live block (at least what was asked for). 0 for null or foreign.
///
/// # Safety
/// `ptr` must be null or a live block from this allocator.
// (The secure build's one more case made it a call from C `realloc`, which the default
// build inlines: 3.7 million of prodcons's 83 million instructions at level light.)
#[cfg_attr(feature = "secure", inline)]
pub unsafe fn usable_size(ptr: *const u8) -> usize {
    // SAFETY: per the contract.
    unsafe { usable_size_of(ptr) }
}

/// [`usable_size`] of block `ptr` of descriptor `page`, known to be the start of its
/// block, as C `realloc` knows it (`c_api::ours` checked it, and found `page`) and
/// Rust's `realloc` (`realloc::realloc_start`: every block ebb hands out is one): no
/// second lookup, and a block of a page of blocks needs no remainder (a division) to
/// find its end.
///
/// # Safety
/// `ptr` is the start of a live block of this allocator and `page` its descriptor.
#[inline(always)]
pub unsafe fn usable_size_at_start(page: *mut crate::span::page::Page, ptr: *const u8) -> usize {
    // SAFETY: per the contract.
    unsafe { usable_of_page::<true>(page, ptr) }
}

/// [`usable_size`].
///
/// # Safety
/// As [`usable_size`].
#[inline(always)]
unsafe fn usable_size_of(ptr: *const u8) -> usize {
    let seg = segment::segment_holding(ptr);
    if seg.is_null() {
        return guarded::live_size(ptr, "malloc_usable_size")
            .flatten()
            .unwrap_or(0);
    }
    // SAFETY: per the contract.
    unsafe { usable_of_page::<false>(segment::page_of(seg, ptr), ptr) }
}

/// The usable size of live block `ptr` of descriptor `page` (`START`: `ptr` is known to
/// be its block's start).
///
/// # Safety
/// `page` is the descriptor of `ptr`, a live block.
#[inline(always)]
unsafe fn usable_of_page<const START: bool>(
    page: *mut crate::span::page::Page,
    ptr: *const u8,
) -> usize {
    // SAFETY: per the contract.
    unsafe {
        match (*page).owner.load(Ordering::Relaxed) {
            HUGE => huge::usable_size(page),
            // A large span (also a first-class heap's, which its heap owns) has its
            // canary after the block.
            #[cfg(feature = "secure")]
            owner if owner == LARGE || (*page).large_canary => {
                (*page).block_size() - (ptr as usize - (*page).start as usize)
            }
            _ if START => (*page).block_size().saturating_sub(reserved_tail(page)),
            _ => ((*page).block_size()
                - (ptr as usize - (*page).start as usize) % (*page).block_size())
            .saturating_sub(reserved_tail(page)),
        }
    }
}
