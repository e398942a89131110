//! Shared start: a thread's first blocks of a small class come from pages every thread
//! shares, until it has taken enough of that class to fill an OS page of its own.
//!
//! Why: a page of its own costs a thread at least one OS page per class it touches (the
//! first carve, `carve::FIRST_CARVE_BYTES`) and a page descriptor. A thread that holds a
//! few blocks in each of many classes (issue 14's many-threads shape: 50 blocks of
//! 16 B-2 KiB fall in ~28 classes) so pays ~28 OS pages for ~13 OS pages of blocks; a
//! thousand such threads paid 173 KB each. Served from shared pages, their blocks sit
//! side by side with other threads' blocks of the class.
//!
//! How: one process-wide [`Heap`] (`SHARED`, never in TLS, never in the registry)
//! owns the shared pages, and a spin lock that is only ever *tried* guards it. The
//! malloc slow path of a thread (`slow::malloc_slow`) asks [`try_alloc`] first when the
//! thread holds no page of the class, counts the blocks it took down in
//! `Heap::shared_left[class]` (from [`shared_limit`]: 16 KiB of blocks, one carve's
//! worth, or 64 blocks), and stops asking once that reaches 0: from then on
//! the class works as always, from the thread's own pages, and the fast paths never
//! see the shared heap (its pages are never in a thread's `current` table).
//!
//! Frees: a shared page's owner word is the shared heap's address, never a thread's,
//! so every free of its blocks takes the free fast path's remote push (`thread_free`,
//! one CAS; the shared heap takes the list in when it next serves the class). Those
//! pushes also set and check the freed key (`alloc::free_slow_and_leave`,
//! [`holds_freed`]), so a thread's double free of one of its first blocks is caught as
//! it would be on a page of its own. The shared heap is a heap like any other for the pages: full pages it
//! abandons (`slow::find_page`), it claims listed abandoned pages before carving a
//! fresh span, and the purger lets go of its pages as it does an idle thread's
//! ([`maintain`], from `takeover::take_over_idle`): every page but the current ones
//! about once per purge delay, and all of them, holes purged, once no thread has
//! taken a shared block for the purge delay.
//!
//! Cost: nothing on the fast paths (the thread's table keeps the empty page for the
//! class, so its mallocs of the class take the slow path anyway until it earns a
//! page). A thread pays at most `shared_limit` slow-path mallocs per class, each with
//! an uncontended lock and a remote free. The lock is never waited for: a thread that
//! finds it taken after a short spin takes its own page as before, so no thread waits
//! on another, and a fork while another thread holds it leaves the child's shared
//! heap locked (unused, never read half-changed) rather than deadlocked.

use crate::counters::COUNTERS;
use crate::front::heap::{abandon_all, Heap};
use crate::front::queue::queue_remove;
use crate::front::slow::{find_page, pop};
use crate::size_class::{class_size, CLASS_COUNT, SMALL_PAGE_BLOCK_MAX};
use crate::span::page::CHECK_TAG;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

/// Bytes of a class a thread takes from shared pages before it gets pages of its own:
/// a carve's worth (`carve::CARVE_BYTES`). Below it, a page of its own would hold less
/// than a carve of the thread's blocks.
pub const SHARED_START_BYTES: usize = 16 * 1024;
/// Blocks of a class a thread takes from shared pages at most (tiny classes: 64 slow
/// paths, not 1,024, before a 16-byte class is the thread's own).
pub const SHARED_START_BLOCKS: usize = 64;
/// Tries of a taken lock before a thread gives up on the shared heap for this malloc.
const SPINS: u32 = 64;

/// Blocks of `class` a thread takes from shared pages before it uses pages of its own
/// (0: the class is never shared: blocks above 8 KiB, whose pages of 8 slices and more
/// a thread's first blocks would leave mostly empty).
pub const fn shared_limit(class: usize) -> u8 {
    if class_size(class) > SMALL_PAGE_BLOCK_MAX {
        return 0;
    }
    let by_bytes = SHARED_START_BYTES / class_size(class);
    let limit = if by_bytes < SHARED_START_BLOCKS {
        by_bytes
    } else {
        SHARED_START_BLOCKS
    };
    if limit == 0 {
        1
    } else {
        limit as u8
    }
}

/// `shared_limit` of every class: what a new heap's `shared_left` starts from.
pub const SHARED_LIMITS: [u8; CLASS_COUNT] = {
    let mut limits = [0u8; CLASS_COUNT];
    let mut class = 0;
    while class < CLASS_COUNT {
        limits[class] = shared_limit(class);
        class += 1;
    }
    limits
};

struct Shared {
    /// Held (true) by the thread using `heap`; only ever tried (`try_lock`).
    locked: AtomicBool,
    heap: UnsafeCell<Heap>,
}

// SAFETY: `heap` is touched only by the holder of `locked` (Acquire on taking it,
// Release on letting go).
unsafe impl Sync for Shared {}

static SHARED: Shared = Shared {
    locked: AtomicBool::new(false),
    heap: UnsafeCell::new(Heap::empty()),
};

/// Times a thread that wants a shared block yields the CPU to a lock holder before it
/// gives up and takes a page of its own. The holder may have been preempted inside the
/// lock (more runnable threads than cores: a thousand threads starting at once on two
/// cores); giving up at once then cost each loser an OS page per class it touched,
/// ~4 KB per thread in the many-threads scenario (36 of 1,000 heaps took ~33 pages
/// each). Bounded, so no thread waits on another for long, and a forked child whose
/// lock stayed taken pays it once per class per thread.
const YIELDS: u32 = 16;

/// Take the lock, spinning a little; None if another thread keeps it.
fn try_lock() -> Option<*mut Heap> {
    try_lock_yielding(0)
}

/// `try_lock`, yielding the CPU up to `yields` times between rounds of spinning.
fn try_lock_yielding(yields: u32) -> Option<*mut Heap> {
    for round in 0..=yields {
        if round > 0 {
            crate::os::yield_now();
        }
        if let Some(heap) = try_lock_spinning() {
            return Some(heap);
        }
    }
    None
}

fn try_lock_spinning() -> Option<*mut Heap> {
    for _ in 0..SPINS {
        if !SHARED.locked.load(Ordering::Relaxed)
            && SHARED
                .locked
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            let heap = SHARED.heap.get();
            // SAFETY: we hold the lock. The owner word is the heap's address, which a
            // const initializer cannot name: written on first use.
            unsafe {
                if (*heap).owner_word == 0 {
                    (*heap).owner_word = heap as usize;
                }
            }
            return Some(heap);
        }
        core::hint::spin_loop();
    }
    None
}

fn unlock() {
    SHARED.locked.store(false, Ordering::Release);
}

/// True if `owner` (a page's owner word) is the shared heap: the page is a shared one.
#[inline]
pub fn owns(owner: usize) -> bool {
    owner == SHARED.heap.get() as usize
}

/// Whether `block`, freed into shared page `page` and found holding the freed key, is
/// on the page's lists already (a double free). Frees into shared pages are remote
/// pushes, so without this a thread's double free of one of its first blocks would go
/// unseen and put the block on the list twice. Confirmed under the lock, as the owner
/// does it (`freed_key::is_on_free_list`); false if the lock stays taken or the page is
/// no longer shared (then the free goes on as a plain remote free, as for any page of
/// another heap).
///
/// # Safety
/// `page` is `block`'s page; the caller is inside its own heap's `in_op` window.
#[cold]
pub unsafe fn holds_freed(page: *mut crate::span::page::Page, block: *mut u8) -> bool {
    let Some(shared) = try_lock() else {
        return false;
    };
    // SAFETY: we hold the lock, so the shared heap's pages are ours to walk; a page it
    // let go of meanwhile is checked by its owner word first.
    let found = unsafe {
        (*page).owner.load(Ordering::Acquire) == shared as usize
            && crate::front::freed_key::is_on_free_list(page, block)
    };
    unlock();
    found
}

/// True if `heap` (the calling thread's) should take its next block of `class` from
/// the shared pages: it holds no page of the class and has not taken its share yet.
/// Not in check mode (every block is recorded on the thread's own pages there) nor
/// while the heap samples (the sampler cuts the thread's own free lists).
///
/// # Safety
/// `heap` is the calling thread's heap, inside a slow path.
#[inline]
pub unsafe fn wanted(heap: *mut Heap, class: usize) -> bool {
    // SAFETY: per the contract.
    unsafe {
        let h = &*heap;
        *h.shared_left.get_unchecked(class) != 0
            && h.queues.get_unchecked(class).first.is_null()
            && h.owner_word & CHECK_TAG == 0
            && h.local_mask != 0
    }
}

/// A block of `class` from the shared pages for `heap` (counted against its share) if
/// it should take one (`wanted`); None if not, or if the shared heap is busy or the OS
/// refused memory (then the caller goes on with the thread's own pages).
///
/// # Safety
/// `heap` is the calling thread's heap, entered with `slow_path_enter`.
#[inline]
pub unsafe fn try_alloc(heap: *mut Heap, class: usize) -> Option<*mut u8> {
    // SAFETY: per the contract.
    unsafe {
        if !wanted(heap, class) {
            return None;
        }
        let block = alloc(heap, class);
        (!block.is_null()).then_some(block)
    }
}

/// `try_alloc` past the test: null if the shared heap is busy or the OS refused memory.
///
/// # Safety
/// As `try_alloc`.
#[cold]
unsafe fn alloc(heap: *mut Heap, class: usize) -> *mut u8 {
    let Some(shared) = try_lock_yielding(YIELDS) else {
        return core::ptr::null_mut();
    };
    // SAFETY: per the contract the heap is ours; we hold the shared heap's lock, and
    // its pages are owned by it, so by us while we hold the lock.
    let block = unsafe {
        let current = (*shared).current[class].load(Ordering::Relaxed);
        let page = if (*current).free.is_null() {
            find_page(shared, class)
        } else {
            current
        };
        if page.is_null() {
            core::ptr::null_mut()
        } else {
            let activity = (*shared).activity.load(Ordering::Relaxed);
            (*shared)
                .activity
                .store(activity.wrapping_add(1), Ordering::Relaxed);
            pop(page)
        }
    };
    unlock();
    if !block.is_null() {
        // SAFETY: as above.
        unsafe { (*heap).shared_left[class] -= 1 };
        COUNTERS.shared_start_blocks.fetch_add(1, Ordering::Relaxed);
    }
    block
}

/// The purger's pass over the shared heap (with the pass over idle heaps): once no
/// thread has taken a shared block for `idle_ms` (or at once if `idle_ms` is 0), let
/// go of every shared page (abandoned as an idle heap's: holes purged, listed for any
/// thread if they have room); while threads still take shared blocks, of every page
/// but the current one of each class (as `slow::sweep` does for a busy heap), so the
/// remote frees into them reach a drainer. Returns when to look again (`u64::MAX`:
/// the shared heap holds no page).
pub fn maintain(now: u64, idle_ms: u64) -> u64 {
    let Some(shared) = try_lock() else {
        return now.saturating_add(idle_ms.max(1));
    };
    // SAFETY: we hold the lock: the shared heap and its pages are ours.
    let next = unsafe {
        if (*shared).page_count.load(Ordering::Relaxed) == 0 {
            u64::MAX
        } else {
            let quiet_since = crate::front::takeover::quiet_since(shared, now);
            let due = quiet_since.saturating_add(idle_ms);
            if due <= now {
                abandon_all(shared, quiet_since.min(now));
                u64::MAX
            } else {
                for class in 0..CLASS_COUNT {
                    let first = (*shared).queues[class].first;
                    if first.is_null() {
                        continue;
                    }
                    let mut page = (*first).next;
                    while !page.is_null() {
                        let next = (*page).next;
                        queue_remove(shared, class, page);
                        crate::handoff::abandon::abandon(page, shared as usize, now);
                        page = next;
                    }
                }
                due
            }
        }
    };
    unlock();
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits() {
        use crate::size_class::class_of;
        assert_eq!(shared_limit(class_of(16)), SHARED_START_BLOCKS as u8);
        assert_eq!(shared_limit(class_of(1024)), 16);
        assert_eq!(shared_limit(class_of(2048)), 8);
        assert_eq!(shared_limit(class_of(8192)), 2);
        assert_eq!(shared_limit(class_of(16 * 1024)), 0);
        for class in 0..CLASS_COUNT {
            let limit = shared_limit(class) as usize;
            assert!(limit <= SHARED_START_BLOCKS);
            assert!(limit * class_size(class) <= SHARED_START_BYTES.max(class_size(class)));
        }
    }
}
