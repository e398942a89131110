#!/usr/bin/env python3
"""The time/memory frontier of every scenario (issue 14, item 6).

Usage: frontier_all.py BIN LIBEBB OUT_DIR [--scenarios a,b] [--runs N]

BIN is the glibc build of ebb-scenarios (target/scenarios-glibc/release/ebb-scenarios);
every allocator is LD_PRELOADed into it (ebb as LIBEBB, with EBB_PURGE_DELAY in
{0, 50, 100, 250, 500, 1000} ms; glibc as is; Debian's jemalloc, tcmalloc and mimalloc
v2 with their defaults), interleaved, at the reduced sizes in SCALE below. For each run
it keeps the JSON lines and the whole-process CPU time (wait4), and prints per scenario
a Markdown table: the time-weighted mean RSS over the samples, the last sample's RSS,
and CPU seconds (medians over runs). Writes OUT_DIR/frontier.svg: one panel per
scenario, CPU time against mean RSS, one point per delay and per other allocator.
"""
import json
import os
import statistics
import subprocess
import sys

DELAYS = [0, 50, 100, 250, 500, 1000]
MIB = 1 << 20
# Arguments per scenario: reduced sizes so the whole frontier runs in minutes.
SCALE = {
    "sleeping-owner-big": ["--rounds", "2"],
    "sleeping-owner-small": ["--rounds", "2"],
    "sleeping-owner-strings": ["--rounds", "2"],
    "worker-pool": ["--rounds", "3"],
    "burst-idle": [],
    "mixed-c-rust": ["--rounds", "10"],
    "sparse-survivors": [],
    "store": [],
    "many-threads": [],
}
OTHERS = {
    "glibc": "",
    "jemalloc": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    "tcmalloc": "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
    "mimalloc2": "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2",
}


def run(binary, scenario, preload, env_extra, out_path):
    env = dict(os.environ)
    env["SCENARIO_NO_BOUND"] = "1"
    env.update(env_extra)
    if preload:
        env["LD_PRELOAD"] = preload
    with open(out_path, "w") as out:
        proc = subprocess.Popen([binary, scenario] + SCALE[scenario], stdout=out, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        sys.exit(f"{scenario} under {preload or 'glibc'} {env_extra} failed: {status}")
    rows = [json.loads(line) for line in open(out_path) if line.startswith("{")]
    samples = [r for r in rows if r["type"] == "sample"]
    summary = [r for r in rows if r["type"] == "summary"][0]
    # Time-weighted mean of RSS over the samples (each holds until the next).
    pts = [(s["t_ms"], s["rss"]) for s in samples]
    end = summary["wall_ms"]
    area = 0.0
    for (t, rss), nxt in zip(pts, pts[1:] + [(end, None)]):
        area += rss * max(0.0, nxt[0] - t)
    span = max(1e-9, end - pts[0][0])
    return {
        "mean_rss": area / span / MIB,
        "last_rss": pts[-1][1] / MIB,
        "cpu": usage.ru_utime + usage.ru_stime,
    }


def svg(results, path):
    scen = list(results)
    cols = 3
    rows = (len(scen) + cols - 1) // cols
    pw, ph = 300, 220
    w, h = pw * cols, ph * rows
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
             'font-family="sans-serif" font-size="10">',
             f'<rect width="{w}" height="{h}" fill="white"/>']
    for k, s in enumerate(scen):
        ox, oy = (k % cols) * pw, (k // cols) * ph
        pts = results[s]
        xs = [v["cpu"] for v in pts.values()]
        ys = [v["mean_rss"] for v in pts.values()]
        x0, x1 = 0, max(xs) * 1.1
        y0, y1 = 0, max(ys) * 1.1
        L, R, T, B = 45, 10, 20, 30

        def X(v):
            return ox + L + (pw - L - R) * (v - x0) / (x1 - x0)

        def Y(v):
            return oy + T + (ph - T - B) * (1 - (v - y0) / (y1 - y0))

        parts.append(f'<text x="{ox + pw / 2}" y="{oy + 13}" text-anchor="middle" '
                     f'font-weight="bold">{s}</text>')
        parts.append(f'<line x1="{X(x0)}" y1="{Y(y0)}" x2="{X(x1)}" y2="{Y(y0)}" stroke="black"/>')
        parts.append(f'<line x1="{X(x0)}" y1="{Y(y0)}" x2="{X(x0)}" y2="{Y(y1)}" stroke="black"/>')
        parts.append(f'<text x="{X((x0 + x1) / 2)}" y="{oy + ph - 4}" text-anchor="middle">'
                     f'CPU s (0 to {x1:.1f})</text>')
        parts.append(f'<text x="{ox + L - 3}" y="{Y(y1) + 8}" text-anchor="end">{y1:.0f}</text>')
        parts.append(f'<text x="{ox + L - 3}" y="{Y(y0)}" text-anchor="end">0</text>')
        parts.append(f'<text transform="translate({ox + 12} {oy + ph / 2}) rotate(-90)" '
                     'text-anchor="middle">mean RSS MiB</text>')
        ebb = [(int(n.split()[1]), v) for n, v in pts.items() if n.startswith("ebb ")]
        ebb.sort()
        line = " ".join(f"{X(v['cpu']):.1f},{Y(v['mean_rss']):.1f}" for _, v in ebb)
        parts.append(f'<polyline points="{line}" fill="none" stroke="#1f77b4"/>')
        for d, v in ebb:
            parts.append(f'<circle cx="{X(v["cpu"]):.1f}" cy="{Y(v["mean_rss"]):.1f}" r="3" '
                         'fill="#1f77b4"/>')
            parts.append(f'<text x="{X(v["cpu"]) + 4:.1f}" y="{Y(v["mean_rss"]) - 3:.1f}" '
                         f'fill="#1f77b4">{d}</text>')
        for n, v in pts.items():
            if n.startswith("ebb "):
                continue
            parts.append(f'<rect x="{X(v["cpu"]) - 3:.1f}" y="{Y(v["mean_rss"]) - 3:.1f}" '
                         'width="6" height="6" fill="#d62728"/>')
            parts.append(f'<text x="{X(v["cpu"]) + 5:.1f}" y="{Y(v["mean_rss"]) + 10:.1f}" '
                         f'fill="#d62728">{n}</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts))


def main():
    args = sys.argv[1:]
    if len(args) < 3:
        sys.exit(__doc__)
    binary, libebb, out_dir = args[:3]
    scenarios = list(SCALE)
    runs = 1
    rest = args[3:]
    while rest:
        if rest[0] == "--scenarios":
            scenarios = rest[1].split(",")
        elif rest[0] == "--runs":
            runs = int(rest[1])
        rest = rest[2:]
    os.makedirs(out_dir, exist_ok=True)
    configs = [(f"ebb {d}", libebb, {"EBB_PURGE_DELAY": str(d)}) for d in DELAYS]
    configs += [(n, lib, {}) for n, lib in OTHERS.items() if not lib or os.path.exists(lib)]
    results = {}
    for s in scenarios:
        per = {}
        for r in range(runs):
            for name, lib, env in configs:
                out = os.path.join(out_dir, f"{s}.{name.replace(' ', '-')}.{r}.jsonl")
                per.setdefault(name, []).append(run(binary, s, lib, env, out))
                print(f"{s} {name} run {r + 1}: {per[name][-1]}", file=sys.stderr)
        results[s] = {n: {k: statistics.median([x[k] for x in v]) for k in v[0]}
                      for n, v in per.items()}
        with open(os.path.join(out_dir, "frontier.json"), "w") as f:
            json.dump(results, f, indent=1)
    for s, pts in results.items():
        print(f"\n#### {s} ({' '.join(SCALE[s]) or 'full size'})\n")
        print("| allocator | mean RSS MiB | last RSS MiB | CPU s |")
        print("|---|---:|---:|---:|")
        for n, v in pts.items():
            label = f"ebb, EBB_PURGE_DELAY={n.split()[1]} ms" if n.startswith("ebb ") else n
            print(f"| {label} | {v['mean_rss']:.1f} | {v['last_rss']:.1f} | {v['cpu']:.2f} |")
    svg(results, os.path.join(out_dir, "frontier.svg"))


if __name__ == "__main__":
    main()
