//! Size classes: the mapping from a request size to the block size that serves it.
//!
//! Classes are multiples of 8 up to 128 bytes, then eight classes per power of two
//! (spacing `2^k / 8` inside `(2^k, 2^(k+1)]`), so rounding a request up to its class
//! wastes less than 1/8 (12.5%) of it above 64 bytes. The largest class is
//! [`MEDIUM_MAX`]; bigger blocks get a span of their own (see `arena.rs`) or, above
//! [`LARGE_MAX`], a mapping of their own (see `huge.rs`).
//!
//! **Fine classes.** From 1 KiB to 8 KiB ([`FINE_MIN_LOG2`], [`FINE_END_LOG2`]) two
//! more classes lie in the first step above each power of two: `2^k + 16` and
//! `2^k + 3 * 2^(k-5)` (1,040 and 1,120 below 1,152; 4,112 and 4,480 below 4,608). A
//! power of two plus a small header (a length prefix; a page-cache entry with its
//! header, sqlite's 1,032 and 4,368 B) is a common C request, and those lost up to
//! 12.5% to rounding (sqlite: 11 MiB at its peak, docs/REAL-PROGRAMS.md "Size classes
//! for a power of two plus a header"); the first catches headers of up to 16 bytes
//! exactly, the second halves the loss for headers of up to 3/32. Two, not four (every
//! 2^(k-5)): a class in use keeps a partly used page in every heap, and four cost a
//! scenario of 8 threads allocating 64 B-8 KiB at random twice as much (+5 MiB of
//! 195). Above 8 KiB a class's pages are 512 KiB, and a heap keeps a churned class's
//! empty page (`front/empty_pages.rs`): more classes there would cost more pages than
//! the rounding they save.
//!
//! Invariants (const-asserted below): class sizes increase; every power of two from 16
//! to `MEDIUM_MAX` is a class, which is what lets [`class_for_aligned`] always find a
//! class whose blocks are aligned; every class above 128 bytes is a multiple of 16 (C
//! requests, 16-byte aligned) and of [`MID_STEP`] above `SMALL_MAX` (so [`MID_CLASS`]
//! is exact); the class of every size fits a `u8`.

/// Smallest block size class: one pointer, enough to thread the free list through.
pub const MIN_BLOCK: usize = 8;
/// Smallest block handed out by malloc: the link and the freed key (`front::freed_key`).
pub const MIN_ALLOC_BLOCK: usize = 16;
/// Requests up to this size find their class in the heap's per-size tables
/// (`Heap::small_class`, built by [`small_classes`]), indexed by the size itself.
pub const SMALL_MAX: usize = 1024;
/// Requests in `(SMALL_MAX, MID_MAX]` find their class in [`MID_CLASS`], one entry per
/// [`MID_STEP`] bytes: no class boundary in that range falls between two multiples of it.
pub const MID_MAX: usize = 64 * 1024;
/// `log2` of the granularity of [`MID_CLASS`]: 16 bytes, the spacing of the fine
/// classes (`2^k + 16`), so the table tells 1,040 from 1,056.
pub const MID_SHIFT: u32 = 4;
/// Bytes per entry of [`MID_CLASS`].
pub const MID_STEP: usize = 1 << MID_SHIFT;
/// Entries of [`MID_CLASS`].
pub const MID_COUNT: usize = MID_MAX / MID_STEP;
/// The largest block size served from multi-block pages.
pub const MEDIUM_MAX: usize = 512 * 1024;
/// The largest block served from a span inside a segment; above it blocks are huge.
pub const LARGE_MAX: usize = 16 * 1024 * 1024;

/// Classes `0..16` are 8..=128 in steps of 8; then 8 per doubling up to `MEDIUM_MAX`,
/// with [`FINE_PER_DOUBLING`] more in each doubling from `2^FINE_MIN_LOG2`.
const LINEAR_CLASSES: usize = 16;
const LINEAR_MAX: usize = 128;
const LINEAR_MAX_LOG2: u32 = 7;
const MEDIUM_MAX_LOG2: u32 = 19;
/// The doublings `(2^k, 2^(k+1)]` with fine classes: `FINE_MIN_LOG2 <= k < FINE_END_LOG2`.
pub const FINE_MIN_LOG2: u32 = 10;
/// See [`FINE_MIN_LOG2`]: up to 8 KiB, the blocks of one-slice pages.
pub const FINE_END_LOG2: u32 = 13;
/// Fine classes below `2^k + 2^(k-3)` in each such doubling.
const FINE_PER_DOUBLING: usize = 2;
const FINE_DOUBLINGS: usize = (FINE_END_LOG2 - FINE_MIN_LOG2) as usize;
/// Number of size classes.
pub const CLASS_COUNT: usize = LINEAR_CLASSES
    + 8 * (MEDIUM_MAX_LOG2 - LINEAR_MAX_LOG2) as usize
    + FINE_PER_DOUBLING * FINE_DOUBLINGS;

/// The fine classes of doubling `k` (`FINE_MIN_LOG2 <= k < FINE_END_LOG2`), increasing,
/// all below its first regular class `2^k + 2^(k-3)`.
const fn fine_classes(k: u32) -> [usize; FINE_PER_DOUBLING] {
    let (p, step) = (1usize << k, 1usize << (k - 5));
    [p + 16, p + 3 * step]
}

const fn class_sizes() -> [u32; CLASS_COUNT] {
    let mut sizes = [0u32; CLASS_COUNT];
    let mut n = 0;
    while n < LINEAR_CLASSES {
        sizes[n] = ((n + 1) * 8) as u32;
        n += 1;
    }
    let mut k = LINEAR_MAX_LOG2;
    while k < MEDIUM_MAX_LOG2 {
        if k >= FINE_MIN_LOG2 && k < FINE_END_LOG2 {
            let fine = fine_classes(k);
            let mut i = 0;
            while i < FINE_PER_DOUBLING {
                sizes[n] = fine[i] as u32;
                n += 1;
                i += 1;
            }
        }
        let mut j = 1;
        while j <= 8 {
            sizes[n] = ((1usize << k) + (j << (k - 3))) as u32;
            n += 1;
            j += 1;
        }
        k += 1;
    }
    assert!(n == CLASS_COUNT);
    sizes
}

/// `CLASS_SIZE[class]` is the block size of `class`.
const CLASS_SIZE: [u32; CLASS_COUNT] = class_sizes();

// The invariants of the module doc, checked at compile time.
const _: () = {
    let sizes = class_sizes();
    assert!(CLASS_COUNT <= u8::MAX as usize);
    assert!(sizes[CLASS_COUNT - 1] as usize == MEDIUM_MAX);
    let mut c = 0;
    while c < CLASS_COUNT {
        let s = sizes[c] as usize;
        assert!(c == 0 || s > sizes[c - 1] as usize);
        assert!(s <= LINEAR_MAX || s % 16 == 0);
        assert!(s <= SMALL_MAX || s % MID_STEP == 0);
        c += 1;
    }
    let mut p = MIN_ALLOC_BLOCK;
    while p <= MEDIUM_MAX {
        assert!(sizes[class_of(p)] as usize == p);
        p *= 2;
    }
};

/// The class serving `size` bytes (`size <= MEDIUM_MAX`); size 0 maps to the smallest.
#[inline(always)]
pub const fn class_of(size: usize) -> usize {
    core::debug_assert!(size <= MEDIUM_MAX);
    if size <= LINEAR_MAX {
        if size == 0 {
            0
        } else {
            size.div_ceil(8) - 1
        }
    } else {
        // size lies in (2^k, 2^(k+1)]; step is 2^(k-3).
        let k = (usize::BITS - 1 - (size - 1).leading_zeros()) as usize;
        let shift = k - 3;
        let j = (size - 1 - (1 << k)) >> shift; // 0..8
        let regular = LINEAR_CLASSES + (k - LINEAR_MAX_LOG2 as usize) * 8 + j;
        if k >= FINE_END_LOG2 as usize {
            // (Above the fine doublings: a constant offset, no table, so the path of
            // blocks above `MID_MAX` in `malloc` stays as short as before.)
            regular + FINE_PER_DOUBLING * FINE_DOUBLINGS
        } else if k < FINE_MIN_LOG2 as usize {
            regular
        } else {
            let before = FINE_PER_DOUBLING * (k + 1 - FINE_MIN_LOG2 as usize);
            let mut class = regular + before;
            if j == 0 {
                // The first step: the smallest fine class that holds it, if any.
                let fine = fine_classes(k as u32);
                let mut i = FINE_PER_DOUBLING;
                while i > 0 && fine[i - 1] >= size {
                    i -= 1;
                    class -= 1;
                }
            }
            class
        }
    }
}

/// Block size of class `class`.
#[inline]
pub const fn class_size(class: usize) -> usize {
    core::debug_assert!(class < CLASS_COUNT);
    CLASS_SIZE[class] as usize
}

/// Number of 64 KiB slices in a page of this class: enough that the page holds at
/// least 8 blocks, so the unusable tail of a page stays under 1/8 of it, and at least 32
/// blocks of up to 8 KiB (`UPPER_SMALL_PAGE_SLICES`).
///
/// Blocks above `MEDIUM_PAGE_BLOCK_MAX` get just the slices 8 blocks need (9 to 64),
/// not 64 each: a heap keeps the only page of a class when it empties, and python3
/// starting up leaves one block in each of eight classes of 66-208 KiB, which took
/// eight 4 MiB pages (address space, which `ulimit -v` counts: a second segment).
#[inline]
pub const fn page_slices(class: usize) -> usize {
    let size = class_size(class);
    if size <= ONE_SLICE_BLOCK_MAX {
        1
    } else if size <= SMALL_PAGE_BLOCK_MAX {
        UPPER_SMALL_PAGE_SLICES
    } else if size <= MEDIUM_PAGE_BLOCK_MAX {
        8
    } else {
        (8 * size).div_ceil(SLICE_BYTES)
    }
}

/// Bytes of a slice, the arena's unit (`span::segment::SLICE_SIZE`, asserted equal
/// there): kept here so the size classes do not import the span layer that uses them.
pub const SLICE_BYTES: usize = 64 * 1024;

/// Slices of the pages a class of one-slice pages takes once its blocks turn out to be
/// replaced at random (`front::spread::count_refill`): 256 KiB. Measured against 8
/// slices (c-alloctest: L1 data misses within 2% of each other), 8 kept more memory
/// waiting where threads free each other's blocks before the heap knows it
/// (`Heap::took_remote_frees`; larson +10% peak RSS, 4 slices +1-3%).
pub const SPREAD_PAGE_SLICES: usize = 4;
// The blocks of such a page fit a `thread_free` length (16 bits).
const _: () = assert!(SPREAD_PAGE_SLICES * SLICE_BYTES / MIN_BLOCK < 0xffff);

/// The largest small block: pages of blocks up to here give back their free OS pages
/// as holes (`span::holes`), bigger blocks are purged inside block by block.
pub const SMALL_PAGE_BLOCK_MAX: usize = 8 * 1024;
/// The largest block of a 1-slice (64 KiB) page: 16 blocks fit.
pub const ONE_SLICE_BLOCK_MAX: usize = 4 * 1024;
/// Slices of a page of blocks above `ONE_SLICE_BLOCK_MAX` up to `SMALL_PAGE_BLOCK_MAX`:
/// 256 KiB, 32 to 58 blocks, where a 64 KiB page held 8 to 14.
///
/// Why: a page that fills goes through a heap's slow path, and one beyond the few full
/// pages a heap keeps (`front::slow::FULL_PAGE_SLICES_KEPT`) is abandoned; with threads
/// handing buffers to each other, such a page comes back (listed with the blocks other
/// threads freed into it, or taken back by its owner's free), gives out those few
/// blocks and is abandoned again. With 8-14 blocks a page that happened every few
/// mallocs of these classes: in the `mixed-c` scenario (8 threads) 89% of the 175 K
/// pages abandoned per run were pages of 4-8 KiB blocks. With 4 slices, `c-handoff`
/// (bench/speed/c/handoff.c, the same shape) abandons 53 K pages instead of 161 K, at
/// 0.84-0.86 x the CPU and +2-4% peak RSS (`mixed-c` after 50 rounds +4%); 2 slices:
/// CPU 0.92 x, RSS +0.8% (docs/BENCHMARKS.md, "Pages of 4-8 KiB blocks").
pub const UPPER_SMALL_PAGE_SLICES: usize = 4;
// Such a page's blocks fit a `thread_free` length (16 bits), and a page of them is
// never bigger than the pages of a class replaced at random (`span::holes::units`).
const _: () = assert!(UPPER_SMALL_PAGE_SLICES <= SPREAD_PAGE_SLICES);
/// The largest block of an 8-slice (512 KiB) page; bigger ones get 64 slices (4 MiB).
pub const MEDIUM_PAGE_BLOCK_MAX: usize = 64 * 1024;

/// The class for `size` bytes aligned to `align` (a power of two, at most one slice),
/// whose blocks all start on an `align` boundary because the block size is a multiple
/// of it and pages start on slice boundaries. `None` if no class is big enough.
#[inline]
pub fn class_for_aligned(size: usize, align: usize) -> Option<usize> {
    debug_assert!(align.is_power_of_two());
    let size = size.max(align).checked_add(align - 1)? & !(align - 1);
    if size > MEDIUM_MAX {
        return None;
    }
    let mut class = class_of(size);
    // Terminates: the next power of two >= size is a class and a multiple of align.
    while class_size(class) % align != 0 {
        class += 1;
    }
    Some(class)
}

const fn mid_classes() -> [u8; MID_COUNT] {
    let mut table = [0u8; MID_COUNT];
    let mut i = SMALL_MAX / MID_STEP;
    while i < MID_COUNT {
        table[i] = class_of(i * MID_STEP + 1) as u8;
        i += 1;
    }
    table
}

/// `MID_CLASS[(size - 1) >> MID_SHIFT]` is the class of a request of `size` in
/// `(SMALL_MAX, MID_MAX]`: one load instead of the arithmetic of [`class_of`]. Every
/// class there is a multiple of [`MID_STEP`] (16), so C requests (16-byte alignment)
/// use it as is. (4 KiB, read-only; one 64-byte line covers 1 KiB of sizes.)
pub static MID_CLASS: [u8; MID_COUNT] = mid_classes();

/// The class for a C request: requests above 8 bytes get a 16-byte multiple, so the
/// block is 16-byte aligned as glibc guarantees.
pub const fn c_class_of(size: usize) -> usize {
    if size <= 8 {
        0
    } else {
        class_of((size + 15) & !15)
    }
}

/// Entries of the per-size class tables (`0..=SMALL_MAX`).
pub const SMALL_COUNT: usize = SMALL_MAX + 1;

/// `class_of(size)` (`c`: `c_class_of(size)`) for every `size <= SMALL_MAX`, one byte
/// per size: each heap keeps a copy (see `Heap::small_class`), so the malloc fast path
/// finds the class with one load indexed by the size itself, with no rounding.
///
/// Requests of up to 8 bytes get [`MIN_ALLOC_BLOCK`]-byte blocks, not 8-byte ones: a
/// freed block keeps a key in its second word (`front::freed_key`).
pub const fn small_classes(c: bool) -> [u8; SMALL_COUNT] {
    let mut table = [0u8; SMALL_COUNT];
    let mut size = 0;
    while size < SMALL_COUNT {
        table[size] = if size <= MIN_ALLOC_BLOCK {
            class_of(MIN_ALLOC_BLOCK)
        } else if c {
            c_class_of(size)
        } else {
            class_of(size)
        } as u8;
        size += 1;
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_tables_match_class_of() {
        let (rust, c) = (small_classes(false), small_classes(true));
        for size in 0..=SMALL_MAX {
            if size <= MIN_ALLOC_BLOCK {
                assert_eq!(class_size(rust[size] as usize), MIN_ALLOC_BLOCK);
                assert_eq!(class_size(c[size] as usize), MIN_ALLOC_BLOCK);
                continue;
            }
            assert_eq!(rust[size] as usize, class_of(size), "size {size}");
            assert_eq!(c[size] as usize, c_class_of(size), "C size {size}");
            assert!(class_size(c[size] as usize) >= size);
            if size > 8 {
                assert_eq!(class_size(c[size] as usize) % 16, 0);
            }
        }
    }

    #[test]
    fn mid_table_matches_class_of() {
        for size in SMALL_MAX + 1..=MID_MAX {
            let class = MID_CLASS[(size - 1) >> MID_SHIFT] as usize;
            assert_eq!(class, class_of(size), "size {size}");
            assert_eq!(class, c_class_of(size), "C size {size}");
            assert_eq!(class_size(class) % 16, 0);
        }
    }

    #[test]
    fn class_sizes_increase_and_fit() {
        let mut prev = 0;
        for c in 0..CLASS_COUNT {
            let s = class_size(c);
            assert!(s > prev, "class {c}");
            assert_eq!(class_of(s), c, "round trip of class {c} size {s}");
            assert_eq!(class_of(prev + 1), c, "first size of class {c}");
            prev = s;
        }
        assert_eq!(class_size(CLASS_COUNT - 1), MEDIUM_MAX);
    }

    #[test]
    fn every_size_fits_with_bounded_waste() {
        for size in 1..=MEDIUM_MAX {
            let c = class_of(size);
            let s = class_size(c);
            assert!(s >= size);
            if c > 0 {
                assert!(
                    class_size(c - 1) < size,
                    "size {size} not in smallest class"
                );
            }
            if size > 64 {
                // waste strictly below 1/8 of the request
                assert!((s - size) * 8 < size, "size {size} -> {s}");
            }
        }
    }

    #[test]
    fn sixteen_byte_multiples_get_sixteen_byte_classes() {
        for size in (16..=MEDIUM_MAX).step_by(16) {
            assert_eq!(class_size(class_of(size)) % 16, 0, "{size}");
        }
    }

    /// A power of two plus a small header (1 KiB to 8 KiB) gets a fine class, not the
    /// one an eighth above the power of two: sqlite's 1,032 and 4,368 B page-cache
    /// entries, 8-byte length prefixes. Above 8 KiB the regular classes serve.
    #[test]
    fn a_power_of_two_plus_a_header_gets_a_fine_class() {
        for (request, block) in [
            (1024 + 8, 1040),
            (1024 + 16, 1040),
            (1024 + 24, 1120),
            (1024 + 100, 1152),
            (2048 + 8, 2064),
            (2048 + 64, 2240),
            (4096 + 8, 4112),
            (4096 + 272, 4480),
            (4096 + 400, 4608),
            (8192 + 8, 9216),
        ] {
            assert_eq!(
                class_size(c_class_of(request)),
                block,
                "C request {request}"
            );
            assert_eq!(class_size(class_of(request)), block, "request {request}");
            assert_eq!(
                class_size(MID_CLASS[(request - 1) >> MID_SHIFT] as usize),
                block
            );
        }
        // The powers of two themselves keep their class.
        for k in 10..=13 {
            assert_eq!(class_size(class_of(1 << k)), 1 << k);
        }
    }

    #[test]
    fn every_class_and_alignment_finds_an_aligned_class() {
        for c in 0..CLASS_COUNT {
            let size = class_size(c);
            let mut align = 1;
            while align <= SLICE_BYTES {
                let a = class_for_aligned(size, align);
                if size.next_multiple_of(align) <= MEDIUM_MAX {
                    let a = a.expect("a class");
                    assert_eq!(class_size(a) % align, 0, "size {size} align {align}");
                    assert!(class_size(a) >= size);
                    // The smallest such class: no smaller one is aligned and big enough.
                    assert!((c..a).all(|b| class_size(b) % align != 0));
                }
                align *= 2;
            }
        }
    }

    #[test]
    fn aligned_classes_are_aligned() {
        let mut align = 1;
        while align <= 64 * 1024 {
            for size in [1, 7, 8, 24, 100, 1000, 1025, 5000, 70_000, 300_000] {
                if let Some(c) = class_for_aligned(size, align) {
                    assert_eq!(class_size(c) % align, 0);
                    assert!(class_size(c) >= size);
                }
            }
            align *= 2;
        }
    }

    #[test]
    fn pages_hold_eight_blocks() {
        for c in 0..CLASS_COUNT {
            assert!(page_slices(c) * 64 * 1024 / class_size(c) >= 8, "class {c}");
        }
    }
}
