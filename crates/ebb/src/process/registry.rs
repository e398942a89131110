//! The registry of heaps: every live heap (for the purger's scan of idle heaps and for
//! fork), and the heaps of exited threads, kept for reuse (heap memory is never given
//! back, so a stealer that still holds a heap's address reads valid memory).
//!
//! Heaps are linked through a [`Link`] they embed; this layer never looks past it.
//! [`REGISTRY`]'s lock guards the links and nothing else, and is never held while
//! taking another lock.

use crate::sync::{Mutex, MutexGuard};
use core::ptr::null_mut;

/// Links of a heap in the live or the spare list (registry lock).
#[repr(C)]
pub struct Link {
    pub next: *mut Link,
    pub prev: *mut Link,
}

impl Link {
    pub const fn new() -> Link {
        Link {
            next: null_mut(),
            prev: null_mut(),
        }
    }
}

/// The lists under the registry lock.
pub struct Registry {
    /// All live heaps.
    pub live: *mut Link,
    /// Heaps of threads that exited, ready for reuse (linked through `next`).
    pub spare: *mut Link,
}

// SAFETY: the raw pointers are only followed under the lock.
unsafe impl Send for Registry {}

pub static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    live: null_mut(),
    spare: null_mut(),
});

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
