//! A program with known allocation sites, for the profiler's tests (tests/sampled.rs)
//! and as an example: ebb as global allocator, `ebb_pprof::install()` so profiles are
//! written as pprof. Run with `EBB_PROFILE=/tmp/sites` to profile it.
//!
//! `sites [leak-rounds]`: each site allocates a known number of bytes; `site_leak`
//! keeps `leak-rounds` x 1000 blocks of 4000 bytes alive (a leak that grows with the
//! argument); the program dumps `$SITES_DUMP` (if set) before it exits, and
//! `SITES_RAW=1` leaves the encoder out (ebb then writes its raw format).

use std::hint::black_box;

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

#[inline(never)]
fn site_small(n: usize) {
    for i in 0..n {
        black_box(vec![i as u8; 48]);
    }
}

#[inline(never)]
fn site_medium(n: usize) {
    for i in 0..n {
        black_box(vec![i as u8; 3000]);
    }
}

#[inline(never)]
fn site_big(n: usize) {
    for i in 0..n {
        black_box(vec![i as u8; 1 << 20]);
    }
}

#[inline(never)]
fn site_leak(rounds: usize, kept: &mut Vec<Vec<u8>>) {
    for _ in 0..rounds * 1000 {
        kept.push(black_box(vec![7u8; 4000]));
    }
}

fn main() {
    // Without it (`SITES_RAW=1`), ebb writes the raw format for `ebb-pprof symbolize`.
    if std::env::var_os("SITES_RAW").is_none() {
        ebb_pprof::install();
    }
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1);
    let mut kept = Vec::with_capacity(100_000);
    // Truth: small 48 B x 4M = 192 MB; medium 3000 B x 100k = 300 MB;
    // big 1 MiB x 400 = 419 MB; leak 4000 B x 1000 x rounds.
    site_small(4_000_000);
    site_medium(100_000);
    site_big(400);
    site_leak(rounds, &mut kept);
    if let Ok(path) = std::env::var("SITES_DUMP") {
        assert!(ebb::profile::dump(&path), "dump to {path}");
    }
    // Leaked: still live in the exit profile.
    std::mem::forget(black_box(kept));
}
