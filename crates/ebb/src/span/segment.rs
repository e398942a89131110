//! Segments: 32 MiB-aligned regions of address space, and the map from any address to
//! the segment that holds it.
//!
//! A normal segment is 512 slices of 64 KiB. The first [`HEADER_SLICES`] (2) hold the
//! [`Segment`] header with one [`Page`] descriptor (three cache lines) per slice; the
//! other slices are handed out as spans (pages or large blocks) by the arena. Only the
//! descriptors in use are ever touched, so the header costs memory for those alone. A
//! huge segment is one mapping holding a single huge block (see `huge.rs`), laid out
//! with the same header so `free` finds both the same way.
//!
//! # Pointer to page in O(1)
//! [`SEGMENT_MAP`] has one entry per 32 MiB window of the user address space
//! (`os::ADDRESS_BITS`: 47 bits on x86-64, 48 on arm64), holding
//! the segment's address (0 = not ebb's). From a pointer: the entry gives the segment,
//! bits 16..25 of the pointer give the slice, and the segment's `span_page[slice]` is
//! the descriptor of the span holding that slice. No search, no size needed, and a
//! pointer ebb never handed out in a window ebb does not own is recognised by a zero
//! entry. (`free` pays for this with two dependent loads.)

use crate::os;
use crate::span::bitmap::Bitmap512;
use crate::span::page::{Page, FREE};
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

pub const SLICE_SHIFT: usize = 16;
pub const SLICE_SIZE: usize = 1 << SLICE_SHIFT;
const _: () = assert!(SLICE_SIZE == crate::size_class::SLICE_BYTES);
pub const SEGMENT_SHIFT: usize = 25;
pub const SEGMENT_SIZE: usize = 1 << SEGMENT_SHIFT;
/// Bytes of a segment's check-mode allocation bitmap (`Segment::check_bits`): one bit
/// per 8-byte granule, the smallest block size and alignment.
pub const CHECK_BITMAP_BYTES: usize = SEGMENT_SIZE / 8 / 8;
pub const SLICES_PER_SEGMENT: usize = SEGMENT_SIZE / SLICE_SIZE;
/// User address space covered by the segment map: the platform's (see the OS contract).
pub const ADDRESS_BITS: usize = os::ADDRESS_BITS;
const MAP_ENTRIES: usize = 1 << (ADDRESS_BITS - SEGMENT_SHIFT);
/// Words of a segment's `drain_mask` (one bit per slice).
pub const DRAIN_MASK_WORDS: usize = SLICES_PER_SEGMENT / 64;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub enum SegmentKind {
    Normal = 1,
    Huge = 2,
}

/// Header at the start of every segment.
///
/// Invariants: `free_slices`, `committed_slices` and `free_count` are touched only
/// under the span lock (`span::arena::SPAN_LOCK`); the header slices of a normal
/// segment are never free; a set bit in `drain_mask` means that page may hold remote
/// frees nobody will take in unless a drainer looks.
#[repr(C)]
pub struct Segment {
    /// One descriptor per slice; only the first slice of a span is used as a page.
    pub pages: [Page; SLICES_PER_SEGMENT],
    /// For each slice, the descriptor of the span holding it; for a free or never-used
    /// slice, `pages[0]` (the first header slice's, never in use: owner `FREE`), so a
    /// stale pointer finds a free descriptor. A whole pointer per slice, so `free`
    /// reaches the page with one load (an offset would cost an add, an index into
    /// `pages` a multiply). Written under the span lock (or before the segment is published).
    pub span_page: [AtomicPtr<Page>; SLICES_PER_SEGMENT],
    pub kind: SegmentKind,
    /// Number of free slices (span lock).
    pub free_count: u32,
    /// Next segment in the arena's list (append-only, so readers need no lock).
    pub next: AtomicPtr<Segment>,
    /// Bytes mapped for this segment.
    pub mapped: usize,
    /// Huge segments: offset of the block from the segment start, and its usable size.
    pub huge_offset: usize,
    pub huge_size: usize,
    /// Huge segments: bytes of the block counted as in use (whole pages of the request).
    pub huge_used: usize,
    /// Slices free for spans (span lock).
    pub free_slices: Bitmap512,
    /// Slices whose memory may be resident (span lock).
    pub committed_slices: Bitmap512,
    /// Bit `u`: 2 MiB unit `u` was faulted in whole as one huge page by dense growth
    /// (`large_pages`), and none of it was recommitted since (span lock).
    pub dense_units: u16,
    /// Bit `u`: 2 MiB unit `u` lies wholly inside a large block and was advised
    /// `MADV_HUGEPAGE` when the block took it untouched (`large_pages` "Large blocks");
    /// advised `MADV_NOHUGEPAGE` again when any of it is freed (span lock).
    pub advised_units: u16,
    /// Pages of abandoned spans with pending remote frees (`handoff::drain`).
    pub drain_mask: [AtomicU64; DRAIN_MASK_WORDS],
    /// Check mode only (`front::check`): one bit per 8-byte granule of the segment, set
    /// while a small block starting there is allocated. Null until check mode first
    /// allocates in the segment; a mapping of its own, never released.
    pub check_bits: AtomicPtr<AtomicU64>,
    /// Secure build: slices whose last OS page is a guard page, kept while the slice
    /// is free (`secure::guard_span`).
    #[cfg(feature = "secure")]
    pub guard_slices: [AtomicU64; SLICES_PER_SEGMENT / 64],
}

/// Slices the header of a segment takes (never free).
pub const HEADER_SLICES: usize = core::mem::size_of::<Segment>().div_ceil(SLICE_SIZE);
/// Bytes the header of a segment takes: where a huge block can start at the earliest.
pub const HEADER_BYTES: usize = HEADER_SLICES * SLICE_SIZE;
const _: () = assert!(HEADER_SLICES == 2 && HEADER_BYTES.is_power_of_two());

/// The segment map: entry `addr >> 25` is the owning segment's address `>> 25` (its
/// window; 0: not ebb's).
struct SegmentMap([AtomicU32; MAP_ENTRIES]);
// 16 MiB (47-bit space) or 32 MiB (48-bit) of zero-initialised .bss, address space
// only: just the entries for windows ebb uses are ever touched, so it costs a few KiB
// of RSS at most. Windows rather than whole addresses halve it (address space is what
// `ulimit -v` counts: python3 under `ulimit -v 600000` got one more 8 MiB block in
// each 8 MiB saved) at the cost of a shift in `free`.
static SEGMENT_MAP: SegmentMap = SegmentMap([const { AtomicU32::new(0) }; MAP_ENTRIES]);
const _: () = assert!(ADDRESS_BITS - SEGMENT_SHIFT <= 32);

/// Address and size of the segment map (stats count its resident pages as metadata).
pub fn map_extent() -> (usize, usize) {
    (
        &SEGMENT_MAP as *const SegmentMap as usize,
        core::mem::size_of::<SegmentMap>(),
    )
}

/// The segment holding `ptr`, or null if ebb never mapped its window.
#[inline(always)]
pub fn segment_of(ptr: *const u8) -> *mut Segment {
    let index = (ptr as usize >> SEGMENT_SHIFT) & (MAP_ENTRIES - 1);
    // SAFETY: index is masked into range.
    let window = unsafe { SEGMENT_MAP.0.get_unchecked(index) }.load(Ordering::Relaxed);
    ((window as usize) << SEGMENT_SHIFT) as *mut Segment
}

/// True if address `addr`, whose window leads to `segment` (`segment_of`), lies inside the
/// segment's mapping. A normal segment fills its window; a huge mapping ends on a
/// slice, so the rest of its last window is address space the OS may give anyone (a
/// thread's stack, another allocator's mapping: seen as `owns` answering yes for a
/// stack address in the secure build's model test).
///
/// # Safety
/// `segment` must be `segment_of(addr)` and non-null.
#[inline]
pub unsafe fn mapping_holds(segment: *mut Segment, addr: usize) -> bool {
    // SAFETY: per the contract a live segment header (a huge one's `mapped` is set
    // before its windows are mapped).
    unsafe { (*segment).kind != SegmentKind::Huge || addr < segment as usize + (*segment).mapped }
}

/// `segment_of(ptr)`, or null if `ptr` lies past the end of a huge mapping in the rest
/// of its last window ([`mapping_holds`]): for the entry points that take any pointer
/// (`realloc`, `malloc_usable_size`), off the free fast path.
#[inline]
pub fn segment_holding(ptr: *const u8) -> *mut Segment {
    let seg = segment_of(ptr);
    // SAFETY: `seg` is `segment_of(ptr)`, checked non-null.
    if seg.is_null() || unsafe { mapping_holds(seg, ptr as usize) } {
        seg
    } else {
        core::ptr::null_mut()
    }
}

/// True if `ptr` is inside the range the segment map covers (`ADDRESS_BITS`).
#[inline]
pub fn in_map_range(ptr: *const u8) -> bool {
    (ptr as usize) >> ADDRESS_BITS == 0
}

/// Record `segment` as the owner of every window in `[start, start + len)`.
pub fn map_windows(segment: *mut Segment, start: usize, len: usize) {
    let value = (segment as usize >> SEGMENT_SHIFT) as u32;
    let mut window = start >> SEGMENT_SHIFT;
    let end = (start + len + SEGMENT_SIZE - 1) >> SEGMENT_SHIFT;
    while window < end {
        SEGMENT_MAP.0[window & (MAP_ENTRIES - 1)].store(value, Ordering::Release);
        window += 1;
    }
}

/// Forget the windows of `[start, start + len)`.
pub fn unmap_windows(start: usize, len: usize) {
    let mut window = start >> SEGMENT_SHIFT;
    let end = (start + len + SEGMENT_SIZE - 1) >> SEGMENT_SHIFT;
    while window < end {
        SEGMENT_MAP.0[window & (MAP_ENTRIES - 1)].store(0, Ordering::Release);
        window += 1;
    }
}

impl Segment {
    /// Map a new normal segment with every slice but the header free and uncommitted,
    /// for a span: `small_page` if it is a one-slice page, which first fit places right
    /// after the header (then that unit may be made one huge page:
    /// `large_pages::before_segment_header`). Returns null if the OS refuses.
    pub fn reserve_for(small_page: bool) -> *mut Segment {
        #[cfg(feature = "secure")]
        let base = crate::span::secure::segment_hint(SEGMENT_SIZE, SEGMENT_SIZE)
            .map(|at| os::reserve_at(at, SEGMENT_SIZE))
            .filter(|base| !base.is_null())
            .unwrap_or_else(|| os::reserve_aligned(SEGMENT_SIZE, SEGMENT_SIZE));
        #[cfg(not(feature = "secure"))]
        let base = os::reserve_aligned(SEGMENT_SIZE, SEGMENT_SIZE);
        if base.is_null() || !in_map_range(base) {
            if !base.is_null() {
                // SAFETY: just reserved, unused.
                unsafe { os::release(base, SEGMENT_SIZE) };
            }
            return core::ptr::null_mut();
        }
        // SAFETY: just reserved; `EBB_LARGE_PAGES` asks for huge pages (a no-op if off).
        unsafe { crate::span::large_pages::advise(base, SEGMENT_SIZE) };
        let header_unit = if small_page {
            // SAFETY: just reserved, 32 MiB aligned, nothing written yet.
            unsafe { crate::span::large_pages::before_segment_header(base) }
        } else {
            0
        };
        let segment = base as *mut Segment;
        // SAFETY: the mapping is fresh, zeroed and ours; the header fits in its slices.
        // Zero is a valid bit pattern for every header field except `kind`, and a zero
        // descriptor is a free one (owner FREE, no links), so only the scalars are set.
        unsafe {
            (*segment).reset_span_pages();
            (*segment).kind = SegmentKind::Normal;
            (*segment).mapped = SEGMENT_SIZE;
            (*segment).free_slices.assign_range(
                HEADER_SLICES,
                SLICES_PER_SEGMENT - HEADER_SLICES,
                true,
            );
            (*segment).free_count = (SLICES_PER_SEGMENT - HEADER_SLICES) as u32;
            (*segment).advised_units = header_unit;
            (*segment)
                .committed_slices
                .assign_range(0, HEADER_SLICES, true);
            debug_assert_eq!(
                (*segment).pages[HEADER_SLICES]
                    .owner
                    .load(Ordering::Relaxed),
                FREE
            );
        }
        #[cfg(feature = "secure")]
        if core::mem::size_of::<Segment>() + os::page_size() <= HEADER_BYTES {
            // A guard page between the descriptors and the first blocks.
            // SAFETY: the header's last OS page is past the `Segment` struct.
            unsafe { crate::span::secure::guard(base, HEADER_BYTES) };
        }
        map_windows(segment, base as usize, SEGMENT_SIZE);
        segment
    }

    /// Address of slice `index`.
    #[inline]
    pub fn slice_start(&self, index: usize) -> *mut u8 {
        (self as *const Segment as usize + index * SLICE_SIZE) as *mut u8
    }

    /// Point every slice at `pages[0]` (no span).
    pub fn reset_span_pages(&self) {
        let header = self.pages.as_ptr() as *mut Page;
        for entry in &self.span_page {
            entry.store(header, Ordering::Relaxed);
        }
    }

    /// Record `page` (a descriptor of this segment, of a span starting at or before
    /// `start`) as the span of slices `start..start + count`; `pages[0]` marks them free.
    pub fn set_span_page(&self, start: usize, count: usize, page: *mut Page) {
        debug_assert!(start + count <= SLICES_PER_SEGMENT);
        debug_assert!(core::ptr::eq(segment_of_page(page), self));
        debug_assert!(self.page_index(page) <= start);
        for entry in &self.span_page[start..start + count] {
            entry.store(page, Ordering::Release);
        }
    }

    /// True if slice `index` starts a span (it is not free and not the tail of one).
    #[inline]
    pub fn starts_span(&self, index: usize) -> bool {
        index != 0
            && core::ptr::eq(
                self.span_page[index].load(Ordering::Relaxed),
                &self.pages[index],
            )
    }

    /// Index of the descriptor `page` within this segment.
    #[inline]
    pub fn page_index(&self, page: *const Page) -> usize {
        (page as usize - self.pages.as_ptr() as usize) / core::mem::size_of::<Page>()
    }
}

/// The span descriptor for `ptr` inside `segment` (`span_page`): for a slice that is
/// free or was never used, the first header slice's descriptor (owner `FREE`).
///
/// # Safety
/// `segment` must be `segment_of(ptr)` and non-null.
#[inline(always)]
pub unsafe fn page_of(segment: *mut Segment, ptr: *const u8) -> *mut Page {
    let slice = (ptr as usize >> SLICE_SHIFT) & (SLICES_PER_SEGMENT - 1);
    // SAFETY: slice < 512 and the table has 512 entries, each a descriptor of this
    // segment.
    unsafe {
        let page = (*segment)
            .span_page
            .get_unchecked(slice)
            .load(Ordering::Relaxed);
        debug_assert!(segment_of_page(page) == segment);
        page
    }
}

/// The segment that holds descriptor `page`.
#[inline]
pub fn segment_of_page(page: *const Page) -> *mut Segment {
    (page as usize & !(SEGMENT_SIZE - 1)) as *mut Segment
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_maps_and_finds() {
        let seg = Segment::reserve_for(false);
        assert!(!seg.is_null());
        assert_eq!(seg as usize % SEGMENT_SIZE, 0);
        // SAFETY: seg is a live segment.
        unsafe {
            let p = (*seg).slice_start(7).add(100);
            assert_eq!(segment_of(p), seg);
            // A free slice leads to the first header slice's descriptor, which is never in use.
            let page = page_of(seg, p);
            assert_eq!((*seg).page_index(page), 0);
            assert_eq!((*page).owner.load(Ordering::Relaxed), FREE);
            // A span of slices 6..9 (as the arena would record it): every slice leads to 6.
            (*seg).set_span_page(6, 3, &mut (*seg).pages[6]);
            assert!((*seg).starts_span(6) && !(*seg).starts_span(7));
            for i in 6..9 {
                let q = (*seg).slice_start(i).add(SLICE_SIZE - 1);
                assert_eq!((*seg).page_index(page_of(seg, q)), 6);
            }
            assert_eq!(segment_of_page(page_of(seg, p)), seg);
            assert_eq!((*seg).page_index(page_of(seg, (*seg).slice_start(9))), 0);
            assert_eq!(
                (*seg).free_count as usize,
                SLICES_PER_SEGMENT - HEADER_SLICES
            );
        }
        assert!(segment_of(8 as *const u8).is_null());
    }
}
