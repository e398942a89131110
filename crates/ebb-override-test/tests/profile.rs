//! The heap profiler with the `override` feature: C code linked into this Rust binary
//! allocates through ebb's own `malloc`, and its site shows up in the profile beside
//! Rust's. No encoder is linked here, so `ebb::profile::dump` writes the raw format,
//! which `ebb-pprof` turns into pprof with symbols.
//!
//! Statistical tolerance: at a mean of 64 KiB, each site (~100 MB) gets ~1500
//! samples, a standard error of ~2.6%; 10% is over 3 of them.

use ebb_override_test::clib_alloc_site;
use std::hint::black_box;

#[inline(never)]
fn rust_site(count: usize) {
    for i in 0..count {
        black_box(vec![i as u8; 1000]);
    }
}

/// 40 MB held at once, then freed: the peak.
#[inline(never)]
fn rust_peak(count: usize) {
    let held: Vec<Vec<u8>> = (0..count).map(|i| vec![i as u8; 1000]).collect();
    black_box(held);
}

#[test]
fn c_and_rust_sites_in_one_profile() {
    assert!(ebb::profile::start(64 << 10));
    // SAFETY: plain C function over malloc/free.
    unsafe { clib_alloc_site(2_000_000, 50) };
    rust_site(100_000);
    rust_peak(40_000);
    ebb::profile::stop();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let raw = dir.join(format!("override-{}.raw", std::process::id()));
    assert!(ebb::profile::dump(raw.to_str().unwrap()));
    let text = std::fs::read_to_string(&raw).unwrap();
    let profile = ebb_pprof::build(&ebb_pprof::RawProfile::parse(&text).unwrap());
    for (site, truth) in [("clib_alloc_site", 50.0 * 2e6), ("rust_site", 1000.0 * 1e5)] {
        let estimate = ebb_pprof::totals_at(&profile, site)[1];
        let error = (estimate as f64 - truth).abs() / truth;
        assert!(
            error < 0.10,
            "{site}: estimated {estimate}, true {truth} ({:.1}% off)",
            error * 100.0
        );
    }
    let _ = std::fs::remove_file(&raw);

    // The peak's profile in the raw format: `rust_peak`'s 40 MB, within the 1/16 the
    // copy may lag and the sampling error.
    let peak = dir.join(format!("override-{}.peak.raw", std::process::id()));
    assert!(ebb::profile::dump_peak(peak.to_str().unwrap()));
    let raw_peak = ebb_pprof::RawProfile::parse(&std::fs::read_to_string(&peak).unwrap()).unwrap();
    assert!(raw_peak.complete);
    let at_peak = ebb_pprof::totals_at(&ebb_pprof::build(&raw_peak), "rust_peak")[3] as f64;
    assert!(
        (40e6 * 0.8..40e6 * 1.1).contains(&at_peak),
        "rust_peak at the peak: {at_peak}"
    );
    let _ = std::fs::remove_file(&peak);
}
