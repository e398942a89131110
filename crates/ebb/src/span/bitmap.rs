//! A fixed 512-bit bitmap: one bit per slice of a segment.
//!
//! Segments track which slices are free and which are committed with these. They are
//! only touched under the arena lock, so they are plain words.

pub const BITS: usize = 512;
const WORDS: usize = BITS / 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bitmap512 {
    words: [u64; WORDS],
}

impl Bitmap512 {
    /// No bit set.
    pub const EMPTY: Bitmap512 = Bitmap512 { words: [0; WORDS] };

    #[cfg(test)]
    pub const fn new() -> Self {
        Self { words: [0; WORDS] }
    }

    /// Bits `64 * w .. 64 * w + 64`, bit `i % 64` for bit `i`.
    #[inline]
    pub fn word(&self, w: usize) -> u64 {
        self.words[w]
    }

    #[inline]
    pub fn get(&self, i: usize) -> bool {
        debug_assert!(i < BITS);
        self.words[i / 64] & (1 << (i % 64)) != 0
    }

    /// Set (`value = true`) or clear bits `start..start + n`.
    pub fn assign_range(&mut self, start: usize, n: usize, value: bool) {
        debug_assert!(start + n <= BITS);
        let mut i = start;
        let end = start + n;
        while i < end {
            let bit = i % 64;
            let take = (64 - bit).min(end - i);
            let mask = if take == 64 {
                u64::MAX
            } else {
                ((1u64 << take) - 1) << bit
            };
            if value {
                self.words[i / 64] |= mask;
            } else {
                self.words[i / 64] &= !mask;
            }
            i += take;
        }
    }

    /// Keep only the bits also set in `other`.
    pub fn and_assign(&mut self, other: &Bitmap512) {
        for (w, o) in self.words.iter_mut().zip(other.words.iter()) {
            *w &= o;
        }
    }

    /// True if every bit in `start..start + n` equals `value`.
    pub fn all(&self, start: usize, n: usize, value: bool) -> bool {
        (start..start + n).all(|i| self.get(i) == value)
    }

    /// Number of set bits.
    #[cfg(test)]
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// First index `>= from` whose bit equals `value`, or `BITS`.
    pub fn next(&self, from: usize, value: bool) -> usize {
        let mut i = from;
        while i < BITS {
            let word = if value {
                self.words[i / 64]
            } else {
                !self.words[i / 64]
            };
            let masked = word & (u64::MAX << (i % 64));
            if masked != 0 {
                return (i & !63) + masked.trailing_zeros() as usize;
            }
            i = (i & !63) + 64;
        }
        BITS
    }

    /// Start of the first run of `n` set bits that begins at a multiple of `align`
    /// (a power of two) and at or after `from`.
    pub fn find_run(&self, n: usize, align: usize, from: usize) -> Option<usize> {
        debug_assert!(n > 0 && align.is_power_of_two());
        let mut start = self.next(from, true);
        loop {
            start = (start + align - 1) & !(align - 1);
            if start + n > BITS {
                return None;
            }
            if !self.get(start) {
                start = self.next(start, true);
                continue;
            }
            let gap = self.next(start, false);
            if gap >= start + n {
                return Some(start);
            }
            start = self.next(gap, true);
        }
    }

    /// Start of the first run of `n` bits set in `self` (aligned to nothing) that lies
    /// inside a run of at most `max_len` bits set in `outer` (a superset of `self`).
    pub fn find_run_in_short(&self, n: usize, outer: &Bitmap512, max_len: usize) -> Option<usize> {
        debug_assert!(n > 0 && n <= max_len);
        let mut start = outer.next(0, true);
        while start < BITS {
            let end = outer.next(start, false);
            if end - start <= max_len && end - start >= n {
                let mut i = self.next(start, true);
                while i + n <= end {
                    let gap = self.next(i, false).min(end);
                    if gap >= i + n {
                        return Some(i);
                    }
                    i = self.next(gap, true);
                }
            }
            if end >= BITS {
                break;
            }
            start = outer.next(end, true);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assign_and_count() {
        let mut b = Bitmap512::new();
        b.assign_range(3, 130, true);
        assert_eq!(b.count(), 130);
        assert!(b.all(3, 130, true));
        assert!(!b.get(2) && !b.get(133));
        b.assign_range(60, 10, false);
        assert_eq!(b.count(), 120);
        assert_eq!(b.next(0, true), 3);
        assert_eq!(b.next(60, true), 70);
        assert_eq!(b.next(3, false), 60);
        b.assign_range(0, 512, true);
        assert_eq!(b.count(), 512);
        assert_eq!(b.next(0, false), BITS);
    }

    #[test]
    fn find_runs() {
        let mut b = Bitmap512::new();
        assert_eq!(b.find_run(1, 1, 0), None);
        b.assign_range(1, 511, true);
        assert_eq!(b.find_run(1, 1, 0), Some(1));
        assert_eq!(b.find_run(8, 8, 0), Some(8));
        assert_eq!(b.find_run(511, 1, 0), Some(1));
        assert_eq!(b.find_run(512, 1, 0), None);
        b.assign_range(10, 1, false);
        assert_eq!(b.find_run(10, 1, 0), Some(11));
        assert_eq!(b.find_run(9, 1, 0), Some(1));
        assert_eq!(b.find_run(64, 64, 0), Some(64));
        b.assign_range(100, 1, false);
        assert_eq!(b.find_run(64, 64, 0), Some(128));
        assert_eq!(b.find_run(411, 1, 0), Some(101));
        assert_eq!(b.find_run(412, 1, 0), None);
    }

    #[test]
    fn find_run_matches_brute_force() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        for _ in 0..200 {
            let mut b = Bitmap512::new();
            for _ in 0..40 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let start = (seed % 512) as usize;
                let n = ((seed >> 20) % 40) as usize;
                b.assign_range(start, n.min(512 - start), (seed >> 40) & 1 == 1);
            }
            for n in [1, 2, 5, 8, 17, 64] {
                for align in [1, 2, 8, 64] {
                    let brute = (0..512)
                        .step_by(align)
                        .find(|&s| s + n <= 512 && b.all(s, n, true));
                    assert_eq!(b.find_run(n, align, 0), brute, "n {n} align {align}");
                }
            }
        }
    }

    #[test]
    fn find_run_in_short_matches_brute_force() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..200 {
            let mut outer = Bitmap512::new();
            for _ in 0..40 {
                let r = next();
                let start = (r % 512) as usize;
                let n = ((r >> 20) % 40) as usize;
                outer.assign_range(start, n.min(512 - start), (r >> 40) & 1 == 1);
            }
            let mut inner = outer;
            for _ in 0..20 {
                let r = next();
                let start = (r % 512) as usize;
                let n = ((r >> 20) % 6) as usize;
                inner.assign_range(start, n.min(512 - start), false);
            }
            // The outer run holding bit `i`, as (start, end).
            let run_of = |i: usize| {
                let mut s = i;
                while s > 0 && outer.get(s - 1) {
                    s -= 1;
                }
                (s, outer.next(i, false))
            };
            for n in [1, 2, 4] {
                for max_len in [4, 8, 16] {
                    let brute = (0..512).find(|&s| {
                        s + n <= 512 && inner.all(s, n, true) && {
                            let (rs, re) = run_of(s);
                            re - rs <= max_len && s + n <= re
                        }
                    });
                    assert_eq!(
                        inner.find_run_in_short(n, &outer, max_len),
                        brute,
                        "n {n} max_len {max_len}"
                    );
                }
            }
        }
    }
}
