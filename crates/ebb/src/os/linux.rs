//! Linux implementation of the OS contract (`os/mod.rs`): mmap/munmap/madvise/mremap,
//! futex, membarrier, the vDSO clocks, pthreads, `/proc/self/stat`, glibc's errno.

use core::ffi::{c_char, c_int, c_void};
use core::ptr::null_mut;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

/// User address space: 4-level page tables (47 bits on x86-64; 48 on arm64, where the
/// kernel's default 48-bit VA can map up to 2^48). 5-level tables (57 bits) hand out
/// addresses above these only to `mmap` hints above them, which ebb never gives.
#[cfg(target_arch = "x86_64")]
pub const ADDRESS_BITS: usize = 47;
#[cfg(target_arch = "aarch64")]
pub const ADDRESS_BITS: usize = 48;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("ebb's Linux OS layer knows the address-space size of x86-64 and aarch64 only");

/// `MADV_DONTNEED` on a private anonymous mapping: the pages read back as zero.
pub const DECOMMIT_ZEROES: bool = true;
/// `mremap` resizes in place or moves pages without copying.
pub const HAS_REMAP: bool = true;
/// `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` (Linux 4.14; the purger checks at run
/// time with `membarrier_register`).
pub const HAS_MEMBARRIER: bool = true;

/// A transparent huge page maps 2 MiB with 4 KiB base pages (x86-64; arm64 kernels
/// built with 16 or 64 KiB pages have bigger ones, which `advise_huge_pages` declines:
/// segments hold 32 MiB, too few of those).
pub const HUGE_PAGE_SIZE: usize = 2 << 20;

static PAGE_SIZE: AtomicUsize = AtomicUsize::new(0);

/// The OS page size (read once; 4 KiB on x86-64 Linux, 16/64 KiB on some arm64).
#[inline]
pub fn page_size() -> usize {
    let cached = PAGE_SIZE.load(Ordering::Relaxed);
    if cached != 0 {
        return cached;
    }
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let size = if size > 0 { size as usize } else { 4096 };
    PAGE_SIZE.store(size, Ordering::Relaxed);
    size
}

/// Reserve `size` bytes aligned to `align` (a power of two, at least the page size).
/// Returns null on failure. The memory reads as zero and is committed on first touch.
pub fn reserve_aligned(size: usize, align: usize) -> *mut u8 {
    debug_assert!(align.is_power_of_two() && size % page_size() == 0);
    let Some(over) = size.checked_add(align) else {
        return null_mut();
    };
    if super::fault::refuse(super::fault::Kind::Reserve, size) {
        return null_mut();
    }
    // SAFETY: an anonymous private mapping at a kernel-chosen address touches no
    // existing memory. A failure is reported by returning null (the C API sets ENOMEM).
    let raw = preserving_errno(|| unsafe {
        libc::mmap(
            null_mut(),
            over,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    });
    if raw == libc::MAP_FAILED {
        // Too little address space for the over-sized mapping (`ulimit -v`): look for
        // an aligned hole of just `size` bytes.
        return reserve_aligned_exact(size, align);
    }
    let raw = raw as usize;
    let start = (raw + align - 1) & !(align - 1);
    let head = start - raw;
    let tail = over - head - size;
    // SAFETY: both trimmed ranges lie inside the mapping just made and are not used.
    unsafe {
        if head > 0 {
            libc::munmap(raw as *mut c_void, head);
        }
        if tail > 0 {
            libc::munmap((start + size) as *mut c_void, tail);
        }
    }
    start as *mut u8
}

/// Map `size` bytes at an `align`ed address without mapping more than `size` at any
/// time: where the kernel would put the mapping, else at aligned addresses below that
/// (the kernel hands out addresses top-down). Null if no hole is found.
fn reserve_aligned_exact(size: usize, align: usize) -> *mut u8 {
    const ATTEMPTS: usize = 64;
    let map = |hint: usize, flags: c_int| {
        // SAFETY: an anonymous mapping at a hint, never MAP_FIXED: with
        // MAP_FIXED_NOREPLACE (ignored, so just a hint, before Linux 4.17) the kernel
        // fails rather than replace an existing mapping.
        preserving_errno(|| unsafe {
            libc::mmap(
                hint as *mut c_void,
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | flags,
                -1,
                0,
            )
        })
    };
    let unmap = |at: *mut c_void| {
        // SAFETY: `at` is a mapping of `size` bytes just made here and not handed out.
        unsafe { libc::munmap(at, size) };
    };
    let probe = map(0, 0);
    if probe == libc::MAP_FAILED {
        return null_mut();
    }
    if probe as usize % align == 0 {
        return probe as *mut u8;
    }
    unmap(probe);
    let mut hint = probe as usize & !(align - 1);
    for _ in 0..ATTEMPTS {
        let got = map(hint, libc::MAP_FIXED_NOREPLACE);
        if got as usize == hint {
            return hint as *mut u8;
        }
        if got != libc::MAP_FAILED {
            unmap(got);
        }
        match hint.checked_sub(align) {
            Some(lower) if lower > 0 => hint = lower,
            _ => break,
        }
    }
    null_mut()
}

/// `mprotect` works on any page-aligned part of a reservation (`protect`).
pub const HAS_PROTECT: bool = true;

/// Make `[ptr, ptr + size)` inaccessible (`accessible` false: any access faults) or
/// read/write again. False if the OS refused (e.g. the process's mapping count limit,
/// `vm.max_map_count`: each protected range inside a mapping splits it).
///
/// # Safety
/// The range must be page aligned and inside a reservation of this module; while it is
/// inaccessible nobody may use it.
pub unsafe fn protect(ptr: *mut u8, size: usize, accessible: bool) -> bool {
    debug_assert!(ptr as usize % page_size() == 0 && size % page_size() == 0);
    // Both directions are refusable by fault injection, as by the OS. Guarded sampling
    // then serves the allocation unguarded; the secure build cannot hand out a span
    // whose guard it failed to lift, so that refusal is fatal there (secure::unguard).
    if super::fault::refuse(super::fault::Kind::Protect, size) {
        return false;
    }
    let access = if accessible {
        libc::PROT_READ | libc::PROT_WRITE
    } else {
        libc::PROT_NONE
    };
    // SAFETY: per the contract, the range is ours and nobody uses it meanwhile.
    preserving_errno(|| unsafe { libc::mprotect(ptr as *mut c_void, size, access) == 0 })
}

/// Reserve `size` bytes (as `reserve_aligned`) exactly at `at`, or null if that range
/// is not free (never replaces a mapping: `MAP_FIXED_NOREPLACE`). For randomised
/// placement: the caller picks the address.
pub fn reserve_at(at: *mut u8, size: usize) -> *mut u8 {
    debug_assert!(at as usize % page_size() == 0 && size % page_size() == 0);
    if super::fault::refuse(super::fault::Kind::Reserve, size) {
        return null_mut();
    }
    // SAFETY: an anonymous mapping at a hint that fails rather than replace an existing
    // mapping (before Linux 4.17 the flag is ignored and the hint may be moved: checked).
    let got = preserving_errno(|| unsafe {
        libc::mmap(
            at as *mut c_void,
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE
                | libc::MAP_ANONYMOUS
                | libc::MAP_NORESERVE
                | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    });
    if got == libc::MAP_FAILED {
        super::fault::released(size);
        return null_mut();
    }
    if got as *mut u8 != at {
        // SAFETY: a mapping just made here, elsewhere than asked, and not handed out.
        unsafe { libc::munmap(got, size) };
        super::fault::released(size);
        return null_mut();
    }
    at
}

/// 64 bits from the kernel's random source (`getrandom`), for the secure build's keys
/// and placement; if that fails, the 16 random bytes the kernel gave the process at
/// start (`AT_RANDOM`) mixed with the clock.
pub fn random_seed() -> u64 {
    let mut seed = 0u64;
    // SAFETY: writes at most 8 bytes into `seed`; GRND_NONBLOCK never waits.
    let got = preserving_errno(|| unsafe {
        libc::getrandom(
            &mut seed as *mut u64 as *mut c_void,
            core::mem::size_of::<u64>(),
            libc::GRND_NONBLOCK,
        )
    });
    if got == core::mem::size_of::<u64>() as isize {
        return seed;
    }
    // SAFETY: AT_RANDOM points at 16 bytes the kernel placed on the initial stack.
    let aux = unsafe { libc::getauxval(libc::AT_RANDOM) } as *const u64;
    let from_kernel = if aux.is_null() {
        0
    } else {
        // SAFETY: as above; the bytes may be unaligned.
        unsafe { aux.read_unaligned() ^ aux.add(1).read_unaligned() }
    };
    from_kernel ^ now_ms().rotate_left(32) ^ thread_cpu_time_ns()
}

/// Give a reservation back to the OS.
///
/// # Safety
/// `[ptr, ptr + size)` must be a range this module reserved and nobody uses any more.
pub unsafe fn release(ptr: *mut u8, size: usize) {
    super::fault::released(size);
    // SAFETY: per the contract above.
    unsafe { libc::munmap(ptr as *mut c_void, size) };
}

/// Tell valgrind's memcheck, when running under it, that `[ptr, ptr + size)` holds
/// defined bytes. Natively this is a few rotate instructions that change nothing (the
/// client-request preamble from valgrind.h), on the purge path only.
#[inline]
pub fn valgrind_mark_defined(ptr: *mut u8, size: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        // VG_USERREQ__MAKE_MEM_DEFINED = VG_USERREQ_TOOL_BASE('M', 'C') + 2.
        let args: [usize; 6] = [0x4D43_0002, ptr as usize, size, 0, 0, 0];
        // SAFETY: the four rotations of rdi add up to 128 bits (rdi is unchanged) and
        // `xchg rbx, rbx` is a no-op; under valgrind the sequence reads `args`.
        unsafe {
            core::arch::asm!(
                "rol rdi, 3",
                "rol rdi, 13",
                "rol rdi, 61",
                "rol rdi, 51",
                "xchg rbx, rbx",
                inout("rdx") 0usize => _,
                in("rax") args.as_ptr(),
                out("rdi") _,
                options(nostack, preserves_flags),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (ptr, size);
}

/// Move (or grow or shrink) a reservation. With `dest` non-null the pages move to
/// `dest`, replacing what was reserved there; otherwise the resize must happen in
/// place. Returns the new start or null. The page contents move without copying. On
/// failure the reservation at `old` holds its contents whole: a move of several kernel
/// mappings that failed partway (Linux 6.17 and later move them one at a time and leave
/// those already moved at `dest`) is put back (`linux_move::put_back_moved`).
///
/// # Safety
/// `old` must be a reservation of `old_size` bytes; `dest`, if non-null, a reservation
/// of at least `new_size` bytes that nobody uses.
pub unsafe fn remap(old: *mut u8, old_size: usize, new_size: usize, dest: *mut u8) -> *mut u8 {
    if super::fault::refuse(super::fault::Kind::Remap, new_size) {
        return null_mut();
    }
    // SAFETY: per the contract above.
    let res = preserving_errno(|| unsafe {
        if dest.is_null() {
            libc::mremap(old as *mut c_void, old_size, new_size, 0)
        } else {
            libc::mremap(
                old as *mut c_void,
                old_size,
                new_size,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                dest as *mut c_void,
            )
        }
    });
    if res == libc::MAP_FAILED {
        // SAFETY: per the contract `dest` is ours and `old` our reservation.
        if !dest.is_null() && !unsafe { super::linux_move::put_back_moved(old, old_size, dest) } {
            // Out of memory even for fresh pages to copy them back into: the block at
            // `old` has lost pages, and nothing can give them back.
            super::write_fd(
                2,
                b"ebb: a failed mremap left part of a block elsewhere and it could not be put back: that block is damaged\n",
            );
        }
        null_mut()
    } else {
        res as *mut u8
    }
}

/// Milliseconds on a monotonic clock (vDSO: no system call).
///
/// The coarse clock: it reads the time of the last timer tick (1-4 ms old), which is
/// all purge delays need, without the cycle counter read of `CLOCK_MONOTONIC` (which
/// was 1.8% of a cross-thread workload here, where every page that fills reads it).
pub fn now_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

/// `now_ms`'s clock read by a system call, for the heap profiler's sampling path:
/// libc's `clock_gettime` calls the vDSO through a register, and the return address
/// into libc it leaves on the stack is one a later sample's stack scan cannot tell from
/// a caller's (a call it cannot check). `syscall` makes no call: the only return
/// address it pushes is ebb's own.
pub fn now_ms_by_syscall() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer for clock_gettime's second argument.
    unsafe {
        libc::syscall(
            libc::SYS_clock_gettime,
            libc::CLOCK_MONOTONIC_COARSE,
            &mut ts as *mut libc::timespec,
        )
    };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

/// CPU time the calling thread has used, in nanoseconds (a system call: for the
/// purger's own accounting, once per pass, never on an allocation path).
pub fn thread_cpu_time_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The part of the calling thread's CPU time spent in the kernel, in nanoseconds
/// (`getrusage(RUSAGE_THREAD)`'s system time; the kernel splits the thread's exact run
/// time between user and system by its tick samples, so the split is approximate while
/// the sum is exact). For the purger's accounting only: what of its time is the
/// kernel's own work of giving pages back rather than ebb's.
pub fn thread_sys_time_ns() -> u64 {
    // SAFETY: an all-zero `rusage` is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { core::mem::zeroed() };
    // SAFETY: `usage` is a valid out-pointer; RUSAGE_THREAD needs nothing else.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } != 0 {
        return 0;
    }
    usage.ru_stime.tv_sec as u64 * 1_000_000_000 + usage.ru_stime.tv_usec as u64 * 1_000
}

/// Run `f` without letting it change the caller's `errno`: system calls that fail as
/// a matter of course (a futex timing out, an in-place `mremap` that cannot grow) must
/// not leak an errno into a program that called `malloc` and succeeded.
#[inline]
pub fn preserving_errno<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    let slot = unsafe { libc::__errno_location() };
    // SAFETY: the slot is valid for the thread's lifetime.
    let saved = unsafe { *slot };
    let result = f();
    // SAFETY: as above.
    unsafe { *slot = saved };
    result
}

/// Sleep while `*word == expected`, at most `timeout_ms` if given. Spurious returns
/// are possible; callers re-check their condition.
pub fn wait(word: &AtomicU32, expected: u32, timeout_ms: Option<u64>) {
    let ts;
    let ts_ptr = match timeout_ms {
        Some(ms) => {
            ts = libc::timespec {
                tv_sec: (ms / 1000) as libc::time_t,
                tv_nsec: ((ms % 1000) * 1_000_000) as libc::c_long,
            };
            &ts as *const libc::timespec
        }
        None => core::ptr::null(),
    };
    // SAFETY: `word` is a valid, aligned u32 for the duration of the call.
    preserving_errno(|| unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            ts_ptr,
        )
    });
}

/// Wake up to `count` threads sleeping in `wait` on `word`.
pub fn wake(word: &AtomicU32, count: u32) {
    // SAFETY: `word` is a valid, aligned u32.
    preserving_errno(|| unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            count,
        )
    });
}

const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

/// Register the process for `membarrier` (once; again in a fork child).
pub fn membarrier_register() -> bool {
    // SAFETY: membarrier has no memory-safety preconditions.
    preserving_errno(|| unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
            0,
            0,
        ) == 0
    })
}

/// A full memory barrier on every running thread of the process: when it returns, each
/// of them has passed a point where its earlier memory accesses are ordered before its
/// later ones. This is the expensive half of an asymmetric fence whose cheap half is a
/// compiler fence on the fast path.
pub fn membarrier() -> bool {
    // SAFETY: as above.
    preserving_errno(|| unsafe {
        libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0
    })
}

/// Number of live threads in the process (`num_threads` in `/proc/self/stat`), read with raw
/// system calls into a stack buffer (no allocation). None if it cannot be read.
pub fn process_thread_count() -> Option<u64> {
    let mut buf = [0u8; 1024];
    // SAFETY: a NUL-terminated path; the buffer is valid for its length; the descriptor is
    // closed on every path.
    let len = preserving_errno(|| unsafe {
        let fd = libc::open(
            c"/proc/self/stat".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return -1;
        }
        let n = libc::read(fd, buf.as_mut_ptr() as *mut c_void, buf.len());
        libc::close(fd);
        n
    });
    if len <= 0 {
        return None;
    }
    let text = &buf[..len as usize];
    // Fields after the command name, which is in parentheses and may contain spaces:
    // state(3) ppid(4) ... num_threads(20).
    let after = text.iter().rposition(|&c| c == b')')? + 1;
    let mut fields = text[after..]
        .split(|&c| c == b' ')
        .filter(|f| !f.is_empty());
    let leader_state = fields.next()?;
    let count = fields.nth(16)?.iter().try_fold(0u64, |n, &c| {
        c.is_ascii_digit()
            .then(|| n.checked_mul(10)?.checked_add(u64::from(c - b'0')))
            .flatten()
    })?;
    // A main thread that ended with pthread_exit stays a zombie, still counted, until
    // the whole process ends: it is not a live thread.
    Some(if leader_state == b"Z" {
        count.saturating_sub(1)
    } else {
        count
    })
}

/// Let another thread run (used by spin loops).
pub fn yield_now() {
    // SAFETY: no preconditions.
    unsafe { libc::sched_yield() };
}

/// Write all of `bytes` to `fd`, giving up on an error (errno is preserved). On a
/// thread that left the process's descriptor table (`detach_files`: the purger), the
/// standard descriptors 0-2 are the process's.
pub fn write_fd(fd: c_int, bytes: &[u8]) {
    if write_all(fd, bytes) == Err(libc::EBADF) && (0..=2).contains(&fd) {
        if let Some(own) = super::process_descriptor(fd) {
            let _ = write_all(own, bytes);
            close_fd(own);
        }
    }
}

/// `write_fd` on the calling thread's own table: Err(errno) of the first failed write.
fn write_all(fd: c_int, mut bytes: &[u8]) -> Result<(), c_int> {
    while !bytes.is_empty() {
        // SAFETY: the pointer and length come from a live slice.
        let n = preserving_errno(|| unsafe {
            let n = libc::write(fd, bytes.as_ptr() as *const c_void, bytes.len());
            if n < 0 {
                -(*libc::__errno_location() as isize)
            } else {
                n
            }
        });
        if n < 0 {
            return Err(-n as c_int);
        }
        if n == 0 {
            return Err(0);
        }
        bytes = &bytes[n as usize..];
    }
    Ok(())
}

/// The calling process's id.
pub fn process_id() -> u64 {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() as u64 }
}

/// Create (or truncate) the file at `path` (NUL-terminated) for writing, mode 0644,
/// close-on-exec. `None` if it cannot be opened (errno is preserved).
pub fn create_file(path: &[u8]) -> Option<c_int> {
    open_for_writing(path, libc::O_TRUNC)
}

/// Open `path` (NUL-terminated) for appending, creating it if needed, as
/// [`create_file`] does (the `EBB_STATS_FILE` and `EBB_REPORT` reports: every ebb
/// instance of a process, and every report a signal asks for, adds its own).
pub fn append_file(path: &[u8]) -> Option<c_int> {
    open_for_writing(path, libc::O_APPEND)
}

fn open_for_writing(path: &[u8], mode: c_int) -> Option<c_int> {
    debug_assert_eq!(path.last(), Some(&0));
    // SAFETY: `path` is NUL-terminated and outlives the call.
    let fd = preserving_errno(|| unsafe {
        libc::open(
            path.as_ptr() as *const c_char,
            libc::O_WRONLY | libc::O_CREAT | mode | libc::O_CLOEXEC,
            0o644 as libc::c_uint,
        )
    });
    (fd >= 0).then_some(fd)
}

/// Close `fd` (errno is preserved).
pub fn close_fd(fd: c_int) {
    // SAFETY: closing a descriptor this module opened has no memory effects.
    preserving_errno(|| unsafe { libc::close(fd) });
}

/// A close-on-exec duplicate of fd 2, placed high (from 512 down to 3) so it does not
/// take the low numbers programs expect to get next. -1 if fd 2 is not open.
pub fn dup_stderr_cloexec() -> c_int {
    for min in [512, 64, 3] {
        // SAFETY: fcntl on a descriptor number has no memory effects.
        let fd = preserving_errno(|| unsafe { libc::fcntl(2, libc::F_DUPFD_CLOEXEC, min) });
        if fd >= 0 {
            return fd;
        }
    }
    -1
}

/// The value of environment variable `name` (NUL-terminated), without allocating.
pub fn getenv(name: &[u8]) -> Option<&'static [u8]> {
    debug_assert_eq!(name.last(), Some(&0));
    // SAFETY: `name` is NUL-terminated; getenv returns a pointer into the environment
    // block, which lives for the rest of the process unless the program calls setenv
    // concurrently (which glibc also does not protect against).
    unsafe {
        let value = libc::getenv(name.as_ptr() as *const c_char);
        if value.is_null() {
            return None;
        }
        let len = libc::strlen(value);
        Some(core::slice::from_raw_parts(value as *const u8, len))
    }
}

/// Call `f(name, value)` for each variable of the environment, without allocating
/// (entries without `=` are skipped).
pub fn for_each_env(f: &mut super::EnvVisitor<'_>) {
    extern "C" {
        // glibc and musl define it; libc declares it for glibc only.
        static environ: *const *const c_char;
    }
    // SAFETY: `environ` is the process's NULL-terminated array of NUL-terminated
    // strings, which live for the rest of the process unless the program calls setenv
    // concurrently (the same caveat as `getenv`).
    unsafe {
        let mut entry = environ;
        if entry.is_null() {
            return;
        }
        while !(*entry).is_null() {
            let text = core::slice::from_raw_parts(*entry as *const u8, libc::strlen(*entry));
            if let Some(eq) = text.iter().position(|&b| b == b'=') {
                f(&text[..eq], &text[eq + 1..]);
            }
            entry = entry.add(1);
        }
    }
}

/// The definition of symbol `name` (NUL-terminated) that the calling library's own
/// definition hides: the next one in the dynamic linker's search order. Null if none.
pub fn next_symbol(name: &[u8]) -> *mut c_void {
    debug_assert_eq!(name.last(), Some(&0));
    // SAFETY: `name` is NUL-terminated; RTLD_NEXT searches the objects loaded after
    // the caller's.
    preserving_errno(|| unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr() as *const c_char) })
}

/// A process-wide key whose destructor runs `dtor(value)` at thread exit.
pub fn thread_key_create(dtor: unsafe extern "C" fn(*mut c_void)) -> Option<u32> {
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: `key` is a valid out-pointer.
    let rc = unsafe { libc::pthread_key_create(&mut key, Some(dtor)) };
    (rc == 0).then_some(key)
}

/// Attach `value` to the calling thread under `key`, so the key's destructor sees it.
pub fn thread_key_set(key: u32, value: *mut c_void) {
    // SAFETY: `key` came from thread_key_create.
    unsafe { libc::pthread_setspecific(key, value) };
}

/// The calling thread's value under `key` (null if none).
pub fn thread_key_get(key: u32) -> *mut c_void {
    // SAFETY: `key` came from thread_key_create.
    unsafe { libc::pthread_getspecific(key) }
}

/// Run `f` at normal process exit.
pub fn at_exit(f: extern "C" fn()) {
    // SAFETY: `f` is a valid function for the life of the process.
    unsafe { libc::atexit(f) };
}

/// Register fork handlers (before fork, after in the parent, after in the child).
pub fn at_fork(
    prepare: unsafe extern "C" fn(),
    parent: unsafe extern "C" fn(),
    child: unsafe extern "C" fn(),
) {
    // SAFETY: the handlers are valid functions for the life of the process.
    unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
}

/// The calling thread's `errno`.
pub fn errno() -> c_int {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() }
}

/// Set `errno`.
pub fn set_errno(value: c_int) {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() = value };
}

/// End the process at once (used only when the program asked for aborts on errors).
pub fn abort() -> ! {
    // SAFETY: no preconditions.
    unsafe { libc::abort() }
}

/// Which pages of `[ptr, ptr + len)` are resident: `out[i] & 1` for the `i`th OS page
/// (`mincore`). `ptr` must be page aligned and `out` at least `len / page_size()`
/// (rounded up) long. False if the range is not fully mapped (errno is preserved).
pub fn mincore(ptr: *const u8, len: usize, out: &mut [u8]) -> bool {
    debug_assert!(ptr as usize % page_size() == 0);
    debug_assert!(out.len() >= len.div_ceil(page_size()));
    // SAFETY: mincore only reads the page tables of the range and writes one byte per
    // page into `out`, which holds that many.
    let rc = preserving_errno(|| unsafe {
        libc::mincore(
            ptr as *mut c_void,
            len,
            out.as_mut_ptr() as *mut libc::c_uchar,
        )
    });
    rc == 0
}

/// Open the file at `path` (NUL-terminated) for reading, close-on-exec. `None` if it
/// cannot be opened (errno is preserved).
pub fn open_read(path: &[u8]) -> Option<c_int> {
    debug_assert_eq!(path.last(), Some(&0));
    // SAFETY: `path` is NUL-terminated and outlives the call.
    let fd = preserving_errno(|| unsafe {
        libc::open(
            path.as_ptr() as *const c_char,
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    });
    (fd >= 0).then_some(fd)
}

/// Read up to `buf.len()` bytes from `fd` at `offset` (`pread`): the count read, 0 at
/// the end, or -1 on an error other than an interruption (errno is preserved).
pub fn read_fd_at(fd: c_int, buf: &mut [u8], offset: u64) -> isize {
    loop {
        // SAFETY: `buf` is a live, writable slice of `buf.len()` bytes.
        let (n, err) = preserving_errno(|| unsafe {
            let n = libc::pread(
                fd,
                buf.as_mut_ptr() as *mut c_void,
                buf.len(),
                offset as libc::off_t,
            );
            (n, if n < 0 { errno() } else { 0 })
        });
        if n < 0 && err == libc::EINTR {
            continue;
        }
        return n;
    }
}

/// Read up to `buf.len()` bytes from `fd`: the count read, 0 at the end, or -1 on an
/// error other than an interruption (errno is preserved).
pub fn read_fd(fd: c_int, buf: &mut [u8]) -> isize {
    loop {
        // SAFETY: `buf` is a live, writable slice of `buf.len()` bytes.
        let (n, err) = preserving_errno(|| unsafe {
            let n = libc::read(fd, buf.as_mut_ptr() as *mut c_void, buf.len());
            (n, if n < 0 { errno() } else { 0 })
        });
        if n < 0 && err == libc::EINTR {
            continue;
        }
        return n;
    }
}

/// Copy `dst.len()` bytes from address `src` of this process, or return false if any of
/// them is not mapped (`process_vm_readv` on ourselves: a range another thread unmaps
/// meanwhile fails instead of faulting). errno is preserved.
pub fn read_checked(src: usize, dst: &mut [u8]) -> bool {
    let local = libc::iovec {
        iov_base: dst.as_mut_ptr() as *mut c_void,
        iov_len: dst.len(),
    };
    let remote = libc::iovec {
        iov_base: src as *mut c_void,
        iov_len: dst.len(),
    };
    // SAFETY: the kernel writes at most `dst.len()` bytes into `dst` and reads the
    // remote range through the page tables, failing on unmapped pages.
    let n = preserving_errno(|| unsafe {
        libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0)
    });
    n == dst.len() as isize
}
