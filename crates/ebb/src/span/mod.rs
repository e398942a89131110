//! The span backend: segments and the pointer → segment map, slices and their bitmaps,
//! page descriptors and their free lists, spans for pages and large blocks, the
//! decommit scan (and its 2 MiB units under `EBB_LARGE_PAGES`), huge mappings, and the
//! purger's deadlines. It knows nothing of heaps: a page's owner word is just a word to
//! it.

pub mod arena;
pub mod bitmap;
pub mod deadline;
pub mod decommit;
pub mod decommit_batch;
pub mod header_purge;
pub mod holes;
pub mod huge;
pub mod huge_pool;
pub mod large_pages;
pub mod page;
pub mod retain;
#[cfg(feature = "secure")]
pub mod secure;
pub mod segment;
