//! The heap profiler from the command line: `ebb run --profile PREFIX` has every ebb
//! process of the tree write a profile at exit (`EBB_PROFILE`) and prints the top
//! allocation sites of what it wrote; `ebb top` prints them for any profile, minus a
//! base (`ebb_pprof::top`: `pprof -top` for readers without Go); `ebb flame` draws its
//! stacks as a flame graph (`inferno`).

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// The sites `ebb run --profile` prints: Rust's collection code (`Vec` growth,
/// `Box::new`, `format!`) charged to the code that called it.
const SITES: ebb_pprof::top::Sites = ebb_pprof::top::Sites::OutsideStd;

/// Rows of each table `ebb run --profile` prints.
const RUN_ROWS: usize = 10;
/// Profiles of a tree `ebb run --profile` summarises (the ones that allocated most).
const RUN_PROFILES: usize = 3;

/// The signal on which ebb processes write a heap profile under `--profile`
/// (`EBB_PROFILE_SIGNAL`): a real-time one near the top, which programs rarely use. A
/// tree ebb stops (a server, or any run on Ctrl-C) gets SIGTERM, and a process that
/// SIGTERM kills writes no profile at exit.
pub fn profile_signal() -> i32 {
    libc::SIGRTMAX() - 3
}

/// How long the processes of a server get to write their profiles before it is stopped.
const PROFILE_WAIT: Duration = Duration::from_secs(10);

/// Before ebb stops a tree: have each of its processes that catches
/// [`profile_signal`] (ebb's, with the profiler on: `SigCgt` in its status; any other
/// would die of it) write a profile, and wait until each has written one that reads
/// whole (`<prefix>.<pid>.<n>.pb.gz`).
/// `pids`: the tree's processes; `poll`: how often to look for the files.
pub fn request_profiles(prefix: &Path, pids: &[i32], poll: Duration) {
    let signal = profile_signal();
    let asked: Vec<i32> = pids
        .iter()
        .copied()
        .filter(|&pid| crate::procfs::catches_signal(pid, signal))
        .collect();
    let before: Vec<usize> = asked
        .iter()
        .map(|&pid| signal_profiles(prefix, pid).len())
        .collect();
    for &pid in &asked {
        // Through its profile thread; a process without one (just starting) gets it
        // process-wide: the tree is being stopped anyway.
        if !crate::procfs::signal_thread(pid, "ebb-profile", signal) {
            // SAFETY: kill only sends a signal; the process catches it.
            unsafe { libc::kill(pid, signal) };
        }
    }
    let deadline = Instant::now() + PROFILE_WAIT;
    let written = |(&pid, &n): (&i32, &usize)| {
        signal_profiles(prefix, pid)
            .get(n)
            .is_some_and(|path| is_whole(path))
    };
    while Instant::now() < deadline && !asked.iter().zip(&before).all(written) {
        std::thread::sleep(poll);
    }
}

/// A profile a process of the tree wrote.
pub struct Written {
    pub path: PathBuf,
    pub profile: ebb_pprof::proto::Profile,
    /// Written at exit (`<prefix>.<pid>.pb.gz`), not on a signal (`.<pid>.<n>.pb.gz`).
    pub at_exit: bool,
    /// Its estimate of the bytes allocated (`alloc_space`): 0 if it holds no sample.
    pub allocated: i64,
    /// What the same instance held at its peak (`<prefix>.<pid>.peak.pb.gz`, or
    /// `.raw`), if it wrote that.
    pub peak: Option<PathBuf>,
    /// The process that wrote it.
    pub pid: u32,
    /// The profile of the process's other ebb instance (a Rust program on ebb with
    /// `libebb.so` preloaded has two: a `.raw` and a `.pb.gz`), merged into `profile`
    /// (`ebb_pprof::merge`): both instances' live and allocated bytes.
    pub merged: Option<PathBuf>,
}

/// The peak profile written beside `path` (`<prefix>.<pid>[.<n>].pb.gz` or `.raw`):
/// `<prefix>.<pid>.peak.pb.gz` (`.raw`), if it is there.
pub fn peak_beside(prefix: &Path, pid: u32, path: &Path) -> Option<PathBuf> {
    let (dir, stem) = split_prefix(prefix)?;
    let ext = if path.extension().is_some_and(|e| e == "raw") {
        "raw"
    } else {
        "pb.gz"
    };
    let peak = dir.join(format!("{stem}.{pid}.peak.{ext}"));
    peak.exists().then_some(peak)
}

/// The directory and file-name stem of `prefix`.
fn split_prefix(prefix: &Path) -> Option<(PathBuf, &str)> {
    let dir = match prefix.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Some((dir, prefix.file_name()?.to_str()?))
}

/// A profile file: pprof (`.pb.gz`), or ebb's raw format (`.raw`), which a program
/// with ebb as its Rust global allocator writes when it does not link `ebb-pprof`;
/// symbolized here, on the machine that ran it, as `ebb-pprof symbolize` does.
pub fn read_profile(path: &Path) -> Result<ebb_pprof::proto::Profile> {
    if path.extension().is_some_and(|e| e == "raw") {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the profile {}", path.display()))?;
        let raw = ebb_pprof::RawProfile::parse(&text)
            .map_err(|e| anyhow::anyhow!("{}: not an ebb raw profile: {e}", path.display()))?;
        return Ok(ebb_pprof::build(&raw));
    }
    read_pprof(path)
}

/// A whole profile file: a `.raw` one ending with its `end` line (it is written in
/// place, so a reader can find it half written), or a gzipped pprof that decodes.
pub fn is_whole(path: &Path) -> bool {
    if path.extension().is_some_and(|e| e == "raw") {
        return std::fs::read_to_string(path)
            .ok()
            .and_then(|text| ebb_pprof::RawProfile::parse(&text).ok())
            .is_some_and(|raw| raw.complete);
    }
    read_pprof(path).is_ok()
}

fn read_pprof(path: &Path) -> Result<ebb_pprof::proto::Profile> {
    ebb_pprof::read_gzipped(path)
        .with_context(|| format!("cannot read the profile {}", path.display()))
}

/// The files `<prefix>.<pid>.pb.gz` (sequence None) and `<prefix>.<pid>.<n>.pb.gz`
/// in `prefix`'s directory, as (path, pid, sequence, modified); and the same with
/// `.raw` (a process whose Rust code runs on ebb, with `libebb.so` preloaded for its C
/// code, holds two ebb instances and may write both).
fn profile_files(prefix: &Path) -> Vec<(PathBuf, u32, Option<u32>, SystemTime)> {
    let Some((dir, stem)) = split_prefix(prefix) else {
        return Vec::new();
    };
    let number = |s: &str| {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u32>().ok())
            .flatten()
    };
    std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name();
            let rest = name.to_str()?.strip_prefix(stem)?.strip_prefix('.')?;
            let rest = rest
                .strip_suffix(".pb.gz")
                .or_else(|| rest.strip_suffix(".raw"))?;
            let (pid, sequence) = match rest.split_once('.') {
                Some((pid, n)) => (number(pid)?, Some(number(n)?)),
                None => (number(rest)?, None),
            };
            let modified = entry.metadata().and_then(|m| m.modified()).ok()?;
            Some((entry.path(), pid, sequence, modified))
        })
        .collect()
}

/// The profiles process `pid` wrote on a signal, in order (`.<pid>.1.pb.gz`, ...).
pub fn signal_profiles(prefix: &Path, pid: i32) -> Vec<PathBuf> {
    let mut files: Vec<(u32, PathBuf)> = profile_files(prefix)
        .into_iter()
        .filter(|&(_, p, _, _)| p as i32 == pid)
        .filter_map(|(path, _, n, _)| Some((n?, path)))
        .collect();
    files.sort();
    files.into_iter().map(|(_, path)| path).collect()
}

/// For each process that wrote profiles since `since`: its profile at exit, or else its
/// last one on a signal (`ebb run` asked for one before stopping the tree); of a
/// process with two ebb instances (a `.pb.gz` and a `.raw`), both merged
/// ([`merge_instances`]). Largest first by allocated bytes.
pub fn written_since(prefix: &Path, since: SystemTime) -> Vec<Written> {
    type Key = (u32, bool);
    let mut last: std::collections::HashMap<Key, (PathBuf, Option<u32>)> =
        std::collections::HashMap::new();
    for (path, pid, sequence, modified) in profile_files(prefix) {
        if modified < since {
            continue;
        }
        let pid = (pid, path.extension().is_some_and(|e| e == "raw"));
        let newer = match last.get(&pid) {
            None => true,
            Some((_, None)) => false,
            Some((_, Some(n))) => sequence.map_or(true, |m| m > *n),
        };
        if newer {
            last.insert(pid, (path, sequence));
        }
    }
    let mut by_pid: std::collections::HashMap<u32, Written> = std::collections::HashMap::new();
    for ((pid, _), (path, sequence)) in last {
        let Ok(profile) = read_profile(&path) else {
            continue;
        };
        let allocated =
            ebb_pprof::top::top(&profile, None, Some("alloc_space"), SITES).map_or(0, |t| t.total);
        let written = Written {
            pid,
            peak: peak_beside(prefix, pid, &path),
            path,
            profile,
            at_exit: sequence.is_none(),
            allocated,
            merged: None,
        };
        let written = match by_pid.remove(&pid) {
            Some(other) => merge_instances(written, other),
            None => written,
        };
        by_pid.insert(pid, written);
    }
    let mut found: Vec<Written> = by_pid.into_values().collect();
    found.sort_by(|a, b| {
        b.allocated
            .cmp(&a.allocated)
            .then_with(|| a.path.cmp(&b.path))
    });
    found
}

/// One process's profiles from its two ebb instances as one: the samples of both, the
/// peak and the name of the one that allocated more. If they cannot be merged (sampled
/// at different rates), the one that allocated more.
fn merge_instances(a: Written, b: Written) -> Written {
    let (big, small) = if a.allocated >= b.allocated {
        (a, b)
    } else {
        (b, a)
    };
    match ebb_pprof::merge::merge(&big.profile, &small.profile) {
        Ok(profile) => Written {
            profile,
            allocated: big.allocated + small.allocated,
            at_exit: big.at_exit && small.at_exit,
            merged: Some(small.path),
            ..big
        },
        Err(_) => big,
    }
}

/// What `ebb run --profile` prints after the run: for the profiles that allocated
/// most, what was still live at exit and what was allocated, by site; with
/// `--profile-every` (`every`), what each site held over time.
pub fn run_text(prefix: &Path, since: SystemTime, every: Option<Duration>) -> String {
    use std::fmt::Write;
    let profiles = written_since(prefix, since);
    let mut out = String::new();
    if profiles.is_empty() {
        let _ = writeln!(
            out,
            "\nebb run: no heap profile written to {}.<pid>.pb.gz (a process writes one when it \
             exits normally, or when ebb asks before stopping it)",
            prefix.display()
        );
        return out;
    }
    let sampled = profiles.iter().filter(|w| w.allocated > 0).count();
    let which = if sampled == 0 {
        "; none holds a sample: the processes allocated too little for the sampling \
         interval (--profile-rate)"
            .to_string()
    } else if sampled > RUN_PROFILES {
        format!("; {sampled} with samples, the {RUN_PROFILES} that allocated most:")
    } else if sampled < profiles.len() {
        format!("; {sampled} with samples:")
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "\nebb run: {} heap profile{} written ({}.<pid>.pb.gz, or .raw from Rust code on ebb){which}",
        profiles.len(),
        if profiles.len() == 1 { "" } else { "s" },
        prefix.display(),
    );
    for written in profiles
        .iter()
        .filter(|w| w.allocated > 0)
        .take(RUN_PROFILES)
    {
        let _ = writeln!(out, "\n  {}", written.path.display());
        if let Some(other) = &written.merged {
            let _ = writeln!(
                out,
                "  {} (the process's other ebb instance, merged: the Rust code's and the C \
                 code's blocks together)",
                other.display()
            );
        }
        if let Some(peak) = &written.peak {
            // Two instances peak at moments of their own: the sum of their peaks is no
            // moment of the process, so the peak shown is the first file's instance's.
            let whose = if written.merged.is_some() {
                ", of the first file's instance only"
            } else {
                ""
            };
            let _ = writeln!(out, "  {} (at the peak{whose})", peak.display());
        }
        let live = if written.at_exit {
            "still live at exit (leaks, caches)"
        } else {
            "live when ebb stopped it (leaks, caches)"
        };
        let peak = written.peak.as_ref().and_then(|p| read_profile(p).ok());
        let mut tables = vec![(&written.profile, "inuse_space", live)];
        let peak_title = peak.as_ref().map(|p| {
            let into =
                std::time::UNIX_EPOCH + std::time::Duration::from_nanos(p.time_nanos.max(0) as u64);
            match into.duration_since(since) {
                Ok(d) => format!(
                    "live at the peak, {:.1} s into the run (within 1/16 of it: what made \
                     memory peak, freed or not)",
                    d.as_secs_f64()
                ),
                Err(_) => "live at the peak (within 1/16 of it: what made memory peak, freed \
                           or not)"
                    .to_string(),
            }
        });
        if let (Some(peak), Some(title)) = (&peak, &peak_title) {
            tables.push((peak, "inuse_space", title.as_str()));
        }
        // After the tables of what was live, before what was allocated.
        let over_time =
            every.map(|every| (tables.len(), over_time_text(prefix, since, written, every)));
        tables.push((&written.profile, "alloc_space", "allocated over the run"));
        for (i, (profile, index, what)) in tables.into_iter().enumerate() {
            if let Some((_, text)) = over_time.as_ref().filter(|(at, _)| *at == i) {
                out.push_str(text);
            }
            match ebb_pprof::top::top(profile, None, Some(index), SITES) {
                Ok(table) => {
                    let _ = writeln!(out, "  {what}:");
                    for line in ebb_pprof::top::format(&table, RUN_ROWS).lines() {
                        let _ = writeln!(out, "    {line}");
                    }
                }
                Err(e) => {
                    let _ = writeln!(out, "  {what}: {e}");
                }
            }
        }
    }
    let _ = writeln!(
        out,
        "\n  more: ebb top PROFILE [--base EARLIER] [--index alloc_objects] [-n 50]; \
         ebb flame PROFILE (a flame graph); go tool pprof -http=: PROFILE"
    );
    out
}

/// The profiles `written`'s process wrote since `since` one after another (each
/// `--profile-every`, or asked for by a signal), as (path, seconds into the run): both
/// instances' of a process that has two (`written.merged`).
/// Not the one at exit: a program that frees everything at exit (CPython does) would
/// end every row at zero, the leak's too; the table above shows what exit held.
fn profiles_over_time(prefix: &Path, since: SystemTime, written: &Written) -> Vec<(PathBuf, f64)> {
    let raw = is_raw(&written.path);
    let mut files: Vec<(u32, PathBuf, SystemTime)> = profile_files(prefix)
        .into_iter()
        .filter(|(path, pid, _, modified)| {
            *pid == written.pid
                && *modified >= since
                && (written.merged.is_some() || is_raw(path) == raw)
        })
        .filter_map(|(path, _, n, modified)| Some((n?, path, modified)))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|(_, path, modified)| {
            let into = modified.duration_since(since).unwrap_or_default();
            (path, into.as_secs_f64())
        })
        .collect()
}

/// The table over time of `written`'s profiles ([`profiles_over_time`], the two
/// instances' merged moment by moment: `ebb_pprof::merge::over_time`): live bytes by
/// site, and each moment's seconds into the run. None with fewer than two moments; an
/// error if a profile cannot be read.
fn live_over_time(
    prefix: &Path,
    since: SystemTime,
    written: &Written,
) -> Option<Result<(ebb_pprof::series::Series, Vec<f64>)>> {
    let files = profiles_over_time(prefix, since, written);
    if files.len() < 2 {
        return None;
    }
    let profiles = match files
        .iter()
        .map(|(path, _)| read_profile(path))
        .collect::<Result<Vec<_>>>()
    {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    let timed: Vec<ebb_pprof::merge::Timed> = files
        .iter()
        .zip(&profiles)
        .map(|((path, secs), profile)| ebb_pprof::merge::Timed {
            instance: usize::from(is_raw(path)),
            at_ns: (secs * 1e9) as u64,
            profile,
        })
        .collect();
    let moments = match ebb_pprof::merge::over_time(&timed) {
        Ok(moments) if moments.len() >= 2 => moments,
        Ok(_) => return None,
        Err(e) => return Some(Err(anyhow::anyhow!("{e}"))),
    };
    let refs: Vec<&ebb_pprof::proto::Profile> = moments.iter().map(|(_, p)| p).collect();
    let times = moments.iter().map(|&(at, _)| at as f64 / 1e9).collect();
    Some(
        ebb_pprof::series::series(&refs, Some("inuse_space"), SITES)
            .map(|table| (table, times))
            .map_err(|e| anyhow::anyhow!("{e}")),
    )
}

/// What `ebb run --profile-every --svg` draws: the live bytes of the sites that grew
/// most in the process that allocated most, and of all other sites together, at each
/// of its profiles (seconds into the run).
pub struct SitesOverTime {
    pub pid: u32,
    pub times: Vec<f64>,
    /// (site, bytes at each time), the sites that grew most first, "other sites" last.
    pub rows: Vec<(String, Vec<i64>)>,
}

impl SitesOverTime {
    /// For `ebb run --json`: `{"pid", "times_s": [...], "sites": [{"site", "inuse_bytes":
    /// [...]}]}`, the sites in the chart's order ("other sites" last).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "pid": self.pid,
            "times_s": self.times,
            "sites": self
                .rows
                .iter()
                .map(|(site, bytes)| serde_json::json!({ "site": site, "inuse_bytes": bytes }))
                .collect::<Vec<_>>(),
        })
    }
}

/// Sites drawn by name in the chart over time; the rest are added up.
const CHART_SITES: usize = 7;

/// [`SitesOverTime`] of the run's profiles, if its busiest process wrote two or more.
pub fn sites_over_time(prefix: &Path, since: SystemTime) -> Option<SitesOverTime> {
    let written = written_since(prefix, since)
        .into_iter()
        .find(|w| w.allocated > 0)?;
    let (table, times) = live_over_time(prefix, since, &written)?.ok()?;
    let mut rows: Vec<(String, Vec<i64>)> = table
        .rows
        .iter()
        .take(CHART_SITES)
        .map(|r| (r.name.clone(), r.values.clone()))
        .collect();
    let other: Vec<i64> = (0..times.len())
        .map(|i| table.totals[i] - rows.iter().map(|(_, v)| v[i]).sum::<i64>())
        .collect();
    if other.iter().any(|&v| v > 0) {
        rows.push(("other sites".to_string(), other));
    }
    Some(SitesOverTime {
        pid: written.pid,
        times,
        rows,
    })
}

/// `ebb run --profile --profile-every`: what each site of `written`'s process held over
/// time, as a table under the others.
fn over_time_text(prefix: &Path, since: SystemTime, written: &Written, every: Duration) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    match live_over_time(prefix, since, written) {
        None => {
            let _ = writeln!(
                out,
                "  live over time: one profile only (the process changed its profile in fewer \
                 than two intervals of {})",
                humantime::format_duration(every)
            );
        }
        Some(Err(e)) => {
            let _ = writeln!(out, "  live over time: {e:#}");
        }
        Some(Ok((table, times))) => {
            let labels: Vec<String> = times.iter().map(|t| format!("{t:.1} s")).collect();
            let _ = writeln!(
                out,
                "  live over time (a profile each {} in which it changed; seconds into the run):",
                humantime::format_duration(every)
            );
            for line in ebb_pprof::series::format(&table, &labels, RUN_ROWS).lines() {
                let _ = writeln!(out, "    {line}");
            }
        }
    }
    out
}

/// A profile in ebb's raw format: written by an instance without the pprof encoder
/// (the Rust code's, in a Rust program on ebb with `libebb.so` preloaded).
pub fn is_raw(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "raw")
}

/// `at` in nanoseconds since the epoch (0 before it).
pub fn nanos(at: SystemTime) -> u64 {
    at.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A raw profile of one stack that allocated `bytes`, whole or cut short.
    pub fn raw_text(bytes: u64, whole: bool) -> String {
        let end = if whole { "end\n" } else { "" };
        format!("ebb-heap-raw 2\nrate 524288\nb 1 {bytes} 1 {bytes} 401000\n{end}")
    }

    /// A process with two ebb instances wrote a `.pb.gz` (the preloaded one, which
    /// served its C code) and a `.raw` (its Rust code's): both are the process's,
    /// merged, the one that allocated more named first (the raw one, read and
    /// symbolized from the raw text).
    #[test]
    fn the_profiles_of_two_instances_are_merged() {
        let dir = std::env::temp_dir().join(format!("ebb-cli-raw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let since = SystemTime::now() - std::time::Duration::from_secs(5);
        let small = ebb_pprof::RawProfile::parse(&raw_text(4096, true)).unwrap();
        ebb_pprof::write_gzipped(&ebb_pprof::build(&small), &dir.join("heap.77.pb.gz")).unwrap();
        std::fs::write(dir.join("heap.77.raw"), raw_text(64 << 20, true)).unwrap();
        let found = written_since(&dir.join("heap"), since);
        assert_eq!(found.len(), 1);
        assert!(
            found[0].path.ends_with("heap.77.raw"),
            "{:?}",
            found[0].path
        );
        assert_eq!(
            found[0].merged.as_deref(),
            Some(dir.join("heap.77.pb.gz").as_path())
        );
        assert!(found[0].allocated >= 60 << 20, "{}", found[0].allocated);
        assert_eq!(found[0].profile.sample.len(), 2, "both instances' samples");
        assert!(found[0].at_exit);
        assert!(is_whole(&dir.join("heap.77.raw")));
        std::fs::write(dir.join("heap.77.1.raw"), raw_text(1 << 20, false)).unwrap();
        assert!(
            !is_whole(&dir.join("heap.77.1.raw")),
            "no end line: being written"
        );
        assert_eq!(
            crate::profile_files::default_flame_path(&dir.join("heap.77.raw")),
            dir.join("heap.77.svg")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
