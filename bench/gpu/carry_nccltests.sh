#!/usr/bin/env bash
# bench/gpu/carry_nccltests.sh - build nccl-tests' all_reduce_perf here
# (NVIDIA's public benchmark, the reference for all-reduce bus bandwidth)
# and put it in .gpu-deps/nccl-tests, for a GPU machine with no network:
# carried there (the device tool's `carry`: [".gpu-deps"]), bench/gpu/run.sh
# runs it beside gpubench's allreduce kind on the same GPUs and compares
# them size by size (bench/gpu/nccl_tests_cmp.py; issue 5's target: busbw
# within 5% of nccl-tests).
#   .gpu-deps/nccl-tests/all_reduce_perf   (stripped; it finds libnccl.so.2
#                                           and libcudart where run.sh puts
#                                           CUDA's libraries)
#   .gpu-deps/nccl-tests/BUILD_INFO        the source's commit, ARCHS, date
# The source: NCCL_TESTS_SRC (a git repository or a checkout), else
# https://github.com/NVIDIA/nccl-tests at NCCL_TESTS_REF (v2.19.6). It is
# built outside this repository (nothing of it is ours to keep), against
# NCCL_HOME and CUDA_HOME (/usr/local/cuda). The copy is made beside the
# old one and put in place only when complete.
# Knobs: ARCHS (90: a list such as "80 86 89 90") BUILD_DIR (build-carry)
#        JOBS (2) NCCL_TESTS_SRC NCCL_TESTS_REF NCCL_HOME CUDA_HOME
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/gpu/carry_lib.sh
source bench/gpu/carry_lib.sh
ARCHS=${ARCHS:-90}
BUILD=$(realpath -m "${BUILD_DIR:-build-carry}")
JOBS=${JOBS:-2}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NCCL_HOME=${NCCL_HOME:-$CUDA_HOME}
REF=${NCCL_TESTS_REF:-v2.19.6}
SRC=$BUILD/nccl-tests-src
OBJ=$BUILD/nccl-tests-build
[ -x "$CUDA_HOME/bin/nvcc" ] || { echo "carry_nccltests: no $CUDA_HOME/bin/nvcc (CUDA_HOME)" >&2; exit 1; }
[ -f "$NCCL_HOME/include/nccl.h" ] || { echo "carry_nccltests: no $NCCL_HOME/include/nccl.h (NCCL_HOME)" >&2; exit 1; }
mkdir -p "$BUILD"
rm -rf "$SRC" "$OBJ"
if [ -n "${NCCL_TESTS_SRC:-}" ]; then
  # at REF whether or not it was given: a mirror's default branch is not
  # the v2.19.6 the comparison was checked against
  git clone -q "$NCCL_TESTS_SRC" "$SRC"
  git -C "$SRC" checkout -q "$REF"
else
  git clone -q --depth 1 --branch "$REF" https://github.com/NVIDIA/nccl-tests "$SRC"
fi
GENCODE=
for a in $ARCHS; do GENCODE="$GENCODE -gencode=arch=compute_$a,code=sm_$a"; done
make -C "$SRC/src" -j"$JOBS" BUILDDIR="$OBJ" CUDA_HOME="$CUDA_HOME" NCCL_HOME="$NCCL_HOME" \
  NVCC_GENCODE="$GENCODE" "$OBJ/all_reduce_perf" >"$BUILD/nccl_tests_make.log" 2>&1 ||
  { tail -20 "$BUILD/nccl_tests_make.log" >&2; echo "carry_nccltests: make failed ($BUILD/nccl_tests_make.log)" >&2; exit 1; }
carry_begin nccl-tests
cp "$OBJ/all_reduce_perf" "$NEW/all_reduce_perf"
strip "$NEW/all_reduce_perf"
{
  echo "nccl-tests $(git -C "$SRC" describe --tags --always 2>/dev/null) $(git -C "$SRC" rev-parse HEAD)"
  echo "archs $ARCHS"
  echo "nccl $(sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) *\([0-9]*\).*/\2/p' "$NCCL_HOME/include/nccl.h" | paste -sd.) (headers built against)"
  echo "built $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname)"
} >"$NEW/BUILD_INFO"
carry_commit nccl-tests
cat .gpu-deps/nccl-tests/BUILD_INFO
du -sh .gpu-deps/nccl-tests
du -sh .gpu-deps
