//! `ebb report PID`: the retention report of a running ebb process, now. The process
//! must have been started with `EBB_REPORT` and `EBB_REPORT_SIGNAL` (read from its
//! `/proc/PID/environ`); `ebb` sends that signal to its `ebb-report` thread alone (as
//! `ebb run --breakdown` does: no thread of the program has a `sleep` cut short), waits
//! for the report to be appended to the file, and prints it.

use crate::procfs;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long the process gets to write its report.
const WAIT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(10);

const HOW_TO_START: &str = "start it with EBB_REPORT=/tmp/rss.%p.txt EBB_REPORT_SIGNAL=USR2 \
                            LD_PRELOAD=.../libebb.so (or .json for JSON)";

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
    let path = PathBuf::from(template.replace("%p", &pid.to_string()));
    if path.is_absolute() {
        path
    } else {
        Path::new(&format!("/proc/{pid}/cwd")).join(path)
    }
}

/// Ask `pid` for its report and return it (the text the process appended).
pub fn request(pid: i32) -> Result<String> {
    if !Path::new(&format!("/proc/{pid}")).exists() {
        bail!("no process {pid}");
    }
    let Some(template) = environ_var(pid, "EBB_REPORT")? else {
        bail!("process {pid} was not started with EBB_REPORT: {HOW_TO_START}");
    };
    let Some(signal_name) = environ_var(pid, "EBB_REPORT_SIGNAL")? else {
        bail!("process {pid} was started without EBB_REPORT_SIGNAL: {HOW_TO_START}");
    };
    let Some(signal) = signal_number(&signal_name) else {
        bail!("process {pid}: EBB_REPORT_SIGNAL={signal_name} is not a signal ebb takes");
    };
    if !procfs::catches_signal(pid, signal) {
        bail!(
            "process {pid} does not catch signal {signal}: ebb is not its allocator \
             (LD_PRELOAD), or it has not started yet"
        );
    }
    let path = report_path(pid, &template);
    let before = std::fs::metadata(&path).map_or(0, |m| m.len());
    if !procfs::signal_thread(pid, "ebb-report", signal) {
        bail!("process {pid} has no ebb-report thread to ask (it is just starting)");
    }
    let deadline = Instant::now() + WAIT;
    loop {
        let now = std::fs::read(&path).unwrap_or_default();
        let added = now.get(before as usize..).unwrap_or_default();
        // A report is whole once its last line is (text ends with its summary line).
        let whole = added.ends_with(b"\n") && std::str::from_utf8(added).is_ok();
        if whole && settled(&path, now.len()) {
            return Ok(String::from_utf8_lossy(added).into_owned());
        }
        if Instant::now() > deadline {
            bail!(
                "process {pid} wrote no report to {} within {} s",
                path.display(),
                WAIT.as_secs()
            );
        }
        std::thread::sleep(POLL);
    }
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
