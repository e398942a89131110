//! `malloc_info`: glibc's XML description of the allocator's state, with ebb's figures.
//!
//! A program that replaces glibc's allocator by ebb (preloaded or linked) but still
//! called glibc's `malloc_info` would read glibc's untouched arena: zeros everywhere.
//! This writes the same elements, in glibc's order, so tools that parse them go on
//! working, filled from a statistics snapshot:
//!
//! | element | glibc | ebb |
//! |---|---|---|
//! | `heap nr="0"` | one per arena | one: ebb's arena serves every thread |
//! | `size from to total count` | free chunks, by bin | free blocks (free or not yet carved) in pages of each size class holding live blocks or not, one line per class |
//! | `total type="fast"` | fastbin chunks | none (0, 0) |
//! | `total type="rest"` | other free chunks | the free blocks above, and as size every committed byte not in a live block (`mallinfo2().fordblks`) |
//! | `total type="mmap"` | mmapped chunks | huge blocks (mappings of their own) |
//! | `system type="current"` / `"max"` | memory from the system, now and at most | committed bytes (`Stats::committed`), now and at most (`Stats::committed_peak`) |
//! | `aspace type="total"` / `"mprotect"` | address space, reserved / made accessible | reserved / committed |
//!
//! Like glibc, `options` must be 0, else the return value is `EINVAL` itself (glibc
//! returns the code; it does not set `errno`). A null `fp`, which glibc dereferences,
//! also gets `EINVAL`.

use super::{c_int, mallinfo2, stats};
use core::fmt::Write;

/// Writes formatted text to a C stream (`fwrite`; stdio buffers it).
struct Stream(*mut libc::FILE);

impl Write for Stream {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        // SAFETY: `self.0` is the caller's open stream (`malloc_info`'s contract); `s`
        // is `s.len()` readable bytes.
        let written = unsafe { libc::fwrite(s.as_ptr().cast(), 1, s.len(), self.0) };
        if written == s.len() {
            Ok(())
        } else {
            Err(core::fmt::Error)
        }
    }
}

/// glibc's `malloc_info(options, fp)` (module doc). Returns 0, or `EINVAL` for options
/// other than 0 or a null stream, or -1 if the stream refused the text (`errno` as
/// `fwrite` set it).
///
/// # Safety
/// `fp` must be null or an open stream.
pub unsafe fn malloc_info(options: c_int, fp: *mut libc::FILE) -> c_int {
    if options != 0 || fp.is_null() {
        return libc::EINVAL;
    }
    // Everything is read before the first write: stdio may allocate the stream's buffer.
    let s = stats::snapshot();
    let m = mallinfo2();
    let mut out = Stream(fp);
    match write_xml(&mut out, &s, m.fordblks as u64, m.hblks as u64) {
        Ok(()) => 0,
        Err(_) => -1,
    }
}

fn write_xml(
    w: &mut impl Write,
    s: &stats::Stats,
    free_bytes: u64,
    huge_blocks: u64,
) -> core::fmt::Result {
    let mut free_blocks = 0u64;
    w.write_str("<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n")?;
    for class in s.classes.iter().filter(|c| c.block_size != 0) {
        let free = class.capacity_blocks.saturating_sub(class.live_blocks);
        if free == 0 {
            continue;
        }
        free_blocks += free;
        let size = class.block_size;
        writeln!(
            w,
            "  <size from=\"{size}\" to=\"{size}\" total=\"{}\" count=\"{free}\"/>",
            free * size
        )?;
    }
    w.write_str("</sizes>\n")?;
    let totals = |w: &mut dyn Write| -> core::fmt::Result {
        w.write_str("<total type=\"fast\" count=\"0\" size=\"0\"/>\n")?;
        writeln!(
            w,
            "<total type=\"rest\" count=\"{free_blocks}\" size=\"{free_bytes}\"/>"
        )
    };
    let system = |w: &mut dyn Write| -> core::fmt::Result {
        writeln!(w, "<system type=\"current\" size=\"{}\"/>", s.committed)?;
        writeln!(w, "<system type=\"max\" size=\"{}\"/>", s.committed_peak)?;
        writeln!(w, "<aspace type=\"total\" size=\"{}\"/>", s.reserved)?;
        writeln!(w, "<aspace type=\"mprotect\" size=\"{}\"/>", s.committed)
    };
    totals(w)?;
    system(w)?;
    w.write_str("</heap>\n")?;
    totals(w)?;
    writeln!(
        w,
        "<total type=\"mmap\" count=\"{huge_blocks}\" size=\"{}\"/>",
        s.allocated_huge
    )?;
    system(w)?;
    w.write_str("</malloc>\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::string::String;

    #[test]
    fn the_xml_has_glibcs_elements_in_glibcs_order() {
        let mut s = crate::stats::snapshot();
        s.committed = 3 << 20;
        s.committed_peak = 5 << 20;
        s.reserved = 64 << 20;
        s.allocated_huge = 0;
        let mut text = String::new();
        write_xml(&mut text, &s, 1234, 0).unwrap();
        let order = [
            "<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n",
            "</sizes>\n<total type=\"fast\" count=\"0\" size=\"0\"/>\n<total type=\"rest\" count=\"",
            "\" size=\"1234\"/>\n<system type=\"current\" size=\"3145728\"/>\n\
             <system type=\"max\" size=\"5242880\"/>\n<aspace type=\"total\" size=\"67108864\"/>\n\
             <aspace type=\"mprotect\" size=\"3145728\"/>\n</heap>\n",
            "<total type=\"mmap\" count=\"0\" size=\"0\"/>\n",
            "</malloc>\n",
        ];
        let mut at = 0;
        for part in order {
            let found = text[at..]
                .find(part)
                .unwrap_or_else(|| panic!("{part:?} in {text}"));
            at += found + part.len();
        }
        assert_eq!(at, text.len());
    }
}
