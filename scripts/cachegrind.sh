#!/usr/bin/env bash
# L1 data-cache misses per allocator operation, counted by valgrind's cachegrind with
# its cache simulator (deterministic for one-threaded runs: it simulates the caches, it
# does not sample hardware counters), for ebb and other allocators on bench/speed's
# workloads. Called by scripts/callgrind.sh (which puts the tables in
# docs/INSTRUCTIONS.md); runs on its own too.
#
# Allocators (columns):
#   ebb-rs    bench/speed built with ebb as Rust's #[global_allocator] (statically linked)
#   ebb       bench/speed's alloc-system build (it calls C malloc) with
#             LD_PRELOAD=target/release/libebb.so
#   tcmalloc  the same with Debian's libtcmalloc_minimal.so.4 preloaded (gperftools)
#   mimalloc2 the same with Debian's libmimalloc.so.2 (mimalloc v2.0.9)
#   mimalloc3 the same with target/mimalloc3/libmimalloc3.so (scripts/build-mimalloc3.sh)
#   jemalloc  the same with Debian's libjemalloc.so.2
#   glibc     the alloc-system build without a preload
#
# Method: for each workload, the `count-ops` build (the alloc-system build counting its
# calls to alloc, dealloc, realloc and alloc_zeroed) runs once natively: OPS, the
# allocator operations of the workload at that scale (the same program, so the same
# number under every allocator; the multi-threaded ones vary by a few in a million).
# Then each allocator's run under
#   valgrind --tool=cachegrind --cache-sim=yes --I1=32768,8,64 --D1=32768,8,64 \
#            --LL=8388608,16,64
# (a 32 KiB 8-way L1 with 64 B lines, fixed so the figures do not depend on the host)
# gives D1 misses = D1mr + D1mw and instructions (Ir), for the whole run and for the
# allocator's functions (bench/callgrind/cg_split.py says which those are), divided by
# OPS: misses per 1,000 operations and instructions per operation. The whole run
# counts too: where an allocator places blocks changes the program's own misses.
# Start-up and exit are included (a few thousand operations of several hundred
# thousand). Threads run one at a time under valgrind, so for the multi-threaded
# workloads the misses are those of that interleaving, not of two real cores.
#
#   scripts/cachegrind.sh                         # default workloads and allocators
#   WORKLOADS="compiler" ALLOCATORS="ebb tcmalloc" scripts/cachegrind.sh
#   SCALE=0.1 TOP=30 scripts/cachegrind.sh        # more work; longer function lists
#
# Environment: WORKLOADS ("compiler compiler-mt frontend typechecker churn tree-rebuild"), SCALE
# (0.05), ALLOCATORS ("ebb-rs ebb tcmalloc mimalloc2 mimalloc3 jemalloc glibc"), TOP
# (15: functions listed per allocator for the first workload), TOP_ALLOCATORS ("ebb
# tcmalloc mimalloc3"). Output: target/cachegrind/tables.txt, functions.txt, and the
# raw cachegrind.out files (cg_annotate target/cachegrind/<workload>.<allocator>.out;
# ebb's libebb.so carries line tables, so `cg_annotate --auto=yes` annotates its
# source lines).
#
# Needs valgrind, python3, cargo; Debian libtcmalloc-minimal4, libmimalloc2.0 and
# libjemalloc2 for those columns (left out if missing).
set -euo pipefail

cd "$(dirname "$0")/.."
WORKLOADS=${WORKLOADS:-"compiler compiler-mt frontend typechecker churn tree-rebuild"}
SCALE=${SCALE:-0.05}
TOP=${TOP:-15}
TOP_ALLOCATORS=${TOP_ALLOCATORS:-"ebb tcmalloc mimalloc3"}
TARGET=${CARGO_TARGET_DIR:-target}
OUT=$TARGET/cachegrind
CACHE=(--I1=32768,8,64 --D1=32768,8,64 --LL=8388608,16,64)
mkdir -p "$OUT"

for tool in valgrind cargo python3; do
    command -v "$tool" >/dev/null || { echo "error: $tool is not installed" >&2; exit 1; }
done

echo "building libebb.so and bench/speed (system, count-ops, ebb) ..." >&2
{
    cargo build --release -p ebb-capi
    # As scripts/bench-speed.sh builds them (and into the same directories).
    export CARGO_PROFILE_RELEASE_DEBUG=false
    cargo build --release -p ebb-bench-speed --no-default-features --features alloc-system \
        --target-dir target/bench-speed/system
    cargo build --release -p ebb-bench-speed --no-default-features \
        --features alloc-system,count-ops --target-dir target/bench-speed/count
    cargo build --release -p ebb-bench-speed --features alloc-ebb --target-dir target/bench-speed/ebb
} >"$OUT/build.log" 2>&1 || { cat "$OUT/build.log" >&2; exit 1; }
EBB_SO=$(realpath "$TARGET/release/libebb.so")
SYSTEM_BIN=target/bench-speed/system/release/ebb-bench-speed
COUNT_BIN=target/bench-speed/count/release/ebb-bench-speed
EBB_BIN=target/bench-speed/ebb/release/ebb-bench-speed

package_so() {
    dpkg -L "$1" 2>/dev/null | grep -E "/$2\.so\.[0-9]+$" | head -n 1 || true
}
declare -A PRELOAD=([ebb]="$EBB_SO" [glibc]="" [ebb-rs]="")
PRELOAD[tcmalloc]=$(package_so libtcmalloc-minimal4 libtcmalloc_minimal)
PRELOAD[mimalloc2]=$(package_so libmimalloc2.0 libmimalloc)
PRELOAD[jemalloc]=$(package_so libjemalloc2 libjemalloc)

NAMES=()
for name in ${ALLOCATORS:-ebb-rs ebb tcmalloc mimalloc2 mimalloc3 jemalloc glibc}; do
    case $name in
        ebb-rs | ebb | glibc) NAMES+=("$name") ;;
        mimalloc3) PRELOAD[mimalloc3]=$(scripts/build-mimalloc3.sh) && NAMES+=(mimalloc3) ;;
        tcmalloc | mimalloc2 | jemalloc)
            if [ -n "${PRELOAD[$name]}" ]; then NAMES+=("$name"); else
                echo "note: no library for $name (apt-get install it): no $name column" >&2
            fi ;;
        *) echo "error: unknown allocator $name" >&2; exit 1 ;;
    esac
done

# ops WORKLOAD: allocator operations of the workload at SCALE (count-ops build).
ops() {
    local line
    line=$("$COUNT_BIN" "$1" --scale "$SCALE")
    python3 -c 'import json, sys
o = json.loads(sys.argv[1])["ops"]
print(o["alloc"] + o["dealloc"] + o["realloc"] + o["alloc_zeroed"],
      o["alloc"] + o["alloc_zeroed"], o["dealloc"], o["realloc"])' "$line"
}

# measure WORKLOAD NAME: runs it under cachegrind; prints cg_split.py's key=value line.
measure() {
    local w=$1 name=$2 bin=$SYSTEM_BIN out=$OUT/$1.$2.out log=$OUT/valgrind.log
    [ "$name" = ebb-rs ] && bin=$EBB_BIN
    local preload=${PRELOAD[$name]}
    env -u EBB_SHOW_STATS -u EBB_PURGE_DELAY -u EBB_BACKGROUND -u EBB_CHECK \
        ${preload:+LD_PRELOAD="$preload"} \
        valgrind --tool=cachegrind --cache-sim=yes "${CACHE[@]}" \
        --cachegrind-out-file="$out" "$bin" "$w" --scale "$SCALE" >"$log" 2>&1 || {
        echo "error: cachegrind $w under $name failed:" >&2
        cat "$log" >&2
        exit 1
    }
    python3 bench/callgrind/cg_split.py "$out" "$name"
}

# field KEY LINE: the value of KEY in a key=value line.
field() { sed -n "s/.*\(^\| \)$1=\([0-9]*\).*/\2/p" <<<"$2"; }

declare -A RESULT
declare -A OPS
: >"$OUT/functions.txt"
first=${WORKLOADS%% *}
for w in $WORKLOADS; do
    read -r n allocs frees reallocs < <(ops "$w")
    OPS[$w]=$n
    echo "$w: $n operations at scale $SCALE ($allocs malloc, $frees free, $reallocs realloc)" >&2
    for name in "${NAMES[@]}"; do
        echo "  cachegrind $w under $name ..." >&2
        RESULT[$w.$name]=$(measure "$w" "$name")
        if [ "$w" = "$first" ] && [[ " $TOP_ALLOCATORS " == *" $name "* ]]; then
            {
                echo
                echo "$w under $name: the $TOP functions with the most D1 misses"
                echo "(D1mr, D1mw, Ir; alloc = counted as the allocator's)"
                python3 bench/callgrind/cg_split.py "$OUT/$w.$name.out" "$name" --top "$TOP" |
                    tail -n +2
            } >>"$OUT/functions.txt"
        fi
    done
done

# per_kop KEY W NAME: KEY of that run per 1,000 operations; per_op: per operation.
per_kop() {
    awk -v v="$(field "$1" "${RESULT[$2.$3]}")" -v n="${OPS[$2]}" 'BEGIN { printf "%.0f", v * 1000 / n }'
}
per_op() {
    awk -v v="$(field "$1" "${RESULT[$2.$3]}")" -v n="${OPS[$2]}" 'BEGIN { printf "%.0f", v / n }'
}

cell_width=16
{
    echo
    echo "L1 data misses (D1mr + D1mw) per 1,000 allocator operations: whole run (in the"
    echo "allocator's functions); cachegrind, 32 KiB 8-way L1, scale $SCALE"
    printf '%-14s' workload
    for name in "${NAMES[@]}"; do printf "%${cell_width}s" "$name"; done
    echo
    for w in $WORKLOADS; do
        printf '%-14s' "$w"
        for name in "${NAMES[@]}"; do
            printf "%${cell_width}s" "$(per_kop d1 "$w" "$name") ($(per_kop alloc_d1 "$w" "$name"))"
        done
        echo
    done
    echo
    echo "Allocator's L1 misses per 1,000 operations split into reads and writes (D1mr / D1mw)"
    printf '%-14s' workload
    for name in "${NAMES[@]}"; do printf "%${cell_width}s" "$name"; done
    echo
    for w in $WORKLOADS; do
        printf '%-14s' "$w"
        for name in "${NAMES[@]}"; do
            printf "%${cell_width}s" "$(per_kop alloc_d1mr "$w" "$name") / $(per_kop alloc_d1mw "$w" "$name")"
        done
        echo
    done
    echo
    echo "Instructions per allocator operation: whole run (in the allocator's functions)"
    printf '%-14s' workload
    for name in "${NAMES[@]}"; do printf "%${cell_width}s" "$name"; done
    echo
    for w in $WORKLOADS; do
        printf '%-14s' "$w"
        for name in "${NAMES[@]}"; do
            printf "%${cell_width}s" "$(per_op ir "$w" "$name") ($(per_op alloc_ir "$w" "$name"))"
        done
        echo
    done
    echo
    echo "operations (malloc + free + realloc calls) at scale $SCALE:$(for w in $WORKLOADS; do printf ' %s %s;' "$w" "${OPS[$w]}"; done)"
} | tee "$OUT/tables.txt"
cat "$OUT/functions.txt"
