//! The cost of one stack capture of the heap profiler (scripts/bench-profile.sh):
//! `ebb::profile::capture_here` from the bottom of a chain of 24 calls, a million
//! times. Built with `-C force-frame-pointers=yes` the chain is walked whole; without,
//! the walk stops where frame pointers stop.

use std::hint::black_box;
use std::time::Instant;

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

#[inline(never)]
fn nest(depth: u32, f: &mut dyn FnMut()) {
    if depth == 0 {
        f();
    } else {
        nest(black_box(depth - 1), f);
    }
    black_box(depth);
}

fn main() {
    ebb::profile::start(0);
    ebb::profile::stop();
    let n = 1_000_000;
    let mut frames = 0;
    let mut elapsed = std::time::Duration::ZERO;
    nest(24, &mut || {
        let mut pcs = [0usize; ebb::profile::MAX_DEPTH];
        let start = Instant::now();
        for _ in 0..n {
            frames = ebb::profile::capture_here(black_box(&mut pcs));
        }
        elapsed = start.elapsed();
    });
    println!(
        "stack capture: {:.0} ns per capture ({frames} frames), {n} captures",
        elapsed.as_nanos() as f64 / n as f64
    );
}
