//! The OS contract: every primitive the allocator needs from the platform, and the one
//! place that implements them. Nothing else in the crate makes a system call or reads
//! `errno`; a port provides another implementation module with the same items (the
//! signature checks at the end of this file name each one) and selects it below.
//! `docs/PORTING.md` says what a macOS or Windows port must provide.
//!
//! Nothing here may allocate through a global allocator, and every function except
//! [`set_errno`] leaves the caller's `errno` as it found it (system calls that fail as
//! a matter of course must not leak an error into a program whose `malloc` succeeded).
//!
//! # Capabilities (constants of the implementation)
//! - [`ADDRESS_BITS`]: user addresses the kernel hands out are below `2^ADDRESS_BITS`
//!   (x86-64: 47, arm64: 48). Sizes the segment map (`span::segment`) and bounds the
//!   address bits the remote-free list head may use for its length tag.
//! - [`DECOMMIT_ZEROES`]: memory [`decommit`] returned reads as zero afterwards, so a
//!   span made only of never-touched or decommitted slices is known zero and
//!   `alloc_zeroed` skips its memset (and zeroes a reused huge block by decommitting
//!   it). False: the arena treats no span as zero (it cannot tell never-touched
//!   slices from decommitted ones), and `alloc_zeroed` writes zeros.
//! - [`HAS_REMAP`]: [`remap`] can grow a mapping in place or move its pages without a
//!   copy. False: `remap` always returns null and huge `realloc` copies.
//! - [`HAS_PROTECT`]: [`protect`] can make a page-aligned part of a reservation
//!   inaccessible and accessible again. False: `protect` always returns false, and the
//!   secure build has no guard pages (it says so at start).
//! - [`HAS_MEMBARRIER`]: [`membarrier`] exists (a full barrier on every running thread
//!   of the process). False: idle heaps are never taken over (their pages wait for
//!   their thread's next allocator call or its exit).
//! - [`HUGE_PAGE_SIZE`]: the size of a transparent huge page (the page a page-table
//!   entry one level up maps: 2 MiB on x86-64 and on arm64 with 4 KiB pages), or 0 if
//!   the target has none. `EBB_LARGE_PAGES=1` keeps purges in units of it
//!   (`span/large_pages.rs`); with 0 the option does nothing.
//!
//! # Primitives
//! Memory:
//! - `reserve_aligned(size, align) -> *mut u8`: `size` (a multiple of [`page_size`])
//!   bytes of read/write address space at a multiple of `align` (a power of two, at
//!   least the page size), reading as zero, committed lazily on first touch. Null on
//!   failure. Pre: none. Post: the range belongs to the caller until [`release`].
//! - `release(ptr, size)`: give a reservation (or a page-aligned tail of one) back.
//!   Pre: nobody uses the range.
//! - `decommit(ptr, size) -> bool`: the range's physical memory goes back to the OS at
//!   once, it stays reserved and usable (touching it commits it again); true if done.
//!   Pre: page aligned, reserved, holding no live data. Post: reads as zero if
//!   [`DECOMMIT_ZEROES`].
//! - `decommit_ranges(ranges, done)`: `decommit` each range (`done[i]`: range `i` went
//!   back), in fewer system calls where the OS takes a vector of ranges; the purger
//!   gives back many small runs per pass. `decommit_calls()`: the system calls made
//!   to decommit so far.
//! - `remap(old, old_size, new_size, dest) -> *mut u8`: resize a reservation in place
//!   (`dest` null) or move its pages to the reservation at `dest`; null if it cannot.
//!   Pre: `old` reserved with `old_size`; `dest` null or an unused reservation of
//!   `new_size` bytes. Post: on success the contents are at the returned address; on
//!   failure they are whole at `old` (Linux: what a move of several mappings moved
//!   before it failed is copied back).
//! - `move_pages(from, to, size) -> bool`: move the pages of one range to another
//!   without copying, the source staying reserved and reading as zero afterwards, none
//!   of it resident; false if the OS cannot (then the source is unchanged). Pre: both
//!   page aligned, reserved, disjoint, unused. (`realloc` of a large block into a huge
//!   one; an OS without it returns false and the block is copied.)
//! - `populate_huge_pages(ptr, size) -> bool`: back an untouched range of whole huge
//!   pages with huge pages now, and keep the OS from collapsing it into huge pages
//!   again after parts of it are decommitted (Linux: `MADV_HUGEPAGE`, a zero written
//!   per huge page, `MADV_NOHUGEPAGE`). False if refused. Pre: reserved, aligned to
//!   `HUGE_PAGE_SIZE`, untouched, unused.
//! - `unadvise_huge_pages(ptr, size) -> bool`: undo `advise_huge_pages` over a range
//!   (Linux: `MADV_NOHUGEPAGE`): later faults map base pages. Advice only. Pre:
//!   reserved, page aligned.
//! - `protect(ptr, size, accessible) -> bool`: make a page-aligned range of a
//!   reservation fault on any access, or read/write again; true if done. Pre: page
//!   aligned, reserved, unused while inaccessible. (The secure build's guard pages and
//!   guarded sampling, `front/guarded.rs`.)
//! - `remap_fresh(ptr, size) -> bool`: make a range of a reservation fresh pages
//!   reading as zero, whatever of it is mapped now (after a failed `remap` or
//!   `move_pages` into it, which may have unmapped it or moved part of a source in).
//!   Pre: page aligned, reserved by the caller, unused.
//! - `mapping_count() -> Option<usize>`: how many mappings the process has now (Linux:
//!   VMAs, the lines of `/proc/self/maps`), and `mapping_limit() -> Option<usize>`: how
//!   many the OS allows (`vm.max_map_count`); None if unknown. Moves split mappings, so
//!   `span/move_budget.rs` pauses them near the limit; an OS without such a limit
//!   returns None and moves never pause.
//! - `reserve_at(at, size) -> *mut u8`: as `reserve_aligned`, but exactly at `at`, or
//!   null if that range is taken (never replaces a mapping). (Randomised placement.)
//! - `random_seed() -> u64`: 64 unpredictable bits (the secure build's keys).
//! - `advise_huge_pages(ptr, size) -> bool`: ask the OS to back the range with huge
//!   pages where whole aligned huge pages fit in it (Linux: `MADV_HUGEPAGE`, which is
//!   what makes transparent huge pages used at all in the kernel's `madvise` mode).
//!   Advice only: true if taken, false if the OS refused or has no huge pages; the
//!   memory works the same either way. Pre: reserved, page aligned.
//! - `page_size() -> usize`.
//! - `valgrind_mark_defined(ptr, size)`: tell a memory checker the range is defined
//!   (a no-op natively).
//!
//! Time: `now_ms() -> u64` (monotonic, may be a few ms coarse, no system call
//! preferred: it runs on slow paths), `now_ms_by_syscall() -> u64` (the same clock,
//! leaving no frame of a library on the stack: the heap profiler's sampling path),
//! `thread_cpu_time_ns() -> u64` (the calling thread's CPU time) and
//! `thread_sys_time_ns() -> u64` (the part of it spent in the kernel, approximate; 0
//! where the OS does not tell): the purger's accounting only.
//!
//! Waiting: `wait(word, expected, timeout_ms)`: sleep while `*word == expected`, at
//! most `timeout_ms`; may return spuriously. `wake(word, count)`: wake up to `count`
//! waiters of `word`. (Linux: futex. The lock in `sync.rs` and the purger's sleep are
//! built on these two only.) `yield_now()`: let another thread run.
//!
//! Cross-thread barrier: `membarrier_register() -> bool`, `membarrier() -> bool` (see
//! [`HAS_MEMBARRIER`]).
//!
//! Threads and process: `spawn_detached(entry, stack_bytes) -> bool` (a detached
//! thread; it may call malloc) and `spawn_joinable(entry, stack_bytes) -> Option<u64>`
//! / `join(handle)`, both starting the thread with every signal blocked (the program's
//! handlers never run on the allocator's threads), `spawning_here() -> bool` (the
//! calling thread is inside one of those: what the thread library allocates meanwhile
//! is the allocator's, which the heap profiler leaves out); `detach_files() -> bool` (the
//! calling thread leaves the process's file-descriptor table for an empty one of its
//! own, so the program's descriptor calls take the kernel's single-user fast path; true
//! if done; `write_fd` on 0-2 still reaches the process's descriptors from such a
//! thread), `name_thread(name)` (the calling thread's name as tools show it: the
//! allocator's threads are `ebb-purger`, `ebb-report`, `ebb-profile`; a no-op where
//! there is no such name), `process_thread_count() -> Option<u64>` (live threads
//! of the process; None if unknown: the purger then never ends itself),
//! `thread_key_create(dtor) -> Option<u32>` / `thread_key_set` / `thread_key_get` (a
//! per-thread value whose destructor runs at thread exit, where the thread may still
//! allocate), `at_fork(prepare, parent, child)`, `at_exit(f)`, `abort() -> !`.
//!
//! Environment and output: `getenv(name) -> Option<&'static [u8]>` (without
//! allocating; `name` NUL-terminated), `for_each_env(f)` (`f(name, value)` for every
//! variable, without allocating: the check of `EBB_*` names), `next_symbol(name)` (the
//! definition of a symbol that ebb's export of it hides: the C++ runtime's `operator
//! new`, which a failed `new` is handed to), `write_fd(fd, bytes)`, `dup_stderr_cloexec()`,
//! `create_file(path) -> Option<c_int>` (create or truncate for writing; `path`
//! NUL-terminated; the heap profile), `append_file(path)` (create or append: the
//! `EBB_STATS_FILE` and `EBB_REPORT` reports, one per ebb instance and signal) and
//! `close_fd(fd)`, `process_id()`.
//!
//! Faults: `catch_faults(handler) -> bool`: call `handler(address)` on every memory
//! fault (SIGSEGV, SIGBUS) of the process; if it returns true, the previous handlers
//! come back and the fault happens again (it ends the process as it would have);
//! else the fault goes to the previous handler. Guarded sampling only, installed once.
//!
//! Observation (stats and the retention report, `observe/`): `mincore(ptr, len, out)`
//! (which OS pages of a mapped range are resident, one byte per page, bit 0; false if
//! part of the range is not mapped), `open_read(path)`, `read_fd(fd, buf)` and
//! `read_fd_at(fd, buf, offset)` (reading `/proc/self/smaps` into a caller's buffer,
//! `/proc/self/pagemap` entries), `signal_number(name)` and
//! `on_signal(signo, handler)` (`EBB_REPORT_SIGNAL`; the handler it replaces, if a
//! plain function, is called by `pass_on_signal(signo)` at the end of ebb's: another
//! ebb instance's in the same process), `accept_signal(signo)` (the
//! calling allocator thread takes that signal, so one sent to it alone interrupts
//! none of the program's threads), `read_checked(src, dst)` (copy
//! from our own memory, false instead of a fault if another thread unmapped it: the
//! header of a huge mapping found through the segment map may be freed meanwhile).
//!
//! Fault injection (`fault.rs`, shared by every implementation): `reserve_aligned`,
//! `reserve_at`, `decommit`, `remap` (and `move_pages`), `advise_huge_pages` and `protect` ask [`fault::refuse`] first and fail as the OS would when it
//! says so; `release` reports the bytes it gives back with [`fault::released`].
//!
//! Errors: `errno() -> c_int` and `set_errno(c_int)` (the C ABI's error reporting),
//! `preserving_errno(f)`.
//!
//! Thread-local storage is not part of this contract: `front::tls` reaches the heap
//! pointer with initial-exec TLS on x86-64 Linux and through the thread key elsewhere.

pub mod fault;

/// What [`for_each_env`] calls with each variable's name and value.
pub type EnvVisitor<'a> = dyn FnMut(&'static [u8], &'static [u8]) + 'a;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub use linux::*;
#[cfg(target_os = "linux")]
mod linux_advice;
#[cfg(target_os = "linux")]
pub use linux_advice::*;
#[cfg(target_os = "linux")]
mod linux_move;
#[cfg(target_os = "linux")]
pub use linux_move::*;
#[cfg(target_os = "linux")]
mod linux_signals;
#[cfg(target_os = "linux")]
pub use linux_signals::*;
#[cfg(target_os = "linux")]
mod linux_threads;
#[cfg(target_os = "linux")]
pub use linux_threads::*;

#[cfg(not(target_os = "linux"))]
compile_error!(
    "ebb has no implementation of its OS contract (crates/ebb/src/os/mod.rs) for this \
     target; see docs/PORTING.md"
);

// The contract, checked: each item the implementation must provide, with its type.
#[cfg(target_os = "linux")]
mod contract {
    use super::*;
    use core::ffi::{c_int, c_void};
    use core::sync::atomic::AtomicU32;

    const _: usize = ADDRESS_BITS;
    const _: bool = DECOMMIT_ZEROES;
    const _: bool = HAS_REMAP;
    const _: bool = HAS_MEMBARRIER;
    const _: bool = HAS_PROTECT;
    const _: usize = HUGE_PAGE_SIZE;
    const _: () = assert!(HUGE_PAGE_SIZE == 0 || HUGE_PAGE_SIZE.is_power_of_two());
    const _: () = assert!(ADDRESS_BITS >= 39 && ADDRESS_BITS <= 48);
    const _: fn(usize, usize) -> *mut u8 = reserve_aligned;
    const _: unsafe fn(*mut u8, usize) = release;
    const _: unsafe fn(*mut u8, usize) -> bool = decommit;
    const _: unsafe fn(&[(*mut u8, usize)], &mut [bool]) = decommit_ranges;
    const _: fn() -> u64 = decommit_calls;
    const _: unsafe fn(*mut u8, usize, usize, *mut u8) -> *mut u8 = remap;
    const _: unsafe fn(*mut u8, *mut u8, usize) -> bool = move_pages;
    const _: unsafe fn(*mut u8, usize) -> bool = remap_fresh;
    const _: fn() -> Option<usize> = mapping_count;
    const _: fn() -> Option<usize> = mapping_limit;
    const _: unsafe fn(*mut u8, usize, bool) -> bool = protect;
    const _: fn(*mut u8, usize) -> *mut u8 = reserve_at;
    const _: fn() -> u64 = random_seed;
    const _: unsafe fn(*mut u8, usize) -> bool = advise_huge_pages;
    const _: unsafe fn(*mut u8, usize) -> bool = populate_huge_pages;
    const _: unsafe fn(*mut u8, usize) -> bool = unadvise_huge_pages;
    const _: fn() -> usize = page_size;
    const _: fn(fn(usize) -> bool) -> bool = catch_faults;
    const _: fn(*mut u8, usize) = valgrind_mark_defined;
    const _: fn() -> u64 = now_ms;
    const _: fn() -> u64 = now_ms_by_syscall;
    const _: fn() -> u64 = thread_cpu_time_ns;
    const _: fn() -> u64 = thread_sys_time_ns;
    const _: fn(&AtomicU32, u32, Option<u64>) = wait;
    const _: fn(&AtomicU32, u32) = wake;
    const _: fn() = yield_now;
    const _: fn() -> bool = membarrier_register;
    const _: fn() -> bool = membarrier;
    const _: fn(extern "C" fn(*mut c_void) -> *mut c_void, usize) -> bool = spawn_detached;
    const _: fn(extern "C" fn(*mut c_void) -> *mut c_void, usize) -> Option<u64> = spawn_joinable;
    const _: fn(u64) = join;
    const _: fn() -> bool = spawning_here;
    const _: fn() -> bool = detach_files;
    const _: fn(&'static [u8]) = name_thread;
    const _: fn() -> Option<u64> = process_thread_count;
    const _: fn(unsafe extern "C" fn(*mut c_void)) -> Option<u32> = thread_key_create;
    const _: fn(u32, *mut c_void) = thread_key_set;
    const _: fn(u32) -> *mut c_void = thread_key_get;
    const _: fn(unsafe extern "C" fn(), unsafe extern "C" fn(), unsafe extern "C" fn()) = at_fork;
    const _: fn(extern "C" fn()) = at_exit;
    const _: fn() -> ! = abort;
    const _: fn(&[u8]) -> Option<&'static [u8]> = getenv;
    const _: fn(&mut EnvVisitor<'_>) = for_each_env;
    const _: fn(&[u8]) -> *mut c_void = next_symbol;
    const _: fn(c_int, &[u8]) = write_fd;
    const _: fn() -> c_int = dup_stderr_cloexec;
    const _: fn(&[u8]) -> Option<c_int> = create_file;
    const _: fn(&[u8]) -> Option<c_int> = append_file;
    const _: fn(c_int) = close_fd;
    const _: fn() -> u64 = process_id;
    const _: fn(*const u8, usize, &mut [u8]) -> bool = mincore;
    const _: fn(&[u8]) -> Option<c_int> = open_read;
    const _: fn(c_int, &mut [u8]) -> isize = read_fd;
    const _: fn(c_int, &mut [u8], u64) -> isize = read_fd_at;
    const _: fn(&[u8]) -> Option<c_int> = signal_number;
    const _: fn(c_int, extern "C" fn(c_int)) -> bool = on_signal;
    const _: fn(c_int) = pass_on_signal;
    const _: fn(c_int) -> bool = accept_signal;
    const _: fn(usize, &mut [u8]) -> bool = read_checked;
    const _: fn() -> c_int = errno;
    const _: fn(c_int) = set_errno;
}
