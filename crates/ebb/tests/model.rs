//! Model-based test of the global allocator: long random sequences of alloc,
//! alloc_zeroed, realloc and dealloc through `std::alloc`, checked against a shadow
//! model of the live blocks (no overlap, alignment, usable size, contents kept by
//! realloc, zeroed memory really zero, every byte writable).
//!
//! Also: every class boundary at many alignments, zeroed reuse of dirty memory, and
//! absurd sizes that must fail with null rather than abort.

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

mod common;

use common::shadow::*;
use common::*;
use std::alloc::{alloc, alloc_zeroed, dealloc, realloc};
use std::hint::black_box;

const OPS: usize = 200_000;

#[test]
fn model_seed_1() {
    run_model(1, OPS, 2_000, 256 * MIB);
}

#[test]
fn model_seed_2() {
    run_model(2, OPS, 2_000, 256 * MIB);
}

#[test]
fn model_seed_3_few_live() {
    // Few live blocks: pages empty and refill constantly.
    run_model(3, OPS, 40, 64 * MIB);
}

#[test]
fn model_seed_4_many_live() {
    run_model(0xDEAD_BEEF, OPS, 20_000, 512 * MIB);
}

/// Every class boundary (and its neighbours), at every alignment from 1 to 64 KiB and
/// a few larger: aligned, usable, writable, non-overlapping, and the size class waste
/// bound of ebb's documented scheme holds.
#[test]
fn class_boundaries_all_alignments() {
    let mut m = Model::new();
    let sizes = boundary_sizes();
    let aligns: Vec<usize> = (0..=16)
        .map(|k| 1usize << k)
        .chain([1 << 20, 1 << 24])
        .collect();
    let mut seed = 0u64;
    // The secure build pads every request by 8 bytes at its default level (full): a
    // 1 KiB request then takes the next class (1040 bytes, no canary in it).
    // SAFETY: a valid layout; the block is freed right away.
    let pad_bytes: usize = unsafe {
        let p = alloc(layout(1024, 8));
        let pad = if ebb::usable_size(p) > 1024 { 8 } else { 0 };
        dealloc(p, layout(1024, 8));
        pad
    };
    for &align in &aligns {
        let mut blocks = Vec::new();
        for &size in &sizes {
            if align >= 1 << 20 && size > 64 * KIB && size % 4 != 0 {
                continue; // keep the big-alignment pass short
            }
            // SAFETY: non-zero size, valid layout; written within bounds.
            unsafe {
                let p = alloc(layout(size, align));
                m.insert_range(p, size, align, "boundary alloc");
                seed += 1;
                fill(p, seed, 0, size);
                let usable = ebb::usable_size(p);
                if usable > size {
                    *p.add(usable - 1) = 1;
                }
                if align <= 8 && size <= ebb::MEDIUM_MAX && size > 64 {
                    // (Less the secure build's padding for its canaries, 8 bytes.)
                    assert!(
                        (usable - size).saturating_sub(pad_bytes) * 8 < size,
                        "size {size} align {align}: usable {usable} wastes 1/8 or more"
                    );
                }
                blocks.push((p, size, seed));
            }
        }
        for (p, size, seed) in blocks {
            // SAFETY: live blocks with this layout.
            unsafe {
                verify(p, seed, 0, size, "boundary block");
                m.remove_range(p);
                dealloc(p, layout(size, align));
            }
        }
    }
    // The smallest blocks are at least 8 bytes, even for 1-byte requests.
    let p = ebb::alloc(1, 1);
    // SAFETY: live block.
    unsafe {
        assert!(ebb::usable_size(p) >= 8);
        ebb::free(p);
    }
}

/// Every request up to `MEDIUM_MAX` gets a block of the smallest class of the model's
/// scheme (`common::class_sizes`) that holds it: in particular a power of two plus a
/// small header from 1 KiB to 8 KiB gets a fine class (sqlite's 1,032 B in 1,040, not
/// 1,152; 4,368 B in 4,480, not 4,608).
#[test]
fn usable_size_is_the_smallest_class() {
    let classes = class_sizes();
    // The secure build pads a request for its canary (8 bytes at its default level):
    // a 1 KiB request then takes the class above it.
    // SAFETY: a valid layout; the block is freed right away.
    let pad = unsafe {
        let p = alloc(layout(1024, 8));
        let pad = if ebb::usable_size(p) > 1024 { 8 } else { 0 };
        dealloc(p, layout(1024, 8));
        pad
    };
    let mut sizes = boundary_sizes();
    sizes.extend([1032, 2056, 4104, 4368, 8200]);
    for size in sizes {
        if !(16..=ebb::MEDIUM_MAX).contains(&size) {
            continue;
        }
        // (The secure build pads only requests whose padded size is at most 1 KiB; the
        // rest take the classes above 1 KiB as they are.)
        let padded = if size + pad <= 1024 {
            size + pad
        } else {
            size.max(1025)
        };
        let want = *classes.iter().find(|&&c| c >= padded).unwrap();
        // SAFETY: non-zero size, valid layout; freed right away.
        unsafe {
            let p = alloc(layout(size, 8));
            let usable = ebb::usable_size(p);
            // (A block with a canary has it in its last `pad` bytes.)
            assert!(
                usable == want || usable == want - pad,
                "request {size}: {usable}"
            );
            dealloc(p, layout(size, 8));
        }
    }
    if pad == 0 {
        for (size, block) in [(1032, 1040), (4368, 4480), (8200, 9216)] {
            let p = ebb::alloc(size, 8);
            // SAFETY: a live block.
            assert_eq!(unsafe { ebb::usable_size(p) }, block);
            // SAFETY: `p` came from `ebb::alloc` and is freed once.
            unsafe { ebb::free(p) };
        }
    }
}

/// Dirty blocks of every class boundary size are freed, then the same sizes are asked
/// for zeroed: what comes back must be zero, whether reused or fresh.
#[test]
fn zeroed_after_dirty_reuse() {
    let sizes = boundary_sizes();
    for &align in &[1usize, 16, 64, 4096] {
        for &size in &sizes {
            if size > 2 * MIB && align != 1 {
                continue;
            }
            let n = if size <= 4 * KIB {
                300
            } else if size <= 256 * KIB {
                8
            } else {
                2
            };
            let l = layout(size, align);
            // SAFETY: non-zero layouts, written within bounds, freed once.
            unsafe {
                let dirty: Vec<*mut u8> = (0..n)
                    .map(|_| {
                        let p = alloc(l);
                        assert!(!p.is_null());
                        std::ptr::write_bytes(p, 0xEE, size);
                        p
                    })
                    .collect();
                let set: std::collections::HashSet<usize> =
                    dirty.iter().map(|&p| p as usize).collect();
                for &p in dirty.iter().rev() {
                    dealloc(p, l);
                }
                let mut reused = 0;
                let zeroed: Vec<*mut u8> = (0..n)
                    .map(|_| {
                        let p = alloc_zeroed(l);
                        assert!(!p.is_null());
                        assert_eq!(p as usize % align, 0);
                        if let Some(i) = first_nonzero(p, size) {
                            panic!(
                                "alloc_zeroed({size}, {align}) = {p:p} (reused: {}): byte {i} is {:#04x}",
                                set.contains(&(p as usize)),
                                *p.add(i)
                            );
                        }
                        reused += set.contains(&(p as usize)) as usize;
                        std::ptr::write_bytes(p, 0x11, size);
                        p
                    })
                    .collect();
                for p in zeroed {
                    dealloc(p, l);
                }
                let _ = reused;
            }
        }
    }
    // Through ebb's own API, including size 0.
    for size in [0usize, 1, 8, 100, 1000, 70_000, 600_000] {
        let p = ebb::alloc(size, 8);
        assert!(!p.is_null());
        // SAFETY: p has at least `size` bytes (and at least one usable).
        unsafe {
            std::ptr::write_bytes(p, 0xCC, ebb::usable_size(p));
            ebb::free(p);
            let z = ebb::alloc_zeroed(size, 8);
            assert!(!z.is_null());
            assert_eq!(first_nonzero(z, size), None, "ebb::alloc_zeroed({size})");
            ebb::free(z);
        }
    }
}

/// Memory that went back to the OS (purged) and comes back must read as zero through
/// alloc_zeroed, and memory that stayed committed must be cleared.
#[test]
fn zeroed_after_purge() {
    for size in [64usize, 4096, 100_000, 2 * MIB] {
        let l = layout(size, 8);
        // SAFETY: valid layouts, written within bounds, freed once.
        unsafe {
            let blocks: Vec<*mut u8> = (0..64)
                .map(|_| {
                    let p = alloc(l);
                    std::ptr::write_bytes(p, 0x77, size);
                    p
                })
                .collect();
            for p in blocks {
                dealloc(p, l);
            }
            ebb::collect(true);
            for _ in 0..64 {
                let p = alloc_zeroed(l);
                assert_eq!(first_nonzero(p, size), None, "size {size} after purge");
                dealloc(p, l);
            }
        }
    }
}

/// ebb's own realloc keeps contents and alignment, and `free(null)` is a no-op.
#[test]
fn ebb_api_realloc_and_null() {
    // SAFETY: null is allowed.
    unsafe {
        ebb::free(std::ptr::null_mut());
        assert_eq!(ebb::usable_size(std::ptr::null()), 0);
    }
    assert!(!ebb::owns(std::ptr::null()));
    let local = 5u64;
    assert!(!ebb::owns(&local as *const u64 as *const u8));
    for align in [8usize, 16, 64, 4096, 1 << 20] {
        let mut size = 3;
        let mut p = ebb::alloc(size, align);
        assert!(!p.is_null());
        // SAFETY: p is live with alignment `align` and `size` bytes.
        unsafe {
            fill(p, align as u64, 0, size);
            for new in [7usize, 33, 1000, 70_000, 600_000, 20 * MIB, 100, 1] {
                let q = ebb::realloc(p, new, align);
                assert!(!q.is_null(), "realloc to {new} align {align}");
                assert_eq!(q as usize % align, 0, "realloc to {new} align {align}");
                assert!(ebb::usable_size(q) >= new);
                verify(q, align as u64, 0, size.min(new), "ebb::realloc");
                fill(q, align as u64, 0, new);
                p = q;
                size = new;
            }
            ebb::free(p);
        }
    }
    for align in [0usize, 3, 24, 1000] {
        assert!(ebb::alloc(8, align).is_null(), "align {align}");
        assert!(ebb::alloc_zeroed(8, align).is_null(), "align {align}");
    }
}

/// Absurd sizes fail with null, through ebb's API and `std::alloc` (where a `Layout`
/// exists), and a failed realloc leaves the block intact.
#[test]
fn impossible_sizes_return_null() {
    let imax = isize::MAX as usize;
    let sizes = [
        usize::MAX,
        usize::MAX - 1,
        usize::MAX - 4095,
        usize::MAX / 2 + 1,
        imax,
        imax - 1,
        imax - 15,
        imax - 4095,
        imax - (64 << 20),
        1 << 62,
        1 << 56,
        1 << 48,
        1 << 47,
    ];
    let aligns = [1usize, 2, 8, 16, 32, 4096, 1 << 16, 1 << 20, 1 << 26];
    for &size in &sizes {
        for &align in &aligns {
            assert!(
                ebb::alloc(size, align).is_null(),
                "ebb::alloc({size:#x}, {align})"
            );
            assert!(
                ebb::alloc_zeroed(size, align).is_null(),
                "ebb::alloc_zeroed({size:#x}, {align})"
            );
        }
        for &align in &aligns {
            if let Ok(l) = std::alloc::Layout::from_size_align(size, align) {
                // SAFETY: non-zero layout. black_box: LLVM may otherwise elide the
                // unused allocation and fold the null test to "not null".
                unsafe {
                    let p = black_box(alloc(l));
                    assert!(p.is_null(), "std alloc {size:#x} align {align}");
                    let p = black_box(alloc_zeroed(l));
                    assert!(p.is_null(), "std alloc_zeroed {size:#x} align {align}");
                }
            }
        }
    }
    // Failed reallocs of small, medium, large and huge blocks.
    for old in [24usize, 5000, 300_000, 2 * MIB, 20 * MIB] {
        for align in [8usize, 16, 4096] {
            let l = layout(old, align);
            // SAFETY: the block is live with layout l while it is resized.
            unsafe {
                let p = alloc(l);
                fill(p, 9, 0, old);
                for &new in &sizes {
                    if std::alloc::Layout::from_size_align(new, align).is_ok() {
                        let q = black_box(realloc(p, l, new));
                        assert!(q.is_null(), "realloc {old} -> {new:#x} align {align}");
                        verify(p, 9, 0, old, "after failed realloc");
                    }
                    let q = ebb::realloc(p, new, align);
                    assert!(q.is_null(), "ebb::realloc {old} -> {new:#x} align {align}");
                    verify(p, 9, 0, old, "after failed ebb::realloc");
                }
                dealloc(p, l);
            }
        }
    }
}

/// Regression test for a bug found by this suite (fixed in 878bdb8): `ebb::alloc(size,
/// 16)` rounded with `(size + 15) & !15` without an overflow check, so sizes above
/// `usize::MAX - 15` wrapped to a tiny request and got a small block instead of null
/// (a panic in builds with overflow checks); `ebb::realloc(p, usize::MAX, 16)`
/// "succeeded" with a small block, and `ebb::alloc_zeroed(usize::MAX, 16)` could clear
/// `usize::MAX` bytes (SIGSEGV), which is why that part runs in a child process.
/// (`std::alloc` cannot reach this: `Layout` caps sizes at `isize::MAX`.)
#[test]
fn ebb_alloc_align16_overflow() {
    for size in [usize::MAX, usize::MAX - 1, usize::MAX - 14] {
        let p = ebb::alloc(size, 16);
        assert!(p.is_null(), "ebb::alloc({size:#x}, 16) returned {p:p}");
    }
    let p = ebb::alloc(8, 16);
    // SAFETY: live block allocated with alignment 16.
    unsafe {
        let q = ebb::realloc(p, usize::MAX, 16);
        assert!(
            q.is_null(),
            "ebb::realloc(p, usize::MAX, 16) returned {q:p}"
        );
        ebb::free(p);
    }
    // alloc_zeroed in a child, since the failure mode is a crash.
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "zeroed_overflow_child",
            "--nocapture",
            "--include-ignored",
        ])
        .env("EBB_OVERFLOW_CHILD", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ebb::alloc_zeroed(usize::MAX, 16) in a child: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Child half of `ebb_alloc_align16_overflow` (does nothing unless asked).
#[test]
fn zeroed_overflow_child() {
    if std::env::var_os("EBB_OVERFLOW_CHILD").is_none() {
        return;
    }
    let p = ebb::alloc_zeroed(usize::MAX, 16);
    assert!(
        p.is_null(),
        "ebb::alloc_zeroed(usize::MAX, 16) returned {p:p}"
    );
}

/// Large and huge blocks at every alignment up to 64 MiB, resized up and down across
/// the medium/large/huge limits (in place, by growing spans or mappings, or by
/// moving): alignment and contents survive every step.
#[test]
fn big_blocks_resize_across_limits() {
    let steps = [
        20 * MIB,
        40 * MIB,
        ebb::LARGE_MAX + 1,
        60 * MIB,
        17 * MIB,
        ebb::LARGE_MAX,
        2 * MIB,
        ebb::MEDIUM_MAX + 1,
        ebb::MEDIUM_MAX,
        5000,
        9 * MIB,
        33 * MIB,
        1,
    ];
    let mut m = Model::new();
    for (n, align) in [
        8usize,
        16,
        4096,
        1 << 16,
        1 << 20,
        1 << 23,
        1 << 25,
        1 << 26,
    ]
    .into_iter()
    .enumerate()
    {
        let seed = n as u64 + 1000;
        let mut size = ebb::MEDIUM_MAX + 1;
        // SAFETY: the block is live with (size, align) at each step.
        unsafe {
            let mut p = alloc(layout(size, align));
            m.insert_range(p, size, align, "big alloc");
            fill(p, seed, 0, size);
            // A neighbour so that growing in place is not always possible.
            let neighbour = alloc(layout(ebb::LARGE_MAX + 1, 8));
            m.insert_range(neighbour, ebb::LARGE_MAX + 1, 8, "neighbour");
            for &new in &steps {
                m.remove_range(p);
                let q = black_box(realloc(p, layout(size, align), new));
                m.insert_range(q, new, align, "big realloc");
                if let Some(i) = first_mismatch(q, seed, 0, size.min(new)) {
                    panic!("realloc {size} -> {new} (align {align}): byte {i} lost");
                }
                if new > size {
                    fill(q, seed, size, new);
                }
                p = q;
                size = new;
            }
            m.remove_range(p);
            dealloc(p, layout(size, align));
            m.remove_range(neighbour);
            dealloc(neighbour, layout(ebb::LARGE_MAX + 1, 8));
        }
    }
}

/// `ebb::free` of memory ebb does not manage is reported and ignored (documented in
/// `ebb::free`), not a crash.
#[test]
fn foreign_pointers_are_ignored() {
    if ebb::options().abort_on_foreign {
        eprintln!("foreign_pointers_are_ignored: skipped (EBB_ABORT_ON_ERROR=1)");
        return;
    }
    let before = ebb::stats().invalid_frees;
    let mut on_stack = [0u8; 64];
    // Memory from the OS directly: `System` would not do, since in a workspace build the
    // `override` feature routes libc's malloc to ebb as well.
    // SAFETY: an anonymous mapping of one page, unmapped below; the pointers are not
    // ebb's, which ebb::free documents as reported and ignored.
    unsafe {
        let page = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(page, libc::MAP_FAILED);
        let foreign = page as *mut u8;
        assert!(!ebb::owns(foreign));
        assert!(!ebb::owns(on_stack.as_mut_ptr()));
        ebb::free(on_stack.as_mut_ptr());
        ebb::free(foreign);
        assert_eq!(ebb::usable_size(foreign), 0);
        libc::munmap(page, 4096);
    }
    assert!(ebb::stats().invalid_frees >= before + 2);
    // The allocator still works.
    let v: Vec<u32> = (0..10_000).collect();
    assert_eq!(v[9_999], 9_999);
}

/// Zero-size requests through ebb's API get distinct, aligned, freeable blocks at
/// every alignment.
#[test]
fn zero_size_requests() {
    let mut m = Model::new();
    let mut live = Vec::new();
    for k in 0..=20 {
        let align = 1usize << k;
        for zeroed in [false, true] {
            for _ in 0..3 {
                let p = if zeroed {
                    ebb::alloc_zeroed(0, align)
                } else {
                    ebb::alloc(0, align)
                };
                m.insert_range(p, 0, align, "zero-size alloc");
                live.push(p);
            }
        }
    }
    for p in live {
        m.remove_range(p);
        // SAFETY: live blocks from ebb::alloc.
        unsafe { ebb::free(p) };
    }
}
