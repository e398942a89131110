//! A Rust program on ebb (`#[global_allocator]`) whose C side allocates too, for the
//! integration tests of a process with two ebb instances, as `ebb run` makes one (it
//! preloads `libebb.so` for the C code): `leak-both MIB` leaks MIB MiB from Rust
//! (`rust_leak`, through the global allocator) and MIB MiB through C's `malloc`
//! (`c_leak`), in 64 KiB blocks, and exits 0. Not meant for users.

#[global_allocator]
static GLOBAL: ebb::Ebb = ebb::Ebb;

const BLOCK: usize = 64 << 10;

/// Rust's blocks, never freed. `std::alloc::alloc` directly, so the site is this
/// function with or without frame pointers.
#[inline(never)]
fn rust_leak(mib: usize) {
    let layout = std::alloc::Layout::from_size_align(BLOCK, 16).unwrap();
    for _ in 0..mib * (1 << 20) / BLOCK {
        // SAFETY: a nonzero size; the block is written within its bounds and leaked.
        unsafe {
            let p = std::alloc::alloc(layout);
            assert!(!p.is_null());
            p.write_bytes(1, BLOCK);
            // Escapes, so the compiler keeps the allocation.
            std::hint::black_box(p);
        }
    }
}

/// C's blocks (what a C library linked into the program allocates), never freed.
#[inline(never)]
fn c_leak(mib: usize) {
    for _ in 0..mib * (1 << 20) / BLOCK {
        // SAFETY: malloc of a nonzero size; the block is written within its bounds.
        unsafe {
            let p = libc::malloc(BLOCK) as *mut u8;
            assert!(!p.is_null());
            p.write_bytes(2, BLOCK);
            std::hint::black_box(p);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match (args.get(1).map(String::as_str), args.get(2)) {
        (Some("leak-both"), Some(mib)) => {
            let mib: usize = mib.parse().expect("MIB");
            rust_leak(mib);
            c_leak(mib);
        }
        _ => {
            eprintln!("usage: ebb-test-rust-on-ebb leak-both MIB");
            std::process::exit(2);
        }
    }
}
