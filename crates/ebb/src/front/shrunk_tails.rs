//! The tail of a block that `realloc` shrinks in place: given back to the OS at once,
//! unless the block churns.
//!
//! `span::shrink::tail_to_give_back` says which whole OS pages past the new size are
//! worth decommitting (a long-lived `Vec<String>` grown to a 384 KiB block and shrunk
//! to 240 KB keeps 144 KiB nobody reads: sleeping-owner-strings). But a buffer that is
//! collected, shrunk and dropped for every item (`Vec::into_boxed_slice` of syn's token
//! buffer for each file it parses) is shrunk in the same block again a few
//! milliseconds later, after the block was freed and handed out again: each give-back
//! then cost a `madvise` on the program's thread (with a TLB shootdown of the other
//! threads) and the refaults of up to 252 KiB when the next buffer grew into it. The
//! Rust tool of the real-programs suite gave back 209 tails in its 0.4 s parse, the
//! same 6 blocks again and again (`strace -f -k -e madvise`).
//!
//! So each heap remembers the last [`REMEMBERED`] blocks whose tails it gave back, and
//! when.
//!
//! **Rule.** A shrink leaves the tail resident when the same block's tail was given
//! back (or left resident by this rule) less than one purge delay ago: in between, the
//! block was freed and reused, the way free memory is reused before its purge delay
//! runs out, and that memory is held for the delay too. The entry is stamped again, so
//! a block that keeps churning keeps its tail; one shrunk again after a pause of a
//! purge delay gives it back. A block shrunk once and kept (the long-lived case) gives
//! its tail back at once, as before.
//!
//! Owner-only state: only the heap's own thread, inside `realloc`, reads or writes it.

use crate::front::heap::{empty_heap, Heap};
use crate::front::tls;
use crate::span::deadline;
use crate::span::shrink;

/// Blocks whose give-backs a heap remembers.
pub const REMEMBERED: usize = 8;

/// The blocks whose tails a heap gave back most recently, a ring.
///
/// Invariant: `next < REMEMBERED`; an entry with `block == 0` was never written.
pub struct ShrunkTails {
    block: [usize; REMEMBERED],
    at_ms: [u64; REMEMBERED],
    next: u8,
}

impl ShrunkTails {
    pub const fn new() -> Self {
        Self {
            block: [0; REMEMBERED],
            at_ms: [0; REMEMBERED],
            next: 0,
        }
    }

    /// Forget every block (a spare heap handed to a new thread). Writes only a ring
    /// that was used, so a heap that never shrank a block keeps this memory untouched.
    pub fn forget(&mut self) {
        if self.block[0] != 0 {
            *self = Self::new();
        }
    }

    /// Note that `block` was shrunk at `now` with a tail worth giving back; whether to
    /// give it back (the rule in the module doc, with `window_ms` the purge delay).
    pub fn give_back(&mut self, block: usize, now: u64, window_ms: u64) -> bool {
        debug_assert!((self.next as usize) < REMEMBERED);
        if let Some(i) = self.block.iter().position(|&b| b == block) {
            let recent = now.saturating_sub(self.at_ms[i]) < window_ms;
            self.at_ms[i] = now;
            return !recent;
        }
        let i = self.next as usize;
        self.block[i] = block;
        self.at_ms[i] = now;
        self.next = ((i + 1) % REMEMBERED) as u8;
        true
    }
}

impl Default for ShrunkTails {
    fn default() -> Self {
        Self::new()
    }
}

/// `realloc` shrank `ptr` in place from `old_size` to `new_size` (usable size
/// `usable`): decommit its tail when worth it and the block does not churn. Returns
/// the bytes given back.
///
/// # Safety
/// As `span::shrink::decommit_tail`: `ptr` is a live block the caller holds, resized in
/// place to `new_size <= usable`.
#[inline(always)]
pub unsafe fn after_shrink_in_place(
    ptr: *mut u8,
    old_size: usize,
    new_size: usize,
    usable: usize,
) -> usize {
    // Inline, the test every in-place `realloc` of a small block fails (a call and 24
    // instructions a `realloc` when it was out of line: a fifth of an in-place one).
    if new_size >= old_size || usable - new_size < shrink::SHRINK_DECOMMIT_MIN {
        return 0;
    }
    // SAFETY: forwarded.
    unsafe { give_back_tail(ptr, old_size, new_size, usable) }
}

/// [`after_shrink_in_place`] past its inline test.
///
/// # Safety
/// As [`after_shrink_in_place`].
#[inline(never)]
unsafe fn give_back_tail(ptr: *mut u8, old_size: usize, new_size: usize, usable: usize) -> usize {
    let Some((start, len)) = shrink::tail_to_give_back(ptr, old_size, new_size, usable) else {
        return 0;
    };
    let heap: *mut Heap = tls::heap();
    if heap != empty_heap() {
        let window = crate::options::get().purge_delay_ms;
        // SAFETY: the calling thread's own heap; `shrunk_tails` is touched only by its
        // owner (module doc).
        let give = unsafe {
            (*heap)
                .shrunk_tails
                .give_back(ptr as usize, deadline::coarse_now_ms(), window)
        };
        if !give {
            return 0;
        }
    }
    // SAFETY: per the contract; `start..start + len` is the tail
    // `tail_to_give_back` found inside the block.
    unsafe { shrink::decommit_tail(start, len) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_shrunk_again_within_the_window_keeps_its_tail() {
        let mut tails = ShrunkTails::new();
        assert!(tails.give_back(0x1000, 100, 500), "first shrink gives back");
        assert!(
            !tails.give_back(0x1000, 150, 500),
            "again 50 ms later: churn"
        );
        assert!(
            !tails.give_back(0x1000, 600, 500),
            "stamped again at 150: still churn"
        );
        assert!(
            tails.give_back(0x1000, 1200, 500),
            "after a pause of the window"
        );
        assert!(
            tails.give_back(0x2000, 1201, 500),
            "another block: gives back"
        );
    }

    #[test]
    fn the_ring_forgets_the_oldest_block() {
        let mut tails = ShrunkTails::new();
        for b in 1..=REMEMBERED {
            assert!(tails.give_back(b * 0x1000, 10, 500));
        }
        assert!(!tails.give_back(0x1000, 20, 500), "still remembered");
        // One more block replaces the oldest entry (block 1's slot, written first).
        assert!(tails.give_back((REMEMBERED + 1) * 0x1000, 30, 500));
        assert!(
            tails.give_back(0x1000, 40, 500),
            "forgotten: gives back again"
        );
    }

    #[test]
    fn a_forgotten_block_gives_back_again() {
        let mut tails = ShrunkTails::new();
        assert!(tails.give_back(0x1000, 10, 500));
        tails.forget();
        assert!(tails.give_back(0x1000, 20, 500));
    }

    #[test]
    fn a_window_of_zero_always_gives_back() {
        let mut tails = ShrunkTails::new();
        assert!(tails.give_back(0x1000, 10, 0));
        assert!(tails.give_back(0x1000, 10, 0));
    }
}
