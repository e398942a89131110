//! Division by a page's block size without a division instruction, for walks that turn
//! each block's offset into its index.

/// Division by a page's block size without a division instruction: the hole walk
/// finds each free block's index from its offset, and a 32-bit `div` (26 cycles of
/// latency on this machine's cores) per block was a fifth of the walk's samples
/// (`bench/purge_walk.c` under perf).
///
/// `index(offset) = offset × magic / 2^64` with `magic = floor(2^64 / size) + 1`: with
/// `e = size × magic − 2^64` (`1 ≤ e ≤ size`), `offset × magic / 2^64 = offset / size
/// + offset × e / (size × 2^64)`, and the second term is below `2^-39 < 1 / size` for
/// offsets below 2^25 (a segment; pages of small blocks are at most 4 slices) and sizes
/// below 2^39, so the floor is `offset / size` exactly.
#[derive(Clone, Copy)]
pub struct BlockDivisor {
    magic: u64,
}

impl BlockDivisor {
    /// Offsets [`Self::index`] divides exactly: below this.
    pub const MAX_OFFSET: usize = 1 << 25;

    /// For blocks of `size` bytes (at least 2).
    pub fn new(size: usize) -> BlockDivisor {
        debug_assert!(size >= 2);
        BlockDivisor { magic: magic(size) }
    }

    /// `offset / size`.
    #[inline(always)]
    pub fn index(self, offset: usize) -> usize {
        debug_assert!(offset < Self::MAX_OFFSET);
        ((offset as u128 * self.magic as u128) >> 64) as usize
    }
}

/// `floor(2^64 / size) + 1`, the multiplier of [`BlockDivisor`] and
/// [`is_block_multiple`] (kept in each page descriptor: `Page::block_magic`).
pub const fn magic(size: usize) -> u64 {
    // floor(2^64 / d) from floor((2^64 - 1) / d), one more when d divides 2^64 (a
    // 64-bit division: a 128-bit one is a call to `__udivti3`).
    let d = size as u64;
    u64::MAX / d + (u64::MAX % d == d - 1) as u64 + 1
}

/// True if `offset` (a pointer less its page's start, wrapped) is a multiple of the
/// block size within a segment, `0 <= offset = j × size < 2^25`, for `magic =
/// magic(size)` and `size <= 2^25`: one multiply and one compare, where `offset % size`
/// is a 32-bit `div` (26 cycles of latency). `realloc` checks its pointer this way
/// (`c_api::ours`); with the `div`, it was 10% of `realloc`'s samples in `mstress`,
/// which grows vectors by `push`.
///
/// Why it holds: with `e = size × magic − 2^64` (`1 <= e <= size`), the product of
/// `j × size` is `j × e <= offset < 2^25`; that of `j × size + r` (`0 < r < size`) is
/// `j × e + r × magic >= magic >= 2^39`; that of a pointer up to 2^25 bytes before the
/// start wraps to at least `magic − 2^26 > 2^25`. (The secure build's
/// `secure::is_block_start` is the same test with the page's carved blocks as the
/// bound.)
// Used by the C ABI (`c-api` feature) outside the secure build, which checks against
// the carved blocks instead (`secure::is_block_start`).
#[cfg_attr(any(not(feature = "c-api"), feature = "secure"), allow(dead_code))]
#[inline(always)]
pub fn is_block_multiple(offset: usize, magic: u64) -> bool {
    (offset as u64).wrapping_mul(magic) < BlockDivisor::MAX_OFFSET as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::span::segment::SLICE_SIZE;

    #[test]
    fn block_divisor_divides_every_offset_of_a_page_exactly() {
        // Every class size, and sizes that are not classes (odd, powers of two), at
        // each block's first and last byte of the largest page of small blocks.
        let span = crate::size_class::SPREAD_PAGE_SLICES * SLICE_SIZE;
        let classes = (0..crate::size_class::CLASS_COUNT).map(crate::size_class::class_size);
        for size in classes.chain([2, 3, 7, 24, 100, 4095, 4097, 65536]) {
            let divisor = BlockDivisor::new(size);
            for j in 0..=span / size {
                for offset in [j * size, j * size + size - 1] {
                    assert_eq!(divisor.index(offset), offset / size, "{offset} / {size}");
                }
            }
        }
        // The largest offsets it is exact for.
        let last = BlockDivisor::MAX_OFFSET - 1;
        for size in [8, 48, 1040, 4480, 8192] {
            assert_eq!(BlockDivisor::new(size).index(last), last / size);
        }
    }

    /// [`is_block_multiple`] against the remainder, for offsets before and after the
    /// start, up to a segment either way, for class sizes and others.
    #[test]
    fn block_multiple_test_is_exact() {
        const SEGMENT: i64 = BlockDivisor::MAX_OFFSET as i64;
        let classes = (0..crate::size_class::CLASS_COUNT).map(crate::size_class::class_size);
        for size in classes.chain([2, 3, 7, 24, 100, 4095, 4097, 65536, 1 << 20, 1 << 25]) {
            let m = magic(size);
            assert_eq!(m, BlockDivisor::new(size).magic);
            let check = |offset: i64| {
                let expected = (0..SEGMENT).contains(&offset) && offset as usize % size == 0;
                assert_eq!(
                    is_block_multiple(offset as usize, m),
                    expected,
                    "offset {offset}, size {size}"
                );
            };
            for offset in -(1 << 12)..(1 << 12) {
                check(offset);
            }
            for offset in (-SEGMENT..=SEGMENT).step_by(4093) {
                check(offset);
            }
            for j in [1, 2, 3, SEGMENT / size as i64 - 1, SEGMENT / size as i64] {
                let at = j * size as i64;
                for offset in [at - 1, at, at + 1, -at - 1, -at, -at + 1] {
                    check(offset);
                }
            }
        }
    }
}
