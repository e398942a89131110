#!/usr/bin/env python3
"""Aggregate the JSON lines of the memory scenarios and check ebb's targets.

Usage: report.py RAW_DIR [--markdown] [--strict]

RAW_DIR holds one file per run, named <scenario>.<alloc>.<run>.jsonl (written by
scripts/memory-scenarios.sh). For each scenario the report prints, per sample, the
median over runs of each allocator's RSS in MiB next to the live bytes the program held,
then the peak RSS and wall time, and finally PASS/FAIL for each of ebb's targets
(computed on the medians). --strict: exit 1 if a target fails.
"""
import glob
import json
import os
import statistics
import sys

MIB = 1 << 20
ALLOC_ORDER = ["ebb", "glibc", "jemalloc", "tcmalloc", "mimalloc", "mimalloc2"]
SCENARIO_ORDER = [
    "sleeping-owner-big",
    "sleeping-owner-small",
    "sleeping-owner-small-fresh",
    "sleeping-owner-strings",
    "worker-pool",
    "burst-idle",
    "mixed-c-rust",
    "mixed-c",
    "sparse-survivors",
    "store",
    "many-threads",
]
TITLES = {
    "sleeping-owner-big": "sleeping-owner-big: owner builds 500 x 1M f32 then sleeps; a refresher replaces every vector each round",
    "sleeping-owner-small": "sleeping-owner-small: ~1 GB of 16 B..1 KiB objects; refresher builds the new item, then drops the old",
    "sleeping-owner-small-fresh": "sleeping-owner-small-fresh: as above, but the refresher's first action is a free",
    "sleeping-owner-strings": "sleeping-owner-strings: ~372 MiB of 8-100 B strings; refresher replaces them item by item",
    "worker-pool": "worker-pool: 4 threads, 10 builds of 3 phases, 5% sparse survivors; sampled after a 1 s pause",
    "burst-idle": "burst-idle: 1 GiB over 4 threads, 90% freed, every thread parks; ms after the last free",
    "mixed-c-rust": "mixed-c-rust: 8 threads interleave C malloc/free (c/cside.c) and Rust allocations",
    "mixed-c": "mixed-c: the same in plain C (c/mixed.c) under LD_PRELOAD",
    "sparse-survivors": "sparse-survivors: 3 threads build 300 MB of object graphs, texts and buffers, each frees its neighbour's but a random 5% of whole objects, then idle; s after the last free",
    "store": "store: 3 indexers, 1 writer with a forever 4 KiB page cache and multi-page runs freed at commit, 2 readers; after each batch",
    "many-threads": "many-threads: 1,000 threads each hold 50 blocks of 16 B..2 KiB (log-uniform), then idle; s after all hold their blocks",
}
# Scenarios whose samples carry the touched-page bound (`touched_bytes`): their tables
# show RSS (bound) per allocator, the bound being computed from each allocator's own
# addresses.


def load(raw_dir):
    """{scenario: {alloc: [run, ...]}}, run = {"samples": [...], "summary": {...}}."""
    data = {}
    for path in sorted(glob.glob(os.path.join(raw_dir, "*.jsonl"))):
        scenario, alloc, _run, _ext = os.path.basename(path).rsplit(".", 3)
        samples, summary = [], None
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                obj = json.loads(line)
                if obj.get("type") == "sample":
                    samples.append(obj)
                elif obj.get("type") == "summary":
                    summary = obj
        if summary is None:
            print(f"warning: {path} has no summary line (the run failed?)", file=sys.stderr)
            continue
        data.setdefault(scenario, {}).setdefault(alloc, []).append(
            {"samples": samples, "summary": summary}
        )
    return data


def ordered(keys, order):
    return [k for k in order if k in keys] + sorted(k for k in keys if k not in order)


def sample_keys(runs_by_alloc):
    keys = []
    for runs in runs_by_alloc.values():
        for run in runs:
            for s in run["samples"]:
                k = (s["phase"], s["idx"])
                if k not in keys:
                    keys.append(k)
    return keys


def median_sample(runs, key, field):
    values = [
        s[field] for run in runs for s in run["samples"] if (s["phase"], s["idx"]) == key and field in s
    ]
    return statistics.median(values) if values else None


def median_summary(runs, field):
    values = [run["summary"][field] for run in runs if field in run["summary"]]
    return statistics.median(values) if values else None


def label(scenario, key):
    phase, idx = key
    if scenario in ("burst-idle", "sparse-survivors", "many-threads") and phase == "idle":
        return f"idle +{idx / 1000:g} s"
    if phase in ("round", "build", "batch"):
        return f"{phase} {idx}"
    return phase if idx == 0 else f"{phase} {idx}"


def shown(keys):
    """Long series (50 rounds): keep the first 5, every 5th and the last."""
    if len(keys) <= 20:
        return keys
    out = []
    for i, k in enumerate(keys):
        if i < 5 or (i + 1) % 5 == 0 or i == len(keys) - 1:
            out.append(k)
    return out


def mib(v):
    return "-" if v is None else f"{v / MIB:.1f}"


def is_number(x):
    x = str(x)
    return x == "-" or x.replace(".", "", 1).replace("-", "", 1).isdigit()


class Table:
    def __init__(self, header):
        self.header = header
        self.rows = []

    def add(self, row):
        self.rows.append(row)

    def render(self, markdown):
        if markdown:
            lines = ["| " + " | ".join(self.header) + " |"]
            cols = list(zip(*self.rows)) if self.rows else [[] for _ in self.header]
            align = ["---:" if i > 0 and all(is_number(x) or x == "" for x in col) else "---"
                     for i, col in enumerate(cols)]
            lines.append("|" + "|".join(align) + "|")
            for r in self.rows:
                lines.append("| " + " | ".join(r) + " |")
            return "\n".join(lines)
        widths = [max(len(str(x)) for x in col) for col in zip(self.header, *self.rows)]

        def cell(x, w):
            x = str(x)
            return x.rjust(w) if is_number(x) else x.ljust(w)

        fmt = lambda r: "  ".join(cell(x, w) for x, w in zip(r, widths)).rstrip()
        return "\n".join([fmt(self.header), fmt(["-" * w for w in widths])] + [fmt(r) for r in self.rows])


def anon_note(anon, bound):
    """The bound counts heap pages only; RSS also holds the program's file pages (the
    executable, libc: ~3 MiB here), so the anonymous part is shown beside it."""
    if anon is None or not bound:
        return ""
    return f"; anonymous {mib(anon)} MiB ({anon / bound:.2f} x)"


def scenario_table(scenario, by_alloc, markdown):
    allocs = ordered(by_alloc.keys(), ALLOC_ORDER)
    runs = {a: len(by_alloc[a]) for a in allocs}
    keys = sample_keys(by_alloc)
    header = ["sample", "live MiB"] + [f"{a} RSS" for a in allocs]
    has_bound = any("touched_bytes" in s for runs in by_alloc.values() for run in runs for s in run["samples"])
    if has_bound:
        header = ["sample", "live MiB"] + [f"{a} RSS (bound)" for a in allocs]
    t = Table(header)

    def cell(a, key):
        r = mib(median_sample(by_alloc[a], key, "rss"))
        b = median_sample(by_alloc[a], key, "touched_bytes")
        return r if b is None else f"{r} ({mib(b)})"

    for key in shown(keys):
        lives = [median_sample(by_alloc[a], key, "live_bytes") for a in allocs]
        lives = [v for v in lives if v is not None]
        live = statistics.median(lives) if lives else None
        t.add([label(scenario, key), mib(live)] + [cell(a, key) for a in allocs])
    if scenario == "many-threads":
        for key in keys:
            if key[0] != "idle":
                continue
            t.add([f"KB/thread {label(scenario, key)}", ""] + [
                "-" if per_thread(by_alloc[a], key) is None else f"{per_thread(by_alloc[a], key) / 1000:.0f}"
                for a in allocs])
    t.add(["peak RSS (VmHWM)", ""] + [mib(median_summary(by_alloc[a], "peak_rss")) for a in allocs])
    t.add(["wall time s", ""] + [
        "-" if median_summary(by_alloc[a], "wall_ms") is None else f"{median_summary(by_alloc[a], 'wall_ms') / 1000:.2f}"
        for a in allocs
    ])
    if any(median_summary(by_alloc[a], "cpu_ms") is not None for a in allocs):
        t.add(["CPU s (process)", ""] + [
            "-" if median_summary(by_alloc[a], "cpu_ms") is None else f"{median_summary(by_alloc[a], 'cpu_ms') / 1000:.2f}"
            for a in allocs
        ])
    if "ebb" in by_alloc and purger_share(by_alloc["ebb"]) is not None:
        kernel = purger_kernel_share(by_alloc["ebb"])
        row = "ebb purger % of CPU (wake-ups" + ("; kernel's part)" if kernel is not None else ")")
        cell = f"{purger_share(by_alloc['ebb']):.2f}% ({median_summary(by_alloc['ebb'], 'ebb_purger_wakeups'):.0f}"
        cell += f"; {kernel:.0f}%)" if kernel is not None else ")"
        t.add([row, ""] + [cell if a == "ebb" else "" for a in allocs])
    runs_note = ", ".join(f"{a}: {n}" for a, n in runs.items())
    title = TITLES.get(scenario, scenario)
    head = f"### {scenario}\n\n{title}. RSS in MiB, median of runs ({runs_note}).\n" if markdown else \
        f"== {title}\n   RSS in MiB, median of runs ({runs_note})\n"
    return head + "\n" + t.render(markdown) + "\n"


def purger_share(runs):
    """ebb: the purger thread's CPU as a percentage of the process's, median over runs."""
    shares = [
        run["summary"]["ebb_purger_cpu_ns"] / 1e6 / run["summary"]["cpu_ms"] * 100
        for run in runs
        if run["summary"].get("cpu_ms") and "ebb_purger_cpu_ns" in run["summary"]
    ]
    return statistics.median(shares) if shares else None


def purger_kernel_share(runs):
    """ebb: the part of the purger's CPU time spent in the kernel (giving pages back), as a
    percentage of the purger's time, median over the runs that report it."""
    shares = [
        run["summary"]["ebb_purger_sys_ns"] / run["summary"]["ebb_purger_cpu_ns"] * 100
        for run in runs
        if run["summary"].get("ebb_purger_cpu_ns") and "ebb_purger_sys_ns" in run["summary"]
    ]
    return statistics.median(shares) if shares else None


def per_thread(runs, key):
    """many-threads: RSS above the baseline sample per thread, median over runs."""
    values = []
    for run in runs:
        base = next((s["rss"] for s in run["samples"] if s["phase"] == "baseline"), None)
        at = next((s["rss"] for s in run["samples"] if (s["phase"], s["idx"]) == key), None)
        threads = run["summary"].get("threads")
        if base is not None and at is not None and threads:
            values.append((at - base) / threads)
    return statistics.median(values) if values else None


def check_targets(data):
    """Returns [(target, status, detail)] with status PASS/FAIL/SKIP."""
    results = []

    def rss(scenario, alloc, key):
        return median_sample(data.get(scenario, {}).get(alloc, []), key, "rss")

    def live(scenario, alloc, key):
        return median_sample(data.get(scenario, {}).get(alloc, []), key, "live_bytes")

    for scenario in ("sleeping-owner-big", "sleeping-owner-small", "sleeping-owner-small-fresh"):
        name = f"{scenario}: ebb RSS <= 1.10 x live + 32 MiB every round"
        if "ebb" not in data.get(scenario, {}):
            results.append((name, "SKIP", "no ebb data"))
            continue
        worst = None
        for key in sample_keys(data[scenario]):
            if key[0] != "round":
                continue
            r, l = rss(scenario, "ebb", key), live(scenario, "ebb", key)
            limit = 1.10 * l + 32 * MIB
            margin = r - limit
            if worst is None or margin > worst[0]:
                worst = (margin, key[1], r, limit)
        if worst is None:
            results.append((name, "SKIP", "no rounds"))
            continue
        status = "PASS" if worst[0] <= 0 else "FAIL"
        results.append((name, status,
                        f"worst round {worst[1]}: RSS {mib(worst[2])} MiB vs limit {mib(worst[3])} MiB"))

    s = "sleeping-owner-strings"
    name = f"{s}: ebb RSS <= 1.08 x live every round (issue 14)"
    if "ebb" not in data.get(s, {}):
        results.append((name, "SKIP", "no ebb data"))
    else:
        worst = None
        for key in sample_keys(data[s]):
            if key[0] != "round":
                continue
            r, l = rss(s, "ebb", key), live(s, "ebb", key)
            if worst is None or r / l > worst[0]:
                worst = (r / l, key[1], r, l)
        if worst is None:
            results.append((name, "SKIP", "no rounds"))
        else:
            status = "PASS" if worst[0] <= 1.08 else "FAIL"
            results.append((name, status, f"worst round {worst[1]}: RSS {mib(worst[2])} MiB = "
                            f"{worst[0]:.3f} x live {mib(worst[3])} MiB"))

    s = "worker-pool"
    wp = data.get(s, {})
    name = "worker-pool: ebb RSS after each build <= min(jemalloc, mimalloc)"
    if "ebb" in wp and ("jemalloc" in wp or "mimalloc" in wp):
        fails, detail = [], []
        for key in sample_keys(wp):
            if key[0] != "build":
                continue
            e = rss(s, "ebb", key)
            others = [v for v in (rss(s, "jemalloc", key), rss(s, "mimalloc", key)) if v is not None]
            best = min(others)
            if e > best:
                fails.append(f"build {key[1]}: {mib(e)} > {mib(best)}")
        missing = [a for a in ("jemalloc", "mimalloc") if a not in wp]
        note = f" (no data for {', '.join(missing)})" if missing else ""
        results.append((name, "PASS" if not fails else "FAIL",
                        ("all builds" if not fails else f"{len(fails)} builds over: " + "; ".join(fails)) + note))
    else:
        results.append((name, "SKIP", "needs ebb and jemalloc/mimalloc data"))
    name = "worker-pool: ebb RSS after build 10 within 5% of after build 2"
    if "ebb" in wp:
        builds = [k for k in sample_keys(wp) if k[0] == "build"]
        if len(builds) >= 2:
            first = ("build", 2)
            last = builds[-1]
            r2, rl = rss(s, "ebb", first), rss(s, "ebb", last)
            ratio = rl / r2
            results.append((name, "PASS" if ratio <= 1.05 else "FAIL",
                            f"build {last[1]}: {mib(rl)} MiB vs build 2: {mib(r2)} MiB ({(ratio - 1) * 100:+.1f}%)"))
        else:
            results.append((name, "SKIP", "fewer than 2 builds"))
    else:
        results.append((name, "SKIP", "no ebb data"))

    s = "burst-idle"
    name = "burst-idle: ebb RSS <= live + 10% + 16 MiB within 2 s of the last free"
    if "ebb" in data.get(s, {}):
        idle = [k for k in sample_keys(data[s]) if k[0] == "idle" and k[1] <= 2000]
        key = max(idle, key=lambda k: k[1])
        r, l = rss(s, "ebb", key), live(s, "ebb", key)
        limit = 1.10 * l + 16 * MIB
        first_ok = next((k[1] for k in sorted(idle, key=lambda k: k[1])
                         if rss(s, "ebb", k) <= 1.10 * live(s, "ebb", k) + 16 * MIB), None)
        when = "never within 2 s" if first_ok is None else f"first met at +{first_ok / 1000:g} s"
        results.append((name, "PASS" if r <= limit else "FAIL",
                        f"at +{key[1] / 1000:g} s: RSS {mib(r)} MiB vs limit {mib(limit)} MiB (live {mib(l)}); {when}"))
    else:
        results.append((name, "SKIP", "no ebb data"))

    for s in ("mixed-c-rust", "mixed-c"):
        name = f"{s}: ebb RSS after the last round within 5% of after round 5"
        if "ebb" in data.get(s, {}):
            rounds = [k for k in sample_keys(data[s]) if k[0] == "round"]
            last = rounds[-1]
            r5, rl = rss(s, "ebb", ("round", 5)), rss(s, "ebb", last)
            if r5 is None:
                results.append((name, "SKIP", "fewer than 5 rounds"))
                continue
            ratio = rl / r5
            results.append((name, "PASS" if ratio <= 1.05 else "FAIL",
                            f"round {last[1]}: {mib(rl)} MiB vs round 5: {mib(r5)} MiB ({(ratio - 1) * 100:+.1f}%)"))
        else:
            results.append((name, "SKIP", "no ebb data"))
    s = "sparse-survivors"
    if "ebb" in data.get(s, {}):
        key = ("idle", 2000)
        r, l = rss(s, "ebb", key), live(s, "ebb", key)
        b = median_sample(data[s]["ebb"], key, "touched_bytes")
        if r is None:
            key = max(k for k in sample_keys(data[s]) if k[0] == "idle")
            r, l = rss(s, "ebb", key), live(s, "ebb", key)
            b = median_sample(data[s]["ebb"], key, "touched_bytes")
        limit = 1.10 * l + 16 * MIB
        results.append((f"{s}: ebb RSS <= 1.10 x live + 16 MiB within 2 s of idle",
                        "PASS" if r <= limit else "FAIL",
                        f"at +{key[1] / 1000:g} s: RSS {mib(r)} MiB vs limit {mib(limit)} MiB (live {mib(l)})"))
        results.append((f"{s}: ebb RSS <= 1.05 x the touched-page bound within 2 s of idle",
                        "PASS" if r <= 1.05 * b else "FAIL",
                        f"RSS {mib(r)} MiB vs bound {mib(b)} MiB ({r / b:.2f} x)"
                        + anon_note(median_sample(data[s]["ebb"], key, "anon"), b)))
    else:
        results.append((f"{s}: targets", "SKIP", "no ebb data"))

    s = "store"
    if "ebb" in data.get(s, {}):
        batches = [k for k in sample_keys(data[s]) if k[0] == "batch"]
        last = batches[-1]
        r5, rl = rss(s, "ebb", ("batch", 5)), rss(s, "ebb", last)
        if r5 is not None:
            ratio = rl / r5
            results.append((f"{s}: ebb drift from batch 5 to the last <= 5%",
                            "PASS" if ratio <= 1.05 else "FAIL",
                            f"batch {last[1]}: {mib(rl)} MiB vs batch 5: {mib(r5)} MiB ({(ratio - 1) * 100:+.1f}%)"))
        g = rss(s, "glibc", last)
        if g is not None:
            results.append((f"{s}: ebb RSS at the last batch <= glibc's",
                            "PASS" if rl <= g else "FAIL", f"{mib(rl)} vs {mib(g)} MiB"))
    else:
        results.append((f"{s}: targets", "SKIP", "no ebb data"))

    s = "many-threads"
    if "ebb" in data.get(s, {}):
        live_pt = per_thread(data[s]["ebb"], ("idle", 0))
        results.append((f"{s}: ebb <= 64 KB per thread while live",
                        "PASS" if live_pt <= 64000 else "FAIL", f"{live_pt / 1000:.0f} KB/thread"))
        idle = [k for k in sample_keys(data[s]) if k[0] == "idle" and k[1] <= 2000]
        key = max(idle, key=lambda k: k[1])
        idle_pt = per_thread(data[s]["ebb"], key)
        results.append((f"{s}: ebb <= 40 KB per thread after 2 s idle",
                        "PASS" if idle_pt <= 40000 else "FAIL",
                        f"{idle_pt / 1000:.0f} KB/thread at +{key[1] / 1000:g} s"))
    else:
        results.append((f"{s}: targets", "SKIP", "no ebb data"))

    # Issue 20: the purger under 0.5% of the process's CPU in every scenario (Rust
    # builds: the C program's summary carries no CPU figures).
    for s in ordered(data.keys(), SCENARIO_ORDER):
        share = purger_share(data[s].get("ebb", []))
        if share is not None:
            kernel = purger_kernel_share(data[s].get("ebb", []))
            detail = f"{share:.2f}%"
            if kernel is not None:
                detail += f" ({kernel:.0f}% of the purger's time in the kernel)"
            results.append((f"{s}: ebb purger < 0.5% of the process's CPU",
                            "PASS" if share < 0.5 else "FAIL", detail))
    return results


def versions(data, markdown):
    seen = {}
    for scenario, by_alloc in data.items():
        for alloc, runs in by_alloc.items():
            for run in runs:
                sm = run["summary"]
                key = (alloc, "C (LD_PRELOAD)" if scenario == "mixed-c" else "Rust")
                seen.setdefault(key, (sm.get("alloc_version", "-"), sm.get("malloc_from", "?")))
    t = Table(["allocator", "binary", "version", "malloc() comes from"])
    for (alloc, kind), (ver, origin) in sorted(seen.items(), key=lambda kv: (kv[0][1], ALLOC_ORDER.index(kv[0][0]) if kv[0][0] in ALLOC_ORDER else 99)):
        t.add([alloc, kind, ver, origin])
    return t.render(markdown)


def times_table(raw_dir, markdown):
    """Build and run times recorded by scripts/memory-scenarios.sh next to RAW_DIR."""
    parent = os.path.dirname(os.path.abspath(raw_dir))
    out = []
    builds = os.path.join(parent, "build-times.txt")
    if os.path.exists(builds):
        t = Table(["build", "seconds"])
        for line in open(builds):
            parts = line.split()
            if len(parts) == 2:
                t.add(parts)
        out.append(("### Build times\n\n" if markdown else "== build times\n") + t.render(markdown) + "\n")
    runs = os.path.join(parent, "run-times.txt")
    if os.path.exists(runs):
        per = {}
        total = 0.0
        for line in open(runs):
            parts = line.split()
            if len(parts) >= 4:
                scenario, alloc, ms = parts[0], parts[1], float(parts[3])
                per.setdefault(scenario, {}).setdefault(alloc, []).append(ms)
                total += ms
        allocs = ordered({a for d in per.values() for a in d}, ALLOC_ORDER)
        t = Table(["scenario (median s per run)"] + allocs)
        for scenario in ordered(per.keys(), SCENARIO_ORDER):
            t.add([scenario] + [
                f"{statistics.median(per[scenario][a]) / 1000:.1f}" if a in per[scenario] else "-" for a in allocs
            ])
        head = "### Run times\n\n" if markdown else "== run times\n"
        out.append(head + t.render(markdown) + f"\n\nAll runs: {total / 1000:.0f} s in total.\n")
    return "\n".join(out)


def main():
    args = sys.argv[1:]
    markdown = "--markdown" in args
    strict = "--strict" in args
    paths = [a for a in args if not a.startswith("--")]
    if len(paths) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    data = load(paths[0])
    if not data:
        print(f"no results in {paths[0]}", file=sys.stderr)
        return 1
    out = []
    machine = os.path.join(os.path.dirname(os.path.abspath(paths[0])), "machine.txt")
    if os.path.exists(machine):
        t = Table(["machine", ""])
        for line in open(machine):
            if ":" in line:
                k, v = line.split(":", 1)
                t.add([k.strip(), v.strip()])
        out.append("### Machine\n" if markdown else "== machine")
        out.append(t.render(markdown) + "\n")
    out.append("### Allocators\n" if markdown else "== allocators")
    out.append(versions(data, markdown) + "\n")
    for scenario in ordered(data.keys(), SCENARIO_ORDER):
        out.append(scenario_table(scenario, data[scenario], markdown))
    quick = any(run["summary"].get("quick") for by_alloc in data.values() for runs in by_alloc.values() for run in runs)
    if quick:
        out.append("(--quick: tiny sizes; the targets below are not meaningful at this scale)\n")
    times = times_table(paths[0], markdown)
    if times:
        out.append(times)
    results = check_targets(data)
    out.append("### Targets (ebb, on the medians)\n" if markdown else "== targets (ebb, on the medians)")
    t = Table(["target", "result", "detail"])
    for name, status, detail in results:
        t.add([name, f"**{status}**" if markdown and status == "FAIL" else status, detail])
    out.append(t.render(markdown))
    print("\n".join(out))
    failed = sum(1 for _, s, _ in results if s == "FAIL")
    passed = sum(1 for _, s, _ in results if s == "PASS")
    skipped = sum(1 for _, s, _ in results if s == "SKIP")
    print(f"\nebb targets: {passed} PASS, {failed} FAIL, {skipped} SKIP")
    return 1 if strict and failed else 0


if __name__ == "__main__":
    sys.exit(main())
