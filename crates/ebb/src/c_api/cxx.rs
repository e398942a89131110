//! C++ `operator new` and `operator delete` in every form the Itanium C++ ABI names
//! (plain, array, nothrow, sized, aligned), exported with the `override` feature.
//!
//! Why: without them a C++ program's `new` reaches ebb through the C++ runtime's
//! operator, which calls `malloc` through its PLT; a sized `delete` (what GCC emits
//! for a complete type since C++14) goes through two such hops, `operator
//! delete(void*, size_t)` to `operator delete(void*)` to `free`. tcmalloc, jemalloc and
//! mimalloc export these operators for the same reason. Here each one is the `malloc`
//! or `free` fast path itself, inlined.
//!
//! Failure is the C++ runtime's business: a throwing `new` must call the new-handler
//! in a loop and then throw `std::bad_alloc`, and a nothrow one must run the same loop
//! and return null. Neither can be written without a C++ runtime, so when ebb's attempt
//! fails, the operator hands the request to the definition its export hides (libstdc++'s
//! or libc++'s, found once with `os::next_symbol`), which runs the loop around `malloc`
//! (ebb's again) and throws through this frame (`extern "C-unwind"`, and the crate is
//! built to unwind). A program that calls `operator new` has a C++ runtime loaded; if
//! none is found all the same (a static executable without `dlsym`), ebb reports the
//! failure and aborts, as the runtime would with no handler to throw to.
//!
//! Deletes ignore the size and alignment they are given (a block's page knows both),
//! except in the secure build, which checks a sized delete's size and alignment
//! (`c_api::free_stating`).

use super::c_void;
use crate::diag::StderrWriter;
use crate::os;
use core::fmt::Write;
use core::sync::atomic::{AtomicPtr, Ordering};

/// `std::nothrow_t` and `std::align_val_t` as they cross the ABI: a reference (a
/// pointer, never read) and a `size_t`.
type Nothrow = *const c_void;

/// The definition of `name` that ebb's export hides, resolved once per operator.
/// Null if there is none.
#[cold]
fn next(name: &'static [u8], slot: &AtomicPtr<c_void>) -> *mut c_void {
    let mut found = slot.load(Ordering::Acquire);
    if found.is_null() {
        found = os::next_symbol(name);
        slot.store(found, Ordering::Release);
    }
    found
}

/// No C++ runtime to take a failed `new` over: report and abort (what the runtime does
/// with a `bad_alloc` nobody catches).
#[cold]
fn no_runtime(name: &'static [u8], size: usize) -> ! {
    let mut w = StderrWriter::new();
    let shown = core::str::from_utf8(&name[..name.len() - 1]).unwrap_or("operator new");
    let _ = writeln!(
        w,
        "ebb: {shown}({size} bytes): out of memory, and no C++ runtime's operator was \
         found to call the new-handler or throw std::bad_alloc; aborting"
    );
    w.flush();
    os::abort()
}

macro_rules! operators_new {
    ($( $name:ident ( $size:ident $(, $arg:ident : $ty:ty)* ) = $alloc:expr; )*) => {
        $(
            /// A C++ `operator new` (the Itanium ABI's name for its form).
            ///
            /// # Safety
            /// Its C++ contract (an alignment argument is a power of two).
            #[no_mangle]
            pub unsafe extern "C-unwind" fn $name($size: usize $(, $arg: $ty)*) -> *mut c_void {
                let p = $alloc;
                if !p.is_null() {
                    return p;
                }
                #[cold]
                #[inline(never)]
                unsafe extern "C-unwind" fn failed($size: usize $(, $arg: $ty)*) -> *mut c_void {
                    static NEXT: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
                    const NAME: &[u8] = concat!(stringify!($name), "\0").as_bytes();
                    let f = next(NAME, &NEXT);
                    if f.is_null() {
                        no_runtime(NAME, $size);
                    }
                    // SAFETY: `f` is the runtime's definition of this very operator,
                    // so it has this signature.
                    unsafe {
                        let f: unsafe extern "C-unwind" fn(usize $(, $ty)*) -> *mut c_void =
                            core::mem::transmute(f);
                        f($size $(, $arg)*)
                    }
                }
                // SAFETY: the same arguments, the same contract.
                unsafe { failed($size $(, $arg)*) }
            }
        )*
    };
}

operators_new! {
    _Znwm(size) = super::malloc(size);
    _Znam(size) = super::malloc(size);
    _ZnwmRKSt9nothrow_t(size, tag: Nothrow) = { let _ = tag; super::malloc(size) };
    _ZnamRKSt9nothrow_t(size, tag: Nothrow) = { let _ = tag; super::malloc(size) };
    _ZnwmSt11align_val_t(size, align: usize) = super::memalign(align, size);
    _ZnamSt11align_val_t(size, align: usize) = super::memalign(align, size);
    _ZnwmSt11align_val_tRKSt9nothrow_t(size, align: usize, tag: Nothrow) =
        { let _ = tag; super::memalign(align, size) };
    _ZnamSt11align_val_tRKSt9nothrow_t(size, align: usize, tag: Nothrow) =
        { let _ = tag; super::memalign(align, size) };
}

macro_rules! operators_delete {
    ($( $name:ident ( $ptr:ident $(, $arg:ident : $ty:ty)* ) = $free:expr; )*) => {
        $(
            /// A C++ `operator delete` (the Itanium ABI's name for its form).
            ///
            /// # Safety
            /// Its C++ contract: `ptr` is null or a live block from this allocator.
            #[no_mangle]
            pub unsafe extern "C-unwind" fn $name($ptr: *mut c_void $(, $arg: $ty)*) {
                $( let _ = $arg; )*
                // SAFETY: per the C++ contract.
                unsafe { $free }
            }
        )*
    };
}

#[cfg(not(feature = "secure"))]
operators_delete! {
    _ZdlPvm(ptr, size: usize) = super::free(ptr);
    _ZdaPvm(ptr, size: usize) = super::free(ptr);
    _ZdlPvmSt11align_val_t(ptr, size: usize, align: usize) = super::free(ptr);
    _ZdaPvmSt11align_val_t(ptr, size: usize, align: usize) = super::free(ptr);
}

// The secure build checks the size a sized delete states against the block.
#[cfg(feature = "secure")]
operators_delete! {
    _ZdlPvm(ptr, size: usize) = super::free_stating(ptr, size, 0, "operator delete");
    _ZdaPvm(ptr, size: usize) = super::free_stating(ptr, size, 0, "operator delete");
    _ZdlPvmSt11align_val_t(ptr, size: usize, align: usize) =
        super::free_stating(ptr, size, align, "operator delete");
    _ZdaPvmSt11align_val_t(ptr, size: usize, align: usize) =
        super::free_stating(ptr, size, align, "operator delete");
}

operators_delete! {
    _ZdlPv(ptr) = super::free(ptr);
    _ZdaPv(ptr) = super::free(ptr);
    _ZdlPvRKSt9nothrow_t(ptr, tag: Nothrow) = super::free(ptr);
    _ZdaPvRKSt9nothrow_t(ptr, tag: Nothrow) = super::free(ptr);
    _ZdlPvSt11align_val_t(ptr, align: usize) = super::free(ptr);
    _ZdaPvSt11align_val_t(ptr, align: usize) = super::free(ptr);
    _ZdlPvSt11align_val_tRKSt9nothrow_t(ptr, align: usize, tag: Nothrow) = super::free(ptr);
    _ZdaPvSt11align_val_tRKSt9nothrow_t(ptr, align: usize, tag: Nothrow) = super::free(ptr);
}
