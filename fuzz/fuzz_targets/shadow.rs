//! The shadow model both targets check ebb against: every live block with its size,
//! alignment and fill byte; each operation decoded from the fuzzer's bytes goes
//! through one of ebb's entry points (Rust API or C ABI) and is checked: alignment,
//! usable size, zeroed memory, contents kept by realloc and intact until free.

use core::ffi::c_void;

extern "C" {
    fn ebb_malloc(size: usize) -> *mut c_void;
    fn ebb_calloc(count: usize, size: usize) -> *mut c_void;
    fn ebb_realloc(ptr: *mut c_void, size: usize) -> *mut c_void;
    fn ebb_free(ptr: *mut c_void);
    fn ebb_aligned_alloc(align: usize, size: usize) -> *mut c_void;
    fn ebb_posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> i32;
    fn ebb_malloc_usable_size(ptr: *mut c_void) -> usize;
}

pub struct Live {
    pub ptr: *mut u8,
    pub size: usize,
    pub fill: u8,
}

// SAFETY: a live block may be freed by any thread (the threads target sends some).
unsafe impl Send for Live {}

/// Sizes that reach every size range: small, medium, large, huge (rarely).
fn size_from(a: u8, b: u8) -> usize {
    match a % 16 {
        0..=7 => b as usize,
        8..=11 => (b as usize) << 6,
        12..=13 => (b as usize) << 11,
        14 => (b as usize) << 15,
        _ => (16 << 20) + ((b as usize) << 12),
    }
}

fn align_from(a: u8) -> usize {
    1usize << (a % 13)
}

fn check_and_fill(p: *mut u8, size: usize, align: usize, zeroed: bool, fill: u8) {
    assert_eq!(p as usize % align.max(1), 0, "misaligned block");
    // SAFETY: p is a live block of at least `size` bytes.
    let bytes = unsafe { core::slice::from_raw_parts_mut(p, size) };
    if zeroed {
        assert!(bytes.iter().all(|&b| b == 0), "zeroed block is not zero");
    }
    // SAFETY: p is live.
    assert!(
        unsafe { ebb::usable_size(p) } >= size,
        "usable size too small"
    );
    bytes.fill(fill);
}

pub fn check_intact(block: &Live) {
    // SAFETY: the block is live with `size` bytes.
    let bytes = unsafe { core::slice::from_raw_parts(block.ptr, block.size) };
    assert!(
        bytes.iter().all(|&b| b == block.fill),
        "block contents changed"
    );
}

/// Free `block` through the Rust API or the C ABI.
pub fn release(block: Live, via_c: bool) {
    check_intact(&block);
    // SAFETY: the block is live and owned by the model.
    unsafe {
        if via_c {
            ebb_free(block.ptr as *mut c_void);
        } else {
            ebb::free(block.ptr);
        }
    }
}

/// Apply the operation encoded in `op` to `live`.
pub fn step(live: &mut Vec<Live>, op: &[u8; 4], counter: &mut u8) {
    *counter = counter.wrapping_add(1).max(1);
    let fill = *counter;
    let size = size_from(op[1], op[2]);
    let align = align_from(op[3]);
    let pick = |n: usize| op[2] as usize % n;
    // SAFETY (all branches): pointers passed to ebb are live blocks the model owns.
    match op[0] % 12 {
        0 => {
            let p = ebb::alloc(size, align);
            if !p.is_null() {
                check_and_fill(p, size, align, false, fill);
                live.push(Live { ptr: p, size, fill });
            }
        }
        1 => {
            let p = ebb::alloc_zeroed(size, align);
            if !p.is_null() {
                check_and_fill(p, size, align, true, fill);
                live.push(Live { ptr: p, size, fill });
            }
        }
        2 => {
            let p = unsafe { ebb_malloc(size) } as *mut u8;
            if !p.is_null() {
                check_and_fill(p, size, if size > 8 { 16 } else { 1 }, false, fill);
                live.push(Live { ptr: p, size, fill });
            }
        }
        3 => {
            let count = (op[3] as usize % 8) + 1;
            let each = size / count;
            let p = unsafe { ebb_calloc(count, each) } as *mut u8;
            if !p.is_null() {
                check_and_fill(p, count * each, 1, true, fill);
                live.push(Live {
                    ptr: p,
                    size: count * each,
                    fill,
                });
            }
        }
        4 => {
            let align = align.max(8);
            let p = unsafe { ebb_aligned_alloc(align, size.next_multiple_of(align)) } as *mut u8;
            if !p.is_null() {
                check_and_fill(p, size, align, false, fill);
                live.push(Live { ptr: p, size, fill });
            }
        }
        5 => {
            let align = align.max(8);
            let mut out = core::ptr::null_mut();
            if unsafe { ebb_posix_memalign(&mut out, align, size) } == 0 {
                check_and_fill(out as *mut u8, size, align, false, fill);
                live.push(Live {
                    ptr: out as *mut u8,
                    size,
                    fill,
                });
            }
        }
        6 | 7 if !live.is_empty() => {
            let i = pick(live.len());
            let block = live.swap_remove(i);
            release(block, op[0] % 12 == 7);
        }
        8 | 9 if !live.is_empty() => {
            let i = pick(live.len());
            check_intact(&live[i]);
            let old = live[i].ptr;
            let kept = live[i].size.min(size);
            let p = if op[0] % 12 == 8 {
                unsafe { ebb::realloc(old, size, 16) }
            } else {
                unsafe { ebb_realloc(old as *mut c_void, size) as *mut u8 }
            };
            if p.is_null() {
                if size != 0 {
                    return; // a failed realloc keeps the block
                }
                live.swap_remove(i); // realloc(p, 0) freed it
                return;
            }
            let bytes = unsafe { core::slice::from_raw_parts(p, kept) };
            assert!(
                bytes.iter().all(|&b| b == live[i].fill),
                "realloc lost contents"
            );
            check_and_fill(p, size, 1, false, fill);
            live[i] = Live { ptr: p, size, fill };
        }
        10 if !live.is_empty() => {
            let i = pick(live.len());
            let usable = unsafe { ebb_malloc_usable_size(live[i].ptr as *mut c_void) };
            assert!(usable >= live[i].size);
        }
        11 => ebb::collect(op[1] % 2 == 0),
        _ => {}
    }
    // Keep the model's footprint bounded (huge blocks are up to 17 MiB).
    let total: usize = live.iter().map(|b| b.size).sum();
    if total > 64 << 20 || live.len() > 4096 {
        let block = live.swap_remove(0);
        release(block, false);
    }
}
