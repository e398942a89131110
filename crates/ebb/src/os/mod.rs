//! The OS layer: every system call the allocator makes goes through this module, so a
//! port to another OS replaces `unix.rs` (and `tls.rs`) and nothing else.
//!
//! Memory model: address space is *reserved* with `reserve_aligned` (read/write,
//! `MAP_NORESERVE`, so the kernel commits a page only when it is first touched), and
//! *decommitted* with `decommit` (`MADV_DONTNEED`: the pages leave RSS at once and read
//! back as zero). Nothing here allocates.

#[cfg(unix)]
mod linux;
#[cfg(unix)]
pub use linux::*;
