//! `libebb.so` without `libgcc_s`: Rust's standard library unwinds through
//! `_Unwind_*`, which it takes from `libgcc_s.so.1`, so every process `libebb.so` was
//! preloaded into also loaded `libgcc_s`, whose constructor probes the CPU (`cpuid`,
//! which traps in a virtual machine): about 110 µs and 36 KiB of RSS per process on this
//! project's VM, a tenth of an `ls` (docs/REAL-PROGRAMS.md, "What the purger's start
//! cost every process"). The same unwinder from GCC's static `libgcc_eh.a`, linked
//! whole into the library, resolves those symbols first; `--as-needed` then drops
//! `libgcc_s`. The copy stays private (the cdylib exports only the C ABI), so the
//! program's own C++ exceptions still go through its `libgcc_s`.
//!
//! Only where the C compiler that links the library knows a `libgcc_eh.a` (GCC on
//! Linux; with clang on Linux it usually finds GCC's too); elsewhere the library keeps
//! the shared unwinder. `EBB_STATIC_UNWINDER` tells the tests which one it has.
//! `crates/ebb-capi-secure` uses this file too.
//!
//! Where the linker takes them (a test link says), two more arguments cut the pages a
//! process maps of the library (docs/REAL-PROGRAMS.md, "What libebb.so costs a process
//! in pages"): a linker script (`build_layout.rs`) groups the code every malloc and
//! free runs, and the constants they read, apart from the heap profiler's symbolizer; `-z
//! pack-relative-relocs` stores the 2,400 relative relocations in 0.6 KiB instead of
//! 57 KiB (glibc 2.36 or later; the linker leaves it out against an older one).
//! `EBB_LINK_LAYOUT` and `EBB_PACKED_RELOCS` tell the tests which the library has.

use std::path::PathBuf;
use std::process::Command;

mod build_layout;

fn main() {
    // Cargo reruns the script when it changes; otherwise only when the compiler does.
    println!("cargo:rerun-if-env-changed=CC");
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let unwinder = (target_os == "linux" && target_env == "gnu")
        .then(libgcc_eh)
        .flatten();
    match unwinder {
        Some(archive) => {
            println!(
                "cargo:rustc-cdylib-link-arg=-Wl,--push-state,--whole-archive,{},--pop-state",
                archive.display()
            );
            println!("cargo:rustc-env=EBB_STATIC_UNWINDER=1");
        }
        None => println!("cargo:rustc-env=EBB_STATIC_UNWINDER=0"),
    }

    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into()));
    let script = out_dir.join("layout.ld");
    let layout = match std::fs::write(&script, build_layout::script()) {
        Ok(()) => format!("-Wl,-T,{}", script.display()),
        Err(_) => String::new(),
    };
    let arguments = [
        ("EBB_LINK_LAYOUT", layout.as_str()),
        ("EBB_PACKED_RELOCS", "-Wl,-z,pack-relative-relocs"),
    ];
    for (name, argument) in arguments {
        let taken = target_os == "linux" && !argument.is_empty() && linker_takes(argument);
        if taken {
            println!("cargo:rustc-cdylib-link-arg={argument}");
        }
        println!("cargo:rustc-env={name}={}", u8::from(taken));
    }
}

/// Whether the linker rustc will use links a shared object with `argument` without an
/// error or a warning (GNU ld warns about a `-z` option it does not know and goes on).
/// The probe runs the linker driver rustc will (`-C linker` in `RUSTFLAGS`, else the one
/// Cargo resolved, `RUSTC_LINKER`, else `$CC`, else `cc`) with the link arguments of
/// `RUSTFLAGS`, so a build that asks for another linker (`-C link-arg=-fuse-ld=gold`:
/// gold cannot read `INSERT`) probes that one.
fn linker_takes(argument: &str) -> bool {
    let (rustflags_linker, link_args) = rustflags_linking();
    let linker = rustflags_linker
        .or_else(|| std::env::var("RUSTC_LINKER").ok())
        .or_else(|| std::env::var("CC").ok())
        .unwrap_or_else(|| "cc".to_string());
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into()));
    let source = out_dir.join("probe.c");
    // A constant too: lld will not insert a section before a `.rodata` the link lacks.
    let probe = "const char ebb_probe_text[] = \"ebb\";\n\
                 int ebb_probe(int i) { return ebb_probe_text[i]; }\n";
    if std::fs::write(&source, probe).is_err() {
        return false;
    }
    let output = Command::new(linker)
        .args(["-shared", "-fPIC", "-o"])
        .arg(out_dir.join("probe.so"))
        .arg(&source)
        .args(link_args)
        .arg(argument)
        .output();
    match output {
        Ok(output) => {
            let stderr = String::from_utf8_lossy(&output.stderr).to_lowercase();
            output.status.success() && !stderr.contains("warning")
        }
        Err(_) => false,
    }
}

/// The `-C linker=...`, and the `-C link-arg=...` and `-C link-args=...`, of the rustc
/// flags Cargo passes (`CARGO_ENCODED_RUSTFLAGS`, arguments separated by 0x1f).
fn rustflags_linking() -> (Option<String>, Vec<String>) {
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let mut linker = None;
    let mut args = Vec::new();
    let mut codegen_next = false;
    for flag in flags.split('\x1f').filter(|f| !f.is_empty()) {
        let option = match flag.strip_prefix("-C") {
            Some("") => {
                codegen_next = true;
                continue;
            }
            Some(rest) => rest,
            None if codegen_next => flag,
            None => continue,
        };
        codegen_next = false;
        if let Some(arg) = option.strip_prefix("link-arg=") {
            args.push(arg.to_string());
        } else if let Some(list) = option.strip_prefix("link-args=") {
            args.extend(list.split_whitespace().map(str::to_string));
        } else if let Some(path) = option.strip_prefix("linker=") {
            linker = Some(path.to_string());
        }
    }
    (linker, args)
}

/// The path of `libgcc_eh.a` as the C compiler reports it, if the file exists.
fn libgcc_eh() -> Option<PathBuf> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let output = Command::new(cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8(output.stdout).ok()?.trim());
    // A compiler that does not know the file prints its bare name back.
    (output.status.success() && path.is_absolute() && path.is_file()).then_some(path)
}
