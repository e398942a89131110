//! sweep: allocation cost across sizes. For each size (16 B .. 32 MiB) it times
//! malloc+free pairs and then malloc-many-then-free-many (up to 1000 blocks, at most
//! 64 MiB at once), touching the first and last byte of every block; first on one
//! thread, then on two threads at once (each doing the same work). The JSON carries
//! the time of every size (`sizes`: {"16": {"t1_ms": .., "t2_ms": ..}, ...}); wall_ms
//! is the total.

use crate::util::{mix, scaled};
use crate::workloads::Outcome;
use std::alloc::{alloc, dealloc, Layout};
use std::fmt::Write;
use std::time::Instant;

pub const SIZES: [usize; 12] = [
    16,
    64,
    256,
    1024,
    1040,
    4096,
    16384,
    65536,
    262144,
    1 << 20,
    4 << 20,
    32 << 20,
];

/// Operations (allocations) per phase for a size, at scale 1.
fn base_ops(size: usize) -> usize {
    match size {
        0..=1040 => 400_000,
        1041..=65536 => 100_000,
        65537..=262144 => 40_000,
        262145..=1048576 => 10_000,
        1048577..=4194304 => 4_000,
        _ => 1_000,
    }
}

#[inline]
fn touch(p: *mut u8, size: usize, v: u8) -> u64 {
    // SAFETY: p points to `size` live bytes.
    unsafe {
        p.write_volatile(v);
        p.add(size - 1).write_volatile(v);
        p.read_volatile() as u64
    }
}

/// Pairs, then many-then-free-many, for one size; returns a checksum.
fn one_size(size: usize, ops: usize) -> u64 {
    let layout = Layout::from_size_align(size, 8).unwrap();
    let mut h = 0u64;
    for i in 0..ops {
        // SAFETY: layout has a non-zero size; the block is freed with the same layout.
        unsafe {
            let p = alloc(layout);
            assert!(!p.is_null(), "out of memory");
            h += touch(p, size, i as u8);
            dealloc(std::hint::black_box(p), layout);
        }
    }
    let batch = (64usize << 20).div_euclid(size).clamp(1, 1000);
    let mut ptrs = Vec::with_capacity(batch);
    let mut done = 0;
    while done < ops {
        let n = batch.min(ops - done);
        for i in 0..n {
            // SAFETY: as above.
            unsafe {
                let p = alloc(layout);
                assert!(!p.is_null(), "out of memory");
                h += touch(p, size, i as u8);
                ptrs.push(p);
            }
        }
        for p in ptrs.drain(..) {
            // SAFETY: allocated above with this layout.
            unsafe { dealloc(p, layout) };
        }
        done += n;
    }
    h
}

pub fn run(scale: f64) -> Outcome {
    let mut h = 0u64;
    let mut per_size = String::from("{");
    for (k, &size) in SIZES.iter().enumerate() {
        let ops = scaled(base_ops(size), scale, 4);
        let t = Instant::now();
        h = mix(h, one_size(size, ops));
        let t1 = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let handles: Vec<_> = (0..2)
            .map(|_| std::thread::spawn(move || one_size(size, ops)))
            .collect();
        for j in handles {
            h = mix(h, j.join().unwrap());
        }
        let t2 = t.elapsed().as_secs_f64() * 1e3;
        if k > 0 {
            per_size.push_str(", ");
        }
        let _ = write!(
            per_size,
            "\"{size}\": {{\"t1_ms\": {t1:.3}, \"t2_ms\": {t2:.3}}}"
        );
    }
    per_size.push('}');
    let mut out = Outcome::new(h, 2);
    out.extra.push(("sizes".to_string(), per_size));
    out
}
