#!/usr/bin/env bash
# The heap profiler's cost on the speed suite (bench/speed): every workload run with
# profiling off and on (EBB_PROFILE at the default 512 KiB rate, or RATE), interleaved
# (off on off on ...), RUNS times each; prints per workload the median wall and CPU
# (user + system of all threads) time of "on" as a ratio to "off", with the geometric
# mean and the worst workload. Then the cost of one stack capture (examples/capture_cost).
#
#   scripts/bench-profile.sh                 # every workload, RUNS=5, SCALE=1
#   RUNS=3 SCALE=0.5 scripts/bench-profile.sh churn larson
#   GUARDED=5000 scripts/bench-profile.sh    # a third mode, interleaved with the two:
#                                            # guarded sampling (EBB_GUARDED_RATE)
#   BIN=../other/target/release/ebb-bench-speed scripts/bench-profile.sh   # another
#                                            # build's bench binary (no cargo build)
#   BASE=/tmp/main/target/release/ebb-bench-speed scripts/bench-profile.sh  # a second
#                                            # build interleaved with this one (each
#                                            # round: its off, on, guarded, then ours)
#   INSTR=1 SCALE=0.05 scripts/bench-profile.sh   # instructions instead (valgrind
#                                                 # cachegrind, --cache-sim=no): the
#                                                 # profiler's own work, free of noise
#
# Absolute times are noise on a shared machine; the ratios of interleaved runs are what
# this reports.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
SCALE=${SCALE:-1}
RATE=${RATE:-512k}
OUT=target/bench-profile
mkdir -p "$OUT"
if [ -z "${BIN:-}" ]; then
    cargo build --release -q -p ebb-bench-speed
    cargo build --release -q -p ebb-pprof --example capture_cost
    BIN=target/release/ebb-bench-speed
fi
WORKLOADS=${*:-$("$BIN" --list)}
if [ "${INSTR:-0}" = 1 ]; then
    printf '%-16s %14s %14s %8s\n' workload "instr off" "instr on" ratio
    for w in $WORKLOADS; do
        count() {
            env "$@" valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
                "$BIN" "$w" --scale "$SCALE" 2>&1 >/dev/null | sed -nE 's/.*I *refs: *([0-9,]+).*/\1/p' | tr -d ,
        }
        off=$(count EBB_BENCH=1)
        on=$(count EBB_PROFILE="$OUT/prof-$w" EBB_PROFILE_RATE="$RATE")
        printf '%-16s %14s %14s %8s' "$w" "$off" "$on" "$(python3 -c "print(f'{$on/$off:.4f}')")"
        if [ -n "${GUARDED:-}" ]; then
            g=$(count EBB_GUARDED_RATE="$GUARDED")
            printf ' %14s %8s' "$g" "$(python3 -c "print(f'{$g/$off:.4f}')")"
        fi
        echo
    done
    rm -f "$OUT"/prof-*
    exit 0
fi
: >"$OUT/runs.tsv"
for round in $(seq "$RUNS"); do
    for w in $WORKLOADS; do
        for build in ${BASE:+base} this; do
            bin=$BIN prefix=
            [ "$build" = base ] && bin=$BASE prefix=base-
            for mode in off on ${GUARDED:+guarded}; do
                if [ "$mode" = on ]; then
                    line=$(EBB_PROFILE="$OUT/prof-$w" EBB_PROFILE_RATE="$RATE" "$bin" "$w" --scale "$SCALE")
                elif [ "$mode" = guarded ]; then
                    line=$(EBB_GUARDED_RATE="$GUARDED" "$bin" "$w" --scale "$SCALE")
                else
                    line=$("$bin" "$w" --scale "$SCALE")
                fi
                wall=$(sed -E 's/.*"wall_ms": ?([0-9.]+).*/\1/' <<<"$line")
                cpu=$(sed -E 's/.*"cpu_ms": ?([0-9.]+).*/\1/' <<<"$line")
                printf '%s\t%s\t%s\t%s\n' "$w" "$prefix$mode" "$wall" "$cpu" >>"$OUT/runs.tsv"
            done
        done
    done
    echo "round $round done" >&2
done
rm -f "$OUT"/prof-*
python3 - "$OUT/runs.tsv" <<'PY'
import math, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    w, mode, wall, cpu = line.split()
    runs.setdefault(w, {}).setdefault(mode, []).append((float(wall), float(cpu)))
modes = [m for m in ("on", "guarded", "base-on", "base-guarded") if any(m in r for r in runs.values())]
gm = lambda xs: math.exp(sum(math.log(x) for x, _ in xs) / len(xs))
for mode in modes:
    off = "base-off" if mode.startswith("base-") else "off"
    print(f"{'workload':<16} {'wall ' + mode + '/off':>16} {'cpu ' + mode + '/off':>16}")
    walls, cpus = [], []
    for w, m in runs.items():
        wall = statistics.median(x[0] for x in m[mode]) / statistics.median(x[0] for x in m[off])
        cpu = statistics.median(x[1] for x in m[mode]) / statistics.median(x[1] for x in m[off])
        walls.append((wall, w)); cpus.append((cpu, w))
        print(f"{w:<16} {wall:>16.3f} {cpu:>16.3f}")
    print(f"{'geomean':<16} {gm(walls):>16.3f} {gm(cpus):>16.3f}")
    print(f"{'worst':<16} {max(walls)[0]:>10.3f} ({max(walls)[1]}) {max(cpus)[0]:>8.3f} ({max(cpus)[1]})")
    print()
PY
echo
[ -x target/release/examples/capture_cost ] && target/release/examples/capture_cost
