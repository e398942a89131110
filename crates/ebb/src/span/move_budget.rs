//! How many kernel mappings page moves may leave the process with.
//!
//! Free memory moves between the arena and huge blocks with `mremap` (`huge.rs`,
//! `lend.rs`, `front/realloc.rs`), and every move splits the kernel's mapping (VMA) it
//! lands in: the pages moved keep a mapping of their own, which the kernel merges with
//! no neighbour (their page offsets come from where they were first mapped). A block
//! built of kept pieces that were themselves built by moves is as many mappings as all
//! of them, and it compounds: `c-huge` at scale 16 held 4,238 mappings at its peak
//! (up to 233 in one 32 MiB window), growing with the run. The kernel refuses any
//! mapping past its limit (`vm.max_map_count`, 65,530 by default), so a long-running
//! process churning a few GiB of huge blocks would at last have its allocations (and
//! its thread stacks, and every other library's `mmap`) refused with memory to spare.
//!
//! So moves pause while the process has more mappings than a budget (a quarter of the
//! limit, or `EBB_MAPPING_BUDGET`), and go on once it is back under half of it: a
//! paused request faults in fresh pages (and reuses a kept mapping that holds it whole,
//! which moves nothing), and mappings go as blocks and kept pieces are unmapped. The
//! count is the OS's own (`os::mapping_count`: the process's every mapping, ebb's or
//! not, read from `/proc/self/maps`, 1.1 ms at 8,000), taken again after as many moves
//! as could not pass the budget at a few mappings each (at most [`CHECK_MOVES`]), and
//! while paused after [`PAUSED_CHECK`] refusals (a refused move faults in its pages
//! fresh instead, a millisecond or more a request: a count per 64 of them costs a few
//! percent at most). A move adds at most three mappings when
//! its source is unmapped (the destination split around it and the source's remainder)
//! and the source's own when it stays (`MREMAP_DONTUNMAP`: a free run of a segment,
//! one or a few). Where the OS cannot count, moves never pause.
//!
//! The state is two relaxed atomics read by any thread on its way to a move; two
//! threads counting at once only count twice.

use crate::counters::COUNTERS;
use crate::os;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

/// Moves between two counts at most.
pub const CHECK_MOVES: u32 = 256;
/// Refused moves between two counts while paused.
pub const PAUSED_CHECK: u32 = 64;
/// Mappings one move is counted as adding when the next count is scheduled.
const MAPPINGS_PER_MOVE: usize = 4;
/// The budget when the OS's limit cannot be read: a quarter of Linux's default.
const DEFAULT_BUDGET: usize = 65_530 / 4;

/// Set while the process has more mappings than the budget.
static PAUSED: AtomicBool = AtomicBool::new(false);
/// Moves (or refusals, while paused) until the next count.
static UNTIL_CHECK: AtomicU32 = AtomicU32::new(CHECK_MOVES);
/// The budget, once worked out (0: not yet).
static BUDGET: AtomicUsize = AtomicUsize::new(0);

/// The most mappings the process may have for moves to go on.
fn budget() -> usize {
    let set = crate::options::get().mapping_budget;
    if set != 0 {
        return set as usize;
    }
    let known = BUDGET.load(Ordering::Relaxed);
    if known != 0 {
        return known;
    }
    let budget = os::mapping_limit().map_or(DEFAULT_BUDGET, |limit| (limit / 4).max(1));
    BUDGET.store(budget, Ordering::Relaxed);
    budget
}

/// Whether a page move may go ahead now. (While paused, every call counts toward the
/// next count, which may resume moves.)
#[inline]
pub fn allowed() -> bool {
    if !PAUSED.load(Ordering::Relaxed) {
        return true;
    }
    if countdown(&UNTIL_CHECK, 1) {
        count();
    }
    !PAUSED.load(Ordering::Relaxed)
}

/// `moves` page moves were made (or attempted: a failed one may have split mappings).
pub fn moved(moves: u32) {
    if moves != 0 && countdown(&UNTIL_CHECK, moves) {
        count();
    }
}

/// Take `n` off countdown `until` (`UNTIL_CHECK`); true if it ran out (the caller
/// counts).
fn countdown(until: &AtomicU32, n: u32) -> bool {
    let before = until.fetch_sub(n, Ordering::Relaxed);
    // Wrapped below zero (several threads at once) counts as run out too.
    before <= n || before > CHECK_MOVES
}

/// Count the process's mappings, pause or resume moves, and schedule the next count.
fn count() {
    let Some(mappings) = os::mapping_count() else {
        // No count: never pause (and never count again soon).
        PAUSED.store(false, Ordering::Relaxed);
        UNTIL_CHECK.store(CHECK_MOVES, Ordering::Relaxed);
        return;
    };
    COUNTERS
        .mappings_counted
        .store(mappings as u64, Ordering::Relaxed);
    let budget = budget();
    let paused = PAUSED.load(Ordering::Relaxed);
    let next = if mappings > budget {
        if !paused {
            PAUSED.store(true, Ordering::Relaxed);
            COUNTERS.move_pauses.fetch_add(1, Ordering::Relaxed);
        }
        PAUSED_CHECK
    } else if paused && mappings > budget / 2 {
        PAUSED_CHECK
    } else {
        PAUSED.store(false, Ordering::Relaxed);
        // As many moves as fit in what is left of the budget, at a few mappings each.
        ((budget - mappings) / MAPPINGS_PER_MOVE).clamp(1, CHECK_MOVES as usize) as u32
    };
    UNTIL_CHECK.store(next, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_countdown_runs_out_once_per_schedule_and_on_a_wrap() {
        let until = AtomicU32::new(3);
        assert!(!countdown(&until, 1));
        assert!(!countdown(&until, 1));
        assert!(countdown(&until, 1));
        until.store(2, Ordering::Relaxed);
        assert!(countdown(&until, 5), "more moves than were left");
        // A wrap past zero (two threads took the last ones) reads as run out.
        assert!(countdown(&until, 1));
    }
}
