//! The top allocation sites of a heap profile, as `pprof -top` prints them, for
//! readers without Go: each function's *flat* value (samples whose allocation site it
//! is: the innermost frame that is not the allocator's) and *cumulative* value
//! (samples with it anywhere on the stack, counted once per sample), by one of the
//! profile's sample types (`inuse_space` unless asked). With a base profile, the base's
//! values are subtracted first: what grew between the two, where a leak shows.
//!
//! Works on any `profile.proto` (ids need not be dense); functions are told apart by
//! name, as `pprof -top` does, so two inlined copies of one function add up.
//!
//! What counts as the allocation site is a [`Sites`] rule: the first frame outside the
//! allocator (pprof's view), or also outside Rust's standard collections (`Vec`'s
//! growth, `Box::new`, `format!`, `collect`, `HashMap`'s tables), whose own names
//! say only that something grew: then the site is the code that called them.

use crate::is_allocator_function;
use crate::proto::Profile;
use std::collections::HashMap;

/// Which frames at the inner end of a stack are not the allocation site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sites {
    /// The allocator's own frames only (`malloc`, ebb, `__rust_alloc`): `pprof`'s view.
    OutsideAllocator,
    /// Those and the standard libraries' plumbing that allocates for its caller:
    /// Rust's `alloc` (`Vec`/`RawVec`/`Box`/`String`/`fmt`), `core`'s iterators, `std`
    /// and hashbrown's hash tables; C++'s `std::` (`std::string`, `std::vector`'s
    /// growth, `std::allocator`) and `__gnu_cxx::`. Those frames at the inner end are
    /// dropped as the allocator's are (std code further out, such as an iterator calling
    /// the user's closure, stays); a stack of nothing else keeps them.
    OutsideStd,
}

/// Standard-library code that allocates on behalf of its caller (Rust's and C++'s), by
/// function name (full paths) or, for inlined frames whose DWARF name is short (or, in
/// C++, starts with a return type), by file.
pub fn is_std_plumbing(name: &str, file: &str) -> bool {
    const NAME_PREFIXES: &[&str] = &[
        "alloc::",
        "<alloc::",
        "core::",
        "<core::",
        "hashbrown::",
        "<hashbrown::",
        "std::",
        "<std::",
        "__gnu_cxx::",
    ];
    const FILES: &[&str] = &[
        "library/alloc/src/",
        "library/core/src/",
        "library/std/src/",
        "/hashbrown-",
        // libstdc++'s headers (`/usr/include/c++/12/bits/vector.tcc`) and sources.
        "/include/c++/",
        "/libstdc++-v3/",
    ];
    NAME_PREFIXES.iter().any(|p| name.starts_with(p)) || FILES.iter().any(|f| file.contains(f))
}

/// One function's line of the table.
#[derive(Clone, Debug, PartialEq)]
pub struct TopRow {
    pub name: String,
    pub flat: i64,
    pub cum: i64,
}

/// The table: rows sorted by |flat| (then |cum|, then name), largest first.
#[derive(Clone, Debug, PartialEq)]
pub struct Top {
    /// The sample type shown (`inuse_space`, ...), and its unit (`bytes`, `count`).
    pub index: String,
    pub unit: String,
    /// The sum of the shown value over all samples (after subtracting the base).
    pub total: i64,
    pub rows: Vec<TopRow>,
}

/// The profile's sample types, in order (`alloc_objects`, `alloc_space`, ...).
pub fn sample_types(profile: &Profile) -> Vec<String> {
    profile
        .sample_type
        .iter()
        .map(|t| string(profile, t.r#type).to_string())
        .collect()
}

fn string(profile: &Profile, index: i64) -> &str {
    usize::try_from(index)
        .ok()
        .and_then(|i| profile.string_table.get(i))
        .map_or("", String::as_str)
}

/// The sample type pprof shows by default: `default_sample_type` if set, else
/// `inuse_space` if present, else the last one (pprof's rule).
pub fn default_index(profile: &Profile) -> Option<String> {
    let types = sample_types(profile);
    let named = string(profile, profile.default_sample_type);
    if profile.default_sample_type != 0 && types.iter().any(|t| t == named) {
        return Some(named.to_string());
    }
    if types.iter().any(|t| t == "inuse_space") {
        return Some("inuse_space".into());
    }
    types.last().cloned()
}

/// Each sample's stack from its allocation site outward (the allocator's frames
/// dropped) with its value for one sample type, the total, and the unit.
struct SiteStacks {
    stacks: Vec<(Vec<String>, i64)>,
    total: i64,
    unit: String,
}

fn site_stacks(profile: &Profile, index: &str, sites: Sites) -> Result<SiteStacks, String> {
    let types = sample_types(profile);
    let Some(column) = types.iter().position(|t| t == index) else {
        return Err(format!(
            "no sample type {index} in the profile (it has: {})",
            types.join(", ")
        ));
    };
    let unit = string(profile, profile.sample_type[column].unit).to_string();
    let locations: HashMap<u64, &crate::proto::Location> =
        profile.location.iter().map(|l| (l.id, l)).collect();
    let mappings: HashMap<u64, &crate::proto::Mapping> =
        profile.mapping.iter().map(|m| (m.id, m)).collect();
    // A location without a name (a stripped program's own function): its object and
    // file offset, `jq+0x5fca`, which `addr2line -e` of a build with symbols resolves;
    // the run's address alone changes with every run (ASLR).
    let unnamed = |location: &crate::proto::Location| match mappings.get(&location.mapping_id) {
        Some(m) if m.memory_start <= location.address && location.address < m.memory_limit => {
            let path = string(profile, m.filename);
            let object = path.rsplit('/').next().unwrap_or(path);
            let offset = location.address - m.memory_start + m.file_offset;
            if object.is_empty() {
                format!("{:#x}", location.address)
            } else {
                format!("{object}+{offset:#x}")
            }
        }
        _ => format!("{:#x}", location.address),
    };
    let functions: HashMap<u64, (&str, &str)> = profile
        .function
        .iter()
        .map(|f| (f.id, (string(profile, f.name), string(profile, f.filename))))
        .collect();
    let mut stacks = Vec::new();
    let mut total = 0i64;
    for sample in &profile.sample {
        let Some(&value) = sample.value.get(column) else {
            continue;
        };
        if value == 0 {
            continue;
        }
        total += value;
        // Frames innermost first; a location's lines are innermost (inlined) first.
        // Each with whether it is std's plumbing (for `Sites::OutsideStd`).
        let mut frames: Vec<String> = Vec::new();
        let mut plumbing: Vec<bool> = Vec::new();
        for id in &sample.location_id {
            match locations.get(id) {
                Some(location) if !location.line.is_empty() => {
                    for line in &location.line {
                        let (name, file) = functions
                            .get(&line.function_id)
                            .copied()
                            .unwrap_or(("", ""));
                        plumbing.push(is_std_plumbing(name, file));
                        frames.push(if name.is_empty() {
                            unnamed(location)
                        } else {
                            name.to_string()
                        });
                    }
                }
                Some(location) => {
                    plumbing.push(false);
                    frames.push(unnamed(location));
                }
                None => {
                    plumbing.push(false);
                    frames.push(format!("location {id}"));
                }
            }
        }
        // The allocation site: the first frame that is not the allocator's (nor, by
        // the rule, std's plumbing); all of them if the stack holds nothing else.
        let outside = |i: usize| {
            !is_allocator_function(&frames[i]) && (sites == Sites::OutsideAllocator || !plumbing[i])
        };
        let site = (0..frames.len())
            .find(|&i| outside(i))
            .or_else(|| (0..frames.len()).find(|&i| !is_allocator_function(&frames[i])))
            .unwrap_or(0);
        frames.drain(..site);
        stacks.push((frames, value));
    }
    Ok(SiteStacks {
        stacks,
        total,
        unit,
    })
}

/// `index`, or the profile's default sample type.
pub(crate) fn index_or_default(profile: &Profile, index: Option<&str>) -> Result<String, String> {
    match index {
        Some(i) => Ok(i.to_string()),
        None => default_index(profile).ok_or_else(|| "the profile has no sample types".into()),
    }
}

/// Flat and cumulative values by function name, the total, and the unit.
pub(crate) struct ByFunction {
    pub(crate) values: HashMap<String, (i64, i64)>,
    pub(crate) total: i64,
    pub(crate) unit: String,
}

/// Flat and cumulative values by function name for sample type `index`.
pub(crate) fn by_function(
    profile: &Profile,
    index: &str,
    sites: Sites,
) -> Result<ByFunction, String> {
    let SiteStacks {
        stacks,
        total,
        unit,
    } = site_stacks(profile, index, sites)?;
    let mut values: HashMap<String, (i64, i64)> = HashMap::new();
    for (frames, value) in &stacks {
        if let Some(site) = frames.first() {
            values.entry(site.clone()).or_default().0 += value;
        }
        let mut seen: Vec<&str> = Vec::with_capacity(frames.len());
        for name in frames {
            if !seen.contains(&name.as_str()) {
                seen.push(name);
                values.entry(name.clone()).or_default().1 += value;
            }
        }
    }
    Ok(ByFunction {
        values,
        total,
        unit,
    })
}

/// Whole stacks (from the allocation site outward) and their values, largest first.
#[derive(Clone, Debug, PartialEq)]
pub struct StackTable {
    pub index: String,
    pub unit: String,
    pub total: i64,
    pub rows: Vec<(Vec<String>, i64)>,
}

/// The stacks for sample type `index` (None: [`default_index`]), identical stacks
/// added up, minus `base` if given: for sites whose own name says little (`Vec`'s
/// growth, a wrapper every caller goes through), the callers that differ.
pub fn top_stacks(
    profile: &Profile,
    base: Option<&Profile>,
    index: Option<&str>,
    sites: Sites,
) -> Result<StackTable, String> {
    let index = index_or_default(profile, index)?;
    let now = site_stacks(profile, &index, sites)?;
    let mut values: HashMap<Vec<String>, i64> = HashMap::new();
    for (frames, value) in now.stacks {
        *values.entry(frames).or_default() += value;
    }
    let mut total = now.total;
    if let Some(base) = base {
        let old = site_stacks(base, &index, sites).map_err(|e| format!("base: {e}"))?;
        for (frames, value) in old.stacks {
            *values.entry(frames).or_default() -= value;
        }
        total -= old.total;
    }
    let mut rows: Vec<(Vec<String>, i64)> = values.into_iter().filter(|(_, v)| *v != 0).collect();
    rows.sort_by(|a, b| b.1.abs().cmp(&a.1.abs()).then_with(|| a.0.cmp(&b.0)));
    Ok(StackTable {
        index,
        unit: now.unit,
        total,
        rows,
    })
}

/// `value` as a percentage of `total` (0 when the total is).
fn percent_of(value: i64, total: i64) -> f64 {
    if total == 0 {
        0.0
    } else {
        value as f64 * 100.0 / total as f64
    }
}

/// `n` stacks of the table, each its value, share and up to `depth` frames.
pub fn format_stacks(table: &StackTable, n: usize, depth: usize) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let shown = table.rows.len().min(n);
    let _ = writeln!(
        out,
        "{}: {} in total; showing {} of {} stacks (allocation site first)",
        table.index,
        format_value(table.total, &table.unit),
        shown,
        table.rows.len()
    );
    for (frames, value) in &table.rows[..shown] {
        let share = percent_of(*value, table.total);
        let _ = writeln!(
            out,
            "\n{:>11} {:>5.1}%",
            format_value(*value, &table.unit),
            share
        );
        for frame in frames.iter().take(depth) {
            let _ = writeln!(out, "      {frame}");
        }
        if frames.len() > depth {
            let _ = writeln!(out, "      ... {} more", frames.len() - depth);
        }
    }
    out
}

/// The table's stacks in the folded format flame graph tools read (Brendan Gregg's
/// `stackcollapse` output, which `inferno`, `flamegraph.pl` and speedscope take): one
/// line a stack, outermost frame first, frames joined by `;`, then a space and the
/// value. Only positive values (a table minus a base: what grew); a `;` inside a name
/// becomes `:` so it cannot split the frame; a sample whose stack the unwinder could
/// not record (no frames) is `[unknown]`, as stack collapsers write it.
pub fn folded(table: &StackTable) -> Vec<String> {
    table
        .rows
        .iter()
        .filter(|(_, value)| *value > 0)
        .map(|(frames, value)| {
            let chain: Vec<String> = frames.iter().rev().map(|f| f.replace(';', ":")).collect();
            match chain.is_empty() {
                true => format!("[unknown] {value}"),
                false => format!("{} {value}", chain.join(";")),
            }
        })
        .collect()
}

/// The table for sample type `index` (None: [`default_index`]), minus `base` if given.
pub fn top(
    profile: &Profile,
    base: Option<&Profile>,
    index: Option<&str>,
    sites: Sites,
) -> Result<Top, String> {
    let index = index_or_default(profile, index)?;
    let ByFunction {
        mut values,
        mut total,
        unit,
    } = by_function(profile, &index, sites)?;
    if let Some(base) = base {
        let old = by_function(base, &index, sites).map_err(|e| format!("base: {e}"))?;
        for (name, (flat, cum)) in old.values {
            let v = values.entry(name).or_default();
            v.0 -= flat;
            v.1 -= cum;
        }
        total -= old.total;
    }
    let mut rows: Vec<TopRow> = values
        .into_iter()
        .filter(|(_, (flat, cum))| *flat != 0 || *cum != 0)
        .map(|(name, (flat, cum))| TopRow { name, flat, cum })
        .collect();
    rows.sort_by(|a, b| {
        (b.flat.abs(), b.cum.abs())
            .cmp(&(a.flat.abs(), a.cum.abs()))
            .then_with(|| a.name.cmp(&b.name))
    });
    Ok(Top {
        index,
        unit,
        total,
        rows,
    })
}

/// A value in its unit, short: `1.5 MiB`, `312 B`, `-20 KiB`, `1234`.
pub fn format_value(value: i64, unit: &str) -> String {
    if unit != "bytes" {
        return value.to_string();
    }
    let magnitude = value.unsigned_abs() as f64;
    let sign = if value < 0 { "-" } else { "" };
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut scaled = magnitude;
    let mut u = 0;
    while scaled >= 1024.0 && u + 1 < UNITS.len() {
        scaled /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{sign}{magnitude} B")
    } else {
        format!("{sign}{scaled:.1} {}", UNITS[u])
    }
}

/// The table as `pprof -top` lays it out (flat, flat%, sum%, cum, cum%, name), `n` rows.
pub fn format(top: &Top, n: usize) -> String {
    use std::fmt::Write;
    let percent = |v: i64| percent_of(v, top.total);
    let mut out = String::new();
    let shown = top.rows.len().min(n);
    let shown_flat: i64 = top.rows[..shown].iter().map(|r| r.flat).sum();
    let _ = writeln!(
        out,
        "{}: {} in total; showing {} of {} functions ({} flat, {:.1}%)",
        top.index,
        format_value(top.total, &top.unit),
        shown,
        top.rows.len(),
        format_value(shown_flat, &top.unit),
        percent(shown_flat)
    );
    let _ = writeln!(
        out,
        "{:>11} {:>6} {:>6} {:>11} {:>6}  function",
        "flat", "flat%", "sum%", "cum", "cum%"
    );
    let mut sum = 0i64;
    for row in &top.rows[..shown] {
        sum += row.flat;
        let _ = writeln!(
            out,
            "{:>11} {:>5.1}% {:>5.1}% {:>11} {:>5.1}%  {}",
            format_value(row.flat, &top.unit),
            percent(row.flat),
            percent(sum),
            format_value(row.cum, &top.unit),
            percent(row.cum),
            row.name
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{Function, Line, Location, Sample, ValueType};

    /// A profile of two sample types over named stacks (innermost first); `values`
    /// are (alloc_space, inuse_space).
    fn profile(stacks: &[(&[&str], i64, i64)]) -> Profile {
        let mut p = Profile {
            string_table: vec![String::new()],
            ..Default::default()
        };
        let id = |p: &mut Profile, s: &str| {
            if let Some(i) = p.string_table.iter().position(|t| t == s) {
                return i as i64;
            }
            p.string_table.push(s.to_string());
            p.string_table.len() as i64 - 1
        };
        for (t, u) in [("alloc_space", "bytes"), ("inuse_space", "bytes")] {
            let vt = ValueType {
                r#type: id(&mut p, t),
                unit: id(&mut p, u),
            };
            p.sample_type.push(vt);
        }
        for (stack, alloc, inuse) in stacks {
            let mut ids = Vec::new();
            for name in *stack {
                let name_id = id(&mut p, name);
                let f = match p.function.iter().find(|f| f.name == name_id) {
                    Some(f) => f.id,
                    None => {
                        // Sparse ids, as other writers may use.
                        let fid = 100 + p.function.len() as u64 * 7;
                        p.function.push(Function {
                            id: fid,
                            name: name_id,
                            ..Default::default()
                        });
                        fid
                    }
                };
                let lid = 1000 + p.location.len() as u64 * 3;
                p.location.push(Location {
                    id: lid,
                    line: vec![Line {
                        function_id: f,
                        line: 1,
                    }],
                    ..Default::default()
                });
                ids.push(lid);
            }
            p.sample.push(Sample {
                location_id: ids,
                value: vec![*alloc, *inuse],
            });
        }
        p
    }

    #[test]
    fn flat_goes_to_the_first_frame_outside_the_allocator_and_cum_counts_once() {
        let p = profile(&[
            (&["malloc", "parse", "main"], 100, 60),
            (
                &["ebb::front::alloc::malloc", "parse", "parse", "main"],
                50,
                40,
            ),
            (&["malloc", "load", "main"], 30, 0),
        ]);
        let t = top(&p, None, None, Sites::OutsideAllocator).unwrap();
        assert_eq!(t.index, "inuse_space");
        assert_eq!(t.total, 100);
        let row = |n: &str| t.rows.iter().find(|r| r.name == n).cloned();
        assert_eq!(
            row("parse").unwrap(),
            TopRow {
                name: "parse".into(),
                flat: 100,
                cum: 100
            }
        );
        assert_eq!(row("main").unwrap().flat, 0);
        assert_eq!(row("main").unwrap().cum, 100);
        assert!(
            row("malloc").is_none(),
            "the allocator's frames are not sites"
        );
        assert!(row("load").is_none(), "nothing of load's is live");
        assert_eq!(t.rows[0].name, "parse");
        let t = top(&p, None, Some("alloc_space"), Sites::OutsideAllocator).unwrap();
        assert_eq!(t.total, 180);
        assert_eq!(t.rows[0].name, "parse");
        assert_eq!(t.rows[0].flat, 150);
        assert_eq!(t.rows[1].name, "load");
    }

    #[test]
    fn a_base_is_subtracted_so_growth_comes_first() {
        let before = profile(&[
            (&["malloc", "cache_put", "main"], 500, 500),
            (&["malloc", "leaky", "main"], 100, 100),
        ]);
        let after = profile(&[
            (&["malloc", "cache_put", "main"], 500, 400),
            (&["malloc", "leaky", "main"], 900, 900),
        ]);
        let t = top(&after, Some(&before), None, Sites::OutsideAllocator).unwrap();
        assert_eq!(t.total, 700);
        assert_eq!(
            t.rows[0],
            TopRow {
                name: "leaky".into(),
                flat: 800,
                cum: 800
            }
        );
        assert_eq!(t.rows[1].name, "cache_put");
        assert_eq!(t.rows[1].flat, -100);
        let text = format(&t, 10);
        assert!(text.contains("leaky"), "{text}");
        assert!(text.contains("-100 B"), "{text}");
    }

    #[test]
    fn stacks_add_up_identical_chains_and_keep_callers_apart() {
        let p = profile(&[
            (&["malloc", "grow", "parse", "main"], 100, 60),
            (&["malloc", "grow", "parse", "main"], 20, 20),
            (
                &["ebb::front::alloc::malloc", "grow", "load", "main"],
                50,
                40,
            ),
        ]);
        let t = top_stacks(&p, None, None, Sites::OutsideAllocator).unwrap();
        assert_eq!(t.total, 120);
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(t.rows[0], (names(&["grow", "parse", "main"]), 80));
        assert_eq!(t.rows[1], (names(&["grow", "load", "main"]), 40));
        let minus = top_stacks(&p, Some(&p), None, Sites::OutsideAllocator).unwrap();
        assert_eq!((minus.total, minus.rows.len()), (0, 0));
        let text = format_stacks(&t, 1, 2);
        assert!(
            text.contains("66.7%") && text.contains("      parse"),
            "{text}"
        );
        assert!(
            text.contains("... 1 more") && !text.contains("load"),
            "{text}"
        );
    }

    #[test]
    fn folded_lines_go_outermost_first_and_keep_what_grew() {
        let p = profile(&[
            (&["malloc", "grow", "parse", "main"], 100, 60),
            (&["malloc", "<T as Tr>::f;x", "main"], 10, 10),
            (&[], 5, 5),
        ]);
        let lines = folded(&top_stacks(&p, None, None, Sites::OutsideAllocator).unwrap());
        assert_eq!(
            lines,
            [
                "main;parse;grow 60",
                "main;<T as Tr>::f:x 10",
                "[unknown] 5"
            ]
        );
        let base = profile(&[(&["malloc", "grow", "parse", "main"], 10, 80)]);
        let grew = folded(&top_stacks(&p, Some(&base), None, Sites::OutsideAllocator).unwrap());
        assert_eq!(
            grew,
            ["main;<T as Tr>::f:x 10", "[unknown] 5"],
            "a shrunk stack is no frame"
        );
    }

    /// Rust's collection code is not the site when asked: `Vec`'s growth is charged
    /// to the function that pushed, and a stack of nothing but std's code keeps its
    /// first frame past the allocator.
    #[test]
    fn std_plumbing_moves_flat_values_to_the_caller() {
        let p = profile(&[
            (
                &[
                    "__rust_alloc",
                    "alloc::raw_vec::finish_grow",
                    "<alloc::vec::Vec<u8>>::push",
                    "parse",
                    "main",
                ],
                100,
                100,
            ),
            (
                &["malloc", "hashbrown::raw::RawTable<T>::reserve_rehash"],
                10,
                10,
            ),
        ]);
        let raw = top(&p, None, None, Sites::OutsideAllocator).unwrap();
        assert_eq!(raw.rows[0].name, "alloc::raw_vec::finish_grow");
        let folded_std = top(&p, None, None, Sites::OutsideStd).unwrap();
        let row = |name: &str| folded_std.rows.iter().find(|r| r.name == name).cloned();
        assert_eq!(row("parse").map(|r| (r.flat, r.cum)), Some((100, 100)));
        assert_eq!(row("<alloc::vec::Vec<u8>>::push").map(|r| r.flat), None);
        assert_eq!(
            row("hashbrown::raw::RawTable<T>::reserve_rehash").map(|r| r.flat),
            Some(10)
        );
        let stacks = top_stacks(&p, None, None, Sites::OutsideStd).unwrap();
        assert_eq!(stacks.rows[0].0, ["parse", "main"]);
        assert!(is_std_plumbing(
            "finish_grow<alloc::alloc::Global>",
            "/rustc/abc/library/alloc/src/raw_vec/mod.rs"
        ));
        assert!(!is_std_plumbing("parse", "/home/me/src/parse.rs"));
        // C++: libstdc++'s own functions (no debug information: no file), and its
        // templates inlined into the program, whose names start with a return type.
        assert!(is_std_plumbing(
            "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::_M_construct(unsigned long, char)",
            ""
        ));
        assert!(is_std_plumbing(
            "Node*& std::vector<Node*, std::allocator<Node*> >::emplace_back<Node*>(Node*&&)",
            "/usr/include/c++/12/bits/vector.tcc"
        ));
        assert!(!is_std_plumbing(
            "keep_strings(std::vector<std::string>&, int)",
            "/tmp/leak.cpp"
        ));
    }

    #[test]
    fn an_unnamed_frame_is_its_object_and_file_offset() {
        let mut p = profile(&[(&["malloc", "main"], 10, 10)]);
        let path = p.string_table.len() as i64;
        p.string_table.push("/usr/bin/tool".into());
        p.mapping.push(crate::proto::Mapping {
            id: 9,
            memory_start: 0x5500_0000_1000,
            memory_limit: 0x5500_0000_9000,
            file_offset: 0x2000,
            filename: path,
            ..Default::default()
        });
        // The site: a frame of the program without a name, inside the mapping, and one
        // outside every mapping.
        for (id, address) in [(7u64, 0x5500_0000_1fcau64), (8, 0x10)] {
            p.location.push(Location {
                id,
                mapping_id: 9,
                address,
                ..Default::default()
            });
        }
        p.sample[0].location_id.insert(1, 7);
        p.sample[0].location_id.insert(2, 8);
        let t = top(&p, None, None, Sites::OutsideAllocator).unwrap();
        assert_eq!(t.rows[0].name, "tool+0x2fca", "{:?}", t.rows);
        assert!(t.rows.iter().any(|r| r.name == "0x10"), "{:?}", t.rows);
    }

    #[test]
    fn an_unknown_sample_type_is_an_error_naming_the_ones_there_are() {
        let p = profile(&[(&["malloc", "f"], 1, 1)]);
        let e = top(&p, None, Some("cpu"), Sites::OutsideAllocator).unwrap_err();
        assert!(e.contains("alloc_space, inuse_space"), "{e}");
    }

    #[test]
    fn values_print_in_binary_units() {
        assert_eq!(format_value(312, "bytes"), "312 B");
        assert_eq!(format_value(1536, "bytes"), "1.5 KiB");
        assert_eq!(format_value(-3 << 20, "bytes"), "-3.0 MiB");
        assert_eq!(format_value(1234, "count"), "1234");
    }
}
