#!/usr/bin/env bash
# Speed benchmark suite: ebb against glibc, jemalloc, mimalloc (v2 and v3), snmalloc and
# tcmalloc.
#
# 1. Builds bench/speed (ebb-bench-speed) once per compiled-in allocator, each into its
#    own target directory (target/bench-speed/<allocator>), libebb.so (ebb-capi), and
#    the C programs in bench/speed/c.
# 2. Runs every Rust workload under every allocator, interleaved (ebb, system,
#    jemalloc, mimalloc, snmalloc, tcmalloc, mimalloc2, ebb-capi, ebb, ...; the
#    starting allocator rotates from one round to the next), RUNS times each. The
#    columns tcmalloc, mimalloc2 and ebb-capi are the `alloc-system` build (it calls C
#    malloc) with a library preloaded: Debian's libtcmalloc_minimal.so.4, Debian's
#    libmimalloc.so.2 (mimalloc v2) and libebb.so (ebb through its C ABI).
# 3. Runs the C programs the same way under glibc and, with LD_PRELOAD, libebb.so,
#    mimalloc v3 (the 3.4.3 release from scripts/fetch-mimalloc-release.sh, else the
#    crate's 3.3.2 from scripts/build-mimalloc3.sh) and
#    Debian's libjemalloc2, libmimalloc2.0 and libtcmalloc-minimal4 (installed with
#    apt-get if missing).
# 4. Prints per workload the median time and peak RSS of each allocator as a ratio to
#    ebb (min-max spread in brackets) and a geometric-mean row, and writes
#    docs/BENCHMARKS.md and docs/benchmarks.svg (bench/speed/report.py).
#
#   scripts/bench-speed.sh                 # everything, RUNS=5
#   RUNS=3 scripts/bench-speed.sh churn larson   # only these Rust workloads
#   RUST=0 RUNS=5 scripts/bench-speed.sh         # only the C programs: their tables
#                                                # replace those in docs/BENCHMARKS.md
#
# Environment: RUNS (5), SCALE (1: scale of every workload), ALLOCATORS ("ebb system
# jemalloc mimalloc snmalloc tcmalloc mimalloc2 ebb-capi"), C=0 (skip the C-ABI part),
# C_PROGRAMS (all: "churn larson sweep realloc compiler huge espresso alloctest
# alloctest2 bigmt handoff"), DOC=0 (print the tables
# but do not write docs/), TIMEOUT (seconds per run, 600), RUST=0 (skip the Rust part;
# with DOC=1 only the C sections of docs/BENCHMARKS.md are rewritten), MIMALLOC3 (the
# mimalloc v3 of the C runs: "release" (default: 3.4.3, VERSION= another) or "crate"), OUT
# (target/bench-speed/results: the raw results, so two runs can go side by side).
#
# This is meant for a quiet machine. On a shared one absolute times are noise; only the
# ratios of interleaved runs mean something.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
RUNS=${RUNS:-5}
SCALE=${SCALE:-1}
ALLOCATORS=${ALLOCATORS:-"ebb system jemalloc mimalloc snmalloc tcmalloc mimalloc2 ebb-capi"}
C=${C:-1}
RUST=${RUST:-1}
MIMALLOC3=${MIMALLOC3:-release}
DOC=${DOC:-1}
TIMEOUT=${TIMEOUT:-600}
OUT=${OUT:-target/bench-speed/results}
mkdir -p "$OUT"
: >"$OUT/rust.jsonl"
: >"$OUT/c.jsonl"
: >"$OUT/failures.txt"
META=$OUT/meta.txt
: >"$META"
meta() { printf '%s\t%s\n' "$1" "$2" >>"$META"; }
log() { echo "[bench-speed $(date +%H:%M:%S)] $*" >&2; }
script_start=$(date +%s)

# ---- build ------------------------------------------------------------------------------

BUILT=()
build_start=$(date +%s)
# The Debian libraries (and libebb.so) that the preloaded columns and the C runs use.
pkgs=(libjemalloc2 libmimalloc2.0 libtcmalloc-minimal4)
missing=()
for p in "${pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"; } \
        >"$OUT/apt.log" 2>&1 || log "apt-get failed (see $OUT/apt.log)"
fi
lib_of() { dpkg -L "$1" 2>/dev/null | grep -E "/$2\$" | head -1; }
log "building libebb.so (cargo build --release -p ebb-capi)"
cargo build --release -p ebb-capi >"$OUT/build-capi.log" 2>&1 ||
    { cat "$OUT/build-capi.log" >&2; exit 1; }
LIBEBB=$ROOT/${CARGO_TARGET_DIR:-target}/release/libebb.so
declare -A PRELOAD=([glibc]="" [ebb]="$LIBEBB")
PRELOAD[jemalloc]=$(lib_of libjemalloc2 'libjemalloc\.so\.2')
PRELOAD[mimalloc2]=$(lib_of libmimalloc2.0 'libmimalloc\.so\.2')
PRELOAD[tcmalloc]=$(lib_of libtcmalloc-minimal4 'libtcmalloc_minimal\.so\.4')
for p in "${pkgs[@]}"; do
    meta "deb_$p" "$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || echo missing)"
done
# Rust columns run by the alloc-system build with a library preloaded: name -> library.
declare -A RUST_PRELOAD=([tcmalloc]="${PRELOAD[tcmalloc]}" [mimalloc2]="${PRELOAD[mimalloc2]}"
    [ebb-capi]="$LIBEBB")

[ "$RUST" = 1 ] || ALLOCATORS=""
for a in $ALLOCATORS; do
    if [ -n "${RUST_PRELOAD[$a]+set}" ]; then
        if [ -z "${RUST_PRELOAD[$a]}" ]; then
            log "no library for $a; leaving it out"
            meta "build_failed" "$a"
        elif [[ " $ALLOCATORS " != *" system "* ]]; then
            log "$a needs the system build (ALLOCATORS has no 'system'); leaving it out"
        else
            BUILT+=("$a")
            meta "rust_lib_$a" "${RUST_PRELOAD[$a]}"
        fi
        continue
    fi
    if [ "$a" = ebb ]; then
        features=(--features alloc-ebb)
    else
        features=(--no-default-features --features "alloc-$a")
    fi
    log "building ebb-bench-speed for $a (target/bench-speed/$a)"
    # Without debug info: the -sys crates read cargo's DEBUG variable, which the
    # workspace's `debug = "line-tables-only"` sets, and snmalloc-sys then builds
    # snmalloc as a CMake Debug build (mimalloc's build also keeps its assertions).
    if CARGO_PROFILE_RELEASE_DEBUG=false cargo build --release -p ebb-bench-speed "${features[@]}" \
        --target-dir "target/bench-speed/$a" >"$OUT/build-$a.log" 2>&1; then
        BUILT+=("$a")
    else
        log "build for $a FAILED (see $OUT/build-$a.log); leaving it out"
        tail -5 "$OUT/build-$a.log" >&2 || true
        meta "build_failed" "$a"
        if [ "$a" = ebb ]; then
            exit 1
        fi
    fi
done
meta "allocators" "${BUILT[*]}"
# The build type snmalloc was compiled with (the newest build-script output).
snmalloc_out=$(ls -t target/bench-speed/snmalloc/release/build/snmalloc-sys-*/output 2>/dev/null | head -1 || true)
snmalloc_type=$(sed -n 's/^cargo:rustc-env=BUILD_TYPE=//p' "${snmalloc_out:-/dev/null}")
meta "snmalloc_build_type" "${snmalloc_type:-?}"
bin() { echo "target/bench-speed/$1/release/ebb-bench-speed"; }
# rust_cmd ALLOCATOR: the command that runs a workload under it.
rust_cmd() {
    if [ -n "${RUST_PRELOAD[$1]+set}" ]; then
        echo env BENCH_ALLOCATOR="$1" LD_PRELOAD="${RUST_PRELOAD[$1]}" "$(bin system)"
    else
        bin "$1"
    fi
}
WORKLOADS=("$@")
if [ "$RUST" != 1 ]; then
    WORKLOADS=()
elif [ ${#WORKLOADS[@]} -eq 0 ]; then
    mapfile -t WORKLOADS < <("$(bin ebb)" --list)
fi

C_ALLOCATORS=()
if [ "$C" = 1 ]; then
    mkdir -p "$OUT/c"
    read -r -a C_PROGRAMS <<<"${C_PROGRAMS:-churn larson sweep realloc compiler huge espresso alloctest alloctest2 bigmt handoff}"
    for p in "${C_PROGRAMS[@]}"; do
        gcc -O2 -g -Wall -Wextra -pthread -o "$OUT/c/$p" "bench/speed/c/$p.c"
    done
    # mimalloc v3 (Debian ships v2 only): the newest release's own build, else the
    # one built from the mimalloc crate's sources.
    PRELOAD[mimalloc3]=""
    if [ "$MIMALLOC3" = release ]; then
        PRELOAD[mimalloc3]=$(scripts/fetch-mimalloc-release.sh 2>>"$OUT/build-mimalloc3.log" || true)
        [ -n "${PRELOAD[mimalloc3]}" ] &&
            meta "c_mimalloc3" "${VERSION:-3.4.3} (release build, PyPI cmeel-mimalloc, by scripts/fetch-mimalloc-release.sh)"
    fi
    if [ -z "${PRELOAD[mimalloc3]}" ]; then
        PRELOAD[mimalloc3]=$(scripts/build-mimalloc3.sh 2>>"$OUT/build-mimalloc3.log" || true)
        meta "c_mimalloc3" "the mimalloc crate's vendored sources, built by scripts/build-mimalloc3.sh"
    fi
    for a in ebb glibc jemalloc mimalloc2 mimalloc3 tcmalloc; do
        if [ "$a" = glibc ] || [ -n "${PRELOAD[$a]}" ]; then
            C_ALLOCATORS+=("$a")
            # relative to the checkout, so the docs do not name one machine's tree
            if [ "$a" = glibc ]; then
                meta "c_lib_$a" "(none: glibc malloc)"
            else
                meta "c_lib_$a" "${PRELOAD[$a]#"$PWD"/}"
            fi
        else
            log "no library for $a; leaving it out of the C runs"
        fi
    done
    meta "c_allocators" "${C_ALLOCATORS[*]}"
    meta "gcc" "$(gcc --version | head -1)"
fi
build_s=$(($(date +%s) - build_start))
meta "build_s" "$build_s"
log "builds done in ${build_s} s"

# ---- machine and versions ---------------------------------------------------------------

meta "nproc" "$(nproc)"
meta "cpu" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
meta "mem_total" "$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
meta "kernel" "$(uname -sr)"
meta "os" "$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
meta "rustc" "$(rustc --version)"
meta "ebb_commit" "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates/ebb || echo ' + local changes')"
meta "date" "$(date -u +%Y-%m-%d)"
meta "runs" "$RUNS"
meta "scale" "$SCALE"
meta "loadavg_start" "$(cut -d' ' -f1-3 /proc/loadavg)"
for crate in tikv-jemalloc-sys libmimalloc-sys mimalloc snmalloc-rs; do
    v=$(awk -v n="$crate" '$0 == "name = \"" n "\"" {getline; gsub(/version = |"/, ""); print; exit}' Cargo.lock)
    meta "crate_$crate" "${v:-?}"
done

# ---- runs ---------------------------------------------------------------------------------

run_one() { # out_file label command...
    local out=$1 label=$2
    shift 2
    local line
    if line=$(timeout "$TIMEOUT" "$@" 2>>"$OUT/stderr.log") && [ -n "$line" ]; then
        echo "$line" >>"$out"
    else
        log "FAILED: $label"
        echo "$label" >>"$OUT/failures.txt"
    fi
}

rust_start=$(date +%s)
n=${#BUILT[@]}
[ "$RUST" = 1 ] || n=0
for run in $(seq 1 "$RUNS"); do
    for w in "${WORKLOADS[@]}"; do
        for k in $(seq 0 $((n - 1))); do
            a=${BUILT[$(((k + run - 1) % n))]}
            log "rust run $run/$RUNS: $w under $a"
            # shellcheck disable=SC2046 # rust_cmd's words are the command
            run_one "$OUT/rust.jsonl" "rust $w $a run $run" $(rust_cmd "$a") "$w" --scale "$SCALE"
        done
    done
done
rust_s=$(($(date +%s) - rust_start))
meta "rust_runs_s" "$rust_s"

if [ "$C" = 1 ]; then
    c_start=$(date +%s)
    n=${#C_ALLOCATORS[@]}
    for run in $(seq 1 "$RUNS"); do
        for p in "${C_PROGRAMS[@]}"; do
            for k in $(seq 0 $((n - 1))); do
                a=${C_ALLOCATORS[$(((k + run - 1) % n))]}
                log "C run $run/$RUNS: $p under $a"
                run_one "$OUT/c.jsonl" "c $p $a run $run" \
                    env BENCH_ALLOCATOR="$a" LD_PRELOAD="${PRELOAD[$a]}" "$OUT/c/$p" "$SCALE"
            done
        done
    done
    meta "c_runs_s" "$(($(date +%s) - c_start))"
fi
meta "loadavg_end" "$(cut -d' ' -f1-3 /proc/loadavg)"
meta "total_s" "$(($(date +%s) - script_start))"
meta "args" "$*"

# ---- report -------------------------------------------------------------------------------

args=("$OUT")
if [ "$DOC" = 1 ]; then
    mkdir -p docs
    if [ "$RUST" = 1 ]; then
        args+=(--doc docs/BENCHMARKS.md --svg docs/benchmarks.svg)
    else
        args+=(--c-into docs/BENCHMARKS.md)
    fi
fi
python3 bench/speed/report.py "${args[@]}"
if [ -s "$OUT/failures.txt" ]; then
    log "some runs failed:"
    cat "$OUT/failures.txt" >&2
    exit 1
fi
