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
#![deny(clippy::missing_safety_doc)]
#![cfg_attr(feature = "nightly", feature(allocator_api))]

#[cfg(any(feature = "std", test))]
extern crate std;

/// `debug_assert!` for code that runs inside the allocator, shadowing the standard one
/// crate-wide. The standard macro panics, and the panic allocates its message: that
/// re-enters the allocator, often under one of its locks, where the process hangs
/// instead of reporting. This one formats into a stack buffer, writes to stderr and
/// aborts (`assertion_failed`). `const fn`s keep `core::debug_assert!` (they cannot
/// call the reporter); so do the unit tests (`cfg(test)`), whose assertions must fail
/// as panics to be reported by the test harness.
#[cfg(not(test))]
macro_rules! debug_assert {
    ($cond:expr $(,)?) => {
        if cfg!(debug_assertions) && !$cond {
            $crate::diag::assertion_failed(format_args!("{}", stringify!($cond)), file!(), line!())
        }
    };
    ($cond:expr, $($arg:tt)+) => {
        if cfg!(debug_assertions) && !$cond {
            $crate::diag::assertion_failed(format_args!($($arg)+), file!(), line!())
        }
    };
}

/// `debug_assert_eq!` with the same reporting as `debug_assert!` above.
#[cfg(not(test))]
macro_rules! debug_assert_eq {
    ($left:expr, $right:expr $(,)?) => {
        if cfg!(debug_assertions) {
            match (&$left, &$right) {
                (left, right) => {
                    if !(*left == *right) {
                        $crate::diag::assertion_failed(
                            format_args!(
                                "{} == {} (left: {:?}, right: {:?})",
                                stringify!($left),
                                stringify!($right),
                                left,
                                right
                            ),
                            file!(),
                            line!(),
                        )
                    }
                }
            }
        }
    };
}

// The layers, each using only the ones below it (see ARCHITECTURE.md):
//   front -> process -> handoff -> span -> protocol, sync -> os
// beside them diag, counters, options, size_class (used by all), stats (reads span),
// c_api (the C ABI over front).
#[cfg(feature = "c-api")]
pub mod c_api;
mod counters;
mod diag;
mod front;
mod handoff;
mod heap_api;
mod memcheck;
mod observe;
mod options;
mod os;
mod process;
pub mod profile;
mod protocol;
mod size_class;
mod span;
mod stats;
mod stats_json;
mod sync;

use front::alloc;

use core::alloc::{GlobalAlloc, Layout};

#[doc(hidden)] // for tests: see `front::slow::find_page`
pub use front::guarded::GuardedStats;
pub use front::slow::FULL_PAGE_SLICES_KEPT;
pub use heap_api::{heap_tests_support, Heap, HeapStats};
pub use observe::retention::{ClassRetention, ForeignMapping, Retention};
pub use options::Options;
#[doc(hidden)] // for tests: the OS memory calls fault injection can refuse
pub use os::fault::{Kind as FaultKind, ALL_KINDS as ALL_FAULT_KINDS};
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
        if memcheck::ENABLED {
            return crate::front::valgrind::alloc(layout.size(), layout.align());
        }
        alloc::alloc(layout.size(), layout.align())
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: GlobalAlloc's contract: ptr came from this allocator.
        unsafe {
            if memcheck::ENABLED {
                return crate::front::valgrind::free(ptr);
            }
            crate::front::free::free(ptr)
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if memcheck::ENABLED {
            return crate::front::valgrind::alloc_zeroed(layout.size(), layout.align());
        }
        alloc::alloc_zeroed(layout.size(), layout.align())
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: GlobalAlloc's contract: ptr is live with this layout.
        unsafe {
            if memcheck::ENABLED {
                return crate::front::valgrind::realloc(ptr, new_size, layout.align());
            }
            crate::front::realloc::realloc(ptr, layout.size(), new_size, layout.align())
        }
    }
}

/// Allocate `size` bytes aligned to `align` (a power of two). Null on failure.
#[inline]
pub fn alloc(size: usize, align: usize) -> *mut u8 {
    if !align.is_power_of_two() {
        return core::ptr::null_mut();
    }
    if memcheck::ENABLED {
        return crate::front::valgrind::alloc(size, align);
    }
    alloc::alloc(size, align)
}

/// Allocate zeroed memory. Null on failure.
#[inline]
pub fn alloc_zeroed(size: usize, align: usize) -> *mut u8 {
    if !align.is_power_of_two() {
        return core::ptr::null_mut();
    }
    if memcheck::ENABLED {
        return crate::front::valgrind::alloc_zeroed(size, align);
    }
    alloc::alloc_zeroed(size, align)
}

/// Free a block from [`alloc`] (null is ignored; a pointer of another allocator is
/// reported on stderr and otherwise ignored; a double free, or a pointer no allocator
/// hands out, is reported and aborts: README "Security").
///
/// # Safety
/// `ptr` must be null or a live block from this allocator.
#[inline]
pub unsafe fn free(ptr: *mut u8) {
    // SAFETY: per the contract.
    unsafe {
        if memcheck::ENABLED {
            return crate::front::valgrind::free(ptr);
        }
        crate::front::free::free(ptr)
    }
}

/// Resize a block, keeping alignment `align`. Null on failure (the block is unchanged).
///
/// # Safety
/// `ptr` must be a live block from this allocator, allocated with alignment `align`.
#[inline]
pub unsafe fn realloc(ptr: *mut u8, new_size: usize, align: usize) -> *mut u8 {
    // SAFETY: per the contract.
    unsafe {
        if memcheck::ENABLED {
            return crate::front::valgrind::realloc(ptr, new_size, align);
        }
        crate::front::realloc::realloc_start(ptr, new_size, align)
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

/// True if `ptr` lies in memory ebb manages (a segment, a huge mapping, or the pool of
/// guarded sampling).
pub fn owns(ptr: *const u8) -> bool {
    let seg = span::segment::segment_of(ptr);
    // SAFETY: `seg` is `segment_of(ptr)`, checked non-null.
    (!seg.is_null() && unsafe { span::segment::mapping_holds(seg, ptr as usize) })
        || front::guarded::contains(ptr)
}

/// The pool of guarded sampling (`EBB_GUARDED_RATE`): its slots, live blocks, and the
/// memory it costs now (all zero when the option is off).
pub fn guarded_stats() -> GuardedStats {
    front::guarded::stats()
}

/// A snapshot of the allocator's statistics (cheap: a walk over page descriptors).
pub fn stats() -> Stats {
    stats::snapshot()
}

/// Print statistics to stderr (what `EBB_SHOW_STATS=1` prints at exit).
pub fn print_stats() {
    stats::print();
}

/// A statistics snapshot as one JSON object (the format of `EBB_SHOW_STATS=json` and
/// `EBB_STATS_FILE`). Without the `std` feature, use [`Stats::write_json`].
#[cfg(feature = "std")]
pub fn stats_json() -> std::string::String {
    let mut text = std::string::String::new();
    let _ = stats::snapshot().write_json(&mut text);
    text
}

/// The retention report: the process's RSS (from `/proc/self/smaps`) split into parts
/// that add up to it — live blocks, free memory ebb keeps and why, metadata, and
/// memory ebb does not own. No allocation: write it with [`Retention::write_to`] or
/// [`Retention::write_json`] (or `Display` with `std`).
pub fn retention() -> Retention {
    observe::retention::measure()
}

/// Print the retention report to stderr.
pub fn print_retention() {
    observe::retention::print();
}

/// Collect now: take in frees from other threads into abandoned pages, free the
/// calling thread's empty pages, and purge free memory whose delay has passed (all
/// free memory if `force`).
pub fn collect(force: bool) {
    let _ = handoff::drain::drain_notified();
    front::empty_pages::release_unused_pages(force);
    process::purger::purge(os::now_ms(), force);
}

/// The options in force (read from `EBB_*` environment variables at first use).
pub fn options() -> Options {
    *options::get()
}

/// Replace the options at run time (for example the purge delay). `check` keeps the
/// value the process started with (`EBB_CHECK`).
pub fn set_options(options: Options) {
    options::set(options);
}

/// True if the background purger thread is running.
pub fn background_purger_running() -> bool {
    span::deadline::purger_running()
}

/// Fault injection (tests; `EBB_FAULT_AFTER` / `EBB_FAULT_BUDGET` arm it from the
/// environment): from now on, OS memory calls of the kinds in `kinds` (bits of
/// [`FaultKind`]) are numbered from 1 and those numbered in `[fail_from, fail_until)`
/// fail, as does a reservation past `budget` bytes reserved from now on.
/// `fault_injection(u64::MAX, u64::MAX, 0, usize::MAX)` turns it off.
#[doc(hidden)]
pub fn fault_injection(fail_from: u64, fail_until: u64, kinds: u8, budget: usize) {
    os::fault::arm(fail_from, fail_until, kinds, budget);
}

/// OS memory calls fault injection has refused since the process started.
#[doc(hidden)]
pub fn faults_refused() -> u64 {
    os::fault::refused()
}

/// The calling thread's heap's activity count: the slow paths it ran and the refills
/// from other threads' frees its fast path made (what the idle-heap stealer watches).
/// 0 for a thread without a heap.
#[doc(hidden)] // for tests: see `front::alloc::malloc_gather_or_slow`
pub fn thread_activity() -> u64 {
    // SAFETY: the calling thread's heap (or the empty heap) stays valid while the
    // thread runs; the count is an atomic.
    unsafe {
        (*front::tls::heap())
            .activity
            .load(core::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(test)]
#[global_allocator]
static TEST_ALLOCATOR: Ebb = Ebb;

#[cfg(test)]
mod assertion_tests {
    use std::process::Command;
    use std::string::String;

    const CHILD: &str = "EBB_TEST_ASSERTION_CHILD";

    /// The reporter the crate's `debug_assert!` calls: in a child process (this test
    /// binary again), it must print where and what, and abort rather than hang.
    #[test]
    fn failed_assertion_reports_and_aborts() {
        if std::env::var_os(CHILD).is_some() {
            super::diag::assertion_failed(format_args!("value {} too big", 42), "here.rs", 7);
        }
        let exe = std::env::current_exe().unwrap();
        let out = Command::new(exe)
            .args([
                "--exact",
                "assertion_tests::failed_assertion_reports_and_aborts",
            ])
            .args(["--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("ebb: internal assertion failed at here.rs:7: value 42 too big"),
            "stderr: {stderr}"
        );
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{:?}", out.status);
    }
}
