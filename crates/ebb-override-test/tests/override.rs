//! The `override` feature without LD_PRELOAD: C code linked into this Rust test binary
//! (c/clib.c) and libc's internal allocations share ebb with Rust, in any thread and in
//! both directions.

use core::ffi::{c_int, c_void, CStr};
use ebb_override_test::{
    clib_alloc_in_thread, clib_free_in_thread, clib_malloc_address, clib_pattern,
    clib_strdup_in_thread, pattern,
};
use std::thread;

/// Sizes through every tier: tiny, small, medium (<= 512 KiB), large (<= 16 MiB), huge.
const SIZES: [usize; 12] = [
    0,
    1,
    8,
    24,
    100,
    1000,
    5000,
    70_000,
    600_000,
    2 << 20,
    17 << 20,
    20 << 20,
];

fn check_pattern(p: *const u8, size: usize, seed: u32, i: usize) {
    // SAFETY: p is a live block of at least `size` bytes.
    let bytes = unsafe { std::slice::from_raw_parts(p, size) };
    for (j, &b) in bytes.iter().enumerate() {
        assert_eq!(b, pattern(seed, i, j), "block {i} byte {j}");
    }
}

#[test]
fn runs_without_ld_preload() {
    assert!(
        std::env::var_os("LD_PRELOAD").is_none(),
        "this test must show the override without LD_PRELOAD"
    );
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    assert!(
        !maps.contains("libebb"),
        "libebb is mapped into the process: {maps}"
    );
}

/// The `malloc` that C code and the dynamic linker see is the one this executable
/// defines (ebb's), not libc's.
#[test]
fn malloc_symbol_is_ebbs() {
    // SAFETY: plain symbol look-ups and dladdr on valid addresses.
    unsafe {
        let dynamic = libc::dlsym(libc::RTLD_DEFAULT, c"malloc".as_ptr());
        assert!(!dynamic.is_null());
        let from_c = clib_malloc_address();
        let from_rust = libc::malloc as *const () as *mut c_void;
        assert_eq!(from_c, from_rust, "C code links a different malloc");
        assert_eq!(dynamic, from_rust, "libc would call a different malloc");
        let mut info: libc::Dl_info = std::mem::zeroed();
        assert_ne!(libc::dladdr(dynamic, &mut info), 0);
        let file = CStr::from_ptr(info.dli_fname)
            .to_string_lossy()
            .into_owned();
        assert!(
            !file.contains("libc.so"),
            "malloc resolves into {file}, not into this executable"
        );
        let exe = std::env::current_exe().unwrap();
        let exe_name = exe.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            file.ends_with(&exe_name) || std::path::Path::new(&file) == exe,
            "malloc resolves into {file}, expected {}",
            exe.display()
        );
    }
}

#[test]
fn c_thread_blocks_are_ebbs_and_rust_frees_them_in_another_thread() {
    let before = ebb::stats();
    let mut blocks = [std::ptr::null_mut::<c_void>(); SIZES.len()];
    let seed = 11;
    // SAFETY: the arrays have SIZES.len() entries.
    let rc =
        unsafe { clib_alloc_in_thread(blocks.as_mut_ptr(), SIZES.as_ptr(), SIZES.len(), seed) };
    assert_eq!(rc, 0, "a malloc in the C thread failed");
    let mut live = 0u64;
    for (i, (&p, &size)) in blocks.iter().zip(&SIZES).enumerate() {
        let p = p as *mut u8;
        assert!(!p.is_null());
        assert!(ebb::owns(p), "block {i} ({size} bytes) from C is not ebb's");
        // SAFETY: p is a live block from ebb.
        let usable = unsafe { ebb::usable_size(p) };
        assert!(usable >= size, "block {i}: usable {usable} < {size}");
        // SAFETY: as above; malloc_usable_size is ebb's too.
        assert_eq!(
            unsafe { libc::malloc_usable_size(p as *mut c_void) },
            usable
        );
        if size > 8 {
            assert_eq!(p as usize % 16, 0, "block {i} not 16-byte aligned");
        }
        check_pattern(p, size, seed, i);
        // SAFETY: FFI call without preconditions.
        assert_eq!(unsafe { clib_pattern(seed, i, 5) }, pattern(seed, i, 5));
        live += size as u64;
    }
    let during = ebb::stats();
    assert!(
        during.allocated >= live,
        "allocated {} < live {live}",
        during.allocated
    );
    assert!(
        during.large_allocs > before.large_allocs,
        "no large block counted"
    );
    assert!(
        during.huge_allocs >= before.huge_allocs + 2,
        "huge blocks not counted"
    );
    assert!(
        during.threads_created > before.threads_created,
        "the C thread made no heap"
    );

    // Free them from a Rust thread (neither the allocating C thread nor this one).
    let addresses: Vec<usize> = blocks.iter().map(|&p| p as usize).collect();
    thread::spawn(move || {
        for (i, &a) in addresses.iter().enumerate() {
            check_pattern(a as *const u8, SIZES[i], seed, i);
            // SAFETY: a live malloc'd block, freed once.
            unsafe { libc::free(a as *mut c_void) };
        }
    })
    .join()
    .unwrap();
    let after = ebb::stats();
    assert_eq!(
        after.invalid_frees, before.invalid_frees,
        "a free was rejected"
    );
}

#[repr(C, align(4096))]
struct PageAligned([u8; 5000]);

#[test]
fn c_thread_frees_rust_boxes_and_vecs() {
    let before = ebb::stats();
    let seed = 77;
    let mut blocks: Vec<*mut c_void> = Vec::new();
    let mut sizes: Vec<usize> = Vec::new();
    // (Empty Vecs and boxes own no allocation, so size 0 is left out.)
    for &size in SIZES.iter().filter(|&&size| size > 0) {
        let i = blocks.len();
        // A Vec<u8> with exactly `size` bytes of capacity, handed over raw.
        let mut v: Vec<u8> = Vec::with_capacity(size);
        v.extend((0..size).map(|j| pattern(seed, i, j)));
        let p = v.as_mut_ptr();
        std::mem::forget(v);
        blocks.push(p as *mut c_void);
        sizes.push(size);
        // A boxed slice of the same length.
        let i = blocks.len();
        let b: Box<[u8]> = (0..size).map(|j| pattern(seed, i, j)).collect();
        blocks.push(Box::into_raw(b) as *mut u8 as *mut c_void);
        sizes.push(size);
    }
    // A String's buffer, a Box<u64> and an over-aligned box.
    let i = blocks.len();
    let s: String = (0..300)
        .map(|j| (b'a' + pattern(seed, i, j) % 26) as char)
        .collect();
    let mut s = s.into_bytes();
    for (j, b) in s.iter_mut().enumerate() {
        *b = pattern(seed, i, j);
    }
    sizes.push(s.len());
    blocks.push(s.as_mut_ptr() as *mut c_void);
    std::mem::forget(s);
    let i = blocks.len();
    let value = u64::from_ne_bytes(std::array::from_fn(|j| pattern(seed, i, j)));
    blocks.push(Box::into_raw(Box::new(value)) as *mut c_void);
    sizes.push(8);
    let i = blocks.len();
    let mut aligned = Box::new(PageAligned([0; 5000]));
    for (j, b) in aligned.0.iter_mut().enumerate() {
        *b = pattern(seed, i, j);
    }
    let aligned = Box::into_raw(aligned);
    assert_eq!(aligned as usize % 4096, 0);
    blocks.push(aligned as *mut c_void);
    sizes.push(5000);

    for (&p, &size) in blocks.iter().zip(&sizes) {
        assert!(
            ebb::owns(p as *const u8),
            "Rust block of {size} bytes is not ebb's"
        );
        // SAFETY: live block.
        assert!(unsafe { ebb::usable_size(p as *const u8) } >= size);
    }
    // SAFETY: every block is a live allocation of the global allocator (ebb), which is
    // what C's free is here; each is freed once, by the C thread.
    let bad =
        unsafe { clib_free_in_thread(blocks.as_mut_ptr(), sizes.as_ptr(), blocks.len(), seed, 1) };
    assert_eq!(
        bad, 0,
        "the C thread found {bad} blocks with wrong contents"
    );
    assert!(blocks.iter().all(|p| p.is_null()));
    let after = ebb::stats();
    assert_eq!(
        after.invalid_frees, before.invalid_frees,
        "a free was rejected"
    );
}

#[test]
fn libc_internal_allocations_are_ebbs() {
    // SAFETY: strdup of a valid C string; results freed once with free.
    unsafe {
        let s = libc::strdup(c"allocated inside libc".as_ptr());
        assert!(!s.is_null());
        assert!(ebb::owns(s as *const u8), "libc's strdup did not use ebb");
        assert_eq!(CStr::from_ptr(s), c"allocated inside libc");
        // Freed by another Rust thread.
        let a = s as usize;
        thread::spawn(move || libc::free(a as *mut c_void))
            .join()
            .unwrap();

        let t = clib_strdup_in_thread(c"strdup in a C thread".as_ptr());
        assert!(!t.is_null());
        assert!(
            ebb::owns(t as *const u8),
            "strdup in a C thread did not use ebb"
        );
        assert_eq!(CStr::from_ptr(t), c"strdup in a C thread");
        libc::free(t as *mut c_void);

        // realpath(..., NULL) and open_memstream allocate inside libc as well.
        let r = libc::realpath(c"/".as_ptr(), std::ptr::null_mut());
        assert!(!r.is_null());
        assert!(ebb::owns(r as *const u8), "realpath's buffer is not ebb's");
        libc::free(r as *mut c_void);

        let mut buf: *mut libc::c_char = std::ptr::null_mut();
        let mut len: usize = 0;
        let f = libc::open_memstream(&mut buf, &mut len);
        assert!(!f.is_null());
        for k in 0..2000 {
            let line = format!("line {k}\n\0");
            assert!(libc::fputs(line.as_ptr() as *const libc::c_char, f) >= 0);
        }
        assert_eq!(libc::fclose(f), 0);
        assert!(len > 10_000);
        assert!(
            ebb::owns(buf as *const u8),
            "open_memstream's buffer is not ebb's"
        );
        assert!(CStr::from_ptr(buf)
            .to_bytes()
            .starts_with(b"line 0\nline 1\n"));
        libc::free(buf as *mut c_void);
    }
}

/// The C standard functions of this executable are ebb's (calloc zeroes, realloc keeps
/// contents, malloc_usable_size agrees with ebb's), called from Rust.
#[test]
fn standard_names_behave() {
    // SAFETY: standard allocator calls on blocks owned here.
    unsafe {
        let p = libc::calloc(1000, 8) as *mut u8;
        assert!(ebb::owns(p));
        assert!(std::slice::from_raw_parts(p, 8000).iter().all(|&b| b == 0));
        p.write_bytes(0x5A, 8000);
        let q = libc::realloc(p as *mut c_void, 100_000) as *mut u8;
        assert!(ebb::owns(q));
        assert!(std::slice::from_raw_parts(q, 8000)
            .iter()
            .all(|&b| b == 0x5A));
        assert_eq!(libc::realloc(q as *mut c_void, 0), std::ptr::null_mut());

        let mut out: *mut c_void = std::ptr::null_mut();
        let rc: c_int = libc::posix_memalign(&mut out, 1 << 16, 100);
        assert_eq!(rc, 0);
        assert_eq!(out as usize % (1 << 16), 0);
        assert!(ebb::owns(out as *const u8));
        libc::free(out);
    }
}
