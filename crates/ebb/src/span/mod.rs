//! The span backend: segments, slices, bitmaps, page descriptors, large spans, the
//! decommit scan, huge mappings.

pub mod arena;
pub mod bitmap;
pub mod huge;
pub mod page;
pub mod segment;
