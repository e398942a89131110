//! Pages: a run of slices carved into blocks of one size class, with sharded free lists.
//!
//! A [`Page`] is the descriptor; it lives in the segment header (see `segment.rs`), not
//! in the page's memory, so freed blocks can be handed back to the OS while the
//! descriptor stays. Every slice of a segment has a descriptor; only the first slice of
//! a span is a page, the segment's `span_page` table leads every slice to it.
//!
//! # Free lists
//! - `free`: blocks ready to hand out. Only the owner pops from it.
//! - `local_free`: blocks the owner freed while `free` held freshly carved blocks known
//!   to be zero (`free_is_zero`, which a push onto `free` would spoil); moved to `free`
//!   when `free` runs dry, so the malloc fast path never tests two lists. Otherwise the
//!   owner's frees go straight onto `free` (LIFO: the block just freed, its line still
//!   in cache, is the next one handed out).
//! - `thread_free`: blocks freed by other threads, an atomic LIFO pushed with one CAS
//!   and taken whole with one swap by whoever owns the page.
//!
//! # Ownership (`owner`)
//! The word is a heap address while a thread's heap owns the page, or one of the
//! markers below. Whoever owns the page is the only one that may touch `free`,
//! `local_free`, `used`, `capacity` and the queue links; ownership of an abandoned
//! page is taken with a CAS from [`ABANDONED`] and given up with a release store (the
//! steps are in `protocol`, shared with the loom models).

use core::ptr::null_mut;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::protocol;
pub use crate::protocol::{ABANDONED, DRAINING, FREE, HUGE, LARGE, MARKER_LIMIT, STOLEN};
use crate::span::decommit_batch::DecommitBatch;

/// Blocks at least this big have the memory inside them purged when their page is
/// taken from an idle owner (see `Page::purge_free_blocks`): every block above 8 KiB,
/// i.e. in pages of 8 or 64 slices; pages of one slice give back holes instead
/// (`span::holes`).
pub const PURGE_INSIDE_MIN: usize = 8 * 1024 + 1;
/// Set in the owner word of pages owned by a heap in check mode (`EBB_CHECK=1`): the
/// free fast path compares the word with the plain heap address, so every free of a
/// checked heap takes the slow path, where it is validated. Costs nothing when off.
/// A tagged heap word stays above `MARKER_LIMIT` and untags to the heap's address:
/// heaps are page aligned, so their low bits are free (asserted in `front::heap`).
pub const CHECK_TAG: usize = 1;
const _: () = assert!(CHECK_TAG < MARKER_LIMIT && CHECK_TAG.is_power_of_two());

/// Set in a page's `used` word while the page is its heap's current page of its class.
/// The local free fast path decrements the word and leaves only when it reaches zero: a
/// page that empties goes back to the arena unless it is current (the next malloc of the
/// class would take a page again), and with the flag in the counter one test covers
/// both (`dec; je`). Counts stay far below it (at most 8192 blocks a page).
pub const CURRENT: u32 = 1 << 31;

/// The length of a `thread_free` list sits above this bit of its head word. Block
/// addresses are below `2^os::ADDRESS_BITS` (segments are mapped there: segment.rs
/// refuses others), and a list is at most a page's blocks (8192 at 8 bytes in 64 KiB),
/// far below 2^16.
pub const THREAD_FREE_COUNT_SHIFT: u32 = 48;
const THREAD_FREE_ADDR_MASK: usize = (1 << THREAD_FREE_COUNT_SHIFT) - 1;
const _: () = assert!(crate::os::ADDRESS_BITS <= THREAD_FREE_COUNT_SHIFT as usize);
// A page's blocks fit the length field (16 bits above the address bits).
const _: () = {
    use crate::size_class::{class_size, page_slices, CLASS_COUNT};
    let mut class = 0;
    while class < CLASS_COUNT {
        let blocks = page_slices(class) * crate::span::segment::SLICE_SIZE / class_size(class);
        assert!(blocks < 0xffff);
        class += 1;
    }
};

/// A free block: its first word links to the next one.
#[repr(C)]
pub struct Block {
    pub next: *mut Block,
}

/// Descriptor of a span of slices.
///
/// Invariants (checked with `debug_assert!` where they are relied on):
/// - `used + blocks in free/local_free/thread_free + blocks in holes + (reserved -
///   capacity) == reserved`, i.e. `used` counts blocks handed out and not yet given
///   back to the owner (holes: `span::holes`);
/// - `capacity <= reserved`, and blocks `capacity..reserved` have never been handed out;
/// - `free_is_zero` implies every block on `free` is zero except its link word;
/// - a page is in at most one list (a heap queue or an abandoned list), and
///   `listed` is true exactly when it is in the abandoned list.
///
/// Layout: three cache lines, by who writes them. Line 0 is the owner's (its mallocs and
/// frees write `free`, `local_free` and `used` all the time); line 1 is read by every
/// free, the owner's and other threads', and written only when the page changes hands;
/// line 2 is `thread_free`, which other threads' frees write. A cross-thread free so
/// reads a line the owner does not write and writes one the owner's fast paths do not
/// touch. With the fields mixed (104-byte descriptors, which also shared lines with
/// their neighbours), its load of `owner` could make the owner's next write a cache
/// miss, and its push the owner's next free. Measured: 1-5% faster cross-thread
/// workloads (prodcons, mstress, larson), no change elsewhere.
#[repr(C, align(64))]
pub struct Page {
    // -- line 0: the owner's
    /// Blocks to allocate from (owner only).
    pub free: *mut Block,
    /// Blocks freed by the owner while `free_is_zero` (owner only).
    pub local_free: *mut Block,
    /// Blocks handed out and not returned to the owner (owner writes, stats read), plus
    /// [`CURRENT`] while the page is its heap's current page of its class.
    pub used: AtomicU32,
    /// Blocks carved out of the page so far (owner only).
    pub capacity: u32,
    /// Blocks that fit in the page.
    pub reserved: u32,
    /// Size class, for pages in heap queues.
    pub class: u8,
    /// The span came from decommitted memory: uncarved blocks read as zero.
    pub is_zero: bool,
    /// Every block on `free` is zero apart from its link word.
    pub free_is_zero: bool,
    /// In the abandoned list of its class (`handoff::abandon::ABANDONED_LISTS`' lock).
    pub listed: bool,
    /// Links in a heap queue or the abandoned list.
    pub next: *mut Page,
    pub prev: *mut Page,
    /// Slices in the span (first slice only).
    pub slice_count: u32,
    /// OS pages given back while the page holds live blocks, one bit each; the blocks
    /// overlapping them are on no list (`span::holes`). Owner only.
    pub holes: crate::span::holes::HoleMask,
    /// The owner's frees wait on `local_free` instead of going on `free` (owner only).
    /// Set with `free_is_zero` (a push would spoil the zero list) and while the owner
    /// samples allocations (`profile::sampler::cut`: a block pushed on `free` after the
    /// cut would be handed out uncounted). Invariant: `free_is_zero → frees_to_local`.
    pub frees_to_local: bool,
    /// Secure build: the span's last OS page is a guard page (`secure::guard`), lifted
    /// when the span goes back to the arena.
    #[cfg(feature = "secure")]
    pub guarded: bool,
    /// Secure build, large blocks: a canary follows the block (`secure::alloc_large`).
    #[cfg(feature = "secure")]
    pub large_canary: bool,
    /// Secure build, pages of blocks: a canary in the last word of every block handed
    /// out, checked on free (`secure::write_small_canary`; `EBB_CANARY`).
    #[cfg(feature = "secure")]
    pub small_canary: bool,
    /// A span of one block (large, huge, a sampled block's): 1 + the heap profiler's
    /// live slot of its block if the block is a tracked sample, else 0 (or a stale
    /// slot, which the profiler tells by the slot's address). Set when the block is
    /// sampled, read and cleared by its free (`profile::freed`).
    pub sample: u32,
    // -- line 1: read by every free
    _line1: [CacheLine; 0],
    /// Heap address, or a marker (`FREE`, `ABANDONED`, ...).
    pub owner: AtomicUsize,
    /// The heap that abandoned the page, so it can take it back on its next free.
    pub last_owner: AtomicUsize,
    /// Block size in bytes (for large spans: the span size).
    pub block_size: AtomicUsize,
    /// First byte of the page's memory.
    pub start: *mut u8,
    /// A time in ms (`os::now_ms`), meaning one of three things by the page's state:
    /// - owner `FREE` (any slice's descriptor): when the slice became free, for the
    ///   purge delay of the decommit scan (`span/decommit.rs`);
    /// - abandoned and `listed`, blocks of at least `PURGE_INSIDE_MIN`: when the page
    ///   was listed, for the purge of its free blocks' insides
    ///   (`handoff::abandon::purge_unclaimed_insides`), or `PURGED_INSIDE` once done;
    /// - otherwise (owned, unlisted, small blocks): unused, stale.
    pub freed_at: AtomicU64,
    /// Secure build: the key of the page's encoded free-list links (`secure::encode`),
    /// drawn when the page is set up.
    #[cfg(feature = "secure")]
    pub key: usize,
    /// `block_divisor::magic(block_size)`, to tell block starts with a multiply:
    /// `realloc`'s check of its pointer (`block_divisor::is_block_multiple`) and, in
    /// the secure build, every free's (`secure::is_block_start`).
    pub block_magic: u64,
    /// Secure build: `secure::start_limit(block_size, capacity)` (one block for a
    /// large span: only its start may be freed); 0 with `EBB_ZERO_ON_FREE` (every free
    /// then takes the slow path, which zeroes).
    #[cfg(feature = "secure")]
    pub block_limit: u64,
    // -- line 2: written by other threads' frees
    _line2: [CacheLine; 0],
    /// Blocks freed by other threads: the list head, with the list's length in the
    /// top bits (`THREAD_FREE_COUNT_SHIFT`), so the owner takes the list without
    /// walking it. The links inside the list are plain pointers.
    pub thread_free: AtomicPtr<Block>,
}

/// A zero-sized field of this type starts a new cache line in a `repr(C)` struct.
#[repr(align(64))]
struct CacheLine;

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<Page>() == 192);
    assert!(offset_of!(Page, holes) < 64);
    assert!(offset_of!(Page, owner) == 64 && offset_of!(Page, freed_at) < 128);
    assert!(offset_of!(Page, thread_free) == 128);
};

impl Page {
    /// A descriptor of a free slice.
    pub const fn new() -> Self {
        Self {
            free: null_mut(),
            local_free: null_mut(),
            used: AtomicU32::new(0),
            capacity: 0,
            reserved: 0,
            class: 0,
            is_zero: false,
            free_is_zero: false,
            listed: false,
            next: null_mut(),
            prev: null_mut(),
            slice_count: 0,
            holes: 0,
            frees_to_local: false,
            #[cfg(feature = "secure")]
            guarded: false,
            #[cfg(feature = "secure")]
            large_canary: false,
            #[cfg(feature = "secure")]
            small_canary: false,
            sample: 0,
            _line1: [],
            owner: AtomicUsize::new(FREE),
            last_owner: AtomicUsize::new(0),
            block_size: AtomicUsize::new(0),
            start: null_mut(),
            freed_at: AtomicU64::new(0),
            #[cfg(feature = "secure")]
            key: 0,
            block_magic: 0,
            #[cfg(feature = "secure")]
            block_limit: 0,
            _line2: [],
            thread_free: AtomicPtr::new(null_mut()),
        }
    }

    #[inline(always)]
    pub fn block_size(&self) -> usize {
        self.block_size.load(Ordering::Relaxed)
    }

    /// The link word of free block `block` of this page: the next block, or null.
    /// In the secure build the word is encoded and checked (`secure::decode`: the
    /// next block must lie in this page). Walks and slow paths use this one; the
    /// malloc fast paths use [`Page::link_fast`].
    ///
    /// # Safety
    /// `block` is a free block of this page (on one of its lists).
    #[inline(always)]
    pub unsafe fn link(&self, block: *mut Block) -> *mut Block {
        // SAFETY: per the contract the block is free, so its first word is a link.
        let stored = unsafe { (*block).next };
        #[cfg(feature = "secure")]
        let stored = crate::span::secure::decode(
            self.key,
            self.start as usize,
            self.span_bytes(),
            block as usize,
            stored as usize,
        ) as *mut Block;
        stored
    }

    /// [`Page::link`] for the malloc fast paths: in the secure build the decoded link
    /// is only checked to be a user-space address (`secure::decode_fast`: two
    /// instructions and a branch, against six and two loads for the range check). An
    /// overwritten link decodes to a random word, which is not one but for a chance of
    /// about 2^-17; the slow paths' pops and every walk check the range.
    ///
    /// # Safety
    /// As [`Page::link`].
    #[inline(always)]
    pub unsafe fn link_fast(&self, block: *mut Block) -> *mut Block {
        // SAFETY: per the contract the block is free, so its first word is a link.
        let stored = unsafe { (*block).next };
        #[cfg(feature = "secure")]
        let stored = crate::span::secure::decode_fast(self.key, block as usize, stored as usize)
            as *mut Block;
        stored
    }

    /// [`Page::link_fast`] without the secure build's check, which the caller makes
    /// after it stored the link as the list's new head (`secure::check_fast`).
    ///
    /// # Safety
    /// As [`Page::link`].
    #[cfg(feature = "secure")]
    #[inline(always)]
    pub unsafe fn link_unchecked(&self, block: *mut Block) -> *mut Block {
        // SAFETY: per the contract the block is free, so its first word is a link.
        let stored = unsafe { (*block).next };
        crate::span::secure::decode_unchecked(self.key, block as usize, stored as usize)
            as *mut Block
    }

    /// Write the link word of free block `block`: it points to `next` (null allowed).
    ///
    /// # Safety
    /// `block` is a block of this page the caller may write (going onto a list).
    #[inline(always)]
    pub unsafe fn set_link(&self, block: *mut Block, next: *mut Block) {
        #[cfg(feature = "secure")]
        let next =
            crate::span::secure::encode(self.key, block as usize, next as usize) as *mut Block;
        // SAFETY: per the contract.
        unsafe { (*block).next = next };
    }

    /// Secure build: clear the link word of `block`, just taken off a list (after the
    /// list head moved on), so a block in use never holds a valid link: that is how a
    /// double free is recognised. Nothing in other builds. (A block's canary, pages
    /// with `small_canary`, is written when it is carved, `secure::write_canaries`,
    /// and stays: nothing of ebb's writes a block's last word afterwards.)
    ///
    /// The compiler fence keeps the clearing after the store of the new list head: a
    /// `fork` in between would otherwise leave the child a list whose head has no link
    /// (the child takes over the pages of the threads that did not survive; a compiler
    /// fence is enough where stores become visible in order, as on x86-64).
    ///
    /// # Safety
    /// `block` was just taken off this page's list by the caller, its owner.
    #[inline(always)]
    pub unsafe fn clear_link(&self, block: *mut Block) {
        #[cfg(feature = "secure")]
        // SAFETY: per the contract the block is the caller's.
        unsafe {
            core::sync::atomic::compiler_fence(Ordering::Release);
            (*block).next = null_mut();
        }
        #[cfg(not(feature = "secure"))]
        let _ = block;
    }

    /// Blocks handed out and not yet returned to the owner's lists.
    #[inline(always)]
    pub fn used(&self) -> u32 {
        self.used.load(Ordering::Relaxed) & !CURRENT
    }

    /// Owner-only update of the count in `used`, keeping the `CURRENT` flag. Relaxed
    /// loads and stores keep the word readable by stats without a data race.
    #[inline(always)]
    pub fn set_used(&self, value: u32) {
        debug_assert!(value & CURRENT == 0);
        let flag = self.used.load(Ordering::Relaxed) & CURRENT;
        self.used.store(value | flag, Ordering::Relaxed);
    }

    /// Owner-only: one more block handed out. A relaxed load and store of the whole word
    /// compile to one `inc` (the flag bit is not reached: counts stay far below it).
    #[inline(always)]
    pub fn inc_used(&self) {
        let word = self.used.load(Ordering::Relaxed);
        debug_assert!(word & !CURRENT < CURRENT - 1);
        self.used.store(word + 1, Ordering::Relaxed);
    }

    /// Blocks on the remote-free list right now (the length in its head word): freed by
    /// other threads, still counted in `used` until the owner takes them in. Any thread
    /// may read it (stats).
    #[inline]
    pub fn remote_frees_pending(&self) -> u32 {
        (self.thread_free.load(Ordering::Relaxed) as usize >> THREAD_FREE_COUNT_SHIFT) as u32
    }

    /// True while the page is its heap's current page (the `CURRENT` flag).
    #[inline]
    pub fn is_current(&self) -> bool {
        self.used.load(Ordering::Relaxed) & CURRENT != 0
    }

    /// Owner-only: set or clear the `CURRENT` flag (see `Heap::set_current`).
    #[inline]
    pub fn set_is_current(&self, current: bool) {
        let count = self.used();
        self.used.store(
            if current { count | CURRENT } else { count },
            Ordering::Relaxed,
        );
    }

    /// Set up a fresh span as a page of `block_size` blocks (owner: the caller).
    pub fn init_blocks(&mut self, class: usize, block_size: usize, bytes: usize) {
        debug_assert!(block_size >= crate::size_class::MIN_BLOCK);
        #[cfg(feature = "secure")]
        let bytes = self.secure_init(block_size, bytes);
        self.free = null_mut();
        self.local_free = null_mut();
        self.used.store(0, Ordering::Relaxed); // not current yet either
        self.capacity = 0;
        self.reserved = (bytes / block_size) as u32;
        self.class = class as u8;
        self.free_is_zero = false;
        self.frees_to_local = false;
        self.holes = 0;
        self.block_size.store(block_size, Ordering::Relaxed);
        // A 64-bit division per page set up, for none per `realloc`.
        self.block_magic = crate::span::block_divisor::magic(block_size);
        self.thread_free.store(null_mut(), Ordering::Relaxed);
        self.next = null_mut();
        self.prev = null_mut();
    }

    /// The secure build's part of `init_blocks`: a fresh key, the canaries
    /// and (level full) a guard page at the end of the span. Returns the bytes left for
    /// blocks.
    #[cfg(feature = "secure")]
    fn secure_init(&mut self, block_size: usize, bytes: usize) -> usize {
        self.small_canary = crate::span::secure::small_canaries(block_size);
        self.key = crate::span::secure::new_key()
            | (self.small_canary as usize * crate::span::secure::KEY_SMALL_CANARY);
        self.block_limit = 0;
        debug_assert!(!self.guarded, "a span keeps its guard page");
        // Only a segment's own descriptors guard their spans: a descriptor made over
        // other memory (unit tests) does not.
        let segment = crate::span::segment::segment_of_page(self);
        self.guarded = core::ptr::eq(segment, crate::span::segment::segment_of(self.start)) && {
            let end = self.start as usize + bytes - segment as usize;
            let last = end / crate::span::segment::SLICE_SIZE - 1;
            // SAFETY: a fresh span of ours, nothing carved in it yet; the segment is
            // live (segments are never unmapped).
            unsafe {
                crate::span::secure::guard_span(&(*segment).guard_slices, last, self.start, bytes)
            }
        };
        if self.guarded {
            bytes - crate::os::page_size()
        } else {
            bytes
        }
    }

    /// True if nothing is handed out (after `gather_frees`).
    #[inline]
    pub fn is_unused(&self) -> bool {
        self.used() == 0
    }

    /// True if the page can hand out a block without carving more.
    #[inline]
    pub fn has_free(&self) -> bool {
        !self.free.is_null()
    }

    /// True if some block is free or not yet carved.
    #[inline]
    pub fn has_room(&self) -> bool {
        !self.free.is_null()
            || !self.local_free.is_null()
            || self.capacity < self.reserved
            || self.holes != 0
    }

    /// Return to the OS the memory of this page that holds no live block: the part never
    /// carved into blocks, if the span was reused (a fresh one was never touched there),
    /// and, for blocks of at least `PURGE_INSIDE_MIN`, the inside of each free block but
    /// its first OS page (its link word lives there), after the runs of free blocks
    /// that fill whole 32nds of the page went back as holes; for smaller blocks,
    /// the OS pages that hold only free blocks (`span::holes::purge`). For pages whose owner went idle or
    /// that nobody claimed, where a few survivors would otherwise keep the whole page
    /// resident. Returns the bytes given back. Owner only.
    pub fn purge_free_blocks(&mut self) -> usize {
        let mut batch = DecommitBatch::new();
        // SAFETY: the batch is finished before we return, while we still own the page.
        unsafe { self.purge_free_blocks_into(&mut batch) };
        batch.finish()
    }

    /// [`Self::purge_free_blocks`], the decommits added to `batch` (one system call for
    /// many pages).
    ///
    /// # Safety
    /// Owner only, and `batch` is finished before the page's ownership is given up.
    pub unsafe fn purge_free_blocks_into(&mut self, batch: &mut DecommitBatch) {
        let size = self.block_size();
        let os_page = crate::os::page_size();
        if !self.is_zero && self.capacity < self.reserved {
            let start =
                (self.start as usize + self.capacity as usize * size).next_multiple_of(os_page);
            let end = self.start as usize + self.span_bytes();
            if start < end {
                // SAFETY: nothing was carved there since the span became this page, so
                // no block (and no link word) lives in it; `is_zero` stays false, so
                // blocks carved there later are not assumed zero (they are, which costs
                // a memset); we own the page until the caller finishes the batch.
                unsafe { batch.add(start as *mut u8, end - start) };
            }
        }
        // Holes first (whole runs of free blocks, link words and all); then, for big
        // blocks, the inside of each free block left on the lists.
        // SAFETY: we own the page until the caller finishes the batch.
        unsafe { crate::span::holes::purge_into(self, batch) };
        if size < PURGE_INSIDE_MIN {
            return;
        }
        for mut block in [self.free, self.local_free] {
            while !block.is_null() {
                let start =
                    (block as usize + core::mem::size_of::<Block>()).next_multiple_of(os_page);
                let end = (block as usize + size) & !(os_page - 1);
                // SAFETY: the block is free and ours; only whole OS pages strictly after
                // its link word are given back (they read as zero afterwards, which no
                // one relies on: `free_is_zero` is only set for fresh carving).
                unsafe {
                    if start < end {
                        batch.add(start as *mut u8, end - start);
                    }
                    block = self.link(block);
                }
            }
        }
    }

    /// Gather every freed block onto the owner's lists: take the remote frees in, and
    /// move the owner's frees to `free` if it is empty. Owner only. Returns the length
    /// of `local_free` if known (0, or just the remote list taken; for the sampler's
    /// hand-out, `profile/handout.rs`), None if it holds the owner's frees.
    // (Inlined in the secure build, as the default build's compiler chooses: out of
    // line it was a call and five saved registers each time an owner took its frees
    // in, `append_local_free`.)
    #[cfg_attr(feature = "secure", inline)]
    pub fn gather_frees(&mut self) -> Option<u32> {
        let both = !self.free.is_null() && !self.local_free.is_null();
        let remote = self.take_remote_frees();
        if self.free.is_null() && !self.local_free.is_null() {
            self.free = self.local_free;
            self.local_free = null_mut();
            self.free_is_zero = false;
            self.frees_to_local = false;
        }
        if self.local_free.is_null() {
            Some(0)
        } else if both {
            None
        } else {
            Some(remote)
        }
    }

    /// Other threads' frees wait on `thread_free` (a relaxed look: the owner takes them
    /// with `take_remote_frees`).
    #[inline(always)]
    pub fn has_remote_frees(&self) -> bool {
        !self.thread_free.load(Ordering::Relaxed).is_null()
    }

    /// Take the remote-free list into the owner's lists, returning its length. Owner only.
    ///
    /// The list's length comes with its head, so it is taken whole without a walk: a
    /// walk reads (and a fold into `local_free` would write) every block, blocks another
    /// core freed a moment ago, one cache miss after another. Only when both `free` and
    /// `local_free` hold blocks is the list walked, to find its tail.
    pub fn take_remote_frees(&mut self) -> u32 {
        let head = protocol::take_list(&self.thread_free);
        if head.is_null() {
            return 0;
        }
        let tag = head as usize & !THREAD_FREE_ADDR_MASK;
        let count = (tag >> THREAD_FREE_COUNT_SHIFT) as u32;
        // Untagged with pointer arithmetic, which keeps the pointer's provenance.
        let list = head.wrapping_byte_sub(tag);
        debug_assert!(!list.is_null() && count > 0);
        debug_assert!(count <= self.used(), "more remote frees than blocks in use");
        self.set_used(self.used().saturating_sub(count));
        if self.local_free.is_null() {
            self.local_free = list;
        } else if self.free.is_null() {
            self.free = self.local_free;
            self.local_free = list;
            self.free_is_zero = false;
            self.frees_to_local = false;
        } else {
            // SAFETY: blocks on the list were freed to this page and are ours now; the
            // Acquire swap makes their link words visible.
            unsafe { self.append_local_free(list) };
        }
        count
    }

    /// The walk of [`Page::take_remote_frees`] when both of the owner's lists hold
    /// blocks: `list` goes in front of `local_free`. Out of line in the secure build,
    /// whose checked links (`secure::decode`) made `gather_frees` too big to inline
    /// into its callers (a call and five saved registers each time the owner takes its
    /// remote frees in, for a walk it rarely needs).
    ///
    /// # Safety
    /// `list` is a list of free blocks of this page, the caller's (the owner's).
    #[cfg_attr(feature = "secure", inline(never))]
    unsafe fn append_local_free(&mut self, list: *mut Block) {
        // SAFETY: per the contract.
        unsafe {
            let mut tail = list;
            loop {
                let next = self.link(tail);
                if next.is_null() {
                    break;
                }
                tail = next;
            }
            self.set_link(tail, self.local_free);
        }
        self.local_free = list;
    }

    /// Owner-local free: push on `free` (on `local_free` while `free_is_zero`). Returns
    /// true if the page became unused and is not its heap's current page (see
    /// `CURRENT`).
    ///
    /// # Safety
    /// `block` must be a block of this page that is in use, and the caller its owner.
    #[inline(always)]
    pub unsafe fn free_local(&mut self, block: *mut Block) -> bool {
        // Reuse order: a freed block goes on `free`, so the next malloc of the class
        // hands it out again while its line is still in cache (LIFO), unless `free`
        // holds freshly carved blocks known to be zero (`free_is_zero`), which a push
        // would spoil for `alloc_zeroed`; then it waits on `local_free`. Measured
        // (cachegrind, compiler workload): 10% fewer L1 data misses than always
        // `local_free`; the choice compiles to one `movzx` (the flag indexes the two
        // list heads, 8 bytes apart), one instruction more per free.
        debug_assert!(!self.free_is_zero || self.frees_to_local);
        let list: *mut *mut Block = if self.frees_to_local {
            &mut self.local_free
        } else {
            &mut self.free
        };
        // SAFETY: per the contract, the block is ours to write; `list` points at one of
        // our own two list heads.
        unsafe {
            self.set_link(block, *list);
            *list = block;
        }
        debug_assert!(self.used() > 0, "local free of a page with no block in use");
        let used = self.used.as_ptr();
        // SAFETY: only the owner writes `used`, so a plain read-modify-write is exact.
        // Plain, not an atomic load and store: with those LLVM keeps the value in a
        // register (load, dec, store: 4 instructions with the test) instead of one `dec`
        // on memory and a jump on its flags. The word's other readers (stats, a stealer
        // that proved the owner idle) read it atomically; a stats snapshot may see a
        // count a few blocks old, as it may anyway.
        unsafe {
            *used -= 1;
            *used == 0
        }
    }

    /// Free from a thread that does not own the page: one CAS push. Returns the list
    /// head word seen before the push (null means the list was empty).
    ///
    /// # Safety
    /// `block` must be a block of this page that is in use.
    #[inline]
    pub unsafe fn free_remote(&self, block: *mut Block) -> *mut Block {
        debug_assert!(block as usize <= THREAD_FREE_ADDR_MASK);
        #[cfg(feature = "secure")]
        {
            // The encoding's `key ^ block` is worked out once, before the loop (inside
            // it the compiler read the key again after the store of the link: the
            // block could alias the descriptor), and the new head word from the old
            // one less its address part, which the compiler cannot turn back into a
            // mask of the count (`secure::opaque`): with both masks and the key in
            // registers the push needed one more than a leaf has free (a push and a
            // pop of a saved register per cross-thread free).
            let tweak = crate::span::secure::tweak(self.key, block as usize);
            let block_and_one = block as usize + (1 << THREAD_FREE_COUNT_SHIFT);
            protocol::push_remote(&self.thread_free, |head| {
                debug_assert!(head as usize >> THREAD_FREE_COUNT_SHIFT < 0xffff);
                let next = crate::span::secure::opaque(head as usize & THREAD_FREE_ADDR_MASK);
                // SAFETY: the block is ours until the CAS publishes it.
                unsafe { (*block).next = (next ^ tweak) as *mut Block };
                // The old count, one more, and the block's address.
                (head as usize - next + block_and_one) as *mut Block
            })
        }
        #[cfg(not(feature = "secure"))]
        protocol::push_remote(&self.thread_free, |head| {
            let tag = head as usize & !THREAD_FREE_ADDR_MASK;
            debug_assert!(tag >> THREAD_FREE_COUNT_SHIFT < 0xffff);
            // SAFETY: the block is ours until the CAS publishes it.
            unsafe { self.set_link(block, head.wrapping_byte_sub(tag)) };
            block.wrapping_byte_add(tag + (1 << THREAD_FREE_COUNT_SHIFT))
        })
    }

    /// Bytes of the page's memory (its span).
    pub fn span_bytes(&self) -> usize {
        self.slice_count as usize * crate::span::segment::SLICE_SIZE
    }
}

/// A doubly linked list of pages through `Page::next`/`prev`.
#[derive(Clone, Copy)]
pub struct PageList {
    pub first: *mut Page,
    pub last: *mut Page,
}

// SAFETY: the pointers are followed only by whoever holds the list (its lock, or the
// heap that owns it).
unsafe impl Send for PageList {}

impl PageList {
    pub const fn new() -> Self {
        Self {
            first: null_mut(),
            last: null_mut(),
        }
    }

    /// # Safety
    /// `page` must be valid and in no list.
    pub unsafe fn push_front(&mut self, page: *mut Page) {
        // SAFETY: per the contract; list members are valid.
        unsafe {
            (*page).prev = null_mut();
            (*page).next = self.first;
            if self.first.is_null() {
                self.last = page;
            } else {
                (*self.first).prev = page;
            }
        }
        self.first = page;
    }

    /// # Safety
    /// `page` must be valid and in no list.
    pub unsafe fn push_back(&mut self, page: *mut Page) {
        // SAFETY: per the contract; list members are valid.
        unsafe {
            (*page).next = null_mut();
            (*page).prev = self.last;
            if self.last.is_null() {
                self.first = page;
            } else {
                (*self.last).next = page;
            }
        }
        self.last = page;
    }

    /// # Safety
    /// `page` must be in this list.
    pub unsafe fn remove(&mut self, page: *mut Page) {
        // SAFETY: per the contract; list members are valid.
        unsafe {
            let (prev, next) = ((*page).prev, (*page).next);
            if prev.is_null() {
                self.first = next;
            } else {
                (*prev).next = next;
            }
            if next.is_null() {
                self.last = prev;
            } else {
                (*next).prev = prev;
            }
            (*page).next = null_mut();
            (*page).prev = null_mut();
        }
    }
}

/// Count blocks on a list.
#[cfg(test)]
pub fn list_len(page: &Page, mut head: *mut Block) -> usize {
    let mut n = 0;
    // SAFETY: callers pass lists of `page` they own.
    unsafe {
        while !head.is_null() {
            n += 1;
            head = page.link(head);
        }
    }
    n
}

/// The page returned when a heap has no page for a class: its empty `free` list sends
/// the malloc fast path to the slow path, so the fast path needs no null test.
pub struct EmptyPage(pub core::cell::UnsafeCell<Page>);
// SAFETY: the empty page is never written: its free list is always null, so no code
// path pops from it or pushes to it.
unsafe impl Sync for EmptyPage {}

pub static EMPTY_PAGE: EmptyPage = EmptyPage(core::cell::UnsafeCell::new(Page::new()));

#[inline(always)]
pub fn empty_page() -> *mut Page {
    EMPTY_PAGE.0.get()
}

#[cfg(test)]
#[path = "page_tests.rs"]
mod tests;
