//! The hand-off protocols, written once: every step at which a page's private state
//! passes between threads without a lock, with its memory orderings and re-checks.
//!
//! Production calls these functions (`span/page.rs`, `handoff/`, `front/`), and so do
//! the loom models in `crates/ebb-loom`, which compile this file (and `shim.rs`) with
//! `cfg(loom)`: the orderings checked there are the ones that run here. The functions
//! take the atomics they work on (a page's owner word and remote-free list head, a
//! heap's handshake words) rather than the structures holding them, so that the models
//! can hold them in loom's types; what a step does to the private state it hands over
//! (the free lists, the queues) is the caller's, passed in as a closure where it sits
//! inside a step.
//!
//! This module depends on nothing of the crate but `os` (through the shim, for
//! `membarrier` and `sched_yield`); the page descriptor's owner-word markers are
//! defined here because the protocols are what gives them meaning.
//!
//! # Remote frees into abandoned pages (a Dekker pair)
//! - freer: [`push_remote`] (a SeqCst CAS), then [`must_notify_after_push`] (a SeqCst
//!   load of the owner word): the list was empty and the page is abandoned → notify.
//! - abandoner or drainer letting go: [`publish_abandoned`] (SeqCst store of
//!   `ABANDONED`, then a SeqCst load of the list): the list is not empty → notify.
//!
//! With both sides SeqCst, at least one sees the other, so a push that saw the page
//! owned is seen by the owner's re-check. Every drainer empties the list
//! ([`take_list`]) before it lets go, and every push onto an empty list of an abandoned
//! page notifies ([`signal`] / [`take_signal`]), so no remote free is left without a
//! pending notification. Ownership of an abandoned page is taken with [`claim`].
//!
//! # Idle-heap takeover (an asymmetric Dekker handshake)
//! See [`Handshake`]: the owner pays two plain stores per allocator call, the stealer
//! two `membarrier` calls.
//!
//! # Which heaps the idle walk visits (a Dekker pair, under one lock)
//! See [`holder_must_list`] and [`holder_may_unlist`]: a heap that holds pages is
//! never off the list the walk reads, and a heap that holds none leaves it.

pub mod shim;

use shim::{
    dekker_fence, full_fence, injected, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize,
    Fault, Ordering,
};

// ---------------------------------------------------------------------------------
// Owner words of a page descriptor

/// The span's slices are free in their segment.
pub const FREE: usize = 0;
/// Nobody owns the page: its thread exited or it filled up. Any thread may claim it.
pub const ABANDONED: usize = 1;
/// A drainer (`handoff::drain`) briefly owns an abandoned page, to take its remote
/// frees in; also the word a heap leaves in a page it is giving back to the arena
/// (`front::slow::retire`), between leaving its queue and `free_span` writing `FREE`.
pub const DRAINING: usize = 2;
/// A single-block span for a large block; any thread frees it directly.
pub const LARGE: usize = 3;
/// The descriptor of a huge block (its own mapping; see `span/huge.rs`).
pub const HUGE: usize = 4;
/// A stealer is taking the page from its idle owner (see [`Handshake`]); frees wait.
pub const STOLEN: usize = 5;
/// Owner words below this are markers, not heaps: heap addresses are page aligned, so
/// never below it (asserted where heaps are made), and `CHECK_TAG` fits under it.
pub const MARKER_LIMIT: usize = 16;
const _: () = assert!(STOLEN < MARKER_LIMIT);

// ---------------------------------------------------------------------------------
// Remote frees, abandon, drain, claim

/// A freer's push of one block on a page's remote-free list (`thread_free`).
/// `link(head)` writes the block's link word to lead to the list whose head word is
/// `head` and returns the new head word; it may run more than once (the CAS retries).
/// Returns the head word seen before the push.
///
/// SeqCst, not AcqRel: the push is one side of the Dekker pair with
/// [`publish_abandoned`] (push, then load the owner word), and only SeqCst operations
/// take part in the single total order that pair relies on (the loom model strands a
/// block with `Fault::WeakRemotePush`). Same instruction on x86-64 and AArch64.
#[inline(always)]
pub fn push_remote<T>(list: &AtomicPtr<T>, mut link: impl FnMut(*mut T) -> *mut T) -> *mut T {
    let success = if injected(Fault::WeakRemotePush) {
        Ordering::AcqRel
    } else {
        Ordering::SeqCst
    };
    let mut head = list.load(Ordering::Relaxed);
    loop {
        let new = link(head);
        match list.compare_exchange_weak(head, new, success, Ordering::Relaxed) {
            Ok(_) => return head,
            Err(current) => head = current,
        }
    }
}

/// After [`push_remote`]: true if the freer must notify a drainer, i.e. the list was
/// empty (`list_was_empty`) and the page is abandoned. The SeqCst load of the owner
/// word is the freer's second half of the Dekker pair.
#[inline(always)]
pub fn must_notify_after_push(owner: &AtomicUsize, list_was_empty: bool) -> bool {
    if !injected(Fault::WeakRemotePush) {
        dekker_fence();
    }
    list_was_empty && owner.load(Ordering::SeqCst) == ABANDONED
}

/// Let go of a page as abandoned, then re-check its remote-free list: true if frees
/// raced with the hand-over and the caller must notify a drainer. The caller owns the
/// page up to this call and must have taken the list in (`take_list`) since it last
/// could be pushed onto unseen.
#[inline]
pub fn publish_abandoned<T>(owner: &AtomicUsize, list: &AtomicPtr<T>) -> bool {
    owner.store(ABANDONED, Ordering::SeqCst);
    dekker_fence();
    if injected(Fault::SkipPublishRecheck) {
        return false;
    }
    !list.load(Ordering::SeqCst).is_null()
}

/// Take ownership of a page whose owner word is `from` (`ABANDONED`), writing `to` (a
/// heap's owner word, or `DRAINING`). Acquire: the previous owner's writes to the
/// private state, published by its SeqCst store, are visible on success.
#[inline]
pub fn claim(owner: &AtomicUsize, from: usize, to: usize) -> bool {
    owner
        .compare_exchange(from, to, Ordering::Acquire, Ordering::Relaxed)
        .is_ok()
}

/// Take a page's whole remote-free list (owner only). Null if it is empty. Acquire:
/// the link words the freers wrote before their pushes are visible.
#[inline]
pub fn take_list<T>(list: &AtomicPtr<T>) -> *mut T {
    if list.load(Ordering::Relaxed).is_null() {
        return core::ptr::null_mut();
    }
    list.swap(core::ptr::null_mut(), Ordering::Acquire)
}

/// Give a page's span back (owner word `FREE`), publishing the descriptor writes made
/// before (Release).
#[inline]
pub fn release_free(owner: &AtomicUsize) {
    owner.store(FREE, Ordering::Release);
}

/// Notify a drainer: set the page's bit in its segment's mask word, then raise the
/// process-wide flag (SeqCst, so a drainer that clears the flag afterwards finds the
/// bit).
#[inline]
pub fn signal(mask_word: &AtomicU64, bit: u64, pending: &AtomicBool) {
    mask_word.fetch_or(bit, Ordering::Release);
    pending.store(true, Ordering::SeqCst);
}

/// A drainer's first step: true if some page was signalled since the last call (the
/// flag is cleared).
#[inline]
pub fn take_signal(pending: &AtomicBool) -> bool {
    pending.load(Ordering::Relaxed) && pending.swap(false, Ordering::Acquire)
}

/// A drainer's second step, per mask word: the bits signalled (cleared). A word read
/// as zero is left alone: a drainer reads every word of every segment, and swapping
/// each took every mask line for writing (mixed-c: the swaps were half of
/// `drain_notified`'s samples). The flag's swap in `take_signal` read the flag a
/// signaller raised after setting its bit, so that bit is visible to this load (as it
/// was to the swap; a bit no flag swap synchronised with stays set for the next drain
/// either way).
#[inline]
pub fn take_signalled(mask_word: &AtomicU64) -> u64 {
    if mask_word.load(Ordering::Relaxed) == 0 {
        return 0;
    }
    mask_word.swap(0, Ordering::Acquire)
}

// ---------------------------------------------------------------------------------
// The idle-heap takeover

/// `Handshake::state`: nobody is stealing.
pub const NONE: u32 = 0;
/// A stealer is working on the heap; the owner's slow paths wait.
pub const STEALING: u32 = 1;
/// The heap's thread exited; nobody may steal.
pub const DEAD: u32 = 2;

/// The two words of a heap that let a stealer take its pages while the owner thread is
/// alive: the owner's nesting count of allocator calls, and the steal state.
///
/// # Protocol (stealer `S`, owner `O`)
/// 1. `S` claims the heap (`state`: NONE → STEALING). `O`'s slow paths wait while
///    STEALING ([`Handshake::wait_while_stealing`]), so from here on `O` can only run
///    fast paths, which never change the queues.
/// 2. `membarrier()`, then `S` reads `in_op`. Non-zero: `O` is inside a call (maybe a
///    slow path that started before step 1): give up. Zero: `O` is at most running fast
///    paths that started after step 1.
/// 3. `S` marks (`mark`): the owner word of every queued page becomes `STOLEN`
///    ([`mark_stolen`]), and every table entry the empty page. A fast path that starts
///    after the marks are visible goes to a slow path (malloc finds no block; free
///    finds a foreign owner) and waits there.
/// 4. `membarrier()`, then `S` reads `in_op` again. Non-zero: a fast path may be using
///    a page it read before the marks: undo them (`undo`) and give up. Zero: every call
///    `O` makes from now on sees the marks, so `S` has the pages to itself.
/// 5. `S` takes the pages (`take`: abandon every one); STEALING → NONE.
///
/// Why the reads are sound: `membarrier` makes every running thread of the process pass
/// a full barrier before it returns. If `O`'s `in_op` store was before that barrier, `S`
/// sees it; if after, `O`'s later loads see every store `S` made before the call. A
/// thread that is not running passes through the scheduler's barriers instead.
///
/// Construct it with both words zero (`NONE`); its fields are public so that a `const`
/// heap can be built (loom's atomics have no `const fn new`).
#[repr(C)]
pub struct Handshake {
    /// Nesting count of allocator calls the owner is inside (fast paths included).
    /// Written only by the owner, with plain increments; read by the stealer.
    pub in_op: AtomicU32,
    /// `NONE`, `STEALING` or `DEAD`.
    pub state: AtomicU32,
}

impl Handshake {
    /// Enter an allocator call (owner only; nests).
    #[inline(always)]
    pub fn enter(&self) {
        self.in_op.store(
            self.in_op.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Relaxed,
        );
        // Keep the page accesses that follow after the store (the stealer's membarrier
        // takes care of the hardware ordering).
        shim::owner_barrier();
    }

    /// Leave an allocator call.
    #[inline(always)]
    pub fn leave(&self) {
        self.in_op.store(
            self.in_op.load(Ordering::Relaxed).wrapping_sub(1),
            Ordering::Release,
        );
    }

    /// Owner side, on slow paths: wait while a stealer works on the heap.
    #[inline]
    pub fn wait_while_stealing(&self) {
        while self.state.load(Ordering::Acquire) == STEALING {
            shim::yield_now();
        }
    }

    /// Owner side, at thread exit: wait for a stealer to finish, then make sure none
    /// starts.
    pub fn mark_dead(&self) {
        while self
            .state
            .compare_exchange(NONE, DEAD, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            shim::yield_now();
        }
    }

    /// Stealer side: run steps 1-5 above. True if the pages were taken.
    pub fn try_steal(&self, mark: impl FnOnce(), undo: impl FnOnce(), take: impl FnOnce()) -> bool {
        // 1.
        if self
            .state
            .compare_exchange(NONE, STEALING, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        // 2.
        if !shim::stealer_barrier()
            || (!injected(Fault::SkipStep2Check) && self.in_op.load(Ordering::SeqCst) != 0)
        {
            self.state.store(NONE, Ordering::Release);
            return false;
        }
        // 3.
        mark();
        // 4.
        if !shim::stealer_barrier()
            || (!injected(Fault::SkipStep4Check) && self.in_op.load(Ordering::SeqCst) != 0)
        {
            undo();
            self.state.store(NONE, Ordering::Release);
            return false;
        }
        // 5.
        take();
        self.state.store(NONE, Ordering::Release);
        true
    }
}

/// Step 3 for one page: its owner word becomes `STOLEN`.
#[inline]
pub fn mark_stolen(owner: &AtomicUsize) {
    owner.store(STOLEN, Ordering::SeqCst);
}

/// Step 4's undo for one page: its owner word is the heap's again.
#[inline]
pub fn unmark_stolen(owner: &AtomicUsize, owner_word: usize) {
    owner.store(owner_word, Ordering::SeqCst);
}

// ---------------------------------------------------------------------------------
// Which heaps the idle walk visits

/// Protocol H (the registry's holders list, `process/registry.rs`). The purger's walk
/// for idle heaps visits only heaps on the holders list; a heap's `listed` flag says
/// "the walk will see me". Owner `O` (its count of held pages), walker `W` (holds the
/// registry lock for its whole pass):
/// - H1 (`O`): after storing its page count 0 → 1, [`holder_must_list`]: a full fence,
///   then read `listed`; false → take the registry lock, set `listed`, link the heap
///   if it is not linked.
/// - H2 (`W`): a listed heap whose count read 0: [`holder_may_unlist`] clears
///   `listed`, a full fence, re-reads the count; still 0 → unlink, else set `listed`
///   again and visit.
///
/// Why a heap with pages is never off the list: H1 and H2 are the two sides of a
/// store-buffering pair (store, fence, load of the other's location), so at least one
/// sees the other's store. If `W`'s re-read misses `O`'s count, `O`'s read of
/// `listed` sees `W`'s clear and `O` links the heap again (waiting for the lock `W`
/// holds, so after the unlink). A heap's `listed` flag is true while it is linked
/// (`listed ⇒ linked`), except inside H2 under the lock. The model:
/// `crates/ebb-loom/src/holders.rs`.
///
/// True if the owner must list its heap (take the lock).
#[inline]
pub fn holder_must_list(listed: &AtomicBool) -> bool {
    if !injected(Fault::SkipHolderFence) {
        full_fence();
    }
    !listed.load(Ordering::Relaxed)
}

/// Step H2 for a linked heap whose page count the walker read as 0: true if it may
/// leave the list (`count` still 0 after `listed` was cleared); else `listed` is set
/// again. Under the registry lock.
#[inline]
pub fn holder_may_unlist(listed: &AtomicBool, count: &AtomicUsize) -> bool {
    listed.store(false, Ordering::Relaxed);
    full_fence();
    if count.load(Ordering::Relaxed) != 0 {
        listed.store(true, Ordering::Relaxed);
        return false;
    }
    true
}
