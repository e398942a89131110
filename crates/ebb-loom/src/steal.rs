//! Model of the idle-heap takeover ("steal") handshake.
//!
//! Production: `protocol::Handshake` (`enter`, `leave`, `wait_while_stealing`,
//! `try_steal`, with `mark_stolen`/`unmark_stolen`), called here as production's own
//! code; the glue modelled by hand from `front/takeover.rs` (`try_take_over`'s marks,
//! undo and take-over), `front/slow.rs` (`slow_path_enter`, `malloc_slow`,
//! `find_page`, `free_slow_inner`, `reclaim`), `front/heap.rs` (`abandon_all`) and the
//! fast paths in `front/alloc.rs` (`malloc_in`, `malloc_local_or_slow`, `free`).
//!
//! # The model
//! One heap `O` with one page `P` of one class, both with their real fields:
//! `in_op` and the steal state (production's `Handshake`), the table entry of the class (`current`, an
//! atomic holding `P` or the empty page) and the queue (owner-private, an
//! `UnsafeCell`); `P.owner`, `P.last_owner` (atomics) and `P.free`, `P.local_free`,
//! `P.used` (`UnsafeCell`s). `P` has three blocks: `B0` on `free`, `B1` and `B2` handed out
//! to the owner; the page is fully carved, so when its lists run dry it is full.
//!
//! * The owner thread runs `malloc` (fast path: pops `B0`), `free(B1)` (fast path: pushes
//!   on `local_free`), `malloc` (`malloc_local_or_slow`: takes `B1` back), `malloc`
//!   (`P` is full: slow path, which waits while STEALING, abandons `P` and takes a fresh
//!   page) — [`Owner::FourCalls`]; or only the first two ([`Owner::FastPaths`]); or
//!   nothing ([`Owner::Idle`]). Whichever call runs after a completed steal finds the
//!   empty page or a foreign owner word, takes the slow path, and takes `P` back on the
//!   free (`free_slow_inner`'s reclaim CAS).
//! * The stealer thread runs `try_steal` once (steps 1–5).
//! * Optionally a third thread frees `B2` meanwhile (`free_slow_inner` of another heap:
//!   it waits while P is STOLEN, then `free_to_other`), with `P.thread_free` and the
//!   notification; the stealer's `Page::gather_frees` and `publish_abandoned` take part.
//!   (Only with an idle owner: see [`Owner::Idle`].)
//!
//! # Properties checked
//! * No data race on `P`'s private lists or on the heap's queue (loom).
//! * Mutual exclusion (ghost state): the stealer's step 5 never overlaps an owner call
//!   that is using `P`, and after step 5 began no owner call uses `P` until the owner
//!   took it back with the CAS in `free_slow_inner` — i.e. once the steal succeeded the
//!   owner's calls go to the slow path.
//! * At the end: every block of `P` is exactly once either held by a thread or on one
//!   of `P`'s lists, `used` counts the held ones, no remote free is stranded (abandoned
//!   with remote frees and no notification), and the heap invariants of `heap.rs` hold
//!   (the table entry is the queue's first page or the empty page; a queued page is
//!   owned by the heap).
//! * The passing tests assert that every branch of the protocol was reached (the steal
//!   gives up at step 2, undoes at step 4, succeeds; the owner waits, reclaims, ...).
//!
//! A finding: the loop in `free_slow_inner` that waits while the owner word is STOLEN is
//! never reached by the owner itself (`slow_path_enter` already waited for the stealer,
//! which never leaves a page STOLEN); it serves other threads' frees.
//!
//! # Why symmetric fences model `membarrier`
//! Production's owner pays no fence: `Heap::enter` is a plain store of `in_op` and a
//! compiler fence. The stealer's `membarrier()` makes the owner's CPU execute a full
//! barrier at *some* point of its instruction stream before `membarrier` returns. If that
//! point lies after the owner's `in_op` store, the store is visible to the stealer's
//! next load; if it lies before it, every load the owner makes after the store sees
//! what the stealer stored before `membarrier`. Either way, for every owner call: the
//! stealer sees its `in_op` store, or the call sees everything the stealer did before
//! the barrier. The model gives the owner a `fence(SeqCst)` right after its (SeqCst)
//! `in_op` store and the stealer a `fence(SeqCst)` for `membarrier`; the SC order of the
//! two fences yields exactly that disjunction (owner's fence first: the stealer sees
//! `in_op`; stealer's fence first: the owner sees the marks), and the Dekker-style mutual
//! exclusion checked here ("owner inside a call" vs. "stealer past step 4") uses nothing
//! else. The owner's fence is at least as strong as the real barrier wherever it falls.
//! Limits: loom's SC fences order *all* accesses before the earlier fence before all
//! accesses after the later one (stronger than C++ fences, about what the IPI's full
//! barrier gives on real hardware), and the kernel's side (that `membarrier` reaches
//! every thread, including ones not running) is taken on trust.

use crate::protocol::{self, Handshake, ABANDONED, NONE, STOLEN};
use crate::{get, set, Coverage};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use std::sync::atomic::{AtomicBool as GhostBool, AtomicU8 as GhostU8, Ordering as G};

/// The owner heap's address (`Heap::owner_word`; any value above `MARKER_LIMIT`).
const HEAP_O: usize = 0x1000;

// Table entries (`Heap::current` for P's class).
const EMPTY_PAGE: usize = 0;
const PAGE_P: usize = 1;
/// A second queued page ([`take_model`] only).
const PAGE_Q: usize = 2;

// P's blocks, as bits of a set.
const B0: u8 = 1;
const B1: u8 = 2;
const B2: u8 = 4;
const ALL: u8 = B0 | B1 | B2;
/// A block of a fresh page that `slow::take_page` carved (not P's).
const FRESH: u8 = 0x80;
/// The block of Q ([`take_model`]).
const Q_BLOCK: u8 = 0x40;

// Branches counted in `Coverage`.
const GAVE_UP_STEP2: &str = "stealer: gave up at step 2";
const UNDONE_STEP4: &str = "stealer: undid the marks at step 4";
const TOOK_P: &str = "stealer: took P";
const TOOK_NOTHING: &str = "stealer: took a heap with an empty queue";
const WAITED: &str = "owner: slow path waited while STEALING";
const MALLOC_EMPTY: &str = "owner: malloc found the empty page";
const FREE_UNDONE: &str = "owner: free slow path after an undone steal";
const FREE_RECLAIMED: &str = "owner: free took P back (reclaim)";
const REMOTE_WAITED: &str = "remote: free found STOLEN and waited";
const REMOTE_NOTIFIED: &str = "remote: free into abandoned P notified";
const RECHECK_NOTIFIED: &str = "publish_abandoned: re-check notified";

// Ghost: who holds P's private state.
const HOLDER_OWNER: u8 = 1;
const HOLDER_STEALER: u8 = 2;
const HOLDER_NOBODY: u8 = 3;

struct Page {
    /// `Page::free`, `Page::local_free`, `Page::used`: owner only.
    free: UnsafeCell<u8>,
    local_free: UnsafeCell<u8>,
    used: UnsafeCell<u32>,
    /// `Page::free_is_zero`: owner only.
    free_is_zero: UnsafeCell<bool>,
    owner: AtomicUsize,
    last_owner: AtomicUsize,
    /// `Page::thread_free` as a block set in a pointer value (never dereferenced; its
    /// LIFO and link words are checked in `collect.rs`).
    thread_free: AtomicPtr<u8>,
}

struct Heap {
    /// `Heap::handshake`: `in_op` and the steal state, run by production's code.
    handshake: Handshake,
    /// `current[class]` for P's class.
    table: AtomicUsize,
    /// `queues[class]`: P is its only possible member. Owner only (and the stealer past
    /// step 2, which reads it, and past step 4, which empties it).
    queue_has_p: UnsafeCell<bool>,
}

struct World {
    /// Which branches this execution took (outside loom, shared by all executions).
    coverage: std::sync::Arc<Coverage>,
    /// `drain::notify` (P's `drain_mask` bit and `DRAIN_PENDING`, as one flag).
    notified: AtomicBool,
    heap: Heap,
    page: Page,
    /// Ghost: who holds P's private state (`HOLDER_*`).
    holder: GhostU8,
    /// Ghost: an owner call is between reading P from the table (or P's owner word) and
    /// its last access to P's lists.
    owner_using_p: GhostBool,
    /// Ghost: the stealer is between its step 3 and the end of `try_steal`.
    stealing: GhostBool,
    /// The old undo (a negative control, [`undo_model`]): the table rebuilt with
    /// `Heap::set_current`, which rewrites the page's `used` word (its `CURRENT` flag).
    undo_rewrites_used: bool,
    /// [`take_model`]: a second page Q queued behind P, with one free block; its
    /// private state (`free`, `used`) and whether it is queued (owner only).
    q_queued: UnsafeCell<bool>,
    q_free: UnsafeCell<u8>,
    q_used: UnsafeCell<u32>,
    /// The old step 5 (a negative control, [`take_model`]): `queue_remove`'s
    /// `refresh_current` makes Q current once P is off the queue.
    take_republishes: bool,
}

fn lowest(set: u8) -> u8 {
    set & set.wrapping_neg()
}

impl World {
    fn new(coverage: &std::sync::Arc<Coverage>) -> World {
        World {
            coverage: coverage.clone(),
            notified: AtomicBool::new(false),
            heap: Heap {
                handshake: Handshake {
                    in_op: AtomicU32::new(0),
                    state: AtomicU32::new(NONE),
                },
                table: AtomicUsize::new(PAGE_P),
                queue_has_p: UnsafeCell::new(true),
            },
            page: Page {
                free: UnsafeCell::new(B0),
                local_free: UnsafeCell::new(0),
                used: UnsafeCell::new(2),
                free_is_zero: UnsafeCell::new(false),
                owner: AtomicUsize::new(HEAP_O),
                last_owner: AtomicUsize::new(0),
                thread_free: AtomicPtr::new(std::ptr::null_mut()),
            },
            holder: GhostU8::new(HOLDER_OWNER),
            owner_using_p: GhostBool::new(false),
            stealing: GhostBool::new(false),
            undo_rewrites_used: false,
            q_queued: UnsafeCell::new(false),
            q_free: UnsafeCell::new(Q_BLOCK),
            q_used: UnsafeCell::new(0),
            take_republishes: false,
        }
    }

    // ---- ghost checks ------------------------------------------------------------

    fn owner_begins_using_p(&self) {
        assert_eq!(
            self.holder.load(G::SeqCst),
            HOLDER_OWNER,
            "mutual exclusion: an owner call uses page P after the stealer took it"
        );
        self.owner_using_p.store(true, G::SeqCst);
    }

    fn owner_ends_using_p(&self) {
        self.owner_using_p.store(false, G::SeqCst);
    }

    // ---- owner side ----------------------------------------------------------------

    /// `Heap::enter` → `Handshake::enter`: `in_op += 1`, then the owner's share of the
    /// stealer's `membarrier` (`shim::owner_barrier`; module doc).
    fn enter(&self) {
        self.heap.handshake.enter();
    }

    /// `Heap::leave` → `Handshake::leave`.
    fn leave(&self) {
        self.heap.handshake.leave();
    }

    /// `Handshake::wait_while_stealing`. (Coverage: whether a steal was past its step 2
    /// when the owner got here, from ghost state, so that counting adds no step to the
    /// interleavings loom explores.)
    fn wait_while_stealing(&self) {
        if self.stealing.load(G::SeqCst) {
            self.coverage.hit(WAITED);
        }
        self.heap.handshake.wait_while_stealing();
    }

    /// `slow::slow_path_enter` (the activity count is left out).
    fn slow_path_enter(&self) {
        self.enter();
        self.wait_while_stealing();
    }

    /// `alloc::malloc_in` with `malloc_local_or_slow` and `malloc_slow_and_leave`.
    fn malloc(&self) -> u8 {
        self.enter();
        // `table.get_unchecked(..).load(Relaxed)`
        let page = self.heap.table.load(Ordering::Relaxed);
        if page == PAGE_P {
            self.owner_begins_using_p();
            let p = &self.page;
            // `block = (*page).free; if !null { pop }`
            let free = get(&p.free);
            if free != 0 {
                let block = lowest(free);
                set(&p.free, free & !block);
                set(&p.used, get(&p.used) + 1);
                self.owner_ends_using_p();
                self.leave();
                return block;
            }
            // `malloc_local_or_slow`: take local_free as the free list, pop.
            let local = get(&p.local_free);
            if local != 0 {
                let block = lowest(local);
                set(&p.local_free, 0);
                set(&p.free, local & !block);
                set(&p.free_is_zero, false);
                set(&p.used, get(&p.used) + 1);
                self.owner_ends_using_p();
                self.leave();
                return block;
            }
            self.owner_ends_using_p();
        }
        if page == PAGE_Q {
            // A pop from Q (its free list holds Q_BLOCK until popped).
            let free = get(&self.q_free);
            if free != 0 {
                set(&self.q_free, 0);
                set(&self.q_used, get(&self.q_used) + 1);
                self.leave();
                return Q_BLOCK;
            }
        }
        // The empty page's lists are null and never written: nothing to model.
        if page == EMPTY_PAGE {
            self.coverage.hit(MALLOC_EMPTY);
        }
        // `malloc_slow_and_leave`
        let block = self.malloc_slow();
        self.leave();
        block
    }

    /// `slow::malloc_slow` → `find_page` (→ `abandon::abandon` / `slow::take_page`).
    fn malloc_slow(&self) -> u8 {
        self.slow_path_enter();
        let block = if get(&self.heap.queue_has_p) {
            self.owner_begins_using_p();
            let p = &self.page;
            self.gather_frees();
            let free = get(&p.free);
            if free != 0 {
                let block = lowest(free);
                set(&p.free, free & !block);
                set(&p.used, get(&p.used) + 1);
                self.owner_ends_using_p();
                block
            } else {
                // Full (fully carved): `queue_remove` + `abandon::abandon`. (Production
                // keeps the last few full pages of a class instead, see
                // `FULL_PAGE_SLICES_KEPT`: P then stays queued and owned while the
                // table names a fresh page, a state of P the `FastPaths` program
                // covers already, with P named by the table, which only adds owner
                // accesses. The model takes the branch that changes P's owner.)
                set(&self.heap.queue_has_p, false);
                self.heap.table.store(EMPTY_PAGE, Ordering::Relaxed); // refresh_current
                assert_ne!(get(&p.used), 0);
                self.page.last_owner.store(HEAP_O, Ordering::Relaxed);
                self.owner_ends_using_p();
                self.holder.store(HOLDER_NOBODY, G::SeqCst);
                self.publish();
                FRESH // `slow::take_page`: a fresh span
            }
        } else {
            FRESH // `slow::take_page`
        };
        self.leave();
        block
    }

    /// `Page::gather_frees` on P by whoever holds it: `take_remote_frees`
    /// (`protocol::take_list`; remote frees to `local_free`), then take `local_free` as
    /// the free list if `free` is empty.
    fn gather_frees(&self) {
        let p = &self.page;
        let remote = protocol::take_list(&p.thread_free) as usize as u8;
        if remote != 0 {
            let local = get(&p.local_free);
            assert_eq!((local | get(&p.free)) & remote, 0, "block collected twice");
            set(&p.local_free, local | remote);
            set(&p.used, get(&p.used) - remote.count_ones());
        }
        if get(&p.free) == 0 {
            let local = get(&p.local_free);
            if local != 0 {
                set(&p.free, local);
                set(&p.local_free, 0);
                set(&p.free_is_zero, false);
            }
        }
    }

    /// `abandon::publish` by P's holder: `protocol::publish_abandoned` (publish
    /// ABANDONED, re-check for remote frees), notify if it says so.
    fn publish(&self) {
        if protocol::publish_abandoned(&self.page.owner, &self.page.thread_free) {
            self.coverage.hit(RECHECK_NOTIFIED);
            self.notified.store(true, Ordering::SeqCst);
        }
    }

    /// `free::free` of a block of P by another thread (whose heap is not O):
    /// `free_slow_inner`, with its wait while P is STOLEN, then `drain::free_remote`
    /// (`protocol::push_remote`, `must_notify_after_push`).
    fn remote_free(&self, block: u8) {
        let p = &self.page;
        let mut owner = p.owner.load(Ordering::Acquire);
        while owner == STOLEN {
            self.coverage.hit(REMOTE_WAITED);
            thread::yield_now();
            owner = p.owner.load(Ordering::Acquire);
        }
        assert!(owner == HEAP_O || owner == ABANDONED, "owner word {owner}");
        // `drain::free_remote` → `Page::free_remote`: one CAS push.
        let head = protocol::push_remote(&p.thread_free, |head| {
            (head as usize | block as usize) as *mut u8
        });
        if protocol::must_notify_after_push(&p.owner, head.is_null()) {
            self.coverage.hit(REMOTE_NOTIFIED);
            self.notified.store(true, Ordering::SeqCst);
        }
    }

    /// `Page::free_local` on P (the caller uses P).
    fn free_local(&self, block: u8) {
        let p = &self.page;
        let local = get(&p.local_free);
        assert_eq!((local | get(&p.free)) & block, 0, "double free of a block");
        set(&p.local_free, local | block);
        let used = get(&p.used) - 1;
        set(&p.used, used);
        // The scenario keeps B2 out, so `page_emptied` is never reached.
        assert_ne!(used, 0);
    }

    /// `free::free` → `free_slow_and_leave` → `slow::free_slow` → `free_slow_inner`.
    fn free(&self, block: u8) {
        self.enter();
        if self.page.owner.load(Ordering::Relaxed) == HEAP_O {
            self.owner_begins_using_p();
            self.free_local(block);
            self.owner_ends_using_p();
            self.leave();
            return;
        }
        // `free_slow`
        self.slow_path_enter();
        // `free_slow_inner`
        let mut owner = self.page.owner.load(Ordering::Acquire);
        while owner == STOLEN {
            // Unreachable for the owner itself: `slow_path_enter` waited for the stealer,
            // who never leaves P STOLEN. The loop is for other threads (`remote_free`).
            thread::yield_now();
            owner = self.page.owner.load(Ordering::Acquire);
        }
        if owner == HEAP_O {
            // "the fast path raced with a steal that was undone"
            self.coverage.hit(FREE_UNDONE);
            self.owner_begins_using_p();
            self.free_local(block);
            self.owner_ends_using_p();
        } else if owner == ABANDONED && self.page.last_owner.load(Ordering::Relaxed) == HEAP_O {
            let claimed = protocol::claim(&self.page.owner, ABANDONED, HEAP_O);
            assert!(claimed, "nobody else claims P in this model");
            self.coverage.hit(FREE_RECLAIMED);
            assert_eq!(
                self.holder.swap(HOLDER_OWNER, G::SeqCst),
                HOLDER_NOBODY,
                "P claimed while someone holds it"
            );
            // `reclaim`: not listed in this model; `queue_push_back` into an empty
            // queue is `queue_push_front`, which makes P current.
            set(&self.heap.queue_has_p, true);
            self.heap.table.store(PAGE_P, Ordering::Relaxed);
            self.owner_begins_using_p();
            self.free_local(block);
            self.owner_ends_using_p();
        } else {
            panic!("unexpected owner word {owner} for the owner's own block");
        }
        self.leave(); // free_slow's
        self.leave(); // free's
    }

    // ---- stealer side ----------------------------------------------------------------

    /// `takeover::try_take_over`: `Handshake::try_steal` (production's steps 1, 2, 4
    /// and the state changes) with this heap's marks, undo and take-over as its steps 3,
    /// 4's undo and 5.
    fn try_steal(&self) -> bool {
        let h = &self.heap;
        let marked = GhostBool::new(false);
        let queued_at_mark = GhostBool::new(false);
        // 3. Mark every queued page STOLEN; `clear_tables`.
        let mark = || {
            marked.store(true, G::SeqCst);
            self.stealing.store(true, G::SeqCst);
            let queued = get(&h.queue_has_p);
            queued_at_mark.store(queued, G::SeqCst);
            if queued {
                protocol::mark_stolen(&self.page.owner);
            }
            h.table.store(EMPTY_PAGE, Ordering::Relaxed);
        };
        // 4's undo: the owner words back, `Heap::restore_current` (the table entry
        // only: the owner may be inside a fast path on P, writing `used`).
        let undo = || {
            self.coverage.hit(UNDONE_STEP4);
            let queued = queued_at_mark.load(G::SeqCst);
            if queued {
                protocol::unmark_stolen(&self.page.owner, HEAP_O);
                if self.undo_rewrites_used {
                    // The old `refresh_current` → `set_current` → `set_is_current(true)`:
                    // `used.store(used() | CURRENT)` (the flag is not modelled).
                    set(&self.page.used, get(&self.page.used));
                }
            }
            h.table
                .store(if queued { PAGE_P } else { EMPTY_PAGE }, Ordering::Relaxed);
        };
        // 5. `heap::abandon_all`: `clear_tables`, then per queued page `queue_remove` and
        // `abandon::abandon`.
        let take = || {
            h.table.store(EMPTY_PAGE, Ordering::Relaxed);
            if get(&h.queue_has_p) {
                assert!(
                    !self.owner_using_p.load(G::SeqCst),
                    "mutual exclusion: the stealer abandons P while an owner call uses it"
                );
                assert_eq!(
                    self.holder.swap(HOLDER_STEALER, G::SeqCst),
                    HOLDER_OWNER,
                    "the stealer takes P while someone else holds it"
                );
                self.coverage.hit(TOOK_P);
                // `queue_take_off`: the table stays at the empty page. (The old
                // `queue_remove` made the next queued page current.)
                set(&h.queue_has_p, false);
                if self.take_republishes && get(&self.q_queued) {
                    h.table.store(PAGE_Q, Ordering::Relaxed);
                }
                // `abandon::abandon` → `Page::gather_frees`
                self.gather_frees();
                let p = &self.page;
                if get(&p.used) == 0 {
                    // `free_span` (cannot happen here: the owner holds a block of P).
                    self.holder.store(HOLDER_NOBODY, G::SeqCst);
                    protocol::release_free(&p.owner);
                } else {
                    // has_room → listed (the abandoned list is not modelled)
                    p.last_owner.store(HEAP_O, Ordering::Relaxed);
                    self.holder.store(HOLDER_NOBODY, G::SeqCst);
                    self.publish();
                }
            } else {
                self.coverage.hit(TOOK_NOTHING);
            }
            if get(&self.q_queued) {
                set(&self.q_queued, false);
                h.table.store(EMPTY_PAGE, Ordering::Relaxed);
                // `abandon::abandon(Q)`: `set_is_current(false)`, `gather_frees`.
                set(&self.q_used, get(&self.q_used));
                let _ = get(&self.q_free);
            }
        };
        let took = h.handshake.try_steal(mark, undo, take);
        self.stealing.store(false, G::SeqCst);
        if !took && !marked.load(G::SeqCst) {
            self.coverage.hit(GAVE_UP_STEP2);
        }
        took
    }

    // ---- final checks ----------------------------------------------------------------

    /// After the threads finished: no stranded remote free, conservation of blocks, and
    /// the heap invariants.
    fn check_final(&self, held: u8) {
        let p = &self.page;
        let (free, local, used) = (get(&p.free), get(&p.local_free), get(&p.used));
        let remote = p.thread_free.load(Ordering::Relaxed) as usize as u8;
        let held_p = held & ALL;
        if p.owner.load(Ordering::Relaxed) == ABANDONED && remote != 0 {
            assert!(
                self.notified.load(Ordering::Relaxed),
                "remote free stranded: P is abandoned with remote frees and no notification"
            );
        }
        assert_eq!(free & local, 0, "a block on two lists");
        assert_eq!((free | local) & remote, 0, "a block on two lists");
        assert_eq!(
            held_p & (free | local | remote),
            0,
            "a block both held and free"
        );
        assert_eq!(held_p | free | local | remote, ALL, "a block of P was lost");
        assert_eq!(
            used,
            (held_p | remote).count_ones(),
            "used does not count the held blocks"
        );
        let queued = get(&self.heap.queue_has_p);
        let table = self.heap.table.load(Ordering::Relaxed);
        let owner = p.owner.load(Ordering::Relaxed);
        assert_eq!(table, if queued { PAGE_P } else { EMPTY_PAGE });
        assert_eq!(self.heap.handshake.in_op.load(Ordering::Relaxed), 0);
        assert_eq!(self.heap.handshake.state.load(Ordering::Relaxed), NONE);
        if queued {
            assert_eq!(owner, HEAP_O, "a queued page not owned by its heap");
            assert_eq!(self.holder.load(G::SeqCst), HOLDER_OWNER);
        } else {
            assert_eq!(owner, ABANDONED, "P is neither queued nor abandoned");
            assert_eq!(self.holder.load(G::SeqCst), HOLDER_NOBODY);
        }
    }
}

/// What the owner thread runs against the stealer.
#[derive(Clone, Copy, Debug)]
pub enum Owner {
    /// `malloc` (pops B0), `free(B1)`, `malloc` (`malloc_local_or_slow` takes B1 back),
    /// `malloc` (P is full: the slow path abandons it and takes a fresh page).
    FourCalls,
    /// `malloc` and `free(B1)` only: unless a steal completed first, both run only the
    /// fast path, so a failure can only come from the fast-path window.
    FastPaths,
    /// No call: the idle thread the purger is meant for. With a remote freer this is the
    /// only owner program the model runs: two threads that spin on `yield_now` (the
    /// owner in `wait_while_stealing`, the freer on STOLEN) make loom explore schedules
    /// that never run the stealer (it schedules unfairly after a yield) and it gives up.
    Idle,
}

/// The steal model: the owner's calls against one `try_steal`; with `remote`, a third
/// thread frees `B2` (handed to it by the owner earlier) meanwhile.
/// Faults (negative controls) are put in force around it with
/// `protocol::shim::with_faults`.
pub fn model(owner: Owner, remote: bool, coverage: &std::sync::Arc<Coverage>) {
    let world = Arc::new(World::new(coverage));
    let stealer = {
        let world = world.clone();
        thread::spawn(move || world.try_steal())
    };
    assert!(!remote || matches!(owner, Owner::Idle), "see Owner::Idle");
    let remote = remote.then(|| {
        let world = world.clone();
        thread::spawn(move || world.remote_free(B2))
    });
    // B1 and B2 are already handed out (B2 to the remote thread if there is one).
    let mut held = if remote.is_some() { B1 } else { B1 | B2 };
    if !matches!(owner, Owner::Idle) {
        held |= world.malloc(); // fast path: B0
        world.free(B1); // fast path: local_free
        held &= !B1;
    }
    if let Owner::FourCalls = owner {
        held |= world.malloc(); // malloc_local_or_slow: B1
        held |= world.malloc(); // slow path: P is full → abandon it, fresh page
    }
    stealer.join().unwrap();
    if let Some(remote) = remote {
        remote.join().unwrap();
    }
    world.check_final(held);
}

/// The owner's two fast paths ([`Owner::FastPaths`]) against one `try_steal` whose
/// undo rebuilds the table entry as production once did (`rewrite_used`) or does
/// (`Heap::restore_current`, the table entry only).
///
/// The interleaving (a bug, sqlite under `EBB_PURGE_DELAY=0`, where the purger tries a
/// takeover on every pass, busy heap or not): step 2 sees `in_op == 0`; the owner
/// enters `malloc`, reads P from the table before the marks; step 4 sees `in_op == 1`
/// and undoes, and `Heap::refresh_current` → `set_current` → `set_is_current(true)`
/// loads P's `used` word and stores it back with the flag while the owner's pop
/// increments it: the increment is lost. A count one too low later let a full page go
/// back to the arena with a live block in it (`free(...): block is not in use (double
/// free?)`, or a crash on memory handed out twice). Loom reports the race on `used`.
pub fn undo_model(rewrite_used: bool, coverage: &std::sync::Arc<Coverage>) {
    let mut world = World::new(coverage);
    world.undo_rewrites_used = rewrite_used;
    let world = Arc::new(world);
    let stealer = {
        let world = world.clone();
        thread::spawn(move || world.try_steal())
    };
    let mut held = B1 | B2;
    held |= world.malloc(); // fast path: B0
    world.free(B1); // fast path: local_free
    held &= !B1;
    stealer.join().unwrap();
    world.check_final(held);
}

/// The owner's two fast paths against one `try_steal` of a heap whose queue holds P
/// and, behind it, Q with a free block; step 5 as production does it
/// (`queue::queue_take_off`: the table stays at the empty page) or as it once did
/// (`republish`: `queue_remove` → `refresh_current` made Q current once P was off).
///
/// The interleaving (a bug, sqlite under `EBB_PURGE_DELAY=0`): steps 2 and 4 see
/// `in_op == 0`; step 5 takes P off the queue and the table names Q; the owner's
/// `malloc` (which trusts the table: the proof of step 4 is that every call sees the
/// *marks*) pops from Q while the stealer abandons Q. Loom reports the race on Q's
/// lists and count; in production a lost count let a page go back to the arena under
/// a live block.
pub fn take_model(republish: bool, coverage: &std::sync::Arc<Coverage>) {
    let mut world = World::new(coverage);
    world.take_republishes = republish;
    world.q_queued = UnsafeCell::new(true);
    let world = Arc::new(world);
    let stealer = {
        let world = world.clone();
        thread::spawn(move || world.try_steal())
    };
    let mut held = B1 | B2;
    held |= world.malloc(); // fast path: B0 (or Q's block, or a fresh one)
    world.free(B1); // fast path: local_free
    held &= !B1;
    stealer.join().unwrap();
    world.check_final(held);
}

/// `alloc::alloc_zeroed` against one `try_steal`. The owner's only call pops `B0`, the
/// last block on `free` (`B1` is on `local_free`), and then reads `P.free_is_zero` to
/// decide how much to clear: after `malloc` returned, outside the `in_op` window, as
/// production does (`inside_window == false`), or before `leave` (the proposed fix). A
/// steal that completes in between abandons P, and `Page::collect` in step 5 moves
/// `local_free` to `free` and writes `free_is_zero`: loom reports the race.
///
/// The interleaving in production (a bug): thread T calls `calloc`; `malloc_in` pops the
/// last block of a non-zeroed `free` list of P (so `free_is_zero == false`) and `leave`s
/// (`in_op == 0`); T is preempted before `alloc_zeroed` reads the flag. T has run no
/// slow path for the purge delay, so the purger steals its heap: steps 2 and 4 see
/// `in_op == 0`, step 5 abandons P (it has room: not fully carved) and lists it. Thread
/// U's `malloc_slow` → `take_page` claims P, `find_page` finds `free` empty and `extend`s
/// it, writing `free_is_zero = is_zero` (true for a span from decommitted memory). T
/// resumes, reads `true`, clears only the first word, and `calloc` returns a block with
/// stale contents. Besides, the unsynchronised read is a data race (undefined behaviour).
/// Fixed in production as modelled with `inside_window == true`: `alloc_zeroed` does
/// `enter`; check `owner == heap`; read the flag; `leave` (and clears the whole block if
/// the page is no longer ours). `inside_window == false` is the old code, kept as a
/// negative control.
pub fn alloc_zeroed_model(inside_window: bool, coverage: &std::sync::Arc<Coverage>) {
    let world = Arc::new(World::new(coverage));
    // P: B0 on free (carved from zeroed memory), B1 on local_free, B2 out.
    set(&world.page.local_free, B1);
    set(&world.page.used, 1);
    set(&world.page.free_is_zero, true);
    let stealer = {
        let world = world.clone();
        thread::spawn(move || world.try_steal())
    };
    let w = &*world;
    // `alloc_zeroed` → `alloc` → `malloc` → `malloc_in`, fast path.
    w.enter();
    if w.heap.table.load(Ordering::Relaxed) != PAGE_P {
        // A steal completed first: the slow path takes another page (not modelled).
        w.leave();
        stealer.join().unwrap();
        return;
    }
    w.owner_begins_using_p();
    let free = get(&w.page.free);
    let block = lowest(free);
    set(&w.page.free, free & !block);
    set(&w.page.used, get(&w.page.used) + 1);
    w.owner_ends_using_p();
    w.leave();
    if inside_window {
        // `alloc_zeroed`: enter; if `owner & !CHECK_TAG == heap` read `free_is_zero`; leave.
        w.enter();
        if w.page.owner.load(Ordering::Relaxed) == HEAP_O {
            w.owner_begins_using_p();
            assert!(get(&w.page.free_is_zero), "B0 came from a zeroed list");
            w.owner_ends_using_p();
        }
        w.leave();
    } else {
        // `alloc_zeroed`: `match (*page).owner.load(Relaxed) { .., _ => if (*page).free_is_zero`
        let _owner = w.page.owner.load(Ordering::Relaxed);
        let _zero = get(&w.page.free_is_zero);
    }
    stealer.join().unwrap();
}

#[cfg(test)]
#[path = "steal_tests.rs"]
mod tests;
