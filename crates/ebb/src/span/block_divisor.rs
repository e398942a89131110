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
        let d = size as u64;
        // floor(2^64 / d) from floor((2^64 - 1) / d), one more when d divides 2^64.
        BlockDivisor {
            magic: u64::MAX / d + (u64::MAX % d == d - 1) as u64 + 1,
        }
    }

    /// `offset / size`.
    #[inline(always)]
    pub fn index(self, offset: usize) -> usize {
        debug_assert!(offset < Self::MAX_OFFSET);
        ((offset as u128 * self.magic as u128) >> 64) as usize
    }
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
}
