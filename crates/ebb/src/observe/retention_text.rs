//! The retention report written out: for people (`Retention::write_to`, also
//! `Display` with `std`) and as one JSON object (`Retention::write_json`). Measuring
//! is `retention.rs`'s; nothing here reads the process's memory or allocates.

use super::retention::{ClassRetention, Retention, SIGNALLED, SPARSE_DIVISOR};
use crate::diag::{Bytes, FixedBuf};
use crate::size_class::CLASS_COUNT;
use core::fmt::{self, Write};
use core::sync::atomic::AtomicU32;

/// `part` as a percentage of `whole`, one decimal (honours width, for columns).
struct Percent(u64, u64);
impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tenths = (self.0 * 1000).checked_div(self.1).unwrap_or(0);
        let mut buf = FixedBuf::new();
        let _ = write!(buf, "{}.{}%", tenths / 10, tenths % 10);
        f.pad(buf.as_str())
    }
}

impl Retention {
    /// Write the report for people.
    pub fn write_to(&self, w: &mut impl Write) -> fmt::Result {
        let rss = self.rss;
        writeln!(
            w,
            "ebb retention report (pid {}): RSS {} (/proc/self/smaps); the program holds {} in live blocks",
            crate::os::process_id(),
            Bytes(rss),
            Bytes(self.held)
        )?;
        let line = |w: &mut dyn Write, what: &str, bytes: u64| -> fmt::Result {
            writeln!(
                w,
                "  {:>10} {:>6}  {}",
                Bytes(bytes).to_padded(),
                Percent(bytes, rss),
                what
            )
        };
        writeln!(w, " ebb's memory: {}", Bytes(self.ebb_total()))?;
        line(w, "live blocks (resident part)", self.live)?;
        line(
            w,
            "free blocks in pages that still hold live blocks",
            self.free_in_live_pages,
        )?;
        line(
            w,
            "free blocks in pages with no live block",
            self.free_in_empty_pages,
        )?;
        if self.free_in_empty_pages > 0 {
            line(
                w,
                "  of which stashed for a heap's next pages",
                self.empty_stashed,
            )?;
            line(
                w,
                "  of which a heap's current or queued pages",
                self.empty_in_heaps,
            )?;
            line(
                w,
                "  of which abandoned, given back after the delay",
                self.empty_abandoned,
            )?;
        }
        line(w, "free spans waiting for the purge delay", self.free_spans)?;
        line(w, "kept huge mappings", self.huge_kept)?;
        line(
            w,
            "blocks freed by other threads, not yet taken in",
            self.remote_freed,
        )?;
        line(w, "page tails and huge-block rounding", self.rounding)?;
        line(
            w,
            "ebb metadata (segment headers, heaps, maps)",
            self.metadata,
        )?;
        writeln!(
            w,
            " not ebb's: {}",
            Bytes(self.parts_total() - self.ebb_total())
        )?;
        line(w, "anonymous memory ebb does not own", self.foreign_anon)?;
        line(
            w,
            "thread stacks (anonymous, above a guard page)",
            self.thread_stacks,
        )?;
        line(w, "main thread stack", self.stack)?;
        line(
            w,
            "file-backed (code, data, mapped files, shared memory)",
            self.file_backed,
        )?;
        line(w, "other ([vdso], ...)", self.other)?;
        writeln!(
            w,
            " parts add up to {} ({} of RSS)",
            Bytes(self.parts_total()),
            Percent(self.parts_total(), rss)
        )?;
        if self.foreign_anon > 0 {
            writeln!(
                w,
                " {} of anonymous memory in {} mappings is not ebb's: another allocator or the program's own mmaps. Largest:",
                Bytes(self.foreign_anon),
                self.foreign_anon_mappings
            )?;
            for f in &self.foreign[..self.foreign_listed] {
                writeln!(
                    w,
                    "  {:#x}-{:#x} {:>10} resident of {} {}",
                    f.start,
                    f.end,
                    Bytes(f.resident).to_padded(),
                    Bytes((f.end - f.start) as u64),
                    f.name()
                )?;
            }
        }
        self.write_top_classes(
            w,
            " free blocks kept resident by live ones, by class (largest first):",
            |c| c.free_resident,
            |w, c| {
                writeln!(
                    w,
                    "  {:>7} B blocks: {} free resident; {} pages hold {} live blocks in {} resident OS pages; {} pages at most 1/{} full pin {} OS pages with {} blocks",
                    c.block_size,
                    Bytes(c.free_resident),
                    c.pages,
                    c.live_blocks,
                    c.resident_os_pages,
                    c.sparse_pages,
                    SPARSE_DIVISOR,
                    c.sparse_os_pages,
                    c.sparse_live_blocks
                )
            },
        )?;
        self.write_top_classes(
            w,
            " pages with no live block, by class (largest first):",
            |c| c.empty_resident,
            |w, c| {
                writeln!(
                    w,
                    "  {:>7} B blocks: {} resident in {} pages",
                    c.block_size,
                    Bytes(c.empty_resident),
                    c.empty_pages
                )
            },
        )
    }

    /// The ten classes with the most `bytes`, largest first, under `header` (nothing if
    /// no class has any).
    fn write_top_classes<W: Write>(
        &self,
        w: &mut W,
        header: &str,
        bytes: impl Fn(&ClassRetention) -> u64,
        line: impl Fn(&mut W, &ClassRetention) -> fmt::Result,
    ) -> fmt::Result {
        let mut order = [0u8; CLASS_COUNT];
        for (i, o) in order.iter_mut().enumerate() {
            *o = i as u8;
        }
        order.sort_unstable_by(|&a, &b| {
            bytes(&self.classes[b as usize]).cmp(&bytes(&self.classes[a as usize]))
        });
        let top = order
            .iter()
            .map(|&i| &self.classes[i as usize])
            .filter(|c| bytes(c) > 0)
            .take(10);
        for (i, c) in top.enumerate() {
            if i == 0 {
                writeln!(w, "{header}")?;
            }
            line(w, c)?;
        }
        Ok(())
    }

    /// Write the report as one JSON object (no trailing newline).
    pub fn write_json(&self, w: &mut impl Write) -> fmt::Result {
        self.write_json_from(w, None)
    }

    /// `write_json`, saying what asked for it (`"exit"`, `"signal"`) if known: readers
    /// of a series take the exit report as the process's last word.
    pub(super) fn write_json_from(&self, w: &mut impl Write, trigger: Option<&str>) -> fmt::Result {
        // A process can hold two ebb instances (a Rust program on ebb with `libebb.so`
        // preloaded), each seeing the other's memory as not its own: the address of
        // one of its statics tells their reports apart.
        write!(
            w,
            "{{\"ebb_retention_version\":1,\"pid\":{},\"instance\":{},\"measured_at_ms\":{}",
            crate::os::process_id(),
            &SIGNALLED as *const AtomicU32 as usize,
            self.measured_at_ms
        )?;
        if let Some(trigger) = trigger {
            write!(w, ",\"trigger\":\"{trigger}\"")?;
        }
        let fields: [(&str, u64); 21] = [
            ("rss", self.rss),
            ("parts_total", self.parts_total()),
            ("held", self.held),
            ("ebb_total", self.ebb_total()),
            ("live", self.live),
            ("free_in_live_pages", self.free_in_live_pages),
            ("free_in_empty_pages", self.free_in_empty_pages),
            ("empty_stashed", self.empty_stashed),
            ("empty_in_heaps", self.empty_in_heaps),
            ("empty_abandoned", self.empty_abandoned),
            ("free_spans", self.free_spans),
            ("huge_kept", self.huge_kept),
            ("remote_freed", self.remote_freed),
            ("rounding", self.rounding),
            ("metadata", self.metadata),
            ("foreign_anon", self.foreign_anon),
            ("foreign_anon_mappings", self.foreign_anon_mappings),
            ("thread_stacks", self.thread_stacks),
            ("stack", self.stack),
            ("file_backed", self.file_backed),
            ("other", self.other),
        ];
        for (name, value) in fields {
            write!(w, ",\"{name}\":{value}")?;
        }
        w.write_str(",\"foreign\":[")?;
        for (i, f) in self.foreign[..self.foreign_listed].iter().enumerate() {
            if i > 0 {
                w.write_char(',')?;
            }
            write!(
                w,
                "{{\"start\":{},\"end\":{},\"resident\":{},\"name\":\"",
                f.start, f.end, f.resident
            )?;
            for ch in f.name().chars() {
                match ch {
                    '"' | '\\' => write!(w, "\\{ch}")?,
                    c if (c as u32) < 0x20 => write!(w, "\\u{:04x}", c as u32)?,
                    c => w.write_char(c)?,
                }
            }
            w.write_str("\"}")?;
        }
        w.write_str("],\"classes\":[")?;
        let mut first = true;
        for c in self
            .classes
            .iter()
            .filter(|c| c.pages > 0 || c.empty_pages > 0)
        {
            if !first {
                w.write_char(',')?;
            }
            first = false;
            write!(
                w,
                "{{\"block_size\":{},\"pages\":{},\"live_blocks\":{},\"resident_os_pages\":{},\"free_resident\":{},\"sparse_pages\":{},\"sparse_os_pages\":{},\"sparse_live_blocks\":{},\"empty_pages\":{},\"empty_resident\":{}}}",
                c.block_size, c.pages, c.live_blocks, c.resident_os_pages, c.free_resident,
                c.sparse_pages, c.sparse_os_pages, c.sparse_live_blocks, c.empty_pages,
                c.empty_resident
            )?;
        }
        w.write_str("]}")
    }
}

#[cfg(feature = "std")]
impl std::fmt::Display for Retention {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.write_to(f)
    }
}
