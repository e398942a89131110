//! ebb-bench-speed: runs one named allocation workload and prints one JSON line
//! `{workload, allocator, allocator_version, scale, threads, wall_ms, cpu_ms,
//! peak_rss_kib, checksum, ...}`.
//!
//! The global allocator is chosen at build time by cargo feature: `alloc-ebb` (the
//! default), `alloc-system` (std's System, i.e. glibc malloc), `alloc-jemalloc`,
//! `alloc-mimalloc` (mimalloc v3) or `alloc-snmalloc`. `scripts/bench-speed.sh` builds
//! each into its own target directory and runs them interleaved.
//!
//! The workloads are our own programs modelled on the usual allocator benchmarks
//! (cfrac, espresso, larson, mstress, cache-scratch, ...); see `docs/BENCHMARKS.md`.
//! `wall_ms` covers the workload only (not process start-up), `cpu_ms` the user + system
//! time of all its threads over the same span; `peak_rss_kib` is the
//! process's VmHWM at the end. `checksum` depends only on the workload and the scale,
//! never on the allocator, so runs under different allocators can be cross-checked.

mod util;
mod workloads;

use std::process::ExitCode;
use std::time::Instant;

// ---- the global allocator, chosen by cargo feature -------------------------------------

#[cfg(feature = "alloc-ebb")]
#[global_allocator]
static GLOBAL: ebb::Ebb = ebb::Ebb;

#[cfg(all(feature = "alloc-jemalloc", not(feature = "alloc-ebb")))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[cfg(all(
    feature = "alloc-mimalloc",
    not(any(feature = "alloc-ebb", feature = "alloc-jemalloc"))
))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(all(
    feature = "alloc-snmalloc",
    not(any(
        feature = "alloc-ebb",
        feature = "alloc-jemalloc",
        feature = "alloc-mimalloc"
    ))
))]
#[global_allocator]
static GLOBAL: snmalloc_rs::SnMalloc = snmalloc_rs::SnMalloc;

#[cfg(not(any(
    feature = "alloc-ebb",
    feature = "alloc-jemalloc",
    feature = "alloc-mimalloc",
    feature = "alloc-snmalloc",
    feature = "count-ops"
)))]
#[global_allocator]
static GLOBAL: std::alloc::System = std::alloc::System;

#[cfg(all(
    feature = "count-ops",
    not(any(
        feature = "alloc-ebb",
        feature = "alloc-jemalloc",
        feature = "alloc-mimalloc",
        feature = "alloc-snmalloc"
    ))
))]
#[global_allocator]
static GLOBAL: util::CountingSystem = util::CountingSystem;

/// Name of the allocator this binary was built with.
const ALLOCATOR: &str = if cfg!(feature = "alloc-ebb") {
    "ebb"
} else if cfg!(feature = "alloc-jemalloc") {
    "jemalloc"
} else if cfg!(feature = "alloc-mimalloc") {
    "mimalloc"
} else if cfg!(feature = "alloc-snmalloc") {
    "snmalloc"
} else {
    "system"
};

/// ebb's background purger so far: its CPU time (ns), passes, and the kernel's part of
/// its time (ns, if the library reports it), when ebb is the allocator (built in, or
/// preloaded into the system build: asked through the C ABI's `ebb_stats_json`). Issue
/// 20: a background thread's time is the program's, and the report flags it above 0.5%
/// of the run's CPU.
fn ebb_purger() -> Option<(u64, u64, Option<u64>)> {
    #[cfg(feature = "alloc-ebb")]
    {
        let s = ebb::stats();
        Some((s.purger_cpu_ns, s.purger_wakeups, Some(s.purger_sys_ns)))
    }
    #[cfg(not(feature = "alloc-ebb"))]
    {
        type StatsJson = unsafe extern "C" fn(*mut std::os::raw::c_char, usize) -> usize;
        // SAFETY: dlsym with a NUL-terminated name; a non-null result is ebb's
        // `ebb_stats_json`, whose signature is `StatsJson` (include/ebb.h).
        let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"ebb_stats_json".as_ptr()) };
        if f.is_null() {
            return None;
        }
        // SAFETY: as above.
        let f: StatsJson = unsafe { std::mem::transmute(f) };
        let mut buf = vec![0u8; 64 << 10];
        // SAFETY: the buffer is writable for its length.
        let n = unsafe { f(buf.as_mut_ptr().cast(), buf.len()) };
        let text = std::str::from_utf8(&buf[..n.min(buf.len() - 1)]).ok()?;
        let field = |name: &str| -> Option<u64> {
            let key = format!("\"{name}\":");
            let rest = &text[text.find(&key)? + key.len()..];
            let end = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            rest[..end].parse().ok()
        };
        Some((
            field("purger_cpu_ns")?,
            field("purger_wakeups")?,
            field("purger_sys_ns"),
        ))
    }
}

/// Version of the allocator actually linked, asked of the allocator where it can tell.
fn allocator_version() -> String {
    #[cfg(feature = "alloc-ebb")]
    {
        return format!("ebb {}", env!("CARGO_PKG_VERSION"));
    }
    #[cfg(all(feature = "alloc-jemalloc", not(feature = "alloc-ebb")))]
    {
        // SAFETY: "version" is a read-only mallctl returning a static C string.
        unsafe {
            let mut v: *const std::os::raw::c_char = std::ptr::null();
            let mut len = std::mem::size_of::<*const std::os::raw::c_char>();
            let rc = tikv_jemalloc_sys::mallctl(
                c"version".as_ptr(),
                &mut v as *mut _ as *mut std::ffi::c_void,
                &mut len,
                std::ptr::null_mut(),
                0,
            );
            if rc == 0 && !v.is_null() {
                return format!("jemalloc {}", std::ffi::CStr::from_ptr(v).to_string_lossy());
            }
            return "jemalloc (version unknown)".to_string();
        }
    }
    #[cfg(all(
        feature = "alloc-mimalloc",
        not(any(feature = "alloc-ebb", feature = "alloc-jemalloc"))
    ))]
    {
        // SAFETY: mi_version has no preconditions.
        let v = unsafe { libmimalloc_sys::mi_version() };
        return format!("mimalloc {}.{}.{}", v / 10000, v / 100 % 100, v % 100);
    }
    #[cfg(all(
        feature = "alloc-snmalloc",
        not(any(
            feature = "alloc-ebb",
            feature = "alloc-jemalloc",
            feature = "alloc-mimalloc"
        ))
    ))]
    {
        return "snmalloc (snmalloc-rs 0.7)".to_string();
    }
    #[allow(unreachable_code)]
    {
        extern "C" {
            fn gnu_get_libc_version() -> *const std::os::raw::c_char;
        }
        // SAFETY: returns a static C string.
        let v = unsafe { std::ffi::CStr::from_ptr(gnu_get_libc_version()) };
        // The system build calls C `malloc`, so it runs every workload under any
        // allocator preloaded with LD_PRELOAD: say which.
        match std::env::var("LD_PRELOAD") {
            Ok(lib) if !lib.is_empty() => format!("C malloc of LD_PRELOAD={lib}"),
            _ => format!("glibc {}", v.to_string_lossy()),
        }
    }
}

const USAGE: &str = "\
usage: ebb-bench-speed <workload> [--scale N]
       ebb-bench-speed --list

Runs one allocation workload under the allocator this binary was built with and prints
one JSON line: workload, allocator, wall_ms, peak_rss_kib (VmHWM), checksum, ...
Built with the system allocator (--no-default-features --features alloc-system), it
calls C malloc, so `LD_PRELOAD=libebb.so BENCH_ALLOCATOR=ebb ebb-bench-speed W` runs
workload W through a preloaded allocator's C ABI.

  --scale N   multiply the amount of work by N (default 1; e.g. 0.01 for a smoke test)
  --list      print the workload names
";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut workload: Option<String> = None;
    let mut scale = 1.0f64;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => {
                print!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            "--list" => {
                for w in workloads::ALL {
                    println!("{}", w.name);
                }
                return ExitCode::SUCCESS;
            }
            "--scale" => match args.next().and_then(|s| s.parse::<f64>().ok()) {
                Some(s) if s > 0.0 && s.is_finite() => scale = s,
                _ => {
                    eprintln!("error: --scale needs a positive number\n\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            other if other.starts_with('-') => {
                eprintln!("error: unknown option {other}\n\n{USAGE}");
                return ExitCode::from(2);
            }
            other if workload.is_none() => workload = Some(other.to_string()),
            other => {
                eprintln!("error: unexpected argument {other}\n\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let Some(name) = workload else {
        eprintln!("error: no workload given\n\n{USAGE}");
        return ExitCode::from(2);
    };
    let Some(w) = workloads::ALL.iter().find(|w| w.name == name) else {
        let names: Vec<&str> = workloads::ALL.iter().map(|w| w.name).collect();
        eprintln!(
            "error: unknown workload {name:?} (one of: {})",
            names.join(", ")
        );
        return ExitCode::from(2);
    };

    let cpu_start = util::cpu_ms();
    let start = Instant::now();
    let outcome = (w.run)(scale);
    let wall_ms = start.elapsed().as_secs_f64() * 1e3;
    let cpu_ms = util::cpu_ms() - cpu_start;
    let peak_rss_kib = util::peak_rss_kib();

    let mut json = util::Json::new();
    // A system build run under LD_PRELOAD names the preloaded allocator the way the C
    // programs do (BENCH_ALLOCATOR).
    let allocator = match std::env::var("BENCH_ALLOCATOR") {
        Ok(name) if ALLOCATOR == "system" && !name.is_empty() => name,
        _ => ALLOCATOR.to_string(),
    };
    json.str("workload", w.name)
        .str("allocator", &allocator)
        .str("allocator_version", &allocator_version())
        .num("scale", scale)
        .int("threads", outcome.threads as u64)
        .num("wall_ms", (wall_ms * 1000.0).round() / 1000.0)
        .num("cpu_ms", cpu_ms.round())
        .int("peak_rss_kib", peak_rss_kib)
        .str("checksum", &format!("{:016x}", outcome.checksum));
    #[cfg(all(
        feature = "count-ops",
        not(any(
            feature = "alloc-ebb",
            feature = "alloc-jemalloc",
            feature = "alloc-mimalloc",
            feature = "alloc-snmalloc"
        ))
    ))]
    json.raw("ops", &util::CountingSystem::ops_json());
    if let Some((cpu_ns, wakeups, sys_ns)) = ebb_purger() {
        json.num("ebb_purger_cpu_ms", (cpu_ns as f64 / 1e4).round() / 100.0)
            .int("ebb_purger_wakeups", wakeups);
        if let Some(sys_ns) = sys_ns {
            json.num("ebb_purger_sys_ms", (sys_ns as f64 / 1e4).round() / 100.0);
        }
    }
    for (key, raw) in &outcome.extra {
        json.raw(key, raw);
    }
    println!("{}", json.finish());
    ExitCode::SUCCESS
}
