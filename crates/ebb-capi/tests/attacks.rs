//! Attack programs (`tests/c/attacks/`): each commits one heap bug and then keeps using
//! the allocator. Under `LD_PRELOAD=libebb.so` each must end as [`ATTACKS`] documents
//! for each mode: killed by SIGABRT after ebb's one-line report, or running on (ebb
//! does not catch that bug in that mode). glibc's outcome (no preload) is recorded,
//! not asserted (it depends on the glibc version), and the whole table is written to
//! `target/tmp/attacks.md` for README's "Security" section.
//!
//! A bug counts as caught when the process dies instead of running on.
//!
//! Adding a mode (a column): give each entry an expectation for it and a way to run it
//! (see `secure`: `libebb_secure.so`, built by the test, at both levels).
//!
//! Tools: gcc, g++.

mod c_support;

use c_support::{libebb, profile_dir, program, run, Run};
use std::fmt::Write as _;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;

/// How a program run ends.
#[derive(Clone, Copy, Debug)]
enum Outcome {
    /// Killed by SIGABRT after an `ebb: function(0x...): ...` report containing one of
    /// these texts.
    Dies(&'static [&'static str]),
    /// Runs to its end (prints "survived"): the bug is not caught.
    RunsOn,
    /// Runs to its end, and by design of the mode: why not (the table cell says it).
    Uncaught(&'static str),
    /// Killed by SIGSEGV, with no report: not caught, but the corruption is followed
    /// (a free-list link overwritten, read by a later malloc).
    Crashes,
}
use Outcome::{Crashes, Dies, RunsOn, Uncaught};

/// Why no mode but guarded sampling stops a read after free: a load from freed memory
/// makes no call into the allocator, so only a fault can stop it, and only a block
/// alone in a protected OS page faults (one OS page, an `mprotect` and a TLB miss per
/// block: what `EBB_GUARDED_RATE` does for the blocks it samples). The secure build
/// checks at its calls (malloc, free, realloc) what a write after free leaves behind
/// (an encoded link that no longer decodes), but a read leaves nothing; with
/// `EBB_ZERO_ON_FREE=1` it reads zeros instead of the old contents (asserted below).
const READ_IS_NO_CALL: &str = "a read makes no call into ebb; only a protected page \
     faults on it (`EBB_GUARDED_RATE`, sampled); `EBB_ZERO_ON_FREE=1`: it reads zeros";

/// Why level light runs on after a small block's overflow: its canaries are off by
/// default (their padding and check cost about 4 points of CPU on the speed suite).
const NO_CANARY_AT_LIGHT: &str = "canaries are off at light (`EBB_CANARY=1` catches it)";

struct Attack {
    /// Under `tests/c/`.
    source: &'static str,
    /// The bug, as the README table names it.
    bug: &'static str,
    /// Default mode (no `EBB_*` variable).
    default: Outcome,
    /// `EBB_CHECK=1`.
    check: Outcome,
    /// `libebb_secure.so` (the `secure` feature), at `EBB_SECURE=light` and at `full`
    /// (the same outcome at both); `None`: not asserted, only recorded.
    secure: Option<Outcome>,
}

const NOT_IN_USE: &[&str] = &["not in use"];
const NOT_A_START: &[&str] = &["not the start of a block"];
const NOT_LIVE: &[&str] = &["not a live block"];
const DOUBLE_FREE: &[&str] = &["double free"];
const UNMAPPED: &[&str] = &["invalid pointer (not mapped)"];
const UNALIGNED_FOREIGN: &[&str] = &["invalid pointer (unaligned"];
const CANARY: &[&str] = &["its canary was overwritten"];

const ATTACKS: &[Attack] = &[
    Attack {
        source: "attacks/double_free_small.c",
        bug: "double free, small block, immediate",
        default: Dies(DOUBLE_FREE),
        check: Dies(DOUBLE_FREE),
        secure: Some(Dies(DOUBLE_FREE)),
    },
    Attack {
        source: "attacks/double_free_small_thread.c",
        bug: "double free, small block, immediate, in a second thread",
        default: Dies(DOUBLE_FREE),
        check: Dies(DOUBLE_FREE),
        secure: Some(Dies(DOUBLE_FREE)),
    },
    Attack {
        source: "attacks/double_free_small_delayed.c",
        bug: "double free, small block, delayed",
        default: Dies(DOUBLE_FREE),
        check: Dies(DOUBLE_FREE),
        secure: Some(Dies(DOUBLE_FREE)),
    },
    Attack {
        source: "attacks/double_free_large.c",
        bug: "double free, 1 MiB block, immediate",
        default: Dies(NOT_IN_USE),
        check: Dies(DOUBLE_FREE),
        secure: Some(Dies(DOUBLE_FREE)),
    },
    Attack {
        source: "attacks/double_free_large_delayed.c",
        bug: "double free, 1 MiB block, after its memory was reused",
        default: Dies(DOUBLE_FREE),
        check: Dies(DOUBLE_FREE),
        // The secure build's 1 MiB block takes a span 16 bytes bigger (its canary),
        // which the small blocks do not reuse: the second free finds the span free.
        secure: Some(Dies(DOUBLE_FREE)),
    },
    Attack {
        source: "attacks/invalid_free_unmapped.c",
        bug: "free of an unmapped address",
        default: Dies(UNMAPPED),
        check: Dies(UNMAPPED),
        secure: Some(Dies(UNMAPPED)),
    },
    Attack {
        source: "attacks/invalid_free_far.c",
        bug: "free of a pointer 1 MiB past a block",
        default: Dies(&["not in use", "not the start of a block"]),
        check: Dies(&["not in use", "not the start of a block"]),
        secure: Some(Dies(&["not the start of its block"])),
    },
    Attack {
        source: "attacks/invalid_free_interior.c",
        bug: "free of a pointer 16 bytes into a block",
        default: RunsOn,
        check: Dies(NOT_A_START),
        secure: Some(Dies(NOT_A_START)),
    },
    Attack {
        source: "attacks/invalid_free_unaligned.c",
        bug: "free of a pointer 1 byte into a block",
        default: RunsOn,
        check: Dies(NOT_A_START),
        secure: Some(Dies(NOT_A_START)),
    },
    Attack {
        source: "attacks/invalid_free_uninitialised.c",
        bug: "free of an uninitialised pointer",
        default: Dies(UNALIGNED_FOREIGN),
        check: Dies(UNALIGNED_FOREIGN),
        secure: Some(Dies(UNALIGNED_FOREIGN)),
    },
    Attack {
        source: "attacks/read_after_free.c",
        bug: "read after free",
        default: RunsOn,
        check: RunsOn,
        secure: Some(Uncaught(READ_IS_NO_CALL)),
    },
    Attack {
        source: "attacks/write_after_free.c",
        bug: "write after free (16 bytes)",
        // The block waits on `local_free` behind the page's first carve (32 blocks of
        // 64 bytes, `carve::CARVE_LINES`): a later malloc follows the overwritten link
        // (in check mode too, whose slow path pops from the same lists).
        // (With 16 KiB carves the program's 64 mallocs ended right on the bad block.)
        default: Crashes,
        check: Crashes,
        secure: Some(Dies(&["corrupted"])),
    },
    Attack {
        source: "attacks/overflow_small_1.c",
        bug: "1-byte overflow, 24-byte block",
        default: RunsOn,
        check: RunsOn,
        secure: Some(Dies(CANARY)),
    },
    Attack {
        source: "attacks/overflow_small_8.c",
        bug: "8-byte overflow, 24-byte block",
        default: RunsOn,
        check: RunsOn,
        secure: Some(Dies(CANARY)),
    },
    Attack {
        source: "attacks/overflow_large_1.c",
        bug: "1-byte overflow, 1 MiB block",
        default: RunsOn,
        check: RunsOn,
        secure: Some(Dies(CANARY)),
    },
    Attack {
        source: "attacks/overflow_large_8.c",
        bug: "8-byte overflow, 1 MiB block",
        default: RunsOn,
        check: RunsOn,
        secure: Some(Dies(CANARY)),
    },
    Attack {
        source: "attacks/sized_delete_mismatch.cpp",
        bug: "C++ sized delete with the wrong size",
        default: RunsOn,
        check: RunsOn,
        secure: Some(Dies(&["a size larger than the block"])),
    },
    Attack {
        source: "attacks/free_sized_mismatch.c",
        bug: "C23 free_sized with the wrong size",
        default: RunsOn,
        check: Dies(&["free_sized", "a size larger than the block"]),
        secure: Some(Dies(&["a size larger than the block"])),
    },
    Attack {
        source: "attacks/usable_size_interior.c",
        bug: "malloc_usable_size of a pointer into a block",
        default: Dies(NOT_A_START),
        check: Dies(NOT_LIVE),
        secure: Some(Dies(NOT_A_START)),
    },
    Attack {
        source: "attacks/usable_size_freed.c",
        bug: "malloc_usable_size of a freed block",
        default: Dies(NOT_IN_USE),
        check: Dies(NOT_LIVE),
        secure: Some(Dies(NOT_IN_USE)),
    },
    Attack {
        source: "attacks/usable_size_unmapped.c",
        bug: "malloc_usable_size of an unmapped address",
        default: Dies(UNMAPPED),
        check: Dies(UNMAPPED),
        secure: Some(Dies(UNMAPPED)),
    },
    Attack {
        source: "attacks/realloc_unaligned.c",
        bug: "realloc of a pointer 1 byte into a block",
        default: Dies(NOT_A_START),
        check: Dies(NOT_LIVE),
        secure: Some(Dies(NOT_A_START)),
    },
    Attack {
        source: "attacks/realloc_freed.c",
        bug: "realloc of a freed block",
        default: Dies(NOT_IN_USE),
        check: Dies(NOT_LIVE),
        secure: Some(Dies(NOT_IN_USE)),
    },
];

/// SIGABRT on Linux.
const SIGABRT: i32 = 6;

fn survived(run: &Run) -> bool {
    run.status.success() && run.stdout.contains("survived\n")
}

/// Assert that `run` ended as `expected`, for program `source` in `mode`.
#[track_caller]
fn assert_outcome(run: &Run, expected: Outcome, source: &str, mode: &str) {
    match expected {
        RunsOn | Uncaught(_) => assert!(
            survived(run),
            "{source} in {mode}: expected it to run on\n{}",
            run.describe()
        ),
        Crashes => assert_eq!(
            run.status.signal(),
            Some(11),
            "{source} in {mode}: expected SIGSEGV\n{}",
            run.describe()
        ),
        Dies(texts) => {
            assert_eq!(
                run.status.signal(),
                Some(SIGABRT),
                "{source} in {mode}: expected SIGABRT\n{}",
                run.describe()
            );
            let report = run
                .stderr
                .lines()
                .find(|l| l.starts_with("ebb: "))
                .unwrap_or_else(|| panic!("{source} in {mode}: no report\n{}", run.describe()));
            assert!(
                texts.iter().any(|t| report.contains(t)),
                "{source} in {mode}: report {report:?} says none of {texts:?}"
            );
            assert!(
                report.contains("aborting"),
                "{source} in {mode}: {report:?}"
            );
        }
    }
}

/// A table cell for a run: what ended it (and why not, for a run the mode is not
/// meant to stop).
fn cell(run: &Run, expected: Option<Outcome>) -> String {
    if survived(run) {
        return match expected {
            Some(Uncaught(why)) => format!("runs on: {why}"),
            _ => "runs on".into(),
        };
    }
    let why = match run.status.signal() {
        Some(SIGABRT) => "SIGABRT".to_string(),
        Some(11) => "SIGSEGV".to_string(),
        Some(s) => format!("signal {s}"),
        None => format!("exit {}", run.status.code().unwrap_or(-1)),
    };
    let message = run.stderr.lines().find(|l| !l.trim().is_empty()).map(|l| {
        // ebb's addresses change from run to run.
        let l = l
            .strip_suffix("; aborting (EBB_ABORT_ON_ERROR=0 to go on)")
            .or_else(|| l.strip_suffix("; aborting (secure build)"))
            .unwrap_or(l);
        match (l.find("(0x"), l.find("): ")) {
            (Some(a), Some(b)) if a < b => format!("{}(p){}", &l[..a], &l[b + 1..]),
            _ => l.to_string(),
        }
    });
    match message {
        Some(m) if why == "SIGABRT" => format!("**dies**: `{m}`"),
        Some(m) => format!("**dies** ({why}): `{m}`"),
        None => format!("**dies** ({why})"),
    }
}

/// `libebb_secure.so` (built by the test; `EBB_ATTACKS_SECURE=0` leaves it out).
fn secure_library() -> Option<PathBuf> {
    (std::env::var("EBB_ATTACKS_SECURE").as_deref() != Ok("0"))
        .then(|| c_support::libebb_secure().to_path_buf())
}

/// The secure build's levels, as columns.
const SECURE_LEVELS: [&str; 2] = ["light", "full"];

/// Attacks only the small-block canaries catch (`EBB_CANARY`: on at level full, off at
/// light): at light they run on, unless `EBB_CANARY=1`.
fn needs_small_canary(attack: &Attack) -> bool {
    attack.source.starts_with("attacks/overflow_small")
}

/// What the secure build does about a read after free, which no check at its calls can
/// stop ([`READ_IS_NO_CALL`]): the read sees the old contents by default, zeros with
/// `EBB_ZERO_ON_FREE=1`, and faults with guarded sampling on every block.
fn read_after_free_in_the_secure_build(exe: &std::path::Path, lib: &std::path::Path) {
    for level in SECURE_LEVELS {
        let seen = |envs: &[(&str, &str)]| {
            let mut envs = envs.to_vec();
            envs.push(("EBB_SECURE", level));
            let run = c_support::run_preloading(exe, lib, &envs);
            assert!(survived(&run), "{}", run.describe());
            run.stdout
        };
        assert!(seen(&[]).contains("32 of 32 bytes as they were"), "{level}");
        let zeroed = seen(&[("EBB_ZERO_ON_FREE", "1")]);
        assert!(
            zeroed.contains("0 of 32 bytes as they were"),
            "{level}: {zeroed}"
        );
        let guarded = c_support::run_preloading(
            exe,
            lib,
            &[("EBB_SECURE", level), ("EBB_GUARDED_RATE", "1")],
        );
        assert_eq!(guarded.status.signal(), Some(11), "{}", guarded.describe());
        assert!(
            guarded.stderr.contains("ebb: guarded: use-after-free"),
            "{}",
            guarded.describe()
        );
    }
}

#[test]
fn attack_programs_end_as_documented() {
    let _ = libebb(); // build it once, before the threads
    let secure = secure_library();
    let rows: Vec<(String, Vec<String>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = ATTACKS
            .iter()
            .map(|attack| {
                let secure = secure.clone();
                scope.spawn(move || {
                    let exe = program(attack.source);
                    let glibc = run(&exe, &[], false, &[]);
                    let default = run(&exe, &[], true, &[]);
                    assert_outcome(&default, attack.default, attack.source, "default mode");
                    let check = run(&exe, &[], true, &[("EBB_CHECK", "1")]);
                    assert_outcome(&check, attack.check, attack.source, "EBB_CHECK=1");
                    if let Dies(texts) = attack.default {
                        // Report and go on: the bad call is ignored, the heap stays sound.
                        let go_on = run(&exe, &[], true, &[("EBB_ABORT_ON_ERROR", "0")]);
                        assert!(survived(&go_on), "{}", go_on.describe());
                        assert!(
                            texts.iter().any(|t| go_on.stderr.contains(t)),
                            "{}",
                            go_on.describe()
                        );
                    }
                    let mut cells = vec![
                        cell(&glibc, None),
                        cell(&default, Some(attack.default)),
                        cell(&check, Some(attack.check)),
                    ];
                    if let Some(lib) = &secure {
                        for level in SECURE_LEVELS {
                            let with_secure =
                                c_support::run_preloading(&exe, lib, &[("EBB_SECURE", level)]);
                            if let Some(expected) = attack.secure {
                                let mode = format!("secure {level}");
                                let expected = if level == "light" && needs_small_canary(attack) {
                                    Uncaught(NO_CANARY_AT_LIGHT)
                                } else {
                                    expected
                                };
                                assert_outcome(&with_secure, expected, attack.source, &mode);
                                cells.push(cell(&with_secure, Some(expected)));
                            } else {
                                cells.push(cell(&with_secure, None));
                            }
                        }
                        if attack.source == "attacks/read_after_free.c" {
                            read_after_free_in_the_secure_build(&exe, lib);
                        }
                        if needs_small_canary(attack) {
                            // The option turns them on at light and off at full.
                            for (level, canary, expected) in [
                                ("light", "1", attack.secure.unwrap()),
                                ("full", "0", RunsOn),
                            ] {
                                let envs = [("EBB_SECURE", level), ("EBB_CANARY", canary)];
                                let run = c_support::run_preloading(&exe, lib, &envs);
                                let mode = format!("secure {level} EBB_CANARY={canary}");
                                assert_outcome(&run, expected, attack.source, &mode);
                            }
                        }
                    }
                    (attack.bug.to_string(), cells)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    let mut table = String::new();
    let mut header = vec!["bug", "glibc", "ebb", "ebb `EBB_CHECK=1`"];
    if secure.is_some() {
        header.extend(["ebb secure light", "ebb secure full"]);
    }
    writeln!(table, "| {} |", header.join(" | ")).unwrap();
    writeln!(table, "|{}", "---|".repeat(header.len())).unwrap();
    let mut caught = vec![0; header.len() - 1];
    for (bug, cells) in &rows {
        writeln!(table, "| {bug} | {} |", cells.join(" | ")).unwrap();
        for (n, c) in caught.iter_mut().zip(cells) {
            *n += c.starts_with("**dies**") as usize;
        }
    }
    writeln!(
        table,
        "| **caught (of {})** | {} |",
        rows.len(),
        caught
            .iter()
            .map(|n| format!("**{n}**"))
            .collect::<Vec<_>>()
            .join(" | ")
    )
    .unwrap();
    let path = profile_dir().join("../tmp/attacks.md");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &table).unwrap();
    eprintln!("{table}\n(written to {})", path.display());
}
