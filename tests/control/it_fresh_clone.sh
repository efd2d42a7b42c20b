#!/usr/bin/env bash
# The README's first command works from a fresh clone: `./scripts/build.sh &&
# build/bin/gpubench run` in a clone of this repository's HEAD (so it tests
# what is committed). The CUDA backend and the tests are left out of this
# nested build (GB_CMAKE_ARGS=-DGB_CUDA=OFF, GB_BUILD_TARGETS=gpubench: the
# enclosing build compiles them) to keep it short in CI; the Debian
# packages are already there, so build.sh installs nothing.
source "$(dirname "$0")/lib.sh" "$1" "$2"
src=${3:?source dir}
if ! git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    echo "SKIP: $src is not a git checkout, there is nothing to clone"
    exit 77
fi
git clone -q "$src" "$T/clone" || fail "git clone $src"
cd "$T/clone"
export GB_CMAKE_ARGS=-DGB_CUDA=OFF GB_BUILD_TARGETS=gpubench
./scripts/build.sh >"$T/build.log" 2>&1 && build/bin/gpubench run >"$T/run.out" 2>"$T/run.log"
eq "the README's first command exits 0" "$?" 0
contains "a results table" "$T/run.out" " done "
[ -f gpubench.db ] || fail "no ./gpubench.db"
echo ok
