//! Page moves pause while the process has more kernel mappings than their budget
//! (`span/move_budget.rs`), and go on once the budget allows them again.
//!
//! A program that replaces 5-25 MiB blocks at random builds each new block out of kept
//! pages moved in with `mremap`, and each move splits a mapping: `c-huge` at scale 16
//! held 4,238 mappings, growing with the run, against a kernel limit of 65,530. Here the
//! budget is set below what the process already has, so the first count pauses moves:
//! from then on the process's mappings stay within what its live and kept blocks need
//! (it fails with the pause removed: checked). Then the budget is raised and moves come
//! back. Its own process: the huge pool and the budget are process-wide.

use std::alloc::{GlobalAlloc, Layout};

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

mod common;
use common::pages::{four_kib_pages, kernel_moves_pages, PAGE};

const MIB: usize = 1 << 20;
const SLOTS: usize = 20;

fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .expect("/proc/self/maps")
        .lines()
        .count()
}

/// A small xorshift: the same blocks every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Replace blocks of 5-25 MiB in `slots` at random `steps` times, each written once per
/// page (so freed ones are kept touched, and new ones are built of kept pages); returns
/// the most mappings the process had, counted every 25 steps.
fn churn(slots: &mut [(*mut u8, Layout)], rng: &mut Rng, steps: usize) -> usize {
    let mut most = 0;
    for step in 0..steps {
        let slot = &mut slots[rng.below(SLOTS)];
        // SAFETY: each block is ebb's, freed once with its layout, written within it.
        unsafe {
            if !slot.0.is_null() {
                A.dealloc(slot.0, slot.1);
            }
            let layout = Layout::from_size_align((5 + rng.below(21)) * MIB, 8).unwrap();
            let block = A.alloc(layout);
            assert!(!block.is_null());
            for offset in (0..layout.size()).step_by(PAGE) {
                block.add(offset).write(step as u8);
            }
            *slot = (block, layout);
        }
        if step % 25 == 0 {
            most = most.max(mappings());
        }
    }
    most
}

#[test]
fn moves_pause_over_the_mapping_budget_and_resume_under_it() {
    if !four_kib_pages() || !kernel_moves_pages() || std::fs::metadata("/proc/self/maps").is_err() {
        eprintln!("skipped: 4 KiB pages, MREMAP_DONTUNMAP and /proc needed");
        return;
    }
    let mut options = ebb::options();
    options.purge_delay_ms = 600_000;
    // Below what the process has already: the first count pauses moves.
    options.mapping_budget = (mappings() / 2) as u64;
    ebb::set_options(options);

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut slots = [(std::ptr::null_mut::<u8>(), Layout::new::<u8>()); SLOTS];
    // 1. Enough replacements for a count (`CHECK_MOVES` moves): moves pause.
    churn(&mut slots, &mut rng, 1_000);
    let paused = ebb::stats();
    assert!(
        paused.move_pauses >= 1,
        "moves never paused over a budget of {} mappings (the process has {})",
        options.mapping_budget,
        mappings()
    );
    assert!(paused.mappings_counted > options.mapping_budget);

    // 2. Paused, the churn adds no mappings beyond what its blocks need: each live or
    //    kept block is a mapping or a few, and no move splits one.
    let at_pause = mappings();
    let most = churn(&mut slots, &mut rng, 1_500);
    let still = ebb::stats();
    assert!(
        most <= at_pause + 2 * SLOTS + 64,
        "mappings grew from {at_pause} to {most} with moves paused"
    );
    assert_eq!(
        (still.kept_moved, still.lent_to_huge),
        (paused.kept_moved, paused.lent_to_huge),
        "pages moved while moves were paused"
    );

    // 3. Under the budget again, moves come back (after at most `PAUSED_CHECK` refused
    //    moves): blocks each bigger than the last, so that none fits a kept piece whole
    //    and each is built by moving kept pages in (once moves are allowed).
    options.mapping_budget = 1 << 40;
    ebb::set_options(options);
    for slot in &mut slots {
        // SAFETY: each block is ebb's and live; freed once.
        unsafe { A.dealloc(slot.0, slot.1) };
    }
    for step in 0..120 {
        let layout = Layout::from_size_align((32 + step) * MIB, 8).unwrap();
        // SAFETY: ebb's block, written within it and freed once with its layout.
        unsafe {
            let block = A.alloc(layout);
            assert!(!block.is_null());
            block.write(step as u8);
            A.dealloc(block, layout);
        }
    }
    let resumed = ebb::stats();
    assert_eq!(resumed.move_pauses, still.move_pauses);
    assert!(
        resumed.kept_moved > still.kept_moved,
        "no kept page moved once the budget allowed it again"
    );
}
