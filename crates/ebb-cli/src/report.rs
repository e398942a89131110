//! What `ebb run` and `ebb compare` print, and the JSON document of a comparison.

use crate::compare::{self, format_bytes, format_secs, AllocatorSummary};
use crate::instances;
use crate::runner::RunResult;
use serde::Serialize;
use std::fmt::Write;

#[derive(Serialize)]
pub struct Skipped {
    pub allocator: String,
    pub install: String,
}

#[derive(Serialize)]
pub struct OrderEntry {
    pub round: usize,
    pub allocator: String,
}

#[derive(Serialize)]
pub struct CompareJson {
    pub command: String,
    pub builtin_workload: bool,
    pub runs: usize,
    /// The runs in the order they ran (interleaved: A B C A B C ...).
    pub order: Vec<OrderEntry>,
    pub skipped: Vec<Skipped>,
    pub summaries: Vec<AllocatorSummary>,
    /// Every run of each allocator, in the order of `summaries`.
    pub results: Vec<Vec<RunResult>>,
    /// For each allocator in the order of `summaries`: under ebb, one more run, not
    /// timed, in which each process wrote ebb's statistics (`ebb_stats`) and retention
    /// report (`ebb_retention`); the `ebb` figures of `summaries` come from it. `null`
    /// for the other allocators.
    pub ebb_details: Vec<Option<RunResult>>,
}

fn mem_line(label: &str, m: &crate::procfs::Mem) -> String {
    format!(
        "  {label:<14} RSS {:>10}   PSS {:>10}   anonymous {:>10}\n",
        format_bytes(m.rss as f64),
        format_bytes(m.pss as f64),
        format_bytes(m.anon as f64)
    )
}

pub fn run_text(command: &str, r: &RunResult) -> String {
    let mut out = String::new();
    let lib = r
        .preload
        .as_ref()
        .map_or("no LD_PRELOAD".to_string(), |p| p.display().to_string());
    let _ = writeln!(
        out,
        "\nebb run: {command}\n  allocator      {} ({lib})",
        r.allocator
    );
    let status = if r.interrupted {
        "interrupted (Ctrl-C): tree stopped".to_string()
    } else if r.exit.stopped_by_ebb {
        "stopped by ebb after the idle phase".to_string()
    } else {
        r.exit.describe()
    };
    let _ = writeln!(out, "  status         {status}");
    let mut time = format!("  time           wall {:.2} s", r.wall_s);
    if let Some(ready) = r.ready_s {
        let _ = write!(time, " (ready after {ready:.2} s)");
    }
    if let Some(drive) = r.drive_s {
        let _ = write!(time, " (drive {drive:.2} s)");
    }
    let _ = writeln!(
        out,
        "{time}, user {:.2} s, sys {:.2} s (CPU of the whole tree, whole run)",
        r.user_s, r.sys_s
    );
    let _ = writeln!(
        out,
        "  processes      {} at most at once, {} seen, {} samples",
        r.max_processes,
        r.processes_seen,
        r.samples.len()
    );
    out.push_str(&mem_line("peak", &r.peak));
    if r.peak_process_rss == r.peak.rss && r.samples.iter().all(|s| s.rss < r.peak.rss) {
        let _ = writeln!(
            out,
            "                 (peak RSS: the kernel's high-water mark of one process, which the \
             samples missed; PSS and anonymous: the samples')"
        );
    }
    for m in &r.idle_marks {
        let mem = crate::procfs::Mem {
            rss: m.rss,
            pss: m.pss,
            anon: m.anon,
        };
        out.push_str(&mem_line(&format!("idle {}", format_secs(m.after_s)), &mem));
    }
    out.push_str(&mem_line("final", &r.final_mem));
    if !r.ebb_stats.is_empty() {
        let refs = [r];
        if let Some(e) = compare::ebb_summary(&refs) {
            let _ = writeln!(
                out,
                "  ebb stats      {} process(es) at exit: allocated {}, committed {}, purged {}, purger wake-ups {:.0}, purger CPU {}",
                e.processes,
                format_bytes(e.allocated),
                format_bytes(e.committed),
                format_bytes(e.purged),
                e.purger_wakeups,
                compare::format_purger_cpu(&e)
            );
            if e.purger_share > compare::PURGER_SHARE_FLAG {
                let why = match compare::purger_kernel_share(&e) {
                    Some(k) => format!(
                        "{:.0}% of it in the kernel, which frees the pages it gives back",
                        k * 100.0
                    ),
                    None => "mostly the kernel's cost of freeing the pages it gave back".into(),
                };
                let _ = writeln!(
                    out,
                    "                 ⚠ the background purger used more than {:.1}% of the CPU ({why}; \
                     EBB_PURGE_DELAY sets how soon)",
                    compare::PURGER_SHARE_FLAG * 100.0
                );
            }
        }
    }
    if let Some(text) = retention_text(&r.ebb_retention, "RSS at the end") {
        out.push_str(&text);
    }
    out
}

/// The last retention report of the ebb process with the most RSS then (at exit, or
/// when ebb stopped the tree under `--breakdown`): what its RSS held (the parts add up
/// to it), biggest first; `signalled` labels a report asked for by a signal.
pub fn retention_text(reports: &[serde_json::Value], signalled: &str) -> Option<String> {
    let bytes = |r: &serde_json::Value, key: &str| r[key].as_u64().unwrap_or(0);
    // Each instance's reports are in the order written: its last is its last word.
    let mut last: Vec<&serde_json::Value> = Vec::new();
    for r in reports {
        let same = |l: &&serde_json::Value| l["pid"] == r["pid"] && l["instance"] == r["instance"];
        match last.iter_mut().find(|l| same(l)) {
            Some(l) => *l = r,
            None => last.push(r),
        }
    }
    // A process with two instances (each measuring the same RSS a moment apart): their
    // reports merged, the RSS the one holding more of ebb's memory measured
    // (`instances`); then the process with the most RSS.
    last.sort_by_key(|r| (bytes(r, "pid"), std::cmp::Reverse(bytes(r, "ebb_total"))));
    let mut merged: Vec<serde_json::Value> = Vec::new();
    for r in &last {
        match merged.last_mut() {
            Some(m) if bytes(m, "pid") == bytes(r, "pid") => {
                if m.get("instances").is_none() {
                    *m = instances::merge_reports(m, r);
                }
            }
            _ => merged.push((*r).clone()),
        }
    }
    let report = merged.iter().max_by_key(|r| bytes(r, "rss"))?;
    let rss = bytes(report, "rss");
    let when = match report["trigger"].as_str() {
        Some("signal") => signalled,
        _ => "RSS at exit   ",
    };
    if rss == 0 {
        return None;
    }
    let mut parts: Vec<(&str, u64)> = [
        ("live blocks", "live"),
        ("free in pages with live blocks", "free_in_live_pages"),
        ("free pages", "free_in_empty_pages"),
        ("free spans awaiting purge", "free_spans"),
        ("kept huge mappings", "huge_kept"),
        ("freed by other threads, not taken in", "remote_freed"),
        ("rounding", "rounding"),
        ("ebb metadata", "metadata"),
        ("file-backed", "file_backed"),
        ("stacks", "stack"),
        ("thread stacks", "thread_stacks"),
        ("anonymous, not ebb's", "foreign_anon"),
        ("other", "other"),
    ]
    .iter()
    .map(|&(label, key)| (label, bytes(report, key)))
    .filter(|&(_, b)| b * 200 >= rss)
    .collect();
    parts.sort_by_key(|p| std::cmp::Reverse(p.1));
    let mut which = if merged.len() > 1 {
        format!(
            "pid {}, the largest of {} ebb processes",
            bytes(report, "pid"),
            merged.len()
        )
    } else {
        format!("pid {}", bytes(report, "pid"))
    };
    if report.get("instances").is_some() {
        which.push_str(", its two ebb instances together");
    }
    let list = parts
        .iter()
        .map(|&(label, b)| {
            let split = if label == "free pages" {
                empty_pages_split(report)
            } else {
                String::new()
            };
            format!(
                "{label} {} ({:.0}%{split})",
                ebb_pprof::top::format_value(b as i64, "bytes"),
                b as f64 * 100.0 / rss as f64
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    Some(format!(
        "  {when} {} ({which}; parts of at least 0.5%): {list}\n",
        ebb_pprof::top::format_value(rss as i64, "bytes")
    ))
}

/// Who holds a report's free pages (`Retention::empty_stashed` and its siblings), as
/// "; stashed 1.0 MiB, in heaps 3.0 MiB": the parts that are not zero, or nothing for
/// a report without them (an older `libebb.so`'s).
fn empty_pages_split(report: &serde_json::Value) -> String {
    [
        ("stashed", "empty_stashed"),
        ("in heaps", "empty_in_heaps"),
        ("abandoned", "empty_abandoned"),
    ]
    .iter()
    .filter_map(|&(label, key)| {
        let b = report[key].as_u64().filter(|&b| b > 0)?;
        Some(format!(
            "; {label} {}",
            ebb_pprof::top::format_value(b as i64, "bytes")
        ))
    })
    .collect()
}

pub fn compare_text(command: &str, runs: usize, summaries: &[AllocatorSummary]) -> String {
    let mut out = String::new();
    let first = summaries.first().map_or("", |s| s.allocator.as_str());
    let _ = writeln!(
        out,
        "\nebb compare: {command}\n{runs} interleaved run(s) per allocator; medians, ×ratio of medians to {first}, min–max below.\n\
         CPU is user/sys of the whole process tree; RSS/PSS are sums over the tree.\n"
    );
    out.push_str(&compare::text_table(summaries));
    if let Some(line) = compare::versions_line(summaries) {
        let _ = writeln!(out, "{line}");
    }
    for s in summaries.iter().filter(|s| s.failed_runs > 0) {
        let _ = writeln!(
            out,
            "note: {} failed in {} of {} runs",
            s.allocator, s.failed_runs, s.runs
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A process with two ebb instances writes two exit reports that measure the same
    /// RSS a moment apart: the summary is both merged, with the RSS of the instance
    /// holding ebb's memory, not the one that served libc's few allocations, even when
    /// the latter measured a page more; across processes, the one with the most RSS.
    #[test]
    fn the_instance_holding_the_memory_speaks_for_its_process() {
        let report = |pid: u64, instance: u64, rss: u64, live: u64| {
            json!({"pid": pid, "instance": instance, "trigger": "exit", "rss": rss,
                   "ebb_total": live, "live": live, "foreign_anon": rss - live})
        };
        let text = retention_text(
            &[
                report(5, 1, 100 << 20, 90 << 20),
                report(5, 2, (100 << 20) + 4096, 0),
                report(6, 3, 20 << 20, 10 << 20),
            ],
            "RSS now",
        )
        .unwrap();
        assert!(
            text.contains("pid 5, the largest of 2 ebb processes"),
            "{text}"
        );
        assert!(text.contains("live blocks 90.0 MiB"), "{text}");
        assert!(text.contains("its two ebb instances together"), "{text}");
        assert!(text.contains("100.0 MiB (pid 5"), "{text}");
    }

    /// The free pages' part says who holds them, naming only the holders with bytes;
    /// a report without the split (an older library's) reads as before.
    #[test]
    fn free_pages_say_who_holds_them() {
        let mut report = json!({"pid": 7, "instance": 1, "trigger": "exit", "rss": 100 << 20,
            "ebb_total": 100 << 20, "live": 90 << 20, "free_in_empty_pages": 10 << 20,
            "empty_stashed": 4 << 20, "empty_in_heaps": 6 << 20, "empty_abandoned": 0});
        let text = retention_text(std::slice::from_ref(&report), "RSS now").unwrap();
        assert!(
            text.contains("free pages 10.0 MiB (10%; stashed 4.0 MiB; in heaps 6.0 MiB)"),
            "{text}"
        );
        report.as_object_mut().unwrap().remove("empty_stashed");
        report.as_object_mut().unwrap().remove("empty_in_heaps");
        let text = retention_text(&[report], "RSS now").unwrap();
        assert!(text.contains("free pages 10.0 MiB (10%)"), "{text}");
    }
}
