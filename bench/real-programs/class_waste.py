#!/usr/bin/env python3
"""Rounding waste of the blocks live at a program's peak, under candidate class sets.

    class_waste.py DIR [--rust NAME ...] [--top N]

DIR holds the files `live_sizes.c` writes (live.COMM.PID: "size count" lines). For each
file: live requested bytes at the peak, and the bytes rounding adds under glibc (chunk =
request + 8 rounded to 16, at least 32), ebb's classes before branch classes1 ("old"), and
each candidate set; with --top, the sizes that waste the most under "old". C programs'
requests above 8 B are rounded to 16 first (ebb's `c_class_of`); files whose COMM is given
with --rust are not (a Rust program's `#[global_allocator]` requests).
"""
import argparse
import bisect
import glob
import os

MEDIUM_MAX = 512 * 1024


def old_classes():
    cs = list(range(8, 129, 8))
    k = 7
    while (1 << k) < MEDIUM_MAX:
        cs += [(1 << k) + (j << (k - 3)) for j in range(1, 9)]
        k += 1
    return cs


def with_extra(extra):
    return sorted(set(old_classes()) | set(e for e in extra if e <= MEDIUM_MAX))


def pow2s(lo_log2, hi_log2=18):
    return range(lo_log2, hi_log2 + 1)


CANDIDATES = {
    "old": old_classes(),
    # one class 16 B above each power of two from 1 KiB
    "p2+16": with_extra((1 << k) + 16 for k in pow2s(10)),
    # one class 1/32 above each power of two from 1 KiB
    "p2+1/32": with_extra((1 << k) + (1 << (k - 5)) for k in pow2s(10)),
    # the first step above each power of two from 1 KiB split in four
    "p2+j/32": with_extra((1 << k) + (j << (k - 5)) for k in pow2s(10) for j in (1, 2, 3)),
    # 16 B and the first step split in four
    "p2+16,j/32": with_extra([(1 << k) + 16 for k in pow2s(10)]
                             + [(1 << k) + (j << (k - 5)) for k in pow2s(10) for j in (1, 2, 3)]),
    # branch classes1's first build: 16 B and the first step split in four, 1 KiB to 8 KiB
    "four": with_extra([(1 << k) + 16 for k in pow2s(10, 12)]
                       + [(1 << k) + (j << (k - 5)) for k in pow2s(10, 12) for j in (1, 2, 3)]),
    # what branch classes1 kept: 2^k + 16 and 2^k + 3/32, 1 KiB to 8 KiB (blocks of
    # one-slice pages)
    "new": with_extra([(1 << k) + 16 for k in pow2s(10, 12)]
                      + [(1 << k) + (3 << (k - 5)) for k in pow2s(10, 12)]),
    # sixteen classes per doubling from 1 KiB
    "16/doubling": with_extra((1 << k) + (j << (k - 4)) for k in pow2s(10) for j in range(1, 16, 2)),
}


def glibc_waste(size):
    return max(32, (size + 8 + 15) & ~15) - size


def waste(classes, size, rust):
    if size > MEDIUM_MAX:
        return 0
    r = size if rust or size <= 8 else (size + 15) & ~15
    r = max(r, 16)
    return classes[bisect.bisect_left(classes, r)] - size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--rust", nargs="*", default=["ast-churn-syste"])
    ap.add_argument("--top", type=int, default=0)
    args = ap.parse_args()
    names = list(CANDIDATES)
    print("%-28s %9s %8s " % ("process", "live MiB", "glibc") + " ".join("%10s" % n for n in names))
    for path in sorted(glob.glob(os.path.join(args.dir, "live.*"))):
        comm = os.path.basename(path).split(".")[1]
        rust = comm in args.rust
        hist = []
        for line in open(path):
            if line.startswith("#"):
                continue
            s, c = map(int, line.split())
            hist.append((s, c))
        live = sum(s * c for s, c in hist)
        if live < (1 << 20):
            continue
        mib = lambda b: b / (1 << 20)
        row = [sum(c * waste(CANDIDATES[n], s, rust) for s, c in hist) for n in names]
        g = sum(c * glibc_waste(s) for s, c in hist)
        print("%-28s %9.1f %8.2f " % (os.path.basename(path), mib(live), mib(g))
              + " ".join("%10.2f" % mib(w) for w in row))
        if args.top:
            top = sorted(hist, key=lambda sc: -sc[1] * waste(CANDIDATES["old"], sc[0], rust))
            for s, c in top[:args.top]:
                print("    size %7d x %8d: old %7.2f MiB" % (s, c, mib(c * waste(CANDIDATES["old"], s, rust)))
                      + "".join("  %s %.2f" % (n, mib(c * waste(CANDIDATES[n], s, rust))) for n in names[1:]))


if __name__ == "__main__":
    main()
