#!/usr/bin/env bash
# bench/gpu/carry_dnnl.sh - put this machine's oneDNN (Debian's libdnnl, its
# headers and the OpenCL loader it needs) in .gpu-deps/dnnl, for a GPU
# machine that has no oneDNN: carried there (the device tool's `carry`:
# [".gpu-deps"]), bench/gpu/run.sh finds it, builds the CPU engine beside
# the CUDA backend, and test_cuda_step compares the two step for step.
# About 39 MB; .gpu-deps is git-ignored.
set -euo pipefail
cd "$(dirname "$0")/../.."
D=.gpu-deps/dnnl
lib=$(ldconfig -p | awk '/libdnnl\.so\.2 /{if (!f) print $NF; f = 1}')  # reads it all: no SIGPIPE under pipefail
[ -n "$lib" ] || { echo "carry_dnnl: no libdnnl.so.2 here (apt-get install libdnnl-dev)" >&2; exit 1; }
rm -rf "$D"
mkdir -p "$D/include" "$D/lib"
cp -r /usr/include/oneapi "$D/include/"
cp /usr/include/dnnl*.h "$D/include/" 2>/dev/null || true
# real files under the names the linker and the loader look for (a link
# may not travel)
cp -L "$lib" "$D/lib/libdnnl.so.2"
for dep in $(ldd "$lib" | awk '/libOpenCL/{print $3}'); do cp -L "$dep" "$D/lib/"; done
du -sh "$D"
