#!/usr/bin/env python3
"""Runs the real-programs suite: each program under each allocator, interleaved.

    run.py --work DIR --out results.json [--scale S] [--rounds N]
           [--programs a,b] [--allocators a,b]

Normally started by scripts/real-programs.sh, which builds the allocators and the Rust
tool and generates the inputs first. Every round runs every program under every
allocator (the allocator order rotates from round to round), so slow drifts of a busy
machine spread over all allocators alike. For each run it records wall time, the CPU
time of the whole process tree (user + sys of every thread and every waited-for child,
from wait4), peak RSS (the largest of the process and its children), the SHA-256 of the
program's output, `metric NAME VALUE` lines the program prints on stderr, and, under
ebb, the purger's CPU time and wake-ups from ebb's EBB_STATS_FILE.

The purger's figures come from one more ebb run of each program per round, not timed:
writing the stats file costs every process 0.2-0.4 ms at exit (ebb counts its resident
pages with mincore and /proc/self/pagemap), 3% of the make program's CPU, which the
other allocators would not pay (docs/REAL-PROGRAMS.md, "The suite measured ebb with its
stats file on").
"""
import argparse
import glob
import hashlib
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROGRAMS_DIR = os.path.join(HERE, "programs")
LIBDIR = "/usr/lib/x86_64-linux-gnu"
MEASURE = None  # the measure program (measure.c), from --bin

# name -> (library to LD_PRELOAD or None, variant of the Rust tool to run).
# The Rust tool has its own builds for the allocators with a Rust crate; the others
# preload into its system-allocator build, like the C programs.
DEFAULT_ALLOCATORS = ["ebb", "glibc", "jemalloc", "tcmalloc", "mimalloc2", "mimalloc3"]
# Variants run only when named in --allocators, with extra environment variables: mimalloc 3
# without transparent huge pages (it madvises its arenas MADV_HUGEPAGE; the option makes
# it call prctl(PR_SET_THP_DISABLE) instead), to tell its huge pages from the rest; ebb
# with its dense-growth huge pages (EBB_DENSE_HUGE_PAGES, span/large_pages.rs; on by
# default, ebb-nodense turns it off), with every segment advised (EBB_LARGE_PAGES=1), and
# in check mode (EBB_CHECK=1: every free and realloc validated; issue 20's cost target).
# Names starting with "ebb" are never the "best other allocator" in the report.
EXTRA_ENV = {"mimalloc3-nothp": {"MIMALLOC_ALLOW_THP": "0"},
             "ebb-dense": {"EBB_DENSE_HUGE_PAGES": "1"},
             "ebb-nodense": {"EBB_DENSE_HUGE_PAGES": "0"},
             "ebb-large": {"EBB_LARGE_PAGES": "1"},
             "ebb-check": {"EBB_CHECK": "1"}}
ALLOCATORS = {
    "ebb": (os.path.join(ROOT, "target/release/libebb.so"), "ebb"),
    "ebb-dense": (os.path.join(ROOT, "target/release/libebb.so"), "ebb"),
    "ebb-nodense": (os.path.join(ROOT, "target/release/libebb.so"), "ebb"),
    "ebb-large": (os.path.join(ROOT, "target/release/libebb.so"), "ebb"),
    "ebb-check": (os.path.join(ROOT, "target/release/libebb.so"), "ebb"),
    # Another build of libebb.so, for A/B runs of a change (EBB_BASE_LIB=path; C programs
    # only: the Rust tool links its allocator in).
    "ebb-base": (os.environ.get("EBB_BASE_LIB", os.path.join(ROOT, "target/release/libebb.so")), "ebb"),
    "glibc": (None, "system"),
    "jemalloc": (os.path.join(LIBDIR, "libjemalloc.so.2"), "jemalloc"),
    "tcmalloc": (os.path.join(LIBDIR, "libtcmalloc_minimal.so.4"), "system"),
    "mimalloc2": (os.path.join(LIBDIR, "libmimalloc.so.2"), "system"),
    "mimalloc3": (os.path.join(ROOT, "target/mimalloc3/libmimalloc3.so"), "mimalloc"),
    "mimalloc3-nothp": (os.path.join(ROOT, "target/mimalloc3/libmimalloc3.so"), "mimalloc"),
}


def programs(work, scale, bin_dir):
    """name -> description, argv, stdin file, files whose bytes are the output."""
    def n(base):
        return str(max(1000, int(base * scale)))

    return {
        "gcc": dict(
            desc="gcc -O2 compiling a generated C file (%d KB)" % (os.path.getsize(f"{work}/big.c") // 1024),
            argv=["gcc", "-w", "-O2", "-c", f"{work}/big.c", "-o", f"{work}/out/big.o"],
            outputs=[f"{work}/out/big.o"]),
        "jq": dict(
            desc="jq grouping a %d MB JSON file" % (os.path.getsize(f"{work}/records.json") >> 20),
            argv=["jq", "-c", "-f", f"{PROGRAMS_DIR}/group.jq", f"{work}/records.json"]),
        "python": dict(
            desc="CPython (pymalloc) loading, grouping, dumping that JSON",
            argv=["/usr/bin/python3", f"{PROGRAMS_DIR}/group.py", f"{work}/records.json"]),
        "sqlite": dict(
            desc=f"sqlite3 :memory:, {n(600_000)} rows, 2 indexes, updates, joins",
            argv=["sqlite3", ":memory:"], stdin=f"{work}/rows.sql"),
        "perl": dict(
            desc=f"perl: {n(250_000)} hash keys built, sorted, rehashed",
            argv=["perl", f"{PROGRAMS_DIR}/hashkeys.pl", n(250_000)]),
        "lua": dict(
            desc=f"Lua 5.4: {n(400_000)} table keys built, sorted, rehashed",
            argv=["lua5.4", f"{PROGRAMS_DIR}/hashkeys.lua", n(400_000)]),
        "make": dict(
            desc="make -j2: %d small C files compiled, linked, their lines counted "
                 "(many short processes)" % len(glob.glob(f"{work}/build/m*.c")),
            argv=["make", "-s", "-j2", "-B", "-C", f"{work}/build", "all"],
            outputs=[f"{work}/build/prog"]),
        "ninja": dict(
            desc="ninja -n: a build graph of %d compile edges parsed, planned, printed "
                 "(C++, little and often)" % (max(200, int(40_000 * scale))),
            argv=["ninja", "-n", "-j1", "-C", f"{work}/ninja"]),
        "rust-tool": dict(
            desc="syn + rayon: parse %d files into ASTs, re-parse half x3, drop 90%%" % len(
                glob.glob(f"{work}/rust-src/*.rs")),
            argv=[f"{bin_dir}/ast-churn-{{variant}}", "run", f"{work}/rust-src", "3"]),
    }


def ebb_stats(pattern_dir):
    """Sums purger CPU time, the kernel's part of it (None if the library does not report
    it) and wake-ups over the stats files ebb wrote (one per process, a JSON line per ebb
    instance in it: the Rust tool's ebb build links ebb in and has libebb.so preloaded
    for its C side, two purgers)."""
    cpu_ns = wakeups = 0
    sys_ns = None
    files = glob.glob(os.path.join(pattern_dir, "ebb-stats.*.json"))
    for path in files:
        try:
            with open(path) as f:
                lines = [json.loads(line) for line in f if line.strip()]
        except (OSError, ValueError):
            continue
        finally:
            os.unlink(path)
        for data in lines:
            found = find_keys(data)
            cpu_ns += found.get("purger_cpu_ns", 0)
            wakeups += found.get("purger_wakeups", 0)
            if "purger_sys_ns" in found:
                sys_ns = (sys_ns or 0) + found["purger_sys_ns"]
    return (cpu_ns, sys_ns, wakeups) if files else (None, None, None)


def find_keys(data):
    """The purger figures wherever they sit in the stats JSON."""
    out = {}
    if isinstance(data, dict):
        for k, v in data.items():
            if k in ("purger_cpu_ns", "purger_sys_ns", "purger_wakeups") and isinstance(v, (int, float)):
                out[k] = v
            elif isinstance(v, (dict, list)):
                for k2, v2 in find_keys(v).items():
                    out.setdefault(k2, v2)
    elif isinstance(data, list):
        for v in data:
            for k2, v2 in find_keys(v).items():
                out.setdefault(k2, v2)
    return out


def run_one(prog, alloc, work, timeout, stats=False):
    """One run of `prog` under `alloc`; with `stats` (ebb only), with EBB_STATS_FILE set,
    for the purger's figures."""
    preload, variant = ALLOCATORS[alloc]
    argv = [a.replace("{variant}", variant) for a in prog["argv"]]
    child_env = dict(EXTRA_ENV.get(alloc, {}))
    if preload:
        child_env["LD_PRELOAD"] = preload
    stats_dir = os.path.join(work, "out", "stats")
    os.makedirs(stats_dir, exist_ok=True)
    if stats:
        child_env["EBB_STATS_FILE"] = os.path.join(stats_dir, "ebb-stats.%p.json")
    for f in prog.get("outputs", []):
        if os.path.exists(f):
            os.unlink(f)
    stdout_path = os.path.join(work, "out", "stdout")
    stderr_path = os.path.join(work, "out", "stderr")
    measured = os.path.join(work, "out", "measure.txt")
    if os.path.exists(measured):
        os.unlink(measured)
    # measure forks the program (see measure.c); env sets LD_PRELOAD for the program only.
    command = [MEASURE, measured, "env"] + [f"{k}={v}" for k, v in child_env.items()] + argv
    stdin = open(prog["stdin"], "rb") if prog.get("stdin") else subprocess.DEVNULL
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        try:
            subprocess.run(command, stdin=stdin, stdout=out, stderr=err, timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
    if stdin is not subprocess.DEVNULL:
        stdin.close()
    try:
        with open(measured) as f:
            wall, user, system, maxrss, code = f.read().split()
        wall, user, system, maxrss, code = float(wall), float(user), float(system), int(maxrss), int(code)
    except (OSError, ValueError):
        wall = user = system = maxrss = 0
        code = -1
    digest = hashlib.sha256()
    for path in [stdout_path] + prog.get("outputs", []):
        try:
            with open(path, "rb") as f:
                digest.update(f.read())
        except OSError:
            digest.update(b"<missing>")
    metrics = {}
    with open(stderr_path, errors="replace") as f:
        stderr = f.read()
    for line in stderr.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "metric":
            metrics[parts[1]] = float(parts[2])
    purger_cpu_ns, purger_sys_ns, purger_wakeups = (
        ebb_stats(stats_dir) if stats else (None, None, None))
    return dict(
        wall_s=wall, user_s=user, sys_s=system, cpu_s=user + system, peak_rss_kib=maxrss,
        exit=code, sha256=digest.hexdigest()[:16], metrics=metrics,
        purger_cpu_ns=purger_cpu_ns, purger_sys_ns=purger_sys_ns, purger_wakeups=purger_wakeups,
        stderr_tail=stderr[-300:] if code else "")


def write_results(args, table, names, allocs, runs, rounds_done, started):
    meta = dict(scale=args.scale, rounds=rounds_done, programs={n: table[n]["desc"] for n in names},
                allocators=allocs, elapsed_s=time.monotonic() - started,
                date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                loadavg_end=os.getloadavg())
    versions_path = os.path.join(args.work, "versions.json")
    if os.path.exists(versions_path):
        with open(versions_path) as f:
            meta["versions"] = json.load(f)
    with open(args.out + ".tmp", "w") as f:
        json.dump(dict(meta=meta, runs=runs), f, indent=1)
    os.replace(args.out + ".tmp", args.out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--bin", required=True, help="directory of the ast-churn-VARIANT builds")
    ap.add_argument("--out", required=True)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--programs", default="")
    ap.add_argument("--allocators", default="")
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()

    global MEASURE
    MEASURE = os.path.join(args.bin, "measure")
    table = programs(args.work, args.scale, args.bin)
    names = [p for p in (args.programs.split(",") if args.programs else table)]
    allocs = args.allocators.split(",") if args.allocators else DEFAULT_ALLOCATORS
    for a in allocs:
        lib = ALLOCATORS[a][0]
        if lib and not os.path.exists(lib):
            sys.exit(f"error: {a}: {lib} does not exist")
    runs = []
    total = args.rounds * len(names) * len(allocs)
    started = time.monotonic()
    for rnd in range(args.rounds):
        for name in names:
            order = allocs[rnd % len(allocs):] + allocs[:rnd % len(allocs)]
            for alloc in order:
                r = run_one(table[name], alloc, args.work, args.timeout)
                r.update(program=name, allocator=alloc, round=rnd)
                if alloc == "ebb":
                    s = run_one(table[name], alloc, args.work, args.timeout, stats=True)
                    r.update(purger_cpu_ns=s["purger_cpu_ns"], purger_sys_ns=s["purger_sys_ns"],
                             purger_wakeups=s["purger_wakeups"], stats_run_cpu_s=s["cpu_s"])
                runs.append(r)
                purger = ""
                if r["purger_cpu_ns"] is not None and r.get("stats_run_cpu_s", 0) > 0:
                    purger = " purger %.2f%% (%d wake-ups)" % (
                        100 * r["purger_cpu_ns"] / 1e9 / r["stats_run_cpu_s"], r["purger_wakeups"])
                print("[%3d/%d] round %d %-9s %-9s wall %7.2f s  cpu %7.2f s  rss %7.1f MiB  %s%s%s" % (
                    len(runs), total, rnd + 1, name, alloc, r["wall_s"], r["cpu_s"],
                    r["peak_rss_kib"] / 1024, r["sha256"], purger,
                    "  EXIT %d: %s" % (r["exit"], r["stderr_tail"]) if r["exit"] else ""),
                    flush=True)
        # Written after every round, so a run cut short still leaves its whole rounds.
        write_results(args, table, names, allocs, runs, rnd + 1, started)
    bad = [r for r in runs if r["exit"]]
    hashes = {}
    for r in runs:
        hashes.setdefault(r["program"], set()).add(r["sha256"])
    differing = [p for p, h in hashes.items() if len(h) > 1]
    if differing:
        print("OUTPUT DIFFERS between runs for: " + ", ".join(differing), file=sys.stderr)
    if bad:
        print(f"{len(bad)} runs failed", file=sys.stderr)
    sys.exit(1 if bad or differing else 0)


if __name__ == "__main__":
    main()
