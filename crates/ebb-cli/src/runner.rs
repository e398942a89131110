//! Running one command under one allocator and sampling its whole process tree:
//! start (wait for the ready line), drive, idle with marks, stop; or, for a plain
//! command, until it exits.

use crate::alloc::Allocator;
use crate::procfs::{self, Mem};
use anyhow::{bail, Context, Result};
use regex::Regex;
use serde::Serialize;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Idle marks, in seconds after the idle phase starts; the end of the idle phase is
/// always a mark too.
const IDLE_MARKS: &[u64] = &[1, 2, 5, 10, 30, 60, 90, 120, 180, 300, 600, 900, 1800, 3600];
/// How long a stopped tree gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// Lines of the command's output kept when it is not shown (printed if it fails).
const TAIL_LINES: usize = 20;
/// How often the loop looks for exits, output lines and Ctrl-C between samples.
const POLL: Duration = Duration::from_millis(10);

#[derive(Clone)]
pub struct RunSpec {
    pub command: Vec<OsString>,
    pub allocator: Allocator,
    pub interval: Duration,
    pub ready: Option<Regex>,
    pub ready_timeout: Duration,
    pub drive: Option<String>,
    pub drive_for: Option<Duration>,
    pub idle: Option<Duration>,
    /// Show the command's output (and give it our stdin); otherwise keep its last lines.
    pub show_output: bool,
    /// Under ebb: have each process write its statistics (`EBB_STATS_FILE`) and
    /// retention report (`EBB_REPORT`) at exit. Off for `compare`'s timed runs: the
    /// reports cost each process 0.1-1 ms at exit (the retention report reads
    /// `/proc/self/smaps`), which a command of many processes would be charged for.
    pub ebb_details: bool,
    /// Under ebb: the heap profiler's settings (`EBB_PROFILE`, `EBB_PROFILE_RATE`) for
    /// every process of the tree, each writing `<prefix>.<pid>.pb.gz` at exit.
    pub profile: Option<Profiling>,
    /// Under ebb: ask every process of the tree for its retention report this often
    /// (`EBB_REPORT_SIGNAL`), making a series (`ebb run --breakdown`).
    pub breakdown: Option<Duration>,
}

/// `ebb run --profile PREFIX [--profile-rate BYTES]`.
#[derive(Clone)]
pub struct Profiling {
    /// Absolute, so processes that change directory write where asked.
    pub prefix: std::path::PathBuf,
    pub rate: Option<String>,
    /// `EBB_PROFILE_INTERVAL`: a profile this often as well (a series over time).
    pub every: Option<Duration>,
}

impl RunSpec {
    /// A server run: start, wait for the ready line, drive, idle, then stop the tree.
    fn is_server(&self) -> bool {
        self.ready.is_some()
            || self.drive.is_some()
            || self.drive_for.is_some()
            || self.idle.is_some()
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    /// Seconds since the command started.
    pub t: f64,
    pub rss: u64,
    pub pss: u64,
    pub anon: u64,
    pub processes: usize,
    /// CPU seconds (user + sys) used by the tree so far.
    pub cpu_s: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct IdleMark {
    /// The mark: seconds into the idle phase.
    pub after_s: f64,
    pub rss: u64,
    pub pss: u64,
    pub anon: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// The tree was stopped by ebb at the end of the idle phase (or by Ctrl-C).
    pub stopped_by_ebb: bool,
}

impl Exit {
    pub fn success(&self) -> bool {
        self.code == Some(0) || (self.stopped_by_ebb && self.signal.is_some())
    }

    pub fn describe(&self) -> String {
        match (self.code, self.signal) {
            (Some(c), _) => format!("exit status {c}"),
            (None, Some(s)) => format!("killed by signal {s}"),
            _ => "unknown status".into(),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    pub command: String,
    pub allocator: String,
    pub preload: Option<PathBuf>,
    pub exit: Exit,
    /// Seconds of work: until the command exited or, for a server, until its idle
    /// phase started (start-up and drive).
    pub wall_s: f64,
    /// Seconds from start until the tree was gone.
    pub elapsed_s: f64,
    pub ready_s: Option<f64>,
    pub drive_s: Option<f64>,
    pub drive_exit: Option<Exit>,
    /// CPU seconds of every process of the tree, the whole run (idle included).
    pub user_s: f64,
    pub sys_s: f64,
    /// Sums over the tree at the samples; `rss` is at least `peak_process_rss`.
    pub peak: Mem,
    /// The largest RSS any one process of the tree reached: the kernel's high-water mark
    /// (`ru_maxrss` from `wait4`), exact where samples can miss a peak between them (a
    /// command shorter than the interval).
    pub peak_process_rss: u64,
    /// At the end: the last sample before the command exited, or at the end of the idle
    /// phase.
    #[serde(rename = "final")]
    pub final_mem: Mem,
    pub idle_start_s: Option<f64>,
    pub idle_marks: Vec<IdleMark>,
    pub max_processes: usize,
    /// Distinct processes seen in the tree.
    pub processes_seen: usize,
    pub interrupted: bool,
    pub samples: Vec<Sample>,
    /// The statistics each ebb process of the tree wrote at exit (`EBB_STATS_FILE`).
    pub ebb_stats: Vec<serde_json::Value>,
    /// The retention report each ebb process of the tree wrote at exit (`EBB_REPORT`):
    /// its RSS split into what ebb holds and why, and what is not ebb's.
    #[serde(default)]
    pub ebb_retention: Vec<serde_json::Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub output_tail: Vec<String>,
}

impl RunResult {
    /// A run of `command` under `allocator` before anything was measured.
    pub fn new(command: String, allocator: String, preload: Option<PathBuf>) -> RunResult {
        RunResult {
            command,
            allocator,
            preload,
            exit: Exit::default(),
            wall_s: 0.0,
            elapsed_s: 0.0,
            ready_s: None,
            drive_s: None,
            drive_exit: None,
            user_s: 0.0,
            sys_s: 0.0,
            peak: Mem::default(),
            peak_process_rss: 0,
            final_mem: Mem::default(),
            idle_start_s: None,
            idle_marks: Vec::new(),
            max_processes: 0,
            processes_seen: 0,
            interrupted: false,
            samples: Vec::new(),
            ebb_stats: Vec::new(),
            ebb_retention: Vec::new(),
            output_tail: Vec::new(),
        }
    }
}

/// What the progress line shows after each sample.
pub struct Progress<'a> {
    pub phase: &'a str,
    pub t: f64,
    pub rss: u64,
    pub processes: usize,
}

enum Phase {
    Running,
    WaitReady,
    Driving { start: f64 },
    DriveFor { until: f64 },
    Idle { start: f64, next_mark: usize },
}

impl Phase {
    fn name(&self) -> &'static str {
        match self {
            Phase::Running => "running",
            Phase::WaitReady => "starting",
            Phase::Driving { .. } | Phase::DriveFor { .. } => "driving",
            Phase::Idle { .. } => "idle",
        }
    }
}

/// A process this one reaped, with its CPU time.
struct Reaped {
    pid: i32,
    exit: Exit,
    user_s: f64,
    sys_s: f64,
    /// Its RSS high-water mark (or of the largest process it waited for).
    max_rss: u64,
}

fn reap_one() -> Option<Reaped> {
    let mut status = 0;
    // SAFETY: rusage is plain data, fully written by wait4 when it returns a pid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 writes only to the two out-parameters, which outlive the call.
    let pid = unsafe { libc::wait4(-1, &mut status, libc::WNOHANG, &mut usage) };
    if pid <= 0 {
        return None;
    }
    let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    let exit = if libc::WIFEXITED(status) {
        Exit {
            code: Some(libc::WEXITSTATUS(status)),
            ..Exit::default()
        }
    } else {
        Exit {
            signal: Some(libc::WTERMSIG(status)),
            ..Exit::default()
        }
    };
    Some(Reaped {
        pid,
        exit,
        user_s: secs(usage.ru_utime),
        sys_s: secs(usage.ru_stime),
        max_rss: usage.ru_maxrss.max(0) as u64 * 1024,
    })
}

/// Makes this process the reaper of orphans of its descendants, so a tree's processes
/// stay visible (and their CPU time counted) when their parent exits first.
pub fn become_subreaper() {
    // SAFETY: PR_SET_CHILD_SUBREAPER takes an integer argument and touches no memory.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

fn signal_tree(pgid: i32, pids: &[i32], signal: i32) {
    // SAFETY: kill only sends a signal; a pid that has gone makes it fail harmlessly.
    unsafe {
        libc::kill(-pgid, signal);
        for &pid in pids {
            libc::kill(pid, signal);
        }
    }
}

/// Forwards or collects the lines of one of the command's output pipes.
fn read_lines(
    pipe: impl Read + Send + 'static,
    to_stderr: bool,
    show: bool,
    tx: mpsc::Sender<String>,
) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(pipe);
        let mut buf = Vec::new();
        while reader.read_until(b'\n', &mut buf).is_ok_and(|n| n > 0) {
            if show {
                // A closed stdout (ebb piped into `head`) must not stop the command.
                let _ = if to_stderr {
                    std::io::stderr().write_all(&buf)
                } else {
                    std::io::stdout().write_all(&buf)
                };
            }
            let line = String::from_utf8_lossy(&buf).trim_end().to_string();
            buf.clear();
            if tx.send(line).is_err() {
                break;
            }
        }
    });
}

struct StatsDir(PathBuf);

impl StatsDir {
    fn new() -> Result<StatsDir> {
        static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("ebb-cli-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(StatsDir(dir))
    }

    /// Every JSON value in the files named `PREFIX-<pid>.json` the ebb processes wrote,
    /// with its pid added: one per ebb instance (a process with ebb linked in and
    /// `libebb.so` preloaded writes two lines to its statistics file).
    fn collect(&self, prefix: &str) -> Vec<serde_json::Value> {
        let mut all = Vec::new();
        let Ok(entries) = std::fs::read_dir(&self.0) else {
            return all;
        };
        let mut paths: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(prefix))
            })
            .collect();
        paths.sort();
        for path in paths {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let pid = path
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.rsplit('-').next())
                .and_then(|s| s.parse::<u64>().ok());
            let values = serde_json::Deserializer::from_str(&text).into_iter::<serde_json::Value>();
            for mut value in values.map_while(Result::ok) {
                if let (Some(obj), Some(pid)) = (value.as_object_mut(), pid) {
                    obj.entry("pid").or_insert(pid.into());
                }
                all.push(value);
            }
        }
        all
    }
}

impl Drop for StatsDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn format_duration(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// Runs the command once. Errors are for runs that could not measure anything useful:
/// the command does not start, or never prints its ready line.
pub fn run(spec: &RunSpec, progress: &mut dyn FnMut(&Progress)) -> Result<RunResult> {
    let program = spec.command.first().context("no command given")?;
    let shown = program.to_string_lossy().into_owned();
    let stats_dir = StatsDir::new()?;
    let mut cmd = Command::new(program);
    cmd.args(&spec.command[1..]).process_group(0);
    if let Some(lib) = &spec.allocator.preload {
        let mut preload = lib.as_os_str().to_owned();
        if let Some(existing) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
            preload.push(":");
            preload.push(existing);
        }
        cmd.env("LD_PRELOAD", preload);
    }
    cmd.envs(spec.allocator.env.iter().map(|(k, v)| (k, v)));
    if spec.allocator.is_ebb && spec.ebb_details {
        cmd.env("EBB_STATS_FILE", stats_dir.0.join("ebb-stats-%p.json"));
        cmd.env("EBB_REPORT", stats_dir.0.join("ebb-retention-%p.json"));
        if spec.breakdown.is_some() {
            cmd.env(
                "EBB_REPORT_SIGNAL",
                crate::breakdown::report_signal().to_string(),
            );
        }
    }
    if let (true, Some(profiling)) = (spec.allocator.is_ebb, &spec.profile) {
        cmd.env("EBB_PROFILE", &profiling.prefix);
        match &profiling.rate {
            Some(rate) => cmd.env("EBB_PROFILE_RATE", rate),
            None => cmd.env_remove("EBB_PROFILE_RATE"),
        };
        cmd.env(
            "EBB_PROFILE_SIGNAL",
            crate::profile::profile_signal().to_string(),
        );
        match profiling.every {
            Some(every) => cmd.env(
                "EBB_PROFILE_INTERVAL",
                format!("{}ms", every.as_millis().max(1)),
            ),
            None => cmd.env_remove("EBB_PROFILE_INTERVAL"),
        };
    }
    let capture = spec.ready.is_some() || !spec.show_output;
    if capture {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    if !spec.show_output {
        cmd.stdin(Stdio::null());
    }
    let start = Instant::now();
    let start_ms = crate::breakdown::monotonic_ms();
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!("command not found: {shown}"),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            bail!("cannot execute {shown}: permission denied")
        }
        Err(e) => bail!("cannot run {shown}: {e}"),
    };
    let child_pid = child.id() as i32;
    let (tx, rx) = mpsc::channel();
    if let Some(out) = child.stdout.take() {
        read_lines(out, false, spec.show_output, tx.clone());
    }
    if let Some(err) = child.stderr.take() {
        read_lines(err, true, spec.show_output, tx.clone());
    }
    drop(tx);
    // The child is reaped below with wait4, never through `child`.
    drop(child);

    let me = std::process::id() as i32;
    let secs = |i: Instant| i.duration_since(start).as_secs_f64();
    let mut result = RunResult::new(
        spec.command
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" "),
        spec.allocator.name.clone(),
        spec.allocator.preload.clone(),
    );
    let mut seen = std::collections::HashSet::new();
    let mut tail = std::collections::VecDeque::new();
    let mut phase = if spec.ready.is_some() {
        Phase::WaitReady
    } else if spec.is_server() {
        Phase::DriveFor { until: 0.0 } // moves on at once to the drive or idle phase
    } else {
        Phase::Running
    };
    let mut exited = false;
    let mut drive_pid = 0;
    let mut last_mem = Mem::default();
    let mut last_pids: Vec<i32> = Vec::new();
    let mut next_sample = 0.0;
    let breakdown_interval = spec
        .breakdown
        .filter(|_| spec.allocator.is_ebb && spec.ebb_details)
        .map(|d| d.as_secs_f64());
    let mut next_report = breakdown_interval.unwrap_or(0.0);
    let interval = spec.interval.as_secs_f64();
    let mut failure: Option<String> = None;

    loop {
        while let Some(r) = reap_one() {
            if r.pid == drive_pid && drive_pid != 0 {
                if let Phase::Driving { start: s, .. } = phase {
                    result.drive_s = Some(secs(Instant::now()) - s);
                }
                result.drive_exit = Some(r.exit);
                drive_pid = -1;
                continue;
            }
            result.user_s += r.user_s;
            result.sys_s += r.sys_s;
            result.peak_process_rss = result.peak_process_rss.max(r.max_rss);
            if r.pid == child_pid {
                result.exit = r.exit;
                exited = true;
            }
        }
        while let Ok(line) = rx.try_recv() {
            if let (Phase::WaitReady, Some(re)) = (&phase, &spec.ready) {
                if re.is_match(&line) {
                    result.ready_s = Some(secs(Instant::now()));
                    phase = Phase::DriveFor { until: 0.0 };
                }
            }
            if !spec.show_output {
                tail.push_back(line);
                if tail.len() > TAIL_LINES {
                    tail.pop_front();
                }
            }
        }
        let now = secs(Instant::now());
        let mark_due = match phase {
            Phase::Idle { start, next_mark } => {
                idle_mark_at(spec, next_mark).is_some_and(|m| now >= start + m)
            }
            _ => false,
        };
        if now >= next_sample || mark_due {
            let s = procfs::sample_tree(me, &[drive_pid]);
            if !s.pids.is_empty() {
                last_mem = s.mem;
                last_pids = s.pids.clone();
            }
            seen.extend(s.pids.iter().copied());
            result.max_processes = result.max_processes.max(s.pids.len());
            result.peak.rss = result.peak.rss.max(s.mem.rss);
            result.peak.pss = result.peak.pss.max(s.mem.pss);
            result.peak.anon = result.peak.anon.max(s.mem.anon);
            result.samples.push(Sample {
                t: now,
                rss: s.mem.rss,
                pss: s.mem.pss,
                anon: s.mem.anon,
                processes: s.pids.len(),
                cpu_s: s.cpu_s + result.user_s + result.sys_s,
            });
            if now >= next_sample {
                next_sample = (next_sample + interval).max(now + interval / 2.0);
            }
            progress(&Progress {
                phase: phase.name(),
                t: now,
                rss: s.mem.rss,
                processes: s.pids.len(),
            });
            if let Phase::Idle { start, next_mark } = &mut phase {
                if let Some(m) = idle_mark_at(spec, *next_mark).filter(|m| now >= *start + m) {
                    result.idle_marks.push(IdleMark {
                        after_s: m,
                        rss: s.mem.rss,
                        pss: s.mem.pss,
                        anon: s.mem.anon,
                    });
                    *next_mark += 1;
                }
            }
        }

        if let Some(every) = breakdown_interval.filter(|_| now >= next_report) {
            crate::breakdown::request(&last_pids);
            next_report = (next_report + every).max(now + every / 2.0);
        }

        if crate::interrupted() {
            result.interrupted = true;
            if !exited {
                result.final_mem = last_mem;
            }
            break;
        }
        if exited {
            if !matches!(phase, Phase::Idle { .. }) {
                result.wall_s = now;
            }
            if let (Phase::WaitReady, Some(re)) = (&phase, &spec.ready) {
                failure = Some(format!(
                    "{shown} ended ({}) before printing a line matching /{re}/",
                    result.exit.describe()
                ));
            }
            result.final_mem = last_mem;
            break;
        }
        match phase {
            Phase::Running => {}
            Phase::WaitReady => {
                if now > spec.ready_timeout.as_secs_f64() {
                    let re = spec.ready.as_ref().map_or(String::new(), |r| r.to_string());
                    failure = Some(format!(
                        "no line of {shown} matched /{re}/ within {} (--ready-timeout)",
                        format_duration(spec.ready_timeout)
                    ));
                    break;
                }
            }
            Phase::DriveFor { until } if now >= until => {
                if until == 0.0 {
                    // Just ready (or a server without a ready line): start the drive.
                    if let Some(drive) = &spec.drive {
                        drive_pid = spawn_drive(drive, spec.show_output)?;
                        phase = Phase::Driving { start: now };
                    } else if let Some(d) = spec.drive_for {
                        phase = Phase::DriveFor {
                            until: now + d.as_secs_f64().max(1e-9),
                        };
                        result.drive_s = Some(d.as_secs_f64());
                    } else {
                        phase = start_idle(&mut result, now);
                    }
                } else {
                    phase = start_idle(&mut result, now);
                }
            }
            Phase::DriveFor { .. } => {}
            Phase::Driving { .. } => {
                if drive_pid == -1 {
                    phase = start_idle(&mut result, now);
                }
            }
            Phase::Idle { start, .. } => {
                let idle = spec.idle.unwrap_or_default().as_secs_f64();
                if now >= start + idle && !mark_due {
                    result.final_mem = last_mem;
                    result.exit.stopped_by_ebb = true;
                    break;
                }
            }
        }
        std::thread::sleep(POLL.min(Duration::from_secs_f64((next_sample - now).max(0.0))));
    }

    // Stop whatever is left of the tree (all of it for a server or after Ctrl-C;
    // processes a command left behind when it exited).
    if drive_pid > 0 {
        signal_tree(drive_pid, &[], libc::SIGTERM);
    }
    if !exited {
        result.exit.stopped_by_ebb = true;
    }
    // A tree ebb stops (a server after its idle phase, any run on Ctrl-C) would write
    // no profile at exit: ask for them first.
    if let (Some(profiling), false) = (&spec.profile, exited) {
        let pids = procfs::sample_tree(me, &[drive_pid]).pids;
        crate::profile::request_profiles(&profiling.prefix, &pids, POLL);
    }
    // Nor a retention report at exit: under --breakdown, a last one on the signal.
    if let (Some(_), false) = (breakdown_interval, exited) {
        final_reports(&stats_dir, me, drive_pid);
    }
    stop_tree(
        child_pid,
        me,
        drive_pid,
        &mut last_pids,
        &mut result,
        &mut exited,
    );
    result.elapsed_s = secs(Instant::now());
    if result.wall_s == 0.0 {
        result.wall_s = result.idle_start_s.unwrap_or(result.elapsed_s);
    }
    result.processes_seen = seen.len();
    result.peak.rss = result.peak.rss.max(result.peak_process_rss);
    result.ebb_stats = stats_dir.collect("ebb-stats-");
    result.ebb_retention = stats_dir.collect("ebb-retention-");
    crate::breakdown::stamp(&mut result.ebb_retention, start_ms);
    result.output_tail = tail.into_iter().collect();
    if let Some(message) = failure {
        if !result.output_tail.is_empty() && !spec.show_output {
            eprintln!("ebb: last lines of {shown}:");
            for line in &result.output_tail {
                eprintln!("  | {line}");
            }
        }
        bail!(message);
    }
    Ok(result)
}

fn idle_mark_at(spec: &RunSpec, index: usize) -> Option<f64> {
    let idle = spec.idle?.as_secs_f64();
    let marks: Vec<f64> = IDLE_MARKS
        .iter()
        .map(|&m| m as f64)
        .filter(|&m| m < idle - 1e-9)
        .chain(std::iter::once(idle))
        .collect();
    marks.get(index).copied()
}

fn start_idle(result: &mut RunResult, now: f64) -> Phase {
    result.idle_start_s = Some(now);
    result.wall_s = now;
    Phase::Idle {
        start: now,
        next_mark: 0,
    }
}

fn spawn_drive(drive: &str, show_output: bool) -> Result<i32> {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(drive)
        .process_group(0)
        .stdin(Stdio::null());
    if !show_output {
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
    }
    let child = cmd
        .spawn()
        .with_context(|| format!("cannot run the drive command `{drive}`"))?;
    Ok(child.id() as i32)
}

/// How long the processes of a stopped tree get to write their last retention report.
const REPORT_WAIT: Duration = Duration::from_secs(3);

/// Before ebb stops a tree under `--breakdown`: have each ebb process write one more
/// report, and wait until its file has grown (its reports go in whole lines).
fn final_reports(stats_dir: &StatsDir, me: i32, drive_pid: i32) {
    let file = |pid: i32| stats_dir.0.join(format!("ebb-retention-{pid}.json"));
    let lines =
        |pid: i32| std::fs::read_to_string(file(pid)).map_or(0, |t| t.matches('\n').count());
    let pids = procfs::sample_tree(me, &[drive_pid]).pids;
    let before: Vec<(i32, usize)> = pids.iter().map(|&p| (p, lines(p))).collect();
    let asked = crate::breakdown::request(&pids);
    let deadline = Instant::now() + REPORT_WAIT;
    let written = |&&(pid, n): &&(i32, usize)| !asked.contains(&pid) || lines(pid) > n;
    while Instant::now() < deadline && !before.iter().all(|p| written(&p)) {
        std::thread::sleep(POLL);
    }
}

/// SIGTERM to the tree (its process group and every process in it), SIGKILL to what is
/// left after the grace period; reaps everything.
fn stop_tree(
    pgid: i32,
    me: i32,
    drive_pid: i32,
    pids: &mut Vec<i32>,
    result: &mut RunResult,
    exited: &mut bool,
) {
    let exclude = [drive_pid];
    let mut reap = |result: &mut RunResult| {
        while let Some(r) = reap_one() {
            if r.pid == drive_pid {
                result.drive_exit.get_or_insert(r.exit);
                continue;
            }
            result.user_s += r.user_s;
            result.sys_s += r.sys_s;
            result.peak_process_rss = result.peak_process_rss.max(r.max_rss);
            if r.pid == pgid && !*exited {
                let stopped = result.exit.stopped_by_ebb;
                result.exit = r.exit;
                result.exit.stopped_by_ebb = stopped;
                *exited = true;
            }
        }
    };
    for (signal, wait) in [(libc::SIGTERM, STOP_GRACE), (libc::SIGKILL, STOP_GRACE)] {
        *pids = procfs::sample_tree(me, &exclude).pids;
        if pids.is_empty() {
            break;
        }
        signal_tree(pgid, pids, signal);
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            reap(result);
            *pids = procfs::sample_tree(me, &exclude).pids;
            if pids.is_empty() {
                break;
            }
            std::thread::sleep(POLL);
        }
    }
    reap(result);
    if drive_pid > 0 {
        signal_tree(drive_pid, &[], libc::SIGKILL);
        let deadline = Instant::now() + STOP_GRACE;
        while result.drive_exit.is_none() && Instant::now() < deadline {
            reap(result);
            std::thread::sleep(POLL);
        }
    }
}
