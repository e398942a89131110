//! `ebb run --breakdown`: the retention report of every ebb process over time.

mod common;

use common::*;

fn json_of(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The reports of the process whose reports hold the most live bytes, in time order.
fn reports_of_largest(run: &serde_json::Value) -> Vec<serde_json::Value> {
    let all = run["ebb_retention"].as_array().unwrap();
    let live = |r: &serde_json::Value| r["live"].as_u64().unwrap_or(0);
    let pid = &all.iter().max_by_key(|r| live(r)).expect("no report")["pid"];
    let mut mine: Vec<serde_json::Value> =
        all.iter().filter(|r| &r["pid"] == pid).cloned().collect();
    mine.sort_by(|a, b| {
        a["t"]
            .as_f64()
            .unwrap()
            .total_cmp(&b["t"].as_f64().unwrap())
    });
    mine
}

/// A helper holds 48 MiB of 64 KiB blocks for 1.5 s, frees them and waits 1.5 s more:
/// the reports ebb asked for every 200 ms show the live blocks rise and fall, on the
/// run's time axis, and the table and the chart show them.
#[test]
fn breakdown_follows_live_memory_up_and_down() {
    let json = scratch("breakdown.json");
    let svg = scratch("breakdown.svg");
    let out = ebb(&[
        "run",
        "--quiet",
        "--breakdown=200ms",
        "--json",
        json.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
        "--",
        HELPER,
        "phases",
        "48",
        "1500",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let run = json_of(&json);
    let reports = reports_of_largest(&run);
    assert_rise_and_fall(&run, &reports);
    let table = text
        .split_once("breakdown      what RSS held over time")
        .unwrap_or_else(|| panic!("no breakdown table: {text}"))
        .1;
    assert!(table.contains(" live ") && table.contains("peak"), "{text}");
    let last_row = table.lines().take_while(|l| !l.starts_with("ebb: ")).last();
    assert!(last_row.unwrap().ends_with("at exit"), "{text}");
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(chart.contains("live blocks") && chart.contains("RSS of the process tree"));
}

/// `reports` (one process's, of `run`) rose past 48 MiB of live blocks and fell below 8
/// again before the exit report, about every 200 ms and on the run's time axis.
fn assert_rise_and_fall(run: &serde_json::Value, reports: &[serde_json::Value]) {
    let signalled = reports.iter().filter(|r| r["trigger"] == "signal").count();
    // About 15 in 3 s; a loaded machine may start the helper late or skip a few.
    assert!(
        signalled >= 5,
        "{signalled} reports on the signal: {reports:?}"
    );
    assert_eq!(reports.last().unwrap()["trigger"], "exit", "{reports:?}");
    let elapsed = run["elapsed_s"].as_f64().unwrap();
    for r in reports {
        let t = r["t"].as_f64().unwrap();
        assert!(
            (0.0..=elapsed + 0.1).contains(&t),
            "t {t} outside the run: {r}"
        );
    }
    let live = |r: &serde_json::Value| r["live"].as_u64().unwrap() as f64;
    let peak = reports.iter().map(live).fold(0.0, f64::max);
    assert!(peak >= 48.0 * MIB, "live at most {peak}: {reports:?}");
    let peak_at = reports.iter().position(|r| live(r) == peak).unwrap();
    // After the free: a report with the blocks gone, before the exit report.
    assert!(
        reports[peak_at..reports.len() - 1]
            .iter()
            .any(|r| live(r) < 8.0 * MIB),
        "live never fell: {reports:?}"
    );
}

/// A worker forked without `exec` (a pre-fork server's, Python's `multiprocessing`'s)
/// is asked for its reports as any process is: its report thread is started again in
/// the child (threads do not survive `fork`), so the reports follow its memory up and
/// down, not only its exit. Without it the worker wrote its exit report alone.
#[test]
fn breakdown_reaches_a_forked_worker() {
    let json = scratch("breakdown-forked.json");
    let out = ebb(&[
        "run",
        "--quiet",
        "--breakdown=200ms",
        "--json",
        json.to_str().unwrap(),
        "--",
        HELPER,
        "fork-then",
        "phases",
        "48",
        "1500",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run = json_of(&json);
    let reports = reports_of_largest(&run);
    let pids: std::collections::BTreeSet<String> = run["ebb_retention"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["pid"].to_string())
        .collect();
    assert_eq!(
        pids.len(),
        2,
        "reports of the parent and the worker: {pids:?}"
    );
    assert_rise_and_fall(&run, &reports);
}

/// A server that ebb stops after its idle phase writes no report at exit: ebb asks for
/// a last one first, and the one-line summary says it is from the end of the run.
#[test]
fn breakdown_of_a_stopped_server_ends_with_a_last_report() {
    let json = scratch("breakdown-server.json");
    let out = ebb(&[
        "run",
        "--quiet",
        "--breakdown=300ms",
        "--ready",
        "ready",
        "--idle",
        "1s",
        "--json",
        json.to_str().unwrap(),
        "--",
        HELPER,
        "leaky-server",
        "16",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let reports = reports_of_largest(&json_of(&json));
    assert!(
        reports.iter().all(|r| r["trigger"] == "signal"),
        "{reports:?}"
    );
    let last = reports.last().unwrap();
    assert!(
        last["live"].as_u64().unwrap() as f64 >= 16.0 * MIB,
        "{last}"
    );
    // Its time is after the idle phase began (the last one, asked for at the stop).
    let idle = json_of(&json)["idle_start_s"].as_f64().unwrap();
    assert!(
        last["t"].as_f64().unwrap() >= idle + 0.9,
        "{last} vs idle at {idle}"
    );
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("RSS at the end")),
        "{text}"
    );
}

/// The reports are asked of ebb's report thread alone: a program thread in a
/// `nanosleep` (which `SA_RESTART` does not resume) sleeps on through 15 of them.
#[test]
fn breakdown_interrupts_no_program_thread() {
    let out = ebb(&["run", "--breakdown=100ms", "--", HELPER, "nap", "1500"]);
    let text = stderr(&out);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{text}");
    assert!(said.contains("nap done"), "{said}");
    let reports = text
        .split_once("; ")
        .and_then(|_| text.split_once(" reports, "))
        .and_then(|(head, _)| head.rsplit(' ').next()?.parse::<u32>().ok())
        .unwrap_or_else(|| panic!("no report count: {text}"));
    assert!(reports >= 5, "{reports} reports: {text}");
}

/// Reports asked for every 10 ms of a process that `exec`s itself 400 times: a
/// signal sent as it `exec`s must never reach the new program before its ebb has
/// installed the handler (the default action of a real-time signal ends it).
#[test]
fn breakdown_kills_no_process_that_execs() {
    let out = ebb(&[
        "run",
        "--quiet",
        "--interval",
        "10ms",
        "--breakdown=10ms",
        "--",
        HELPER,
        "exec-chain",
        "400",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
}

#[test]
fn breakdown_needs_ebb() {
    let out = ebb(&["run", "--alloc", "glibc", "--breakdown", "--", "true"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stderr(&out);
    assert!(
        text.contains("--breakdown needs --alloc ebb") && text.lines().count() == 1,
        "{text}"
    );
    let out = ebb(&["run", "--breakdown=0s", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// A Rust program on ebb, run by `ebb run`, which preloads `libebb.so` for its C code:
/// two ebb instances, which both answer the report signal (the second's handler passes
/// it on to the first's), and the breakdown adds them up: 16 MiB leaked from Rust and
/// 16 MiB through C's `malloc` are one process's 32 MiB of live blocks, not 16 MiB and
/// "not ebb's" memory. (A workspace build gives the helper's ebb the `override`
/// feature: one instance, which holds both leaks; the figures are the same.)
#[test]
fn breakdown_of_rust_on_ebb_holds_both_instances() {
    let json = scratch("breakdown-two.json");
    let helper = env!("CARGO_BIN_EXE_ebb-test-rust-on-ebb");
    let out = ebb(&[
        "run",
        "--breakdown=100ms",
        "--json",
        json.to_str().unwrap(),
        "--",
        helper,
        "leak-both-reported",
        "16",
    ]);
    let text = stderr(&out);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{said}{text}");
    let two = said.contains("instances reported: 2");
    let run = json_of(&json);
    let signalled: Vec<&serde_json::Value> = run["ebb_retention"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["trigger"] == "signal")
        .collect();
    let mut instances: Vec<u64> = signalled
        .iter()
        .filter_map(|r| r["instance"].as_u64())
        .collect();
    instances.sort_unstable();
    instances.dedup();
    assert_eq!(instances.len(), if two { 2 } else { 1 }, "{said}{text}");
    let table = text
        .split_once("breakdown      what RSS held over time")
        .unwrap_or_else(|| panic!("no breakdown table: {text}"))
        .1;
    assert_eq!(table.contains("two ebb instances together"), two, "{text}");
    let summary = text
        .lines()
        .find(|l| l.trim_start().starts_with("RSS at exit"))
        .unwrap_or_else(|| panic!("no summary: {text}"));
    let live = summary
        .split_once("live blocks ")
        .and_then(|(_, rest)| rest.split_once(" MiB"))
        .and_then(|(mib, _)| mib.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no live blocks: {summary}"));
    assert!((31.0..=34.0).contains(&live), "{summary}");
}
