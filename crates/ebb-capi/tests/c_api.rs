//! Tests of the C ABI through real C and C++ programs.
//!
//! Each program in `tests/c/` is compiled with the system compiler (`cc`, `c++`, or
//! `$CC`/`$CXX`) into `$CARGO_TARGET_TMPDIR/ebb-capi-c/<profile>/`, then run with
//! `LD_PRELOAD` set to the `libebb.so` of this test's profile (`target/<profile>/`,
//! the parent of the `deps` directory holding this executable), which the tests first
//! bring up to date with `cargo build -p ebb-capi --profile <profile>`: cargo does not
//! build a cdylib-only library for the integration tests of its package. Every program reports whether ebb served it (`ebb=yes`, found through
//! `dlsym(RTLD_DEFAULT, "ebb_stats")` and checked against ebb's statistics), and where
//! the behaviour is glibc's too, the same program also runs without `LD_PRELOAD` and
//! the two outputs are compared.
//!
//! Needs a C and a C++ compiler (Debian: `gcc`, `g++`).

mod c_support;

use c_support::*;
use std::os::unix::process::ExitStatusExt;
// ------------------------------------------------------------------------------------
// The malloc family and the ebb_* functions (tests/c/api.c)

/// A check that glibc skips (older glibc behaves differently) counts as the same check.
fn api_check_names(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| !l.starts_with("ok ebb:") && !l.starts_with("skip ebb_*"))
        .filter_map(|l| {
            if let Some(name) = l.strip_prefix("ok ") {
                Some(name.to_string())
            } else {
                let skipped = l.strip_prefix("skip ")?;
                Some(
                    skipped
                        .rsplit_once(" (")
                        .map_or(skipped, |(name, _)| name)
                        .to_string(),
                )
            }
        })
        .collect()
}

#[test]
fn api_edge_cases_match_glibc() {
    let exe = program("api.c");
    let ebb = run(&exe, &[], true, &[]);
    ebb.assert_success()
        .assert_ebb(true)
        .assert_stdout_has("all checks passed")
        // ebb_stats_print writes to stderr.
        .assert_stderr_has("ebb stats:");
    assert!(
        !ebb.stdout.lines().any(|l| l.starts_with("skip ")),
        "a check was skipped under ebb:\n{}",
        ebb.describe()
    );
    let ebb_only = ebb
        .stdout
        .lines()
        .filter(|l| l.starts_with("ok ebb:"))
        .count();
    assert!(
        ebb_only >= 8,
        "only {ebb_only} ebb-specific checks ran\n{}",
        ebb.describe()
    );
    assert!(
        !ebb.stderr.contains("ebb: free("),
        "spurious error report\n{}",
        ebb.describe()
    );

    let glibc = run(&exe, &[], false, &[]);
    glibc
        .assert_success()
        .assert_ebb(false)
        .assert_stdout_has("all checks passed");
    let names = api_check_names(&ebb.stdout);
    assert!(names.len() > 60, "too few checks ran: {}", names.len());
    assert_eq!(
        names,
        api_check_names(&glibc.stdout),
        "checks differ between ebb and glibc\n{}\n{}",
        ebb.describe(),
        glibc.describe()
    );
}

#[test]
fn api_edge_cases_in_check_mode() {
    let run = run(&program("api.c"), &[], true, &[("EBB_CHECK", "1")]);
    run.assert_success()
        .assert_ebb(true)
        .assert_stdout_has("all checks passed");
    assert!(
        !run.stderr.contains("ebb: free("),
        "check mode reported a valid free\n{}",
        run.describe()
    );
}

#[test]
fn api_edge_cases_with_immediate_purge_and_no_purger_thread() {
    let env = [("EBB_PURGE_DELAY", "0"), ("EBB_BACKGROUND", "0")];
    run(&program("api.c"), &[], true, &env)
        .assert_success()
        .assert_ebb(true)
        .assert_stdout_has("all checks passed");
}

#[test]
fn show_stats_prints_at_exit() {
    let exe = program("api.c");
    let with = run(&exe, &["free_null"], true, &[("EBB_SHOW_STATS", "1")]);
    with.assert_success().assert_stderr_has("ebb stats:");
    let without = run(&exe, &["free_null"], true, &[]);
    without.assert_success();
    assert!(
        !without.stderr.contains("ebb stats:"),
        "{}",
        without.describe()
    );
}

/// `EBB_SHOW_STATS=json` prints one JSON line; `EBB_STATS_FILE` writes one file per
/// process (`%p`), forked children included.
#[test]
fn stats_as_json_at_exit_and_in_files() {
    let exe = program("fork.c");
    let dir = std::env::temp_dir().join(format!("ebb-stats-file-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let pattern = dir.join("stats.%p.json");
    let run = run(
        &exe,
        &[],
        true,
        &[
            ("EBB_SHOW_STATS", "json"),
            ("EBB_STATS_FILE", pattern.to_str().unwrap()),
        ],
    );
    run.assert_success().assert_ebb(true);
    let json_lines = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("{\"ebb_stats_version\":1,") && l.ends_with("]}"))
        .count();
    assert!(json_lines >= 1, "no JSON report: {}", run.describe());
    assert!(!run.stderr.contains("ebb stats:"), "{}", run.describe());
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(!files.is_empty(), "no stats file in {}", dir.display());
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let name = f.file_name().unwrap().to_str().unwrap();
        let pid = name.trim_start_matches("stats.").trim_end_matches(".json");
        assert!(
            text.starts_with("{\"ebb_stats_version\":1,")
                && text.contains(&format!("\"pid\":{pid},"))
                && text.ends_with("]}\n"),
            "{name}: {text}"
        );
    }
    // Every process that exits through exit() writes its own file: the parent, and
    // the children unless they leave with _exit.
    assert_eq!(
        files.len(),
        json_lines,
        "files {files:?} vs {json_lines} JSON lines"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The figure `"name":N` of a stats JSON object.
fn json_figure(json: &str, name: &str) -> u64 {
    let key = format!("\"{name}\":");
    let at = json
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {json}"))
        + key.len();
    json[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("bad {name} in {json}"))
}

/// A thread alone in its process takes its own abandoned pages back when it frees into
/// them, instead of pushing each free for the background collector (issue 20: a third
/// of perl's frees were such pushes).
#[test]
fn single_thread_frees_into_its_old_pages_stay_local() {
    let dir = std::env::temp_dir().join(format!("ebb-solo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("stats.json");
    let run = run(
        &program("solo.c"),
        &[],
        true,
        &[("EBB_STATS_FILE", file.to_str().unwrap())],
    );
    run.assert_success().assert_stdout_has("done");
    let json = std::fs::read_to_string(&file).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let abandoned = json_figure(&json, "abandon_events");
    let reclaimed = json_figure(&json, "reclaim_events");
    let collected = json_figure(&json, "collect_events");
    assert!(abandoned >= 100, "too few pages abandoned to tell: {json}");
    assert!(
        reclaimed * 10 >= abandoned * 9 && collected * 10 <= abandoned,
        "{abandoned} pages abandoned, {reclaimed} taken back, {collected} collected: {json}"
    );
}

/// A program that allocates a few KiB stays under 3 MB of RSS with ebb (issue 5's
/// target; mimalloc v3 starts at 5-6 MB here).
#[test]
fn trivial_program_stays_under_3_mb() {
    let run = run(&program("trivial.c"), &[], true, &[]);
    run.assert_success().assert_ebb(true);
    let hwm_kb: u64 = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("hwm_kb="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no hwm_kb line: {}", run.describe()));
    assert!(hwm_kb < 3000, "peak RSS {hwm_kb} kB: {}", run.describe());
}

/// Preloading ebb maps no shared object but `libebb.so` itself. Each library a process
/// maps costs it resident pages and start-up time: `libm`, once pulled in by an
/// `f64::exp` in `ebb-pprof`, put 300-400 KiB on the RSS of every process ebb was
/// preloaded into, and `libgcc_s` (Rust's unwinder) ~110 µs of its constructor's CPU
/// probing. `libgcc_s` is allowed only where the build found no static `libgcc_eh.a`
/// to link in its place (`build.rs`).
#[test]
fn preloading_maps_no_other_library() {
    let exe = program("trivial.c");
    let libraries = |run: &Run| -> std::collections::BTreeSet<String> {
        run.stdout
            .lines()
            .filter_map(|l| l.strip_prefix("so="))
            .map(|path| path.rsplit('/').next().unwrap_or(path).to_string())
            .collect()
    };
    let ebb = run(&exe, &["maps"], true, &[]);
    ebb.assert_success().assert_ebb(true);
    let glibc = run(&exe, &["maps"], false, &[]);
    glibc.assert_success().assert_ebb(false);
    let (with_ebb, without) = (libraries(&ebb), libraries(&glibc));
    assert!(
        without.iter().any(|so| so.starts_with("libc.so")),
        "the program lists no libc: {}",
        glibc.describe()
    );
    let added: Vec<&String> = with_ebb.difference(&without).collect();
    let shared_unwinder = env!("EBB_STATIC_UNWINDER") == "0";
    assert!(
        added.iter().all(
            |so| so.starts_with("libebb") || (shared_unwinder && so.starts_with("libgcc_s.so"))
        ),
        "preloading ebb mapped {added:?} besides libebb.so: {}",
        ebb.describe()
    );
    assert!(
        added.iter().any(|so| so.starts_with("libebb")),
        "libebb.so not among the mapped objects: {}",
        ebb.describe()
    );
}

/// The exit report survives a program that closes fd 2 in its own atexit handler.
#[test]
fn show_stats_survives_closed_stderr() {
    let run = run(
        &program("trivial.c"),
        &["close_stderr"],
        true,
        &[("EBB_SHOW_STATS", "1")],
    );
    run.assert_success()
        .assert_ebb(true)
        .assert_stderr_has("ebb stats:");
}

/// Regression: aligned_alloc/memalign/posix_memalign(16, n <= 8) once returned blocks of
/// the 8-byte class, only 8-byte aligned.
#[test]
fn aligned_16_small_sizes_are_16_aligned() {
    let run = run(&program("api.c"), &["bug_aligned16_small"], true, &[]);
    run.assert_success().assert_ebb(true);
}

/// Regression: realloc once moved a large block shrunk to <= 512 KiB (or a huge one shrunk
/// to <= 16 MiB) although it stayed at least half used.
#[test]
fn realloc_in_place_for_large_and_huge_blocks() {
    let run = run(&program("api.c"), &["bug_realloc_in_place_big"], true, &[]);
    run.assert_success().assert_ebb(true);
}

// ------------------------------------------------------------------------------------
// Invalid frees (tests/c/check.c)

/// Run a scenario of check.c under ebb; returns the run and the bad pointer it printed.
fn check_scenario(scenario: &str, env: &[(&str, &str)]) -> (Run, String) {
    let run = run(&program("check.c"), &[scenario], true, env);
    let ptr = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("ptr="))
        .unwrap_or_else(|| panic!("no ptr= line\n{}", run.describe()))
        .to_string();
    (run, ptr)
}

#[track_caller]
fn assert_continued(run: &Run) {
    run.assert_success()
        .assert_stdout_has("invalid_frees=1\n")
        .assert_stdout_has("continued\n");
}

#[track_caller]
fn assert_aborted(run: &Run) {
    assert_eq!(
        run.status.signal(),
        Some(SIGABRT),
        "expected SIGABRT: {}",
        run.describe()
    );
    assert!(!run.stdout.contains("continued"), "{}", run.describe());
}

/// SIGABRT on Linux.
const SIGABRT: i32 = 6;

#[test]
fn check_mode_reports_invalid_frees_and_continues() {
    let check = [("EBB_CHECK", "1"), ("EBB_ABORT_ON_ERROR", "0")];
    for (scenario, message) in [
        ("stack", "pointer not allocated by ebb"),
        ("global", "pointer not allocated by ebb"),
        ("interior", "pointer not allocated by ebb"),
        ("double", "double free"),
        ("double_large", "double free"),
        ("double_owned_elsewhere", "double free"),
        (
            "never_allocated",
            "double free (the block is not allocated)",
        ),
    ] {
        let (run, ptr) = check_scenario(scenario, &check);
        assert_continued(&run);
        run.assert_stderr_has(&format!("ebb: free({ptr}): {message}"));
    }
}

#[test]
fn check_mode_aborts_when_asked() {
    let env = [("EBB_CHECK", "1"), ("EBB_ABORT_ON_ERROR", "1")];
    for (scenario, message) in [
        ("stack", "pointer not allocated by ebb"),
        ("interior", "pointer not allocated by ebb"),
        ("double", "double free"),
    ] {
        let (run, ptr) = check_scenario(scenario, &env);
        assert_aborted(&run);
        run.assert_stderr_has(&format!("ebb: free({ptr}): {message}"));
    }
}

/// C++ `operator new` and `delete` in every form are ebb's own (`c_api/cxx.rs`), and a
/// failed `new` still behaves as the C++ runtime's: with ebb's mappings capped
/// (`EBB_FAULT_BUDGET`) a 48 MiB `new` fails, the new-handler frees a 40 MiB reserve and
/// the retry is served; with no handler `std::bad_alloc` is thrown through ebb's frame
/// and caught; a nothrow `new` gives null. The same program under glibc's runtime (a
/// size nothing can serve) prints the same checks from libstdc++'s operators.
#[test]
fn cxx_operators_are_ebbs_and_fail_as_cxx_says() {
    let exe = program("cxx_operators.cpp");
    let ebb = run(&exe, &[], true, &[("EBB_FAULT_BUDGET", "100000000")]);
    ebb.assert_success()
        .assert_stdout_has("new_from=libebb.so")
        .assert_stdout_has("delete_from=libebb.so")
        .assert_stdout_has("handler_calls=1")
        .assert_stdout_has("served_after_handler=yes")
        .assert_stdout_has("failures=0");
    let glibc = run(&exe, &["huge"], false, &[]);
    glibc
        .assert_success()
        .assert_stdout_has("new_from=libstdc++")
        .assert_stdout_has("handler_calls=1")
        .assert_stdout_has("served_after_handler=no");
    let checks = |run: &Run| -> Vec<String> {
        run.stdout
            .lines()
            .filter(|l| l.starts_with("ok ") || l.starts_with("FAIL "))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(checks(&ebb), checks(&glibc), "{}", ebb.describe());
}

/// Pointers outside every ebb region are caught without check mode.
#[test]
fn foreign_pointers_are_reported_without_check_mode() {
    for scenario in ["global", "stack"] {
        let (run, ptr) = check_scenario(scenario, &[]);
        assert_continued(&run);
        run.assert_stderr_has(&format!("ebb: free({ptr}): pointer not allocated by ebb"));

        let (run, ptr) = check_scenario(scenario, &[("EBB_ABORT_ON_ERROR", "1")]);
        assert_aborted(&run);
        run.assert_stderr_has(&format!("ebb: free({ptr}): pointer not allocated by ebb"));
    }
    let (run, ptr) = check_scenario("realloc_foreign", &[]);
    assert_continued(&run);
    run.assert_stderr_has(&format!(
        "ebb: realloc({ptr}): pointer not allocated by ebb"
    ));
}

/// Freeing a large span or a huge mapping twice is caught even without check mode.
#[test]
fn double_free_of_large_and_huge_blocks_is_reported() {
    let go_on = ("EBB_ABORT_ON_ERROR", "0");
    let (run, ptr) = check_scenario("double_large", &[go_on]);
    assert_continued(&run);
    run.assert_stderr_has(&format!(
        "ebb: free({ptr}): block is not in use (double free?)"
    ));
    // A huge block's mapping is gone after the first free.
    for env in [&[go_on][..], &[("EBB_CHECK", "1"), go_on][..]] {
        let (run, ptr) = check_scenario("double_huge", env);
        assert_continued(&run);
        run.assert_stderr_has(&format!("ebb: free({ptr}): "));
    }
}

#[test]
fn show_errors_off_silences_reports_but_counts_them() {
    let (run, _) = check_scenario("global", &[("EBB_SHOW_ERRORS", "0")]);
    assert_continued(&run);
    assert!(!run.stderr.contains("ebb:"), "{}", run.describe());
}

// ------------------------------------------------------------------------------------
// Threads, fork, C++, constructors

#[test]
fn fork_from_multithreaded_process() {
    let exe = program("fork.c");
    for env in [&[][..], &[("EBB_CHECK", "1")][..]] {
        run(&exe, &[], true, env)
            .assert_success()
            .assert_ebb(true)
            .assert_stdout_has("children ok: 20\ndone\n");
    }
    run(&exe, &[], false, &[])
        .assert_success()
        .assert_ebb(false)
        .assert_stdout_has("children ok: 20\ndone\n");
}

#[test]
fn blocks_outlive_their_threads_and_free_only_threads() {
    let ebb = run_both("threads.c", &[]);
    ebb.assert_stdout_has("done\n");
    run(&program("threads.c"), &[], true, &[("EBB_CHECK", "1")])
        .assert_success()
        .assert_stdout_has("done\n");
}

#[test]
fn cpp_threads_delete_each_others_objects() {
    let ebb = run_both("cpp_threads.cpp", &[]);
    ebb.assert_stdout_has("items=80000 bad=0\n")
        .assert_stdout_has("done\n");
}

#[test]
fn malloc_in_constructors_threads_and_inside_libc() {
    let ebb = run_both("ctor.c", &[]);
    // The destructor runs after main and the atexit handler, under ebb too.
    assert!(
        ebb.stdout.ends_with("done\ndestructor ran\n"),
        "{}",
        ebb.describe()
    );
    run(&program("ctor.c"), &[], true, &[("EBB_CHECK", "1")])
        .assert_success()
        .assert_stdout_has("destructor ran\n");
}

/// The retention report of a process where a second allocator (the program's own
/// arena over `mmap`, as LMDB-style libraries carry) holds 300 MiB: the parts add up
/// to RSS, and the arena is listed, largest first, as anonymous memory ebb does not
/// own, by its address range. `EBB_REPORT` writes the same report at exit.
#[test]
fn retention_names_memory_of_another_allocator() {
    let dir = std::env::temp_dir().join(format!("ebb-retention-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let json_file = dir.join("report.%p.json");
    let run = run(
        &program("foreign_arena.c"),
        &[],
        true,
        &[("EBB_REPORT", json_file.to_str().unwrap())],
    );
    run.assert_success()
        .assert_ebb(true)
        .assert_stdout_has("done");
    let line = |prefix: &str| {
        run.stdout
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in {}", run.describe()))
            .to_string()
    };
    let arena = line("arena=");
    let (start, end) = arena.split_once('-').unwrap();
    let start = u64::from_str_radix(start, 16).unwrap();
    let end = u64::from_str_radix(end, 16).unwrap();
    let json = line("retention=");
    let rss = json_figure(&json, "rss");
    let total = json_figure(&json, "parts_total");
    assert!(
        total.abs_diff(rss) * 100 <= rss * 3,
        "parts {total} vs RSS {rss}: {json}"
    );
    let foreign = json_figure(&json, "foreign_anon");
    assert!(foreign >= 300 << 20, "arena not counted as foreign: {json}");
    // ebb holds its 12 MiB of live blocks and some free ones; not the arena.
    let ebb_total = json_figure(&json, "ebb_total");
    assert!(
        (12 << 20..100 << 20).contains(&ebb_total),
        "ebb's part {ebb_total}: {json}"
    );
    // The first listed foreign mapping is the arena (it may have merged with a
    // neighbouring anonymous mapping, so it contains the arena's range).
    let first = &json[json
        .find("\"foreign\":[{")
        .expect("no foreign mapping listed")..];
    let listed_start = json_figure(first, "start");
    let listed_end = json_figure(first, "end");
    let listed = json_figure(first, "resident");
    assert!(
        listed_start <= start && end <= listed_end && listed >= 300 << 20,
        "first listed {listed_start:#x}-{listed_end:#x} ({listed} B) is not the arena \
         {start:#x}-{end:#x}: {json}"
    );
    // The exit report: one file, this process's.
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(
        text.starts_with("{\"ebb_retention_version\":1,") && text.ends_with("]}\n"),
        "{text}"
    );
    assert!(json_figure(&text, "foreign_anon") >= 300 << 20, "{text}");
    // Stamped, for a series: when it was measured, and that the exit asked for it.
    assert!(
        text.contains("\"trigger\":\"exit\"") && json_figure(&text, "measured_at_ms") > 0,
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `EBB_REPORT_SIGNAL=USR2`: a signal writes the report while the program runs (a
/// thread of ebb's writes it, not the signal handler, which may interrupt a thread
/// holding an allocator lock).
#[test]
fn retention_report_on_a_signal() {
    let dir = std::env::temp_dir().join(format!("ebb-retention-sig-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let pattern = dir.join("report.%p.txt");
    let run = run(
        &program("foreign_arena.c"),
        &[dir.to_str().unwrap()],
        true,
        &[
            ("EBB_REPORT", pattern.to_str().unwrap()),
            ("EBB_REPORT_SIGNAL", "USR2"),
        ],
    );
    run.assert_success()
        .assert_stdout_has("signal report seen")
        .assert_stdout_has("done");
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(
        text.starts_with("ebb retention report (pid ")
            && text.contains("of anonymous memory in")
            && text.contains("not ebb's: another allocator"),
        "{text}"
    );
    // The report the signal asked for, then the one at exit: appended, not replaced.
    assert!(
        text.matches("ebb retention report (pid ").count() >= 2,
        "one report only: {text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Arming the reports leaves a single-threaded program single-threaded: with
/// `EBB_REPORT_SIGNAL`, the first malloc starts the report's thread, whose creation
/// allocates on the calling thread (glibc's thread-local storage), and that inner malloc
/// made the thread's heap; the outer one then made a second, counted as a thread, so
/// every single-heap policy (`front/empty_pages.rs`) was off while the report watched.
#[test]
fn reports_armed_make_no_second_heap() {
    let dir = std::env::temp_dir().join(format!("ebb-armed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let stats = dir.join("stats.json");
    let report = dir.join("report.txt");
    for signal in [None, Some("USR2")] {
        let mut env = vec![
            ("EBB_STATS_FILE", stats.to_str().unwrap()),
            ("EBB_REPORT", report.to_str().unwrap()),
        ];
        if let Some(signal) = signal {
            env.push(("EBB_REPORT_SIGNAL", signal));
        }
        let run = run(&program("trivial.c"), &[], true, &env);
        run.assert_success().assert_ebb(true);
        let json = std::fs::read_to_string(&stats).unwrap();
        assert_eq!(
            (
                json_figure(&json, "threads_created"),
                json_figure(&json, "heaps_live")
            ),
            (1, 1),
            "EBB_REPORT_SIGNAL={signal:?}: {json}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// First-class heaps through the C API (tests/c/heap.c): allocation, frees by another
/// thread, destroy, delete, and a thread that allocates from a heap it does not own.
#[test]
fn first_class_heaps() {
    let run = run(&program("heap.c"), &[], true, &[]);
    run.assert_success().assert_ebb(true);
    for check in [
        "ok alloc calloc aligned realloc stats",
        "ok remote frees",
        "ok destroy",
        "ok delete",
        "ok misuse aborts",
    ] {
        assert!(
            run.stdout.contains(check),
            "{check} missing: {}",
            run.describe()
        );
    }
}

/// The same under check mode (every allocation recorded in the segment bitmap): no
/// error may be reported, although destroy gives spans back with their bits set.
#[test]
fn first_class_heaps_in_check_mode() {
    let run = run(&program("heap.c"), &[], true, &[("EBB_CHECK", "1")]);
    run.assert_success().assert_ebb(true);
    assert!(
        run.stdout.contains("ok misuse aborts"),
        "{}",
        run.describe()
    );
    assert!(!run.stderr.contains("ebb: free"), "{}", run.describe());
}

// ------------------------------------------------------------------------------------
// How libebb.so is laid out (crates/ebb-capi/build_layout.rs)

/// Defined functions of `library` by address: (address, size, demangled name).
fn functions_of(library: &std::path::Path) -> Vec<(u64, u64, String)> {
    let output = std::process::Command::new("nm")
        .args(["-C", "-S", "--defined-only"])
        .arg(library)
        .output()
        .expect("nm (binutils) runs");
    assert!(
        output.status.success(),
        "nm failed on {}",
        library.display()
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(4, ' ');
            let address = u64::from_str_radix(fields.next()?, 16).ok()?;
            let (size, kind, name) = match (fields.next()?, fields.next()?, fields.next()) {
                (size, kind, Some(name)) => (u64::from_str_radix(size, 16).ok()?, kind, name),
                // `frame_dummy` and other assembler labels have no size.
                (kind, name, None) => (0, kind, name),
            };
            matches!(kind, "t" | "T").then(|| (address, size, name.to_string()))
        })
        .collect()
}

/// The code a process runs at its first malloc and free, and once at start-up, lies
/// together, ahead of the rest of the allocator and apart from the heap profiler's
/// symbolizer, so that the kernel's 64 KiB fault-around windows map little else
/// (build_layout.rs says why). Fails with the linker script left out: the functions
/// then spread over 1.2 MiB with gimli and addr2line among them.
#[test]
fn startup_code_lies_together() {
    if env!("EBB_LINK_LAYOUT") != "1" {
        eprintln!("the linker did not take the layout script; nothing to check");
        return;
    }
    let functions = functions_of(libebb());
    let startup = [
        "malloc",
        "free",
        "calloc",
        "realloc",
        "ebb::front::heap::ensure_heap",
        "ebb::front::slow::malloc_slow",
        "ebb::front::slow::free_slow_inner",
        "ebb::span::arena::search_or_reserve",
        "ebb::span::segment::Segment::reserve_for",
        "ebb::os::linux::reserve_aligned",
        "ebb::options::load",
        "ebb::register_pprof_encoder",
        "std::sys::args::unix::imp::ARGV_INIT_ARRAY::init_wrapper",
        "frame_dummy",
        "pthread_atfork",
    ];
    let mut low = u64::MAX;
    let mut high = 0;
    for name in startup {
        let found: Vec<_> = functions.iter().filter(|(_, _, n)| n == name).collect();
        assert!(!found.is_empty(), "{name} is not in libebb.so");
        for (address, size, _) in found {
            low = low.min(*address);
            high = high.max(address + size);
        }
    }
    let inside: Vec<&String> = functions
        .iter()
        .filter(|(address, _, _)| (low..high).contains(address))
        .map(|(_, _, name)| name)
        .filter(|name| {
            ["gimli::", "addr2line::", "cpp_demangle::", "miniz_oxide::"]
                .iter()
                .any(|p| name.starts_with(p))
                || name.starts_with("ebb::span::huge::")
                || name.starts_with("ebb::front::guarded::")
        })
        .collect();
    assert!(
        inside.is_empty(),
        "start-up code at {low:#x}..{high:#x} has among it {inside:?}"
    );
    if profile_dir().ends_with("release") {
        assert!(
            high - low <= 128 * 1024,
            "start-up code spans {} KiB ({low:#x}..{high:#x}), more than two 64 KiB windows",
            (high - low) / 1024
        );
    }
}

/// The relative relocations are packed (`DT_RELR`) where the linker could: 0.6 KiB for
/// the loader to read instead of 57 KiB.
#[test]
fn relative_relocations_are_packed() {
    if env!("EBB_PACKED_RELOCS") != "1" {
        eprintln!("the linker did not take -z pack-relative-relocs; nothing to check");
        return;
    }
    let output = std::process::Command::new("readelf")
        .arg("-d")
        .arg(libebb())
        .output()
        .expect("readelf (binutils) runs");
    let dynamic = String::from_utf8_lossy(&output.stdout);
    assert!(
        dynamic.contains("(RELR)"),
        "no RELR entry in libebb.so's dynamic section:\n{dynamic}"
    );
}
