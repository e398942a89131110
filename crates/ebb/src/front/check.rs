//! Check mode (`EBB_CHECK=1`): validation of every free, in constant time.
//!
//! Heaps made in check mode tag the owner word of their pages (`CHECK_TAG`), so the
//! free fast path never matches and every free comes here, and keep their current
//! pages out of the malloc tables (`Heap::checked_current`), so every malloc takes the
//! slow path, which records the block in its segment's allocation bitmap
//! ([`mark_allocated`]): one bit per 8-byte granule, set while a small block starting
//! there is allocated. A free clears the bit with one atomic operation, and finding it
//! clear is a double free, whoever owns the page. With check mode off none of this
//! code runs and no bitmap exists.
//!
//! Check mode is fixed when the process starts (`EBB_CHECK`): a block allocated
//! without its bit would look free to a later check.
//!
//! What is detected, and reported as `ebb: free(0x...): <what>` (then the process
//! goes on, or aborts with `EBB_ABORT_ON_ERROR=1`):
//! - a pointer outside every ebb region (always, even without check mode);
//! - a pointer inside ebb memory that is not the start of a block;
//! - a free into a span that is not in use (double free of a large/huge/retired page,
//!   always);
//! - a double free of a small block, or a free of a block start that was never
//!   allocated, on any page, whichever thread owns it.
//!
//! Why a bitmap: the previous check walked the page's free lists on every free, which
//! made check mode 24-39 times slower than the default on real programs (78% of the
//! time in the walk). The bitmap costs 1/64 of the address space of the segments that
//! check mode allocates in (512 KiB per 32 MiB segment, committed as touched).

use crate::diag::report_invalid_free;
use crate::span::page::{Page, FREE, HUGE, LARGE};
use crate::span::segment::{segment_of, SEGMENT_SIZE};
use core::sync::atomic::{AtomicU64, Ordering};

/// Bytes per bit of the allocation bitmap: the smallest block size and alignment.
const GRANULE: usize = crate::size_class::MIN_BLOCK;
/// Bytes of one segment's bitmap.
const BITMAP_BYTES: usize = crate::span::segment::CHECK_BITMAP_BYTES;
const _: () = assert!(GRANULE == 8 && BITMAP_BYTES % 4096 == 0);

/// The bitmap word and bit of `block`, creating the segment's bitmap if `create`.
/// `None` if the block is in no normal segment, or there is no bitmap (and not
/// `create`, or the OS refused one).
fn bit_of(block: *const u8, create: bool) -> Option<(&'static AtomicU64, u64)> {
    let seg = segment_of(block);
    if seg.is_null() {
        return None;
    }
    // SAFETY: segments are never unmapped; `check_bits` is an atomic field.
    let slot = unsafe { &(*seg).check_bits };
    let mut bits = slot.load(Ordering::Acquire);
    if bits.is_null() {
        if !create {
            return None;
        }
        let fresh =
            crate::os::reserve_aligned(BITMAP_BYTES, crate::os::page_size()) as *mut AtomicU64;
        if fresh.is_null() {
            return None;
        }
        bits = match slot.compare_exchange(
            core::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => fresh,
            Err(winner) => {
                // SAFETY: `fresh` was just reserved and never published.
                unsafe { crate::os::release(fresh as *mut u8, BITMAP_BYTES) };
                winner
            }
        };
    }
    let granule = (block as usize & (SEGMENT_SIZE - 1)) / GRANULE;
    // SAFETY: the bitmap covers every granule of the segment and lives forever.
    let word = unsafe { &*bits.add(granule / 64) };
    Some((word, 1u64 << (granule % 64)))
}

/// Record that `block` (a small block just popped by a check-mode heap) is allocated.
/// If the OS refuses the bitmap, the block stays unrecorded and its free will be
/// reported: check mode cannot work without it.
pub fn mark_allocated(block: *mut u8) {
    if let Some((word, bit)) = bit_of(block, true) {
        let old = word.fetch_or(bit, Ordering::Relaxed);
        debug_assert!(old & bit == 0, "block handed out twice");
    }
}

/// Forget every allocation recorded in a span given back whole, its blocks never
/// freed (`first_class::destroy`): a later page in the span must not find them set.
/// `start` is slice aligned, so every bitmap word (64 granules, 512 bytes) is the
/// span's alone.
pub fn forget_span(start: *mut u8, bytes: usize) {
    for offset in (0..bytes).step_by(64 * GRANULE) {
        if let Some((word, _)) = bit_of(start.wrapping_add(offset), false) {
            word.store(0, Ordering::Relaxed);
        }
    }
}

/// Clear `block`'s allocated bit; false if it was not set (a double free, or a block
/// start never allocated).
fn take_allocated(block: *mut u8) -> bool {
    match bit_of(block, false) {
        Some((word, bit)) => word.fetch_and(!bit, Ordering::Relaxed) & bit != 0,
        None => false,
    }
}

/// True if `block` is the start of a block carved in `page` (whose block size and
/// start never change while the page is in use).
fn is_block_start(page: *mut Page, block: *mut u8, carved: usize) -> bool {
    // SAFETY: page is a valid descriptor.
    unsafe {
        let start = (*page).start as usize;
        let size = (*page).block_size();
        let addr = block as usize;
        size != 0 && addr >= start && (addr - start) % size == 0 && (addr - start) / size < carved
    }
}

/// Validate a free of a small block of `page` (owned by anyone): it must be a block
/// start and allocated. Reports and returns false otherwise; on true the caller frees
/// the block as usual (its bit is cleared).
///
/// # Safety
/// `page` must be the descriptor `block` maps to, with blocks (not free, large or huge).
pub unsafe fn small_free_is_valid(page: *mut Page, block: *mut u8) -> bool {
    // SAFETY: `reserved` does not change while the page is in use.
    if !is_block_start(page, block, unsafe { (*page).reserved } as usize) {
        report_invalid_free(
            block,
            "pointer not allocated by ebb (not the start of a block)",
        );
        return false;
    }
    if !take_allocated(block) {
        report_invalid_free(block, "double free (the block is not allocated)");
        return false;
    }
    true
}

/// Validate a free into a page the caller does not own. Returns true if the caller
/// should go on with the normal free; false if the free was reported.
///
/// # Safety
/// `page` must be the descriptor `block` maps to.
pub unsafe fn remote_free_is_valid(page: *mut Page, owner: usize, block: *mut u8) -> bool {
    // SAFETY: page is a valid descriptor.
    unsafe {
        match owner {
            FREE => {
                report_invalid_free(block, "double free (its span is not in use)");
                false
            }
            LARGE | HUGE => {
                if block != (*page).start {
                    report_invalid_free(
                        block,
                        "pointer not allocated by ebb (not the start of a block)",
                    );
                    return false;
                }
                true
            }
            _ => small_free_is_valid(page, block),
        }
    }
}

/// Validate a pointer given to `malloc_usable_size`/`realloc` in check mode.
#[cfg_attr(not(feature = "c-api"), allow(dead_code))] // the C ABI's
///
/// # Safety
/// `page` must be the descriptor `ptr` maps to.
pub unsafe fn is_live_block(page: *mut Page, ptr: *mut u8) -> bool {
    // SAFETY: reads immutable-while-in-use fields of a valid descriptor.
    unsafe {
        match (*page).owner.load(Ordering::Acquire) {
            FREE => false,
            LARGE | HUGE => ptr == (*page).start,
            _ => {
                is_block_start(page, ptr, (*page).reserved as usize)
                    && bit_of(ptr, false)
                        .is_some_and(|(word, bit)| word.load(Ordering::Relaxed) & bit != 0)
            }
        }
    }
}
