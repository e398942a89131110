//! Observation: what is resident, measured rather than estimated.
//!
//! - this module: `mincore` over ebb's own memory (segments, huge and kept mappings,
//!   heaps, check bitmaps, the segment map), for [`crate::Stats`];
//! - `smaps`: `/proc/self/smaps` read line by line into a stack buffer;
//! - `retention`: the retention report, which splits the process's RSS into what
//!   ebb holds and why, and what it does not own.
//!
//! Nothing here allocates or changes allocator state: locks are taken only to copy a
//! few words (the slice bitmaps, the kept mappings, the heap counts), and never across
//! a system call.

pub mod retention;
pub mod smaps;

use crate::os;
use crate::process::registry;
use crate::span::arena;
use crate::span::bitmap::Bitmap512;
use crate::span::segment::{Segment, SegmentKind, SEGMENT_SIZE, SLICES_PER_SEGMENT};
use core::sync::atomic::Ordering;

/// OS pages per segment at the smallest page size ebb supports (4 KiB).
pub const SEGMENT_PAGES_MAX: usize = SEGMENT_SIZE / 4096;

/// Resident bytes of `[start, start + len)` (page aligned), in chunks of at most
/// 4096 OS pages. A range that is not mapped counts as not resident.
pub fn resident_bytes(start: usize, len: usize) -> u64 {
    let page = os::page_size();
    let mut vec = [0u8; 4096];
    let chunk = vec.len() * page;
    let mut at = start & !(page - 1);
    let end = (start + len).next_multiple_of(page);
    let mut bytes = 0u64;
    while at < end {
        let n = chunk.min(end - at);
        let pages = n / page;
        if os::mincore(at as *const u8, n, &mut vec[..pages]) {
            bytes += vec[..pages].iter().filter(|&&b| b & 1 != 0).count() as u64 * page as u64;
        }
        at += n;
    }
    bytes
}

/// Which OS pages of one segment are resident (one `mincore` call).
pub struct SegmentResidency {
    vec: [u8; SEGMENT_PAGES_MAX],
    base: usize,
    page_shift: u32,
}

impl SegmentResidency {
    pub fn measure(seg: *const Segment) -> Self {
        let page = os::page_size();
        let mut r = SegmentResidency {
            vec: [0; SEGMENT_PAGES_MAX],
            base: seg as usize,
            page_shift: page.trailing_zeros(),
        };
        let pages = SEGMENT_SIZE / page;
        if !os::mincore(seg as *const u8, SEGMENT_SIZE, &mut r.vec[..pages]) {
            r.vec = [0; SEGMENT_PAGES_MAX];
        }
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
pub fn heaps_resident_in(start: usize, end: usize) -> u64 {
    let (bytes, offset) = (heap_bytes() as usize, crate::process::heap_link_offset());
    let pagemap = PageMap::open();
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
/// kernel's shared zero page (memory read but never written), which RSS leaves out;
/// `/proc/self/pagemap` tells such a page apart: present, not exclusively mapped
/// (bit 56), and reading as zeros. (A page shared copy-on-write with a fork child is
/// not exclusive either, but RSS counts it: the zeros test keeps it unless it is
/// all zeros.) Without pagemap, plain `mincore`.
pub struct PageMap {
    fd: Option<core::ffi::c_int>,
}

impl PageMap {
    const PRESENT: u64 = 1 << 63;
    const EXCLUSIVE: u64 = 1 << 56;

    pub fn open() -> PageMap {
        PageMap {
            fd: os::open_read(b"/proc/self/pagemap\0"),
        }
    }

    /// Resident bytes of `[start, start + len)`, which must be ebb's own readable
    /// memory (its contents are read to tell zero pages apart).
    pub fn resident_bytes(&self, start: usize, len: usize) -> u64 {
        let Some(fd) = self.fd else {
            return resident_bytes(start, len);
        };
        let page = os::page_size();
        let first = start & !(page - 1);
        let end = (start + len).next_multiple_of(page);
        let mut entries = [0u64; 64];
        let mut bytes = 0;
        let mut at = first;
        while at < end {
            let n = ((end - at) / page).min(entries.len());
            // SAFETY: `u64`s have no invalid bit patterns; the view covers `n` of them.
            let raw =
                unsafe { core::slice::from_raw_parts_mut(entries.as_mut_ptr() as *mut u8, n * 8) };
            if os::read_fd_at(fd, raw, (at / page * 8) as u64) != (n * 8) as isize {
                return resident_bytes(start, len);
            }
            for (i, &entry) in entries[..n].iter().enumerate() {
                if entry & Self::PRESENT == 0 {
                    continue;
                }
                let addr = at + i * page;
                // SAFETY: the page is present, and the caller vouches that it is ebb's
                // readable memory.
                let zeros = entry & Self::EXCLUSIVE == 0
                    && unsafe { core::slice::from_raw_parts(addr as *const u64, page / 8) }
                        .iter()
                        .all(|&w| w == 0);
                bytes += (!zeros) as u64 * page as u64;
            }
            at += n * page;
        }
        bytes
    }
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
pub fn outside_metadata_resident() -> u64 {
    let (map, map_len) = crate::span::segment::map_extent();
    let mut bytes = resident_bytes(map, map_len) + heaps_resident_in(0, usize::MAX);
    for seg in arena::segments() {
        if let Some((bits, len)) = check_bitmap_of(seg) {
            bytes += resident_bytes(bits, len);
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
    for seg in arena::segments() {
        let res = SegmentResidency::measure(seg);
        let base = seg as usize;
        r.resident += res.bytes(base, base + SEGMENT_SIZE);
        r.metadata += res.bytes(
            base,
            base + crate::span::segment::HEADER_BYTES.min(SEGMENT_SIZE),
        );
    }
    let outside = outside_metadata_resident();
    r.metadata += outside;
    r.resident += outside;
    for (base, mapped) in crate::span::huge::kept_mappings() {
        if base != 0 {
            r.huge_kept += mapped as u64;
            r.huge_kept_resident += resident_bytes(base, mapped);
        }
    }
    r.resident += r.huge_kept_resident;
    if crate::counters::COUNTERS.huge_used.load(Ordering::Relaxed) > 0 {
        r.resident += huge_in_use_resident();
    }
    r
}

/// Resident bytes of huge blocks in use: every window of an anonymous mapping that the
/// segment map gives to a huge segment whose block descriptor is not free.
fn huge_in_use_resident() -> u64 {
    let mut bytes = 0;
    smaps::for_each_mapping(false, |m| {
        if !m.is_anonymous() {
            return;
        }
        for_each_ebb_window(m.start, m.end, |seg, start, end| {
            if huge_in_use(seg).is_some() {
                bytes += resident_bytes(start, end - start);
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
