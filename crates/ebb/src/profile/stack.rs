//! Stack capture for a sample, without allocating, locking or faulting.
//!
//! Two parts, innermost first:
//! 1. The allocation site itself: the return address into the code that called the
//!    allocator. The allocator's own functions have no frame pointers (the fast paths
//!    must stay frameless), so the frame chain would skip it. The slow path that takes
//!    the sample passes the address of a local of the first allocator frame below the
//!    caller (`entry_hint`); the return address is the first word above it that points
//!    into executable code (the mappings read from `/proc/self/maps` when profiling
//!    starts and at every dump).
//! 2. The callers: the frame-pointer chain from the current frame pointer register,
//!    keeping only frames above that word. Each step is checked before it is read: the
//!    frame lies in `[stack pointer, top of the thread's stack)`, 8-byte aligned, above
//!    the one before. The top comes without allocating: a glibc thread's stack lies
//!    below its thread control block (the thread pointer), the main thread's below
//!    `__libc_stack_end`. Code built without frame pointers ends the chain early (or
//!    yields a few wrong frames); see README "Find a leak". Between the two, the
//!    frames of functions without frame pointers that called ebb for their caller
//!    (C++'s `operator new`), each validated by the call before it
//!    (`frameless_callers`).

use super::code::{
    call_before, call_target, in_ebb, tail_reaches_ebb, through_plt, Code, EBB_SHARED,
    RANGE_VERSION,
};
use super::table::MAX_DEPTH;
use core::sync::atomic::{AtomicU64, Ordering};

/// Bytes above `entry_hint` searched for the caller's return address.
const SCAN_BYTES: usize = 512;
/// The current stack pointer and frame pointer.
#[inline(always)]
fn registers() -> (usize, usize) {
    let (sp, fp): (usize, usize);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: reads two registers, no memory access.
    unsafe {
        core::arch::asm!("mov {}, rsp", "mov {}, rbp", out(reg) sp, out(reg) fp,
            options(nomem, nostack, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: reads two registers, no memory access.
    unsafe {
        core::arch::asm!("mov {}, sp", "mov {}, x29", out(reg) sp, out(reg) fp,
            options(nomem, nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        sp = 0;
        fp = 0;
    }
    (sp, fp)
}

/// The thread pointer (glibc: the thread control block, above a thread's stack).
#[inline(always)]
pub fn thread_pointer() -> usize {
    let tp: usize;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `%fs:0` is the TCB's self pointer on x86_64 Linux (glibc and musl).
    unsafe {
        core::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: reads a system register.
    unsafe {
        core::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nomem, nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        tp = 0;
    }
    tp
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
extern "C" {
    /// glibc (ld.so): the stack pointer at process entry, above every frame of the main
    /// thread.
    static __libc_stack_end: *const core::ffi::c_void;
}

fn main_stack_end() -> usize {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: a pointer-sized variable ld.so sets before any code of ours runs.
    unsafe {
        __libc_stack_end as usize
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    0
}

/// The top of the current thread's stack, or None if it cannot be told.
fn stack_top(sp: usize) -> Option<usize> {
    const MAX_STACK: usize = 1 << 30;
    let tp = thread_pointer();
    if tp > sp && tp - sp < MAX_STACK {
        return Some(tp);
    }
    let end = main_stack_end();
    if end > sp && end - sp < MAX_STACK {
        return Some(end);
    }
    None
}

/// Where the allocator was entered, for a sample's stack: the address of a local of
/// the first allocator frame below the caller's, and the frame pointer register
/// there (still the caller's: ebb's own code has no frame pointers, and the fast
/// paths that lead there do not touch the register). Taken by `Entry::here` at the
/// start of that frame.
#[derive(Clone, Copy, Debug, Default)]
pub struct Entry {
    pub hint: usize,
    pub fp: usize,
}

impl Entry {
    /// `marker`: a local of the calling frame.
    #[inline(always)]
    pub fn here(marker: &u8) -> Entry {
        let (_, fp) = registers();
        Entry {
            hint: core::hint::black_box(marker) as *const u8 as usize,
            fp,
        }
    }
}

/// Between the candidates for the caller's return address and the frame-pointer
/// chain in a captured stack (never a code address).
pub const SEPARATOR: usize = 1;
/// Candidates kept (the encoder takes the first that is not an allocator function).
const MAX_CANDIDATES: usize = 8;

/// True if `fp` (above `floor`, below `top`) holds a frame record: the caller's frame
/// pointer, further up the stack, then a return address that follows a call.
fn frame_record_at(fp: usize, floor: usize, top: usize, code: &Code) -> bool {
    if fp <= floor || fp % 16 != 0 || fp + 16 > top {
        return false;
    }
    // SAFETY: `[fp, fp + 16)` lies within this thread's live stack.
    let (next, ret) = unsafe {
        (
            (fp as *const usize).read(),
            (fp as *const usize).add(1).read(),
        )
    };
    next > fp
        && next < top
        && next % 16 == 0
        && code.contains(ret)
        && call_before(ret, code).is_some()
}

/// What the candidate scan found out about code words before, by value: a word that
/// lies in a code granule is looked up here before the range search and the decoding
/// of the instruction before it (`call_before`, and for `libebb.so` the call's target).
/// The answer depends only on the word, the executable mappings (`RANGE_VERSION`,
/// part of each entry) and the code bytes, so it is what the scan would compute again.
/// The same return addresses come back sample after sample (a site's callers), and
/// they were most of the scan's cost: on sweep, 5.7 code words per capture at ~37
/// instructions of decoding each, and a binary search for two in five.
///
/// An entry: the word (47 bits, user space), the version's low bits (15), and 2 bits of
/// answer (`ReturnAddress`). One atomic word each, so a racing reader sees either the
/// old entry or the new one, both true for the version they carry.
const MEMO_ENTRIES: usize = 1024;
static MEMO: [AtomicU64; MEMO_ENTRIES] = [const { AtomicU64::new(0) }; MEMO_ENTRIES];
const MEMO_WORD_BITS: u32 = 47;
const MEMO_VERSION_BITS: u32 = 15;

/// What a stack word is, as far as the candidate scan cares.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ReturnAddress {
    /// Not code, or no call instruction ends there.
    No = 0,
    /// Follows a call, but not one the caller search wants (`libebb.so`: a call that
    /// does not go into ebb, or a return address inside ebb).
    Unwanted = 1,
    /// Follows a call: a candidate.
    Wanted = 2,
}

/// Classify `word` (in a code granule) without the memo.
#[inline(never)]
fn classify(word: usize, code: &Code, shared: bool) -> ReturnAddress {
    if !code.contains(word) {
        return ReturnAddress::No;
    }
    let Some(target) = call_before(word, code) else {
        return ReturnAddress::No;
    };
    // A return address outside ebb, after a call into it, or into a wrapper that
    // jumps into it (`tail_reaches_ebb`).
    let wanted = !shared
        || !in_ebb(word)
            && target.resolve().map_or(true, |t| {
                let t = through_plt(t, code);
                in_ebb(t) || tail_reaches_ebb(t, code)
            });
    if wanted {
        ReturnAddress::Wanted
    } else {
        ReturnAddress::Unwanted
    }
}

/// `classify` through the memo. `version`: `RANGE_VERSION` as the capture read it.
#[inline(always)]
fn classify_memo(word: usize, code: &Code, shared: bool, version: u32) -> ReturnAddress {
    if word >> MEMO_WORD_BITS != 0 {
        return classify(word, code, shared);
    }
    let tag = (version as u64 & ((1 << MEMO_VERSION_BITS) - 1)) << MEMO_WORD_BITS;
    let key = word as u64 | tag;
    let index =
        (word as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - MEMO_ENTRIES.trailing_zeros());
    let entry = &MEMO[index as usize % MEMO_ENTRIES];
    let seen = entry.load(Ordering::Relaxed);
    let shift = MEMO_WORD_BITS + MEMO_VERSION_BITS;
    if seen & ((1 << shift) - 1) == key {
        return match seen >> shift {
            2 => ReturnAddress::Wanted,
            1 => ReturnAddress::Unwanted,
            _ => ReturnAddress::No,
        };
    }
    let answer = classify(word, code, shared);
    entry.store(key | (answer as u64) << shift, Ordering::Relaxed);
    answer
}

/// Frames found by `frameless_callers` at most.
const MAX_WRAPPED: usize = 16;
/// A function that calls another lies within this many bytes below its return address
/// into it (code of one function: `operator new` and the like are a few dozen bytes).
const MAX_FUNCTION_BYTES: usize = 64 << 10;

/// The return addresses in `[from, end)` (stack words below the caller's frame record,
/// or the scan's window where there is none) of calls each into the function holding
/// the one before, starting from `site` (a return address into the function that
/// called ebb): the frames of functions that keep no frame pointer, innermost first,
/// into `found` after the `already` there (found before `from`); returns how many
/// there are now, and the slot of the last one this call found. A word is taken only if
/// the instruction before it is a call whose target (through a PLT stub or a GOT slot)
/// lies at most `MAX_FUNCTION_BYTES` below the frame before: stale return addresses in
/// locals almost never do. The first may also call another function of the site's
/// object (which tail-called the site's function). A call through a register cannot be
/// checked so: the search loses the chain there.
fn frameless_callers(
    site: usize,
    from: usize,
    end: usize,
    code: &Code,
    found: &mut [usize; MAX_WRAPPED],
    already: usize,
) -> (usize, usize) {
    let mut n = already;
    let mut inner = if n == 0 { site } else { found[n - 1] };
    let mut last_slot = 0;
    let mut at = from.next_multiple_of(8);
    while at + 8 <= end && n < MAX_WRAPPED {
        // SAFETY: `[from, end)` lies in this thread's live stack (below the caller's
        // frame record, above the entry hint: the caller checked both).
        let word = unsafe { (at as *const usize).read() };
        at += 8;
        if !code.may_contain(word) || !code.contains(word) {
            continue;
        }
        let Some(target) = call_target(word, code) else {
            continue;
        };
        // The site's own function may have been reached by a tail call (`_M_create`
        // jumps to `operator new`): the call before the next frame then went to
        // another function of the same object.
        let into_inner = target <= inner && inner - target < MAX_FUNCTION_BYTES;
        let tail_called_site = n == 0
            && code.mapping_of(target).is_some()
            && code.mapping_of(target) == code.mapping_of(site);
        if into_inner || tail_called_site {
            found[n] = word;
            n += 1;
            inner = word;
            last_slot = at - 8;
        }
    }
    (n, last_slot)
}

/// The first frame record at or above `from` (16-aligned, below `scan_end`): a saved
/// frame pointer further up, then a return address after a call; 0 if none.
fn first_record_above(
    from: usize,
    floor: usize,
    scan_end: usize,
    top: usize,
    code: &Code,
) -> usize {
    let mut at = from.saturating_sub(8).max(floor).next_multiple_of(16);
    while at + 16 <= scan_end {
        if frame_record_at(at, floor, top, code) {
            return at;
        }
        at += 16;
    }
    0
}

/// True if `ret` is the return address of a call into the function holding `inner`
/// (its target at most `MAX_FUNCTION_BYTES` below).
fn calls_into(ret: usize, inner: usize, code: &Code) -> bool {
    code.may_contain(ret)
        && code.contains(ret)
        && call_target(ret, code).is_some_and(|t| t <= inner && inner - t < MAX_FUNCTION_BYTES)
}

/// True if the frame record at `record` (accepted by `frame_record_at`) is the one
/// whose return address called into the function holding `inner`, the last frame found
/// below it. A record the candidate scan formed from the word just below the site (a
/// register ebb saved there) holds the site itself: `calls_into` would accept it
/// whenever the site's call goes a little way down its own object (`_M_construct`
/// calls `_M_create`, 0xfc bytes below it, which tail-calls `operator new`), so it is
/// right only if the record it points to is the site function's own, holding a call
/// into it.
fn holds_callers_record(record: usize, inner: usize, site: usize, top: usize, code: &Code) -> bool {
    // SAFETY: `frame_record_at` accepted `record`: `[record, record + 16)` lies in the
    // thread's stack.
    let (next, ret) = unsafe {
        (
            (record as *const usize).read(),
            (record as *const usize).add(1).read(),
        )
    };
    if ret != site {
        return calls_into(ret, inner, code);
    }
    if !frame_record_at(next, record, top, code) {
        return false;
    }
    // SAFETY: `frame_record_at` accepted `next`, as above.
    let next_ret = unsafe { (next as *const usize).add(1).read() };
    calls_into(next_ret, site, code)
}

/// Capture the stack of the allocation being sampled into `out`, innermost first;
/// returns the depth. `entry_hint`: the address of a local in the allocator frame just
/// below the caller's (0 if unknown).
///
/// The layout: candidates for the caller's return address (words above `entry_hint`
/// that follow a call instruction), `SEPARATOR`, then the frame-pointer chain above
/// `entry_hint`. When ebb is a shared object of its own, a candidate must also lie
/// outside it and follow a call into it (through the PLT or the GOT), which leaves
/// one; inside the program, the encoder drops the candidates that are the
/// allocator's own return addresses (by name) and keeps the first other one.
#[inline(never)]
pub fn capture(entry: Entry, out: &mut [usize; MAX_DEPTH]) -> usize {
    let (sp, _) = registers();
    let entry_hint = entry.hint;
    let Some(top) = stack_top(sp) else {
        return 0;
    };
    let code = Code::now();
    let mut n = 0;
    // The caller's frame record: the frame pointer at entry if it is one, else the
    // first word pair above the entry that looks like one (a saved frame pointer
    // further up, then a return address after a call), noted by the candidate scan
    // as it passes (so its words are read once).
    let entry_fp_is_record = frame_record_at(entry.fp, entry_hint, top, &code);
    let mut fp = if entry_fp_is_record { entry.fp } else { 0 };
    let scan_end = top.min(entry_hint + SCAN_BYTES);
    let mut scanned_to = entry_hint;
    let mut no_record_above = false;
    if entry_hint >= sp && entry_hint < top {
        let version = RANGE_VERSION.load(Ordering::Acquire);
        let shared = EBB_SHARED.load(Ordering::Relaxed) != 0;
        let mut end = scan_end;
        if entry_fp_is_record && entry.fp < end {
            // The return address into the caller lies below its frame record.
            end = entry.fp;
        }
        let mut at = entry_hint.next_multiple_of(8);
        let limit = if shared { 1 } else { MAX_CANDIDATES };
        while at + 8 <= end && n < limit {
            // SAFETY: `[sp, top)` is this thread's live stack, mapped and readable.
            let word = unsafe { (at as *const usize).read() };
            let slot = at;
            at += 8;
            // Saved frame pointers and addresses of locals: most words here, and
            // code mappings (the vdso) may lie above the stack.
            if word.wrapping_sub(sp) < top - sp || !code.may_contain(word) {
                continue;
            }
            let kind = classify_memo(word, &code, shared, version);
            if kind == ReturnAddress::No {
                continue;
            }
            let mut record_here = false;
            if fp == 0 && slot % 16 == 8 && slot - 8 > entry_hint {
                // SAFETY: `slot - 8` lies in `[entry_hint, top)`, inside the stack.
                let next = unsafe { ((slot - 8) as *const usize).read() };
                if next > slot - 8 && next < top && next % 16 == 0 {
                    fp = slot - 8;
                    record_here = true;
                }
            }
            if kind == ReturnAddress::Wanted {
                out[n] = word;
                n += 1;
            }
            if record_here {
                // The frame-pointer chain goes on from here (this word is its first
                // return address), as it does above the entry's own frame record.
                break;
            }
        }
        scanned_to = at;
        // The callers between the site and the caller's frame record: functions
        // without frame pointers that called ebb for their own caller (C++'s
        // `operator new`, `xmalloc`-like wrappers); without them the site's caller is
        // the frame record's, one frame too far out.
        let mut wrapped = [0usize; MAX_WRAPPED];
        let mut w = 0;
        if shared && n == 1 {
            let site = out[0];
            let ret_of = |record: usize| {
                // SAFETY: a record `frame_record_at` accepted: `[record, record + 16)`
                // lies in the thread's stack.
                unsafe { (record as *const usize).add(1).read() }
            };
            if entry_fp_is_record {
                // A site whose function keeps a frame pointer is the chain's own first
                // frame: the entry's record then holds a call into it.
                if !calls_into(ret_of(entry.fp), site, &code) {
                    w = frameless_callers(site, at, end, &code, &mut wrapped, 0).0;
                }
            } else {
                // The frame pointer register was not a record at entry (frameless code,
                // ebb's included, used it for data): the record the chain would start
                // from is the scan's, or the first above the site. It is the right one
                // if it holds a call into the last frame below it; otherwise it is a
                // stale record left by an earlier call (`keep_nodes`'s, under
                // `std::string`'s constructor), and the search goes on past it.
                let first = if fp != 0 {
                    fp
                } else {
                    first_record_above(at, entry_hint, scan_end, top, &code)
                };
                // None above: none for the fallback search below to find either.
                no_record_above = first == 0;
                let bound = if first != 0 { first } else { end };
                let (below, _) = frameless_callers(site, at, bound, &code, &mut wrapped, 0);
                let inner = if below > 0 { wrapped[below - 1] } else { site };
                w = below;
                if first != 0 && !holds_callers_record(first, inner, site, top, &code) {
                    let (all, last_slot) =
                        frameless_callers(site, bound, end, &code, &mut wrapped, below);
                    if all > below {
                        w = all;
                        fp = 0;
                        scanned_to = last_slot + 8;
                    } else {
                        fp = first;
                    }
                } else {
                    fp = first;
                }
            }
        }
        if version & 1 != 0 || RANGE_VERSION.load(Ordering::Acquire) != version {
            n = 0;
        }
        if n > 0 {
            out[n] = SEPARATOR;
            n += 1;
            for &ret in &wrapped[..w] {
                out[n] = ret;
                n += 1;
            }
        }
    }
    if fp == 0 && !no_record_above {
        // The candidate scan stopped early (enough candidates) without passing one.
        fp = first_record_above(scanned_to, entry_hint, scan_end, top, &code);
    }
    while n < MAX_DEPTH {
        if fp < sp || fp % 8 != 0 || fp + 16 > top {
            break;
        }
        // SAFETY: checked above to lie within this thread's live stack.
        let (next, ret) = unsafe {
            (
                (fp as *const usize).read(),
                (fp as *const usize).add(1).read(),
            )
        };
        // Not a return address: a frame pointer register that frameless code used
        // for something else led here, and what lies above is no chain.
        if ret == 0 || !code.may_contain(ret) || !code.contains(ret) {
            break;
        }
        if fp > entry_hint {
            out[n] = ret;
            n += 1;
        }
        if next <= fp {
            break;
        }
        fp = next;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::code::refresh_executable_ranges;

    /// A return address the capture finds for a call in this test (the first candidate).
    fn some_return_address() -> usize {
        // The buffer lives in this frame, not in `capture_here`'s: between the marker
        // and the return address it would fill the 512 bytes the scan reads (it did at
        // the test profile's opt-level 2, where no candidate was found).
        let mut out = [0usize; MAX_DEPTH];
        let n = capture_here(&mut out);
        assert!(n > 0 && out[0] != SEPARATOR, "no candidate captured");
        out[0]
    }

    /// A capture whose entry marker is this frame's only local.
    #[inline(never)]
    fn capture_here(out: &mut [usize; MAX_DEPTH]) -> usize {
        let marker = 0u8;
        capture(Entry::here(core::hint::black_box(&marker)), out)
    }

    #[test]
    fn memo_answers_as_the_scan_and_only_for_its_version() {
        refresh_executable_ranges();
        let word = some_return_address();
        let code = Code::now();
        let shared = EBB_SHARED.load(Ordering::Relaxed) != 0;
        let version = RANGE_VERSION.load(Ordering::Acquire);
        assert!(code.may_contain(word));
        let truth = classify(word, &code, shared);
        assert!(truth != ReturnAddress::No);
        assert!(classify_memo(word, &code, shared, version) == truth);
        // The entry now holds the answer: poison it, and the memo must return the
        // poisoned answer for this version (it is consulted) and the true one for the
        // next (a refresh makes every entry stale).
        let index = (word as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            >> (64 - MEMO_ENTRIES.trailing_zeros());
        let entry = &MEMO[index as usize % MEMO_ENTRIES];
        let shift = MEMO_WORD_BITS + MEMO_VERSION_BITS;
        let seen = entry.load(Ordering::Relaxed);
        assert_eq!(seen >> shift, truth as u64, "memo entry not written");
        entry.store(seen & ((1 << shift) - 1), Ordering::Relaxed); // answer: No
        assert!(classify_memo(word, &code, shared, version) == ReturnAddress::No);
        assert!(classify_memo(word, &code, shared, version + 2) == truth);
    }
}
