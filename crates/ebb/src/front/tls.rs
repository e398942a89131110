//! Thread-local state: the calling thread's heap pointer, and thread-exit detection.
//!
//! The heap pointer is a TLS variable in the initial-exec model on x86-64, declared in
//! `global_asm!` (stable Rust has no attribute for the TLS model): reading it is a
//! `@GOTTPOFF` load plus an `%fs`-relative load, with no call to `__tls_get_addr` even
//! inside `libebb.so`. Its initial value is the address of the static empty heap, so the
//! fast path needs no "is this thread initialised" test: the empty heap's pages have no
//! free blocks and send the first allocation to the slow path, which makes a real heap.
//!
//! Thread exit is seen through a pthread key whose destructor abandons the heap.
//! On other targets the pointer lives in that pthread key (slower, same semantics).

use crate::front::heap::Heap;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod imp {
    use super::*;

    core::arch::global_asm!(
        ".section .tdata,\"awT\",@progbits",
        ".p2align 3",
        ".globl __ebb_tls_heap",
        ".hidden __ebb_tls_heap",
        "__ebb_tls_heap:",
        ".quad {empty}",
        ".text",
        empty = sym crate::front::heap::EMPTY_HEAP,
    );

    /// The calling thread's heap (the empty heap before the first allocation).
    #[inline(always)]
    pub fn heap() -> *mut Heap {
        let value: *mut Heap;
        // SAFETY: reads this thread's slot of a TLS variable defined above; the
        // GOTTPOFF slot holds its offset from the thread pointer.
        unsafe {
            core::arch::asm!(
                "mov {offset}, qword ptr [rip + __ebb_tls_heap@GOTTPOFF]",
                "mov {value}, qword ptr fs:[{offset}]",
                offset = out(reg) _,
                value = lateout(reg) value,
                options(nostack, readonly, preserves_flags, pure),
            );
        }
        value
    }

    /// Set the calling thread's heap.
    #[inline]
    pub fn set_heap(heap: *mut Heap) {
        // SAFETY: writes this thread's slot of the TLS variable defined above.
        unsafe {
            core::arch::asm!(
                "mov {offset}, qword ptr [rip + __ebb_tls_heap@GOTTPOFF]",
                "mov qword ptr fs:[{offset}], {value}",
                offset = out(reg) _,
                value = in(reg) heap,
                options(nostack, preserves_flags),
            );
        }
    }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
mod imp {
    use super::*;
    use crate::front::heap::empty_heap;

    /// The calling thread's heap, through the thread-exit key (slower fallback).
    #[inline]
    pub fn heap() -> *mut Heap {
        let value = crate::os::thread_key_get(crate::process::thread_key()) as *mut Heap;
        if value.is_null() {
            empty_heap()
        } else {
            value
        }
    }

    #[inline]
    pub fn set_heap(heap: *mut Heap) {
        let value = if heap == empty_heap() {
            core::ptr::null_mut()
        } else {
            heap
        };
        crate::os::thread_key_set(
            crate::process::thread_key(),
            value as *mut core::ffi::c_void,
        );
    }
}

pub use imp::{heap, set_heap};
