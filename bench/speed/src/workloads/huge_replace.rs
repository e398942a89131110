//! huge-replace: 20 live blocks of 5-25 MiB, one of them replaced at random 2,000 times
//! (at scale 1), like mimalloc-bench's malloc-large. The sizes straddle ebb's 16 MiB
//! boundary between large and huge blocks and outnumber a small cache of kept mappings.
//! Every new block is written once per 4 KiB page, as a program filling its buffer
//! would touch it, so peak RSS counts what each allocator keeps mapped and touched
//! (freed blocks it still holds, plus the 20 live ones, about 300 MiB).

use crate::util::{mix, scaled, Rng};
use crate::workloads::Outcome;
use std::alloc::{alloc, dealloc, Layout};

const LIVE: usize = 20;
const MIN: usize = 5 << 20;
const MAX: usize = 25 << 20;
const PAGE: usize = 4096;
const REPLACEMENTS: usize = 2000;

struct Block {
    ptr: *mut u8,
    layout: Layout,
}

impl Block {
    /// A new block of `size` bytes with one byte written per page and the last byte.
    fn new(size: usize, tag: u8) -> Block {
        let layout = Layout::from_size_align(size, 16).unwrap();
        // SAFETY: size >= MIN > 0.
        let ptr = unsafe { alloc(layout) };
        assert!(!ptr.is_null(), "out of memory ({size} bytes)");
        for i in (0..size).step_by(PAGE) {
            // SAFETY: i < size, inside the block.
            unsafe { ptr.add(i).write(tag ^ (i / PAGE) as u8) };
        }
        // SAFETY: size - 1 is the block's last byte.
        unsafe { ptr.add(size - 1).write(tag) };
        Block { ptr, layout }
    }

    /// The first and the last byte, both written by `new`.
    fn probe(&self) -> u64 {
        // SAFETY: both bytes are inside the block and were initialised by `new`.
        unsafe { (*self.ptr as u64) << 8 | *self.ptr.add(self.layout.size() - 1) as u64 }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: allocated by `alloc` with this layout in `new`, freed once.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}

pub fn run(scale: f64) -> Outcome {
    let replacements = scaled(REPLACEMENTS, scale, LIVE);
    let mut rng = Rng::new(16);
    let mut live: Vec<Block> = (0..LIVE)
        .map(|i| Block::new(rng.range(MIN, MAX), i as u8))
        .collect();
    let mut h = 0u64;
    for i in 0..replacements {
        let slot = rng.below(LIVE);
        let size = rng.range(MIN, MAX);
        h = mix(h, live[slot].probe());
        // The replacement is allocated before the old block is freed (the assignment
        // drops the old value last), as `buffer.reset(new char[size])` does in C++.
        live[slot] = Block::new(size, i as u8);
    }
    for b in &live {
        h = mix(h, b.probe());
    }
    Outcome::new(h, 1)
}
