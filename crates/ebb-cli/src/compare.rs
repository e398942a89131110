//! Summaries of interleaved runs: medians, min–max spread and ratios to the first
//! allocator, as a text table, markdown and JSON.

use crate::runner::RunResult;
use serde::Serialize;
use std::fmt::Write;

/// The figures the table shows, in order: (key, label, unit).
pub const METRICS: &[(&str, &str, Unit)] = &[
    ("wall_s", "wall", Unit::Seconds),
    ("user_s", "user", Unit::Seconds),
    ("sys_s", "sys", Unit::Seconds),
    ("peak_rss", "peak RSS", Unit::Bytes),
    ("peak_pss", "peak PSS", Unit::Bytes),
    ("final_rss", "final RSS", Unit::Bytes),
];

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unit {
    Seconds,
    Bytes,
}

/// One metric over the runs of one allocator.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// median / the first allocator's median.
    pub ratio: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct AllocatorSummary {
    pub allocator: String,
    /// What version ran (`alloc::version`), where something says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    pub runs: usize,
    pub failed_runs: usize,
    /// Index (in `runs`) of the run with the median peak RSS: the one charted.
    pub median_run: usize,
    pub metrics: std::collections::BTreeMap<String, Summary>,
    /// RSS at each idle mark (median over runs), as (seconds into idle, bytes).
    pub idle_rss: Vec<(f64, f64)>,
    /// ebb's own figures summed over the processes of each run (median over runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ebb: Option<EbbSummary>,
}

#[derive(Clone, Debug, Serialize)]
pub struct EbbSummary {
    pub processes: f64,
    pub allocated: f64,
    pub committed: f64,
    pub purged: f64,
    pub purger_wakeups: f64,
    /// CPU time of ebb's background purger threads, seconds, and as a share of the
    /// whole tree's CPU (user + sys) in that run: its cost is the program's.
    pub purger_cpu_s: f64,
    pub purger_share: f64,
    /// The part of `purger_cpu_s` spent in the kernel (seconds; mostly freeing the
    /// pages the purger gave back), if the library reports it (`purger_sys_ns`).
    pub purger_sys_s: Option<f64>,
}

/// A background purger above this share of the tree's CPU is flagged (issue 20's
/// limit).
pub const PURGER_SHARE_FLAG: f64 = 0.005;

pub fn metric(run: &RunResult, key: &str) -> f64 {
    match key {
        "wall_s" => run.wall_s,
        "user_s" => run.user_s,
        "sys_s" => run.sys_s,
        "peak_rss" => run.peak.rss as f64,
        "peak_pss" => run.peak.pss as f64,
        "final_rss" => run.final_mem.rss as f64,
        _ => f64::NAN,
    }
}

pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The processes that wrote statistics in one run (a process may hold two ebb
/// instances, each with its line).
fn distinct_pids(run: &RunResult) -> usize {
    let mut pids: Vec<u64> = run
        .ebb_stats
        .iter()
        .filter_map(|s| s.get("pid").and_then(|v| v.as_u64()))
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids.len().max(usize::from(!run.ebb_stats.is_empty()))
}

/// Sums a field over the statistics of one run (a line per ebb instance of each process).
fn ebb_field(run: &RunResult, field: &str) -> f64 {
    run.ebb_stats
        .iter()
        .filter_map(|s| s.get(field).and_then(|v| v.as_f64()))
        .sum()
}

pub fn ebb_summary(runs: &[&RunResult]) -> Option<EbbSummary> {
    if runs.iter().all(|r| r.ebb_stats.is_empty()) {
        return None;
    }
    let med =
        |f: &dyn Fn(&RunResult) -> f64| median(&runs.iter().map(|r| f(r)).collect::<Vec<_>>());
    Some(EbbSummary {
        processes: med(&|r| distinct_pids(r) as f64),
        allocated: med(&|r| ebb_field(r, "allocated")),
        committed: med(&|r| ebb_field(r, "committed")),
        purged: med(&|r| ebb_field(r, "purged")),
        purger_wakeups: med(&|r| ebb_field(r, "purger_wakeups")),
        purger_cpu_s: med(&|r| ebb_field(r, "purger_cpu_ns") / 1e9),
        purger_share: med(&|r| {
            let cpu = r.user_s + r.sys_s;
            if cpu > 0.0 {
                ebb_field(r, "purger_cpu_ns") / 1e9 / cpu
            } else {
                0.0
            }
        }),
        purger_sys_s: runs
            .iter()
            .flat_map(|r| &r.ebb_stats)
            .any(|s| s.get("purger_sys_ns").is_some())
            .then(|| med(&|r| ebb_field(r, "purger_sys_ns") / 1e9)),
    })
}

/// The kernel's share of the purger's CPU time, if known and the purger ran at all.
pub fn purger_kernel_share(e: &EbbSummary) -> Option<f64> {
    let sys = e.purger_sys_s?;
    (e.purger_cpu_s > 0.0).then(|| (sys / e.purger_cpu_s).min(1.0))
}

/// Summaries of each allocator's runs (in the order given), ratios to the first.
pub fn summarise(names: &[String], runs: &[Vec<RunResult>]) -> Vec<AllocatorSummary> {
    let mut out: Vec<AllocatorSummary> = Vec::new();
    for (name, runs) in names.iter().zip(runs) {
        let refs: Vec<&RunResult> = runs.iter().collect();
        let mut metrics = std::collections::BTreeMap::new();
        for &(key, _, _) in METRICS {
            let values: Vec<f64> = runs.iter().map(|r| metric(r, key)).collect();
            let min = values.iter().copied().fold(f64::INFINITY, f64::min);
            let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let median = median(&values);
            let ratio = out
                .first()
                .and_then(|first| first.metrics.get(key))
                .map(|base: &Summary| median / base.median)
                .or(Some(1.0).filter(|_| out.is_empty()))
                .filter(|r| r.is_finite());
            metrics.insert(
                key.to_string(),
                Summary {
                    median,
                    min,
                    max,
                    ratio,
                },
            );
        }
        let peak: Vec<f64> = runs.iter().map(|r| r.peak.rss as f64).collect();
        let mid = median(&peak);
        let median_run = (0..runs.len())
            .min_by(|&a, &b| (peak[a] - mid).abs().total_cmp(&(peak[b] - mid).abs()))
            .unwrap_or(0);
        let marks = runs.first().map_or(0, |r| r.idle_marks.len());
        let idle_rss = (0..marks)
            .filter_map(|i| {
                let at = runs.first()?.idle_marks.get(i)?.after_s;
                let values: Vec<f64> = runs
                    .iter()
                    .filter_map(|r| r.idle_marks.get(i).map(|m| m.rss as f64))
                    .collect();
                Some((at, median(&values)))
            })
            .collect();
        out.push(AllocatorSummary {
            allocator: name.clone(),
            version: None,
            runs: runs.len(),
            failed_runs: runs.iter().filter(|r| !r.exit.success()).count(),
            median_run,
            metrics,
            idle_rss,
            ebb: ebb_summary(&refs),
        });
    }
    out
}

pub fn format_value(value: f64, unit: Unit) -> String {
    if value.is_nan() {
        return "-".into();
    }
    match unit {
        Unit::Seconds if value < 10.0 => format!("{value:.2} s"),
        Unit::Seconds => format!("{value:.1} s"),
        Unit::Bytes => format_bytes(value),
    }
}

pub fn format_bytes(bytes: f64) -> String {
    let mib = bytes / (1024.0 * 1024.0);
    if mib >= 100.0 {
        format!("{mib:.0} MiB")
    } else {
        format!("{mib:.1} MiB")
    }
}

fn format_range(s: &Summary, unit: Unit) -> String {
    match unit {
        Unit::Seconds => format!("{:.2}–{:.2}", s.min, s.max),
        Unit::Bytes => format!(
            "{:.0}–{:.0}",
            s.min / (1024.0 * 1024.0),
            s.max / (1024.0 * 1024.0)
        ),
    }
}

fn cell(s: &Summary, unit: Unit, first: bool) -> String {
    let value = format_value(s.median, unit);
    match s.ratio {
        Some(r) if !first => format!("{value} ×{r:.2}"),
        _ => value,
    }
}

/// Rows of (label, one cell per allocator): medians with ratios, then min–max rows.
fn rows(summaries: &[AllocatorSummary], markdown: bool) -> Vec<(String, Vec<String>)> {
    let mut rows = Vec::new();
    for &(key, label, unit) in METRICS {
        let cells = summaries
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let s = &a.metrics[key];
                if markdown {
                    format!("{} ({})", cell(s, unit, i == 0), format_range(s, unit))
                } else {
                    cell(s, unit, i == 0)
                }
            })
            .collect();
        rows.push((label.to_string(), cells));
        if !markdown {
            let spread = summaries
                .iter()
                .map(|a| format_range(&a.metrics[key], unit))
                .collect();
            rows.push(("  min–max".to_string(), spread));
        }
    }
    let marks = summaries
        .iter()
        .map(|a| a.idle_rss.len())
        .max()
        .unwrap_or(0);
    for i in 0..marks {
        let Some(at) = summaries
            .iter()
            .find_map(|a| a.idle_rss.get(i).map(|m| m.0))
        else {
            continue;
        };
        let base = summaries[0].idle_rss.get(i).map(|m| m.1);
        let cells = summaries
            .iter()
            .enumerate()
            .map(|(j, a)| match a.idle_rss.get(i) {
                Some(&(_, v)) => match base {
                    Some(b) if j > 0 && b > 0.0 => format!("{} ×{:.2}", format_bytes(v), v / b),
                    _ => format_bytes(v),
                },
                None => "-".into(),
            })
            .collect();
        rows.push((format!("RSS idle {}", format_secs(at)), cells));
    }
    if summaries.iter().any(|a| a.ebb.is_some()) {
        let field = |f: &dyn Fn(&EbbSummary) -> String| -> Vec<String> {
            summaries
                .iter()
                .map(|a| a.ebb.as_ref().map_or("-".into(), f))
                .collect()
        };
        rows.push((
            "ebb allocated".into(),
            field(&|e| format_bytes(e.allocated)),
        ));
        rows.push((
            "ebb committed".into(),
            field(&|e| format_bytes(e.committed)),
        ));
        rows.push(("ebb purged".into(), field(&|e| format_bytes(e.purged))));
        rows.push((
            "ebb purger wake-ups".into(),
            field(&|e| format!("{:.0}", e.purger_wakeups)),
        ));
        rows.push(("ebb purger CPU".into(), field(&|e| format_purger_cpu(e))));
    }
    rows
}

/// The purger's CPU time and share of the tree's CPU, flagged above
/// [`PURGER_SHARE_FLAG`], and how much of that time was the kernel's:
/// `3.1 ms (0.2%; kernel 40%)`, `40 ms (1.3% ⚠; kernel 85%)`.
pub fn format_purger_cpu(e: &EbbSummary) -> String {
    let ms = e.purger_cpu_s * 1e3;
    let time = if ms >= 10.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.1} ms")
    };
    let flag = if e.purger_share > PURGER_SHARE_FLAG {
        " ⚠"
    } else {
        ""
    };
    let kernel = purger_kernel_share(e)
        .map(|k| format!("; kernel {:.0}%", k * 100.0))
        .unwrap_or_default();
    format!("{time} ({:.1}%{flag}{kernel})", e.purger_share * 100.0)
}

pub fn format_secs(s: f64) -> String {
    if (s - s.round()).abs() < 1e-6 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

/// The comparison table for a terminal.
pub fn text_table(summaries: &[AllocatorSummary]) -> String {
    let rows = rows(summaries, false);
    let label_width = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0) + 2;
    let widths: Vec<usize> = (0..summaries.len())
        .map(|i| {
            rows.iter()
                .map(|r| r.1[i].chars().count())
                .chain(std::iter::once(summaries[i].allocator.chars().count()))
                .max()
                .unwrap_or(0)
                + 3
        })
        .collect();
    let mut out = String::new();
    let _ = write!(out, "{:label_width$}", "");
    for (a, w) in summaries.iter().zip(&widths) {
        let _ = write!(out, "{:>w$}", a.allocator);
    }
    out.push('\n');
    for (label, cells) in rows {
        let _ = write!(out, "{label:label_width$}");
        for (c, w) in cells.iter().zip(&widths) {
            let _ = write!(out, "{c:>w$}");
        }
        out.push('\n');
    }
    out
}

pub fn markdown_table(summaries: &[AllocatorSummary], command: &str, runs: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Command: `{command}`, {runs} interleaved runs per allocator. Median (min–max); \
         ×r is the ratio of medians to {}.\n",
        summaries.first().map_or("", |a| a.allocator.as_str())
    );
    let _ = write!(out, "| |");
    for a in summaries {
        let _ = write!(out, " {} |", a.allocator);
    }
    out.push('\n');
    let _ = write!(out, "|---|");
    for _ in summaries {
        out.push_str("---:|");
    }
    out.push('\n');
    for (label, cells) in rows(summaries, true) {
        let _ = write!(out, "| {label} |");
        for c in cells {
            let _ = write!(out, " {c} |");
        }
        out.push('\n');
    }
    if let Some(line) = versions_line(summaries) {
        let _ = write!(out, "\n{line}\n");
    }
    out
}

/// "Versions: glibc: glibc 2.36; jemalloc: libjemalloc2 5.3.0-1; ..." for the
/// allocators whose version is known; None if none is.
pub fn versions_line(summaries: &[AllocatorSummary]) -> Option<String> {
    let known: Vec<String> = summaries
        .iter()
        .filter_map(|s| Some(format!("{}: {}", s.allocator, s.version.as_ref()?)))
        .collect();
    (!known.is_empty()).then(|| format!("Versions: {}.", known.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}

#[cfg(test)]
mod purger_tests {
    use super::*;

    fn summary(cpu_s: f64, share: f64) -> EbbSummary {
        EbbSummary {
            processes: 1.0,
            allocated: 0.0,
            committed: 0.0,
            purged: 0.0,
            purger_wakeups: 3.0,
            purger_cpu_s: cpu_s,
            purger_share: share,
            purger_sys_s: None,
        }
    }

    #[test]
    fn a_purger_above_half_a_percent_is_flagged() {
        assert_eq!(format_purger_cpu(&summary(0.0031, 0.002)), "3.1 ms (0.2%)");
        assert_eq!(format_purger_cpu(&summary(0.040, 0.013)), "40 ms (1.3% ⚠)");
        assert_eq!(format_purger_cpu(&summary(0.001, 0.005)), "1.0 ms (0.5%)");
    }

    #[test]
    fn the_kernels_part_of_the_purgers_time_is_shown_when_reported() {
        let with = |sys_s| EbbSummary {
            purger_sys_s: Some(sys_s),
            ..summary(0.040, 0.013)
        };
        assert_eq!(
            format_purger_cpu(&with(0.034)),
            "40 ms (1.3% ⚠; kernel 85%)"
        );
        assert!((purger_kernel_share(&with(0.034)).unwrap() - 0.85).abs() < 1e-9);
        // A purger that never ran has no share to split.
        let idle = EbbSummary {
            purger_sys_s: Some(0.0),
            ..summary(0.0, 0.0)
        };
        assert_eq!(purger_kernel_share(&idle), None);
        assert_eq!(format_purger_cpu(&idle), "0.0 ms (0.0%)");
    }

    #[test]
    fn the_purgers_kernel_time_comes_from_every_instance_of_the_run() {
        let mut run = RunResult::new("prog".into(), "ebb".into(), None);
        run.user_s = 1.0;
        run.ebb_stats = vec![
            serde_json::json!({"purger_cpu_ns": 30_000_000u64, "purger_sys_ns": 20_000_000u64}),
            serde_json::json!({"purger_cpu_ns": 10_000_000u64, "purger_sys_ns": 10_000_000u64}),
        ];
        let e = ebb_summary(&[&run]).unwrap();
        assert!((e.purger_cpu_s - 0.040).abs() < 1e-9);
        assert!((e.purger_sys_s.unwrap() - 0.030).abs() < 1e-9);
        assert!((purger_kernel_share(&e).unwrap() - 0.75).abs() < 1e-9);
        // A library that does not report it: no kernel part rather than a false 0%.
        run.ebb_stats = vec![serde_json::json!({"purger_cpu_ns": 30_000_000u64})];
        let e = ebb_summary(&[&run]).unwrap();
        assert_eq!(e.purger_sys_s, None);
        assert_eq!(format_purger_cpu(&e), "30 ms (3.0% ⚠)");
    }
}
