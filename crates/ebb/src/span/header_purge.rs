//! Segment headers: the OS pages of page descriptors that describe only free,
//! decommitted slices go back to the OS with those slices.
//!
//! Every slice has a descriptor (192 bytes) in its segment's header, and freeing a span
//! writes the descriptor of each of its slices (`freed_at`, for the decommit scan), so
//! after a burst every segment's 96 KiB of descriptors is resident, whether its slices
//! are in use or not (sparse-survivors at 1.5 GB: 5.3 MiB of metadata for 80 MiB live).
//! Once the decommit scan has given a run of free slices back, their descriptors hold
//! nothing anybody needs: a free, uncommitted slice's `freed_at` is never read (the scan
//! looks at committed free slices only), and a zeroed descriptor is `Page::new()`, a
//! free one (`FREE` is 0). So an OS page of descriptors every one of which is such a
//! slice's, or a header slice's (never in use), is decommitted too; it reads as zero,
//! and the next write to it (a span taken there, a stale drain CAS) brings back a zero
//! page.
//!
//! Runs under the span lock, which guards every write to a free slice's descriptor
//! (`arena::alloc_span`, `free_slices_locked`), so none is lost between the check and
//! the decommit. At most one call per OS page of descriptors a decommitted run
//! overlaps, and only after that run went back.

use crate::os;
use crate::span::decommit_batch::DecommitBatch;
use crate::span::page::Page;
use crate::span::segment::{Segment, HEADER_SLICES, SLICES_PER_SEGMENT};

const DESCRIPTOR_BYTES: usize = core::mem::size_of::<Page>();
const _: () = assert!(core::mem::offset_of!(Segment, pages) == 0);

/// True if the descriptor of slice `i` holds nothing needed: a header slice's, or a
/// free slice's whose memory is decommitted.
fn unneeded(seg: &Segment, i: usize) -> bool {
    i < HEADER_SLICES || (seg.free_slices.get(i) && !seg.committed_slices.get(i))
}

/// Decommit the OS pages of descriptors that overlap slices `start..start + count` (a
/// run just decommitted) if every descriptor on them is unneeded: they go into `batch`
/// (adjacent pages merge, and the runs of one scan share a system call).
///
/// # Safety
/// The span lock is held, and stays held until `batch` is finished; `seg` is a normal
/// segment.
pub unsafe fn purge_descriptors(
    seg: &Segment,
    start: usize,
    count: usize,
    batch: &mut DecommitBatch,
) {
    let os_page = os::page_size();
    let base = seg as *const Segment as usize;
    let first_page = start * DESCRIPTOR_BYTES / os_page;
    let last_page = ((start + count) * DESCRIPTOR_BYTES - 1) / os_page;
    for k in first_page..=last_page {
        let lo = k * os_page / DESCRIPTOR_BYTES;
        let hi = (((k + 1) * os_page - 1) / DESCRIPTOR_BYTES).min(SLICES_PER_SEGMENT - 1);
        if (lo..=hi).all(|i| unneeded(seg, i)) {
            // SAFETY: a whole OS page inside the header's descriptor array, holding only
            // descriptors nobody reads for anything but zero values (module doc); the
            // span lock keeps them from being written until the batch is finished.
            unsafe { batch.add((base + k * os_page) as *mut u8, os_page) };
        }
    }
}
