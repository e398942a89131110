//! Guard pages of the secure build (level full): the last OS page of every page of
//! blocks and of each segment's header made inaccessible, and kept across the span's
//! reuse (a bit per slice in its segment). Re-exported by [`super::secure`].

use super::secure::{fatal, full};
use crate::os;
use core::sync::atomic::{AtomicU64, Ordering};

/// Guard pages made so far, and refused by the OS (stats, tests).
pub static GUARDS: AtomicU64 = AtomicU64::new(0);
pub static GUARDS_REFUSED: AtomicU64 = AtomicU64::new(0);

/// Make the last OS page of `[start, start + bytes)` inaccessible. Returns true if it
/// is now a guard (the caller then keeps blocks out of it); false at level light or if
/// the OS refused (the page then simply has no guard).
///
/// # Safety
/// The range is a span the caller owns, slice aligned, with nothing live in its last
/// OS page.
pub unsafe fn guard(start: *mut u8, bytes: usize) -> bool {
    if !os::HAS_PROTECT || !full() {
        return false;
    }
    let page = os::page_size();
    // SAFETY: per the contract.
    if unsafe { os::protect(start.add(bytes - page), page, false) } {
        GUARDS.fetch_add(1, Ordering::Relaxed);
        true
    } else {
        GUARDS_REFUSED.fetch_add(1, Ordering::Relaxed);
        false
    }
}

/// Undo [`guard`]. If the OS refuses, the process aborts: a span handed out with an
/// inaccessible page in it would fault later, far from the cause.
///
/// # Safety
/// `[start, start + bytes)` was guarded with [`guard`].
pub unsafe fn unguard(start: *mut u8, bytes: usize) {
    let page = os::page_size();
    // SAFETY: per the contract, the page is a guard of ours.
    if !unsafe { os::protect(start.add(bytes - page), page, true) } {
        fatal("guard", start, "the OS refused to lift a guard page");
    }
}

/// Guards outlive their pages: a span going back to the arena keeps its guard, and a
/// segment remembers which slices end in one (`Segment::guard_slices`, bit `i`: the
/// last OS page of slice `i` is inaccessible). A page made again over the same slices
/// finds its guard in place (no system call), and whoever takes slices for anything
/// else lifts the guards inside them ([`unguard_slices`]). Without this, `sweep` of
/// the speed suite made 250 000 `mprotect` calls and ran 3.5 times slower than level
/// light.
///
/// Guard the span `[start, start + bytes)` whose last slice is `last` of the segment
/// with `bits`: true if it is guarded now (it may have been already).
///
/// # Safety
/// As [`guard`]; `bits` is the span's segment's, `last` its last slice.
pub unsafe fn guard_span(bits: &[AtomicU64], last: usize, start: *mut u8, bytes: usize) -> bool {
    let (word, bit) = (&bits[last / 64], 1u64 << (last % 64));
    if word.load(Ordering::Relaxed) & bit != 0 {
        return true;
    }
    // SAFETY: per the contract.
    if unsafe { guard(start, bytes) } {
        word.fetch_or(bit, Ordering::Relaxed);
        true
    } else {
        false
    }
}

/// Lift the guards kept in slices `first..first + count` of the segment at `base`
/// (slices of `slice_size` bytes), which the caller just took from the arena.
///
/// # Safety
/// The slices are the caller's, nothing in them in use.
pub unsafe fn unguard_slices(
    bits: &[AtomicU64],
    base: *mut u8,
    slice_size: usize,
    first: usize,
    count: usize,
) {
    // Every span the arena hands out passes here: at level light (no guard ever
    // made) nothing to look at; else a word of bits at a time, not a slice at a time
    // (a slice at a time cost level light 115 instructions per page set up).
    if count == 0 || GUARDS.load(Ordering::Relaxed) == 0 {
        return;
    }
    let end = first + count;
    let mut slice = first;
    while slice < end {
        let (index, low) = (slice / 64, slice % 64);
        let high = (end - index * 64).min(64);
        let range = (u64::MAX >> (64 - (high - low))) << low;
        let word = &bits[index];
        let mut taken = word.load(Ordering::Relaxed) & range;
        if taken != 0 {
            word.fetch_and(!taken, Ordering::Relaxed);
        }
        while taken != 0 {
            let guarded = index * 64 + taken.trailing_zeros() as usize;
            taken &= taken - 1;
            // SAFETY: the slice ends in a guard of ours (its bit), and is ours now.
            unsafe { unguard(base.add(guarded * slice_size), slice_size) };
        }
        slice = index * 64 + high;
    }
}
