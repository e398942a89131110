#!/usr/bin/env bash
# Instructions per C malloc+free pair and per cross-thread free (callgrind, the method
# of scripts/callgrind.sh: (I(N2) - I(N1)) / (N2 - N1) for pairs, --toggle-collect=
# free_loop / XN for cross-thread frees) for libebb.so and libebb_secure.so at its
# levels. Columns: ebb, light, full, and any "name=ENV=VALUE[,ENV=VALUE...]" of the
# secure library in EXTRA (e.g. EXTRA="full-nocanary=EBB_SECURE=full,EBB_CANARY=0").
#
#   scripts/callgrind-secure.sh
#   SIZES="16 64" XSIZES="64" scripts/callgrind-secure.sh
#   CARGO_TARGET_DIR=/tmp/t scripts/callgrind-secure.sh   # another build's libraries
#
# Needs valgrind and a C compiler.
set -euo pipefail
cd "$(dirname "$0")/.."
N1=${N1:-100000}
N2=${N2:-200000}
SIZES=${SIZES:-"16 64 1024 4096 65536"}
XSIZES=${XSIZES:-"64 1024"}
XN=${XN:-100000}
TARGET=${CARGO_TARGET_DIR:-target}
OUT=$TARGET/callgrind-secure
mkdir -p "$OUT"
nice -n 10 cargo build --release -p ebb-capi -p ebb-capi-secure >"$OUT/build.log" 2>&1 ||
    { cat "$OUT/build.log" >&2; exit 1; }
"${CC:-cc}" -O2 -o "$OUT/pairs" bench/callgrind/pairs.c
"${CC:-cc}" -O2 -pthread -o "$OUT/xthread" bench/callgrind/xthread.c
LIB=$(realpath "$TARGET/release/libebb.so")
SECURE=$(realpath "$TARGET/release/libebb_secure.so")
CONFIGS=("ebb=$LIB" "light=$SECURE:EBB_SECURE=light" "full=$SECURE:EBB_SECURE=full")
for extra in ${EXTRA:-}; do
    CONFIGS+=("${extra%%=*}=$SECURE:${extra#*=}")
done

# instructions CONFIG ARGS...: callgrind's instruction total for one run.
instructions() {
    local spec=${1#*=} lib envs=()
    shift
    lib=${spec%%:*}
    [ "$spec" != "$lib" ] && IFS=, read -ra envs <<<"${spec#*:}"
    env -u EBB_SHOW_STATS -u EBB_PURGE_DELAY -u EBB_BACKGROUND -u EBB_CHECK -u EBB_SECURE \
        -u EBB_CANARY -u EBB_ZERO_ON_FREE "${envs[@]}" LD_PRELOAD="$lib" \
        valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" >"$OUT/valgrind.log" 2>&1 ||
        { cat "$OUT/valgrind.log" >&2; exit 1; }
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$OUT/valgrind.log" | tail -n 1
}

printf '%10s' size
for c in "${CONFIGS[@]}"; do printf '%14s' "${c%%=*}"; done
echo
for size in $SIZES; do
    printf '%10s' "$size"
    for c in "${CONFIGS[@]}"; do
        a=$(instructions "$c" "$OUT/pairs" "$N1" "$size")
        b=$(instructions "$c" "$OUT/pairs" "$N2" "$size")
        printf '%14s' "$(awk -v a="$a" -v b="$b" -v n1="$N1" -v n2="$N2" \
            'BEGIN { printf "%.1f", (b - a) / (n2 - n1) }')"
    done
    echo
done
for size in $XSIZES; do
    printf '%10s' "x$size"
    for c in "${CONFIGS[@]}"; do
        t=$(instructions "$c" --toggle-collect=free_loop "$OUT/xthread" "$XN" "$size")
        printf '%14s' "$(awk -v t="$t" -v n="$XN" 'BEGIN { printf "%.1f", t / n }')"
    done
    echo
done
echo "(xSIZE: instructions per cross-thread free of a SIZE-byte block)"
