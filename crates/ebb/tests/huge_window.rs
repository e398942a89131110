//! A huge block's mapping ends on a slice, not on the 32 MiB window of the segment map
//! that leads to it: what someone else maps in the rest of that window is not ebb's.
//! `owns` says so, and `free` of such a pointer follows the foreign-pointer policy
//! (reported, left alone) instead of freeing the huge block it shares a window with.

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

const WINDOW: usize = 32 << 20;

#[test]
fn memory_mapped_after_a_huge_block_is_not_ebbs() {
    let size = ebb::LARGE_MAX + (100 << 10);
    let block = ebb::alloc(size, 8);
    assert!(!block.is_null());
    // SAFETY: a live block of ebb's.
    let usable = unsafe { ebb::usable_size(block) };
    let end = block as usize + usable; // the mapping's end: the block runs to it
    assert_ne!(
        end % WINDOW,
        0,
        "the mapping ends on a window: nothing to test"
    );
    assert_eq!((end - 1) / WINDOW, end / WINDOW);
    // SAFETY: a fresh anonymous mapping at a free address (NOREPLACE), unmapped below.
    let foreign = unsafe {
        libc::mmap(
            end as *mut libc::c_void,
            1 << 16,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    if foreign == libc::MAP_FAILED {
        eprintln!("skipped: the address after the huge mapping is taken");
        // SAFETY: live, freed once.
        unsafe { ebb::free(block) };
        return;
    }
    let foreign = foreign as *mut u8;
    assert!(ebb::owns(block));
    assert!(
        !ebb::owns(foreign),
        "a mapping past a huge block's end counted as ebb's"
    );
    let mut options = ebb::options();
    options.show_errors = true;
    ebb::set_options(options);
    // SAFETY: the point of the test: a pointer ebb did not allocate, in a window of its
    // map; the policy for those is to leave them alone (`abort_on_foreign` is off).
    unsafe { ebb::free(foreign) };
    // SAFETY: still live, if free left it alone.
    assert_eq!(
        unsafe { ebb::usable_size(block) },
        usable,
        "free of the foreign pointer freed the huge block"
    );
    // SAFETY: live; the foreign mapping is ours.
    unsafe {
        block.write_bytes(0x5a, size);
        ebb::free(block);
        libc::munmap(foreign as *mut libc::c_void, 1 << 16);
    }
}
