//! A process with two ebb instances (a Rust program on ebb, with `libebb.so` preloaded
//! for its C code, as `ebb run` makes one) writes two retention reports at each moment,
//! one per instance (`instance`). Each measures the whole process's RSS and splits it
//! into its own memory and the rest, so the other instance's memory shows up in it as
//! "anonymous memory ebb does not own". Merged, the report says what ebb as a whole
//! holds: the instances' parts added up, and the rest without either instance's memory.

use serde_json::Value;

/// The parts of ebb's own memory, each instance's apart from the other's: they add up.
const EBB_PARTS: &[&str] = &[
    "held",
    "ebb_total",
    "live",
    "free_in_live_pages",
    "free_in_empty_pages",
    "empty_stashed",
    "empty_in_heaps",
    "empty_abandoned",
    "free_spans",
    "huge_kept",
    "remote_freed",
    "rounding",
    "metadata",
];

fn bytes(r: &Value, key: &str) -> u64 {
    r[key].as_u64().unwrap_or(0)
}

/// `main`'s report with `other`'s (the same process's other instance, measured a
/// moment apart) merged in: `main`'s RSS and its parts that are not ebb's, less the
/// anonymous memory that is `other`'s; both instances' own parts added up. Marked
/// `"instances": 2`.
pub fn merge_reports(main: &Value, other: &Value) -> Value {
    let mut merged = main.clone();
    let Some(fields) = merged.as_object_mut() else {
        return merged;
    };
    for &key in EBB_PARTS {
        if main.get(key).is_some() || other.get(key).is_some() {
            fields.insert(key.into(), (bytes(main, key) + bytes(other, key)).into());
        }
    }
    // `main` counted `other`'s memory as anonymous memory that is not its own.
    let foreign = bytes(main, "foreign_anon").saturating_sub(bytes(other, "ebb_total"));
    fields.insert("foreign_anon".into(), foreign.into());
    fields.insert("instances".into(), 2.into());
    merged
}

/// Of one process's reports by two instances, which instance holds more of ebb's
/// memory: its reports give the moments. `None` with one instance.
pub fn split(reports: &[&Value]) -> Option<(u64, u64)> {
    let mut instances: Vec<u64> = reports
        .iter()
        .filter_map(|r| r["instance"].as_u64())
        .collect();
    instances.sort_unstable();
    instances.dedup();
    if instances.len() != 2 {
        return None;
    }
    let held = |i: u64| {
        reports
            .iter()
            .filter(|r| r["instance"].as_u64() == Some(i))
            .map(|r| bytes(r, "ebb_total"))
            .max()
            .unwrap_or(0)
    };
    let (a, b) = (instances[0], instances[1]);
    Some(if held(b) > held(a) { (b, a) } else { (a, b) })
}

/// One process's reports over time, `(t, report)` in time order, with the reports of
/// a second instance merged into the first's ([`split`]: the one holding more): at
/// each of its moments, the other's latest report written by then, or up to half the
/// main series' median interval after (each instance's report thread answers the same
/// request, a moment apart). Unchanged with one instance.
pub fn merge_series(points: Vec<(f64, &Value)>) -> Vec<(f64, Value)> {
    let reports: Vec<&Value> = points.iter().map(|p| p.1).collect();
    let Some((main, other)) = split(&reports) else {
        return points.into_iter().map(|(t, r)| (t, r.clone())).collect();
    };
    let of = |instance: u64| -> Vec<(f64, &Value)> {
        points
            .iter()
            .filter(|p| p.1["instance"].as_u64() == Some(instance))
            .copied()
            .collect()
    };
    let (main, other) = (of(main), of(other));
    let mut gaps: Vec<f64> = main.windows(2).map(|w| w[1].0 - w[0].0).collect();
    gaps.sort_by(f64::total_cmp);
    let slack = gaps.get(gaps.len() / 2).map_or(f64::INFINITY, |g| g / 2.0);
    main.into_iter()
        .map(|(t, r)| {
            let joined = other.iter().rev().find(|(u, _)| *u <= t + slack);
            (
                t,
                joined.map_or_else(|| r.clone(), |(_, o)| merge_reports(r, o)),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MIB: u64 = 1 << 20;

    /// An instance's report of a 100 MiB process: `own` MiB of it live in this
    /// instance, and what is not its own anonymous except 4 MiB of code.
    fn report(instance: u64, t: f64, own: u64) -> Value {
        json!({"pid": 9, "instance": instance, "t": t, "rss": 100 * MIB,
               "ebb_total": own * MIB, "live": own * MIB, "file_backed": 4 * MIB,
               "foreign_anon": (96 - own) * MIB})
    }

    #[test]
    fn the_other_instance_is_no_longer_foreign_memory() {
        let merged = merge_reports(&report(1, 0.0, 60), &report(2, 0.0, 30));
        assert_eq!(bytes(&merged, "live"), 90 * MIB);
        assert_eq!(bytes(&merged, "ebb_total"), 90 * MIB);
        assert_eq!(bytes(&merged, "foreign_anon"), 6 * MIB);
        assert_eq!(bytes(&merged, "rss"), 100 * MIB);
        let parts: u64 = ["live", "file_backed", "foreign_anon"]
            .iter()
            .map(|k| bytes(&merged, k))
            .sum();
        assert_eq!(parts, 100 * MIB, "the parts still add up to the RSS");
    }

    #[test]
    fn a_series_takes_the_other_instances_latest_report() {
        // Instance 2 holds more: its moments; instance 1 answers 0.01 s later each
        // time, and last wrote at 1.0 s.
        let reports = [
            report(2, 0.0, 50),
            report(1, 0.01, 10),
            report(2, 1.0, 60),
            report(1, 1.01, 20),
            report(2, 2.0, 70),
        ];
        let points: Vec<(f64, &Value)> = reports
            .iter()
            .map(|r| (r["t"].as_f64().unwrap(), r))
            .collect();
        let merged = merge_series(points);
        let live: Vec<u64> = merged.iter().map(|(_, r)| bytes(r, "live") / MIB).collect();
        assert_eq!(live, [60, 80, 90]);
        let times: Vec<f64> = merged.iter().map(|p| p.0).collect();
        assert_eq!(times, [0.0, 1.0, 2.0]);
        // One instance: as it was.
        let one: Vec<(f64, &Value)> = vec![(0.0, &reports[0])];
        assert_eq!(bytes(&merge_series(one)[0].1, "live"), 50 * MIB);
    }
}
