//! The registry of heaps: every live heap (for the purger's scan of idle heaps and for
//! fork), and the heaps of exited threads, kept for reuse (heap memory is never given
//! back, so a stealer that still holds a heap's address reads valid memory).
//!
//! Heaps are linked through a [`Link`] they embed; this layer never looks past it.
//! [`REGISTRY`]'s lock guards the links and nothing else, and is never held while
//! taking another lock.
//!
//! Besides all live heaps, the registry lists the live heaps that may hold pages
//! (`holders`, protocol H in `protocol`): the purger's walk for idle heaps
//! (`front::takeover`) reads only those. Why: it reads two words of every heap it
//! visits, and each heap is an OS page of its own that a thread which holds no page
//! of its own (its blocks come from the shared start pages) never touches again. On
//! this 2-core VM a pass over 1,001 such heaps took 25-34 M TSC cycles (rdtsc around
//! a bare walk of the links; 1,000 threads idle for a second), about 30,000 a heap
//! against 900-1,800 for the same walk repeated at once: every heap a cold line behind
//! a TLB miss. The many-threads scenario's purger spent 14-31 ms there (up to 17% of
//! the process's CPU), with 12-60 of the heaps holding pages.

use crate::sync::{Mutex, MutexGuard};
use core::ptr::null_mut;
use core::sync::atomic::{AtomicBool, Ordering};

/// Links of a heap in the registry's lists (registry lock, but `listed`).
///
/// Invariant (outside protocol H's step H2, under the lock): `listed ⇒ on_holders`
/// for a registered heap; a heap that is not registered reads `listed` true and is
/// never linked (`Link::new`), so its owner never takes the lock for it.
#[repr(C)]
pub struct Link {
    pub next: *mut Link,
    pub prev: *mut Link,
    holder_next: *mut Link,
    holder_prev: *mut Link,
    on_holders: bool,
    /// "The walk will see this heap" (protocol H): read by the owner without the lock.
    listed: AtomicBool,
}

impl Link {
    /// The link of a heap that is never registered (the empty, shared and first-class
    /// heaps): never listed, and never asking to be.
    pub const fn new() -> Link {
        Link {
            next: null_mut(),
            prev: null_mut(),
            holder_next: null_mut(),
            holder_prev: null_mut(),
            on_holders: false,
            listed: AtomicBool::new(true),
        }
    }
}

/// The lists under the registry lock.
///
/// Invariant: `holders ⊆ live` (a heap leaves both when it retires).
pub struct Registry {
    /// All live heaps.
    pub live: *mut Link,
    /// Heaps of threads that exited, ready for reuse (linked through `next`).
    pub spare: *mut Link,
    /// Live heaps that may hold pages (protocol H), linked through `holder_next`.
    holders: *mut Link,
}

// SAFETY: the raw pointers are only followed under the lock.
unsafe impl Send for Registry {}

pub static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    live: null_mut(),
    spare: null_mut(),
    holders: null_mut(),
});

impl Registry {
    /// Link `link` on the holders list.
    ///
    /// # Safety
    /// `link` is a live heap's, not on the list.
    unsafe fn push_holder(&mut self, link: *mut Link) {
        // SAFETY: per the contract; list members are valid.
        unsafe {
            debug_assert!(!(*link).on_holders);
            (*link).holder_prev = null_mut();
            (*link).holder_next = self.holders;
            if !self.holders.is_null() {
                (*self.holders).holder_prev = link;
            }
            (*link).on_holders = true;
        }
        self.holders = link;
    }

    /// Take `link` off the holders list.
    ///
    /// # Safety
    /// `link` is on the list.
    unsafe fn unlink_holder(&mut self, link: *mut Link) {
        // SAFETY: per the contract; list members are valid.
        unsafe {
            debug_assert!((*link).on_holders);
            let (prev, next) = ((*link).holder_prev, (*link).holder_next);
            if prev.is_null() {
                self.holders = next;
            } else {
                (*prev).holder_next = next;
            }
            if !next.is_null() {
                (*next).holder_prev = prev;
            }
            (*link).on_holders = false;
        }
    }

    /// Step H1 under the lock: `link`'s heap is listed, linked if the walk dropped it.
    ///
    /// # Safety
    /// `link` is a registered heap's.
    unsafe fn list_holder(&mut self, link: *mut Link) {
        // SAFETY: per the contract.
        unsafe {
            (*link).listed.store(true, Ordering::Relaxed);
            if !(*link).on_holders {
                self.push_holder(link);
            }
        }
    }

    /// Visit the heaps that hold pages, in list order, until `visit` returns false.
    /// `count(link)` is the heap's page count word: a heap whose count reads 0 leaves
    /// the list (step H2) unless its owner just stored a new count. Returns how many
    /// heaps the walk read (left or visited).
    ///
    /// # Safety
    /// `count(link)` must return the page count of the heap embedding `link`, valid
    /// for as long as the heap (heaps are never unmapped).
    pub unsafe fn walk_holders(
        &mut self,
        count: impl Fn(*mut Link) -> *const core::sync::atomic::AtomicUsize,
        mut visit: impl FnMut(*mut Link) -> bool,
    ) -> u64 {
        let mut read = 0;
        let mut link = self.holders;
        while !link.is_null() {
            read += 1;
            // SAFETY: listed heaps are live (`holders ⊆ live`), linked under our lock;
            // `count` per the contract.
            unsafe {
                let next = (*link).holder_next;
                let words = &*count(link);
                if words.load(Ordering::Relaxed) == 0
                    && crate::protocol::holder_may_unlist(&(*link).listed, words)
                {
                    self.unlink_holder(link);
                } else if !visit(link) {
                    return read;
                }
                link = next;
            }
        }
        read
    }
}

/// Step H1 of protocol H: the owner of the heap embedding `link` has just stored its
/// page count 0 → 1. Takes the registry lock only if the walk may have dropped the
/// heap (about once per takeover of a heap whose thread comes back).
///
/// # Safety
/// `link` is the calling thread's heap's (registered or not).
pub unsafe fn note_holder(link: *mut Link) {
    // SAFETY: per the contract the heap is valid and ours.
    unsafe {
        if !crate::protocol::holder_must_list(&(*link).listed) {
            return;
        }
        REGISTRY.lock().list_holder(link);
    }
}

/// Lock the registry (to walk `live`: every link on it stays valid while locked).
pub fn lock() -> MutexGuard<'static, Registry> {
    REGISTRY.lock()
}

/// Take a spare heap's link, or null.
pub fn take_spare() -> *mut Link {
    let mut registry = REGISTRY.lock();
    let link = registry.spare;
    if !link.is_null() {
        // SAFETY: spare links are valid, linked under the lock.
        registry.spare = unsafe { (*link).next };
    }
    link
}

/// Add a heap to the live list.
///
/// # Safety
/// `link` must be a valid link of a heap in no list.
pub unsafe fn register(link: *mut Link) {
    let mut registry = REGISTRY.lock();
    // SAFETY: per the contract; list members are valid.
    unsafe {
        // Not a holder until its owner notes one (step H1); `retire` unlinked it.
        debug_assert!(!(*link).on_holders);
        (*link).listed.store(false, Ordering::Relaxed);
        (*link).prev = null_mut();
        (*link).next = registry.live;
        if !registry.live.is_null() {
            (*registry.live).prev = link;
        }
    }
    registry.live = link;
}

/// Move a heap from the live list to the spare list.
///
/// # Safety
/// `link` must be on the live list, and its heap unused from now on.
pub unsafe fn retire(link: *mut Link) {
    let mut registry = REGISTRY.lock();
    // SAFETY: per the contract; list members are valid.
    unsafe {
        let (prev, next) = ((*link).prev, (*link).next);
        if prev.is_null() {
            registry.live = next;
        } else {
            (*prev).next = next;
        }
        if !next.is_null() {
            (*next).prev = prev;
        }
        (*link).next = registry.spare;
        if (*link).on_holders {
            registry.unlink_holder(link);
        }
        // A spare heap is never listed (its pages were abandoned: count 0).
        (*link).listed.store(true, Ordering::Relaxed);
    }
    registry.spare = link;
}

/// Take the registry lock before `fork` (see `process::fork_prepare`).
pub fn lock_for_fork() {
    REGISTRY.lock_raw();
}

/// Release the lock taken by `lock_for_fork`, in the parent.
///
/// # Safety
/// The calling thread took the lock with `lock_for_fork`.
pub unsafe fn unlock_after_fork() {
    // SAFETY: per the contract.
    unsafe { REGISTRY.unlock_raw() };
}

/// In the fork child: the lock is free (its holder was the forking thread).
///
/// # Safety
/// Only in the child of a fork whose prepare handler took the lock.
pub unsafe fn reset_after_fork() {
    // SAFETY: per the contract.
    unsafe { REGISTRY.reset_after_fork() };
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use core::sync::atomic::AtomicUsize;
    use std::boxed::Box;
    use std::vec;
    use std::vec::Vec;

    /// A heap as the registry sees it: a link and the page count the walk reads.
    #[repr(C)]
    struct FakeHeap {
        link: Link,
        pages: AtomicUsize,
    }

    fn fake() -> Box<FakeHeap> {
        let heap = Box::new(FakeHeap {
            link: Link::new(),
            pages: AtomicUsize::new(0),
        });
        // As `register` leaves a heap: not listed.
        heap.link.listed.store(false, Ordering::Relaxed);
        heap
    }

    fn link(heap: &FakeHeap) -> *mut Link {
        &heap.link as *const Link as *mut Link
    }

    /// A walk of `registry` (a local one: the global list holds the test's own heaps),
    /// returning (links read, links visited).
    fn walk(registry: &mut Registry) -> (u64, Vec<*mut Link>) {
        let mut visited = Vec::new();
        // SAFETY: every link on the local list is a `FakeHeap`'s first field.
        let read = unsafe {
            registry.walk_holders(
                |l| &(*(l as *const FakeHeap)).pages as *const AtomicUsize,
                |l| {
                    visited.push(l);
                    true
                },
            )
        };
        (read, visited)
    }

    #[test]
    fn walk_reads_holders_drops_emptied_ones_and_relists_them() {
        let mut registry = Registry {
            live: null_mut(),
            spare: null_mut(),
            holders: null_mut(),
        };
        let (a, b, idle) = (fake(), fake(), fake());
        // `a` and `b` take pages (step H1); `idle` never does.
        for heap in [&a, &b] {
            heap.pages.store(1, Ordering::Relaxed);
            assert!(crate::protocol::holder_must_list(&heap.link.listed));
            // SAFETY: the fake heaps outlive the local registry's use of them.
            unsafe { registry.list_holder(link(heap)) };
        }
        assert!(!crate::protocol::holder_must_list(&a.link.listed));
        let (read, visited) = walk(&mut registry);
        assert_eq!((read, visited.len()), (2, 2));
        assert!(!visited.contains(&link(&idle)));

        // `a` loses its pages: the next walk reads it once more and drops it.
        a.pages.store(0, Ordering::Relaxed);
        let (read, visited) = walk(&mut registry);
        assert_eq!((read, visited), (2, vec![link(&b)]));
        assert!(!a.link.on_holders && !a.link.listed.load(Ordering::Relaxed));
        let (read, _) = walk(&mut registry);
        assert_eq!(read, 1, "a dropped heap is still read");

        // It takes a page again: its owner must list it (H1 sees `listed` cleared).
        a.pages.store(1, Ordering::Relaxed);
        assert!(crate::protocol::holder_must_list(&a.link.listed));
        // SAFETY: as above.
        unsafe { registry.list_holder(link(&a)) };
        let (read, visited) = walk(&mut registry);
        assert_eq!(read, 2);
        assert!(visited.contains(&link(&a)) && visited.contains(&link(&b)));

        // A heap listed twice stays linked once.
        // SAFETY: as above.
        unsafe { registry.list_holder(link(&a)) };
        assert_eq!(walk(&mut registry).0, 2);
    }

    #[test]
    fn unregistered_heap_never_asks_to_be_listed() {
        let link = Link::new();
        assert!(!crate::protocol::holder_must_list(&link.listed));
    }
}
