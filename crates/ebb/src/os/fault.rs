//! Fault injection for the OS memory calls (`reserve_aligned`, `reserve_at`, `decommit`,
//! `remap`, `advise_huge_pages`, `protect`):
//! make them fail on demand, so every path that handles a refusal can be tested.
//!
//! Armed from the environment on the first OS memory call, or by
//! [`crate::fault_injection`] (tests):
//! - `EBB_FAULT_AFTER=N`: the Nth OS memory call (counting from 1) and every later one
//!   fail.
//! - `EBB_FAULT_BUDGET=BYTES`: a reservation fails when the bytes reserved and not yet
//!   released would exceed BYTES (`ulimit -v` for ebb's own mappings alone).
//!
//! Only the OS layer consults it, and only on its memory calls, which are slow paths
//! already: when nothing is armed a call costs one relaxed load and a predictable branch.
//! `release` never fails (the contract has no failure for it); it only gives bytes back
//! to the budget.

use core::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// The OS memory calls that can be refused, as bits of a kind mask.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum Kind {
    Reserve = 1,
    Decommit = 2,
    Remap = 4,
    /// `advise_huge_pages` (`EBB_LARGE_PAGES=1` only).
    Advise = 8,
    /// `protect` (guarded sampling, `EBB_GUARDED_RATE`; the secure build's guard pages).
    Protect = 16,
}

/// Every kind.
pub const ALL_KINDS: u8 = 31;

const UNREAD: u8 = 0;
const OFF: u8 = 1;
const ARMED: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(UNREAD);
/// Calls of the selected kinds so far (while armed).
static CALLS: AtomicU64 = AtomicU64::new(0);
/// Calls numbered in `[FAIL_FROM, FAIL_UNTIL)` fail (1-based).
static FAIL_FROM: AtomicU64 = AtomicU64::new(u64::MAX);
static FAIL_UNTIL: AtomicU64 = AtomicU64::new(u64::MAX);
/// Kinds counted and failed.
static KINDS: AtomicU8 = AtomicU8::new(ALL_KINDS);
/// Address-space budget (`usize::MAX`: none) and the bytes reserved against it.
static BUDGET: AtomicUsize = AtomicUsize::new(usize::MAX);
static RESERVED: AtomicUsize = AtomicUsize::new(0);
/// Calls refused so far (tests check that the path they aim at was reached).
static REFUSED: AtomicU64 = AtomicU64::new(0);

/// True if the OS memory call of `kind` for `bytes` must fail. A granted reservation
/// is counted against the budget.
#[inline]
pub fn refuse(kind: Kind, bytes: usize) -> bool {
    if STATE.load(Ordering::Relaxed) == OFF {
        return false;
    }
    refuse_slow(kind, bytes)
}

#[cold]
fn refuse_slow(kind: Kind, bytes: usize) -> bool {
    if STATE.load(Ordering::Acquire) == UNREAD {
        read_environment();
        if STATE.load(Ordering::Acquire) == OFF {
            return false;
        }
    }
    if KINDS.load(Ordering::Relaxed) & kind as u8 == 0 {
        return false;
    }
    let call = CALLS.fetch_add(1, Ordering::Relaxed) + 1;
    let by_count =
        call >= FAIL_FROM.load(Ordering::Relaxed) && call < FAIL_UNTIL.load(Ordering::Relaxed);
    let by_budget = kind == Kind::Reserve
        && RESERVED.load(Ordering::Relaxed).saturating_add(bytes) > BUDGET.load(Ordering::Relaxed);
    if by_count || by_budget {
        REFUSED.fetch_add(1, Ordering::Relaxed);
        return true;
    }
    if kind == Kind::Reserve {
        RESERVED.fetch_add(bytes, Ordering::Relaxed);
    }
    false
}

/// Give `bytes` of reservation back to the budget.
#[inline]
pub fn released(bytes: usize) {
    if STATE.load(Ordering::Relaxed) == ARMED {
        let _ = RESERVED.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |r| {
            Some(r.saturating_sub(bytes))
        });
    }
}

fn read_environment() {
    let after = super::getenv(b"EBB_FAULT_AFTER\0").and_then(parse_decimal);
    let budget = super::getenv(b"EBB_FAULT_BUDGET\0").and_then(parse_decimal);
    if after.is_none() && budget.is_none() {
        let _ = STATE.compare_exchange(UNREAD, OFF, Ordering::AcqRel, Ordering::Acquire);
        return;
    }
    arm(
        after.map_or(u64::MAX, |n| n.max(1)),
        u64::MAX,
        ALL_KINDS,
        budget.map_or(usize::MAX, |b| b as usize),
    );
}

/// Arm (or, with `fail_from == u64::MAX` and no budget, disarm) the injector. Calls of
/// the kinds in `kinds` are numbered from 1 from now on; those in
/// `[fail_from, fail_until)` fail, and so does a reservation past `budget` bytes.
pub fn arm(fail_from: u64, fail_until: u64, kinds: u8, budget: usize) {
    CALLS.store(0, Ordering::Relaxed);
    RESERVED.store(0, Ordering::Relaxed);
    FAIL_FROM.store(fail_from, Ordering::Relaxed);
    FAIL_UNTIL.store(fail_until, Ordering::Relaxed);
    KINDS.store(kinds, Ordering::Relaxed);
    BUDGET.store(budget, Ordering::Relaxed);
    let off = fail_from == u64::MAX && budget == usize::MAX;
    STATE.store(if off { OFF } else { ARMED }, Ordering::Release);
}

/// A decimal number (the OS layer sits below `options`, so it parses its own).
fn parse_decimal(text: &[u8]) -> Option<u64> {
    if text.is_empty() {
        return None;
    }
    text.iter().try_fold(0u64, |value, &c| {
        c.is_ascii_digit()
            .then_some(())
            .and(value.checked_mul(10)?.checked_add((c - b'0') as u64))
    })
}

/// Calls refused since the process started.
pub fn refused() -> u64 {
    REFUSED.load(Ordering::Relaxed)
}
