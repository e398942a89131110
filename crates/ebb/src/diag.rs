//! Diagnostics that must work inside the allocator: a stderr writer that never
//! allocates, the reports of invalid frees, and the reporter of the crate's own
//! `debug_assert!` (see `lib.rs`).
//!
//! Everything here formats into a stack buffer and writes with one system call per
//! 512 bytes: a report that allocated would re-enter the allocator, often under one of
//! its locks.

use crate::counters::COUNTERS;
use crate::options::Problem;
use crate::{options, os};
use core::fmt::{self, Write};
use core::sync::atomic::Ordering;

/// Writes into a fixed buffer, flushing to stderr when full (no allocation).
pub struct StderrWriter {
    buf: [u8; 512],
    len: usize,
    fd: i32,
}

impl StderrWriter {
    pub const fn new() -> Self {
        Self::to_fd(2)
    }
    /// A writer to descriptor `fd`.
    pub const fn to_fd(fd: i32) -> Self {
        Self {
            buf: [0; 512],
            len: 0,
            fd,
        }
    }
    pub fn flush(&mut self) {
        crate::os::write_fd(self.fd, &self.buf[..self.len]);
        self.len = 0;
    }
}

impl Write for StderrWriter {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for &b in s.as_bytes() {
            if self.len == self.buf.len() {
                self.flush();
            }
            self.buf[self.len] = b;
            self.len += 1;
        }
        Ok(())
    }
}

impl Drop for StderrWriter {
    fn drop(&mut self) {
        self.flush();
    }
}

/// A writer for text appended to a file that others append to as well (the retention
/// report, the statistics line): the whole text goes out in one `write`, which the
/// kernel appends as one piece, so it never interleaves with another writer's. Two
/// ebb instances in one process (a Rust program on ebb with `libebb.so` preloaded)
/// answer the same report signal at the same moment, into the same file: with
/// [`StderrWriter`]'s 512-byte flushes their JSON lines came out cut into each other.
/// The text is gathered in pages of its own (address space for [`WHOLE_TEXT_BYTES`],
/// only what is written becomes resident; no allocation), given back when it is
/// dropped. If they cannot be had, or the text outgrows them, it is written in pieces.
pub struct WholeWriter {
    /// `WHOLE_TEXT_BYTES` of reserved pages, or null.
    buf: *mut u8,
    len: usize,
    fd: i32,
}

/// The most text a [`WholeWriter`] writes in one piece (a retention report of every
/// size class and 64 foreign mappings is about 20 KiB).
pub const WHOLE_TEXT_BYTES: usize = 1 << 20;

impl WholeWriter {
    /// A writer to descriptor `fd`.
    pub fn to_fd(fd: i32) -> Self {
        let buf = os::reserve_aligned(WHOLE_TEXT_BYTES, os::page_size());
        Self { buf, len: 0, fd }
    }

    fn flush(&mut self) {
        if !self.buf.is_null() && self.len > 0 {
            // SAFETY: `buf` holds `WHOLE_TEXT_BYTES` of our own pages, `len` of them
            // written.
            os::write_fd(self.fd, unsafe {
                core::slice::from_raw_parts(self.buf, self.len)
            });
        }
        self.len = 0;
    }
}

impl Write for WholeWriter {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.buf.is_null() {
            os::write_fd(self.fd, s.as_bytes());
            return Ok(());
        }
        if self.len + s.len() > WHOLE_TEXT_BYTES {
            self.flush();
            if s.len() > WHOLE_TEXT_BYTES {
                os::write_fd(self.fd, s.as_bytes());
                return Ok(());
            }
        }
        // SAFETY: `len + s.len() <= WHOLE_TEXT_BYTES`: the copy stays in our pages, and
        // `s` is not in them.
        unsafe {
            core::ptr::copy_nonoverlapping(s.as_ptr(), self.buf.add(self.len), s.len());
        }
        self.len += s.len();
        Ok(())
    }
}

impl Drop for WholeWriter {
    fn drop(&mut self) {
        self.flush();
        if !self.buf.is_null() {
            // SAFETY: the pages were reserved by `to_fd` and nothing points into them.
            unsafe { os::release(self.buf, WHOLE_TEXT_BYTES) };
        }
    }
}

/// Report a failed internal assertion without allocating, then abort.
#[cold]
#[inline(never)]
pub fn assertion_failed(what: fmt::Arguments, file: &str, line: u32) -> ! {
    let mut w = StderrWriter::new();
    let _ = writeln!(w, "ebb: internal assertion failed at {file}:{line}: {what}");
    w.flush();
    os::abort()
}

/// Report a corrupted free on stderr (without allocating); aborts unless
/// `EBB_ABORT_ON_ERROR=0`.
#[cold]
pub fn report_invalid_free(ptr: *mut u8, what: &str) {
    report_invalid("free", ptr, what);
}

/// Report a bad pointer given to `function` (`free`, `realloc`, `malloc_usable_size`)
/// that can only be a bug of the program (a double free, a pointer into ebb's memory
/// that is no block start): count it, print `ebb: function(ptr): what` unless
/// `EBB_SHOW_ERRORS=0`, and abort unless `EBB_ABORT_ON_ERROR=0`.
#[cold]
pub fn report_invalid(function: &str, ptr: *mut u8, what: &str) {
    report_invalid_sized(function, ptr, what, 0);
}

/// `report_invalid` naming the block size of the page the pointer falls in (0: none).
#[cold]
pub fn report_invalid_sized(function: &str, ptr: *mut u8, what: &str, block_size: usize) {
    COUNTERS.invalid_frees.fetch_add(1, Ordering::Relaxed);
    let options = options::get();
    if options.show_errors {
        let mut w = StderrWriter::new();
        let _ = write!(w, "ebb: {}({:p}): {}", function, ptr, what);
        if block_size != 0 {
            let _ = write!(w, " [{}-byte blocks]", block_size);
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

/// Report a pointer outside every ebb region given to `function`. One that could be
/// another allocator's block (mapped, 16-byte aligned: memory the dynamic loader
/// allocated before ebb was loaded, say) is reported as `pointer not allocated by ebb`
/// and left alone, aborting only with `EBB_ABORT_ON_ERROR=1`; one that cannot
/// (unmapped, unaligned, beyond the user address space) is a corrupted pointer,
/// reported and aborted on as `report_invalid` does. `in_map_range`: whether the
/// address is in the range the segment map covers (`span::segment::in_map_range`,
/// passed in so that diagnostics read no allocator layer).
#[cold]
pub fn report_unknown(function: &str, ptr: *mut u8, in_map_range: bool) {
    let addr = ptr as usize;
    let what = if addr % 16 != 0 {
        "invalid pointer (unaligned, not allocated by ebb)"
    } else if !in_map_range || !is_mapped(addr) {
        "invalid pointer (not mapped)"
    } else {
        COUNTERS.invalid_frees.fetch_add(1, Ordering::Relaxed);
        let options = options::get();
        if options.show_errors {
            let mut w = StderrWriter::new();
            let _ = writeln!(
                w,
                "ebb: {}({:p}): pointer not allocated by ebb",
                function, ptr
            );
        }
        if options.abort_on_foreign {
            os::abort();
        }
        return;
    };
    report_invalid(function, ptr, what);
}

/// True if the OS page holding `addr` is mapped (`mincore` fails on unmapped ranges).
fn is_mapped(addr: usize) -> bool {
    let page = os::page_size();
    let mut residency = [0u8; 1];
    os::mincore((addr & !(page - 1)) as *const u8, page, &mut residency)
}

/// A byte count for reports: B, KiB, MiB or GiB, whichever keeps it readable.
pub(crate) struct Bytes(pub u64);
impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b >= 10 << 30 {
            write!(f, "{} GiB", b >> 30)
        } else if b >= 10 << 20 {
            write!(f, "{} MiB", b >> 20)
        } else if b >= 10 << 10 {
            write!(f, "{} KiB", b >> 10)
        } else {
            write!(f, "{} B", b)
        }
    }
}

impl Bytes {
    pub(crate) fn to_padded(&self) -> PaddedBytes {
        PaddedBytes(self.0)
    }
}

pub(crate) struct PaddedBytes(u64);
impl fmt::Display for PaddedBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = FixedBuf::new();
        let _ = write!(buf, "{}", Bytes(self.0));
        f.pad(buf.as_str())
    }
}

pub(crate) struct FixedBuf {
    buf: [u8; 32],
    len: usize,
}
impl FixedBuf {
    pub(crate) fn new() -> Self {
        Self {
            buf: [0; 32],
            len: 0,
        }
    }
    pub(crate) fn as_str(&self) -> &str {
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}
impl Write for FixedBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// Copy `template` into `out` with every `%p` replaced by `pid` and a NUL after it.
/// Returns the length without the NUL, or `None` if it does not fit.
pub(crate) fn expand_pid(template: &[u8], pid: u64, out: &mut [u8]) -> Option<usize> {
    let mut digits = [0u8; 20];
    let mut n = 0;
    let mut v = pid;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let mut len = 0;
    let mut i = 0;
    while i < template.len() {
        if template[i] == b'%' && template.get(i + 1) == Some(&b'p') {
            for k in (0..n).rev() {
                *out.get_mut(len)? = digits[k];
                len += 1;
            }
            i += 2;
        } else {
            *out.get_mut(len)? = template[i];
            len += 1;
            i += 1;
        }
    }
    *out.get_mut(len)? = 0;
    Some(len)
}

/// Call `f` with every line of the file at `path` (NUL-terminated), read through a
/// stack buffer (no allocation: the readers of `/proc/self/maps` and `smaps` run in
/// `atexit` handlers and signal-driven dumps of programs whose heap is ebb). A line
/// longer than the buffer is cut. False if the file cannot be opened.
pub fn for_each_line(path: &[u8], mut f: impl FnMut(&[u8])) -> bool {
    let Some(fd) = os::open_read(path) else {
        return false;
    };
    let mut buf = [0u8; 4096];
    let mut len = 0;
    let mut eof = false;
    while !eof || len > 0 {
        if !eof && len < buf.len() {
            let n = os::read_fd(fd, &mut buf[len..]);
            if n <= 0 {
                eof = true;
            } else {
                len += n as usize;
            }
        }
        // Every whole line in the buffer (or the rest at the end, or a full buffer
        // with no newline: a line too long, cut).
        let mut consumed = 0;
        loop {
            let rest = &buf[consumed..len];
            let line_len = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => i,
                None if eof || (consumed == 0 && len == buf.len()) => rest.len(),
                None => break,
            };
            if line_len == 0 && rest.is_empty() {
                break;
            }
            f(&rest[..line_len]);
            consumed += (line_len + 1).min(rest.len());
        }
        buf.copy_within(consumed..len, 0);
        len -= consumed;
    }
    os::close_fd(fd);
    true
}

/// A hexadecimal number without prefix, as `/proc` prints addresses; `None` if empty,
/// not hexadecimal or too large.
pub fn parse_hex(field: &[u8]) -> Option<usize> {
    if field.is_empty() {
        return None;
    }
    let mut v = 0usize;
    for &b in field {
        let d = (b as char).to_digit(16)?;
        v = v.checked_mul(16)? + d as usize;
    }
    Some(v)
}

/// Print one warning about an `EBB_*` setting (`options::check_environment`).
pub fn warn_setting(name: &[u8], value: &[u8], problem: Problem) {
    let mut w = StderrWriter::new();
    let _ = w.write_str("ebb: warning: ");
    write_bytes(&mut w, name);
    match problem {
        Problem::NearMiss(known) => {
            let _ = writeln!(w, " is not an ebb variable; did you mean {}?", known.name);
        }
        _ => {
            let _ = w.write_str("=\"");
            write_bytes(&mut w, value);
            let _ = w.write_str("\" ignored: ");
            let _ = match problem {
                Problem::Invalid(v) => writeln!(w, "expected {}", v.accepts.expected()),
                Problem::WithoutRequired(v) => writeln!(
                    w,
                    "it takes effect only with {}",
                    v.requires.unwrap_or("another variable")
                ),
                _ => writeln!(w, "only libebb_secure.so (the `secure` feature) reads it"),
            };
        }
    }
}

/// `text` as printable ASCII, at most 64 bytes of it (a value may be anything).
fn write_bytes(w: &mut StderrWriter, text: &[u8]) {
    const SHOWN: usize = 64;
    for &b in text.iter().take(SHOWN) {
        let c = if b.is_ascii_graphic() || b == b' ' {
            b as char
        } else {
            '?'
        };
        let _ = w.write_char(c);
    }
    if text.len() > SHOWN {
        let _ = w.write_str("...");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{format, string::String, vec::Vec};

    /// Two writers appending 8 KiB lines to one file at the same time, as two ebb
    /// instances answering one report signal do: every line comes out whole (one
    /// writer's letter from end to end). `StderrWriter`'s 512-byte flushes cut them into
    /// each other within a few rounds.
    #[test]
    fn appended_texts_come_out_whole() {
        let path = std::env::temp_dir().join(format!("ebb-whole-{}.txt", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let mut c_path = path.to_str().unwrap().as_bytes().to_vec();
        c_path.push(0);
        let rounds = 200;
        std::thread::scope(|scope| {
            for letter in ['a', 'b'] {
                let c_path = &c_path;
                scope.spawn(move || {
                    let line: String = std::iter::repeat_n(letter, 8192).collect();
                    for _ in 0..rounds {
                        let fd = os::append_file(c_path).unwrap();
                        {
                            let mut w = WholeWriter::to_fd(fd);
                            for chunk in line.as_bytes().chunks(100) {
                                w.write_str(core::str::from_utf8(chunk).unwrap()).unwrap();
                            }
                            w.write_char('\n').unwrap();
                        }
                        os::close_fd(fd);
                    }
                });
            }
        });
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2 * rounds);
        for line in lines {
            assert_eq!(line.len(), 8192);
            let first = line.as_bytes()[0];
            assert!(line.bytes().all(|b| b == first), "a line cut into another");
        }
    }
}
