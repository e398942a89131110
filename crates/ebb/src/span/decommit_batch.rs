//! A batch of ranges to decommit, given back in as few system calls as the OS allows
//! (`os::decommit_ranges`: one `process_madvise` for up to 64 ranges on Linux 6.13+).
//!
//! The purger gives back many small ranges per pass: the holes and free-block insides
//! of every abandoned page nobody claimed, the descriptor pages of a segment header.
//! Each `madvise` costs a system call and a TLB flush on every CPU running the process,
//! about as much as zapping a 64 KiB range itself; gathering a pass's ranges into one
//! call keeps the purger's own CPU time (`purger_cpu_ns`) down.
//!
//! Adjacent ranges merge. The batch decommits when full and at [`DecommitBatch::finish`];
//! until then a range's memory must stay as the caller left it: nothing may be written
//! there, so whoever adds a range must keep it out of everybody's reach (own the page)
//! until the batch is finished.

use crate::os;

/// `os::decommit_ranges`, or one `os::decommit` per range with
/// `EBB_VECTORED_DECOMMIT=0` (a sandbox whose seccomp filter kills the process on a
/// system call it does not list, where an older kernel's error would not do).
///
/// # Safety
/// As `os::decommit_ranges`.
pub unsafe fn decommit_ranges(ranges: &[(*mut u8, usize)], done: &mut [bool]) {
    if crate::options::get().vectored_decommit {
        // SAFETY: per the contract.
        unsafe { os::decommit_ranges(ranges, done) };
    } else {
        for (&(ptr, size), ok) in ranges.iter().zip(done.iter_mut()) {
            // SAFETY: per the contract.
            *ok = unsafe { os::decommit(ptr, size) };
        }
    }
}

/// Ranges a batch holds before it decommits them (one `process_madvise` call).
const CAPACITY: usize = 64;

/// Ranges waiting to be decommitted, and the bytes given back so far.
pub struct DecommitBatch {
    ranges: [(*mut u8, usize); CAPACITY],
    len: usize,
    decommitted: usize,
}

impl DecommitBatch {
    pub const fn new() -> DecommitBatch {
        DecommitBatch {
            ranges: [(core::ptr::null_mut(), 0); CAPACITY],
            len: 0,
            decommitted: 0,
        }
    }

    /// Add `[ptr, ptr + size)` (merged with the previous range if it continues it).
    ///
    /// # Safety
    /// The range satisfies `os::decommit`'s contract from now until [`Self::finish`]
    /// (or a flush when the batch fills): page aligned, reserved, no live data, and
    /// nobody writes there meanwhile.
    pub unsafe fn add(&mut self, ptr: *mut u8, size: usize) {
        if size == 0 {
            return;
        }
        if let Some(last) = self.len.checked_sub(1).map(|i| &mut self.ranges[i]) {
            let (last_start, last_end) = (last.0 as usize, last.0 as usize + last.1);
            if last_end == ptr as usize {
                last.1 += size;
                return;
            }
            if last_start <= ptr as usize && ptr as usize + size <= last_end {
                return; // already in (two runs' descriptors may share an OS page)
            }
        }
        if self.len == CAPACITY {
            self.flush();
        }
        self.ranges[self.len] = (ptr, size);
        self.len += 1;
    }

    /// Decommit what is gathered.
    fn flush(&mut self) {
        let mut done = [false; CAPACITY];
        // SAFETY: every range was added under `add`'s contract, which holds until now.
        unsafe { decommit_ranges(&self.ranges[..self.len], &mut done[..self.len]) };
        for (range, &ok) in self.ranges[..self.len].iter().zip(&done) {
            if ok {
                self.decommitted += range.1;
            }
        }
        self.len = 0;
    }

    /// Decommit what is gathered; returns the bytes the batch gave back in all.
    pub fn finish(mut self) -> usize {
        if self.len > 0 {
            self.flush();
        }
        self.decommitted
    }
}

impl Drop for DecommitBatch {
    fn drop(&mut self) {
        debug_assert!(self.len == 0, "a decommit batch dropped without finish");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjacent_ranges_merge_and_a_full_batch_flushes() {
        let page = os::page_size();
        let base = os::reserve_aligned(200 * page, page);
        assert!(!base.is_null());
        // SAFETY: our own reservation, holding nothing.
        unsafe {
            let mut batch = DecommitBatch::new();
            batch.add(base, page);
            batch.add(base.add(page), page);
            assert_eq!(batch.len, 1, "adjacent ranges merge");
            for k in 1..=CAPACITY {
                batch.add(base.add((2 * k + 1) * page), page);
            }
            assert_eq!(batch.len, 1, "the full batch was flushed");
            assert_eq!(batch.finish(), (2 + CAPACITY) * page);
            os::release(base, 200 * page);
        }
    }
}
