//! `ebb`: run any program under any allocator and report its time and the memory of
//! its whole process tree over time; compare allocators with interleaved runs.

mod alloc;
mod breakdown;
mod chart;
mod compare;
mod instances;
mod live;
mod procfs;
mod profile;
mod profile_cli;
mod profile_files;
mod report;
mod runner;
mod workload;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// True once Ctrl-C (SIGINT) or SIGTERM arrived: runs stop their tree and report.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Exit statuses (also in `--help`).
const EXIT_ERROR: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_COMMAND_FAILED: u8 = 3;
const EXIT_INTERRUPTED: u8 = 130;

const AFTER_HELP: &str = "\
Examples:
  ebb compare                                   # built-in workload, every installed allocator
  ebb run -- python3 -c 'x = [0] * 10**7'       # one program under ebb
  ebb run --alloc jemalloc --json out.json -- make -j2
  ebb run --profile /tmp/heap -- ./my-tool input  # heap profile: top sites live at exit
  ebb top --base /tmp/heap.1.pb.gz /tmp/heap.2.pb.gz   # what grew between two profiles
  ebb flame /tmp/heap.1234.pb.gz                  # the same as a flame graph (SVG)
  ebb report 1234                                 # what a running ebb process's RSS holds
  ebb profile --since-last 1234                   # what grew in it since the last ask
  ebb compare --alloc glibc,ebb --runs 5 --svg mem.svg -- ./my-tool input
  ebb run --ready 'listening on' --drive 'curl -s localhost:8080/' --idle 90s -- ./my-server

Allocators: ebb (libebb.so, built on first use from a source checkout), glibc (no
LD_PRELOAD), jemalloc, mimalloc2 (or mimalloc), tcmalloc (Debian's libraries),
mimalloc3 (the system's libmimalloc.so.3, else built on first use from a source
checkout by scripts/build-mimalloc3.sh), or a path to a .so.

Exit status:
  0    success (for `run`: the command exited 0, or was stopped by ebb after --idle)
  1    ebb could not measure: command not found, library not preloadable, ready timeout, ...
  2    bad arguments (unknown option, bad duration or regex)
  3    `compare`: the command failed under at least one allocator
  130  interrupted by Ctrl-C (what was measured is still printed and written)
  `run` otherwise exits with the command's own status (128+N if signal N killed it).";

#[derive(Parser)]
#[command(
    name = "ebb",
    version,
    about = "Run any program under any allocator and see its time and memory over time, side by side",
    after_help = AFTER_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a command under one allocator, sampling its whole process tree.
    #[command(after_help = "Examples:
  ebb run -- ./my-tool input                          # under ebb
  ebb run --alloc glibc --json run.json --svg run.svg -- ./my-tool input
  ebb run --alloc /opt/lib/libfoo.so -- ./my-tool
  ebb run --profile /tmp/heap --profile-rate 64k -- ./my-tool input
  ebb run --profile /tmp/heap --profile-every 10s -- ./my-server   # each site over time
  ebb run --breakdown=500ms --svg parts.svg -- ./my-tool input   # RSS split over time
  ebb run --ready 'listening' --drive './load.sh' --idle 90s -- ./my-server
  ebb run --ready 'listening' --drive-for 20s --idle 30s -- ./my-server")]
    Run(RunArgs),
    /// Run a command (by default the built-in workload) under several allocators,
    /// interleaved, and print medians with ratios and min–max spread.
    #[command(after_help = "Examples:
  ebb compare                                  # the built-in workload
  ebb compare --alloc glibc,ebb --runs 5 --markdown cmp.md -- ./my-tool input
  ebb compare --svg docs/compare.svg --json cmp.json
  ebb compare --ready 'listening' --drive './load.sh' --idle 30s -- ./my-server")]
    Compare(CompareArgs),
    /// Print the top allocation sites of a heap profile (as `pprof -top` does, no Go
    /// needed), optionally minus an earlier one to find what grew; of several profiles
    /// of one process, what each site held in each.
    #[command(after_help = "Examples:
  ebb run --profile /tmp/heap -- ./my-tool input      # writes /tmp/heap.<pid>.pb.gz
  ebb top /tmp/heap.1234.pb.gz                        # what was live at exit, by site
  ebb top --index alloc_space -n 40 /tmp/heap.1234.pb.gz
  ebb top --stacks -n 5 /tmp/heap.1234.pb.gz            # whole call chains
  ebb top --base /tmp/heap.1234.1.pb.gz /tmp/heap.1234.2.pb.gz   # what grew (EBB_PROFILE_SIGNAL)
  ebb top /tmp/heap.1234.*.pb.gz     # each site in each profile, by growth (EBB_PROFILE_INTERVAL)")]
    Top(profile_cli::TopArgs),
    /// Draw a heap profile's stacks as a flame graph (SVG, zoomable in a browser),
    /// optionally minus an earlier profile to see what grew.
    #[command(after_help = "Examples:
  ebb run --profile /tmp/heap -- ./my-tool input      # writes /tmp/heap.<pid>.pb.gz
  ebb flame /tmp/heap.1234.pb.gz                      # /tmp/heap.1234.svg: live at exit
  ebb flame --index alloc_space -o churn.svg /tmp/heap.1234.pb.gz
  ebb flame --base /tmp/heap.1234.1.pb.gz /tmp/heap.1234.2.pb.gz   # what grew
  ebb flame --folded stacks.txt /tmp/heap.1234.pb.gz  # also for speedscope, flamegraph.pl")]
    Flame(profile_cli::FlameArgs),
    /// Print the retention report of a running ebb process now: what its RSS holds.
    /// The process must have been started with EBB_REPORT and EBB_REPORT_SIGNAL.
    #[command(after_help = "Examples:
  EBB_REPORT=/tmp/rss.%p.txt EBB_REPORT_SIGNAL=USR2 LD_PRELOAD=target/release/libebb.so ./my-server &
  ebb report $!                                       # the report, as the process wrote it
  watch -n 10 ebb report $(pidof my-server)")]
    Report {
        /// The process id.
        #[arg(value_name = "PID")]
        pid: i32,
    },
    /// Have a running ebb process write a heap profile now and print its top sites:
    /// what its live memory is, with --since-last what grew since its previous profile
    /// (a leak), with --peak what was live at its peak so far, or with --over-time each
    /// site in every profile it wrote. The process must have been started with
    /// EBB_PROFILE and EBB_PROFILE_SIGNAL.
    #[command(after_help = "Examples:
  EBB_PROFILE=/tmp/heap EBB_PROFILE_SIGNAL=USR1 LD_PRELOAD=target/release/libebb.so ./my-server &
  ebb profile $!                                      # live memory now, by site
  ebb profile --since-last $!                         # what grew since the last `ebb profile`
  ebb profile --index alloc_space -n 40 $!            # what it allocated so far
  ebb profile --peak $!                               # what made its memory peak
  ebb profile --over-time $!                          # each site in every profile, by growth
  ebb flame /tmp/heap.<pid>.2.pb.gz                   # the profile it wrote, as a flame graph")]
    Profile(profile_cli::ProfileNowArgs),
    /// The built-in workload (a worker pool, a refresher replacing a sleeping owner's
    /// data, a burst), then idle; it uses the system allocator, so LD_PRELOAD applies.
    Workload {
        /// A small workload (a fraction of a second).
        #[arg(long)]
        quick: bool,
        /// How long to sleep after the work (ebb stops it sooner).
        #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
        idle: Duration,
    },
}

#[derive(Args)]
struct Sampling {
    /// Time between samples of the process tree [default: 250ms; 100ms for the
    /// built-in workload].
    #[arg(long, value_name = "DURATION", value_parser = parse_positive_duration)]
    interval: Option<Duration>,
    /// Regex: the command is a server, ready when a line of its output matches.
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    ready: Option<regex::Regex>,
    /// Give up if no line matches --ready within this time.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_positive_duration)]
    ready_timeout: Duration,
    /// Once ready, run this shell command as the client; idle starts when it exits.
    #[arg(long, value_name = "CMD", conflicts_with = "drive_for")]
    drive: Option<String>,
    /// Once ready, let the server work this long (driven from elsewhere).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    drive_for: Option<Duration>,
    /// Keep sampling this long after the drive, with marks at 1, 2, 5, 10, 30, 60, 90 s,
    /// ..., then stop the tree (SIGTERM, then SIGKILL).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    idle: Option<Duration>,
    /// Write every sample and figure as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Draw memory over time (and ratios) as SVG.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
}

#[derive(Args)]
struct RunArgs {
    /// Allocator: ebb, glibc, jemalloc, mimalloc2 (or mimalloc), mimalloc3, tcmalloc or a
    /// path to a .so; settings in brackets set environment variables for the program
    /// (`ebb[EBB_PURGE_DELAY=0]`).
    #[arg(long, short, value_name = "NAME|PATH.so", default_value = "ebb")]
    alloc: String,
    /// Hide the command's output (its last lines are printed if it fails).
    #[arg(long, short)]
    quiet: bool,
    #[command(flatten)]
    sampling: Sampling,
    /// Heap-profile every process of the tree (ebb only): each writes
    /// PREFIX.<pid>.pb.gz at exit (and PREFIX.<pid>.peak.pb.gz), and the top allocation
    /// sites of those that allocated most are printed: what was still live at exit,
    /// what was live at the peak, and what was allocated.
    #[arg(long, value_name = "PREFIX")]
    profile: Option<PathBuf>,
    /// With --profile: mean bytes between samples [default: 512k; k, m, g suffixes].
    #[arg(long, value_name = "BYTES", requires = "profile", value_parser = parse_rate)]
    profile_rate: Option<String>,
    /// With --profile: each process also writes a profile this often
    /// (`EBB_PROFILE_INTERVAL`; only after an interval in which its profile changed),
    /// and a table of what each site held over time is printed: a site that keeps
    /// rising is a leak, or a cache without a bound. With --svg, the chart stacks the
    /// sites' live bytes over time under the RSS; --json holds them as
    /// `profile_over_time`.
    #[arg(long, value_name = "DURATION", requires = "profile", value_parser = parse_positive_duration)]
    profile_every: Option<Duration>,
    /// Ask every ebb process of the tree for its retention report this often [default
    /// interval: 1s] (ebb only): a table of what the largest process's RSS held over
    /// time (live blocks, free blocks in pages, free spans awaiting purge, ...), stacked
    /// areas in --svg, and every report in --json. Each report walks ebb's memory and
    /// reads /proc/self/smaps: about 1 ms per 100 MiB.
    #[arg(long, value_name = "INTERVAL", num_args = 0..=1, default_missing_value = "1s",
          require_equals = true, value_parser = parse_positive_duration)]
    breakdown: Option<Duration>,
    /// The command and its arguments (after `--`).
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// What `top` and `flame` read: a profile, minus a base, by a sample type.
#[derive(Args)]
struct CompareArgs {
    /// Allocators, comma-separated; ratios are to the first. Those not installed are
    /// skipped with the command that installs them. Settings in brackets run an
    /// allocator with environment variables, so settings can be compared side by side:
    /// `ebb,ebb[EBB_PURGE_DELAY=0 EBB_BACKGROUND=0],jemalloc[MALLOC_CONF=dirty_decay_ms:0]`.
    #[arg(
        long,
        short,
        value_name = "LIST",
        default_value = "glibc,jemalloc,mimalloc2,mimalloc3,tcmalloc,ebb"
    )]
    alloc: Vec<String>,
    /// Runs per allocator, interleaved (A B C A B C ...).
    #[arg(long, short, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// Write the table as markdown.
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
    /// Show the command's output instead of hiding it.
    #[arg(long)]
    show_output: bool,
    /// With the built-in workload: a small one (for smoke tests).
    #[arg(long)]
    quick: bool,
    #[command(flatten)]
    sampling: Sampling,
    /// The command and its arguments (after `--`); the built-in workload if none.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

const DURATION_HINT: &str = "expected a duration such as 250ms, 30s, 2m or 1h30m";

fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim()).map_err(|e| format!("{DURATION_HINT} ({e})"))
}

fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err("must be longer than 0".into());
    }
    Ok(d)
}

/// A byte count as `EBB_PROFILE_RATE` reads it: digits with an optional k, m or g.
fn parse_rate(s: &str) -> Result<String, String> {
    let s = s.trim();
    let digits = s.trim_end_matches(['k', 'K', 'm', 'M', 'g', 'G']);
    let suffixes = s.len() - digits.len();
    match digits.parse::<u64>() {
        Ok(n) if n > 0 && suffixes <= 1 => Ok(s.to_string()),
        _ => Err("expected a byte count such as 512k, 64k or 1m".into()),
    }
}

fn parse_regex(s: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(s).map_err(|e| {
        // regex's message spans lines (the pattern, a caret); its last line says what.
        let text = e.to_string();
        let last = text
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        format!(
            "not a valid regex ({})",
            last.trim_start_matches("error: ").trim()
        )
    })
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    let _ = e.print();
                    ExitCode::SUCCESS
                }
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    let _ = e.print();
                    ExitCode::from(EXIT_USAGE)
                }
                _ => {
                    // clap's first line says what is wrong; the rest is advice.
                    let text = e.render().to_string();
                    let first = text.lines().next().unwrap_or("bad arguments");
                    let first = first.strip_prefix("error: ").unwrap_or(first);
                    eprintln!("ebb: error: {first} (see ebb --help)");
                    ExitCode::from(EXIT_USAGE)
                }
            };
        }
    };
    let result = match cli.command {
        Cmd::Workload { quick, idle } => {
            workload::run(quick, idle);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Run(args) if args.command.is_empty() => {
            eprintln!("ebb: error: no command given: ebb run [OPTIONS] -- COMMAND [ARGS...] (see ebb run --help)");
            return ExitCode::from(EXIT_USAGE);
        }
        Cmd::Run(args) => setup().and_then(|()| run(args)),
        Cmd::Top(args) => profile_cli::top(&args),
        Cmd::Flame(args) => profile_cli::flame(&args),
        Cmd::Report { pid } => live::report(pid).map(|text| {
            print!("{text}");
            // A JSON report is one line for programs; a person also gets its summary.
            let json: Vec<serde_json::Value> = text
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
            if let Some(summary) = report::retention_text(&json, "RSS now       ") {
                eprint!("{summary}");
            }
            ExitCode::SUCCESS
        }),
        Cmd::Profile(args) => profile_cli::profile_now(&args),
        Cmd::Compare(args) => setup().and_then(|()| compare(args)),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ebb: error: {e:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

fn setup() -> Result<()> {
    ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::Relaxed))
        .context("cannot install the Ctrl-C handler")?;
    runner::become_subreaper();
    Ok(())
}

fn progress_bar() -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new_spinner();
    if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {msg}") {
        bar.set_style(style);
    }
    bar
}

fn spec(
    sampling: &Sampling,
    allocator: alloc::Allocator,
    command: Vec<OsString>,
    show_output: bool,
    builtin: bool,
    ebb_details: bool,
) -> Result<runner::RunSpec> {
    let default_interval = Duration::from_millis(if builtin { 100 } else { 250 });
    let ready = match &sampling.ready {
        None if builtin => Some(regex::Regex::new(workload::READY_LINE)?),
        r => r.clone(),
    };
    Ok(runner::RunSpec {
        command,
        allocator,
        interval: sampling.interval.unwrap_or(default_interval),
        ready,
        ready_timeout: sampling.ready_timeout,
        drive: sampling.drive.clone(),
        drive_for: sampling.drive_for,
        idle: sampling.idle.or(builtin.then_some(Duration::from_secs(4))),
        show_output,
        ebb_details,
        profile: None,
        breakdown: None,
    })
}

fn command_text(command: &[OsString]) -> String {
    command
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

fn write_file(path: &PathBuf, text: &str, what: &str) -> Result<()> {
    std::fs::write(path, text)
        .with_context(|| format!("cannot write the {what} to {}", path.display()))?;
    eprintln!("ebb: wrote {}", path.display());
    Ok(())
}

fn run(args: RunArgs) -> Result<ExitCode> {
    let allocator = match alloc::lookup(&args.alloc)? {
        alloc::Lookup::Found(a) => a,
        alloc::Lookup::NotInstalled { name, install } => {
            bail!("{name} is not installed: {install}")
        }
    };
    let profiling = match &args.profile {
        Some(_) if !allocator.is_ebb => {
            bail!("--profile needs --alloc ebb: the heap profiler is ebb's")
        }
        Some(prefix) => {
            let prefix = std::path::absolute(prefix)
                .with_context(|| format!("bad profile prefix {}", prefix.display()))?;
            match prefix.parent() {
                Some(dir) if dir.is_dir() => {}
                _ => bail!(
                    "--profile {}: no such directory for the profiles",
                    prefix.display()
                ),
            }
            Some(runner::Profiling {
                prefix,
                rate: args.profile_rate.clone(),
                every: args.profile_every,
            })
        }
        None => None,
    };
    if args.breakdown.is_some() && !allocator.is_ebb {
        bail!("--breakdown needs --alloc ebb: the retention report is ebb's");
    }
    let text = command_text(&args.command);
    let mut spec = spec(
        &args.sampling,
        allocator,
        args.command,
        !args.quiet,
        false,
        true,
    )?;
    spec.profile = profiling;
    spec.breakdown = args.breakdown;
    let started = std::time::SystemTime::now();
    let bar = progress_bar();
    let result = runner::run(&spec, &mut |p| {
        bar.set_message(format!(
            "{} · {} · {:.1} s · {} · {} processes",
            spec.allocator.name,
            p.phase,
            p.t,
            compare::format_bytes(p.rss as f64),
            p.processes
        ));
        bar.tick();
    });
    bar.finish_and_clear();
    let result = result?;
    eprint!("{}", report::run_text(&text, &result));
    if spec.breakdown.is_some() {
        match breakdown::text(&result) {
            Some(table) => eprint!("{table}"),
            None => eprintln!(
                "  breakdown      no process of the tree gave two retention reports: each ended \
                 before the first interval (only its report at exit), or none runs ebb"
            ),
        }
    }
    if let Some(profiling) = &spec.profile {
        eprint!(
            "{}",
            profile::run_text(&profiling.prefix, started, profiling.every)
        );
    }
    // With --profile-every: the busiest process's sites over time, for --json and --svg.
    let sites = spec
        .profile
        .as_ref()
        .filter(|p| {
            p.every.is_some() && (args.sampling.json.is_some() || args.sampling.svg.is_some())
        })
        .and_then(|p| profile::sites_over_time(&p.prefix, started));
    if let Some(path) = &args.sampling.json {
        let mut json = serde_json::to_value(&result)?;
        if let Some(sites) = &sites {
            json["profile_over_time"] = sites.to_json();
        }
        write_file(path, &serde_json::to_string_pretty(&json)?, "JSON")?;
    }
    if let Some(path) = &args.sampling.svg {
        let summaries = compare::summarise(
            std::slice::from_ref(&result.allocator),
            &[vec![result.clone()]],
        );
        let title = format!("{text} under {}", result.allocator);
        let svg = match (breakdown::largest(&result), sites) {
            (Some((series, _)), _) if spec.breakdown.is_some() => {
                chart::render_breakdown(&title, &result, &series)?
            }
            (_, Some(sites)) => chart::render_sites(&title, &result, &sites)?,
            _ => chart::render(&title, &summaries, &[&result])?,
        };
        write_file(path, &svg, "chart")?;
    }
    if result.interrupted {
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    Ok(
        match (
            result.exit.stopped_by_ebb,
            result.exit.code,
            result.exit.signal,
        ) {
            (true, _, _) => ExitCode::SUCCESS,
            (_, Some(code), _) => ExitCode::from(code as u8),
            (_, None, Some(signal)) => ExitCode::from((128 + signal) as u8),
            _ => ExitCode::from(EXIT_ERROR),
        },
    )
}

fn compare(args: CompareArgs) -> Result<ExitCode> {
    let builtin = args.command.is_empty();
    let mut allocators: Vec<alloc::Allocator> = Vec::new();
    let mut skipped = Vec::new();
    let mut listed = Vec::new();
    for list in &args.alloc {
        listed.extend(alloc::split_list(list)?);
    }
    for name in &listed {
        match alloc::lookup(name)? {
            alloc::Lookup::Found(a) if allocators.iter().any(|b| b.name == a.name) => {
                bail!("{} is named twice in --alloc", a.name)
            }
            alloc::Lookup::Found(a) => allocators.push(a),
            alloc::Lookup::NotInstalled { name, install } => {
                eprintln!("ebb: skipping {name}: not installed (install it with: {install})");
                skipped.push(report::Skipped {
                    allocator: name,
                    install,
                });
            }
        }
    }
    if allocators.is_empty() {
        bail!("none of the allocators {} is installed", listed.join(", "));
    }
    let command = if builtin {
        let exe = std::env::current_exe().context("cannot find the ebb executable")?;
        let mut c: Vec<OsString> =
            vec![exe.into(), "workload".into(), "--idle".into(), "1h".into()];
        if args.quick {
            c.push("--quick".into());
        }
        c
    } else {
        args.command.clone()
    };
    let text = if builtin {
        format!("ebb workload{}", if args.quick { " --quick" } else { "" })
    } else {
        command_text(&command)
    };
    let names: Vec<String> = allocators.iter().map(|a| a.name.clone()).collect();
    let versions: Vec<Option<String>> = allocators.iter().map(alloc::version).collect();
    let specs = allocators
        .into_iter()
        .map(|a| {
            spec(
                &args.sampling,
                a,
                command.clone(),
                args.show_output,
                builtin,
                false,
            )
        })
        .collect::<Result<Vec<_>>>()?;
    let runs = args.runs as usize;
    let total = runs * specs.len();
    let bar = progress_bar();
    let mut results: Vec<Vec<runner::RunResult>> = vec![Vec::new(); specs.len()];
    let mut order = Vec::new();
    'rounds: for round in 0..runs {
        for (i, spec) in specs.iter().enumerate() {
            let n = order.len() + 1;
            let result = runner::run(spec, &mut |p| {
                bar.set_message(format!(
                    "[{n}/{total}] {} run {} · {} · {:.1} s · {} · {} processes",
                    spec.allocator.name,
                    round + 1,
                    p.phase,
                    p.t,
                    compare::format_bytes(p.rss as f64),
                    p.processes
                ));
                bar.tick();
            });
            let result = match result {
                Ok(r) => r,
                Err(e) => {
                    bar.finish_and_clear();
                    return Err(e.context(format!("{} (run {})", spec.allocator.name, round + 1)));
                }
            };
            order.push(report::OrderEntry {
                round: round + 1,
                allocator: spec.allocator.name.clone(),
            });
            let interrupted = result.interrupted;
            if !result.exit.success() && !interrupted {
                bar.suspend(|| {
                    eprintln!(
                        "ebb: {} run {}: {} ended with {}",
                        text,
                        round + 1,
                        spec.allocator.name,
                        result.exit.describe()
                    )
                });
            }
            results[i].push(result);
            if interrupted {
                break 'rounds;
            }
        }
    }
    // ebb's statistics and retention reports come from one more run of each ebb
    // library, not timed (`RunSpec::ebb_details` says why).
    let mut details: Vec<Option<runner::RunResult>> = vec![None; specs.len()];
    for (i, spec) in specs.iter().enumerate() {
        if interrupted() || !spec.allocator.is_ebb || results[i].is_empty() {
            continue;
        }
        let spec = runner::RunSpec {
            ebb_details: true,
            ..spec.clone()
        };
        let result = runner::run(&spec, &mut |p| {
            bar.set_message(format!(
                "{} · statistics run (not timed) · {} · {:.1} s",
                spec.allocator.name, p.phase, p.t
            ));
            bar.tick();
        });
        match result {
            Ok(r) if !r.interrupted => details[i] = Some(r),
            Ok(_) => {}
            Err(e) => {
                bar.suspend(|| eprintln!("ebb: {}: statistics run: {e:#}", spec.allocator.name))
            }
        }
    }
    bar.finish_and_clear();
    // After Ctrl-C, allocators may have one run fewer; keep those that have any.
    let kept: Vec<bool> = results.iter().map(|r| !r.is_empty()).collect();
    let versions: Vec<Option<String>> = versions
        .into_iter()
        .zip(&kept)
        .filter_map(|(v, &k)| k.then_some(v))
        .collect();
    let (names, results): (Vec<String>, Vec<Vec<runner::RunResult>>) = names
        .into_iter()
        .zip(results)
        .filter(|(_, r)| !r.is_empty())
        .unzip();
    let ebb_details: Vec<Option<runner::RunResult>> = details
        .into_iter()
        .zip(kept)
        .filter_map(|(d, k)| k.then_some(d))
        .collect();
    let mut summaries = compare::summarise(&names, &results);
    for ((summary, detail), version) in summaries.iter_mut().zip(&ebb_details).zip(versions) {
        if let Some(d) = detail {
            summary.ebb = compare::ebb_summary(&[d]);
        }
        summary.version = version;
    }
    print!("{}", report::compare_text(&text, runs, &summaries));
    let out = report::CompareJson {
        command: command_text(&command),
        builtin_workload: builtin,
        runs,
        order,
        skipped,
        summaries,
        results,
        ebb_details,
    };
    if let Some(path) = &args.sampling.json {
        write_file(path, &serde_json::to_string_pretty(&out)?, "JSON")?;
    }
    if let Some(path) = &args.markdown {
        write_file(
            path,
            &compare::markdown_table(&out.summaries, &text, runs),
            "markdown table",
        )?;
    }
    if let Some(path) = &args.sampling.svg {
        let charted: Vec<&runner::RunResult> = out
            .summaries
            .iter()
            .zip(&out.results)
            .map(|(s, r)| &r[s.median_run])
            .collect();
        let svg = chart::render(
            &format!("{text}: memory over time (median run of {runs})"),
            &out.summaries,
            &charted,
        )?;
        write_file(path, &svg, "chart")?;
    }
    if interrupted() {
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    let failed = out.summaries.iter().any(|s| s.failed_runs > 0);
    Ok(if failed {
        ExitCode::from(EXIT_COMMAND_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}
