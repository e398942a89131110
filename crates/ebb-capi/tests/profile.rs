//! The sampling heap profiler under `LD_PRELOAD=libebb.so`: a C program with known
//! allocation sites (tests/c/profile_sites.c) and CPython with `PYTHONMALLOC=malloc`.
//! `libebb.so` writes pprof itself (symbolized in the process); `go tool pprof` reads it.
//!
//! Statistical tolerance: the tests sample at a mean of 64 KiB (`EBB_PROFILE_RATE`,
//! so they stay fast), with a fixed seed (`EBB_PROFILE_SEED`), so each run is the
//! same. The smallest site (76 MiB of 40-byte blocks) gets ~1200 samples: its
//! estimate's standard error is ~2.9%, and 10% is over 3 of them (another seed passes
//! too); blocks of 1 MiB are sampled with probability 1 - e^-16, almost exactly.

mod c_support;

use c_support::{libebb, program, run};
use ebb_pprof::{read_gzipped, totals_at};
use std::path::{Path, PathBuf};
use std::process::Command;

fn go_pprof(args: &[&str]) -> String {
    let out = Command::new("go")
        .args(["tool", "pprof", "-symbolize=none"])
        .args(args)
        .output()
        .expect("go tool pprof (install golang-go)");
    assert!(
        out.status.success(),
        "go tool pprof {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("profile-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Files in `dir` whose names start with `prefix` and end with `suffix`.
fn files_like(dir: &Path, prefix: &str, suffix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            // The peak's profile (`.peak.pb.gz`) only when asked for.
            n.starts_with(prefix)
                && n.ends_with(suffix)
                && (suffix.contains("peak") || !n.contains(".peak."))
        })
        .collect();
    found.sort();
    found
}

/// The stacks of a profile that hold a frame of `libebb.so` past the allocator's own
/// frames at the inner end (which the encoder drops): blocks made on ebb's behalf, or a
/// stale return address the stack scan took for a caller.
fn stacks_through_libebb(profile: &ebb_pprof::proto::Profile) -> usize {
    let ebb_mappings: Vec<u64> = profile
        .mapping
        .iter()
        .filter(|m| profile.string_table[m.filename as usize].ends_with("libebb.so"))
        .map(|m| m.id)
        .collect();
    profile
        .sample
        .iter()
        .filter(|s| {
            s.location_id
                .iter()
                .any(|id| ebb_mappings.contains(&profile.location[*id as usize - 1].mapping_id))
        })
        .count()
}

#[track_caller]
fn assert_within(what: &str, estimate: i64, truth: f64, tolerance: f64) {
    let error = (estimate as f64 - truth).abs() / truth;
    assert!(
        error < tolerance,
        "{what}: estimated {estimate}, true {truth} ({:.1}% off, allowed {:.0}%)",
        error * 100.0,
        tolerance * 100.0
    );
}

const MIB: f64 = 1024.0 * 1024.0;

/// profile_sites.c's truth (bytes requested) after all five rounds.
const SITES: [(&str, f64); 4] = [
    ("site_small", 40.0 * 2_000_000.0),
    ("site_medium", 2000.0 * 50_000.0),
    ("site_big", MIB * 100.0),
    ("site_leak", 4000.0 * 10_000.0),
];

#[test]
fn c_program_sites_estimates_names_leak_diff_and_signal_dump() {
    let exe = program("profile_sites.c");
    let dir = fresh_dir("c");
    let prefix = dir.join("exit");
    let prefix = prefix.to_str().unwrap();
    let run = run(
        &exe,
        &[dir.to_str().unwrap()],
        true,
        &[
            ("EBB_PROFILE", prefix),
            ("EBB_PROFILE_RATE", "64k"),
            ("EBB_PROFILE_SEED", "3"),
            ("EBB_PROFILE_SIGNAL", "USR1"),
        ],
    );
    run.assert_success().assert_stdout_has("kept 10000");

    // Each site's estimated bytes within 10% of the truth.
    let after = read_gzipped(&dir.join("after.pb.gz")).unwrap();
    for (site, truth) in SITES {
        assert_within(site, totals_at(&after, site)[1], truth, 0.10);
    }
    // Frees are credited: only the leak is still in use.
    assert_within(
        "site_leak in use",
        totals_at(&after, "site_leak")[3],
        40e6,
        0.10,
    );
    for (site, truth) in &SITES[..3] {
        let in_use = totals_at(&after, site)[3] as f64;
        assert!(in_use < truth * 0.01, "{site}: {in_use} bytes still in use");
    }
    // `ebb_profile_dump_peak` after the last round: the live bytes only grew (the
    // leak), so the peak is the leak (the copy lags by at most 1/16), and the churned
    // sites had at most a block live then.
    let peak = read_gzipped(&dir.join("peak.pb.gz")).unwrap();
    assert_within(
        "site_leak at the peak",
        totals_at(&peak, "site_leak")[3],
        40e6 * 33.0 / 34.0,
        0.10,
    );
    for (site, _) in &SITES[..2] {
        let in_use = totals_at(&peak, site)[3];
        assert!(in_use < 2 << 20, "{site}: {in_use} bytes live at the peak");
    }

    // go tool pprof reads it: the sites by name, biggest first, with file:line and
    // their callers.
    let after_path = dir.join("after.pb.gz");
    let after_path = after_path.to_str().unwrap();
    let top = go_pprof(&["-top", "-sample_index=alloc_space", after_path]);
    let order: Vec<usize> = ["site_big", "site_medium", "site_small", "site_leak"]
        .iter()
        .map(|n| {
            top.find(n)
                .unwrap_or_else(|| panic!("{n} missing in\n{top}"))
        })
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "order in\n{top}");
    let traces = go_pprof(&["-traces", "-sample_index=alloc_space", after_path]);
    assert!(
        traces.contains("work") && traces.contains("main"),
        "no callers in\n{traces}"
    );
    let lines = go_pprof(&["-top", "-lines", "-sample_index=alloc_space", after_path]);
    assert!(
        lines.contains("profile_sites.c:"),
        "no file:line in\n{lines}"
    );

    // The leak hunt: between the two dumps only site_leak grew.
    let before_path = dir.join("before.pb.gz");
    let diff = go_pprof(&[
        "-top",
        "-sample_index=inuse_space",
        "-base",
        before_path.to_str().unwrap(),
        after_path,
    ]);
    assert!(diff.contains("site_leak"), "{diff}");
    for other in ["site_small", "site_medium", "site_big"] {
        assert!(!diff.contains(other), "{other} in the diff:\n{diff}");
    }

    // The signal's dump (by ebb's own thread) and the exit dump.
    let signal = files_like(&dir, "exit.", ".1.pb.gz");
    assert_eq!(signal.len(), 1, "no signal dump in {dir:?}");
    let top = go_pprof(&[
        "-top",
        "-sample_index=inuse_space",
        signal[0].to_str().unwrap(),
    ]);
    assert!(top.contains("site_leak"), "{top}");
    let exit: Vec<PathBuf> = files_like(&dir, "exit.", ".pb.gz")
        .into_iter()
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .matches('.')
                .count()
                == 3
        })
        .collect();
    assert_eq!(exit.len(), 1, "no exit dump in {dir:?}");
    let at_exit = read_gzipped(&exit[0]).unwrap();
    assert_within(
        "exit: site_big",
        totals_at(&at_exit, "site_big")[1],
        MIB * 100.0,
        0.10,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A C program of tests/c run under `libebb.so` with `EBB_PROFILE=<dir>/<name>` and
/// `env` added, that succeeded and printed `says`; the one profile it wrote at exit,
/// read, and its directory (removed by the caller).
fn profiled_at_exit(
    source: &'static str,
    name: &str,
    env: &[(&str, &str)],
    says: &str,
) -> (PathBuf, PathBuf, ebb_pprof::proto::Profile) {
    let exe = program(source);
    let dir = fresh_dir(name);
    let prefix = dir.join(name);
    let mut all = vec![("EBB_PROFILE", prefix.to_str().unwrap())];
    all.extend_from_slice(env);
    run(&exe, &[], true, &all)
        .assert_success()
        .assert_stdout_has(says);
    let exit = files_like(&dir, &format!("{name}."), ".pb.gz");
    assert_eq!(exit.len(), 1, "{exit:?}");
    let profile = read_gzipped(&exit[0]).unwrap();
    (dir, exit[0].clone(), profile)
}

/// A process whose first requests are huge blocks: ebb sets itself up (here: the
/// profiler of `EBB_PROFILE`) on a big request as on a small one, so both blocks are
/// in the profile, at their sites (before, neither was: the set-up ran at the first
/// small request, after them).
#[test]
fn first_requests_big_are_profiled() {
    let (dir, _, profile) = profiled_at_exit(
        "big_first.c",
        "big",
        &[("EBB_PROFILE_SEED", "7")],
        "held 160 MiB",
    );
    for site in ["big_calloc", "big_malloc"] {
        assert_eq!(
            totals_at(&profile, site)[3],
            80 << 20,
            "{site}: one huge block, sampled for sure, live at exit"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sites behind allocation wrappers that reach `malloc` and `realloc` by tail jumps
/// (tests/c/wrapped_sites.c, CPython's shape, no frame pointers): the blocks are
/// charged to the wrappers' callers, not lost to an empty or wrong stack; and a block
/// grown in place by `realloc` to 32 MiB is in the profile at 32 MiB, not at the size
/// it had when first sampled.
#[test]
fn wrapped_sites_and_blocks_grown_in_place() {
    let (dir, _, profile) = profiled_at_exit(
        "wrapped_sites.c",
        "wrapped",
        &[("EBB_PROFILE_RATE", "64k"), ("EBB_PROFILE_SEED", "11")],
        "kept 1 1",
    );
    assert_within(
        "site_table in use",
        totals_at(&profile, "site_table")[3],
        100e6,
        0.10,
    );
    assert_within(
        "site_grow in use",
        totals_at(&profile, "site_grow")[3],
        MIB * 32.0,
        0.01,
    );
    let in_use: i64 = profile.sample.iter().map(|s| s.value[3]).sum();
    let charged = totals_at(&profile, "site_table")[3] + totals_at(&profile, "site_grow")[3];
    assert!(
        (in_use - charged) as f64 <= MIB,
        "{} bytes in use charged elsewhere",
        in_use - charged
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A C program of tests/c that forks and prints `child <pid>`, run under `libebb.so`
/// with `EBB_PROFILE=<dir>/<name>` and `env` added: the profiles' directory (removed by
/// the caller) and the child's pid.
fn profiled_fork(source: &'static str, name: &str, env: &[(&str, &str)]) -> (PathBuf, String) {
    let exe = program(source);
    let dir = fresh_dir(name);
    let prefix = dir.join(name);
    let mut all = vec![("EBB_PROFILE", prefix.to_str().unwrap())];
    all.extend_from_slice(env);
    let run = run(&exe, &[], true, &all);
    run.assert_success();
    let child = run
        .stdout
        .split_whitespace()
        .nth(1)
        .unwrap_or_else(|| panic!("no child pid: {}", run.stdout))
        .to_string();
    (dir, child)
}

/// A fork child's peak is its own: the parent's 64 MiB peak, freed before the fork,
/// is not in the child's peak profile; the child's 16 MiB is.
#[test]
fn fork_child_has_a_peak_of_its_own() {
    let (dir, child) = profiled_fork(
        "fork_peak.c",
        "fork",
        &[("EBB_PROFILE_RATE", "64k"), ("EBB_PROFILE_SEED", "13")],
    );
    let peak = read_gzipped(&dir.join(format!("fork.{child}.peak.pb.gz"))).unwrap();
    assert_eq!(
        totals_at(&peak, "parent_peak")[3],
        0,
        "the parent's peak in the child's"
    );
    assert_within(
        "child_site at the child's peak",
        totals_at(&peak, "child_site")[3],
        MIB * 16.0,
        0.20,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `EBB_PROFILE_INTERVAL` from the environment (tests/c/profile_interval.c): the
/// program leaks 4 MiB at `grow_steadily` in each of 4 steps, waiting for a profile
/// after each; the profiles on the timer hold the leak as it grows (never less than the
/// one before: a leak only adds samples) up to the 16 MiB at exit; a fork child's
/// watcher writes profiles of its own, holding its own site.
#[test]
fn profiles_on_a_timer_follow_the_leak_and_a_fork_child() {
    let (dir, child) = profiled_fork(
        "profile_interval.c",
        "iv",
        &[
            ("EBB_PROFILE_RATE", "64k"),
            ("EBB_PROFILE_INTERVAL", "50ms"),
        ],
    );
    let parent = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = name.strip_prefix("iv.")?.strip_suffix(".pb.gz")?;
            (!pid.contains('.') && pid != child).then(|| pid.to_string())
        })
        .next()
        .expect("the parent's profile at exit");
    let mut leaked = Vec::new();
    for n in 1.. {
        let path = dir.join(format!("iv.{parent}.{n}.pb.gz"));
        if !path.exists() {
            break;
        }
        leaked.push(totals_at(&read_gzipped(&path).unwrap(), "grow_steadily")[3]);
    }
    assert!(
        leaked.len() >= 4,
        "one profile after each step at least: {leaked:?}"
    );
    assert!(leaked.windows(2).all(|w| w[0] <= w[1]), "{leaked:?}");
    assert!(leaked[0] > 0, "{leaked:?}");
    let exit = read_gzipped(&dir.join(format!("iv.{parent}.pb.gz"))).unwrap();
    assert_within(
        "grow_steadily at exit",
        totals_at(&exit, "grow_steadily")[3],
        MIB * 16.0,
        0.25,
    );
    let child_first = read_gzipped(&dir.join(format!("iv.{child}.1.pb.gz"))).unwrap();
    assert_within(
        "child_grows in the child's profile",
        totals_at(&child_first, "child_grows")[3],
        MIB * 4.0,
        0.5,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every allocation sampled (`EBB_PROFILE_RATE=1`) of a program that starts ebb's
/// profile watcher (`EBB_PROFILE_SIGNAL`): the TLS that `pthread_create` allocates for
/// that thread is ebb's, not the program's, and is not in the profile (it was, at
/// `_dl_allocate_tls` under `pthread_create` under ebb's `spawn`); no stack runs
/// through `libebb.so`.
#[test]
fn blocks_ebb_makes_for_its_threads_are_not_the_programs() {
    let (dir, exit, profile) = profiled_at_exit(
        "trivial.c",
        "own",
        &[("EBB_PROFILE_SIGNAL", "USR1"), ("EBB_PROFILE_RATE", "1")],
        "ebb=yes",
    );
    assert!(!profile.sample.is_empty(), "nothing sampled at rate 1");
    assert_eq!(
        stacks_through_libebb(&profile),
        0,
        "stacks through libebb.so: {:?}",
        go_pprof(&[
            "-traces",
            "-sample_index=alloc_space",
            exit.to_str().unwrap()
        ])
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `EBB_PROFILE_LEAKS=1`: the exit profile holds only what is still live.
#[test]
fn leaks_only_exit_profile() {
    let exe = program("profile_sites.c");
    let dir = fresh_dir("leaks");
    let prefix = dir.join("leaks");
    let run = run(
        &exe,
        &[dir.to_str().unwrap()],
        true,
        &[
            ("EBB_PROFILE", prefix.to_str().unwrap()),
            ("EBB_PROFILE_RATE", "64k"),
            ("EBB_PROFILE_SEED", "5"),
            ("EBB_PROFILE_LEAKS", "1"),
        ],
    );
    run.assert_success();
    let exit = files_like(&dir, "leaks.", ".pb.gz");
    assert_eq!(exit.len(), 1, "{exit:?}");
    let profile = read_gzipped(&exit[0]).unwrap();
    assert_within("site_leak", totals_at(&profile, "site_leak")[1], 40e6, 0.10);
    for site in ["site_small", "site_medium", "site_big"] {
        assert_eq!(
            totals_at(&profile, site),
            [0; 4],
            "{site} in a leaks-only profile"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// CPython with `PYTHONMALLOC=malloc`: every Python object goes through ebb's malloc.
/// 2000 bytes objects of 100 kB each (200 MB) are made; the profile's total is
/// within 10% of that plus the interpreter's own allocations, and names functions.
#[test]
fn python_under_ld_preload() {
    let python = match Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .env_remove("LD_PRELOAD")
        .output()
    {
        Ok(out) if out.status.success() => {
            PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
        }
        _ => panic!("python3 is needed (.ci/run installs it)"),
    };
    let dir = fresh_dir("python");
    let prefix = dir.join("py");
    let out = Command::new(&python)
        .args([
            "-c",
            "keep = [bytes(100_000) for _ in range(2000)]\nprint(len(keep))",
        ])
        .env("LD_PRELOAD", libebb())
        .env("PYTHONMALLOC", "malloc")
        .env("EBB_PROFILE", &prefix)
        .env("EBB_PROFILE_RATE", "64k")
        .env("EBB_PROFILE_SEED", "9")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exit = files_like(&dir, "py.", ".pb.gz");
    assert_eq!(exit.len(), 1, "{exit:?}");
    let profile = read_gzipped(&exit[0]).unwrap();
    let total: i64 = profile.sample.iter().map(|s| s.value[1]).sum();
    assert!(
        (200e6 * 0.9..200e6 * 1.5).contains(&(total as f64)),
        "total allocated {total}"
    );
    // The peak's profile beside it: the 200 MB were live at the end, so at the peak
    // too (within the 1/16 the snapshot may lag).
    let peak = files_like(&dir, "py.", ".peak.pb.gz");
    assert_eq!(peak.len(), 1, "{peak:?}");
    let at_peak: i64 = read_gzipped(&peak[0])
        .unwrap()
        .sample
        .iter()
        .map(|s| s.value[3])
        .sum();
    assert!(
        (200e6 * 0.85..200e6 * 1.5).contains(&(at_peak as f64)),
        "live at the peak {at_peak}"
    );
    // The biggest site is named (CPython's own function that made the objects).
    let top = go_pprof(&[
        "-top",
        "-sample_index=alloc_space",
        exit[0].to_str().unwrap(),
    ]);
    let first = top
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .nth(1)
        .unwrap_or("");
    let name = first.split_whitespace().nth(5).unwrap_or("");
    assert!(
        !name.is_empty() && name != "<unknown>" && !name.starts_with("0x"),
        "unnamed top site in\n{top}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
