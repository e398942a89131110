#!/usr/bin/env bash
# Cost of the secure build's levels on the speed suite's Rust workloads.
#
# Runs bench/speed's `alloc-system` build (it calls C malloc) with a library preloaded,
# interleaved (the configurations rotate from one round to the next), RUNS times each:
#   ebb          libebb.so
#   light        libebb_secure.so, EBB_SECURE=light
#   full         libebb_secure.so, EBB_SECURE=full
# plus any extra "name=ENV=VALUE[,ENV=VALUE...]" configurations of libebb.so in EXTRA
# (e.g. EXTRA="check=EBB_CHECK=1") and of libebb_secure.so in SECURE_EXTRA (e.g.
# SECURE_EXTRA="full-nocanary=EBB_CANARY=0 light-canary=EBB_SECURE=light,EBB_CANARY=1"),
# and of any other library in OTHER="name=/abs/lib.so[:ENV=VALUE,...] ..." (e.g. the
# secure library of another commit, to compare two versions in the same rounds).
# Prints, per workload, the median wall time and the
# median whole-process CPU time (user + system of every thread) of each configuration
# as a ratio to ebb's, and their geometric means.
#
#   scripts/bench-secure.sh                    # every workload, RUNS=5
#   RUNS=3 scripts/bench-secure.sh churn larson
#   CARGO_TARGET_DIR=/tmp/t scripts/bench-secure.sh   # the libraries from another target dir
#   LIBDIR=/tmp/copy scripts/bench-secure.sh   # libebb.so and libebb_secure.so copied
#                                              # there (no cargo build of them)
#   INSTR=1 scripts/bench-secure.sh            # instruction totals instead of time
#
# INSTR=1: each workload once per configuration under valgrind (callgrind's
# `Collected` total, the method of docs/BENCHMARKS.md "Secure build"), printed as a
# ratio to ebb's with the geometric mean: exact where time is noise (multi-threaded
# workloads and the purger move by about a point). JOBS=2 runs two valgrinds at once.
# Counts are kept in target/bench-secure/instr-cache, keyed by the library's, the
# bench binary's and the configuration's hash, the workload and SCALE, so a rerun
# after a change to libebb_secure.so counts only the secure configurations again
# (INSTR_CACHE=0: count everything). About 15 minutes per configuration at SCALE=1.
#
# On a shared machine absolute times are noise; only the interleaved ratios mean
# something.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
SCALE=${SCALE:-1}
OUT=target/bench-secure
mkdir -p "$OUT"
: >"$OUT/runs.jsonl"
TARGET=${CARGO_TARGET_DIR:-target}
if [ -z "${LIBDIR:-}" ]; then
    nice -n 10 cargo build --release -p ebb-capi -p ebb-capi-secure >"$OUT/build.log" 2>&1 ||
        { cat "$OUT/build.log" >&2; exit 1; }
fi
CARGO_PROFILE_RELEASE_DEBUG=false nice -n 10 cargo build --release -p ebb-bench-speed \
    --no-default-features --features alloc-system --target-dir target/bench-speed/system \
    >>"$OUT/build.log" 2>&1 || { cat "$OUT/build.log" >&2; exit 1; }
BIN=target/bench-speed/system/release/ebb-bench-speed
LIB=$(realpath "${LIBDIR:-$TARGET/release}/libebb.so")
SECURE=$(realpath "${LIBDIR:-$TARGET/release}/libebb_secure.so")
CONFIGS=("ebb=$LIB" "light=$SECURE:EBB_SECURE=light" "full=$SECURE:EBB_SECURE=full")
for extra in ${EXTRA:-}; do
    CONFIGS+=("${extra%%=*}=$LIB:${extra#*=}")
done
for extra in ${SECURE_EXTRA:-}; do
    CONFIGS+=("${extra%%=*}=$SECURE:${extra#*=}")
done
for extra in ${OTHER:-}; do
    CONFIGS+=("$extra")
done
WORKLOADS=("$@")
if [ ${#WORKLOADS[@]} -eq 0 ]; then
    mapfile -t WORKLOADS < <("$BIN" --list)
fi
n=${#CONFIGS[@]}
if [ "${INSTR:-0}" = 1 ]; then
    CACHE=$OUT/instr-cache
    mkdir -p "$CACHE"
    binsum=$(sha1sum "$BIN" | cut -c1-16)
    # count CONFIG WORKLOAD: the cached or measured instruction total of one run.
    count() {
        local c=$1 w=$2 name spec lib envs=() key file
        name=${c%%=*}
        spec=${c#*=}
        lib=${spec%%:*}
        [ "$spec" != "$lib" ] && IFS=, read -ra envs <<<"${spec#*:}"
        key=$( (sha1sum "$lib" | cut -c1-40; echo "$binsum ${spec#"$lib"} $w $SCALE") | sha1sum | cut -c1-24)
        file=$CACHE/$key
        if [ "${INSTR_CACHE:-1}" = 0 ] || [ ! -s "$file" ]; then
            env -u EBB_SECURE -u EBB_CANARY -u EBB_ZERO_ON_FREE "${envs[@]}" BENCH_ALLOCATOR="$name" \
                LD_PRELOAD="$lib" valgrind --tool=callgrind --callgrind-out-file=/dev/null \
                "$BIN" "$w" --scale "$SCALE" >/dev/null 2>"$file.log" ||
                { echo "FAILED: $w under $name" >&2; cat "$file.log" >&2; return 1; }
            sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$file.log" | tail -n 1 >"$file"
        fi
        printf '%s\t%s\t%s\n' "$w" "$name" "$(cat "$file")"
    }
    export -f count
    export CACHE binsum SCALE BIN
    for w in "${WORKLOADS[@]}"; do
        for c in "${CONFIGS[@]}"; do printf '%s\0%s\0' "$c" "$w"; done
    done | xargs -0 -n 2 -P "${JOBS:-1}" bash -c 'count "$1" "$2"' _ >"$OUT/instr.tsv"
    python3 - "$OUT/instr.tsv" "${CONFIGS[@]%%=*}" <<'PY'
import math, sys
path, names = sys.argv[1], sys.argv[2:]
total = {}
order = []
for line in open(path):
    w, a, n = line.split("\t")
    total[(w, a)] = int(n)
    if w not in order:
        order.append(w)
print("workload".ljust(16) + "".join(f"{a:>14}" for a in names[1:]) + "   (instructions / ebb's)")
logs = {a: [] for a in names[1:]}
for w in order:
    row = w.ljust(16)
    for a in names[1:]:
        r = total[(w, a)] / total[(w, names[0])]
        logs[a].append(math.log(r))
        row += f"{r:>14.3f}"
    print(row)
print("geomean".ljust(16) + "".join(f"{math.exp(sum(l) / len(l)):>14.3f}" for l in logs.values()))
PY
    exit 0
fi
for run in $(seq 1 "$RUNS"); do
    for w in "${WORKLOADS[@]}"; do
        for k in $(seq 0 $((n - 1))); do
            c=${CONFIGS[$(((k + run - 1) % n))]}
            name=${c%%=*}
            spec=${c#*=}
            lib=${spec%%:*}
            envs=()
            [ "$spec" != "$lib" ] && IFS=, read -ra envs <<<"${spec#*:}"
            if line=$(env "${envs[@]}" BENCH_ALLOCATOR="$name" LD_PRELOAD="$lib" \
                "$BIN" "$w" --scale "$SCALE" 2>>"$OUT/stderr.log"); then
                echo "$line" >>"$OUT/runs.jsonl"
            else
                echo "FAILED: $w under $name" >&2
            fi
        done
    done
done
python3 - "$OUT/runs.jsonl" "${CONFIGS[@]%%=*}" <<'PY'
import json, math, statistics, sys
path, names = sys.argv[1], sys.argv[2:]
runs = {}
for line in open(path):
    r = json.loads(line)
    runs.setdefault((r["workload"], r["allocator"]), []).append(r)
workloads = sorted({w for w, _ in runs}, key=lambda w: w)
def med(w, a, key):
    return statistics.median(r[key] for r in runs[(w, a)])
print("workload".ljust(16) + "".join(f"{a + ' wall':>14}{a + ' cpu':>12}" for a in names[1:]))
logs = {a: ([], []) for a in names[1:]}
for w in workloads:
    if (w, names[0]) not in runs:
        continue
    row = w.ljust(16)
    for a in names[1:]:
        if (w, a) not in runs:
            row += f"{'-':>14}{'-':>12}"
            continue
        rw = med(w, a, "wall_ms") / med(w, names[0], "wall_ms")
        rc = med(w, a, "cpu_ms") / max(med(w, names[0], "cpu_ms"), 1)
        logs[a][0].append(math.log(rw)); logs[a][1].append(math.log(rc))
        row += f"{rw:>14.3f}{rc:>12.3f}"
    print(row)
row = "geomean".ljust(16)
for a in names[1:]:
    lw, lc = logs[a]
    row += f"{math.exp(sum(lw)/len(lw)):>14.3f}{math.exp(sum(lc)/len(lc)):>12.3f}" if lw else ""
print(row)
PY
