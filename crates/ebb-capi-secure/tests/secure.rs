//! The secure build (`libebb_secure.so`) stops the heap bugs of `tests/c/attacks.c`
//! with its documented reports, at each level it claims to; each case is also run
//! where the check is off (the default `libebb.so`, or level light for what only
//! full does) and must then run on, so a test that passes only because the program
//! crashes anyway is caught.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// `target/<profile>`: the parent of the `deps` directory holding this executable.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// Build libebb.so and libebb_secure.so with this test run's profile (cargo does not
/// build a cdylib for its own package's tests) and return the directory holding them.
fn libraries() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = profile_dir();
        let profile = match dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") => "dev".to_string(),
            Some(name) => name.to_string(),
            None => panic!("cannot tell the profile from {}", dir.display()),
        };
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(&cargo)
            .args([
                "build",
                "--quiet",
                "-p",
                "ebb-capi",
                "-p",
                "ebb-capi-secure",
            ])
            .args(["--profile", &profile])
            .arg("--manifest-path")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .arg("--target-dir")
            .arg(dir.parent().unwrap())
            .status()
            .expect("run cargo build");
        assert!(status.success(), "building the libraries failed");
        dir
    })
}

fn attacks() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ebb-secure-attacks");
        let tmp = out.with_extension(format!("{}.tmp", std::process::id()));
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let output = Command::new(&cc)
            .args(["-O2", "-g", "-fno-builtin", "-o"])
            .arg(&tmp)
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/attacks.c"))
            .output()
            .unwrap_or_else(|e| panic!("cannot run the C compiler {cc}: {e}"));
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        std::fs::rename(&tmp, &out).unwrap();
        out
    })
}

#[derive(Clone, Copy)]
enum Lib {
    Default,
    Light,
    Full,
}

struct Run {
    output: Output,
    what: String,
}

impl Run {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }
    fn describe(&self) -> String {
        format!(
            "{}: {}\n--- stdout\n{}--- stderr\n{}",
            self.what,
            self.output.status,
            self.stdout(),
            String::from_utf8_lossy(&self.output.stderr)
        )
    }
    fn signal(&self) -> Option<i32> {
        std::os::unix::process::ExitStatusExt::signal(&self.output.status)
    }
    /// Killed by `signal`, with `report` on stderr.
    #[track_caller]
    fn assert_killed(&self, signal: i32, report: &str) {
        assert_eq!(self.signal(), Some(signal), "{}", self.describe());
        let stderr = String::from_utf8_lossy(&self.output.stderr);
        assert!(
            stderr.contains(report),
            "no {report:?} in {}",
            self.describe()
        );
    }
    /// Ran to the end (the bug went unnoticed).
    #[track_caller]
    fn assert_ran_on(&self) {
        assert!(self.output.status.success(), "{}", self.describe());
    }
}

fn run(lib: Lib, case: &str, env: &[(&str, &str)]) -> Run {
    let dir = libraries();
    let (file, level) = match lib {
        Lib::Default => ("libebb.so", None),
        Lib::Light => ("libebb_secure.so", Some("light")),
        Lib::Full => ("libebb_secure.so", Some("full")),
    };
    let mut cmd = Command::new(attacks());
    cmd.arg(case).env("LD_PRELOAD", dir.join(file));
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("EBB_") {
            cmd.env_remove(key);
        }
    }
    if let Some(level) = level {
        cmd.env("EBB_SECURE", level);
    }
    cmd.envs(env.iter().copied());
    Run {
        output: cmd.output().expect("run attacks"),
        what: format!("attacks {case} under {file} (level {level:?}, {env:?})"),
    }
}

const SIGABRT: i32 = 6;
const SIGSEGV: i32 = 11;

#[test]
fn overwritten_free_list_link_is_caught() {
    for lib in [Lib::Light, Lib::Full] {
        run(lib, "corrupt-link", &[]).assert_killed(SIGABRT, "corrupted: the link in free block");
    }
    // Unencoded links: the allocator follows the attacker's pointer (or crashes on it).
    let plain = run(Lib::Default, "corrupt-link", &[]);
    assert!(
        !String::from_utf8_lossy(&plain.output.stderr).contains("corrupted"),
        "{}",
        plain.describe()
    );
}

#[test]
fn double_frees_are_caught() {
    // No background purger: its thread's first allocations could take the span of
    // the freed large block, and a block handed out again is no longer a double free.
    let env = [("EBB_BACKGROUND", "0")];
    for lib in [Lib::Light, Lib::Full] {
        for case in ["double-free", "double-free-delayed"] {
            run(lib, case, &env).assert_killed(SIGABRT, "double free (the block is already free)");
        }
        run(lib, "double-free-large", &env).assert_killed(SIGABRT, "double free");
    }
    // Negative control: the default build catches these too now (its freed-block key),
    // with its own report, not the secure build's.
    for case in ["double-free", "double-free-delayed"] {
        let default = run(Lib::Default, case, &env);
        assert!(
            !String::from_utf8_lossy(&default.output.stderr).contains("secure build"),
            "{}",
            default.describe()
        );
    }
}

#[test]
fn invalid_free_is_caught() {
    for lib in [Lib::Light, Lib::Full] {
        run(lib, "invalid-free", &[])
            .assert_killed(SIGABRT, "invalid pointer (not the start of a block)");
    }
    run(Lib::Default, "invalid-free", &[]).assert_ran_on();
}

#[test]
fn overflow_past_a_page_hits_its_guard_page() {
    let full = run(Lib::Full, "overflow-page", &[]);
    assert_eq!(full.signal(), Some(SIGSEGV), "{}", full.describe());
    run(Lib::Light, "overflow-page", &[]).assert_ran_on();
}

#[test]
fn zero_on_free() {
    let left = |lib, env: &[(&str, &str)]| run(lib, "read-after-free", env).stdout();
    for lib in [Lib::Light, Lib::Full] {
        assert_eq!(
            left(lib, &[("EBB_ZERO_ON_FREE", "1")]),
            "0 bytes of the freed block left\n"
        );
        assert_eq!(left(lib, &[]), "56 bytes of the freed block left\n");
    }
}

#[test]
fn carving_order_is_random_at_level_full() {
    let sequential = |lib| {
        let out = run(lib, "order", &[]).stdout();
        out.split_whitespace()
            .next()
            .unwrap()
            .parse::<u32>()
            .unwrap()
    };
    assert_eq!(sequential(Lib::Light), 15);
    // A random stride is 1 for about one page in 21 (3000-byte blocks): allow one.
    assert!(sequential(Lib::Full) < 15 || sequential(Lib::Full) < 15);
}
