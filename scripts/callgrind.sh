#!/usr/bin/env bash
# Instructions per malloc+free pair, counted by valgrind's callgrind (deterministic: it
# counts instructions, not time), for ebb and other allocators, at several sizes.
#
# Allocators (columns):
#   ebb-rs    bench/callgrind-rs: ebb as Rust's #[global_allocator], statically linked,
#             pairs through std::alloc::alloc/dealloc
#   ebb       bench/callgrind/pairs.c (malloc/free) with LD_PRELOAD=target/release/libebb.so
#   glibc     the same C program, no preload
#   mimalloc2 the same, with Debian's libmimalloc2.0 preloaded (mimalloc v2.0.9 on
#             Debian 12; if installed). ALLOCATORS also accepts `mimalloc` for it.
#   mimalloc3 the same, with mimalloc v3 preloaded: target/mimalloc3/libmimalloc3.so,
#             built by scripts/build-mimalloc3.sh (mimalloc's CMake Release flags) from
#             the C sources of the libmimalloc-sys crate that Cargo.lock selects
#   mimalloc-rel  the same, with the newest mimalloc release preloaded (3.4.3; a release
#             build from PyPI, scripts/fetch-mimalloc-release.sh; skipped without pip)
#   jemalloc  the same, with Debian's libjemalloc2 preloaded     (if installed)
#   tcmalloc  the same, with Debian's libtcmalloc-minimal4 preloaded (gperftools 2.10;
#             if installed)
#
# Method: each program runs N1 and N2 pairs; (instructions(N2) - instructions(N1)) /
# (N2 - N1) is the cost of one pair, with start-up and exit cancelled out. The count
# includes every thread (ebb's background purger, if it runs).
#
# Then, cross-thread frees: bench/callgrind/xthread.c has thread A malloc N blocks and
# thread B free them all; --toggle-collect=free_loop counts only B's free loop, divided
# by N: instructions per free of a block allocated by another thread.
#
#   scripts/callgrind.sh                      # all sizes
#   SIZES="16 4096" scripts/callgrind.sh      # some sizes
#   N1=50000 N2=100000 XSIZES="64" scripts/callgrind.sh
#   ALLOCATORS="ebb-rs ebb" scripts/callgrind.sh   # some columns (mimalloc2 and jemalloc
#                                             # take minutes at 256 KiB and 1 MiB)
#   DOC=docs/INSTRUCTIONS.md scripts/callgrind.sh  # also write the tables there
#   CACHEGRIND=0 scripts/callgrind.sh         # without the L1-miss tables
#
# Last, unless CACHEGRIND=0, scripts/cachegrind.sh: L1 data misses (and instructions)
# per 1,000 allocator operations on bench/speed's workloads, from cachegrind's cache
# simulator (its environment: CG_WORKLOADS -> WORKLOADS, CG_SCALE -> SCALE,
# CG_ALLOCATORS -> ALLOCATORS).
#
# DOC keeps what follows the line `<!-- hand-written below -->` in the old file (the
# analysis of the figures, written by hand) and regenerates everything above it.
#
# Needs valgrind, a C compiler and cargo; for the mimalloc2/jemalloc columns:
#   apt-get install -y valgrind libmimalloc2.0 libjemalloc2 libtcmalloc-minimal4
set -euo pipefail

cd "$(dirname "$0")/.."
N1=${N1:-100000}
N2=${N2:-200000}
SIZES=${SIZES:-"16 64 256 1024 4096 16384 65536 262144 1048576"}
XSIZES=${XSIZES:-"64 1024"}
XN=${XN:-100000}
TARGET=${CARGO_TARGET_DIR:-target}
OUT=$TARGET/callgrind
mkdir -p "$OUT"

for tool in valgrind cargo; do
    command -v "$tool" >/dev/null || { echo "error: $tool is not installed" >&2; exit 1; }
done
CC=${CC:-cc}

echo "building libebb.so, callgrind-rs, pairs, xthread ..." >&2
if ! cargo build --release -p ebb-capi -p callgrind-rs >"$OUT/build.log" 2>&1; then
    cat "$OUT/build.log" >&2
    exit 1
fi
"$CC" -O2 -o "$OUT/pairs" bench/callgrind/pairs.c
"$CC" -O2 -pthread -o "$OUT/xthread" bench/callgrind/xthread.c
EBB_SO=$(realpath "$TARGET/release/libebb.so")
RS_BIN=$TARGET/release/callgrind-rs

# The shared library of a Debian package, from its file list (empty if not installed).
package_so() {
    dpkg -L "$1" 2>/dev/null | grep -E "/$2\.so\.[0-9]+$" | head -n 1 || true
}
MIMALLOC_SO=$(package_so libmimalloc2.0 libmimalloc)
JEMALLOC_SO=$(package_so libjemalloc2 libjemalloc)
TCMALLOC_SO=$(package_so libtcmalloc-minimal4 libtcmalloc_minimal)
MIMALLOC3_SO= # built below if the mimalloc3 column is selected
MIMALLOC_REL_SO= # fetched below if the mimalloc-rel column is selected

NAMES=()
for name in ${ALLOCATORS:-ebb-rs ebb glibc mimalloc2 mimalloc3 mimalloc-rel jemalloc tcmalloc}; do
    case $name in
        ebb-rs | ebb | glibc) NAMES+=("$name") ;;
        mimalloc | mimalloc2) [ -n "$MIMALLOC_SO" ] && NAMES+=(mimalloc2) ||
            echo "note: libmimalloc2.0 not installed: no mimalloc2 column" >&2 ;;
        mimalloc3) MIMALLOC3_SO=$(scripts/build-mimalloc3.sh) && NAMES+=(mimalloc3) ;;
        mimalloc-rel) MIMALLOC_REL_SO=$(scripts/fetch-mimalloc-release.sh) &&
            NAMES+=(mimalloc-rel) ||
            echo "note: could not fetch the mimalloc release: no mimalloc-rel column" >&2 ;;
        jemalloc) [ -n "$JEMALLOC_SO" ] && NAMES+=(jemalloc) ||
            echo "note: libjemalloc2 not installed: no jemalloc column" >&2 ;;
        tcmalloc) [ -n "$TCMALLOC_SO" ] && NAMES+=(tcmalloc) ||
            echo "note: libtcmalloc-minimal4 not installed: no tcmalloc column" >&2 ;;
        *) echo "error: unknown allocator $name (ebb-rs ebb glibc mimalloc2 mimalloc3 mimalloc-rel jemalloc tcmalloc)" >&2
            exit 1 ;;
    esac
done

# preload_of NAME: the library to preload for that column (empty: none).
preload_of() {
    case $1 in
        ebb) echo "$EBB_SO" ;;
        mimalloc2) echo "$MIMALLOC_SO" ;;
        mimalloc3) echo "$MIMALLOC3_SO" ;;
        mimalloc-rel) echo "$MIMALLOC_REL_SO" ;;
        jemalloc) echo "$JEMALLOC_SO" ;;
        tcmalloc) echo "$TCMALLOC_SO" ;;
        *) echo "" ;;
    esac
}

# instructions NAME ARGS...: callgrind's instruction total for one run.
instructions() {
    local name=$1
    shift
    local log=$OUT/valgrind.log
    local preload
    preload=$(preload_of "$name")
    # No EBB_* options from the caller's environment; valgrind itself is not preloaded.
    env -u EBB_SHOW_STATS -u EBB_PURGE_DELAY -u EBB_BACKGROUND -u EBB_CHECK \
        ${preload:+LD_PRELOAD="$preload"} \
        valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" >"$log" 2>&1 || {
        echo "error: valgrind $* failed (${name}):" >&2
        cat "$log" >&2
        exit 1
    }
    local total
    total=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$log" | tail -n 1)
    [ -n "$total" ] || { echo "error: no 'Collected' line for $name $*" >&2; cat "$log" >&2; exit 1; }
    echo "$total"
}

# per_pair NAME SIZE: instructions of one malloc+free pair.
per_pair() {
    local name=$1 size=$2 bin=$OUT/pairs
    [ "$name" = ebb-rs ] && bin=$RS_BIN
    local a b
    a=$(instructions "$name" "$bin" "$N1" "$size")
    b=$(instructions "$name" "$bin" "$N2" "$size")
    awk -v a="$a" -v b="$b" -v n1="$N1" -v n2="$N2" 'BEGIN { printf "%.1f", (b - a) / (n2 - n1) }'
}

# The tables are also kept for DOC.
{

echo
echo "Instructions per malloc+free pair (callgrind; (I(N=$N2) - I(N=$N1)) / $((N2 - N1)))"
printf '%10s' size
for name in "${NAMES[@]}"; do printf '%13s' "$name"; done
echo
for size in $SIZES; do
    printf '%10s' "$size"
    for name in "${NAMES[@]}"; do
        printf '%13s' "$(per_pair "$name" "$size")"
    done
    echo
done

echo
echo "Instructions per cross-thread free (thread B frees $XN blocks malloc'ed by thread A;"
echo "callgrind --toggle-collect=free_loop, total / $XN)"
printf '%10s' size
XNAMES=()
for name in "${NAMES[@]}"; do
    [ "$name" = ebb-rs ] && continue
    XNAMES+=("$name")
    printf '%13s' "$name"
done
echo
for size in $XSIZES; do
    printf '%10s' "$size"
    for name in "${XNAMES[@]}"; do
        total=$(instructions "$name" --toggle-collect=free_loop "$OUT/xthread" "$XN" "$size")
        printf '%13s' "$(awk -v t="$total" -v n="$XN" 'BEGIN { printf "%.1f", t / n }')"
    done
    echo
done
echo
# (Paths inside the repository relative to it, so the doc does not name this machine's
# checkout.)
R="$PWD/"
echo "libraries: ebb=${EBB_SO#"$R"}${MIMALLOC_SO:+ mimalloc2=$MIMALLOC_SO}${MIMALLOC3_SO:+ mimalloc3=${MIMALLOC3_SO#"$R"}}${MIMALLOC_REL_SO:+ mimalloc-rel=${MIMALLOC_REL_SO#"$R"}}${JEMALLOC_SO:+ jemalloc=$JEMALLOC_SO}${TCMALLOC_SO:+ tcmalloc=$TCMALLOC_SO}"
} | tee "$OUT/tables.txt"

CG_OUT=$TARGET/cachegrind
if [ "${CACHEGRIND:-1}" != 0 ]; then
    env ${CG_WORKLOADS:+WORKLOADS="$CG_WORKLOADS"} ${CG_SCALE:+SCALE="$CG_SCALE"} \
        ${CG_ALLOCATORS:+ALLOCATORS="$CG_ALLOCATORS"} scripts/cachegrind.sh
fi

MARKER='<!-- hand-written below -->'
if [ -n "${DOC:-}" ]; then
    HAND=
    if [ -f "$DOC" ] && grep -qF "$MARKER" "$DOC"; then
        HAND=$(sed -n "/^$MARKER\$/,\$p" "$DOC")
    fi
    {
        echo "# Instructions per operation"
        echo
        echo "<!-- Generated by scripts/callgrind.sh (DOC=$DOC); do not edit by hand: rerun the script. -->"
        echo
        echo "Counted by valgrind's callgrind, which counts instructions rather than time, so the"
        echo "figures repeat exactly on a noisy machine. ebb at commit $(git rev-parse --short HEAD),"
        echo "$(date -u +%Y-%m-%d), $(valgrind --version), $("$CC" --version | head -n 1)."
        echo
        echo "- **Columns.** \`ebb-rs\`: ebb as Rust's global allocator, statically linked"
        echo "  (\`bench/callgrind-rs\`). The others run one C program (\`bench/callgrind/pairs.c\`)"
        echo "  with the allocator preloaded (\`ebb\` is \`libebb.so\`; \`glibc\` runs it without a"
        echo "  preload). \`mimalloc2\`: Debian's 2.0.9; \`mimalloc3\`: 3.3.2 built from the \`mimalloc\`"
        echo "  crate's sources with mimalloc's CMake release flags; \`mimalloc-rel\`: the newest"
        echo "  release, 3.4.3 (a release build from PyPI); \`jemalloc\`: Debian's 5.3;"
        echo "  \`tcmalloc\`: Debian's gperftools 2.10 (\`libtcmalloc_minimal.so.4\`)."
        echo "- **Method.** Each program runs N1 and N2 pairs; the difference of the instruction"
        echo "  totals over N2 - N1 is one pair, start-up and exit cancelled out. About 11 of each C"
        echo "  column's instructions are the loop and the PLT jumps."
        echo "- **Command.** \`${CG_WORKLOADS:+CG_WORKLOADS=\"$CG_WORKLOADS\" }DOC=$DOC scripts/callgrind.sh\`"
        echo
        echo '```'
        cat "$OUT/tables.txt"
        echo '```'
        if [ "${CACHEGRIND:-1}" != 0 ]; then
            echo
            echo "## L1 data misses per operation"
            echo
            echo "Counted by valgrind's cachegrind with its cache simulator (\`--cache-sim=yes\`, a"
            echo "32 KiB 8-way L1 data cache with 64-byte lines, fixed on the command line so that"
            echo "the figures do not depend on the host), by \`scripts/cachegrind.sh\`."
            echo
            echo "- **Program.** \`bench/speed\`'s workloads at a small scale, in its \`alloc-system\`"
            echo "  build (which calls C \`malloc\`) with each allocator preloaded, and \`ebb-rs\`: the"
            echo "  build with ebb as Rust's global allocator. \`tcmalloc\`, \`mimalloc2\`, \`jemalloc\`:"
            echo "  Debian's libtcmalloc-minimal4 (gperftools 2.10), libmimalloc2.0 (2.0.9),"
            echo "  libjemalloc2 (5.3); \`mimalloc3\`: 3.3.2 built by \`scripts/build-mimalloc3.sh\`."
            echo "- **Operations** are the calls to alloc, dealloc, realloc and alloc_zeroed, counted"
            echo "  once per workload by the \`count-ops\` build (the same program; see the last line"
            echo "  of the tables). **D1 misses** = D1mr + D1mw (read and write misses)."
            echo "- **Whole run, and in brackets the allocator's functions** (\`bench/callgrind/cg_split.py\`"
            echo "  says which: the malloc API, glibc's malloc/*.c, and functions named like each"
            echo "  allocator's; Debian's stripped libraries' unnamed code counts as theirs). The"
            echo "  whole run is the figure to compare: where an allocator puts blocks, and which"
            echo "  block it hands out next, changes the misses of the program's own loads and"
            echo "  stores. \`ebb-rs\`'s bracket is small because its fast paths are inlined into"
            echo "  the program's functions."
            echo "- Threads run one at a time under valgrind: for \`compiler-mt\` and"
            echo "  \`typechecker\` the figures are those of valgrind's interleaving."
            echo "- **Command.** \`${CG_WORKLOADS:+CG_WORKLOADS=\"$CG_WORKLOADS\" }DOC=$DOC scripts/callgrind.sh\` (the L1 part alone:"
            echo "  \`scripts/cachegrind.sh\`)."
            echo
            echo '```'
            cat "$CG_OUT/tables.txt"
            cat "$CG_OUT/functions.txt"
            echo '```'
        fi
        if [ -n "$HAND" ]; then
            echo
            echo "$HAND"
        fi
    } >"$DOC"
    echo "wrote $DOC" >&2
fi
