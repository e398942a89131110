#!/usr/bin/env python3
"""Sums a cachegrind output file (valgrind --tool=cachegrind --cache-sim=yes) into the
whole run and the allocator's share, for scripts/cachegrind.sh.

    cg_split.py OUT_FILE ALLOCATOR [--top N]

    cg_split.py OUT_FILE ALLOCATOR --lines N

Prints one line of `key=value` pairs: ir, d1 (D1 misses = D1mr + D1mw), d1mr, d1mw,
dr, dw for the whole run, and the same with an `alloc_` prefix for the allocator's
functions; with --top N, then the N functions with the most D1 misses (allocator's or
not), one per line: `d1mr d1mw ir side file:function`; with --lines N instead, the N
source lines of the allocator's functions with the most D1 misses (for a library with
line tables, such as libebb.so): `d1mr d1mw ir file:line  source text`.

Which functions are the allocator's: those of the malloc API (malloc, free, ...), of
glibc's malloc/*.c, and those named like the allocator's own code (ebb:: and
crates/ebb*, mi_/_mi_, tcmalloc::/tc_, je_). Debian's libtcmalloc-minimal4,
libjemalloc2 and libmimalloc2.0 are stripped: their internal functions show up as
`???:???`, so for those allocators `???` code counts as the allocator's. In a run
without such a library the `???` code is small (the dynamic loader's stubs, vdso).
"""

import re
import sys

API = {
    "malloc", "free", "calloc", "realloc", "posix_memalign", "aligned_alloc", "memalign",
    "valloc", "pvalloc", "cfree", "malloc_usable_size", "reallocarray",
    "__libc_malloc", "__libc_free", "__libc_calloc", "__libc_realloc", "__libc_memalign",
    "__posix_memalign",
    # C++ operators (tcmalloc and mimalloc export them)
    "operator new(unsigned long)", "operator delete(void*)",
    "operator delete(void*, unsigned long)", "operator new[](unsigned long)",
    "operator delete[](void*)",
}

OWN = {
    "ebb": re.compile(r"^<?(ebb|ebb_capi)::"),
    "ebb-rs": re.compile(r"^(<?ebb::|__rust_alloc|__rust_dealloc|__rust_realloc|"
                         r"__rust_alloc_zeroed|__rg_)"),
    "mimalloc2": re.compile(r"^_?mi_"),
    "mimalloc3": re.compile(r"^_?mi_"),
    "tcmalloc": re.compile(r"^(tcmalloc::|tc_|TCMalloc|\(anonymous namespace\)::|"
                           r"SpinLock|base::internal::)"),
    "jemalloc": re.compile(r"^(je_|_rjem_)"),
    "glibc": re.compile(r"^(_int_|malloc_|tcache_|sysmalloc|systrim|unlink_chunk|"
                        r"alloc_perturb|arena_)"),
}

# Allocators whose library has no symbol table for its internal functions.
STRIPPED = {"tcmalloc", "jemalloc", "mimalloc2"}


def is_allocator(allocator, fl, fn):
    if fn in API:
        return True
    if "/malloc/" in fl and fl.endswith(".c"):  # glibc's malloc sources
        return True
    if allocator in ("ebb", "ebb-rs") and "/crates/ebb" in fl:
        return True
    own = OWN.get(allocator)
    if own and own.match(fn):
        return True
    return allocator in STRIPPED and fn == "???"


def main():
    args = sys.argv[1:]
    top = lines = 0
    if "--top" in args:
        i = args.index("--top")
        top = int(args[i + 1])
        del args[i:i + 2]
    if "--lines" in args:
        i = args.index("--lines")
        lines = int(args[i + 1])
        del args[i:i + 2]
    path, allocator = args
    events, per_fn, per_line = None, {}, {}
    fl = fn = "???"
    with open(path) as f:
        for line in f:
            if line[0].isdigit():
                if events is None:
                    continue
                parts = line.split()
                nums = parts[1:]
                acc = per_fn.setdefault((fl, fn), [0] * len(events))
                for k, v in enumerate(nums):
                    acc[k] += int(v)
                if lines:
                    acc = per_line.setdefault((fl, fn, int(parts[0])), [0] * len(events))
                    for k, v in enumerate(nums):
                        acc[k] += int(v)
            elif line.startswith("fl="):
                fl = line[3:].strip()
            elif line.startswith("fn="):
                fn = line[3:].strip()
            elif line.startswith("events:"):
                events = line.split()[1:]
    idx = {e: k for k, e in enumerate(events)}
    need = ["Ir", "Dr", "Dw", "D1mr", "D1mw"]
    missing = [e for e in need if e not in idx]
    if missing:
        sys.exit(f"{path}: no {missing} events (run cachegrind with --cache-sim=yes)")

    def sums(items):
        t = {e: sum(v[idx[e]] for v in items) for e in need}
        return {"ir": t["Ir"], "dr": t["Dr"], "dw": t["Dw"], "d1mr": t["D1mr"],
                "d1mw": t["D1mw"], "d1": t["D1mr"] + t["D1mw"]}

    total = sums(list(per_fn.values()))
    alloc = sums([v for (fl_, fn_), v in per_fn.items() if is_allocator(allocator, fl_, fn_)])
    print(" ".join([f"{k}={v}" for k, v in total.items()] +
                   [f"alloc_{k}={v}" for k, v in alloc.items()]))
    if lines:
        by_line = {}
        for (fl_, fn_, ln), v in per_line.items():
            if is_allocator(allocator, fl_, fn_):
                acc = by_line.setdefault((fl_, ln), [0] * len(events))
                for k, x in enumerate(v):
                    acc[k] += x
        ranked = sorted(by_line.items(), key=lambda kv: -(kv[1][idx["D1mr"]] + kv[1][idx["D1mw"]]))
        sources = {}
        for (fl_, ln), v in ranked[:lines]:
            if fl_ not in sources:
                try:
                    with open(fl_) as f:
                        sources[fl_] = f.read().split("\n")
                except OSError:
                    sources[fl_] = []
            text = sources[fl_][ln - 1].strip() if 0 < ln <= len(sources[fl_]) else ""
            short = fl_.split("/crates/", 1)[-1]
            print(f"{v[idx['D1mr']]:>9} {v[idx['D1mw']]:>9} {v[idx['Ir']]:>11}  "
                  f"{short}:{ln}  {text[:90]}")
    if top:
        ranked = sorted(per_fn.items(), key=lambda kv: -(kv[1][idx["D1mr"]] + kv[1][idx["D1mw"]]))
        for (fl_, fn_), v in ranked[:top]:
            side = "alloc" if is_allocator(allocator, fl_, fn_) else "prog"
            print(f"{v[idx['D1mr']]:>10} {v[idx['D1mw']]:>10} {v[idx['Ir']]:>12} {side:>5} "
                  f"{fl_}:{fn_}")


if __name__ == "__main__":
    main()
