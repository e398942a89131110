//! Reading the memory and CPU time of a whole process tree from `/proc`.
//!
//! The tree is found by scanning every `/proc/<pid>/stat` for its parent, because
//! processes come and go between samples and `/proc/<pid>/task/*/children` is not
//! always compiled in. Memory comes from `smaps_rollup` (RSS, PSS, anonymous), or from
//! `status` on kernels without it (PSS is then reported as RSS).

use std::collections::HashMap;
use std::fs;

/// Memory of a set of processes, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Mem {
    pub rss: u64,
    pub pss: u64,
    pub anon: u64,
}

impl Mem {
    fn add(&mut self, other: Mem) {
        self.rss += other.rss;
        self.pss += other.pss;
        self.anon += other.anon;
    }
}

/// One process as `/proc/<pid>/stat` describes it.
struct ProcStat {
    ppid: i32,
    /// utime + stime + cutime + cstime in clock ticks: the CPU time of the process and
    /// of the children it has waited for (which are no longer in the tree).
    cpu_ticks: u64,
}

fn read_stat(pid: i32) -> Option<ProcStat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may itself contain spaces and ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
    let num = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    Some(ProcStat {
        ppid: fields.get(1)?.parse().ok()?,
        cpu_ticks: num(11)? + num(12)? + num(13)? + num(14)?,
    })
}

/// Every process on the system with its parent and CPU time.
fn all_processes() -> HashMap<i32, ProcStat> {
    let mut procs = HashMap::new();
    let Ok(dir) = fs::read_dir("/proc") else {
        return procs;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some(stat) = read_stat(pid) {
            procs.insert(pid, stat);
        }
    }
    procs
}

/// Value in kB of a `Name:   123 kB` line, in bytes.
fn kb_field(line: &str, name: &str) -> Option<u64> {
    let rest = line.strip_prefix(name)?.strip_prefix(':')?;
    let kb: u64 = rest.split_whitespace().next()?.parse().ok()?;
    Some(kb * 1024)
}

/// Memory of one process; None when it has gone (or is a zombie with no memory).
pub fn process_mem(pid: i32) -> Option<Mem> {
    if let Ok(text) = fs::read_to_string(format!("/proc/{pid}/smaps_rollup")) {
        let mut mem = Mem::default();
        let mut seen = false;
        for line in text.lines() {
            if let Some(v) = kb_field(line, "Rss") {
                mem.rss = v;
                seen = true;
            } else if let Some(v) = kb_field(line, "Pss") {
                mem.pss = v;
            } else if let Some(v) = kb_field(line, "Anonymous") {
                mem.anon = v;
            }
        }
        if seen {
            return Some(mem);
        }
    }
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let mut mem = Mem::default();
    let mut seen = false;
    for line in text.lines() {
        if let Some(v) = kb_field(line, "VmRSS") {
            mem.rss = v;
            mem.pss = v;
            seen = true;
        } else if let Some(v) = kb_field(line, "RssAnon") {
            mem.anon = v;
        }
    }
    seen.then_some(mem)
}

/// What one sample of the tree found.
pub struct TreeSample {
    pub mem: Mem,
    /// Processes in the tree now.
    pub pids: Vec<i32>,
    /// CPU seconds of the live processes (and the children they reaped).
    pub cpu_s: f64,
}

/// Sample the tree made of every process whose parent is `root_parent` (this process,
/// which is a child subreaper, so orphans of the tree come back to it), except those in
/// `exclude` (the drive command), and all their descendants.
pub fn sample_tree(root_parent: i32, exclude: &[i32]) -> TreeSample {
    let procs = all_processes();
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for (&pid, stat) in &procs {
        children.entry(stat.ppid).or_default().push(pid);
    }
    let mut pids = Vec::new();
    let mut stack: Vec<i32> = children
        .get(&root_parent)
        .map(|c| c.iter().copied().filter(|p| !exclude.contains(p)).collect())
        .unwrap_or_default();
    while let Some(pid) = stack.pop() {
        pids.push(pid);
        if let Some(c) = children.get(&pid) {
            stack.extend(c);
        }
    }
    let mut mem = Mem::default();
    let mut ticks = 0;
    for &pid in &pids {
        if let Some(m) = process_mem(pid) {
            mem.add(m);
        }
        ticks += procs.get(&pid).map_or(0, |s| s.cpu_ticks);
    }
    pids.sort_unstable();
    TreeSample {
        mem,
        pids,
        cpu_s: ticks as f64 / clock_ticks_per_second(),
    }
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// True if process `pid` has a handler for `signal` (`SigCgt` in its status).
pub fn catches_signal(pid: i32, signal: i32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| (1..=64).contains(&signal) && mask & (1 << (signal - 1)) != 0)
}

/// The threads of `pid`, in id order (the main thread first).
fn threads(pid: i32) -> Vec<i32> {
    let mut tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    tids
}

/// The first thread of `pid` named `name` (`/proc/PID/task/TID/comm`).
pub fn thread_named(pid: i32, name: &str) -> Option<i32> {
    threads(pid).into_iter().find(|tid| {
        std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
            .is_ok_and(|comm| comm.trim_end() == name)
    })
}

/// How many threads of `pid` are named `name` (`comm`).
pub fn threads_named(pid: i32, name: &str) -> usize {
    threads(pid)
        .into_iter()
        .filter(|tid| {
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
                .is_ok_and(|comm| comm.trim_end() == name)
        })
        .count()
}

/// The first thread of `pid` that blocks every signal but `signal` (`SigBlk` in its
/// status): how ebb's watcher of that signal looks. ebb starts its threads with every
/// signal blocked and a watcher unblocks its own; a program's thread that blocks all
/// the others as well, and not this one, would be a thread waiting for this very
/// signal.
fn thread_taking_only(pid: i32, signal: i32) -> Option<i32> {
    threads(pid).into_iter().find(|tid| {
        std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).is_ok_and(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("SigBlk:"))
                .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
                .is_some_and(|blocked| takes_only(blocked, signal))
        })
    })
}

/// True if a thread whose blocked set is `blocked` (`SigBlk`) takes `signal` and no
/// other signal that can be blocked. SIGKILL and SIGSTOP cannot be, and glibc keeps 32
/// and 33 (its cancellation and set-id signals) out of every mask a program sets.
fn takes_only(blocked: u64, signal: i32) -> bool {
    const NEVER_BLOCKED: u64 =
        (1 << (libc::SIGKILL - 1)) | (1 << (libc::SIGSTOP - 1)) | (1 << (32 - 1)) | (1 << (33 - 1));
    if !(1..=64).contains(&signal) {
        return false;
    }
    let own = 1u64 << (signal - 1);
    (blocked | NEVER_BLOCKED) == !own
}

/// Send `signal` to `pid`'s allocator thread named `thread`, if it has one; false if
/// not. ebb's watchers take their signal, so no thread of the program sees it (a
/// process-directed signal may land on a thread in `sleep` or `poll` and end it
/// early). And it is safe against `exec`: a process that catches the signal when we
/// look may be a `vfork` child about to `exec` (it inherited the handler) or may `exec`
/// before the signal arrives, and the new program, whose ebb has not yet installed its
/// handler, would die of it (`gcc` killed under `make -j2` with reports every 50 ms);
/// `exec` ends every other thread, so a signal sent to the watcher is never delivered
/// to the new program.
///
/// A thread is found by its name, or, where ebb names none (under seccomp), by its
/// signal mask ([`takes_only`]).
pub fn signal_thread(pid: i32, thread: &str, signal: i32) -> bool {
    let Some(tid) = thread_named(pid, thread).or_else(|| thread_taking_only(pid, signal)) else {
        return false;
    };
    // SAFETY: tgkill only sends a signal, to a thread of `pid`.
    unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, signal) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_memory_is_read() {
        let mem = process_mem(std::process::id() as i32).expect("own /proc entry");
        assert!(mem.rss > 0 && mem.pss > 0 && mem.anon > 0, "{mem:?}");
    }

    #[test]
    fn a_thread_is_found_by_name() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (started_tx, started) = std::sync::mpsc::channel::<()>();
        // std names a thread from inside it, once it runs: wait until it does.
        let named = std::thread::Builder::new()
            .name("procfs-named".into())
            .spawn(move || {
                started_tx.send(()).unwrap();
                rx.recv()
            })
            .unwrap();
        started.recv().unwrap();
        let me = std::process::id() as i32;
        let tid = thread_named(me, "procfs-named").expect("named thread not found");
        assert_ne!(tid, me, "the main thread is not the named one");
        assert_eq!(thread_named(me, "no-such-thread"), None);
        drop(tx);
        let _ = named.join();
    }

    /// The masks ebb's watchers had (`SigBlk` read from a process started with
    /// `EBB_REPORT_SIGNAL=USR2` and `EBB_PROFILE_SIGNAL=USR1`), and a program thread's.
    #[test]
    fn a_watcher_is_told_by_its_mask() {
        let report = 0xfffffffe7ffbf6ff;
        let profile = 0xfffffffe7ffbfcff;
        assert!(takes_only(report, libc::SIGUSR2));
        assert!(!takes_only(report, libc::SIGUSR1));
        assert!(takes_only(profile, libc::SIGUSR1));
        assert!(!takes_only(profile, libc::SIGUSR2));
        assert!(!takes_only(0, libc::SIGUSR2), "a thread blocking nothing");
        assert!(
            !takes_only(u64::MAX, libc::SIGUSR2),
            "a thread blocking everything"
        );
        assert!(!takes_only(report, 0) && !takes_only(report, 65));
    }

    #[test]
    fn kb_fields_parse() {
        assert_eq!(kb_field("Rss:     1234 kB", "Rss"), Some(1234 * 1024));
        assert_eq!(kb_field("Pss_Anon:  1 kB", "Pss"), None);
    }
}
