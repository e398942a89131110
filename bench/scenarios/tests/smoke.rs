//! Smoke test: every scenario of this build (ebb by default) runs with `--quick`, exits
//! 0 and prints well-formed JSON lines — samples, then one summary — so the scenario
//! suite cannot rot. The plain-C form (c/mixed.c) is compiled and run quickly too.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_ebb-scenarios");

fn scenarios() -> Vec<String> {
    let out = Command::new(BIN)
        .arg("--list")
        .output()
        .expect("run --list");
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Parse the output: every line a JSON object; samples first, then exactly one summary.
fn check_output(scenario: &str, stdout: &[u8]) -> Value {
    let text = std::str::from_utf8(stdout).expect("utf-8 output");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{scenario}: bad JSON line {l:?}: {e}"))
        })
        .collect();
    assert!(lines.len() >= 2, "{scenario}: too few lines:\n{text}");
    let (summary, samples) = lines.split_last().unwrap();
    for s in samples {
        assert_eq!(s["type"], "sample", "{scenario}: {s}");
        assert_eq!(s["scenario"], scenario);
        for key in ["t_ms", "idx", "rss", "pss", "anon", "live_bytes"] {
            assert!(s[key].is_number(), "{scenario}: sample without {key}: {s}");
        }
        assert!(s["phase"].is_string());
        assert!(
            s["rss"].as_u64().unwrap() > 0,
            "{scenario}: no RSS reading: {s}"
        );
    }
    assert_eq!(
        summary["type"], "summary",
        "{scenario}: last line is not a summary"
    );
    assert_eq!(summary["scenario"], scenario);
    assert_eq!(summary["quick"], true);
    assert_eq!(summary["samples"].as_u64(), Some(samples.len() as u64));
    for key in ["wall_ms", "peak_rss", "final_rss", "live_bytes"] {
        assert!(
            summary[key].is_number(),
            "{scenario}: summary without {key}"
        );
    }
    summary.clone()
}

#[test]
fn every_scenario_runs_quick() {
    let list = scenarios();
    assert!(list.len() >= 6, "scenarios: {list:?}");
    for scenario in &list {
        let out = Command::new(BIN)
            .args([scenario.as_str(), "--quick"])
            .output()
            .expect("run scenario");
        assert!(
            out.status.success(),
            "{scenario} failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let summary = check_output(scenario, &out.stdout);
        if cfg!(feature = "alloc-ebb") {
            assert_eq!(summary["alloc"], "ebb");
            // The override feature: C code's malloc is the binary's own (ebb's).
            assert_eq!(summary["malloc_from"], "ebb-scenarios", "{summary}");
            assert!(summary["ebb_committed"].is_number());
        }
    }
}

#[test]
fn unknown_scenario_is_an_error() {
    let out = Command::new(BIN).arg("no-such-scenario").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn plain_c_mixed_runs_quick() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("c/mixed.c");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mixed-c-smoke");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let status = Command::new(&cc)
        .args(["-O2", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .status();
    match status {
        Ok(s) if s.success() => {}
        other => panic!("compiling c/mixed.c with {cc} failed: {other:?}"),
    }
    // Under glibc (no LD_PRELOAD): scripts/memory-scenarios.sh preloads the others.
    let out = Command::new(&exe)
        .arg("--quick")
        .env("SCENARIO_ALLOC", "glibc")
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = check_output("mixed-c", &out.stdout);
    assert_eq!(summary["alloc"], "glibc");
}
