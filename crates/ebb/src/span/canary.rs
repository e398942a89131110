//! Canaries of the secure build (`secure` feature): the word after each small block
//! (`EBB_CANARY`, on at level full) and the two words after each large block, written
//! when blocks are carved or spans set up and checked on free and realloc. Re-exported
//! by [`super::secure`], which reads the option in `init` and reports what breaks.

use super::secure::{fatal, level, tweak};
use crate::diag::StderrWriter;
use crate::os;
use crate::span::page::Page;
use core::fmt::Write;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Bytes of a block's canary. While canaries are on, the entry points pick the class
/// for the request plus these bytes (`front::alloc::pad`), so the last word of every
/// block is not the program's; in pages of blocks of up to [`SMALL_CANARY_MAX`] it
/// holds the canary, and their usable size (what `malloc_usable_size` reports) is the
/// class size less 8 ([`canary_bytes`]).
pub const SMALL_CANARY: usize = 8;

/// The largest blocks whose canary is written and checked: the canary of a bigger
/// block lies far from where the program works (another cache line, often another OS
/// page, which writing it would commit even if the program never touches it). Their
/// 8 bytes of padding stay, unused.
pub const SMALL_CANARY_MAX: usize = 1024;

/// `EBB_CANARY` (on by default at level full, off at light): pages set up write and
/// check small-block canaries. Read by `init`, which runs before the first page is
/// set up (`Page::secure_init` calls [`level`]), so every page's flag
/// (`Page::small_canary`) is the option's.
static SMALL_CANARIES: AtomicBool = AtomicBool::new(false);

/// [`SMALL_CANARY`] while canaries are on, else 0: the padding of every request
/// ([`canary_pad`]). 8 until `init` reads the option: a request served before that
/// (the first one, which sets the process up) is padded, and its block, from a page
/// set up after `init`, has room to spare. Padding a request whose page then has a
/// canary is what must never be missed, and the padding only goes from 8 to 0.
static CANARY_PAD: AtomicUsize = AtomicUsize::new(SMALL_CANARY);

/// Called once by `secure::init`, before the first page is set up: canaries on or off
/// (`EBB_CANARY`), and the padding that follows from it.
pub(super) fn set_small_canaries(on: bool) {
    SMALL_CANARIES.store(on, Ordering::Relaxed);
    CANARY_PAD.store(if on { SMALL_CANARY } else { 0 }, Ordering::Relaxed);
}

/// Bytes every request is padded with (`front::alloc::pad`): one load.
#[inline(always)]
pub fn canary_pad() -> usize {
    CANARY_PAD.load(Ordering::Relaxed)
}

/// Bytes at the end of each block of `page` that are not the program's: its canary.
#[inline(always)]
pub fn canary_bytes(page: &Page) -> usize {
    if page.small_canary {
        SMALL_CANARY
    } else {
        0
    }
}

/// True if a page of `block_size` blocks set up now gets canaries
/// (`Page::secure_init`; reads the options first if nobody has). Not 8-byte blocks
/// (which the padded requests never take): their canary would be their link word.
pub fn small_canaries(block_size: usize) -> bool {
    level();
    (2 * SMALL_CANARY..=SMALL_CANARY_MAX).contains(&block_size)
        && SMALL_CANARIES.load(Ordering::Relaxed)
}

/// The canary of the block at `block` of a page with link key `key`: unpredictable
/// without the key, different for every block, and with its first byte (the one a
/// 1-byte overflow writes) never 0, so an overflowing string terminator is caught too:
/// the block's [`tweak`] (`key ^ block`) rotated by a byte, whose first byte is then
/// the key's last, which has its top bit set (`secure::new_key`; a block's address
/// is below 2^56). The tweak is the one the free fast path computes for the link word
/// anyway: the canary costs a rotation, not a load, a rotation, an `xor` and an `or`.
#[inline(always)]
pub fn small_canary(key: usize, block: usize) -> usize {
    tweak(key, block).rotate_left(8)
}

/// Write the canaries of `count` blocks of `page` from `first`, just carved (or
/// refilled after a hole, `span::holes`), if the page has canaries. A block's canary
/// is written once, here, not when the block is handed out: no part of ebb writes the
/// last word of a block of such a page afterwards (a free block holds its link in its
/// first word; zeroing covers the usable bytes, and `EBB_ZERO_ON_FREE` puts the
/// canary back, `front::secure`), so the canary is intact until the program
/// overflows the block, and the malloc fast path neither writes it nor tests whether
/// the page has one (it did: 2 instructions per malloc at level light, 8 at full).
///
/// # Safety
/// The blocks are the caller's (the page's owner), on no list the program can reach.
pub unsafe fn write_canaries(page: &Page, first: *mut u8, count: usize) {
    if !page.small_canary {
        return;
    }
    let size = page.block_size();
    for i in 0..count {
        // SAFETY: per the contract.
        unsafe { write_small_canary(page, first.add(i * size)) };
    }
}

/// Write the canary of `block`, a block of `page`, in its last word.
///
/// # Safety
/// `block` is a block of `page` (with small blocks) that the caller owns.
#[inline(always)]
pub unsafe fn write_small_canary(page: &Page, block: *mut u8) {
    // SAFETY: per the contract the block's last word is inside it.
    unsafe {
        let at = block.add(page.block_size() - SMALL_CANARY) as *mut usize;
        at.write(small_canary(page.key, block as usize));
    }
}

/// True if `block` of `page` still has its canary (or the page has none). Whether it
/// has one is read from the key's [`KEY_SMALL_CANARY`](crate::span::secure::KEY_SMALL_CANARY)
/// bit, not from `Page::small_canary` (the descriptor's owner-written line).
///
/// # Safety
/// `block` is a carved block of `page`, a page of small blocks.
#[inline(always)]
pub unsafe fn small_canary_intact(page: &Page, block: *mut u8) -> bool {
    debug_assert_eq!(
        page.key & crate::span::secure::KEY_SMALL_CANARY != 0,
        page.small_canary
    );
    // The flag's bit of the tweak is the key's: a block start is 8-byte aligned.
    let tweak = tweak(page.key, block as usize);
    // SAFETY: per the contract the block's last word is inside it.
    unsafe {
        tweak & crate::span::secure::KEY_SMALL_CANARY == 0
            || (block.add(page.block_size() - SMALL_CANARY) as *const usize).read()
                == tweak.rotate_left(8)
    }
}

/// Abort if `block` of `page` lost its canary: `ebb: free(0x…): overflow past the end
/// of the block (its canary was overwritten) [32-byte blocks, 24 usable]`.
///
/// # Safety
/// As [`small_canary_intact`].
#[inline(always)]
pub unsafe fn check_small_canary(function: &str, page: &Page, block: *mut u8) {
    // SAFETY: per the contract.
    if unsafe { !small_canary_intact(page, block) } {
        small_canary_overwritten(function, page, block)
    }
}

/// The report of [`check_small_canary`], out of line (`realloc` tests the canary
/// inline: a call per `realloc` cost prodcons 1.5% of its instructions at level full).
#[cold]
#[inline(never)]
fn small_canary_overwritten(function: &str, page: &Page, block: *mut u8) -> ! {
    let size = page.block_size();
    let mut w = StderrWriter::new();
    let _ = writeln!(
        w,
        "ebb: {}({:p}): overflow past the end of the block (its canary was \
         overwritten) [{}-byte blocks, {} usable]; aborting (secure build)",
        function,
        block,
        size,
        size - SMALL_CANARY
    );
    w.flush();
    os::abort()
}

// ---------------------------------------------------------------------------------
// Canaries after large blocks

/// Bytes of the canary after a large block.
pub const LARGE_CANARY: usize = 16;

/// `arena::alloc_large` with a canary after the block: the span has room for
/// `LARGE_CANARY` more bytes, the block's usable size is `size` rounded up to 16 (so a
/// linear overflow of even one byte past what `malloc_usable_size` reports lands on
/// the canary), checked when the block is freed ([`check_large_canary`]).
pub fn alloc_large(size: usize, align: usize) -> Option<*mut Page> {
    let page = crate::span::arena::alloc_large(size.max(1) + LARGE_CANARY, align)?;
    // SAFETY: a fresh large span of ours, `LARGE_CANARY` bytes longer than the block.
    unsafe { set_large_canary(page, size) };
    Some(page)
}

/// The canary's first word for `page` (the second is its complement): unpredictable
/// without the page's key.
fn large_canary_word(page: &Page) -> usize {
    // The first byte has its top bit set, as the small canary's: a 1-byte overflow of
    // text (ASCII) or a string's NUL always changes it. Fully random, it matched the
    // overflowing byte 1 time in 256 (`overflow_large_1.c`'s 0x41 survived 2 of 400 runs).
    (page.key.rotate_left(17) ^ page.start as usize) | 0x80
}

/// Make the block of large span `page` `size` bytes (rounded up to 16) and put the
/// canary after it.
///
/// # Safety
/// `page` is a live large span of the caller's with room for the block and the canary.
pub unsafe fn set_large_canary(page: *mut Page, size: usize) {
    let usable = size.max(1).next_multiple_of(16);
    // SAFETY: per the contract.
    unsafe {
        debug_assert!(usable + LARGE_CANARY <= (*page).span_bytes());
        (*page).block_size.store(usable, Ordering::Relaxed);
        (*page).large_canary = true;
        (*page).small_canary = false;
        (*page).key &= !crate::span::secure::KEY_SMALL_CANARY;
        let word = large_canary_word(&*page);
        let at = (*page).start.add(usable) as *mut usize;
        at.write(word);
        at.add(1).write(!word);
    }
}

/// Abort if the canary after large block `block` (of span `page`) was overwritten.
///
/// # Safety
/// `page` is the live large span of `block`, about to be freed.
pub unsafe fn check_large_canary(page: *mut Page, block: *mut u8) {
    // SAFETY: per the contract; the canary lies inside the span.
    unsafe {
        if !(*page).large_canary {
            return; // a span made without one (a heap-profile sample)
        }
        let word = large_canary_word(&*page);
        let at = (*page).start.add((*page).block_size()) as *const usize;
        if at.read() != word || at.add(1).read() != !word {
            fatal(
                "free",
                block,
                "overflow past the end of the block (its canary was overwritten)",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both canaries' first byte has its top bit set whatever the key (keys have their
    /// top bit set, `secure::new_key`), so a 1-byte overflow with text or a NUL never
    /// leaves them intact.
    #[test]
    fn first_canary_byte_is_never_text_or_nul() {
        let mut page = Page::new();
        let mut key = 0x9e37_79b9_7f4a_7c15usize;
        for i in 0..10_000usize {
            key = key.rotate_left(7) ^ i.wrapping_mul(0x2545_f491_4f6c_dd1d);
            page.key = key | 1 << 63;
            page.start = (i << 16) as *mut u8;
            assert!(large_canary_word(&page) as u8 >= 0x80, "key {key:#x}");
            assert!(small_canary(page.key, i << 4) as u8 >= 0x80, "key {key:#x}");
            assert!(small_canary(page.key, i << 4) != small_canary(page.key, (i + 1) << 4));
        }
    }
}
