//! The front end: what a thread does with its own heap.
//!
//! - `alloc`: the entry points and their fast paths;
//! - `heap`: the per-thread heap, made on first use, let go at thread exit;
//! - `queue`: a heap's page queues per size class;
//! - `slow`: the malloc and free slow paths, sweeping and retiring pages;
//! - `empty_pages`: empty current pages of big blocks given back when a span is taken;
//! - `shared`: the shared start pages, a thread's first blocks of each small class;
//! - `shrunk_tails`: the tail of a block `realloc` shrinks in place, given back unless the block churns;
//! - `spread`: bigger pages for a class whose blocks are replaced at random;
//! - `stash`: a few empty pages a heap keeps for its next pages;
//! - `takeover`: which heaps are idle, and taking one over (for the purger);
//! - `tls`: how a thread finds its heap;
//! - `check`: check mode's validation of frees (`EBB_CHECK=1`);
//! - `freed_key`: the key in freed blocks that catches double frees in the default mode;
//! - `first_class`: heaps the program creates and destroys (`ebb::Heap`);
//! - `guarded`: guarded sampling (`EBB_GUARDED_RATE`): sampled blocks beside guard pages.
//! - `secure`: the secure build's checks on free (`secure` feature).

pub mod alloc;
pub mod check;
pub mod empty_pages;
pub mod first_class;
pub mod free;
pub mod freed_key;
pub mod guarded;
pub mod heap;
pub mod queue;
pub mod realloc;
#[cfg(feature = "secure")]
pub mod secure;
pub mod shared;
pub mod shrunk_tails;
pub mod slow;
pub mod spread;
pub mod stash;
pub mod takeover;
pub mod tls;
pub mod valgrind;
