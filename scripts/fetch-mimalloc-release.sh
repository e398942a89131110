#!/usr/bin/env bash
# Fetches a prebuilt mimalloc release as a preloadable shared library, for comparisons
# with the newest mimalloc when the `mimalloc` crate vendors an older one (the crate's
# libmimalloc-sys 0.1.49 vendors v3.3.2; scripts/build-mimalloc3.sh builds that one).
#
# Source: the PyPI wheel `cmeel-mimalloc` (a packaging of mimalloc's own CMake release
# build: lib/libmimalloc.so.3.x), downloaded with pip into target/mimalloc-release/.
# Prints the library's path on stdout; nothing (and exit 1) if pip or the network is
# not available.
#
#   scripts/fetch-mimalloc-release.sh              # 3.4.3
#   VERSION=3.4.3 scripts/fetch-mimalloc-release.sh
set -euo pipefail

cd "$(dirname "$0")/.."
VERSION=${VERSION:-3.4.3}
TARGET=${CARGO_TARGET_DIR:-target}
OUT=$TARGET/mimalloc-release/$VERSION
find_so() {
    find "$OUT" -name "libmimalloc.so.${VERSION%.*}" -print -quit 2>/dev/null || true
}
SO=$(find_so)
if [ -z "$SO" ]; then
    command -v pip3 >/dev/null || { echo "error: pip3 is not installed" >&2; exit 1; }
    mkdir -p "$OUT"
    echo "downloading cmeel-mimalloc==$VERSION (PyPI) ..." >&2
    pip3 download --quiet --no-deps --dest "$OUT" "cmeel-mimalloc==$VERSION" >&2
    (cd "$OUT" && python3 -m zipfile -e ./*.whl .)
    SO=$(find_so)
    [ -n "$SO" ] || { echo "error: no libmimalloc.so.${VERSION%.*} in the wheel" >&2; exit 1; }
fi
SO=$(realpath "$SO")
echo "mimalloc $VERSION (release build from PyPI cmeel-mimalloc): $SO" >&2
echo "$SO"
