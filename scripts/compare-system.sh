#!/usr/bin/env bash
# Compare ebb with the system allocator on ebb-demo's built-in workload.
#
# Builds ebb-demo twice (ebb, and `--features system` in target/demo-system), runs the
# two binaries interleaved (ebb, system, ebb, system, ...) RUNS times each with --json,
# and prints per-phase median wall times, the ratio system/ebb (> 1: ebb is faster),
# and median peak / final RSS. Extra arguments go to ebb-demo (e.g. --quick).
#
#   scripts/compare-system.sh            # RUNS=5 by default
#   RUNS=9 scripts/compare-system.sh
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
EBB_TARGET=${CARGO_TARGET_DIR:-target}
SYSTEM_TARGET=target/demo-system

OUT=target/compare-system
mkdir -p "$OUT"

build() {
    # Build output goes to a log, shown only if the build fails.
    if ! cargo build --release -p ebb-demo "$@" >"$OUT/build.log" 2>&1; then
        cat "$OUT/build.log" >&2
        exit 1
    fi
}
echo "building ebb-demo (ebb, then --features system) ..." >&2
build
build --features system --target-dir "$SYSTEM_TARGET"
EBB_BIN=$EBB_TARGET/release/ebb-demo
SYSTEM_BIN=$SYSTEM_TARGET/release/ebb-demo

: >"$OUT/ebb.jsonl"
: >"$OUT/system.jsonl"
for i in $(seq 1 "$RUNS"); do
    echo "run $i/$RUNS: ebb" >&2
    "$EBB_BIN" --json "$@" >>"$OUT/ebb.jsonl"
    echo "run $i/$RUNS: system" >&2
    "$SYSTEM_BIN" --json "$@" >>"$OUT/system.jsonl"
done

python3 - "$OUT/ebb.jsonl" "$OUT/system.jsonl" "$RUNS" <<'PY'
import json, statistics, sys

def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]

ebb, system, runs = load(sys.argv[1]), load(sys.argv[2]), sys.argv[3]
med = lambda runs, key: statistics.median(key(r) for r in runs)
mib = lambda kib: f"{kib / 1024:.1f} MiB"

print(f"ebb-demo{' --quick' if ebb[0]['quick'] else ''}: ebb vs system allocator, "
      f"{runs} interleaved runs each, medians")
print(f"  {'':<16} {'ebb':>10} {'system':>10} {'system/ebb':>11}   (> 1: ebb faster/smaller)")
for phase in list(ebb[0]["phases"]) + ["total"]:
    key = (lambda r: r["total_s"]) if phase == "total" else (lambda r, p=phase: r["phases"][p])
    e, s = med(ebb, key), med(system, key)
    print(f"  {phase + ' time':<16} {e:>8.3f} s {s:>8.3f} s {s / e:>10.2f}x")
for label, field in [("peak RSS", "peak_rss_kib"),
                     ("RSS before idle", "rss_before_idle_kib"),
                     ("RSS after idle", "final_rss_kib")]:
    e, s = med(ebb, lambda r: r[field]), med(system, lambda r: r[field])
    print(f"  {label:<16} {mib(e):>10} {mib(s):>10} {s / e:>10.2f}x")
print(f"  (idle period {ebb[0]['idle_s']:.1f} s; RSS before/after idle: everything "
      f"dropped, no allocator calls in between)")
sums = {r["checksum"] for r in ebb + system}
print("  workload checksums: " + ("identical in all runs" if len(sums) == 1
                                  else f"DIFFER: {sorted(sums)}"))
sys.exit(0 if len(sums) == 1 else 1)
PY
