//! Guarded sampling (`EBB_GUARDED_RATE`, `front/guarded.rs`) under
//! `LD_PRELOAD=libebb.so`: seeded overflows, underflows and uses after free fault and
//! are reported in one line; double and invalid frees of guarded blocks abort; the
//! pool works in forked children; faults outside the pool reach the program's own
//! handler. With `EBB_GUARDED_RATE=1` every allocation of up to a page that finds a
//! free slot is guarded.
//!
//! Also the attack programs of `tests/attacks.rs` under `EBB_GUARDED_RATE=1`: their
//! outcomes are asserted here and written as a column to `target/tmp/attacks-guarded.md`
//! for README's "Security" table (a sibling of `attacks.rs`'s table, so each can change
//! without the other).
//!
//! Tools: gcc, g++.

mod c_support;

use c_support::{libebb, profile_dir, program, run, Run};
use std::fmt::Write as _;
use std::os::unix::process::ExitStatusExt;

const SIGABRT: i32 = 6;
const SIGSEGV: i32 = 11;
const GUARDED: [(&str, &str); 1] = [("EBB_GUARDED_RATE", "1")];

/// How a run ends under guarded sampling.
#[derive(Clone, Copy, Debug)]
enum Outcome {
    /// Killed by SIGSEGV after `ebb: guarded: <text> at 0x...` (the fault re-raised).
    Faults(&'static str),
    /// Killed by SIGABRT after an `ebb: function(0x...): ...` report containing the
    /// text (guarded or not).
    Aborts(&'static str),
    /// Runs to its end.
    RunsOn,
    /// Recorded, not asserted: depends on the address-space layout.
    Varies,
}
use Outcome::{Aborts, Faults, RunsOn, Varies};

/// Every attack program of `tests/attacks.rs`, with its outcome at `EBB_GUARDED_RATE=1`.
/// Blocks above a page (the 1 MiB ones) are never guarded: the default mode's checks
/// decide those.
const ATTACKS: &[(&str, Outcome)] = &[
    (
        "attacks/double_free_small.c",
        Aborts("guarded: double free"),
    ),
    (
        "attacks/double_free_small_delayed.c",
        Aborts("guarded: double free"),
    ),
    ("attacks/double_free_large.c", Aborts("not in use")),
    ("attacks/double_free_large_delayed.c", Aborts("double free")),
    (
        "attacks/invalid_free_unmapped.c",
        Aborts("invalid pointer (not mapped)"),
    ),
    // 1 MiB past a guarded block is whatever the OS mapped there (the pool is a small
    // mapping among the libraries): unmapped (aborts) or another mapping (a foreign
    // pointer, left alone).
    ("attacks/invalid_free_far.c", Varies),
    (
        "attacks/invalid_free_interior.c",
        Aborts("guarded: not the start of a block"),
    ),
    (
        "attacks/invalid_free_unaligned.c",
        Aborts("guarded: not the start of a block"),
    ),
    (
        "attacks/invalid_free_uninitialised.c",
        Aborts("invalid pointer (unaligned"),
    ),
    ("attacks/read_after_free.c", Faults("use-after-free")),
    ("attacks/write_after_free.c", Faults("use-after-free")),
    (
        "attacks/overflow_small_1.c",
        Aborts("guarded: overflow (a write past the block, found on free)"),
    ),
    (
        "attacks/overflow_small_8.c",
        Aborts("guarded: overflow (a write past the block, found on free)"),
    ),
    ("attacks/overflow_large_1.c", RunsOn),
    ("attacks/overflow_large_8.c", RunsOn),
    ("attacks/sized_delete_mismatch.cpp", RunsOn),
    (
        "attacks/usable_size_interior.c",
        Aborts("guarded: not the start of a block"),
    ),
    ("attacks/usable_size_freed.c", Aborts("not in use")),
    (
        "attacks/usable_size_unmapped.c",
        Aborts("invalid pointer (not mapped)"),
    ),
    (
        "attacks/realloc_unaligned.c",
        Aborts("guarded: not the start of a block"),
    ),
    ("attacks/realloc_freed.c", Aborts("not in use")),
];

fn survived(run: &Run) -> bool {
    run.status.success() && run.stdout.contains("survived\n")
}

fn report_line(run: &Run) -> Option<&str> {
    run.stderr.lines().find(|l| l.starts_with("ebb: "))
}

#[track_caller]
fn assert_outcome(run: &Run, expected: Outcome, what: &str) {
    match expected {
        Varies => {}
        RunsOn => assert!(
            survived(run),
            "{what}: expected it to run on\n{}",
            run.describe()
        ),
        Faults(text) => {
            assert_eq!(
                run.status.signal(),
                Some(SIGSEGV),
                "{what}\n{}",
                run.describe()
            );
            let line =
                report_line(run).unwrap_or_else(|| panic!("{what}: no report\n{}", run.describe()));
            assert!(
                line.starts_with(&format!("ebb: guarded: {text} at 0x")),
                "{what}: report {line:?}, expected {text:?}"
            );
            // The block, the offset and where it was allocated are named.
            assert!(
                line.contains("-byte block at 0x") && line.contains("offset "),
                "{line}"
            );
            assert!(line.contains("; allocated at 0x"), "{line}");
        }
        Aborts(text) => {
            assert_eq!(
                run.status.signal(),
                Some(SIGABRT),
                "{what}\n{}",
                run.describe()
            );
            let line =
                report_line(run).unwrap_or_else(|| panic!("{what}: no report\n{}", run.describe()));
            assert!(
                line.contains(text),
                "{what}: report {line:?} lacks {text:?}"
            );
            if line.contains("guarded:") {
                assert!(line.contains("; allocated at 0x"), "{line}");
            }
        }
    }
}

/// A table cell for a run (as `tests/attacks.rs` writes them).
fn cell(run: &Run) -> String {
    if survived(run) {
        return "runs on".into();
    }
    let why = match run.status.signal() {
        Some(SIGABRT) => String::new(),
        Some(SIGSEGV) => " (SIGSEGV)".to_string(),
        Some(s) => format!(" (signal {s})"),
        None => format!(" (exit {})", run.status.code().unwrap_or(-1)),
    };
    match report_line(run) {
        Some(line) => {
            // The addresses change from run to run, and the stacks are long: keep the
            // function and what was wrong.
            let line = match (line.find("(0x"), line.find("): ")) {
                (Some(a), Some(b)) if a < b => format!("{}(p){}", &line[..a], &line[b + 1..]),
                _ => line.to_string(),
            };
            let line = line.split(" at 0x").next().unwrap_or(&line);
            let line = line.split(" (offset").next().unwrap_or(line);
            let line = line.split("; aborting").next().unwrap_or(line);
            format!("**dies**{why}: `{line}`")
        }
        None => format!("**dies**{why}"),
    }
}

#[test]
fn attack_programs_under_guarded_sampling() {
    let _ = libebb();
    let cells: Vec<(String, String)> = std::thread::scope(|scope| {
        let handles: Vec<_> = ATTACKS
            .iter()
            .map(|&(source, expected)| {
                scope.spawn(move || {
                    let exe = program(source);
                    let guarded = run(&exe, &[], true, &GUARDED);
                    assert_outcome(&guarded, expected, &format!("{source} guarded"));
                    (source.to_string(), cell(&guarded))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut column = String::from("| program | ebb `EBB_GUARDED_RATE=1` |\n|---|---|\n");
    for (source, cell) in &cells {
        writeln!(column, "| {source} | {cell} |").unwrap();
    }
    let caught = cells
        .iter()
        .filter(|(_, c)| c.starts_with("**dies**"))
        .count();
    writeln!(column, "| **caught (of {})** | **{caught}** |", cells.len()).unwrap();
    let path = profile_dir().join("../tmp/attacks-guarded.md");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &column).unwrap();
    eprintln!("{column}\n(written to {})", path.display());
}

/// The seeded bugs fault at the faulting instruction, each with its one-line report;
/// without the option, none is reported.
#[test]
fn seeded_overflow_underflow_and_use_after_free_fault() {
    let cases = [
        ("guarded/guarded_overflow.c", "overflow"),
        ("guarded/guarded_underflow.c", "underflow"),
        ("attacks/read_after_free.c", "use-after-free"),
        ("attacks/write_after_free.c", "use-after-free"),
    ];
    for (source, kind) in cases {
        let exe = program(source);
        let guarded = run(&exe, &[], true, &GUARDED);
        assert_outcome(&guarded, Faults(kind), source);
        let off = run(&exe, &[], true, &[]);
        assert!(
            !off.stderr.contains("ebb: guarded") && off.status.signal() != Some(SIGABRT),
            "{source} without guarded sampling\n{}",
            off.describe()
        );
    }
}

/// Children forked while other threads allocate and free guarded blocks still guard
/// theirs (no lock held across the fork; the pool and the handler are inherited).
#[test]
fn guarded_sampling_works_in_forked_children() {
    let exe = program("guarded/guarded_fork.c");
    // More slots than the two threads can hold live at the fork.
    let env = [("EBB_GUARDED_RATE", "1"), ("EBB_GUARDED_SLOTS", "64")];
    let on = run(&exe, &[], true, &env);
    on.assert_success().assert_stdout_has("children caught");
    assert!(
        on.stderr.contains("ebb: guarded: use-after-free at 0x"),
        "{}",
        on.describe()
    );
    let off = run(&exe, &[], true, &[]);
    assert!(!off.status.success(), "{}", off.describe());
    off.assert_stdout_has("not killed by SIGSEGV");
}

/// A fault outside the pool goes to the handler the program installed before ebb's.
#[test]
fn faults_outside_the_pool_reach_the_programs_handler() {
    let exe = program("guarded/guarded_chain.c");
    let on = run(&exe, &[], true, &GUARDED);
    assert_eq!(on.status.code(), Some(3), "{}", on.describe());
    on.assert_stdout_has("chained=1\nown handler\n");
    assert!(!on.stderr.contains("ebb: guarded"), "{}", on.describe());
}
