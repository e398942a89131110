//! The span backend: segments and the pointer → segment map, slices and their bitmaps,
//! page descriptors and their free lists, spans for pages and large blocks, the
//! decommit scan (and its 2 MiB units under `EBB_LARGE_PAGES`), huge mappings, and the
//! purger's deadlines. It knows nothing of heaps: a page's owner word is just a word to
//! it.

pub mod arena;
pub mod bitmap;
pub mod block_divisor;
#[cfg(feature = "secure")]
pub mod canary;
pub mod carve;
pub mod deadline;
pub mod decommit;
pub mod decommit_batch;
#[cfg(feature = "secure")]
pub mod guard_pages;
pub mod header_purge;
pub mod hole_yield;
pub mod holes;
pub mod huge;
pub mod huge_pool;
pub mod large_pages;
pub mod lend;
pub mod move_budget;
pub mod page;
pub mod retain;
#[cfg(feature = "secure")]
pub mod secure;
pub mod shrink;
pub mod warm;

/// The most bytes a request is padded with for the secure build's small-block canary
/// (`secure::SMALL_CANARY`); 0 in other builds. It lives here, below the front end, so
/// span code (and its tests) can size blocks without reaching up into `front`.
pub const CANARY_PAD_MAX: usize = if cfg!(feature = "secure") { 8 } else { 0 };
pub mod segment;
