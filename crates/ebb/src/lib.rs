//! # ebb — a general-purpose allocator that gives memory back
//!
//! ```no_run
//! #[global_allocator]
//! static GLOBAL: ebb::Ebb = ebb::Ebb;
//! ```
//!
//! ebb is a thread-caching allocator in the mimalloc family (free lists sharded per
//! page, a heap per thread, 32 MiB segments of 64 KiB slices) designed so that memory
//! freed anywhere is reusable anywhere and returns to the OS after a short delay, even
//! when no thread calls the allocator. See `ARCHITECTURE.md` for the design.
//!
//! The crate is `#![no_std]`, depends on `core` and `libc` only, and never allocates
//! through a global allocator itself.

#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![allow(clippy::missing_safety_doc)]

#[cfg(any(feature = "std", test))]
extern crate std;

mod alloc;
mod arena;
mod bitmap;
#[cfg_attr(not(feature = "c-api"), allow(dead_code))]
pub mod c_api;
mod check;
mod heap;
mod huge;
mod options;
mod os;
mod page;
mod purge;
mod segment;
mod size_class;
mod stats;
mod steal;
mod sync;
mod tls;

use core::alloc::{GlobalAlloc, Layout};

pub use options::Options;
pub use size_class::{CLASS_COUNT, LARGE_MAX, MEDIUM_MAX};
pub use stats::{ClassStats, Stats};

/// The allocator. Install it with `#[global_allocator] static A: ebb::Ebb = ebb::Ebb;`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ebb;

// SAFETY: every method returns null on failure, never unwinds, and honours the layout's
// size and alignment (see `alloc.rs`); `dealloc`/`realloc` accept exactly the blocks
// this allocator returned.
unsafe impl GlobalAlloc for Ebb {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        alloc::alloc(layout.size(), layout.align())
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: GlobalAlloc's contract: ptr came from this allocator.
        unsafe { alloc::free(ptr) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        alloc::alloc_zeroed(layout.size(), layout.align())
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: GlobalAlloc's contract: ptr is live with this layout.
        unsafe { alloc::realloc(ptr, layout.size(), new_size, layout.align()) }
    }
}

/// Allocate `size` bytes aligned to `align` (a power of two). Null on failure.
#[inline]
pub fn alloc(size: usize, align: usize) -> *mut u8 {
    if !align.is_power_of_two() {
        return core::ptr::null_mut();
    }
    alloc::alloc(size, align)
}

/// Allocate zeroed memory. Null on failure.
#[inline]
pub fn alloc_zeroed(size: usize, align: usize) -> *mut u8 {
    if !align.is_power_of_two() {
        return core::ptr::null_mut();
    }
    alloc::alloc_zeroed(size, align)
}

/// Free a block from [`alloc`] (null is ignored; a pointer ebb did not allocate is
/// reported on stderr and otherwise ignored).
///
/// # Safety
/// `ptr` must be null or a live block from this allocator.
#[inline]
pub unsafe fn free(ptr: *mut u8) {
    // SAFETY: per the contract.
    unsafe { alloc::free(ptr) }
}

/// Resize a block, keeping alignment `align`. Null on failure (the block is unchanged).
///
/// # Safety
/// `ptr` must be a live block from this allocator, allocated with alignment `align`.
#[inline]
pub unsafe fn realloc(ptr: *mut u8, new_size: usize, align: usize) -> *mut u8 {
    // SAFETY: per the contract.
    unsafe {
        let old = alloc::usable_size(ptr);
        alloc::realloc(ptr, old, new_size, align)
    }
}

/// Bytes usable in a live block (at least the size asked for). 0 for null.
///
/// # Safety
/// `ptr` must be null or a live block from this allocator.
#[inline]
pub unsafe fn usable_size(ptr: *const u8) -> usize {
    // SAFETY: per the contract.
    unsafe { alloc::usable_size(ptr) }
}

/// True if `ptr` lies in memory ebb manages (a segment or a huge mapping).
pub fn owns(ptr: *const u8) -> bool {
    !segment::segment_of(ptr).is_null()
}

/// A snapshot of the allocator's statistics (cheap: a walk over page descriptors).
pub fn stats() -> Stats {
    stats::snapshot()
}

/// Print statistics to stderr (what `EBB_SHOW_STATS=1` prints at exit).
pub fn print_stats() {
    stats::print();
}

/// Collect now: fold in frees from other threads, free the calling thread's empty
/// pages, and purge free memory whose delay has passed (all free memory if `force`).
pub fn collect(force: bool) {
    c_api::collect(force);
}

/// The options in force (read from `EBB_*` environment variables at first use).
pub fn options() -> Options {
    *options::get()
}

/// Replace the options at run time (for example the purge delay).
pub fn set_options(options: Options) {
    options::set(options);
}

/// True if the background purger thread is running.
pub fn background_purger_running() -> bool {
    purge::purger_running()
}

#[cfg(test)]
#[global_allocator]
static TEST_ALLOCATOR: Ebb = Ebb;
