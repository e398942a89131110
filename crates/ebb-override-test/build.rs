//! Compiles c/clib.c (a small C library with threads of its own) into a static library.

fn main() {
    println!("cargo:rerun-if-changed=c/clib.c");
    cc::Build::new()
        .file("c/clib.c")
        .flag_if_supported("-pthread")
        // Frame pointers, as the heap profiler asks of profiled code (tests/profile.rs).
        .flag_if_supported("-fno-omit-frame-pointer")
        .warnings(true)
        .compile("clib");
    // The library uses pthread_create; glibc >= 2.34 has it in libc, older ones need -lpthread.
    println!("cargo:rustc-link-lib=pthread");
}
