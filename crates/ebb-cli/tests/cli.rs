//! Runs the `ebb` binary against the small programs of `ebb-test-helper` and checks
//! its JSON, SVG, messages and exit statuses. Nothing here asserts a duration: waits
//! are for events (a ready line, a process appearing), and memory figures are checked
//! against what the helpers allocate.

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn read_json(path: &PathBuf) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("JSON written")).expect("valid JSON")
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A command shorter than the sampling interval: the samples see none of its memory,
/// the kernel's high-water mark (`ru_maxrss` from `wait4`) does, and the peak says so.
#[test]
fn peak_between_samples_comes_from_the_kernel() {
    let json = scratch("short.json");
    let out = ebb(&[
        "run",
        "--alloc",
        "glibc",
        "--interval",
        "1h",
        "--json",
        json.to_str().unwrap(),
        "--",
        HELPER,
        "alloc",
        "64",
        "0",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let r = read_json(&json);
    let sampled = r["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| f(&s["rss"]))
        .fold(0.0, f64::max);
    assert!(
        sampled < 64.0 * MIB,
        "a sample caught it after all: {sampled}"
    );
    assert!(
        f(&r["peak_process_rss"]) >= 64.0 * MIB,
        "{}",
        r["peak_process_rss"]
    );
    assert!(f(&r["peak"]["rss"]) >= 64.0 * MIB, "peak {}", r["peak"]);
    assert!(text.contains("the kernel's high-water mark"), "{text}");
}

#[test]
fn peak_of_a_tree_includes_its_children() {
    let json = scratch("tree.json");
    // Three children allocate and touch 48 MiB each and hold it for 1.5 s.
    let out = ebb(&[
        "run",
        "--alloc",
        "glibc",
        "--interval",
        "50ms",
        "--json",
        json.to_str().unwrap(),
        "--",
        HELPER,
        "tree",
        "3",
        "48",
        "1500",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r = read_json(&json);
    assert!(f(&r["max_processes"]) >= 4.0, "{}", r["max_processes"]);
    assert!(f(&r["processes_seen"]) >= 4.0);
    assert!(
        f(&r["peak"]["rss"]) >= 3.0 * 48.0 * MIB,
        "peak {}",
        r["peak"]
    );
    assert!(
        f(&r["peak"]["anon"]) >= 3.0 * 48.0 * MIB,
        "peak {}",
        r["peak"]
    );
    // One sample saw the parent and its three children together, with their memory.
    let samples = r["samples"].as_array().unwrap();
    assert!(samples
        .iter()
        .any(|s| f(&s["processes"]) == 4.0 && f(&s["rss"]) >= 3.0 * 48.0 * MIB));
    assert!(
        f(&r["user_s"]) + f(&r["sys_s"]) > 0.0,
        "CPU of the tree: {r}"
    );
}

#[test]
fn exit_status_is_passed_through() {
    let out = ebb(&["run", "--alloc", "glibc", "--", HELPER, "exit", "7"]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    assert!(stderr(&out).contains("exit status 7"), "{}", stderr(&out));
}

#[test]
fn server_idle_marks_then_stop() {
    let json = scratch("server.json");
    let out = ebb(&[
        "run",
        "--alloc",
        "glibc",
        "--ready",
        "server: ready",
        "--idle",
        "2500ms",
        "--interval",
        "100ms",
        "--json",
        json.to_str().unwrap(),
        "--",
        HELPER,
        "server",
        "300",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The ready line was passed through to ebb's stdout.
    assert!(String::from_utf8_lossy(&out.stdout).contains("server: ready"));
    let r = read_json(&json);
    assert!(f(&r["ready_s"]) >= 0.3, "ready at {}", r["ready_s"]);
    let idle_start = f(&r["idle_start_s"]);
    assert!(idle_start >= f(&r["ready_s"]));
    let marks: Vec<f64> = r["idle_marks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| f(&m["after_s"]))
        .collect();
    assert_eq!(marks, [1.0, 2.0, 2.5]);
    for m in r["idle_marks"].as_array().unwrap() {
        assert!(f(&m["rss"]) > 0.0, "the server is alive at each mark: {m}");
    }
    assert_eq!(r["exit"]["stopped_by_ebb"], true);
    assert_eq!(f(&r["exit"]["signal"]), libc_sigterm());
    // Samples kept coming through the idle phase.
    let last = r["samples"].as_array().unwrap().last().unwrap().clone();
    assert!(f(&last["t"]) >= idle_start + 2.5);
}

fn libc_sigterm() -> f64 {
    15.0
}

#[test]
fn drive_runs_between_ready_and_idle() {
    let json = scratch("drive.json");
    let out = ebb(&[
        "run",
        "--alloc",
        "glibc",
        "--ready",
        "ready",
        "--drive",
        "sleep 0.5; exit 4",
        "--idle",
        "1s",
        "--json",
        json.to_str().unwrap(),
        "--",
        HELPER,
        "server",
        "0",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r = read_json(&json);
    assert!(f(&r["drive_s"]) >= 0.5);
    assert!(f(&r["idle_start_s"]) >= f(&r["ready_s"]) + 0.5);
    assert_eq!(f(&r["drive_exit"]["code"]), 4.0);
    // The drive command is a client, not part of the measured tree.
    assert_eq!(f(&r["max_processes"]), 1.0);
}

#[test]
fn ready_line_that_never_comes_is_a_one_line_error() {
    let out = ebb(&[
        "run",
        "--alloc",
        "glibc",
        "--ready",
        "ready",
        "--ready-timeout",
        "500ms",
        "--",
        HELPER,
        "silent",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("matched /ready/ within 500ms"), "{err}");
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn check_summaries(c: &Value) {
    let summaries = c["summaries"].as_array().unwrap();
    let results = c["results"].as_array().unwrap();
    let keys = [
        ("wall_s", None),
        ("user_s", None),
        ("peak_rss", Some("rss")),
        ("final_rss", Some("rss")),
    ];
    for (key, mem) in keys {
        let values = |i: usize| -> Vec<f64> {
            results[i]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| match (key, mem) {
                    ("peak_rss", _) => f(&r["peak"]["rss"]),
                    ("final_rss", _) => f(&r["final"]["rss"]),
                    _ => f(&r[key]),
                })
                .collect()
        };
        let base = median(values(0));
        for (i, s) in summaries.iter().enumerate() {
            let m = median(values(i));
            let got = &s["metrics"][key];
            assert!(
                (f(&got["median"]) - m).abs() <= 1e-9 * m.abs().max(1.0),
                "{key} median {got} vs {m}"
            );
            // The first allocator is the base (ratio 1 even when its median is 0, as
            // user time is for a run shorter than a clock tick); a ratio to a zero
            // median is not a number and is left out (null).
            let expected = if i == 0 { 1.0 } else { m / base };
            if expected.is_finite() {
                let ratio = f(&got["ratio"]);
                assert!(
                    (ratio - expected).abs() < 1e-9,
                    "{key} ratio {ratio} vs {expected}"
                );
            } else {
                assert!(
                    got["ratio"].is_null(),
                    "{key} ratio {} vs none",
                    got["ratio"]
                );
            }
            let v = values(i);
            assert_eq!(
                f(&got["min"]),
                v.iter().copied().fold(f64::INFINITY, f64::min)
            );
            assert_eq!(
                f(&got["max"]),
                v.iter().copied().fold(f64::NEG_INFINITY, f64::max)
            );
        }
    }
}

/// The colour of each `polyline` with more than `min_points` points.
fn svg_lines(svg: &str, min_points: usize) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).expect("the SVG is well-formed XML");
    doc.descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .filter(|n| {
            n.attribute("points")
                .is_some_and(|p| p.split_whitespace().count() > min_points)
        })
        .filter_map(|n| n.attribute("stroke").map(str::to_string))
        .collect()
}

fn svg_texts(svg: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text().map(|t| t.trim().to_string()))
        .collect()
}

#[test]
fn compare_interleaves_and_computes_ratios_of_medians() {
    let (json, svg, md) = (scratch("cmp.json"), scratch("cmp.svg"), scratch("cmp.md"));
    let out = ebb(&[
        "compare",
        "--alloc",
        "glibc,ebb",
        "--runs",
        "3",
        "--interval",
        "50ms",
        "--json",
        json.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
        "--",
        HELPER,
        "tree",
        "2",
        "24",
        "400",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let c = read_json(&json);
    let order: Vec<(u64, &str)> = c["order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["round"].as_u64().unwrap(),
                o["allocator"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            (1, "glibc"),
            (1, "ebb"),
            (2, "glibc"),
            (2, "ebb"),
            (3, "glibc"),
            (3, "ebb")
        ]
    );
    check_summaries(&c);
    for runs in c["results"].as_array().unwrap() {
        for r in runs.as_array().unwrap() {
            assert!(
                f(&r["peak"]["rss"]) >= 2.0 * 24.0 * MIB,
                "tree peak {}",
                r["peak"]
            );
        }
    }
    // Under ebb the child processes preload libebb.so, glibc runs preload nothing.
    assert!(c["results"][0][0]["preload"].is_null());
    assert!(c["results"][1][0]["preload"]
        .as_str()
        .unwrap()
        .ends_with("libebb.so"));

    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("peak RSS") && text.contains("min–max") && text.contains('×'),
        "{text}"
    );
    let markdown = std::fs::read_to_string(&md).unwrap();
    assert!(markdown.contains("| | glibc | ebb |"), "{markdown}");
    // What ran: glibc's version, and ebb's crate version.
    let versions: Vec<&str> = c["summaries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["version"].as_str().unwrap_or(""))
        .collect();
    assert!(
        versions[0].starts_with("glibc 2.") && versions[1].starts_with("ebb 0."),
        "{versions:?}"
    );
    assert!(
        markdown.contains(&format!(
            "Versions: glibc: {}; ebb: {}.",
            versions[0], versions[1]
        )),
        "{markdown}"
    );
    assert!(text.contains("Versions: glibc: glibc 2."), "{text}");

    // One memory line per allocator, each in its own colour, and both names in the legend.
    let svg = std::fs::read_to_string(&svg).unwrap();
    let mut lines = svg_lines(&svg, 4);
    lines.sort();
    lines.dedup();
    assert_eq!(lines.len(), 2, "series colours: {lines:?}");
    let texts = svg_texts(&svg);
    assert!(
        texts.iter().any(|t| t == "glibc") && texts.iter().any(|t| t == "ebb"),
        "{texts:?}"
    );
}

#[test]
fn builtin_workload_runs_as_a_server_with_idle_marks() {
    let json = scratch("builtin.json");
    let out = ebb(&[
        "compare",
        "--quick",
        "--alloc",
        "glibc,ebb",
        "--runs",
        "1",
        "--idle",
        "1500ms",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let c = read_json(&json);
    assert_eq!(c["builtin_workload"], true);
    let r = &c["results"][0][0];
    assert!(
        r["ready_s"].as_f64().is_some(),
        "the workload printed its ready line: {r}"
    );
    let marks: Vec<f64> = r["idle_marks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| f(&m["after_s"]))
        .collect();
    assert_eq!(marks, [1.0, 1.5]);
    // On SIGTERM the workload exits normally (so exit hooks such as ebb's stats run).
    assert_eq!(r["exit"]["code"], 0, "{}", r["exit"]);
    assert_eq!(r["exit"]["stopped_by_ebb"], true);
    // The workload allocates 2 x 48 MiB in its burst.
    assert!(f(&r["peak"]["rss"]) >= 96.0 * MIB, "{}", r["peak"]);
    // ebb's timed run wrote no statistics (their cost at exit would be charged to
    // ebb); the one more run did: stopped with SIGTERM, the workload under ebb still
    // wrote ebb's stats at exit, and the summary's ebb figures are that run's.
    let timed = c["results"][1][0]["ebb_stats"].as_array().unwrap();
    assert!(timed.is_empty(), "{timed:?}");
    assert!(c["ebb_details"][0].is_null(), "{}", c["ebb_details"][0]);
    let details = &c["ebb_details"][1];
    let stats = details["ebb_stats"].as_array().unwrap();
    assert_eq!(stats.len(), 1, "{stats:?}");
    assert!(stats[0]["purged"].as_u64().unwrap() > 0, "{}", stats[0]);
    assert!(
        f(&c["summaries"][1]["ebb"]["purged"]) > 0.0,
        "{}",
        c["summaries"][1]
    );
    // And its retention report: the process's RSS at exit, split into parts.
    let retention = details["ebb_retention"].as_array().unwrap();
    assert_eq!(retention.len(), 1, "{retention:?}");
    assert!(
        retention[0]["rss"].as_u64().unwrap() > 0 && retention[0]["parts_total"].is_u64(),
        "{}",
        retention[0]
    );
}

#[test]
fn bad_inputs_give_one_line_errors_and_no_backtrace() {
    let text_so = scratch("not-elf.so");
    std::fs::write(&text_so, "not a library\n").unwrap();
    let dir_so = scratch("dir.so");
    std::fs::create_dir_all(&dir_so).unwrap();
    let cases: &[(&[&str], &str, i32)] = &[
        (&["run"], "no command given", 2),
        (
            &["run", "--", "/no/such/program"],
            "command not found: /no/such/program",
            1,
        ),
        (
            &["run", "--alloc", "/no/such/lib.so", "--", "true"],
            "/no/such/lib.so: no such file",
            1,
        ),
        (
            &["run", "--alloc", text_so.to_str().unwrap(), "--", "true"],
            "is not an ELF shared object",
            1,
        ),
        (
            &["run", "--alloc", dir_so.to_str().unwrap(), "--", "true"],
            "cannot read",
            1,
        ),
        // An executable is ELF but the loader refuses to preload it.
        (
            &["run", "--alloc", HELPER, "--", "true"],
            "cannot be preloaded",
            1,
        ),
        (
            &["run", "--alloc", "nosuch", "--", "true"],
            "unknown allocator 'nosuch'",
            1,
        ),
        (
            &["run", "--idle", "5x", "--", "true"],
            "expected a duration",
            2,
        ),
        (
            &["run", "--interval", "0s", "--", "true"],
            "must be longer than 0",
            2,
        ),
        (
            &["run", "--ready", "(", "--", "true"],
            "not a valid regex",
            2,
        ),
        (&["compare", "--runs", "0", "--", "true"], "--runs", 2),
        (
            &["compare", "--alloc", "glibc,nosuch", "--", "true"],
            "unknown allocator 'nosuch'",
            1,
        ),
        (
            &["compare", "--alloc", "glibc[EBB_PURGE_DELAY]", "--", "true"],
            "'EBB_PURGE_DELAY' is not VAR=VALUE",
            1,
        ),
        (
            &["compare", "--alloc", "glibc,glibc[X=1", "--", "true"],
            "a '[' without its ']'",
            1,
        ),
        (
            &[
                "compare",
                "--alloc",
                "glibc[LD_PRELOAD=/x.so]",
                "--",
                "true",
            ],
            "LD_PRELOAD is what the allocator sets",
            1,
        ),
        (
            &["compare", "--alloc", "glibc,system,glibc", "--", "true"],
            "glibc is named twice",
            1,
        ),
        (&["frobnicate"], "unrecognized subcommand", 2),
    ];
    for (args, expected, code) in cases {
        let out = ebb(args);
        // A test running at the same time may have made this run build libebb.so first.
        let err: String = stderr(&out)
            .lines()
            .filter(|l| !l.starts_with("ebb: building libebb.so"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(out.status.code(), Some(*code), "ebb {args:?}: {err}");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "ebb {args:?} printed more than one line: {err}"
        );
        assert!(
            err.starts_with("ebb: error: ") && err.contains(expected),
            "ebb {args:?}: {err}"
        );
        assert!(
            !err.contains("panicked") && !err.contains("backtrace"),
            "{err}"
        );
    }
}

#[test]
fn help_shows_examples_and_exit_codes() {
    let out = ebb(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in ["Examples:", "ebb compare", "--ready", "Exit status:", "130"] {
        assert!(help.contains(needle), "missing {needle}: {help}");
    }
    let out = ebb(&["compare", "--help"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Examples:"));
}

/// Pids of the processes whose parent is `parent`.
#[test]
fn ctrl_c_stops_the_tree_and_still_reports() {
    let json = scratch("interrupted.json");
    let child = Command::new(EBB)
        .args([
            "run",
            "--alloc",
            "glibc",
            "--json",
            json.to_str().unwrap(),
            "--",
            HELPER,
            "silent",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let ebb_pid = child.id();
    // Wait for the command to start (the handler is installed before it is spawned).
    let helper = loop {
        if let Some(&pid) = children_of(ebb_pid).first() {
            break pid;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    // SAFETY: sends SIGINT to the ebb process this test started.
    unsafe { libc::kill(ebb_pid as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(stderr(&out).contains("interrupted"), "{}", stderr(&out));
    let r = read_json(&json);
    assert_eq!(r["interrupted"], true);
    assert!(
        !std::path::Path::new(&format!("/proc/{helper}")).exists(),
        "the command was stopped"
    );
}

#[test]
fn compare_exits_3_when_the_command_fails() {
    let out = ebb(&[
        "compare", "--alloc", "glibc", "--runs", "2", "--", HELPER, "exit", "5",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("glibc failed in 2 of 2 runs"), "{text}");
    assert!(stderr(&out).contains("exit status 5"), "{}", stderr(&out));
}

/// `mimalloc` is mimalloc 2 (Debian's), shown as `mimalloc2` beside `mimalloc3`, which
/// is the system's `libmimalloc.so.3` or else built on first use from this source tree
/// (`scripts/build-mimalloc3.sh`); where it cannot be built (no C compiler, no
/// network for `cargo fetch`) it is skipped with the script named.
#[test]
fn compare_names_mimalloc_2_and_3() {
    let json = scratch("mimallocs.json");
    let out = ebb(&[
        "compare",
        "--alloc",
        "mimalloc,mimalloc3",
        "--runs",
        "1",
        "--json",
        json.to_str().unwrap(),
        "--",
        HELPER,
        "alloc",
        "8",
        "10",
    ]);
    let err = stderr(&out);
    let mimalloc2_installed = Path::new("/usr/lib/x86_64-linux-gnu/libmimalloc.so.2").is_file();
    if !out.status.success() {
        // Neither is there: the command says so.
        assert!(!mimalloc2_installed, "{err}");
        assert!(err.contains("scripts/build-mimalloc3.sh"), "{err}");
        return;
    }
    let c = read_json(&json);
    let runs: Vec<(&str, &str)> = c["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r[0]["allocator"].as_str().unwrap(),
                r[0]["preload"].as_str().unwrap_or(""),
            )
        })
        .collect();
    if mimalloc2_installed {
        assert!(
            runs.iter()
                .any(|&(name, lib)| name == "mimalloc2" && lib.ends_with("libmimalloc.so.2")),
            "{runs:?}"
        );
    }
    match runs.iter().find(|r| r.0 == "mimalloc3") {
        Some(&(_, lib)) => {
            let version = c["summaries"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["allocator"] == "mimalloc3")
                .and_then(|s| s["version"].as_str())
                .unwrap_or("");
            assert!(version.contains("v3."), "mimalloc3's version: {version:?}");
            // The library is mimalloc 3: its verbose start-up names the version.
            let verbose = Command::new("/bin/true")
                .env("LD_PRELOAD", lib)
                .env("MIMALLOC_VERBOSE", "1")
                .output()
                .unwrap();
            let banner = String::from_utf8_lossy(&verbose.stderr);
            assert!(banner.contains("v3."), "{lib}: {banner}");
        }
        None => assert!(
            err.contains("skipping mimalloc3") && err.contains("scripts/build-mimalloc3.sh"),
            "{err}"
        ),
    }
}

/// Settings in brackets run an allocator with environment variables, so one `compare`
/// puts settings side by side; a value may hold commas (the list is split outside
/// brackets), and the variables reach only that allocator's runs.
#[test]
fn compare_runs_an_allocator_with_its_settings() {
    let json = scratch("settings.json");
    let out = ebb(&[
        "compare",
        "--alloc",
        "glibc,glibc[ONLY_HERE=a,b CHECKED=1],ebb[ONLY_HERE=a,b]",
        "--runs",
        "2",
        "--json",
        json.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "test \"$ONLY_HERE\" = a,b",
    ]);
    // The command fails without the setting, so compare says so.
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let c = read_json(&json);
    let exits: Vec<(&str, Vec<i64>)> = c["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|runs| {
            let runs = runs.as_array().unwrap();
            (
                runs[0]["allocator"].as_str().unwrap(),
                runs.iter()
                    .map(|r| r["exit"]["code"].as_i64().unwrap())
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        exits,
        [
            ("glibc", vec![1, 1]),
            ("glibc[ONLY_HERE=a,b CHECKED=1]", vec![0, 0]),
            ("ebb[ONLY_HERE=a,b]", vec![0, 0]),
        ]
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("glibc[ONLY_HERE=a,b CHECKED=1]"), "{text}");
}
