#!/usr/bin/env python3
"""Writes the inputs of the real-programs suite into a directory, deterministically.

    gen_inputs.py DIR SCALE

SCALE 1 is the size of a full run (about 15-20 minutes for the whole suite on two busy
cores); everything grows linearly with it. Inputs that already exist at the same scale
are kept (DIR/inputs.scale records it). Only the standard library is used, with a
seeded generator of its own, so the same SCALE gives byte-identical files everywhere.

- records.json  a JSON array of event records (about 57 MB at SCALE 1), for jq and CPython
- big.c         a C translation unit of many functions (about 340 KB at SCALE 1: gcc -O2 spends seconds on it), for gcc
- build/        a small C project (120 files at SCALE 1) and its Makefile, for make: many short processes
- the rust tool's source tree is written by `ast-churn gen` (see rust-tool/)
"""
import json
import os
import sys


class Rng:
    """splitmix64, so the inputs never depend on Python's random module's version."""

    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFFFFFFFFFF

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % n


WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi "
         "omicron pi rho sigma tau upsilon phi chi psi omega red green blue amber "
         "cobalt ivory jade onyx ruby topaz").split()


def records_json(path, scale):
    rng = Rng(1)
    count = max(1000, int(250_000 * scale))
    users = max(50, count // 20)
    with open(path + ".tmp", "w") as out:
        out.write("[\n")
        for i in range(count):
            rec = {
                "id": i,
                "user": "user%06d" % rng.below(users),
                "category": "cat%03d" % rng.below(200),
                "amount": rng.below(1_000_000) / 100,
                "ts": 1_700_000_000 + rng.below(10_000_000),
                "tags": [WORDS[rng.below(len(WORDS))] for _ in range(1 + rng.below(5))],
                "text": " ".join(WORDS[rng.below(len(WORDS))] for _ in range(3 + rng.below(20))),
                "geo": {"lat": rng.below(180_000) / 1000 - 90, "lon": rng.below(360_000) / 1000 - 180},
            }
            out.write(json.dumps(rec, separators=(",", ":")))
            out.write(",\n" if i + 1 < count else "\n")
        out.write("]\n")
    os.replace(path + ".tmp", path)


def c_expr(rng, depth, names):
    if depth == 0 or rng.below(4) == 0:
        return names[rng.below(len(names))] if rng.below(2) else str(rng.below(1000))
    a = c_expr(rng, depth - 1, names)
    b = c_expr(rng, depth - 1, names)
    kind = rng.below(6)
    if kind == 0:
        return "(%s ? %s : %s)" % (c_expr(rng, depth - 1, names), a, b)
    if kind == 1:
        return "helper%d(%s, %s)" % (rng.below(8), a, b)
    return "(%s %s %s)" % (a, "+-*^&|"[rng.below(6)], b)


def big_c(path, scale):
    rng = Rng(2)
    functions = max(10, int(130 * scale))
    lines = ["/* Generated translation unit for the real-programs suite. */",
             "#include <stdint.h>", "#include <string.h>", ""]
    for h in range(8):
        lines.append("static inline long helper%d(long a, long b) { return (a << %d) ^ (b >> 1) ^ %d; }"
                     % (h, h + 1, h * 7919))
    for f in range(functions):
        fields = 2 + rng.below(8)
        lines.append("struct rec%d { %s };" % (f, " ".join("long f%d;" % k for k in range(fields))))
        names = ["a", "b", "c", "r->f0", "r->f1", "acc", "i"]
        lines.append("long fn%d(struct rec%d *r, long a, long b, long c) {" % (f, f))
        lines.append("    long acc = %d;" % rng.below(100))
        for _ in range(2 + rng.below(5)):
            lines.append("    for (long i = 0; i < %s; i++) {" % (8 + rng.below(64)))
            lines.append("        acc += %s;" % c_expr(rng, 4, names))
            lines.append("        switch ((acc ^ i) & 7) {")
            for case in range(1 + rng.below(7)):
                lines.append("        case %d: a = %s; break;" % (case, c_expr(rng, 3, names)))
            lines.append("        default: b ^= %s;" % c_expr(rng, 2, names))
            lines.append("        }")
            lines.append("    }")
            outer = names[:-1]  # no loop counter outside the loop
            lines.append("    if (%s > %d) c += %s;" % (c_expr(rng, 3, outer), rng.below(500), c_expr(rng, 3, outer)))
        lines.append("    r->f%d = acc;" % rng.below(fields))
        if f > 0 and rng.below(3) == 0:
            lines.append("    { struct rec%d t; memset(&t, 0, sizeof t); acc += fn%d(&t, a, b, c) & 15; }"
                         % (f - 1, f - 1))
        lines.append("    return acc ^ a ^ b ^ c;")
        lines.append("}")
        lines.append("")
    with open(path + ".tmp", "w") as out:
        out.write("\n".join(lines))
    os.replace(path + ".tmp", path)


def build_tree(path, scale):
    """A C project of many small files and a Makefile: `make -j2 -B all` compiles each
    (the gcc driver, cc1 and as: three short processes a file), links them, and counts
    the lines of every source with `wc` (a shell loop, one process a file), as a build
    or a configure script does. Under LD_PRELOAD every one of those processes loads the
    allocator, so this is where what an allocator costs a process's start and exit
    shows."""
    rng = Rng(3)
    files = max(8, int(120 * scale))
    os.makedirs(path, exist_ok=True)
    names = ["a", "b", "acc", "i"]
    decls = []
    for f in range(files):
        lines = ["/* Generated for the real-programs suite's make program. */", ""]
        for h in range(8):
            lines.append("static long helper%d(long a, long b) { return (a << %d) ^ (b >> 1) ^ %d; }"
                         % (h, h + 1, h * 7919))
        for g in range(1 + rng.below(4)):
            lines.append("long m%d_%d(long a, long b) {" % (f, g))
            lines.append("    long acc = %d;" % rng.below(100))
            lines.append("    for (long i = 0; i < %d; i++)" % (4 + rng.below(16)))
            lines.append("        acc += %s;" % c_expr(rng, 3, names))
            lines.append("    return acc ^ %s;" % c_expr(rng, 2, names[:3]))
            lines.append("}")
            decls.append("m%d_%d" % (f, g))
        with open(os.path.join(path, "m%03d.c" % f), "w") as out:
            out.write("\n".join(lines) + "\n")
    main_lines = ["#include <stdio.h>"]
    main_lines += ["long %s(long, long);" % d for d in decls]
    main_lines.append("int main(void) {")
    main_lines.append("    long acc = 0;")
    main_lines += ["    acc ^= %s(acc, %d);" % (d, i) for i, d in enumerate(decls)]
    main_lines.append('    printf("%ld\\n", acc);')
    main_lines.append("    return 0;")
    main_lines.append("}")
    with open(os.path.join(path, "main.c"), "w") as out:
        out.write("\n".join(main_lines) + "\n")
    objs = " ".join("m%03d.o" % f for f in range(files)) + " main.o"
    with open(os.path.join(path, "Makefile"), "w") as out:
        out.write("OBJS = %s\n\n" % objs)
        out.write("all: prog lines\n\n")
        out.write("prog: $(OBJS)\n\tgcc -o $@ $(OBJS)\n\n")
        out.write("%.o: %.c\n\tgcc -O1 -w -c $< -o $@\n\n")
        out.write("lines: prog\n\t@for f in *.c; do wc -l < $$f; done | sort -n | uniq -c\n\t@./prog\n")
        out.write("\n.PHONY: all lines\n")


def ninja_graph(path, scale):
    """A ninja build graph the size of a large C++ project's (Chromium's has ~100k
    edges): compile edges for sources in a directory tree, each with its own flags
    variable and a dozen header dependencies out of a shared pool, static libraries per
    directory, and executables linking them. `ninja -n` parses it, builds the graph
    (nodes, edges, strings, hash maps: a C++ program that allocates little and often)
    and prints every command it would run, without running any."""
    rng = Rng(5)
    edges = max(200, int(40_000 * scale))
    dirs = max(4, edges // 100)
    headers = ["include/h%d/%04d.h" % (h % 16, h) for h in range(max(50, edges // 20))]
    os.makedirs(path, exist_ok=True)
    lines = [
        "# Generated for the real-programs suite's ninja program.",
        "ninja_required_version = 1.5",
        "cflags = -O2 -Wall -Iinclude",
        "rule cc",
        "  command = gcc $cflags $extra -MD -MF $out.d -c $in -o $out",
        "  description = CC $out",
        "  depfile = $out.d",
        "rule ar",
        "  command = ar rcs $out $in",
        "  description = AR $out",
        "rule link",
        "  command = gcc -o $out $in $libs",
        "  description = LINK $out",
        "",
    ]
    # The sources and headers do not exist: phony edges without inputs stand for them
    # (as for files a generator step would write), so the dry run finds every input.
    lines += ["build %s: phony" % h for h in headers]
    objs_of = [[] for _ in range(dirs)]
    for e in range(edges):
        d = rng.below(dirs)
        src = "src/d%03d/file_%05d.cc" % (d, e)
        obj = "obj/d%03d/file_%05d.o" % (d, e)
        deps = " ".join(headers[rng.below(len(headers))] for _ in range(4 + rng.below(16)))
        lines.append("build %s: cc %s | %s" % (obj, src, deps))
        lines.append("  extra = -DUNIT=%d -DDIR=%d" % (e, d))
        lines.append("build %s: phony" % src)
        objs_of[d].append(obj)
    for d, objs in enumerate(objs_of):
        if objs:
            lines.append("build lib/libd%03d.a: ar %s" % (d, " ".join(objs)))
    libs = ["lib/libd%03d.a" % d for d, objs in enumerate(objs_of) if objs]
    for x in range(max(2, dirs // 10)):
        picked = sorted({libs[rng.below(len(libs))] for _ in range(8)})
        lines.append("build bin/tool%02d: link %s" % (x, " ".join(picked)))
        lines.append("  libs = -lm")
    tools = ["bin/tool%02d" % x for x in range(max(2, dirs // 10))]
    lines.append("build all: phony %s" % " ".join(tools + libs))
    lines.append("default all")
    with open(os.path.join(path, "build.ninja"), "w") as out:
        out.write("\n".join(lines) + "\n")


def main():
    out_dir, scale = sys.argv[1], float(sys.argv[2])
    os.makedirs(out_dir, exist_ok=True)
    stamp = os.path.join(out_dir, "inputs.scale")
    if os.path.exists(stamp) and open(stamp).read().strip() == repr(scale) and \
            all(os.path.exists(os.path.join(out_dir, f)) for f in ("records.json", "big.c", "build/Makefile", "ninja/build.ninja")):
        return
    records_json(os.path.join(out_dir, "records.json"), scale)
    big_c(os.path.join(out_dir, "big.c"), scale)
    build_tree(os.path.join(out_dir, "build"), scale)
    ninja_graph(os.path.join(out_dir, "ninja"), scale)
    with open(stamp, "w") as f:
        f.write(repr(scale) + "\n")


if __name__ == "__main__":
    main()
