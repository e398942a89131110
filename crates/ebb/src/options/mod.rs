//! Options, read once from `EBB_*` environment variables at first use.
//!
//! Parsing uses `getenv` and byte slices only: nothing here allocates, so options can be
//! read from inside `malloc`. `parse.rs` holds the value syntaxes every reader of an
//! `EBB_*` variable uses (here and elsewhere in the crate), `environment.rs` the list of
//! them all and the start-up warnings about values ebb ignores.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `EBB_PURGE_DELAY` | 500 | at most this long (ms, or a duration: `2s`) a free span stays committed before it goes back to the OS (0: at once); spans beyond what the program has been reusing go back after a quarter of it |
//! | `EBB_BACKGROUND` | 1 | purge from a background thread, so idle processes give memory back (`threads`: only once a second thread has allocated, for single-threaded programs heavy on `read`/`write`; 0: only inside allocator calls) |
//! | `EBB_SHOW_STATS` | 0 | print statistics to stderr at exit (`json`: as one JSON line) |
//! | `EBB_STATS_FILE` | unset | append statistics as a JSON line to this file at exit, one per ebb instance (`%p`: the process id); read at exit, not kept here |
//! | `EBB_SHOW_ERRORS` | 1 | report invalid and double frees on stderr |
//! | `EBB_CHECK` | 0 | check every free for invalid and double frees (slower; fixed at start) |
//! | `EBB_ABORT_ON_ERROR` | 0 | abort the process after reporting an error |
//! | `EBB_SHARED_START` | 1 | a thread's first blocks of a small class come from pages shared by all threads (`front/shared.rs`; 0: from its own pages at once) |
//! | `EBB_VECTORED_DECOMMIT` | 1 | the purger gives back many ranges in one `process_madvise` (`span/decommit_batch.rs`; 0: one `madvise` per range, for sandboxes that kill on unknown system calls) |
//! | `EBB_DENSE_HUGE_PAGES` | 1 | a segment filled densely with small-block pages gets its next untouched 2 MiB unit as one transparent huge page, and a new large block's untouched whole units are advised for huge pages until it is freed; so are fresh units, a new segment's first unit (one heap) and huge blocks' mappings (`span/large_pages.rs` "Dense growth", "Large blocks") |
//! | `EBB_LARGE_PAGES` | 0 | transparent huge pages: segments advised `MADV_HUGEPAGE`, purges that keep mostly used 2 MiB pages whole (`span/large_pages.rs`) |

mod environment;
mod parse;

pub use environment::{check_environment, Problem};
#[cfg(feature = "secure")]
pub use parse::parse_secure_level;
pub use parse::{parse_bool, parse_bytes, parse_duration_ms, parse_u64, trim};

use crate::os;
use core::sync::atomic::{AtomicU8, Ordering};

/// Why 500 ms: a span freed and re-used within half a second (a request, a build step,
/// a GC cycle) is reused still committed, paying no `madvise` and no page faults; a
/// process that stops using memory gives it back well within the one to two seconds
/// users notice, even counting the purger's batching.
pub const DEFAULT_PURGE_DELAY_MS: u64 = 500;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    pub purge_delay_ms: u64,
    pub background: bool,
    /// With `background`, start the purger in a process whose only thread allocates
    /// too (the default). `EBB_BACKGROUND=threads` clears it: a second thread, even
    /// asleep, makes every system call on a file descriptor and glibc's stdio take
    /// their multi-threaded paths (`process::purger`, "A single-threaded process"),
    /// which a program that makes millions of them and never idles may not want.
    pub background_alone: bool,
    pub show_stats: bool,
    /// With `show_stats`: print the exit report as one JSON line (`EBB_SHOW_STATS=json`).
    pub stats_json: bool,
    pub show_errors: bool,
    pub check: bool,
    /// Abort after reporting a corrupted heap: a double free, or a pointer that cannot
    /// be a block of any allocator (unmapped, unaligned, not a block start in ebb's
    /// memory). On by default; `EBB_ABORT_ON_ERROR=0` reports and goes on (unsafe: the
    /// program keeps running on a heap it damaged).
    pub abort_on_error: bool,
    /// Abort after reporting a pointer that may be another allocator's block (mapped,
    /// 16-byte aligned, outside ebb's memory: the dynamic loader's, say). Off by
    /// default (it is reported and left alone); `EBB_ABORT_ON_ERROR=1` turns it on.
    pub abort_on_foreign: bool,
    /// `EBB_LARGE_PAGES`: ask for transparent huge pages on segments made from now on,
    /// and purge free slices only out of 2 MiB ranges that are mostly free.
    pub large_pages: bool,
    /// `EBB_DENSE_HUGE_PAGES` (on by default; `=0` turns it off): when small-block
    /// pages fill a segment's 2 MiB unit at the fill front, fault the next, untouched
    /// unit in as one huge page, and advise the untouched units inside a new large
    /// block for huge pages until it is freed; and past lower floors a fresh unit a
    /// small page enters first, a new segment's unit 0 (one heap) and a new huge
    /// block's mapping (`span/large_pages.rs` "Dense growth", "Large blocks").
    pub dense_huge_pages: bool,
    /// `EBB_SHARED_START`: serve a thread's first blocks of each small class from
    /// pages all threads share (`front/shared.rs`), fixed for a heap when it is made.
    pub shared_start: bool,
    /// `EBB_VECTORED_DECOMMIT`: decommit a purge pass's ranges with one `process_madvise`
    /// where the kernel has it (`span::decommit_batch`); off: one `madvise` per range.
    pub vectored_decommit: bool,
    /// `EBB_MAPPING_BUDGET`: page moves pause while the process has more kernel
    /// mappings than this (`span/move_budget.rs`); 0 (the default): a quarter of the
    /// OS's limit.
    pub mapping_budget: u64,
}

impl Options {
    pub const DEFAULT: Options = Options {
        purge_delay_ms: DEFAULT_PURGE_DELAY_MS,
        background: true,
        background_alone: true,
        show_stats: false,
        stats_json: false,
        show_errors: true,
        check: false,
        abort_on_error: true,
        abort_on_foreign: false,
        large_pages: false,
        dense_huge_pages: true,
        shared_start: true,
        vectored_decommit: true,
        mapping_budget: 0,
    };

    /// Build options from a lookup function (the environment, or a test's table).
    pub fn from_lookup(lookup: impl Fn(&[u8]) -> Option<&'static [u8]>) -> Options {
        let mut o = Options::DEFAULT;
        if let Some(v) = lookup(b"EBB_PURGE_DELAY\0").and_then(parse_duration_ms) {
            o.purge_delay_ms = v;
        }
        if let Some(text) = lookup(b"EBB_BACKGROUND\0") {
            if trim(text).eq_ignore_ascii_case(b"threads") {
                o.background = true;
                o.background_alone = false;
            } else if let Some(v) = parse_bool(text) {
                o.background = v;
                o.background_alone = true;
            }
        }
        if let Some(text) = lookup(b"EBB_SHOW_STATS\0") {
            if trim(text).eq_ignore_ascii_case(b"json") {
                o.show_stats = true;
                o.stats_json = true;
            } else if let Some(v) = parse_bool(text) {
                o.show_stats = v;
            }
        }
        if let Some(v) = lookup(b"EBB_SHOW_ERRORS\0").and_then(parse_bool) {
            o.show_errors = v;
        }
        if let Some(v) = lookup(b"EBB_CHECK\0").and_then(parse_bool) {
            o.check = v;
        }
        if let Some(v) = lookup(b"EBB_ABORT_ON_ERROR\0").and_then(parse_bool) {
            // The secure build always aborts on a corrupted heap (README "Security").
            o.abort_on_error = v || cfg!(feature = "secure");
            o.abort_on_foreign = v;
        }
        if let Some(v) = lookup(b"EBB_LARGE_PAGES\0").and_then(parse_bool) {
            o.large_pages = v;
        }
        if let Some(v) = lookup(b"EBB_DENSE_HUGE_PAGES\0").and_then(parse_bool) {
            o.dense_huge_pages = v;
        }
        if let Some(v) = lookup(b"EBB_SHARED_START\0").and_then(parse_bool) {
            o.shared_start = v;
        }
        if let Some(v) = lookup(b"EBB_VECTORED_DECOMMIT\0").and_then(parse_bool) {
            o.vectored_decommit = v;
        }
        if let Some(v) = lookup(b"EBB_MAPPING_BUDGET\0").and_then(parse_u64) {
            o.mapping_budget = v;
        }
        o
    }
}

struct OptionCell(core::cell::UnsafeCell<Options>);
// SAFETY: written once by the thread that wins STATE (NONE -> BUSY), read only after
// STATE is READY (Acquire), or later through `set` which tolerates torn reads of
// independent plain fields.
unsafe impl Sync for OptionCell {}

static OPTIONS: OptionCell = OptionCell(core::cell::UnsafeCell::new(Options::DEFAULT));
static STATE: AtomicU8 = AtomicU8::new(0);

/// The process's options, read from the environment on first call.
#[inline]
pub fn get() -> &'static Options {
    if STATE.load(Ordering::Acquire) != 2 {
        load();
    }
    // SAFETY: STATE is READY, so the cell is initialised and no longer written by `load`.
    unsafe { &*OPTIONS.0.get() }
}

#[cold]
fn load() {
    if STATE
        .compare_exchange(0, 1, Ordering::Acquire, Ordering::Acquire)
        .is_ok()
    {
        let options = Options::from_lookup(os::getenv);
        // SAFETY: we won the race to initialise; readers wait for READY.
        unsafe { *OPTIONS.0.get() = options };
        STATE.store(2, Ordering::Release);
    } else {
        while STATE.load(Ordering::Acquire) != 2 {
            core::hint::spin_loop();
        }
    }
}

/// Replace the options at run time (the C API's `ebb_option_set`, and tests). `check`
/// keeps the value the process started with: check mode records every allocation
/// (`check.rs`), so it cannot start or stop halfway.
pub fn set(mut options: Options) {
    options.check = get().check;
    // SAFETY: a plain store of Copy fields; concurrent readers see the old or new value
    // of each field, both valid.
    unsafe { core::ptr::write_volatile(OPTIONS.0.get(), options) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_stats_json() {
        let o = Options::from_lookup(|name| match name {
            b"EBB_SHOW_STATS\0" => Some(b" JSON "),
            _ => None,
        });
        assert!(o.show_stats && o.stats_json);
        let o = Options::from_lookup(|name| match name {
            b"EBB_SHOW_STATS\0" => Some(b"1"),
            _ => None,
        });
        assert!(o.show_stats && !o.stats_json);
    }

    #[test]
    fn reads_from_lookup() {
        let o = Options::from_lookup(|name| match name {
            b"EBB_PURGE_DELAY\0" => Some(b"0"),
            b"EBB_BACKGROUND\0" => Some(b"0"),
            b"EBB_SHOW_STATS\0" => Some(b"true"),
            b"EBB_CHECK\0" => Some(b"nonsense"),
            b"EBB_LARGE_PAGES\0" => Some(b"on"),
            b"EBB_MAPPING_BUDGET\0" => Some(b"5000"),
            _ => None,
        });
        assert!(o.large_pages);
        assert_eq!(o.mapping_budget, 5000);
        assert_eq!(o.purge_delay_ms, 0);
        assert!(!o.background);
        assert!(o.show_stats);
        let threads = Options::from_lookup(|name| match name {
            b"EBB_BACKGROUND\0" => Some(b" Threads"),
            _ => None,
        });
        assert!(threads.background && !threads.background_alone);
        let on = Options::from_lookup(|name| match name {
            b"EBB_BACKGROUND\0" => Some(b"1"),
            _ => None,
        });
        assert!(on.background && on.background_alone);
        assert!(!o.check, "unparsable values keep the default");
        assert_eq!(Options::from_lookup(|_| None), Options::DEFAULT);
    }
}
