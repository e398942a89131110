#!/usr/bin/env python3
"""Time the store scenario (issue 14's churn target) under several allocators, interleaved.

Runs `ebb-scenarios store` (the glibc build, so every allocator is LD_PRELOADed the same
way, Rust and C alike) RUNS times per allocator, A B C A B C ..., with
SCENARIO_NO_BOUND=1 (the touched-page walk is the sampler's cost, not the workload's),
and prints medians of: wall time of the whole process, the batches' own time (`work_ms`,
start to end barrier, no sampling), whole-process CPU (user + sys of all threads, from
wait4), minor page faults, RSS at batch 5 and 30 and the drift between them, and for ebb the purger's CPU
and wake-ups (EBB_STATS_FILE). Ratios are to the first allocator.

  python3 bench/scenarios/churn.py --bin target/scenarios-glibc/release/ebb-scenarios \\
      --alloc jemalloc=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \\
      --alloc ebb=target/release/libebb.so --alloc glibc= --runs 7
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def run_once(binary, preload, extra_env, quick):
    env = dict(os.environ)
    env["SCENARIO_NO_BOUND"] = "1"
    env.update(extra_env)
    stats_dir = tempfile.mkdtemp(prefix="churn-stats-")
    if preload:
        env["LD_PRELOAD"] = preload
        env["EBB_STATS_FILE"] = os.path.join(stats_dir, "ebb-stats-%p.json")
    args = [binary, "store"] + (["--quick"] if quick else [])
    start = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, env=env)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    if status != 0:
        sys.exit(f"{args} under {preload or 'glibc'} failed: status {status}")
    samples = {}
    summary = None
    for line in out.decode().splitlines():
        rec = json.loads(line)
        if rec["type"] == "sample":
            samples[rec["idx"]] = rec["rss"]
        elif rec["type"] == "summary":
            summary = rec
    last = max(samples)
    first = min(5, last)
    r = {
        "wall": wall,
        "work": summary["work_ms"] / 1000.0,
        "cpu": usage.ru_utime + usage.ru_stime,
        "faults": usage.ru_minflt,
        "rss_first": samples[first] / 2**20,
        "rss_last": samples[last] / 2**20,
        "drift": samples[last] / samples[first] - 1.0,
    }
    stats = glob.glob(os.path.join(stats_dir, "ebb-stats-*.json"))
    if stats:
        # A JSON line per ebb instance of the process.
        with open(stats[0]) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        r["purger_cpu"] = sum(s.get("purger_cpu_ns", 0) for s in lines) / 1e9
        r["purger_wakeups"] = sum(s.get("purger_wakeups", 0) for s in lines)
    for f in stats:
        os.unlink(f)
    os.rmdir(stats_dir)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--alloc", action="append", required=True,
                    help="NAME=LIBRARY to LD_PRELOAD (empty: none); ratios to the first")
    ap.add_argument("--env", action="append", default=[],
                    help="NAME:VAR=VALUE, an environment variable for one allocator")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", help="write every run here")
    a = ap.parse_args()
    allocs = [x.split("=", 1) for x in a.alloc]
    envs = {}
    for e in a.env:
        name, kv = e.split(":", 1)
        k, v = kv.split("=", 1)
        envs.setdefault(name, {})[k] = v
    results = {name: [] for name, _ in allocs}
    for run in range(a.runs):
        for name, lib in allocs:
            r = run_once(a.bin, lib, envs.get(name, {}), a.quick)
            results[name].append(r)
            print(f"run {run + 1}/{a.runs} {name}: " + ", ".join(
                f"{k} {v:.3f}" for k, v in r.items()), file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    keys = ["wall", "work", "cpu", "faults", "rss_first", "rss_last", "drift", "purger_cpu",
            "purger_wakeups"]
    base = allocs[0][0]
    med = {n: {k: statistics.median([r[k] for r in rs]) for k in keys if k in rs[0]}
           for n, rs in results.items()}
    print(f"store, {a.runs} interleaved runs, medians (ratio to {base})")
    print("| allocator | wall s | batches s | CPU s | page faults | RSS batch 5 MiB | RSS last MiB | drift "
          "| purger CPU % of process | purger wake-ups |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, _ in allocs:
        m = med[name]
        b = med[base]
        cells = [name]
        for k in ["wall", "work", "cpu"]:
            cells.append(f"{m[k]:.2f} (x{m[k] / b[k]:.2f})")
        cells.append(f"{m['faults']:.0f}")
        cells.append(f"{m['rss_first']:.1f}")
        cells.append(f"{m['rss_last']:.1f}")
        cells.append(f"{m['drift'] * 100:+.1f}%")
        if "purger_cpu" in m:
            share = statistics.median(
                [r["purger_cpu"] / r["cpu"] * 100 for r in results[name]])
            cells.append(f"{share:.2f}%")
            cells.append(f"{m['purger_wakeups']:.0f}")
        else:
            cells += ["-", "-"]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
