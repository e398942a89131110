#!/usr/bin/env bash
# Run each cargo-fuzz target (fuzz/fuzz_targets) for a bounded number of runs, starting
# from the checked-in corpus (fuzz/corpus/<target>; new inputs go to a scratch copy, so
# the checked-in corpus stays small). Needs the nightly toolchain and cargo-fuzz:
#   rustup toolchain install nightly --profile minimal; cargo install cargo-fuzz --locked
# Usage: scripts/fuzz.sh [RUNS per target, default 20000]
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
runs=${1:-20000}
for target in ops threads; do
    scratch=$(mktemp -d)
    cp corpus/"$target"/* "$scratch"/
    echo "=== cargo +nightly fuzz run $target (-runs=$runs)"
    # -s none: ebb is called directly, so ASan would only slow the checks of the model;
    # -rss_limit_mb: the model keeps up to 64 MiB live, plus blocks in flight.
    cargo +nightly fuzz run -s none "$target" "$scratch" corpus/"$target" -- \
        -runs="$runs" -max_len=4096 -rss_limit_mb=4096 -max_total_time=30 2>&1 |
        grep -E '^#[0-9]+ +(DONE|INITED)|ERROR|panicked|SUMMARY|Done' || true
    status=${PIPESTATUS[0]}
    rm -rf "$scratch"
    if [ "$status" != 0 ]; then
        echo "fuzz target $target failed (artifacts in fuzz/artifacts/$target)" >&2
        exit 1
    fi
done
