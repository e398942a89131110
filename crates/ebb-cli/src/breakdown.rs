//! `ebb run --breakdown`: ebb's retention report over time. Every interval each ebb
//! process of the tree is asked, by a signal it catches (`EBB_REPORT_SIGNAL`), to
//! append its report to its `EBB_REPORT` file; after the run the reports become a
//! series per process: what its RSS held (live blocks, free blocks in pages, free spans
//! awaiting purge, ...) at each moment, printed as a table and drawn as stacked areas.

use crate::instances;
use crate::procfs;
use crate::runner::RunResult;
use ebb_pprof::top::format_value;
use std::fmt::Write;

/// The signal on which ebb processes write a retention report under `--breakdown`:
/// real-time, below `--profile`'s, so both can be on.
pub fn report_signal() -> i32 {
    libc::SIGRTMAX() - 4
}

/// Ask each of `pids` that catches [`report_signal`] (an ebb process with
/// `EBB_REPORT_SIGNAL` set; any other would die of it) for a report now, through its
/// `ebb-report` thread only (`procfs::signal_thread`: a process without one, just
/// starting or forked and not yet at its first slow path, is skipped); returns the
/// processes asked.
pub fn request(pids: &[i32]) -> Vec<i32> {
    let signal = report_signal();
    pids.iter()
        .copied()
        .filter(|&pid| procfs::catches_signal(pid, signal))
        .filter(|&pid| procfs::signal_thread(pid, "ebb-report", signal))
        .collect()
}

/// Milliseconds on the monotonic clock ebb stamps its reports with
/// (`measured_at_ms`, `CLOCK_MONOTONIC_COARSE`).
pub fn monotonic_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

/// Give each report `t`: seconds since the run started (at `start_ms`), on the
/// samples' time axis.
pub fn stamp(reports: &mut [serde_json::Value], start_ms: u64) {
    for r in reports {
        let Some(at) = r["measured_at_ms"].as_u64() else {
            continue;
        };
        let t = at.saturating_sub(start_ms) as f64 / 1000.0;
        if let Some(obj) = r.as_object_mut() {
            obj.insert("t".into(), t.into());
        }
    }
}

/// The parts of a report, bottom of the stack first: (JSON key, label). Everything
/// that is not ebb's is summed into the last.
pub const PARTS: &[(&str, &str)] = &[
    ("live", "live blocks"),
    ("free_in_live_pages", "free in pages with live blocks"),
    ("free_in_empty_pages", "free pages"),
    ("free_spans", "free spans awaiting purge"),
    ("huge_kept", "kept huge mappings"),
    ("remote_freed", "freed by other threads"),
    ("rounding", "rounding"),
    ("metadata", "ebb metadata"),
    ("not_ebbs", "not ebb's (code, stacks, other mappings)"),
];

const NOT_EBBS: &[&str] = &[
    "file_backed",
    "stack",
    "thread_stacks",
    "foreign_anon",
    "other",
];

fn bytes(r: &serde_json::Value, key: &str) -> u64 {
    if key == "not_ebbs" {
        return NOT_EBBS.iter().map(|k| bytes(r, k)).sum();
    }
    r[key].as_u64().unwrap_or(0)
}

/// One process's reports in time order: `(t, report)`; of a process with two ebb
/// instances, both instances' reports merged (`instances::merge_series`).
pub struct Series {
    pub pid: u64,
    pub points: Vec<(f64, serde_json::Value)>,
}

impl Series {
    /// Bytes of part `key` at each point.
    pub fn part(&self, key: &str) -> Vec<(f64, u64)> {
        self.points
            .iter()
            .map(|(t, r)| (*t, bytes(r, key)))
            .collect()
    }

    pub fn peak_rss(&self) -> u64 {
        self.points
            .iter()
            .map(|(_, r)| bytes(r, "rss"))
            .max()
            .unwrap_or(0)
    }
}

/// The series of the process whose RSS was largest at any report among those with at
/// least two reports, and how many processes reported.
/// A process with two ebb instances (a Rust program on ebb with `libebb.so` preloaded)
/// has a series of each (`instance`): merged into one, at the moments of the one that
/// held more of ebb's memory (`instances::merge_series`).
pub fn largest(result: &RunResult) -> Option<(Series, usize)> {
    let mut pids: Vec<u64> = result
        .ebb_retention
        .iter()
        .filter_map(|r| r["pid"].as_u64())
        .collect();
    pids.sort_unstable();
    pids.dedup();
    let series = pids.iter().map(|&pid| {
        let mut points: Vec<(f64, &serde_json::Value)> = result
            .ebb_retention
            .iter()
            .filter(|r| r["pid"].as_u64() == Some(pid))
            .filter_map(|r| Some((r["t"].as_f64()?, r)))
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        Series {
            pid,
            points: instances::merge_series(points),
        }
    });
    let held = |s: &Series| {
        s.points
            .iter()
            .map(|(_, r)| bytes(r, "ebb_total"))
            .max()
            .unwrap_or(0)
    };
    // Of the processes that lived through two reports (one is the exit report
    // `run_text` already prints; a process shorter than the interval has no series).
    let best = series
        .filter(|s| s.points.len() >= 2)
        .max_by_key(|s| (s.peak_rss(), held(s)))?;
    Some((best, pids.len()))
}

/// Rows of the printed table at most; the peak and the last report are always rows.
const ROWS: usize = 14;

/// The table `ebb run --breakdown` prints: the largest process's parts over time.
pub fn text(result: &RunResult) -> Option<String> {
    let (series, processes) = largest(result)?;
    let n = series.points.len();
    // The first report at the peak (`max_by_key` keeps the last of equals).
    let peak = (0..n)
        .rev()
        .max_by_key(|&i| bytes(&series.points[i].1, "rss"))
        .unwrap_or(0);
    // Columns of parts that reach 0.5% of the peak RSS somewhere; the rest are summed
    // into "other".
    let peak_rss = series.peak_rss().max(1);
    let shown: Vec<&(&str, &str)> = PARTS
        .iter()
        .filter(|(key, _)| {
            series
                .points
                .iter()
                .any(|(_, r)| bytes(r, key) * 200 >= peak_rss)
        })
        .collect();
    // Rows where RSS or a shown part moved by 0.5% of the peak since the last row (an
    // idle phase is one row, not a page of equal ones), then at most ROWS of those.
    let moved = |a: &serde_json::Value, b: &serde_json::Value| {
        std::iter::once(&"rss")
            .chain(shown.iter().map(|(key, _)| key))
            .any(|key| bytes(a, key).abs_diff(bytes(b, key)) * 200 > peak_rss)
    };
    let mut rows = vec![0];
    for i in 1..n {
        let last = &series.points[*rows.last().unwrap()].1;
        if i == peak || i == n - 1 || moved(last, &series.points[i].1) {
            rows.push(i);
        }
    }
    if rows.len() > ROWS {
        let m = rows.len();
        let mut picked: Vec<usize> = (0..ROWS).map(|k| rows[k * (m - 1) / (ROWS - 1)]).collect();
        picked.push(peak);
        picked.sort_unstable();
        picked.dedup();
        rows = picked;
    }
    let short = |key: &str| match key {
        "live" => "live",
        "free_in_live_pages" => "free in live pg",
        "free_in_empty_pages" => "free pages",
        "free_spans" => "free spans",
        "huge_kept" => "huge kept",
        "remote_freed" => "remote freed",
        "rounding" => "rounding",
        "metadata" => "metadata",
        _ => "not ebb's",
    };
    let mut which = if processes > 1 {
        format!(
            "pid {}, the largest of {processes} ebb processes",
            series.pid
        )
    } else {
        format!("pid {}", series.pid)
    };
    if series
        .points
        .iter()
        .any(|(_, r)| r.get("instances").is_some())
    {
        which.push_str(", its two ebb instances together");
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  breakdown      what RSS held over time ({which}; {n} reports, {} shown: where a part moved by 0.5% of the peak):",
        rows.len()
    );
    let _ = write!(out, "  {:>8} {:>10}", "t (s)", "RSS");
    for (key, _) in &shown {
        let _ = write!(out, " {:>15}", short(key));
    }
    out.push('\n');
    for &i in &rows {
        let (t, r) = (series.points[i].0, &series.points[i].1);
        let _ = write!(
            out,
            "  {t:>8.2} {:>10}",
            format_value(bytes(r, "rss") as i64, "bytes")
        );
        for (key, _) in &shown {
            let _ = write!(out, " {:>15}", format_value(bytes(r, key) as i64, "bytes"));
        }
        let mark = match r["trigger"].as_str() {
            Some("exit") => "  at exit",
            _ if i == peak => "  peak",
            _ => "",
        };
        let _ = writeln!(out, "{mark}");
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result_with(reports: Vec<serde_json::Value>) -> RunResult {
        let mut r = RunResult::new("x".into(), "ebb".into(), None);
        r.ebb_retention = reports;
        r
    }

    #[test]
    fn stamps_reports_on_the_run_clock() {
        let mut reports = vec![json!({"measured_at_ms": 10_500}), json!({"pid": 1})];
        stamp(&mut reports, 10_000);
        assert_eq!(reports[0]["t"].as_f64(), Some(0.5));
        assert!(reports[1].get("t").is_none());
    }

    #[test]
    fn picks_the_process_with_the_largest_rss_and_orders_its_reports() {
        let report = |pid: u64, t: f64, rss: u64, live: u64| json!({"pid": pid, "t": t, "rss": rss, "live": live, "file_backed": rss - live});
        let result = result_with(vec![
            report(1, 0.5, 10 << 20, 1 << 20),
            report(2, 1.0, 50 << 20, 40 << 20),
            report(2, 0.5, 20 << 20, 10 << 20),
            report(1, 1.0, 11 << 20, 1 << 20),
        ]);
        let (series, processes) = largest(&result).unwrap();
        assert_eq!((series.pid, processes), (2, 2));
        assert_eq!(series.part("live"), vec![(0.5, 10 << 20), (1.0, 40 << 20)]);
        assert_eq!(
            series.part("not_ebbs"),
            vec![(0.5, 10 << 20), (1.0, 10 << 20)]
        );
        let table = text(&result).unwrap();
        assert!(
            table.contains("pid 2, the largest of 2 ebb processes"),
            "{table}"
        );
        assert!(table.contains("40.0 MiB"), "{table}");
        assert!(
            table.lines().nth(2).unwrap().contains("10.0 MiB"),
            "{table}"
        );
        assert!(!table.contains("free spans"), "{table}");
    }

    #[test]
    fn a_single_report_is_no_series() {
        let result = result_with(vec![json!({"pid": 1, "t": 0.5, "rss": 1})]);
        assert!(largest(&result).is_none());
        assert!(text(&result).is_none());
    }

    #[test]
    fn rows_keep_the_peak_and_the_last_report() {
        let reports = (0..100)
            .map(|i| {
                let rss = if i == 37 { 900u64 << 20 } else { 100 << 20 };
                json!({"pid": 7, "t": i as f64 / 10.0, "rss": rss, "live": rss / 2,
                       "trigger": if i == 99 { "exit" } else { "signal" }})
            })
            .collect();
        let table = text(&result_with(reports)).unwrap();
        let rows: Vec<&str> = table.lines().skip(2).collect();
        assert!(rows.len() <= ROWS + 2, "{table}");
        assert!(
            rows.iter()
                .any(|l| l.contains("3.70") && l.ends_with("peak")),
            "{table}"
        );
        assert!(rows.last().unwrap().ends_with("at exit"), "{table}");
    }

    #[test]
    fn an_unchanging_stretch_is_one_row() {
        // 10 reports of a burst, then 40 equal ones of idle.
        let reports = (0..50)
            .map(|i| {
                let live: u64 = if i < 10 {
                    (i + 1) * (10 << 20)
                } else {
                    5 << 20
                };
                json!({"pid": 7, "t": i as f64 / 10.0, "rss": live + (2 << 20), "live": live})
            })
            .collect();
        let table = text(&result_with(reports)).unwrap();
        let rows: Vec<&str> = table.lines().skip(2).collect();
        // The 10 of the burst, the first of the idle stretch, the last report.
        assert_eq!(rows.len(), 12, "{table}");
        assert!(rows[10].trim_start().starts_with("1.00"), "{table}");
        assert!(rows[11].trim_start().starts_with("4.90"), "{table}");
    }

    /// A process with two ebb instances: one series, both instances' parts added up at
    /// the moments of the one holding more, the other's memory no longer "not ebb's".
    #[test]
    fn of_two_instances_in_one_process_both_are_shown_together() {
        let report = |instance: u64, t: f64, total: u64| {
            json!({"pid": 9, "instance": instance, "t": t, "rss": 100 << 20,
                   "ebb_total": total, "live": total, "foreign_anon": (100 << 20) - total})
        };
        let result = result_with(vec![
            report(1, 0.5, 1 << 20),
            report(2, 0.5, 80 << 20),
            report(2, 1.0, 90 << 20),
            report(1, 1.0, 1 << 20),
        ]);
        let (series, processes) = largest(&result).unwrap();
        assert_eq!(processes, 1);
        assert_eq!(series.part("live"), vec![(0.5, 81 << 20), (1.0, 91 << 20)]);
        assert_eq!(
            series.part("foreign_anon"),
            vec![(0.5, 19 << 20), (1.0, 9 << 20)]
        );
        assert!(text(&result)
            .unwrap()
            .contains("its two ebb instances together"));
    }
}
