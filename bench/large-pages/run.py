#!/usr/bin/env python3
"""EBB_LARGE_PAGES=0 against =1 (and other allocators) on the speed suite, the memory
scenarios and perl/lua of the real-programs suite: wall, whole-process CPU, peak RSS,
peak AnonHugePages and page faults, interleaved runs, ratios of medians.

    run.py --out DIR [--runs 5] [--suites speed,scenarios,real]
           [--configs ebb,ebb-large] [--speed-scale 0.5] [--real-scale 0.5]
           [--workloads a,b] [--scenarios a,b]

Normally started by scripts/large-pages.sh, which builds the binaries first. For each
run: wall time, user + sys of every thread (wait4), peak RSS (ru_maxrss), minor page
faults (ru_minflt), and the largest RSS and AnonHugePages seen in
/proc/PID/smaps_rollup, sampled every 50 ms. Scenarios also give the RSS of their last
sample (after their idle phase). Results: DIR/runs.jsonl; the report: DIR/report.md.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LIBEBB = os.path.join(ROOT, "target/release/libebb.so")
MIMALLOC3 = os.path.join(ROOT, "target/mimalloc3/libmimalloc3.so")
SPEED_BIN = os.path.join(ROOT, "target/bench-speed/ebb/release/ebb-bench-speed")
SCENARIO_BIN = os.path.join(ROOT, "target/scenarios-ebb/release/ebb-scenarios")
PROGRAMS = os.path.join(ROOT, "bench/real-programs/programs")

SPEED_WORKLOADS = ["churn", "larson", "mstress", "prodcons", "sweep", "growth",
                   "compiler", "compiler-mt", "frontend", "typechecker", "cache-scratch",
                   "huge-replace"]
SCENARIOS = ["sleeping-owner-big", "sleeping-owner-small", "sleeping-owner-small-fresh",
             "worker-pool", "burst-idle", "mixed-c-rust"]

# name -> (extra environment, LD_PRELOAD for C programs or None, usable on Rust binaries)
CONFIGS = {
    "ebb": ({"EBB_LARGE_PAGES": "0"}, LIBEBB, True),
    "ebb-large": ({"EBB_LARGE_PAGES": "1"}, LIBEBB, True),
    # Dense growth (on by default) turned off (span/large_pages.rs).
    "ebb-nodense": ({"EBB_LARGE_PAGES": "0", "EBB_DENSE_HUGE_PAGES": "0"}, LIBEBB, True),
    # Guarded sampling at GWP-ASan's usual rate (README "Security").
    "ebb-guarded": ({"EBB_GUARDED_RATE": "5000"}, LIBEBB, True),
    "mimalloc3": ({}, MIMALLOC3, False),
}


def jobs(args):
    """(suite, name, argv, kind) for every measured program."""
    out = []
    if "speed" in args.suites:
        names = args.workloads.split(",") if args.workloads else SPEED_WORKLOADS
        for w in names:
            out.append(("speed", w, [SPEED_BIN, w, "--scale", str(args.speed_scale)], "rust"))
    if "scenarios" in args.suites:
        names = args.scenarios.split(",") if args.scenarios else SCENARIOS
        for s in names:
            out.append(("scenarios", s, [SCENARIO_BIN, s], "rust"))
    if "real" in args.suites:
        n = lambda base: str(max(1000, int(base * args.real_scale)))
        out.append(("real", "perl", ["perl", f"{PROGRAMS}/hashkeys.pl", n(250_000)], "c"))
        out.append(("real", "lua", ["lua5.4", f"{PROGRAMS}/hashkeys.lua", n(400_000)], "c"))
    return out


def read_rollup(pid):
    """(Rss, AnonHugePages) in KiB, or None once the process is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            text = f.read()
    except OSError:
        return None
    rss = huge = 0
    for line in text.splitlines():
        if line.startswith("Rss:"):
            rss = int(line.split()[1])
        elif line.startswith("AnonHugePages:"):
            huge = int(line.split()[1])
    return rss, huge


def run_one(argv, env_extra, preload, kind):
    env = dict(os.environ)
    env.update(env_extra)
    if kind == "c" and preload:
        env["LD_PRELOAD"] = preload
    start = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    peak = {"rss": 0, "huge": 0}
    done = threading.Event()

    def sample():
        while not done.is_set():
            got = read_rollup(proc.pid)
            if got:
                peak["rss"] = max(peak["rss"], got[0])
                peak["huge"] = max(peak["huge"], got[1])
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout = proc.stdout.read()
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    done.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    last_rss = None
    for line in stdout.decode(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("type") == "sample" and "rss" in rec:
            last_rss = rec["rss"]
    return dict(wall_s=wall, cpu_s=ru.ru_utime + ru.ru_stime, maxrss_kib=ru.ru_maxrss,
                minflt=ru.ru_minflt, peak_huge_kib=peak["huge"], peak_rss_sampled_kib=peak["rss"],
                last_rss=last_rss, exit=proc.returncode)


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def report(runs, configs):
    """A Markdown table per suite: the first config's medians, every other config's
    ratios of medians to it with the range of the per-round ratios in brackets, and
    each config's median peak AnonHugePages and page faults."""
    base = configs[0]
    keys = [("cpu_s", "CPU"), ("wall_s", "wall"), ("maxrss_kib", "peak RSS"), ("last_rss", "final RSS")]
    out = []
    suites = []
    for r in runs:
        if r["suite"] not in suites:
            suites.append(r["suite"])
    for suite in suites:
        rs_suite = [r for r in runs if r["suite"] == suite and r["exit"] == 0]
        names = []
        for r in rs_suite:
            if r["name"] not in names:
                names.append(r["name"])
        present = [c for c in configs if any(r["config"] == c for r in rs_suite)]
        used_keys = [(k, l) for k, l in keys if k != "last_rss" or suite == "scenarios"]
        head = ["program", f"{base} CPU s", f"{base} wall s", f"{base} peak RSS MiB"]
        for c in present[1:]:
            head += [f"{c}/{base} {l}" for _, l in used_keys]
        head += [f"AnonHugePages MiB {c}" for c in present] + [f"faults k {c}" for c in present]
        out.append(f"### {suite}\n")
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * len(head))
        geo = {c: {k: [] for k, _ in used_keys} for c in present[1:]}
        for name in names:
            by = {c: [r for r in rs_suite if r["name"] == name and r["config"] == c] for c in present}
            med = {c: {k: median([r[k] for r in by[c]]) for k in
                       ["wall_s", "cpu_s", "maxrss_kib", "peak_huge_kib", "minflt", "last_rss"]}
                   for c in present}
            b = med[base]
            row = [name, f"{b['cpu_s']:.2f}", f"{b['wall_s']:.2f}", f"{b['maxrss_kib'] / 1024:.0f}"]
            for c in present[1:]:
                for k, _ in used_keys:
                    if med[c][k] is None or not b[k]:
                        row.append("-")
                        continue
                    ratio = med[c][k] / b[k]
                    geo[c][k].append(ratio)
                    per_round = []
                    for rnd in sorted({r["round"] for r in by[c]}):
                        x = [r[k] for r in by[c] if r["round"] == rnd]
                        y = [r[k] for r in by[base] if r["round"] == rnd]
                        if x and y and x[0] is not None and y[0]:
                            per_round.append(x[0] / y[0])
                    spread = f" [{min(per_round):.2f}-{max(per_round):.2f}]" if per_round else ""
                    row.append(f"**{ratio:.2f}**{spread}")
            row += [f"{med[c]['peak_huge_kib'] / 1024:.0f}" for c in present]
            row += [f"{med[c]['minflt'] / 1000:.1f}" for c in present]
            out.append("| " + " | ".join(row) + " |")
        out.append("")
        for c in present[1:]:
            parts = []
            for k, label in used_keys:
                xs = geo[c][k]
                if xs:
                    parts.append(f"{label} {statistics.geometric_mean(xs):.3f} "
                                 f"({min(xs):.2f}-{max(xs):.2f})")
            out.append(f"Geometric mean of {c}/{base} over {len(names)} programs: " + "; ".join(parts) + "\n")
    runs_per = max((sum(1 for r in runs if r["name"] == runs[0]["name"] and r["config"] == base)), 0)
    out.append(f"Medians of {runs_per} interleaved runs per program and configuration.")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--suites", default="speed,scenarios,real")
    ap.add_argument("--configs", default="ebb,ebb-large")
    ap.add_argument("--speed-scale", type=float, default=0.5)
    ap.add_argument("--real-scale", type=float, default=0.5)
    ap.add_argument("--workloads", default="")
    ap.add_argument("--scenarios", default="")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "runs.jsonl")
    configs = args.configs.split(",")
    if not args.report_only:
        todo = jobs(args)
        with open(path, "w") as out:
            for rnd in range(args.runs):
                for suite, name, argv, kind in todo:
                    usable = [c for c in configs if CONFIGS[c][2] or kind == "c"]
                    k = rnd % len(usable)
                    for c in usable[k:] + usable[:k]:
                        env_extra, preload, _ = CONFIGS[c]
                        r = run_one(argv, env_extra, preload, kind)
                        r.update(suite=suite, name=name, config=c, round=rnd)
                        out.write(json.dumps(r) + "\n")
                        out.flush()
                        print(f"[{time.strftime('%H:%M:%S')}] round {rnd + 1}/{args.runs} {suite} {name} {c}: "
                              f"wall {r['wall_s']:.2f} s cpu {r['cpu_s']:.2f} s rss {r['maxrss_kib'] >> 10} MiB "
                              f"anonhuge {r['peak_huge_kib'] >> 10} MiB faults {r['minflt']} exit {r['exit']}",
                              file=sys.stderr)
    runs = [json.loads(l) for l in open(path)]
    text = report(runs, configs)
    open(os.path.join(args.out, "report.md"), "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
