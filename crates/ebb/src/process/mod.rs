//! Process-wide concerns: one-time set-up, the registry of heaps, thread exit, fork,
//! and the background purger.
//!
//! This layer sits below the front end and knows heaps only as registry links: what
//! happens to a heap when its thread exits, after a fork, or when the purger looks for
//! idle heaps is the front end's, handed in once as [`Hooks`] by the first thread that
//! allocates (`init`). That keeps the dependencies one way (front → process →
//! hand-off → span → OS) although the calls at thread exit, fork and in the purger
//! go up.

pub mod purger;
pub mod registry;

use crate::handoff::{abandon, freed_into, steal};
use crate::os;
use crate::span::{arena, huge};
use core::ffi::c_void;
use core::ptr::null_mut;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU8, Ordering};

/// What the process layer calls back into the front end for.
pub struct Hooks {
    /// The thread-exit destructor; its argument is the exiting thread's heap.
    pub thread_exit: unsafe extern "C" fn(*mut c_void),
    /// In a fork child, with every lock free: let go of the heaps of the threads that
    /// did not survive the fork.
    pub after_fork_child: unsafe fn(),
    /// In a fork child, at its first slow path (no lock held; may allocate): start
    /// again the threads of the layers above that did not survive the fork (the report
    /// and profile watchers, where the parent ran them).
    pub restart_after_fork: fn(),
    /// The purger's pass over idle heaps (`now`, idle time in ms): take over those idle
    /// that long; returns when the next may be (`u64::MAX`: no heap owns pages).
    pub take_over_idle: fn(u64, u64) -> u64,
    /// Bytes of one heap (the front end's type), for the stats' metadata figure.
    pub heap_bytes: usize,
    /// Where a heap's registry link sits in it, so observers find the heap's memory
    /// from the registry's lists.
    pub heap_link_offset: usize,
}

static HOOKS: AtomicPtr<Hooks> = AtomicPtr::new(null_mut());

const INIT_NONE: u8 = 0;
const INIT_RUNNING: u8 = 1;
const INIT_DONE: u8 = 2;
static PROCESS_INIT: AtomicU8 = AtomicU8::new(INIT_NONE);
/// The thread key whose destructor is `Hooks::thread_exit` (`u32::MAX`: none).
static THREAD_KEY: AtomicU32 = AtomicU32::new(u32::MAX);

/// The thread key whose destructor runs at thread exit (`u32::MAX` before `init`).
pub fn thread_key() -> u32 {
    THREAD_KEY.load(Ordering::Acquire)
}

/// The hooks `init` was given (None before).
fn hooks() -> Option<&'static Hooks> {
    // SAFETY: set once by `init` to a `&'static Hooks`.
    unsafe { HOOKS.load(Ordering::Acquire).as_ref() }
}

/// Bytes of one heap (0 before `init`).
pub fn heap_bytes() -> usize {
    hooks().map_or(0, |h| h.heap_bytes)
}

/// Offset of the registry link inside a heap (0 before `init`).
pub fn heap_link_offset() -> usize {
    hooks().map_or(0, |h| h.heap_link_offset)
}

/// True once [`init`] has run (its set-up done).
#[inline]
pub fn is_initialized() -> bool {
    PROCESS_INIT.load(Ordering::Acquire) == INIT_DONE
}

/// One-time process set-up: options (and the warnings about `EBB_*` values they
/// ignore), the thread-exit key, fork handlers. Every caller
/// passes the same `hooks`; concurrent callers wait for the first. True for the one
/// call that did the set-up (which then arms what sits above, the exit reports).
pub fn init(hooks: &'static Hooks) -> bool {
    if PROCESS_INIT.load(Ordering::Acquire) == INIT_DONE {
        return false;
    }
    if PROCESS_INIT
        .compare_exchange(INIT_NONE, INIT_RUNNING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        while PROCESS_INIT.load(Ordering::Acquire) != INIT_DONE {
            os::yield_now();
        }
        return false;
    }
    HOOKS.store(hooks as *const Hooks as *mut Hooks, Ordering::Release);
    crate::options::get();
    #[cfg(feature = "secure")]
    crate::span::secure::init();
    if let Some(key) = os::thread_key_create(hooks.thread_exit) {
        THREAD_KEY.store(key, Ordering::Release);
    }
    PROCESS_INIT.store(INIT_DONE, Ordering::Release);
    crate::options::check_environment(crate::diag::warn_setting);
    // These may allocate, so they run after the state is DONE (re-entry is then safe).
    os::at_fork(fork_prepare, fork_parent, fork_child);
    true
}

/// Set by the first `fork` (in the parent, and so inherited by the child): until
/// then no page of ebb's is shared copy-on-write with another process, so residency
/// can tell the kernel's zero page from pagemap's flags alone (`observe::PageMap`).
pub static FORKED: AtomicBool = AtomicBool::new(false);

/// Take every lock before `fork`, so the child does not inherit one mid-update. No
/// code path holds two of them at once, so the order is free; this is the one place
/// that takes them all.
///
/// # Safety
/// Only as the `pthread_atfork` prepare handler.
unsafe extern "C" fn fork_prepare() {
    FORKED.store(true, Ordering::Relaxed);
    registry::lock_for_fork();
    abandon::lock_for_fork();
    huge::CACHE.lock_raw();
    arena::lock_for_fork();
}

/// After `fork`, in the parent: release what `fork_prepare` took.
///
/// # Safety
/// Only as the `pthread_atfork` parent handler.
unsafe extern "C" fn fork_parent() {
    // SAFETY: fork_prepare took the locks in this thread.
    unsafe {
        arena::unlock_after_fork();
        huge::CACHE.unlock_raw();
        abandon::unlock_after_fork();
        registry::unlock_after_fork();
    }
}

/// After `fork`, in the child: every lock is free, the purger gone, other threads'
/// heaps abandoned.
///
/// # Safety
/// Only as the `pthread_atfork` child handler.
unsafe extern "C" fn fork_child() {
    // SAFETY: the only thread of the child is the one that took the locks.
    unsafe {
        arena::reset_after_fork();
        huge::CACHE.reset_after_fork();
        abandon::reset_after_fork();
        registry::reset_after_fork();
    }
    purger::reset_after_fork();
    steal::reset_after_fork();
    freed_into::reset_after_fork();
    if let Some(hooks) = hooks() {
        // SAFETY: we are the child and every lock is free.
        unsafe { (hooks.after_fork_child)() };
    }
    // Not here: a thread started in a fork handler would cost every `fork` + `exec`
    // child a thread start (80-130 µs) for a thread that `exec` ends at once; most such
    // children reach no slow path before they `exec`.
    RESTART_AFTER_FORK.store(true, Ordering::Relaxed);
}

/// Set in a fork child; taken by its first slow path ([`restart_after_fork`]).
static RESTART_AFTER_FORK: AtomicBool = AtomicBool::new(false);

/// True while a fork child has not yet restarted the layers' threads (one load, on the
/// slow paths: `purger::after_slow_path`).
#[inline(always)]
pub(crate) fn restart_pending() -> bool {
    RESTART_AFTER_FORK.load(Ordering::Relaxed)
}

/// In a fork child, once: start again the threads the layers above ran in the parent
/// (`Hooks::restart_after_fork`). Taken before the call, since starting a thread
/// allocates and so comes back through a slow path.
#[cold]
pub(crate) fn restart_after_fork() {
    if RESTART_AFTER_FORK.swap(false, Ordering::Relaxed) {
        if let Some(hooks) = hooks() {
            (hooks.restart_after_fork)();
        }
    }
}

/// A thread with a heap is exiting: if it was the last one, it stops the purger
/// before it goes (`purger`, "must never keep a process alive", step 1).
pub fn heap_thread_exited() {
    if crate::counters::COUNTERS.threads.load(Ordering::Acquire) == 0 {
        purger::stop();
    }
}
