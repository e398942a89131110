//! Asking a running ebb process, now: `ebb report PID` (its retention report) and
//! `ebb profile PID` (a heap profile). The process must have been started with
//! `EBB_REPORT` and `EBB_REPORT_SIGNAL`, or `EBB_PROFILE` and `EBB_PROFILE_SIGNAL` (read
//! from its `/proc/PID/environ`); `ebb` sends that signal to the watcher thread alone
//! (`ebb-report`, `ebb-profile`; as `ebb run` does: no thread of the program has a
//! `sleep` cut short) and waits for the file the process writes.

use crate::{procfs, profile, profile_files};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long the process gets to write its report.
const WAIT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(10);

const HOW_TO_START: &str = "start it with EBB_REPORT=/tmp/rss.%p.txt EBB_REPORT_SIGNAL=USR2 \
                            LD_PRELOAD=.../libebb.so (or .json for JSON)";
const HOW_TO_PROFILE: &str = "start it with EBB_PROFILE=/tmp/heap EBB_PROFILE_SIGNAL=USR1 \
                              LD_PRELOAD=.../libebb.so";

/// The value of `name` in the environment `pid` started with.
fn environ_var(pid: i32, name: &str) -> Result<Option<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/environ"))
        .with_context(|| format!("cannot read the environment of process {pid}"))?;
    let prefix = format!("{name}=");
    Ok(raw
        .split(|&b| b == 0)
        .filter_map(|entry| std::str::from_utf8(entry).ok())
        .find_map(|entry| entry.strip_prefix(&prefix).map(str::to_string)))
}

/// A signal as `EBB_REPORT_SIGNAL` names it (ebb's own rule): `USR1`, `USR2` (with or
/// without `SIG`), or a number of SIGUSR1, SIGUSR2 or a real-time signal.
pub fn signal_number(name: &str) -> Option<i32> {
    let name = name.strip_prefix("SIG").unwrap_or(name);
    match name {
        "USR1" => Some(libc::SIGUSR1),
        "USR2" => Some(libc::SIGUSR2),
        n => n.parse::<i32>().ok().filter(|&n| {
            n == libc::SIGUSR1
                || n == libc::SIGUSR2
                || (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&n)
        }),
    }
}

/// `EBB_REPORT`'s path for process `pid`: `%p` expanded, a relative path taken from
/// the process's working directory (where it opens the file).
fn report_path(pid: i32, template: &str) -> PathBuf {
    as_seen_by(pid, PathBuf::from(template.replace("%p", &pid.to_string())))
}

/// `path` as process `pid` opens it: a relative one from its working directory.
fn as_seen_by(pid: i32, path: PathBuf) -> PathBuf {
    if path.is_absolute() {
        path
    } else {
        Path::new(&format!("/proc/{pid}/cwd")).join(path)
    }
}

/// The file variable `file` (`EBB_REPORT`, `EBB_PROFILE`) and the signal that
/// variable `signal` names, from the environment `pid` started with, checked: the
/// process catches that signal (`how`: how to start a process so).
fn file_and_signal(pid: i32, file: &str, signal: &str, how: &str) -> Result<(String, i32)> {
    if !Path::new(&format!("/proc/{pid}")).exists() {
        bail!("no process {pid}");
    }
    let Some(template) = environ_var(pid, file)?.filter(|t| !t.is_empty()) else {
        bail!("process {pid} was not started with {file}: {how}");
    };
    let Some(signal_name) = environ_var(pid, signal)? else {
        bail!("process {pid} was started without {signal}: {how}");
    };
    let Some(number) = signal_number(&signal_name) else {
        bail!("process {pid}: {signal}={signal_name} is not a signal ebb takes");
    };
    if !procfs::catches_signal(pid, number) {
        bail!(
            "process {pid} does not catch signal {number}: ebb is not its allocator \
             (LD_PRELOAD), or it has not started yet"
        );
    }
    Ok((template, number))
}

/// Ask `pid` for its report and return it (the text the process appended).
pub fn report(pid: i32) -> Result<String> {
    let (template, signal) = file_and_signal(pid, "EBB_REPORT", "EBB_REPORT_SIGNAL", HOW_TO_START)?;
    let path = report_path(pid, &template);
    let before = std::fs::metadata(&path).map_or(0, |m| m.len());
    if !procfs::signal_thread(pid, "ebb-report", signal) {
        bail!("process {pid} has no ebb-report thread to ask (it is just starting)");
    }
    let written = wait_for(|| {
        let now = std::fs::read(&path).unwrap_or_default();
        let added = now.get(before as usize..).unwrap_or_default();
        // A report is whole once its last line is (text ends with its summary line).
        let whole = added.ends_with(b"\n") && std::str::from_utf8(added).is_ok();
        (whole && settled(&path, now.len())).then(|| String::from_utf8_lossy(added).into_owned())
    });
    written.with_context(|| {
        format!(
            "process {pid} wrote no report to {} within {} s",
            path.display(),
            WAIT.as_secs()
        )
    })
}

/// What `poll` returns once it returns something, polled every `POLL` for up to `WAIT`.
fn wait_for<T>(mut poll: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(found) = poll() {
            return Some(found);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(POLL);
    }
}

/// A heap profile `pid` wrote when asked, and the one of the same kind it wrote on the
/// signal before, if any (the base of "what grew since").
pub struct Profiled {
    pub path: PathBuf,
    pub earlier: Option<PathBuf>,
    /// The profile of what was live at the peak so far, written with it.
    pub peak: Option<PathBuf>,
    /// Every numbered profile of the same instance (on a signal or on the timer of
    /// `EBB_PROFILE_INTERVAL`), oldest first, ending with `path`; of a process with two
    /// ebb instances, both instances' (`profile_files::series_text` merges them).
    pub all: Vec<PathBuf>,
    /// The process's other ebb instance's profile of the same request, and its
    /// profile before, if it has one (a Rust program on ebb with `libebb.so` preloaded:
    /// both instances answer the signal).
    pub other: Option<(PathBuf, Option<PathBuf>)>,
}

/// Ask `pid` for a heap profile now (`<EBB_PROFILE>.<pid>.<n>.pb.gz`, or `.raw` from
/// Rust code on ebb; of a process with two ebb instances, both: `path` is the busier
/// one's, `other` the other's).
pub fn profile(pid: i32) -> Result<Profiled> {
    let (prefix, signal) =
        file_and_signal(pid, "EBB_PROFILE", "EBB_PROFILE_SIGNAL", HOW_TO_PROFILE)?;
    let prefix = as_seen_by(pid, PathBuf::from(prefix));
    let before = profile::signal_profiles(&prefix, pid);
    let asked_at = std::time::SystemTime::now() - Duration::from_secs(1);
    // Each ebb instance of the process runs a watcher of its own, and all of them
    // answer the signal (each handler calls the one it replaced).
    let instances = procfs::threads_named(pid, "ebb-profile").max(1);
    if !procfs::signal_thread(pid, "ebb-profile", signal) {
        bail!("process {pid} has no ebb-profile thread to ask (it is just starting)");
    }
    let new_whole = || {
        let new: Vec<PathBuf> = profile::signal_profiles(&prefix, pid)
            .into_iter()
            .filter(|p| !before.contains(p))
            .collect();
        (!new.is_empty() && new.iter().all(|p| profile::is_whole(p))).then_some(new)
    };
    // Every instance's, or, if one does not answer in time, what came.
    let written = wait_for(|| new_whole().filter(|new| new.len() >= instances)).or_else(new_whole);
    let Some(new) = written else {
        bail!(
            "process {pid} wrote no profile {}.{pid}.<n>.pb.gz within {} s",
            prefix.display(),
            WAIT.as_secs()
        );
    };
    let path = profile::written_since(&prefix, asked_at)
        .into_iter()
        .map(|w| w.path)
        .find(|p| new.contains(p))
        .unwrap_or_else(|| new[0].clone());
    let earlier_of = |path: &Path| {
        before
            .iter()
            .rev()
            .find(|p| p.extension() == path.extension())
            .cloned()
    };
    let other = new
        .iter()
        .find(|p| p.extension() != path.extension())
        .map(|p| (p.clone(), earlier_of(p)));
    let peak = profile::peak_beside(&prefix, pid as u32, &path);
    let mut all: Vec<PathBuf> = before
        .iter()
        .filter(|p| other.is_some() || p.extension() == path.extension())
        .cloned()
        .collect();
    all.extend(new.iter().filter(|p| **p != path).cloned());
    all.push(path.clone());
    Ok(Profiled {
        earlier: earlier_of(&path),
        path,
        peak,
        all,
        other,
    })
}

/// What `ebb profile PID` prints besides the profile written now.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// Its top sites.
    Now,
    /// Minus the profile it wrote before: what grew since.
    SinceLast,
    /// The profile of what was live at its peak so far, written with it.
    Peak,
    /// Each site in every profile it wrote, oldest first (`ebb top A B ...`).
    OverTime,
}

/// `ebb profile PID`: the profile `pid` writes now (named on stderr) and its top
/// `rows` sites, or what `shown` asks for instead.
pub fn profile_table(
    pid: i32,
    shown: Shown,
    index: Option<&str>,
    sites: ebb_pprof::top::Sites,
    rows: usize,
) -> Result<String> {
    let (since_last, peak) = (shown == Shown::SinceLast, shown == Shown::Peak);
    let profiled = profile(pid)?;
    if shown == Shown::OverTime {
        if profiled.all.len() < 2 {
            bail!(
                "process {pid} has written one profile, {}: run `ebb profile --over-time {pid}` \
                 again later (EBB_PROFILE_INTERVAL has it write one on a timer too)",
                profiled.path.display()
            );
        }
        eprintln!(
            "ebb: process {pid} wrote {}; each site in its {} profiles:",
            profiled.path.display(),
            profiled.all.len()
        );
        return profile_files::series_text(&profiled.all, index, sites, rows);
    }
    if peak {
        let Some(at_peak) = &profiled.peak else {
            bail!(
                "process {pid} wrote {} but no profile of its peak beside it (its ebb is \
                 older than this command, or it has no sample yet)",
                profiled.path.display()
            );
        };
        eprintln!(
            "ebb: process {pid} wrote {}; what was live at its peak so far:",
            at_peak.display()
        );
        return profile_files::top_text(at_peak, None, index, sites, rows, None);
    }
    if let Some((other, other_earlier)) = &profiled.other {
        // Two instances: both profiles of this request as one, minus both earlier ones.
        let now = profile_files::one_moment(&[profiled.path.clone(), other.clone()])?;
        let base = match (since_last, &profiled.earlier, other_earlier) {
            (false, _, _) => None,
            (true, Some(a), Some(b)) => Some(profile_files::one_moment(&[a.clone(), b.clone()])?),
            (true, _, _) => bail!(
                "process {pid}'s two ebb instances have not both written a profile before \
                 {} and {} to subtract: run `ebb profile {pid}` again later",
                profiled.path.display(),
                other.display()
            ),
        };
        eprintln!(
            "ebb: process {pid} wrote {} and {} (its two ebb instances, merged){}",
            profiled.path.display(),
            other.display(),
            if since_last {
                "; what grew since their last:"
            } else {
                ""
            }
        );
        return profile_files::top_of(&now, base.as_ref(), index, sites, rows, None);
    }
    let base = if since_last {
        let Some(earlier) = &profiled.earlier else {
            bail!(
                "process {pid} wrote no profile before {} to subtract: run `ebb profile {pid}` \
                 again later",
                profiled.path.display(),
            );
        };
        eprintln!(
            "ebb: process {pid} wrote {}; what grew since {}:",
            profiled.path.display(),
            earlier.display()
        );
        Some(earlier.as_path())
    } else {
        eprintln!("ebb: process {pid} wrote {}", profiled.path.display());
        None
    };
    profile_files::top_text(&profiled.path, base, index, sites, rows, None)
}

/// The file has stopped growing at `len` (a text report is written in several writes).
fn settled(path: &Path, len: usize) -> bool {
    std::thread::sleep(POLL * 5);
    std::fs::metadata(path).is_ok_and(|m| m.len() as usize == len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_are_named_as_ebb_names_them() {
        assert_eq!(signal_number("USR2"), Some(libc::SIGUSR2));
        assert_eq!(signal_number("SIGUSR1"), Some(libc::SIGUSR1));
        assert_eq!(
            signal_number(&libc::SIGRTMIN().to_string()),
            Some(libc::SIGRTMIN())
        );
        assert_eq!(
            signal_number("9"),
            None,
            "not a signal to ask a report with"
        );
        assert_eq!(signal_number("TERM"), None);
    }

    #[test]
    fn report_paths_expand_the_pid_from_the_process_directory() {
        assert_eq!(
            report_path(42, "/tmp/r.%p.txt"),
            PathBuf::from("/tmp/r.42.txt")
        );
        assert_eq!(
            report_path(42, "r.json"),
            PathBuf::from("/proc/42/cwd/r.json")
        );
    }
}
