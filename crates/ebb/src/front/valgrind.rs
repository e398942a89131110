//! The entry points reported to memcheck (the `valgrind` feature): `lib.rs`'s
//! `GlobalAlloc` and `c_api.rs` call these instead of `alloc`'s when
//! `memcheck::ENABLED` (a constant). They sit in the front end, above the client-request
//! primitives of `memcheck.rs`, which the span layer also calls when it carves blocks.

use crate::memcheck::{allocated, freeing};

/// Report a new block (null: nothing) with its usable size.
fn report_new(ptr: *mut u8) -> *mut u8 {
    if !ptr.is_null() {
        // SAFETY: ptr is a live block just allocated.
        allocated(ptr, unsafe { crate::front::alloc::usable_size(ptr) }, false);
    }
    ptr
}

/// `alloc::alloc`, reported.
pub fn alloc(size: usize, align: usize) -> *mut u8 {
    report_new(crate::front::alloc::alloc(size, align))
}

/// `alloc::malloc_c`, reported.
#[cfg(feature = "c-api")]
pub fn malloc_c(size: usize) -> *mut u8 {
    report_new(crate::front::alloc::malloc_c(size))
}

/// A reported block of the C API's (`aligned`'s).
#[cfg(feature = "c-api")]
pub fn reported(ptr: *mut u8) -> *mut u8 {
    report_new(ptr)
}

/// `alloc::alloc_zeroed`, zeroing after the report (ebb writes no byte memcheck does not
/// know to be part of a block).
pub fn alloc_zeroed(size: usize, align: usize) -> *mut u8 {
    let p = alloc(size, align);
    if !p.is_null() {
        // SAFETY: p is a live block of at least `size` bytes.
        unsafe { core::ptr::write_bytes(p, 0, size) };
    }
    p
}

/// `free::free`, reported first.
///
/// # Safety
/// As `free::free`.
pub unsafe fn free(ptr: *mut u8) {
    freeing(ptr);
    // SAFETY: forwarded.
    unsafe { crate::front::free::free(ptr) }
}

/// `realloc` that always moves the block (in place, ebb would write bytes memcheck
/// counts as past the block). Null on failure (the block is then untouched).
///
/// # Safety
/// `ptr` is a live block of ebb's allocated with alignment `align`.
pub unsafe fn realloc(ptr: *mut u8, new_size: usize, align: usize) -> *mut u8 {
    let new = alloc(new_size, align);
    if new.is_null() {
        return new;
    }
    // SAFETY: per the contract; both blocks are live and distinct.
    unsafe {
        let old = crate::front::alloc::usable_size(ptr);
        core::ptr::copy_nonoverlapping(ptr, new, old.min(new_size));
        free(ptr);
    }
    new
}
