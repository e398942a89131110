#!/usr/bin/env bash
# Builds mimalloc v3 as a preloadable shared library, target/mimalloc3/libmimalloc3.so,
# from the C sources that the Rust crate libmimalloc-sys vendors (c_src/mimalloc/v3), at
# the libmimalloc-sys version Cargo.lock selects (so it is the same mimalloc as the
# `mimalloc` crate in bench/speed and bench/scenarios). `cargo fetch` downloads the
# crate if it is not in ~/.cargo/registry yet.
#
# The compile and link lines are those of mimalloc's own CMake for its `mimalloc` shared
# target with CMAKE_BUILD_TYPE=Release and the default options (MI_OVERRIDE=ON,
# MI_OPT_ARCH=OFF on x86-64, no MI_SECURE/MI_DEBUG/MI_PADDING/valgrind), as printed
# by `cmake -DCMAKE_BUILD_TYPE=Release` + `make VERBOSE=1` with GCC on Linux:
#   -O3 -DNDEBUG                          CMAKE_C_FLAGS_RELEASE
#   -fPIC -std=gnu11                      shared target, CMAKE_C_STANDARD 11
#   -Wall -Wextra -Wno-unknown-pragmas -Wstrict-prototypes
#   -fvisibility=hidden -ftls-model=initial-exec
#   -fno-builtin-malloc                   MI_OVERRIDE=ON
#   -DMI_MALLOC_OVERRIDE                  MI_OVERRIDE=ON: export malloc, free, ...
#   -DMI_BUILD_RELEASE -DMI_CMAKE_BUILD_TYPE=release
#   -DMI_SHARED_LIB -DMI_SHARED_LIB_EXPORT -Dmimalloc_EXPORTS   shared target
#   link: -shared -lpthread -lrt -latomic
# and the same translation units (CMake's mi_sources, one object each; not static.c).
# Left out: the soname (ours is libmimalloc3.so) and MI_GIT_DESCRIBE (no git checkout).
#
# Idempotent: does nothing if the library is newer than the sources and this script and
# was built from the same source directory. Prints the library's path on stdout (for
# scripts: SO=$(scripts/build-mimalloc3.sh)), the version and path on stderr.
#
#   scripts/build-mimalloc3.sh
#   LD_PRELOAD=$PWD/target/mimalloc3/libmimalloc3.so MIMALLOC_VERBOSE=1 ls
set -euo pipefail

SELF=$(realpath "$0")
cd "$(dirname "$0")/.."
TARGET=${CARGO_TARGET_DIR:-target}
OUT=$TARGET/mimalloc3
SO=$OUT/libmimalloc3.so
CC=${CC:-cc}

# The libmimalloc-sys version of Cargo.lock.
crate_version() {
    awk '$0 == "name = \"libmimalloc-sys\"" {getline; gsub(/version = |"/, ""); print; exit}' Cargo.lock
}
VERSION=$(crate_version)
if [ -z "$VERSION" ]; then
    echo "error: no libmimalloc-sys in Cargo.lock" >&2
    exit 1
fi
REGISTRY=${CARGO_HOME:-$HOME/.cargo}/registry/src
# Prints the source directory, or nothing (and succeeds: under `set -e` a failing
# `SRC=$(find_src)` ended the script without a word on a machine without the crate).
find_src() {
    local d
    for d in "$REGISTRY"/*/"libmimalloc-sys-$VERSION"/c_src/mimalloc/v3; do
        if [ -f "$d/include/mimalloc.h" ]; then
            echo "$d"
            return 0
        fi
    done
    return 0
}
SRC=$(find_src)
if [ -z "$SRC" ]; then
    echo "libmimalloc-sys $VERSION is not downloaded: cargo fetch ..." >&2
    cargo fetch >&2
    SRC=$(find_src)
    [ -n "$SRC" ] || { echo "error: no libmimalloc-sys-$VERSION/c_src/mimalloc/v3 in $REGISTRY" >&2; exit 1; }
fi

# MI_MALLOC_VERSION 30302 -> 3.3.2
MI_VERSION=$(sed -n 's/^#define MI_MALLOC_VERSION *\([0-9]*\).*/\1/p' "$SRC/include/mimalloc.h")
case $MI_VERSION in
    3[0-9][0-9][0-9][0-9]) ;;
    *) echo "error: $SRC is mimalloc $MI_VERSION, not v3" >&2; exit 1 ;;
esac
MI_VERSION_STR="v${MI_VERSION:0:1}.$((10#${MI_VERSION:1:2})).$((10#${MI_VERSION:3:2}))"
report() {
    echo "mimalloc3: $1 mimalloc $MI_VERSION_STR (MI_MALLOC_VERSION $MI_VERSION," \
        "libmimalloc-sys $VERSION) at $(realpath "$SO")" >&2
    realpath "$SO"
}

if [ -f "$SO" ] && [ -f "$OUT/version" ] && [ "$(cat "$OUT/source" 2>/dev/null)" = "$SRC" ] &&
    [ -z "$(find "$SRC/src" "$SRC/include" "$SELF" -newer "$SO" -print -quit)" ]; then
    report "up to date:"
    exit 0
fi

# CMake's mi_sources (src/alloc.c includes alloc-override.c and free.c, page.c includes
# page-queue.c).
SOURCES=(alloc alloc-aligned alloc-posix arena arena-meta bitmap heap init libc options
    os page page-map random stats theap threadlocal prim/prim)
CFLAGS=(-O3 -DNDEBUG -fPIC -std=gnu11
    -Wall -Wextra -Wno-unknown-pragmas -Wstrict-prototypes
    -fvisibility=hidden -ftls-model=initial-exec -fno-builtin-malloc
    -DMI_MALLOC_OVERRIDE -DMI_BUILD_RELEASE -DMI_CMAKE_BUILD_TYPE=release
    -DMI_SHARED_LIB -DMI_SHARED_LIB_EXPORT -Dmimalloc_EXPORTS
    -I"$SRC/include")
echo "mimalloc3: compiling mimalloc $MI_VERSION_STR from $SRC ..." >&2
rm -rf "$OUT/obj"
mkdir -p "$OUT/obj/prim"
pids=()
for s in "${SOURCES[@]}"; do
    "$CC" "${CFLAGS[@]}" -c "$SRC/src/$s.c" -o "$OUT/obj/$s.o" &
    pids+=($!)
done
for pid in "${pids[@]}"; do
    wait "$pid" || { echo "error: compiling mimalloc failed" >&2; exit 1; }
done
objects=()
for s in "${SOURCES[@]}"; do objects+=("$OUT/obj/$s.o"); done
"$CC" -fPIC -O3 -DNDEBUG -shared -o "$SO.tmp" "${objects[@]}" -lpthread -lrt -latomic
mv "$SO.tmp" "$SO"
echo "$SRC" >"$OUT/source"
# What `ebb compare` reports as this library's version.
echo "mimalloc $MI_VERSION_STR (libmimalloc-sys $VERSION, built by scripts/build-mimalloc3.sh)" >"$OUT/version"
report "built"
