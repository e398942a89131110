#!/usr/bin/env bash
# EBB_LARGE_PAGES=0 against =1: the speed suite, the memory scenarios and perl/lua of the
# real-programs suite, interleaved, with wall, whole-process CPU, peak RSS, peak
# AnonHugePages (/proc/PID/smaps_rollup) and page faults (bench/large-pages/run.py).
#
#   scripts/large-pages.sh                           # everything, RUNS=5
#   RUNS=5 SUITES=real CONFIGS=ebb,ebb-large,mimalloc3 scripts/large-pages.sh
#   SUITES=speed WORKLOADS=churn,larson scripts/large-pages.sh
#
# Environment: RUNS (5), SUITES (speed,scenarios,real), CONFIGS (ebb,ebb-large;
# mimalloc3 runs the C programs only), SPEED_SCALE (0.5), REAL_SCALE (0.5), WORKLOADS,
# SCENARIOS, OUT (target/large-pages). Needs perl and lua5.4 for the real programs.
# The figures only mean something on this machine's THP mode
# (/sys/kernel/mm/transparent_hugepage/enabled), which the report names.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-target/large-pages}
CONFIGS=${CONFIGS:-ebb,ebb-large}
mkdir -p "$OUT"
echo "== building libebb.so, ebb-bench-speed and ebb-scenarios (ebb)" >&2
nice -n 10 cargo build --release -q -p ebb-capi
CARGO_PROFILE_RELEASE_DEBUG=false nice -n 10 cargo build --release -q -p ebb-bench-speed \
    --features alloc-ebb --target-dir target/bench-speed/ebb
nice -n 10 cargo build --release -q -p ebb-scenarios --features alloc-ebb \
    --target-dir target/scenarios-ebb
if [[ ",$CONFIGS," == *",mimalloc3,"* ]]; then
    nice -n 10 scripts/build-mimalloc3.sh >/dev/null
fi
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, kernel $(uname -r)"
    echo "transparent_hugepage/enabled: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo '?')"
    echo "transparent_hugepage/defrag: $(cat /sys/kernel/mm/transparent_hugepage/defrag 2>/dev/null || echo '?')"
    echo "ebb: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo '+changes')"
} >"$OUT/machine.txt"
cat "$OUT/machine.txt" >&2
python3 bench/large-pages/run.py --out "$OUT" --runs "${RUNS:-5}" \
    --suites "${SUITES:-speed,scenarios,real}" --configs "$CONFIGS" \
    --speed-scale "${SPEED_SCALE:-0.5}" --real-scale "${REAL_SCALE:-0.5}" \
    --workloads "${WORKLOADS:-}" --scenarios "${SCENARIOS:-}"
