//! Runs a short model workload under valgrind (memcheck), if valgrind is installed.
//!
//! Memcheck cannot see inside ebb's heap (it only tracks malloc-family calls, and ebb
//! gets its memory with mmap), so it will not flag a use-after-free of an ebb block.
//! What it does catch: accesses outside any mapping, uses of uninitialised values
//! (e.g. from the stack or a fresh descriptor) in conditions, and bad system call
//! arguments — in ebb and in the test harness around it.
//!
//! The parent test re-runs this same binary under valgrind, selecting the child test
//! with `--exact`; the child only does work when `EBB_MODEL_CHILD=1`.

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

mod common;

use common::shadow::run_model;
use common::*;
use std::process::Command;

const CHILD_ENV: &str = "EBB_MODEL_CHILD";
const CHILD_TEST: &str = "model_child";

#[test]
fn model_under_valgrind() {
    run_child_under_valgrind(&[]);
}

/// The same with every free span decommitted at once and no purger thread, so the
/// purge and zeroed-reuse paths run constantly.
#[test]
fn model_under_valgrind_immediate_purge() {
    run_child_under_valgrind(&[("EBB_PURGE_DELAY", "0"), ("EBB_BACKGROUND", "0")]);
}

fn run_child_under_valgrind(env: &[(&str, &str)]) {
    if std::env::var_os(CHILD_ENV).is_some() {
        return; // we are the child: only `model_child` runs.
    }
    match Command::new("valgrind").arg("--version").output() {
        Ok(out) if out.status.success() => {}
        _ => {
            eprintln!("model_under_valgrind: valgrind not found on PATH, skipped");
            return;
        }
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("valgrind")
        .args([
            "--error-exitcode=99",
            "--quiet",
            "--tool=memcheck",
            "--track-origins=yes",
        ])
        .arg(&exe)
        .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .envs(env.iter().copied())
        .output()
        .expect("run valgrind");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "valgrind run with {env:?} failed ({:?})\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("1 passed"),
        "the child test did not run\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
}

/// The workload run under valgrind: a short model sequence on two threads, and blocks
/// freed by a thread other than their allocator.
#[test]
fn model_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let t = std::thread::spawn(|| run_model(11, 6_000, 200, 32 * MIB));
    run_model(12, 6_000, 200, 32 * MIB);
    t.join().unwrap();

    let (tx, rx) = std::sync::mpsc::channel::<Vec<Box<[u8]>>>();
    let producer = std::thread::spawn(move || {
        let mut rng = Rng::new(3);
        for _ in 0..20 {
            let v: Vec<Box<[u8]>> = (0..100)
                .map(|_| {
                    let n = rng.range(1, 2000);
                    vec![n as u8; n].into_boxed_slice()
                })
                .collect();
            tx.send(v).unwrap();
        }
    });
    let mut n = 0;
    for v in rx {
        for b in v {
            assert!(b.iter().all(|&x| x == b.len() as u8));
            n += 1;
        }
    }
    producer.join().unwrap();
    assert_eq!(n, 2000);
    ebb::collect(true);
    check_stats_consistent(&ebb::stats());
}
