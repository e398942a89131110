//! `ebb report PID` and `ebb profile PID`: a running ebb process's retention report
//! and heap profile, now.

mod common;

use common::*;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `libebb.so`, built beside `ebb` by the workspace build.
fn libebb() -> PathBuf {
    std::path::Path::new(EBB).with_file_name("libebb.so")
}

/// A server the test started, killed when the test ends, passed or not (a server left
/// running would hold the test harness's stderr open and hang whoever reads it).
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The helper as a server under ebb, holding 16 MiB, with `env` added; returns once it
/// is ready.
fn server(env: &[(&str, &str)]) -> Server {
    server_from(&["leaky-server", "16"], env).0
}

/// The helper run with `args` under ebb, `env` added, once it printed `ready`; and the
/// process id it printed there (the server's own: a forked worker's, under
/// `fork-then`).
fn server_from(args: &[&str], env: &[(&str, &str)]) -> (Server, u32) {
    let mut cmd = Command::new(HELPER);
    cmd.args(args)
        .env("LD_PRELOAD", libebb())
        .stdout(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = Server(cmd.spawn().expect("start the helper"));
    let mut line = String::new();
    BufReader::new(child.0.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("ready"), "{line}");
    let pid = line
        .trim_end()
        .trim_end_matches(')')
        .rsplit(' ')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {line:?}"));
    (child, pid)
}

/// `program` run with `args` under ebb, profiling to `prefix` on SIGUSR1 at one sample
/// per 64 KiB, its stdin and stdout piped; returns once it printed its `ready` line:
/// the server, its further output lines, and that line.
fn profiled_server(
    program: &str,
    args: &[&str],
    prefix: &std::path::Path,
) -> (
    Server,
    std::io::Lines<BufReader<std::process::ChildStdout>>,
    String,
) {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("LD_PRELOAD", libebb())
        .env("EBB_PROFILE", prefix)
        .env("EBB_PROFILE_SIGNAL", "USR1")
        .env("EBB_PROFILE_RATE", "64k")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut server = Server(cmd.spawn().expect("start the helper"));
    let mut lines = BufReader::new(server.0.stdout.take().unwrap()).lines();
    let ready = lines.next().unwrap().unwrap();
    assert!(ready.contains("ready"), "{ready}");
    (server, lines, ready)
}

/// Waits up to 10 s for `pid`'s thread `name`; true if it came.
fn wait_for_thread(pid: u32, name: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !has_thread(pid, name) {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

fn has_thread(pid: u32, name: &str) -> bool {
    threads_named(pid, name) > 0
}

/// How many threads of `pid` are named `name`.
fn threads_named(pid: u32, name: &str) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim_end() == name)
        })
        .count()
}

/// `ebb profile ARGS... PID`, which must succeed: (its table, what it said on stderr).
fn ebb_profile(pid: u32, args: &[&str]) -> (String, String) {
    let mut all = vec!["profile"];
    all.extend_from_slice(args);
    let pid = pid.to_string();
    all.push(&pid);
    let out = ebb(&all);
    assert!(out.status.success(), "{}", stderr(&out));
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr(&out),
    )
}

/// A server started with `EBB_REPORT` (JSON) and `EBB_REPORT_SIGNAL`: `ebb report`
/// prints the report it appends now (its 16 MiB among the live blocks) and the one-line
/// summary; the server runs on.
#[test]
fn report_of_a_running_server() {
    let file = scratch("live.%p.json");
    let mut child = server(&[
        ("EBB_REPORT", file.to_str().unwrap()),
        ("EBB_REPORT_SIGNAL", "USR2"),
    ]);
    let pid = child.0.id();
    wait_for_thread(pid, "ebb-report");
    for _ in 0..2 {
        let out = ebb(&["report", &pid.to_string()]);
        let text = stderr(&out);
        let report = assert_report_of(&out, pid, 16.0 * MIB);
        assert_eq!(report["trigger"], "signal", "{report}");
        assert!(
            text.contains("RSS now") && text.contains("live blocks"),
            "{text}"
        );
    }
    assert!(child.0.try_wait().unwrap().is_none(), "the server ended");
}

/// A worker forked without `exec` (a pre-fork server's) has its own report thread
/// (threads do not survive `fork`; ebb starts it again at the child's first slow path)
/// and so answers `ebb report` with its own memory.
#[test]
fn report_of_a_forked_worker() {
    let file = scratch("forked.%p.json");
    let (_parent, worker) = server_from(
        &["fork-then", "leaky-server", "16"],
        &[
            ("EBB_REPORT", file.to_str().unwrap()),
            ("EBB_REPORT_SIGNAL", "USR2"),
        ],
    );
    assert!(
        wait_for_thread(worker, "ebb-report"),
        "the forked worker {worker} has no ebb-report thread"
    );
    let out = ebb(&["report", &worker.to_string()]);
    assert_report_of(&out, worker, 16.0 * MIB);
}

/// `out` (of `ebb report PID`) printed one JSON report of `pid` with at least `live`
/// bytes of live blocks; returns it.
fn assert_report_of(out: &std::process::Output, pid: u32, live: f64) -> serde_json::Value {
    assert!(out.status.success(), "{}", stderr(out));
    let said = String::from_utf8_lossy(&out.stdout);
    let report: serde_json::Value = serde_json::from_str(said.trim())
        .unwrap_or_else(|e| panic!("not one JSON report ({e}): {said}"));
    assert_eq!(report["pid"].as_u64(), Some(pid as u64), "{report}");
    assert!(report["live"].as_u64().unwrap() as f64 >= live, "{report}");
    report
}

/// Under a seccomp filter ebb names no thread (a `prctl` the filter does not expect
/// might kill the process); `ebb report` finds the report thread by its signal mask
/// instead (every signal blocked but its own).
#[test]
fn report_of_a_process_under_seccomp() {
    let file = scratch("seccomp.%p.json");
    let (_server, pid) = server_from(
        &["seccomp-then", "leaky-server", "16"],
        &[
            ("EBB_REPORT", file.to_str().unwrap()),
            ("EBB_REPORT_SIGNAL", "USR2"),
        ],
    );
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(
        status.contains("Seccomp:\t2"),
        "not under a filter: {status}"
    );
    assert!(
        !has_thread(pid, "ebb-report"),
        "ebb named a thread under seccomp"
    );
    // The watcher starts with the process; give it time to unblock its signal.
    let deadline = Instant::now() + Duration::from_secs(10);
    let out = loop {
        let out = ebb(&["report", &pid.to_string()]);
        if out.status.success() || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_report_of(&out, pid, 16.0 * MIB);
}

/// `ebb profile PID`: a server that leaks 8 MiB at start and 8 more per line it reads
/// writes a profile when asked (its 8 MiB at `leak_blocks`), and after two lines
/// `--since-last` shows the 16 MiB that grew, under `leak_more`; `--over-time` shows
/// the leak in every profile it wrote, from 8 MiB to 24; the server runs on.
#[test]
fn profile_of_a_running_server_and_what_grew_since() {
    let (mut server, mut lines, _) =
        profiled_server(HELPER, &["leak-per-line", "8"], &scratch("live-heap"));
    let pid = server.0.id();
    assert!(wait_for_thread(pid, "ebb-profile"), "no ebb-profile thread");
    let profile = |args: &[&str]| ebb_profile(pid, args);
    let (table, said) = profile(&[]);
    assert!(said.contains("live-heap."), "{said}");
    let first = flat_of(&table, "leak_blocks").unwrap_or_else(|| panic!("{table}"));
    assert!((6.0 * MIB..10.5 * MIB).contains(&first), "{table}");
    let mut stdin = server.0.stdin.take().unwrap();
    for _ in 0..2 {
        writeln!(stdin, "leak").unwrap();
        let line = lines.next().unwrap().unwrap();
        assert!(line.starts_with("leaked"), "{line}");
    }
    let (grew, said) = profile(&["--since-last", "-n", "40"]);
    assert!(said.contains("what grew since"), "{said}");
    let grown = flat_of(&grew, "leak_blocks").unwrap_or_else(|| panic!("{grew}"));
    assert!((12.0 * MIB..20.0 * MIB).contains(&grown), "{grew}");
    assert!(grew.contains("leak_more"), "{grew}");

    // 32 MiB held at once and freed: `--peak` shows it, the live profile does not.
    writeln!(stdin, "peak").unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "peaked");
    let (at_peak, said) = profile(&["--peak"]);
    assert!(said.contains("live at its peak"), "{said}");
    let peaked = flat_of(&at_peak, "peak_blocks").unwrap_or_else(|| panic!("{at_peak}"));
    assert!((24.0 * MIB..40.0 * MIB).contains(&peaked), "{at_peak}");
    let (now, _) = profile(&[]);
    assert!(flat_of(&now, "peak_blocks").is_none(), "freed: {now}");

    // Every profile it wrote, oldest first: the leak from 8 MiB to 24 MiB.
    let (over_time, said) = profile(&["--over-time"]);
    assert!(said.contains("each site in its 5 profiles"), "{said}");
    let row = over_time
        .lines()
        .find(|l| l.ends_with("leak_blocks"))
        .unwrap_or_else(|| panic!("{over_time}"));
    let cells: Vec<&str> = row.trim_start_matches('^').split_whitespace().collect();
    let (first, last) = (
        table_bytes(cells[0], cells[1]),
        table_bytes(cells[8], cells[9]),
    );
    assert!((6.0 * MIB..10.5 * MIB).contains(&first), "{over_time}");
    assert!((18.0 * MIB..30.0 * MIB).contains(&last), "{over_time}");
    assert!(server.0.try_wait().unwrap().is_none(), "the server ended");
}

/// `ebb profile` of a process started without the profiler, and `--since-last` with
/// nothing to subtract: one-line errors saying what to do.
#[test]
fn profile_errors_say_what_to_do() {
    let child = server(&[]);
    let out = ebb(&["profile", &child.0.id().to_string()]);
    assert_eq!(out.status.code(), Some(1));
    let text = stderr(&out);
    assert!(
        text.contains("was not started with EBB_PROFILE") && text.lines().count() == 1,
        "{text}"
    );
    let prefix = scratch("first-heap");
    let child = server(&[
        ("EBB_PROFILE", prefix.to_str().unwrap()),
        ("EBB_PROFILE_SIGNAL", "USR1"),
    ]);
    let pid = child.0.id();
    assert!(wait_for_thread(pid, "ebb-profile"), "no ebb-profile thread");
    let out = ebb(&["profile", "--since-last", &pid.to_string()]);
    assert_eq!(out.status.code(), Some(1));
    let text = stderr(&out);
    assert!(
        text.contains("wrote no profile before") && text.lines().count() == 1,
        "{text}"
    );
}

#[test]
fn report_of_a_process_not_set_up_for_it_is_a_one_line_error() {
    let child = server(&[]);
    let out = ebb(&["report", &child.0.id().to_string()]);
    drop(child);
    assert_eq!(out.status.code(), Some(1));
    let text = stderr(&out);
    assert!(
        text.contains("was not started with EBB_REPORT") && text.lines().count() == 1,
        "{text}"
    );
    let out = ebb(&["report", "999999999"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no process 999999999"),
        "{}",
        stderr(&out)
    );
}

/// `ebb profile PID` of a Rust program on ebb with `libebb.so` preloaded (two ebb
/// instances, both answering the signal): one table of the process, its Rust code's
/// leak and its C code's, and with `--since-last` what both grew. (A workspace build
/// gives the helper's ebb the `override` feature: one instance holds both leaks, and
/// the figures are the same.)
#[test]
fn profile_of_rust_on_ebb_running_holds_both_instances() {
    let (mut server, mut lines, ready) = profiled_server(
        env!("CARGO_BIN_EXE_ebb-test-rust-on-ebb"),
        &["leak-both-lines", "8"],
        &scratch("live-two"),
    );
    let pid = server.0.id();
    let two = ready.contains("two instances: true");
    assert!(wait_for_thread(pid, "ebb-profile"), "no ebb-profile thread");
    let threads = || threads_named(pid, "ebb-profile");
    if two {
        let deadline = Instant::now() + Duration::from_secs(10);
        while threads() < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(threads(), 2, "one watcher per instance");
    }
    let profile = |args: &[&str]| ebb_profile(pid, args);
    let (table, said) = profile(&[]);
    assert_eq!(said.contains("two ebb instances, merged"), two, "{said}");
    for site in ["rust_leak", "c_leak"] {
        let bytes = flat_of(&table, site).unwrap_or_else(|| panic!("no {site}: {table}"));
        assert!((6.0 * MIB..10.5 * MIB).contains(&bytes), "{site}: {table}");
    }
    let mut stdin = server.0.stdin.take().unwrap();
    writeln!(stdin, "leak").unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "leaked");
    let (grew, said) = profile(&["--since-last"]);
    assert!(said.contains("grew since"), "{said}");
    for site in ["rust_leak", "c_leak"] {
        let bytes = flat_of(&grew, site).unwrap_or_else(|| panic!("no {site}: {grew}"));
        assert!((6.0 * MIB..10.5 * MIB).contains(&bytes), "{site}: {grew}");
    }
}
