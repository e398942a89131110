//! A small futex mutex for the allocator's slow paths.
//!
//! `std::sync::Mutex` is not available (the core is `no_std`) and may allocate on some
//! platforms. This is the classic three-state futex lock: 0 unlocked, 1 locked,
//! 2 locked with waiters. It is never held across a call that can allocate, so a
//! thread cannot re-enter it through `malloc`.

use crate::os;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU32, Ordering};

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
const CONTENDED: u32 = 2;
/// Tries of a contended lock before it sleeps on the futex.
const SPINS_BEFORE_SLEEP: u32 = 100;

/// A mutual-exclusion lock guarding a `T`.
pub struct Mutex<T> {
    state: AtomicU32,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialised by `state`.
unsafe impl<T: Send> Sync for Mutex<T> {}
// SAFETY: moving the mutex moves the value.
unsafe impl<T: Send> Send for Mutex<T> {}

impl<T> Mutex<T> {
    pub const fn new(value: T) -> Self {
        Self {
            state: AtomicU32::new(UNLOCKED),
            value: UnsafeCell::new(value),
        }
    }

    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        if self
            .state
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        MutexGuard { mutex: self }
    }

    #[cold]
    fn lock_contended(&self) {
        // Spin briefly: critical sections are short.
        for _ in 0..SPINS_BEFORE_SLEEP {
            core::hint::spin_loop();
            if self.state.load(Ordering::Relaxed) == UNLOCKED
                && self
                    .state
                    .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return;
            }
        }
        while self.state.swap(CONTENDED, Ordering::Acquire) != UNLOCKED {
            os::wait(&self.state, CONTENDED, None);
        }
    }

    /// Release the lock without a guard (fork handlers hold it across `fork`).
    ///
    /// # Safety
    /// The caller must hold the lock, acquired with [`Mutex::lock_raw`].
    pub unsafe fn unlock_raw(&self) {
        if self.state.swap(UNLOCKED, Ordering::Release) == CONTENDED {
            os::wake(&self.state, 1);
        }
    }

    /// Take the lock and keep it until [`Mutex::unlock_raw`] or [`Mutex::reset_after_fork`].
    pub fn lock_raw(&self) {
        core::mem::forget(self.lock());
    }

    /// In a fork child: the lock was held by the forking thread (the only one left), so
    /// it is simply marked free; no waiter exists in the child.
    ///
    /// # Safety
    /// Only in the child of a fork whose prepare handler took the lock.
    pub unsafe fn reset_after_fork(&self) {
        self.state.store(UNLOCKED, Ordering::Release);
    }
}

/// Holds the lock; releases it when dropped.
pub struct MutexGuard<'a, T> {
    mutex: &'a Mutex<T>,
}

impl<T> core::ops::Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard proves the lock is held.
        unsafe { &*self.mutex.value.get() }
    }
}

impl<T> core::ops::DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard proves the lock is held, and `&mut self` makes it exclusive.
        unsafe { &mut *self.mutex.value.get() }
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the guard proves the lock is held.
        unsafe { self.mutex.unlock_raw() };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::sync::Arc;

    #[test]
    fn counts_under_contention() {
        let m = Arc::new(Mutex::new(0u64));
        let threads: std::vec::Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..100_000 {
                        *m.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*m.lock(), 400_000);
    }
}
