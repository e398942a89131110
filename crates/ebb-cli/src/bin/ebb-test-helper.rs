//! Small programs for the integration tests of `ebb` (not meant for users):
//!
//! - `tree N MIB HOLD_MS`: starts N children that each allocate and touch MIB MiB; once
//!   every child has touched its memory, all of them hold it together for HOLD_MS ms
//!   (the children wait on a pipe, so a busy machine that starts them late cannot make
//!   their holds miss each other), then they exit and the tree waits for them.
//! - `alloc MIB HOLD_MS`: allocates and touches MIB MiB, holds it HOLD_MS ms, exits 0.
//! - `alloc-held MIB`: allocates and touches MIB MiB, prints `touched`, holds it until
//!   its stdin closes (a `tree`'s child).
//! - `server HOLD_MS`: prints `ready` after HOLD_MS ms, then sleeps until killed.
//! - `silent`: prints nothing and sleeps until killed.
//! - `exit CODE`: prints a line and exits with CODE.
//! - `leak MIB`: `leak_blocks` mallocs MIB MiB in 64 KiB blocks and never frees them;
//!   `churn_blocks` mallocs and frees twice that; then it exits 0 (for `--profile`).
//! - `leaky-server MIB`: `leak_blocks` as above, then prints `ready` and sleeps until
//!   killed (a server's profile, asked for on a signal).
//! - `leak-per-line MIB`: `leak_blocks` as above, prints `ready` with its pid, then
//!   for each line on stdin `leak_more` mallocs MIB MiB more and prints `leaked` (a
//!   server that leaks as it works, for `ebb profile --since-last`); a line `peak`
//!   instead makes `peak_blocks` hold 4 x MIB MiB at once and free it (`--peak`).
//! - `peak MIB`: `peak_blocks` holds 2 x MIB MiB at once and frees it, then
//!   `leak_blocks` leaks MIB / 4 MiB (the peak's profile against the exit's).
//! - `phases MIB HOLD_MS`: `leak_blocks` as above, holds them HOLD_MS ms, frees them,
//!   sleeps HOLD_MS ms and exits 0 (memory that rises and falls, for `--breakdown`).
//! - `nap MS`: one `nanosleep` of MS ms; exits 1 with `nap interrupted` if a signal
//!   ended it early (`EINTR`), else 0.
//! - `exec-chain N`: sleeps 1 ms and `exec`s itself as `exec-chain N-1`, down to 0,
//!   which exits 0: one process through N `exec`s (a signal its new program has no
//!   handler for yet kills it).
//! - `fork-then COMMAND ARGS...`: `fork`s without `exec`; the child runs COMMAND as
//!   above (and dies with the parent), the parent waits for it and exits as it did
//!   (a pre-fork server's worker, Python's `multiprocessing`).
//! - `seccomp-then COMMAND ARGS...`: puts itself under a seccomp filter that allows
//!   every system call and `exec`s itself as COMMAND (a sandboxed service, which ebb
//!   treats with care: it names no thread there).

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

fn arg(args: &[String], i: usize) -> u64 {
    args.get(i).and_then(|a| a.parse().ok()).unwrap_or_else(|| {
        eprintln!("ebb-test-helper: argument {i} missing or not a number");
        std::process::exit(2)
    })
}

/// MIB MiB allocated, one byte written in every OS page, so all of it is resident.
fn touched(mib: u64) -> Vec<u8> {
    let bytes = (mib as usize) << 20;
    let mut v = vec![0u8; bytes];
    for i in (0..bytes).step_by(4096) {
        v[i] = 1;
    }
    v
}

const LEAK_BLOCK: usize = 64 << 10;

/// How many profiles process `pid` has written on a signal or a timer
/// (`<prefix>.<pid>.<n>.pb.gz`, whole or being written).
fn sequence_profiles(prefix: &str, pid: u32) -> usize {
    let prefix = std::path::Path::new(prefix);
    let dir = prefix.parent().unwrap_or(std::path::Path::new("."));
    let stem = format!("{}.{pid}.", prefix.file_name().unwrap().to_string_lossy());
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_prefix(&stem)
                .and_then(|rest| rest.strip_suffix(".pb.gz"))
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .count()
}

/// Blocks that stay allocated until the process exits: the site a heap profile at
/// exit must show as live. `malloc` directly, so the site is this function with or
/// without frame pointers.
#[inline(never)]
fn leak_blocks(mib: u64) -> Vec<*mut u8> {
    let mut blocks = Vec::with_capacity((mib as usize) * (1 << 20) / LEAK_BLOCK);
    for _ in 0..blocks.capacity() {
        // SAFETY: malloc of a nonzero size; the block is written within its bounds.
        let p = unsafe { libc::malloc(LEAK_BLOCK) } as *mut u8;
        assert!(!p.is_null());
        // SAFETY: as above.
        unsafe { p.write_bytes(1, LEAK_BLOCK) };
        blocks.push(p);
    }
    blocks
}

/// MIB MiB of blocks held together and then all freed: the site of a profile's peak
/// that a profile at exit no longer holds.
#[inline(never)]
fn peak_blocks(mib: u64) {
    let mut blocks = Vec::with_capacity((mib as usize) * (1 << 20) / LEAK_BLOCK);
    for _ in 0..blocks.capacity() {
        // SAFETY: malloc of a nonzero size, written within its bounds.
        let p = unsafe { libc::malloc(LEAK_BLOCK) } as *mut u8;
        assert!(!p.is_null());
        // SAFETY: as above.
        unsafe { p.write_bytes(3, LEAK_BLOCK) };
        blocks.push(p);
    }
    for p in std::hint::black_box(blocks) {
        // SAFETY: each block was malloc'd above and is freed once.
        unsafe { libc::free(p as *mut libc::c_void) };
    }
}

/// More blocks that stay allocated: a second site, grown after the first.
#[inline(never)]
fn leak_more(mib: u64) -> Vec<*mut u8> {
    std::hint::black_box(leak_blocks(mib))
}

/// Blocks allocated and freed again: allocated over the run, not live at exit.
/// (`black_box`: the compiler would otherwise drop a malloc and free of a block no one
/// reads.)
#[inline(never)]
fn churn_blocks(mib: u64) {
    for _ in 0..(mib as usize) * (1 << 20) / LEAK_BLOCK {
        // SAFETY: malloc of a nonzero size, written within bounds, freed once.
        unsafe {
            let p = std::hint::black_box(libc::malloc(LEAK_BLOCK) as *mut u8);
            assert!(!p.is_null());
            p.write_bytes(2, LEAK_BLOCK);
            libc::free(std::hint::black_box(p) as *mut libc::c_void);
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    run(&args)
}

/// `args` as the process's arguments (the program's path first).
fn run(args: &[String]) -> ExitCode {
    let args = args.to_vec();
    match args.get(1).map(String::as_str) {
        Some("seccomp-then") => {
            let allow = [libc::sock_filter {
                code: (libc::BPF_RET | libc::BPF_K) as u16,
                jt: 0,
                jf: 0,
                k: libc::SECCOMP_RET_ALLOW,
            }];
            let program = libc::sock_fprog {
                len: allow.len() as u16,
                filter: allow.as_ptr() as *mut libc::sock_filter,
            };
            // SAFETY: prctl with a filter program that outlives the call.
            let rc = unsafe {
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &program as *const libc::sock_fprog,
                )
            };
            if rc != 0 {
                eprintln!(
                    "ebb-test-helper: seccomp: {}",
                    std::io::Error::last_os_error()
                );
                return ExitCode::FAILURE;
            }
            let e = Command::new(std::env::current_exe().expect("own path"))
                .args(&args[2..])
                .exec();
            eprintln!("ebb-test-helper: exec failed: {e}");
            ExitCode::FAILURE
        }
        Some("fork-then") => {
            // SAFETY: this process runs one thread of its own (ebb's watchers aside, which
            // the child does not need); the child only allocates, prints and sleeps.
            let pid = unsafe { libc::fork() };
            if pid < 0 {
                eprintln!("ebb-test-helper: fork: {}", std::io::Error::last_os_error());
                return ExitCode::FAILURE;
            }
            if pid == 0 {
                // SAFETY: prctl with constant arguments; the child dies with the parent
                // (a test that kills the parent leaves no worker behind).
                unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
                let mut rest = vec![args[0].clone()];
                rest.extend_from_slice(&args[2..]);
                return run(&rest);
            }
            let mut status = 0;
            // SAFETY: `status` is a valid out-pointer; `pid` is our child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            if libc::WIFEXITED(status) {
                ExitCode::from(libc::WEXITSTATUS(status) as u8)
            } else {
                ExitCode::FAILURE
            }
        }
        Some("tree") => {
            let exe = std::env::current_exe().expect("own path");
            let mut children: Vec<_> = (0..arg(&args, 2))
                .map(|_| {
                    Command::new(&exe)
                        .args(["alloc-held", &args[3]])
                        .stdin(Stdio::piped())
                        .stdout(Stdio::piped())
                        .spawn()
                        .expect("spawn a child")
                })
                .collect();
            for c in &mut children {
                let mut line = String::new();
                let out = c.stdout.as_mut().expect("piped stdout");
                BufReader::new(out)
                    .read_line(&mut line)
                    .expect("child's line");
            }
            std::thread::sleep(Duration::from_millis(arg(&args, 4)));
            for c in &mut children {
                drop(c.stdin.take());
            }
            let ok = children
                .into_iter()
                .all(|mut c| c.wait().is_ok_and(|s| s.success()));
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Some("alloc-held") => {
            let v = touched(arg(&args, 2));
            println!("touched");
            let mut rest = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut rest);
            std::hint::black_box(&v);
            ExitCode::SUCCESS
        }
        Some("alloc") => {
            let v = touched(arg(&args, 2));
            std::thread::sleep(Duration::from_millis(arg(&args, 3)));
            std::hint::black_box(&v);
            ExitCode::SUCCESS
        }
        Some("server") => {
            std::thread::sleep(Duration::from_millis(arg(&args, 2)));
            println!("server: ready");
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        Some("silent") => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
        Some("leak") => {
            let mib = arg(&args, 2);
            let leaked = leak_blocks(mib);
            churn_blocks(2 * mib);
            println!("leaked {} blocks", leaked.len());
            std::mem::forget(leaked);
            ExitCode::SUCCESS
        }
        Some("peak") => {
            // A peak of 2 x MIB MiB, all freed, then MIB / 4 MiB leaked.
            let mib = arg(&args, 2);
            peak_blocks(2 * mib);
            let leaked = leak_blocks(mib / 4);
            println!("peaked, then leaked {} blocks", leaked.len());
            std::mem::forget(leaked);
            ExitCode::SUCCESS
        }
        Some("leaky-server") => {
            let leaked = leak_blocks(arg(&args, 2));
            println!(
                "server: ready ({} blocks, pid {})",
                leaked.len(),
                std::process::id()
            );
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        Some("leak-per-line") => {
            let mib = arg(&args, 2);
            let mut leaked = leak_blocks(mib);
            println!("server: ready (pid {})", std::process::id());
            for line in std::io::stdin().lines() {
                if line.is_ok_and(|l| l == "peak") {
                    // 4 x MIB MiB held at once and freed: a peak, no leak.
                    peak_blocks(4 * mib);
                    println!("peaked");
                    continue;
                }
                leaked.extend(leak_more(mib));
                println!("leaked {} blocks", leaked.len());
            }
            std::mem::forget(leaked);
            ExitCode::SUCCESS
        }
        Some("leak-steps") => {
            // MIB MiB leaked (`leak_more`) STEPS times, each step once the profile of the
            // step before is on disk (`EBB_PROFILE_INTERVAL`: the watcher writes one at
            // the end of an interval that changed the profile); then IDLE intervals
            // without allocating, in which it must write nothing.
            let (mib, steps, idle) = (arg(&args, 2), arg(&args, 3), arg(&args, 4));
            let prefix = std::env::var("EBB_PROFILE").expect("EBB_PROFILE");
            let interval = std::env::var("EBB_PROFILE_INTERVAL")
                .ok()
                .and_then(|v| v.strip_suffix("ms")?.parse::<u64>().ok())
                .expect("EBB_PROFILE_INTERVAL=<n>ms");
            let written = || sequence_profiles(&prefix, std::process::id());
            let mut leaked = Vec::new();
            for _ in 0..steps {
                let before = written();
                leaked.extend(leak_more(mib));
                while written() == before {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            std::thread::sleep(Duration::from_millis(idle * interval));
            println!("leaked {} blocks in {steps} steps", leaked.len());
            std::mem::forget(leaked);
            ExitCode::SUCCESS
        }
        Some("phases") => {
            let held = leak_blocks(arg(&args, 2));
            println!("holding {} blocks", held.len());
            std::thread::sleep(Duration::from_millis(arg(&args, 3)));
            for p in held {
                // SAFETY: each block came from malloc in leak_blocks and is freed once.
                unsafe { libc::free(p as *mut libc::c_void) };
            }
            println!("freed");
            std::thread::sleep(Duration::from_millis(arg(&args, 3)));
            ExitCode::SUCCESS
        }
        Some("nap") => {
            let ms = arg(&args, 2);
            let ts = libc::timespec {
                tv_sec: (ms / 1000) as libc::time_t,
                tv_nsec: ((ms % 1000) * 1_000_000) as libc::c_long,
            };
            // SAFETY: `ts` is valid; no remainder is asked for.
            let rc = unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
            if rc != 0 {
                println!("nap interrupted: {}", std::io::Error::last_os_error());
                return ExitCode::FAILURE;
            }
            println!("nap done");
            ExitCode::SUCCESS
        }
        Some("exec-chain") => {
            let left = arg(&args, 2);
            if left == 0 {
                return ExitCode::SUCCESS;
            }
            std::thread::sleep(Duration::from_millis(1));
            let exe = std::env::current_exe().expect("own path");
            let e = Command::new(exe)
                .args(["exec-chain", &(left - 1).to_string()])
                .exec();
            eprintln!("ebb-test-helper: exec failed: {e}");
            ExitCode::FAILURE
        }
        Some("exit") => {
            println!("exiting with {}", arg(&args, 2));
            ExitCode::from(arg(&args, 2) as u8)
        }
        _ => {
            eprintln!("usage: ebb-test-helper tree N MIB HOLD_MS | alloc MIB HOLD_MS | alloc-held MIB | server HOLD_MS | silent | exit CODE | leak MIB | peak MIB | leak-per-line MIB | leaky-server MIB | phases MIB HOLD_MS | nap MS | exec-chain N");
            ExitCode::from(2)
        }
    }
}
