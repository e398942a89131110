#!/usr/bin/env bash
# One benchmark program under several preloaded libraries, interleaved: for comparing
# two builds of libebb.so (a branch against its base) with peers beside them, where
# bench-speed.sh compares one build against the peers.
#
# Runs the command RUNS times under each library (NAME=PATH; an empty PATH is no
# preload, i.e. glibc), the starting library rotating from one round to the next, and
# prints per library the median CPU (`cpu_ms`: user+sys, all threads) with its min-max,
# the ratio of medians to the first library's, the median of the per-round ratios
# ("paired") with a 95% confidence interval for it, and the median wall time. The
# interval is the sign test's (distribution-free: the k-th smallest and k-th largest
# per-round ratio, k from the binomial distribution; it needs 6 runs or more), so a
# difference is measured only when the interval leaves 1 out: the verdict column says
# "faster" or "slower" then, "level" when the interval holds 1 (the runs cannot tell
# the two apart), and adds "<=1.05" when all of the interval is at most 1.05 (the
# issues' "no more than 5% slower" is then shown, not only likely). The command must print the JSON line that
# bench/speed's programs print (the last line with "cpu_ms" counts): the C programs
# (bench/speed/c, built by bench-speed.sh into $OUT/c) and ebb-bench-speed's `alloc-system`
# build (target/bench-speed/system) both do.
#
#   cp target/release/libebb.so /tmp/base.so      # on the base commit, then on yours:
#   RUNS=15 scripts/ab-preload.sh base=/tmp/base.so mine=target/release/libebb.so \
#       tcmalloc=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 \
#       -- target/bench-larson/c/larson 0.5
#   scripts/ab-preload.sh base=/tmp/base.so mine=target/release/libebb.so \
#       -- target/bench-speed/system/release/ebb-bench-speed prodcons --scale 0.5
#
# With BINARIES=1 each NAME=PATH is a program instead, run with the arguments after
# `--` and nothing preloaded: builds of bench/speed with their allocator compiled in
# (`#[global_allocator]`), e.g. ebb at two commits beside snmalloc:
#
#   BINARIES=1 scripts/ab-preload.sh new=target/bench-speed/ebb/release/ebb-bench-speed \
#       old=/tmp/old/ebb-bench-speed snmalloc=target/bench-speed/snmalloc/release/ebb-bench-speed \
#       -- mstress --scale 1
#
# A NAME's value may start with environment assignments for its runs, comma separated,
# ended by `@`: one library under two settings of an option, interleaved, e.g.
#
#   scripts/ab-preload.sh on=target/release/libebb.so \
#       off=EBB_DENSE_HUGE_PAGES=0@target/release/libebb.so -- target/bench-speed/c48/c/sweep 1
#
# (with BINARIES=1, `NAME=VAR=VALUE@PROGRAM`). An empty library after `@` is glibc.
#
# Environment: RUNS (9), NICE (19: the niceness of every run; a shared machine),
# BINARIES (0).
set -euo pipefail

RUNS=${RUNS:-9}
NICE=${NICE:-19}
BINARIES=${BINARIES:-0}
names=()
libs=()
envs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    case $1 in
        *=*)
            names+=("${1%%=*}")
            value=${1#*=}
            case $value in
                *@*) envs+=("${value%%@*}"); libs+=("${value#*@}") ;;
                *) envs+=(""); libs+=("$value") ;;
            esac
            ;;
        *) echo "usage: $0 NAME=LIB... -- COMMAND..." >&2; exit 2 ;;
    esac
    shift
done
[ "${1:-}" = "--" ] && shift
if [ ${#names[@]} -eq 0 ] || [ $# -eq 0 ]; then
    echo "usage: $0 NAME=LIB... -- COMMAND...  (BINARIES=1: NAME=PROGRAM... -- ARGS...)" >&2
    exit 2
fi
n=${#names[@]}
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for run in $(seq 1 "$RUNS"); do
    for k in $(seq 0 $((n - 1))); do
        i=$(((k + run - 1) % n))
        # The NAME's own assignments (`VAR=VALUE,...@`), as `env` arguments.
        IFS=, read -r -a assign <<<"${envs[$i]}"
        if [ "$BINARIES" = 1 ]; then
            line=$(nice -n "$NICE" env "${assign[@]}" "${libs[$i]}" "$@" | grep '"cpu_ms"' | tail -1)
        else
            line=$(nice -n "$NICE" env "${assign[@]}" LD_PRELOAD="${libs[$i]}" "$@" | grep '"cpu_ms"' | tail -1)
        fi
        printf '%s\t%s\t%s\n' "$run" "${names[$i]}" "$line" >>"$results"
    done
done
python3 - "$results" "${names[@]}" <<'EOF'
import json, math, statistics, sys


def sign_test_interval(ratios, level=0.95):
    """The distribution-free confidence interval for the median of `ratios` (the sign
    test's): from the k-th smallest to the k-th largest, with the largest k whose
    interval still holds the median with probability >= level. None below 6 values,
    where no interval of the values reaches 95%."""
    n = len(ratios)
    k = 0
    tail = 0.0  # P(fewer than j of n fair coin flips come up heads)
    for j in range(1, n // 2 + 1):
        tail += math.comb(n, j - 1) / 2**n
        if 1 - 2 * tail < level:
            break
        k = j
    if k == 0:
        return None
    xs = sorted(ratios)
    return xs[k - 1], xs[n - k]


rows = {}
for line in open(sys.argv[1]):
    run, name, doc = line.rstrip("\n").split("\t", 2)
    d = json.loads(doc)
    rows.setdefault(name, {})[int(run)] = (d["cpu_ms"], d["wall_ms"])
names = sys.argv[2:]
first = rows[names[0]]
base = statistics.median(c for c, _ in first.values())
print(f"CPU against {names[0]}'s, {len(first)} interleaved runs; interval: 95% for the "
      "paired median (sign test)")
print(f"{'library':12s} {'CPU ms':>8s} {'(min-max)':>15s} {'ratio':>6s} {'paired':>7s} "
      f"{'interval':>11s} {'verdict':>15s} {'wall ms':>8s}")
for name in names:
    r = rows[name]
    cpu = [c for c, _ in r.values()]
    paired = [r[k][0] / first[k][0] for k in r if k in first and first[k][0] > 0]
    med = statistics.median(cpu)
    interval, verdict = "", ""
    if name != names[0]:
        ci = sign_test_interval(paired)
        if ci is None:
            interval = "(< 6 runs)"
        else:
            lo, hi = ci
            interval = f"{lo:.2f}-{hi:.2f}"
            verdict = "faster" if hi < 1 else "slower" if lo > 1 else "level"
            if hi <= 1.05:
                verdict += ", <=1.05"
    print(f"{name:12s} {med:8.0f} {min(cpu):7.0f}-{max(cpu):<7.0f} {med / base:6.2f} "
          f"{statistics.median(paired):7.2f} {interval:>11s} {verdict:>15s} "
          f"{statistics.median(w for _, w in r.values()):8.0f}")
EOF
