//! The tail of a block that `realloc` shrinks in place.
//!
//! A shrink to at least half of a block's usable size keeps the block where it is (the
//! C API's contract, as glibc's and mimalloc's: `crates/ebb-capi/tests/c/api.c`
//! `t_realloc_in_place`). For a block of a page of big blocks (up to `MEDIUM_MAX`,
//! 512 KiB) the part past the new size may still be resident, dirtied by whoever held the
//! block before: a `Vec<String>` grown to a 384 KiB block and shrunk to its 240 KB keeps
//! 144 KiB that nobody will read. Such a block cannot give slices back (it shares its
//! span with the page's other blocks, unlike a large block, whose span `realloc` trims),
//! so its tail's whole OS pages are decommitted instead. They read as zero if the
//! program uses the rest of its usable size after all (`malloc_usable_size` does not
//! change), and nothing of the allocator lives there: a block's link word and freed key
//! are at its start, the secure build's canary after its usable size.

use crate::os;

/// A shrink gives back its tail only when at least this many bytes of whole OS pages
/// lie between the new size and the block's end: below it the system call and the
/// page faults of a later regrowth would cost more than the memory is worth.
pub const SHRINK_DECOMMIT_MIN: usize = 64 * 1024;

/// The whole OS pages of `[ptr + new_size, ptr + usable)` (start, length) that
/// `realloc` taking the block from `old_size` down to at most three quarters of
/// `usable` may give back: at least [`SHRINK_DECOMMIT_MIN`] bytes of them. None when
/// not worth it. (Whether the block churns is the front end's call:
/// `front::shrunk_tails`.)
///
/// Only a shrink (a C `realloc` passes the usable size as `old_size`, so for C any
/// in-place call below three quarters counts): an in-place growth would otherwise pay a
/// system call on every step of a loop that grows a buffer inside its block.
pub fn tail_to_give_back(
    ptr: *mut u8,
    old_size: usize,
    new_size: usize,
    usable: usize,
) -> Option<(*mut u8, usize)> {
    if new_size >= old_size
        || usable - new_size < SHRINK_DECOMMIT_MIN
        || new_size > usable - usable / 4
    {
        return None;
    }
    let os_page = os::page_size();
    let start = (ptr as usize + new_size).next_multiple_of(os_page);
    let end = (ptr as usize + usable) & !(os_page - 1);
    if end < start + SHRINK_DECOMMIT_MIN {
        return None;
    }
    Some((ptr.wrapping_add(start - ptr as usize), end - start))
}

/// Decommit a tail found by [`tail_to_give_back`]. Returns the bytes given back.
///
/// # Safety
/// `(start, len)` is what [`tail_to_give_back`] returned for a live block the caller
/// holds and has just resized in place: no live data lies there, and no other thread
/// may write there.
pub unsafe fn decommit_tail(start: *mut u8, len: usize) -> usize {
    // SAFETY: page aligned, inside the block (so inside a segment this allocator
    // reserved), past the new size (no live data) and the caller's alone.
    if unsafe { os::decommit(start, len) } {
        len
    } else {
        0
    }
}
