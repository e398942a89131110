//! What the kernel holds of a range, and whether it can move pages: for the tests of
//! moves between mappings (`lend.rs`, `calloc_reuse.rs`, `realloc_into_huge.rs`).

/// The OS page size these tests assume (they return early on others).
pub const PAGE: usize = 4096;

/// True if the OS page is 4 KiB.
pub fn four_kib_pages() -> bool {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) == PAGE as libc::c_long }
}

/// Resident OS pages of `[start, start + len)` (page aligned, mapped).
pub fn resident_pages(start: usize, len: usize) -> usize {
    let mut out = vec![0u8; len / PAGE];
    // SAFETY: the range is mapped and `out` has one byte per page.
    let rc = unsafe { libc::mincore(start as *mut libc::c_void, len, out.as_mut_ptr()) };
    assert_eq!(rc, 0, "mincore failed");
    out.iter().filter(|&&b| b & 1 != 0).count()
}

/// True if the kernel moves pages out of a mapping that stays (`MREMAP_DONTUNMAP`,
/// Linux 5.7): without it ebb copies or faults instead.
pub fn kernel_moves_pages() -> bool {
    // SAFETY: a private mapping of our own, moved within itself and unmapped after.
    unsafe {
        let len = 4 * PAGE;
        let map = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(map, libc::MAP_FAILED);
        let to = (map as *mut u8).add(2 * PAGE) as *mut libc::c_void;
        let moved = libc::mremap(
            map,
            PAGE,
            PAGE,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED | libc::MREMAP_DONTUNMAP,
            to,
        ) != libc::MAP_FAILED;
        libc::munmap(map, len);
        moved
    }
}
