//! Compiles c/cside.c (the C half of the mixed-c-rust scenario) and records the git
//! commit for the summary line.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=c/cside.c");
    cc::Build::new()
        .file("c/cside.c")
        .opt_level(2)
        .warnings(true)
        .compile("cside");

    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--", "../../crates/ebb/src"])
        .output()
        .ok()
        .map(|o| !o.stdout.is_empty())
        .unwrap_or(false);
    println!(
        "cargo:rustc-env=EBB_SCENARIOS_GIT_COMMIT={commit}{}",
        if dirty { "+dirty" } else { "" }
    );
    println!("cargo:rerun-if-changed=../../.git/HEAD");
    println!("cargo:rerun-if-changed=../../.git/index");
    println!("cargo:rerun-if-changed=../../crates/ebb/src");
}
