#!/usr/bin/env bash
# A git workload for real_programs.rs, run once with and once without ebb preloaded.
# $1: a directory holding v1 ... v6, six versions of a source tree (written by the
# test). Everything printed on stdout must be identical in the two runs: commit dates and
# identities are fixed, so the commit hashes are too.
set -euo pipefail
gen=$1

export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null HOME=$PWD
export GIT_AUTHOR_NAME=ebb GIT_AUTHOR_EMAIL=ebb@example.com
export GIT_COMMITTER_NAME=ebb GIT_COMMITTER_EMAIL=ebb@example.com
export TZ=UTC LC_ALL=C

git init -q -b main repo
cd repo
for v in 1 2 3 4 5 6; do
    rm -rf src
    cp -R "$gen/v$v/src" src
    git add -A
    GIT_AUTHOR_DATE="2024-01-0${v}T12:00:00+0000" GIT_COMMITTER_DATE="2024-01-0${v}T12:00:00+0000" \
        git commit -q -m "version $v"
    git tag "v$v"
done
echo "== log"
git log --format='%H %an %ad %s' --date=iso-strict
echo "== diff --stat v1 v6"
git diff --stat v1 v6 | tail -n 3
echo "== log -p digest"
git log -p --stat | git hash-object --stdin
echo "== grep (threaded)"
git grep -c -E '(^| )4[0-9]{4}( |$)' v6 | tail -n 5
echo "== gc --aggressive"
# One delta-search thread, so the pack (and its size) is the same in every run.
git -c pack.threads=1 gc --aggressive --quiet
git fsck --full --strict --no-progress
git count-objects -v
echo "== clone (index-pack) and fsck of the clone"
cd ..
git clone -q --no-local repo clone
git -C clone fsck --full --strict --no-progress
git -C clone log --format=%H
git -C clone rev-parse 'HEAD^{tree}'
echo "== final log"
git -C repo log --format=%H
