//! Model of remote frees into abandoned pages, their notification and collection, and
//! the claiming of abandoned pages.
//!
//! Production: the steps in `crates/ebb/src/protocol/` (called here, compiled with
//! loom's atomics: `push_remote`, `must_notify_after_push`, `publish_abandoned`,
//! `claim`, `take_list`, `signal`, `take_signal`, `take_signalled`, `release_free`),
//! and the glue modelled by hand from `span/page.rs` (`free_remote`,
//! `take_remote_frees`, `gather_frees`, `free_local`), `front/slow.rs`
//! (`free_slow_inner`, `reclaim`, `take_page`, `find_page`) and `handoff/`
//! (`abandon`, `publish`, `claim_listed`, `unlist`, `notify`, `drain_notified`,
//! `drain_page`, `finish_drain`, `free_remote`).
//!
//! # The model
//! One page `P` of three blocks `B0..B2`, fully carved, with its real fields: `owner`,
//! `last_owner`, `thread_free` (the CAS-pushed LIFO through each block's link word) as
//! atomics; `free`, `local_free`, `used`, `listed` and the block link words as
//! `UnsafeCell`s; the arena's abandoned list of P's class under a loom `Mutex` (the
//! arena lock), P's bit in its segment's `collect_mask` and `COLLECT_PENDING`. Heaps
//! `R` (P's owner, later its former owner) and `H` (another heap needing a page of P's
//! class) are owner words. Three scenarios:
//!
//! * [`Scenario::AbandonVsRemoteFree`]: `R` abandons P (`abandon::abandon`) while another
//!   thread frees `B0` into it (`free_to_other`) and a collector runs `collect_pending`.
//! * [`Scenario::CollectVsRemoteFree`]: P is abandoned and listed (`B2` on `local_free`)
//!   with `B0` on `thread_free` and a notification pending; a collector runs
//!   `drain_notified` (claim, take the frees in, list or free the page, `publish_abandoned` and
//!   its re-check) while another thread frees `B1`, the last block in use (so whoever
//!   collects last frees the span).
//! * [`Scenario::ClaimVsCollectVsReclaim`]: the same starting state; heap `H`
//!   claims it from the list (`take_page`, then `find_page`'s `collect`), a collector
//!   runs `collect_pending`, and `R` frees `B1` (`free_slow_inner`: `R` abandoned P, so
//!   it tries to take it back with a CAS, else pushes remotely).
//!
//! After the threads finish, the model checks that no remote free is stranded (an
//! abandoned page with remote frees has a notification pending), then plays
//! "eventually": the purger's `collect_pending` if P is abandoned, or the owning heap's
//! own `collect` if a heap owns it.
//!
//! # Properties checked
//! * No data race on P's private state or on a block's link word (loom).
//! * A page is held by one party at a time (ghost): no two heaps or collectors own it.
//! * Every block freed remotely is collected exactly once (ghost), and at the end every
//!   block is either still in use (counted by `used`) or on P's lists, or P was freed
//!   with nothing in use; `listed` matches the list.
//!
//! # The Dekker pair, and where production's ordering was weaker than it said
//! (Fixed: `protocol::push_remote` pushes with SeqCst; what follows is the finding, in
//! the names of the time.) `release_abandoned` does
//! `owner.store(ABANDONED, SeqCst); thread_free.load(SeqCst)`;
//! `free_to_other` does `thread_free` push, then `owner.load(SeqCst)`. The comment there
//! says "with SeqCst on both, at least one side sees the other". But the push
//! (`Page::free_remote`) is a `compare_exchange_weak` with **AcqRel**, not SeqCst, and an
//! AcqRel RMW is not in the SC total order: under the C++20/Rust memory model the outcome
//! "the freer reads the old owner word and `release_abandoned` reads the list without the
//! push" is allowed ([atomics.order]/4 puts no constraint between a SeqCst load that is
//! coherence-ordered before a non-SeqCst RMW), and then the block is stranded. x86
//! (`lock cmpxchg` is a full barrier) and AArch64 (a release store/exclusive is ordered
//! before a later `ldar`) do not produce it, so it is a latent issue, not an observed
//! one; the fix costs nothing on either (`Ordering::SeqCst` as the success ordering of the
//! push, or a `fence(SeqCst)` before the owner load).
//!
//! loom models the SC order only for fences, so the protocol code has both sides as
//! "access; `shim::dekker_fence()`; load" (a SeqCst fence under loom, nothing in
//! production). `Fault::WeakRemotePush` injects the old ordering on the freer side
//! (AcqRel push, no fence), and loom strands a block with it (test
//! `remote_free_without_sc_push_strands_a_block`).

use crate::protocol::{self, ABANDONED, DRAINING, FREE};
use crate::{get, set, Coverage};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;
use std::sync::atomic::{AtomicU8 as GhostU8, AtomicUsize as GhostUsize, Ordering as G};
/// P's owner, later its former owner (`last_owner`).
const HEAP_R: usize = 0x1000;
/// Another heap that needs a page of P's class.
const HEAP_H: usize = 0x2000;

// Blocks: index i, bit 1 << i; in `thread_free` and link words, block i is i + 1.
const NBLOCKS: usize = 3;
const B0: usize = 0;
const B1: usize = 1;
const B2: usize = 2;
const ALL: u8 = 0b111;
const NIL: usize = 0;

fn bit(block: usize) -> u8 {
    1 << block
}

/// Block `block` as a head word of `thread_free` (a pointer value never dereferenced).
fn block_ptr(block: usize) -> *mut u8 {
    (block + 1) as *mut u8
}

// Branches counted in `Coverage`.
const FREER_NOTIFIED: &str = "freer: pushed onto an empty list of an abandoned page, notified";
const RECHECK_NOTIFIED: &str = "publish_abandoned: re-check found remote frees, notified";
const COLLECTED: &str = "collector: claimed P and collected";
const CLAIM_LOST: &str = "collector: notified, but P was not abandoned";
const COLLECTOR_FREED: &str = "collector: P became unused, span freed";
const COLLECTOR_LISTED: &str = "collector: P got room, listed";
const H_CLAIMED: &str = "take_page: H claimed P";
const H_LOST: &str = "take_page: H found P listed, CAS failed";
const R_RECLAIMED: &str = "free_slow_inner: R took P back";
const R_REMOTE: &str = "free_slow_inner: R freed remotely";
const FINAL_PURGER: &str = "eventually: the purger collected";
const FINAL_OWNER: &str = "eventually: the owning heap collected";

// Ghost holders of P's private state (besides the heap owner words).
const NOBODY: usize = 0;
const FREED: usize = 1;
/// A collector: `COLLECTOR + n` for the n-th collecting party.
const COLLECTOR: usize = 0x100;

/// Which threads run (see the module doc).
#[derive(Clone, Copy, Debug)]
pub enum Scenario {
    AbandonVsRemoteFree,
    CollectVsRemoteFree,
    ClaimVsCollectVsReclaim,
}

struct Page {
    owner: AtomicUsize,
    last_owner: AtomicUsize,
    /// `Page::thread_free`: head block (+1, as a pointer value), or null.
    thread_free: AtomicPtr<u8>,
    /// `Block::next` of each block: the first word of the block's memory.
    link: [UnsafeCell<usize>; NBLOCKS],
    /// `free`, `local_free` (block sets), `used`, `listed`: the holder's only.
    free: UnsafeCell<u8>,
    local_free: UnsafeCell<u8>,
    used: UnsafeCell<u32>,
    listed: UnsafeCell<bool>,
}

struct World {
    /// Which branches this execution took (outside loom, shared by all executions).
    coverage: std::sync::Arc<Coverage>,
    page: Page,
    /// The arena lock, guarding `abandoned[class]` (true: P is in it).
    arena: Mutex<bool>,
    /// P's bit in its segment's `drain_mask`, and `drain::DRAIN_PENDING`.
    collect_mask: AtomicU64,
    collect_pending: AtomicBool,
    /// Ghost: who holds P's private state (a heap's owner word, `COLLECTOR + n`,
    /// `NOBODY` while abandoned, `FREED` once its span went back to the arena).
    holder: GhostUsize,
    /// Ghost: blocks pushed on `thread_free`, and blocks taken off it.
    remote_freed: GhostU8,
    collected: GhostU8,
}

impl World {
    fn new(scenario: Scenario, coverage: &std::sync::Arc<Coverage>) -> World {
        let world = World {
            coverage: coverage.clone(),
            page: Page {
                owner: AtomicUsize::new(FREE),
                last_owner: AtomicUsize::new(0),
                thread_free: AtomicPtr::new(std::ptr::null_mut()),
                link: [(); NBLOCKS].map(|_| UnsafeCell::new(NIL)),
                free: UnsafeCell::new(0),
                local_free: UnsafeCell::new(0),
                used: UnsafeCell::new(0),
                listed: UnsafeCell::new(false),
            },
            arena: Mutex::new(false),
            collect_mask: AtomicU64::new(0),
            collect_pending: AtomicBool::new(false),
            holder: GhostUsize::new(NOBODY),
            remote_freed: GhostU8::new(0),
            collected: GhostU8::new(0),
        };
        let p = &world.page;
        match scenario {
            Scenario::AbandonVsRemoteFree => {
                // R owns P (already out of its queue); B0..B2 are in use.
                p.owner.store(HEAP_R, Ordering::Relaxed);
                set(&p.used, 3);
                world.holder.store(HEAP_R, G::SeqCst);
            }
            Scenario::CollectVsRemoteFree | Scenario::ClaimVsCollectVsReclaim => {
                // Abandoned by R with B2 on local_free (so P has room and is listed);
                // B0 was freed remotely (and notified); B1 is in use.
                p.owner.store(ABANDONED, Ordering::Relaxed);
                p.last_owner.store(HEAP_R, Ordering::Relaxed);
                set(&p.local_free, bit(B2));
                set(&p.used, 2);
                set(&p.listed, true);
                *world.arena.lock().unwrap() = true;
                set(&p.link[B0], NIL);
                p.thread_free.store(block_ptr(B0), Ordering::Relaxed);
                world.remote_freed.store(bit(B0), G::SeqCst);
                world.collect_mask.store(1, Ordering::Relaxed);
                world.collect_pending.store(true, Ordering::Relaxed);
            }
        }
        world
    }

    // ---- ghost -------------------------------------------------------------------

    fn claim(&self, who: usize) {
        let previous = self.holder.swap(who, G::SeqCst);
        assert_eq!(
            previous, NOBODY,
            "P claimed by {who:#x} while {previous:#x} holds it (owned twice)"
        );
    }

    fn release(&self, who: usize, to: usize) {
        let previous = self.holder.swap(to, G::SeqCst);
        assert_eq!(
            previous, who,
            "P released by {who:#x}, held by {previous:#x}"
        );
    }

    // ---- page.rs -----------------------------------------------------------------

    /// `Page::free_remote`: `protocol::push_remote`, whose link step writes the
    /// block's link word. Returns the head seen before (NIL: empty).
    fn free_remote(&self, block: usize) -> usize {
        let p = &self.page;
        let head = protocol::push_remote(&p.thread_free, |head| {
            set(&p.link[block], head as usize); // `(*block).next = head`
            block_ptr(block)
        });
        let before = self.remote_freed.fetch_or(bit(block), G::SeqCst);
        assert_eq!(before & bit(block), 0, "block freed twice");
        head as usize
    }

    /// `Page::take_remote_frees` (`protocol::take_list`), by P's holder.
    fn take_remote_frees(&self) {
        let p = &self.page;
        let mut head = protocol::take_list(&p.thread_free) as usize;
        let mut count = 0;
        while head != NIL {
            let block = head - 1;
            let next = get(&p.link[block]);
            set(&p.link[block], NIL); // `(*head).next = self.local_free`
            let local = get(&p.local_free);
            assert_eq!(
                (local | get(&p.free)) & bit(block),
                0,
                "block collected twice"
            );
            set(&p.local_free, local | bit(block));
            let seen = self.collected.fetch_or(bit(block), G::SeqCst);
            assert_eq!(seen & bit(block), 0, "block collected twice");
            head = next;
            count += 1;
        }
        let used = get(&p.used);
        assert!(count <= used, "more remote frees than blocks in use");
        set(&p.used, used - count);
    }

    /// `Page::gather_frees`, by P's holder.
    fn gather_frees(&self) {
        self.take_remote_frees();
        let p = &self.page;
        if get(&p.free) == 0 && get(&p.local_free) != 0 {
            set(&p.free, get(&p.local_free));
            set(&p.local_free, 0);
        }
    }

    /// `Page::has_room` (fully carved: capacity == reserved).
    fn has_room(&self) -> bool {
        get(&self.page.free) != 0 || get(&self.page.local_free) != 0
    }

    // ---- handoff/ ------------------------------------------------------------------

    /// `drain::notify` (`protocol::signal`; `deadline::wake_for_drain` is the final pass).
    fn notify(&self) {
        protocol::signal(&self.collect_mask, 1, &self.collect_pending);
    }

    /// `abandon::publish` (`protocol::publish_abandoned`), by P's holder `who`.
    fn publish(&self, who: usize) {
        self.release(who, NOBODY);
        if protocol::publish_abandoned(&self.page.owner, &self.page.thread_free) {
            self.coverage.hit(RECHECK_NOTIFIED);
            self.notify();
        }
    }

    /// `abandon::unlist` then `arena::free_span` (`protocol::release_free`), by P's
    /// holder `who` (P is unused).
    fn free_span(&self, who: usize) {
        let mut listed_in_arena = self.arena.lock().unwrap();
        if get(&self.page.listed) {
            *listed_in_arena = false;
            set(&self.page.listed, false);
        }
        drop(listed_in_arena);
        // `free_slices_locked`
        self.release(who, FREED);
        protocol::release_free(&self.page.owner);
    }

    /// `abandon::abandon(page, heap)` by its owner `heap` (P is in no heap queue).
    fn abandon(&self, heap: usize) {
        self.gather_frees();
        if get(&self.page.used) == 0 {
            self.free_span(heap);
            return;
        }
        if self.has_room() {
            let mut listed_in_arena = self.arena.lock().unwrap();
            *listed_in_arena = true;
            set(&self.page.listed, true);
        }
        self.page.last_owner.store(heap, Ordering::Relaxed);
        self.publish(heap);
    }

    /// `drain::drain_notified` (`protocol::take_signal`, `take_signalled`), then
    /// `drain_page` (`claim_for_drain`, `take_remote_frees`, `finish_drain`) for P's bit,
    /// as drainer `who`.
    fn collect_pending(&self, who: usize) {
        if !protocol::take_signal(&self.collect_pending) {
            return;
        }
        let bits = protocol::take_signalled(&self.collect_mask);
        if bits & 1 == 0 {
            return;
        }
        // `drain_page` → `claim_for_drain`
        if !protocol::claim(&self.page.owner, ABANDONED, DRAINING) {
            self.coverage.hit(CLAIM_LOST);
            return;
        }
        self.claim(who);
        self.coverage.hit(COLLECTED);
        self.take_remote_frees();
        // `finish_drain`
        if get(&self.page.used) == 0 {
            self.coverage.hit(COLLECTOR_FREED);
            self.free_span(who);
            return;
        }
        if !get(&self.page.listed) && self.has_room() {
            self.coverage.hit(COLLECTOR_LISTED);
            let mut listed_in_arena = self.arena.lock().unwrap();
            *listed_in_arena = true;
            set(&self.page.listed, true);
        }
        self.publish(who);
    }

    /// `slow::take_page`'s claim of a listed abandoned page (`abandon::claim_listed`,
    /// under the list lock), then `find_page`'s `gather_frees` of the claimed page, by
    /// `heap`. (`take_page` starts with a `drain_notified`; the scenario's drainer thread
    /// plays that part.)
    fn take_page(&self, heap: usize) -> bool {
        let claimed = {
            let mut listed_in_arena = self.arena.lock().unwrap();
            let claimed = *listed_in_arena && protocol::claim(&self.page.owner, ABANDONED, heap);
            if claimed {
                self.coverage.hit(H_CLAIMED);
                self.claim(heap);
                *listed_in_arena = false;
                set(&self.page.listed, false);
            } else if *listed_in_arena {
                self.coverage.hit(H_LOST);
            }
            claimed
        };
        if claimed {
            self.gather_frees();
        }
        claimed
    }

    // ---- front/slow.rs, handoff/drain.rs --------------------------------------------

    /// `drain::free_remote` (`Page::free_remote`, then
    /// `protocol::must_notify_after_push`).
    fn free_to_other(&self, block: usize) {
        let old_head = self.free_remote(block);
        if protocol::must_notify_after_push(&self.page.owner, old_head == NIL) {
            self.coverage.hit(FREER_NOTIFIED);
            self.notify();
        }
    }

    /// `slow::free_slow_inner` for a block of P freed by `heap`, P's former owner (the
    /// STOLEN wait and check mode are not modelled).
    fn free_slow(&self, heap: usize, block: usize) {
        let owner = self.page.owner.load(Ordering::Acquire);
        assert!(owner != FREE, "a block of a free page is in use");
        if owner == heap {
            unreachable!("the scenarios free into pages of other owners");
        }
        if owner == ABANDONED
            && self.page.last_owner.load(Ordering::Relaxed) == heap
            && protocol::claim(&self.page.owner, ABANDONED, heap)
        {
            self.claim(heap);
            self.coverage.hit(R_RECLAIMED);
            // `reclaim`: `abandon::unlist` (`listed` is read without the lock first),
            // then `queue_push_back` (heap-private).
            if get(&self.page.listed) {
                let mut listed_in_arena = self.arena.lock().unwrap();
                if get(&self.page.listed) {
                    *listed_in_arena = false;
                    set(&self.page.listed, false);
                }
            }
            // `Page::free_local`
            let p = &self.page;
            let local = get(&p.local_free);
            assert_eq!((local | get(&p.free)) & bit(block), 0, "double free");
            set(&p.link[block], NIL);
            set(&p.local_free, local | bit(block));
            set(&p.used, get(&p.used) - 1);
            // used == 0 → `retire`: P is the only page of its class in R's queue, so R
            // keeps it (nothing to model).
            return;
        }
        self.coverage.hit(R_REMOTE);
        self.free_to_other(block);
    }

    // ---- the end -----------------------------------------------------------------

    /// After the threads: no stranded remote free; then "eventually" (the purger, or the
    /// owning heap) collects; then conservation of blocks. `in_use` are the blocks never
    /// freed.
    fn check_final(&self, in_use: u8) {
        let p = &self.page;
        let owner = p.owner.load(Ordering::Acquire);
        if owner == ABANDONED && !p.thread_free.load(Ordering::Relaxed).is_null() {
            assert!(
                self.collect_mask.load(Ordering::Relaxed) & 1 != 0
                    && self.collect_pending.load(Ordering::Relaxed),
                "remote free stranded: P is abandoned with remote frees and no notification"
            );
        }
        match owner {
            ABANDONED => {
                // The purger (woken by `notify`), or any `take_page`.
                if !p.thread_free.load(Ordering::Relaxed).is_null() {
                    self.coverage.hit(FINAL_PURGER);
                }
                self.collect_pending(COLLECTOR + 9);
            }
            HEAP_R | HEAP_H => {
                // The owning heap's next `find_page` (or `abandon`) collects.
                if !p.thread_free.load(Ordering::Relaxed).is_null() {
                    self.coverage.hit(FINAL_OWNER);
                }
                self.gather_frees();
            }
            FREE => {}
            other => panic!("P left with owner word {other:#x}"),
        }
        let owner = p.owner.load(Ordering::Acquire);
        assert_eq!(
            self.collected.load(G::SeqCst),
            self.remote_freed.load(G::SeqCst),
            "a remote free was never collected"
        );
        assert!(p.thread_free.load(Ordering::Relaxed).is_null());
        let listed_in_arena = *self.arena.lock().unwrap();
        assert_eq!(
            get(&p.listed),
            listed_in_arena,
            "`listed` out of step with the list"
        );
        if owner == FREE {
            assert_eq!(in_use, 0, "P freed with blocks in use");
            assert!(!listed_in_arena);
            assert_eq!(self.holder.load(G::SeqCst), FREED);
            return;
        }
        let (free, local) = (get(&p.free), get(&p.local_free));
        assert_eq!(free & local, 0);
        assert_eq!(
            free | local,
            ALL & !in_use,
            "a freed block is not on P's lists"
        );
        assert_eq!(get(&p.used), in_use.count_ones(), "used is off");
        match owner {
            ABANDONED => {
                assert_eq!(self.holder.load(G::SeqCst), NOBODY);
                assert_eq!(
                    listed_in_arena,
                    self.has_room(),
                    "abandoned with room, unlisted"
                );
            }
            heap => {
                assert_eq!(self.holder.load(G::SeqCst), heap);
                assert!(!listed_in_arena, "an owned page is listed");
            }
        }
    }
}

/// Run one scenario of the model (with the faults `protocol::shim::with_faults` put in
/// force around it, if any).
pub fn model(scenario: Scenario, coverage: &std::sync::Arc<Coverage>) {
    let world = Arc::new(World::new(scenario, coverage));
    let spawn = |f: fn(&World)| {
        let world = world.clone();
        thread::spawn(move || f(&world))
    };
    let (threads, in_use) = match scenario {
        Scenario::AbandonVsRemoteFree => (
            vec![
                spawn(|w| w.abandon(HEAP_R)),
                spawn(|w| w.free_to_other(B0)),
                spawn(|w| w.collect_pending(COLLECTOR)),
            ],
            bit(B1) | bit(B2),
        ),
        Scenario::CollectVsRemoteFree => (
            vec![
                spawn(|w| w.collect_pending(COLLECTOR)),
                spawn(|w| w.free_to_other(B1)),
            ],
            0,
        ),
        Scenario::ClaimVsCollectVsReclaim => (
            vec![
                spawn(|w| {
                    w.take_page(HEAP_H);
                }),
                spawn(|w| w.collect_pending(COLLECTOR)),
                spawn(|w| w.free_slow(HEAP_R, B1)),
            ],
            0,
        ),
    };
    for thread in threads {
        thread.join().unwrap();
    }
    world.check_final(in_use);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::shim::{with_faults, Fault};
    use crate::{check, expect_failure};

    const STRANDED: &str = "remote free stranded";

    fn run(preemptions: Option<usize>, scenario: Scenario, expected: &[&str]) {
        let coverage = Coverage::new();
        let c = coverage.clone();
        check(preemptions, move || model(scenario, &c));
        coverage.assert_reached(expected);
    }

    /// The model with `fault` injected into the production protocol code; it must fail.
    fn expect_stranded(preemptions: Option<usize>, fault: Fault, scenario: Scenario) {
        let coverage = Coverage::new();
        with_faults(&[fault], || {
            expect_failure(preemptions, &[STRANDED], move || model(scenario, &coverage))
        });
    }

    /// Preemption bound 4: about 30k executions (every interleaving would be millions).
    #[test]
    fn abandon_vs_remote_free() {
        run(
            Some(4),
            Scenario::AbandonVsRemoteFree,
            &[
                FREER_NOTIFIED,
                RECHECK_NOTIFIED,
                COLLECTED,
                COLLECTOR_LISTED,
                FINAL_PURGER,
            ],
        );
    }

    /// Every interleaving.
    #[test]
    fn collect_vs_remote_free() {
        run(
            None,
            Scenario::CollectVsRemoteFree,
            &[
                FREER_NOTIFIED,
                RECHECK_NOTIFIED,
                COLLECTED,
                COLLECTOR_FREED,
                FINAL_PURGER,
            ],
        );
    }

    /// Preemption bound 4: about 100k executions.
    #[test]
    fn claim_vs_collect_vs_reclaim() {
        run(
            Some(4),
            Scenario::ClaimVsCollectVsReclaim,
            &[
                COLLECTED,
                CLAIM_LOST,
                H_CLAIMED,
                H_LOST,
                R_RECLAIMED,
                R_REMOTE,
                FINAL_OWNER,
            ],
        );
    }

    /// `abandon::abandon` without `publish_abandoned`'s re-check: a free pushed after
    /// the abandoner's `gather_frees` sees R as owner and does not notify; nobody ever
    /// looks.
    #[test]
    fn abandon_without_recheck_strands_a_block() {
        expect_stranded(
            Some(4),
            Fault::SkipPublishRecheck,
            Scenario::AbandonVsRemoteFree,
        );
    }

    /// `finish_drain` without the re-check: a free pushed onto the list the drainer
    /// just emptied sees DRAINING and does not notify.
    #[test]
    fn finish_drain_without_recheck_strands_a_block() {
        expect_stranded(
            None,
            Fault::SkipPublishRecheck,
            Scenario::CollectVsRemoteFree,
        );
    }

    /// Negative control: the old production ordering on the freer's side (AcqRel push,
    /// then the SeqCst owner load, with nothing ordering the two): the store-buffering
    /// outcome strands a block. See the module doc: the C++20/Rust model allows this
    /// too; x86 and AArch64 do not produce it.
    #[test]
    fn remote_free_without_sc_push_strands_a_block() {
        expect_stranded(None, Fault::WeakRemotePush, Scenario::CollectVsRemoteFree);
    }
}
