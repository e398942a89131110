//! The profiler in a Rust program (ebb as `#[global_allocator]`): examples/sites.rs
//! with known allocation sites, profiled through `EBB_PROFILE`, written as pprof in
//! the process (`ebb_pprof::install`) or raw and turned into pprof by
//! `ebb-pprof symbolize`.
//!
//! Statistical tolerance: sampling at a mean of 64 KiB with a fixed seed, the
//! smallest site (76 MiB) gets ~1200 samples, a standard error of ~2.9%: 10% is over
//! 3 of them. The example is built without frame pointers, so stacks end at the site
//! (the allocation site itself is found without them).

use ebb_pprof::{read_gzipped, totals_at};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/<profile>`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// Build examples/sites with the profile of this test run (a no-op when up to date).
fn sites_example() -> PathBuf {
    let dir = profile_dir();
    let profile = match dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev".to_string(),
        Some(name) => name.to_string(),
        None => panic!("cannot tell the profile from {}", dir.display()),
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--quiet", "-p", "ebb-pprof", "--example", "sites"])
        .args(["--profile", &profile])
        .arg("--manifest-path")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .arg("--target-dir")
        .arg(dir.parent().unwrap())
        .status()
        .unwrap();
    assert!(status.success(), "building examples/sites failed");
    dir.join("examples/sites")
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("sampled-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn only_file(dir: &Path, suffix: &str) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.to_string_lossy();
            // The peak's profile beside it (`.peak.pb.gz`, `.peak.raw`) only when asked.
            name.ends_with(suffix) && (suffix.contains("peak") || !name.contains(".peak."))
        })
        .collect();
    assert_eq!(found.len(), 1, "{suffix} files in {dir:?}: {found:?}");
    found.into_iter().next().unwrap()
}

fn run_sites(dir: &Path, raw: bool) {
    let mut cmd = Command::new(sites_example());
    cmd.arg("20")
        .env("EBB_PROFILE", dir.join("sites"))
        .env("EBB_PROFILE_RATE", "64k")
        .env("EBB_PROFILE_SEED", "11");
    if raw {
        cmd.env("SITES_RAW", "1");
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn go_pprof(args: &[&str]) -> String {
    let out = Command::new("go")
        .args(["tool", "pprof", "-symbolize=none"])
        .args(args)
        .output()
        .expect("go tool pprof (install golang-go)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// examples/sites.rs's truth (bytes requested) with 20 leak rounds.
const SITES: [(&str, f64); 4] = [
    ("site_small", 48.0 * 4_000_000.0),
    ("site_medium", 3000.0 * 100_000.0),
    ("site_big", 1048576.0 * 400.0),
    ("site_leak", 4000.0 * 20_000.0),
];

fn check(profile_path: &Path) {
    let profile = read_gzipped(profile_path).unwrap();
    for (site, truth) in SITES {
        let estimate = totals_at(&profile, site)[1];
        let error = (estimate as f64 - truth).abs() / truth;
        assert!(
            error < 0.10,
            "{site}: estimated {estimate}, true {truth} ({:.1}% off)",
            error * 100.0
        );
    }
    let top = go_pprof(&[
        "-top",
        "-cum",
        "-sample_index=alloc_space",
        profile_path.to_str().unwrap(),
    ]);
    for (site, _) in SITES {
        assert!(top.contains(site), "{site} missing in\n{top}");
    }
    let leak = go_pprof(&[
        "-top",
        "-sample_index=inuse_space",
        profile_path.to_str().unwrap(),
    ]);
    let first = leak
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .nth(1)
        .unwrap_or("");
    assert!(
        first.contains("site_leak") || leak.contains("site_leak"),
        "{leak}"
    );
}

#[test]
fn rust_program_profile_written_in_process() {
    let dir = fresh_dir("pprof");
    run_sites(&dir, false);
    check(&only_file(&dir, ".pb.gz"));
    // The peak's, written beside it at exit, decodes and holds samples.
    let peak = ebb_pprof::read_gzipped(&only_file(&dir, ".peak.pb.gz")).unwrap();
    assert!(!peak.sample.is_empty(), "an empty peak profile");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rust_program_raw_profile_symbolized_afterwards() {
    let dir = fresh_dir("raw");
    run_sites(&dir, true);
    let raw = only_file(&dir, ".raw");
    // Written whole: a reader that finds it being written can tell (the `end` line).
    let text = std::fs::read_to_string(&raw).unwrap();
    assert!(
        ebb_pprof::RawProfile::parse(&text).unwrap().complete,
        "no end line"
    );
    let peak = std::fs::read_to_string(only_file(&dir, ".peak.raw")).unwrap();
    let peak = ebb_pprof::RawProfile::parse(&peak).unwrap();
    assert!(peak.complete && !peak.buckets.is_empty(), "{peak:?}");
    let out = dir.join("symbolized.pb.gz");
    let status = Command::new(env!("CARGO_BIN_EXE_ebb-pprof"))
        .arg("symbolize")
        .arg(&raw)
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    check(&out);
    let _ = std::fs::remove_dir_all(&dir);
}
