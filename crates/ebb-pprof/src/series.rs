//! Profiles taken one after another (`EBB_PROFILE_INTERVAL`, `EBB_PROFILE_SIGNAL`) as
//! one table: each site's value in each profile, sorted by how much it grew from the
//! first to the last. A leak shows as a site that keeps rising; a cache that
//! filled once rises and then stays. (heaptrack's "consumed over time" chart, as text.)

use crate::proto::Profile;
use crate::top::{by_function, format_value, index_or_default, Sites};

/// Columns [`format`] prints at most: the first and the last profile, and profiles
/// evenly spaced between them.
pub const MAX_COLUMNS: usize = 8;

/// One site's flat value in each profile.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesRow {
    pub name: String,
    pub values: Vec<i64>,
}

impl SeriesRow {
    /// The last value minus the first.
    pub fn growth(&self) -> i64 {
        self.values.last().copied().unwrap_or(0) - self.values.first().copied().unwrap_or(0)
    }

    /// Never fell from one profile to the next and rose in at least half of the steps:
    /// what a leak looks like. (A steady site's sampled estimate stays put; one sample
    /// more, a single step up, is not a trend.)
    pub fn rising(&self) -> bool {
        let steps = self.values.len().saturating_sub(1);
        let rises = self.values.windows(2).filter(|w| w[1] > w[0]).count();
        steps > 0 && self.values.windows(2).all(|w| w[1] >= w[0]) && 2 * rises >= steps
    }
}

/// The table: sample type and unit, each profile's total, rows by growth (largest
/// first, then by the last value, then by name).
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub index: String,
    pub unit: String,
    pub totals: Vec<i64>,
    pub rows: Vec<SeriesRow>,
}

/// Sample type `index` (None: the first profile's default) of `profiles`, in the order
/// given (oldest first).
pub fn series(profiles: &[&Profile], index: Option<&str>, sites: Sites) -> Result<Series, String> {
    let Some(first) = profiles.first() else {
        return Err("no profiles".into());
    };
    let index = index_or_default(first, index)?;
    let mut unit = String::new();
    let mut totals = Vec::with_capacity(profiles.len());
    let mut by_site: std::collections::HashMap<String, Vec<i64>> = Default::default();
    for (i, profile) in profiles.iter().enumerate() {
        let values =
            by_function(profile, &index, sites).map_err(|e| format!("profile {}: {e}", i + 1))?;
        unit = values.unit;
        totals.push(values.total);
        for (name, (flat, _)) in values.values {
            if flat != 0 {
                by_site
                    .entry(name)
                    .or_insert_with(|| vec![0; profiles.len()])[i] = flat;
            }
        }
    }
    let mut rows: Vec<SeriesRow> = by_site
        .into_iter()
        .map(|(name, values)| SeriesRow { name, values })
        .collect();
    rows.sort_by(|a, b| {
        (b.growth(), b.values.last())
            .cmp(&(a.growth(), a.values.last()))
            .then_with(|| a.name.cmp(&b.name))
    });
    Ok(Series {
        index,
        unit,
        totals,
        rows,
    })
}

/// Which of `count` profiles [`format`] shows: all up to [`MAX_COLUMNS`], else the
/// first, the last, and evenly spaced ones between.
pub fn shown_columns(count: usize) -> Vec<usize> {
    if count <= MAX_COLUMNS {
        return (0..count).collect();
    }
    let mut shown: Vec<usize> = (0..MAX_COLUMNS)
        .map(|k| k * (count - 1) / (MAX_COLUMNS - 1))
        .collect();
    shown.dedup();
    shown
}

/// The table, `n` rows: a column per shown profile headed by its label (`labels[i]` for
/// profile `i`: its time, say), the growth, `rising` marked `^`, and the site.
pub fn format(series: &Series, labels: &[String], n: usize) -> String {
    use std::fmt::Write;
    let columns = shown_columns(series.totals.len());
    let width = columns
        .iter()
        .map(|&c| labels.get(c).map_or(0, String::len))
        .max()
        .unwrap_or(0)
        .max(10);
    let value = |v: i64| format_value(v, &series.unit);
    let mut out = String::new();
    let rising = series.rows.iter().filter(|r| r.rising()).count();
    let _ = writeln!(
        out,
        "{} by site in {} profiles{}, by growth from the first to the last; ^: rose in at \
         least half of the steps and never fell ({} of {} sites)",
        series.index,
        series.totals.len(),
        if columns.len() < series.totals.len() {
            format!(" ({} shown)", columns.len())
        } else {
            String::new()
        },
        rising,
        series.rows.len()
    );
    let mut header = String::from("  ");
    for &c in &columns {
        let _ = write!(
            header,
            " {:>width$}",
            labels.get(c).map_or("", String::as_str)
        );
    }
    let _ = writeln!(out, "{header} {:>10}  function", "growth");
    let mut total = String::from("  ");
    for &c in &columns {
        let _ = write!(total, " {:>width$}", value(series.totals[c]));
    }
    let first = series.totals.first().copied().unwrap_or(0);
    let last = series.totals.last().copied().unwrap_or(0);
    let _ = writeln!(out, "{total} {:>10}  (total)", value(last - first));
    for row in series.rows.iter().take(n) {
        let mut line = String::from(if row.rising() { "^ " } else { "  " });
        for &c in &columns {
            let _ = write!(line, " {:>width$}", value(row.values[c]));
        }
        let _ = writeln!(line, " {:>10}  {}", value(row.growth()), row.name);
        out.push_str(&line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{Function, Line, Location, Sample, ValueType};

    /// A profile whose sites (one frame each) hold `inuse` bytes.
    fn profile(sites: &[(&str, i64)]) -> Profile {
        let mut p = Profile {
            string_table: vec![String::new(), "inuse_space".into(), "bytes".into()],
            ..Default::default()
        };
        p.sample_type.push(ValueType { r#type: 1, unit: 2 });
        for (i, &(name, value)) in sites.iter().enumerate() {
            let id = i as u64 + 1;
            p.string_table.push(name.to_string());
            p.function.push(Function {
                id,
                name: p.string_table.len() as i64 - 1,
                ..Default::default()
            });
            p.location.push(Location {
                id,
                line: vec![Line {
                    function_id: id,
                    line: 0,
                }],
                ..Default::default()
            });
            p.sample.push(Sample {
                location_id: vec![id],
                value: vec![value],
            });
        }
        p
    }

    #[test]
    fn a_site_that_rises_in_every_step_leads_and_is_marked() {
        let a = profile(&[("leak", 1 << 20), ("cache", 8 << 20), ("gone", 4 << 20)]);
        let b = profile(&[("leak", 2 << 20), ("cache", 9 << 20)]);
        let c = profile(&[("leak", 3 << 20), ("cache", 8 << 20)]);
        let s = series(&[&a, &b, &c], None, Sites::OutsideStd).unwrap();
        assert_eq!(s.index, "inuse_space");
        assert_eq!(s.totals, vec![13 << 20, 11 << 20, 11 << 20]);
        let names: Vec<&str> = s.rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["leak", "cache", "gone"]);
        assert_eq!(s.rows[0].values, vec![1 << 20, 2 << 20, 3 << 20]);
        assert!(s.rows[0].rising());
        assert!(!s.rows[1].rising(), "up, then down to where it began");
        let once = SeriesRow {
            name: "one more sample".into(),
            values: vec![0, 0, 0, 0, 512 << 10, 512 << 10],
        };
        assert!(!once.rising(), "one step up in five");
        let steady = SeriesRow {
            name: "leak".into(),
            values: vec![1, 2, 2, 3, 4],
        };
        assert!(steady.rising(), "three steps up in four, none down");
        assert_eq!(
            s.rows[2].values,
            vec![4 << 20, 0, 0],
            "freed: zero where absent"
        );
        assert!(!s.rows[2].rising());
        let labels: Vec<String> = ["1 s", "2 s", "exit"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let text = format(&s, &labels, 10);
        assert!(text.contains("1 of 3 sites"), "{text}");
        let leak = text.lines().find(|l| l.ends_with("leak")).unwrap();
        assert!(leak.starts_with('^'), "{leak}");
        assert!(
            leak.contains("3.0 MiB") && leak.contains("2.0 MiB"),
            "{leak}"
        );
        assert!(text.lines().nth(1).unwrap().contains("exit"), "{text}");
    }

    #[test]
    fn many_profiles_show_the_first_the_last_and_evenly_between() {
        assert_eq!(shown_columns(3), vec![0, 1, 2]);
        let shown = shown_columns(30);
        assert_eq!(shown.len(), MAX_COLUMNS);
        assert_eq!((shown[0], *shown.last().unwrap()), (0, 29));
        assert!(shown.windows(2).all(|w| w[0] < w[1]));
    }
}
