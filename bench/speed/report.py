#!/usr/bin/env python3
"""Summarise the runs of scripts/bench-speed.sh: tables on stdout, and (with --doc and
--svg) docs/BENCHMARKS.md and an SVG bar chart.

Input, in the results directory: rust.jsonl and c.jsonl (one JSON object per run, as
printed by ebb-bench-speed and the C programs), meta.txt (key<TAB>value lines written by
the script) and failures.txt.

Every figure is relative to ebb: for allocator X and a workload, the time ratio is
median(X) / median(ebb), so > 1 means X is slower than ebb; the bracket is
[min(X), max(X)] / median(ebb), i.e. the spread of X's runs on the same scale. The
geometric-mean row is over the workloads' median ratios.
"""

import argparse
import json
import math
import os
import statistics
import sys
from collections import OrderedDict, defaultdict

from purger_share import purger_table

RUST_ORDER = ["ebb", "system", "jemalloc", "mimalloc", "snmalloc", "tcmalloc", "mimalloc2",
              "ebb-capi"]
# `mimalloc` in C runs before the v2/v3 split of the names was mimalloc v2.
C_ORDER = ["ebb", "glibc", "jemalloc", "mimalloc2", "mimalloc", "mimalloc3", "tcmalloc"]
COLOURS = {
    "ebb": "#2b6cb0",
    "system": "#718096",
    "glibc": "#718096",
    "jemalloc": "#dd6b20",
    "mimalloc": "#38a169",
    "mimalloc3": "#2f855a",
    "mimalloc2": "#9ae6b4",
    "ebb-capi": "#90cdf4",
    "snmalloc": "#805ad5",
    "tcmalloc": "#c53030",
}

WORKLOAD_NOTES = OrderedDict(
    [
        ("churn", "single thread; big-number arithmetic on `Vec<u32>` limbs (4-64 B), "
                  "mostly temporaries, a pool of 512 live numbers (like cfrac)"),
        ("frontend", "single thread; a compiler front end (source text, tokens with "
                     "`String`s, `Box` trees, `HashMap`/`BTreeMap`, string IR; the last 8 "
                     "modules live) plus a Quine-McCluskey cube merger (like espresso)"),
        ("larson", "2 x cores threads in a ring, 4000 slots of 8-1000 B each; objects "
                   "handed to the next thread in batches of 1000 and freed there"),
        ("prodcons", "2 producer/consumer pairs: the producer allocates 16-512 B buffers "
                     "and small strings, the consumer frees them (batches of 64 through "
                     "a bounded channel)"),
        ("mstress", "2 x cores worker threads started and joined 100 times; each takes "
                    "over objects of exited threads, frees, replaces and grows them by "
                    "`push` (realloc); mostly small, 1% up to 64 KiB"),
        ("cache-scratch", "passive false sharing: the main thread allocates one 8 B "
                          "object per worker; each worker frees it, then allocates, "
                          "writes 2000 times and frees 8 B objects, 200k times"),
        ("sweep", "malloc+free pairs and malloc-1000-then-free-1000 at 16 B .. 32 MiB "
                  "(12 sizes), on 1 thread and then 2 threads at once; per-size table "
                  "below"),
        ("growth", "`Vec<u8>` extended to 1 GiB, `String`s built by pushes to 1 KiB - "
                   "1 MiB (64 MiB in all), and a raw buffer doubled by `realloc` to "
                   "256 MiB (twice)"),
        ("typechecker", "a thread pool (cores workers, channels) type-checking modules: "
                        "`Box`ed type trees, `HashMap` environments, unification, type "
                        "strings dropped by the main thread, interfaces dropped by "
                        "another worker"),
        ("compiler", "single thread; a compiler front end, parse -> typecheck -> lower: "
                     "identifiers interned in a `HashMap<Box<str>, u32>`, `Box`ed AST "
                     "nodes, statement/argument `Vec`s grown by `push`, a `Box`ed type "
                     "node per expression, `format!`ted diagnostics, IR of blocks of "
                     "instructions with small operand `Vec`s; the last 8 modules' IR live"),
        ("compiler-mt", "`compiler` on 4 worker threads; each module's IR is sent to a "
                        "collector thread, which keeps the last 8 and frees the older "
                        "ones (cross-thread frees)"),
        ("huge-replace", "20 live blocks of 5-25 MiB, one replaced at random 2,000 times "
                         "(the new one allocated before the old is freed), each written "
                         "once per 4 KiB page (like mimalloc-bench's malloc-large); "
                         "crosses ebb's 16 MiB large/huge boundary"),
        ("tree-rebuild", "a pool of one worker per core parses 1,200 generated source "
                         "files (lexer tokens with owned identifier strings, an AST of "
                         "`Box`ed nodes, `Vec`s grown by `push`, boxed names) into trees "
                         "kept in memory, then re-parses a random half 8 times; each old "
                         "tree is dropped by whichever worker took its file (issue 20's "
                         "Rust tool without its crates). The JSON line also has each "
                         "round's wall and CPU time (`rounds_ms`, `rounds_cpu_ms`) and "
                         "the last round over the first (`last_over_first`, `_cpu`)"),
    ]
)

C_NOTES = OrderedDict(
    [
        ("c-churn", "churn in C: malloc'd big numbers (8-72 B), same algorithm"),
        ("c-larson", "larson in C: pthreads, mutex/condvar mailboxes, same parameters"),
        ("c-sweep", "sweep in C: same sizes and counts"),
        ("c-realloc", "realloc doubling to 256 MiB (twice), then 200k strings grown by "
                      "1.5x realloc steps to 1-16 KiB"),
        ("c-compiler", "compiler in C: the same generated modules (same checksum), lexed with an "
                       "interning hash table, parsed into malloc'd AST nodes, type-checked "
                       "with a malloc'd type node per expression, lowered into IR with "
                       "arrays grown by realloc; the last 8 modules' IR live"),
        ("c-huge", "huge-replace in C: same sizes, order and page writes"),
        ("c-espresso", "a logic minimiser's shape (like espresso), one thread: cubes as "
                       "malloc'd bit sets (16-40 B), covers as pointer arrays grown by "
                       "realloc, consensus cubes made and contained ones freed per pass, a "
                       "scratch array per cube"),
        ("c-alloctest", "one thread replacing random slots of 16,384 (like alloc-test): "
                        "sizes mostly 8-128 B, some to 2 KiB, 1 in 64 to 32 KiB; first and "
                        "last byte written"),
        ("c-alloctest2", "c-alloctest on 2 threads at once (same total steps), no block "
                         "crosses threads"),
        ("c-bigmt", "4 threads replacing buffers of 0.6-30 MiB in 6 slots each, a third "
                    "calloc'd, every page written and checked before the free"),
        ("c-handoff", "8 threads handing buffers to each other (the mixed-c memory "
                      "scenario without its RSS sampling): per round each frees what its "
                      "neighbour handed it, replaces a quarter of two rings of 2,048 "
                      "buffers of 64 B-8 KiB, and makes ~4 MiB of 16 B-8 KiB buffers and "
                      "lists of 4 KiB blocks, half freed, half handed on; 50 rounds"),
    ]
)


DISPLAY = {
    "system": "glibc",
    "mimalloc2": "mimalloc v2",
    "mimalloc3": "mimalloc v3",
    "tcmalloc": "tcmalloc",
    "ebb-capi": "ebb (C ABI)",
}


def display(a):
    """Name shown for an allocator: Rust's System allocator is glibc malloc here; the
    Rust table's `mimalloc` is the mimalloc crate (v3), `mimalloc2` Debian's v2."""
    if a == "mimalloc":
        return "mimalloc v3"
    return DISPLAY.get(a, a)


def load(path):
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    rows.append(json.loads(line))
    return rows


def load_meta(path):
    meta = defaultdict(list)
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                k, _, v = line.rstrip("\n").partition("\t")
                meta[k].append(v)
    return {k: v[-1] if k != "build_failed" else v for k, v in meta.items()}


def group(rows):
    """{workload: {allocator: [row, ...]}}, workloads in first-seen order."""
    g = OrderedDict()
    for r in rows:
        g.setdefault(r["workload"], defaultdict(list))[r["allocator"]].append(r)
    return g


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


class Table:
    """Ratios to ebb for one metric over a set of workloads."""

    def __init__(self, grouped, allocators, key):
        self.allocators = allocators
        self.rows = OrderedDict()  # workload -> {alloc: (median, lo, hi, base)}
        for w, by_alloc in grouped.items():
            if "ebb" not in by_alloc:
                continue
            base_vals = [key(r) for r in by_alloc["ebb"] if key(r) is not None]
            if not base_vals:
                continue
            base = statistics.median(base_vals)
            cells = {}
            for a in allocators:
                vals = [key(r) for r in by_alloc.get(a, []) if key(r) is not None]
                if not vals or base <= 0:
                    continue
                cells[a] = (statistics.median(vals) / base, min(vals) / base,
                            max(vals) / base, base, statistics.median(vals), len(vals))
            self.rows[w] = cells

    def geomeans(self):
        return {a: geomean([c[a][0] for c in self.rows.values() if a in c])
                for a in self.allocators}


def fmt_ratio(cell):
    if cell is None:
        return "-"
    r, lo, hi = cell[0], cell[1], cell[2]
    return f"{r:.2f} ({lo:.2f}-{hi:.2f})"


def fmt_abs(v, unit):
    if unit == "ms":
        return f"{v / 1000:.2f} s" if v >= 1000 else f"{v:.0f} ms"
    return f"{v / 1024:.1f} MiB"


def markdown_table(table, unit, label):
    allocs = table.allocators
    head = ["workload", f"ebb {label} (median)", "ebb (spread)"] + [
        display(a) for a in allocs if a != "ebb"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for w, cells in table.rows.items():
        base = cells["ebb"][3]
        row = [f"`{w}`", fmt_abs(base, unit)]
        for a in allocs:
            row.append(fmt_ratio(cells.get(a)))
        lines.append("| " + " | ".join(row) + " |")
    gm = table.geomeans()
    lines.append("| **geometric mean** | | " + " | ".join(
        f"**{gm[a]:.2f}**" if gm[a] else "-" for a in allocs) + " |")
    return "\n".join(lines)


def text_table(table, unit, title):
    allocs = table.allocators
    out = [title]
    w0 = max([len(w) for w in table.rows] + [16])
    out.append(f"  {'workload':<{w0}} {'ebb abs':>9}  " +
               "  ".join(f"{display(a):>20}" for a in allocs))
    for w, cells in table.rows.items():
        out.append(f"  {w:<{w0}} {fmt_abs(cells['ebb'][3], unit):>9}  " +
                   "  ".join(f"{fmt_ratio(cells.get(a)):>20}" for a in allocs))
    gm = table.geomeans()
    out.append(f"  {'geomean':<{w0}} {'':>9}  " +
               "  ".join(f"{(f'{gm[a]:.2f}' if gm[a] else '-'):>20}" for a in allocs))
    return "\n".join(out)


def size_label(s):
    s = int(s)
    if s >= 1 << 20:
        return f"{s >> 20} MiB"
    if s >= 1 << 10 and s % 1024 == 0:
        return f"{s >> 10} KiB"
    return f"{s} B"


def sweep_table(by_alloc, allocs):
    """Per-size medians: ebb's t1/t2 in ms and the others' ratios to them."""
    if "ebb" not in by_alloc:
        return None
    sizes = list(by_alloc["ebb"][0]["sizes"].keys())
    head = ["size", "ebb 1 thread", "ebb 2 threads"] + [
        f"{display(a)} (1 thr / 2 thr)" for a in allocs if a != "ebb"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    losses = []
    for s in sizes:
        def med(a, k):
            vals = [r["sizes"][s][k] for r in by_alloc.get(a, []) if s in r.get("sizes", {})]
            return statistics.median(vals) if vals else None
        e1, e2 = med("ebb", "t1_ms"), med("ebb", "t2_ms")
        row = [size_label(s), f"{e1:.1f} ms", f"{e2:.1f} ms"]
        for a in allocs:
            if a == "ebb":
                continue
            x1, x2 = med(a, "t1_ms"), med(a, "t2_ms")
            row.append("-" if x1 is None else f"{x1 / e1:.2f} / {x2 / e2:.2f}")
        lines.append("| " + " | ".join(row) + " |")
        faster = []
        for a in allocs:
            x1, x2 = med(a, "t1_ms"), med(a, "t2_ms")
            if a != "ebb" and x1 and x2 and min(x1 / e1, x2 / e2) < 0.8:
                faster.append((min(x1 / e1, x2 / e2), f"{display(a)} {e1 / x1:.1f}x / {e2 / x2:.1f}x"))
        if faster:
            losses.append(f"- {size_label(s)}: " + ", ".join(t for _, t in sorted(faster)))
    lines.append("")
    lines.append("Sizes where another allocator is more than 25% faster than ebb on one "
                 "thread or two (speed-up on 1 thread / 2 threads):\n")
    lines.extend(losses or ["- none"])
    return "\n".join(lines)


# ---- SVG ----------------------------------------------------------------------------------

def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def svg_panel(y0, title, subtitle, table, width, worse="slower", better="faster"):
    """A horizontal grouped bar chart on a log scale centred on 1 (= ebb). Returns
    (svg elements, height)."""
    allocs = [a for a in table.allocators if a != "ebb"]
    rows = list(table.rows.items())
    gm = table.geomeans()
    rows.append(("geometric mean", {a: (gm[a],) for a in allocs if gm[a]}))
    vals = [c[a][0] for _, c in rows for a in allocs if a in c and c[a][0]]
    span = max([abs(math.log2(v)) for v in vals] + [1.0])
    span = min(max(1, math.ceil(span)), 6)
    left, right = 150, width - 60
    mid = (left + 45 + right) / 2

    def x(v):
        lv = max(-span, min(span, math.log2(v)))
        return mid + lv / span * (right - mid)

    bar, gap, group_gap = 9, 2, 12
    group_h = len(allocs) * (bar + gap) + group_gap
    top = y0 + 52
    height = 52 + len(rows) * group_h + 34
    el = [f'<text x="20" y="{y0 + 18}" class="title">{esc(title)}</text>',
          f'<text x="20" y="{y0 + 36}" class="sub">{esc(subtitle)}</text>']
    bottom = top + len(rows) * group_h
    for k in range(-span, span + 1):
        gx = x(2.0 ** k)
        label = f"{2 ** k:g}x" if k >= 0 else f"1/{2 ** -k:g}"
        el.append(f'<line x1="{gx:.1f}" y1="{top - 4}" x2="{gx:.1f}" y2="{bottom}" '
                  f'class="{"one" if k == 0 else "grid"}"/>')
        el.append(f'<text x="{gx:.1f}" y="{bottom + 14}" class="tick">{label}</text>')
    el.append(f'<text x="{mid:.1f}" y="{bottom + 28}" class="tick">'
              f'&#8592; {better} than ebb   |   ebb = 1   |   {worse} than ebb &#8594;</text>')
    for i, (w, cells) in enumerate(rows):
        gy = top + i * group_h
        if i % 2 == 0:
            el.append(f'<rect x="0" y="{gy - group_gap / 2:.1f}" width="{width}" '
                      f'height="{group_h}" class="band"/>')
        cls = "wl gm" if w == "geometric mean" else "wl"
        el.append(f'<text x="{left - 8}" y="{gy + group_h / 2 - 3:.1f}" class="{cls}">'
                  f'{esc(w)}</text>')
        for j, a in enumerate(allocs):
            if a not in cells or not cells[a][0]:
                continue
            v = cells[a][0]
            by = gy + j * (bar + gap)
            x0, x1 = sorted((mid, x(v)))
            el.append(f'<rect x="{x0:.1f}" y="{by}" width="{max(x1 - x0, 1):.1f}" '
                      f'height="{bar}" fill="{COLOURS.get(a, "#999")}"/>')
            clipped = abs(math.log2(v)) > span
            label = f"{v:.2f}" + ("+" if clipped and v > 1 else "")
            if v >= 1:
                el.append(f'<text x="{x(v) + 3:.1f}" y="{by + bar - 1}" class="val">{label}</text>')
            else:
                el.append(f'<text x="{x(v) - 3:.1f}" y="{by + bar - 1}" class="val end">'
                          f'{label}</text>')
    return el, height


def write_svg(path, panels, width=900):
    names_seen = set()
    body, y = [], 0
    legend_allocs = []
    for _, _, t, _ in panels:
        for a in t.allocators:
            if a != "ebb" and a not in legend_allocs:
                legend_allocs.append(a)
    lx = 20
    body.append(f'<text x="{lx}" y="22" class="head">ebb speed benchmarks: other allocators '
                f'relative to ebb (medians of interleaved runs; log scale)</text>')
    for a in legend_allocs:
        name = display(a)
        if name in names_seen:
            continue
        names_seen.add(name)
        body.append(f'<rect x="{lx}" y="34" width="12" height="12" fill="{COLOURS.get(a, "#999")}"/>')
        body.append(f'<text x="{lx + 16}" y="45" class="leg">{esc(name)}</text>')
        lx += 24 + 8 * len(name)
    y = 56
    for title, sub, table, words in panels:
        el, h = svg_panel(y, title, sub, table, width, *words)
        body.extend(el)
        y += h + 10
    style = """
      text { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; fill: #1a202c; }
      .head { font-size: 15px; font-weight: 600; }
      .title { font-size: 14px; font-weight: 600; }
      .sub { font-size: 11.5px; fill: #4a5568; }
      .leg { font-size: 12px; }
      .wl { font-size: 12px; text-anchor: end; dominant-baseline: middle; }
      .gm { font-weight: 600; }
      .tick { font-size: 10.5px; text-anchor: middle; fill: #4a5568; }
      .val { font-size: 9.5px; fill: #2d3748; }
      .end { text-anchor: end; }
      .grid { stroke: #cbd5e0; stroke-width: 0.7; }
      .one { stroke: #2b6cb0; stroke-width: 1.6; }
      .band { fill: #f7fafc; }
    """
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y}" '
           f'viewBox="0 0 {width} {y}">\n<style>{style}</style>\n'
           f'<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(body) + "\n</svg>\n")
    with open(path, "w") as f:
        f.write(svg)


# ---- the document -------------------------------------------------------------------------

def losses(table, what):
    """Sentences: where an allocator beats ebb by more than 10%, by median."""
    out = []
    for w, cells in table.rows.items():
        better = [(a, c[0]) for a, c in cells.items() if a != "ebb" and c[0] < 1 / 1.1]
        if better:
            parts = ", ".join(f"{display(a)} {1 / r:.2f}x"
                              for a, r in sorted(better, key=lambda t: t[1]))
            out.append(f"- `{w}`: {parts} {what}")
    return out


def loss_section(time, rss):
    out = ["### Where ebb loses (by more than 10%, medians; mind the noise)\n"]
    for label, table, what in [("Time", time, "faster than ebb"),
                               ("Peak RSS", rss, "less peak RSS than ebb")]:
        lost = losses(table, what)
        out.append(f"{label}:\n")
        out.append("\n".join(lost) + "\n" if lost else "- nowhere by more than 10%\n")
    return "\n".join(out)


def versions(meta, rust, c):
    def first(rows, alloc):
        for r in rows:
            if r["allocator"] == alloc and "allocator_version" in r:
                return r["allocator_version"]
        return "?"
    lines = [
        f"- ebb: commit `{meta.get('ebb_commit', '?')}` (`crates/ebb`, as the global "
        f"allocator; for C, `libebb.so` from `cargo build --release -p ebb-capi`)",
        f"- system: {first(rust, 'system')} (Rust's `std::alloc::System`)",
        f"- jemalloc: {first(rust, 'jemalloc')} (crate tikv-jemallocator, "
        f"tikv-jemalloc-sys {meta.get('crate_tikv-jemalloc-sys', '?')}, statically linked)",
        f"- mimalloc: {first(rust, 'mimalloc')} (crate mimalloc "
        f"{meta.get('crate_mimalloc', '?')} / libmimalloc-sys "
        f"{meta.get('crate_libmimalloc-sys', '?')}, whose default build is mimalloc v3; "
        f"the version is `mi_version()` at run time)",
    ]
    if any(r["allocator"] == "snmalloc" for r in rust):
        lines.append(f"- snmalloc: crate snmalloc-rs {meta.get('crate_snmalloc-rs', '?')} "
                     f"(the snmalloc sources it bundles, built with cmake and g++ as a CMake "
                     f"`{meta.get('snmalloc_build_type', '?').strip()}` build)")
    elif "snmalloc" in (meta.get("build_failed") or []):
        lines.append("- snmalloc: snmalloc-rs did not build on this machine and is left out")
    if any(r["allocator"] in ("tcmalloc", "mimalloc2") for r in rust):
        lines.append(
            f"- Rust table, preloaded into the glibc build: tcmalloc = Debian "
            f"libtcmalloc-minimal4 {meta.get('deb_libtcmalloc-minimal4', '?')} "
            f"(`{meta.get('rust_lib_tcmalloc', '?')}`), mimalloc v2 = Debian libmimalloc2.0 "
            f"{meta.get('deb_libmimalloc2.0', '?')} (`{meta.get('rust_lib_mimalloc2', '?')}`), "
            f"ebb (C ABI) = `libebb.so`")
    if c:
        lines.append(
            f"- C-ABI runs (LD_PRELOAD): Debian libjemalloc2 {meta.get('deb_libjemalloc2', '?')}, "
            f"libmimalloc2.0 {meta.get('deb_libmimalloc2.0', '?')} (mimalloc v2, column "
            f"`mimalloc v2`), mimalloc v3: "
            f"{meta.get('c_mimalloc3', 'the mimalloc crate sources built by scripts/build-mimalloc3.sh')} "
            f"(column `mimalloc v3`, `{meta.get('c_lib_mimalloc3', '?')}`), "
            f"libtcmalloc-minimal4 {meta.get('deb_libtcmalloc-minimal4', '?')}; glibc is the "
            f"system's; compiled with {meta.get('gcc', 'gcc')}, `-O2 -pthread`")
    lines.append(f"- {meta.get('rustc', 'rustc ?')}, release profile of the workspace "
                 f"(opt-level 3, thin LTO, 1 codegen unit)")
    return "\n".join(lines)


def noise_pct(rows):
    """Median over workloads of the median absolute deviation of ebb's wall times, in %
    of their median."""
    out = []
    for by_alloc in rows.values():
        vals = [r["wall_ms"] for r in by_alloc.get("ebb", [])]
        if len(vals) >= 2:
            m = statistics.median(vals)
            out.append(statistics.median(abs(v - m) for v in vals) / m * 100)
    return statistics.median(out) if out else 0.0


def write_doc(path, svg_rel, meta, rust, c, rust_time, rust_rss, c_time, c_rss, sweep_md,
              c_sweep_md, failures, rust_cpu=None, c_cpu=None):
    runs = meta.get("runs", "?")
    noise = noise_pct(group(rust))
    rust_allocs = [display(a) for a in rust_time.allocators]
    c_allocs = [display(a) for a in c_time.allocators] if c_time else []
    md = []
    md.append("# Speed benchmarks\n")
    md.append("<!-- Generated by scripts/bench-speed.sh (bench/speed/report.py) up to and "
              "including 'How this was made'; do not edit that part by hand: rerun the "
              "script. The sections after it are written by hand and kept by reruns. -->\n")
    md.append(
        f"ebb against {', '.join(rust_allocs[1:])} on {len(rust_time.rows)} allocation "
        f"workloads (a Rust program, `bench/speed`, with the global allocator chosen at "
        f"build time, or, for tcmalloc, mimalloc v2 and `ebb (C ABI)`, the glibc build "
        f"with the allocator's shared library preloaded), and against "
        f"{', '.join(c_allocs[1:])} on {len(c_time.rows) if c_time else 0} C programs "
        f"run with `LD_PRELOAD`. Every run of every allocator is interleaved with the others "
        f"(ebb, glibc, jemalloc, ..., then again with the next allocator first), {runs} "
        f"runs each.\n")
    md.append(
        "**Read the ratios, not the times.** This was measured on a shared 2-core "
        "virtual machine with other work running on it (load average "
        f"{meta.get('loadavg_start', '?')} at the start, {meta.get('loadavg_end', '?')} at "
        "the end). Absolute times are noise; the ratios of interleaved runs are the "
        "signal, and the bracket after each ratio shows how far single runs strayed. "
        f"The typical run of ebb on a Rust workload is {noise:.0f}% "
        "off its median (median absolute deviation, median over the workloads), and "
        "single runs can be much further off, as the brackets show: treat differences "
        f"of {noise:.0f}% or less between medians as noise. More runs (`RUNS=`) on a quiet "
        "machine would narrow this.\n")
    md.append(f"![time and peak RSS relative to ebb]({svg_rel})\n")
    md.append("## How to read the tables\n")
    md.append(
        "Each cell is `median(X) / median(ebb)` for that workload, followed by "
        "`(min(X) / median(ebb) - max(X) / median(ebb))`: **above 1, ebb is faster "
        "(or smaller); below 1, the other allocator is.** The ebb column gives ebb's "
        "median in absolute terms, and the ebb ratio column its own spread. Time is "
        "the workload's wall time measured inside the process (start-up excluded); "
        "peak RSS is `VmHWM` at the end of the run, so it includes the program and "
        "its threads' stacks (about 2-3 MiB), which dominates for the small "
        "single-threaded workloads. The last row is the geometric mean of the "
        "medians.\n")

    md.append("## Rust workloads: time\n")
    md.append(markdown_table(rust_time, "ms", "time") + "\n")
    if rust_cpu and rust_cpu.rows:
        md.append("## Rust workloads: CPU time\n")
        md.append("User + system time of all the process's threads over the workload "
                  "(`getrusage`), ratio to ebb's; on a shared machine this moves less "
                  "than wall time when a thread waits for a core.\n")
        md.append(markdown_table(rust_cpu, "ms", "CPU") + "\n")
    purger_md = purger_table(group(rust), ["ebb", "ebb-capi"], display)
    if purger_md:
        md.append("### Rust workloads: ebb's purger\n")
        md.append(purger_md)
    md.append("## Rust workloads: peak RSS\n")
    md.append(markdown_table(rust_rss, "kib", "peak RSS") + "\n")
    md.append(loss_section(rust_time, rust_rss))
    if sweep_md:
        md.append("### `sweep` per size\n")
        md.append("Median time of ebb per size (pairs plus many-then-free-many), and "
                  "the others' ratios to it, on one thread and on two threads at "
                  "once:\n")
        md.append(sweep_md + "\n")

    if c_time and c_time.rows:
        md.append(c_section(meta, c, c_time, c_rss, c_cpu, c_sweep_md))

    md.append("## The workloads\n")
    md.append("Our own programs, modelled on the usual allocator benchmarks "
              "(mimalloc-bench's cfrac, espresso, larson, mstress, cache-scratch, "
              "malloc-large). Each returns a checksum that depends only on the work, "
              "and the report checks it is the same under every allocator.\n")
    md.append("| workload | what it does |\n|---|---|")
    for w, note in WORKLOAD_NOTES.items():
        md.append(f"| `{w}` | {note} |")
    for w, note in C_NOTES.items():
        md.append(f"| `{w}` | {note} |")
    md.append("")
    md.append("## Caveats: where a workload is unfair to someone\n")
    md.append("""- **glibc in `sweep` (and `c-sweep`)**: freeing a batch of a thousand 256 B - 256 KiB
  blocks leaves a free region at the top of the heap above glibc's trim threshold
  (128 KiB by default), so glibc hands it back with `brk` and faults it in again for
  the next batch. That is glibc's default behaviour, and the main reason its `sweep`
  time is a multiple of the others'; with `M_TRIM_THRESHOLD` raised it would look
  very different. Sizes of 16 and 64 B (fast bins) do not have the problem.
- **`growth` is mostly page faults and `memcpy`.** ebb and glibc resize huge blocks
  with `mremap` on `realloc` (no copy); an allocator that copies pays for it here.
  It says little about small-object speed.
- **Sized deallocation**: Rust passes the block's size to `dealloc`. tikv-jemallocator
  hands it to jemalloc (`sdallocx`, which then skips a lookup) and snmalloc-rs to
  snmalloc; ebb and the mimalloc crate ignore it. That is part of what the Rust table
  measures; C's `free` has no size.
- **`c-larson` and tcmalloc**: a block one thread frees goes into *that* thread's
  tcmalloc cache and is handed out again there; ebb (like mimalloc) returns it to the
  page of the thread that allocated it. tcmalloc was 1.13-1.26x faster here until
  ebb kept its last few full pages per class instead of abandoning each as it filled
  (see `FULL_PAGE_SLICES_KEPT` in `front/slow.rs`): in larson every page is nearly full,
  and abandoning them turned the owner's own frees into remote ones and cycled pages
  through the abandoned list every few dozen mallocs. Before that, a bounded
  per-thread cache of other threads' blocks (tcmalloc's recency, in front of the
  malloc fast path) had been tried: 1.06-1.17x *slower*, because each reused block
  still belongs to its page's owner, so its next free is a cross-thread free too.
  What is left (perf, against tcmalloc; docs/INSTRUCTIONS.md, "Cross-thread frees
  and C larson"): ebb runs fewer instructions and, in cachegrind, as many L1 misses;
  its extra time is in `free`, mostly the freed-key compare, a load from a block
  larson frees cold, where tcmalloc only stores into it.
- **Thread counts**: `larson` and `mstress` run 2 x cores threads on 2 cores, so
  threads are preempted while inside the allocator; allocators that take locks on
  their shared paths suffer more from that than lock-free ones.
- **`cache-scratch`** measures one thing only: whether the block a worker frees (made
  by the main thread, next to the other workers' blocks) is handed back to that
  worker and written to, sharing a cache line with another core. With only 2 cores
  and 8 B objects the penalty is small, and the workload is mostly a write loop: its
  ratios can say more about how each run was scheduled on a shared machine than
  about the allocators.
- **The C table uses shared libraries**: Debian's for jemalloc, tcmalloc and mimalloc
  v2.0.9 (column `mimalloc`), and mimalloc v3 built from the Rust crate's sources
  (column `mimalloc3`); calls go through the PLT; the
  Rust table's jemalloc, mimalloc (v3) and snmalloc are compiled from source into the
  binary, while its tcmalloc, mimalloc v2 and `ebb (C ABI)` columns are the glibc
  build with the shared library preloaded: every call goes through the PLT and
  cannot be inlined, and Rust's sized `dealloc` becomes a plain `free`. Compare those
  three with each other (and `ebb (C ABI)` with `ebb` for the cost of the C ABI
  itself). snmalloc is in the Rust table only.
- **Build settings**: the C allocators' `-sys` crates read cargo's `DEBUG` variable,
  which the workspace's release profile (`debug = "line-tables-only"`) turns on; with
  it, snmalloc-sys builds snmalloc as a CMake Debug build (several times slower) and
  libmimalloc-sys leaves out `NDEBUG`. The script therefore builds every variant with
  `CARGO_PROFILE_RELEASE_DEBUG=false`.
- **Peak RSS** for the small single-threaded workloads is mostly the program itself;
  a ratio of 1.3 there can be well under 1 MiB. ebb returns free memory to the OS
  after 500 ms (`EBB_PURGE_DELAY`), which lowers later RSS, not the peak.
""")
    md.append("## Machine and versions\n")
    md.append(
        f"- {meta.get('nproc', '?')} cores ({meta.get('cpu', '?')}), "
        f"{meta.get('mem_total', '?')} RAM, {meta.get('kernel', '?')}, "
        f"{meta.get('os', '?')}; run on {meta.get('date', '?')}")
    md.append(versions(meta, rust, c))
    md.append("")
    md.append("## How this was made\n")
    args = meta.get("args", "").strip()
    md.append(f"```sh\nRUNS={meta.get('runs', '?')} SCALE={meta.get('scale', '?')} "
              f"scripts/bench-speed.sh{' ' + args if args else ''}\n```\n")
    scale = meta.get("scale", "1")
    md.append(
        "The script builds `ebb-bench-speed` once per allocator, each into its own "
        "target directory:\n\n```sh\n"
        "export CARGO_PROFILE_RELEASE_DEBUG=false\n"
        "cargo build --release -p ebb-bench-speed --features alloc-ebb --target-dir target/bench-speed/ebb\n"
        "cargo build --release -p ebb-bench-speed --no-default-features --features alloc-system --target-dir target/bench-speed/system\n"
        "# likewise alloc-jemalloc, alloc-mimalloc, alloc-snmalloc\n"
        f"target/bench-speed/<allocator>/release/ebb-bench-speed <workload> --scale {scale}\n"
        "```\n\n"
        "and the C programs with `gcc -O2 -pthread`, run as "
        f"`LD_PRELOAD=<library> BENCH_ALLOCATOR=<name> target/bench-speed/results/c/<program> {scale}`. Each run "
        "prints one JSON line; the raw lines are in `target/bench-speed/results/` "
        "after a run.\n\n"
        "The Rust columns tcmalloc, mimalloc v2 and ebb (C ABI) are the `alloc-system` build, which calls C `malloc`, run as `LD_PRELOAD=<library> BENCH_ALLOCATOR=<name> target/bench-speed/system/release/ebb-bench-speed <workload>` (its JSON line then names the allocator).\n")
    md.append(
        f"Run time of this report: builds {meta.get('build_s', '?')} s (0-1 s when "
        f"nothing changed since the last build), Rust runs "
        f"{meta.get('rust_runs_s', '?')} s, C runs {meta.get('c_runs_s', '?')} s, "
        f"{meta.get('total_s', '?')} s in all.\n")
    if failures:
        md.append("Runs that failed (left out of the tables): " +
                  ", ".join(f"`{f}`" for f in failures) + "\n")
    text = "\n".join(md)
    kept = hand_written_sections(path)
    if kept:
        text = text.rstrip("\n") + "\n\n" + kept
    with open(path, "w") as f:
        f.write(text)


def hand_written_sections(path):
    """The sections after the generated ones (from the first `## ` header that follows
    "## How this was made" to the end), so a full rerun keeps the write-ups that
    interpret earlier figures (per-request arenas, large and huge replacement, ...)."""
    if not os.path.exists(path):
        return ""
    text = open(path).read()
    at = text.find("## How this was made")
    if at < 0:
        return ""
    nxt = text.find("\n## ", at + 1)
    return text[nxt + 1:] if nxt >= 0 else ""


def target_lines(c_cpu, c_time):
    """Issue 16's C targets from the CPU table (wall beside it): ebb over the best
    other allocator per program, and ebb's geometric mean over mimalloc v3's."""
    out = []
    for label, table in [("CPU", c_cpu), ("wall", c_time)]:
        if not table or not table.rows:
            continue
        worst, parts = [], []
        for w, cells in table.rows.items():
            others = [(c[0], a) for a, c in cells.items() if a != "ebb"]
            if not others:
                continue
            best, who = min(others)
            parts.append(f"`{w}` {1 / best:.2f} ({display(who)})")
            worst.append(1 / best)
        gm = table.geomeans().get("mimalloc3")
        line = f"- {label}: ebb / best other allocator per program: " + ", ".join(parts)
        if gm:
            line += f"; geometric mean of ebb / mimalloc v3: **{1 / gm:.2f}**"
        out.append(line)
    return "\n".join(out)


def c_section(meta, c, c_time, c_rss, c_cpu, c_sweep_md):
    """The C-program sections of the document (from `## C programs under LD_PRELOAD:
    time` to before `## The workloads`)."""
    md = []
    md.append("## C programs under LD_PRELOAD: time\n")
    md.append(
        f"Run {meta.get('date', '?')} at ebb commit `{meta.get('ebb_commit', '?')}`, "
        f"{meta.get('runs', '?')} interleaved runs per allocator at scale "
        f"{meta.get('scale', '?')} (load average "
        f"{meta.get('loadavg_start', '?')} at the start, {meta.get('loadavg_end', '?')} at "
        f"the end); mimalloc v3 is {meta.get('c_mimalloc3', '?')} "
        f"(`{meta.get('c_lib_mimalloc3', '?')}`), the others as under \"Machine and "
        f"versions\". Against the best other allocator (issue 16: geometric mean of CPU "
        f"≤ 0.95 × mimalloc v3, no program above 1.05 × the best; below 1 ebb is "
        f"faster):\n")
    md.append(target_lines(c_cpu, c_time) + "\n")
    md.append(markdown_table(c_time, "ms", "time") + "\n")
    if c_cpu and c_cpu.rows:
        md.append("## C programs under LD_PRELOAD: CPU time\n")
        md.append(markdown_table(c_cpu, "ms", "CPU") + "\n")
    purger_md = purger_table(group(c), ["ebb"], display)
    if purger_md:
        md.append("### C programs: ebb's purger\n")
        md.append(purger_md)
    md.append("## C programs under LD_PRELOAD: peak RSS\n")
    md.append(markdown_table(c_rss, "kib", "peak RSS") + "\n")
    md.append(loss_section(c_time, c_rss))
    if c_sweep_md:
        md.append("### `c-sweep` per size\n")
        md.append(c_sweep_md + "\n")
    return "\n".join(md)


def replace_c_section(path, section):
    """Put `section` in place of the C sections of the document at `path`, keeping the
    rest (hand-written sections included) as it is."""
    text = open(path).read()
    start = text.index("## C programs under LD_PRELOAD: time")
    end = text.index("## The workloads", start)
    with open(path, "w") as f:
        f.write(text[:start] + section + "\n" + text[end:])


def check_checksums(grouped, label):
    bad = []
    for w, by_alloc in grouped.items():
        sums = {r["checksum"] for rows in by_alloc.values() for r in rows}
        if len(sums) > 1:
            bad.append(f"{label} {w}: checksums differ between runs: {sorted(sums)}")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--doc")
    ap.add_argument("--svg")
    ap.add_argument("--c-into", help="rewrite only the C sections of this document")
    args = ap.parse_args()
    rust = load(os.path.join(args.results, "rust.jsonl"))
    c = load(os.path.join(args.results, "c.jsonl"))
    meta = load_meta(os.path.join(args.results, "meta.txt"))
    failures = []
    fpath = os.path.join(args.results, "failures.txt")
    if os.path.exists(fpath):
        failures = [l.strip() for l in open(fpath) if l.strip()]

    rg, cg = group(rust), group(c)
    rust_allocs = [a for a in RUST_ORDER if any(a in v for v in rg.values())]
    c_allocs = [a for a in C_ORDER if any(a in v for v in cg.values())]
    rust_time = Table(rg, rust_allocs, lambda r: r["wall_ms"])
    rust_rss = Table(rg, rust_allocs, lambda r: r["peak_rss_kib"])
    rust_cpu = Table(rg, rust_allocs, lambda r: r.get("cpu_ms"))
    c_cpu = Table(cg, c_allocs, lambda r: r.get("cpu_ms")) if c else None
    c_time = Table(cg, c_allocs, lambda r: r["wall_ms"]) if c else None
    c_rss = Table(cg, c_allocs, lambda r: r["peak_rss_kib"]) if c else None

    runs = meta.get("runs", "?")
    if args.c_into:
        c_sweep_md = sweep_table(cg["c-sweep"], c_allocs) if "c-sweep" in cg else None
        print(text_table(c_cpu, "ms", "C programs (LD_PRELOAD), CPU: ratio to ebb"))
        print()
        print(text_table(c_rss, "kib", "C programs (LD_PRELOAD), peak RSS: ratio to ebb"))
        print(target_lines(c_cpu, c_time))
        replace_c_section(args.c_into, c_section(meta, c, c_time, c_rss, c_cpu, c_sweep_md))
        print(f"wrote the C sections of {args.c_into}")
        problems = check_checksums(cg, "c")
        for p in problems:
            print("WARNING: " + p, file=sys.stderr)
        return 1 if problems else 0
    print(text_table(rust_time, "ms", f"Rust workloads, time: median(X)/median(ebb) "
                                      f"(min-max), {runs} interleaved runs; > 1: ebb faster"))
    print()
    print(text_table(rust_rss, "kib", "Rust workloads, peak RSS (VmHWM): ratio to ebb; "
                                      "> 1: ebb smaller"))
    if c_time and c_time.rows:
        print()
        print(text_table(c_time, "ms", "C programs (LD_PRELOAD), time: ratio to ebb"))
        print()
        print(text_table(c_rss, "kib", "C programs (LD_PRELOAD), peak RSS: ratio to ebb"))
    problems = check_checksums(rg, "rust") + check_checksums(cg, "c")
    for p in problems:
        print("WARNING: " + p, file=sys.stderr)

    sweep_md = sweep_table(rg["sweep"], rust_allocs) if "sweep" in rg else None
    c_sweep_md = sweep_table(cg["c-sweep"], c_allocs) if "c-sweep" in cg else None
    if args.svg:
        panels = [("Rust workloads: wall time", "median time of X / median time of ebb",
                   rust_time, ("slower", "faster")),
                  ("Rust workloads: peak RSS", "median VmHWM of X / median VmHWM of ebb",
                   rust_rss, ("larger", "smaller"))]
        if c_time and c_time.rows:
            panels.append(("C programs under LD_PRELOAD: wall time",
                           "median time of X / median time of ebb", c_time,
                           ("slower", "faster")))
        write_svg(args.svg, panels)
        print(f"wrote {args.svg}")
    if args.doc:
        svg_rel = os.path.relpath(args.svg, os.path.dirname(args.doc)) if args.svg else ""
        write_doc(args.doc, svg_rel, meta, rust, c, rust_time, rust_rss, c_time, c_rss,
                  sweep_md, c_sweep_md, failures + problems, rust_cpu, c_cpu)
        print(f"wrote {args.doc}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
