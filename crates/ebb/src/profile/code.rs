//! Which addresses are code, and what call ends at a return address: the executable
//! mappings (read from `/proc/self/maps` when profiling starts and at every dump, with
//! a bitmap of 2 MiB granules in front), ebb's own mapping among them, and the decoding
//! of the call instruction before a word (its target, through a PLT stub or a GOT
//! slot). The stack capture (`stack.rs`) asks these of the words it scans; nothing here
//! allocates, locks or faults.

use core::cell::Cell;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Executable mappings remembered (sorted by address, as `/proc/self/maps` is).
const MAX_RANGES: usize = 512;
/// Addresses from here up are the kernel's (x86-64 and aarch64 user space is below).
const KERNEL_SPACE: usize = 1 << 56;

pub(super) static RANGE_VERSION: AtomicU32 = AtomicU32::new(0);
static RANGE_COUNT: AtomicUsize = AtomicUsize::new(0);
static RANGES: [[AtomicUsize; 2]; MAX_RANGES] =
    [const { [AtomicUsize::new(0), AtomicUsize::new(0)] }; MAX_RANGES];
static REFRESHING: AtomicU32 = AtomicU32::new(0);

/// A filter in front of the range search: one bit per 2 MiB of address space (modulo
/// 64 GiB) that some executable mapping touches. Most words a capture looks at are
/// data (heap pointers, sizes); their bit is clear and they cost a shift and a load
/// instead of a binary search. Bits are only ever set (a stale one costs a search), so
/// a refresh never makes code look like data.
const GRANULE_SHIFT: u32 = 21;
const GRANULE_WORDS: usize = 512;
static CODE_GRANULES: [AtomicU64; GRANULE_WORDS] = [const { AtomicU64::new(0) }; GRANULE_WORDS];

#[inline(always)]
fn granule(addr: usize) -> (usize, u64) {
    let g = (addr >> GRANULE_SHIFT) % (GRANULE_WORDS * 64);
    (g / 64, 1 << (g % 64))
}

fn note_code_granules(start: usize, end: usize) {
    let mut at = start & !((1 << GRANULE_SHIFT) - 1);
    let mut left = GRANULE_WORDS * 64;
    while at < end && left > 0 {
        let (word, bit) = granule(at);
        CODE_GRANULES[word].fetch_or(bit, Ordering::Relaxed);
        at += 1 << GRANULE_SHIFT;
        left -= 1;
    }
}

/// Re-read the executable mappings (profiling start, each dump). A seqlock: captures
/// that overlap a refresh skip the caller search rather than read a torn table.
pub fn refresh_executable_ranges() {
    if REFRESHING.swap(1, Ordering::Acquire) != 0 {
        return;
    }
    RANGE_VERSION.fetch_add(1, Ordering::AcqRel); // odd: being written
    let mut n = 0;
    super::maps::for_each_executable(|start, end, _, _| {
        // Not `[vsyscall]` (kernel addresses, called by nobody's malloc): left out, the
        // last range's end rejects stack words and most data before any search.
        if n < MAX_RANGES && start < KERNEL_SPACE {
            RANGES[n][0].store(start, Ordering::Relaxed);
            RANGES[n][1].store(end, Ordering::Relaxed);
            note_code_granules(start, end);
            n += 1;
        }
    });
    RANGE_COUNT.store(n, Ordering::Relaxed);
    note_own_mapping(n);
    RANGE_VERSION.fetch_add(1, Ordering::Release);
    REFRESHING.store(0, Ordering::Release);
}

/// The executable ranges as one capture reads them, the range of its last hit and the
/// gap between ranges of its last miss: return addresses cluster in one or two
/// mappings and data pointers in a few regions (the heap, ebb's segments), so most
/// lookups end at the first compares.
pub(super) struct Code {
    count: usize,
    first: usize,
    end: usize,
    last: Cell<usize>,
    before_last: Cell<usize>,
    gap: Cell<(usize, usize)>,
}

impl Code {
    pub(super) fn now() -> Code {
        let count = RANGE_COUNT.load(Ordering::Relaxed);
        let (first, end) = if count == 0 {
            (0, 0)
        } else {
            (
                RANGES[0][0].load(Ordering::Relaxed),
                RANGES[count - 1][1].load(Ordering::Relaxed),
            )
        };
        Code {
            count,
            first,
            end,
            last: Cell::new(0),
            before_last: Cell::new(0),
            gap: Cell::new((0, 0)),
        }
    }

    /// False if `addr` lies in no executable mapping, by the two cheap filters of
    /// `contains` (the span of all ranges, the code granules); true if it may.
    #[inline(always)]
    pub(super) fn may_contain(&self, addr: usize) -> bool {
        if addr < self.first || addr >= self.end {
            return false;
        }
        let (word, bit) = granule(addr);
        CODE_GRANULES[word].load(Ordering::Relaxed) & bit != 0
    }

    /// The executable mapping `addr` lies in (its index among the ranges), if any.
    pub(super) fn mapping_of(&self, addr: usize) -> Option<usize> {
        self.contains(addr).then(|| self.last.get())
    }

    /// True if `addr` lies in an executable mapping.
    #[inline(always)]
    pub(super) fn contains(&self, addr: usize) -> bool {
        // Most stack words are small numbers or stack addresses, outside every range.
        if addr < self.first || addr >= self.end {
            return false;
        }
        let last = self.last.get();
        if RANGES[last][0].load(Ordering::Relaxed) <= addr
            && addr < RANGES[last][1].load(Ordering::Relaxed)
        {
            return true;
        }
        let (word, bit) = granule(addr);
        if CODE_GRANULES[word].load(Ordering::Relaxed) & bit == 0 {
            return false;
        }
        let before_last = self.before_last.get();
        if RANGES[before_last][0].load(Ordering::Relaxed) <= addr
            && addr < RANGES[before_last][1].load(Ordering::Relaxed)
        {
            self.before_last.set(last);
            self.last.set(before_last);
            return true;
        }
        let (gap_start, gap_end) = self.gap.get();
        if gap_start <= addr && addr < gap_end {
            return false;
        }
        // Binary search for the last range starting at or below addr.
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if RANGES[mid][0].load(Ordering::Relaxed) <= addr {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        // lo > 0: addr >= the first range's start (checked above).
        let end_before = RANGES[lo - 1][1].load(Ordering::Relaxed);
        if addr < end_before {
            self.before_last.set(last);
            self.last.set(lo - 1);
            return true;
        }
        // lo < count: addr < the last range's end (checked above).
        self.gap
            .set((end_before, RANGES[lo][0].load(Ordering::Relaxed)));
        false
    }
}

/// ebb's own executable mapping, and whether it is a shared object of its own
/// (`libebb.so`) rather than part of the program (set with the ranges).
static EBB_LO: AtomicUsize = AtomicUsize::new(0);
static EBB_HI: AtomicUsize = AtomicUsize::new(0);
pub(super) static EBB_SHARED: AtomicU32 = AtomicU32::new(0);

fn note_own_mapping(count: usize) {
    let here = refresh_executable_ranges as *const () as usize;
    for r in RANGES.iter().take(count) {
        let (lo, hi) = (r[0].load(Ordering::Relaxed), r[1].load(Ordering::Relaxed));
        if lo <= here && here < hi {
            EBB_LO.store(lo, Ordering::Relaxed);
            EBB_HI.store(hi, Ordering::Relaxed);
            // SAFETY: getauxval has no preconditions.
            let entry = unsafe { libc::getauxval(libc::AT_ENTRY) } as usize;
            EBB_SHARED.store(!(lo <= entry && entry < hi) as u32, Ordering::Relaxed);
        }
    }
}

pub(super) fn in_ebb(addr: usize) -> bool {
    EBB_LO.load(Ordering::Relaxed) <= addr && addr < EBB_HI.load(Ordering::Relaxed)
}

/// Read a word that may not be mapped.
pub(super) fn read_word_checked(addr: usize) -> Option<usize> {
    let mut bytes = [0u8; 8];
    crate::os::read_checked(addr, &mut bytes).then(|| usize::from_ne_bytes(bytes))
}

/// Where a call instruction ending at `ret` goes, as far as can be told without a
/// system call: `Some(Target::Direct)` for a direct call, `Some(Target::Slot)` for a
/// call through a memory slot (read only if the target matters: reading it safely is
/// a system call), `Some(Target::Register)` for a call through a register, `None` if
/// no call ends there. Reads only code bytes inside a known executable mapping.
#[derive(Clone, Copy)]
pub(super) enum Target {
    Direct(usize),
    Slot(usize),
    Register,
}

impl Target {
    /// Where the call went, if that can be told (`Register`: not).
    pub(super) fn resolve(self) -> Option<usize> {
        match self {
            Target::Direct(t) => Some(t),
            Target::Slot(slot) => read_word_checked(slot),
            Target::Register => None,
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) fn call_before(ret: usize, code: &Code) -> Option<Target> {
    if !code.contains(ret - 7) {
        return None;
    }
    // SAFETY: [ret - 7, ret) lies in an executable (readable) mapping, checked above
    // for its first byte; mappings are page-granular and `ret` lies in one too.
    let b = unsafe { core::slice::from_raw_parts((ret - 7) as *const u8, 7) };
    if b[2] == 0xE8 {
        let rel = i32::from_le_bytes([b[3], b[4], b[5], b[6]]);
        return Some(Target::Direct(ret.wrapping_add(rel as isize as usize)));
    }
    if b[1] == 0xFF && b[2] == 0x15 {
        let rel = i32::from_le_bytes([b[3], b[4], b[5], b[6]]);
        return Some(Target::Slot(ret.wrapping_add(rel as isize as usize)));
    }
    if (b[5] == 0xFF && b[6] & 0xF8 == 0xD0)
        || (b[4] == 0xFF && b[5] & 0xF8 == 0x50)
        || (b[1] == 0xFF && b[2] & 0xF8 == 0x90)
    {
        return Some(Target::Register);
    }
    None
}

#[cfg(target_arch = "aarch64")]
pub(super) fn call_before(ret: usize, code: &Code) -> Option<Target> {
    if ret % 4 != 0 || !code.contains(ret - 4) {
        return None;
    }
    // SAFETY: inside an executable mapping, checked above.
    let insn = unsafe { ((ret - 4) as *const u32).read() };
    if insn & 0xFC00_0000 == 0x9400_0000 {
        let imm = ((insn << 6) as i32 >> 6) as isize * 4;
        return Some(Target::Direct((ret - 4).wrapping_add(imm as usize)));
    }
    if insn & 0xFFFF_FC1F == 0xD63F_0000 {
        return Some(Target::Register);
    }
    None
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(super) fn call_before(_: usize, _: &Code) -> Option<Target> {
    None
}

/// Follow a PLT stub (`endbr64`, `bnd`, `jmp *slot(%rip)`) to where it jumps.
#[cfg(target_arch = "x86_64")]
pub(super) fn through_plt(target: usize, code: &Code) -> usize {
    if !code.contains(target) || !code.contains(target + 11) {
        return target;
    }
    // SAFETY: the 11 bytes lie in executable mappings, checked above.
    let b = unsafe { core::slice::from_raw_parts(target as *const u8, 11) };
    let mut i = if b[..4] == [0xF3, 0x0F, 0x1E, 0xFA] {
        4
    } else {
        0
    };
    if b[i] == 0xF2 {
        i += 1;
    }
    if b[i] == 0xFF && b[i + 1] == 0x25 {
        let rel = i32::from_le_bytes([b[i + 2], b[i + 3], b[i + 4], b[i + 5]]);
        let next = target + i + 6;
        return read_word_checked(next.wrapping_add(rel as isize as usize)).unwrap_or(target);
    }
    target
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) fn through_plt(target: usize, _: &Code) -> usize {
    target
}

/// Where the call before return address `ret` went (through a PLT stub or a GOT
/// slot), if it was a call and not through a register.
pub(super) fn call_target(ret: usize, code: &Code) -> Option<usize> {
    let target = call_before(ret, code).and_then(Target::resolve)?;
    Some(through_plt(target, code))
}
