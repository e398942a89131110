#!/bin/bash
# Interleaved runs of one real program under several configurations,
# one line per run: program, configuration, user s, sys s, wall s, max RSS KiB, minor
# page faults (GNU time). Used for the huge-page split in docs/REAL-PROGRAMS.md.
#
#   bench/real-programs/interleave.sh ROUNDS perl|lua N NAME:VAR=VALUE,VAR=VALUE ...
#   bench/real-programs/interleave.sh ROUNDS python|jq|sqlite|gcc|make WORK NAME:VAR=VALUE ...
# (python, jq, sqlite and gcc read the suite's inputs from WORK, e.g. target/real-programs;
# gcc writes WORK/out/big-interleave.o; make rebuilds WORK/build, as the suite does.)
#   E=$PWD/target/release/libebb.so M=$PWD/target/mimalloc3/libmimalloc3.so
#   bench/real-programs/interleave.sh 3 perl 125000 ebb:LD_PRELOAD=$E \
#       ebb-dense:LD_PRELOAD=$E,EBB_DENSE_HUGE_PAGES=1 mi3:LD_PRELOAD=$M \
#       mi3-nothp:LD_PRELOAD=$M,MIMALLOC_ALLOW_THP=0
#
# (The environment goes to GNU time too, which a preloaded allocator then also runs in;
# it allocates next to nothing.) OUT=FILE sends the program's stdout to FILE instead of
# /dev/null (the suite's run.py writes it to a file).
OUT=${OUT:-/dev/null}
set -euo pipefail
R=$1; shift; PROG=$1; shift; N=$1; shift
IN=/dev/null
B=$(cd "$(dirname "$0")" && pwd)/programs
case $PROG in
    perl) CMD="perl $B/hashkeys.pl $N" ;;
    lua) CMD="lua5.4 $B/hashkeys.lua $N" ;;
    python) CMD="/usr/bin/python3 $B/group.py $N/records.json" ;;
    jq) CMD="jq -c -f $B/group.jq $N/records.json" ;;
    sqlite) CMD="sqlite3 :memory:"; IN=$N/rows.sql ;;
    gcc) mkdir -p "$N/out"; CMD="gcc -w -O2 -c $N/big.c -o $N/out/big-interleave.o" ;;
    make) CMD="make -s -j2 -B -C $N/build all" ;;
    *) echo "perl, lua, python, jq, sqlite, gcc or make" >&2; exit 1 ;;
esac
# The order rotates each round (A B C, then B C A, ...): with a fixed order, the
# configuration listed first came out ~6% faster than the same library listed second
# (Lua 200,000 keys, both orders: docs/REAL-PROGRAMS.md "progs3").
configs=("$@")
n=${#configs[@]}
for r in $(seq "$R"); do
    for i in $(seq 0 $((n - 1))); do
        c=${configs[$(((i + r - 1) % n))]}
        name=${c%%:*}; envs=${c#*:}
        # shellcheck disable=SC2086
        out=$(env ${envs//,/ } /usr/bin/time -f "%U %S %e %M %R" $CMD <"$IN" 2>&1 >"$OUT" | tail -1)
        echo "$PROG $name $out"
    done
done
