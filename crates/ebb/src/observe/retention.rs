//! The retention report: why is RSS above what the program holds?
//!
//! It splits the process's RSS, as `/proc/self/smaps` gives it, into parts that add up
//! to it: inside ebb's memory each span's resident OS pages (`mincore`) go to what
//! they hold — live blocks first, then blocks freed by other threads, then free
//! blocks — and outside it each mapping's `Rss` goes to file-backed memory, stacks,
//! or anonymous memory ebb does not own, listed largest first. Residency inside a
//! page is known per OS page, not per block: a page's resident bytes are given to its
//! live blocks first, so "free blocks in pages that hold live blocks" is what stays
//! resident beyond them.
//!
//! Nothing here allocates; the report is a fixed-size value.

use super::smaps::{self, Mapping};
use super::{
    check_bitmap_of, for_each_ebb_window, free_slices_of, heaps_resident_in, huge_in_use, PageMap,
    SegmentResidency,
};
use crate::diag::StderrWriter;
use crate::size_class::{class_size, CLASS_COUNT};
use crate::span::arena;
use crate::span::page::{FREE, HUGE, LARGE, MARKER_LIMIT, THREAD_FREE_COUNT_SHIFT};
use crate::span::segment::{Segment, HEADER_BYTES, HEADER_SLICES, SLICES_PER_SEGMENT, SLICE_SIZE};
use core::fmt::Write;
use core::sync::atomic::{AtomicU32, Ordering};

/// Anonymous mappings not owned by ebb listed by address (the largest ones).
pub const FOREIGN_LISTED: usize = 16;
const FOREIGN_NAME_MAX: usize = 40;
/// Pages at most this full (live blocks / blocks that fit, as 1/N) count as sparse.
pub(super) const SPARSE_DIVISOR: u64 = 4;

/// Per size class: pages that hold live blocks, and what they keep resident.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassRetention {
    pub block_size: u64,
    /// Pages of the class holding at least one live block.
    pub pages: u64,
    pub live_blocks: u64,
    /// Resident OS pages in those pages.
    pub resident_os_pages: u64,
    /// Resident bytes in those pages beyond their live blocks (free blocks).
    pub free_resident: u64,
    /// Pages at most a quarter full, the resident OS pages they pin, and the live
    /// blocks pinning them.
    pub sparse_pages: u64,
    pub sparse_os_pages: u64,
    pub sparse_live_blocks: u64,
    /// Pages of the class holding no live block (a heap's current page kept for the
    /// next block, a page abandoned or freed into but not yet given back), and their
    /// resident bytes: the class's part of "free blocks in pages with no live block".
    pub empty_pages: u64,
    pub empty_resident: u64,
}

/// An anonymous mapping holding memory ebb does not own.
#[derive(Clone, Copy, Debug)]
pub struct ForeignMapping {
    pub start: usize,
    pub end: usize,
    /// Resident bytes in it that are not ebb's.
    pub resident: u64,
    name: [u8; FOREIGN_NAME_MAX],
    name_len: u8,
}

impl ForeignMapping {
    const EMPTY: ForeignMapping = ForeignMapping {
        start: 0,
        end: 0,
        resident: 0,
        name: [0; FOREIGN_NAME_MAX],
        name_len: 0,
    };

    /// The kernel's name for it (`[heap]`, `[anon:...]`), or empty.
    pub fn name(&self) -> &str {
        core::str::from_utf8(&self.name[..self.name_len as usize]).unwrap_or("")
    }
}

/// Where the process's resident memory is. Bytes are resident bytes unless said
/// otherwise; the parts from `live` to `other` add up to `rss` (up to the changes other
/// threads make while it is measured).
#[derive(Clone, Copy, Debug)]
pub struct Retention {
    /// When it was measured: milliseconds on the system's monotonic clock (coarse:
    /// within a timer tick), so reports of a series and samples another process took
    /// (`ebb run --breakdown`) line up.
    pub measured_at_ms: u64,
    /// Resident set of the process: the sum of `Rss` over `/proc/self/smaps`.
    pub rss: u64,
    /// Bytes of live blocks, resident or not (what the program holds, at block size).
    pub held: u64,
    // -- ebb's memory
    /// Resident bytes holding live blocks.
    pub live: u64,
    /// Page tails no block fits in, and resident pages of huge mappings past their
    /// block's requested size.
    pub rounding: u64,
    /// Free blocks in pages that still hold live blocks (see `classes`).
    pub free_in_live_pages: u64,
    /// Free blocks in pages that hold no live block (a thread's current page, or one
    /// not yet given back). `empty_stashed + empty_in_heaps + empty_abandoned`.
    pub free_in_empty_pages: u64,
    /// Of `free_in_empty_pages`: pages a heap's stash keeps for its next pages
    /// (`front/stash.rs`; their owner word is `FREE`).
    pub empty_stashed: u64,
    /// Of `free_in_empty_pages`: pages a heap owns, its current page of a class or one
    /// still in its queue (`front/empty_pages.rs` says which it keeps).
    pub empty_in_heaps: u64,
    /// Of `free_in_empty_pages`: pages no heap owns (abandoned by an exited or idle
    /// thread, or being drained), which the purger gives back after the delay.
    pub empty_abandoned: u64,
    /// Free spans whose purge delay has not passed.
    pub free_spans: u64,
    /// Freed huge mappings kept for reuse.
    pub huge_kept: u64,
    /// Blocks freed by other threads and not yet taken in by the page's owner.
    pub remote_freed: u64,
    /// Segment headers, heaps, check bitmaps, the segment map.
    pub metadata: u64,
    // -- not ebb's
    /// Anonymous memory ebb does not own, and in how many mappings.
    pub foreign_anon: u64,
    pub foreign_anon_mappings: u64,
    /// Anonymous mappings right above a guard page: thread stacks, most likely.
    pub thread_stacks: u64,
    /// The main thread's stack.
    pub stack: u64,
    /// File-backed memory: code, data, mapped files, shared memory.
    pub file_backed: u64,
    /// Anything else (`[vdso]`, `[vsyscall]`).
    pub other: u64,
    pub classes: [ClassRetention; CLASS_COUNT],
    /// The largest anonymous mappings with memory ebb does not own, largest first.
    pub foreign: [ForeignMapping; FOREIGN_LISTED],
    pub foreign_listed: usize,
}

impl Retention {
    /// The sum of the parts (compare with `rss`).
    pub fn parts_total(&self) -> u64 {
        self.ebb_total()
            + self.foreign_anon
            + self.thread_stacks
            + self.stack
            + self.file_backed
            + self.other
    }

    /// Resident bytes of ebb's own memory.
    pub fn ebb_total(&self) -> u64 {
        self.live
            + self.rounding
            + self.free_in_live_pages
            + self.free_in_empty_pages
            + self.free_spans
            + self.huge_kept
            + self.remote_freed
            + self.metadata
    }

    fn empty() -> Self {
        let mut r = Retention {
            measured_at_ms: 0,
            rss: 0,
            held: 0,
            live: 0,
            rounding: 0,
            free_in_live_pages: 0,
            free_in_empty_pages: 0,
            empty_stashed: 0,
            empty_in_heaps: 0,
            empty_abandoned: 0,
            free_spans: 0,
            huge_kept: 0,
            remote_freed: 0,
            metadata: 0,
            foreign_anon: 0,
            foreign_anon_mappings: 0,
            thread_stacks: 0,
            stack: 0,
            file_backed: 0,
            other: 0,
            classes: [ClassRetention::default(); CLASS_COUNT],
            foreign: [ForeignMapping::EMPTY; FOREIGN_LISTED],
            foreign_listed: 0,
        };
        for (i, c) in r.classes.iter_mut().enumerate() {
            c.block_size = class_size(i) as u64;
        }
        r
    }

    /// Count `bytes` of a page holding no live block, whose owner word is `owner`, in
    /// `free_in_empty_pages` and in the part its owner says.
    fn add_empty(&mut self, owner: usize, bytes: u64) {
        self.free_in_empty_pages += bytes;
        match owner {
            FREE => self.empty_stashed += bytes,
            _ if owner >= MARKER_LIMIT => self.empty_in_heaps += bytes,
            _ => self.empty_abandoned += bytes,
        }
        debug_assert_eq!(
            self.free_in_empty_pages,
            self.empty_stashed + self.empty_in_heaps + self.empty_abandoned
        );
    }

    /// Keep `m`'s foreign bytes if they are among the largest seen.
    fn list_foreign(&mut self, m: &Mapping, resident: u64) {
        let mut entry = ForeignMapping::EMPTY;
        entry.start = m.start;
        entry.end = m.end;
        entry.resident = resident;
        let name = m.name().as_bytes();
        let n = name.len().min(FOREIGN_NAME_MAX);
        entry.name[..n].copy_from_slice(&name[..n]);
        entry.name_len = n as u8;
        let listed = &mut self.foreign[..self.foreign_listed];
        let at = listed.iter().position(|f| f.resident < resident);
        match at {
            Some(at) => {
                let last = self.foreign_listed.min(FOREIGN_LISTED - 1);
                self.foreign.copy_within(at..last, at + 1);
                self.foreign[at] = entry;
                self.foreign_listed = (self.foreign_listed + 1).min(FOREIGN_LISTED);
            }
            None if self.foreign_listed < FOREIGN_LISTED => {
                self.foreign[self.foreign_listed] = entry;
                self.foreign_listed += 1;
            }
            None => {}
        }
    }
}

/// Measure. Costs a read of `/proc/self/pagemap` per segment and per mapping ebb
/// shares, and one read of `/proc/self/smaps`; changes no allocator state.
pub fn measure() -> Retention {
    let mut r = Retention::empty();
    r.measured_at_ms = crate::os::now_ms();
    let pagemap = PageMap::open();
    for seg in arena::segments() {
        segment_parts(&mut r, seg, &pagemap);
    }
    let kept = crate::span::huge::kept_mappings();
    for &(base, mapped) in kept.iter().filter(|k| k.0 != 0) {
        r.huge_kept += pagemap.resident_bytes(base, mapped);
    }
    let mut previous: Option<Mapping> = None;
    smaps::for_each_mapping(true, |m| {
        r.rss += m.rss;
        if m.is_stack() {
            r.stack += m.rss;
        } else if m.is_file() {
            r.file_backed += m.rss;
        } else if !m.is_anonymous() {
            r.other += m.rss;
        } else {
            let ebb_here = anonymous_parts(&mut r, m, &pagemap);
            let foreign = m.rss.saturating_sub(ebb_here);
            let after_guard = previous.is_some_and(|p| {
                p.is_inaccessible() && p.end == m.start && p.end - p.start <= 1 << 20
            });
            if foreign > 0 && ebb_here == 0 && after_guard && m.end - m.start <= 64 << 20 {
                r.thread_stacks += foreign;
            } else if foreign > 0 {
                r.foreign_anon += foreign;
                r.foreign_anon_mappings += 1;
                r.list_foreign(m, foreign);
            }
        }
        previous = Some(*m);
    });
    r
}

/// Resident bytes of kept huge pieces in `[start, end)` whose windows the segment map
/// does not know.
fn kept_outside_windows(pagemap: &PageMap, start: usize, end: usize) -> u64 {
    let window = crate::span::segment::SEGMENT_SIZE;
    let mut bytes = 0;
    for (base, len) in crate::span::huge::kept_mappings() {
        let (mut a, b) = (base.max(start), (base + len).min(end));
        while base != 0 && a < b {
            let next = ((a & !(window - 1)) + window).min(b);
            if crate::span::segment::segment_of(a as *const u8).is_null() {
                bytes += pagemap.resident_bytes(a, next - a);
            }
            a = next;
        }
    }
    bytes
}

/// Split one normal segment's resident pages.
fn segment_parts(r: &mut Retention, seg: *mut Segment, pagemap: &PageMap) {
    let res = SegmentResidency::measure(seg, pagemap);
    let free = free_slices_of(seg);
    let base = seg as usize;
    r.metadata += res.bytes(base, base + HEADER_BYTES);
    let page_size = crate::os::page_size() as u64;
    for i in HEADER_SLICES..SLICES_PER_SEGMENT {
        let slice = base + i * SLICE_SIZE;
        if free.get(i) {
            r.free_spans += res.bytes(slice, slice + SLICE_SIZE);
            continue;
        }
        // SAFETY: segments are never unmapped; the descriptor fields read are atomics
        // or written before the owner word is published (as in `stats::snapshot`).
        let page = unsafe { &(*seg).pages[i] };
        // SAFETY: as above.
        if !unsafe { (*seg).starts_span(i) } {
            continue;
        }
        let end = slice + page.span_bytes().max(SLICE_SIZE);
        let resident = res.bytes(slice, end);
        let owner = page.owner.load(Ordering::Acquire);
        let size = page.block_size() as u64;
        match owner {
            HUGE => {}
            FREE => r.add_empty(owner, resident),
            LARGE => {
                r.held += size;
                r.live += resident;
            }
            _ if size == 0 => r.add_empty(owner, resident),
            _ => {
                let used = page.used() as u64;
                let head = page.thread_free.load(Ordering::Relaxed) as usize;
                let remote = ((head >> THREAD_FREE_COUNT_SHIFT) as u64).min(used);
                let live_blocks = used - remote;
                let reserved = page.reserved as u64;
                let tail_start = slice + (reserved * size) as usize;
                let mut rest = resident;
                let tail = rest.min(res.bytes(tail_start, end));
                rest -= tail;
                let live = rest.min(live_blocks * size);
                rest -= live;
                let remote_bytes = rest.min(remote * size);
                rest -= remote_bytes;
                r.rounding += tail;
                r.live += live;
                r.remote_freed += remote_bytes;
                r.held += live_blocks * size;
                if live_blocks == 0 {
                    r.add_empty(owner, rest);
                    let class = &mut r.classes[page.class as usize % CLASS_COUNT];
                    class.empty_pages += 1;
                    class.empty_resident += rest;
                    continue;
                }
                r.free_in_live_pages += rest;
                let class = &mut r.classes[page.class as usize % CLASS_COUNT];
                let os_pages = resident / page_size;
                class.pages += 1;
                class.live_blocks += live_blocks;
                class.resident_os_pages += os_pages;
                class.free_resident += rest;
                if live_blocks * SPARSE_DIVISOR <= reserved {
                    class.sparse_pages += 1;
                    class.sparse_os_pages += os_pages;
                    class.sparse_live_blocks += live_blocks;
                }
            }
        }
    }
}

/// Account for ebb's memory inside anonymous mapping `m` that the segment walk did not
/// see (huge blocks, metadata outside segments) and return all of ebb's resident
/// bytes in it.
fn anonymous_parts(r: &mut Retention, m: &Mapping, pagemap: &PageMap) -> u64 {
    let mut ebb_here = 0;
    let page = crate::os::page_size();
    for_each_ebb_window(m.start, m.end, |seg, start, end| {
        let resident = pagemap.resident_bytes(start, end - start);
        ebb_here += resident;
        // A normal segment was walked already; a kept mapping is counted apart.
        let Some(huge) = huge_in_use(seg) else {
            return;
        };
        let base = seg as usize;
        let (offset, used) = (huge.offset, huge.used);
        let block = base + offset;
        let live_end = block + used.saturating_sub(page);
        let _ = resident;
        let clip = |a: usize, b: usize| {
            let (a, b) = (a.max(start), b.min(end));
            if a < b {
                pagemap.resident_bytes(a, b - a)
            } else {
                0
            }
        };
        let header = clip(base, block);
        let live = clip(block, live_end);
        r.metadata += header;
        r.live += live;
        r.rounding += clip(live_end.max(block), usize::MAX);
        if (start..end).contains(&block) {
            r.held += used.saturating_sub(page) as u64;
        }
    });
    // Kept huge pieces that start no segment (what a block left of a kept mapping,
    // `span/huge_pool.rs`) are in no window of the segment map, yet ebb's (`huge_kept`).
    ebb_here += kept_outside_windows(pagemap, m.start, m.end);
    let (map, map_len) = crate::span::segment::map_extent();
    let (a, b) = (map.max(m.start), (map + map_len).min(m.end));
    if a < b {
        let bytes = pagemap.resident_bytes(a & !(page - 1), b - (a & !(page - 1)));
        ebb_here += bytes;
        r.metadata += bytes;
    }
    let heaps = heaps_resident_in(pagemap, m.start, m.end);
    ebb_here += heaps;
    r.metadata += heaps;
    for seg in arena::segments() {
        if let Some((bits, len)) = check_bitmap_of(seg) {
            if m.start <= bits && bits < m.end {
                let bytes = pagemap.resident_bytes(bits, len);
                ebb_here += bytes;
                r.metadata += bytes;
            }
        }
    }
    ebb_here
}

/// Print the report to stderr.
pub fn print() {
    let mut w = StderrWriter::new();
    let _ = measure().write_to(&mut w);
}

/// Add the report to the file `EBB_REPORT` names (`%p`: the process id): JSON (one
/// object a line) if the path ends in `.json`, else text. Appended, not truncated: the
/// reports a signal asks for and the one at exit make a series, and a process holding
/// two ebb instances (a Rust program on ebb with `libebb.so` preloaded) keeps both.
/// Skipped silently if it cannot be opened. `trigger` says what asked for it.
pub fn write_report_file(trigger: Trigger) {
    let Some(template) = crate::os::getenv(b"EBB_REPORT\0") else {
        return;
    };
    let mut path = [0u8; 4096];
    let Some(len) = crate::diag::expand_pid(template, crate::os::process_id(), &mut path) else {
        return;
    };
    let Some(fd) = crate::os::append_file(&path[..=len]) else {
        return;
    };
    {
        let report = measure();
        let mut w = crate::diag::WholeWriter::to_fd(fd);
        if path[..len].ends_with(b".json") {
            let _ = report.write_json_from(&mut w, Some(trigger.name()));
            let _ = w.write_char('\n');
        } else {
            let _ = report.write_to(&mut w);
        }
    }
    crate::os::close_fd(fd);
}

/// What asked for a report in the `EBB_REPORT` file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// The process exiting (`atexit`).
    Exit,
    /// `EBB_REPORT_SIGNAL`.
    Signal,
}

impl Trigger {
    fn name(self) -> &'static str {
        match self {
            Trigger::Exit => "exit",
            Trigger::Signal => "signal",
        }
    }
}

extern "C" fn write_report_at_exit() {
    write_report_file(Trigger::Exit);
}

/// Bumped by the signal handler; the watcher thread writes a report per change.
pub(super) static SIGNALLED: AtomicU32 = AtomicU32::new(0);
/// `EBB_REPORT_SIGNAL`'s number, which the watcher takes (set before it starts; 0 where no
/// watcher was started).
static REPORT_SIGNAL: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_report_signal(signo: core::ffi::c_int) {
    // Only async-signal-safe work here: a report takes locks the interrupted thread
    // may hold, so a thread of its own writes it.
    SIGNALLED.fetch_add(1, Ordering::Release);
    crate::os::wake(&SIGNALLED, 1);
    // The process's other ebb instance, if it asked for this signal first.
    crate::os::pass_on_signal(signo);
}

extern "C" fn report_watcher(_: *mut core::ffi::c_void) -> *mut core::ffi::c_void {
    crate::os::name_thread(b"ebb-report\0");
    // A signal sent to this thread alone (`ebb run --breakdown` does so) leaves the
    // program's threads uninterrupted.
    crate::os::accept_signal(REPORT_SIGNAL.load(Ordering::Acquire) as core::ffi::c_int);
    let mut seen = SIGNALLED.load(Ordering::Acquire);
    loop {
        crate::os::wait(&SIGNALLED, seen, None);
        let now = SIGNALLED.load(Ordering::Acquire);
        if now != seen {
            seen = now;
            write_report_file(Trigger::Signal);
        }
    }
}

/// In a fork child: the watcher, if the parent ran one (the signal's handler came
/// with the fork; its thread did not).
pub fn restart_after_fork() {
    if REPORT_SIGNAL.load(Ordering::Acquire) != 0 {
        crate::os::spawn_detached(report_watcher, 256 << 10);
    }
}

/// Set up `EBB_REPORT` (at exit) and `EBB_REPORT_SIGNAL` (a report per signal, by a
/// thread started for it). Called once from process set-up.
pub fn register() {
    if crate::os::getenv(b"EBB_REPORT\0").is_none() {
        return;
    }
    crate::os::at_exit(write_report_at_exit);
    if let Some(signo) =
        crate::os::getenv(b"EBB_REPORT_SIGNAL\0").and_then(crate::os::signal_number)
    {
        // The handler first: a watcher thread named `ebb-report` promises a handler to
        // `ebb run`, which signals that thread alone (a signal before the watcher
        // waits only bumps the count it starts from).
        if crate::os::on_signal(signo, on_report_signal) {
            REPORT_SIGNAL.store(signo as u32, Ordering::Release);
            crate::os::spawn_detached(report_watcher, 256 << 10);
        }
    }
}
