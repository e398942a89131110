//! growth: buffers that grow. A `Vec<u8>` extended (1000 B at a time) to 1 GiB; many
//! `String`s built piece by piece to 1 KiB..1 MiB (64 MiB in all); and, twice, a raw buffer doubled with
//! `realloc` (the C pattern `buf = realloc(buf, 2 * cap)`) up to 256 MiB, writing each
//! new half. The raw buffer goes through the global allocator's `realloc`
//! (`std::alloc::realloc`): in a Rust program `libc::realloc` would reach glibc
//! whichever global allocator is installed; the C-ABI benchmarks cover C's realloc.

use crate::util::{mix, scaled, Rng};
use crate::workloads::Outcome;
use std::alloc::{alloc, dealloc, realloc, Layout};
use std::fmt::Write;
use std::time::Instant;

pub fn run(scale: f64) -> Outcome {
    let mut h = 0u64;
    let t = Instant::now();

    // 1. Vec<u8> to 1 GiB by extend_from_slice.
    let target = scaled(1 << 30, scale, 1 << 16);
    let chunk = [7u8; 1000];
    let mut v: Vec<u8> = Vec::new();
    while v.len() < target {
        v.extend_from_slice(&chunk);
    }
    h = mix(h, v.len() as u64 ^ v[v.len() / 2] as u64);
    drop(v);
    let vec_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();

    // 2. Strings built by pushes, of 1 KiB .. 1 MiB, 64 MiB in all; a few kept.
    let total = scaled(64 << 20, scale, 1 << 16);
    let mut rng = Rng::new(3);
    let mut built = 0;
    let mut kept: Vec<String> = Vec::new();
    while built < total {
        let len = 1024 << rng.below(11);
        let mut s = String::new();
        let mut i = 0u32;
        while s.len() < len {
            let _ = write!(s, "item{i},");
            i += 1;
        }
        built += s.len();
        h = mix(h, s.len() as u64);
        if rng.below(8) == 0 {
            kept.push(s);
            if kept.len() > 16 {
                kept.swap_remove(rng.below(16));
            }
        }
    }
    drop(kept);
    let string_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();

    // 3. realloc doubling of a raw buffer, from 64 B to 256 MiB, repeated.
    let max = scaled(256 << 20, scale, 1 << 16);
    let repeats = 2;
    for r in 0..repeats {
        // SAFETY: sizes are non-zero; the buffer is always freed with its current size.
        unsafe {
            let mut cap = 64usize;
            let mut p = alloc(Layout::from_size_align(cap, 8).unwrap());
            assert!(!p.is_null());
            std::ptr::write_bytes(p, r as u8, cap);
            while cap < max {
                let new_cap = cap * 2;
                p = realloc(p, Layout::from_size_align(cap, 8).unwrap(), new_cap);
                assert!(!p.is_null(), "out of memory");
                std::ptr::write_bytes(p.add(cap), (cap >> 6) as u8, new_cap - cap);
                cap = new_cap;
            }
            h = mix(h, *p.add(cap / 2 + 1) as u64 + cap as u64);
            dealloc(p, Layout::from_size_align(cap, 8).unwrap());
        }
    }
    let realloc_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut out = Outcome::new(h, 1);
    out.extra.push((
        "parts".to_string(),
        format!(
            "{{\"vec_ms\": {vec_ms:.3}, \"string_ms\": {string_ms:.3}, \"realloc_ms\": {realloc_ms:.3}}}"
        ),
    ));
    out
}
