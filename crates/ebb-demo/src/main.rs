//! ebb-demo: runs a built-in, allocation-heavy, multi-threaded workload under ebb and
//! reports wall time per phase, peak RSS and ebb's statistics.
//!
//! Phases: `compile` (a compiler front end: strings, token vectors, `Box` trees, hash
//! and B-tree maps), `server` (threads in a ring exchanging 8..1000 B objects through
//! channels and freeing each other's), `growth` (buffers and vectors grown by push up to
//! 256 MiB in all), then `idle`: with everything dropped, the process sleeps and the
//! report compares RSS (and ebb's committed bytes) before and after, to show memory
//! going back to the OS while no thread calls the allocator.
//!
//! Built with `--features system`, the same binary uses `std::alloc::System` instead,
//! for comparisons (see `scripts/compare-system.sh`).

mod compile;
mod growth;
mod server;
mod util;

use std::process::ExitCode;
use std::time::{Duration, Instant};
use util::{Bytes, Count};

#[cfg(not(feature = "system"))]
#[global_allocator]
static GLOBAL: ebb::Ebb = ebb::Ebb;

#[cfg(feature = "system")]
#[global_allocator]
static GLOBAL: std::alloc::System = std::alloc::System;

const ALLOCATOR: &str = if cfg!(feature = "system") {
    "system"
} else {
    "ebb"
};

const USAGE: &str = "\
usage: ebb-demo [--quick] [--json]

Runs a built-in allocation-heavy workload (compile, server, growth, idle phases) and
reports wall time, peak RSS and allocator statistics.

  --quick   a much smaller workload (well under a second of work; a smoke test)
  --json    print one JSON object instead of the human-readable report
  -h, --help
";

struct Args {
    quick: bool,
    json: bool,
}

fn parse_args() -> Result<Option<Args>, String> {
    let mut args = Args {
        quick: false,
        json: false,
    };
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--quick" => args.quick = true,
            "--json" => args.json = true,
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument: {other}")),
        }
    }
    Ok(Some(args))
}

/// Workload sizes.
struct Plan {
    compile: compile::Config,
    server: server::Config,
    growth: growth::Config,
    idle: Duration,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let scale = |full: usize, quick_value: usize| if quick { quick_value } else { full };
        Plan {
            compile: compile::Config {
                threads: cores.clamp(2, 8),
                modules: scale(6000, 60),
                functions_per_module: 40,
            },
            server: server::Config {
                threads: 4,
                rounds: scale(36_000, 300),
                batch: 64,
                cache_slots: 4096,
            },
            growth: growth::Config {
                threads: 2,
                total_bytes: scale(256 << 20, 16 << 20),
                buffer_rounds: scale(8, 1),
                buffers_per_round: 256,
            },
            idle: Duration::from_millis(scale(2000, 700) as u64),
        }
    }
}

/// What ebb says about itself at a point in time (nothing under `--features system`).
#[derive(Clone, Copy)]
struct AllocatorState {
    committed: u64,
    purged: u64,
    invalid_frees: u64,
}

#[cfg(not(feature = "system"))]
fn allocator_state() -> Option<AllocatorState> {
    let s = ebb::stats();
    Some(AllocatorState {
        committed: s.committed,
        purged: s.purged,
        invalid_frees: s.invalid_frees,
    })
}

#[cfg(feature = "system")]
fn allocator_state() -> Option<AllocatorState> {
    None
}

struct Phase {
    name: &'static str,
    seconds: f64,
    /// Memory right after the phase ended (its data dropped).
    mem: util::Mem,
    detail: String,
}

/// Run `f`, returning its result, its wall time in seconds, and memory afterwards.
fn timed<R>(f: impl FnOnce() -> R) -> (R, f64, util::Mem) {
    let start = Instant::now();
    let r = f();
    (r, start.elapsed().as_secs_f64(), util::mem())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(Some(args)) => args,
        Ok(None) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprint!("ebb-demo: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let plan = Plan::new(args.quick);
    if !args.json {
        println!(
            "ebb-demo: {} workload under the {} allocator",
            if args.quick { "quick" } else { "full" },
            ALLOCATOR
        );
    }
    let mut phases = Vec::new();
    let mut checksum = 0u64;

    let (r, seconds, mem) = timed(|| compile::run(&plan.compile));
    checksum = checksum.wrapping_add(r.checksum);
    phases.push(Phase {
        name: "compile",
        seconds,
        mem,
        detail: format!(
            "{} modules, {} of source, {} tokens, {} AST nodes, {} IR lines ({} threads)",
            r.modules,
            Bytes(r.source_bytes),
            Count(r.tokens),
            Count(r.ast_nodes),
            Count(r.ir_instructions),
            plan.compile.threads
        ),
    });

    let (r, seconds, mem) = timed(|| server::run(&plan.server));
    checksum = checksum.wrapping_add(r.checksum);
    phases.push(Phase {
        name: "server",
        seconds,
        mem,
        detail: format!(
            "{} messages, {} sent between threads ({} threads)",
            Count(r.messages),
            Bytes(r.bytes),
            plan.server.threads
        ),
    });

    let (r, seconds, mem) = timed(|| growth::run(&plan.growth));
    checksum = checksum.wrapping_add(r.checksum);
    phases.push(Phase {
        name: "growth",
        seconds,
        mem,
        detail: format!(
            "{} grown by push, ending in {} of Vec<u64> ({} threads)",
            Bytes(r.bytes_grown),
            Bytes(plan.growth.total_bytes as u64),
            plan.growth.threads
        ),
    });
    let total: f64 = phases.iter().map(|p| p.seconds).sum();

    // Idle: everything is dropped; no thread calls the allocator while we sleep.
    let before = (allocator_state(), util::mem());
    std::thread::sleep(plan.idle);
    let after = (allocator_state(), util::mem());
    let peak_kib = after.1.hwm_kib;

    if args.json {
        print_json(&args, &plan, &phases, total, checksum, before, after);
    } else {
        println!();
        println!(
            "  {:<8} {:>9} {:>10} {:>10}   work",
            "phase", "time", "peak RSS", "RSS after"
        );
        for p in &phases {
            println!(
                "  {:<8} {:>7.3} s {:>10} {:>10}   {}",
                p.name,
                p.seconds,
                Bytes(p.mem.hwm_kib << 10),
                Bytes(p.mem.rss_kib << 10),
                p.detail
            );
        }
        println!("  {:<8} {:>7.3} s", "total", total);
        println!();
        println!("  peak RSS (VmHWM)  {}", Bytes(peak_kib << 10));
        println!(
            "  idle {:.1} s with everything dropped and no allocator calls:",
            plan.idle.as_secs_f64()
        );
        println!(
            "    RSS             {} -> {}",
            Bytes(before.1.rss_kib << 10),
            Bytes(after.1.rss_kib << 10)
        );
        if let (Some(b), Some(a)) = (before.0, after.0) {
            println!(
                "    ebb committed   {} -> {} ({} purged during the idle period)",
                Bytes(b.committed),
                Bytes(a.committed),
                Bytes(a.purged - b.purged)
            );
        }
        println!("  checksum {checksum:016x}");
        print_allocator_stats();
    }

    if let Some(a) = after.0 {
        if a.invalid_frees != 0 {
            eprintln!("ebb-demo: ebb detected {} invalid frees", a.invalid_frees);
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

#[cfg(not(feature = "system"))]
fn print_allocator_stats() {
    println!();
    print!("{}", ebb::stats());
}

#[cfg(feature = "system")]
fn print_allocator_stats() {}

fn print_json(
    args: &Args,
    plan: &Plan,
    phases: &[Phase],
    total: f64,
    checksum: u64,
    before: (Option<AllocatorState>, util::Mem),
    after: (Option<AllocatorState>, util::Mem),
) {
    let phase_times: Vec<String> = phases
        .iter()
        .map(|p| format!("\"{}\": {:.6}", p.name, p.seconds))
        .collect();
    let ebb = match (before.0, after.0) {
        (Some(b), Some(a)) => format!(
            "{{\"committed_before_idle\": {}, \"committed_after_idle\": {}, \"purged\": {}, \"invalid_frees\": {}}}",
            b.committed, a.committed, a.purged, a.invalid_frees
        ),
        _ => "null".to_string(),
    };
    println!(
        "{{\"allocator\": \"{}\", \"quick\": {}, \"phases\": {{{}}}, \"total_s\": {:.6}, \"idle_s\": {:.3}, \
         \"peak_rss_kib\": {}, \"rss_before_idle_kib\": {}, \"final_rss_kib\": {}, \"checksum\": \"{:016x}\", \"ebb\": {}}}",
        ALLOCATOR,
        args.quick,
        phase_times.join(", "),
        total,
        plan.idle.as_secs_f64(),
        after.1.hwm_kib,
        before.1.rss_kib,
        after.1.rss_kib,
        checksum,
        ebb
    );
}
