//! Linux memory advice for the OS contract (`os/mod.rs`): decommit (`MADV_DONTNEED`),
//! batched decommit of many ranges in one `process_madvise`, and transparent huge page
//! advice. Apart from `linux.rs` because it is the part the purger's cost depends on.

use super::linux::{errno, page_size, preserving_errno, valgrind_mark_defined, HUGE_PAGE_SIZE};
use core::ffi::{c_int, c_void};
use core::ptr::null_mut;
use core::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// Return the physical pages of a range to the OS; it stays reserved and reads as zero.
///
/// # Safety
/// The range must be page aligned, reserved by this module and hold no live data.
pub unsafe fn decommit(ptr: *mut u8, size: usize) -> bool {
    if super::fault::refuse(super::fault::Kind::Decommit, size) {
        return false;
    }
    DECOMMIT_CALLS.fetch_add(1, Ordering::Relaxed);
    // SAFETY: per the contract above.
    let ok = preserving_errno(|| unsafe {
        libc::madvise(ptr as *mut c_void, size, libc::MADV_DONTNEED) == 0
    });
    if ok {
        // The pages now read as zero (DECOMMIT_ZEROES); memcheck does not model MADV_DONTNEED and would
        // otherwise keep the bytes' old (possibly undefined) state.
        valgrind_mark_defined(ptr, size);
    }
    ok
}

/// `process_madvise` on the calling process (`PIDFD_SELF`, Linux 6.14; any advice on
/// oneself since 6.13): `UNKNOWN` until tried, then `WORKS` or `REFUSED` (older kernels
/// answer EBADF, EINVAL or ENOSYS, and `decommit_ranges` falls back to one `madvise`
/// per range).
static VECTORED: AtomicU8 = AtomicU8::new(VECTORED_UNKNOWN);
const VECTORED_UNKNOWN: u8 = 0;
const VECTORED_WORKS: u8 = 1;
const VECTORED_REFUSED: u8 = 2;
/// The pidfd that names the calling thread's process (`PIDFD_SELF_THREAD`).
const PIDFD_SELF: c_int = -10000;
/// Ranges per `process_madvise` call (the kernel's `UIO_FASTIOV` is 8; up to `IOV_MAX`,
/// 1024, it copies the vector once).
const VECTOR_MAX: usize = 64;
/// System calls made to decommit (`madvise` or `process_madvise`).
static DECOMMIT_CALLS: AtomicU64 = AtomicU64::new(0);

/// Decommit every range of `ranges` as [`decommit`] would (`done[i]`: range `i` went
/// back), in as few system calls as the kernel allows: one `process_madvise` per 64
/// ranges on Linux 6.13 and later, which also flushes the TLB once for all of them, so
/// a pass of the purger costs one call instead of one per run (a call on 64 KiB costs
/// about as much as the zapping itself). Falls back to `decommit` per range.
///
/// # Safety
/// Every range must satisfy `decommit`'s contract; `done` is as long as `ranges`.
pub unsafe fn decommit_ranges(ranges: &[(*mut u8, usize)], done: &mut [bool]) {
    debug_assert_eq!(ranges.len(), done.len());
    let mut i = 0;
    while i < ranges.len() {
        let mut iov = [libc::iovec {
            iov_base: null_mut(),
            iov_len: 0,
        }; VECTOR_MAX];
        let mut index = [0usize; VECTOR_MAX];
        let mut n = 0;
        while i < ranges.len() && n < VECTOR_MAX {
            let (ptr, size) = ranges[i];
            done[i] = false;
            if !super::fault::refuse(super::fault::Kind::Decommit, size) {
                iov[n] = libc::iovec {
                    iov_base: ptr as *mut c_void,
                    iov_len: size,
                };
                index[n] = i;
                n += 1;
            }
            i += 1;
        }
        let mut advised = 0;
        if n > 1 && VECTORED.load(Ordering::Relaxed) != VECTORED_REFUSED {
            DECOMMIT_CALLS.fetch_add(1, Ordering::Relaxed);
            // SAFETY: `iov[..n]` are ranges satisfying `decommit`'s contract; the
            // kernel only reads the vector.
            let (result, error) = preserving_errno(|| unsafe {
                let r = libc::syscall(
                    libc::SYS_process_madvise,
                    PIDFD_SELF,
                    iov.as_ptr(),
                    n,
                    libc::MADV_DONTNEED,
                    0u32,
                );
                (r, errno())
            });
            if result >= 0 {
                VECTORED.store(VECTORED_WORKS, Ordering::Relaxed);
                // The count covers whole ranges from the first on; a range it stops
                // inside is decommitted again below with the rest.
                let mut left = result as usize;
                while advised < n && iov[advised].iov_len <= left {
                    left -= iov[advised].iov_len;
                    valgrind_mark_defined(iov[advised].iov_base as *mut u8, iov[advised].iov_len);
                    done[index[advised]] = true;
                    advised += 1;
                }
            } else if VECTORED.load(Ordering::Relaxed) == VECTORED_UNKNOWN
                && matches!(
                    error,
                    libc::EBADF | libc::EINVAL | libc::ENOSYS | libc::EPERM
                )
            {
                VECTORED.store(VECTORED_REFUSED, Ordering::Relaxed);
            }
        }
        for k in advised..n {
            DECOMMIT_CALLS.fetch_add(1, Ordering::Relaxed);
            let (ptr, size) = (iov[k].iov_base as *mut u8, iov[k].iov_len);
            // SAFETY: per the contract; `madvise` alone (the fault check was made).
            let ok = preserving_errno(|| unsafe {
                libc::madvise(ptr as *mut c_void, size, libc::MADV_DONTNEED) == 0
            });
            if ok {
                valgrind_mark_defined(ptr, size);
            }
            done[index[k]] = ok;
        }
    }
}

/// System calls made so far to decommit memory (tests count the batching with it).
pub fn decommit_calls() -> u64 {
    DECOMMIT_CALLS.load(Ordering::Relaxed)
}

/// Ask for transparent huge pages over `[ptr, ptr + size)` (`MADV_HUGEPAGE`): in the
/// kernel's `madvise` mode (`/sys/kernel/mm/transparent_hugepage/enabled`) the first
/// touch of a whole, aligned 2 MiB range of it then maps a huge page, and khugepaged
/// may collapse its ranges later. False if refused (no THP in the kernel: EINVAL) or
/// the base page is not 4 KiB (see `HUGE_PAGE_SIZE`). errno is preserved.
///
/// # Safety
/// The range must be page aligned and reserved by this module.
pub unsafe fn advise_huge_pages(ptr: *mut u8, size: usize) -> bool {
    if page_size() != 4096 || super::fault::refuse(super::fault::Kind::Advise, size) {
        return false;
    }
    // SAFETY: per the contract above; the advice changes how the range is backed,
    // never its contents.
    preserving_errno(|| unsafe {
        libc::madvise(ptr as *mut c_void, size, libc::MADV_HUGEPAGE) == 0
    })
}

/// Take back [`advise_huge_pages`] over `[ptr, ptr + size)` (`MADV_NOHUGEPAGE`): later
/// faults there map 4 KiB pages and khugepaged leaves the range alone; huge pages
/// already mapped stay until part of one is decommitted. False if refused. errno is
/// preserved.
///
/// # Safety
/// The range must be page aligned and reserved by this module.
pub unsafe fn unadvise_huge_pages(ptr: *mut u8, size: usize) -> bool {
    if page_size() != 4096 {
        return false;
    }
    // SAFETY: per the contract above; advice only.
    preserving_errno(|| unsafe {
        libc::madvise(ptr as *mut c_void, size, libc::MADV_NOHUGEPAGE) == 0
    })
}

/// Back `[ptr, ptr + size)` (whole, aligned huge pages, never touched) with huge pages
/// now, and keep the kernel from making huge pages there again later: `MADV_HUGEPAGE`,
/// a write of zero to each huge page (the fault maps a zeroed huge page, which the write
/// leaves zero), then `MADV_NOHUGEPAGE`. Without the last step khugepaged would, once
/// the allocator has purged parts of such a range, collapse it whole again (it fills
/// up to 511 missing 4 KiB pages of a range by default), and RSS would creep back up.
/// The advice is per range: the pages already made stay huge. False if the first
/// advice is refused (nothing touched then). errno is preserved.
///
/// # Safety
/// The range must be reserved by this module, readable and writable, aligned to
/// `HUGE_PAGE_SIZE`, and hold nothing (the write changes no byte, but races with
/// nobody only if no one else uses the range yet).
pub unsafe fn populate_huge_pages(ptr: *mut u8, size: usize) -> bool {
    // SAFETY: per the contract above.
    if !unsafe { advise_huge_pages(ptr, size) } {
        return false;
    }
    let mut at = 0;
    while at < size {
        // SAFETY: inside the range, writable, unused; zero is what it holds.
        unsafe { core::ptr::write_volatile(ptr.add(at), 0u8) };
        at += HUGE_PAGE_SIZE;
    }
    // SAFETY: advice only; the range is ours.
    preserving_errno(|| unsafe {
        libc::madvise(ptr as *mut c_void, size, libc::MADV_NOHUGEPAGE);
    });
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::{release, reserve_aligned};
    use std::string::String;

    /// The smaps entry of the mapping that starts at `start`: (AnonHugePages in KiB,
    /// its VmFlags line).
    fn smaps_of(start: usize) -> (u64, String) {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let head = std::format!("{start:x}-");
        let mut lines = smaps.lines().skip_while(|l| !l.starts_with(&head));
        assert!(lines.next().is_some(), "no mapping at {head}");
        let (mut huge, mut flags) = (0, String::new());
        for line in lines {
            if let Some(kib) = line.strip_prefix("AnonHugePages:") {
                huge = kib.trim().trim_end_matches("kB").trim().parse().unwrap();
            } else if let Some(f) = line.strip_prefix("VmFlags:") {
                flags = f.into();
                break;
            }
        }
        (huge, flags)
    }

    #[test]
    fn populated_huge_pages_are_mapped_huge_and_left_out_of_khugepaged() {
        let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        if HUGE_PAGE_SIZE == 0 || page_size() != 4096 || mode.is_empty() || mode.contains("[never]")
        {
            return; // no transparent huge pages here
        }
        let size = 2 * HUGE_PAGE_SIZE;
        let base = reserve_aligned(size, HUGE_PAGE_SIZE);
        assert!(!base.is_null());
        // SAFETY: a fresh reservation of ours, aligned, untouched.
        assert!(unsafe { populate_huge_pages(base, HUGE_PAGE_SIZE) });
        // The second huge page stays untouched, so the range splits into two mappings
        // (the advice differs): the first is one huge page, resident, zero, and marked
        // `nh` so khugepaged will not collapse it again after parts are decommitted.
        let (huge, flags) = smaps_of(base as usize);
        // The kernel may be out of free huge pages (then the fault maps 4 KiB pages);
        // the advice must be there either way.
        assert!(
            flags.split_whitespace().any(|f| f == "nh"),
            "VmFlags: {flags}"
        );
        assert!(
            !flags.split_whitespace().any(|f| f == "hg"),
            "VmFlags: {flags}"
        );
        if huge != 0 {
            assert_eq!(huge, (HUGE_PAGE_SIZE / 1024) as u64);
        }
        // SAFETY: inside the reservation; reads of memory that reads as zero.
        unsafe {
            assert_eq!(*base, 0);
            assert_eq!(*base.add(HUGE_PAGE_SIZE - 1), 0);
        }
        // SAFETY: ours, unused.
        unsafe { release(base, size) };
    }
}
