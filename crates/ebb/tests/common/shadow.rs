//! The shadow model behind `model.rs` (also run under valgrind by `valgrind.rs`):
//! random alloc / alloc_zeroed / realloc / dealloc through `std::alloc`, checked
//! against a record of the live blocks.

use super::*;
use std::alloc::{alloc, alloc_zeroed, dealloc, realloc};
use std::collections::BTreeMap;

/// One live block of the model.
#[derive(Clone, Copy, Debug)]
pub struct Live {
    ptr: *mut u8,
    size: usize,
    align: usize,
    seed: u64,
}

/// The shadow model: live blocks, and their usable ranges by start address.
pub struct Model {
    pub live: Vec<Live>,
    pub ranges: BTreeMap<usize, usize>,
    /// Bytes requested by live blocks (to keep the footprint bounded).
    pub bytes: usize,
}

impl Model {
    pub fn new() -> Self {
        Model {
            live: Vec::new(),
            ranges: BTreeMap::new(),
            bytes: 0,
        }
    }

    /// Check a freshly returned block and record its range. Panics on any violation.
    pub fn insert_range(&mut self, p: *mut u8, size: usize, align: usize, what: &str) {
        assert!(!p.is_null(), "{what}: null for size {size} align {align}");
        assert_eq!(
            p as usize % align,
            0,
            "{what}: {p:p} misaligned for size {size} align {align}"
        );
        assert!(ebb::owns(p), "{what}: ebb does not own its own block {p:p}");
        // SAFETY: p is a live block of this allocator.
        let usable = unsafe { ebb::usable_size(p) };
        assert!(
            usable >= size,
            "{what}: usable_size {usable} < size {size} (align {align}) at {p:p}"
        );
        let start = p as usize;
        let end = start + usable;
        if let Some((&s, &e)) = self.ranges.range(..=start).next_back() {
            assert!(
                e <= start,
                "{what}: new block {start:#x}..{end:#x} (size {size}) overlaps live block {s:#x}..{e:#x}"
            );
        }
        if let Some((&s, &e)) = self.ranges.range(start..).next() {
            assert!(
                end <= s,
                "{what}: new block {start:#x}..{end:#x} (size {size}) overlaps live block {s:#x}..{e:#x}"
            );
        }
        self.ranges.insert(start, end);
    }

    pub fn remove_range(&mut self, p: *mut u8) {
        assert!(self.ranges.remove(&(p as usize)).is_some());
    }
}

/// Pick a request size: mostly small, many class boundaries, some medium, rare large
/// and very rare huge.
pub fn pick_size(rng: &mut Rng, boundaries: &[usize]) -> usize {
    match rng.below(10_000) {
        0..=3_999 => rng.range(1, 1024),
        4_000..=6_499 => {
            // a class boundary or a neighbour, up to MEDIUM_MAX + 1
            let mut s;
            loop {
                s = boundaries[rng.below(boundaries.len())];
                if s <= ebb::MEDIUM_MAX + 1 {
                    break;
                }
            }
            s
        }
        6_500..=8_499 => rng.range(1, 64 * KIB),
        8_500..=9_799 => rng.range(1, ebb::MEDIUM_MAX),
        9_800..=9_949 => {
            // power of two or neighbour, up to 1 MiB
            let p = 1usize << rng.range(0, 20);
            (p + rng.below(3)).saturating_sub(1).max(1)
        }
        9_950..=9_989 => rng.range(ebb::MEDIUM_MAX + 1, 4 * MIB),
        9_990..=9_997 => match rng.below(4) {
            0 => ebb::LARGE_MAX,
            1 => ebb::LARGE_MAX - 1,
            2 => 1 << rng.range(22, 24),
            _ => rng.range(4 * MIB, ebb::LARGE_MAX),
        },
        _ => {
            if rng.chance(1, 4) {
                // huge, up to 64 MiB
                rng.range(ebb::LARGE_MAX + 1, 64 * MIB)
            } else {
                ebb::LARGE_MAX + 1
            }
        }
    }
}

/// Pick an alignment: mostly at most 16, sometimes up to a page or a slice, rarely up
/// to 1 MiB, very rarely up to 64 MiB.
pub fn pick_align(rng: &mut Rng) -> usize {
    match rng.below(1000) {
        0..=699 => 1 << rng.range(0, 3),
        700..=849 => 16,
        850..=949 => 1 << rng.range(5, 12),
        950..=994 => 1 << rng.range(13, 16),
        995..=998 => 1 << rng.range(17, 20),
        _ => 1 << rng.range(21, 26),
    }
}

/// Pick the new size for a realloc of a block of `old` bytes.
pub fn pick_resize(rng: &mut Rng, old: usize, boundaries: &[usize]) -> usize {
    let s = match rng.below(8) {
        0..=2 => pick_size(rng, boundaries),
        3 => old + rng.range(1, 64),
        4 => old.saturating_sub(rng.range(1, 64)),
        5 => old.saturating_mul(2),
        6 => old / 2,
        _ => old + rng.range(0, old / 4 + 1),
    };
    // Keep the footprint bounded: grow past LARGE_MAX only if already there.
    let cap = if old > ebb::LARGE_MAX {
        64 * MIB
    } else {
        ebb::LARGE_MAX + ebb::LARGE_MAX / 2
    };
    s.clamp(1, cap)
}

/// Allocate through `std::alloc`, check, fill, record.
unsafe fn model_alloc(m: &mut Model, rng: &mut Rng, size: usize, align: usize) {
    let layout = layout(size, align);
    // SAFETY: non-zero size.
    let p = unsafe { alloc(layout) };
    m.insert_range(p, size, align, "alloc");
    let seed = rng.next_u64();
    // SAFETY: p has at least `size` usable bytes.
    unsafe {
        fill(p, seed, 0, size);
        // The whole usable size may be used: touch its last byte too.
        let usable = ebb::usable_size(p);
        if usable > size {
            *p.add(usable - 1) = 0x5A;
        }
    }
    m.bytes += size;
    m.live.push(Live {
        ptr: p,
        size,
        align,
        seed,
    });
}

/// alloc_zeroed, sometimes right after freeing a dirty block of the same layout so
/// that reused memory is checked.
unsafe fn model_alloc_zeroed(m: &mut Model, rng: &mut Rng, size: usize, align: usize) {
    let layout = layout(size, align);
    if rng.chance(1, 2) {
        // SAFETY: non-zero size; the block is written within bounds, then freed.
        unsafe {
            let d = alloc(layout);
            assert!(!d.is_null());
            std::ptr::write_bytes(d, 0xA5, size);
            dealloc(d, layout);
        }
    }
    // SAFETY: non-zero size.
    let p = unsafe { alloc_zeroed(layout) };
    m.insert_range(p, size, align, "alloc_zeroed");
    // SAFETY: p has `size` readable bytes.
    if let Some(i) = unsafe { first_nonzero(p, size) } {
        panic!(
            "alloc_zeroed({size}, {align}) = {p:p}: byte {i} is {:#04x}, not zero",
            unsafe { *p.add(i) }
        );
    }
    let seed = rng.next_u64();
    // SAFETY: as above.
    unsafe { fill(p, seed, 0, size) };
    m.bytes += size;
    m.live.push(Live {
        ptr: p,
        size,
        align,
        seed,
    });
}

unsafe fn model_realloc(m: &mut Model, rng: &mut Rng, index: usize, boundaries: &[usize]) {
    let b = m.live[index];
    let new_size = pick_resize(rng, b.size, boundaries);
    // SAFETY: b is live with b.size bytes.
    unsafe { verify(b.ptr, b.seed, 0, b.size, "before realloc") };
    m.remove_range(b.ptr);
    // SAFETY: b is live with this layout; new_size is non-zero and valid for the align.
    let p = unsafe { realloc(b.ptr, layout(b.size, b.align), new_size) };
    m.insert_range(p, new_size, b.align, "realloc");
    // SAFETY: p has new_size bytes; the first min(old, new) were copied.
    unsafe {
        let kept = b.size.min(new_size);
        if let Some(i) = first_mismatch(p, b.seed, 0, kept) {
            panic!(
                "realloc {:p} ({} B, align {}) -> {p:p} ({new_size} B): byte {i} of {kept} kept bytes lost",
                b.ptr, b.size, b.align
            );
        }
        if new_size > b.size {
            fill(p, b.seed, b.size, new_size);
        }
    }
    m.bytes = m.bytes - b.size + new_size;
    m.live[index] = Live {
        ptr: p,
        size: new_size,
        ..b
    };
}

unsafe fn model_free(m: &mut Model, index: usize) {
    let b = m.live.swap_remove(index);
    // SAFETY: b is live with this layout.
    unsafe {
        verify(b.ptr, b.seed, 0, b.size, "before dealloc");
        m.remove_range(b.ptr);
        m.bytes -= b.size;
        dealloc(b.ptr, layout(b.size, b.align));
    }
}

/// Run `ops` random operations from `seed`, keeping at most `max_live` blocks and
/// about `max_bytes` live bytes.
pub fn run_model(seed: u64, ops: usize, max_live: usize, max_bytes: usize) {
    let boundaries = boundary_sizes();
    let mut rng = Rng::new(seed);
    let mut m = Model::new();
    for step in 0..ops {
        let full = m.live.len() >= max_live || m.bytes >= max_bytes;
        let r = if m.live.is_empty() {
            0
        } else if full {
            60 + rng.below(40)
        } else {
            rng.below(100)
        };
        // SAFETY: the model only passes live blocks with their own layouts.
        unsafe {
            match r {
                0..=34 => {
                    let (size, align) = (pick_size(&mut rng, &boundaries), pick_align(&mut rng));
                    model_alloc(&mut m, &mut rng, size, align);
                }
                35..=44 => {
                    let (size, align) = (pick_size(&mut rng, &boundaries), pick_align(&mut rng));
                    model_alloc_zeroed(&mut m, &mut rng, size, align);
                }
                45..=64 => {
                    let i = rng.below(m.live.len());
                    model_realloc(&mut m, &mut rng, i, &boundaries);
                }
                _ => {
                    let i = rng.below(m.live.len());
                    model_free(&mut m, i);
                }
            }
        }
        if step % 20_000 == 19_999 {
            // Check every live block that is not too big to scan often.
            for b in &m.live {
                if b.size <= 256 * KIB {
                    // SAFETY: live block.
                    unsafe { verify(b.ptr, b.seed, 0, b.size, "periodic check") };
                }
            }
        }
    }
    while !m.live.is_empty() {
        let i = m.live.len() - 1;
        // SAFETY: live block.
        unsafe { model_free(&mut m, i) };
    }
    assert!(m.ranges.is_empty());
    assert_eq!(m.bytes, 0);
}
