//! Heaps: one per thread, holding that thread's pages per size class.
//!
//! A heap owns a queue of pages for each size class; the first page of a queue is the
//! one the malloc fast path allocates from (`current`, and `direct` for requests up to
//! 1 KiB, indexed by `(size + 7) / 8`). When a page fills up it is abandoned rather than
//! kept: blocks freed into it later make it claimable by any thread (see `arena.rs`),
//! and if its former owner frees into it first, the owner takes it back.
//!
//! Heap memory comes from the OS directly (one heap per 4 KiB-rounded mapping, reused
//! after thread exit), never from a global allocator.

use crate::arena::{self, PageList, ARENA};
use crate::os;
use crate::page::{empty_page, Block, Page, ABANDONED, CHECK_TAG, MARKER_LIMIT};
use crate::size_class::{small_classes, CLASS_COUNT, SMALL_COUNT};
use crate::stats::COUNTERS;
use crate::{steal, tls};
use core::cell::UnsafeCell;
use core::ptr::null_mut;
use core::sync::atomic::{
    compiler_fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

/// Per-thread allocation state.
///
/// Invariants: `current[c]` is `queues[c].first`, or the empty page if the queue is
/// empty (or the heap was just stolen from); a page has `page::CURRENT` set in its
/// `used` word exactly while some `current[c]` names it (a stolen heap's pages keep the
/// flag until `arena::abandon` clears it); every page in `queues[c]` is owned by this
/// heap (`owner == owner_word`) and has class `c`. Only the owning thread changes the
/// heap, except a stealer (`steal.rs`) that has proved the owner is outside every
/// allocator call.
#[repr(C)]
pub struct Heap {
    /// Nesting count of allocator calls the owner is inside (fast paths included).
    /// Written only by the owner, with plain increments; read by the stealer.
    pub in_op: AtomicU32,
    /// `steal::NONE`, `steal::STEALING` or `steal::DEAD`.
    pub steal_state: AtomicU32,
    /// The page each class allocates from (see the invariants above).
    pub current: [AtomicPtr<Page>; CLASS_COUNT],
    /// `small_class[size]` is the class of a request of `size <= SMALL_MAX` bytes, and
    /// `small_class_c[size]` that of a C request (16-byte aligned above 8 bytes). The
    /// same in every heap (`size_class::small_classes`): a copy here is reached from the
    /// heap pointer the fast path holds anyway, where a static would cost the load of
    /// its address (position-independent code), and a per-size byte needs no rounding.
    pub small_class: [u8; SMALL_COUNT],
    pub small_class_c: [u8; SMALL_COUNT],
    pub queues: [PageList; CLASS_COUNT],
    /// Pages in the queues (owner writes, stealer reads).
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
    /// Links in the arena's list of live heaps or of spare heaps.
    pub next: *mut Heap,
    pub prev: *mut Heap,
    pub thread_id: usize,
    /// What this heap writes in the owner word of its pages: its address, plus
    /// `CHECK_TAG` in check mode.
    pub owner_word: usize,
}

impl Heap {
    const fn empty() -> Self {
        Self {
            in_op: AtomicU32::new(0),
            steal_state: AtomicU32::new(crate::steal::NONE),
            current: [const { AtomicPtr::new(empty_page_const()) }; CLASS_COUNT],
            small_class: small_classes(false),
            small_class_c: small_classes(true),
            queues: [PageList::new(); CLASS_COUNT],
            page_count: AtomicUsize::new(0),
            activity: AtomicU64::new(0),
            seen_activity: AtomicU64::new(u64::MAX),
            quiet_since: AtomicU64::new(0),
            sweep_wanted: AtomicBool::new(false),
            next: null_mut(),
            prev: null_mut(),
            thread_id: 0,
            owner_word: 0,
        }
    }

    /// Make `page` (owned, class `class`, or the empty page) the current page of its
    /// class, moving the `CURRENT` flag from the page that was current (if the tables
    /// still name it: `clear_tables` leaves the flags to `arena::abandon`).
    pub fn set_current(&self, class: usize, page: *mut Page) {
        let old = self.current[class].load(Ordering::Relaxed);
        if old != page {
            let empty = empty_page();
            // SAFETY: pages the tables name are owned by this heap (the caller is its
            // owner, or a stealer that proved the owner idle), and so is `page`; the
            // empty page is never written.
            unsafe {
                if old != empty {
                    (*old).set_is_current(false);
                }
                if page != empty {
                    debug_assert_eq!((*page).class as usize, class);
                    (*page).set_is_current(true);
                }
            }
        }
        self.current[class].store(page, Ordering::Relaxed);
    }

    pub fn refresh_current(&self, class: usize) {
        let first = self.queues[class].first;
        self.set_current(class, if first.is_null() { empty_page() } else { first });
    }

    /// Point every table entry at the empty page (after a steal).
    pub fn clear_tables(&self) {
        for entry in &self.current {
            entry.store(empty_page(), Ordering::Relaxed);
        }
    }

    /// Enter an allocator call (owner only; nests).
    #[inline(always)]
    pub fn enter(&self) {
        self.in_op.store(
            self.in_op.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Relaxed,
        );
        // Keep the page accesses that follow after the store (the stealer's membarrier
        // takes care of the hardware ordering).
        compiler_fence(Ordering::SeqCst);
    }

    /// Leave an allocator call.
    #[inline(always)]
    pub fn leave(&self) {
        self.in_op.store(
            self.in_op.load(Ordering::Relaxed).wrapping_sub(1),
            Ordering::Release,
        );
    }
}

const fn empty_page_const() -> *mut Page {
    crate::page::EMPTY_PAGE.0.get()
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
// Process and thread set-up

const INIT_NONE: u8 = 0;
const INIT_RUNNING: u8 = 1;
const INIT_DONE: u8 = 2;
static PROCESS_INIT: AtomicU8 = AtomicU8::new(INIT_NONE);
static THREAD_KEY: AtomicU32 = AtomicU32::new(u32::MAX);

/// The pthread key whose destructor abandons an exiting thread's heap.
pub fn thread_key() -> u32 {
    THREAD_KEY.load(Ordering::Acquire)
}

/// One-time process set-up: options, the thread-exit key, fork and exit handlers.
fn process_init() {
    if PROCESS_INIT.load(Ordering::Acquire) == INIT_DONE {
        return;
    }
    if PROCESS_INIT
        .compare_exchange(INIT_NONE, INIT_RUNNING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        while PROCESS_INIT.load(Ordering::Acquire) != INIT_DONE {
            os::yield_now();
        }
        return;
    }
    crate::options::get();
    if let Some(key) = os::thread_key_create(thread_exit) {
        THREAD_KEY.store(key, Ordering::Release);
    }
    PROCESS_INIT.store(INIT_DONE, Ordering::Release);
    // These may allocate, so they run after the state is DONE (re-entry is then safe).
    os::at_fork(arena::fork_prepare, arena::fork_parent, arena::fork_child);
    if crate::options::get().show_stats {
        crate::stats::register_exit_report();
    }
    if os::getenv(b"EBB_STATS_FILE\0").is_some() {
        os::at_exit(crate::stats_json::write_stats_file_at_exit);
    }
}

/// The calling thread's heap, made on first use. Null if the OS refused memory.
#[cold]
pub fn ensure_heap() -> *mut Heap {
    let heap = tls::heap();
    if heap != empty_heap() {
        return heap;
    }
    process_init();
    let heap = new_heap();
    if heap.is_null() {
        return null_mut();
    }
    tls::set_heap(heap);
    let key = thread_key();
    if key != u32::MAX {
        // May allocate (glibc, for high key numbers): the heap is already installed.
        os::thread_key_set(key, heap as *mut core::ffi::c_void);
    }
    heap
}

fn new_heap() -> *mut Heap {
    let reused = {
        let mut arena = ARENA.lock();
        let heap = arena.spare_heaps;
        if !heap.is_null() {
            // SAFETY: spare heaps are valid, unused, linked under the lock.
            arena.spare_heaps = unsafe { (*heap).next };
        }
        heap
    };
    let heap = if reused.is_null() {
        let bytes = core::mem::size_of::<Heap>().next_multiple_of(os::page_size());
        let memory = os::reserve_aligned(bytes, os::page_size());
        if memory.is_null() {
            return null_mut();
        }
        let heap = memory as *mut Heap;
        // SAFETY: fresh, unused memory of the right size and alignment; nobody else
        // knows its address yet.
        unsafe { heap.write(Heap::empty()) };
        heap
    } else {
        // A spare heap is DEAD, so a stealer that still holds its address only reads
        // its atomics (and fails its CAS); reset the rest field by field.
        // SAFETY: the heap is ours (taken off the spare list under the lock).
        unsafe {
            let h = &mut *reused;
            h.in_op.store(0, Ordering::Relaxed);
            h.clear_tables();
            h.queues = [PageList::new(); CLASS_COUNT];
            h.page_count.store(0, Ordering::Relaxed);
        }
        reused
    };
    // SAFETY: the heap is ours until it is published in the list below.
    unsafe {
        (*heap).thread_id = os::thread_id();
        (*heap).seen_activity.store(u64::MAX, Ordering::Relaxed);
        (*heap).sweep_wanted.store(false, Ordering::Relaxed);
        let check = crate::options::get().check;
        (*heap).owner_word = heap as usize | if check { CHECK_TAG } else { 0 };
        (*heap).steal_state.store(steal::NONE, Ordering::Release);
        let mut arena = ARENA.lock();
        (*heap).prev = null_mut();
        (*heap).next = arena.heaps;
        if !arena.heaps.is_null() {
            (*arena.heaps).prev = heap;
        }
        arena.heaps = heap;
    }
    COUNTERS.threads.fetch_add(1, Ordering::Relaxed);
    COUNTERS.threads_created.fetch_add(1, Ordering::Relaxed);
    heap
}

/// pthread key destructor: the thread is exiting.
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
        steal::mark_dead(heap);
        heap_done(heap);
    }
    crate::purge::heap_thread_exited();
}

/// Abandon every page of `heap` and return it to the spare list.
///
/// # Safety
/// No thread may use `heap` any more, and it must be marked DEAD (no stealer on it).
unsafe fn heap_done(heap: *mut Heap) {
    // SAFETY: per the contract we have exclusive use of the heap and own its pages.
    unsafe {
        abandon_all(heap, os::now_ms());
        let mut arena = ARENA.lock();
        let (prev, next) = ((*heap).prev, (*heap).next);
        if prev.is_null() {
            arena.heaps = next;
        } else {
            (*prev).next = next;
        }
        if !next.is_null() {
            (*next).prev = prev;
        }
        (*heap).next = arena.spare_heaps;
        arena.spare_heaps = heap;
    }
    COUNTERS.threads.fetch_sub(1, Ordering::Relaxed);
}

/// Abandon every page in the heap's queues (they stay valid; anyone may claim them)
/// and point its tables at the empty page. Unused pages go back to the arena with their
/// purge delay counted from `unused_since`.
///
/// # Safety
/// The caller must have exclusive use of the heap: its owner, or a stealer that has
/// proved the owner idle.
pub unsafe fn abandon_all(heap: *mut Heap, unused_since: u64) {
    // SAFETY: per the contract.
    unsafe {
        (*heap).clear_tables();
        for class in 0..CLASS_COUNT {
            loop {
                let page = (*heap).queues[class].first;
                if page.is_null() {
                    break;
                }
                queue_remove(heap, class, page);
                arena::abandon(page, heap, unused_since);
            }
        }
    }
}

/// In a fork child only the forking thread survives: abandon the heaps of the others,
/// so their pages (and blocks the child frees into them) are not stranded.
///
/// # Safety
/// Only in the child of a fork, with the arena lock free.
pub unsafe fn abandon_foreign_heaps_after_fork() {
    let mine = tls::heap();
    loop {
        let victim = {
            let arena = ARENA.lock();
            let mut heap = arena.heaps;
            // SAFETY: live heaps are linked under the lock.
            while !heap.is_null() && heap == mine {
                heap = unsafe { (*heap).next };
            }
            heap
        };
        if victim.is_null() {
            break;
        }
        // SAFETY: the victim's thread (and any stealer) does not exist in this process.
        unsafe {
            (*victim).steal_state.store(steal::DEAD, Ordering::Release);
            heap_done(victim);
        }
    }
}

// ---------------------------------------------------------------------------------
// Queue maintenance (owner only; keeps `page_count` for the stealer)

unsafe fn queue_push_front(heap: *mut Heap, class: usize, page: *mut Page) {
    // SAFETY: the caller owns heap and page; the page is in no list.
    unsafe {
        (*heap).queues[class].push_front(page);
        (*heap).set_current(class, page);
        let count = (*heap).page_count.load(Ordering::Relaxed);
        (*heap).page_count.store(count + 1, Ordering::Relaxed);
        if count == 0 {
            crate::purge::heap_became_active();
        }
    }
}

unsafe fn queue_push_back(heap: *mut Heap, class: usize, page: *mut Page) {
    // SAFETY: the caller owns heap and page; the page is in no list.
    unsafe {
        if (*heap).queues[class].first.is_null() {
            queue_push_front(heap, class, page);
            return;
        }
        (*heap).queues[class].push_back(page);
        let count = (*heap).page_count.load(Ordering::Relaxed);
        (*heap).page_count.store(count + 1, Ordering::Relaxed);
    }
}

unsafe fn queue_remove(heap: *mut Heap, class: usize, page: *mut Page) {
    // SAFETY: the caller owns heap and page; the page is in this queue.
    unsafe {
        (*heap).queues[class].remove(page);
        (*heap).refresh_current(class);
        let count = (*heap).page_count.load(Ordering::Relaxed);
        debug_assert!(count > 0);
        (*heap).page_count.store(count - 1, Ordering::Relaxed);
    }
}

/// Slow-path entry for the calling thread's own heap: wait out a steal in progress and
/// count the activity (the stealer leaves recently active heaps alone). No clock read:
/// the stealer notices when the count stops moving.
#[inline]
fn slow_path_enter(heap: *mut Heap) {
    // SAFETY: heap is the calling thread's heap.
    unsafe {
        (*heap).enter();
        steal::wait_while_stealing(heap);
        let activity = (*heap).activity.load(Ordering::Relaxed);
        (*heap)
            .activity
            .store(activity.wrapping_add(1), Ordering::Relaxed);
    }
}

// ---------------------------------------------------------------------------------
// Malloc slow path

/// Find a page of `class` with a free block for `heap`, making it current. Null if the
/// OS refused memory.
///
/// # Safety
/// `heap` must be the calling thread's own heap, entered with `slow_path_enter`.
pub unsafe fn find_page(heap: *mut Heap, class: usize) -> *mut Page {
    // SAFETY: the heap is ours; pages in our queues are owned by us.
    unsafe {
        let keep_full = FULL_PAGE_SLICES_KEPT / crate::size_class::page_slices(class);
        let mut full_kept = 0;
        let mut page = (*heap).queues[class].first;
        while !page.is_null() {
            let next = (*page).next;
            (*page).collect();
            if (*page).has_free() || (*page).extend() {
                if page != (*heap).queues[class].first {
                    (*heap).queues[class].remove(page);
                    (*heap).queues[class].push_front(page);
                    (*heap).set_current(class, page);
                }
                return page;
            }
            if full_kept < keep_full {
                // Full, and among the last few: keep it (see FULL_PAGE_SLICES_KEPT).
                full_kept += 1;
            } else {
                // Full and older: let it go, so frees into it make it claimable by anyone.
                queue_remove(heap, class, page);
                arena::abandon(page, heap, os::now_ms());
            }
            page = next;
        }
        let page = arena::take_page(class, heap);
        if page.is_null() {
            return null_mut();
        }
        (*page).collect();
        if !(*page).has_free() && !(*page).extend() {
            // A claimed page always has room; a fresh one can always be carved.
            debug_assert!(false, "page without room");
        }
        queue_push_front(heap, class, page);
        page
    }
}

/// How much of its full pages a heap keeps per class, in slices (4 pages of small
/// blocks, none of the bigger pages), instead of abandoning a page the moment it fills.
///
/// Why keep any: when a thread's live blocks of a class stay about constant (a server
/// replacing objects, larson), every page it owns is nearly full and every free opens
/// one hole. Abandoning full pages made the owner's own frees into them remote pushes
/// (CAS, notify, collect) and each hole came back through list-claim-fill-abandon, a
/// cycle per page every few dozen mallocs. Keeping them, those frees are plain local
/// ones and `find_page` finds the holes. Measured, C larson (time, against the build
/// that kept none): 2 pages 0.92-0.96, 4 pages 0.77-0.81, 8 pages 0.76-0.79,
/// unbounded 0.73.
///
/// Why a bound: a kept page's remote frees wait for its owner's next slow path of
/// the class (or the idle-heap steal, or thread exit), so until then their memory
/// serves nobody. Measured, mixed-c-rust (8 threads handing buffers around) after 50
/// rounds: 185 MiB keeping none, 193 keeping 4 pages, 198 keeping 8 pages of each
/// class and one medium page. It is a bound in bytes, so that big pages, where a
/// stranded page would cost most and churn matters least, are never kept.
pub const FULL_PAGE_SLICES_KEPT: usize = 4;

/// Allocate a block of `class` when the fast path found no free block.
#[cold]
#[inline(never)]
pub fn malloc_slow(class: usize) -> *mut u8 {
    let heap = ensure_heap();
    if heap.is_null() {
        return null_mut();
    }
    slow_path_enter(heap);
    // SAFETY: `heap` is this thread's heap.
    let block = unsafe {
        if (*heap).sweep_wanted.load(Ordering::Relaxed) {
            sweep(heap);
        }
        let page = find_page(heap, class);
        if page.is_null() {
            null_mut()
        } else {
            pop(page)
        }
    };
    // SAFETY: as above.
    unsafe { (*heap).leave() };
    block
}

/// Let go of every page of the heap but the current one of each class: free the unused
/// ones, abandon the rest (listed for any thread if they have room).
///
/// A busy heap is never taken over, yet the pages it holds besides its current ones
/// (the full pages `find_page` keeps, pages taken back by a free) only come back to
/// it on its next slow path *of their class*: remote frees into them would wait for
/// as long as the thread allocates other sizes. The purger asks for this about once
/// per purge delay, so that memory goes back within about two delays, as a sleeping
/// owner's does. Once per delay, the cost is one walk of the queues and, for pages
/// the heap still uses, claiming them back from the abandoned list.
///
/// # Safety
/// `heap` must be the calling thread's own heap, entered with `slow_path_enter`.
unsafe fn sweep(heap: *mut Heap) {
    // SAFETY: per the contract, the heap and the pages in its queues are ours.
    unsafe {
        (*heap).sweep_wanted.store(false, Ordering::Relaxed);
        let now = os::now_ms();
        for class in 0..CLASS_COUNT {
            let first = (*heap).queues[class].first;
            if first.is_null() {
                continue;
            }
            let mut page = (*first).next;
            while !page.is_null() {
                let next = (*page).next;
                queue_remove(heap, class, page);
                arena::abandon(page, heap, now);
                page = next;
            }
        }
    }
    COUNTERS.sweeps.fetch_add(1, Ordering::Relaxed);
}

/// Take the first free block of `page` (which must have one).
///
/// # Safety
/// The caller must own `page` and `page.free` must be non-null.
#[inline(always)]
pub unsafe fn pop(page: *mut Page) -> *mut u8 {
    // SAFETY: per the contract.
    unsafe {
        let block = (*page).free;
        debug_assert!(!block.is_null());
        (*page).free = (*block).next;
        (*page).inc_used();
        block as *mut u8
    }
}

// ---------------------------------------------------------------------------------
// Free slow path

/// Free `block` of `page` when the fast path could not: the page is not owned by the
/// calling thread's heap, it is in check mode, or a stealer is taking it.
///
/// # Safety
/// `block` must be a block of `page` (checked, and reported if not, in check mode).
#[cold]
#[inline(never)]
pub unsafe fn free_slow(page: *mut Page, block: *mut u8) {
    let heap = tls::heap();
    let own = heap != empty_heap();
    if own {
        slow_path_enter(heap);
    }
    // SAFETY: page is a valid descriptor; ownership decides who touches what.
    unsafe {
        free_slow_inner(heap, page, block);
        if own {
            (*heap).leave();
        }
    }
}

unsafe fn free_slow_inner(heap: *mut Heap, page: *mut Page, block: *mut u8) {
    // SAFETY: page is a valid descriptor; ownership decides who touches what.
    unsafe {
        let mut owner = (*page).owner.load(Ordering::Acquire);
        while owner == crate::page::STOLEN {
            // A stealer is taking the page from its (idle) owner: it is about to become
            // abandoned, or to return to its owner.
            os::yield_now();
            owner = (*page).owner.load(Ordering::Acquire);
        }
        if owner >= MARKER_LIMIT && owner & !CHECK_TAG == heap as usize {
            // Our own page: in check mode, or the fast path raced with a steal that was
            // undone.
            if (owner & CHECK_TAG == 0 || crate::check::local_free_is_valid(page, block))
                && (*page).free_local(block as *mut Block)
            {
                retire(heap, page);
            }
            return;
        }
        if crate::options::get().check && !crate::check::remote_free_is_valid(page, owner, block) {
            return;
        }
        match owner {
            crate::page::LARGE => {
                (*page).set_used(0);
                COUNTERS.large_frees.fetch_add(1, Ordering::Relaxed);
                arena::free_span(page);
            }
            crate::page::HUGE => crate::huge::free(page),
            crate::page::FREE => {
                crate::alloc::report_invalid_free(block, "block is not in use (double free?)")
            }
            ABANDONED
                if heap != empty_heap()
                    && (*page).last_owner.load(Ordering::Relaxed) == heap as usize
                    && queue_is_short(heap, (*page).class as usize) =>
            {
                // Our own page that filled up: take it back so later frees are local,
                // unless we hold a spare page of the class already. Hoarding every old
                // page a thread frees into makes each heap keep its own partly used
                // pages (the sum of per-thread peaks); left abandoned, the page is
                // listed for any thread once the free below notifies the collector.
                if (*page)
                    .owner
                    .compare_exchange(
                        ABANDONED,
                        (*heap).owner_word,
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    )
                    .is_ok()
                {
                    reclaim(heap, page);
                    if (*page).free_local(block as *mut Block) {
                        retire(heap, page);
                    }
                } else {
                    free_to_other(page, block);
                }
            }
            _ => free_to_other(page, block),
        }
    }
}

/// How many pages of a class a heap may hold before a free into one of its old pages
/// stops taking that page back. Measured (mixed-c-rust, 8 threads): 1 spare page keeps
/// RSS flat from round 5 to 50 (+2%) at +1.5% instructions in a single-threaded
/// compiler-like workload; 8 let RSS creep (+4% and 10% more in absolute terms), and
/// unbounded reclaim crept +7% (each thread hoarding its own partly used pages).
const RECLAIM_QUEUE_LIMIT: usize = 2;

/// True if the heap's queue for `class` holds at most RECLAIM_QUEUE_LIMIT pages with
/// room. Full pages (the ones `find_page` keeps) do not count: they are not the
/// partly used pages whose hoarding the limit prevents, and counting them would stop
/// a thread that frees what it allocated from ever taking its old pages back.
///
/// # Safety
/// `heap` must be the calling thread's heap.
#[inline]
unsafe fn queue_is_short(heap: *mut Heap, class: usize) -> bool {
    // SAFETY: per the contract, the queues are ours.
    unsafe {
        let mut page = (*heap).queues[class].first;
        let mut n = 0;
        while !page.is_null() {
            n += usize::from((*page).used() < (*page).reserved);
            if n > RECLAIM_QUEUE_LIMIT {
                return false;
            }
            page = (*page).next;
        }
        true
    }
}

/// Push a block onto another owner's (or nobody's) page.
pub unsafe fn free_to_other(page: *mut Page, block: *mut u8) {
    // SAFETY: the block is live in page; pushing is allowed to anyone.
    unsafe {
        let old_head = (*page).free_remote(block as *mut Block);
        if old_head.is_null() && (*page).owner.load(Ordering::SeqCst) == ABANDONED {
            arena::notify(page);
        }
    }
}

/// Put a page we just claimed back into our queue for its class (not as current).
unsafe fn reclaim(heap: *mut Heap, page: *mut Page) {
    // SAFETY: we own the page; the list is guarded by the arena lock.
    unsafe {
        if (*page).listed {
            let mut arena = ARENA.lock();
            if (*page).listed {
                arena.abandoned[(*page).class as usize].remove(page);
                (*page).listed = false;
            }
        }
        queue_push_back(heap, (*page).class as usize, page);
    }
    COUNTERS.pages_reclaimed.fetch_add(1, Ordering::Relaxed);
}

/// A local free emptied `page`, owned by the calling thread's heap.
///
/// # Safety
/// `page` must be owned by the calling thread's heap.
#[cold]
#[inline(never)]
pub unsafe fn page_emptied(page: *mut Page) {
    let heap = tls::heap();
    slow_path_enter(heap);
    // SAFETY: per the contract. A steal that completed meanwhile took the page from us
    // (then it is no longer ours and there is nothing to do).
    unsafe {
        if (*page).owner.load(Ordering::Relaxed) & !CHECK_TAG == heap as usize {
            retire(heap, page);
        }
        (*heap).leave();
    }
}

/// A page of ours became unused: keep it if it is the only page of its class (so a
/// thread that allocates and frees one block does not churn spans), else free it.
unsafe fn retire(heap: *mut Heap, page: *mut Page) {
    // SAFETY: we own the page and the heap.
    unsafe {
        debug_assert!(!(*page).is_current(), "the current page is never retired");
        let class = (*page).class as usize;
        let queue = &(*heap).queues[class];
        if queue.first == page && (*page).next.is_null() {
            return;
        }
        queue_remove(heap, class, page);
        (*page).collect();
        debug_assert!((*page).is_unused());
        (*page)
            .owner
            .store(crate::page::COLLECTING, Ordering::Relaxed);
        arena::free_span(page);
    }
}

/// Free every unused page of the calling thread's heap (for `collect`).
pub fn collect_own(force: bool) {
    let heap = tls::heap();
    if heap == empty_heap() {
        return;
    }
    slow_path_enter(heap);
    // SAFETY: this is our heap.
    unsafe {
        for class in 0..CLASS_COUNT {
            let mut page = (*heap).queues[class].first;
            while !page.is_null() {
                let next = (*page).next;
                (*page).collect();
                let only = page == (*heap).queues[class].first && next.is_null();
                if (*page).is_unused() && (force || !only) {
                    queue_remove(heap, class, page);
                    (*page)
                        .owner
                        .store(crate::page::COLLECTING, Ordering::Relaxed);
                    arena::free_span(page);
                }
                page = next;
            }
        }
        (*heap).leave();
    }
}
