//! Demonstrates ebb's `override` feature: a Rust program that installs ebb as its
//! global allocator and enables `override` exports `malloc`, `free`, ... itself, so the
//! C code linked into it (here `c/clib.c`, built by `build.rs`) and libc's own internal
//! allocations (`strdup`, ...) go through ebb too — no `LD_PRELOAD` involved. Blocks
//! can then cross the language boundary in both directions: C `malloc` → Rust
//! `libc::free`, Rust `Box`/`Vec` → C `free`.
//!
//! The tests are in `tests/override.rs`.

use core::ffi::{c_char, c_int, c_long, c_uint, c_void};

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

extern "C" {
    /// Byte `j` of block `i` in a set filled with `seed`.
    pub fn clib_pattern(seed: c_uint, i: usize, j: usize) -> u8;
    /// In a new pthread: `blocks[i] = malloc(sizes[i])`, filled with the pattern.
    /// 0 on success, -1 if a `malloc` or the thread failed.
    pub fn clib_alloc_in_thread(
        blocks: *mut *mut c_void,
        sizes: *const usize,
        count: usize,
        seed: c_uint,
    ) -> c_int;
    /// In a new pthread: check each block against the pattern (if `verify`), `free` it
    /// and null its slot. Returns the number of blocks that differed, or -1.
    pub fn clib_free_in_thread(
        blocks: *mut *mut c_void,
        sizes: *const usize,
        count: usize,
        seed: c_uint,
        verify: c_int,
    ) -> c_long;
    /// `strdup` (libc allocates) in a new pthread.
    pub fn clib_strdup_in_thread(s: *const c_char) -> *mut c_char;
    /// `count` blocks of `size` bytes, each freed at once (an allocation site).
    pub fn clib_alloc_site(count: usize, size: usize);
    /// `&malloc` as the C code was linked against it.
    pub fn clib_malloc_address() -> *mut c_void;
}

/// The pattern of `clib_pattern`, computed in Rust (the two must agree).
pub fn pattern(seed: u32, i: usize, j: usize) -> u8 {
    (seed as usize)
        .wrapping_add(i.wrapping_mul(31))
        .wrapping_add(j.wrapping_mul(7)) as u8
}
