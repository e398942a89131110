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
nice -n 10 cargo build --release -p ebb-capi -p ebb-capi-secure >"$OUT/build.log" 2>&1 ||
    { cat "$OUT/build.log" >&2; exit 1; }
CARGO_PROFILE_RELEASE_DEBUG=false nice -n 10 cargo build --release -p ebb-bench-speed \
    --no-default-features --features alloc-system --target-dir target/bench-speed/system \
    >>"$OUT/build.log" 2>&1 || { cat "$OUT/build.log" >&2; exit 1; }
BIN=target/bench-speed/system/release/ebb-bench-speed
LIB=$(realpath "$TARGET/release/libebb.so")
SECURE=$(realpath "$TARGET/release/libebb_secure.so")
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
