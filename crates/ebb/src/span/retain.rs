//! Retention that follows reuse: how much free committed memory the arena keeps.
//!
//! Free spans stay committed so that churn (a page empties, a page is carved again; a
//! large block is freed, another is allocated) reuses them without a fault per OS page.
//! A fixed purge delay keeps *every* free span for the delay, also the ones nobody is
//! going to reuse. This module keeps only what the program has actually been reusing:
//!
//! * **Reuse per period.** A period is the time between two decommit scans (the purger
//!   runs one every quarter purge delay while anything is pending). Within a period the
//!   arena tracks the pool of free committed slices and records its largest draw-down:
//!   the most the pool shrank below its highest level since the period began
//!   ([`Reuse::taken`]). That is how much free committed memory the program took and used
//!   again within the period, however many times it freed and retook it. Decommitting a
//!   run (the scan itself) lowers the pool without counting as reuse.
//! * **Keep what the recent periods reused, decayed.** At the end of a period the scan
//!   keeps `keep = max over the last PERIODS periods of reuse[age] * (PERIODS - age) /
//!   PERIODS`: the reuse of the period just ended counts whole, older ones less, and after
//!   `PERIODS` quiet periods (one purge delay) nothing is kept. Like jemalloc's decay
//!   curve, but driven by what was reused rather than by what was freed.
//! * **Which slices.** Allocation takes committed runs first (`arena::search_or_reserve`:
//!   committed first, then any free run, first fit in segment order; small pages look
//!   in short free runs anywhere before that, `arena::find_committed_in_short_run`, and
//!   the kept slices serve them once the short runs past them are taken or decommitted),
//!   so the kept slices
//!   are the first `keep` committed free slices in that order and the scan decommits the
//!   ones after them, once they have been free for one period (a span freed a moment ago
//!   in the middle of a burst gets that much grace). `EBB_PURGE_DELAY` stays the upper
//!   bound: a slice free for the whole delay goes back, kept or not.
//!
//! All of it is plain data guarded by the span lock (`arena::SPAN_LOCK` holds a
//! [`Reuse`]): no new atomics, nothing on the fast paths.

/// Periods per purge delay: the scan runs every `delay / PERIODS` while work is pending.
pub const PERIODS: usize = 4;

/// Free committed slices kept per slice of (decayed) reuse. The draw-down of one
/// period misses reuse whose free and take fall in different periods and kept slices
/// whose runs are too short for the spans asked for; with 1 the store scenario faulted
/// 15-55% more pages than with the fixed delay (its batches are about a period long),
/// with 2 as many or fewer, at the same RSS as with 1.
pub const HEADROOM: usize = 2;

/// A period, in ms, for a purge delay (at least 1 ms).
pub fn period_ms(delay_ms: u64) -> u64 {
    (delay_ms / PERIODS as u64).max(1)
}

/// The pool of free slices that were in use before, and the reuse it saw (guarded by
/// the span lock).
///
/// The pool counts free *committed* slices and free slices the scan *decommitted*
/// (`purged_free`): taking either is reuse of memory the program freed, and counting
/// the second kind is what lets the rule learn that it decommitted too much (a take that
/// faults memory back in). Slices never used (a new segment) are not in the pool, so a
/// program that only grows does not count as reusing anything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reuse {
    /// Free committed slices that allocation may take (hidden runs excluded).
    committed_free: usize,
    /// Free slices the decommit scan gave back (an estimate: a take of uncommitted
    /// slices is counted against it, whether they were decommitted or never used).
    purged_free: usize,
    /// The highest pool (`committed_free + purged_free`) since the period began.
    period_high: usize,
    /// The largest draw-down of the pool in this period (`period_high - pool`).
    period_reuse: usize,
    /// Reuse of the last periods, `history[0]` the most recent.
    history: [usize; PERIODS],
}

impl Reuse {
    pub const fn new() -> Reuse {
        Reuse {
            committed_free: 0,
            purged_free: 0,
            period_high: 0,
            period_reuse: 0,
            history: [0; PERIODS],
        }
    }

    /// Free committed slices allocation may take now.
    pub fn committed_free(&self) -> usize {
        self.committed_free
    }

    fn pool(&self) -> usize {
        self.committed_free + self.purged_free
    }

    /// `count` committed slices became free (a span, or the tail of one, came back).
    pub fn freed(&mut self, count: usize) {
        self.committed_free += count;
        self.period_high = self.period_high.max(self.pool());
    }

    /// A span was taken: `committed` of its slices were free and committed, the other
    /// `uncommitted` were not (decommitted by a scan, or never used).
    pub fn taken(&mut self, committed: usize, uncommitted: usize) {
        debug_assert!(
            committed <= self.committed_free,
            "took more than the pool holds"
        );
        self.committed_free -= committed;
        self.purged_free -= uncommitted.min(self.purged_free);
        self.period_reuse = self
            .period_reuse
            .max(self.period_high.saturating_sub(self.pool()));
    }

    /// `count` free committed slices are being decommitted: they leave the committed
    /// pool but not the pool (retaking them is reuse all the same).
    pub fn hidden(&mut self, count: usize) {
        debug_assert!(count <= self.committed_free, "hid more than the pool holds");
        self.committed_free -= count;
        self.purged_free += count;
    }

    /// A hidden run the OS refused to decommit is free and committed again.
    pub fn unhidden(&mut self, count: usize) {
        self.committed_free += count;
        self.purged_free -= count.min(self.purged_free);
    }

    /// What the decay curve keeps, in slices: the reuse of the period still running and
    /// of the one just ended count whole, then each older one a quarter less.
    pub fn keep(&self) -> usize {
        let mut keep = self.period_reuse;
        for (age, &reuse) in self.history.iter().enumerate() {
            keep = keep.max(reuse * (PERIODS - age) / PERIODS);
        }
        keep
    }

    /// End the period (a decommit scan starts): returns how many free committed slices
    /// to keep (`keep() * HEADROOM`), and starts the next period from the pool as it is.
    pub fn end_period(&mut self) -> usize {
        let keep = self.keep() * HEADROOM;
        self.history.copy_within(0..PERIODS - 1, 1);
        self.history[0] = self.period_reuse;
        self.period_reuse = 0;
        self.period_high = self.pool();
        keep
    }

    /// True while some reuse is remembered (the scan must run again as `keep` decays).
    pub fn remembers_reuse(&self) -> bool {
        self.period_reuse != 0 || self.history.iter().any(|&r| r != 0)
    }
}

/// What the decommit scan does with one free committed slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Decommit it now.
    Decommit,
    /// Leave it committed; look again at this time (ms).
    Until(u64),
}

/// The per-slice rule of one decommit scan, in the order allocation takes slices.
#[derive(Clone, Copy, Debug)]
pub struct Scan {
    now: u64,
    delay: u64,
    grace: u64,
    keep: usize,
    /// Slices kept so far in this scan.
    pub kept: usize,
}

impl Scan {
    pub fn new(now: u64, delay: u64, keep: usize) -> Scan {
        Scan {
            now,
            delay,
            grace: period_ms(delay),
            keep,
            kept: 0,
        }
    }

    /// The verdict on the next free committed slice in allocation order, freed at
    /// `freed_at`.
    pub fn decide(&mut self, freed_at: u64) -> Verdict {
        let deadline = freed_at.saturating_add(self.delay);
        if deadline <= self.now {
            // The upper bound: free for the whole delay.
            return Verdict::Decommit;
        }
        if self.kept < self.keep {
            self.kept += 1;
            return Verdict::Until(deadline);
        }
        let graced = freed_at.saturating_add(self.grace);
        if graced <= self.now {
            Verdict::Decommit
        } else {
            Verdict::Until(graced)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec::Vec;

    #[test]
    fn draw_down_counts_from_the_period_high_not_the_gross_traffic() {
        let mut r = Reuse::new();
        r.freed(10);
        r.end_period();
        // Ten slices freed and retaken a hundred times: the pool never drops by more
        // than ten below its high.
        for _ in 0..100 {
            r.taken(10, 0);
            r.freed(10);
        }
        assert_eq!(r.end_period(), 10 * HEADROOM);
        assert_eq!(r.history[0], 10);
    }

    #[test]
    fn memory_freed_then_taken_within_a_period_is_reuse() {
        let mut r = Reuse::new();
        r.freed(6);
        r.taken(4, 0);
        assert_eq!(r.keep(), 4);
        r.taken(2, 0);
        assert_eq!(r.end_period(), 6 * HEADROOM);
    }

    #[test]
    fn decommitting_is_not_reuse_but_retaking_decommitted_slices_is() {
        let mut r = Reuse::new();
        r.freed(20);
        r.hidden(15);
        assert_eq!(r.keep(), 0);
        assert_eq!(r.committed_free(), 5);
        r.taken(5, 0);
        assert_eq!(r.keep(), 5);
        // Seven slices faulted back in: they were freed before, so that is reuse too.
        r.taken(0, 7);
        assert_eq!(r.keep(), 12);
        r.unhidden(3);
        assert_eq!(r.committed_free(), 3);
    }

    #[test]
    fn growing_into_never_used_slices_is_not_reuse() {
        let mut r = Reuse::new();
        r.taken(0, 64);
        r.freed(8);
        r.taken(0, 64);
        assert_eq!(r.end_period(), 0);
    }

    #[test]
    fn reuse_decays_to_nothing_over_one_delay() {
        let mut r = Reuse::new();
        r.freed(40);
        r.taken(40, 0);
        r.freed(40);
        // The period it happened in and the next count it whole, then 3/4, 2/4, 1/4,
        // then nothing.
        assert_eq!(r.end_period(), 40 * HEADROOM);
        let kept: Vec<usize> = (0..PERIODS + 1).map(|_| r.end_period()).collect();
        assert_eq!(kept, [40, 30, 20, 10, 0].map(|k| k * HEADROOM));
        assert!(!r.remembers_reuse());
    }

    #[test]
    fn keep_follows_the_largest_recent_reuse() {
        let mut r = Reuse::new();
        r.freed(100);
        for reuse in [8, 40, 8] {
            r.taken(reuse, 0);
            r.freed(reuse);
            r.end_period();
        }
        // history [8, 40, 8]: 40 is second (weight 3/4 = 30), 8 first (weight 1 = 8).
        assert_eq!(r.keep(), 30);
    }

    #[test]
    fn scan_keeps_the_first_slices_and_decommits_the_surplus_after_its_grace() {
        let delay = 400;
        let mut s = Scan::new(1_000, delay, 2);
        // Freed 200 ms ago: past the 100 ms grace, within the delay.
        assert_eq!(s.decide(800), Verdict::Until(1_200), "kept (1 of 2)");
        assert_eq!(s.decide(800), Verdict::Until(1_200), "kept (2 of 2)");
        assert_eq!(s.decide(800), Verdict::Decommit, "surplus");
        // Freed 50 ms ago: surplus, but within its grace.
        assert_eq!(s.decide(950), Verdict::Until(1_050));
        // Free for the whole delay: decommitted even though it would be kept.
        let mut s = Scan::new(1_000, delay, 10);
        assert_eq!(s.decide(600), Verdict::Decommit);
        assert_eq!(s.kept, 0);
    }

    /// The model: a program churns through `reuse` slices a period out of a pool that
    /// a burst filled; the pool is decommitted by the production rule (`Reuse` +
    /// `Scan`), and every take of a slice the rule decommitted is a fault.
    struct Model {
        reuse: Reuse,
        /// Free slices in allocation order: (freed_at, committed).
        free: Vec<(u64, bool)>,
        faults: usize,
    }

    impl Model {
        fn new() -> Model {
            Model {
                reuse: Reuse::new(),
                free: Vec::new(),
                faults: 0,
            }
        }
        fn free(&mut self, now: u64, count: usize) {
            for _ in 0..count {
                self.free.push((now, true));
            }
            self.reuse.freed(count);
        }
        /// Take `count` slices, committed ones first (as the arena does); with none
        /// free, fresh ones (never used).
        fn take(&mut self, count: usize) {
            let (mut committed, mut uncommitted) = (0, 0);
            self.free.sort_by_key(|&(_, committed)| !committed);
            for _ in 0..count {
                if self.free.is_empty() {
                    self.faults += 1;
                    uncommitted += 1;
                    continue;
                }
                if self.free.remove(0).1 {
                    committed += 1;
                } else {
                    self.faults += 1;
                    uncommitted += 1;
                }
            }
            self.reuse.taken(committed, uncommitted);
        }
        fn scan(&mut self, now: u64, delay: u64) {
            let keep = self.reuse.end_period();
            let mut scan = Scan::new(now, delay, keep);
            let mut hidden = 0;
            for slot in self.free.iter_mut().filter(|s| s.1) {
                if scan.decide(slot.0) == Verdict::Decommit {
                    slot.1 = false;
                    hidden += 1;
                }
            }
            self.reuse.hidden(hidden);
        }
        fn committed(&self) -> usize {
            self.free.iter().filter(|s| s.1).count()
        }
    }

    #[test]
    fn model_steady_churn_keeps_its_reuse_and_returns_the_rest() {
        let delay = 400;
        let period = period_ms(delay);
        let mut m = Model::new();
        // A burst leaves 1000 slices free; then the program frees and retakes 50 per
        // period, forever.
        m.free(0, 1000);
        let mut now = 0;
        for _ in 0..40 {
            for _ in 0..5 {
                m.take(10);
                m.free(now, 10);
            }
            now += period;
            m.scan(now, delay);
        }
        // The burst went back well before the delay bound would have sent it, and the
        // churn kept its 10 with headroom (it never drew more than 10 below its high at
        // once), plus what it freed in the last period.
        assert!(
            m.committed() <= 10 * HEADROOM + 10,
            "committed {}",
            m.committed()
        );
        assert!(m.committed() >= 10);
        // After the first period every take was served committed.
        assert_eq!(m.faults, 0);
    }

    #[test]
    fn model_burst_not_reused_goes_back_after_one_period() {
        let delay = 400;
        let period = period_ms(delay);
        let mut m = Model::new();
        m.free(0, 500);
        m.scan(period, delay);
        assert_eq!(m.committed(), 0, "nothing was reused: all of it goes");
    }

    #[test]
    fn model_batch_reuse_survives_the_gap_between_batches() {
        // A batch every two periods frees and retakes 300 slices (a store committing
        // its multi-page runs): the reuse two periods back still keeps them.
        let delay = 400;
        let period = period_ms(delay);
        let mut m = Model::new();
        let mut now = 0;
        m.free(now, 300);
        for batch in 0..20 {
            now += period;
            m.scan(now, delay);
            m.take(300);
            m.free(now, 300);
            now += period;
            m.scan(now, delay);
            if batch == 0 {
                m.faults = 0;
            }
        }
        assert_eq!(
            m.faults, 0,
            "every batch after the first reused committed slices"
        );
    }
}
