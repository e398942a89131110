//! The harness of `real_programs.rs`: finding libebb.so and the tools, scratch
//! directories, running a program with and without ebb and comparing the runs, and
//! generated input data.

use std::fmt::Write as _;
use std::fs;
use std::io::{BufWriter, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

// ------------------------------------------------------------------------------------
// libebb.so, tools, scratch directories

/// `target/<profile>`: the parent of the `deps` directory holding this executable.
pub(crate) fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("test executable has a parent");
    deps.parent().expect("deps has a parent").to_path_buf()
}

/// The libebb.so of this build, `target/<profile>/libebb.so`.
///
/// `cargo test` does not build (or rebuild) the package's cdylib for its integration
/// tests, so a libebb.so left from an earlier build could be stale: this runs
/// `cargo build -p ebb-capi` (with `--release` when this executable is a release build)
/// first, which takes a fraction of a second when it is up to date.
pub(crate) fn libebb() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let dir = profile_dir();
        let lib = dir.join("libebb.so");
        let release = std::env::current_exe()
            .unwrap()
            .to_string_lossy()
            .contains("/release/");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--quiet", "-p", "ebb-capi", "--manifest-path"])
            .arg(&manifest)
            .arg("--target-dir")
            .arg(dir.parent().expect("target dir"));
        if release {
            cmd.arg("--release");
        }
        match cmd.status() {
            Ok(status) => assert!(status.success(), "{cmd:?} failed"),
            // No cargo (the test executable run by hand): use the library that is there.
            Err(e) if lib.exists() => {
                eprintln!("cannot run {cmd:?} ({e}); using {}", lib.display())
            }
            Err(e) => panic!("{} is missing and {cmd:?} failed: {e}", lib.display()),
        }
        assert!(lib.exists(), "{} was not built", lib.display());
        lib.canonicalize().unwrap()
    })
}

pub(crate) fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// A tool's path on `PATH`. If it is missing: fails the test under CI, otherwise prints
/// a skip message and returns None (the test then returns early).
pub(crate) fn tool(name: &str, package: &str) -> Option<PathBuf> {
    if let Some(path) = which(name) {
        return Some(path);
    }
    missing(&format!(
        "`{name}` is not installed (Debian package: {package})"
    ))
}

pub(crate) fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

pub(crate) fn missing<T>(what: &str) -> Option<T> {
    if in_ci() {
        panic!("{what}; CI is set, so this is a failure, not a skip");
    }
    // Straight to the stderr handle, which the test harness does not capture, so the
    // skip shows in a normal `cargo test` run.
    let _ = writeln!(std::io::stderr(), "SKIPPED: {what}");
    None
}

pub(crate) fn program_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/real_programs")
        .join(name)
}

/// A scratch directory for one test, removed on success and kept on failure.
pub(crate) struct Scratch {
    pub(crate) dir: PathBuf,
}

impl Scratch {
    pub(crate) fn new(name: &str) -> Scratch {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("real_programs")
            .join(name);
        if dir.exists() {
            fs::remove_dir_all(&dir).unwrap();
        }
        fs::create_dir_all(&dir).unwrap();
        Scratch { dir }
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// A new subdirectory.
    pub(crate) fn subdir(&self, name: &str) -> PathBuf {
        let dir = self.dir.join(name);
        fs::create_dir_all(&dir).unwrap();
        dir
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("scratch files kept in {}", self.dir.display());
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

// ------------------------------------------------------------------------------------
// Running a program with and without ebb

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Alloc {
    /// The system allocator (glibc): no preload.
    System,
    /// `LD_PRELOAD=libebb.so` with `EBB_SHOW_STATS=1` and `LD_DEBUG=bindings`.
    Ebb,
}

pub(crate) struct Run {
    pub(crate) label: String,
    pub(crate) status: ExitStatus,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: String,
    pub(crate) elapsed: Duration,
    /// "ebb stats:" reports on stderr (one per process that printed one).
    pub(crate) stats_reports: usize,
    /// Processes whose own `malloc`/`free` the dynamic linker bound to libebb.so.
    pub(crate) bound_processes: usize,
}

impl Run {
    pub(crate) fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Panics unless the run exited with status 0.
    pub(crate) fn ok(&self) -> &Run {
        if !self.status.success() {
            panic!(
                "{}: {} after {:.1} s\n--- stdout (tail) ---\n{}\n--- stderr (tail, ebb reports removed) ---\n{}",
                self.label,
                describe(self.status),
                self.elapsed.as_secs_f64(),
                tail(&self.stdout_str(), 3000),
                tail(&strip_ebb_reports(&self.stderr), 6000),
            );
        }
        self
    }

    /// Panics unless at least `min` processes printed ebb's exit report.
    pub(crate) fn printed_stats(&self, min: usize) -> &Run {
        assert!(
            self.stats_reports >= min,
            "{}: expected \"ebb stats:\" from at least {min} process(es) on stderr, found {}\n{}",
            self.label,
            self.stats_reports,
            tail(&self.stderr, 3000)
        );
        self
    }

    /// Panics unless the program's malloc/free were bound to libebb.so in at least `min`
    /// processes.
    pub(crate) fn bound_to_ebb(&self, min: usize) -> &Run {
        assert!(
            self.bound_processes >= min,
            "{}: expected malloc/free bound to {} in at least {min} process(es), found {}",
            self.label,
            libebb().display(),
            self.bound_processes
        );
        self
    }
}

pub(crate) fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => format!("{status:?}"),
    }
}

pub(crate) fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// stderr without ebb's exit reports ("ebb stats:" and the indented lines after it).
pub(crate) fn strip_ebb_reports(stderr: &str) -> String {
    let mut out = String::new();
    let mut in_report = false;
    for line in stderr.lines() {
        if line.starts_with("ebb stats:") {
            in_report = true;
            continue;
        }
        if in_report && line.starts_with("  ") {
            continue;
        }
        in_report = false;
        out.push_str(line);
        out.push('\n');
    }
    out
}

extern "C" {
    pub(crate) fn kill(pid: i32, sig: i32) -> i32;
    pub(crate) fn signal(sig: i32, handler: usize) -> usize;
}
pub(crate) const SIGKILL: i32 = 9;
pub(crate) const SIGINT: i32 = 2;
pub(crate) const SIGQUIT: i32 = 3;
pub(crate) const SIG_DFL: usize = 0;

/// Runs `cmd` (stdin: /dev/null; stdout and stderr to files in `scratch`) with the given
/// allocator. It runs in a process group of its own, killed whole if it outlives
/// `timeout`. The environment is cleaned of LD_PRELOAD, LD_DEBUG* and EBB_* first.
pub(crate) fn run(
    scratch: &Scratch,
    label: &str,
    alloc: Alloc,
    mut cmd: Command,
    timeout: Duration,
) -> Run {
    let label = format!(
        "{label} [{}]",
        if alloc == Alloc::Ebb { "ebb" } else { "system" }
    );
    let file_stem: String = label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let out_path = scratch.path(&format!("{file_stem}.stdout"));
    let err_path = scratch.path(&format!("{file_stem}.stderr"));
    let ld_dir = scratch.path(&format!("{file_stem}.ld"));

    for (key, _) in std::env::vars_os() {
        let k = key.to_string_lossy();
        if k == "LD_PRELOAD" || k.starts_with("LD_DEBUG") || k.starts_with("EBB_") {
            cmd.env_remove(&key);
        }
    }
    if alloc == Alloc::Ebb {
        fs::create_dir_all(&ld_dir).unwrap();
        cmd.env("LD_PRELOAD", libebb())
            .env("EBB_SHOW_STATS", "1")
            .env("LD_DEBUG", "bindings")
            .env("LD_DEBUG_OUTPUT", ld_dir.join("ld"));
    }
    cmd.stdin(Stdio::null())
        .stdout(fs::File::create(&out_path).unwrap())
        .stderr(fs::File::create(&err_path).unwrap())
        .process_group(0);
    // A shell without job control starts background jobs with SIGINT and SIGQUIT
    // ignored, and children inherit that: CPython's test_threading (interrupt_main) then
    // fails with any allocator. Programs get the default dispositions back.
    // SAFETY: signal() is async-signal-safe and the closure touches nothing else.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            signal(SIGINT, SIG_DFL);
            signal(SIGQUIT, SIG_DFL);
            Ok(())
        });
    }

    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("{label}: cannot start {cmd:?}: {e}"));
    let pid = child.id() as i32;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > timeout {
            // SAFETY: kill(2) on the process group this run created.
            unsafe { kill(-pid, SIGKILL) };
            let status = child.wait().unwrap();
            let stderr = fs::read_to_string(&err_path).unwrap_or_default();
            panic!(
                "{label}: still running after {} s (a hang?); killed ({})\n--- stderr (tail, ebb reports removed) ---\n{}",
                timeout.as_secs(),
                describe(status),
                tail(&strip_ebb_reports(&stderr), 4000)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = start.elapsed();
    let stdout = fs::read(&out_path).unwrap();
    let stderr = String::from_utf8_lossy(&fs::read(&err_path).unwrap()).into_owned();
    let stats_reports = stderr.matches("ebb stats:").count();
    let bound_processes = if alloc == Alloc::Ebb {
        count_bound_processes(&ld_dir)
    } else {
        0
    };
    let _ = fs::remove_dir_all(&ld_dir);
    println!(
        "{label}: {} in {:.2} s; ebb reports: {stats_reports}, processes with malloc/free bound to ebb: {bound_processes}",
        describe(status),
        elapsed.as_secs_f64()
    );
    Run {
        label,
        status,
        stdout,
        stderr,
        elapsed,
        stats_reports,
        bound_processes,
    }
}

/// Counts the processes (LD_DEBUG output files, one per pid) in which a binary other than
/// libebb.so itself had its `malloc` or `free` bound to libebb.so.
pub(crate) fn count_bound_processes(ld_dir: &Path) -> usize {
    let lib = libebb().to_string_lossy().into_owned();
    let targets = [
        format!("to {lib} [0]: normal symbol `malloc'"),
        format!("to {lib} [0]: normal symbol `free'"),
    ];
    let from_self = format!("binding file {lib} ");
    let Ok(entries) = fs::read_dir(ld_dir) else {
        return 0;
    };
    entries
        .filter_map(|e| fs::read(e.ok()?.path()).ok())
        .filter(|bytes| {
            String::from_utf8_lossy(bytes).lines().any(|line| {
                targets.iter().any(|t| line.contains(t.as_str())) && !line.contains(&from_self)
            })
        })
        .count()
}

pub(crate) fn command(program: impl AsRef<std::ffi::OsStr>, args: &[&str], cwd: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .env("LC_ALL", "C")
        .env("TZ", "UTC");
    cmd
}

pub(crate) fn bash(script: &str, cwd: &Path) -> Command {
    command("bash", &["-o", "pipefail", "-euc", script], cwd)
}

/// Panics with the first differing line unless the two runs printed the same stdout.
pub(crate) fn same_stdout(a: &Run, b: &Run) {
    same_bytes(&a.stdout, &b.stdout, &a.label, &b.label);
}

pub(crate) fn same_bytes(a: &[u8], b: &[u8], what_a: &str, what_b: &str) {
    if a == b {
        return;
    }
    let (la, lb): (Vec<&[u8]>, Vec<&[u8]>) = (
        a.split(|&c| c == b'\n').collect(),
        b.split(|&c| c == b'\n').collect(),
    );
    let i = la
        .iter()
        .zip(&lb)
        .position(|(x, y)| x != y)
        .unwrap_or(la.len().min(lb.len()));
    let line = |v: &Vec<&[u8]>| {
        v.get(i).map_or("<end>".to_string(), |l| {
            String::from_utf8_lossy(l).into_owned()
        })
    };
    panic!(
        "outputs differ ({} vs {} bytes, {} vs {} lines), first at line {}:\n  {what_a}: {}\n  {what_b}: {}",
        a.len(),
        b.len(),
        la.len(),
        lb.len(),
        i + 1,
        line(&la),
        line(&lb)
    );
}

// ------------------------------------------------------------------------------------
// Deterministic data

/// splitmix64: a tiny deterministic generator for test data.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
}

pub(crate) const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// About `bytes` bytes of random lines of 5..70 alphanumerics; one line in four repeats
/// an earlier one (so `sort -u` has work to do).
pub(crate) fn write_random_lines(path: &Path, bytes: usize, seed: u64) -> usize {
    let mut rng = Rng(seed);
    let mut out = BufWriter::with_capacity(1 << 20, fs::File::create(path).unwrap());
    let mut recent: Vec<Vec<u8>> = Vec::with_capacity(4096);
    let (mut written, mut lines) = (0, 0);
    while written < bytes {
        let line: Vec<u8> = if !recent.is_empty() && rng.below(4) == 0 {
            recent[rng.below(recent.len() as u64) as usize].clone()
        } else {
            let len = rng.range(5, 70) as usize;
            (0..len)
                .map(|_| ALNUM[rng.below(ALNUM.len() as u64) as usize])
                .collect()
        };
        out.write_all(&line).unwrap();
        out.write_all(b"\n").unwrap();
        written += line.len() + 1;
        lines += 1;
        if recent.len() < 4096 {
            recent.push(line);
        } else {
            let i = rng.below(4096) as usize;
            recent[i] = line;
        }
    }
    out.flush().unwrap();
    lines
}

/// About `bytes` bytes of numbers, one per line: integers, negatives, decimals,
/// with leading blanks and a few duplicates (for `sort -n`).
pub(crate) fn write_random_numbers(path: &Path, bytes: usize, seed: u64) {
    let mut rng = Rng(seed);
    let mut out = BufWriter::with_capacity(1 << 20, fs::File::create(path).unwrap());
    let mut written = 0;
    let mut line = String::new();
    while written < bytes {
        line.clear();
        if rng.below(3) == 0 {
            line.push(' ');
        }
        let sign = if rng.below(4) == 0 { "-" } else { "" };
        match rng.below(3) {
            0 => write!(line, "{sign}{}", rng.below(1_000_000_000)).unwrap(),
            1 => write!(line, "{sign}{}.{:03}", rng.below(100_000), rng.below(1000)).unwrap(),
            _ => write!(line, "{sign}{}", rng.below(1000)).unwrap(),
        }
        line.push('\n');
        out.write_all(line.as_bytes()).unwrap();
        written += line.len();
    }
    out.flush().unwrap();
}
