//! Diagnostics that must work inside the allocator: a stderr writer that never
//! allocates, the reports of invalid frees, and the reporter of the crate's own
//! `debug_assert!` (see `lib.rs`).
//!
//! Everything here formats into a stack buffer and writes with one system call per
//! 512 bytes: a report that allocated would re-enter the allocator, often under one of
//! its locks.

use crate::counters::COUNTERS;
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

/// Report a failed internal assertion without allocating, then abort.
#[cold]
#[inline(never)]
pub fn assertion_failed(what: fmt::Arguments, file: &str, line: u32) -> ! {
    let mut w = StderrWriter::new();
    let _ = writeln!(w, "ebb: internal assertion failed at {file}:{line}: {what}");
    w.flush();
    os::abort()
}

/// Report an invalid free on stderr (without allocating) and abort if asked to.
#[cold]
pub fn report_invalid_free(ptr: *mut u8, what: &str) {
    report_invalid("free", ptr, what);
}

/// Report an invalid pointer given to `function` (`free`, `realloc`,
/// `malloc_usable_size`): count it, print `ebb: function(ptr): what` unless
/// `EBB_SHOW_ERRORS=0`, and abort with `EBB_ABORT_ON_ERROR=1`.
#[cold]
pub fn report_invalid(function: &str, ptr: *mut u8, what: &str) {
    COUNTERS.invalid_frees.fetch_add(1, Ordering::Relaxed);
    let options = options::get();
    if options.show_errors {
        let mut w = StderrWriter::new();
        let _ = writeln!(w, "ebb: {}({:p}): {}", function, ptr, what);
    }
    if options.abort_on_error {
        os::abort();
    }
}
