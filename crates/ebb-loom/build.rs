//! Compile this crate with `cfg(loom)`, so that the production protocol code it
//! includes from `crates/ebb/src/protocol/` uses loom's atomics (see `src/lib.rs`).
fn main() {
    println!("cargo:rustc-check-cfg=cfg(loom)");
    println!("cargo:rustc-cfg=loom");
    println!("cargo:rerun-if-changed=build.rs");
}
