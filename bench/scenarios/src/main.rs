//! ebb-scenarios: memory scenarios that compare ebb with glibc, jemalloc and mimalloc.
//!
//! One binary, one subcommand per scenario; the global allocator is chosen at build time
//! by exactly one `alloc-*` cargo feature (C code linked into the binary allocates
//! through the same allocator, except that `alloc-system` is glibc for both anyway).
//! Every scenario prints JSON lines: `{"type":"sample",...}` with `t_ms`, `phase`, `idx`,
//! `rss`, `pss`, `anon` (RssAnon) and `live_bytes` (what the program itself holds), then
//! one `{"type":"summary",...}` line. See docs/MEMORY.md and scripts/memory-scenarios.sh.

mod burst_idle;
mod excess;
mod many_threads;
mod mesh;
mod mixed;
mod probe;
mod sleeping_owner;
mod sparse_survivors;
mod store;
mod touched;
mod worker_pool;

use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

#[cfg(any(
    all(feature = "alloc-ebb", feature = "alloc-system"),
    all(feature = "alloc-ebb", feature = "alloc-jemalloc"),
    all(feature = "alloc-ebb", feature = "alloc-mimalloc"),
    all(feature = "alloc-system", feature = "alloc-jemalloc"),
    all(feature = "alloc-system", feature = "alloc-mimalloc"),
    all(feature = "alloc-jemalloc", feature = "alloc-mimalloc"),
))]
compile_error!("enable exactly one alloc-* feature (use --no-default-features for non-ebb builds)");

#[cfg(not(any(
    feature = "alloc-ebb",
    feature = "alloc-system",
    feature = "alloc-jemalloc",
    feature = "alloc-mimalloc"
)))]
compile_error!(
    "enable one alloc-* feature: alloc-ebb, alloc-system, alloc-jemalloc or alloc-mimalloc"
);

#[cfg(feature = "alloc-ebb")]
#[global_allocator]
static GLOBAL: ebb::Ebb = ebb::Ebb;

#[cfg(feature = "alloc-jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[cfg(feature = "alloc-mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

// alloc-system: std's default, `std::alloc::System` (glibc malloc).

/// The allocator's short name, as used in file names and tables.
pub fn alloc_name() -> &'static str {
    if cfg!(feature = "alloc-ebb") {
        "ebb"
    } else if cfg!(feature = "alloc-jemalloc") {
        "jemalloc"
    } else if cfg!(feature = "alloc-mimalloc") {
        "mimalloc"
    } else {
        "glibc"
    }
}

/// The version of the allocator actually linked in.
pub fn write_alloc_version(out: &mut probe::Line) {
    #[cfg(feature = "alloc-ebb")]
    {
        let _ = write!(
            out,
            "ebb {} ({})",
            env!("CARGO_PKG_VERSION"),
            env!("EBB_SCENARIOS_GIT_COMMIT")
        );
    }
    #[cfg(feature = "alloc-system")]
    {
        // SAFETY: gnu_get_libc_version returns a static C string.
        let v = unsafe { std::ffi::CStr::from_ptr(gnu_get_libc_version()) };
        let _ = write!(out, "glibc {}", v.to_str().unwrap_or("?"));
    }
    #[cfg(feature = "alloc-jemalloc")]
    {
        let mut ptr: *const std::ffi::c_char = std::ptr::null();
        let mut len = std::mem::size_of::<*const std::ffi::c_char>();
        // SAFETY: "version" is a read-only mallctl returning a static C string.
        let rc = unsafe {
            tikv_jemalloc_sys::mallctl(
                c"version".as_ptr(),
                (&mut ptr as *mut *const std::ffi::c_char).cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        if rc == 0 && !ptr.is_null() {
            // SAFETY: as above.
            let v = unsafe { std::ffi::CStr::from_ptr(ptr) };
            let _ = write!(out, "jemalloc {}", v.to_str().unwrap_or("?"));
        } else {
            let _ = write!(out, "jemalloc ?");
        }
    }
    #[cfg(feature = "alloc-mimalloc")]
    {
        // SAFETY: no preconditions.
        let v = unsafe { mi_version() };
        // MI_MALLOC_VERSION: major * 10000 + minor * 100 + patch (30302 = 3.3.2).
        let _ = write!(
            out,
            "mimalloc {}.{}.{}",
            v / 10000,
            (v / 100) % 100,
            v % 100
        );
    }
}

#[cfg(feature = "alloc-mimalloc")]
extern "C" {
    // In libmimalloc-sys only with its `extended` feature; the symbol is always there.
    fn mi_version() -> std::ffi::c_int;
}

#[cfg(feature = "alloc-system")]
extern "C" {
    fn gnu_get_libc_version() -> *const std::ffi::c_char;
}

/// Allocator-specific statistics for the summary line (ebb: committed/allocated bytes, the
/// purger's CPU time, the kernel's part of it, and its wake-ups, decommit system calls).
pub fn write_alloc_stats(out: &mut probe::Line) {
    #[cfg(feature = "alloc-ebb")]
    {
        let s = ebb::stats();
        let _ = write!(
            out,
            ",\"ebb_committed\":{},\"ebb_allocated\":{},\"ebb_free_committed\":{},\"ebb_purged\":{},\
             \"ebb_purger_cpu_ns\":{},\"ebb_purger_sys_ns\":{},\"ebb_purger_wakeups\":{},\
             \"ebb_decommit_calls\":{}",
            s.committed,
            s.allocated,
            s.free_committed,
            s.purged,
            s.purger_cpu_ns,
            s.purger_sys_ns,
            s.purger_wakeups,
            s.decommit_calls
        );
    }
    #[cfg(not(feature = "alloc-ebb"))]
    let _ = out;
}

static ROUNDS: AtomicUsize = AtomicUsize::new(0);

/// The number of rounds: `--rounds N` if given, else `default`.
pub fn rounds(default: usize) -> usize {
    match ROUNDS.load(Ordering::Relaxed) {
        0 => default,
        n => n,
    }
}

/// Print the allocator's statistics report to stderr (ebb only), for
/// `SCENARIO_ALLOC_STATS=1`.
pub fn print_alloc_stats(phase: &str, idx: u64) {
    #[cfg(feature = "alloc-ebb")]
    {
        eprintln!("--- ebb statistics after {phase} {idx}");
        ebb::print_stats();
        // Where RSS above the live blocks is: rounding, free blocks, free spans.
        ebb::print_retention();
    }
    #[cfg(not(feature = "alloc-ebb"))]
    let _ = (phase, idx);
}

pub const SCENARIOS: &[&str] = &[
    "sleeping-owner-big",
    "sleeping-owner-small",
    "sleeping-owner-small-fresh",
    "sleeping-owner-strings",
    "worker-pool",
    "burst-idle",
    "mixed-c-rust",
    "sparse-survivors",
    "store",
    "many-threads",
];

const USAGE: &str = "\
usage: ebb-scenarios <scenario> [--quick] [--rounds N]
       ebb-scenarios --list
       ebb-scenarios --version

scenarios:
  sleeping-owner-big          owner builds 500 x 1M f32 (2 GB), sleeps; a refresher replaces
                              every vector each round (10 rounds)
  sleeping-owner-small        the same with ~1 GB of 16 B..1 KiB boxed strings/structs; the
                              refresher builds the new item, then drops the old one
  sleeping-owner-small-fresh  the same, but the refresher's first action ever is a free
  sleeping-owner-strings      the owner loads ~372 MiB of 8-100 B strings and sleeps; a
                              refresher replaces them item by item (5 rounds)
  worker-pool                 4 threads, 10 builds of 3 phases rotating over the threads,
                              5% sparse survivors kept to the next build; 1 s pause per build
  burst-idle                  1 GiB across 4 threads, 90% freed, all threads park; samples
                              0.1..10 s after the last free
  mixed-c-rust                8 threads interleave C malloc/free with Rust allocations, 50 rounds
  sparse-survivors            3 threads build 300 MB of object graphs, texts and buffers; each
                              frees its neighbour's but a random 5% of whole objects; idle 10 s
  store                       3 indexers, 1 writer (4 KiB page cache kept forever, multi-page
                              runs freed at commit), 2 readers; 30 batches (--rounds N: N)
  many-threads                1,000 threads each hold 50 blocks of 16 B..2 KiB, idle 3 s
                              (MANY_THREADS_BLOCKS=N: N blocks each, 0 for a thread's own cost)

  --quick       tiny sizes (a smoke test)
  --rounds N    rounds (builds for worker-pool) instead of the default, for longer runs;
                for sparse-survivors, N x 300 MB
Output: JSON lines (samples, then a summary).
";

fn main() -> ExitCode {
    let mut scenario = None;
    let mut quick = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => quick = true,
            "--rounds" => match args.next().and_then(|n| n.parse::<usize>().ok()) {
                Some(n) if n > 0 => ROUNDS.store(n, Ordering::Relaxed),
                _ => {
                    eprintln!("--rounds needs a positive number");
                    return ExitCode::from(2);
                }
            },
            "--list" => {
                for s in SCENARIOS {
                    println!("{s}");
                }
                return ExitCode::SUCCESS;
            }
            "--version" => {
                let mut line = probe::Line::new();
                let _ = write!(line, "{}: ", alloc_name());
                write_alloc_version(&mut line);
                let _ = write!(line, " (malloc from ");
                probe::write_malloc_origin(&mut line);
                let _ = write!(line, ")");
                line.emit();
                return ExitCode::SUCCESS;
            }
            "-h" | "--help" => {
                print!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            s if scenario.is_none() && !s.starts_with('-') => scenario = Some(s.to_owned()),
            other => {
                eprintln!("unknown argument: {other}\n\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let Some(scenario) = scenario else {
        eprint!("{USAGE}");
        return ExitCode::from(2);
    };
    match scenario.as_str() {
        "sleeping-owner-big" => sleeping_owner::run_big(quick),
        "sleeping-owner-small" => sleeping_owner::run_small(quick, false),
        "sleeping-owner-small-fresh" => sleeping_owner::run_small(quick, true),
        "sleeping-owner-strings" => sleeping_owner::run_strings(quick),
        "worker-pool" => worker_pool::run(quick),
        "burst-idle" => burst_idle::run(quick),
        "mixed-c-rust" => mixed::run(quick),
        "sparse-survivors" => sparse_survivors::run(quick),
        "store" => store::run(quick),
        "many-threads" => many_threads::run(quick),
        other => {
            eprintln!("unknown scenario: {other}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}
