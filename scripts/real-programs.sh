#!/usr/bin/env bash
# The real-programs suite (bench/real-programs, docs/REAL-PROGRAMS.md): gcc, jq, CPython,
# sqlite3, perl, Lua, make (many short processes), ninja (C++) and a syn + rayon Rust tool, each run under ebb, glibc, jemalloc,
# tcmalloc, mimalloc 2 and mimalloc 3, interleaved, with wall time, whole-process CPU,
# peak RSS and a hash of each program's output.
#
#   scripts/real-programs.sh              full run: SCALE=1 ROUNDS=3 (15 min of CPU; 15-20 min idle)
#   SMOKE=1 scripts/real-programs.sh      tiny inputs, one round (about a minute)
#   SCALE=0.5 ROUNDS=5 PROGRAMS=perl,lua ALLOCATORS=ebb,mimalloc3 scripts/real-programs.sh
#   DOC=1 scripts/real-programs.sh        also rewrite the results in docs/REAL-PROGRAMS.md
#                                         and docs/real-programs.svg
#   PROFILE=1 scripts/real-programs.sh    instead: cachegrind (ebb, mimalloc 3) and callgrind
#                                         (ebb's slow-path call counts) of the perl hash-key
#                                         program, PROFILE_N keys (default 100000), into
#                                         $WORK/profile.md (about 20 min on a busy machine)
#
# Needs: gcc, make, jq, python3, sqlite3, perl, lua5.4, ninja and the Debian allocators
#   apt-get install -y make jq sqlite3 lua5.4 ninja-build libjemalloc2 libmimalloc2.0 libtcmalloc-minimal4
# Builds target/release/libebb.so, target/mimalloc3/libmimalloc3.so and the Rust tool's
# four builds (ebb, tikv-jemallocator, mimalloc crate, system); inputs and results go to
# $WORK (default target/real-programs; results.json there).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
if [ "${SMOKE:-0}" = 1 ]; then
    SCALE=${SCALE:-0.03}
    ROUNDS=${ROUNDS:-1}
fi
SCALE=${SCALE:-1}
ROUNDS=${ROUNDS:-3}
WORK=${WORK:-$ROOT/target/real-programs}
BENCH=$ROOT/bench/real-programs
mkdir -p "$WORK/bin" "$WORK/out"

missing=()
for tool in gcc make jq python3 sqlite3 perl lua5.4 ninja; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
for lib in libjemalloc.so.2 libtcmalloc_minimal.so.4 libmimalloc.so.2; do
    [ -e "/usr/lib/x86_64-linux-gnu/$lib" ] || missing+=("$lib")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "error: missing ${missing[*]}; install with" >&2
    echo "  apt-get install -y make jq sqlite3 lua5.4 ninja-build libjemalloc2 libmimalloc2.0 libtcmalloc-minimal4" >&2
    exit 1
fi

echo "== building the allocators" >&2
nice -n 10 cargo build --release -q -p ebb-capi
# The mimalloc v3 sources come with the libmimalloc-sys crate.
[ -f target/mimalloc3/libmimalloc3.so ] || nice -n 10 cargo fetch -q
MIMALLOC3_SO=$(nice -n 10 scripts/build-mimalloc3.sh 2>"$WORK/mimalloc3.txt")

gcc -O2 -Wall -Wextra -o "$WORK/bin/measure" "$BENCH/measure.c"

echo "== building the Rust tool (bench/real-programs/rust-tool) for each allocator" >&2
for variant in ebb jemalloc mimalloc system; do
    (cd "$BENCH/rust-tool" && nice -n 10 cargo build --release -q --locked --features "alloc-$variant")
    cp "$BENCH/rust-tool/target/release/ast-churn" "$WORK/bin/ast-churn-$variant.tmp"
    mv "$WORK/bin/ast-churn-$variant.tmp" "$WORK/bin/ast-churn-$variant"
done

if [ "${PROFILE:-0}" = 1 ]; then
    command -v valgrind >/dev/null || { echo "error: PROFILE=1 needs valgrind" >&2; exit 1; }
    exec python3 "$BENCH/profile.py" --work "$WORK" --out "$WORK/profile.md" \
        --program "${PROFILE_PROGRAM:-perl}" --n "${PROFILE_N:-100000}"
fi

echo "== inputs at SCALE=$SCALE in $WORK" >&2
python3 "$BENCH/gen_inputs.py" "$WORK" "$SCALE"
ROWS=$(python3 -c "print(max(1000, int(600_000 * $SCALE)))")
sed "s/@ROWS@/$ROWS/g" "$BENCH/programs/rows.sql" >"$WORK/rows.sql"
RUST_FILES=$(python3 -c "print(max(20, int(400 * $SCALE)))")
if [ "$(cat "$WORK/rust-src.files" 2>/dev/null)" != "$RUST_FILES" ]; then
    rm -rf "$WORK/rust-src"
    "$WORK/bin/ast-churn-system" gen "$WORK/rust-src" "$RUST_FILES"
    echo "$RUST_FILES" >"$WORK/rust-src.files"
fi

# Versions of everything measured, for the report.
crate_version() {
    awk -v n="$1" '$0 == "name = \"" n "\"" {getline; gsub(/version = |"/, ""); print; exit}' \
        "$BENCH/rust-tool/Cargo.lock"
}
deb_version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo "?"; }
python3 - "$WORK/versions.json" <<EOF
import json, sys
json.dump({
    "ebb": "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo '+changes')",
    "glibc": "$(ldd --version | head -1 | awk '{print $NF}')",
    "jemalloc": "Debian libjemalloc2 $(deb_version libjemalloc2); Rust tool: tikv-jemallocator $(crate_version tikv-jemallocator) (tikv-jemalloc-sys $(crate_version tikv-jemalloc-sys))",
    "tcmalloc": "Debian libtcmalloc-minimal4 $(deb_version libtcmalloc-minimal4) (gperftools)",
    "mimalloc2": "Debian libmimalloc2.0 $(deb_version libmimalloc2.0)",
    "mimalloc3": "$(sed -n 's/.* mimalloc \(v[0-9.]*\) .*/\1/p' "$WORK/mimalloc3.txt" | head -1) built by scripts/build-mimalloc3.sh; Rust tool: mimalloc crate $(crate_version mimalloc) (libmimalloc-sys $(crate_version libmimalloc-sys))",
    "gcc": "$(gcc --version | head -1)",
    "jq": "$(jq --version)",
    "python": "$(/usr/bin/python3 --version)",
    "sqlite3": "$(sqlite3 --version | awk '{print $1}')",
    "perl": "$(perl -e 'print $^V')",
    "lua": "$(lua5.4 -v 2>&1 | awk '{print $1, $2}')",
    "ninja": "$(ninja --version)",
    "rust-tool": "$(rustc --version | awk '{print $1, $2}'), syn $(crate_version syn), rayon $(crate_version rayon)",
    "kernel": "$(uname -r)",
    "cpus": "$(nproc)",
}, open(sys.argv[1], "w"), indent=1)
EOF

echo "== running: SCALE=$SCALE ROUNDS=$ROUNDS" >&2
status=0
python3 "$BENCH/run.py" --work "$WORK" --bin "$WORK/bin" --out "$WORK/results.json" \
    --scale "$SCALE" --rounds "$ROUNDS" \
    --programs "${PROGRAMS:-}" --allocators "${ALLOCATORS:-}" || status=$?
if [ "${DOC:-0}" = 1 ]; then
    python3 "$BENCH/report.py" "$WORK/results.json" --doc docs/REAL-PROGRAMS.md --svg docs/real-programs.svg
else
    python3 "$BENCH/report.py" "$WORK/results.json"
fi
exit $status
