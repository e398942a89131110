//! The bookkeeping of freed huge memory kept for reuse (`huge.rs` does the system
//! calls): a few pieces of address space whose pages were touched, so a huge request
//! built out of them faults in nothing.
//!
//! A freed huge mapping enters whole as a *segment* piece: it starts on a 32 MiB
//! boundary, keeps its header with the block's descriptor `FREE`, and the segment map
//! still leads its windows to it, so a stale `free` is reported. A request takes the
//! smallest segment piece that holds it (with no system call; what it leaves over
//! stays as a *raw* piece: no header, its windows forgotten), else the largest segment
//! piece is grown in place (or moved into a new mapping) and pages are moved with
//! `mremap` out of other pieces behind it (no copy, no fault): any
//! kept page is worth as much as any other, which is what makes a program that
//! replaces 5-25 MiB buffers at random fault in about its peak once and then nothing.
//! Adjacent pieces merge where the lower one is a segment piece.
//!
//! **Kept only where reused** ([`Demand`]): a freed mapping enters the pool only while
//! huge requests have recently followed huge frees (a request served from kept pages,
//! or one that came within the purge delay of a mapping given back). Otherwise it is
//! unmapped at once, as glibc does: a program that frees its one big input buffer and
//! goes on with small blocks (python's `json.load` of a 28 MiB file) does not carry it
//! for the purge delay, which showed in its peak RSS.
//!
//! **Kept as long as reuse takes** ([`Demand::hold`]): a kept piece goes back twice
//! the longest gap between a huge free and the huge request after it that the
//! remembered signs showed, at least a retention period (`retain::period_ms`), at most
//! the purge delay. sqlite freed a 16 MiB sorter buffer 71 ms before it asked for
//! another, then freed that one and asked for none for 2.9 s: kept for the whole delay,
//! it was resident through the program's peak (+11.5 MiB, 1.55 s in); kept 142 ms, it
//! is gone well before it. A program that replaces big buffers every few ms keeps them
//! as before; one that replaces them every 300 ms keeps them 600 ms.
//!
//! Everything here is plain arithmetic on `(base, len)` records, unit-tested below.

/// Pieces kept at most. Leftovers and shortened pieces take slots: with 16, a program
/// replacing 5-25 MiB buffers at random ran short of slots at ~100 MiB kept and gave
/// back pieces it faulted in again (`c-huge` at scale 0.5: 110,700 faults; 105,600
/// with 32). The pool is scanned under its lock on huge paths only.
pub const POOL_SLOTS: usize = 32;
/// Bytes kept at most (and the largest mapping kept), each for at most the purge delay
/// (a program that doubles a buffer to 256 MiB, frees it and does it again faults the
/// second one in from kept pages).
pub const POOL_MAX_BYTES: usize = 256 << 20;

/// How long (in purge delays) a sign of huge reuse keeps freed mappings kept.
pub const DEMAND_REMEMBERED_DELAYS: u64 = 2;

/// Whether freed huge memory is worth keeping: the time of the last mapping given back
/// at free, and until when reuse is remembered (times in ms, `deadline::coarse_now_ms`).
///
/// A sign of reuse is a huge request (a new block, or one grown) that kept pages served,
/// or one that came within the purge delay of a mapping given back at free (a miss:
/// keeping it would have served the request). Each sign keeps freed mappings kept for
/// [`DEMAND_REMEMBERED_DELAYS`] purge delays; with none, a freed mapping is unmapped at
/// once. A program that replaces big buffers so faults in one extra buffer (the first
/// one freed goes back), then keeps as before; one that frees a big buffer once keeps
/// nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Demand {
    released_at: Option<u64>,
    remembered_until: u64,
    /// When the last huge mapping was freed (kept or given back).
    freed_at: Option<u64>,
    /// The longest free-to-request gap among the signs remembered (ms).
    gap: u64,
}

/// A kept piece stays this many times the longest free-to-request gap seen.
pub const HOLD_GAPS: u64 = 2;

impl Default for Demand {
    fn default() -> Self {
        Self::new()
    }
}

impl Demand {
    pub const fn new() -> Demand {
        Demand {
            released_at: None,
            remembered_until: 0,
            freed_at: None,
            gap: 0,
        }
    }

    /// A huge request at `now`; `served`: kept pages went into it.
    pub fn requested(&mut self, now: u64, delay: u64, served: bool) {
        let follows_release = self
            .released_at
            .is_some_and(|at| now.saturating_sub(at) < delay);
        if served || follows_release {
            let gap = self
                .freed_at
                .map_or(delay, |at| now.saturating_sub(at))
                .min(delay);
            // Signs still remembered keep their longest gap; a fresh start forgets it.
            self.gap = if now < self.remembered_until {
                self.gap.max(gap)
            } else {
                gap
            };
            let until = now.saturating_add(delay.saturating_mul(DEMAND_REMEMBERED_DELAYS));
            self.remembered_until = self.remembered_until.max(until);
        }
    }

    /// A huge mapping was freed at `now` (kept or not).
    pub fn freed(&mut self, now: u64) {
        self.freed_at = Some(now);
    }

    /// How long (ms) a kept piece stays: [`HOLD_GAPS`] times the longest gap between a
    /// free and the request after it, at least a retention period, at most `delay`.
    pub fn hold(&self, delay: u64) -> u64 {
        let floor = crate::span::retain::period_ms(delay).min(delay);
        self.gap.saturating_mul(HOLD_GAPS).clamp(floor, delay)
    }

    /// Whether a mapping freed at `now` is kept.
    pub fn keeps(&self, now: u64) -> bool {
        now < self.remembered_until
    }

    /// A freed mapping was given back at once at `now`.
    pub fn released(&mut self, now: u64) {
        self.released_at = Some(now);
    }
}

/// A kept range `[base, base + len)` of touched huge memory (`base == 0`: an empty
/// slot). `segment`: it starts with a huge segment's header and the segment map leads
/// its windows to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub base: usize,
    pub len: usize,
    pub freed_at: u64,
    pub segment: bool,
}

impl Piece {
    pub const EMPTY: Piece = Piece {
        base: 0,
        len: 0,
        freed_at: 0,
        segment: false,
    };

    pub fn end(&self) -> usize {
        self.base + self.len
    }

    fn is_empty(&self) -> bool {
        self.base == 0
    }
}

/// The kept pieces.
pub struct Pool {
    pub pieces: [Piece; POOL_SLOTS],
    /// Whether freed mappings are kept at all.
    pub demand: Demand,
}

impl Default for Pool {
    fn default() -> Self {
        Self::new()
    }
}

impl Pool {
    pub const fn new() -> Pool {
        Pool {
            pieces: [Piece::EMPTY; POOL_SLOTS],
            demand: Demand::new(),
        }
    }

    /// Bytes kept.
    pub fn total(&self) -> usize {
        self.pieces.iter().map(|p| p.len).sum()
    }

    /// Index of the smallest segment piece at a base aligned to `align` that holds
    /// `needed` bytes.
    pub fn fit(&self, needed: usize, align: usize) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (i, p) in self.pieces.iter().enumerate() {
            if p.is_empty() || !p.segment || p.base % align != 0 || p.len < needed {
                continue;
            }
            if best.map_or(true, |b| p.len < self.pieces[b].len) {
                best = Some(i);
            }
        }
        best
    }

    /// Index of the largest piece, a segment piece at a base aligned to `align` only
    /// if `anchor` (it then heads the new mapping, header and all).
    pub fn largest(&self, anchor: Option<usize>) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (i, p) in self.pieces.iter().enumerate() {
            if p.is_empty() || anchor.is_some_and(|a| !p.segment || p.base % a != 0) {
                continue;
            }
            if best.map_or(true, |b| p.len > self.pieces[b].len) {
                best = Some(i);
            }
        }
        best
    }

    /// Take the first `len` bytes of piece `index` (a segment piece: it heads a block);
    /// what is left stays as a raw piece. Returns the piece as it was.
    pub fn take_head(&mut self, index: usize, len: usize) -> Piece {
        let p = self.pieces[index];
        debug_assert!(len <= p.len);
        self.pieces[index] = if len == p.len {
            Piece::EMPTY
        } else {
            Piece {
                base: p.base + len,
                len: p.len - len,
                freed_at: p.freed_at,
                segment: false,
            }
        };
        p
    }

    /// Take the last `len` bytes of piece `index` (all of it if `len` is its length).
    /// Returns the piece as it was.
    pub fn take_tail(&mut self, index: usize, len: usize) -> Piece {
        let p = self.pieces[index];
        debug_assert!(len <= p.len);
        if len == p.len {
            self.pieces[index] = Piece::EMPTY;
        } else {
            self.pieces[index].len -= len;
        }
        p
    }

    /// Keep a freed huge mapping `[base, base + len)` as a segment piece, merged with a
    /// piece that starts at its end and into a segment piece that ends at its start.
    /// Returns the piece it ended in (the caller leads the segment map's windows of the
    /// piece to the piece's base). The caller makes room first (`evict`).
    pub fn insert(&mut self, base: usize, len: usize, now: u64) -> Piece {
        let mut merged = Piece {
            base,
            len,
            freed_at: now,
            segment: true,
        };
        if let Some(i) = self
            .pieces
            .iter()
            .position(|p| !p.is_empty() && p.base == merged.end())
        {
            merged.len += self.pieces[i].len;
            self.pieces[i] = Piece::EMPTY;
        }
        if let Some(i) = self
            .pieces
            .iter()
            .position(|p| !p.is_empty() && p.segment && p.end() == merged.base)
        {
            let lower = &mut self.pieces[i];
            lower.len += merged.len;
            lower.freed_at = now;
            return *lower;
        }
        let slot = self
            .pieces
            .iter()
            .position(|p| p.is_empty())
            .expect("the caller made room");
        self.pieces[slot] = merged;
        merged
    }

    /// Take out a piece while fewer than `free_slots` slots are empty or more than
    /// `max_bytes - incoming` bytes are kept; returns them one at a time (None: there
    /// is room). Over the bytes, the oldest goes; short of a slot only, the smallest
    /// (the oldest of equals).
    ///
    /// Slots run short long before bytes do where blocks are replaced at random: takes
    /// leave leftovers and moves leave shortened pieces, so 16 slots fill at ~100 MiB
    /// kept. Giving back the oldest then gave back a whole freed block (8-15 MiB) that
    /// the next request had to fault in again (62 MiB of a 405 MiB peak re-faulted, at
    /// scale 0.5 of `c-huge`); the smallest is a leftover of a few slices.
    pub fn evict(&mut self, free_slots: usize, max_bytes: usize, incoming: usize) -> Option<Piece> {
        let empty = self.pieces.iter().filter(|p| p.is_empty()).count();
        let over_bytes = self.total() + incoming > max_bytes;
        if empty >= free_slots && !over_bytes {
            return None;
        }
        let kept = (0..POOL_SLOTS).filter(|&i| !self.pieces[i].is_empty());
        let pick = if over_bytes {
            kept.min_by_key(|&i| self.pieces[i].freed_at)
        } else {
            kept.min_by_key(|&i| (self.pieces[i].len, self.pieces[i].freed_at))
        }?;
        Some(core::mem::replace(&mut self.pieces[pick], Piece::EMPTY))
    }

    /// Take out a piece whose hold ([`Demand::hold`]) has passed (any piece if `force`).
    pub fn take_due(&mut self, now: u64, delay: u64, force: bool) -> Option<Piece> {
        let hold = self.demand.hold(delay);
        let i = self
            .pieces
            .iter()
            .position(|p| !p.is_empty() && (force || p.freed_at + hold <= now))?;
        Some(core::mem::replace(&mut self.pieces[i], Piece::EMPTY))
    }

    /// When the next kept piece becomes due (`u64::MAX`: none kept).
    pub fn next_due(&self, delay: u64) -> u64 {
        let hold = self.demand.hold(delay);
        self.pieces
            .iter()
            .filter(|p| !p.is_empty())
            .map(|p| p.freed_at + hold)
            .min()
            .unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: usize = 1 << 20;
    const W: usize = 32 * M;

    fn pool(pieces: &[(usize, usize, bool)]) -> Pool {
        let mut pool = Pool::new();
        for (i, &(base, len, segment)) in pieces.iter().enumerate() {
            pool.pieces[i] = Piece {
                base,
                len,
                freed_at: i as u64,
                segment,
            };
        }
        pool
    }

    #[test]
    fn fit_takes_the_smallest_aligned_segment_piece_that_holds() {
        let p = pool(&[
            (W, 40 * M, true),
            (3 * W, 24 * M, true),
            (5 * W + M, 20 * M, false),
        ]);
        assert_eq!(p.fit(20 * M, W), Some(1));
        assert_eq!(p.fit(30 * M, W), Some(0));
        assert_eq!(p.fit(50 * M, W), None);
        assert_eq!(p.fit(20 * M, 2 * W), None, "no base is 64 MiB-aligned");
        // A raw piece never heads a block, however well it fits.
        let raw_only = pool(&[(W, 40 * M, false)]);
        assert_eq!(raw_only.fit(20 * M, W), None);
    }

    #[test]
    fn largest_picks_an_anchor_or_any_piece() {
        let p = pool(&[
            (W, 10 * M, true),
            (3 * W + M, 30 * M, false),
            (5 * W, 20 * M, true),
        ]);
        assert_eq!(p.largest(Some(W)), Some(2));
        assert_eq!(p.largest(None), Some(1));
        assert_eq!(Pool::new().largest(None), None);
    }

    #[test]
    fn heads_leave_raw_pieces_and_tails_shrink_pieces() {
        let mut p = pool(&[(W, 40 * M, true)]);
        p.take_head(0, 16 * M);
        assert_eq!(
            (p.pieces[0].base, p.pieces[0].len, p.pieces[0].segment),
            (W + 16 * M, 24 * M, false)
        );
        p.take_tail(0, 4 * M);
        assert_eq!((p.pieces[0].base, p.pieces[0].len), (W + 16 * M, 20 * M));
        p.take_tail(0, 20 * M);
        assert!(p.pieces[0].is_empty());
        assert_eq!(p.total(), 0);
    }

    #[test]
    fn insert_merges_with_neighbours() {
        // A block freed right before the raw piece it left over takes it back.
        let mut p = pool(&[(W + 16 * M, 24 * M, false)]);
        let merged = p.insert(W, 16 * M, 9);
        assert_eq!((merged.base, merged.len, merged.segment), (W, 40 * M, true));
        assert_eq!(p.total(), 40 * M);
        assert_eq!(p.pieces.iter().filter(|x| !x.is_empty()).count(), 1);
        // A segment piece ending where a freed mapping starts takes it in.
        let mut p = pool(&[(W, 34 * M, true)]);
        let merged = p.insert(W + 34 * M, 30 * M, 9);
        assert_eq!((merged.base, merged.len, merged.freed_at), (W, 64 * M, 9));
        // A raw piece below stays apart (the freed mapping keeps its header's role).
        let mut p = pool(&[(W - 8 * M, 8 * M, false)]);
        let merged = p.insert(W, 16 * M, 9);
        assert_eq!((merged.base, merged.len), (W, 16 * M));
        assert_eq!(p.total(), 24 * M);
    }

    #[test]
    fn evict_takes_the_oldest_until_there_is_room() {
        let mut p = pool(&[
            (W, 60 * M, true),
            (3 * W, 50 * M, true),
            (5 * W, 10 * M, true),
        ]);
        assert_eq!(p.evict(1, 128 * M, 8 * M), None);
        assert_eq!(p.evict(1, 128 * M, 20 * M).map(|x| x.base), Some(W));
        assert_eq!(p.evict(1, 128 * M, 20 * M), None);
        let mut full = Pool::new();
        for i in 0..POOL_SLOTS {
            full.pieces[i] = Piece {
                base: (i + 1) * W,
                len: M,
                freed_at: 100 - i as u64,
                segment: true,
            };
        }
        assert_eq!(
            full.evict(1, 128 * M, M).map(|x| x.base),
            Some(POOL_SLOTS * W)
        );
        assert_eq!(full.evict(1, 128 * M, M), None);
    }

    #[test]
    fn short_of_slots_only_the_smallest_piece_goes() {
        // Every slot taken, far under the byte cap: a freed block needs a slot only.
        let mut full = Pool::new();
        for i in 0..POOL_SLOTS {
            full.pieces[i] = Piece {
                base: (i + 1) * W,
                len: if i == 5 { M / 4 } else { 4 * M },
                freed_at: 100 + i as u64,
                segment: true,
            };
        }
        let evicted = full.evict(1, POOL_MAX_BYTES, 16 * M);
        assert_eq!(
            evicted.map(|x| x.len),
            Some(M / 4),
            "the oldest whole block went instead of a leftover"
        );
        assert_eq!(full.evict(1, POOL_MAX_BYTES, 16 * M), None);
    }

    #[test]
    fn a_free_with_no_huge_reuse_in_sight_is_not_kept() {
        let delay = 500;
        let mut d = Demand::new();
        assert!(!d.keeps(0), "nothing reused yet: give it back");
        // A request long after nothing was given back is no sign of reuse.
        d.requested(1_000, delay, false);
        assert!(!d.keeps(1_000));
        // A mapping goes back at 2 000; a request 400 ms later would have taken it.
        d.released(2_000);
        d.requested(2_400, delay, false);
        assert!(d.keeps(2_400) && d.keeps(3_399));
        assert!(!d.keeps(3_400), "remembered for two delays");
        // Served from kept pages: remembered again from then on.
        d.requested(3_000, delay, true);
        assert!(d.keeps(3_999));
        // A request a whole delay after a release is no miss.
        let mut d = Demand::new();
        d.released(0);
        d.requested(delay, delay, false);
        assert!(!d.keeps(delay));
        // With no purge delay nothing is ever kept.
        let mut d = Demand::new();
        d.released(0);
        d.requested(0, 0, false);
        assert!(!d.keeps(0));
    }

    #[test]
    fn due_pieces_go_after_their_hold() {
        let mut p = pool(&[(W, M, true), (3 * W, M, false)]);
        p.pieces[0].freed_at = 100;
        p.pieces[1].freed_at = 300;
        // Requests that came a whole delay after each free: held for the delay.
        p.demand.released(0);
        p.demand.requested(400, 500, false);
        assert_eq!(p.demand.hold(500), 500);
        assert_eq!(p.next_due(500), 600);
        assert_eq!(p.take_due(599, 500, false), None);
        assert_eq!(p.take_due(600, 500, false).map(|x| x.base), Some(W));
        assert_eq!(p.take_due(600, 500, true).map(|x| x.base), Some(3 * W));
        assert_eq!(p.next_due(500), u64::MAX);
    }

    #[test]
    fn a_kept_piece_stays_twice_the_longest_gap_reuse_showed() {
        let delay = 500;
        let mut d = Demand::new();
        // No gap seen: a retention period.
        assert_eq!(d.hold(delay), 125);
        // sqlite: a 16 MiB buffer given back, another asked for 71 ms later.
        d.freed(783);
        d.released(783);
        d.requested(854, delay, false);
        assert!(d.keeps(1_044));
        assert_eq!(d.hold(delay), 142);
        let mut p = Pool::new();
        p.demand = d;
        p.insert(W, 16 * M, 1_044);
        assert_eq!(p.next_due(delay), 1_044 + 142);
        assert_eq!(p.take_due(1_185, delay, false), None);
        assert!(
            p.take_due(1_186, delay, false).is_some(),
            "kept past its hold"
        );
        // A longer gap while remembered raises the hold, up to the delay.
        d.freed(1_100);
        d.requested(1_300, delay, true);
        assert_eq!(d.hold(delay), 400);
        d.freed(1_400);
        d.requested(1_900, delay, true);
        assert_eq!(d.hold(delay), delay);
        // Once forgotten, a new sign starts from its own gap.
        d.freed(9_000);
        d.requested(9_010, delay, true);
        assert_eq!(d.hold(delay), 125, "a 10 ms gap keeps a period");
        // No purge delay: nothing is held.
        assert_eq!(Demand::new().hold(0), 0);
    }
}
