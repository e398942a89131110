//! Carving: turning a page's never-used blocks into a free list, a batch at a time
//! (`Page::extend` on the slow path, `Page::carve_in_place` on the malloc fast path),
//! and the batch sizes both use. The page descriptor and its lists are in `page.rs`.
//!
//! Fork safety: a carve links the blocks and counts them in `capacity` (and the secure
//! build's `block_limit`) before it puts the list on `free`, behind a compiler fence,
//! because a `fork` taken by another thread may snapshot this thread mid-carve and the
//! child adopts the page (`stress::fork_while_allocating`).

use crate::span::page::Block;
#[cfg(not(feature = "secure"))]
use core::ptr::null_mut;
use core::sync::atomic::Ordering;

use crate::span::page::Page;

/// Bytes of blocks `Page::extend` carves at a time (at least one block).
pub const CARVE_BYTES: usize = 16 * 1024;
/// Cache lines `Page::extend` writes link words into at most (at least one block):
/// 2 KiB of 16-byte blocks, 32 blocks of 64 bytes and more. A carve writes the link
/// word of every block it carves, and `malloc` reads it back when it pops the block: a
/// carve of 16 KiB of small blocks (256 lines, half of a 32 KiB L1) had its first
/// lines evicted long before they were handed out, so both the write and the read
/// missed. (16 lines: a few fewer misses, 0.1% more instructions over a whole run.) A carve this small stays in L1 until its blocks are popped, and the
/// program's own first write to the block then hits too. The malloc fast path carves
/// the next batch itself when its page runs dry (`alloc::malloc_carve_or_slow`), so
/// the small batches cost no slow path. Not in `Page::extend` of the secure build,
/// whose carve is also the unit level full's randomised order shuffles within
/// (`secure::link_carved`); the malloc fast path's carve at level light keeps them.
pub const CARVE_LINES: usize = 32;

/// The most blocks of `size` bytes one carve may hold by [`CARVE_LINES`] (no limit in
/// the secure build's `Page::extend`).
pub const fn carve_line_cap(size: usize) -> usize {
    if cfg!(feature = "secure") {
        return usize::MAX;
    }
    line_cap(size)
}

const fn line_cap(size: usize) -> usize {
    CARVE_LINES * 64 / if size < 64 { size } else { 64 }
}

/// Blocks of each class the malloc fast path carves at most at a time
/// ([`Page::carve_in_place`]): [`CARVE_BYTES`] and [`CARVE_LINES`] worth, at least
/// one. A table, so the fast path's carve divides nothing.
const CARVE_BATCH: [u16; crate::size_class::CLASS_COUNT] = {
    let mut table = [0u16; crate::size_class::CLASS_COUNT];
    let mut class = 0;
    while class < table.len() {
        let size = crate::size_class::class_size(class);
        let by_bytes = CARVE_BYTES / size;
        let by_lines = line_cap(size);
        let count = if by_bytes < by_lines {
            by_bytes
        } else {
            by_lines
        };
        table[class] = if count == 0 { 1 } else { count as u16 };
        class += 1;
    }
    table
};

/// Bytes of a page's first carve (at least one block): one OS page, so a thread that
/// takes a few blocks of many classes touches one OS page per class, not four (issue
/// 14's many-threads shape: 1,000 threads of 50 blocks each). Later carves double what
/// was carved, up to `CARVE_BYTES`: 4, 4, 8, 16, 16 ... KiB.
pub const FIRST_CARVE_BYTES: usize = 4 * 1024;

impl Page {
    /// Carve more never-used blocks onto `free` (which must be empty): up to 16 KiB
    /// worth and at most `CARVE_LINES` cache lines of link words (at least one block),
    /// because carving writes each block's link word and so makes its memory resident. (Carving 8 big blocks at once was measured: faster
    /// malloc/free sweeps of 16-256 KiB blocks, but ~12% more RSS in the mixed C/Rust
    /// scenario, where threads leave pages with carved blocks they never use.)
    /// Holes (`span::holes`) are refilled first. Returns false if the page is fully
    /// carved and has no holes. Owner only.
    pub fn extend(&mut self) -> bool {
        debug_assert!(self.free.is_null());
        if self.holes != 0 {
            return crate::span::holes::refill(self);
        }
        if self.capacity >= self.reserved {
            return false;
        }
        let size = self.block_size();
        let carve = (self.capacity as usize * size).clamp(FIRST_CARVE_BYTES, CARVE_BYTES);
        let count = (carve / size)
            .min(carve_line_cap(size))
            .clamp(1, (self.reserved - self.capacity) as usize);
        // SAFETY: blocks capacity..capacity+count lie inside the page's span, which the
        // owner has exclusive use of; nobody else has seen them yet.
        let head = unsafe {
            let first = self.start.add(self.capacity as usize * size);
            crate::memcheck::carving(first, count * size);
            #[cfg(not(feature = "secure"))]
            let head = link_in_order(first, count, size);
            #[cfg(feature = "secure")]
            let head = crate::span::secure::link_carved(self, first, count, size);
            head
        };
        self.capacity += count as u32;
        #[cfg(feature = "secure")]
        {
            self.block_limit = if crate::span::secure::zero_on_free() {
                0
            } else {
                crate::span::secure::start_limit_with(
                    self.block_magic,
                    size,
                    self.capacity as usize,
                )
            };
        }
        // The list goes on `free` last, after the blocks are linked and counted as
        // carved: a `fork` taken by another thread meanwhile leaves the child (which
        // adopts this heap's pages, `abandon_foreign_heaps_after_fork`) either no new
        // blocks (carved ones on no list, given back with the page) or all of them,
        // never a half-linked list or blocks that `capacity` and `block_limit` do not
        // cover (the next carve would hand them out twice; the secure build's free
        // would call them invalid pointers: `stress::fork_while_allocating`).
        core::sync::atomic::compiler_fence(Ordering::SeqCst);
        self.free = head;
        self.free_is_zero = self.is_zero;
        self.frees_to_local = self.is_zero;
        true
    }

    /// True if the owner may carve the next batch of blocks on the malloc fast path
    /// (`alloc::malloc_carve_or_slow`): never-carved blocks are left, no hole waits to
    /// be refilled, and no other thread's frees wait on `thread_free` (those go first,
    /// taken in by the slow path, as `slow::find_page` does). The empty page never
    /// qualifies (nothing to carve). Owner only.
    #[inline(always)]
    pub fn can_carve_in_place(&self) -> bool {
        self.capacity < self.reserved
            && self.holes == 0
            && self.thread_free.load(Ordering::Relaxed).is_null()
    }

    /// Blocks a carve in place makes: the class's batch, no more than the page has
    /// carved so far (so a page's batches double) nor than it has left, at least one.
    #[inline(always)]
    fn carve_batch(&self) -> u32 {
        (CARVE_BATCH[self.class as usize] as u32)
            .min(self.capacity)
            .min(self.reserved - self.capacity)
            .max(1)
    }

    /// [`Page::extend`] for the malloc fast path, on a page that passed
    /// [`Page::can_carve_in_place`]: the same blocks (what was carved so far, up to the
    /// class's batch: 4 KiB of big blocks first, doubling), without the division and the
    /// call. The secure build at level full calls `extend` (its carve shuffles the
    /// blocks); at level light it carves here too, in address order as `extend` does
    /// there, with encoded links ([`Page::carve_light`]). True if `free` holds blocks
    /// now. Owner only.
    #[inline(always)]
    pub fn carve_in_place(&mut self) -> bool {
        #[cfg(feature = "secure")]
        {
            if crate::span::secure::full_set_up() {
                return self.extend();
            }
            self.carve_light();
            true
        }
        #[cfg(not(feature = "secure"))]
        {
            debug_assert!(self.free.is_null() && self.holes == 0);
            let size = self.block_size();
            let count = self.carve_batch();
            // SAFETY: as in `extend`: blocks capacity..capacity+count lie inside the
            // page's span (count <= reserved - capacity, which is > 0 per the caller's
            // test), which the owner has exclusive use of.
            let first = unsafe { self.start.add(self.capacity as usize * size) };
            // SAFETY: as above.
            unsafe {
                crate::memcheck::carving(first, count as usize * size);
                link_in_order(first, count as usize, size);
            }
            self.capacity += count;
            // On `free` last, as in `extend` (step order for a `fork` mid-carve).
            core::sync::atomic::compiler_fence(Ordering::SeqCst);
            self.free = first as *mut Block;
            self.free_is_zero = self.is_zero;
            self.frees_to_local = self.is_zero;
            true
        }
    }
}

#[cfg(feature = "secure")]
impl Page {
    /// [`Page::carve_in_place`] at level light: the default build's batch, in address
    /// order, each link encoded (`Page::set_link`), then `block_limit` and the
    /// canaries (pages with `small_canary`) as `extend` keeps them. `extend` out of line
    /// cost sweep about 100 instructions per carve (a stack frame, a division for the
    /// batch) where most carves there are of one block of 1-64 KiB.
    #[inline(always)]
    fn carve_light(&mut self) {
        self.carve_light_in::<false>();
    }

    /// [`Page::carve_light`] for the malloc fast path (`alloc::malloc_carve_or_slow`),
    /// which hands out the batch's first block right away: returned here, counted in
    /// `used` and its link word cleared (as `slow::pop` would), and the list starts at
    /// the second block, without reading back and checking the link just written.
    /// Owner only; the page passed [`Page::can_carve_in_place`].
    #[inline(always)]
    pub fn carve_light_and_pop(&mut self) -> *mut u8 {
        self.carve_light_in::<true>()
    }

    /// [`Page::carve_light`], handing out the first block if `POP` (returned; null
    /// otherwise).
    #[inline(always)]
    fn carve_light_in<const POP: bool>(&mut self) -> *mut u8 {
        debug_assert!(self.free.is_null() && self.holes == 0);
        let size = self.block_size();
        let count = self.carve_batch();
        // SAFETY: as in `extend`: blocks capacity..capacity+count lie inside the page's
        // span (count <= reserved - capacity, which is > 0 per the caller's test),
        // which the owner has exclusive use of; nobody else has seen them yet.
        let first = unsafe { self.start.add(self.capacity as usize * size) };
        // The list's first block: the second one if the first is handed out.
        let (head, linked) = if POP {
            ((first as usize + size) * (count > 1) as usize, count - 1)
        } else {
            (first as usize, count)
        };
        // SAFETY: as above.
        unsafe {
            crate::memcheck::carving(first, count as usize * size);
            if POP {
                // Cleared as a pop clears it: a block in use holds no link.
                (first as *mut usize).write(0);
            }
            if linked > 0 {
                // `Page::set_link`'s encoding with the key read once: the compiler
                // reloaded it after every store (a block could alias the descriptor).
                let key = self.key;
                let mut block = head;
                for _ in 1..linked {
                    let next = block + size;
                    (block as *mut usize).write(crate::span::secure::encode(key, block, next));
                    block = next;
                }
                (block as *mut usize).write(crate::span::secure::encode(key, block, 0));
            }
            if self.small_canary {
                crate::span::secure::write_canaries(self, first, count as usize);
            }
        }
        self.capacity += count;
        self.block_limit = if crate::span::secure::zero_on_free() {
            0
        } else {
            crate::span::secure::start_limit_with(self.block_magic, size, self.capacity as usize)
        };
        if POP {
            self.inc_used();
        }
        // On `free` last, as in `extend` (step order for a `fork` mid-carve: a child
        // then sees the carved blocks on no list, or all of them, the first one
        // handed out).
        core::sync::atomic::compiler_fence(Ordering::SeqCst);
        self.free = head as *mut Block;
        self.free_is_zero = self.is_zero;
        self.frees_to_local = self.is_zero;
        if POP {
            first
        } else {
            core::ptr::null_mut()
        }
    }
}

/// Link `count` (at least one) blocks of `size` bytes from `first` in address order,
/// the last one's link null; returns the head. The default build's carve order (the
/// secure build shuffles, `secure::link_carved`).
///
/// # Safety
/// The blocks lie inside a page's span and are the caller's, on no list yet.
#[cfg(not(feature = "secure"))]
#[inline(always)]
unsafe fn link_in_order(first: *mut u8, count: usize, size: usize) -> *mut Block {
    debug_assert!(count >= 1);
    let mut block = first;
    // SAFETY: per the contract, every block from `first` to the last is ours to write.
    unsafe {
        for _ in 1..count {
            let next = block.add(size);
            (*(block as *mut Block)).next = next as *mut Block;
            block = next;
        }
        (*(block as *mut Block)).next = null_mut();
    }
    first as *mut Block
}
