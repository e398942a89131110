//! Guarded sampling (`EBB_GUARDED_RATE=N`, off by default): about one small allocation
//! in N is served from a slot of a pool of its own, right beside a guard page, so an
//! overflow or underflow faults at the faulting instruction; a freed slot is made
//! inaccessible and kept out of reuse for a while, so a use after free faults too. The
//! fault handler reports the block (size, address, offset, kind, allocation and free
//! stacks) in one line and lets the fault end the process.
//!
//! **The pool**, reserved once at start when the option is on: `slots` data pages, each
//! between two `PROT_NONE` guard pages (`[guard][slot 0][guard][slot 1][guard]...`),
//! and a mapping for the slots' records. A data page is readable only while its slot
//! holds a live block; on free it is protected again (and stays committed: at most
//! `slots` pages, touched once each).
//! Free slots are reused oldest-freed first (a FIFO by free time: the quarantine), so
//! a freed block stays inaccessible while `slots - live` other blocks are sampled.
//! Slots change state by CAS on their record (no lock: a fork in the middle of an
//! operation leaves at most that slot unusable in the child).
//!
//! **Placement**: at random (one bit per allocation) the block ends where its page
//! ends (an overflow faults) or starts where it starts (an underflow faults). A block
//! placed at the end keeps the alignment its size class guarantees, so a size that is
//! not a multiple of it leaves padding (C's 24-byte blocks: 8 bytes); the rest of the
//! page around the block is filled with a pattern checked on free, so a write into the
//! padding (or anywhere else in the page) is reported then. A read there is not.
//!
//! **Choosing the sampled allocations** rides the heap profiler's slow-path machinery
//! (`profile/sampler.rs`), so the fast paths do not change: each heap keeps, per size
//! class, a countdown of allocations to the next guarded one (drawn uniformly from
//! `1..2N`); while it is on, the heap's `local_mask` is 0 so every refill of the fast
//! path's free list passes the slow path, which ends the list handed out where the
//! countdown ends (`blocks_before`, `charge`; the hand-out is the profiler's,
//! `profile/handout.rs`). Blocks above one page, first-class heaps and check mode are
//! not sampled.
//!
//! Frees of guarded blocks arrive through `free`'s path for pointers outside ebb's
//! segments (a slow path), or through its slow path for pointers past a huge mapping's
//! end, in the rest of the mapping's last 32 MiB window (the OS may place the pool
//! there: `segment::mapping_holds`); `realloc`, `malloc_usable_size` and `calloc` know
//! them.

use crate::diag::StderrWriter;
use crate::os;
use crate::profile;
use crate::size_class::{class_size, CLASS_COUNT};
use core::fmt::Write;
use core::ptr::null_mut;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Slots by default: 16 data pages (64 KiB resident at most) and 8 KiB of records: 72
/// KiB, within the 100 KiB README "Security" states (tests/guarded.rs measures it).
pub const DEFAULT_SLOTS: usize = 16;
/// Most slots `EBB_GUARDED_SLOTS` may ask for.
pub const MAX_SLOTS: usize = 4096;
/// Stack words kept per allocation and per free (`profile::capture`'s layout: return
/// address candidates, `STACK_SEPARATOR`, the frame-pointer chain).
const STACK_WORDS: usize = 24;
/// Filled around a guarded block, checked on free.
const PATTERN: u8 = 0xEB;

/// The mean allocations between guarded ones; 0: off (the pool is not made).
static RATE: AtomicU64 = AtomicU64::new(0);
/// Request sizes guarded (`EBB_GUARDED_MIN`, `EBB_GUARDED_MAX`, capped at a page).
static MIN_SIZE: AtomicUsize = AtomicUsize::new(0);
static MAX_SIZE: AtomicUsize = AtomicUsize::new(0);
/// The pool: its first guard page, its slot count, the records.
static POOL: AtomicUsize = AtomicUsize::new(0);
static POOL_BYTES: AtomicUsize = AtomicUsize::new(0);
static SLOT_COUNT: AtomicUsize = AtomicUsize::new(0);
static SLOTS: AtomicPtr<Slot> = AtomicPtr::new(null_mut());
static SLOTS_BYTES: AtomicUsize = AtomicUsize::new(0);
/// Free order of slots (the quarantine's clock), and the placement bits' source.
static FREE_CLOCK: AtomicU64 = AtomicU64::new(1);
static PLACEMENT: AtomicU64 = AtomicU64::new(0x9E37_79B9_7F4A_7C15);
/// Guarded allocations so far, and those that found every slot taken.
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static POOL_FULL: AtomicU64 = AtomicU64::new(0);

/// Slot states.
const EMPTY: u32 = 0;
const LIVE: u32 = 1;
const FREED: u32 = 2;
/// Being changed by one thread (between the states above).
const BUSY: u32 = 3;

/// A slot's record (in the records mapping, one per slot).
#[repr(C)]
struct Slot {
    state: AtomicU32,
    /// The block's address and requested size (valid in LIVE and FREED).
    block: AtomicUsize,
    size: AtomicUsize,
    /// `FREE_CLOCK` when freed (0: never used): the oldest free slot is taken first.
    freed_at: AtomicU64,
    alloc_stack: [AtomicUsize; STACK_WORDS],
    free_stack: [AtomicUsize; STACK_WORDS],
}

/// A heap's guarded-sampling state (owner only): allocations of each class until the
/// next guarded one (0: not drawn yet).
#[repr(C)]
pub struct HeapGuard {
    rng: u64,
    left: [u32; CLASS_COUNT],
}

impl HeapGuard {
    pub const fn new() -> Self {
        HeapGuard {
            rng: 0,
            left: [0; CLASS_COUNT],
        }
    }

    /// Allocations until the next guarded one, from `1..2*rate` (mean `rate`).
    fn draw(&mut self, rate: u64) -> u32 {
        if self.rng == 0 {
            self.rng = (self as *mut Self as u64) ^ os::now_ms().rotate_left(32) | 1;
        }
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let span = (2 * rate - 1).min(u32::MAX as u64 - 1);
        (1 + r % span) as u32
    }
}

impl Default for HeapGuard {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether guarded sampling is on (fixed once the process is set up).
#[inline]
pub fn enabled() -> bool {
    RATE.load(Ordering::Relaxed) != 0
}

/// Read `EBB_GUARDED_*` and, if on, make the pool and install the fault handler (once,
/// at process set-up). Off if any of that fails.
pub fn init() {
    let number = |name: &[u8]| os::getenv(name).and_then(crate::options::parse_u64);
    let Some(rate) = number(b"EBB_GUARDED_RATE\0").filter(|&r| r > 0) else {
        return;
    };
    let page = os::page_size();
    let slots = number(b"EBB_GUARDED_SLOTS\0")
        .map_or(DEFAULT_SLOTS, |n| n as usize)
        .clamp(1, MAX_SLOTS);
    let min = number(b"EBB_GUARDED_MIN\0").unwrap_or(0) as usize;
    let max = number(b"EBB_GUARDED_MAX\0")
        .map_or(page, |n| n as usize)
        .min(page);
    if !make_pool(slots) {
        return;
    }
    profile::refresh_executable_ranges();
    if !os::catch_faults(on_fault) {
        return;
    }
    MIN_SIZE.store(min, Ordering::Relaxed);
    MAX_SIZE.store(max, Ordering::Relaxed);
    set_eligible(min, max);
    RATE.store(rate, Ordering::Release);
}

fn make_pool(slots: usize) -> bool {
    let page = os::page_size();
    let bytes = (2 * slots + 1) * page;
    let pool = os::reserve_aligned(bytes, page);
    if pool.is_null() {
        return false;
    }
    let records = (slots * core::mem::size_of::<Slot>()).next_multiple_of(page);
    let slot_records = os::reserve_aligned(records, page);
    // SAFETY: the pool is ours, page aligned; nobody knows it yet.
    if slot_records.is_null() || !unsafe { os::protect(pool, bytes, false) } {
        // SAFETY: reserved above, unused.
        unsafe {
            os::release(pool, bytes);
            if !slot_records.is_null() {
                os::release(slot_records, records);
            }
        }
        return false;
    }
    // Fresh mappings read as zero: every record starts EMPTY, never freed.
    SLOTS.store(slot_records as *mut Slot, Ordering::Relaxed);
    SLOTS_BYTES.store(records, Ordering::Relaxed);
    SLOT_COUNT.store(slots, Ordering::Relaxed);
    POOL_BYTES.store(bytes, Ordering::Relaxed);
    POOL.store(pool as usize, Ordering::Release);
    true
}

/// Keep `local_mask` 0 while guarded sampling is on (so every refill of the fast path
/// passes the slow path, see the module doc); true if it is on for this heap.
/// `allowed`: false in check mode.
#[inline]
pub fn sync(local_mask: &mut usize, allowed: bool) -> bool {
    if enabled() && allowed {
        *local_mask = 0;
        true
    } else {
        false
    }
}

/// Whether allocations of `class` may be guarded (some request of the class is within
/// the size range, and its blocks fit a page): one bit per class, set at `init` (the
/// slow path asks on every refill of the fast path's list).
#[inline]
pub fn eligible(class: usize) -> bool {
    ELIGIBLE[class / 64].load(Ordering::Relaxed) >> (class % 64) & 1 != 0
}

/// Classes guarded allocations may come from (`eligible`), one bit each.
static ELIGIBLE: [AtomicU64; CLASS_COUNT.div_ceil(64)] =
    [const { AtomicU64::new(0) }; CLASS_COUNT.div_ceil(64)];

/// Set `ELIGIBLE` for request sizes `min..=max` (`init`).
fn set_eligible(min: usize, max: usize) {
    for class in 0..CLASS_COUNT {
        let block = class_size(class);
        let smaller = if class == 0 { 0 } else { class_size(class - 1) };
        if block <= os::page_size() && block >= min && smaller < max {
            ELIGIBLE[class / 64].fetch_or(1 << (class % 64), Ordering::Relaxed);
        }
    }
}

/// Allocations of `class` the fast path may hand out before the next guarded one
/// (drawn first if it was not yet); `i64::MAX` if the class is never guarded.
#[inline]
pub fn blocks_before(g: &mut HeapGuard, class: usize) -> i64 {
    if !eligible(class) {
        return i64::MAX;
    }
    if g.left[class] == 0 {
        g.left[class] = g.draw(RATE.load(Ordering::Relaxed));
    }
    g.left[class] as i64 - 1
}

/// Whether the fast path may hand out `blocks` blocks of `class` before the next
/// guarded one (`blocks <= blocks_before`).
#[inline]
pub fn fits(g: &mut HeapGuard, class: usize, blocks: i64) -> bool {
    blocks <= blocks_before(g, class)
}

/// The fast path was handed `blocks` blocks of `class` (at most `blocks_before`).
#[inline]
pub fn charge(g: &mut HeapGuard, class: usize, blocks: i64) {
    if eligible(class) {
        debug_assert!(blocks < g.left[class] as i64);
        g.left[class] -= blocks as u32;
    }
}

/// Count one allocation of `class`; true if it is to be guarded.
#[inline]
pub fn sample_point(g: &mut HeapGuard, class: usize) -> bool {
    if !eligible(class) {
        return false;
    }
    let rate = RATE.load(Ordering::Relaxed);
    let left = match g.left[class] {
        0 => g.draw(rate),
        n => n,
    };
    if left <= 1 {
        g.left[class] = g.draw(rate);
        true
    } else {
        g.left[class] = left - 1;
        false
    }
}

/// The pool's geometry: (first guard page, slots, page size); None if there is no pool.
#[inline]
fn pool() -> Option<(usize, usize, usize)> {
    let base = POOL.load(Ordering::Acquire);
    (base != 0).then(|| (base, SLOT_COUNT.load(Ordering::Relaxed), os::page_size()))
}

/// The record of slot `index` (< the slot count).
fn slot(index: usize) -> &'static Slot {
    // SAFETY: the records mapping holds SLOT_COUNT records, never unmapped; all fields
    // are atomics.
    unsafe { &*SLOTS.load(Ordering::Relaxed).add(index) }
}

/// Where `addr` falls in the pool: `Some((page index from the first guard page))`.
#[inline]
fn pool_page(addr: usize) -> Option<usize> {
    let (base, slots, page) = pool()?;
    let offset = addr.wrapping_sub(base);
    (offset < (2 * slots + 1) * page).then_some(offset / page)
}

/// True if `ptr` lies in the guarded pool (a guarded block, or a bad pointer into it).
#[inline]
pub fn contains(ptr: *const u8) -> bool {
    pool_page(ptr as usize).is_some()
}

fn data_page(index: usize) -> usize {
    let (base, _, page) = pool().expect("pool");
    base + (2 * index + 1) * page
}

/// Take the free slot freed longest ago (never-used ones first); BUSY on return.
fn claim() -> Option<usize> {
    let (_, slots, _) = pool()?;
    loop {
        let mut best: Option<(usize, u64)> = None;
        for i in 0..slots {
            let s = slot(i);
            let state = s.state.load(Ordering::Relaxed);
            if state == EMPTY || state == FREED {
                let at = s.freed_at.load(Ordering::Relaxed);
                if best.map_or(true, |(_, b)| at < b) {
                    best = Some((i, at));
                }
            }
        }
        let (i, _) = best?;
        let s = slot(i);
        for from in [EMPTY, FREED] {
            if s.state
                .compare_exchange(from, BUSY, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return Some(i);
            }
        }
        // Another thread took it meanwhile: look again.
    }
}

/// Serve a guarded allocation of `size` bytes (of a class of `block_size`-byte blocks)
/// from the pool; null if the size is out of range or every slot is taken (the caller
/// then serves it as usual). `entry`: where the allocator was entered (the stack).
#[cold]
#[inline(never)]
pub fn alloc(size: usize, block_size: usize, entry: profile::Entry) -> *mut u8 {
    if size < MIN_SIZE.load(Ordering::Relaxed) || size > MAX_SIZE.load(Ordering::Relaxed) {
        return null_mut();
    }
    let Some(index) = claim() else {
        POOL_FULL.fetch_add(1, Ordering::Relaxed);
        return null_mut();
    };
    let s = slot(index);
    let page_size = os::page_size();
    let data = data_page(index);
    // SAFETY: the slot's data page is ours (BUSY) and inaccessible to everyone else.
    if !unsafe { os::protect(data as *mut u8, page_size, true) } {
        let back = if s.freed_at.load(Ordering::Relaxed) == 0 {
            EMPTY
        } else {
            FREED
        };
        s.state.store(back, Ordering::Release);
        return null_mut();
    }
    let size = size.max(1);
    // The alignment the class gives its blocks (16 for C's classes above 8 bytes), and
    // no more than a size that is a multiple of it needs.
    let floor = if block_size % 16 == 0 { 16 } else { 8 };
    let align = (size & size.wrapping_neg()).clamp(floor, page_size);
    let at_end = PLACEMENT
        .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
        .wrapping_mul(0xD6E8_FEB8_6659_FD93)
        >> 63
        == 1;
    let block = if at_end {
        (data + page_size - size) & !(align - 1)
    } else {
        data
    };
    // SAFETY: the page is ours and readable now. It holds what its last block left:
    // the block is zeroed (calloc relies on it), the rest is the pattern.
    unsafe {
        core::ptr::write_bytes(data as *mut u8, PATTERN, block - data);
        core::ptr::write_bytes(block as *mut u8, 0, size);
        let end = block + size;
        core::ptr::write_bytes(end as *mut u8, PATTERN, data + page_size - end);
    }
    s.block.store(block, Ordering::Relaxed);
    s.size.store(size, Ordering::Relaxed);
    record_stack(&s.alloc_stack, entry);
    for w in &s.free_stack {
        w.store(0, Ordering::Relaxed);
    }
    s.state.store(LIVE, Ordering::Release);
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    block as *mut u8
}

fn record_stack(out: &[AtomicUsize; STACK_WORDS], entry: profile::Entry) {
    let mut pcs = [0usize; profile::MAX_DEPTH];
    let depth = profile::capture(entry, &mut pcs).min(STACK_WORDS);
    for (i, w) in out.iter().enumerate() {
        w.store(if i < depth { pcs[i] } else { 0 }, Ordering::Relaxed);
    }
}

/// The slot whose data page holds `ptr`, if any.
fn slot_of(ptr: *const u8) -> Option<usize> {
    let page = pool_page(ptr as usize)?;
    (page % 2 == 1).then_some(page / 2)
}

/// Free `ptr` if it is in the pool (true: handled, reported if bad); false if it is
/// not (the caller goes on with the foreign-pointer policy). `entry`: for the free's
/// stack.
#[cold]
#[inline(never)]
pub fn free(ptr: *mut u8, entry: profile::Entry) -> bool {
    if !contains(ptr) {
        return false;
    }
    let Some(index) = slot_of(ptr) else {
        report_bad("free", ptr, "pointer into a guard page", None);
        return true;
    };
    let s = slot(index);
    match s
        .state
        .compare_exchange(LIVE, BUSY, Ordering::Acquire, Ordering::Relaxed)
    {
        Ok(_) => {}
        Err(FREED) | Err(BUSY) => {
            report_bad("free", ptr, "double free", Some(s));
            return true;
        }
        Err(_) => {
            report_bad("free", ptr, "pointer never allocated", None);
            return true;
        }
    }
    let block = s.block.load(Ordering::Relaxed);
    if ptr as usize != block {
        s.state.store(LIVE, Ordering::Release);
        report_bad("free", ptr, "not the start of a block", Some(s));
        return true;
    }
    if let Some(at) = pattern_damage(index, s) {
        // Reported, and aborted on unless EBB_ABORT_ON_ERROR=0 (then freed as usual).
        let what = if at < block {
            "underflow (a write before the block, found on free)"
        } else {
            "overflow (a write past the block, found on free)"
        };
        report_bad("free", at as *mut u8, what, Some(s));
    }
    record_stack(&s.free_stack, entry);
    let data = data_page(index) as *mut u8;
    let page_size = os::page_size();
    // SAFETY: the slot is ours (BUSY) and its block is being freed: nobody may touch
    // the page any more. A refused call leaves it readable (use after free then goes
    // unnoticed): safe. The page stays committed: the pool's memory is bounded by its
    // slot count anyway, and a decommit would cost a system call and a page fault per
    // guarded block.
    unsafe {
        os::protect(data, page_size, false);
    }
    s.freed_at.store(
        FREE_CLOCK.fetch_add(1, Ordering::Relaxed),
        Ordering::Relaxed,
    );
    s.state.store(FREED, Ordering::Release);
    true
}

/// The first byte around slot `index`'s live block that lost the pattern, if any.
fn pattern_damage(index: usize, s: &Slot) -> Option<usize> {
    let data = data_page(index);
    let end = data + os::page_size();
    let block = s.block.load(Ordering::Relaxed);
    let block_end = block + s.size.load(Ordering::Relaxed);
    first_mismatch(data, block).or_else(|| first_mismatch(block_end, end))
}

/// The first byte of `[from, to)` that is not `PATTERN` (compared a word at a time:
/// this runs on every free of a guarded block, over up to a page).
fn first_mismatch(from: usize, to: usize) -> Option<usize> {
    const WORD: usize = core::mem::size_of::<u64>();
    let pattern = u64::from_ne_bytes([PATTERN; WORD]);
    // SAFETY (all reads below): the range lies in a live slot's page, which is readable
    // until the free that calls this protects it.
    let byte = |a: usize| unsafe { (a as *const u8).read_volatile() };
    let mut at = from;
    while at < to && at % WORD != 0 {
        if byte(at) != PATTERN {
            return Some(at);
        }
        at += 1;
    }
    while at + WORD <= to {
        // SAFETY: as above; `at` is word aligned.
        if unsafe { (at as *const u64).read_volatile() } != pattern {
            break;
        }
        at += WORD;
    }
    (at..to).find(|&a| byte(a) != PATTERN)
}

/// The requested size of the live guarded block at `ptr`: `Some(None)` if `ptr` is in
/// the pool but no live block's start (reported as `function`'s bad pointer), None if
/// not in the pool.
pub fn live_size(ptr: *const u8, function: &str) -> Option<Option<usize>> {
    if !contains(ptr) {
        return None;
    }
    let found = slot_of(ptr).map(slot).filter(|s| {
        s.state.load(Ordering::Acquire) == LIVE && s.block.load(Ordering::Relaxed) == ptr as usize
    });
    match found {
        Some(s) => Some(Some(s.size.load(Ordering::Relaxed))),
        None => {
            let s = slot_of(ptr).map(slot);
            let what = match s.map(|s| s.state.load(Ordering::Acquire)) {
                Some(FREED) => "pointer to a freed block",
                Some(LIVE) => "not the start of a block",
                _ => "not a live block",
            };
            report_bad(function, ptr as *mut u8, what, s);
            Some(None)
        }
    }
}

/// Report a bad pointer given to `function` (`free(0x...): guarded: double free of a
/// 24-byte block at 0x...; allocated at ...`), then abort unless
/// `EBB_ABORT_ON_ERROR=0`.
#[cold]
fn report_bad(function: &str, ptr: *mut u8, what: &str, s: Option<&Slot>) {
    crate::counters::COUNTERS
        .invalid_frees
        .fetch_add(1, Ordering::Relaxed);
    let options = crate::options::get();
    if options.show_errors {
        let mut w = StderrWriter::new();
        let _ = write!(w, "ebb: {function}({ptr:p}): guarded: {what}");
        if let Some(s) = s {
            describe(&mut w, s, ptr as usize);
        }
        let _ = writeln!(
            w,
            "{}",
            if options.abort_on_error {
                "; aborting (EBB_ABORT_ON_ERROR=0 to go on)"
            } else {
                ""
            }
        );
    }
    if options.abort_on_error {
        os::abort();
    }
}

/// ` (offset 24 of a 24-byte block at 0x...); allocated at 0x... 0x...; freed at ...`
fn describe(w: &mut StderrWriter, s: &Slot, addr: usize) {
    let block = s.block.load(Ordering::Relaxed);
    let size = s.size.load(Ordering::Relaxed);
    let offset = addr as isize - block as isize;
    let _ = write!(w, " (offset {offset} of a {size}-byte block at {block:#x}");
    let plural = |n: isize| if n == 1 { "" } else { "s" };
    if offset >= size as isize {
        let past = offset - size as isize;
        let _ = write!(w, ", {past} byte{} past its end)", plural(past));
    } else if offset < 0 {
        let _ = write!(w, ", {} byte{} before its start)", -offset, plural(-offset));
    } else {
        let _ = write!(w, ")");
    }
    write_stack(w, "allocated at", &s.alloc_stack);
    write_stack(w, "freed at", &s.free_stack);
}

fn write_stack(w: &mut StderrWriter, label: &str, stack: &[AtomicUsize; STACK_WORDS]) {
    let words = stack.iter().map(|a| a.load(Ordering::Relaxed));
    if words.clone().all(|pc| pc == 0) {
        return;
    }
    let _ = write!(w, "; {label}");
    // The caller's return address (the candidates: one when ebb is libebb.so), then
    // the frame-pointer chain after a `|`.
    let mut separated = false;
    for pc in words.filter(|&pc| pc != 0) {
        if pc == profile::STACK_SEPARATOR {
            separated = true;
            continue;
        }
        if separated {
            let _ = write!(w, " |");
            separated = false;
        }
        let _ = write!(w, " {pc:#x}");
    }
}

/// The fault handler (`os::catch_faults`): a fault in the pool is reported (true: the
/// fault then ends the process); anything else is not ours (false).
fn on_fault(addr: usize) -> bool {
    let Some(page) = pool_page(addr) else {
        return false;
    };
    let slots = SLOT_COUNT.load(Ordering::Relaxed);
    let used = |i: usize| {
        let s = slot(i);
        matches!(s.state.load(Ordering::Acquire), LIVE | FREED).then_some(s)
    };
    // The block the access was meant for: the slot of the page, or for a guard page
    // the nearer of the blocks on either side.
    let target = (if page % 2 == 1 {
        used(page / 2).map(|s| (s, "access"))
    } else {
        let before = (page >= 2).then(|| page / 2 - 1).and_then(used).map(|s| {
            let end = s.block.load(Ordering::Relaxed) + s.size.load(Ordering::Relaxed);
            (s, addr - end.min(addr))
        });
        let after = (page / 2 < slots)
            .then_some(page / 2)
            .and_then(used)
            .map(|s| (s, s.block.load(Ordering::Relaxed).saturating_sub(addr)));
        match (before, after) {
            (Some((b, db)), Some((_, da))) if db <= da => Some((b, "overflow")),
            (_, Some((a, _))) => Some((a, "underflow")),
            (Some((b, _)), None) => Some((b, "overflow")),
            (None, None) => None,
        }
    })
    .map(|(s, kind)| {
        if s.state.load(Ordering::Relaxed) == FREED {
            (s, "use-after-free")
        } else {
            (s, kind)
        }
    });
    let mut w = StderrWriter::new();
    match target {
        Some((s, kind)) => {
            let _ = write!(w, "ebb: guarded: {kind} at {addr:#x}");
            describe(&mut w, s, addr);
        }
        None => {
            let _ = write!(
                w,
                "ebb: guarded: access to {addr:#x}, in the guarded pool but near no block"
            );
        }
    }
    let _ = writeln!(w);
    true
}

/// What the guarded pool holds and costs (`ebb::guarded_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GuardedStats {
    /// The mean allocations between guarded ones (0: guarded sampling is off).
    pub rate: u64,
    pub slots: usize,
    /// Slots holding a live block now.
    pub live: usize,
    /// Guarded allocations so far, and allocations that found every slot taken.
    pub allocations: u64,
    pub pool_full: u64,
    /// Address space of the pool and of its records.
    pub reserved_bytes: usize,
    /// Their memory resident now (`mincore`).
    pub resident_bytes: usize,
}

/// The pool's figures now.
pub fn stats() -> GuardedStats {
    let Some((base, slots, page)) = pool() else {
        return GuardedStats::default();
    };
    let live = (0..slots)
        .filter(|&i| slot(i).state.load(Ordering::Relaxed) == LIVE)
        .count();
    let resident = |start: usize, bytes: usize| {
        let mut total = 0;
        let mut flags = [0u8; 64];
        let mut at = start;
        while at < start + bytes {
            let len = (start + bytes - at).min(flags.len() * page);
            let n = len / page;
            if os::mincore(at as *const u8, len, &mut flags[..n]) {
                total += flags[..n].iter().filter(|&&f| f & 1 != 0).count() * page;
            }
            at += len;
        }
        total
    };
    let pool_bytes = POOL_BYTES.load(Ordering::Relaxed);
    let records = SLOTS_BYTES.load(Ordering::Relaxed);
    GuardedStats {
        rate: RATE.load(Ordering::Relaxed),
        slots,
        live,
        allocations: ALLOCATIONS.load(Ordering::Relaxed),
        pool_full: POOL_FULL.load(Ordering::Relaxed),
        reserved_bytes: pool_bytes + records,
        resident_bytes: resident(base, pool_bytes)
            + resident(SLOTS.load(Ordering::Relaxed) as usize, records),
    }
}
