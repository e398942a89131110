//! Statistics as JSON, and the `EBB_STATS_FILE` exit report.
//!
//! Written through `core::fmt::Write` into fixed buffers: nothing here allocates, so a
//! snapshot can be written from an `atexit` handler of a program whose heap is ebb.
//! Field names are those of [`Stats`](crate::Stats); byte counts are bytes.

use crate::diag::expand_pid;
use crate::stats::{snapshot, Stats};
use core::fmt::{self, Write};

/// The JSON format's version: bumped when a field changes meaning or goes away
/// (added fields do not bump it).
pub const FORMAT_VERSION: u32 = 1;

impl Stats {
    /// Write the snapshot as one JSON object (no trailing newline). Size classes with
    /// no pages are left out of `classes`.
    pub fn write_json(&self, w: &mut impl Write) -> fmt::Result {
        write!(w, "{{\"ebb_stats_version\":{FORMAT_VERSION}")?;
        let fields: [(&str, u64); 47] = [
            ("allocated", self.allocated),
            ("allocated_small", self.allocated_small),
            ("allocated_large", self.allocated_large),
            ("allocated_huge", self.allocated_huge),
            ("committed", self.committed),
            ("committed_peak", self.committed_peak),
            ("free_committed", self.free_committed),
            ("stashed", self.stashed),
            ("reserved", self.reserved),
            ("purged", self.purged),
            ("purge_calls", self.purge_calls),
            ("segments", self.segments),
            ("pages", self.pages),
            ("pages_abandoned", self.pages_abandoned),
            ("abandon_events", self.abandon_events),
            ("reclaim_events", self.reclaim_events),
            ("collect_events", self.collect_events),
            ("threads", self.threads),
            ("threads_created", self.threads_created),
            ("large_allocs", self.large_allocs),
            ("huge_allocs", self.huge_allocs),
            ("purger_wakeups", self.purger_wakeups),
            ("purger_cpu_ns", self.purger_cpu_ns),
            ("purger_sys_ns", self.purger_sys_ns),
            ("decommit_calls", self.decommit_calls),
            ("invalid_frees", self.invalid_frees),
            ("steals", self.steals),
            ("steal_attempts", self.steal_attempts),
            ("idle_walk_visits", self.idle_walk_visits),
            ("idle_walks", self.idle_walks),
            ("inside_walk_visits", self.inside_walk_visits),
            ("lent_to_huge", self.lent_to_huge),
            ("kept_moved", self.kept_moved),
            ("move_pauses", self.move_pauses),
            ("mappings_counted", self.mappings_counted),
            ("sweeps", self.sweeps),
            ("shared_start_blocks", self.shared_start_blocks),
            ("dense_huge_units", self.dense_huge_units),
            ("pid", crate::os::process_id()),
            ("resident", self.resident),
            ("metadata", self.metadata),
            ("huge_kept", self.huge_kept),
            ("huge_kept_resident", self.huge_kept_resident),
            ("heaps_live", self.heaps_live),
            ("heaps_spare", self.heaps_spare),
            ("remote_freed_blocks", self.remote_freed_blocks),
            ("remote_freed_bytes", self.remote_freed_bytes),
        ];
        for (name, value) in fields {
            write!(w, ",\"{name}\":{value}")?;
        }
        w.write_str(",\"classes\":[")?;
        let mut first = true;
        for c in self.classes.iter().filter(|c| c.pages > 0) {
            if !first {
                w.write_char(',')?;
            }
            first = false;
            write!(
                w,
                "{{\"block_size\":{},\"pages\":{},\"live_blocks\":{},\"capacity_blocks\":{},\"remote_freed_blocks\":{}}}",
                c.block_size, c.pages, c.live_blocks, c.capacity_blocks, c.remote_freed_blocks
            )?;
        }
        w.write_str("]}")
    }
}

/// Writes into a caller's buffer, always NUL-terminating what fits, and counts the
/// bytes the whole text needs (as `snprintf` does). For `ebb_stats_json`.
#[cfg(any(feature = "c-api", test))]
pub struct SliceWriter<'a> {
    buf: &'a mut [u8],
    needed: usize,
}

#[cfg(any(feature = "c-api", test))]
impl<'a> SliceWriter<'a> {
    pub fn new(buf: &'a mut [u8]) -> Self {
        if let Some(first) = buf.first_mut() {
            *first = 0;
        }
        SliceWriter { buf, needed: 0 }
    }

    /// Bytes the text needs, without the terminating NUL.
    pub fn needed(&self) -> usize {
        self.needed
    }
}

#[cfg(any(feature = "c-api", test))]
impl Write for SliceWriter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for &b in s.as_bytes() {
            // Keep the last byte for the NUL.
            if self.needed + 1 < self.buf.len() {
                self.buf[self.needed] = b;
                self.buf[self.needed + 1] = 0;
            }
            self.needed += 1;
        }
        Ok(())
    }
}

/// Maximum length of an `EBB_STATS_FILE` path after `%p` is replaced.
const PATH_MAX: usize = 4096;

/// `atexit` handler for `EBB_STATS_FILE`: append the snapshot as one JSON line to the
/// file the variable names, `%p` replaced by the process id, read at exit so a forked
/// child writes its own file. Appended, not replaced: a process can hold two ebb
/// instances (a Rust program with ebb linked in and `libebb.so` preloaded for its C
/// side), each with its own heaps and purger, and each writes its line; truncating
/// kept only the last one to exit (the real-programs suite read the preloaded
/// instance's 0.3 ms of purger time for a Rust tool whose own purger took 52 ms).
/// A path that cannot be opened is skipped silently: the program's exit must not
/// fail because of a report.
pub extern "C" fn write_stats_file_at_exit() {
    let Some(template) = crate::os::getenv(b"EBB_STATS_FILE\0") else {
        return;
    };
    append_stats_line(template);
}

/// Append this instance's statistics as one JSON line to the file `template` names
/// (`%p`: the process id).
fn append_stats_line(template: &[u8]) {
    let mut path = [0u8; PATH_MAX];
    let Some(len) = expand_pid(template, crate::os::process_id(), &mut path) else {
        return;
    };
    let Some(fd) = crate::os::append_file(&path[..=len]) else {
        return;
    };
    {
        let mut w = crate::diag::WholeWriter::to_fd(fd);
        let _ = snapshot().write_json(&mut w);
        let _ = w.write_char('\n');
    }
    crate::os::close_fd(fd);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_is_expanded_everywhere() {
        let mut out = [0u8; 64];
        let len = expand_pid(b"/tmp/s.%p.json-%p", 4071, &mut out).unwrap();
        assert_eq!(&out[..len], b"/tmp/s.4071.json-4071");
        assert_eq!(out[len], 0);
        assert!(expand_pid(b"%p", 0, &mut out[..1]).is_none());
        let len = expand_pid(b"a%", 7, &mut out).unwrap();
        assert_eq!(&out[..len], b"a%");
    }

    #[test]
    fn each_instance_appends_its_line() {
        let path = std::format!(
            "{}/ebb-stats-append-{}.json",
            std::env::temp_dir().display(),
            std::process::id()
        );
        let _ = std::fs::remove_file(&path);
        // Two instances of one process at exit: both lines stay.
        append_stats_line(path.as_bytes());
        append_stats_line(path.as_bytes());
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let lines: std::vec::Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        for line in lines {
            assert!(line.starts_with("{\"ebb_stats_version\":1,") && line.ends_with("]}"));
        }
    }

    #[test]
    fn slice_writer_truncates_and_counts() {
        let mut buf = [0xffu8; 5];
        let mut w = SliceWriter::new(&mut buf);
        w.write_str("abcdefg").unwrap();
        assert_eq!(w.needed(), 7);
        assert_eq!(&buf, b"abcd\0");
    }

    #[test]
    fn json_is_one_object_with_every_field() {
        let s = crate::stats::snapshot();
        let mut text = std::string::String::new();
        s.write_json(&mut text).unwrap();
        assert!(text.starts_with("{\"ebb_stats_version\":1,"), "{text}");
        assert!(text.ends_with("]}"), "{text}");
        for key in [
            "\"allocated\":",
            "\"purger_cpu_ns\":",
            "\"purger_sys_ns\":",
            "\"classes\":[",
        ] {
            assert!(text.contains(key), "{key} missing in {text}");
        }
        assert_eq!(text.matches('{').count(), text.matches('}').count());
    }
}
