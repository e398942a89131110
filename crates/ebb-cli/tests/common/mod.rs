//! What the integration tests of `ebb` share: the binaries, a scratch directory, a run
//! of `ebb`, and the processes a run starts.
#![allow(dead_code)] // each test file uses part of it

use std::path::PathBuf;
use std::process::{Command, Output};

pub const EBB: &str = env!("CARGO_BIN_EXE_ebb");
pub const HELPER: &str = env!("CARGO_BIN_EXE_ebb-test-helper");
pub const MIB: f64 = 1024.0 * 1024.0;

/// `name` in this test process's scratch directory, which starts empty: a directory
/// left by an earlier run whose process had the same id (ids wrap at 32,768 here) held
/// profiles that tests looking for "the one profile written" found beside theirs.
pub fn scratch(name: &str) -> PathBuf {
    static FRESH: std::sync::Once = std::sync::Once::new();
    let dir = std::env::temp_dir().join(format!("ebb-cli-test-{}", std::process::id()));
    FRESH.call_once(|| {
        let _ = std::fs::remove_dir_all(&dir);
    });
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

pub fn ebb(args: &[&str]) -> Output {
    Command::new(EBB)
        .args(args)
        // A user error must never show a backtrace, even with backtraces on.
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("run ebb")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The processes whose parent is `parent`.
pub fn children_of(parent: u32) -> Vec<u32> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let rest = &stat[stat.rfind(')').unwrap() + 1..];
        if rest.split_whitespace().nth(1) == Some(&parent.to_string()) {
            pids.push(pid);
        }
    }
    pids
}

/// The value in bytes of a `flat` cell of `ebb top`'s table ("12.5 MiB", "312 B").
pub fn table_bytes(cell: &str, unit: &str) -> f64 {
    let n: f64 = cell
        .parse()
        .unwrap_or_else(|_| panic!("not a number: {cell}"));
    n * match unit {
        "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => MIB,
        "GiB" => MIB * 1024.0,
        _ => panic!("unit {unit}"),
    }
}

/// The flat bytes of the row naming `function` in a table of `ebb top` (or of `ebb run
/// --profile`), if there is one.
pub fn flat_of(table: &str, function: &str) -> Option<f64> {
    table.lines().find(|l| l.contains(function)).map(|l| {
        let cells: Vec<&str> = l.split_whitespace().collect();
        table_bytes(cells[0], cells[1])
    })
}
