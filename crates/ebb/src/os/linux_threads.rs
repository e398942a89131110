//! Linux threads of the allocator's own (the background purger, the report and
//! profile watchers): made with every signal blocked, and, for the purger, with a file
//! descriptor table of its own. Part of the OS contract (`os/mod.rs`).
//!
//! **Why the purger leaves the process's descriptor table.** While two threads share
//! one table, the kernel takes a reference on the file in every system call on a
//! descriptor (`fdget`/`fput`, two atomics) and, on a regular file, its position lock;
//! a table with one user skips both. A purger that shares the table makes every
//! `read`/`write` of a single-threaded program pay that (docs/REAL-PROGRAMS.md,
//! "python1": a 41-byte `write` to `/dev/null` 198 → 238 ns). The purger uses no
//! descriptor of the program's, so it takes an empty table of its own
//! (`close_range(0, ~0, CLOSE_RANGE_UNSHARE)`, Linux 5.9): the program's table has one
//! user again, and no file stays open because the purger holds it (a copied table would
//! keep a pipe's write end open after the program closed it, and its reader would never
//! see the end). Measured with `bench/real-programs/thread_tax.c`: 238 → 201 ns a
//! `write` to `/dev/null` (197 with no second thread).
//!
//! What that costs, and how it is paid:
//! - The purger cannot end the process itself any more: `exit` from a thread with an
//!   empty table would run the program's `atexit` handlers and stdio flushes without
//!   its descriptors. So the last thread with a heap stops and joins it before it ends
//!   (`process::heap_thread_exited`), and glibc then ends the process from that
//!   thread, with the program's table, as it would without ebb.
//! - A report the purger writes (a corrupted free list found while purging, in the
//!   secure build; a debug assertion) goes to the process's stderr: `write_fd` on
//!   descriptor 0-2 fetches it with `pidfd_getfd` when the thread's own table lacks it.
//! - Under a seccomp filter (which might kill the process on a system call it does not
//!   expect) the thread keeps the shared table.

use super::preserving_errno;
use core::ffi::{c_int, c_void};
use core::ptr::null_mut;
use core::sync::atomic::{AtomicUsize, Ordering};

/// The thread (`pthread_self`) inside `spawn`, 0 if none: `pthread_create` allocates
/// the new thread's TLS through `malloc` in the creating thread, on the allocator's
/// behalf, not the program's (the heap profiler leaves such blocks out). Two threads
/// spawning at once (rare: each of ebb's threads starts once a process) would only let
/// one such block through.
static SPAWNING: AtomicUsize = AtomicUsize::new(0);

/// True if the calling thread is starting one of the allocator's threads ([`spawn`]).
pub fn spawning_here() -> bool {
    let spawning = SPAWNING.load(Ordering::Relaxed);
    // SAFETY: pthread_self has no preconditions.
    spawning != 0 && spawning == unsafe { libc::pthread_self() } as usize
}

/// Make a thread running `entry` with a stack of `stack_bytes` and every signal
/// blocked (it never runs the program's handlers: a process-directed signal goes to a
/// thread of the program, as without ebb). `detached`: nobody joins it. Returns its
/// handle, or None if it could not be made.
fn spawn(
    entry: extern "C" fn(*mut c_void) -> *mut c_void,
    stack_bytes: usize,
    detached: bool,
) -> Option<u64> {
    // SAFETY: attr, the signal sets and thread are valid out-pointers; the attribute
    // object is destroyed and the caller's signal mask restored on every path.
    unsafe {
        let mut attr: libc::pthread_attr_t = core::mem::zeroed();
        if libc::pthread_attr_init(&mut attr) != 0 {
            return None;
        }
        if detached {
            libc::pthread_attr_setdetachstate(&mut attr, libc::PTHREAD_CREATE_DETACHED);
        }
        libc::pthread_attr_setstacksize(&mut attr, stack_bytes);
        // A new thread starts with its creator's mask: block everything around the
        // creation (glibc leaves its own internal signals unblocked).
        let mut all: libc::sigset_t = core::mem::zeroed();
        let mut old: libc::sigset_t = core::mem::zeroed();
        libc::sigfillset(&mut all);
        let masked = libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old) == 0;
        let mut thread: libc::pthread_t = 0;
        SPAWNING.store(libc::pthread_self() as usize, Ordering::Relaxed);
        let rc = libc::pthread_create(&mut thread, &attr, entry, null_mut());
        SPAWNING.store(0, Ordering::Relaxed);
        if masked {
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, null_mut());
        }
        libc::pthread_attr_destroy(&mut attr);
        (rc == 0).then_some(thread as u64)
    }
}

/// Start a detached thread running `entry` with a stack of `stack_bytes`, every
/// signal blocked. Returns false if it could not be made.
pub fn spawn_detached(
    entry: extern "C" fn(*mut c_void) -> *mut c_void,
    stack_bytes: usize,
) -> bool {
    spawn(entry, stack_bytes, true).is_some()
}

/// Start a thread running `entry` that someone will [`join`], every signal blocked.
pub fn spawn_joinable(
    entry: extern "C" fn(*mut c_void) -> *mut c_void,
    stack_bytes: usize,
) -> Option<u64> {
    spawn(entry, stack_bytes, false)
}

/// Name the calling thread (at most 15 bytes, NUL-terminated), as `ps -L`, `top -H`,
/// `perf` and debuggers show it: the allocator's threads say whose they are, as
/// jemalloc's background thread does (`jemalloc_bg_thd`), instead of taking the name of
/// the program. Nothing else reads the name; if the kernel refuses, nothing changes.
/// Not under a seccomp filter, which might kill the process on a `prctl` it does not
/// expect (as for [`detach_files`]; the check is one read of the thread's status, at
/// the start of a thread that starts once).
pub fn name_thread(name: &'static [u8]) {
    if seccomp_filtered() {
        return;
    }
    debug_assert!(
        name.len() <= 16 && name.last() == Some(&0),
        "a C string of 15 bytes or fewer"
    );
    // SAFETY: PR_SET_NAME reads at most 16 bytes up to a NUL; `name` is a static C
    // string of at most 16 bytes (every caller passes a literal; asserted above in
    // debug builds), and the call changes only the calling thread's name.
    preserving_errno(|| unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) });
}

/// Wait until the thread of `handle` (from [`spawn_joinable`], joined once) has ended.
/// When this returns, glibc no longer counts it among the process's threads.
pub fn join(handle: u64) {
    // SAFETY: the handle names a joinable thread not joined before (the contract).
    preserving_errno(|| unsafe { libc::pthread_join(handle as libc::pthread_t, null_mut()) });
}

/// Give the calling thread a descriptor table of its own, empty, so the process's
/// table is no longer shared with it (module documentation). False, with the table
/// still shared, if the kernel cannot (before 5.9) or a seccomp filter is on.
pub fn detach_files() -> bool {
    if seccomp_filtered() {
        return false;
    }
    // SAFETY: close_range with CLOSE_RANGE_UNSHARE closes descriptors only in the
    // caller's new private table; it has no memory effects.
    preserving_errno(|| unsafe {
        libc::syscall(
            libc::SYS_close_range,
            0 as libc::c_uint,
            !0 as libc::c_uint,
            libc::CLOSE_RANGE_UNSHARE,
        ) == 0
    })
}

/// True if the calling thread runs under seccomp (`Seccomp:` in its status is not 0),
/// or that cannot be read.
fn seccomp_filtered() -> bool {
    let mut buf = [0u8; 4096];
    let Some(fd) = super::open_read(b"/proc/thread-self/status\0") else {
        return true;
    };
    let len = super::read_fd(fd, &mut buf);
    super::close_fd(fd);
    if len <= 0 {
        return true;
    }
    let text = &buf[..len as usize];
    let key = b"\nSeccomp:\t";
    match text.windows(key.len()).position(|w| w == key) {
        Some(at) => text.get(at + key.len()) != Some(&b'0'),
        None => false, // a kernel without seccomp
    }
}

/// A descriptor in the calling thread's table for the process's descriptor `fd`
/// (that of its first thread), made with `pidfd_getfd`; the caller closes it. For a
/// thread that left the process's table ([`detach_files`]) and must still report on
/// stderr. None if the process's table lacks it too, or the kernel cannot (before 5.6).
pub fn process_descriptor(fd: c_int) -> Option<c_int> {
    // SAFETY: pidfd_open and pidfd_getfd only make descriptors; getpid has no
    // preconditions; the pidfd is closed on every path.
    let got = preserving_errno(|| unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) as c_int;
        if pidfd < 0 {
            return -1;
        }
        let got = libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0) as c_int;
        libc::close(pidfd);
        got
    });
    (got >= 0).then_some(got)
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::{AtomicI32, AtomicU64, Ordering};

    static SEEN_FDS: AtomicI32 = AtomicI32::new(-1);
    static SEEN_BLOCKED: AtomicU64 = AtomicU64::new(0);
    static DETACHED: AtomicI32 = AtomicI32::new(-1);

    /// Descriptors open in the calling thread's table.
    fn own_descriptors() -> i32 {
        std::fs::read_dir("/proc/thread-self/fd").unwrap().count() as i32 - 1
    }

    extern "C" fn detaching_thread(_: *mut c_void) -> *mut c_void {
        DETACHED.store(detach_files() as i32, Ordering::SeqCst);
        SEEN_FDS.store(own_descriptors(), Ordering::SeqCst);
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("SigBlk:")).unwrap();
        let mask = u64::from_str_radix(line["SigBlk:".len()..].trim(), 16).unwrap();
        SEEN_BLOCKED.store(mask, Ordering::SeqCst);
        // The process's stderr is still reachable from here.
        let fd = process_descriptor(2).expect("pidfd_getfd of the process's stderr");
        close_fd_for_test(fd);
        null_mut()
    }

    fn close_fd_for_test(fd: c_int) {
        // SAFETY: a descriptor this test made.
        unsafe { libc::close(fd) };
    }

    #[test]
    fn a_joined_thread_starts_with_signals_blocked_and_an_empty_table() {
        let handle = spawn_joinable(detaching_thread, 256 << 10).unwrap();
        join(handle);
        // The test harness has stdin, stdout, stderr and more open; the thread, none
        // (read_dir's own descriptor is not counted). Under seccomp it keeps the table.
        assert!(own_descriptors() >= 3);
        if !seccomp_filtered() {
            assert_eq!(DETACHED.load(Ordering::SeqCst), 1, "close_range refused");
            assert_eq!(SEEN_FDS.load(Ordering::SeqCst), 0);
        }
        // Every signal but those that cannot be blocked (SIGKILL, SIGSTOP) and glibc's
        // two internal ones (32 and 33); signal n is bit n - 1.
        let blocked = SEEN_BLOCKED.load(Ordering::SeqCst);
        let unblockable = [9, 19, 32, 33].iter().fold(0u64, |m, n| m | 1 << (n - 1));
        assert_eq!(blocked | unblockable, !0u64, "SigBlk {blocked:x}");
    }
}
