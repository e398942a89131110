"""ebb's background purger in the speed runs: its CPU time as a share of the whole
run's, flagged above 0.5% (issue 20: a background thread's time is the program's).

The benchmark programs print `ebb_purger_cpu_ms` and `ebb_purger_wakeups` when ebb is
their allocator (built in, or preloaded: `bench/speed/src/main.rs` `ebb_purger`,
`bench/speed/c/common.h` `report`), and `ebb_purger_sys_ms`, the kernel's part of the
purger's time, where the library reports it."""

import statistics

FLAG_PCT = 0.5


def _shares(rows):
    """Per run: (purger share of the run's CPU in %, purger ms, passes per second)."""
    out = []
    for r in rows:
        ms, cpu = r.get("ebb_purger_cpu_ms"), r.get("cpu_ms")
        if ms is None or not cpu:
            continue
        wall = r.get("wall_ms") or 0
        rate = r.get("ebb_purger_wakeups", 0) / (wall / 1e3) if wall else 0
        out.append((100 * ms / cpu, ms, rate))
    return out


def _kernel_pct(rows):
    """The kernel's part of the purger's time over the runs that report it, in %."""
    timed = [r for r in rows if r.get("ebb_purger_sys_ms") is not None and r.get("ebb_purger_cpu_ms")]
    if not timed:
        return None
    return 100 * sum(r["ebb_purger_sys_ms"] for r in timed) / sum(r["ebb_purger_cpu_ms"] for r in timed)


def purger_table(grouped, allocs, display):
    """Markdown: a row per workload and ebb build in `allocs` that reported its purger;
    None if no run did."""
    lines = []
    flagged = []
    for w, by_alloc in grouped.items():
        for a in allocs:
            runs = _shares(by_alloc.get(a, []))
            if not runs:
                continue
            share = statistics.median(s for s, _, _ in runs)
            worst = max(s for s, _, _ in runs)
            ms = statistics.median(m for _, m, _ in runs)
            rate = statistics.median(r for _, _, r in runs)
            flag = " ⚠" if share > FLAG_PCT else ""
            if flag:
                flagged.append(f"`{w}` ({display(a)})")
            kernel = _kernel_pct(by_alloc.get(a, []))
            kernel = f" (kernel {kernel:.0f}%)" if kernel is not None else ""
            lines.append(f"| `{w}` | {display(a)} | {ms:.1f} ms{kernel} | {share:.2f}%{flag} | "
                         f"{worst:.2f}% | {rate:.0f} |")
    if not lines:
        return None
    head = ("ebb's background purger thread (it drains frees into abandoned pages, looks "
            "for idle heaps and gives free memory back) during each run: its CPU time "
            "(median of the runs) and that as a share of the whole run's CPU, median and "
            f"worst run, flagged ⚠ above {FLAG_PCT}%; passes a second of wall time. In brackets "
            "after the CPU time, where reported: the part of it spent in the kernel (freeing "
            "the pages the purger gives back), over all runs. "
            "Above the flag: " + (", ".join(flagged) if flagged else "none") + ".\n")
    table = ["| workload | build | purger CPU | share (median) | share (worst run) | "
             "passes / s |", "|---|---|---|---|---|---|"] + lines
    return head + "\n" + "\n".join(table) + "\n"
