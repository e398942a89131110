//! The sampling heap profiler: off by default; `EBB_PROFILE=<prefix>` starts it at
//! process start, or [`start`] at any time.
//!
//! - `sampler`: sample points, how the slow path stops the fast path at them, how a
//!   sampled block is served and its free credited (the hooks in `front/slow.rs`,
//!   `front/alloc.rs` and `front/free.rs`);
//! - `stack`: the stack of a sample (frame-pointer walk, no allocation, no lock);
//! - `table`: the records (stacks with estimated totals, live sampled blocks);
//! - `peak`: a copy of the records taken when the live estimate peaks;
//! - `maps`: executable mappings from `/proc/self/maps`;
//! - `math`: `ln` and `1 - exp(-x)` without `std`;
//! - this file: start/stop/dump, the environment, the raw text format, and the
//!   encoder an upper layer may register (`ebb-pprof` writes pprof's `.pb.gz`).
//!
//! Environment (read when the process sets up, see README "Find a leak"):
//! `EBB_PROFILE=<prefix>` profile from the start and write `<prefix>.<pid>.pb.gz`
//! (`.raw` without an encoder) at exit; `EBB_PROFILE_RATE=<bytes>` mean interval
//! between samples (default 512 KiB; `k`/`m` suffixes); `EBB_PROFILE_SIGNAL=<signal>`
//! write `<prefix>.<pid>.<n>.pb.gz` on each signal (a thread of its own writes it);
//! at exit and on each signal, `<prefix>.<pid>.peak.pb.gz` holds what was live at the
//! peak; `EBB_PROFILE_INTERVAL=<duration>` (`500ms`, `10s`, `5m`; bare digits are ms)
//! the same thread writes the next `<prefix>.<pid>.<n>.pb.gz` every interval in which
//! the profile changed (a series over time: which site keeps growing);
//! `EBB_PROFILE_LEAKS=1` the exit profile holds only blocks still live;
//! `EBB_PROFILE_SEED=<n>` fix the sample points (tests).

mod code;
mod handout;
mod maps;
mod math;
mod peak;
mod sampler;
mod stack;
mod table;

pub(crate) use code::refresh_executable_ranges;
pub(crate) use handout::{end_list_at, free_blocks, lengths};
pub use peak::peak;
pub(crate) use sampler::HeapSampler;
pub(crate) use sampler::{
    big_allocated, blocks_before, charge, charge_if_fits, cut, fits, freed, in_step,
    keep_sampled_span, moved, record_sampled, resized, sample_point, samples, serve_sampled,
    span_released, sync,
};
pub(crate) use stack::capture;
pub(crate) use stack::Entry;
pub use stack::SEPARATOR as STACK_SEPARATOR;
pub use table::MAX_DEPTH;

/// How many allocations one sample of a `size`-byte block stands for at a mean of
/// `rate` bytes between samples: `1 / (1 - exp(-size/rate))` (every byte is a sample
/// point with probability `1/rate`). The one definition: `ebb-pprof` scales a raw
/// profile's samples with it too, so `libebb.so` needs no `libm` for `exp`.
pub fn sample_weight(size: usize, rate: u64) -> f64 {
    math::sample_weight(size, rate)
}

use crate::diag::StderrWriter;
use crate::os;
use core::ffi::CStr;
use core::fmt::Write;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Mean bytes between samples unless told otherwise.
pub const DEFAULT_RATE: u64 = 512 << 10;

/// Sampling is on (heaps pick a change up on their next malloc slow path, via `EPOCH`).
pub(crate) static ACTIVE: AtomicBool = AtomicBool::new(false);
pub(crate) static EPOCH: AtomicU32 = AtomicU32::new(0);
pub(crate) static RATE: AtomicU64 = AtomicU64::new(DEFAULT_RATE);
pub(crate) static SEED: AtomicU64 = AtomicU64::new(0x5EED_EBB0);

/// Start sampling with a mean of `rate` bytes between samples (0: the default, or
/// `EBB_PROFILE_RATE`). Samples already taken are kept. False if the record tables
/// could not be mapped.
pub fn start(rate: u64) -> bool {
    if !table::tables_or_make() || !peak::make() {
        return false;
    }
    code::refresh_executable_ranges();
    let rate = if rate != 0 {
        rate
    } else {
        env_rate().unwrap_or(DEFAULT_RATE)
    };
    RATE.store(rate, Ordering::SeqCst);
    sampler::reset_weights();
    sampler::reset_big();
    ACTIVE.store(true, Ordering::Relaxed);
    EPOCH.fetch_add(1, Ordering::Release);
    true
}

/// Stop sampling. What was sampled stays (a later [`dump`] writes it) and frees of
/// sampled blocks are still credited.
pub fn stop() {
    ACTIVE.store(false, Ordering::Relaxed);
    EPOCH.fetch_add(1, Ordering::Release);
    sampler::release_kept_spans();
}

/// True while sampling.
pub fn is_active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// The mean sampling interval in bytes.
pub fn rate() -> u64 {
    RATE.load(Ordering::Relaxed)
}

/// Capture the calling thread's stack as a sample would (benchmarks: the cost of a
/// capture, `scripts/bench-profile.sh`); returns the depth written into `out`.
#[doc(hidden)]
#[inline(never)]
pub fn capture_here(out: &mut [usize; MAX_DEPTH]) -> usize {
    let marker = 0u8;
    stack::capture(stack::Entry::here(&marker), out)
}

/// The estimated bytes of the sampled blocks live now (what [`peak`] follows).
pub fn live_bytes() -> u64 {
    table::live_bytes()
}

/// Samples that found no room in the record tables (0 unless tens of thousands of
/// distinct stacks or live samples).
pub fn dropped() -> u64 {
    table::DROPPED.load(Ordering::Relaxed)
}

/// The records of one call stack.
#[derive(Clone, Copy, Debug)]
pub struct Site<'a> {
    /// Return addresses, innermost first (the allocator's own frames included when it
    /// was built with frame pointers: encoders drop them by name).
    pub stack: &'a [usize],
    /// Estimated allocations and bytes made at this stack since profiling started.
    pub alloc_objects: u64,
    pub alloc_bytes: u64,
    /// Estimated blocks and bytes still live.
    pub inuse_objects: u64,
    pub inuse_bytes: u64,
    /// Samples behind the estimates, and those still live.
    pub samples: u64,
    pub live_samples: u64,
}

/// Which blocks a profile holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// Everything sampled since profiling started: allocated, and of that, live now.
    All,
    /// Only the stacks with blocks live now, their allocation values set to the live
    /// ones (`EBB_PROFILE_LEAKS`).
    Live,
    /// What was live when the live estimate peaked (within 1/16, see [`peak`]): the
    /// stacks with blocks live then, with what they had allocated up to then.
    Peak,
}

/// Call `f` for every stack sampled so far (any thread, any time; no allocation).
pub fn for_each_site(f: impl FnMut(&Site)) {
    for_each_site_in(View::All, f)
}

/// Call `f` for every stack of `view` (any thread, any time; no allocation).
pub fn for_each_site_in(view: View, mut f: impl FnMut(&Site)) {
    let mut emit = |stack: &[usize], [samples, freed_samples, alloc_objects, alloc_bytes, freed_objects, freed_bytes]: [u64; 6]| {
        let scale = table::OBJECT_SCALE;
        let inuse_objects = (alloc_objects.saturating_sub(freed_objects) + scale / 2) / scale;
        let inuse_bytes = alloc_bytes.saturating_sub(freed_bytes);
        let live_samples = samples.saturating_sub(freed_samples);
        let (alloc_objects, alloc_bytes) = match view {
            View::All | View::Peak => ((alloc_objects + scale / 2) / scale, alloc_bytes),
            View::Live => (inuse_objects, inuse_bytes),
        };
        if view != View::All && live_samples == 0 {
            return;
        }
        f(&Site {
            stack,
            alloc_objects,
            alloc_bytes,
            inuse_objects,
            inuse_bytes,
            samples,
            live_samples,
        })
    };
    if view == View::Peak {
        peak::for_each_record(|b, counters| emit(b.stack(), counters));
        return;
    }
    table::for_each_bucket(|b| emit(b.stack(), b.counters()));
}

/// Writes the profile of `view` ([`for_each_site_in`]) to `path`. Registered by an
/// upper layer ([`set_encoder`]); may allocate (it runs at exit, on the signal
/// thread, or in [`dump`], never inside an allocation).
pub type Encoder = fn(path: &CStr, view: View) -> bool;

static ENCODER: AtomicUsize = AtomicUsize::new(0);

/// Register the function that writes profiles (`ebb-pprof` registers its pprof
/// writer; `libebb.so` does so when it loads). Without one, profiles are written in
/// the raw text format, which `ebb-pprof symbolize` turns into pprof.
pub fn set_encoder(encoder: Encoder) {
    ENCODER.store(encoder as usize, Ordering::Release);
}

fn encoder() -> Option<Encoder> {
    let f = ENCODER.load(Ordering::Acquire);
    // SAFETY: only `set_encoder` stores here, from a value of type `Encoder`.
    (f != 0).then(|| unsafe { core::mem::transmute::<usize, Encoder>(f) })
}

/// True if profiles are written as pprof (an encoder is registered).
pub fn writes_pprof() -> bool {
    encoder().is_some()
}

/// Write everything sampled so far to `path`: pprof's gzipped protobuf if an encoder
/// is registered, else the raw text format. False if it could not be written.
pub fn dump(path: &str) -> bool {
    dump_view(path, View::All)
}

/// [`dump`] of what was live at the peak so far ([`View::Peak`]).
pub fn dump_peak(path: &str) -> bool {
    dump_view(path, View::Peak)
}

fn dump_view(path: &str, view: View) -> bool {
    let mut buf = [0u8; 4096];
    if path.len() >= buf.len() || path.as_bytes().contains(&0) {
        return false;
    }
    buf[..path.len()].copy_from_slice(path.as_bytes());
    let Ok(path) = CStr::from_bytes_with_nul(&buf[..path.len() + 1]) else {
        return false;
    };
    dump_to(path, view)
}

/// [`dump`] of `view` to a NUL-terminated path.
pub fn dump_to(path: &CStr, view: View) -> bool {
    if !table::tables_or_make() {
        return false;
    }
    code::refresh_executable_ranges();
    // The encoder allocates (symbols, the protobuf): those are not the program's.
    let previous = WRITER.swap(stack::thread_pointer(), Ordering::AcqRel);
    let written = match encoder() {
        Some(encode) => encode(path, view),
        None => write_raw(path, view),
    };
    WRITER.store(previous, Ordering::Release);
    written
}

/// The thread writing a profile (its thread pointer), whose samples are not recorded.
static WRITER: AtomicUsize = AtomicUsize::new(0);

/// True if the calling thread is writing a profile.
pub(crate) fn is_writer() -> bool {
    WRITER.load(Ordering::Relaxed) == stack::thread_pointer()
}

/// The raw text format (version 2; `crates/ebb-pprof` parses it):
/// ```text
/// ebb-heap-raw 2
/// rate <mean sampling interval in bytes>
/// map <start hex> <end hex> <file offset hex> <path>        (executable mappings)
/// b <alloc objects> <alloc bytes> <in-use objects> <in-use bytes> <pc hex>...
/// end
/// ```
/// Each `b` line is a call stack (innermost first) with the estimated totals; `end`
/// says the file is whole (a reader may find it while it is being written).
pub fn write_raw(path: &CStr, view: View) -> bool {
    let Some(fd) = os::create_file(path.to_bytes_with_nul()) else {
        return false;
    };
    {
        let mut w = StderrWriter::to_fd(fd);
        let _ = write!(w, "ebb-heap-raw 2\nrate {}\n", rate());
        maps::for_each_executable(|start, end, offset, path| {
            if path.first() == Some(&b'/') {
                let _ = write!(w, "map {start:x} {end:x} {offset:x} ");
                let _ = w.write_str(core::str::from_utf8(path).unwrap_or("?"));
                let _ = w.write_char('\n');
            }
        });
        for_each_site_in(view, |s| {
            let _ = write!(
                w,
                "b {} {} {} {}",
                s.alloc_objects, s.alloc_bytes, s.inuse_objects, s.inuse_bytes
            );
            for pc in s.stack {
                let _ = write!(w, " {pc:x}");
            }
            let _ = w.write_char('\n');
        });
        let _ = w.write_str("end\n");
    }
    os::close_fd(fd);
    true
}

// ---------------------------------------------------------------------------------
// The environment: EBB_PROFILE and friends

static PREFIX: AtomicUsize = AtomicUsize::new(0);
static PREFIX_LEN: AtomicUsize = AtomicUsize::new(0);
static LEAKS: AtomicBool = AtomicBool::new(false);
static SIGNALLED: AtomicU32 = AtomicU32::new(0);
/// `EBB_PROFILE_SIGNAL`'s number, which the watcher takes (set before it starts; 0
/// where the watcher takes no signal).
static PROFILE_SIGNAL: AtomicU32 = AtomicU32::new(0);
/// `EBB_PROFILE_INTERVAL` in ms (0: no profiles on a timer).
static INTERVAL_MS: AtomicU64 = AtomicU64::new(0);
/// A watcher thread runs (or must be started again in a fork child).
static WATCHING: AtomicBool = AtomicBool::new(false);

/// The shortest `EBB_PROFILE_INTERVAL`: each profile is a whole pprof file (the
/// symbolization of every stack and a gzip), tens of milliseconds for a big program.
pub const MIN_INTERVAL_MS: u64 = 10;

/// `EBB_PROFILE_INTERVAL` in ms: a duration (`options::parse_duration_ms`) above zero,
/// raised to [`MIN_INTERVAL_MS`]. None if it does not parse or is zero.
pub fn parse_interval_ms(text: &[u8]) -> Option<u64> {
    crate::options::parse_duration_ms(text)
        .filter(|&v| v > 0)
        .map(|v| v.max(MIN_INTERVAL_MS))
}

fn env_rate() -> Option<u64> {
    os::getenv(b"EBB_PROFILE_RATE\0").and_then(crate::options::parse_bytes)
}

/// What a profile file is named after: the exit, its place among the watcher's profiles
/// (on a signal or a timer, numbered from 1), or the peak.
#[derive(Clone, Copy)]
enum Written {
    AtExit,
    Numbered(u32),
    Peak,
}

/// `<prefix>.<pid>[.<n>|.peak].pb.gz` (or `.raw`) into `out`, NUL-terminated.
fn profile_path(written: Written, out: &mut [u8; 4096]) -> Option<&CStr> {
    let start = PREFIX.load(Ordering::Acquire);
    let len = PREFIX_LEN.load(Ordering::Acquire);
    if start == 0 {
        return None;
    }
    // SAFETY: the prefix is an environment string (lives for the process).
    let prefix = unsafe { core::slice::from_raw_parts(start as *const u8, len) };
    let mut w = SliceWriter::new(&mut out[..]);
    let _ = w.write_str(core::str::from_utf8(prefix).ok()?);
    let _ = write!(w, ".{}", os::process_id());
    match written {
        Written::AtExit => {}
        Written::Numbered(n) => {
            let _ = write!(w, ".{n}");
        }
        Written::Peak => {
            let _ = w.write_str(".peak");
        }
    }
    let _ = w.write_str(if encoder().is_some() {
        ".pb.gz\0"
    } else {
        ".raw\0"
    });
    let n = w.len();
    if w.overflowed() {
        return None;
    }
    CStr::from_bytes_with_nul(&out[..n]).ok()
}

extern "C" fn dump_at_exit() {
    let mut buf = [0u8; 4096];
    if let Some(path) = profile_path(Written::AtExit, &mut buf) {
        stop();
        let view = if LEAKS.load(Ordering::Relaxed) {
            View::Live
        } else {
            View::All
        };
        if !dump_to(path, view) {
            let _ = writeln!(
                StderrWriter::new(),
                "ebb: cannot write the heap profile {path:?}"
            );
        }
        dump_peak_file();
    }
}

/// `<prefix>.<pid>.peak.pb.gz`, replaced: what was live at the peak so far.
fn dump_peak_file() {
    let mut buf = [0u8; 4096];
    if peak::peak().is_some() {
        if let Some(path) = profile_path(Written::Peak, &mut buf) {
            dump_to(path, View::Peak);
        }
    }
}

extern "C" fn on_profile_signal(signo: core::ffi::c_int) {
    // Only async-signal-safe work here: the dump takes locks and may allocate.
    SIGNALLED.fetch_add(1, Ordering::Release);
    os::wake(&SIGNALLED, 1);
    // The process's other ebb instance, if it asked for this signal first.
    os::pass_on_signal(signo);
}

/// The `ebb-profile` thread: a sequence profile on each `EBB_PROFILE_SIGNAL` and, with
/// `EBB_PROFILE_INTERVAL`, at the end of each interval in which the profile changed.
extern "C" fn profile_watcher(_: *mut core::ffi::c_void) -> *mut core::ffi::c_void {
    os::name_thread(b"ebb-profile\0");
    let signo = PROFILE_SIGNAL.load(Ordering::Acquire);
    if signo != 0 {
        // A signal sent to this thread alone (`ebb run --profile` does so) leaves the
        // program's threads uninterrupted.
        os::accept_signal(signo as core::ffi::c_int);
    }
    let interval = INTERVAL_MS.load(Ordering::Acquire);
    let mut due = os::now_ms().saturating_add(interval);
    let mut seen = SIGNALLED.load(Ordering::Acquire);
    // What the last profile held (`table::changes`): an interval that changed nothing
    // writes nothing, so an idle server does not fill its disk with copies. At first,
    // nothing sampled: a fork child's first interval writes what it inherited and did
    // before this thread started (its first slow path starts it).
    let mut written = table::NOTHING_SAMPLED;
    let mut sequence = 0;
    loop {
        let timeout = (interval != 0).then(|| due.saturating_sub(os::now_ms()).max(1));
        os::wait(&SIGNALLED, seen, timeout);
        let now = SIGNALLED.load(Ordering::Acquire);
        let signalled = now != seen;
        seen = now;
        let mut timed = false;
        if interval != 0 && os::now_ms() >= due {
            // The next end of an interval from now: a late wake-up (a stopped process)
            // writes one profile, not one for each interval it missed.
            due = os::now_ms().saturating_add(interval);
            timed = table::changes() != written;
        }
        if !(signalled || timed) {
            continue;
        }
        sequence += 1;
        written = table::changes();
        let mut buf = [0u8; 4096];
        if let Some(path) = profile_path(Written::Numbered(sequence), &mut buf) {
            // The peak first: a reader that finds the sequence profile whole (`ebb run`
            // before it stops the tree) finds the peak's too.
            dump_peak_file();
            dump_to(path, View::All);
        }
    }
}

/// `EBB_PROFILE` and friends, once, right after the process set-up.
pub fn register_from_env() {
    let Some(prefix) = os::getenv(b"EBB_PROFILE\0") else {
        return;
    };
    if prefix.is_empty() {
        return;
    }
    PREFIX_LEN.store(prefix.len(), Ordering::Release);
    PREFIX.store(prefix.as_ptr() as usize, Ordering::Release);
    if let Some(seed) = os::getenv(b"EBB_PROFILE_SEED\0").and_then(crate::options::parse_u64) {
        SEED.store(seed, Ordering::Relaxed);
    } else {
        SEED.store(os::process_id() ^ os::now_ms(), Ordering::Relaxed);
    }
    if let Some(leaks) = os::getenv(b"EBB_PROFILE_LEAKS\0").and_then(crate::options::parse_bool) {
        LEAKS.store(leaks, Ordering::Relaxed);
    }
    if !start(0) {
        return;
    }
    os::at_exit(dump_at_exit);
    // The watcher writes whole profiles: symbolization and gzip (miniz_oxide's
    // compressor state, hundreds of KiB, is built on the stack unless the optimiser places
    // it in its box; 256 KiB overflowed in an unoptimised build). Address space
    // only: what the dump does not touch never becomes resident.
    if let Some(signo) = os::getenv(b"EBB_PROFILE_SIGNAL\0").and_then(os::signal_number) {
        // The handler first: a watcher named `ebb-profile` promises one to `ebb run`,
        // which signals that thread alone.
        if os::on_signal(signo, on_profile_signal) {
            PROFILE_SIGNAL.store(signo as u32, Ordering::Release);
        }
    }
    if let Some(ms) = os::getenv(b"EBB_PROFILE_INTERVAL\0").and_then(parse_interval_ms) {
        INTERVAL_MS.store(ms, Ordering::Release);
    }
    if PROFILE_SIGNAL.load(Ordering::Acquire) != 0 || INTERVAL_MS.load(Ordering::Acquire) != 0 {
        WATCHING.store(true, Ordering::Release);
        os::spawn_detached(profile_watcher, WATCHER_STACK_BYTES);
    }
}

/// In a fork child: the watcher, if the parent ran one (the handler came with the
/// fork; its thread did not), and a peak of its own. The child's profiles carry its own
/// process id (and its sequence starts at 1).
pub fn restart_after_fork() {
    peak::after_fork();
    if WATCHING.load(Ordering::Acquire) {
        os::spawn_detached(profile_watcher, WATCHER_STACK_BYTES);
    }
}

/// The profile-signal watcher's stack (see `register_from_env`).
const WATCHER_STACK_BYTES: usize = 4 << 20;

/// Formats into a byte slice (no allocation); remembers whether it ran out of room.
struct SliceWriter<'a> {
    buf: &'a mut [u8],
    len: usize,
    overflowed: bool,
}

impl<'a> SliceWriter<'a> {
    fn new(buf: &'a mut [u8]) -> Self {
        SliceWriter {
            buf,
            len: 0,
            overflowed: false,
        }
    }
    fn len(&self) -> usize {
        self.len
    }
    fn overflowed(&self) -> bool {
        self.overflowed
    }
}

impl Write for SliceWriter<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        self.overflowed |= n < s.len();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_read_with_units_bare_digits_as_milliseconds() {
        assert_eq!(parse_interval_ms(b"250"), Some(250));
        assert_eq!(parse_interval_ms(b"250ms"), Some(250));
        assert_eq!(parse_interval_ms(b" 10s "), Some(10_000));
        assert_eq!(parse_interval_ms(b"5m"), Some(300_000));
        assert_eq!(parse_interval_ms(b"1h"), Some(3_600_000));
        assert_eq!(
            parse_interval_ms(b"1"),
            Some(MIN_INTERVAL_MS),
            "raised to the floor"
        );
        for bad in [
            &b""[..],
            b"0",
            b"0s",
            b"s",
            b"10 s",
            b"1.5s",
            b"10sec",
            b"-1s",
        ] {
            assert_eq!(
                parse_interval_ms(bad),
                None,
                "{:?}",
                core::str::from_utf8(bad)
            );
        }
    }
}
