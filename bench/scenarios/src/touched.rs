//! The touched-page bound: the bytes of distinct OS pages that hold at least one byte of
//! a live block. An allocator that never moves blocks cannot keep fewer pages resident
//! than this, whatever it does with the rest (docs/MEMORY.md reports RSS against it).
//!
//! Computed by the scenario from the blocks it holds: each block's address and its
//! usable size (`malloc_usable_size`, which every allocator measured here exports, ebb
//! through its `override` feature), so the bound counts the allocator's rounding too.
//! Collecting the page numbers allocates; scenarios do it before their idle clock
//! starts or after their last sample.

use std::ffi::c_void;

const OS_PAGE: usize = 4096;

/// Page numbers of live blocks, collected then sorted and counted once.
#[derive(Default)]
pub struct Pages {
    pages: Vec<usize>,
    /// Blocks of up to `SMALL_MAX` usable bytes (address, usable size), for the
    /// meshing count (`mesh.rs`); kept only when `record_small` was called.
    small: Option<Vec<(usize, usize)>>,
    /// Every block added (address, usable size), kept only when `record_all` was
    /// called (`excess.rs`).
    all: Option<Vec<(usize, usize)>>,
}

/// The biggest block ebb puts in a page of one 64 KiB slice.
pub const SMALL_MAX: usize = 8192;

extern "C" {
    fn malloc_usable_size(ptr: *mut c_void) -> usize;
}

impl Pages {
    pub fn new() -> Pages {
        Pages::default()
    }

    /// Count the block at `ptr` (from this process's allocator, live): `[ptr, ptr +
    /// usable size)`. Null and dangling (zero-sized) pointers count nothing.
    pub fn add_block(&mut self, ptr: *const u8, requested: usize) {
        if ptr.is_null() || requested == 0 {
            return;
        }
        // SAFETY: `ptr` is a live block of the process's allocator (the caller holds it).
        let usable = unsafe { malloc_usable_size(ptr as *mut c_void) }.max(requested);
        if let Some(small) = &mut self.small {
            if usable <= SMALL_MAX {
                small.push((ptr as usize, usable));
            }
        }
        if let Some(all) = &mut self.all {
            all.push((ptr as usize, usable));
        }
        self.add_range(ptr as usize, usable);
    }

    /// Count the bytes `[start, start + len)`.
    pub fn add_range(&mut self, start: usize, len: usize) {
        if len == 0 {
            return;
        }
        let first = start / OS_PAGE;
        let last = (start + len - 1) / OS_PAGE;
        self.pages.extend(first..=last);
        if self.pages.len() > (1 << 22) {
            self.compact();
        }
    }

    /// Count a vector's heap buffer (nothing if it has none).
    pub fn add_vec<T>(&mut self, v: &Vec<T>) {
        if v.capacity() > 0 && std::mem::size_of::<T>() > 0 {
            self.add_block(v.as_ptr().cast(), v.capacity() * std::mem::size_of::<T>());
        }
    }

    /// Also keep the small blocks added from now on (for `mesh::count`).
    pub fn record_small(&mut self) {
        self.small.get_or_insert_with(Vec::new);
    }

    /// Also keep every block added from now on (for `excess.rs`).
    pub fn record_all(&mut self) {
        self.all.get_or_insert_with(Vec::new);
    }

    /// Every block recorded (see `record_all`), sorted by address.
    pub fn all_blocks(&mut self) -> &[(usize, usize)] {
        let all = self.all.get_or_insert_with(Vec::new);
        all.sort_unstable();
        all
    }

    /// The small blocks recorded (see `record_small`).
    pub fn small_blocks(&self) -> &[(usize, usize)] {
        self.small.as_deref().unwrap_or(&[])
    }

    /// Add every page (and recorded small block) another collection counted.
    pub fn merge(&mut self, other: Pages) {
        self.pages.extend(other.pages);
        if let Some(theirs) = other.small {
            self.small.get_or_insert_with(Vec::new).extend(theirs);
        }
        self.compact();
    }

    fn compact(&mut self) {
        self.pages.sort_unstable();
        self.pages.dedup();
    }

    /// The page numbers counted, sorted.
    pub fn sorted(&mut self) -> &[usize] {
        self.compact();
        &self.pages
    }

    /// The bound in bytes.
    pub fn bytes(&mut self) -> u64 {
        self.compact();
        (self.pages.len() * OS_PAGE) as u64
    }
}
