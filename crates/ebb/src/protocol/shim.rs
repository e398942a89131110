//! The atomics the hand-off protocols are written against: `core::sync::atomic`
//! normally, `loom`'s under `cfg(loom)` (the models in `crates/ebb-loom` compile this
//! file and `protocol/mod.rs` with that cfg set by their build script).
//!
//! Besides the atomic types, [`full_fence`] (a SeqCst fence in both) and three barriers
//! whose production form loom cannot express:
//! - [`dekker_fence`]: between a SeqCst store (or RMW) and a SeqCst load of another
//!   location. Production needs nothing there (SeqCst accesses are in the single total
//!   order); loom orders only SeqCst *fences* in that order, so the model puts one.
//! - [`owner_barrier`]: the owner's cheap half of the asymmetric barrier after
//!   `in_op += 1` (a compiler fence; `membarrier` supplies the hardware ordering). In
//!   the model, a SeqCst fence: the symmetric equivalent (see `crates/ebb-loom`).
//! - [`stealer_barrier`]: the stealer's expensive half, `membarrier()`; a SeqCst fence
//!   in the model.
//!
//! And the test-only switch for negative controls: [`injected`] is `false` in every
//! production build (a constant the optimiser removes); under `cfg(loom)` a model turns
//! a [`Fault`] on for its thread, and the protocol step that checks it then runs
//! without its ordering or re-check. A model must fail with it.

#[cfg(not(loom))]
pub use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
#[cfg(loom)]
pub use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// One step of a protocol that a negative control removes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
#[cfg_attr(not(loom), allow(dead_code))] // NoOwnerBarrier: only the models inject it
pub enum Fault {
    /// `publish_abandoned` skips its re-check of the remote-free list.
    SkipPublishRecheck = 0,
    /// `push_remote` pushes with AcqRel, outside the SeqCst order (the old ordering).
    WeakRemotePush = 1,
    /// `Handshake::enter` without the owner's barrier.
    NoOwnerBarrier = 2,
    /// `Handshake::try_steal` skips its step-2 check of `in_op`.
    SkipStep2Check = 3,
    /// `Handshake::try_steal` skips its step-4 re-check of `in_op` (and the undo).
    SkipStep4Check = 4,
    /// `holder_must_list` reads the listed flag without its fence.
    SkipHolderFence = 5,
}

/// True if the model runs with `fault` injected. Always false outside loom.
#[cfg(not(loom))]
#[inline(always)]
pub const fn injected(_fault: Fault) -> bool {
    false
}

#[cfg(loom)]
std::thread_local! {
    static FAULTS: core::cell::Cell<u32> = const { core::cell::Cell::new(0) };
}

/// True if the model runs with `fault` injected (set for the calling OS thread, which
/// runs every loom thread of the model).
#[cfg(loom)]
pub fn injected(fault: Fault) -> bool {
    FAULTS.with(|f| f.get() & (1 << fault as u32) != 0)
}

/// Run the models inside `f` with `faults` injected.
#[cfg(loom)]
pub fn with_faults<R>(faults: &[Fault], f: impl FnOnce() -> R) -> R {
    let bits = faults
        .iter()
        .fold(0, |bits, &fault| bits | 1 << fault as u32);
    let old = FAULTS.with(|cell| cell.replace(bits));
    let result = f();
    FAULTS.with(|cell| cell.set(old));
    result
}

/// See the module doc.
#[inline(always)]
pub fn dekker_fence() {
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::SeqCst);
}

/// A SeqCst fence, in production as in the model: between a plain store and a load of
/// another location where neither access is SeqCst (the holders pair in `protocol`).
#[inline(always)]
pub fn full_fence() {
    #[cfg(not(loom))]
    core::sync::atomic::fence(Ordering::SeqCst);
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::SeqCst);
}

/// See the module doc.
#[inline(always)]
pub fn owner_barrier() {
    #[cfg(not(loom))]
    core::sync::atomic::compiler_fence(Ordering::SeqCst);
    #[cfg(loom)]
    if !injected(Fault::NoOwnerBarrier) {
        loom::sync::atomic::fence(Ordering::SeqCst);
    }
}

/// See the module doc. False if the platform refused (then nothing may be stolen).
#[inline]
pub fn stealer_barrier() -> bool {
    #[cfg(not(loom))]
    return crate::os::membarrier();
    #[cfg(loom)]
    {
        loom::sync::atomic::fence(Ordering::SeqCst);
        true
    }
}

/// Let another thread run (spin loops).
#[inline]
pub fn yield_now() {
    #[cfg(not(loom))]
    crate::os::yield_now();
    #[cfg(loom)]
    loom::thread::yield_now();
}
