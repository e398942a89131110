#!/usr/bin/env python3
"""Profiles one real program under ebb and mimalloc 3 with valgrind.

    profile.py --work DIR --out profile.md [--program perl] [--n 150000]

- cachegrind (--cache-sim=yes) under ebb and under mimalloc 3: instructions (Ir) and L1
  data misses (D1mr + D1mw) of the whole program and of the allocator's functions,
  split by function (cg_annotate, summed over the source files inlined code came from);
- callgrind under ebb: how many calls reach each of ebb's out-of-line slow paths, per
  1,000 calls of `free` (and of `malloc`).

Valgrind runs the threads of a process one at a time, so these are counts, not times.
Started by scripts/real-programs-profile.sh, which builds what it needs first.
"""
import argparse
import collections
import os
import re
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROGRAMS = {
    "perl": lambda n, work: ["perl", os.path.join(HERE, "programs/hashkeys.pl"), str(n)],
    "lua": lambda n, work: ["lua5.4", os.path.join(HERE, "programs/hashkeys.lua"), str(n)],
    # python and jq read WORK/records.json (gen_inputs.py WORK SCALE; --n is ignored).
    "python": lambda n, work: ["/usr/bin/python3", os.path.join(HERE, "programs/group.py"),
                               os.path.join(work, "records.json")],
    "jq": lambda n, work: ["jq", "-c", "-f", os.path.join(HERE, "programs/group.jq"),
                           os.path.join(work, "records.json")],
}
LIBS = {
    "ebb": os.path.join(ROOT, "target/release/libebb.so"),
    "mimalloc3": os.path.join(ROOT, "target/mimalloc3/libmimalloc3.so"),
}
# The allocator's own functions: ebb's Rust functions and C ABI (its source files say
# so), mimalloc's mi_/_mi_ functions and the standard names its library exports.
C_NAMES = {"malloc", "free", "calloc", "realloc", "posix_memalign", "aligned_alloc", "memalign",
           "valloc", "pvalloc", "cfree", "malloc_usable_size", "reallocarray", "__libc_malloc",
           "__libc_free", "__libc_calloc", "__libc_realloc"}
# ebb's out-of-line slow paths, by function name (their module paths change with
# refactoring; every ebb function of one of these names is listed).
SLOW_PATHS = ["free_slow_and_leave", "free_slow", "free_slow_inner", "free_to_other",
              "page_emptied_and_leave", "page_emptied", "malloc_slow_and_leave", "malloc_slow",
              "reclaim", "retire", "notify", "abandon", "free_span", "collect_thread_free"]


def is_allocator(alloc, file, fn):
    if alloc == "ebb":
        return "crates/ebb/src" in file or fn.startswith("ebb::") or fn.startswith("<ebb::") or \
            (fn in C_NAMES and file != "???" and "libc" not in file and "glibc" not in file)
    return fn.startswith("mi_") or fn.startswith("_mi_") or fn in C_NAMES


def cachegrind(alloc, argv, out_dir):
    out = os.path.join(out_dir, f"cachegrind.{alloc}.out")
    env = dict(os.environ, LD_PRELOAD=LIBS[alloc])
    subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", f"--cachegrind-out-file={out}"]
                   + argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    text = subprocess.run(["cg_annotate", "--threshold=0", "--auto=no", out], check=True,
                          capture_output=True, text=True).stdout
    events = None
    totals = None
    by_fn = collections.defaultdict(lambda: collections.Counter())
    for line in text.splitlines():
        if line.startswith("Events shown:"):
            events = line.split(":", 1)[1].split()
            continue
        if events is None or not line.strip() or line.startswith("-"):
            continue
        # "1,234 (12.3%)  0  ... file:function": numbers (with optional percentages), then name.
        m = re.match(r"^((?:\s*(?:[\d,]+|\.)(?:\s+\(\s*[\d.]+%\))?)+)\s+(\S.*)$", line)
        if not m:
            continue
        values = [0 if v == "." else int(v.replace(",", "")) for v in
                  re.findall(r"([\d,]+|\.)(?:\s+\(\s*[\d.]+%\))?", m.group(1))]
        if len(values) != len(events):
            continue
        name = m.group(2).strip()
        row = dict(zip(events, values))
        if name == "PROGRAM TOTALS":
            totals = row
            continue
        file, _, fn = name.rpartition(":")
        by_fn[(fn, is_allocator(alloc, file, fn))].update(row)
    alloc_fns = {fn: c for (fn, mine), c in by_fn.items() if mine}
    return totals, alloc_fns


def callgrind_calls(argv, out_dir):
    out = os.path.join(out_dir, "callgrind.ebb.out")
    env = dict(os.environ, LD_PRELOAD=LIBS["ebb"])
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + argv, env=env,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    names = {}
    calls = collections.Counter()
    cfn = None
    with open(out, errors="replace") as f:
        for line in f:
            m = re.match(r"^c?fn=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
            if m:
                if m.group(2):
                    names[m.group(1)] = m.group(2)
                if line.startswith("cfn="):
                    cfn = m.group(1)
                continue
            if line.startswith("calls=") and cfn is not None:
                calls[names.get(cfn, cfn)] += int(line[6:].split()[0])
                cfn = None
    return calls


def fmt(n):
    return f"{n:,}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--program", default="perl", choices=sorted(PROGRAMS))
    ap.add_argument("--n", type=int, default=150_000)
    args = ap.parse_args()
    out_dir = os.path.join(args.work, "profile")
    os.makedirs(out_dir, exist_ok=True)
    argv = PROGRAMS[args.program](args.n, args.work)
    lines = [f"Program: `{' '.join(os.path.relpath(a, ROOT) if a.startswith(ROOT) else a for a in argv)}` "
             f"(LD_PRELOAD), valgrind {subprocess.run(['valgrind', '--version'], capture_output=True, text=True).stdout.strip()}.",
             ""]

    results = {}
    for alloc in ("ebb", "mimalloc3"):
        results[alloc] = cachegrind(alloc, argv, out_dir)
    lines += ["| cachegrind | ebb | mimalloc 3 | ebb / mimalloc 3 |", "|---|---|---|---|"]

    def row(label, f):
        a, b = f("ebb"), f("mimalloc3")
        lines.append(f"| {label} | {fmt(a)} | {fmt(b)} | {a / b:.3f} |" if b else f"| {label} | {fmt(a)} | {fmt(b)} | - |")

    d1 = ("D1mr", "D1mw")
    row("instructions, whole program", lambda a: results[a][0]["Ir"])
    row("L1 data misses, whole program", lambda a: sum(results[a][0][e] for e in d1))
    row("instructions in the allocator", lambda a: sum(c["Ir"] for c in results[a][1].values()))
    row("L1 data misses in the allocator", lambda a: sum(sum(c[e] for e in d1) for c in results[a][1].values()))
    lines.append("")
    for alloc in ("ebb", "mimalloc3"):
        fns = sorted(results[alloc][1].items(), key=lambda kv: -kv[1]["Ir"])
        total_ir = sum(c["Ir"] for c in results[alloc][1].values())
        lines += [f"{alloc}: allocator functions by instructions (inlined code counted in the function it was inlined into)", "",
                  "| function | instructions | share of allocator | L1 data misses |", "|---|---|---|---|"]
        for fn, c in fns[:12]:
            lines.append(f"| `{fn}` | {fmt(c['Ir'])} | {100 * c['Ir'] / total_ir:.1f}% | {fmt(sum(c[e] for e in d1))} |")
        lines.append("")

    calls = callgrind_calls(argv, out_dir)
    frees = sum(calls[n] for n in ("free", "cfree"))
    mallocs = sum(calls[n] for n in ("malloc", "calloc", "realloc"))
    lines += [f"callgrind, ebb: {fmt(frees)} calls of `free`, {fmt(mallocs)} of `malloc`/`calloc`/`realloc`.", "",
              "| out-of-line function | calls | per 1,000 frees |", "|---|---|---|"]
    ebb_fns = {n: c for n, c in calls.items() if n.startswith("ebb::")}
    slow = [n for base in SLOW_PATHS for n in sorted(ebb_fns) if n.rsplit("::", 1)[-1] == base]
    for fn in slow:
        n = ebb_fns[fn]
        lines.append(f"| `{fn}` | {fmt(n)} | {1000 * n / frees:.1f} |" if frees else f"| `{fn}` | {fmt(n)} | - |")
    lines.append("")
    lines.append("(A function missing from the table was not called out of line: inlined, or never reached.)")
    lines.append("")
    others = sorted(((n, c) for n, c in ebb_fns.items() if n not in slow), key=lambda kv: -kv[1])[:8]
    if others:
        lines.append("Other ebb functions called out of line, most calls first: " + ", ".join(
            f"`{n}` {fmt(c)}" for n, c in others) + ".")
        lines.append("")
    text = "\n".join(lines)
    with open(args.out, "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
