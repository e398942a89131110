//! The cost of one stack capture of the heap profiler (scripts/bench-profile.sh):
//! `ebb::profile::capture_here` from the bottom of a chain of 24 calls, a million
//! times. Built with `-C force-frame-pointers=yes` the chain is walked whole; without,
//! the walk stops where frame pointers stop.

use std::hint::black_box;

/// CPU time of the calling thread (the machine may be shared: wall time is not ours).
fn thread_cpu_ns() -> u128 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u128 * 1_000_000_000 + t.tv_nsec as u128
}

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
    let mut elapsed = 0;
    nest(24, &mut || {
        let mut pcs = [0usize; ebb::profile::MAX_DEPTH];
        let start = thread_cpu_ns();
        for _ in 0..n {
            frames = ebb::profile::capture_here(black_box(&mut pcs));
        }
        elapsed = thread_cpu_ns() - start;
    });
    println!(
        "stack capture: {:.0} ns of thread CPU time per capture ({frames} frames), {n} captures",
        elapsed as f64 / n as f64
    );
}
