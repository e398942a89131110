//! Memory probes and output, without allocating.
//!
//! Reading `/proc/self/status` and `/proc/self/smaps_rollup` and printing a JSON line go
//! through fixed stack buffers and raw `open`/`read`/`write` system calls, so a sampler
//! can run while the rest of the process must not call the allocator (burst-idle).

use core::fmt::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// One memory reading, in bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mem {
    pub rss: u64,
    pub pss: u64,
    pub anon: u64,
    /// Peak RSS so far (VmHWM).
    pub hwm: u64,
}

/// Read a whole small /proc file into `buf`; returns the filled prefix.
fn read_proc<'a>(path: &core::ffi::CStr, buf: &'a mut [u8]) -> &'a [u8] {
    // SAFETY: plain system calls on a NUL-terminated path and a buffer we own.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return &buf[..0];
        }
        let mut len = 0;
        while len < buf.len() {
            let n = libc::read(fd, buf[len..].as_mut_ptr().cast(), buf.len() - len);
            if n <= 0 {
                break;
            }
            len += n as usize;
        }
        libc::close(fd);
        &buf[..len]
    }
}

/// The value in kB of the line `key:   123 kB`, in bytes.
fn field_kb(text: &[u8], key: &[u8]) -> u64 {
    let mut rest = text;
    while !rest.is_empty() {
        let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        let line = &rest[..end];
        if line.len() > key.len() && line.starts_with(key) && line[key.len()] == b':' {
            let mut value = 0u64;
            for &b in &line[key.len() + 1..] {
                if b.is_ascii_digit() {
                    value = value * 10 + u64::from(b - b'0');
                } else if value > 0 {
                    break;
                }
            }
            return value * 1024;
        }
        rest = &rest[(end + 1).min(rest.len())..];
    }
    0
}

/// RSS, RssAnon and VmHWM from /proc/self/status, PSS from /proc/self/smaps_rollup.
pub fn mem() -> Mem {
    let mut buf = [0u8; 8192];
    let status = read_proc(c"/proc/self/status", &mut buf);
    let rss = field_kb(status, b"VmRSS");
    let anon = field_kb(status, b"RssAnon");
    let hwm = field_kb(status, b"VmHWM");
    let rollup = read_proc(c"/proc/self/smaps_rollup", &mut buf);
    let pss = field_kb(rollup, b"Pss");
    Mem {
        rss,
        pss,
        anon,
        hwm,
    }
}

/// A fixed-capacity line buffer implementing `fmt::Write` (overlong output is cut).
pub struct Line {
    buf: [u8; 2048],
    len: usize,
}

impl Line {
    pub fn new() -> Line {
        Line {
            buf: [0; 2048],
            len: 0,
        }
    }

    /// Write the line plus a newline to stdout with one `write` call.
    pub fn emit(mut self) {
        if self.len < self.buf.len() {
            self.buf[self.len] = b'\n';
            self.len += 1;
        }
        let mut off = 0;
        while off < self.len {
            // SAFETY: writing our own buffer to fd 1.
            let n = unsafe { libc::write(1, self.buf[off..].as_ptr().cast(), self.len - off) };
            if n <= 0 {
                break;
            }
            off += n as usize;
        }
    }
}

impl Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.len() - 1 - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// Where samples go: scenario and allocator names, start time, sample counter.
pub struct Recorder {
    pub scenario: &'static str,
    pub alloc: &'static str,
    pub start: Instant,
    samples: AtomicU64,
    /// `SCENARIO_ALLOC_STATS=1`: print the allocator's own statistics and its retention
    /// report to stderr after each sample taken with [`Recorder::sample`] (ebb only; for
    /// diagnosis).
    debug_stats: bool,
}

impl Recorder {
    pub fn new(scenario: &'static str) -> Recorder {
        Recorder {
            scenario,
            alloc: crate::alloc_name(),
            start: Instant::now(),
            samples: AtomicU64::new(0),
            debug_stats: std::env::var_os("SCENARIO_ALLOC_STATS").is_some_and(|v| v == "1"),
        }
    }

    pub fn elapsed_ms(&self) -> f64 {
        self.start.elapsed().as_secs_f64() * 1000.0
    }

    /// Take and print a sample: `phase` and `idx` name it (e.g. "round", 3).
    pub fn sample(&self, phase: &str, idx: u64, live_bytes: u64) -> Mem {
        let t_ms = self.elapsed_ms();
        let m = mem();
        self.print_sample(t_ms, phase, idx, live_bytes, m);
        if self.debug_stats {
            crate::print_alloc_stats(phase, idx);
        }
        m
    }

    /// With `SCENARIO_ALLOC_STATS=1`, print the allocator's statistics and retention
    /// report now (for samples taken with `probe::mem` and printed later).
    pub fn debug_stats(&self, phase: &str, idx: u64) {
        if self.debug_stats {
            crate::print_alloc_stats(phase, idx);
        }
    }

    /// Print a sample taken earlier (or at a chosen time `t_ms`).
    pub fn print_sample(&self, t_ms: f64, phase: &str, idx: u64, live_bytes: u64, m: Mem) {
        self.print_sample_bound(t_ms, phase, idx, live_bytes, 0, m);
    }

    /// `print_sample` with the touched-page bound of the sample (`touched::Pages`);
    /// 0 leaves the field out (not computed for this sample).
    pub fn print_sample_bound(
        &self,
        t_ms: f64,
        phase: &str,
        idx: u64,
        live_bytes: u64,
        touched_bytes: u64,
        m: Mem,
    ) {
        self.samples.fetch_add(1, Ordering::Relaxed);
        let mut line = Line::new();
        let _ = write!(
            line,
            "{{\"type\":\"sample\",\"scenario\":\"{}\",\"alloc\":\"{}\",\"t_ms\":{:.1},\
             \"phase\":\"{}\",\"idx\":{},\"rss\":{},\"pss\":{},\"anon\":{},\"live_bytes\":{}",
            self.scenario, self.alloc, t_ms, phase, idx, m.rss, m.pss, m.anon, live_bytes
        );
        if touched_bytes > 0 {
            let _ = write!(line, ",\"touched_bytes\":{touched_bytes}");
        }
        let _ = write!(line, "}}");
        line.emit();
    }

    /// Print the summary line. `extra` is appended inside the object (must start with ','
    /// or be empty).
    pub fn summary(&self, quick: bool, live_bytes: u64, extra: fmt::Arguments<'_>) {
        let m = mem();
        let mut line = Line::new();
        let _ = write!(
            line,
            "{{\"type\":\"summary\",\"scenario\":\"{}\",\"alloc\":\"{}\",\"alloc_version\":\"",
            self.scenario, self.alloc
        );
        crate::write_alloc_version(&mut line);
        let _ = write!(line, "\",\"malloc_from\":\"");
        write_malloc_origin(&mut line);
        let _ = write!(
            line,
            "\",\"quick\":{},\"wall_ms\":{:.1},\"samples\":{},\"peak_rss\":{},\"final_rss\":{},\
             \"final_pss\":{},\"final_anon\":{},\"live_bytes\":{}",
            quick,
            self.elapsed_ms(),
            self.samples.load(Ordering::Relaxed),
            m.hwm,
            m.rss,
            m.pss,
            m.anon,
            live_bytes
        );
        let _ = write!(line, ",\"cpu_ms\":{:.1}", process_cpu_ms());
        crate::write_alloc_stats(&mut line);
        let _ = line.write_fmt(extra);
        let _ = write!(line, "}}");
        line.emit();
    }
}

/// User + system CPU time of the whole process so far (all threads), in ms.
pub fn process_cpu_ms() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = core::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1000.0 + t.tv_usec as f64 / 1000.0;
    ms(usage.ru_utime) + ms(usage.ru_stime)
}

/// The file name of the object that defines the `malloc` C code calls (the executable
/// itself when the allocator overrides malloc, libc.so.6 for glibc, or a preloaded
/// library).
pub fn write_malloc_origin(out: &mut Line) {
    // SAFETY: dlsym/dladdr with valid arguments; dli_fname is a C string owned by the
    // dynamic loader.
    unsafe {
        let sym = libc::dlsym(libc::RTLD_DEFAULT, c"malloc".as_ptr());
        let mut info: libc::Dl_info = core::mem::zeroed();
        if sym.is_null() || libc::dladdr(sym, &mut info) == 0 || info.dli_fname.is_null() {
            let _ = out.write_str("?");
            return;
        }
        let name = core::ffi::CStr::from_ptr(info.dli_fname).to_bytes();
        let base = match name.iter().rposition(|&b| b == b'/') {
            Some(i) => &name[i + 1..],
            None => name,
        };
        let _ = out.write_str(core::str::from_utf8(base).unwrap_or("?"));
    }
}

/// A small, fast PRNG (xorshift64*), deterministic per seed.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
}
