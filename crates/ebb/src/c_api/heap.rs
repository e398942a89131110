//! The C interface of first-class heaps (`ebb_heap_*` in `include/ebb.h`), over
//! `front::first_class`. A heap is an opaque `ebb_heap_t *`; allocating from it, and
//! destroying or deleting it, is for the thread that made it (checked: a call from
//! another thread aborts with a message), freeing its blocks for any thread (`ebb_free`).

use crate::front::first_class::{self, FirstClass, HeapStats};
use crate::os;
use core::ffi::{c_int, c_void};
use core::ptr::null_mut;

/// Make a heap owned by the calling thread. NULL if out of memory.
#[no_mangle]
pub extern "C" fn ebb_heap_new() -> *mut c_void {
    first_class::create() as *mut c_void
}

/// glibc's alignment: 16 bytes above 8. Multiples of 16 are classes of 16-aligned
/// blocks (with the secure build's canary, `size + pad` is made one); above
/// MEDIUM_MAX blocks start on slice boundaries anyway.
fn c_size(size: usize) -> usize {
    use crate::front::alloc::{padded, CANARY};
    if size > 8 && size <= crate::MEDIUM_MAX - CANARY {
        let pad = padded(size) - size;
        (size + pad).next_multiple_of(16) - pad
    } else {
        size
    }
}

fn oom(p: *mut u8) -> *mut c_void {
    if p.is_null() {
        os::set_errno(libc::ENOMEM);
    }
    p as *mut c_void
}

/// `malloc` from `heap`.
///
/// # Safety
/// `heap` from `ebb_heap_new`, live, owned by the calling thread.
#[no_mangle]
pub unsafe extern "C" fn ebb_heap_malloc(heap: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: per the contract.
    oom(unsafe { first_class::alloc(heap as *mut FirstClass, c_size(size), 8) })
}

/// `calloc` from `heap` (NULL and ENOMEM on overflow).
///
/// # Safety
/// As `ebb_heap_malloc`.
#[no_mangle]
pub unsafe extern "C" fn ebb_heap_calloc(
    heap: *mut c_void,
    count: usize,
    size: usize,
) -> *mut c_void {
    let Some(bytes) = count.checked_mul(size) else {
        return oom(null_mut());
    };
    // SAFETY: per the contract.
    oom(unsafe { first_class::alloc_zeroed(heap as *mut FirstClass, c_size(bytes), 8) })
}

/// `realloc` within `heap`: NULL `ptr` allocates; the block must be `heap`'s (or any
/// live block: it is copied into `heap` if it does not fit). Size 0 frees and returns
/// NULL, as glibc does.
///
/// # Safety
/// As `ebb_heap_malloc`; `ptr` NULL or a live block of this allocator.
#[no_mangle]
pub unsafe extern "C" fn ebb_heap_realloc(
    heap: *mut c_void,
    ptr: *mut c_void,
    size: usize,
) -> *mut c_void {
    let fc = heap as *mut FirstClass;
    // SAFETY: per the contract.
    unsafe {
        if !ptr.is_null() && size == 0 {
            first_class::free(fc, ptr as *mut u8);
            return null_mut();
        }
        let old = crate::usable_size(ptr as *const u8);
        oom(first_class::realloc(
            fc,
            ptr as *mut u8,
            old,
            c_size(size),
            16,
        ))
    }
}

/// `aligned_alloc` from `heap`: `align` must be a power of two (else NULL, EINVAL).
///
/// # Safety
/// As `ebb_heap_malloc`.
#[no_mangle]
pub unsafe extern "C" fn ebb_heap_malloc_aligned(
    heap: *mut c_void,
    align: usize,
    size: usize,
) -> *mut c_void {
    if !align.is_power_of_two() {
        os::set_errno(libc::EINVAL);
        return null_mut();
    }
    // SAFETY: per the contract.
    oom(unsafe { first_class::alloc(heap as *mut FirstClass, c_size(size), align.max(8)) })
}

/// Free every block of `heap` at once, and the heap (NULL is ignored).
///
/// # Safety
/// As `ebb_heap_malloc`; no block of the heap is used afterwards.
#[no_mangle]
pub unsafe extern "C" fn ebb_heap_destroy(heap: *mut c_void) {
    if !heap.is_null() {
        // SAFETY: per the contract.
        unsafe { first_class::destroy(heap as *mut FirstClass) }
    }
}

/// Free the heap, handing its live blocks over: they stay valid, any thread frees them
/// with `ebb_free` (NULL is ignored).
///
/// # Safety
/// As `ebb_heap_malloc`.
#[no_mangle]
pub unsafe extern "C" fn ebb_heap_delete(heap: *mut c_void) {
    if !heap.is_null() {
        // SAFETY: per the contract.
        unsafe { first_class::delete(heap as *mut FirstClass) }
    }
}

/// Take in frees other threads made into `heap` and give its unused pages back.
///
/// # Safety
/// As `ebb_heap_malloc`.
#[no_mangle]
pub unsafe extern "C" fn ebb_heap_collect(heap: *mut c_void) {
    // SAFETY: per the contract.
    unsafe { first_class::collect(heap as *mut FirstClass) }
}

/// Fill `*out` with the heap's figures (`ebb_heap_stats_t`). 0, or -1 if a pointer is
/// NULL.
///
/// # Safety
/// As `ebb_heap_malloc`; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ebb_heap_stats(heap: *mut c_void, out: *mut HeapStats) -> c_int {
    if heap.is_null() || out.is_null() {
        return -1;
    }
    // SAFETY: per the contract.
    unsafe { *out = first_class::stats(heap as *mut FirstClass) };
    0
}
