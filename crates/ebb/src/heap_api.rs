//! `ebb::Heap`: first-class heaps for Rust (see `front::first_class`).

use crate::front::first_class::{self, FirstClass};
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ptr::NonNull;

pub use crate::front::first_class::HeapStats;

/// A heap of its own: allocate from it on the thread that made it, then free all of
/// its blocks at once with [`Heap::destroy`] (an arena per request, per compilation
/// unit, per frame), in time proportional to its pages, not its blocks.
///
/// * **Threads**: only the creating thread allocates from a heap (`Heap` is neither
///   `Send` nor `Sync`, so safe code cannot do otherwise; the C API checks it on every
///   slow path, and debug builds on every call). Any thread may free a block of the
///   heap with the ordinary `free` ([`crate::free`], `ebb_free`, or the global
///   allocator): the block goes back to the heap's page, and the heap takes such
///   frees in on its next slow path or [`Heap::collect`].
/// * **Drop** hands the heap's live blocks over, as a thread's blocks are handed over
///   when it exits: they stay valid and anyone may free them (`ebb_heap_delete`).
///   [`Heap::destroy`] instead invalidates every block of the heap at once.
/// * **Collections**: `&Heap` is an allocator (`allocator_api2::alloc::Allocator` with
///   the `allocator-api2` feature, `core::alloc::Allocator` with `nightly`). A
///   collection holds the `&Heap`, so the heap cannot be destroyed or dropped while the
///   collection lives; this does not compile:
///
/// ```compile_fail,E0505
/// let heap = ebb::Heap::new();
/// let v = ebb::heap_tests_support::Holder(&heap);
/// heap.destroy(); // error: cannot move out of `heap` because it is borrowed
/// drop(v);
/// ```
///
/// * **Raw blocks** from [`Heap::alloc`] are raw pointers: after `destroy` they are
///   dangling, as after `free`. Freeing one is undefined behaviour (until the span is
///   reused it is reported as a double free).
/// * Blocks above `LARGE_MAX` (16 MiB) are ordinary huge blocks, not part of the heap:
///   `destroy` leaves them alone and they must be freed with `free`.
pub struct Heap {
    raw: NonNull<FirstClass>,
    /// Not `Send`, not `Sync`: allocation is for the creating thread.
    _thread_bound: PhantomData<*mut u8>,
}

impl Heap {
    /// A new heap owned by the calling thread. Aborts if the OS refuses memory (see
    /// [`Heap::try_new`]).
    pub fn new() -> Self {
        match Self::try_new() {
            Some(heap) => heap,
            None => {
                crate::diag::assertion_failed(
                    format_args!("out of memory making a heap"),
                    file!(),
                    line!(),
                );
            }
        }
    }

    /// A new heap, or `None` if the OS refused memory.
    pub fn try_new() -> Option<Self> {
        NonNull::new(first_class::create()).map(|raw| Self {
            raw,
            _thread_bound: PhantomData,
        })
    }

    /// Allocate `size` bytes aligned to `align` (a power of two). Null on failure.
    #[inline]
    pub fn alloc(&self, size: usize, align: usize) -> *mut u8 {
        // SAFETY: the heap is live (destroy consumes it) and, not being Send, used on
        // the thread that made it.
        unsafe { first_class::alloc(self.raw.as_ptr(), size, align) }
    }

    /// `alloc`, zeroed.
    #[inline]
    pub fn alloc_zeroed(&self, size: usize, align: usize) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe { first_class::alloc_zeroed(self.raw.as_ptr(), size, align) }
    }

    /// Resize a block of this heap (in place if it fits, else moved within the heap).
    ///
    /// # Safety
    /// `ptr` must be null or a live block allocated from this heap with `align`, of
    /// at least `old_size` bytes.
    pub unsafe fn realloc(
        &self,
        ptr: *mut u8,
        old_size: usize,
        new_size: usize,
        align: usize,
    ) -> *mut u8 {
        // SAFETY: per the contract.
        unsafe { first_class::realloc(self.raw.as_ptr(), ptr, old_size, new_size, align) }
    }

    /// Free a block (of this heap or any other). Null is ignored.
    ///
    /// # Safety
    /// `ptr` must be null or a live block of this allocator.
    #[inline]
    pub unsafe fn free(&self, ptr: *mut u8) {
        // SAFETY: per the contract.
        unsafe { first_class::free(self.raw.as_ptr(), ptr) }
    }

    /// Take in blocks other threads freed into the heap and give unused pages back.
    pub fn collect(&self) {
        // SAFETY: as in `alloc`.
        unsafe { first_class::collect(self.raw.as_ptr()) }
    }

    /// The heap's pages and live blocks.
    pub fn stats(&self) -> HeapStats {
        // SAFETY: as in `alloc`.
        unsafe { first_class::stats(self.raw.as_ptr()) }
    }

    /// Free every block of the heap at once, without visiting them: its pages go
    /// straight back to the arena (and to the OS after the purge delay).
    pub fn destroy(self) {
        let this = ManuallyDrop::new(self);
        // SAFETY: consuming `self` ends every borrow (so every collection in the heap);
        // raw blocks are the caller's to stop using (see the type's documentation).
        unsafe { first_class::destroy(this.raw.as_ptr()) }
    }
}

impl Default for Heap {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Heap {
    /// Hand the live blocks over (they stay valid; any thread may free them).
    fn drop(&mut self) {
        // SAFETY: the heap is live and on its thread; nothing borrows it any more.
        unsafe { first_class::delete(self.raw.as_ptr()) }
    }
}

impl core::fmt::Debug for Heap {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Heap").field("at", &self.raw).finish()
    }
}

/// The allocator API for `&Heap`: the two traits have the same shape.
#[allow(unused_macros)]
macro_rules! impl_allocator {
    ($allocator:path, $error:path) => {
        // SAFETY: blocks stay valid until deallocated (or the heap destroyed, which the
        // borrow in `&Heap` rules out while a collection lives); `&Heap` is Copy and
        // every copy names the same heap; layouts' size and alignment are honoured.
        unsafe impl $allocator for &Heap {
            #[inline]
            fn allocate(&self, layout: core::alloc::Layout) -> Result<NonNull<[u8]>, $error> {
                let p = (**self).alloc(layout.size(), layout.align());
                NonNull::new(p)
                    .map(|p| NonNull::slice_from_raw_parts(p, layout.size()))
                    .ok_or($error)
            }

            #[inline]
            fn allocate_zeroed(
                &self,
                layout: core::alloc::Layout,
            ) -> Result<NonNull<[u8]>, $error> {
                let p = (**self).alloc_zeroed(layout.size(), layout.align());
                NonNull::new(p)
                    .map(|p| NonNull::slice_from_raw_parts(p, layout.size()))
                    .ok_or($error)
            }

            #[inline]
            unsafe fn deallocate(&self, ptr: NonNull<u8>, _layout: core::alloc::Layout) {
                // SAFETY: the trait's contract: ptr is a live block of this allocator.
                unsafe { (**self).free(ptr.as_ptr()) }
            }

            unsafe fn grow(
                &self,
                ptr: NonNull<u8>,
                old: core::alloc::Layout,
                new: core::alloc::Layout,
            ) -> Result<NonNull<[u8]>, $error> {
                // SAFETY: the trait's contract: ptr is live with layout `old`.
                let p =
                    unsafe { (**self).realloc(ptr.as_ptr(), old.size(), new.size(), new.align()) };
                NonNull::new(p)
                    .map(|p| NonNull::slice_from_raw_parts(p, new.size()))
                    .ok_or($error)
            }

            unsafe fn shrink(
                &self,
                ptr: NonNull<u8>,
                old: core::alloc::Layout,
                new: core::alloc::Layout,
            ) -> Result<NonNull<[u8]>, $error> {
                // SAFETY: as in `grow`.
                unsafe { self.grow(ptr, old, new) }
            }
        }
    };
}

#[cfg(all(feature = "allocator-api2", not(feature = "nightly")))]
impl_allocator!(
    allocator_api2::alloc::Allocator,
    allocator_api2::alloc::AllocError
);

// With `nightly`, allocator-api2's trait is core's (its own `nightly` feature).
#[cfg(feature = "nightly")]
impl_allocator!(core::alloc::Allocator, core::alloc::AllocError);

/// For the compile-fail example in [`Heap`]'s documentation (a stand-in for a
/// collection: anything that holds the `&Heap`).
#[doc(hidden)]
pub mod heap_tests_support {
    pub struct Holder<'a>(pub &'a super::Heap);
    impl Drop for Holder<'_> {
        fn drop(&mut self) {}
    }
}
