//! Heaps: one per thread, holding that thread's pages per size class; making one on
//! a thread's first allocation, and letting go of it at thread exit.
//!
//! A heap owns a queue of pages for each size class (`queue.rs`); the first page of a
//! queue is the one the malloc fast path allocates from (`current[class]`, the class
//! found through the per-size tables `small_class`/`small_class_c` up to 1 KiB). A page
//! that fills up stays in the queue while it is among the few full pages the heap keeps
//! (`slow::FULL_PAGE_SLICES_KEPT`); older full pages are abandoned (`handoff::abandon`):
//! blocks freed into them later make them claimable by any thread, and if the former
//! owner frees into one first, it takes it back (within `queue::RECLAIM_QUEUE_LIMIT`).
//!
//! Heap memory comes from the OS directly (one heap per page-rounded mapping, reused
//! after thread exit through the registry), never from a global allocator.

use crate::counters::COUNTERS;
use crate::front::queue::queue_take_off;
use crate::front::{takeover, tls};
use crate::handoff::abandon;
use crate::os;
use crate::process::{self, registry};
use crate::protocol::{Handshake, DEAD, NONE};
use crate::size_class::{small_classes, CLASS_COUNT, SMALL_COUNT};
use crate::span::deadline;
use crate::span::page::{empty_page, Page, PageList, CHECK_TAG, MARKER_LIMIT};
use core::cell::UnsafeCell;
use core::ptr::null_mut;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Per-thread allocation state.
///
/// Invariants: `current[c]` is `queues[c].first`, or the empty page if the queue is
/// empty (or the heap was just stolen from); a page of blocks up to 8 KiB has
/// `page::CURRENT` set in its `used` word exactly while some `current[c]` names it (a
/// stolen heap's pages keep the flag until `abandon::abandon` clears it), a page of
/// bigger blocks only while, besides, `c`'s bit is set in `emptied_current` (set by
/// `empty_pages::current_page_emptied`, which alone flags them); every page in `queues[c]` is owned by this
/// heap (`owner == owner_word`) and has class `c`. Only the owning thread changes the
/// heap, except a stealer (`takeover.rs`) that has proved the owner is outside every
/// allocator call.
#[repr(C)]
pub struct Heap {
    // -- The first OS page: what every heap writes (see `HOT_BYTES`).
    /// `in_op` (nesting count of allocator calls, fast paths included) and the steal
    /// state: the words of the takeover protocol (`protocol::Handshake`). First, so
    /// `in_op` is at offset 0 of the heap the fast paths hold.
    pub handshake: Handshake,
    /// The page each class allocates from (see the invariants above).
    pub current: [AtomicPtr<Page>; CLASS_COUNT],
    /// `small_class[size]` is the class of a request of `size <= SMALL_MAX` bytes, and
    /// `small_class_c[size]` that of a C request (16-byte aligned above 8 bytes). The
    /// same in every heap (`size_class::small_classes`): a copy here is reached from the
    /// heap pointer the fast path holds anyway, where a static would cost the load of
    /// its address (position-independent code), and a per-size byte needs no rounding.
    /// (Secure build: a thread's heap has the canary's padding built in,
    /// `front::secure::pad_class_tables`.)
    pub small_class: [u8; SMALL_COUNT],
    pub small_class_c: [u8; SMALL_COUNT],
    /// Blocks of each class the heap may still take from the shared start pages
    /// (`front/shared.rs`), from `shared::SHARED_LIMITS` (all 0 with
    /// `EBB_SHARED_START=0`); at 0 the class uses the heap's own pages.
    pub shared_left: [u8; CLASS_COUNT],
    /// Pages in the queues and the stash (owner writes, stealer reads).
    pub page_count: AtomicUsize,
    /// Slow paths the owner has run (owner increments); the stealer leaves heaps whose
    /// count moved within the purge delay alone.
    pub activity: AtomicU64,
    /// The stealer's bookkeeping: the `activity` it saw last, and since when (ms).
    pub seen_activity: AtomicU64,
    pub quiet_since: AtomicU64,
    /// Set by the purger about once per purge delay while the heap is busy (so never
    /// taken over): the owner's next malloc slow path lets go of its pages but the
    /// current one of each class (`sweep`).
    pub sweep_wanted: AtomicBool,
    /// Links in the registry's list of live heaps or of spare heaps.
    pub link: registry::Link,
    /// What this heap writes in the owner word of its pages: its address, plus
    /// `CHECK_TAG` in check mode.
    pub owner_word: usize,
    /// ANDed with a page's `local_free` where the fast path refills from it
    /// (`alloc::malloc_local_or_slow`): all ones, or 0 while the heap samples, so
    /// that refill goes through the slow path, which counts it (`profile::sampler`).
    pub local_mask: usize,
    /// Secure build: the largest request the malloc fast path takes from the tables
    /// above, `SMALL_MAX` less the canary's padding (`front::secure::pad_class_tables`):
    /// at level light (no padding) requests of up to `SMALL_MAX` bytes are small.
    #[cfg(feature = "secure")]
    pub small_limit: usize,
    // -- Written only by heaps that use them: left untouched (zero, never resident)
    // by a thread that holds no page of its own, does not sample and is not in check
    // mode. Every field from here on is valid as all-zero bytes (`new_heap`).
    pub queues: [PageList; CLASS_COUNT],
    /// Per class of one-slice pages, the malloc slow path's refills in a row from a
    /// nearly full page, up to `spread::SPREAD_REFILLS`, where it stays: the class's
    /// blocks are replaced at random, and its new pages are bigger (`slow::take_page`).
    pub dense_refills: [u8; CLASS_COUNT],
    /// The heap has taken in other threads' frees into its pages since it was handed
    /// to its thread: its classes keep one-slice pages (`spread::count_refill`).
    pub took_remote_frees: bool,
    /// Classes above 8 KiB (bit `class - empty_pages::FIRST_LET_GO_CLASS`) whose current
    /// page a free emptied (`empty_pages::current_page_emptied`); while a bit is set the
    /// class's current page carries `page::CURRENT`, so its next emptyings stay on the
    /// fast path. A hint, checked on use: a malloc refilling the page does not clear
    /// the bit, nor does a change of current page.
    pub emptied_current: u64,
    /// Empty one-slice pages kept for the heap's next pages (`front::stash`), linked
    /// through `Page::next`. Counted in `page_count`.
    /// `stash_len <= stash::bound(heap) = STASH_MIN_PAGES << stash_doublings`,
    /// `stash_doublings <= stash::MAX_DOUBLINGS`.
    pub stash: *mut Page,
    pub stash_len: u32,
    /// How often the stash's bound has doubled (zero, as in a fresh heap's zeroed
    /// memory: the minimum): grown while the heap's batches outrun it, back to zero
    /// whenever the stash is given back (`stash::release`).
    pub stash_doublings: u8,
    /// A page was turned away by a full stash since the bound last grew.
    pub stash_overflowed: bool,
    /// The blocks whose tails `realloc` gave back most recently (owner only:
    /// `front::shrunk_tails`).
    pub shrunk_tails: crate::front::shrunk_tails::ShrunkTails,
    /// Check mode (`CHECK_TAG` in `owner_word`): the current page of each class. The
    /// tables above then always name the empty page, so every malloc takes the slow
    /// path, where `check::mark_allocated` records the block. Null (never read)
    /// outside check mode.
    pub checked_current: [AtomicPtr<Page>; CLASS_COUNT],
    /// The heap's sampling state (`profile::sampler`); all-zero is "not sampling"
    /// while profiling never started (epoch 0).
    pub sampler: crate::profile::HeapSampler,
    /// The heap's guarded-sampling countdowns (`front::guarded`).
    pub guard: crate::front::guarded::HeapGuard,
}

/// Bytes at the start of a `Heap` that every heap writes: one OS page, so a thread
/// that allocates only from the shared start pages costs 4 KiB of heap, not 8.
pub const HOT_BYTES: usize = core::mem::offset_of!(Heap, queues);
const _: () = assert!(HOT_BYTES <= 4096);

/// Whether the current page of `class` carries `page::CURRENT` as soon as it becomes
/// current: only pages of blocks up to 8 KiB. The free that empties the current page of
/// a bigger class leaves the fast path (`slow::retire`), where the heap keeps the page,
/// flags it, and holds its other empty pages to a budget
/// (`empty_pages::current_page_emptied`).
#[inline(always)]
pub const fn flags_current(class: usize) -> bool {
    class < crate::front::empty_pages::FIRST_LET_GO_CLASS
}

impl Heap {
    pub const fn empty() -> Self {
        Self {
            handshake: Handshake {
                in_op: AtomicU32::new(0),
                state: AtomicU32::new(NONE),
            },
            current: [const { AtomicPtr::new(empty_page_const()) }; CLASS_COUNT],
            small_class: small_classes(false),
            small_class_c: small_classes(true),
            shared_left: [0; CLASS_COUNT],
            page_count: AtomicUsize::new(0),
            activity: AtomicU64::new(0),
            seen_activity: AtomicU64::new(u64::MAX),
            quiet_since: AtomicU64::new(0),
            sweep_wanted: AtomicBool::new(false),
            link: registry::Link::new(),
            owner_word: 0,
            local_mask: usize::MAX,
            // The most padding: the empty heap's pages are all empty, so what it
            // picks only decides which slow path a request takes.
            #[cfg(feature = "secure")]
            small_limit: crate::size_class::SMALL_MAX - crate::front::alloc::CANARY,
            queues: [PageList::new(); CLASS_COUNT],
            dense_refills: [0; CLASS_COUNT],
            took_remote_frees: false,
            emptied_current: 0,
            stash: null_mut(),
            stash_len: 0,
            stash_doublings: 0,
            stash_overflowed: false,
            shrunk_tails: crate::front::shrunk_tails::ShrunkTails::new(),
            checked_current: [const { AtomicPtr::new(empty_page_const()) }; CLASS_COUNT],
            sampler: crate::profile::HeapSampler::new(),
            guard: crate::front::guarded::HeapGuard::new(),
        }
    }

    /// Make `page` (owned, class `class`, or the empty page) the current page of its
    /// class, moving the `CURRENT` flag from the page that was current (if the tables
    /// still name it: `clear_tables` leaves the flags to `abandon::abandon`).
    pub fn set_current(&self, class: usize, page: *mut Page) {
        let table = if self.owner_word & CHECK_TAG != 0 {
            &self.checked_current
        } else {
            &self.current
        };
        let old = table[class].load(Ordering::Relaxed);
        if old != page {
            let empty = empty_page();
            // SAFETY: pages the tables name are owned by this heap (the caller is its
            // owner, or a stealer that proved the owner idle), and so is `page`; the
            // empty page is never written.
            unsafe {
                if old != empty {
                    (*old).set_is_current(false);
                }
                if page != empty && flags_current(class) {
                    debug_assert_eq!((*page).class as usize, class);
                    (*page).set_is_current(true);
                }
            }
        }
        table[class].store(page, Ordering::Relaxed);
    }

    /// The current page of `class` in the table the heap's mode uses (`checked_current`
    /// in check mode).
    pub fn current_page(&self, class: usize) -> *mut Page {
        let table = if self.owner_word & CHECK_TAG != 0 {
            &self.checked_current
        } else {
            &self.current
        };
        table[class].load(Ordering::Relaxed)
    }

    pub fn refresh_current(&self, class: usize) {
        let first = self.queues[class].first;
        self.set_current(class, if first.is_null() { empty_page() } else { first });
    }

    /// Point the table entry of `class` at the queue's first page again, the way it was
    /// before `clear_tables`, without touching any page: for a stealer undoing its
    /// marks (`front::takeover`). It undoes because the owner is inside a call, maybe a
    /// fast path on that very page that read the entry before the marks and is now
    /// writing the page's `used` word with a plain read-modify-write; `set_current`
    /// would rewrite that word (it holds the `CURRENT` flag) from a value read a moment
    /// earlier, losing the owner's update. `clear_tables` left the flag set on the
    /// page, so tables and flags agree again as they are.
    pub fn restore_current(&self, class: usize) {
        let table = if self.owner_word & CHECK_TAG != 0 {
            &self.checked_current
        } else {
            &self.current
        };
        let first = self.queues[class].first;
        let page = if first.is_null() {
            empty_page()
        } else {
            // SAFETY: a queued page of this heap, a valid descriptor; an atomic read.
            debug_assert!(!flags_current(class) || unsafe { (*first).is_current() });
            first
        };
        table[class].store(page, Ordering::Relaxed);
    }

    /// Point every table entry at the empty page (after a steal).
    pub fn clear_tables(&self) {
        let checked: &[AtomicPtr<Page>] = if self.owner_word & CHECK_TAG != 0 {
            &self.checked_current
        } else {
            &[] // null outside check mode, and left untouched
        };
        for entry in self.current.iter().chain(checked) {
            entry.store(empty_page(), Ordering::Relaxed);
        }
    }

    /// Enter an allocator call (owner only; nests): `Handshake::enter`.
    #[inline(always)]
    pub fn enter(&self) {
        self.handshake.enter();
    }

    /// Leave an allocator call.
    #[inline(always)]
    pub fn leave(&self) {
        self.handshake.leave();
    }

    /// The heap that embeds registry link `link` (registered with a pointer derived from
    /// the heap's own, so it may be offset back to it).
    pub fn from_link(link: *mut registry::Link) -> *mut Heap {
        link.wrapping_byte_sub(core::mem::offset_of!(Heap, link)) as *mut Heap
    }
}

const fn empty_page_const() -> *mut Page {
    crate::span::page::EMPTY_PAGE.0.get()
}

/// The heap every thread starts with: all pages empty.
pub struct EmptyHeap(pub UnsafeCell<Heap>);
// SAFETY: the only writes to the empty heap are the atomic `in_op` updates of threads
// that have no heap yet; every path that would change anything else first replaces it
// with a real one (`ensure_heap`).
unsafe impl Sync for EmptyHeap {}
pub static EMPTY_HEAP: EmptyHeap = EmptyHeap(UnsafeCell::new(Heap::empty()));

#[inline(always)]
pub fn empty_heap() -> *mut Heap {
    EMPTY_HEAP.0.get()
}

// ---------------------------------------------------------------------------------
// Thread set-up and exit

/// What the process layer calls back for (see `process::Hooks`).
static HOOKS: process::Hooks = process::Hooks {
    thread_exit,
    after_fork_child: abandon_foreign_heaps_after_fork,
    restart_after_fork: restart_watchers_after_fork,
    take_over_idle: takeover::take_over_idle,
    heap_bytes: core::mem::size_of::<Heap>(),
    heap_link_offset: core::mem::offset_of!(Heap, link),
};

/// Arm the reports at exit and on a signal (`EBB_SHOW_STATS`, `EBB_STATS_FILE`,
/// `EBB_REPORT`, `EBB_REPORT_SIGNAL`), once, right after the process set-up. Here and
/// not in `process::init`: the reports read the heap registry and the spans, so they
/// sit between the front end and the process layer. May allocate (re-entry is safe
/// once set-up is done).
fn arm_reports() {
    if crate::options::get().show_stats {
        crate::stats::register_exit_report();
    }
    if os::getenv(b"EBB_STATS_FILE\0").is_some() {
        os::at_exit(crate::stats_json::write_stats_file_at_exit);
    }
    crate::observe::retention::register();
    crate::profile::register_from_env();
}

/// In a fork child: the report and profile watchers the parent ran, started again, so
/// that `ebb run --breakdown` and `ebb report PID` reach a forked worker (a pre-fork
/// server's, Python's `multiprocessing`'s) as they reach any process.
fn restart_watchers_after_fork() {
    crate::observe::retention::restart_after_fork();
    crate::profile::restart_after_fork();
}

/// The calling thread's heap, made on first use. Null if the OS refused memory.
#[cold]
pub fn ensure_heap() -> *mut Heap {
    let heap = tls::heap();
    if heap != empty_heap() {
        return heap;
    }
    if process::init(&HOOKS) {
        arm_reports();
        crate::front::guarded::init();
        // Arming may have allocated on this thread (`pthread_create` of the report
        // watcher allocates its thread's TLS), which made the thread its heap: a second
        // one would be an orphan counted as a thread, and the process would no longer
        // look single-threaded (`empty_pages`, `EBB_REPORT_SIGNAL` changing what it
        // reports on).
        let heap = tls::heap();
        if heap != empty_heap() {
            return heap;
        }
    }
    let heap = new_heap();
    if heap.is_null() {
        return null_mut();
    }
    tls::set_heap(heap);
    let key = process::thread_key();
    if key != u32::MAX {
        // May allocate (glibc, for high key numbers): the heap is already installed.
        os::thread_key_set(key, heap as *mut core::ffi::c_void);
    }
    heap
}

fn new_heap() -> *mut Heap {
    let spare = registry::take_spare();
    let reused = if spare.is_null() {
        null_mut()
    } else {
        Heap::from_link(spare)
    };
    let options = crate::options::get();
    let heap = if reused.is_null() {
        let bytes = core::mem::size_of::<Heap>().next_multiple_of(os::page_size());
        let memory = os::reserve_aligned(bytes, os::page_size());
        if memory.is_null() {
            return null_mut();
        }
        let heap = memory as *mut Heap;
        // Owner words are heap addresses: page aligned, so above every marker and with
        // the CHECK_TAG bit clear.
        debug_assert!(heap as usize >= MARKER_LIMIT && heap as usize & CHECK_TAG == 0);
        // SAFETY: fresh memory of the right size and alignment, reading as zero; nobody
        // else knows its address yet.
        unsafe { init_fresh(heap) };
        heap
    } else {
        // A spare heap is DEAD, so a stealer that still holds its address only reads
        // its atomics (and fails its CAS); reset the rest field by field.
        // SAFETY: the heap is ours (taken off the spare list under the lock).
        unsafe {
            let h = &mut *reused;
            h.handshake.in_op.store(0, Ordering::Relaxed);
            h.clear_tables();
            // `abandon_all` emptied the queues (and so `page_count`) when it retired.
            debug_assert!(h
                .queues
                .iter()
                .all(|q| q.first.is_null() && q.last.is_null()));
            debug_assert_eq!(h.page_count.load(Ordering::Relaxed), 0);
            h.local_mask = usize::MAX;
            // (Read first, so a heap that never wrote it keeps that page untouched.)
            if h.dense_refills.iter().any(|&n| n != 0) {
                h.dense_refills = [0; CLASS_COUNT];
            }
            if h.took_remote_frees {
                h.took_remote_frees = false;
            }
            // The last thread's blocks say nothing about this one's (and a block it
            // shrank may come back to this thread at once, freed and handed out again).
            h.shrunk_tails.forget();
            // Written only if profiling ever started (epoch 0 otherwise: a sampler that
            // never sampled is as good as a new one), or guarded sampling is on, so the
            // cold page stays untouched.
            if !crate::profile::in_step(&crate::profile::HeapSampler::new()) {
                h.sampler = crate::profile::HeapSampler::new();
            }
            if crate::front::guarded::enabled() {
                h.guard = crate::front::guarded::HeapGuard::new();
            }
        }
        reused
    };
    // SAFETY: the heap is ours until it is published in the list below.
    unsafe {
        (*heap).seen_activity.store(u64::MAX, Ordering::Relaxed);
        (*heap).sweep_wanted.store(false, Ordering::Relaxed);
        (*heap).owner_word = heap as usize | if options.check { CHECK_TAG } else { 0 };
        if options.check && reused.is_null() {
            (*heap).clear_tables(); // checked_current: the empty page
        }
        // Not for the process's first heap (the main thread's, in most programs): a
        // same-thread double free of a shared block is a remote push the freed key
        // does not see (front/freed_key.rs), and single-threaded programs should keep
        // that check whole. Other threads share (see the report: to be closed).
        let first_heap = COUNTERS.threads_created.load(Ordering::Relaxed) == 0;
        (*heap).shared_left = if options.shared_start && !first_heap {
            crate::front::shared::SHARED_LIMITS
        } else {
            [0; CLASS_COUNT]
        };
        (*heap).handshake.state.store(NONE, Ordering::Release);
        registry::register(core::ptr::addr_of_mut!((*heap).link));
    }
    COUNTERS.threads.fetch_add(1, Ordering::Relaxed);
    COUNTERS.threads_created.fetch_add(1, Ordering::Relaxed);
    heap
}

/// Set up a heap in fresh memory, which reads as zero: write only the fields whose
/// empty value is not zero bytes, all in its first OS page (`HOT_BYTES`), so the rest
/// (queues, check-mode table, sampler) stays untouched until used. A thread that
/// allocates only from the shared start pages so costs one OS page of heap.
///
/// # Safety
/// `heap` points to zeroed memory of at least `size_of::<Heap>()` bytes, aligned, that
/// nobody else uses.
unsafe fn init_fresh(heap: *mut Heap) {
    const SMALL: [u8; SMALL_COUNT] = small_classes(false);
    const SMALL_C: [u8; SMALL_COUNT] = small_classes(true);
    // SAFETY: per the contract. Every field is an integer, a pointer, a bool or an atomic
    // of those (or an array or struct of them), so zero bytes are a valid value of each:
    // `handshake` (in_op 0; state written before publication), the queues (null
    // links), counters 0, `checked_current` null (read in check mode only, which sets
    // it), the sampler at epoch 0 (`profile::sync` sets it up when profiling starts).
    unsafe {
        use core::ptr::addr_of_mut;
        for entry in &(*heap).current {
            entry.store(empty_page(), Ordering::Relaxed);
        }
        addr_of_mut!((*heap).small_class).write(SMALL);
        addr_of_mut!((*heap).small_class_c).write(SMALL_C);
        #[cfg(feature = "secure")]
        crate::front::secure::pad_class_tables(heap);
        (*heap).local_mask = usize::MAX;
    }
}

/// pthread key destructor: the thread is exiting.
///
/// # Safety
/// Called by the thread-key destructor with the exiting thread's heap (or null).
unsafe extern "C" fn thread_exit(value: *mut core::ffi::c_void) {
    let heap = value as *mut Heap;
    if heap.is_null() || heap == empty_heap() {
        return;
    }
    // Allocations made after this point (by later destructors) start a new heap, which
    // re-arms the key, so its pages are abandoned too.
    tls::set_heap(empty_heap());
    // SAFETY: the heap belonged to this thread, which no longer uses it.
    unsafe {
        (*heap).enter();
        (*heap).handshake.mark_dead();
        heap_done(heap);
    }
    process::purger::after_slow_path();
    process::heap_thread_exited();
}

/// Abandon every page of `heap` and return it to the spare list.
///
/// # Safety
/// No thread may use `heap` any more, and it must be marked DEAD (no stealer on it).
unsafe fn heap_done(heap: *mut Heap) {
    // SAFETY: per the contract we have exclusive use of the heap and own its pages.
    unsafe {
        abandon_all(heap, deadline::coarse_now_ms());
        crate::handoff::freed_into::forget(heap as usize);
        registry::retire(core::ptr::addr_of_mut!((*heap).link));
    }
    COUNTERS.threads.fetch_sub(1, Ordering::Relaxed);
}

/// Abandon every page in the heap's queues (they stay valid; anyone may claim them)
/// and point its tables at the empty page. Unused pages (the stash's too) go back to
/// the arena with their purge delay counted from `unused_since`.
///
/// # Safety
/// The caller must have exclusive use of the heap: its owner, or a stealer that has
/// proved the owner idle. (A stealer's proof holds only while the tables name no page:
/// the owner's malloc fast path may start any time and pops from what its table names,
/// so the tables stay at the empty page throughout.)
pub unsafe fn abandon_all(heap: *mut Heap, unused_since: u64) {
    // SAFETY: per the contract.
    unsafe {
        (*heap).clear_tables();
        crate::front::stash::release(heap, unused_since);
        for class in 0..CLASS_COUNT {
            loop {
                let page = (*heap).queues[class].first;
                if page.is_null() {
                    break;
                }
                // Not `queue_remove`: the tables stay at the empty page (see
                // `queue_take_off`).
                queue_take_off(heap, class, page);
                abandon::abandon(page, heap as usize, unused_since);
            }
        }
    }
}

/// In a fork child only the forking thread survives: abandon the heaps of the others,
/// so their pages (and blocks the child frees into them) are not stranded.
///
/// # Safety
/// Only in the child of a fork, with every lock free.
unsafe fn abandon_foreign_heaps_after_fork() {
    let mine = tls::heap();
    loop {
        let victim = {
            let registry = registry::lock();
            let mut link = registry.live;
            while !link.is_null() && Heap::from_link(link) == mine {
                // SAFETY: live heaps are linked under the lock.
                link = unsafe { (*link).next };
            }
            if link.is_null() {
                null_mut()
            } else {
                Heap::from_link(link)
            }
        };
        if victim.is_null() {
            break;
        }
        // SAFETY: the victim's thread (and any stealer) does not exist in this process.
        unsafe {
            (*victim).handshake.state.store(DEAD, Ordering::Release);
            heap_done(victim);
        }
    }
}
