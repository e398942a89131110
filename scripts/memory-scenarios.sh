#!/usr/bin/env bash
# Memory scenarios: ebb vs glibc vs jemalloc vs mimalloc v3 (bench/scenarios).
#
# Builds the scenario binary once per allocator (target/scenarios-<alloc>), libebb.so
# and the plain-C mixed scenario (c/mixed.c, run under LD_PRELOAD), runs every scenario
# under every allocator RUNS times, interleaved (ebb, glibc, jemalloc, mimalloc, ebb,
# ...), and prints the median RSS per sample side by side plus PASS/FAIL for ebb's
# targets (bench/scenarios/report.py).
#
#   scripts/memory-scenarios.sh              # full run, 3 runs each (~20 minutes)
#   scripts/memory-scenarios.sh --quick      # tiny sizes, 1 run, ebb only (smoke test)
#   scripts/memory-scenarios.sh --markdown   # tables as Markdown (docs/MEMORY.md)
#
# Options:
#   --quick            tiny sizes, one run, ebb only
#   --markdown         print the report as Markdown
#   --runs N           runs per scenario and allocator (default 3; 1 with --quick)
#   --allocs a,b,...   allocators (default ebb,glibc,jemalloc,mimalloc; ebb with --quick);
#                      also tcmalloc and mimalloc2 (Debian's libtcmalloc-minimal4 and
#                      libmimalloc2.0, LD_PRELOADed into the glibc build)
#   --scenarios a,b    scenarios (default: all, plus mixed-c)
#   --report-only      do not build or run; report on the results already in $OUT
#   --strict           exit 1 if a target fails
#   --update-doc FILE  put the Markdown report into FILE, between the lines
#                      <!-- BEGIN memory-scenarios report --> and <!-- END ... -->
#                      (implies --markdown; e.g. docs/MEMORY.md)
# Environment: OUT (results directory, default target/memory-scenarios).
# Raw results: $OUT/raw/<scenario>.<alloc>.<run>.jsonl; the report: $OUT/report.txt
# (or report.md).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-target/memory-scenarios}
QUICK=0
MARKDOWN=0
RUNS=
ALLOCS=
SCENARIOS=
REPORT_ONLY=0
STRICT=0
UPDATE_DOC=
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) QUICK=1 ;;
    --markdown) MARKDOWN=1 ;;
    --runs) RUNS=$2; shift ;;
    --allocs) ALLOCS=$2; shift ;;
    --scenarios) SCENARIOS=$2; shift ;;
    --report-only) REPORT_ONLY=1 ;;
    --strict) STRICT=1 ;;
    --update-doc) UPDATE_DOC=$2; MARKDOWN=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
    shift
done
if [ "$QUICK" = 1 ]; then
    RUNS=${RUNS:-1}
    ALLOCS=${ALLOCS:-ebb}
else
    RUNS=${RUNS:-3}
    ALLOCS=${ALLOCS:-ebb,glibc,jemalloc,mimalloc}
fi
IFS=, read -r -a ALLOC_LIST <<<"$ALLOCS"
ALL_SCENARIOS="sleeping-owner-big sleeping-owner-small sleeping-owner-small-fresh worker-pool burst-idle mixed-c-rust mixed-c sparse-survivors store many-threads"
read -r -a SCENARIO_LIST <<<"${SCENARIOS//,/ }"
[ ${#SCENARIO_LIST[@]} -gt 0 ] || read -r -a SCENARIO_LIST <<<"$ALL_SCENARIOS"

mkdir -p "$OUT"
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# Cargo feature and target directory of each allocator's build.
# tcmalloc and mimalloc2 are preloaded into the glibc build (no Rust crate of theirs is
# the same library as Debian's).
bin_of() {
    case "$1" in
    tcmalloc | mimalloc2) echo "$ROOT/target/scenarios-glibc/release/ebb-scenarios" ;;
    *) echo "$ROOT/target/scenarios-$1/release/ebb-scenarios" ;;
    esac
}
# What to LD_PRELOAD into the Rust scenario binary (empty: nothing).
rust_preload_of() {
    case "$1" in
    tcmalloc | mimalloc2) preload_of "$1" ;;
    *) echo "" ;;
    esac
}
build_args() {
    case "$1" in
    ebb) echo "--features alloc-ebb" ;;
    glibc) echo "--no-default-features --features alloc-system" ;;
    jemalloc | mimalloc) echo "--no-default-features --features alloc-$1" ;;
    *) echo "unknown allocator: $1" >&2; exit 2 ;;
    esac
}
# What to LD_PRELOAD for the plain-C scenario (empty: glibc; "-": not available).
preload_of() {
    case "$1" in
    ebb) echo "$ROOT/target/release/libebb.so" ;;
    glibc) echo "" ;;
    jemalloc) ls /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 /usr/lib/*/libjemalloc.so.2 2>/dev/null | head -1 || true ;;
    mimalloc | mimalloc2) ls /usr/lib/x86_64-linux-gnu/libmimalloc.so.2 /usr/lib/*/libmimalloc.so.2 2>/dev/null | head -1 || true ;;
    tcmalloc) ls /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 /usr/lib/*/libtcmalloc_minimal.so.4 2>/dev/null | head -1 || true ;;
    esac
}

# The version of what preload_of gives, for the report.
preload_version() {
    case "$1" in
    ebb) echo "libebb.so $(git rev-parse --short=12 HEAD 2>/dev/null || echo '?')" ;;
    glibc) echo "glibc $(ldd --version 2>/dev/null | head -1 | awk '{print $NF}')" ;;
    jemalloc) echo "Debian libjemalloc2 $(dpkg-query -W -f '${Version}' libjemalloc2 2>/dev/null || echo '?')" ;;
    mimalloc | mimalloc2) echo "Debian libmimalloc2.0 $(dpkg-query -W -f '${Version}' libmimalloc2.0 2>/dev/null || echo '?')" ;;
    tcmalloc) echo "Debian libtcmalloc-minimal4 $(dpkg-query -W -f '${Version}' libtcmalloc-minimal4 2>/dev/null || echo '?')" ;;
    esac
}

run_build() {
    local what=$1
    shift
    log "building $what"
    local start=$SECONDS
    if ! "$@" >"$OUT/build-$what.log" 2>&1; then
        cat "$OUT/build-$what.log" >&2
        echo "build of $what failed" >&2
        exit 1
    fi
    echo "$what $((SECONDS - start))" >>"$OUT/build-times.txt"
}

if [ "$REPORT_ONLY" = 0 ]; then
    : >"$OUT/build-times.txt"
    builds=()
    for a in "${ALLOC_LIST[@]}"; do
        case "$a" in tcmalloc | mimalloc2) a=glibc ;; esac
        [[ " ${builds[*]-} " == *" $a "* ]] && continue
        builds+=("$a")
        # shellcheck disable=SC2046
        run_build "scenarios-$a" cargo build --release -p ebb-scenarios $(build_args "$a") \
            --target-dir "target/scenarios-$a"
    done
    if [[ " ${SCENARIO_LIST[*]} " == *" mixed-c "* ]]; then
        if [[ " ${ALLOC_LIST[*]} " == *" ebb "* ]]; then
            run_build libebb.so cargo build --release -p ebb-capi
        fi
        run_build mixed-c cc -O2 -pthread -o "$OUT/mixed-c" bench/scenarios/c/mixed.c
    fi

    {
        echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
        echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) online CPUs"
        echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
        echo "kernel: $(uname -sr)"
        echo "transparent hugepages: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo '?')"
        echo "os: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
        echo "rustc: $(rustc --version)"
        echo "cc: $(cc --version | head -1)"
        echo "ebb commit: $(git rev-parse --short=12 HEAD)$(git status --porcelain -- crates/ebb/src | grep -q . && echo ' (crates/ebb/src modified)')"
        echo "runs: $RUNS per scenario and allocator, interleaved"
    } >"$OUT/machine.txt"
    rm -rf "$OUT/raw"
    mkdir -p "$OUT/raw"
    : >"$OUT/run-times.txt"
    quick_flag=()
    [ "$QUICK" = 1 ] && quick_flag=(--quick)
    for run in $(seq 1 "$RUNS"); do
        for s in "${SCENARIO_LIST[@]}"; do
            for a in "${ALLOC_LIST[@]}"; do
                out="$OUT/raw/$s.$a.$run.jsonl"
                start=$(date +%s%N)
                if [ "$s" = mixed-c ]; then
                    lib=$(preload_of "$a")
                    if [ "$a" != glibc ] && [ -z "$lib" ]; then
                        log "run $run/$RUNS: $s under $a: no library to preload, skipped"
                        continue
                    fi
                    log "run $run/$RUNS: $s under $a${lib:+ (LD_PRELOAD=$lib)}"
                    if ! LD_PRELOAD=$lib SCENARIO_ALLOC=$a SCENARIO_ALLOC_VERSION=$(preload_version "$a") \
                        "$OUT/mixed-c" "${quick_flag[@]}" >"$out"; then
                        echo "$s under $a failed" >&2
                        exit 1
                    fi
                else
                    lib=$(rust_preload_of "$a")
                    case "$a" in tcmalloc | mimalloc2)
                        if [ -z "$lib" ]; then
                            log "run $run/$RUNS: $s under $a: no library to preload, skipped"
                            continue
                        fi ;;
                    esac
                    log "run $run/$RUNS: $s under $a${lib:+ (LD_PRELOAD=$lib)}"
                    if ! LD_PRELOAD=$lib "$(bin_of "$a")" "$s" "${quick_flag[@]}" >"$out"; then
                        echo "$s under $a failed" >&2
                        exit 1
                    fi
                fi
                echo "$s $a $run $((($(date +%s%N) - start) / 1000000)) ms" >>"$OUT/run-times.txt"
            done
        done
    done
fi

report_args=("$OUT/raw")
[ "$MARKDOWN" = 1 ] && report_args+=(--markdown)
[ "$STRICT" = 1 ] && report_args+=(--strict)
ext=txt
[ "$MARKDOWN" = 1 ] && ext=md
set +e
python3 bench/scenarios/report.py "${report_args[@]}" >"$OUT/report.$ext"
status=$?
set -e
cat "$OUT/report.$ext"
if [ -n "$UPDATE_DOC" ]; then
    python3 - "$UPDATE_DOC" "$OUT/report.$ext" <<'PY'
import sys
doc_path, report_path = sys.argv[1], sys.argv[2]
begin, end = "<!-- BEGIN memory-scenarios report -->", "<!-- END memory-scenarios report -->"
doc = open(doc_path).read()
if begin not in doc or end not in doc:
    sys.exit(f"{doc_path}: markers {begin} / {end} not found")
head, rest = doc.split(begin, 1)
_, tail = rest.split(end, 1)
report = open(report_path).read().strip()
open(doc_path, "w").write(f"{head}{begin}\n\n{report}\n\n{end}{tail}")
print(f"updated {doc_path}", file=sys.stderr)
PY
fi
exit $status
