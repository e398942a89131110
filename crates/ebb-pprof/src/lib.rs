//! ebb's heap profiles as pprof: raw samples (text, written by the sampler without
//! allocating) in, a gzipped `profile.proto` with symbols out.
//!
//! # Raw format (version 1), one record per line
//! ```text
//! ebb-heap-raw 1
//! rate <mean sampling interval in bytes>
//! map <start hex> <end hex> <file offset hex> <path>     (executable mappings)
//! s <requested size> <1 if still live, else 0> <pc hex> <pc hex> ...   (innermost first)
//! ```
//! Each `s` line is one sampled allocation. Sampling is Poisson over bytes (every
//! byte is sampled with probability 1/rate), so an allocation of `size` bytes is
//! sampled with probability `1 - exp(-size/rate)`, and each sample stands for
//! `1 / (1 - exp(-size/rate))` allocations of its size — for every size, so blocks of
//! the interval's size and above are not over-counted (Go issue 26618).
//!
//! Version 2 (what ebb's sampler writes, `ebb::profile::write_raw`) has, instead of
//! `s` lines, one line per call stack with the estimates made in the allocator:
//! ```text
//! b <alloc objects> <alloc bytes> <in-use objects> <in-use bytes> <pc hex> ...
//! ```
//!
//! In a process whose allocator is ebb, [`install`] makes ebb write pprof itself
//! (`EBB_PROFILE`, `ebb::profile::dump`); `libebb.so` does this when it loads.
//!
//! Values written: `alloc_objects`, `alloc_space`, `inuse_objects`, `inuse_space`
//! (the estimates of the true totals), period type space/bytes, period = rate.

pub mod merge;
pub mod proto;
pub mod series;
pub mod symbolize;
pub mod top;

use flate2::write::GzEncoder;
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
pub use symbolize::Symbolizer;

/// An executable mapping of the sampled process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawMapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub path: String,
}

/// One sampled allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawSample {
    pub size: u64,
    pub live: bool,
    /// Return addresses, innermost first.
    pub pcs: Vec<u64>,
}

/// One call stack with estimated totals (format version 2, what ebb's sampler writes:
/// the estimates are made in the allocator, which knows each sample's block size).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawBucket {
    /// `alloc_objects`, `alloc_space`, `inuse_objects`, `inuse_space`.
    pub values: [u64; 4],
    /// Return addresses, innermost first.
    pub pcs: Vec<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawProfile {
    /// The file ended with `end`: written whole (older writers never say so).
    pub complete: bool,
    /// When the samples were taken (ns since the Unix epoch), if not when the profile
    /// is built: the peak's copy (`snapshot(View::Peak)`).
    pub time_nanos: Option<i64>,
    pub rate: u64,
    pub mappings: Vec<RawMapping>,
    pub samples: Vec<RawSample>,
    pub buckets: Vec<RawBucket>,
}

fn hex(field: &str) -> Result<u64, String> {
    u64::from_str_radix(field.trim_start_matches("0x"), 16).map_err(|e| format!("{field}: {e}"))
}

impl RawProfile {
    /// Parse the raw text format.
    pub fn parse(text: &str) -> Result<RawProfile, String> {
        let mut lines = text.lines();
        if !matches!(
            lines.next().map(str::trim),
            Some("ebb-heap-raw 1" | "ebb-heap-raw 2")
        ) {
            return Err("not an ebb raw heap profile (version 1 or 2)".into());
        }
        let mut raw = RawProfile::default();
        for (n, line) in lines.enumerate() {
            let mut f = line.split_whitespace();
            let bad = |what: &str| format!("line {}: {what}: {line}", n + 2);
            match f.next() {
                Some("rate") => {
                    raw.rate = f
                        .next()
                        .and_then(|v| v.parse().ok())
                        .ok_or_else(|| bad("rate"))?
                }
                Some("map") => {
                    let start = hex(f.next().ok_or_else(|| bad("map"))?)?;
                    let end = hex(f.next().ok_or_else(|| bad("map"))?)?;
                    let offset = hex(f.next().ok_or_else(|| bad("map"))?)?;
                    let path = f.collect::<Vec<_>>().join(" ");
                    raw.mappings.push(RawMapping {
                        start,
                        end,
                        offset,
                        path,
                    });
                }
                Some("s") => {
                    let size = f
                        .next()
                        .and_then(|v| v.parse().ok())
                        .ok_or_else(|| bad("size"))?;
                    let live = f.next().ok_or_else(|| bad("live"))? == "1";
                    let pcs = f.map(hex).collect::<Result<Vec<_>, _>>()?;
                    raw.samples.push(RawSample { size, live, pcs });
                }
                Some("b") => {
                    let mut values = [0u64; 4];
                    for v in &mut values {
                        *v = f
                            .next()
                            .and_then(|v| v.parse().ok())
                            .ok_or_else(|| bad("value"))?;
                    }
                    let pcs = f.map(hex).collect::<Result<Vec<_>, _>>()?;
                    raw.buckets.push(RawBucket { values, pcs });
                }
                // Written last since `end` was added: the file is whole.
                Some("end") => raw.complete = true,
                None => {}
                Some(other) => return Err(bad(&format!("unknown record {other}"))),
            }
        }
        if raw.rate == 0 {
            return Err("no rate".into());
        }
        Ok(raw)
    }
}

/// Allocations one sample of `size` bytes stands for at mean interval `rate`: ebb's
/// own rule (`ebb::profile::sample_weight`), whose `exp` is ebb's, so that linking this
/// crate into `libebb.so` adds no `libm` to every process it is preloaded into (about
/// 300 KiB of resident file pages per process, from `libm`'s relocations and IFUNCs).
pub fn sample_weight(size: u64, rate: u64) -> f64 {
    ebb::profile::sample_weight(usize::try_from(size).unwrap_or(usize::MAX), rate)
}

struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Self {
        let mut s = Strings {
            table: Vec::new(),
            index: HashMap::new(),
        };
        s.id("");
        s
    }
    fn id(&mut self, text: &str) -> i64 {
        if let Some(&i) = self.index.get(text) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(text.to_string());
        self.index.insert(text.to_string(), i);
        i
    }
}

/// Build the pprof profile: samples aggregated by stack, values scaled to estimates,
/// locations resolved to functions with file:line (inlined frames too) where the
/// mapped files carry debug info.
pub fn build(raw: &RawProfile) -> proto::Profile {
    build_with(raw, &mut Symbolizer::new())
}

/// [`build`] with the files and addresses `symbolizer` has read before (a process's
/// profiles on a timer read each once).
pub fn build_with(raw: &RawProfile, symbolizer: &mut Symbolizer) -> proto::Profile {
    let mut strings = Strings::new();
    let sample_type = [
        "alloc_objects",
        "alloc_space",
        "inuse_objects",
        "inuse_space",
    ]
    .iter()
    .zip(["count", "bytes", "count", "bytes"])
    .map(|(t, u)| proto::ValueType {
        r#type: strings.id(t),
        unit: strings.id(u),
    })
    .collect::<Vec<_>>();
    let mut mappings = Vec::new();
    for (i, m) in raw.mappings.iter().enumerate() {
        let (readable, id) = symbolizer.facts(&m.path);
        mappings.push(proto::Mapping {
            id: i as u64 + 1,
            memory_start: m.start,
            memory_limit: m.end,
            file_offset: m.offset,
            filename: strings.id(&m.path),
            build_id: strings.id(&id.unwrap_or_default()),
            has_functions: readable,
            has_filenames: readable,
            has_line_numbers: readable,
            has_inline_frames: readable,
        });
    }
    let mut locations: Vec<proto::Location> = Vec::new();
    let mut location_of: HashMap<u64, u64> = HashMap::new();
    let mut functions: Vec<proto::Function> = Vec::new();
    let mut function_of: HashMap<(String, String), u64> = HashMap::new();
    let mut aggregated: HashMap<Vec<u64>, [f64; 4]> = HashMap::new();
    let mut entries: Vec<(&[u64], [f64; 4])> = Vec::new();
    for s in &raw.samples {
        let w = sample_weight(s.size, raw.rate);
        let bytes = w * s.size as f64;
        let live = if s.live { 1.0 } else { 0.0 };
        entries.push((&s.pcs, [w, bytes, w * live, bytes * live]));
    }
    for b in &raw.buckets {
        entries.push((&b.pcs, b.values.map(|v| v as f64)));
    }
    for (pcs, values) in entries {
        let mut ids = Vec::with_capacity(pcs.len());
        let separator = pcs.iter().position(|&pc| pc == STACK_SEPARATOR);
        for &pc in pcs.iter().filter(|&&pc| pc != STACK_SEPARATOR) {
            let id = *location_of.entry(pc).or_insert_with(|| {
                let id = locations.len() as u64 + 1;
                let mapping = raw
                    .mappings
                    .iter()
                    .position(|m| m.start <= pc && pc < m.end);
                let mut lines = Vec::new();
                if let Some(mi) = mapping {
                    let m = &raw.mappings[mi];
                    for frame in symbolizer.frames(&m.path, m.start, m.offset, pc) {
                        let fid = function_id(
                            &mut functions,
                            &mut function_of,
                            &mut strings,
                            &frame.name,
                            &frame.file,
                        );
                        lines.push(proto::Line {
                            function_id: fid,
                            line: frame.line as i64,
                        });
                    }
                }
                // Code of the allocator inlined into the caller (the Rust fast path
                // is): keep the caller's lines only, so the site is the leaf.
                let inlined_allocator = lines
                    .iter()
                    .take_while(|l| {
                        let f = &functions[l.function_id as usize - 1];
                        is_allocator_line(
                            &strings.table[f.name as usize],
                            &strings.table[f.filename as usize],
                        )
                    })
                    .count();
                if inlined_allocator < lines.len() {
                    lines.drain(..inlined_allocator);
                }
                locations.push(proto::Location {
                    id,
                    mapping_id: mapping.map_or(0, |m| m as u64 + 1),
                    address: pc,
                    line: lines,
                });
                id
            });
            ids.push(id);
        }
        // A location is the allocator's if the function holding it (its last, outermost
        // line) is: those frames are not allocation sites.
        let allocator = |id: &u64| {
            let loc = &locations[*id as usize - 1];
            loc.line.last().is_some_and(|l| {
                let f = &functions[l.function_id as usize - 1];
                is_allocator_line(
                    &strings.table[f.name as usize],
                    &strings.table[f.filename as usize],
                )
            })
        };
        let drop_inner_allocator = |ids: &mut Vec<u64>| {
            let n = ids.iter().take_while(|id| allocator(id)).count();
            if n < ids.len() {
                ids.drain(..n);
            }
        };
        // Candidates for the caller's return address, then the frame-pointer chain
        // (see `ebb::profile`'s stack capture): the caller is the first candidate
        // that is not the allocator's.
        if let Some(sep) = separator {
            let candidates = ids[..sep].to_vec();
            let mut chain = ids[sep..].to_vec();
            drop_inner_allocator(&mut chain);
            ids = chain;
            if let Some(&caller) = candidates.iter().find(|id| !allocator(id)) {
                if ids.first() != Some(&caller) {
                    ids.insert(0, caller);
                }
            }
        }
        drop_inner_allocator(&mut ids);
        let v = aggregated.entry(ids).or_default();
        for (sum, value) in v.iter_mut().zip(values) {
            *sum += value;
        }
    }
    let mut sample: Vec<proto::Sample> = aggregated
        .into_iter()
        .map(|(location_id, v)| proto::Sample {
            location_id,
            value: v.iter().map(|x| x.round() as i64).collect(),
        })
        .collect();
    sample.sort_by(|a, b| b.value[1].cmp(&a.value[1]));
    let period_type = Some(proto::ValueType {
        r#type: strings.id("space"),
        unit: strings.id("bytes"),
    });
    let default_sample_type = strings.id("inuse_space");
    let comment = vec![strings.id("ebb sampling heap profile")];
    proto::Profile {
        sample_type,
        sample,
        mapping: mappings,
        location: locations,
        function: functions,
        string_table: strings.table,
        time_nanos: raw.time_nanos.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as i64)
        }),
        period_type,
        period: raw.rate as i64,
        comment,
        default_sample_type,
    }
}

/// Between the candidates for the caller's return address and the frame-pointer
/// chain in a stack ebb captured (`ebb::profile::STACK_SEPARATOR`).
pub const STACK_SEPARATOR: u64 = 1;

/// Functions of the allocator, of Rust's allocation shims and of C++'s `operator
/// new`: dropped from the inner end of every stack.
pub fn is_allocator_function(name: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "ebb::",
        "<ebb::",
        "ebb_",
        "__rust_alloc",
        "__rust_realloc",
        "__rustc::__rust",
        "__rust_alloc_zeroed",
        "__rg_",
        "__rdl_",
        "__rustc::__rdl_",
        "__rustc::__rg_",
        "alloc::alloc::",
        // A Rust program on the system allocator (glibc's name for ebb preloaded).
        "<std::alloc::System as ",
        "std::alloc::",
        // C++: every `new` goes through these (pprof drops them too).
        "operator new",
        "operator delete",
    ];
    const C_NAMES: &[&str] = &[
        "malloc",
        "calloc",
        "realloc",
        "reallocarray",
        "posix_memalign",
        "aligned_alloc",
        "memalign",
        "valloc",
        "pvalloc",
        "__libc_malloc",
        "__libc_calloc",
        "__libc_realloc",
        "__libc_memalign",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p)) || C_NAMES.contains(&name)
}

/// A line of the allocator's code: an allocator function by name, or code from
/// ebb's sources or from Rust's `alloc::alloc` (`__rust_alloc` and its wrappers),
/// whose inlined functions carry short names only.
pub fn is_allocator_line(name: &str, file: &str) -> bool {
    is_allocator_function(name)
        || file.contains("/crates/ebb/src/")
        || (file.contains("/ebb-") && file.contains("/src/front/"))
        || file.ends_with("library/alloc/src/alloc.rs")
}

fn function_id(
    functions: &mut Vec<proto::Function>,
    function_of: &mut HashMap<(String, String), u64>,
    strings: &mut Strings,
    name: &str,
    file: &str,
) -> u64 {
    *function_of
        .entry((name.to_string(), file.to_string()))
        .or_insert_with(|| {
            let id = functions.len() as u64 + 1;
            functions.push(proto::Function {
                id,
                name: strings.id(name),
                system_name: strings.id(name),
                filename: strings.id(file),
                start_line: 0,
            });
            id
        })
}

/// Encode `profile` gzipped, as pprof reads it.
pub fn write_gzipped(profile: &proto::Profile, out: &Path) -> std::io::Result<()> {
    use prost::Message;
    let bytes = profile.encode_to_vec();
    let mut gz = GzEncoder::new(std::fs::File::create(out)?, flate2::Compression::default());
    gz.write_all(&bytes)?;
    gz.finish()?.sync_all()
}

/// The executable mappings of this process (from `/proc/self/maps`).
pub fn own_executable_mappings() -> Vec<RawMapping> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    maps.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 6 || !f[1].contains('x') || !f[5].starts_with('/') {
                return None;
            }
            let (s, e) = f[0].split_once('-')?;
            Some(RawMapping {
                start: u64::from_str_radix(s, 16).ok()?,
                end: u64::from_str_radix(e, 16).ok()?,
                offset: u64::from_str_radix(f[2], 16).ok()?,
                path: f[5..].join(" "),
            })
        })
        .collect()
}

/// What ebb's sampler holds in this process now, as `view` says (everything, only
/// what is live, or what was live at the peak).
pub fn snapshot(view: ebb::profile::View) -> RawProfile {
    let mut raw = RawProfile {
        complete: true,
        rate: ebb::profile::rate(),
        mappings: own_executable_mappings(),
        ..Default::default()
    };
    if view == ebb::profile::View::Peak {
        raw.time_nanos = ebb::profile::peak().and_then(|(_, age_ms)| {
            let at = std::time::SystemTime::now() - std::time::Duration::from_millis(age_ms);
            at.duration_since(std::time::UNIX_EPOCH)
                .ok()
                .map(|d| d.as_nanos() as i64)
        });
    }
    ebb::profile::for_each_site_in(view, |site| {
        raw.buckets.push(RawBucket {
            values: [
                site.alloc_objects,
                site.alloc_bytes,
                site.inuse_objects,
                site.inuse_bytes,
            ],
            pcs: site.stack.iter().map(|&pc| pc as u64).collect(),
        });
    });
    raw
}

/// What this process's profiles read of its mapped files, for the next profile.
static OWN_SYMBOLS: std::sync::Mutex<Option<Symbolizer>> = std::sync::Mutex::new(None);

fn encode_own_profile(path: &std::ffi::CStr, view: ebb::profile::View) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let path = Path::new(std::ffi::OsStr::from_bytes(path.to_bytes()));
    let raw = snapshot(view);
    // A poisoned lock (a panic while symbolizing) leaves a usable cache: at worst an
    // object read twice.
    let mut kept = OWN_SYMBOLS.lock().unwrap_or_else(|e| e.into_inner());
    let symbolizer = kept.get_or_insert_with(Symbolizer::new);
    let profile = build_with(&raw, symbolizer);
    symbolizer.release();
    drop(kept);
    write_gzipped(&profile, path).is_ok()
}

/// Make ebb write its heap profiles of this process as pprof (`.pb.gz`, symbolized
/// here) instead of the raw format. Call it early in `main` (or link `libebb.so`,
/// which calls it when loaded).
pub fn install() {
    ebb::profile::set_encoder(encode_own_profile);
}

/// Read a gzipped `profile.proto` (tests, tools).
pub fn read_gzipped(path: &Path) -> std::io::Result<proto::Profile> {
    use prost::Message;
    use std::io::Read;
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path)?).read_to_end(&mut bytes)?;
    proto::Profile::decode(&*bytes).map_err(std::io::Error::other)
}

/// The values (`alloc_objects`, `alloc_space`, `inuse_objects`, `inuse_space`) of the
/// samples whose stack holds a function named `name` (or ending in `::name`).
pub fn totals_at(profile: &proto::Profile, name: &str) -> [i64; 4] {
    let mut totals = [0i64; 4];
    for s in &profile.sample {
        let hit = s.location_id.iter().any(|&id| {
            profile.location[id as usize - 1].line.iter().any(|l| {
                let f = &profile.function[l.function_id as usize - 1];
                let n = &profile.string_table[f.name as usize];
                n == name || n.ends_with(&format!("::{name}"))
            })
        });
        if hit {
            for (t, v) in totals.iter_mut().zip(&s.value) {
                *t += v;
            }
        }
    }
    totals
}
