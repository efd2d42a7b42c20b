#!/usr/bin/env bash
# build.sh - install the Debian packages gpubench needs (only those missing;
# the list is scripts/debian-packages.txt) and build everything into build/.
# Then: build/bin/gpubench run          (the default benchmark on this machine)
#       ctest --test-dir build --output-on-failure   (the tests)
# Extra CMake options can be given in $GB_CMAKE_ARGS (e.g. -DGB_CUDA=OFF);
# $GB_BUILD_TARGETS names CMake targets to build instead of all of them
# (e.g. gpubench: the program without the tests).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t pkgs < <(grep -v '^\s*\(#\|$\)' scripts/debian-packages.txt)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "build.sh: installing ${missing[*]}" >&2
    SUDO=
    [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# shellcheck disable=SC2086
cmake -S . -B build ${GB_CMAKE_ARGS:-} >/dev/null
targets=()
for t in ${GB_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build build -j"$(nproc)" "${targets[@]}"
echo "build.sh: built build/bin/gpubench" >&2
