//! Exported C symbols. Each function is defined once in `c_api.rs`; this file only
//! gives it its public names.

// Bodies name `super::` explicitly: the standard names defined here would otherwise
// shadow the implementations they forward to.
use super::{
    c_char, c_int, c_stats, c_void, option_get, option_set, stats, CStats, Mallinfo, Mallinfo2,
    VERSION,
};

macro_rules! export {
    ($( fn $ebb:ident / [$($std:ident),*] $params:tt $_args:tt -> $ret:ty = $body:expr; )*) => {
        $(
            /// The C function of the same standard name, with glibc's semantics.
            ///
            /// # Safety
            /// The C contract of the standard function (pointers from this allocator,
            /// valid out-pointers).
            #[no_mangle]
            pub unsafe extern "C-unwind" fn $ebb $params -> $ret {
                // SAFETY: the caller upholds the C contract of this function.
                #[allow(unused_unsafe)]
                unsafe { $body }
            }
            $(
                /// The standard C function, with glibc's semantics.
                ///
                /// # Safety
                /// Its C contract, as for the `ebb_` name.
                #[cfg(feature = "override")]
                #[no_mangle]
                pub unsafe extern "C-unwind" fn $std $params -> $ret {
                    // The body again rather than a call to the ebb_ name: that call would
                    // go through the GOT (exported symbols are interposable).
                    // SAFETY: the caller upholds the C contract of this function.
                    #[allow(unused_unsafe)]
                    unsafe { $body }
                }
            )*
        )*
    };
}

export! {
    fn ebb_malloc / [malloc, __libc_malloc] (size: usize) (size) -> *mut c_void = super::malloc(size);
    fn ebb_calloc / [calloc, __libc_calloc] (count: usize, size: usize) (count, size) -> *mut c_void =
        super::calloc(count, size);
    fn ebb_free / [free, __libc_free, cfree] (ptr: *mut c_void) (ptr) -> () = super::free(ptr);
    fn ebb_free_sized / [free_sized] (ptr: *mut c_void, size: usize) (ptr, size) -> () =
        super::free_stating(ptr, size, 0, "free_sized");
    fn ebb_free_aligned_sized / [free_aligned_sized] (ptr: *mut c_void, align: usize, size: usize)
        (ptr, align, size) -> () = super::free_stating(ptr, size, align, "free_aligned_sized");
    fn ebb_realloc / [realloc, __libc_realloc] (ptr: *mut c_void, size: usize) (ptr, size) -> *mut c_void =
        super::realloc(ptr, size);
    fn ebb_reallocarray / [reallocarray] (ptr: *mut c_void, count: usize, size: usize) (ptr, count, size)
        -> *mut c_void = super::reallocarray(ptr, count, size);
    fn ebb_aligned_alloc / [aligned_alloc] (align: usize, size: usize) (align, size) -> *mut c_void =
        super::aligned_alloc(align, size);
    fn ebb_memalign / [memalign, __libc_memalign] (align: usize, size: usize) (align, size) -> *mut c_void =
        super::memalign(align, size);
    fn ebb_posix_memalign / [posix_memalign] (out: *mut *mut c_void, align: usize, size: usize) (out, align, size)
        -> c_int = super::posix_memalign(out, align, size);
    fn ebb_valloc / [valloc, __libc_valloc] (size: usize) (size) -> *mut c_void = super::valloc(size);
    fn ebb_pvalloc / [pvalloc, __libc_pvalloc] (size: usize) (size) -> *mut c_void = super::pvalloc(size);
    fn ebb_malloc_usable_size / [malloc_usable_size] (ptr: *mut c_void) (ptr) -> usize = super::malloc_usable_size(ptr);
    fn ebb_malloc_trim / [malloc_trim] (pad: usize) (pad) -> c_int = super::malloc_trim(pad);
    fn ebb_mallinfo2 / [mallinfo2] () () -> Mallinfo2 = super::mallinfo2();
    fn ebb_mallinfo / [mallinfo, __libc_mallinfo] () () -> Mallinfo = super::mallinfo();
    fn ebb_mallopt / [mallopt, __libc_mallopt] (param: c_int, value: c_int) (param, value) -> c_int = { let _ = (param, value); 1 };
    fn ebb_malloc_stats / [malloc_stats] () () -> () = stats::print();
    fn ebb_malloc_info / [malloc_info] (options: c_int, fp: *mut libc::FILE) (options, fp) -> c_int =
        super::malloc_info(options, fp);
}

/// Fill `*out` with a statistics snapshot. Returns 0, or -1 if `out` is null.
///
/// # Safety
/// `out` must be null or valid for writing an `ebb_stats_t`.
#[no_mangle]
pub unsafe extern "C" fn ebb_stats(out: *mut CStats) -> c_int {
    if out.is_null() {
        return -1;
    }
    // SAFETY: the caller passes a valid, writable ebb_stats_t.
    unsafe { *out = c_stats() };
    0
}

/// Write a statistics snapshot as one NUL-terminated JSON object into `buf` (at most
/// `len` bytes, truncated if longer) and return the length the whole text needs, not
/// counting the NUL, as `snprintf` does: call again with a bigger buffer if the result
/// is `>= len`. `buf` may be null when `len` is 0.
#[no_mangle]
pub unsafe extern "C" fn ebb_stats_json(buf: *mut c_char, len: usize) -> usize {
    use core::fmt::Write;
    let out: &mut [u8] = if buf.is_null() || len == 0 {
        &mut []
    } else {
        // SAFETY: the caller passes `len` writable bytes at `buf`.
        unsafe { core::slice::from_raw_parts_mut(buf as *mut u8, len) }
    };
    let mut w = crate::stats_json::SliceWriter::new(out);
    let _ = stats::snapshot().write_json(&mut w);
    let _ = w.write_str("");
    w.needed()
}

/// Print the retention report (where the process's RSS is) to stderr.
#[no_mangle]
pub extern "C" fn ebb_retention_print() {
    crate::observe::retention::print();
}

/// Write the retention report as one NUL-terminated JSON object into `buf`, as
/// `ebb_stats_json` does (returns the length the whole text needs).
#[no_mangle]
pub unsafe extern "C" fn ebb_retention_json(buf: *mut c_char, len: usize) -> usize {
    let out: &mut [u8] = if buf.is_null() || len == 0 {
        &mut []
    } else {
        // SAFETY: the caller passes `len` writable bytes at `buf`.
        unsafe { core::slice::from_raw_parts_mut(buf as *mut u8, len) }
    };
    let mut w = crate::stats_json::SliceWriter::new(out);
    let _ = crate::observe::retention::measure().write_json(&mut w);
    w.needed()
}

/// Print statistics to stderr.
#[no_mangle]
pub extern "C" fn ebb_stats_print() {
    stats::print();
}

/// Collect and purge now; with `force`, return all free memory regardless of the delay.
#[no_mangle]
pub extern "C" fn ebb_collect(force: bool) {
    crate::collect(force);
}

/// Read an option by name (`"purge_delay"` or `"EBB_PURGE_DELAY"`); -1 if unknown.
///
/// # Safety
/// `name` must be null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ebb_option_get(name: *const c_char) -> i64 {
    // SAFETY: the caller passes a NUL-terminated name.
    unsafe { option_get(name) }
}

/// Set an option by name. 0 on success, -1 if unknown or out of range.
///
/// # Safety
/// `name` must be null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ebb_option_set(name: *const c_char, value: i64) -> c_int {
    // SAFETY: the caller passes a NUL-terminated name.
    unsafe { option_set(name, value) }
}

/// The library version, e.g. "0.1.0".
#[no_mangle]
pub extern "C" fn ebb_version() -> *const c_char {
    VERSION.as_ptr() as *const c_char
}

/// Start the sampling heap profiler with a mean of `rate` bytes between samples (0:
/// `EBB_PROFILE_RATE`, else 512 KiB). 0 on success, -1 if its tables could not be
/// mapped.
#[no_mangle]
pub extern "C" fn ebb_profile_start(rate: usize) -> c_int {
    if crate::profile::start(rate as u64) {
        0
    } else {
        -1
    }
}

/// Stop sampling (what was sampled stays, for `ebb_profile_dump`).
#[no_mangle]
pub extern "C" fn ebb_profile_stop() {
    crate::profile::stop();
}

/// Write the heap profile to `path`: pprof's gzipped protobuf from `libebb.so` (raw
/// text where no encoder is linked, for `ebb-pprof symbolize`). 0 on success, -1 if
/// it could not be written.
///
/// # Safety
/// `path` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ebb_profile_dump(path: *const c_char) -> c_int {
    // SAFETY: per the contract.
    unsafe { dump_view_to(path, crate::profile::View::All) }
}

/// `view` written to `path` (NUL-terminated or null): 0, or -1 if it was not written.
///
/// # Safety
/// `path` is null or a NUL-terminated string.
unsafe fn dump_view_to(path: *const c_char, view: crate::profile::View) -> c_int {
    if path.is_null() {
        return -1;
    }
    // SAFETY: the caller passes a NUL-terminated string.
    let path = unsafe { core::ffi::CStr::from_ptr(path) };
    if crate::profile::dump_to(path, view) {
        0
    } else {
        -1
    }
}

/// Write what was live at the peak of the sampled live bytes so far (within 1/16 of
/// it) to `path`, as [`ebb_profile_dump`] writes. 0 on success, -1 if it could not be
/// written.
///
/// # Safety
/// `path` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ebb_profile_dump_peak(path: *const c_char) -> c_int {
    // SAFETY: per the contract.
    unsafe { dump_view_to(path, crate::profile::View::Peak) }
}
