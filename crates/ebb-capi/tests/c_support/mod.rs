//! What the C ABI tests share: locating and building `libebb.so`, compiling the C and
//! C++ programs in `tests/c/`, and running them with or without `LD_PRELOAD`.
#![allow(dead_code)]

use std::collections::HashMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// Longest a program may run before it is killed and the test fails (they take about a
/// second; this only turns a hang into a failure).
pub const TIMEOUT: Duration = Duration::from_secs(120);

// ------------------------------------------------------------------------------------
// Locating libebb.so and compiling the programs

/// `target/<profile>`: the parent of the `deps` directory holding this executable.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("test executable has a parent");
    deps.parent().expect("deps has a parent").to_path_buf()
}

pub fn libebb() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let dir = profile_dir();
        build_libebb(&dir);
        let lib = dir.join("libebb.so");
        assert!(lib.exists(), "{} was not built", lib.display());
        lib.canonicalize().unwrap()
    })
}

/// `libebb_secure.so` (crates/ebb-capi-secure: the `secure` feature), built as
/// `libebb` is.
pub fn libebb_secure() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let dir = profile_dir();
        build_package(&dir, "ebb-capi-secure");
        let lib = dir.join("libebb_secure.so");
        assert!(lib.exists(), "{} was not built", lib.display());
        lib.canonicalize().unwrap()
    })
}

/// `cargo build -p ebb-capi` with the profile of this test run. Cargo does not build a
/// cdylib-only library for its package's integration tests, and a libebb.so left from
/// an earlier build may be stale; when it is up to date this is a quick no-op.
pub fn build_libebb(dir: &Path) {
    build_package(dir, "ebb-capi");
}

/// `cargo build -p <package>` with the profile of this test run (see `build_libebb`).
pub fn build_package(dir: &Path, package: &str) {
    let profile = match dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev".to_string(),
        Some(name) => name.to_string(),
        None => panic!("cannot tell the profile from {}", dir.display()),
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let mut cmd = Command::new(&cargo);
    cmd.args(["build", "--quiet", "-p", package, "--profile", &profile])
        .arg("--manifest-path")
        .arg(&manifest);
    if let Some(target_dir) = dir.parent() {
        cmd.arg("--target-dir").arg(target_dir);
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run {cargo} build -p {package}: {e}"));
    assert!(
        status.success(),
        "cargo build -p {package} --profile {profile} failed"
    );
}

pub fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c")
}

pub fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include")
}

/// Compiled programs by source name (each compiled once, outside the map's lock).
type Programs = Mutex<HashMap<&'static str, Arc<OnceLock<PathBuf>>>>;

/// Compile `tests/c/<source>` once per test process; returns the executable.
pub fn program(source: &'static str) -> PathBuf {
    static PROGRAMS: OnceLock<Programs> = OnceLock::new();
    let cell = PROGRAMS
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .entry(source)
        .or_default()
        .clone();
    cell.get_or_init(|| compile(source)).clone()
}

pub fn compile(source: &str) -> PathBuf {
    let profile = profile_dir();
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("ebb-capi-c")
        .join(profile.file_name().unwrap());
    std::fs::create_dir_all(&out_dir).unwrap();
    let stem = Path::new(source).file_stem().unwrap().to_str().unwrap();
    let exe = out_dir.join(stem);
    // Compile to a private name, then rename: concurrent test runs never see half a file.
    let tmp = out_dir.join(format!("{stem}.{}.tmp", std::process::id()));
    let cpp = source.ends_with(".cpp");
    let (var, default) = if cpp { ("CXX", "c++") } else { ("CC", "cc") };
    let compiler = std::env::var(var).unwrap_or_else(|_| default.into());
    let mut cmd = Command::new(&compiler);
    cmd.args(["-O2", "-g", "-Wall", "-Wextra", "-pthread"])
        .arg(if cpp { "-std=c++17" } else { "-std=gnu11" })
        .arg("-I")
        .arg(include_dir())
        .arg("-o")
        .arg(&tmp)
        .arg(source_dir().join(source))
        .arg("-ldl");
    if !cpp {
        // Keep malloc/calloc/memset calls as written (no folding or elision).
        cmd.arg("-fno-builtin");
    }
    let output = cmd.output().unwrap_or_else(|e| {
        panic!("cannot run the C compiler `{compiler}` ({e}); install gcc and g++")
    });
    assert!(
        output.status.success(),
        "compiling {source} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::rename(&tmp, &exe).unwrap();
    exe
}

// ------------------------------------------------------------------------------------
// Running them

pub struct Run {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub what: String,
}

impl Run {
    pub fn describe(&self) -> String {
        format!(
            "{}: {}\n--- stdout\n{}--- stderr\n{}",
            self.what, self.status, self.stdout, self.stderr
        )
    }

    #[track_caller]
    pub fn assert_success(&self) -> &Self {
        assert!(self.status.success(), "{}", self.describe());
        self
    }

    #[track_caller]
    pub fn assert_stdout_has(&self, text: &str) -> &Self {
        assert!(
            self.stdout.contains(text),
            "missing {text:?} in stdout of {}",
            self.describe()
        );
        self
    }

    #[track_caller]
    pub fn assert_stderr_has(&self, text: &str) -> &Self {
        assert!(
            self.stderr.contains(text),
            "missing {text:?} in stderr of {}",
            self.describe()
        );
        self
    }

    /// Proof that ebb served (or did not serve) the program.
    #[track_caller]
    pub fn assert_ebb(&self, expected: bool) -> &Self {
        let line = if expected { "ebb=yes\n" } else { "ebb=no\n" };
        assert!(
            self.stdout.starts_with(line),
            "expected {line:?} first in {}",
            self.describe()
        );
        self
    }
}

/// Run `exe args` with `LD_PRELOAD=libebb.so` if `preload`, with `env` added to an
/// environment cleared of `LD_PRELOAD` and every `EBB_*` variable.
pub fn run(exe: &Path, args: &[&str], preload: bool, env: &[(&str, &str)]) -> Run {
    run_with(exe, args, preload.then(libebb), env)
}

/// Run `exe` with `LD_PRELOAD=library` (another build of ebb, say), as `run` does.
pub fn run_preloading(exe: &Path, library: &Path, env: &[(&str, &str)]) -> Run {
    run_with(exe, &[], Some(library), env)
}

fn run_with(exe: &Path, args: &[&str], preload: Option<&Path>, env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("LD_PRELOAD")
        // Its own process group, so a hung program and its children can all be killed.
        .process_group(0);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("EBB_") {
            cmd.env_remove(key);
        }
    }
    if let Some(library) = preload {
        cmd.env("LD_PRELOAD", library);
    }
    cmd.envs(env.iter().copied());
    let what = format!(
        "{}{} {}{}",
        env.iter()
            .map(|(k, v)| format!("{k}={v} "))
            .collect::<String>(),
        match preload {
            Some(library) => format!(
                "LD_PRELOAD={}",
                library.file_name().unwrap().to_string_lossy()
            ),
            None => "(glibc malloc)".to_string(),
        },
        exe.file_name().unwrap().to_string_lossy(),
        args.iter().map(|a| format!(" {a}")).collect::<String>()
    );
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let output = match rx.recv_timeout(TIMEOUT) {
        Ok(result) => result.expect("waiting for the program"),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status();
            panic!("{what} did not finish within {TIMEOUT:?} (killed)");
        }
    };
    Run {
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        what,
    }
}

/// The output lines that must agree between a run under ebb and one under glibc:
/// everything but the `ebb=` line and lines about ebb-only checks.
pub fn common_lines(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| !l.starts_with("ebb=") && !l.starts_with("ok ebb:"))
        .filter(|l| !l.starts_with("skip ebb_*"))
        .collect()
}

/// Run `source` under ebb and under glibc (with the same arguments); both must succeed
/// and print the same lines. Returns the ebb run.
pub fn run_both(source: &'static str, args: &[&str]) -> Run {
    let exe = program(source);
    let ebb = run(&exe, args, true, &[]);
    ebb.assert_success().assert_ebb(true);
    let glibc = run(&exe, args, false, &[]);
    glibc.assert_success().assert_ebb(false);
    assert_eq!(
        common_lines(&ebb.stdout),
        common_lines(&glibc.stdout),
        "{source}: output under ebb differs from glibc's\n{}\n{}",
        ebb.describe(),
        glibc.describe()
    );
    ebb
}
