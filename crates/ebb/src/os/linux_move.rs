//! Moving pages out of a mapping that stays (`mremap` with `MREMAP_DONTUNMAP`, Linux
//! 5.7 and later): what `realloc` uses to hand a large block's pages to the huge
//! mapping it grows into, with no copy and no fault, its span staying mapped (so no
//! other mapping can land inside a segment in the meantime).

use super::linux::{errno, preserving_errno};
use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, Ordering};

/// Set once the kernel rejected `MREMAP_DONTUNMAP` (before 5.7): no further attempts.
static UNSUPPORTED: AtomicBool = AtomicBool::new(false);

/// Move the pages of `[from, from + size)` to `[to, to + size)` without copying: the
/// destination then holds the source's contents and the source reads as zero, still
/// mapped, with nothing resident. False if the OS cannot (the caller copies); the
/// source is then unchanged and the destination still mapped, its contents undefined.
///
/// # Safety
/// Both ranges page aligned, reserved by this module, disjoint and unused by anyone
/// else; the source a private anonymous mapping's pages (every reservation is).
pub unsafe fn move_pages(from: *mut u8, to: *mut u8, size: usize) -> bool {
    if UNSUPPORTED.load(Ordering::Relaxed) || super::fault::refuse(super::fault::Kind::Remap, size)
    {
        return false;
    }
    // SAFETY: per the contract above; `MREMAP_FIXED` replaces the destination, which
    // is ours and unused.
    let (res, err) = preserving_errno(|| unsafe {
        let res = libc::mremap(
            from as *mut c_void,
            size,
            size,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED | libc::MREMAP_DONTUNMAP,
            to as *mut c_void,
        );
        (res, errno())
    });
    if res != libc::MAP_FAILED {
        return true;
    }
    if err == libc::EINVAL {
        // The flag is unknown (or the source is not private anonymous): checked before
        // the destination is touched.
        UNSUPPORTED.store(true, Ordering::Relaxed);
    }
    // A failure past the flag checks may have unmapped the destination: map fresh
    // pages there again.
    // SAFETY: per the contract the destination is ours and unused.
    let _ = unsafe { remap_fresh(to, size) };
    false
}

/// After `mremap(from, size, size, MAYMOVE | FIXED, to)` failed: put back at `from`
/// whatever the kernel moved to `to` before the failure (a move of several mappings
/// goes one mapping at a time and keeps those moved), copied into fresh pages (a move
/// back could fail partway in turn). Every page of `[from, from + size)` not mapped
/// there any more is at the same offset from `to`. Finds them with `mincore` (which
/// fails on a range not wholly mapped), 2 MiB at a time, page by page only in a piece
/// with a gap. True if the range is whole again (always, when nothing had moved).
///
/// # Safety
/// `[from, from + size)` must have been one reservation of the caller's, wholly mapped
/// before the failed move, and `[to, to + size)` the move's destination, the caller's.
pub(super) unsafe fn put_back_moved(from: *mut u8, size: usize, to: *mut u8) -> bool {
    const PIECE_PAGES: usize = 512;
    let page = super::page_size();
    let mut residency = [0u8; PIECE_PAGES];
    let mapped =
        |at: usize, len: usize, out: &mut [u8]| super::mincore(from.wrapping_add(at), len, out);
    let mut whole = true;
    let mut piece = 0;
    while piece < size {
        let end = size.min(piece + PIECE_PAGES * page);
        if mapped(piece, end - piece, &mut residency) {
            piece = end;
            continue;
        }
        let mut at = piece;
        while at < end {
            if mapped(at, page, &mut residency[..1]) {
                at += page;
                continue;
            }
            let gap = at;
            while at < end && !mapped(at, page, &mut residency[..1]) {
                at += page;
            }
            // SAFETY: the gap is ours (unmapped now), its pages at the same offset
            // from `to`, where the kernel moved them.
            unsafe {
                if remap_fresh(from.add(gap), at - gap) {
                    core::ptr::copy_nonoverlapping(to.add(gap), from.add(gap), at - gap);
                } else {
                    whole = false;
                }
            }
        }
        piece = end;
    }
    whole
}

/// Make `[at, at + size)`, a range of the caller's reservation that a failed move may
/// have unmapped, or (a move of several mappings that failed partway, Linux 6.17 and
/// later) filled in part, fresh pages reading as zero again, whatever of it is mapped
/// now (`MAP_FIXED`: `reserve_at`'s `MAP_FIXED_NOREPLACE` fails over a range mapped in
/// part and would leave the rest a hole). False if the OS refused.
///
/// # Safety
/// The range must be page aligned, the caller's, and hold nothing anyone uses.
pub unsafe fn remap_fresh(at: *mut u8, size: usize) -> bool {
    // SAFETY: per the contract the range is ours and unused: replacing it loses nothing.
    let got = preserving_errno(|| unsafe {
        libc::mmap(
            at as *mut c_void,
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED,
            -1,
            0,
        )
    });
    got == at as *mut c_void
}

/// Open `path` (NUL-terminated) for reading with the raw system call, not libc's
/// `open`: these run inside `malloc`, and a program (or a preloaded tracer) that
/// interposes `open` with a wrapper that allocates would re-enter it.
fn raw_open(path: &[u8]) -> Option<i32> {
    debug_assert_eq!(path.last(), Some(&0));
    // SAFETY: `path` is NUL-terminated and outlives the call; no memory is written.
    let fd = preserving_errno(|| unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    });
    (fd >= 0).then_some(fd as i32)
}

/// `read` with the raw system call (as [`raw_open`]): the count read, 0 at the end, -1
/// on an error other than an interruption.
fn raw_read(fd: i32, buf: &mut [u8]) -> isize {
    loop {
        // SAFETY: `buf` is a live, writable slice of `buf.len()` bytes.
        let (n, err) = preserving_errno(|| unsafe {
            let n = libc::syscall(libc::SYS_read, fd, buf.as_mut_ptr(), buf.len());
            (n, if n < 0 { errno() } else { 0 })
        });
        if n < 0 && err == libc::EINTR {
            continue;
        }
        return n as isize;
    }
}

/// `close` with the raw system call (as [`raw_open`]).
fn raw_close(fd: i32) {
    // SAFETY: closing a descriptor this module opened has no memory effects.
    preserving_errno(|| unsafe { libc::syscall(libc::SYS_close, fd) });
}

/// How many mappings (VMAs) the process has now: the lines of `/proc/self/maps`, read
/// in pieces on the stack (1.1 ms at 8,000 mappings here). None if it cannot be read
/// (no `/proc`). Page moves split mappings, and the kernel refuses new ones past
/// [`mapping_limit`] (`span/move_budget.rs`).
pub fn mapping_count() -> Option<usize> {
    let fd = raw_open(b"/proc/self/maps\0")?;
    let mut buf = [0u8; 4096];
    let mut lines = 0;
    let ok = loop {
        let n = raw_read(fd, &mut buf);
        if n <= 0 {
            break n == 0;
        }
        lines += buf[..n as usize].iter().filter(|&&b| b == b'\n').count();
    };
    raw_close(fd);
    ok.then_some(lines)
}

/// The most mappings the kernel lets the process have (`vm.max_map_count`), or None if
/// it cannot be read.
pub fn mapping_limit() -> Option<usize> {
    let fd = raw_open(b"/proc/sys/vm/max_map_count\0")?;
    let mut buf = [0u8; 32];
    let n = raw_read(fd, &mut buf);
    raw_close(fd);
    if n <= 0 {
        return None;
    }
    let digits = buf[..n as usize].iter().take_while(|b| b.is_ascii_digit());
    let mut limit: usize = 0;
    let mut any = false;
    for &d in digits {
        limit = limit.checked_mul(10)?.checked_add((d - b'0') as usize)?;
        any = true;
    }
    any.then_some(limit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::{release, reserve_aligned};

    #[test]
    fn mappings_are_counted_and_the_limit_read() {
        let Ok(text) = std::fs::read_to_string("/proc/sys/vm/max_map_count") else {
            assert_eq!(mapping_limit(), None);
            return;
        };
        assert_eq!(mapping_limit(), text.trim().parse().ok());
        // Three mappings where there was one: a reservation with a page in its middle
        // made inaccessible. Other test threads may map or unmap meanwhile, so the
        // count is compared with the kernel's own a few times.
        let page = crate::os::page_size();
        let base = reserve_aligned(3 * page, page);
        assert!(!base.is_null());
        let split = (0..5).any(|_| {
            let before = mapping_count().expect("/proc/self/maps");
            // SAFETY: the middle page of our own reservation, unused.
            assert!(unsafe { crate::os::protect(base.wrapping_add(page), page, false) });
            let after = mapping_count().unwrap();
            // SAFETY: as above.
            assert!(unsafe { crate::os::protect(base.wrapping_add(page), page, true) });
            after == before + 2
        });
        // SAFETY: our reservation, unused.
        unsafe { release(base, 3 * page) };
        assert!(
            split,
            "splitting a mapping in three did not add two to the count"
        );
    }

    /// The case of the test below, as a function that reports instead of panicking
    /// (it runs in a fork child).
    fn put_back_case() -> Result<(), &'static str> {
        let page = crate::os::page_size();
        let from = reserve_aligned(4 * page, page);
        let to = reserve_aligned(4 * page, page);
        if from.is_null() || to.is_null() {
            return Err("reserve failed");
        }
        // SAFETY: our own reservations: each page of `from` written with its number,
        // then its first two moved to `to` as a move of several mappings that failed
        // after its first one leaves them; read back within the reservations.
        unsafe {
            for i in 0..4 {
                from.add(i * page).write_bytes(i as u8 + 1, page);
            }
            let moved = libc::mremap(
                from as *mut c_void,
                2 * page,
                2 * page,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                to as *mut c_void,
            );
            if moved != to as *mut c_void {
                return Err("mremap did not move the pages");
            }
            let mut out = [0u8; 4];
            if crate::os::mincore(from, 4 * page, &mut out) {
                return Err("no hole after the move");
            }
            if !put_back_moved(from, 4 * page, to) {
                return Err("put_back_moved failed");
            }
            if !crate::os::mincore(from, 4 * page, &mut out) {
                return Err("a gap is left");
            }
            for i in 0..4 {
                let first = *from.add(i * page);
                let last = *from.add(i * page + page - 1);
                if (first, last) != (i as u8 + 1, i as u8 + 1) {
                    return Err("a page's bytes changed");
                }
            }
            // Nothing moved: nothing to do.
            if !put_back_moved(from, 4 * page, to) {
                return Err("put_back_moved failed with nothing to do");
            }
            release(from, 4 * page);
            release(to, 4 * page);
        }
        Ok(())
    }

    /// Run in a child process of one thread: the hole the move leaves is where the
    /// kernel puts the next mapping anyone makes, and the other test threads of this
    /// binary map and unmap memory meanwhile (in the parent one of them borrowed the
    /// hole, ending the case early, and once unmapped it again during the put-back:
    /// "a gap is left", in 1 of about 10 runs of the workspace's tests).
    #[test]
    fn pages_a_failed_move_left_at_its_destination_are_put_back() {
        // SAFETY: the child runs only system calls and the case's plain memory accesses,
        // then `_exit`s.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let code = match put_back_case() {
                Ok(()) => 0,
                Err(why) => {
                    // SAFETY: writes our own bytes to stderr.
                    unsafe { libc::write(2, why.as_ptr() as *const c_void, why.len()) };
                    1
                }
            };
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the put-back case failed in the child (status {status:#x}; its reason on stderr)"
        );
    }

    #[test]
    fn a_range_left_mapped_in_part_is_made_fresh_whole() {
        let page = crate::os::page_size();
        let base = reserve_aligned(4 * page, page);
        assert!(!base.is_null());
        // SAFETY: our own reservation: written, then its second page unmapped as a
        // failed move may leave it, then pages 1-2 (one unmapped, one written) made
        // fresh; read back within the reservation.
        unsafe {
            base.write_bytes(7, 4 * page);
            libc::munmap(base.add(page) as *mut c_void, page);
            assert!(remap_fresh(base.add(page), 2 * page));
            assert_eq!(
                *base.add(page),
                0,
                "the unmapped page is mapped again, zero"
            );
            assert_eq!(*base.add(2 * page), 0, "the page mapped still is fresh too");
            assert_eq!(
                (*base, *base.add(3 * page)),
                (7, 7),
                "the rest is untouched"
            );
            release(base, 4 * page);
        }
    }
}
