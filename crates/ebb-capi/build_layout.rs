//! The linker script that lays out `libebb.so` so a process maps few of its pages.
//!
//! Why: the kernel maps a file-backed page together with the other cached pages of its
//! aligned 64 KiB window (fault-around), and every page mapped counts in the process's
//! RSS. Left to the linker, the code every malloc and free runs lies scattered through
//! 1.2 MB of text, most of which is the heap profiler's symbolizer (gimli, addr2line,
//! demangling, compression) that a process runs only when it writes a profile; the
//! constants the allocator reads (the size-class tables) lie among the symbolizer's.
//! `cat` under `LD_PRELOAD` had 424 KiB of the library's text resident and 192 KiB of
//! its read-only data; laid out by this script (with packed relocations), 128 and 64
//! KiB (docs/REAL-PROGRAMS.md, "What libebb.so costs a process in pages").
//!
//! The script is added to the linker's default one (`INSERT`), not a replacement.
//! Section names follow rustc's one section per function with legacy mangling:
//! `.text._ZN3ebb5front4heap...` holds a function of `ebb::front::heap`, and a `#[cold]`
//! one is in `.text.unlikely._ZN3ebb...`. The first statement that matches a section
//! places it, so the modules every process runs come first and a catch-all per layer
//! after them. A pattern that matches nothing (another mangling, another toolchain)
//! only leaves that code where the linker would have put it. `tests/c_api.rs`
//! (`startup_code_lies_together`) checks the result.

/// The core crate's name in each library: `ebb` in libebb.so, `ebb_secure_core` in
/// libebb_secure.so.
const CORE_CRATES: [&str; 2] = ["ebb", "ebb_secure_core"];

/// Modules of the core crate whose code runs in nearly every process (measured with
/// callgrind over ls, cat, sort, wc, sh, make, python3, jq, gcc, cc1, as and ld), in
/// the order a first malloc reaches them.
const EVERY_PROCESS: &[&str] = &[
    "front::alloc",
    "front::free",
    "front::slow",
    "front::heap",
    "front::tls",
    "front::queue",
    "front::shared",
    "front::empty_pages",
    "front::spread",
    "front::freed_key",
    "span::arena",
    "span::bitmap",
    "span::carve",
    "span::segment",
    "span::page",
    "span::deadline",
    "span::large_pages",
    "span::retain",
    "handoff::drain",
    "handoff::abandon",
    "handoff::freed_into",
    "os::linux",
    "os::fault",
    "os::linux_threads",
    "os::linux_advice",
    "process",
    "options",
    "size_class",
    "sync",
    "c_api",
    "profile::register_from_env",
];

/// The rest of each layer a malloc or a free can reach (huge blocks, realloc, the
/// purger's takeover, guarded and first-class heaps, the profiler's sampler), after
/// the modules above.
const REST_OF_LAYERS: &[&str] = &["front", "handoff", "span", "os", "profile"];

/// The exported entry points (`.text.<name>`; the malloc family is defined under
/// glibc's `__libc_*` names with the public ones as aliases). The C++ operators are
/// listed too because the compiler may fold an identical body into one of them
/// (`free` and `operator delete(void*)` compile to the same code), and the folded
/// function then lives in the operator's section.
const ENTRY_POINTS: &[&str] = &[
    "__libc_malloc",
    "__libc_free",
    "__libc_calloc",
    "__libc_realloc",
    "__libc_memalign",
    "aligned_alloc",
    "ebb_posix_memalign",
    "ebb_malloc_usable_size",
    "ebb_reallocarray",
    "__libc_valloc",
    "__libc_pvalloc",
    "_Zn*",
    "_Zd*",
];

/// What runs once in every process besides the allocator: the profiler's encoder
/// registration (a constructor of libebb.so's own crate), the standard library's argv
/// constructor, the C runtime's frame registration, libc_nonshared's `pthread_atfork`
/// (the fork handlers are registered at the first malloc), and the PLT, through which
/// that `pthread_atfork` and the C runtime's exit code (`__cxa_finalize`) call libc.
const ONCE_PER_PROCESS: &[&str] = &[
    "*(.text._ZN3ebb22register_pprof_encoder*)",
    "*(.text._R*ARGV_INIT_ARRAY*)",
    "*crtbeginS.o(.text .text.*)",
    "*libc_nonshared.a:*(.text .text.*)",
    "*(.plt .iplt)",
];

/// `ebb::front::heap` as the prefix of its functions' legacy-mangled names in `krate`.
fn mangled_prefix(krate: &str, path: &str) -> String {
    let mut prefix = format!("_ZN{}{krate}", krate.len());
    for part in path.split("::") {
        prefix.push_str(&format!("{}{part}", part.len()));
    }
    prefix
}

/// One input-section statement taking the functions of `path`, hot and cold, in both
/// core crates.
fn module_statement(path: &str) -> String {
    let patterns: Vec<String> = CORE_CRATES
        .iter()
        .flat_map(|krate| {
            let prefix = mangled_prefix(krate, path);
            [
                format!(".text.{prefix}*"),
                format!(".text.unlikely.{prefix}*"),
            ]
        })
        .collect();
    format!("    *({})\n", patterns.join(" "))
}

/// The script's text.
pub fn script() -> String {
    let mut text = String::from(
        "/* Generated by crates/ebb-capi/build_layout.rs, which says why. */\n\
         SECTIONS\n{\n  .text.ebb_hot :\n  {\n",
    );
    let entries: Vec<String> = ENTRY_POINTS.iter().map(|e| format!(".text.{e}")).collect();
    text.push_str(&format!("    *({})\n", entries.join(" ")));
    for path in EVERY_PROCESS {
        text.push_str(&module_statement(path));
    }
    for statement in ONCE_PER_PROCESS {
        text.push_str(&format!("    {statement}\n"));
    }
    for path in REST_OF_LAYERS {
        text.push_str(&module_statement(path));
    }
    text.push_str("  }\n}\nINSERT BEFORE .text;\n\n");
    // The core crate's constants next to the dynamic symbol table, which the loader
    // reads anyway. Object files are named `<library>.<crate>-<hash>...`.
    text.push_str("SECTIONS\n{\n  .rodata.ebb_hot :\n  {\n");
    for krate in CORE_CRATES {
        text.push_str(&format!("    *.{krate}-*(.rodata .rodata.*)\n"));
    }
    text.push_str("  }\n}\nINSERT BEFORE .rodata;\n");
    text
}
