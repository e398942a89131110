//! Valgrind client requests (the `valgrind` feature): tell memcheck where ebb's blocks
//! are, so it reports leaks, reads of uninitialised bytes, accesses to freed blocks and
//! invalid frees in programs that allocate through ebb (memcheck replaces glibc's
//! malloc, not ebb's, so without these it sees ebb's memory as one big mapping).
//!
//! A request is the magic instruction sequence of `valgrind.h` for x86-64: four
//! rotations of rdi adding up to 128 bits and `xchg rbx, rbx`, a no-op natively (a few
//! cycles), which valgrind recognises and answers. Without the feature every function
//! here is empty; on other architectures too.
//!
//! What memcheck knows under the feature:
//! - a block is as big as its usable size (`malloc_usable_size`'s figure), so accesses
//!   past it are reported, not those into its rounding slack;
//! - a freed block is inaccessible except its first 16 bytes (the free-list link and
//!   the freed key, which ebb itself reads and writes while the block is free);
//! - memory ebb carves into new blocks is made accessible first (it may have been a
//!   freed block of another size).
//!
//! The entry points (`lib.rs`'s `GlobalAlloc` and `c_api.rs`) report each allocation
//! and free once; under the feature `alloc_zeroed` zeroes after the report and
//! `realloc` always moves the block (so no byte is written before memcheck knows it).
//! Blocks of first-class heaps (`ebb::Heap`) are not reported.

/// Whether the requests are compiled in.
pub const ENABLED: bool = cfg!(all(feature = "valgrind", target_arch = "x86_64"));

const MALLOCLIKE_BLOCK: usize = 0x1301;
const FREELIKE_BLOCK: usize = 0x1302;
/// `VG_USERREQ_TOOL_BASE('M', 'C') + 2`.
const MAKE_MEM_DEFINED: usize = 0x4D43_0002;

/// Bytes of a freed block ebb keeps using (link and freed key).
const FREE_BLOCK_WORDS_BYTES: usize = 16;

#[inline(always)]
fn request(args: [usize; 6]) {
    #[cfg(all(feature = "valgrind", target_arch = "x86_64"))]
    {
        // SAFETY: the four rotations of rdi add up to 128 bits (rdi is unchanged) and
        // `xchg rbx, rbx` is a no-op; under valgrind the sequence reads `args` and
        // writes its answer to rdx.
        unsafe {
            core::arch::asm!(
                "rol rdi, 3",
                "rol rdi, 13",
                "rol rdi, 61",
                "rol rdi, 51",
                "xchg rbx, rbx",
                inout("rdx") 0usize => _,
                in("rax") args.as_ptr(),
                out("rdi") _,
                options(nostack, preserves_flags),
            );
        }
    }
    #[cfg(not(all(feature = "valgrind", target_arch = "x86_64")))]
    let _ = args;
}

/// `ptr` (null: nothing) is a new block of `size` usable bytes, zeroed if `zeroed`.
#[inline(always)]
pub fn allocated(ptr: *mut u8, size: usize, zeroed: bool) {
    if ENABLED && !ptr.is_null() {
        request([MALLOCLIKE_BLOCK, ptr as usize, size, 0, zeroed as usize, 0]);
    }
}

/// `ptr` (null: nothing) is about to be freed: memcheck reports a double or invalid
/// free, then the block becomes inaccessible but for the words ebb keeps in it.
#[inline(always)]
pub fn freeing(ptr: *mut u8) {
    if ENABLED && !ptr.is_null() {
        request([FREELIKE_BLOCK, ptr as usize, 0, 0, 0, 0]);
        request([
            MAKE_MEM_DEFINED,
            ptr as usize,
            FREE_BLOCK_WORDS_BYTES,
            0,
            0,
            0,
        ]);
    }
}

/// `[ptr, ptr + len)` becomes blocks ebb writes links into (it may have been freed).
#[inline(always)]
pub fn carving(ptr: *mut u8, len: usize) {
    if ENABLED {
        request([MAKE_MEM_DEFINED, ptr as usize, len, 0, 0, 0]);
    }
}
