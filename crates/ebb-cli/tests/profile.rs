//! `ebb run --profile` and `ebb top`: the heap profiler from the command line, checked
//! against helpers that leak and churn known amounts (`ebb-test-helper leak`,
//! `leaky-server`). Waits are for events, never for a duration.

mod common;

use common::*;
use std::path::PathBuf;
use std::process::Command;

/// The arguments of `ebb run -q --profile PREFIX --profile-rate 64k [extra...] --
/// HELPER helper...`.
fn profiled_run(prefix: &std::path::Path, extra: &[&str], helper: &[&str]) -> Vec<String> {
    let args: Vec<String> = ["run", "-q", "--profile", prefix.to_str().unwrap()]
        .iter()
        .chain(&["--profile-rate", "64k"])
        .chain(extra)
        .chain(&["--", HELPER])
        .chain(helper)
        .map(|a| a.to_string())
        .collect();
    args
}

/// `ebb run -q --profile PREFIX --profile-rate 64k -- command...`, run.
fn run_profiled(prefix: &std::path::Path, command: &[&str]) -> std::process::Output {
    let mut args = vec![
        "run",
        "-q",
        "--profile",
        prefix.to_str().unwrap(),
        "--profile-rate",
        "64k",
        "--",
    ];
    args.extend_from_slice(command);
    ebb(&args)
}

/// The rows of the table `ebb run --profile` prints under the title starting with
/// `title` (the lines indented below it); panics if there is none.
fn table_under<'a>(text: &'a str, title: &str) -> &'a str {
    let (_, rest) = text
        .split_once(&format!("  {title}"))
        .unwrap_or_else(|| panic!("no table {title:?}: {text}"));
    let rest = rest.split_once('\n').map_or("", |(_, rows)| rows);
    let end = rest
        .lines()
        .take_while(|l| l.starts_with("    "))
        .map(|l| l.len() + 1)
        .sum::<usize>();
    &rest[..end.min(rest.len())]
}

/// The leak `leak_blocks` shows in the table of what was live when ebb stopped the
/// tree; panics if there is none.
fn leak_when_stopped(text: &str) -> f64 {
    let live = table_under(text, "live when ebb stopped it");
    flat_of(live, "leak_blocks").unwrap_or_else(|| panic!("no leak: {text}"))
}

/// `ebb run --profile`: the leak the helper makes (32 MiB malloc'd by `leak_blocks`,
/// never freed) is the top live site at exit, and the 64 MiB `churn_blocks` allocated
/// and freed shows among what was allocated but not among what was live; `ebb top` reads
/// the same profile, and minus itself it is empty.
#[test]
fn profile_shows_the_leak_and_top_reads_it() {
    let prefix = scratch("heap");
    let args = profiled_run(&prefix, &[], &["leak", "32"]);
    let out = ebb(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let allocated = table_under(&text, "allocated over the run:");
    let live = table_under(&text, "still live at exit");
    assert!(text.contains("purger CPU "), "{text}");
    // The retention report at exit: what the RSS held, the leak among live blocks.
    let held = text
        .lines()
        .find(|l| l.trim_start().starts_with("RSS at exit"))
        .unwrap_or_else(|| panic!("no retention line: {text}"));
    let live_blocks = held
        .split_once("live blocks ")
        .and_then(|(_, rest)| {
            let cells: Vec<&str> = rest.split_whitespace().collect();
            Some(table_bytes(cells[0], cells.get(1)?))
        })
        .unwrap_or_else(|| panic!("no live part: {held}"));
    assert!(live_blocks >= 32.0 * MIB, "{held}");
    let leaked = flat_of(live, "leak_blocks").unwrap_or_else(|| panic!("no leak: {text}"));
    // A sampled estimate of 32 MiB (512 blocks at one sample per 64 KiB on average).
    assert!(
        (24.0 * MIB..40.0 * MIB).contains(&leaked),
        "{leaked}: {text}"
    );
    assert!(
        flat_of(live, "churn_blocks").is_none(),
        "freed, not live: {text}"
    );
    let churned = flat_of(allocated, "churn_blocks").unwrap_or_else(|| panic!("{text}"));
    assert!(
        (48.0 * MIB..80.0 * MIB).contains(&churned),
        "{churned}: {text}"
    );

    let written: Vec<PathBuf> = std::fs::read_dir(prefix.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("heap.") && name.ends_with(".pb.gz") && !name.contains(".peak.")
        })
        .collect();
    assert_eq!(written.len(), 1, "{written:?}");
    let profile = written[0].to_str().unwrap();
    assert!(text.contains(profile), "the path is printed: {text}");
    let out = ebb(&["top", "--index", "alloc_space", "-n", "5", profile]);
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(table.starts_with("alloc_space: "), "{table}");
    assert_eq!(flat_of(&table, "churn_blocks"), Some(churned), "{table}");
    let out = ebb(&["top", "--stacks", "-n", "1", profile]);
    let stacks = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stacks.starts_with("inuse_space: "), "{stacks}");
    let first = stacks
        .split("\n\n")
        .nth(1)
        .unwrap_or_else(|| panic!("{stacks}"));
    assert!(
        first
            .lines()
            .nth(1)
            .unwrap_or("")
            .trim()
            .ends_with("leak_blocks"),
        "{stacks}"
    );
    let out = ebb(&["top", "--base", profile, profile]);
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(table.starts_with("inuse_space: 0 B in total"), "{table}");
    assert!(flat_of(&table, "leak_blocks").is_none(), "{table}");
    flame_draws_the_leak(profile, churned);
}

/// What made memory peak: the helper holds 64 MiB in `peak_blocks`, frees it all,
/// then leaks 8 MiB in `leak_blocks`. The exit profile holds the leak alone; the peak
/// profile written beside it (`<prefix>.<pid>.peak.pb.gz`) holds `peak_blocks`' 64 MiB
/// and not the leak, which came after; `ebb run` prints both tables and `ebb top`
/// reads the peak's file.
#[test]
fn profile_at_the_peak_shows_what_was_freed_before_exit() {
    let prefix = scratch("peak");
    let args = profiled_run(&prefix, &[], &["peak", "32"]);
    let out = ebb(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let live = table_under(&text, "still live at exit");
    let leaked = flat_of(live, "leak_blocks").unwrap_or_else(|| panic!("no leak: {text}"));
    assert!(
        (5.0 * MIB..12.0 * MIB).contains(&leaked),
        "{leaked}: {text}"
    );
    assert!(flat_of(live, "peak_blocks").is_none(), "freed: {text}");
    let at_peak = table_under(&text, "live at the peak");
    assert!(
        text.contains("live at the peak, ") && text.contains(" s into the run"),
        "when: {text}"
    );
    let peaked = flat_of(at_peak, "peak_blocks").unwrap_or_else(|| panic!("{text}"));
    // A sampled estimate of 64 MiB (1,024 blocks at one sample per 64 KiB on
    // average), taken within 1/16 of the highest estimate.
    assert!(
        (48.0 * MIB..80.0 * MIB).contains(&peaked),
        "{peaked}: {text}"
    );
    assert!(
        flat_of(at_peak, "leak_blocks").is_none(),
        "after the peak: {text}"
    );

    let peak_file = std::fs::read_dir(prefix.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("peak.") && name.ends_with(".peak.pb.gz")
        })
        .unwrap_or_else(|| panic!("no peak profile written: {text}"));
    assert!(
        text.contains(&format!("{} (at the peak)", peak_file.display())),
        "{text}"
    );
    let out = ebb(&["top", "-n", "5", peak_file.to_str().unwrap()]);
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(flat_of(&table, "peak_blocks"), Some(peaked), "{table}");
}

/// The values of a row of a table over time (`ebb run --profile-every`, `ebb top A B
/// ...`): each column's bytes, the growth column last.
fn series_values(row: &str) -> Vec<f64> {
    let cells: Vec<&str> = row.trim_start_matches('^').split_whitespace().collect();
    cells
        .chunks(2)
        .take_while(|c| c.len() == 2 && c[0].parse::<f64>().is_ok())
        .map(|c| table_bytes(c[0], c[1]))
        .collect()
}

/// `ebb run --profile --profile-every --svg`: the helper leaks 4 MiB in each of 4 steps,
/// each once the profile of the step before is written, then stays idle for 20
/// intervals. The table over time marks `leak_blocks` (under `leak_more`) as rising,
/// its columns grow to the leak, the chart names it, the JSON holds the same series,
/// and the idle intervals wrote
/// nothing (a watcher that wrote every interval would have written 20 more); `ebb top`
/// over the files, in any order, gives the same table.
#[test]
fn profile_over_time_shows_the_site_that_keeps_growing() {
    let prefix = scratch("steps");
    let svg = scratch("steps-chart.svg");
    let json = scratch("steps-run.json");
    let args = profiled_run(
        &prefix,
        &[
            "--profile-every",
            "100ms",
            "--svg",
            svg.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ],
        &["leak-steps", "4", "4", "20"],
    );
    let out = ebb(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let table = table_under(&text, "live over time");
    let row = table
        .lines()
        .find(|l| l.ends_with("leak_blocks"))
        .unwrap_or_else(|| panic!("no leak_blocks row: {text}"));
    assert!(
        row.trim_start().starts_with('^'),
        "not marked rising: {text}"
    );
    let values = series_values(row.trim_start());
    let (columns, growth) = (&values[..values.len() - 1], values[values.len() - 1]);
    assert!(columns.len() >= 4, "a profile after each step: {text}");
    assert!(columns.windows(2).all(|w| w[0] <= w[1]), "{text}");
    let leaked = *columns.last().unwrap();
    assert!(
        (11.0 * MIB..22.0 * MIB).contains(&leaked),
        "{leaked}: {text}"
    );
    assert!(growth > 0.5 * leaked, "{growth}: {text}");
    assert!(
        table
            .lines()
            .nth(1)
            .is_some_and(|l| l.contains(" s ") && l.contains("growth")),
        "columns headed by seconds into the run: {text}"
    );

    // The chart stacks the sites' live bytes under the RSS: the leak by name.
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(
        chart.contains("heap profiles of pid") && chart.contains("leak_blocks"),
        "{chart}"
    );

    // The JSON holds the same series: the leak's bytes never fall, up to the table's.
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let over_time = &run["profile_over_time"];
    let leak = over_time["sites"]
        .as_array()
        .and_then(|sites| sites.iter().find(|s| s["site"] == "leak_blocks"))
        .unwrap_or_else(|| panic!("{over_time}"));
    let bytes: Vec<i64> = leak["inuse_bytes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_i64().unwrap())
        .collect();
    assert_eq!(bytes.len(), over_time["times_s"].as_array().unwrap().len());
    assert!(bytes.windows(2).all(|w| w[0] <= w[1]), "{over_time}");
    let last = *bytes.last().unwrap() as f64;
    assert!(
        (last - leaked).abs() < 0.01 * leaked,
        "the table's {leaked}: {over_time}"
    );

    let dir = prefix.parent().unwrap();
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("steps.")
        })
        .collect();
    let sequence = files
        .iter()
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let parts: Vec<&str> = name.split('.').collect();
            parts.len() == 5 && parts[2].bytes().all(|b| b.is_ascii_digit())
        })
        .count();
    assert!(
        (4..=13).contains(&sequence),
        "{sequence} profiles on the timer for 4 steps and 20 idle intervals: {files:?}"
    );

    let mut shuffled = files.clone();
    shuffled.sort_by_key(|p| std::cmp::Reverse(p.clone()));
    let mut top = vec!["top".to_string()];
    top.extend(shuffled.iter().map(|p| p.to_str().unwrap().to_string()));
    let out = ebb(&top.iter().map(String::as_str).collect::<Vec<_>>());
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", stderr(&out));
    let row = printed
        .lines()
        .find(|l| l.ends_with("leak_blocks"))
        .unwrap_or_else(|| panic!("{printed}"));
    assert!(row.starts_with('^'), "{printed}");
    let again = series_values(row);
    assert_eq!(
        again.len(),
        sequence + 2,
        "every profile and the growth: {printed}"
    );
    assert!(
        again[..again.len() - 1].windows(2).all(|w| w[0] <= w[1]),
        "oldest first: {printed}"
    );
    assert!(
        printed.contains("left out, profiles at the peak"),
        "{printed}"
    );
}

/// `ebb flame` on the leak's profile: the live flame graph's widest frame on top of a
/// stack is `leak_blocks`, its folded stacks end in it with the sampled bytes, and
/// the allocated one shows `churn_blocks` with what `ebb top` gave; a profile minus
/// itself is an error, not an empty picture.
fn flame_draws_the_leak(profile: &str, churned: f64) {
    let svg = scratch("leak-flame.svg");
    let folded = scratch("leak-folded.txt");
    let out = ebb(&[
        "flame",
        "-o",
        svg.to_str().unwrap(),
        "--folded",
        folded.to_str().unwrap(),
        profile,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = std::fs::read_to_string(&folded).unwrap();
    let leaked: f64 = lines
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(stack, _)| stack.ends_with(";leak_blocks"))
        .map(|(_, v)| v.parse::<f64>().unwrap())
        .sum();
    assert!((24.0 * MIB..40.0 * MIB).contains(&leaked), "{lines}");
    // Each frame of the SVG is a <g> whose <title> reads "NAME (VALUE bytes, P%)".
    let text = std::fs::read_to_string(&svg).unwrap();
    // inferno writes a DOCTYPE, which roxmltree parses only when allowed.
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    let doc =
        roxmltree::Document::parse_with_options(&text, options).expect("the flame graph is XML");
    let titles: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("title"))
        .filter_map(|n| n.text())
        .collect();
    assert!(
        titles.iter().any(|t| t.starts_with("leak_blocks (")),
        "no leak_blocks frame among {titles:?}"
    );
    let out = ebb(&[
        "flame",
        "--index",
        "alloc_space",
        "-o",
        svg.to_str().unwrap(),
        profile,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(said.contains("alloc_space: "), "{said}");
    let text = std::fs::read_to_string(&svg).unwrap();
    let churn_bytes = text
        .split("churn_blocks (")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .map(|n| n.replace(',', "").parse::<f64>().unwrap())
        .unwrap_or_else(|| panic!("no churn_blocks frame"));
    assert!(
        (churn_bytes - churned).abs() <= churned * 0.01,
        "{churn_bytes} vs {churned}"
    );
    let out = ebb(&["flame", "--base", profile, profile]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("nothing to draw"), "{}", stderr(&out));
}

/// A server stopped by ebb writes no profile at exit: `ebb run --profile` asks each of
/// its processes for one on a signal before stopping it, and shows what was live then.
#[test]
fn profile_of_a_server_is_taken_before_it_is_stopped() {
    let prefix = scratch("server-heap");
    let args = profiled_run(
        &prefix,
        &["--ready", "ready", "--idle", "500ms"],
        &["leaky-server", "16"],
    );
    let out = ebb(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let leaked = leak_when_stopped(&text);
    assert!(
        (12.0 * MIB..20.0 * MIB).contains(&leaked),
        "{leaked}: {text}"
    );
    assert!(text.contains("stopped by ebb"), "{text}");
}

/// The profiler is ebb's: asking for it under another allocator, or for a sample type a
/// profile lacks, is a one-line error.
#[test]
fn profile_errors_are_one_line() {
    let out = ebb(&[
        "run",
        "--alloc",
        "glibc",
        "--profile",
        "/tmp/x",
        "--",
        HELPER,
        "exit",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("--profile needs --alloc ebb"),
        "{}",
        stderr(&out)
    );
    let out = ebb(&[
        "run",
        "--profile",
        "/nonexistent/heap",
        "--",
        HELPER,
        "exit",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no such directory"),
        "{}",
        stderr(&out)
    );
    let out = ebb(&["run", "--profile-rate", "64k", "--", HELPER, "exit", "0"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "--profile-rate alone: {}",
        stderr(&out)
    );
    let out = ebb(&["top", "/nonexistent.pb.gz"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
}

/// Ctrl-C stops a plain command's tree too: its processes write their profiles on the
/// signal first, as a server's do.
#[test]
fn profile_is_taken_when_ctrl_c_stops_the_run() {
    let prefix = scratch("interrupted-heap");
    let child = Command::new(EBB)
        .args(profiled_run(&prefix, &[], &["leaky-server", "16"]))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let ebb_pid = child.id();
    // Wait until the helper has touched its 16 MiB (the profiler's signal handler is
    // installed before its first allocation returns).
    let rss_kib = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            })
            .unwrap_or(0)
    };
    // (Bounded only so that a broken helper fails the test instead of hanging it.)
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !children_of(ebb_pid)
        .iter()
        .any(|&pid| rss_kib(pid) >= 16 * 1024)
    {
        assert!(
            std::time::Instant::now() < give_up,
            "the helper never touched 16 MiB"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: sends SIGINT to the ebb process this test started.
    unsafe { libc::kill(ebb_pid as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(130), "{text}");
    let leaked = leak_when_stopped(&text);
    assert!(
        (12.0 * MIB..20.0 * MIB).contains(&leaked),
        "{leaked}: {text}"
    );
}

/// A C++ program built as most are (`-O2`, no frame pointers), whose objects come from
/// `new` and `std::string`, through libstdc++'s `operator new` (which keeps no frame
/// pointer, and in `std::string`'s case is reached by a tail call): each block is
/// charged to the function that made it, not to `operator new` or a stale frame of
/// another function (before, every site was `operator new` and the strings' caller
/// was `keep_nodes`, a frame left on the stack by the call before).
#[test]
fn profile_of_cpp_names_the_callers_of_new() {
    const SOURCE: &str = r#"
#include <cstdio>
#include <string>
#include <vector>
struct Node { char pad[200]; };
__attribute__((noinline)) void keep_nodes(std::vector<Node*>& v, int n) {
    for (int i = 0; i < n; i++) v.push_back(new Node());
}
__attribute__((noinline)) void keep_strings(std::vector<std::string>& v, int n) {
    for (int i = 0; i < n; i++) v.push_back(std::string(300, 'x'));
}
int main() {
    std::vector<Node*> nodes;
    std::vector<std::string> strings;
    keep_nodes(nodes, 50000);
    keep_strings(strings, 50000);
    std::printf("%zu %zu\n", nodes.size(), strings.size());
}
"#;
    let src = scratch("leak.cpp");
    let exe = scratch("leak-cpp");
    std::fs::write(&src, SOURCE).unwrap();
    let built = Command::new("g++")
        .args(["-O2", "-g", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("g++ (the C++ compiler) runs");
    assert!(built.status.success(), "{}", stderr(&built));
    let prefix = scratch("cpp-heap");
    let out = run_profiled(&prefix, &[exe.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let profile = std::fs::read_dir(prefix.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("cpp-heap.")
        })
        .expect("a profile written");
    let top = ebb(&["top", "--index", "alloc_space", profile.to_str().unwrap()]);
    let table = String::from_utf8_lossy(&top.stdout);
    assert!(top.status.success(), "{}", stderr(&top));
    // 50,000 nodes of 200 B (and their vector's growth); 50,000 strings of 301 B (and
    // theirs): 10.4 and 18.1 MiB; sampled every 64 KiB on average.
    let nodes = flat_of(&table, "keep_nodes").unwrap_or_else(|| panic!("{table}"));
    let strings = flat_of(&table, "keep_strings").unwrap_or_else(|| panic!("{table}"));
    assert!((8.0 * MIB..13.0 * MIB).contains(&nodes), "{table}");
    assert!((14.0 * MIB..22.0 * MIB).contains(&strings), "{table}");
    assert!(
        !table.contains("operator new") && !table.contains(" 0x"),
        "{table}"
    );
    // pprof's view keeps libstdc++'s frames: the strings' site is its constructor.
    let top = ebb(&[
        "top",
        "--std-sites",
        "--index",
        "alloc_space",
        profile.to_str().unwrap(),
    ]);
    let table = String::from_utf8_lossy(&top.stdout);
    assert!(
        flat_of(&table, "_M_construct").is_some_and(|b| b > 10.0 * MIB),
        "{table}"
    );
}

/// A Rust program on ebb run by `ebb run` holds two ebb instances (its own and the
/// preloaded `libebb.so`, which serves its C code), each writing a profile: the run's
/// tables are both merged, so the Rust code's leak and the C code's are each within
/// sampling error of the 16 MiB it leaked, side by side.
///
/// Built with the whole workspace (`cargo test --workspace`), the helper's `ebb` has
/// the `override` feature `ebb-capi` asks for (Cargo unifies features across the
/// packages it builds together): its executable exports `malloc`, which the dynamic
/// linker finds before the preloaded library's, so one instance serves both sides and
/// writes one profile. The tables must hold both leaks either way.
#[test]
fn profile_of_rust_on_ebb_holds_its_c_code_too() {
    let prefix = scratch("two");
    let helper = env!("CARGO_BIN_EXE_ebb-test-rust-on-ebb");
    let out = run_profiled(&prefix, &[helper, "leak-both", "16"]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let dir = prefix.parent().unwrap();
    let written = |ext: &str| {
        std::fs::read_dir(dir).unwrap().flatten().any(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("two.") && !name.contains(".peak.") && name.ends_with(ext)
        })
    };
    let two_instances = written(".pb.gz") && written(".raw");
    assert_eq!(
        text.contains("the process's other ebb instance, merged"),
        two_instances,
        "two instances: {two_instances}\n{text}"
    );
    let live = table_under(&text, "still live at exit");
    for site in ["rust_leak", "c_leak"] {
        let bytes = flat_of(live, site).unwrap_or_else(|| panic!("no {site}: {text}"));
        let mib = bytes / (1 << 20) as f64;
        assert!((12.0..=20.0).contains(&mib), "{site}: {mib} MiB\n{text}");
    }
    if !two_instances {
        return;
    }
    // `ebb top` of the two files the process wrote at exit: one table holding both
    // instances' sites (it printed a series of two moments before).
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path().to_string_lossy().into_owned())
        .filter(|p| p.contains("/two.") && !p.contains(".peak."))
        .collect();
    files.sort();
    let mut args = vec!["top", "-n", "10"];
    args.extend(files.iter().map(String::as_str));
    let out = ebb(&args);
    let top = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{top}{}", stderr(&out));
    assert!(top.contains("two ebb instances"), "{top}");
    assert!(!top.contains("+0.0 s"), "one moment, not a series: {top}");
    for site in ["rust_leak", "c_leak"] {
        let bytes = flat_of(&top, site).unwrap_or_else(|| panic!("no {site}: {top}"));
        let mib = bytes / (1 << 20) as f64;
        assert!((12.0..=20.0).contains(&mib), "{site}: {mib} MiB\n{top}");
    }
    // `ebb flame` of the two: one graph holding both instances' stacks.
    let (svg, folded) = (scratch("two-flame.svg"), scratch("two-flame.folded"));
    let mut args = vec![
        "flame",
        "-o",
        svg.to_str().unwrap(),
        "--folded",
        folded.to_str().unwrap(),
    ];
    args.extend(files.iter().map(String::as_str));
    let out = ebb(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let stacks = std::fs::read_to_string(&folded).unwrap();
    for site in ["rust_leak", "c_leak"] {
        assert!(
            stacks
                .lines()
                .any(|l| l.split(' ').next().unwrap().ends_with(site)),
            "no {site} stack: {stacks}"
        );
    }
    // `ebb top` of one of them names the other.
    let pb = files.iter().find(|f| f.ends_with(".pb.gz")).unwrap();
    let out = ebb(&["top", pb]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("same process's other ebb instance"),
        "{}",
        stderr(&out)
    );
}

/// `ebb run --profile --profile-every` of a Rust program on ebb whose C code the
/// preloaded `libebb.so` serves: the table over time holds both instances' sites (it
/// held only the busier instance's before), each rising in every step.
#[test]
fn profile_over_time_of_rust_on_ebb_holds_both_instances() {
    let prefix = scratch("two-steps");
    let helper = env!("CARGO_BIN_EXE_ebb-test-rust-on-ebb");
    let args = profiled_run(
        &prefix,
        &["--profile-every", "100ms"],
        &["leak-both-steps", "4", "3"],
    );
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    let at = args.iter().position(|&a| a == HELPER).unwrap();
    args[at] = helper;
    let out = ebb(&args);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let table = table_under(&text, "live over time");
    for site in ["rust_leak", "c_leak"] {
        let row = table
            .lines()
            .find(|l| l.ends_with(site))
            .unwrap_or_else(|| panic!("no {site} row: {text}"));
        let values = series_values(row.trim_start());
        let columns = &values[..values.len() - 1];
        assert!(columns.len() >= 3, "a moment after each step: {text}");
        assert!(columns.windows(2).all(|w| w[0] <= w[1]), "{site}: {text}");
        let last = *columns.last().unwrap() / MIB;
        assert!((9.0..=15.0).contains(&last), "{site}: {last} MiB\n{text}");
    }
}
