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
    /// Code no function symbol covers ([`unnamed_code`]).
    unnamed: Vec<(u64, u64)>,
    /// Frames of each looked-up address (a call instruction's, in the debug info's
    /// addresses), innermost first.
    frames: HashMap<u64, Vec<Frame>>,
}

impl Object {
    fn read(path: &str, stamp: Option<(SystemTime, u64)>) -> Object {
        let (build_id, segments, unnamed) = file_facts(path);
        let loader = addr2line::Loader::new(path).ok();
        Object {
            path: path.to_string(),
            stamp,
            readable: loader.is_some(),
            loader,
            build_id,
            segments,
            unnamed,
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
fn object_look_up(
    loader: &Option<addr2line::Loader>,
    unnamed: &[(u64, u64)],
    probe: u64,
) -> Vec<Frame> {
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
        if found.is_empty() && !in_ranges(unnamed, probe) {
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

/// The file's build id (hex), loadable segments and code no function symbol covers.
type Facts = (Option<String>, Vec<(u64, u64, u64)>, Vec<(u64, u64)>);

/// [`Facts`] of the file at `path` (none if it cannot be read or parsed).
fn file_facts(path: &str) -> Facts {
    use object::{Object, ObjectSegment};
    let Ok(data) = std::fs::read(path) else {
        return (None, Vec::new(), Vec::new());
    };
    let Ok(file) = object::File::parse(&*data) else {
        return (None, Vec::new(), Vec::new());
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
    (id, segments, unnamed_code(&file))
}

/// Gaps between function symbols wider than alignment padding: code whose function
/// has no symbol (a stripped library's internal functions: glibc's `opendir` calls
/// `__alloc_dir`, which only the debug symbols name).
const UNNAMED_GAP: u64 = 16;

/// The address ranges between the file's function symbols (its symbol table, else its
/// dynamic one) that no symbol covers, by the symbols' sizes. The nearest symbol below
/// such an address is another function: glibc's `ntp_gettimex` (123 bytes) was named
/// as the allocation site of `opendir`'s buffers, 0x200 bytes past its end. Without a
/// name, the profile shows the object and offset (`libc.so.6+0xcfd10`), which
/// `addr2line` of the debug symbols resolves. A symbol of unknown size (0) covers up
/// to the next one.
fn unnamed_code(file: &object::File) -> Vec<(u64, u64)> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let mut functions: Vec<(u64, u64)> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
        .map(|s| (s.address(), s.size()))
        .collect();
    if functions.is_empty() {
        functions = file
            .dynamic_symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
            .map(|s| (s.address(), s.size()))
            .collect();
    }
    gaps_between(functions)
}

/// The ranges wider than [`UNNAMED_GAP`] between `(start, size)` extents that none
/// covers; an extent of size 0 reaches the next start.
fn gaps_between(mut extents: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    extents.sort_unstable();
    let mut gaps = Vec::new();
    let mut covered = 0u64;
    let mut sized = false;
    for (start, size) in extents {
        if sized && start > covered + UNNAMED_GAP {
            gaps.push((covered, start));
        }
        covered = covered.max(start + size);
        sized = size != 0 || covered > start;
    }
    gaps
}

/// Whether `address` lies in one of `ranges` (sorted, disjoint, end exclusive).
fn in_ranges(ranges: &[(u64, u64)], address: u64) -> bool {
    let after = ranges.partition_point(|&(start, _)| start <= address);
    after > 0 && address < ranges[after - 1].1
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
            .or_insert_with_key(|&probe| object_look_up(&object.loader, &object.unnamed, probe))
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
    #[test]
    fn code_between_sized_symbols_is_unnamed() {
        // f at 0x100 (0x20 bytes), padding to g at 0x130 (0x40), a gap to h at 0x200
        // (size unknown), i at 0x300 (h reaches it).
        let gaps = gaps_between(vec![(0x200, 0), (0x100, 0x20), (0x300, 8), (0x130, 0x40)]);
        assert_eq!(gaps, [(0x170, 0x200)]);
        assert!(!in_ranges(&gaps, 0x16f));
        assert!(in_ranges(&gaps, 0x170));
        assert!(in_ranges(&gaps, 0x1ff));
        assert!(!in_ranges(&gaps, 0x200));
        assert!(
            !in_ranges(&gaps, 0x250),
            "h's size is unknown: it reaches i"
        );
        assert!(!in_ranges(&[], 5));
    }

    /// In the C library (dynamic symbols only), an address past a function's end and
    /// before the next symbol gets no name, where the nearest symbol below gave one.
    #[test]
    fn an_address_no_symbol_covers_in_libc_gets_no_name() {
        use object::{Object as _, ObjectSegment};
        let path = "/lib/x86_64-linux-gnu/libc.so.6";
        let Ok(data) = std::fs::read(path) else {
            return; // not this machine's layout
        };
        let file = object::File::parse(&*data).unwrap();
        let gaps = unnamed_code(&file);
        let &(start, _) = gaps.first().expect("stripped libc has internal functions");
        let probe = start + 4;
        // The file offset of `probe`, as a mapping of the whole file at 0 shows it.
        let offset = file
            .segments()
            .find(|s| s.address() <= probe && probe < s.address() + s.size())
            .map(|s| probe - s.address() + s.file_range().0)
            .unwrap();
        let mut symbolizer = Symbolizer::new();
        symbolizer.facts(path);
        let frames = symbolizer.frames(path, 0, 0, offset + 1).to_vec();
        assert!(frames.is_empty(), "{probe:#x} named {frames:?}");
        let loader = addr2line::Loader::new(path).unwrap();
        assert!(
            loader.find_symbol(probe).is_some(),
            "the nearest symbol below would have named it"
        );
    }
}
