#!/usr/bin/env python3
"""The time/memory frontier of the sparse-survivors scenario (issue 14, item 6).

Usage: frontier.py BIN OUT_DIR [--others RAW_DIR]

Runs BIN (an ebb build of ebb-scenarios) once per EBB_PURGE_DELAY in
{0, 50, 100, 250, 500, 1000} ms, keeps the JSON lines in OUT_DIR, and prints a Markdown
table of RSS against idle time; writes OUT_DIR/frontier-sparse.svg, one line per delay,
plus the other allocators' defaults (medians) from RAW_DIR (scripts/memory-scenarios.sh
raw results) if given.
"""
import glob
import json
import os
import statistics
import subprocess
import sys

DELAYS = [0, 50, 100, 250, 500, 1000]
MIB = 1 << 20


def idle_samples(path):
    rows = [json.loads(line) for line in open(path) if line.startswith("{")]
    return [(r["idx"] / 1000, r["rss"] / MIB) for r in rows if r["type"] == "sample" and r["phase"] == "idle"]


def others(raw_dir):
    out = {}
    for path in glob.glob(os.path.join(raw_dir, "sparse-survivors.*.jsonl")):
        alloc = os.path.basename(path).split(".")[1]
        if alloc == "ebb":
            continue
        for t, rss in idle_samples(path):
            out.setdefault(alloc, {}).setdefault(t, []).append(rss)
    return {a: sorted((t, statistics.median(v)) for t, v in pts.items()) for a, pts in out.items()}


def svg(series, path):
    w, h, left, bottom, top, right = 640, 360, 60, 40, 20, 150
    xs = [0, 0.1, 0.25, 0.5, 1, 2, 10]
    # Time axis: log-like (index of the sample time), RSS axis linear.
    def x(t):
        pos = min(range(len(xs)), key=lambda i: abs(xs[i] - t))
        return left + pos * (w - left - right) / (len(xs) - 1)
    ymax = max(r for pts in series.values() for _, r in pts) * 1.05
    def y(r):
        return top + (h - top - bottom) * (1 - r / ymax)
    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
               "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000000", "#aaaaaa"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="black"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>',
             f'<text x="{(left + w - right) / 2}" y="{h - 8}" text-anchor="middle">seconds after the last free</text>',
             f'<text x="12" y="{(top + h - bottom) / 2}" transform="rotate(-90 12 {(top + h - bottom) / 2})" text-anchor="middle">RSS MiB</text>']
    for t in xs:
        parts.append(f'<text x="{x(t)}" y="{h - bottom + 14}" text-anchor="middle">{t:g}</text>')
    step = 50 if ymax > 200 else 10
    r = 0
    while r <= ymax:
        parts.append(f'<text x="{left - 6}" y="{y(r) + 4}" text-anchor="end">{r}</text>')
        parts.append(f'<line x1="{left}" y1="{y(r)}" x2="{w - right}" y2="{y(r)}" stroke="#eeeeee"/>')
        r += step
    for i, (name, pts) in enumerate(series.items()):
        c = colours[i % len(colours)]
        d = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in pts)
        parts.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="{d}"/>')
        ly = top + 14 * i + 6
        parts.append(f'<line x1="{w - right + 10}" y1="{ly}" x2="{w - right + 30}" y2="{ly}" stroke="{c}" stroke-width="2"/>')
        parts.append(f'<text x="{w - right + 34}" y="{ly + 4}">{name}</text>')
    parts.append("</svg>")
    open(path, "w").write("\n".join(parts) + "\n")


def main():
    args = sys.argv[1:]
    raw = None
    if "--others" in args:
        i = args.index("--others")
        raw = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    binary, out = args
    os.makedirs(out, exist_ok=True)
    series = {}
    for d in DELAYS:
        path = os.path.join(out, f"sparse.{d}.jsonl")
        if not os.path.exists(path):
            env = dict(os.environ, EBB_PURGE_DELAY=str(d))
            with open(path, "w") as f:
                subprocess.run([binary, "sparse-survivors"], env=env, stdout=f, check=True)
        series[f"ebb {d} ms"] = idle_samples(path)
    if raw:
        series.update(others(raw))
    times = sorted({t for pts in series.values() for t, _ in pts})
    print("| RSS MiB | " + " | ".join(f"+{t:g} s" for t in times) + " |")
    print("|---|" + "---:|" * len(times))
    for name, pts in series.items():
        d = dict(pts)
        print(f"| {name} | " + " | ".join(f"{d[t]:.1f}" if t in d else "-" for t in times) + " |")
    svg(series, os.path.join(out, "frontier-sparse.svg"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
