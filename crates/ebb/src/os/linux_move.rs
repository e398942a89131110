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
    // pages there again (a no-op while it is still mapped).
    let _ = super::reserve_at(to, size);
    false
}
