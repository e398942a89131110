//! Taking over the pages of idle threads, so nothing stays stranded in a heap whose
//! thread sleeps, blocks or parks.
//!
//! A heap's pages are private to its thread: the fast paths touch them without atomic
//! read-modify-writes. To take them over while the thread is alive, the background
//! purger must know the owner is *outside* every allocator call and will notice the
//! takeover on its next call: the handshake `protocol::Handshake` (steps 1-5 there),
//! which needs `membarrier`. This module knows whether the platform has it; the heap
//! side of a takeover (marking its queued pages, clearing its tables, abandoning the
//! pages) is `front::takeover`.

use crate::os;
use core::sync::atomic::{AtomicU8, Ordering};

const UNKNOWN: u8 = 0;
const AVAILABLE: u8 = 1;
const UNAVAILABLE: u8 = 2;
static MEMBARRIER: AtomicU8 = AtomicU8::new(UNKNOWN);

/// Register for `membarrier`: when the purger starts, if the process has one thread
/// (then the kernel registers at once: `process::purger::start`), else on the first
/// takeover ([`available`]). False if the platform has none or the kernel refuses, in
/// which case nothing is ever stolen.
pub fn init() -> bool {
    let ok = os::HAS_MEMBARRIER && os::membarrier_register();
    MEMBARRIER.store(if ok { AVAILABLE } else { UNAVAILABLE }, Ordering::Release);
    ok
}

/// Forget the registration (a fork child must register again).
pub fn reset_after_fork() {
    MEMBARRIER.store(UNKNOWN, Ordering::Relaxed);
}

/// True if idle heaps may be taken over (registering on first use).
pub fn available() -> bool {
    match MEMBARRIER.load(Ordering::Acquire) {
        AVAILABLE => true,
        UNAVAILABLE => false,
        _ => init(),
    }
}
