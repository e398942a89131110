//! The secure build's checks on free (`secure` feature; the rest is in `crate::span::secure`).
//!
//! Every free, on the fast path, before the block goes anywhere:
//! - the pointer must be the start of a block carved in its page (one multiply and
//!   one compare, `secure::is_block_start`);
//! - the block's first word must not be a valid encoded link: a free block always
//!   holds one (its list link, encoded with the page's key), a block in use never does
//!   (the pop clears the word), so finding one is a double free, whichever list of
//!   whichever thread the block is on;
//! - the block's last word must be its canary (`secure::small_canary`, written when
//!   the block was carved; pages with `small_canary`): anything else is an
//!   overflow past the end of the block (its usable size is its class size less the
//!   canary, `alloc::CANARY`);
//! - with `EBB_ZERO_ON_FREE`, the block is then zeroed.
//!
//! The fast path tests the first word only for what is cheap: whether it decodes to a
//! user-space address at all (`secure::may_be_link`: a live block's word almost never
//! does, since keys have their top bit set). A free that fails any test, or that has
//! to zero its block, goes to [`free_rejected_and_leave`], which tells the cases apart
//! by the page's owner word: large and huge blocks are freed as usual; for small
//! blocks the range check decides (a link into the page: a double free; else a live
//! block whose word happened to look like an address, freed as usual, zeroed first
//! with `EBB_ZERO_ON_FREE`). A detected error is reported and the process aborts,
//! whatever `EBB_ABORT_ON_ERROR` says (the secure build forces it on).

use crate::front::heap::Heap;
use crate::front::slow;
use crate::size_class::{
    class_of, small_classes, MEDIUM_MAX, MID_COUNT, MID_STEP, SMALL_COUNT, SMALL_MAX,
};
use crate::span::page::{Page, FREE, HUGE, LARGE};
use crate::span::{secure, segment};
use core::sync::atomic::Ordering;

/// True if freeing `ptr` into `page` passes the secure checks; false if the free
/// needs a closer look (or zeroing) on the cold path, [`free_rejected_and_leave`].
///
/// # Safety
/// `page` is the descriptor `ptr` maps to (`segment::page_of`).
#[inline(always)]
pub unsafe fn free_passes(page: *mut Page, ptr: *mut u8) -> bool {
    // SAFETY: a descriptor's fields are readable at any time; `block_limit` only grows
    // while the page holds blocks, and a block reaches its freer after it was carved
    // (the program's own synchronisation), so a stale value is never too small. The
    // block's first word is readable once it is a carved block of the page.
    unsafe {
        let offset = (ptr as usize).wrapping_sub((*page).start as usize);
        let limit = core::ptr::read_volatile(&(*page).block_limit);
        if !secure::is_block_start(offset, (*page).block_magic, limit) {
            return false;
        }
        let word = *(ptr as *const usize);
        // (The push's encoding and the canary share this tweak, `secure::tweak`.)
        !secure::may_be_link(secure::tweak((*page).key, ptr as usize), word)
            && secure::small_canary_intact(&*page, ptr)
    }
}

/// What is wrong with `ptr` as a live block of `page`, a page of blocks (C
/// `realloc`, `malloc_usable_size`, sized `delete`): not the start of a carved
/// block, or a free one; None for a live block. The free fast path's tests
/// ([`free_passes`]): one multiply and one compare for the start
/// (`secure::is_block_start`; the carved blocks' limit is worked out here only with
/// `EBB_ZERO_ON_FREE`, where `Page::block_limit` is 0), where a remainder was a
/// division; then the first word's filter (`secure::may_be_link`), and only a word
/// that passes it is told apart with the range (`secure::looks_like_link`).
///
/// # Safety
/// `page` is the descriptor `ptr` maps to, a page of blocks.
#[cfg_attr(not(feature = "c-api"), allow(dead_code))]
#[inline]
pub unsafe fn small_block_problem(page: *mut Page, ptr: *mut u8) -> Option<&'static str> {
    // SAFETY: per the contract; a carved block's first word is readable. `block_limit`
    // only grows while the page holds blocks (as in `free_passes`).
    unsafe {
        let start = (*page).start as usize;
        let offset = (ptr as usize).wrapping_sub(start);
        let magic = (*page).block_magic;
        let mut limit = core::ptr::read_volatile(&(*page).block_limit);
        if limit == 0 {
            limit = carved_limit(page);
        }
        if !secure::is_block_start(offset, magic, limit) {
            return Some(not_a_carved_start((*page).block_size(), offset));
        }
        let word = *(ptr as *const usize);
        let key = (*page).key;
        if !secure::may_be_link(secure::tweak(key, ptr as usize), word) {
            return None;
        }
        let span = (*page).span_bytes();
        secure::looks_like_link(key, start, span, ptr as usize, word)
            .then_some("block is not in use (freed)")
    }
}

/// The `is_block_start` limit of `page`'s carved blocks from its capacity, for
/// [`small_block_problem`] where `Page::block_limit` is 0 (`EBB_ZERO_ON_FREE`, or
/// nothing carved).
///
/// # Safety
/// `page` is a descriptor of a page of blocks.
#[cold]
#[inline(never)]
unsafe fn carved_limit(page: *mut Page) -> u64 {
    // SAFETY: per the contract.
    unsafe {
        secure::start_limit_with(
            (*page).block_magic,
            (*page).block_size(),
            (*page).capacity as usize,
        )
    }
}

/// [`small_block_problem`]'s words for a pointer that is no carved block's start.
#[cold]
#[inline(never)]
fn not_a_carved_start(size: usize, offset: usize) -> &'static str {
    if size == 0 || offset % size != 0 {
        "pointer is not the start of a block"
    } else {
        "block is not in use (freed)" // never handed out
    }
}

/// A free that failed [`free_passes`]: free a block that checks out (zeroing a small
/// one with `EBB_ZERO_ON_FREE`), abort on anything else (an invalid pointer, a double
/// free, an overwritten canary). Leaves the window `free` entered on `heap`.
///
/// # Safety
/// As `free::free`, inside the window `free` entered on `heap`; `page` is `ptr`'s.
#[cold]
#[inline(never)]
pub unsafe fn free_rejected_and_leave(ptr: *mut u8, page: *mut Page, heap: *mut Heap) {
    // SAFETY: per the contract.
    unsafe {
        free_rejected(ptr, page);
        (*heap).leave();
    }
}

/// [`free_rejected_and_leave`] without the window (first-class heaps' frees).
///
/// # Safety
/// `page` is the descriptor `ptr` maps to.
#[cold]
#[inline(never)]
pub unsafe fn free_rejected(ptr: *mut u8, page: *mut Page) {
    // SAFETY: per the contract; the descriptor's fields are readable at any time.
    unsafe {
        // Past a huge mapping's end, in the rest of its last window: no segment memory
        // (`segment::mapping_holds`), so a guarded block or the foreign-pointer policy,
        // not an abort.
        if !segment::mapping_holds(segment::segment_of_page(page), ptr as usize) {
            crate::front::free::free_unknown(ptr);
            return;
        }
        let start = (*page).start;
        match (*page).owner.load(Ordering::Acquire) {
            FREE => secure::fatal(
                "free",
                ptr,
                "double free or invalid pointer (its span is not in use)",
            ),
            LARGE | HUGE if ptr == start => {}
            LARGE | HUGE => {
                secure::fatal("free", ptr, "invalid pointer (not the start of its block)")
            }
            _ => {
                let size = (*page).block_size();
                let offset = (ptr as usize).wrapping_sub(start as usize);
                let limit = secure::start_limit(size, (*page).capacity as usize);
                if !secure::is_block_start(offset, secure::start_magic(size), limit) {
                    secure::fatal("free", ptr, "invalid pointer (not the start of a block)");
                }
                let word = *(ptr as *const usize);
                let span = (*page).span_bytes();
                if secure::looks_like_link((*page).key, start as usize, span, ptr as usize, word) {
                    secure::fatal("free", ptr, "double free (the block is already free)");
                }
                secure::check_small_canary("free", &*page, ptr);
                // A live block after all (its first word only looked like an address),
                // or one to zero.
                if secure::zero_on_free() && size <= MEDIUM_MAX {
                    core::ptr::write_bytes(ptr, 0, size);
                    // The canary stays for the block's next use (`write_canaries`).
                    secure::write_canaries(&*page, ptr, 1);
                }
            }
        }
        slow::free_slow(page, ptr);
    }
}

/// The class of every size up to `SMALL_MAX` (`size_class::small_classes`), for the
/// malloc slow path, which picks the class of the padded size.
pub static CLASSES: [u8; SMALL_COUNT] = small_classes(false);
/// [`CLASSES`] for C requests.
pub static CLASSES_C: [u8; SMALL_COUNT] = small_classes(true);

/// `size_class::MID_CLASS` for `malloc_above_small`, where requests of `SMALL_MAX -
/// CANARY + 1` to `SMALL_MAX` bytes come too (unpadded there, `alloc::padded`): their
/// entries (from `(SMALL_MAX - CANARY) / MID_STEP`, all of whose sizes are at most
/// `SMALL_MAX`) hold the class above `SMALL_MAX`, as the slow path picks, where
/// taking the larger of the index and `SMALL_MAX / MID_STEP` cost 3 instructions per call.
pub static MID_CLASS: [u8; MID_COUNT] = {
    let mut table = [0u8; MID_COUNT];
    let mut i = (SMALL_MAX - crate::front::alloc::CANARY) / MID_STEP;
    while i < MID_COUNT {
        let first = i * MID_STEP + 1;
        table[i] = class_of(if first > SMALL_MAX {
            first
        } else {
            SMALL_MAX + 1
        }) as u8;
        i += 1;
    }
    table
};

/// Build the canary's padding into a new heap's class tables: entry `size` becomes
/// the class of `size + canary_pad()`, so the malloc fast path indexes them with the
/// request as it is, with no load and add of the padding (three instructions per
/// malloc). Reads the options first: the padding is settled before any heap is made
/// (the first allocation, on the empty heap, reads them on its slow path). Entries
/// above `SMALL_MAX - pad`, which the malloc fast path never indexes (`Heap::
/// small_limit`: bigger requests take the classes above `SMALL_MAX`), keep the class
/// of `SMALL_MAX`.
///
/// # Safety
/// `heap` is a heap nobody else uses yet.
pub unsafe fn pad_class_tables(heap: *mut Heap) {
    secure::level();
    let pad = crate::front::alloc::pad();
    // SAFETY: per the contract.
    let (rust, c) = unsafe { (&mut (*heap).small_class, &mut (*heap).small_class_c) };
    for size in 0..SMALL_COUNT {
        let padded = (size + pad).min(SMALL_MAX);
        rust[size] = CLASSES[padded];
        c[size] = CLASSES_C[padded];
    }
    // SAFETY: per the contract.
    unsafe { (*heap).small_limit = SMALL_MAX - pad };
}

/// An aligned allocation got a block off its alignment: the canary's padding changed
/// between the caller's choice of a size and `malloc`'s choice of the class (the
/// options are read by the process's first allocation, after its padding was added:
/// `span::secure::canary_pad`). Free it and allocate again: the padding is settled
/// now.
#[cold]
#[inline(never)]
pub fn padding_changed(block: *mut u8, size: usize, align: usize) -> *mut u8 {
    // SAFETY: a block just allocated, not handed to anyone.
    unsafe { crate::front::free::free(block) };
    crate::front::alloc::alloc(size, align)
}

#[cfg(test)]
mod tests {
    use crate::front::alloc::{self, CANARY};
    use crate::front::first_class;
    use crate::size_class::{class_of, class_size, MEDIUM_MAX, MIN_ALLOC_BLOCK, SMALL_MAX};
    use crate::span::page::Page;
    use crate::span::secure::{small_canary, small_canary_intact, SMALL_CANARY, SMALL_CANARY_MAX};
    use crate::span::segment;

    /// The descriptor of `p`, a block in a segment.
    fn page(p: *mut u8) -> &'static Page {
        let seg = segment::segment_of(p);
        assert!(!seg.is_null());
        // SAFETY: `p` is a live block of that segment.
        unsafe { &*segment::page_of(seg, p) }
    }

    /// `p`, a live block of a page of blocks, of at least `size` bytes: up to
    /// `SMALL_CANARY_MAX`, its usable size is its block size less the canary, the
    /// canary is in place and survives a write of every usable byte, and one byte more
    /// breaks it; bigger blocks have none (and all of their bytes are usable).
    fn assert_canary(p: *mut u8, size: usize) {
        let page = page(p);
        let block = page.block_size();
        if block > SMALL_CANARY_MAX {
            assert!(!page.small_canary, "size {size}");
            // SAFETY: `p` is live.
            assert_eq!(unsafe { alloc::usable_size(p) }, block, "size {size}");
            assert!(block >= size, "size {size}");
            return;
        }
        assert!(page.small_canary, "canaries are on in the tests' process");
        // SAFETY: `p` is live, of `usable` bytes followed by its canary.
        unsafe {
            let usable = alloc::usable_size(p);
            assert_eq!(usable, block - SMALL_CANARY, "size {size}");
            assert!(usable >= size, "size {size}");
            let word = (p.add(usable) as *const usize).read();
            assert_eq!(word, small_canary(page.key, p as usize), "size {size}");
            assert!(word & 0xff != 0, "the canary's first byte is never 0");
            core::ptr::write_bytes(p, 0xA5, usable);
            assert!(small_canary_intact(page, p), "size {size}");
            assert!(super::free_passes(page as *const Page as *mut Page, p));
            let last = p.add(usable);
            let saved = last.read();
            last.write(saved ^ 0x01);
            assert!(
                !small_canary_intact(page, p),
                "1-byte overflow, size {size}"
            );
            assert!(
                !super::free_passes(page as *const Page as *mut Page, p),
                "the free fast path sends it to the check"
            );
            last.write(saved);
        }
    }

    /// The secure mid-class table is `size_class::MID_CLASS` above `SMALL_MAX`, and
    /// gives the sizes just below it the class above it.
    #[test]
    fn mid_table_matches_the_classes() {
        use crate::size_class::{MID_CLASS, MID_MAX, MID_SHIFT, SMALL_MAX};
        for size in SMALL_MAX - 7..=MID_MAX {
            let index = (size - 1) >> MID_SHIFT;
            let expected = if size > SMALL_MAX {
                MID_CLASS[index]
            } else {
                class_of(SMALL_MAX + 1) as u8
            };
            assert_eq!(super::MID_CLASS[index], expected, "size {size}");
        }
    }

    #[test]
    fn every_size_has_an_exact_usable_size_and_its_canary() {
        assert_eq!(CANARY, SMALL_CANARY);
        let sizes = (0..=1100).chain([2048, 4096, 4097, 65528, 65536, 70_000, MEDIUM_MAX - 8]);
        for size in sizes {
            let p = alloc::malloc(size);
            assert_canary(p, size);
            // The class is the padded request's (not a bigger one); above `SMALL_MAX`
            // (no canary) the request's own.
            let padded = if size <= SMALL_MAX {
                size + CANARY
            } else {
                size
            };
            assert_eq!(
                page(p).block_size(),
                class_size(class_of(padded.max(MIN_ALLOC_BLOCK))),
                "size {size}"
            );
            // SAFETY: a live block of ours.
            unsafe { crate::front::free::free(p) };
            #[cfg(feature = "c-api")]
            {
                let q = alloc::malloc_c(size);
                assert_canary(q, size);
                if size > 8 {
                    assert_eq!(q as usize % 16, 0, "C blocks are 16-byte aligned");
                }
                // SAFETY: a live block of ours.
                unsafe { crate::front::free::free(q) };
            }
        }
        // A request that no longer fits a page of blocks with its canary is large.
        let p = alloc::malloc(MEDIUM_MAX - 4);
        assert_eq!(
            page(p).owner.load(core::sync::atomic::Ordering::Relaxed),
            crate::span::page::LARGE
        );
        // SAFETY: live.
        unsafe {
            assert!(alloc::usable_size(p) >= MEDIUM_MAX - 4);
            crate::front::free::free(p);
        }
    }

    #[test]
    fn aligned_and_zeroed_blocks_have_their_canary() {
        for align in [16usize, 32, 64, 128, 256, 4096, 65536] {
            for size in [0usize, 1, 8, 16, 24, 56, 64, 100, 1000, 4096, 5000, 65536] {
                for zeroed in [false, true] {
                    let p = if zeroed {
                        alloc::alloc_zeroed(size, align)
                    } else {
                        alloc::alloc(size, align)
                    };
                    assert_eq!(p as usize % align, 0, "size {size} align {align}");
                    if zeroed {
                        // SAFETY: `size` bytes of a live block.
                        let bytes = unsafe { core::slice::from_raw_parts(p, size) };
                        assert!(bytes.iter().all(|&b| b == 0));
                    }
                    assert_canary(p, size);
                    // SAFETY: live.
                    unsafe { crate::front::free::free(p) };
                }
            }
        }
    }

    #[test]
    fn realloc_keeps_contents_and_the_canary() {
        let mut p = alloc::malloc(24);
        // SAFETY: every block is live with the size given; the old one is freed by
        // realloc.
        unsafe {
            core::ptr::write_bytes(p, 7, 24);
            let mut size = 24;
            // Shrink in place, grow to exactly the usable size (in place), one byte
            // past it (moves: the canary's word is not the program's), then through
            // several classes and back down.
            for new_size in [20, 24, 25, 32, 40, 300, 4000, 100, 10, 1] {
                p = crate::front::realloc::realloc(p, size, new_size, alloc::MIN_ALIGN);
                let kept = core::slice::from_raw_parts(p, size.min(new_size));
                assert!(kept.iter().all(|&b| b == 7), "{size} -> {new_size}");
                assert_canary(p, new_size);
                core::ptr::write_bytes(p, 7, new_size);
                size = new_size;
            }
            crate::front::free::free(p);
        }
    }

    #[test]
    fn first_class_heaps_write_and_check_canaries() {
        let heap = first_class::create();
        // SAFETY: the heap is live and this thread's.
        unsafe {
            for (size, align) in [(24usize, 8usize), (24, 16), (40, 16), (100, 64), (5000, 8)] {
                let p = first_class::alloc(heap, size, align);
                assert_eq!(p as usize % align, 0);
                assert_canary(p, size);
                first_class::free(heap, p);
            }
            first_class::destroy(heap);
        }
    }
}
