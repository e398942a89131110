//! Observation: what is resident, measured rather than estimated.
//!
//! - this module: residency of ebb's own memory (segments, huge and kept mappings,
//!   heaps, check bitmaps, the segment map) as RSS counts it (`/proc/self/pagemap`,
//!   else `mincore`), for [`crate::Stats`];
//! - `smaps`: `/proc/self/smaps` read line by line into a stack buffer;
//! - `retention`: the retention report, which splits the process's RSS into what
//!   ebb holds and why, and what it does not own; `retention_text` writes it out.
//!
//! Nothing here allocates or changes allocator state: locks are taken only to copy a
//! few words (the slice bitmaps, the kept mappings, the heap counts), and never across
//! a system call.

pub mod retention;
mod retention_text;
pub mod smaps;

use crate::os;
use crate::process::registry;
use crate::span::arena;
use crate::span::bitmap::Bitmap512;
use crate::span::segment::{Segment, SegmentKind, SEGMENT_SIZE, SLICES_PER_SEGMENT};
use core::sync::atomic::Ordering;

/// OS pages per segment at the smallest page size ebb supports (4 KiB).
pub const SEGMENT_PAGES_MAX: usize = SEGMENT_SIZE / 4096;

/// Which OS pages of one segment are resident, as RSS counts them (see [`PageMap`]).
pub struct SegmentResidency {
    vec: [u8; SEGMENT_PAGES_MAX],
    base: usize,
    page_shift: u32,
}

impl SegmentResidency {
    pub fn measure(seg: *const Segment, pagemap: &PageMap) -> Self {
        let page = os::page_size();
        let mut r = SegmentResidency {
            vec: [0; SEGMENT_PAGES_MAX],
            base: seg as usize,
            page_shift: page.trailing_zeros(),
        };
        pagemap.residency(seg as usize, &mut r.vec[..SEGMENT_SIZE / page]);
        r
    }

    /// Resident bytes of the OS pages wholly inside `[start, end)` (addresses).
    pub fn bytes(&self, start: usize, end: usize) -> u64 {
        let page = 1usize << self.page_shift;
        let first = (start.max(self.base) - self.base).next_multiple_of(page) >> self.page_shift;
        let last = (end.min(self.base + SEGMENT_SIZE) - self.base) >> self.page_shift;
        if first >= last {
            return 0;
        }
        self.vec[first..last]
            .iter()
            .filter(|&&b| b & 1 != 0)
            .count() as u64
            * page as u64
    }
}

/// Copy a segment's free-slice bitmap under the span lock.
pub fn free_slices_of(seg: *const Segment) -> Bitmap512 {
    let _guard = arena::SPAN_LOCK.lock();
    // SAFETY: segments are never unmapped; the lock guards the bitmap.
    unsafe { (*seg).free_slices }
}

/// Bytes of one heap's mapping (heaps are written whole when made, so all resident).
pub fn heap_bytes() -> u64 {
    crate::process::heap_bytes().next_multiple_of(os::page_size()) as u64
}

/// Heaps of live threads and spare heaps of exited ones (walked under the registry
/// lock, which is held for the walk only).
pub fn heap_counts() -> (u64, u64) {
    let registry = registry::lock();
    let (mut live, mut spare) = (0u64, 0u64);
    let mut link = registry.live;
    while !link.is_null() {
        live += 1;
        // SAFETY: links on the lists stay valid while the lock is held.
        link = unsafe { (*link).next };
    }
    let mut link = registry.spare;
    while !link.is_null() {
        spare += 1;
        // SAFETY: as above.
        link = unsafe { (*link).next };
    }
    (live, spare)
}

/// Resident bytes of the heaps (live threads' and spare ones) that start in
/// `[start, end)`, as RSS counts them (see [`PageMap`]). Measured, not `count × size`:
/// a heap's cold tail (the profiler's sampler, the guarded-sampling state) is read but
/// never written in most threads, and counting it made the retention report add up to
/// 105–110% of RSS with 100–1,000 threads.
pub fn heaps_resident_in(pagemap: &PageMap, start: usize, end: usize) -> u64 {
    let (bytes, offset) = (heap_bytes() as usize, crate::process::heap_link_offset());
    let mut resident = 0;
    let mut skip = 0;
    loop {
        // Copy a batch of addresses under the lock and measure them after it: the lock
        // is never held across a system call. Heaps are never unmapped (an exited
        // thread's goes to the spare list), so an address stays readable; a heap that
        // moves between the lists meanwhile may be missed or seen twice in this snapshot.
        let mut batch = [0usize; 128];
        let mut n = 0;
        let mut seen = 0;
        {
            let registry = registry::lock();
            'walk: for head in [registry.live, registry.spare] {
                let mut link = head;
                while !link.is_null() {
                    let heap = link as usize - offset;
                    if start <= heap && heap < end {
                        if seen >= skip {
                            if n == batch.len() {
                                break 'walk;
                            }
                            batch[n] = heap;
                            n += 1;
                        }
                        seen += 1;
                    }
                    // SAFETY: links on the lists stay valid while the lock is held.
                    link = unsafe { (*link).next };
                }
            }
        }
        for &heap in &batch[..n] {
            resident += pagemap.resident_bytes(heap, bytes);
        }
        if n < batch.len() {
            return resident;
        }
        skip += n;
    }
}

/// Residency as RSS counts it. `mincore` reports a page present when it maps the
/// kernel's shared zero page (memory read but never written: a heap's cold tail, a
/// `calloc`ed block that is only read), which RSS leaves out; with it, a program that
/// read a fresh 64 MiB `calloc` block made the retention report add up to 1,100% of
/// RSS. `/proc/self/pagemap` tells such pages apart: the huge zero page shows as a
/// file page (ebb maps only anonymous memory), the 4 KiB one as present and not
/// exclusively mapped (bit 56). A page shared copy-on-write with a fork child is not
/// exclusive either, but RSS counts it: once the process has forked
/// (`process::FORKED`), such a page counts unless it reads as zeros. (Pages merged by
/// KSM, which a program must ask for, would count as zero pages.) Without pagemap,
/// plain `mincore`.
pub struct PageMap {
    fd: Option<core::ffi::c_int>,
    forked: bool,
}

impl PageMap {
    const PRESENT: u64 = 1 << 63;
    const FILE_OR_SHARED: u64 = 1 << 61;
    const EXCLUSIVE: u64 = 1 << 56;

    /// One open of `/proc/self/pagemap`, for one measurement (not kept: a fork child
    /// would read its parent's, and a program may close descriptors it did not open).
    pub fn open() -> PageMap {
        PageMap {
            fd: os::open_read(b"/proc/self/pagemap\0"),
            forked: crate::process::FORKED.load(Ordering::Relaxed),
        }
    }

    /// `mincore` alone: about ten times cheaper over a large heap (2.5 against 25 ms
    /// per resident GiB, where the kernel's pagemap walk dominates), and counts zero
    /// pages as resident.
    pub fn mincore_only() -> PageMap {
        PageMap {
            fd: None,
            forked: false,
        }
    }

    /// Set `out[i]` to 1 if the OS page at `start + i * page` is resident as RSS
    /// counts it, else to 0. `start` is page aligned; a range that is not mapped
    /// counts as not resident.
    pub fn residency(&self, start: usize, out: &mut [u8]) {
        let page = os::page_size();
        debug_assert_eq!(start % page, 0);
        let mut entries = [0u64; 1024];
        for (c, chunk) in out.chunks_mut(entries.len()).enumerate() {
            let at = start + c * entries.len() * page;
            let n = chunk.len();
            // SAFETY: `u64`s have no invalid bit patterns; the view covers `n` of them.
            let raw =
                unsafe { core::slice::from_raw_parts_mut(entries.as_mut_ptr() as *mut u8, n * 8) };
            let read = match self.fd {
                Some(fd) => os::read_fd_at(fd, raw, (at / page * 8) as u64) == (n * 8) as isize,
                None => false,
            };
            if !read {
                mincore_residency(at, chunk);
                continue;
            }
            for (i, (flag, &entry)) in chunk.iter_mut().zip(&entries[..n]).enumerate() {
                *flag = self.counted_in_rss(entry, at + i * page, page) as u8;
            }
        }
    }

    fn counted_in_rss(&self, entry: u64, addr: usize, page: usize) -> bool {
        if entry & Self::PRESENT == 0 || entry & Self::FILE_OR_SHARED != 0 {
            return false;
        }
        entry & Self::EXCLUSIVE != 0 || (self.forked && !reads_as_zeros(addr, page))
    }

    /// Resident bytes of `[start, start + len)`, as RSS counts them.
    pub fn resident_bytes(&self, start: usize, len: usize) -> u64 {
        let page = os::page_size();
        let mut flags = [0u8; 2048];
        let chunk = flags.len() * page;
        let mut at = start & !(page - 1);
        let end = (start + len).next_multiple_of(page);
        let mut bytes = 0u64;
        while at < end {
            let n = chunk.min(end - at);
            let pages = n / page;
            self.residency(at, &mut flags[..pages]);
            bytes += flags[..pages].iter().filter(|&&b| b != 0).count() as u64 * page as u64;
            at += n;
        }
        bytes
    }
}

/// `mincore`'s answer as 0/1 flags (all 0 if the range is not mapped).
fn mincore_residency(start: usize, out: &mut [u8]) {
    let page = os::page_size();
    if os::mincore(start as *const u8, out.len() * page, out) {
        out.iter_mut().for_each(|b| *b &= 1);
    } else {
        out.fill(0);
    }
}

/// True if the page at `addr` reads as all zeros. Read with `os::read_checked`, so a
/// page that cannot be read (a guard page, a guarded-sampling slot protected on free)
/// answers false instead of faulting.
fn reads_as_zeros(addr: usize, page: usize) -> bool {
    let mut buf = [0u64; 512];
    (0..page).step_by(4096).all(|off| {
        // SAFETY: `u64`s have no invalid bit patterns; the view covers the buffer.
        let raw = unsafe { core::slice::from_raw_parts_mut(buf.as_mut_ptr() as *mut u8, 4096) };
        os::read_checked(addr + off, raw) && buf.iter().all(|&w| w == 0)
    })
}

impl Drop for PageMap {
    fn drop(&mut self) {
        if let Some(fd) = self.fd {
            os::close_fd(fd);
        }
    }
}

/// The check-mode bitmap of `seg` as `(address, bytes)`, if it has one.
pub fn check_bitmap_of(seg: *const Segment) -> Option<(usize, usize)> {
    // SAFETY: segments are never unmapped; `check_bits` is atomic.
    let bits = unsafe { (*seg).check_bits.load(Ordering::Acquire) };
    (!bits.is_null()).then_some((bits as usize, crate::span::segment::CHECK_BITMAP_BYTES))
}

/// Resident bytes of ebb's metadata outside segments: the segment map, heaps, and
/// check-mode bitmaps. (Segment headers are counted by the caller, from the segment's
/// own residency.)
pub fn outside_metadata_resident(pagemap: &PageMap) -> u64 {
    let (map, map_len) = crate::span::segment::map_extent();
    let mut bytes =
        pagemap.resident_bytes(map, map_len) + heaps_resident_in(pagemap, 0, usize::MAX);
    for seg in arena::segments() {
        if let Some((bits, len)) = check_bitmap_of(seg) {
            bytes += pagemap.resident_bytes(bits, len);
        }
    }
    bytes
}

/// What the stats add from measuring residency.
#[derive(Clone, Copy, Default)]
pub struct Residency {
    /// Resident bytes of all of ebb's memory.
    pub resident: u64,
    /// Part of `resident` that is metadata: segment headers, heaps, check bitmaps, the
    /// segment map.
    pub metadata: u64,
    /// Bytes of kept huge mappings (mapped) and the part of them resident.
    pub huge_kept: u64,
    pub huge_kept_resident: u64,
}

/// Measure the residency of ebb's memory. Huge blocks in use are found through
/// `/proc/self/smaps`' mappings, read only if there are any.
pub fn measure() -> Residency {
    let mut r = Residency::default();
    // The stats are meant to be read often: blocks' pages by `mincore` (a block the
    // program only read counts), metadata, where read-only pages are common, exactly.
    let (blocks, pagemap) = (PageMap::mincore_only(), PageMap::open());
    for seg in arena::segments() {
        let res = SegmentResidency::measure(seg, &blocks);
        let base = seg as usize;
        r.resident += res.bytes(base, base + SEGMENT_SIZE);
        r.metadata += res.bytes(
            base,
            base + crate::span::segment::HEADER_BYTES.min(SEGMENT_SIZE),
        );
    }
    let outside = outside_metadata_resident(&pagemap);
    r.metadata += outside;
    r.resident += outside;
    // Kept huge mappings exactly: a freed block the program only read leaves the zero
    // page mapped all over its mapping, which `mincore` counts and RSS does not (a read
    // 64 MiB `calloc` block, freed and kept, made `resident` 58 MB above RSS:
    // `tests/stats_zero_pages.rs`). Free memory, so none of it is a block "only read".
    for (base, mapped) in crate::span::huge::kept_mappings() {
        if base != 0 {
            r.huge_kept += mapped as u64;
            r.huge_kept_resident += pagemap.resident_bytes(base, mapped);
        }
    }
    r.resident += r.huge_kept_resident;
    if crate::counters::COUNTERS.huge_used.load(Ordering::Relaxed) > 0 {
        r.resident += huge_in_use_resident(&blocks);
    }
    r
}

/// Resident bytes of huge blocks in use: every window of an anonymous mapping that the
/// segment map gives to a huge segment whose block descriptor is not free.
fn huge_in_use_resident(pagemap: &PageMap) -> u64 {
    let mut bytes = 0;
    smaps::for_each_mapping(false, |m| {
        if !m.is_anonymous() {
            return;
        }
        for_each_ebb_window(m.start, m.end, |seg, start, end| {
            if huge_in_use(seg).is_some() {
                bytes += pagemap.resident_bytes(start, end - start);
            }
        });
    });
    bytes
}

/// What observation needs of a huge segment's header, read with `os::read_checked`:
/// the segment map can lead to a huge mapping another thread is unmapping.
#[derive(Clone, Copy)]
pub struct HugeFacts {
    /// Offset of the block in the mapping, and bytes counted as used (whole OS pages
    /// of the request plus the header page).
    pub offset: usize,
    pub used: usize,
}

fn read_word<T: Copy>(addr: usize) -> Option<T> {
    let mut value = core::mem::MaybeUninit::<T>::uninit();
    // SAFETY: the slice covers exactly `value`'s bytes; plain data of type T (integers
    // and a fieldless enum with the value the writer stored) is read into it.
    let bytes = unsafe {
        core::slice::from_raw_parts_mut(value.as_mut_ptr() as *mut u8, core::mem::size_of::<T>())
    };
    // SAFETY: read_checked filled every byte.
    os::read_checked(addr, bytes).then(|| unsafe { value.assume_init() })
}

/// The facts of `seg` if it is a huge segment whose block is live (not a kept mapping,
/// nor a normal segment); None also if it was unmapped meanwhile.
pub fn huge_in_use(seg: *const Segment) -> Option<HugeFacts> {
    use core::mem::offset_of;
    let base = seg as usize;
    let kind: u32 = read_word(base + offset_of!(Segment, kind))?;
    if kind != SegmentKind::Huge as u32 {
        return None;
    }
    let offset: usize = read_word(base + offset_of!(Segment, huge_offset))?;
    let used: usize = read_word(base + offset_of!(Segment, huge_used))?;
    let index = (offset >> crate::span::segment::SLICE_SHIFT) & (SLICES_PER_SEGMENT - 1);
    let page = base
        + offset_of!(Segment, pages)
        + index * core::mem::size_of::<crate::span::page::Page>()
        + offset_of!(crate::span::page::Page, owner);
    let owner: usize = read_word(page)?;
    (owner == crate::span::page::HUGE).then_some(HugeFacts { offset, used })
}

/// Call `f(segment, start, end)` for each part of `[start, end)` inside a 32 MiB
/// window the segment map gives to ebb (windows are never shared: a huge mapping is a
/// whole number of them).
pub fn for_each_ebb_window(
    start: usize,
    end: usize,
    mut f: impl FnMut(*mut Segment, usize, usize),
) {
    let mut window = start & !(SEGMENT_SIZE - 1);
    while window < end && crate::span::segment::in_map_range(window as *const u8) {
        let seg = crate::span::segment::segment_of(window as *const u8);
        if !seg.is_null() {
            f(seg, start.max(window), end.min(window + SEGMENT_SIZE));
        }
        window += SEGMENT_SIZE;
    }
}
