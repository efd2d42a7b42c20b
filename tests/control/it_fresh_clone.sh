#!/usr/bin/env bash
# The README's first command works from a fresh clone: `./scripts/build.sh &&
# build/bin/gpubench run` in a clone of this repository's HEAD (so it tests
# what is committed). The CUDA backend and the tests are left out of this
# nested build (GB_CMAKE_ARGS=-DGB_CUDA=OFF, GB_BUILD_TARGETS=gpubench: the
# enclosing build compiles them) to keep it short in CI; the Debian
# packages are already there, so build.sh installs nothing.
#
# This is also the test of `gpubench run`'s default sweep (ResNet-50 fp32 at
# batch 8 with the engine, and bf16 where the CPU has avx512_bf16): a table of
# finished jobs, the same rows in ./gpubench.db, the agent's state beside it.
# Where the source is not a git checkout (a release tarball) there is nothing
# to clone, and the default sweep runs with the gpubench under test instead.
source "$(dirname "$0")/lib.sh" "$1" "$2"
src=${3:?source dir}
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    git clone -q "$src" "$T/clone" || fail "git clone $src"
    cd "$T/clone"
    export GB_CMAKE_ARGS=-DGB_CUDA=OFF GB_BUILD_TARGETS=gpubench
    ./scripts/build.sh >"$T/build.log" 2>&1 && build/bin/gpubench run >"$T/run.out" 2>"$T/run.log"
    eq "the README's first command exits 0" "$?" 0
else
    echo "$src is not a git checkout: the default sweep with $GB, no clone"
    mkdir "$T/run" && cd "$T/run"
    check "gpubench run exits 0" "$GB" run >"$T/run.out" 2>"$T/run.log"
fi
contains "table header" "$T/run.out" "images_per_sec"
rows=$(grep -c " done " "$T/run.out")
[ "$rows" -ge 1 ] || fail "no finished job in the table: $(cat "$T/run.out")"
[ -f gpubench.db ] || fail "no ./gpubench.db"
eq "rows in the store" "$(sqlite3 gpubench.db "SELECT count(*) FROM v_results WHERE status = 'done'")" "$rows"
[ -d gpubench.db.agent/spool ] || fail "no agent state next to the store"
echo ok
