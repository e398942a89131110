//! First-class heaps: a heap the program creates, allocates from on one thread, and
//! then destroys whole (every block at once) or deletes (its live blocks handed over).
//!
//! A first-class heap is a `front::heap::Heap` that is not installed in TLS and not in
//! the registry of thread heaps, plus two lists the thread heaps do not need:
//!
//! - `full`: pages of the heap with no free block. A thread heap abandons such pages
//!   (beyond the few it keeps); a first-class heap must keep every page it ever carved,
//!   because `destroy` frees them all without visiting blocks. Parked here they cost the
//!   malloc slow path nothing; `rescan` moves back the ones blocks were freed into.
//! - `large`: spans of one block above `MEDIUM_MAX` (up to `LARGE_MAX`). Ordinary large
//!   spans belong to nobody (`LARGE`); a heap's carry the heap's owner word, so
//!   `destroy` can find them and a free by another thread is a remote push like any
//!   other block of the heap.
//!
//! Pages on either list have `listed` set (for an owned page the word otherwise means
//! nothing: only abandoned pages are on the arena's lists), so a free into one knows
//! the page is not in a class queue.
//!
//! It never claims an abandoned page (those hold other heaps' blocks, which `destroy`
//! would take with it): its pages are always fresh spans. Not being registered, it is
//! never swept or taken over by the purger: a heap whose thread sleeps keeps its pages,
//! as an arena would, and blocks other threads free into it wait for its next slow path,
//! `collect`, `destroy` or `delete`. Spans it gives back are purged like any others.
//! Since no stealer ever looks at it, its calls need no `in_op` window.

use crate::front::alloc;
use crate::front::heap::{ensure_heap, Heap};
use crate::front::queue::{queue_push_back, queue_push_front, queue_remove};
use crate::front::{check, slow, tls};
use crate::handoff::abandon;
use crate::os;
use crate::process::purger::after_slow_path;
use crate::profile;
use crate::size_class::{
    class_for_aligned, class_of, class_size, page_slices, CLASS_COUNT, MEDIUM_MAX, MID_CLASS,
    MID_MAX, MID_SHIFT, SMALL_MAX,
};
use crate::span::deadline;
use crate::span::page::{Block, Page, PageList, CHECK_TAG, DRAINING};
use crate::span::segment::{self, SLICE_SIZE};
use crate::span::{arena, huge};
use crate::sync::Mutex;
use core::fmt::Write;
use core::ptr::{addr_of_mut, null_mut};
use core::sync::atomic::Ordering;

/// A first-class heap (see the module documentation). `heap` first: the owner word of
/// its pages is the address of the whole struct.
#[repr(C)]
pub struct FirstClass {
    heap: Heap,
    /// The creating thread's own (TLS) heap: who may allocate from this one.
    owner_thread: *mut Heap,
    full: PageList,
    large: PageList,
    /// Pages on `full` and `large`.
    parked: usize,
    /// Pages taken from the arena since the last `rescan`.
    taken_since_scan: usize,
}

/// Per-heap figures (`ebb::Heap::stats`, `ebb_heap_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct HeapStats {
    /// Pages (and large-block spans) the heap holds.
    pub pages: u64,
    /// Bytes of those pages' spans.
    pub page_bytes: u64,
    /// Blocks in use (after taking in other threads' frees).
    pub live_blocks: u64,
    /// Bytes of those blocks (block sizes, i.e. requests rounded up to their class).
    pub live_bytes: u64,
    /// Large blocks (above `MEDIUM_MAX`) among them.
    pub large_blocks: u64,
}

fn bytes() -> usize {
    core::mem::size_of::<FirstClass>().next_multiple_of(os::page_size())
}

/// Memory of disposed heaps, kept for the next `create`: a heap per request would
/// otherwise pay an mmap, page faults and an munmap each time (measured, 100 objects
/// per request: 22 times slower than ordinary frees without the cache).
struct SpareHeaps {
    heaps: [usize; SPARE_HEAPS_KEPT],
    count: usize,
}
const SPARE_HEAPS_KEPT: usize = 8;
static SPARE_HEAPS: Mutex<SpareHeaps> = Mutex::new(SpareHeaps {
    heaps: [0; SPARE_HEAPS_KEPT],
    count: 0,
});

fn take_spare() -> *mut FirstClass {
    let mut spare = SPARE_HEAPS.lock();
    if spare.count == 0 {
        return null_mut();
    }
    spare.count -= 1;
    spare.heaps[spare.count] as *mut FirstClass
}

/// Make a heap owned by the calling thread. Null if the OS refused memory.
pub fn create() -> *mut FirstClass {
    let owner_thread = ensure_heap();
    if owner_thread.is_null() {
        return null_mut();
    }
    let mut memory = take_spare();
    if memory.is_null() {
        memory = os::reserve_aligned(bytes(), os::page_size()) as *mut FirstClass;
    }
    if memory.is_null() {
        return null_mut();
    }
    let check = crate::options::get().check;
    // SAFETY: fresh or spare memory of the right size and alignment, known to nobody
    // else (a spare heap's pages all went to other owners when it was disposed).
    unsafe {
        memory.write(FirstClass {
            heap: Heap::empty(),
            owner_thread,
            full: PageList::new(),
            large: PageList::new(),
            parked: 0,
            taken_since_scan: 0,
        });
        (*memory).heap.owner_word = memory as usize | if check { CHECK_TAG } else { 0 };
    }
    memory
}

/// True if the calling thread created `fc`.
#[inline(always)]
fn on_owner_thread(fc: *mut FirstClass) -> bool {
    // SAFETY: `owner_thread` is written once, before the heap is handed out.
    tls::heap() == unsafe { (*fc).owner_thread }
}

/// Abort: a heap was allocated from (or destroyed) by a thread that does not own it.
#[cold]
#[inline(never)]
fn wrong_thread(fc: *mut FirstClass, what: &str) -> ! {
    let mut w = crate::diag::StderrWriter::new();
    let _ = writeln!(
        w,
        "ebb: {what} on heap {fc:p} from a thread that does not own it \
         (only its creating thread may allocate from a heap or destroy it)"
    );
    w.flush();
    os::abort()
}

/// Allocate `size` bytes aligned to `align` from `fc`. Null on failure.
///
/// # Safety
/// `fc` must be a live heap (from `create`, not yet destroyed or deleted). The calling
/// thread must be its owner (checked on every call in debug builds, on the slow path
/// always).
#[inline]
pub unsafe fn alloc(fc: *mut FirstClass, size: usize, align: usize) -> *mut u8 {
    if cfg!(debug_assertions) && !on_owner_thread(fc) {
        wrong_thread(fc, "allocation");
    }
    // Size 0 maps to the 8-byte class: with align 16 it takes the rounding below (a
    // 16-byte block; found by the secure build's random carving order, where the first
    // block of a page is not always at a 16-byte multiple).
    // (The secure build's canary: the class of `size + pad`, `alloc::padded`.)
    let padded = alloc::padded(size);
    let class = if align <= alloc::MIN_ALIGN || (align == 16 && padded % 16 == 0 && size != 0) {
        if padded > MEDIUM_MAX {
            // SAFETY: forwarded.
            return unsafe { alloc_large(fc, size, SLICE_SIZE) };
        }
        let size = padded;
        // SAFETY: `small_class` has an entry for every size up to SMALL_MAX.
        unsafe {
            if size <= SMALL_MAX {
                *(*fc).heap.small_class.get_unchecked(size) as usize
            } else if size <= MID_MAX {
                *MID_CLASS.get_unchecked((size - 1) >> MID_SHIFT) as usize
            } else {
                class_of(size)
            }
        }
    } else {
        let rounded = if align == 16 {
            padded.next_multiple_of(16).max(16)
        } else {
            padded
        };
        match class_for_aligned(rounded, align) {
            Some(class) if align <= SLICE_SIZE => class,
            // SAFETY: forwarded.
            _ => return unsafe { alloc_large(fc, size, align.max(SLICE_SIZE)) },
        }
    };
    // SAFETY: `current[class]` is a page the heap owns, or the never-written empty page.
    unsafe {
        let page = (*fc)
            .heap
            .current
            .get_unchecked(class)
            .load(Ordering::Relaxed);
        let block = (*page).free;
        if block.is_null() {
            return malloc_slow(fc, class, size);
        }
        (*page).free = (*page).link_fast(block);
        (*page).clear_link(block);
        (*page).inc_used();
        block as *mut u8
    }
}

/// Allocate zeroed memory from `fc`.
///
/// # Safety
/// As `alloc`.
pub unsafe fn alloc_zeroed(fc: *mut FirstClass, size: usize, align: usize) -> *mut u8 {
    // SAFETY: forwarded; the block has at least `size` bytes.
    unsafe {
        let p = alloc(fc, size, align);
        if !p.is_null() {
            core::ptr::write_bytes(p, 0, size);
        }
        p
    }
}

#[cold]
#[inline(never)]
unsafe fn malloc_slow(fc: *mut FirstClass, class: usize, size: usize) -> *mut u8 {
    // Where a sample's stack starts (`profile::Entry`; the fast path is inlined into
    // the caller, so this is the first allocator frame below it).
    let marker = 0u8;
    let entry = profile::Entry::here(&marker);
    if !on_owner_thread(fc) {
        wrong_thread(fc, "allocation");
    }
    // SAFETY: the calling thread owns the heap (checked above).
    let block = unsafe {
        // Sampling as a thread heap's slow path does (`profile::sampler`), but a sample
        // is served from a large span of the heap's own, so `destroy` takes it too
        // (`release` credits it).
        let h = &mut (*fc).heap;
        let checked = h.owner_word & CHECK_TAG != 0;
        let block_size = class_size(class);
        let sampling = profile::sync(&mut h.sampler, &mut h.local_mask, true);
        if sampling && profile::sample_point(&mut h.sampler, class, block_size) {
            let block = alloc_large(fc, size, SLICE_SIZE);
            if !block.is_null() {
                profile::record_sampled(block, size, block_size, entry);
                return block;
            }
        }
        let page = find_page(fc, class);
        if page.is_null() {
            return null_mut();
        }
        let block = slow::pop(page);
        if checked {
            check::mark_allocated(block);
        } else if sampling {
            profile::cut(&mut (*fc).heap.sampler, page, class, block_size, None);
        }
        block
    };
    after_slow_path();
    block
}

/// `slow::find_page` for a first-class heap: full pages are parked instead of
/// abandoned, and new pages are always fresh spans.
///
/// # Safety
/// The calling thread owns `fc`.
unsafe fn find_page(fc: *mut FirstClass, class: usize) -> *mut Page {
    // SAFETY: the heap and every page in its queues and lists are ours.
    unsafe {
        let heap = addr_of_mut!((*fc).heap);
        let mut page = (*heap).queues[class].first;
        while !page.is_null() {
            let next = (*page).next;
            (*page).gather_frees();
            if (*page).has_free() || (*page).extend() {
                if page != (*heap).queues[class].first {
                    (*heap).queues[class].remove(page);
                    (*heap).queues[class].push_front(page);
                    (*heap).set_current(class, page);
                }
                return page;
            }
            queue_remove(heap, class, page);
            (*page).listed = true;
            (*fc).full.push_back(page);
            (*fc).parked += 1;
            page = next;
        }
        if note_taken(fc) {
            let page = (*heap).queues[class].first;
            if !page.is_null() && ((*page).has_free() || (*page).extend()) {
                return page;
            }
        }
        let Some((page, _)) = arena::alloc_span(page_slices(class), 1) else {
            return null_mut();
        };
        let bytes = (*page).span_bytes();
        (*page).init_blocks(class, class_size(class), bytes);
        (*page).owner.store((*heap).owner_word, Ordering::Release);
        if !(*page).extend() {
            debug_assert!(false, "a fresh page without room");
        }
        queue_push_front(heap, class, page);
        page
    }
}

/// Count a page taken from the arena; once as many were taken as are parked, move
/// the parked pages blocks were freed into back to their queues (so the walk costs
/// O(1) per page taken). True if it did.
///
/// # Safety
/// The calling thread owns `fc`.
unsafe fn note_taken(fc: *mut FirstClass) -> bool {
    // SAFETY: per the contract.
    unsafe {
        (*fc).taken_since_scan += 1;
        if (*fc).taken_since_scan <= (*fc).parked {
            return false;
        }
        (*fc).taken_since_scan = 0;
        rescan(fc);
    }
    true
}

/// Take in the frees into parked pages: unused ones go back to the arena, full pages
/// with room again go back to their queues.
///
/// # Safety
/// The calling thread owns `fc`.
unsafe fn rescan(fc: *mut FirstClass) {
    // SAFETY: per the contract, the lists and their pages are ours.
    unsafe {
        for list in [addr_of_mut!((*fc).full), addr_of_mut!((*fc).large)] {
            let mut page = (*list).first;
            while !page.is_null() {
                let next = (*page).next;
                (*page).gather_frees();
                if (*page).is_unused() {
                    unpark(fc, list, page);
                    release(page);
                } else if list == addr_of_mut!((*fc).full) && (*page).has_room() {
                    unpark(fc, list, page);
                    queue_push_back(addr_of_mut!((*fc).heap), (*page).class as usize, page);
                }
                page = next;
            }
        }
    }
}

/// # Safety
/// `page` is on `list`, one of `fc`'s, and the calling thread owns `fc`.
unsafe fn unpark(fc: *mut FirstClass, list: *mut PageList, page: *mut Page) {
    // SAFETY: per the contract.
    unsafe {
        (*list).remove(page);
        (*page).listed = false;
        (*fc).parked -= 1;
    }
}

/// Give an owned, unlisted page back to the arena without looking at its blocks.
///
/// # Safety
/// The caller owns `page`, which is in no list; its blocks become invalid.
unsafe fn release(page: *mut Page) {
    // SAFETY: per the contract.
    unsafe {
        profile::span_released(page);
        // A late free (of a block `destroy` invalidated) finds a marker, then FREE.
        (*page).owner.store(DRAINING, Ordering::Relaxed);
        // Pushes nobody will take in: the next user of the span must not see them
        // (`init_blocks` clears the list, `alloc_large` does not).
        (*page).thread_free.store(null_mut(), Ordering::Relaxed);
        arena::free_span(page, deadline::coarse_now_ms());
    }
}

/// A block above `MEDIUM_MAX` (or aligned beyond a slice): a span of the heap's own, or
/// above `LARGE_MAX` an ordinary huge block, which the heap does not own.
///
/// # Safety
/// The calling thread owns `fc`.
#[cold]
#[inline(never)]
unsafe fn alloc_large(fc: *mut FirstClass, size: usize, align: usize) -> *mut u8 {
    if !on_owner_thread(fc) {
        wrong_thread(fc, "allocation");
    }
    #[cfg(feature = "secure")]
    let span = crate::span::secure::alloc_large(size, align);
    #[cfg(not(feature = "secure"))]
    let span = arena::alloc_large(size.max(1), align);
    let Some(page) = span else {
        return huge::alloc(size, align);
    };
    // SAFETY: the span is ours (nobody else has its address yet); so is the heap.
    unsafe {
        (*page).thread_free.store(null_mut(), Ordering::Relaxed);
        (*page).local_free = null_mut();
        (*page).free = null_mut();
        (*page).listed = true;
        (*page)
            .owner
            .store((*fc).heap.owner_word, Ordering::Release);
        (*fc).large.push_back(page);
        (*fc).parked += 1;
        note_taken(fc);
        after_slow_path();
        (*page).start
    }
}

/// Free a block of any heap through `fc`: a block of `fc`'s own, freed on its owner
/// thread, is freed locally; every other block takes the ordinary `free`.
///
/// # Safety
/// `fc` must be live; `ptr` null or a live block of this allocator.
#[inline]
pub unsafe fn free(fc: *mut FirstClass, ptr: *mut u8) {
    let seg = segment::segment_of(ptr);
    // SAFETY: per the contract; a page owned by `fc` is touched only on its thread.
    unsafe {
        if !seg.is_null() {
            let page = segment::page_of(seg, ptr);
            #[cfg(feature = "secure")]
            if !crate::front::secure::free_passes(page, ptr) {
                crate::front::secure::free_rejected(ptr, page);
                return;
            }
            if (*page).owner.load(Ordering::Relaxed) == (*fc).heap.owner_word
                && (*fc).heap.owner_word & CHECK_TAG == 0
                && on_owner_thread(fc)
            {
                if (*page).free_local(ptr as *mut Block) {
                    page_emptied(fc, page);
                }
                return;
            }
        }
        crate::front::free::free(ptr);
    }
}

/// A local free emptied `page` (not a current page, unless of a class above 8 KiB).
#[cold]
#[inline(never)]
unsafe fn page_emptied(fc: *mut FirstClass, page: *mut Page) {
    // SAFETY: the calling thread owns `fc` and `page`.
    unsafe {
        if (*page).listed {
            let list = if (*page).reserved == 1 {
                addr_of_mut!((*fc).large)
            } else {
                addr_of_mut!((*fc).full)
            };
            unpark(fc, list, page);
        } else {
            let heap = addr_of_mut!((*fc).heap);
            let class = (*page).class as usize;
            if (*heap).current_page(class) == page
                || ((*heap).queues[class].first == page && (*page).next.is_null())
            {
                // The current page (of a class above 8 KiB, which has no `CURRENT`
                // flag), or the only page of its class: keep it.
                return;
            }
            queue_remove(heap, class, page);
            (*page).gather_frees();
        }
        release(page);
    }
    after_slow_path();
}

/// Resize a block of `fc`: in place if it still fits, else allocate from `fc`, copy and
/// free.
///
/// # Safety
/// As `alloc`; `ptr` a live block allocated with `align`, `old_size` bytes of it valid.
pub unsafe fn realloc(
    fc: *mut FirstClass,
    ptr: *mut u8,
    old_size: usize,
    new_size: usize,
    align: usize,
) -> *mut u8 {
    // SAFETY: per the contract.
    unsafe {
        if ptr.is_null() {
            return alloc(fc, new_size, align);
        }
        let usable = alloc::usable_size(ptr);
        if new_size <= usable && new_size >= usable / 2 && ptr as usize & (align - 1) == 0 {
            return ptr;
        }
        let new = alloc(fc, new_size, align);
        if !new.is_null() {
            core::ptr::copy_nonoverlapping(ptr, new, old_size.min(new_size));
            free(fc, ptr);
        }
        new
    }
}

/// Take in every free into the heap's pages and give unused pages back to the arena.
///
/// # Safety
/// `fc` live, the calling thread its owner.
pub unsafe fn collect(fc: *mut FirstClass) {
    if !on_owner_thread(fc) {
        wrong_thread(fc, "collect");
    }
    // SAFETY: per the contract.
    unsafe {
        rescan(fc);
        (*fc).taken_since_scan = 0;
        let heap = addr_of_mut!((*fc).heap);
        for class in 0..CLASS_COUNT {
            let mut page = (*heap).queues[class].first;
            while !page.is_null() {
                let next = (*page).next;
                (*page).gather_frees();
                if (*page).is_unused() {
                    queue_remove(heap, class, page);
                    release(page);
                }
                page = next;
            }
        }
    }
    after_slow_path();
}

/// Calls `visit` for every page of the heap (queues, parked lists).
///
/// # Safety
/// `fc` live, the calling thread its owner; `visit` may not unlink pages.
unsafe fn for_each_page(fc: *mut FirstClass, mut visit: impl FnMut(*mut Page)) {
    // SAFETY: per the contract.
    unsafe {
        let lists = (*fc).heap.queues.iter().chain([&(*fc).full, &(*fc).large]);
        for list in lists {
            let mut page = list.first;
            while !page.is_null() {
                let next = (*page).next;
                visit(page);
                page = next;
            }
        }
    }
}

/// The heap's figures. Takes in other threads' frees first.
///
/// # Safety
/// `fc` live, the calling thread its owner.
pub unsafe fn stats(fc: *mut FirstClass) -> HeapStats {
    if !on_owner_thread(fc) {
        wrong_thread(fc, "stats");
    }
    let mut stats = HeapStats::default();
    // SAFETY: per the contract.
    unsafe {
        for_each_page(fc, |page| {
            (*page).gather_frees();
            let used = u64::from((*page).used());
            stats.pages += 1;
            stats.page_bytes += (*page).span_bytes() as u64;
            stats.live_blocks += used;
            stats.live_bytes += used * (*page).block_size() as u64;
            if (*page).reserved == 1 && (*page).listed {
                stats.large_blocks += used;
            }
        });
    }
    stats
}

/// Free every page of the heap at once (its blocks become invalid) and the heap itself.
/// Time proportional to its pages, not its blocks.
///
/// # Safety
/// `fc` live, the calling thread its owner; no block of the heap is used afterwards.
pub unsafe fn destroy(fc: *mut FirstClass) {
    if !on_owner_thread(fc) {
        wrong_thread(fc, "destroy");
    }
    // SAFETY: per the contract; every page is ours and unlinked before it is released.
    unsafe {
        let check_mode = (*fc).heap.owner_word & CHECK_TAG != 0;
        for_each_page(fc, |page| {
            (*page).set_is_current(false);
            (*page).listed = false;
            (*page).next = null_mut();
            (*page).prev = null_mut();
            if check_mode {
                let start = ((*page).start as usize & !(SLICE_SIZE - 1)) as *mut u8;
                check::forget_span(start, (*page).span_bytes());
            }
            release(page);
        });
        dispose(fc);
    }
    after_slow_path();
}

/// Hand the heap's live blocks over (they stay valid, and any thread may free them)
/// and free the heap: every page is abandoned as a thread's are at exit, so unused
/// ones go back to the arena and the others become claimable by any heap once blocks
/// come back. (`last_owner` 0: the heap is gone, nobody takes its pages back as "mine".)
///
/// # Safety
/// `fc` live, the calling thread its owner.
pub unsafe fn delete(fc: *mut FirstClass) {
    if !on_owner_thread(fc) {
        wrong_thread(fc, "delete");
    }
    // SAFETY: per the contract.
    unsafe {
        let now = deadline::coarse_now_ms();
        let heap = addr_of_mut!((*fc).heap);
        (*heap).clear_tables();
        for class in 0..CLASS_COUNT {
            loop {
                let page = (*heap).queues[class].first;
                if page.is_null() {
                    break;
                }
                queue_remove(heap, class, page);
                abandon::abandon(page, 0, now);
            }
        }
        // Parked pages: a full page, or a large span (abandoned with no room, it is
        // never listed; the drainer frees it once its block comes back).
        for list in [addr_of_mut!((*fc).full), addr_of_mut!((*fc).large)] {
            loop {
                let page = (*list).first;
                if page.is_null() {
                    break;
                }
                unpark(fc, list, page);
                abandon::abandon(page, 0, now);
            }
        }
        dispose(fc);
    }
    after_slow_path();
}

/// Keep the heap's own memory for the next `create`, or unmap it.
///
/// # Safety
/// Nothing refers to `fc` any more (its pages are gone or have other owners).
unsafe fn dispose(fc: *mut FirstClass) {
    {
        let mut spare = SPARE_HEAPS.lock();
        if spare.count < SPARE_HEAPS_KEPT {
            let count = spare.count;
            spare.heaps[count] = fc as usize;
            spare.count += 1;
            return;
        }
    }
    // SAFETY: per the contract; `create` mapped exactly `bytes()` bytes.
    unsafe { os::release(fc as *mut u8, bytes()) };
}
