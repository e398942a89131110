//! `callgrind-rs N SIZE`: N pairs of `std::alloc::alloc` + `dealloc` of SIZE bytes
//! (alignment 8) through ebb as the global allocator, statically linked.
//!
//! scripts/callgrind.sh runs it under `valgrind --tool=callgrind` with two values of N
//! and divides the difference of the instruction totals by the difference of N, which
//! leaves the instructions of one pair (startup and exit cancel out).

use std::alloc::{alloc, dealloc, Layout};
use std::hint::black_box;

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: callgrind-rs N SIZE");
        std::process::exit(2);
    }
    let n: u64 = args[1].parse().expect("N");
    let size: usize = args[2].parse().expect("SIZE");
    let layout = Layout::from_size_align(size, 8).expect("layout");
    pairs(black_box(n), layout);
}

/// An opaque copy of `value`: the compiler cannot see through it, so it cannot hoist
/// work on the value out of the loop; unlike `std::hint::black_box` it costs no
/// instruction (no round trip through memory). The C benchmark (pairs.c) does the same.
#[inline(always)]
fn opaque(mut value: usize) -> usize {
    // SAFETY: an empty asm block that only claims to change a register.
    unsafe { std::arch::asm!("/* {0} */", inout(reg) value, options(nostack, preserves_flags)) };
    value
}

#[inline(never)]
fn pairs(n: u64, layout: Layout) {
    for _ in 0..n {
        // The size is opaque on every iteration, as in a program whose sizes vary (else
        // the size-to-class arithmetic of an inlined `alloc` is hoisted out of the loop).
        let size = opaque(layout.size());
        // SAFETY: size is layout.size(), so the layout is valid and non-zero; the block is
        // freed with the same layout.
        unsafe {
            let layout = Layout::from_size_align_unchecked(size, layout.align());
            let p = alloc(layout);
            if p.is_null() {
                std::process::abort();
            }
            dealloc(opaque(p as usize) as *mut u8, layout);
        }
    }
}
