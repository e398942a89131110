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

#[inline(never)]
fn pairs(n: u64, layout: Layout) {
    for _ in 0..n {
        // SAFETY: layout has a non-zero size; the block is freed with the same layout.
        unsafe {
            let p = alloc(layout);
            if p.is_null() {
                std::process::abort();
            }
            dealloc(black_box(p), layout);
        }
    }
}
