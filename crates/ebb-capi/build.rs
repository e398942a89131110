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

use std::path::PathBuf;
use std::process::Command;

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
