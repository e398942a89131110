//! Real programs with `LD_PRELOAD=libebb.so`, each compared with a run without it.
//!
//! Every test runs a real program (CPython, git, g++, Node.js, sort, ls, tar,
//! find/xargs/grep, awk) once on the system allocator and once with the `libebb.so` built next to this
//! test executable preloaded, and checks that
//! - both runs exit with status 0 (a run that hangs is killed after a timeout and fails),
//! - their output is identical (byte for byte, or for CPython's own test suite: passes),
//! - ebb really served the preloaded run: `EBB_SHOW_STATS=1` makes ebb print
//!   "ebb stats:" on stderr at exit, and the dynamic linker's own proof: with
//!   `LD_DEBUG=bindings` (written to files, not stderr) it must have bound the program's
//!   `malloc`/`free` to libebb.so. Programs that close their stderr before exit (GNU
//!   coreutils, tar, findutils, grep and mawk all do, from an `atexit` handler that runs
//!   before ebb's) still get the report: ebb writes it to a duplicate of the stderr the
//!   process started with. Both proofs are listed in each test's output.
//!
//! Tools: python3 (with CPython's `test` package for the regression-suite test), git,
//! g++, node (Debian's `nodejs`), coreutils, tar, findutils, grep, awk, bash. A missing
//! tool skips its test with a message, or fails it when the environment variable `CI`
//! is set.
//!
//! Scratch files go to `$CARGO_TARGET_TMPDIR/real_programs/<test>`; they are removed when
//! the test passes and kept (and named) when it fails.
//!
//! Regression tests `pthread_exit_*`: a process whose last thread ends with
//! `pthread_exit` must exit. Under ebb it once never did (the background purger thread
//! lived on; fixed in fc33705); CPython's test_threading found it.

#[path = "real_programs/support.rs"]
mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;
use support::*;

// ------------------------------------------------------------------------------------
// CPython

/// The real interpreter behind `python3` on PATH (pyenv's `python3` is a shell shim).
fn python3() -> Option<PathBuf> {
    static PY: OnceLock<Option<PathBuf>> = OnceLock::new();
    PY.get_or_init(|| {
        let out = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .env_remove("LD_PRELOAD")
            .output()
            .ok()?;
        let exe = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
        (out.status.success() && exe.is_file()).then_some(exe)
    })
    .clone()
}

/// An interpreter that has CPython's regression suite (the `test` package with its
/// test modules): `python3` on PATH (the machine's pyenv CPython has it), else Debian's
/// /usr/bin/python3 (which needs the package libpython3.11-testsuite).
fn python_with_test_suite() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = python3().into_iter().collect();
    candidates.extend(["/usr/bin/python3", "/usr/bin/python3.11"].map(PathBuf::from));
    candidates.into_iter().find(|py| {
        Command::new(py)
            .args([
                "-c",
                "import test.libregrtest, test.test_dict, test.test_json",
            ])
            .env_remove("LD_PRELOAD")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

#[test]
fn python_allocation_heavy_script() {
    let Some(py) =
        python3().or_else(|| missing("`python3` is not installed (Debian package: python3)"))
    else {
        return;
    };
    let scratch = Scratch::new("python_script");
    let script = program_file("alloc_heavy.py");
    let py_cmd = || {
        let mut cmd = command(&py, &[script.to_str().unwrap()], &scratch.dir);
        cmd.env("PYTHONMALLOC", "malloc").env("PYTHONHASHSEED", "0");
        cmd
    };
    let timeout = Duration::from_secs(300);
    let system = run(
        &scratch,
        "python alloc_heavy.py",
        Alloc::System,
        py_cmd(),
        timeout,
    );
    let ebb = run(
        &scratch,
        "python alloc_heavy.py",
        Alloc::Ebb,
        py_cmd(),
        timeout,
    );
    system.ok();
    ebb.ok().printed_stats(1);
    assert!(
        system.stdout_str().ends_with("done\n"),
        "script did not finish: {}",
        system.stdout_str()
    );
    same_stdout(&system, &ebb);
}

/// Test modules of CPython's regression suite run under ebb: about 9,000 tests in 44
/// files, 1 to 1.5 minutes with two worker processes on 2 cores.
const PYTHON_SUITE: &[&str] = &[
    "test_dict",
    "test_list",
    "test_tuple",
    "test_set",
    "test_deque",
    "test_collections",
    "test_string",
    "test_unicode",
    "test_str",
    "test_bytes",
    "test_format",
    "test_fstring",
    "test_json",
    "test_re",
    "test_csv",
    "test_difflib",
    "test_codecs",
    "test_unicodedata",
    "test_threading",
    "test_queue",
    "test_weakref",
    "test_gc",
    "test_sort",
    "test_heapq",
    "test_itertools",
    "test_functools",
    "test_array",
    "test_struct",
    "test_zlib",
    "test_hashlib",
    "test_sqlite3",
    "test_decimal",
    "test_long",
    "test_math",
    "test_statistics",
    "test_pickle",
    "test_io",
    "test_ast",
    "test_compile",
    "test_grammar",
    "test_builtin",
    "test_enum",
    "test_dataclasses",
    "test_typing",
    "test_bigmem",
];

/// Test cases left out of the suite run, by glob pattern, with why.
const PYTHON_SUITE_IGNORED: &[(&str, &str)] = &[
    // Fails without ebb too wherever a .pth file in site-packages imports threading at
    // start-up (this machine's does).
    (
        "test_import_from_another_thread",
        "environment: threading imported at start-up",
    ),
];

#[test]
fn python_regression_suite() {
    let Some(py) = python_with_test_suite().or_else(|| {
        missing(
            "no python3 with CPython's regression suite (`import test.test_dict` fails); \
             on Debian: apt-get install -y libpython3.11-testsuite",
        )
    }) else {
        return;
    };
    let scratch = Scratch::new("python_suite");
    let tmp = scratch.subdir("tmp");
    let suite_cmd = |names: &[&str]| {
        let wrapper = program_file("run_regrtest.py");
        let mut args = vec![wrapper.to_str().unwrap().to_string()];
        // Two worker processes; a test file hung for 5 minutes is killed by regrtest.
        args.extend(["-j2", "--timeout", "300", "-o"].map(String::from));
        for (pattern, _) in PYTHON_SUITE_IGNORED {
            args.extend(["-i".to_string(), pattern.to_string()]);
        }
        args.push("--".into());
        args.extend(names.iter().map(|s| s.to_string()));
        let mut cmd = Command::new(&py);
        cmd.args(&args)
            .current_dir(&tmp)
            .env("TMPDIR", &tmp)
            .env("PYTHONMALLOC", "malloc")
            .env_remove("PYTHONWARNINGS");
        cmd
    };
    println!(
        "interpreter: {}; left out: {PYTHON_SUITE_IGNORED:?}",
        py.display()
    );
    let ebb = run(
        &scratch,
        "python -m test",
        Alloc::Ebb,
        suite_cmd(PYTHON_SUITE),
        Duration::from_secs(900),
    );
    println!("{}", tail(&ebb.stdout_str(), 1500));
    if !ebb.status.success() {
        // Tell ebb's failures from the suite's own: run the failed files without ebb.
        let out = ebb.stdout_str();
        let failed: Vec<&str> = PYTHON_SUITE
            .iter()
            .copied()
            .filter(|name| {
                out.lines().any(|l| {
                    l.split_whitespace().any(|w| w == *name)
                        && (l.contains("failed") || l.contains("crashed") || l.starts_with("    "))
                })
            })
            .collect();
        let names = if failed.is_empty() {
            PYTHON_SUITE.to_vec()
        } else {
            failed
        };
        let system = run(
            &scratch,
            "python -m test (failed files)",
            Alloc::System,
            suite_cmd(&names),
            Duration::from_secs(900),
        );
        panic!(
            "CPython's suite failed under ebb ({}); the same files {:?} without ebb: {}\n--- output (tail) ---\n{}",
            describe(ebb.status),
            names,
            describe(system.status),
            tail(&out, 6000)
        );
    }
    ebb.ok().printed_stats(1);
    assert!(
        ebb.stdout_str().contains("Result: SUCCESS"),
        "no SUCCESS line"
    );
}

// ------------------------------------------------------------------------------------
// Regression: a process whose last thread ends with pthread_exit must exit (ebb's
// background purger thread once lived on and kept it alive).

#[test]
fn pthread_exit_of_last_thread_c() {
    let Some(cc) = tool("cc", "gcc") else { return };
    let scratch = Scratch::new("bug_pthread_exit_c");
    let exe = scratch.path("pthread_exit_last");
    let compiled = Command::new(cc)
        .arg("-O2")
        .arg("-pthread")
        .arg(program_file("pthread_exit_last.c"))
        .arg("-o")
        .arg(&exe)
        .status()
        .unwrap();
    assert!(compiled.success(), "cc failed");
    let timeout = Duration::from_secs(20);
    // The last thread is main, then a worker; a few times each, since the purger's stop
    // races with its own passes.
    for args in [&[][..], &["worker-last"][..]] {
        let system = run(
            &scratch,
            "pthread_exit_last",
            Alloc::System,
            command(&exe, args, &scratch.dir),
            timeout,
        );
        system.ok();
        for _ in 0..5 {
            let ebb = run(
                &scratch,
                "pthread_exit_last",
                Alloc::Ebb,
                command(&exe, args, &scratch.dir),
                timeout,
            );
            // The exit report and the line left in stdio's buffer are written by exit(0)
            // at the end of the last thread: lost if ebb's purger ran it.
            ebb.ok().printed_stats(1).bound_to_ebb(1);
            same_stdout(&system, &ebb);
            assert!(ebb.stdout_str().contains("main: flushed at exit"));
        }
    }
}

#[test]
fn pthread_exit_python_fork_from_thread() {
    let Some(py) = python3().or_else(|| missing("`python3` is not installed")) else {
        return;
    };
    let scratch = Scratch::new("bug_pthread_exit_python");
    // What test_threading's test_main_thread_after_fork_from_nonmain_thread does: the
    // child of a fork made in a non-main thread ends when that thread returns.
    let code = "import os, threading\n\
                def f():\n    pid = os.fork()\n    if pid: os.waitpid(pid, 0)\n    else: print('child done', flush=True)\n\
                t = threading.Thread(target=f); t.start(); t.join(); print('parent done')";
    let py_cmd = || {
        let mut cmd = command(&py, &["-c", code], &scratch.dir);
        cmd.env("PYTHONMALLOC", "malloc");
        cmd
    };
    let timeout = Duration::from_secs(20);
    let system = run(
        &scratch,
        "python fork in thread",
        Alloc::System,
        py_cmd(),
        timeout,
    );
    let ebb = run(
        &scratch,
        "python fork in thread",
        Alloc::Ebb,
        py_cmd(),
        timeout,
    );
    system.ok();
    ebb.ok();
    same_stdout(&system, &ebb);
}

// ------------------------------------------------------------------------------------
// git

/// Six versions of a tree of 300 files in 12 directories: v1 writes them all, each
/// later version appends lines to a fifth of them and rewrites a few.
fn write_git_versions(gen: &Path) {
    let mut contents: Vec<String> = vec![String::new(); 300];
    for v in 1..=6u64 {
        for (i, content) in contents.iter_mut().enumerate() {
            let i = i as u64;
            if v > 1 && (i * v) % 5 != 0 {
                continue;
            }
            let mut rng = Rng(i * 1000 + v);
            if v > 1 && i % 37 == 0 {
                content.clear();
            }
            for _ in 0..rng.range(20, 200) {
                let words: Vec<String> = (0..8).map(|_| rng.below(100_000).to_string()).collect();
                content.push_str(&words.join(" "));
                content.push('\n');
            }
        }
        for (i, content) in contents.iter().enumerate() {
            let dir = gen.join(format!("v{v}/src/d{:02}", i % 12));
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join(format!("f{i:03}.txt")), content).unwrap();
        }
    }
}

#[test]
fn git_commit_gc_fsck() {
    let (Some(_), Some(_)) = (tool("git", "git"), tool("bash", "bash")) else {
        return;
    };
    let scratch = Scratch::new("git");
    let gen = scratch.subdir("gen");
    write_git_versions(&gen);
    let script = program_file("git_workload.sh");
    let git_cmd = |dir: &str| {
        let cwd = scratch.subdir(dir);
        command(
            "bash",
            &[script.to_str().unwrap(), gen.to_str().unwrap()],
            &cwd,
        )
    };
    let timeout = Duration::from_secs(300);
    let system = run(
        &scratch,
        "git workload",
        Alloc::System,
        git_cmd("system"),
        timeout,
    );
    let ebb = run(
        &scratch,
        "git workload",
        Alloc::Ebb,
        git_cmd("ebb"),
        timeout,
    );
    system.ok();
    ebb.ok().printed_stats(1);
    let out = system.stdout_str();
    assert_eq!(
        out.matches("version ").count(),
        6,
        "expected 6 commits in:\n{out}"
    );
    assert!(out.contains("in-pack: "), "no count-objects output:\n{out}");
    same_stdout(&system, &ebb);
}

// ------------------------------------------------------------------------------------
// g++

#[test]
fn gxx_compiles_stl_heavy_program() {
    let Some(gxx) = tool("g++", "g++") else {
        return;
    };
    let scratch = Scratch::new("gxx");
    let source = program_file("stl_heavy.cpp");
    let timeout = Duration::from_secs(300);
    let mut objects = Vec::new();
    let mut outputs = Vec::new();
    for alloc in [Alloc::System, Alloc::Ebb] {
        let tag = if alloc == Alloc::Ebb { "ebb" } else { "system" };
        let dir = scratch.subdir(tag);
        // The same file names in both directories, so nothing differs but the allocator.
        let compile = command(
            &gxx,
            &[
                "-O2",
                "-std=c++17",
                "-pthread",
                "-c",
                source.to_str().unwrap(),
                "-o",
                "stl.o",
            ],
            &dir,
        );
        let compiled = run(
            &scratch,
            "g++ -O2 -c stl_heavy.cpp",
            alloc,
            compile,
            timeout,
        );
        compiled.ok();
        let link = command(&gxx, &["-pthread", "stl.o", "-o", "stl"], &dir);
        let linked = run(&scratch, "g++ stl.o -o stl", alloc, link, timeout);
        linked.ok();
        if alloc == Alloc::Ebb {
            // The driver, cc1plus and as each print a report.
            compiled.printed_stats(2);
            linked.printed_stats(1);
        }
        // The binary built under ebb also runs under ebb.
        let ran = run(
            &scratch,
            "./stl",
            alloc,
            command(dir.join("stl"), &[], &dir),
            timeout,
        );
        ran.ok();
        if alloc == Alloc::Ebb {
            ran.printed_stats(1);
        }
        objects.push((
            fs::read(dir.join("stl.o")).unwrap(),
            fs::read(dir.join("stl")).unwrap(),
        ));
        outputs.push(ran);
    }
    assert!(
        outputs[0].stdout_str().contains("threads "),
        "unexpected output:\n{}",
        outputs[0].stdout_str()
    );
    same_stdout(&outputs[0], &outputs[1]);
    same_bytes(
        &objects[0].0,
        &objects[1].0,
        "stl.o built by g++ on glibc",
        "stl.o built by g++ on ebb",
    );
    same_bytes(
        &objects[0].1,
        &objects[1].1,
        "stl built by g++ on glibc",
        "stl built by g++ on ebb",
    );
}

// ------------------------------------------------------------------------------------
// sort

fn sha256(scratch: &Scratch, file: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg(file)
        .env_remove("LD_PRELOAD")
        .current_dir(&scratch.dir)
        .output()
        .expect("sha256sum");
    assert!(out.status.success(), "sha256sum {} failed", file.display());
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn sort_large_files() {
    let (Some(sort), Some(_)) = (tool("sort", "coreutils"), tool("sha256sum", "coreutils")) else {
        return;
    };
    let scratch = Scratch::new("sort");
    let lines = scratch.path("lines.txt");
    let numbers = scratch.path("numbers.txt");
    let n = write_random_lines(&lines, 48 << 20, 1);
    write_random_numbers(&numbers, 16 << 20, 2);
    let tmp = scratch.subdir("tmp");
    let (lines, numbers, tmp) = (
        lines.to_str().unwrap(),
        numbers.to_str().unwrap(),
        tmp.to_str().unwrap(),
    );
    let jobs: [(&str, Vec<&str>); 4] = [
        ("sort", vec![lines]),
        ("sort -u", vec!["-u", lines]),
        ("sort -n", vec!["-n", numbers]),
        // A small buffer: an external merge sort through temporary files.
        (
            "sort -S 4M --parallel=2 -k1.3",
            vec!["-S", "4M", "--parallel=2", "-T", tmp, "-k1.3", lines],
        ),
    ];
    let timeout = Duration::from_secs(300);
    for (name, args) in jobs {
        let mut digests = Vec::new();
        for alloc in [Alloc::System, Alloc::Ebb] {
            let out = scratch.path(&format!("out-{}.txt", digests.len()));
            let mut all = args.clone();
            all.extend(["-o", out.to_str().unwrap()]);
            let r = run(
                &scratch,
                name,
                alloc,
                command(&sort, &all, &scratch.dir),
                timeout,
            );
            r.ok();
            if alloc == Alloc::Ebb {
                // sort closes stderr at exit, before ebb's report: see the module comment.
                r.printed_stats(1).bound_to_ebb(1);
            }
            digests.push((sha256(&scratch, &out), fs::metadata(&out).unwrap().len()));
            fs::remove_file(&out).unwrap();
        }
        println!("{name}: {} bytes, sha256 {}", digests[0].1, digests[0].0);
        assert_eq!(digests[0], digests[1], "{name}: output differs with ebb");
    }
    println!("{n} lines");
}

// ------------------------------------------------------------------------------------
// Node.js: a C++ runtime with threads of its own

/// Node.js (V8 keeps JavaScript objects in its own heap; `Buffer` backing stores, zlib,
/// OpenSSL, libuv's thread pool and V8's own tables go through `malloc`): four worker
/// threads building Maps of Buffers, gzip round trips and SHA-256, the async ones on
/// libuv's pool; the printed digests must match.
#[test]
fn node_worker_threads() {
    let Some(node) = tool("node", "nodejs") else {
        return;
    };
    let scratch = Scratch::new("node");
    let script = program_file("node_workers.js");
    let node_cmd = || command(&node, &[script.to_str().unwrap()], &scratch.dir);
    let timeout = Duration::from_secs(300);
    let system = run(&scratch, "node", Alloc::System, node_cmd(), timeout);
    let ebb = run(&scratch, "node", Alloc::Ebb, node_cmd(), timeout);
    system.ok();
    ebb.ok().printed_stats(1).bound_to_ebb(1);
    let out = system.stdout_str();
    assert_eq!(
        out.lines().filter(|l| l.starts_with("worker ")).count(),
        4,
        "{out}"
    );
    assert!(out.contains("async "), "{out}");
    same_stdout(&system, &ebb);
}

// ------------------------------------------------------------------------------------
// Other everyday programs: ls, tar, find | xargs grep, awk

#[test]
fn ls_recursive() {
    let Some(ls) = tool("ls", "coreutils") else {
        return;
    };
    let scratch = Scratch::new("ls");
    let ls_cmd = || {
        command(
            &ls,
            &["-laR", "--time-style=full-iso", "/usr/include"],
            &scratch.dir,
        )
    };
    let timeout = Duration::from_secs(120);
    let system = run(
        &scratch,
        "ls -laR /usr/include",
        Alloc::System,
        ls_cmd(),
        timeout,
    );
    let ebb = run(
        &scratch,
        "ls -laR /usr/include",
        Alloc::Ebb,
        ls_cmd(),
        timeout,
    );
    system.ok();
    ebb.ok().printed_stats(1).bound_to_ebb(1);
    same_stdout(&system, &ebb);
}

#[test]
fn tar_create_and_extract() {
    let (Some(tar), Some(diff)) = (tool("tar", "tar"), tool("diff", "diffutils")) else {
        return;
    };
    let scratch = Scratch::new("tar");
    let timeout = Duration::from_secs(300);
    let mut archives = Vec::new();
    for alloc in [Alloc::System, Alloc::Ebb] {
        let name = format!("include-{}.tar", archives.len());
        let archive = scratch.path(&name);
        let create = command(
            &tar,
            &["--sort=name", "-cf", &name, "-C", "/usr", "include"],
            &scratch.dir,
        );
        let r = run(&scratch, "tar -cf /usr/include", alloc, create, timeout);
        r.ok();
        if alloc == Alloc::Ebb {
            r.printed_stats(1).bound_to_ebb(1);
        }
        archives.push(archive);
    }
    let (a, b) = (
        fs::read(&archives[0]).unwrap(),
        fs::read(&archives[1]).unwrap(),
    );
    println!("archive: {} bytes", a.len());
    same_bytes(&a, &b, "tar built on glibc", "tar built on ebb");
    drop((a, b));
    // Extract under ebb, compare the tree with the original (diff on glibc).
    let x = scratch.subdir("x");
    let extract = command(
        &tar,
        &[
            "-xf",
            archives[1].to_str().unwrap(),
            "-C",
            x.to_str().unwrap(),
        ],
        &scratch.dir,
    );
    run(&scratch, "tar -xf", Alloc::Ebb, extract, timeout)
        .ok()
        .printed_stats(1)
        .bound_to_ebb(1);
    let compare = command(
        &diff,
        &["-r", "--no-dereference", "x/include", "/usr/include"],
        &scratch.dir,
    );
    run(
        &scratch,
        "diff -r extracted /usr/include",
        Alloc::System,
        compare,
        timeout,
    )
    .ok();
}

#[test]
fn find_xargs_grep() {
    let tools = ["bash", "find", "xargs", "grep", "sort"]
        .map(|t| tool(t, "bash / findutils / grep / coreutils"));
    if tools.iter().any(|t| t.is_none()) {
        return;
    }
    let scratch = Scratch::new("find_xargs_grep");
    let script = "find /usr/include -type f -name '*.h' -print0 | sort -z \
                  | xargs -0 -n 300 grep -c -E '#[[:space:]]*define|struct [a-z_]+ \\{'";
    let timeout = Duration::from_secs(300);
    let system = run(
        &scratch,
        "find | xargs grep",
        Alloc::System,
        bash(script, &scratch.dir),
        timeout,
    );
    let ebb = run(
        &scratch,
        "find | xargs grep",
        Alloc::Ebb,
        bash(script, &scratch.dir),
        timeout,
    );
    system.ok();
    // bash prints a report; find, sort, xargs and the grep processes are bound to ebb.
    ebb.ok().printed_stats(1).bound_to_ebb(5);
    assert!(system.stdout.len() > 1000, "too little output");
    same_stdout(&system, &ebb);
}

#[test]
fn awk_over_big_file() {
    let Some(awk) = tool("awk", "mawk or gawk") else {
        return;
    };
    let scratch = Scratch::new("awk");
    let input = scratch.path("lines.txt");
    write_random_lines(&input, 24 << 20, 3);
    // Associative arrays keyed by whole lines (most distinct), prefixes and lengths, and
    // string building.
    let program = r#"
        { seen[$0]++; pre[substr($0, 1, 2)] += length($0); len[length($0)]++;
          if (NR % 1000 == 0) { s = s substr($0, 1, 1) } }
        END {
          for (k in seen) { distinct++; if (seen[k] > 1) dup++ }
          for (k in pre) print "pre", k, pre[k];
          for (k in len) print "len", k, len[k];
          print "distinct", distinct; print "dup", dup;
          print "s", length(s), substr(s, 1, 60)
        }"#;
    let awk_cmd = || command(&awk, &[program, input.to_str().unwrap()], &scratch.dir);
    let timeout = Duration::from_secs(300);
    let system = run(&scratch, "awk", Alloc::System, awk_cmd(), timeout);
    let ebb = run(&scratch, "awk", Alloc::Ebb, awk_cmd(), timeout);
    system.ok();
    ebb.ok().printed_stats(1).bound_to_ebb(1);
    // `for (k in a)` order is the implementation's hash order: compare sorted lines.
    let sorted = |r: &Run| {
        let mut v: Vec<String> = r.stdout_str().lines().map(String::from).collect();
        v.sort();
        v.join("\n").into_bytes()
    };
    assert!(system.stdout_str().contains("dup "), "unexpected output");
    same_bytes(
        &sorted(&system),
        &sorted(&ebb),
        "awk on glibc",
        "awk on ebb",
    );
}
