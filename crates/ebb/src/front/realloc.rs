//! `realloc`: in place when the block's usable size allows (large and huge blocks by
//! growing or shrinking their span or mapping, blocks of a page by giving back the
//! tail's OS pages), else allocate, copy and free.

use crate::diag::report_invalid_free;
use crate::front::alloc::alloc;
#[cfg(feature = "secure")]
use crate::front::alloc::reserved_tail;
use crate::front::free::free;
use crate::front::guarded;
use crate::size_class::{LARGE_MAX, MEDIUM_MAX};
use crate::span::page::{ABANDONED, DRAINING, HUGE, LARGE, MARKER_LIMIT};
use crate::span::segment;
use crate::span::{arena, huge};
use core::ptr::null_mut;
use core::sync::atomic::Ordering;

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
        let page = segment::page_of(seg, ptr);
        let owner = (*page).owner.load(Ordering::Relaxed);
        let holds_blocks = owner >= MARKER_LIMIT || owner == ABANDONED || owner == DRAINING;
        let usable = (*page).block_size();
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
                    crate::profile::moved(ptr, p);
                    return p;
                }
                if fits {
                    return ptr;
                }
            }
            LARGE if fits => {
                arena::resize_large(page, new_size.max(MEDIUM_MAX + 1));
                return ptr;
            }
            LARGE
                if new_size > usable
                    && new_size <= LARGE_MAX
                    && arena::resize_large(page, new_size) =>
            {
                return ptr;
            }
            _ if holds_blocks && fits => {
                // SAFETY: the caller's live block, shrunk (or kept) within `usable`.
                crate::span::shrink::give_back_tail(ptr, old_size, new_size, usable);
                return ptr;
            }
            _ => {}
        }
        let new = alloc(new_size, align);
        if new.is_null() {
            return null_mut();
        }
        core::ptr::copy_nonoverlapping(ptr, new, old_size.min(new_size));
        free(ptr);
        new
    }
}
