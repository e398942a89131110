//! The debuggers people use on programs that allocate through ebb (README "Debuggers"):
//! valgrind's memcheck, with libebb.so built with the `valgrind` feature (client
//! requests), and AddressSanitizer, which brings its own allocator.
//!
//! Tools: valgrind, gcc with libasan (Debian's gcc brings it).

mod c_support;

use c_support::{libebb, profile_dir, program, source_dir};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// libebb.so built with the `valgrind` feature, in a target directory of its own (a
/// feature in the shared one would rebuild the ordinary libebb.so back and forth).
fn libebb_valgrind() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let profile_dir = profile_dir();
        let profile = profile_dir
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let target = profile_dir.parent().unwrap().join("valgrind");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        let status = Command::new(&cargo)
            .args([
                "build",
                "--quiet",
                "-p",
                "ebb-capi",
                "--features",
                "valgrind",
            ])
            .args([
                "--profile",
                if profile == "debug" { "dev" } else { &profile },
            ])
            .arg("--manifest-path")
            .arg(&manifest)
            .arg("--target-dir")
            .arg(&target)
            .status()
            .expect("cannot run cargo");
        assert!(
            status.success(),
            "building libebb.so with --features valgrind failed"
        );
        target.join(&profile).join("libebb.so")
    })
}

/// Run `exe args` under memcheck with `LD_PRELOAD=library` and `EBB_SHOW_STATS=1`, and
/// the suppressions README tells users of the `valgrind` build to pass
/// (`scripts/valgrind.supp`: the TLS of ebb's purger thread, which starts or not in a
/// short run depending on timing: CI failed once on its "possibly lost" report, and
/// on this repo's VM beside three busy loops 5 clean runs of 6 got it).
/// `own_malloc`: keep memcheck from replacing the preloaded library's malloc (it does
/// for any shared object without a soname, such as libebb.so), so ebb serves.
fn memcheck(exe: &Path, args: &[&str], library: &Path, own_malloc: bool) -> (Output, String) {
    let suppressions = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/valgrind.supp");
    assert!(suppressions.exists(), "{}", suppressions.display());
    let mut cmd = Command::new("valgrind");
    cmd.args(["--leak-check=full", "--error-exitcode=99"]);
    cmd.arg(format!("--suppressions={}", suppressions.display()));
    if own_malloc {
        cmd.arg("--soname-synonyms=somalloc=nouserintercepts");
    }
    let output = cmd
        .arg(exe)
        .args(args)
        .env("LD_PRELOAD", library)
        .env("EBB_SHOW_STATS", "1")
        .output()
        .expect("cannot run valgrind (apt-get install valgrind)");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output, stderr)
}

#[test]
fn memcheck_sees_ebbs_blocks_with_the_valgrind_feature() {
    let exe = program("memcheck.c");
    let lib = libebb_valgrind();
    for (scenario, finding) in [
        ("clean", None),
        ("leak", Some("definitely lost: 4,096 bytes in 1 blocks")),
        ("uaf", Some("Invalid read of size 1")),
        ("uninit", Some("depends on uninitialised value")),
    ] {
        let (output, stderr) = memcheck(&exe, &[scenario], lib, true);
        assert!(
            stderr.contains("ebb stats"),
            "{scenario}: ebb did not serve the program\n{stderr}"
        );
        match finding {
            None => {
                assert!(
                    output.status.success(),
                    "{scenario}: memcheck found errors\n{stderr}"
                );
                // No leak: memcheck says so in its leak summary, or, when nothing at all
                // is in use at exit (no purger thread started in a process this short),
                // without one.
                assert!(
                    stderr.contains("definitely lost: 0 bytes")
                        || stderr.contains("All heap blocks were freed -- no leaks are possible"),
                    "{stderr}"
                );
            }
            Some(text) => {
                assert_eq!(output.status.code(), Some(99), "{scenario}\n{stderr}");
                assert!(stderr.contains(text), "{scenario}: no {text:?}\n{stderr}");
            }
        }
    }
    // Without the client requests memcheck sees no block of ebb's: the leak goes
    // unnoticed (which is why the feature exists).
    let (_, stderr) = memcheck(&exe, &["leak"], libebb(), true);
    assert!(
        stderr.contains("ebb stats") && !stderr.contains("definitely lost: 4,096"),
        "{stderr}"
    );
}

/// memcheck replaces the malloc of a preloaded libebb.so with its own, as it replaces
/// glibc's: valgrind works on such a program as it is (ebb does not serve it).
#[test]
fn memcheck_replaces_a_preloaded_libebb_by_default() {
    let exe = program("memcheck.c");
    let (output, stderr) = memcheck(&exe, &["leak"], libebb(), false);
    assert_eq!(output.status.code(), Some(99), "{stderr}");
    assert!(
        stderr.contains("definitely lost: 4,000 bytes in 1 blocks"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("ebb stats"),
        "ebb served the program\n{stderr}"
    );
}

/// ASan's runtime must come first: with `LD_PRELOAD=libebb.so` alone ASan refuses to
/// start (its message says why); with libasan preloaded before libebb.so, ASan's
/// allocator serves the program and ebb steps aside (it is never called).
#[test]
fn address_sanitizer_programs_keep_asans_allocator() {
    let exe = profile_dir().join("ebb-test-asan");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc)
        .args(["-g", "-fsanitize=address", "-o"])
        .arg(&exe)
        .arg(source_dir().join("asan.c"))
        .status()
        .expect("cannot run the C compiler");
    assert!(
        built.success(),
        "cc -fsanitize=address failed (is libasan installed?)"
    );
    let libasan = String::from_utf8(
        Command::new(&cc)
            .arg("-print-file-name=libasan.so")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_string();
    let run = |preload: String, args: &[&str]| {
        let out = Command::new(&exe)
            .args(args)
            .env("LD_PRELOAD", preload)
            .env("EBB_SHOW_STATS", "1")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status, text)
    };
    let ebb = libebb().display().to_string();

    let (status, text) = run(ebb.clone(), &[]);
    assert!(!status.success(), "{text}");
    assert!(text.contains("ASan runtime does not come first"), "{text}");

    let (status, text) = run(format!("{libasan} {ebb}"), &[]);
    assert!(status.success(), "{text}");
    assert!(
        text.contains("asan program done") && !text.contains("ebb stats"),
        "{text}"
    );

    let (status, text) = run(format!("{libasan} {ebb}"), &["overflow"]);
    assert!(!status.success(), "{text}");
    assert!(text.contains("heap-buffer-overflow"), "{text}");
}
