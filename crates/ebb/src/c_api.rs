//! The C ABI: the `malloc` family with glibc's documented behaviour, and the `ebb_*`
//! interface (`include/ebb.h`).
//!
//! With the `c-api` feature the `ebb_*` functions are exported; with `override` the
//! standard names (`malloc`, `free`, ..., and glibc's `__libc_*` aliases) are exported
//! too, so every allocation of the process — C libraries, C++ `new` — goes through ebb.
//!
//! glibc behaviour kept here: blocks are 16-byte aligned (8 for requests of at most 8
//! bytes); `malloc(0)` returns a unique pointer; `realloc(p, 0)` frees `p` and returns
//! null; `realloc(NULL, n)` is `malloc(n)`; overflow in `calloc`/`reallocarray` returns
//! null with `ENOMEM`; `posix_memalign` returns its error and leaves `errno` alone;
//! `memalign` rounds a non-power-of-two alignment up; `aligned_alloc` rejects one with
//! `EINVAL` (C17 and glibc 2.38 on; glibc 2.36 rounded it up like `memalign`).

use crate::front::{alloc, check};
#[cfg(not(feature = "secure"))]
use crate::front::{freed_key, tls};
use crate::span::page::{Page, FREE, HUGE, LARGE};
#[cfg(not(feature = "secure"))]
use crate::span::page::{CHECK_TAG, MARKER_LIMIT};
use crate::span::segment;
use crate::{counters, diag, memcheck, options, os, stats};
use core::ffi::{c_char, c_int, c_void};
use core::ptr::null_mut;
use core::sync::atomic::Ordering;

/// The alignment glibc guarantees (`MALLOC_ALIGNMENT` on 64-bit).
pub const C_ALIGN: usize = 16;

#[inline(always)]
fn fail_enomem() -> *mut c_void {
    os::set_errno(libc::ENOMEM);
    null_mut()
}

/// `malloc`: blocks above 8 bytes are 16-byte aligned; errno is ENOMEM on failure (set on
/// the slow paths, so the fast path is a tail call with no test).
#[inline(always)]
pub fn malloc(size: usize) -> *mut c_void {
    if memcheck::ENABLED {
        return crate::front::valgrind::malloc_c(size) as *mut c_void;
    }
    alloc::malloc_c(size) as *mut c_void
}

pub fn calloc(count: usize, size: usize) -> *mut c_void {
    let Some(total) = count.checked_mul(size) else {
        return fail_enomem();
    };
    let align = if total <= 8 { 8 } else { C_ALIGN };
    let p = if memcheck::ENABLED {
        crate::front::valgrind::alloc_zeroed(total, align)
    } else {
        alloc::alloc_zeroed(total, align)
    };
    if p.is_null() {
        fail_enomem()
    } else {
        p as *mut c_void
    }
}

/// # Safety
/// `ptr` must be null or a live block from this allocator.
#[inline(always)]
pub unsafe fn free(ptr: *mut c_void) {
    // SAFETY: per the contract.
    unsafe {
        if memcheck::ENABLED {
            return crate::front::valgrind::free(ptr as *mut u8);
        }
        crate::front::free::free(ptr as *mut u8)
    }
}

/// # Safety
/// `ptr` must be null or a live block from this allocator.
pub unsafe fn realloc(ptr: *mut c_void, size: usize) -> *mut c_void {
    if ptr.is_null() {
        return malloc(size);
    }
    if size == 0 {
        // glibc frees and returns null.
        // SAFETY: per the contract.
        unsafe { free(ptr) };
        return null_mut();
    }
    let ptr = ptr as *mut u8;
    // SAFETY: per the contract; foreign pointers are caught by the segment map.
    unsafe {
        // One lookup for both: a block that stays in place is decided inline, and the
        // rest go on with the descriptor found.
        let seg = segment::segment_holding(ptr);
        let checked = if seg.is_null() {
            ours_outside_segments(ptr, "realloc")
        } else {
            let page = segment::page_of(seg, ptr);
            #[cfg(not(feature = "secure"))]
            match small_block_verdict(page, ptr, size) {
                SmallRealloc::InPlace => return ptr as *mut c_void,
                SmallRealloc::Move => {
                    let usable = (*page).block_size();
                    let p = crate::front::realloc::realloc_in(ptr, page, usable, size, C_ALIGN);
                    return if p.is_null() {
                        fail_enomem()
                    } else {
                        p as *mut c_void
                    };
                }
                SmallRealloc::Ask => {}
            }
            ours_at(page, ptr, "realloc")
        };
        let Some(page) = checked else {
            return fail_enomem();
        };
        let p = if memcheck::ENABLED {
            crate::front::valgrind::realloc(ptr, size, C_ALIGN)
        } else if page.is_null() {
            // A guarded block.
            crate::front::realloc::realloc(ptr, alloc::usable_size(ptr), size, C_ALIGN)
        } else {
            // The descriptor `ours` found, and the block's start it checked: no second
            // lookup, no remainder for its size.
            let old = alloc::usable_size_at_start(page, ptr);
            crate::front::realloc::realloc_in(ptr, page, old, size, C_ALIGN)
        };
        if p.is_null() {
            fail_enomem()
        } else {
            p as *mut c_void
        }
    }
}

/// # Safety
/// `ptr` must be null or a live block from this allocator.
pub unsafe fn reallocarray(ptr: *mut c_void, count: usize, size: usize) -> *mut c_void {
    match count.checked_mul(size) {
        // SAFETY: per the contract.
        Some(total) => unsafe { realloc(ptr, total) },
        None => fail_enomem(),
    }
}

fn aligned(align: usize, size: usize) -> *mut c_void {
    let p = if align <= 8 {
        alloc::malloc_c(size)
    } else if align <= C_ALIGN {
        // The 8-byte class is only 8-byte aligned.
        alloc::malloc_c(size.max(C_ALIGN))
    } else {
        alloc::alloc(size, align)
    };
    let p = if memcheck::ENABLED {
        crate::front::valgrind::reported(p)
    } else {
        p
    };
    if p.is_null() {
        fail_enomem()
    } else {
        p as *mut c_void
    }
}

pub fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        os::set_errno(libc::EINVAL);
        return null_mut();
    }
    aligned(align, size)
}

pub fn memalign(align: usize, size: usize) -> *mut c_void {
    if align > usize::MAX / 2 + 1 {
        os::set_errno(libc::EINVAL);
        return null_mut();
    }
    // glibc rounds a non-power-of-two alignment up to the next power of two.
    aligned(align.max(1).next_power_of_two(), size)
}

/// # Safety
/// `out` must be valid for writing a pointer.
pub unsafe fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    if align % core::mem::size_of::<*mut c_void>() != 0 || !align.is_power_of_two() {
        return libc::EINVAL;
    }
    let saved = errno();
    let p = aligned(align, size);
    os::set_errno(saved);
    if p.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: per the contract.
    unsafe { *out = p };
    0
}

pub fn valloc(size: usize) -> *mut c_void {
    aligned(os::page_size(), size)
}

pub fn pvalloc(size: usize) -> *mut c_void {
    let page = os::page_size();
    match size.max(1).checked_add(page - 1) {
        Some(rounded) => aligned(page, rounded & !(page - 1)),
        None => fail_enomem(),
    }
}

/// # Safety
/// `ptr` must be null or a live block from this allocator.
pub unsafe fn malloc_usable_size(ptr: *mut c_void) -> usize {
    let ptr = ptr as *mut u8;
    // SAFETY: per the contract.
    unsafe {
        if ptr.is_null() {
            return 0;
        }
        match ours(ptr, "malloc_usable_size") {
            None => 0,
            // A guarded block.
            Some(page) if page.is_null() => alloc::usable_size(ptr),
            // The descriptor `ours` found and the block start it checked: no second
            // lookup, no division for the offset in the block.
            Some(page) => alloc::usable_size_at_start(page, ptr),
        }
    }
}

/// C23 `free_sized(ptr, size)` and `free_aligned_sized(ptr, align, size)` (`align` 0
/// for the former), and C++ sized `operator delete` in the secure build (`what` names
/// the caller): `free`, with the size (and alignment) the program states checked
/// against the block where the mode promises it. A stated size larger than the block,
/// or an address not on the stated alignment, means the program frees another object
/// than it thinks (through the wrong type, or a stale pointer): the secure build
/// aborts on it, check mode (`EBB_CHECK=1`) reports it like an invalid free and leaves
/// the block alone. The default build frees as `free` does: the block's page knows
/// its size, and C23 lets an implementation ignore the hints (so do glibc's, jemalloc's
/// and snmalloc's in their default builds). Without these exports a program built
/// against a C library that has them (glibc 2.43) would free ebb's blocks with the C
/// library's own allocator.
///
/// # Safety
/// `ptr` must be null or a live block from this allocator.
pub unsafe fn free_stating(ptr: *mut c_void, size: usize, align: usize, what: &str) {
    let block = ptr as *mut u8;
    if !block.is_null() && (cfg!(feature = "secure") || options::get().check) {
        // SAFETY: per the contract; `is_ours` checks the pointer before anything reads
        // its block, and reports it if it is not a live block of ebb's.
        unsafe {
            if !is_ours(block, what) {
                return;
            }
            let usable = alloc::usable_size(block);
            let wrong = if size > usable {
                Some("a size larger than the block (another object, or the wrong type)")
            } else if align > 1 && block as usize % align != 0 {
                Some("the block is not on the stated alignment (another object)")
            } else {
                None
            };
            if let Some(wrong) = wrong {
                #[cfg(feature = "secure")]
                crate::span::secure::fatal(what, block, wrong);
                #[cfg(not(feature = "secure"))]
                return diag::report_invalid_sized(what, block, wrong, usable);
            }
        }
    }
    // SAFETY: per the contract.
    unsafe { free(ptr) }
}

/// [`ours`] as a yes or no.
///
/// # Safety
/// As [`ours`].
unsafe fn is_ours(ptr: *mut u8, what: &str) -> bool {
    // SAFETY: per the contract.
    unsafe { ours(ptr, what).is_some() }
}

/// The descriptor of `ptr` if it is a block of ebb's (null for a guarded block, which
/// has none); else reports it (see `diag`) and gives None: outside ebb's memory, the
/// foreign-pointer policy; inside, a pointer that is no block start, or into a span not
/// in use, or a small block holding the freed key and found on its page's free lists
/// (or, on a page another thread owns, just holding the key), is a corrupted pointer.
/// In check mode, the check bitmap decides.
///
/// # Safety
/// `ptr` is any address (the segment map decides whether it is ebb's) and, if ebb's,
/// a pointer the caller got from it.
#[inline(always)]
unsafe fn ours(ptr: *mut u8, what: &str) -> Option<*mut Page> {
    let seg = segment::segment_holding(ptr);
    if seg.is_null() {
        return ours_outside_segments(ptr, what);
    }
    // SAFETY: seg is the segment of ptr.
    unsafe { ours_at(segment::page_of(seg, ptr), ptr, what) }
}

/// [`ours`] past the lookup: `page` is the descriptor of `ptr`, which lies in a segment.
///
/// # Safety
/// As [`ours`]; `page` is `segment::page_of(segment_holding(ptr), ptr)`.
#[inline(always)]
unsafe fn ours_at(page: *mut Page, ptr: *mut u8, what: &str) -> Option<*mut Page> {
    if options::get().check {
        // SAFETY: page is the descriptor of ptr.
        if !unsafe { check::is_live_block(page, ptr) } {
            report(ptr, what, "pointer is not a live block");
            return None;
        }
        return Some(page);
    }
    // SAFETY: page is the descriptor of ptr; its block size and start do not change
    // while it holds blocks, and the owner's lists are walked only by the owner.
    unsafe {
        let owner = (*page).owner.load(Ordering::Acquire);
        let size = (*page).block_size();
        let start = (*page).start as usize;
        let problem = match owner {
            // Not DRAINING: a drainer holds an abandoned page while it takes remote
            // frees in, and the page's other blocks are live meanwhile (the store
            // scenario's realloc of a postings vector hit that window in 5 of 12 runs).
            FREE => Some("pointer into memory not in use (freed?)"),
            LARGE | HUGE if ptr as usize != start => Some("pointer is not the start of a block"),
            LARGE | HUGE => None,
            // The secure build tells a carved block's start with a multiply, not a
            // division, and a free one by its link word (`front::secure`).
            #[cfg(feature = "secure")]
            _ => crate::front::secure::small_block_problem(page, ptr),
            #[cfg(not(feature = "secure"))]
            _ if size == 0
                || !crate::span::block_divisor::is_block_multiple(
                    (ptr as usize).wrapping_sub(start),
                    (*page).block_magic,
                ) =>
            {
                Some("pointer is not the start of a block")
            }
            #[cfg(not(feature = "secure"))]
            _ if freed_key::is_marked(ptr) => {
                let heap = tls::heap();
                let own = owner & !CHECK_TAG == heap as usize;
                if !own {
                    Some("block is not in use (freed)")
                } else {
                    (*heap).enter();
                    let freed = freed_key::is_on_free_list(page, ptr);
                    (*heap).leave();
                    freed.then_some("block is not in use (freed)")
                }
            }
            #[cfg(not(feature = "secure"))]
            _ => None,
        };
        if let Some(problem) = problem {
            diag::report_invalid_sized(what, ptr, problem, if owner == HUGE { 0 } else { size });
            return None;
        }
    }
    Some(page)
}

/// What `realloc` does with a block of a page of blocks, decided in one pass over
/// [`ours`]' tests for it (the same tests, in the same order).
#[cfg(not(feature = "secure"))]
enum SmallRealloc {
    /// It stays where it is, and nothing changes: at least half used with no tail worth
    /// giving back (`front::realloc::realloc_in`'s answer for it is the same).
    InPlace,
    /// A live block of a page a heap owns, checked as `ours` would: for `realloc_in`.
    Move,
    /// Anything else (check mode, the `valgrind` build, a marker owner, a block holding
    /// the freed key): for `ours_at` to check and report.
    Ask,
}

/// [`SmallRealloc`] for `realloc(ptr, size)`. Inline, without `ours`' and
/// `realloc_in`'s calls and register saves, an in-place `realloc` takes about 60
/// instructions fewer than it did (`bench/callgrind/realloc.c inplace`: 27.1 M -> 15.1
/// M in all; 295 -> 158 ms at 20,000 rounds, tcmalloc 125, mimalloc 2 156).
///
/// # Safety
/// As [`ours_at`].
#[cfg(not(feature = "secure"))]
#[inline(always)]
unsafe fn small_block_verdict(page: *mut Page, ptr: *mut u8, size: usize) -> SmallRealloc {
    if memcheck::ENABLED {
        return SmallRealloc::Ask;
    }
    // SAFETY: page is ptr's descriptor; its block size, start and magic do not change
    // while its owner word is a heap's (it holds blocks).
    unsafe {
        let owner = (*page).owner.load(Ordering::Acquire);
        if owner < MARKER_LIMIT || options::get().check {
            return SmallRealloc::Ask;
        }
        let usable = (*page).block_size();
        let offset = (ptr as usize).wrapping_sub((*page).start as usize);
        if !crate::span::block_divisor::is_block_multiple(offset, (*page).block_magic)
            || freed_key::is_marked(ptr)
        {
            return SmallRealloc::Ask;
        }
        if size <= usable
            && size >= usable / 2
            && usable - size < crate::span::shrink::SHRINK_DECOMMIT_MIN
        {
            SmallRealloc::InPlace
        } else {
            SmallRealloc::Move
        }
    }
}

/// [`ours`] for a pointer in no segment: a live guarded block (`Some(null)`), else
/// reported.
#[cold]
#[inline(never)]
fn ours_outside_segments(ptr: *mut u8, what: &str) -> Option<*mut Page> {
    match crate::front::guarded::live_size(ptr, what) {
        Some(live) => live.map(|_| null_mut()),
        None => {
            diag::report_unknown(what, ptr, crate::span::segment::in_map_range(ptr));
            None
        }
    }
}

fn report(ptr: *mut u8, function: &str, what: &str) {
    diag::report_invalid(function, ptr, what);
}

fn errno() -> c_int {
    os::errno()
}

/// `malloc_trim`: return every free page to the OS now. 1 if memory was released.
pub fn malloc_trim(_pad: usize) -> c_int {
    let before = counters::COUNTERS
        .purged
        .load(core::sync::atomic::Ordering::Relaxed);
    crate::collect(true);
    (counters::COUNTERS
        .purged
        .load(core::sync::atomic::Ordering::Relaxed)
        != before) as c_int
}

/// glibc's `struct mallinfo2`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Mallinfo2 {
    pub arena: usize,
    pub ordblks: usize,
    pub smblks: usize,
    pub hblks: usize,
    pub hblkhd: usize,
    pub usmblks: usize,
    pub fsmblks: usize,
    pub uordblks: usize,
    pub fordblks: usize,
    pub keepcost: usize,
}

/// glibc's `struct mallinfo` (int fields).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Mallinfo {
    pub arena: c_int,
    pub ordblks: c_int,
    pub smblks: c_int,
    pub hblks: c_int,
    pub hblkhd: c_int,
    pub usmblks: c_int,
    pub fsmblks: c_int,
    pub uordblks: c_int,
    pub fordblks: c_int,
    pub keepcost: c_int,
}

pub fn mallinfo2() -> Mallinfo2 {
    let s = stats::snapshot();
    let huge_live = (s.huge_allocs.saturating_sub(
        counters::COUNTERS
            .huge_frees
            .load(core::sync::atomic::Ordering::Relaxed),
    )) as usize;
    Mallinfo2 {
        arena: (s.committed - s.allocated_huge) as usize,
        ordblks: s.pages as usize,
        smblks: 0,
        hblks: huge_live,
        hblkhd: s.allocated_huge as usize,
        usmblks: 0,
        fsmblks: 0,
        uordblks: (s.allocated - s.allocated_huge) as usize,
        fordblks: s.committed.saturating_sub(s.allocated) as usize,
        keepcost: s.free_committed as usize,
    }
}

pub fn mallinfo() -> Mallinfo {
    let m = mallinfo2();
    let c = |v: usize| v.min(c_int::MAX as usize) as c_int;
    Mallinfo {
        arena: c(m.arena),
        ordblks: c(m.ordblks),
        smblks: c(m.smblks),
        hblks: c(m.hblks),
        hblkhd: c(m.hblkhd),
        usmblks: c(m.usmblks),
        fsmblks: c(m.fsmblks),
        uordblks: c(m.uordblks),
        fordblks: c(m.fordblks),
        keepcost: c(m.keepcost),
    }
}

/// `ebb_stats_t` in `include/ebb.h`: every field is a `uint64_t`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct CStats {
    pub allocated: u64,
    pub committed: u64,
    pub free_committed: u64,
    pub reserved: u64,
    pub purged: u64,
    pub purge_calls: u64,
    pub segments: u64,
    pub pages: u64,
    pub pages_abandoned: u64,
    pub threads: u64,
    pub threads_created: u64,
    pub large_allocs: u64,
    pub huge_allocs: u64,
    pub purger_wakeups: u64,
    pub invalid_frees: u64,
    pub purger_cpu_ns: u64,
    pub resident: u64,
    pub metadata: u64,
    pub huge_kept: u64,
    pub heaps_live: u64,
    pub heaps_spare: u64,
    pub remote_freed_blocks: u64,
    pub remote_freed_bytes: u64,
}

pub fn c_stats() -> CStats {
    let s = stats::snapshot();
    CStats {
        allocated: s.allocated,
        committed: s.committed,
        free_committed: s.free_committed,
        reserved: s.reserved,
        purged: s.purged,
        purge_calls: s.purge_calls,
        segments: s.segments,
        pages: s.pages,
        pages_abandoned: s.pages_abandoned,
        threads: s.threads,
        threads_created: s.threads_created,
        large_allocs: s.large_allocs,
        huge_allocs: s.huge_allocs,
        purger_wakeups: s.purger_wakeups,
        invalid_frees: s.invalid_frees,
        purger_cpu_ns: s.purger_cpu_ns,
        resident: s.resident,
        metadata: s.metadata,
        huge_kept: s.huge_kept,
        heaps_live: s.heaps_live,
        heaps_spare: s.heaps_spare,
        remote_freed_blocks: s.remote_freed_blocks,
        remote_freed_bytes: s.remote_freed_bytes,
    }
}

/// Read option `name` (without the `EBB_` prefix, any case). -1 if unknown.
///
/// # Safety
/// `name` must be null or a NUL-terminated string.
pub unsafe fn option_get(name: *const c_char) -> i64 {
    let o = options::get();
    // SAFETY: per the contract.
    match unsafe { option_name(name) } {
        Some(OptionName::PurgeDelay) => o.purge_delay_ms as i64,
        // 2: `threads` (only once a second thread has allocated).
        Some(OptionName::Background) => match (o.background, o.background_alone) {
            (false, _) => 0,
            (true, true) => 1,
            (true, false) => 2,
        },
        Some(OptionName::ShowStats) => o.show_stats as i64,
        Some(OptionName::ShowErrors) => o.show_errors as i64,
        Some(OptionName::Check) => o.check as i64,
        Some(OptionName::AbortOnError) => o.abort_on_error as i64,
        Some(OptionName::LargePages) => o.large_pages as i64,
        Some(OptionName::DenseHugePages) => o.dense_huge_pages as i64,
        None => -1,
    }
}

/// Set option `name`. 0 on success, -1 if unknown or the value is out of range.
///
/// # Safety
/// `name` must be null or a NUL-terminated string.
pub unsafe fn option_set(name: *const c_char, value: i64) -> c_int {
    let mut o = *options::get();
    if value < 0 {
        return -1;
    }
    // SAFETY: per the contract.
    match unsafe { option_name(name) } {
        Some(OptionName::PurgeDelay) => o.purge_delay_ms = value as u64,
        Some(OptionName::Background) => {
            if value > 2 {
                return -1;
            }
            o.background = value != 0;
            o.background_alone = value != 2;
        }
        Some(OptionName::ShowStats) => o.show_stats = value != 0,
        Some(OptionName::ShowErrors) => o.show_errors = value != 0,
        // Check mode is fixed when the process starts (see check.rs).
        Some(OptionName::Check) => return if (value != 0) == o.check { 0 } else { -1 },
        Some(OptionName::AbortOnError) => o.abort_on_error = value != 0,
        Some(OptionName::LargePages) => o.large_pages = value != 0,
        Some(OptionName::DenseHugePages) => o.dense_huge_pages = value != 0,
        None => return -1,
    }
    options::set(o);
    0
}

enum OptionName {
    PurgeDelay,
    Background,
    ShowStats,
    ShowErrors,
    Check,
    AbortOnError,
    LargePages,
    DenseHugePages,
}

/// The option a C string names (`EBB_` prefix optional, any case).
///
/// # Safety
/// `name` must be null or a NUL-terminated string.
unsafe fn option_name(name: *const c_char) -> Option<OptionName> {
    if name.is_null() {
        return None;
    }
    // SAFETY: per the caller's contract, name is NUL-terminated.
    let bytes = unsafe { core::slice::from_raw_parts(name as *const u8, libc::strlen(name)) };
    let bytes = bytes.strip_prefix(b"EBB_").unwrap_or(bytes);
    let mut lower = [0u8; 32];
    if bytes.len() > lower.len() {
        return None;
    }
    for (d, s) in lower.iter_mut().zip(bytes) {
        *d = s.to_ascii_lowercase();
    }
    match &lower[..bytes.len()] {
        b"purge_delay" => Some(OptionName::PurgeDelay),
        b"background" => Some(OptionName::Background),
        b"show_stats" => Some(OptionName::ShowStats),
        b"show_errors" => Some(OptionName::ShowErrors),
        b"check" => Some(OptionName::Check),
        b"abort_on_error" => Some(OptionName::AbortOnError),
        b"large_pages" => Some(OptionName::LargePages),
        b"dense_huge_pages" => Some(OptionName::DenseHugePages),
        _ => None,
    }
}

pub const VERSION: &[u8] = concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes();

/// The exported symbols. `ebb_*` with `c-api`; standard names with `override`.
#[cfg(feature = "override")]
mod cxx;
#[cfg(feature = "c-api")]
mod exports;
mod heap;
mod malloc_info;
pub use malloc_info::malloc_info;
