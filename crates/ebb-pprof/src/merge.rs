//! Two profiles of one process as one: a Rust program on ebb with `libebb.so`
//! preloaded holds two ebb instances (its Rust code's, its C code's), each sampling
//! the blocks it serves and writing its own profile. Their blocks are disjoint, so
//! the process's profile is the two profiles' samples side by side: live bytes and
//! allocated bytes add up. (Their peaks do not: each instance's peak is its own
//! moment, and the sum of two peaks is no moment of the process.)

use crate::proto::{Profile, ValueType};
use std::collections::HashMap;

/// The names of a profile's sample types, as `type/unit`.
fn type_names(profile: &Profile) -> Vec<String> {
    let name = |v: &ValueType| {
        let s = |i: i64| {
            profile
                .string_table
                .get(i as usize)
                .map_or("", |s| s.as_str())
        };
        format!("{}/{}", s(v.r#type), s(v.unit))
    };
    profile.sample_type.iter().map(name).collect()
}

/// `a` with `b`'s samples added: `b`'s strings, mappings, functions and locations
/// renumbered after `a`'s (identifiers stay dense, from 1), its comments kept, the
/// earlier of the two times. Fails if the two do not sample the same values, or differ
/// in sampling rate (their estimates would not be of one kind).
pub fn merge(a: &Profile, b: &Profile) -> Result<Profile, String> {
    if type_names(a) != type_names(b) {
        return Err(format!(
            "the profiles sample different values: {:?} and {:?}",
            type_names(a),
            type_names(b)
        ));
    }
    if a.period != b.period {
        return Err(format!(
            "the profiles were sampled at different rates: {} and {} bytes",
            a.period, b.period
        ));
    }
    let mut out = a.clone();
    let mut strings: HashMap<String, i64> = out
        .string_table
        .iter()
        .enumerate()
        .map(|(i, s)| (s.clone(), i as i64))
        .collect();
    let mut string = |i: i64| -> i64 {
        let s = b.string_table.get(i as usize).cloned().unwrap_or_default();
        *strings.entry(s.clone()).or_insert_with(|| {
            out.string_table.push(s);
            out.string_table.len() as i64 - 1
        })
    };
    let renumber = |ids: Vec<u64>, after: usize| -> HashMap<u64, u64> {
        ids.into_iter()
            .enumerate()
            .map(|(i, id)| (id, (after + i + 1) as u64))
            .collect()
    };
    let mappings = renumber(b.mapping.iter().map(|m| m.id).collect(), a.mapping.len());
    let functions = renumber(b.function.iter().map(|f| f.id).collect(), a.function.len());
    let locations = renumber(b.location.iter().map(|l| l.id).collect(), a.location.len());
    let mut added_mappings = Vec::with_capacity(b.mapping.len());
    for m in &b.mapping {
        let mut m = m.clone();
        m.id = mappings[&m.id];
        m.filename = string(m.filename);
        m.build_id = string(m.build_id);
        added_mappings.push(m);
    }
    let mut added_functions = Vec::with_capacity(b.function.len());
    for f in &b.function {
        let mut f = f.clone();
        f.id = functions[&f.id];
        f.name = string(f.name);
        f.system_name = string(f.system_name);
        f.filename = string(f.filename);
        added_functions.push(f);
    }
    let mut added_comments = Vec::with_capacity(b.comment.len());
    for &c in &b.comment {
        added_comments.push(string(c));
    }
    out.mapping.extend(added_mappings);
    out.function.extend(added_functions);
    out.comment.extend(added_comments);
    for l in &b.location {
        let mut l = l.clone();
        l.id = locations[&l.id];
        l.mapping_id = mappings.get(&l.mapping_id).copied().unwrap_or(0);
        for line in &mut l.line {
            line.function_id = functions.get(&line.function_id).copied().unwrap_or(0);
        }
        out.location.push(l);
    }
    for s in &b.sample {
        let mut s = s.clone();
        for id in &mut s.location_id {
            *id = locations.get(id).copied().unwrap_or(0);
        }
        out.sample.push(s);
    }
    if b.time_nanos != 0 && (out.time_nanos == 0 || b.time_nanos < out.time_nanos) {
        out.time_nanos = b.time_nanos;
    }
    Ok(out)
}

/// One profile an ebb instance of the process wrote, and when (nanoseconds, any
/// epoch shared by all of them).
pub struct Timed<'a> {
    /// Which instance wrote it (any label: a `.pb.gz` and a `.raw` writer, say).
    pub instance: usize,
    pub at_ns: u64,
    pub profile: &'a Profile,
}

/// One process's profiles over time, written by one ebb instance or by two, as one
/// profile per moment, oldest first: the instance that wrote most profiles gives the
/// moments, and at each the other instances' latest profile joins it ([`merge`]).
///
/// Why "latest" is the right one to take: an instance writes a timed profile only
/// after an interval in which its own profile changed (`EBB_PROFILE_INTERVAL`), so
/// the last one it wrote is what it held until it wrote the next. Each instance runs
/// its own timer, so its profile of the same interval comes up to an interval later
/// or earlier: a profile written up to half the moments' median gap after a moment is
/// taken as that moment's (with a single moment, any). An instance that had written
/// nothing by a moment adds nothing there.
pub fn over_time(written: &[Timed]) -> Result<Vec<(u64, Profile)>, String> {
    let mut instances: Vec<usize> = written.iter().map(|w| w.instance).collect();
    instances.sort_unstable();
    instances.dedup();
    let of = |instance: usize| {
        let mut list: Vec<&Timed> = written.iter().filter(|w| w.instance == instance).collect();
        list.sort_by_key(|w| w.at_ns);
        list
    };
    let Some(&primary) = instances
        .iter()
        .max_by_key(|&&i| (of(i).len(), usize::MAX - i))
    else {
        return Ok(Vec::new());
    };
    let moments = of(primary);
    let mut gaps: Vec<u64> = moments
        .windows(2)
        .map(|w| w[1].at_ns - w[0].at_ns)
        .collect();
    gaps.sort_unstable();
    let slack = if gaps.is_empty() {
        u64::MAX
    } else {
        gaps[gaps.len() / 2] / 2
    };
    let others: Vec<Vec<&Timed>> = instances
        .iter()
        .filter(|&&i| i != primary)
        .map(|&i| of(i))
        .collect();
    let mut out = Vec::with_capacity(moments.len());
    for moment in moments {
        let mut profile = moment.profile.clone();
        let until = moment.at_ns.saturating_add(slack);
        for other in &others {
            if let Some(latest) = other.iter().rev().find(|w| w.at_ns <= until) {
                profile = merge(&profile, latest.profile)?
            }
        }
        out.push((moment.at_ns, profile));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{Function, Line, Location, Mapping, Sample};

    /// A profile of one site, `name`, holding `bytes` live, with the string table,
    /// identifiers and sampling a profile ebb writes has.
    fn one_site(name: &str, bytes: i64) -> Profile {
        let strings = [
            "",
            "alloc_space",
            "bytes",
            "inuse_space",
            "space",
            name,
            "main.rs",
            "/bin/x",
        ];
        Profile {
            sample_type: vec![
                ValueType { r#type: 1, unit: 2 },
                ValueType { r#type: 3, unit: 2 },
            ],
            sample: vec![Sample {
                location_id: vec![1],
                value: vec![2 * bytes, bytes],
            }],
            mapping: vec![Mapping {
                id: 1,
                filename: 7,
                memory_limit: 0x1000,
                ..Default::default()
            }],
            location: vec![Location {
                id: 1,
                mapping_id: 1,
                address: 0x10,
                line: vec![Line {
                    function_id: 1,
                    line: 3,
                }],
            }],
            function: vec![Function {
                id: 1,
                name: 5,
                system_name: 5,
                filename: 6,
                start_line: 1,
            }],
            string_table: strings.iter().map(|s| s.to_string()).collect(),
            period_type: Some(ValueType { r#type: 4, unit: 2 }),
            period: 524288,
            time_nanos: 5,
            ..Default::default()
        }
    }

    #[test]
    fn the_merged_profile_holds_both_sites_and_their_sum() {
        let merged = merge(&one_site("rust_leak", 100), &one_site("c_leak", 30)).unwrap();
        assert_eq!(merged.sample.len(), 2);
        assert_eq!(crate::totals_at(&merged, "rust_leak"), [200, 100, 0, 0]);
        assert_eq!(crate::totals_at(&merged, "c_leak"), [60, 30, 0, 0]);
        // Shared strings are not repeated; identifiers stay dense.
        let names = merged
            .string_table
            .iter()
            .filter(|s| *s == "main.rs")
            .count();
        assert_eq!(names, 1);
        let ids: Vec<u64> = merged.location.iter().map(|l| l.id).collect();
        assert_eq!(ids, [1, 2]);
        assert_eq!(merged.mapping[1].id, 2);
        assert_eq!(
            merged.string_table[merged.mapping[1].filename as usize],
            "/bin/x"
        );
        let top = crate::top::top(
            &merged,
            None,
            Some("inuse_space"),
            crate::top::Sites::OutsideAllocator,
        )
        .unwrap();
        assert_eq!(top.total, 130);
    }

    #[test]
    fn profiles_of_different_kinds_are_not_merged() {
        let mut other = one_site("c_leak", 30);
        other.period = 4096;
        assert!(merge(&one_site("rust_leak", 100), &other).is_err());
        let mut other = one_site("c_leak", 30);
        other.sample_type.pop();
        assert!(merge(&one_site("rust_leak", 100), &other).is_err());
    }

    fn timed(instance: usize, at_ns: u64, profile: &Profile) -> Timed<'_> {
        Timed {
            instance,
            at_ns,
            profile,
        }
    }

    #[test]
    fn two_instances_over_time_give_one_profile_per_moment() {
        // The C side wrote at 1, 2, 3 s (and at exit, 3.5 s); the Rust side at 1.4 s
        // and at exit: it did not change in between.
        let c = [10, 20, 30, 40].map(|kib| one_site("c_cache", kib << 10));
        let rust = [100, 300].map(|kib| one_site("rust_tree", kib << 10));
        let s = 1_000_000_000;
        let written = [
            timed(0, s, &c[0]),
            timed(1, s * 16 / 10, &rust[0]),
            timed(0, 2 * s, &c[1]),
            timed(0, 3 * s, &c[2]),
            timed(1, s * 35 / 10 + 2_000_000, &rust[1]),
            timed(0, s * 35 / 10, &c[3]),
        ];
        let moments = over_time(&written).unwrap();
        let at: Vec<u64> = moments.iter().map(|m| m.0).collect();
        assert_eq!(at, [s, 2 * s, 3 * s, s * 35 / 10]);
        let live = |i: usize, site: &str| crate::totals_at(&moments[i].1, site)[1] >> 10;
        // Nothing from Rust yet at 1 s (its first profile is 0.6 s later, more than
        // half an interval); then what it last wrote, then its exit profile, written
        // 2 ms after the C side's.
        assert_eq!(
            (0..4).map(|i| live(i, "rust_tree")).collect::<Vec<_>>(),
            [0, 100, 100, 300]
        );
        assert_eq!(
            (0..4).map(|i| live(i, "c_cache")).collect::<Vec<_>>(),
            [10, 20, 30, 40]
        );
    }

    #[test]
    fn one_profile_each_is_one_moment() {
        let (a, b) = (one_site("c_leak", 30), one_site("rust_leak", 100));
        let moments = over_time(&[timed(1, 7, &a), timed(0, 5, &b)]).unwrap();
        assert_eq!(moments.len(), 1);
        assert_eq!(crate::totals_at(&moments[0].1, "c_leak")[1], 30);
        assert_eq!(crate::totals_at(&moments[0].1, "rust_leak")[1], 100);
        // One instance: its profiles as they are, oldest first.
        let moments = over_time(&[timed(0, 7, &a), timed(0, 5, &b)]).unwrap();
        assert_eq!(moments.iter().map(|m| m.0).collect::<Vec<_>>(), [5, 7]);
        assert_eq!(crate::totals_at(&moments[0].1, "c_leak")[1], 0);
    }
}
