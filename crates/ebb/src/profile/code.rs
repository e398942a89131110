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

/// Functions followed by [`tail_reaches_ebb`] (a wrapper and the wrappers it jumps to).
const TAIL_HOPS: usize = 5;
/// Instructions decoded in each.
const TAIL_INSTRUCTIONS: usize = 12;
/// Bytes of a function's body searched for a jump into a PLT stub.
const TAIL_SCAN_BYTES: usize = 512;

/// True if the code at `target` (a function the program called) reaches ebb by tail
/// jumps: the return address into its caller is then the allocation site, although
/// the call before it went to this function, not to ebb. Two shapes, followed at most
/// `TAIL_HOPS` functions deep:
/// - a wrapper that keeps no frame: a few instructions that only move, test and
///   compare registers (taking a conditional branch's fall-through), then a `jmp`
///   (direct, through a PLT stub, or through a memory slot it reads): CPython's
///   `PyMem_Malloc` jumps through `_PyMem.malloc` to `_PyMem_RawMalloc`, which jumps
///   to `malloc@plt` (`tail_jump_from`);
/// - a function with a body that ends in such a jump: a `jmp` within its first
///   `TAIL_SCAN_BYTES` into a PLT stub or a frameless wrapper that leads on
///   (CPython's `_PyObject_Realloc` jumps to `PyMem_RawRealloc@plt` for a block that
///   is not its own). Found by looking for the opcode byte, not by decoding: a byte
///   that only looks like one would also have to point at a stub or a wrapper that
///   leads into ebb.
///
/// A function that called ebb instead left its own return address below its caller's,
/// which the scan meets first. Reads only code bytes inside known executable mappings,
/// and memory slots through `read_word_checked`.
#[cfg(target_arch = "x86_64")]
pub(super) fn tail_reaches_ebb(target: usize, code: &Code) -> bool {
    reaches_ebb(target, code, TAIL_HOPS)
}

#[cfg(target_arch = "x86_64")]
fn reaches_ebb(at: usize, code: &Code, hops: usize) -> bool {
    if hops == 0 {
        return false;
    }
    if let Some(next) = tail_jump_from(at, code) {
        let next = through_plt(next, code);
        return in_ebb(next) || reaches_ebb(next, code, hops - 1);
    }
    if !code.contains(at) || !code.contains(at + TAIL_SCAN_BYTES + 4) {
        return false;
    }
    // SAFETY: the bytes lie in executable (readable) mappings, checked above.
    let body = unsafe { core::slice::from_raw_parts(at as *const u8, TAIL_SCAN_BYTES + 5) };
    (0..TAIL_SCAN_BYTES).any(|k| {
        let stub = match body[k] {
            0xE9 => {
                let rel = i32::from_le_bytes([body[k + 1], body[k + 2], body[k + 3], body[k + 4]]);
                (at + k + 5).wrapping_add(rel as isize as usize)
            }
            0xEB => (at + k + 2).wrapping_add(body[k + 1] as i8 as isize as usize),
            _ => return false,
        };
        let next = through_plt(stub, code);
        // Into a PLT stub, or straight into a frameless wrapper (one object's own).
        (next != stub || tail_jump_from(next, code).is_some())
            && (in_ebb(next) || reaches_ebb(next, code, hops - 1))
    })
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) fn tail_reaches_ebb(_: usize, _: &Code) -> bool {
    false
}

/// The target of the first unconditional `jmp` out of the function at `start`, if
/// only register moves, tests, compares and conditional branches (not taken) come
/// before it (see `tail_reaches_ebb`).
#[cfg(target_arch = "x86_64")]
fn tail_jump_from(start: usize, code: &Code) -> Option<usize> {
    // The longest instruction decoded here: REX + 0F xx + ModRM + SIB + disp32 = 9, or
    // REX + B8+r + imm64 = 10.
    const LONGEST: usize = 16;
    let mut at = start;
    for _ in 0..TAIL_INSTRUCTIONS {
        if !code.contains(at) || !code.contains(at + LONGEST - 1) {
            return None;
        }
        // SAFETY: the bytes lie in executable (readable) mappings, checked above.
        let b = unsafe { core::slice::from_raw_parts(at as *const u8, LONGEST) };
        if b[..4] == [0xF3, 0x0F, 0x1E, 0xFA] {
            at += 4; // endbr64
            continue;
        }
        let mut i = 0;
        if b[i] == 0x66 {
            i += 1;
        }
        let rex_w = b[i] & 0xF8 == 0x48;
        if b[i] & 0xF0 == 0x40 {
            i += 1;
        }
        let op = b[i];
        i += 1;
        let rel32 = |k: usize| i32::from_le_bytes([b[k], b[k + 1], b[k + 2], b[k + 3]]) as isize;
        match op {
            // jmp rel32, jmp rel8: out of the function (or within it: decode on there).
            0xE9 => return Some((at + i + 4).wrapping_add(rel32(i) as usize)),
            0xEB => {
                at = (at + i + 1).wrapping_add(b[i] as i8 as isize as usize);
                continue;
            }
            // jmp *disp32(%rip): the slot's value.
            0xFF if b[i] == 0x25 => {
                let slot = (at + i + 5).wrapping_add(rel32(i + 1) as usize);
                return read_word_checked(slot);
            }
            // jcc rel8: the fall-through.
            0x70..=0x7F => i += 1,
            0x0F => {
                let op2 = b[i];
                i += 1;
                match op2 {
                    0x80..=0x8F => i += 4,                   // jcc rel32
                    0x40..=0x4F => i += modrm_len(&b[i..])?, // cmovcc
                    _ => return None,
                }
            }
            // mov, test, cmp, xor, and, or, add, sub, lea between registers and memory.
            0x89 | 0x8B | 0x85 | 0x39 | 0x3B | 0x31 | 0x33 | 0x21 | 0x23 | 0x09 | 0x0B | 0x01
            | 0x03 | 0x29 | 0x2B | 0x8D => i += modrm_len(&b[i..])?,
            // Group 1 with an immediate (add/or/and/sub/xor/cmp ..., imm8 or imm32).
            0x83 => i += modrm_len(&b[i..])? + 1,
            0x81 => i += modrm_len(&b[i..])? + 4,
            0xC7 if (b[i] >> 3) & 7 == 0 => i += modrm_len(&b[i..])? + 4,
            // mov imm32 (imm64 with REX.W) into a register.
            0xB8..=0xBF => i += if rex_w { 8 } else { 4 },
            _ => return None,
        }
        at += i;
    }
    None
}

/// Bytes of a ModRM byte and what follows it (SIB, displacement), from `b[0]`.
#[cfg(target_arch = "x86_64")]
fn modrm_len(b: &[u8]) -> Option<usize> {
    let modrm = *b.first()?;
    let (md, rm) = (modrm >> 6, modrm & 7);
    let sib = md != 3 && rm == 4;
    let base_is_disp32 = sib && md == 0 && b.get(1)? & 7 == 5;
    let disp = match md {
        0 if rm == 5 || base_is_disp32 => 4,
        1 => 1,
        2 => 4,
        _ => 0,
    };
    Some(1 + sib as usize + disp)
}

/// Where the call before return address `ret` went (through a PLT stub or a GOT
/// slot), if it was a call and not through a register.
pub(super) fn call_target(ret: usize, code: &Code) -> Option<usize> {
    let target = call_before(ret, code).and_then(Target::resolve)?;
    Some(through_plt(target, code))
}
