//! Addresses to functions, files and lines (inlined frames too) from the mapped
//! files' debug info, with what was read kept for the next profile.
//!
//! A process that writes profiles on a timer (`EBB_PROFILE_INTERVAL`) symbolizes the
//! same objects and mostly the same addresses each time. Read afresh, CPython's
//! (libpython with its DWARF) cost about 65 ms of CPU a profile, most of it reading
//! the files and parsing their line tables again (`perf`: `_copy_to_iter`,
//! `addr2line::line::LazyLines::borrow`, `gimli::read::unit::skip_attributes`); a
//! [`Symbolizer`] kept between profiles looks each address up once, and reads a file
//! again only for addresses it has not seen (docs/PROFILING.md "Profiles on a timer").

use std::collections::HashMap;
use std::time::SystemTime;

/// One frame of an address: a function (demangled), its file and line (0: unknown).
#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    pub name: String,
    pub file: String,
    pub line: u32,
}

/// One mapped file's facts and the frames of the addresses looked up in it, and what
/// it was read from (so a file replaced on disk is read again). Its debug info is held
/// only while a profile is being built ([`Symbolizer::release`]): parsed, CPython's
/// held 18 MiB of heap and 13 MiB of mapped file, for addresses that are mostly
/// looked up once.
struct Object {
    path: String,
    stamp: Option<(SystemTime, u64)>,
    /// The file has debug info or a symbol table that `addr2line` reads.
    readable: bool,
    /// Its reader, while a profile is being built.
    loader: Option<addr2line::Loader>,
    build_id: Option<String>,
    /// `(file offset, file size, address)` of each loadable segment.
    segments: Vec<(u64, u64, u64)>,
    /// Frames of each looked-up address (a call instruction's, in the debug info's
    /// addresses), innermost first.
    frames: HashMap<u64, Vec<Frame>>,
}

impl Object {
    fn read(path: &str, stamp: Option<(SystemTime, u64)>) -> Object {
        let (build_id, segments) = file_facts(path);
        let loader = addr2line::Loader::new(path).ok();
        Object {
            path: path.to_string(),
            stamp,
            readable: loader.is_some(),
            loader,
            build_id,
            segments,
            frames: HashMap::new(),
        }
    }

    /// A file offset as an address of the debug info, through the segment holding it
    /// (linkers may load a segment at an address that is not its file offset, and a
    /// mapping's page-aligned offset may lie in the segment before).
    fn address_of(&self, file_offset: u64) -> u64 {
        self.segments
            .iter()
            .find(|&&(start, len, _)| start <= file_offset && file_offset < start + len)
            .map_or(file_offset, |&(start, _, address)| {
                address + (file_offset - start)
            })
    }
}

/// The frames of address `probe` in `loader`'s file: its inlined functions' lines,
/// or its symbol alone.
fn object_look_up(loader: &Option<addr2line::Loader>, probe: u64) -> Vec<Frame> {
    {
        let Some(loader) = loader else {
            return Vec::new();
        };
        let mut found = Vec::new();
        if let Ok(mut frames) = loader.find_frames(probe) {
            while let Ok(Some(frame)) = frames.next() {
                let Some(name) = frame
                    .function
                    .as_ref()
                    .and_then(|f| f.demangle().ok())
                    .map(|n| n.into_owned())
                else {
                    continue;
                };
                let (file, line) = frame
                    .location
                    .map(|l| (l.file.unwrap_or("").to_string(), l.line.unwrap_or(0)))
                    .unwrap_or_default();
                found.push(Frame { name, file, line });
            }
        }
        if found.is_empty() {
            if let Some(name) = loader.find_symbol(probe) {
                found.push(Frame {
                    name: addr2line::demangle_auto(name.into(), None).into_owned(),
                    file: String::new(),
                    line: 0,
                });
            }
        }
        found
    }
}

/// The file's build id (hex) and loadable segments.
fn file_facts(path: &str) -> (Option<String>, Vec<(u64, u64, u64)>) {
    use object::{Object, ObjectSegment};
    let Ok(data) = std::fs::read(path) else {
        return (None, Vec::new());
    };
    let Ok(file) = object::File::parse(&*data) else {
        return (None, Vec::new());
    };
    let id = file
        .build_id()
        .ok()
        .flatten()
        .map(|id| id.iter().map(|b| format!("{b:02x}")).collect());
    let segments = file
        .segments()
        .map(|s| {
            let (start, len) = s.file_range();
            (start, len, s.address())
        })
        .collect();
    (id, segments)
}

/// The mapped files read so far, by path.
#[derive(Default)]
pub struct Symbolizer {
    objects: HashMap<String, Object>,
    /// Debug-info readers made so far (each a file opened and its headers parsed).
    reads: usize,
}

impl Symbolizer {
    pub fn new() -> Symbolizer {
        Symbolizer::default()
    }

    /// The object at `path`, read if it is new or changed on disk since it was read.
    fn fresh(&mut self, path: &str) -> &mut Object {
        let stamp = std::fs::metadata(path)
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len())));
        if self.objects.get(path).is_some_and(|o| o.stamp != stamp) {
            self.objects.remove(path);
        }
        let reads = &mut self.reads;
        self.objects.entry(path.to_string()).or_insert_with(|| {
            *reads += 1;
            Object::read(path, stamp)
        })
    }

    /// Debug-info readers made so far: each file once, and again only for an address
    /// not looked up before.
    pub fn reads(&self) -> usize {
        self.reads
    }

    /// Whether `path` has debug info or a symbol table to read, and its build id;
    /// reads it again if it changed on disk. Once per mapping and profile, before
    /// [`frames`](Self::frames) of its addresses.
    pub fn facts(&mut self, path: &str) -> (bool, Option<String>) {
        let object = self.fresh(path);
        (object.loader.is_some(), object.build_id.clone())
    }

    /// The frames of the call before return address `pc` in a mapping of `path` that
    /// maps file offset `offset` at `start`; innermost first, empty if unknown.
    pub fn frames(&mut self, path: &str, start: u64, offset: u64, pc: u64) -> &[Frame] {
        if !self.objects.contains_key(path) {
            self.fresh(path);
        }
        let object = self.objects.get_mut(path).expect("read above");
        // A return address: look up the call instruction before it.
        let probe = object.address_of(pc - 1 - start + offset);
        if !object.frames.contains_key(&probe) && object.readable && object.loader.is_none() {
            self.reads += 1;
            object.loader = addr2line::Loader::new(&object.path).ok();
        }
        object
            .frames
            .entry(probe)
            .or_insert_with_key(|&probe| object_look_up(&object.loader, probe))
    }

    /// Let go of the files' debug info (a profile is built): the frames found stay, and
    /// an address not seen before reads its file again.
    pub fn release(&mut self) {
        for object in self.objects.values_mut() {
            object.loader = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn a_named_function() -> usize {
        std::hint::black_box(7)
    }

    /// Two profiles of the same addresses read the file once: the second finds the
    /// frames kept; an address not seen before reads it again.
    #[test]
    fn a_second_profile_of_the_same_addresses_reads_no_file() {
        let pc = a_named_function as fn() -> usize as usize as u64 + 1;
        let mapping = crate::own_executable_mappings()
            .into_iter()
            .find(|m| m.start <= pc && pc < m.end)
            .expect("the test binary's code is mapped");
        let mut symbolizer = Symbolizer::new();
        let look = |s: &mut Symbolizer, pc: u64| {
            s.facts(&mapping.path);
            let names: Vec<String> = s
                .frames(&mapping.path, mapping.start, mapping.offset, pc)
                .iter()
                .map(|f| f.name.clone())
                .collect();
            s.release();
            names
        };
        let first = look(&mut symbolizer, pc);
        assert!(
            first.iter().any(|n| n.ends_with("a_named_function")),
            "{first:?}"
        );
        assert_eq!(symbolizer.reads(), 1);
        assert_eq!(look(&mut symbolizer, pc), first);
        assert_eq!(symbolizer.reads(), 1, "the frames were kept");
        let other = look(
            &mut symbolizer,
            a_second_profile_of_the_same_addresses_reads_no_file as fn() as usize as u64 + 1,
        );
        assert!(!other.is_empty());
        assert_eq!(symbolizer.reads(), 2, "a new address reads the file again");
    }
}
