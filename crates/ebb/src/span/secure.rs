//! The secure build (`secure` feature): what it adds below the front end.
//!
//! - **Encoded free-list links.** A free block's link word holds
//!   `next ^ key ^ address of the word`, `key` a random word per page (drawn when the
//!   page is set up, `Page::key`). Every link is decoded where it is followed
//!   ([`decode`]); a link that decodes outside its page means the word was overwritten
//!   (a write after free, an overflow from the block before) and the process aborts
//!   with `ebb: free list of page 0x… corrupted: …` instead of handing out memory the
//!   attacker chose. A popped block's link word is cleared, so only a *free* block's
//!   first word decodes into its page: that is how a double free is recognised on the
//!   free path (`front::secure`).
//! - **Guard pages** (level full; `guard_pages.rs`): the last OS page of every page of
//!   blocks, and the last one of each segment's header (between the page descriptors
//!   and the first blocks), are made inaccessible ([`guard`], `os::protect`).
//! - **Randomisation** (level full): blocks carved onto a free list come in a random
//!   order ([`Shuffle`]); segments are placed at random addresses ([`segment_hint`]).
//! - **Canaries in small blocks** (`EBB_CANARY`; on at level full, off at light):
//!   requests are padded by 8 bytes ([`canary_pad`]), and the last word of every block
//!   of up to 1 KiB holds [`small_canary`], written when the block is carved
//!   ([`write_canaries`]) and checked on free (`front::secure`) and realloc.
//! - **Zeroing on free** (`EBB_ZERO_ON_FREE=1`, either level; off by default): a freed
//!   block of up to 512 KiB is zeroed before it goes on a free list. Off by default
//!   because it writes the whole block, also the parts the program never touched
//!   (committing them): `sweep` of the speed suite ran 14 times slower with it.
//!
//! The level is read once at process start from `EBB_SECURE` (`light` or `full`, full
//! by default); see README "Security".

use crate::diag::StderrWriter;
use crate::options::{parse_bool, parse_secure_level};
use crate::os;
use crate::span::page::{Block, Page};
use core::fmt::Write;
use core::ptr::null_mut;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};

pub use super::canary::*;
pub use super::guard_pages::*;

/// Encoded links and double/invalid free detection only.
pub const LIGHT: u8 = 1;
/// Also guard pages, randomised free lists and segment placement.
pub const FULL: u8 = 2;
// `options::parse_secure_level` returns the levels by number.
const _: () = assert!(LIGHT == 1 && FULL == 2);

/// 0 until read from the environment.
static LEVEL: AtomicU8 = AtomicU8::new(0);
/// `EBB_ZERO_ON_FREE`: read on every free, so a flag of its own.
static ZERO_ON_FREE: AtomicBool = AtomicBool::new(false);

/// Read `EBB_SECURE` and `EBB_ZERO_ON_FREE` (process set-up; idempotent).
pub fn init() {
    let level = os::getenv(b"EBB_SECURE\0")
        .and_then(parse_secure_level)
        .unwrap_or(FULL);
    let zero = os::getenv(b"EBB_ZERO_ON_FREE\0").and_then(parse_bool);
    ZERO_ON_FREE.store(zero == Some(true), Ordering::Relaxed);
    let canaries = os::getenv(b"EBB_CANARY\0")
        .and_then(parse_bool)
        .unwrap_or(level == FULL);
    super::canary::set_small_canaries(canaries);
    LEVEL.store(level, Ordering::Release);
}

/// The level (`LIGHT` or `FULL`). Slow paths only.
pub fn level() -> u8 {
    let level = LEVEL.load(Ordering::Acquire);
    if level != 0 {
        return level;
    }
    init();
    LEVEL.load(Ordering::Acquire)
}

/// True at level full (guard pages, randomisation).
#[inline]
pub fn full() -> bool {
    level() == FULL
}

/// True once the level (and the other options of this module) are read.
#[inline(always)]
pub fn level_read() -> bool {
    LEVEL.load(Ordering::Acquire) != 0
}

/// [`full`] where the level is known to be read already: for a page's owner (its
/// set-up, `Page::secure_init`, read it), without `level`'s call to read it.
#[inline(always)]
pub fn full_set_up() -> bool {
    let level = LEVEL.load(Ordering::Relaxed);
    debug_assert!(level != 0, "the level is read when a page is set up");
    level == FULL
}

/// Zero blocks as they are freed.
#[inline(always)]
pub fn zero_on_free() -> bool {
    ZERO_ON_FREE.load(Ordering::Relaxed)
}

// ---------------------------------------------------------------------------------
// Random numbers

static RNG: AtomicU64 = AtomicU64::new(0);

/// A random 64-bit word: splitmix64 over a process-wide counter seeded from the OS
/// (slow paths only: one atomic add per call).
pub fn random() -> u64 {
    const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;
    if RNG.load(Ordering::Relaxed) == 0 {
        let _ = RNG.compare_exchange(
            0,
            os::random_seed() | 1,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }
    let mut z = RNG
        .fetch_add(GOLDEN, Ordering::Relaxed)
        .wrapping_add(GOLDEN);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A page's link key: random, with its top bit set, so that a word a program leaves
/// at zero (or any small value) never decodes to an address (`may_be_link`), and its
/// low bit clear: `Page::secure_init` sets it for a page with small-block canaries
/// ([`KEY_SMALL_CANARY`]).
pub fn new_key() -> usize {
    (random() | 1 << 63) as usize & !KEY_SMALL_CANARY
}

/// The bit of `Page::key` that repeats `Page::small_canary`, so the free fast path
/// tests the key it loads anyway instead of a flag in the descriptor's line 0, which
/// the page's owner writes on every malloc and free: a cross-thread free reading it
/// made the owner's next write a cache miss. (A key has 62 random bits left.)
pub const KEY_SMALL_CANARY: usize = 1;

// ---------------------------------------------------------------------------------
// Encoded links

/// `key ^ slot`, the part of the encoding of the link in the free block at `slot` that
/// does not depend on where it points, opaque to the compiler: every use of it (the
/// free fast path's test of the block's first word, the push's encoding, the canary)
/// then shares one `xor`, where the compiler regrouped `word ^ key ^ slot` and `next ^
/// key ^ slot` so that nothing was shared (one instruction more per free, two more at
/// level full).
#[inline(always)]
pub fn tweak(key: usize, slot: usize) -> usize {
    opaque(key ^ slot)
}

/// `value`, through an empty `asm!` (a register in, the same register out): the
/// compiler cannot see where it came from, so it keeps the computation as written
/// (see [`tweak`], `Page::free_remote`).
#[inline(always)]
pub fn opaque(value: usize) -> usize {
    #[allow(unused_mut)]
    let mut value = value;
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    // SAFETY: an empty template: the value passes through its register unchanged.
    unsafe {
        core::arch::asm!("/* {0} */", inout(reg) value, options(pure, nomem, nostack, preserves_flags));
    }
    value
}

/// The word stored in the free block at `slot` to link it to `next` (null allowed).
#[inline(always)]
pub fn encode(key: usize, slot: usize, next: usize) -> usize {
    next ^ tweak(key, slot)
}

/// The link `stored` in the free block at `slot` of the page of `span` bytes from
/// `start`: null or a block inside the page, else the process aborts (the word was
/// overwritten while the block was free).
#[inline(always)]
pub fn decode(key: usize, start: usize, span: usize, slot: usize, stored: usize) -> usize {
    let next = stored ^ tweak(key, slot);
    if next != 0 && next.wrapping_sub(start) >= span {
        corrupt_link(start, slot, next);
    }
    next
}

/// The malloc fast paths' decode, unchecked: [`check_fast`] checks the result after
/// the caller stored it as the list's new head (the test then needs no copy of it: one
/// instruction per malloc). The process aborts if it fails, so the stored value is
/// never used.
#[inline(always)]
pub fn decode_unchecked(key: usize, slot: usize, stored: usize) -> usize {
    stored ^ tweak(key, slot)
}

/// The malloc fast paths' check of a decoded link (`next`, read from the free block at
/// `slot`): it must be a user-space address (or null). An overwritten word decodes to
/// a random one, which fails this but for a chance of about 2^-17 (ranges are checked
/// on the slow paths, [`decode`]).
#[inline(always)]
pub fn check_fast(slot: usize, next: usize) {
    if next >> os::ADDRESS_BITS != 0 {
        corrupt_link(0, slot, next);
    }
}

/// [`check_fast`] of the link the caller just stored as `page`'s `free` list head:
/// the report reads it back from there, so the test may consume its register.
///
/// # Safety
/// `page` is a descriptor; `next` is its `free`.
#[inline(always)]
pub unsafe fn check_fast_head(page: *const Page, slot: usize, next: usize) {
    if next >> os::ADDRESS_BITS != 0 {
        // SAFETY: per the contract.
        unsafe { corrupt_head(page, slot) };
    }
}

/// The report of [`check_fast_head`].
///
/// # Safety
/// As [`check_fast_head`].
#[cold]
#[inline(never)]
unsafe fn corrupt_head(page: *const Page, slot: usize) -> ! {
    // SAFETY: per the contract.
    corrupt_link(0, slot, unsafe { (*page).free } as usize)
}

/// [`decode_unchecked`] and [`check_fast`] together.
#[inline(always)]
pub fn decode_fast(key: usize, slot: usize, stored: usize) -> usize {
    let next = decode_unchecked(key, slot, stored);
    check_fast(slot, next);
    next
}

/// The free fast path's filter: false if `word`, the first word of the block whose
/// [`tweak`] is `tweak`, is certainly no link (it does not decode to a user-space
/// address: the common case for a live block, whose word the pop cleared or the
/// program wrote); true sends the free to the slow path, which tells with
/// [`looks_like_link`].
#[inline(always)]
pub fn may_be_link(tweak: usize, word: usize) -> bool {
    (word ^ tweak) >> os::ADDRESS_BITS == 0
}

/// True if `word`, the first word of the block at `slot`, is what a free block's link
/// looks like (it decodes to null or into the page). Blocks in use never hold one: the
/// pop clears the word, and other values decode there with probability about
/// `span / 2^64`.
#[inline(always)]
pub fn looks_like_link(key: usize, start: usize, span: usize, slot: usize, word: usize) -> bool {
    let next = word ^ tweak(key, slot);
    next == 0 || next.wrapping_sub(start) < span
}

#[cold]
#[inline(never)]
fn corrupt_link(start: usize, slot: usize, next: usize) -> ! {
    let mut w = StderrWriter::new();
    let _ = if start == 0 {
        writeln!(
            w,
            "ebb: free list corrupted: the link in free block {:#x} decodes to {:#x}, not an \
             address (a write after free or an overflow); aborting (secure build)",
            slot, next
        )
    } else {
        writeln!(
            w,
            "ebb: free list of page {:#x} corrupted: the link in free block {:#x} decodes to \
             {:#x}, outside its page (a write after free or an overflow); aborting (secure build)",
            start, slot, next
        )
    };
    w.flush();
    os::abort()
}

/// Report a detected heap error of the secure build and abort:
/// `ebb: free(0x…): what; aborting (secure build)`.
#[cold]
#[inline(never)]
pub fn fatal(function: &str, ptr: *const u8, what: &str) -> ! {
    let mut w = StderrWriter::new();
    let _ = writeln!(
        w,
        "ebb: {}({:p}): {}; aborting (secure build)",
        function, ptr, what
    );
    w.flush();
    os::abort()
}

/// The multiplier of [`is_block_start`] for blocks of `divisor` bytes:
/// `floor(2^64 / divisor) + 1`.
pub const fn start_magic(divisor: usize) -> u64 {
    crate::span::block_divisor::magic(divisor)
}

/// The [`is_block_start`] limit of a page whose first `blocks` blocks of `divisor`
/// bytes are carved: `blocks × (divisor × start_magic(divisor) mod 2^64)`.
pub const fn start_limit(divisor: usize, blocks: usize) -> u64 {
    blocks as u64 * (divisor as u64).wrapping_mul(start_magic(divisor))
}

/// [`start_limit`] from the page's `magic` (`start_magic(divisor)`, kept in the
/// descriptor): a multiply, where `start_limit` divides (per carve).
#[inline]
pub fn start_limit_with(magic: u64, divisor: usize, blocks: usize) -> u64 {
    blocks as u64 * (divisor as u64).wrapping_mul(magic)
}

/// True if `offset` (a pointer less its page's start, wrapped) is the start of one of
/// the page's carved blocks: `offset = j × divisor` with `j < blocks`, for `magic =
/// start_magic(divisor)` and `limit = start_limit(divisor, blocks)`. One multiply and
/// one compare, for both the range and the block-boundary test.
///
/// Why it holds: with `e = divisor × magic − 2^64` (`1 ≤ e ≤ divisor`), the product
/// of `j × divisor` is `j × e`, below `limit` exactly when `j < blocks`; that of
/// `j × divisor + r` (`0 < r < divisor`) is `j × e + r × magic ≥ magic`, and that of
/// a pointer up to 2^25 bytes before the start wraps to at least `magic − 2^26`. Both
/// exceed any limit as long as `blocks × divisor ≤ 2^25` (a segment) and `divisor ≤
/// 2^25`, so `magic ≥ 2^39`. Pages of blocks and large spans lie in one segment, so
/// every pointer that maps to their descriptor is within 2^25 bytes of their start
/// (tested exhaustively around the bounds, `block_start_test_is_exact`).
#[inline(always)]
pub fn is_block_start(offset: usize, magic: u64, limit: u64) -> bool {
    (offset as u64).wrapping_mul(magic) < limit
}

// ---------------------------------------------------------------------------------
// Randomised placement

/// Where to try to put the next segment (`size` bytes, aligned to `align`): a random
/// aligned address in the upper part of the user address space the segment map
/// covers. Level full only; `None` otherwise.
pub fn segment_hint(size: usize, align: usize) -> Option<*mut u8> {
    if !full() {
        return None;
    }
    // Between 1/4 and 3/4 of the address space: away from the program's image and
    // heap (low) and the stacks and libraries (high).
    let space = 1usize << os::ADDRESS_BITS;
    let low = space / 4;
    let slots = (space / 2 - size) / align;
    let slot = random() as usize % slots;
    Some((low + slot * align) as *mut u8)
}

/// Put `count` blocks of `size` bytes just carved from `first` on `page`'s empty
/// `free` list, with their canaries ([`write_canaries`]): in a random order at level
/// full ([`link_shuffled`]), in address order at light (a plain loop: the shuffle's
/// iterator cost light a dozen instructions per block).
///
/// # Safety
/// The blocks lie in `page`'s span, carved now by its owner, the caller.
pub unsafe fn link_carved(page: &Page, first: *mut u8, count: usize, size: usize) -> *mut Block {
    debug_assert!(count >= 1 && page.free.is_null());
    // SAFETY: per the contract every block is the caller's to write.
    unsafe {
        if count >= 2 && full() {
            let seed = random();
            return if page.small_canary {
                link_shuffled::<true>(page, first, count, size, seed)
            } else {
                link_shuffled::<false>(page, first, count, size, seed)
            };
        }
        let mut block = first as *mut Block;
        let head = block;
        for _ in 1..count {
            let next = (block as *mut u8).add(size) as *mut Block;
            page.set_link(block, next);
            block = next;
        }
        page.set_link(block, null_mut());
        write_canaries(page, first, count);
        head
    }
}

/// Blocks per window of the carving order ([`link_shuffled`]).
pub const SHUFFLE_WINDOW: usize = 8;

/// splitmix64's step: the next random word of the generator at `state`.
#[inline(always)]
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Level full's carving order, with the canaries (`CANARIES`: the page has them)
/// written in the same pass: the run of `count` blocks is cut into windows of
/// [`SHUFFLE_WINDOW`] consecutive blocks, the windows are taken in order from a random
/// one on (wrapping around), and the blocks of each window in a random order of their
/// own (a random first block and a random odd stride, from `seed`'s generator).
/// Neither the first block nor the next one can be predicted (each is one of up to 8),
/// while consecutive allocations stay within a few cache lines of each other: a
/// permutation of the whole run (a random stride over 16 KiB, and a division per
/// block) cost level full 9 points of CPU on the speed suite, mostly in programs that
/// walk what they allocated together (tree-rebuild, sweep, compiler-mt).
///
/// Per block: one [`tweak`], shared by the block's canary and, once the next block is
/// known, its link (as `write_small_canary` and `Page::set_link` would each work it
/// out); the list starts behind a stand-in tail, so linking the first block takes no
/// test; a full window's position wraps with a mask. (One loop per window, not an
/// iterator over the blocks with a separate pass for the canaries, was the last cut:
/// sweep at level full 282 -> 127 million instructions in `extend`.)
///
/// # Safety
/// As [`link_carved`]; `count >= 1`.
pub unsafe fn link_shuffled<const CANARIES: bool>(
    page: &Page,
    first: *mut u8,
    count: usize,
    size: usize,
    seed: u64,
) -> *mut Block {
    let windows = count.div_ceil(SHUFFLE_WINDOW);
    let key = page.key;
    let canary_at = size.wrapping_sub(SMALL_CANARY);
    let mut state = seed;
    let mut window = splitmix(&mut state) as usize % windows;
    // The first block's link goes into `stand_in` (a tweak of 0: the block's address),
    // which is then the list's head.
    let mut stand_in: usize = 0;
    let mut tail = &mut stand_in as *mut usize;
    let mut tail_tweak = 0usize;
    // SAFETY: per the contract every block is the caller's to write; a block's last
    // word is inside it.
    let mut add = |block: usize| unsafe {
        let t = tweak(key, block);
        if CANARIES {
            ((block + canary_at) as *mut usize).write(t.rotate_left(8));
        }
        tail.write(block ^ tail_tweak);
        tail = block as *mut usize;
        tail_tweak = t;
    };
    for _ in 0..windows {
        let base = window * SHUFFLE_WINDOW;
        let len = SHUFFLE_WINDOW.min(count - base);
        let r = splitmix(&mut state) as usize;
        let window_first = first as usize + base * size;
        if len == SHUFFLE_WINDOW {
            let mut at = r % SHUFFLE_WINDOW;
            let stride = ((r >> 8) % SHUFFLE_WINDOW) | 1;
            for _ in 0..SHUFFLE_WINDOW {
                add(window_first + at * size);
                at = (at + stride) % SHUFFLE_WINDOW;
            }
        } else {
            // The last, shorter window: a rotation only (a stride of 1 is coprime
            // with any length).
            let mut at = r % len;
            for _ in 0..len {
                add(window_first + at * size);
                at += 1;
                if at == len {
                    at = 0;
                }
            }
        }
        window += 1;
        if window == windows {
            window = 0;
        }
    }
    // SAFETY: the last block's link word, the caller's.
    unsafe { tail.write(tail_tweak) };
    stand_in as *mut Block
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`is_block_start`] against the remainder, for offsets before and after the
    /// start, up to the segment's size either way, at every size class shape.
    #[test]
    fn block_start_test_is_exact() {
        const SEGMENT: i64 = 1 << 25;
        for divisor in [
            16usize,
            24,
            48,
            80,
            112,
            128,
            640,
            1024,
            1792,
            3072,
            14336,
            65536,
            81920,
            458752,
            1 << 20,
            3 << 20,
            1 << 25,
        ] {
            let magic = start_magic(divisor);
            let span = (SEGMENT as usize / divisor).max(1) * divisor;
            for blocks in [0usize, 1, 2, span / divisor / 2, span / divisor] {
                let limit = start_limit(divisor, blocks);
                assert_eq!(start_limit_with(magic, divisor, blocks), limit);
                let expected = |offset: i64| {
                    offset >= 0
                        && offset as usize % divisor == 0
                        && (offset as usize) / divisor < blocks
                };
                let check = |offset: i64| {
                    assert_eq!(
                        is_block_start(offset as usize, magic, limit),
                        expected(offset),
                        "offset {offset}, divisor {divisor}, blocks {blocks}"
                    );
                };
                // Every offset near the ends and the block boundaries, every eighth
                // elsewhere (and all of the first 64 KiB either side).
                for offset in -(1 << 16)..(1 << 16) {
                    check(offset);
                }
                for offset in (-SEGMENT..=SEGMENT).step_by(8) {
                    check(offset);
                }
                for j in [0, blocks.saturating_sub(1), blocks, blocks + 1] {
                    let at = (j * divisor) as i64;
                    for offset in at - 64..at + 64 {
                        check(offset);
                    }
                }
            }
        }
    }

    #[test]
    fn links_round_trip_and_a_bad_one_is_recognised() {
        let (key, start, span) = (new_key(), 0x7f00_0000_0000usize, 65536);
        let (slot, next) = (start + 64, start + 128);
        let stored = encode(key, slot, next);
        assert_eq!(decode(key, start, span, slot, stored), next);
        assert_eq!(decode(key, start, span, slot, encode(key, slot, 0)), 0);
        assert!(looks_like_link(key, start, span, slot, stored));
        assert!(
            !looks_like_link(key, start, span, slot, 0),
            "a cleared word is no link"
        );
        assert!(
            !looks_like_link(key, start, span, slot, next),
            "a plain pointer is no link"
        );
    }

    /// The fast paths' filters: every real link passes them and a cleared word (a
    /// block in use) never does (it would, for some of the 1000 keys, if keys did not
    /// have their top bit set).
    #[test]
    fn fast_filters_pass_links_and_stop_cleared_and_overwritten_words() {
        for _ in 0..1000 {
            let key = new_key();
            let (start, slot) = (0x7f00_0000_0000usize, 0x7f00_0000_0040usize);
            for next in [0, start + 128] {
                let stored = encode(key, slot, next);
                assert!(may_be_link(tweak(key, slot), stored));
                assert_eq!(decode_fast(key, slot, stored), next);
            }
            assert!(
                !may_be_link(tweak(key, slot), 0),
                "a cleared word is no link"
            );
        }
    }

    /// `os::protect` is reached by fault injection: a refused guard leaves the span
    /// without one (and usable), and is counted.
    #[test]
    fn refused_guard_page_leaves_the_span_usable() {
        use crate::os::fault::{arm, Kind};
        let bytes = 65536;
        let span = os::reserve_aligned(bytes, bytes);
        assert!(!span.is_null());
        // SAFETY: a fresh reservation of ours.
        unsafe {
            assert!(guard(span, bytes), "level full guards");
            unguard(span, bytes);
            let refused = GUARDS_REFUSED.load(Ordering::Relaxed);
            arm(1, u64::MAX, Kind::Protect as u8, usize::MAX);
            let guarded = guard(span, bytes);
            arm(u64::MAX, u64::MAX, crate::os::fault::ALL_KINDS, usize::MAX);
            assert!(!guarded);
            assert!(GUARDS_REFUSED.load(Ordering::Relaxed) > refused);
            span.add(bytes - 1).write(1);
            os::release(span, bytes);
        }
    }

    /// `unguard_slices` lifts the guards of exactly the slices asked for, across
    /// words of bits, and leaves the others (slices of one OS page here).
    #[test]
    fn unguard_slices_lifts_exactly_the_range() {
        let page = os::page_size();
        let slices = 192;
        let base = os::reserve_aligned(slices * page, page);
        assert!(!base.is_null());
        let bits: [AtomicU64; 3] = [const { AtomicU64::new(0) }; 3];
        let guarded = [0usize, 5, 63, 64, 65, 100, 127, 128, 130, 191];
        // SAFETY: a fresh reservation of ours; each slice is one OS page.
        unsafe {
            for &slice in &guarded {
                assert!(guard_span(&bits, slice, base.add(slice * page), page));
            }
            unguard_slices(&bits, base, page, 5, 126); // slices 5..131
            for &slice in &guarded {
                let bit = bits[slice / 64].load(Ordering::Relaxed) >> (slice % 64) & 1;
                let lifted = (5..131).contains(&slice);
                assert_eq!(bit == 0, lifted, "slice {slice}");
                if lifted {
                    base.add(slice * page).write(1); // faults if still a guard
                }
            }
            unguard_slices(&bits, base, page, 0, slices);
            assert!(bits.iter().all(|w| w.load(Ordering::Relaxed) == 0));
            os::release(base, slices * page);
        }
    }

    /// Every carved block goes on the list once (with its canary, on a page with
    /// them), and the order is not the carving order, yet consecutive blocks of the
    /// list stay in the same window or the next one.
    #[test]
    fn shuffle_is_a_permutation_within_windows() {
        let size = 32usize;
        let mut shuffled = 0;
        let mut seed = 0x1234_5678_9abc_def1u64;
        for count in [2usize, 3, 7, 8, 9, 64, 100, 1024, 2048] {
            for round in 0..20 {
                let mut memory = std::vec![0u64; count * size / 8];
                let first = memory.as_mut_ptr() as *mut u8;
                let mut page = Page::new();
                page.key = new_key() | KEY_SMALL_CANARY;
                page.small_canary = round % 2 == 0;
                page.block_size.store(size, Ordering::Relaxed);
                seed = splitmix(&mut seed);
                // SAFETY: `memory` holds the `count` blocks, ours.
                let head = unsafe {
                    if page.small_canary {
                        link_shuffled::<true>(&page, first, count, size, seed)
                    } else {
                        link_shuffled::<false>(&page, first, count, size, seed)
                    }
                };
                let mut order = std::vec::Vec::new();
                let mut block = head as usize;
                while block != 0 {
                    assert!(order.len() < count, "{count}: a cycle");
                    let index = (block - first as usize) / size;
                    order.push(index);
                    // SAFETY: a block of `memory`.
                    let (word, last) = unsafe {
                        let p = block as *const usize;
                        (p.read(), p.add(size / 8 - 1).read())
                    };
                    let canary = small_canary(page.key, block);
                    assert_eq!(last == canary, page.small_canary, "{count}: canary");
                    block = decode_unchecked(page.key, block, word);
                }
                let mut seen = std::vec![false; count];
                for &j in &order {
                    assert!(j < count && !seen[j], "{count}: {order:?}");
                    seen[j] = true;
                }
                assert_eq!(order.len(), count);
                let windows = count.div_ceil(SHUFFLE_WINDOW);
                for pair in order.windows(2) {
                    let (a, b) = (pair[0] / SHUFFLE_WINDOW, pair[1] / SHUFFLE_WINDOW);
                    assert!(a == b || b == (a + 1) % windows, "{count}: {order:?}");
                }
                shuffled += (order != (0..count).collect::<std::vec::Vec<_>>()) as u32;
            }
        }
        assert!(shuffled > 150, "random orders: {shuffled} of 180");
    }
}
