#!/bin/sh
# old_driver.sh GPUBENCH DLOPEN_TEST CUDA_LIB FAKE_DIR: a machine whose NVIDIA
# driver is too old for the CUDA 13 runtime (FAKE_DIR holds a libcuda.so.1
# that says CUDA 12.4). The backend must say "driver too old", with both
# versions, not "no GPU"; --backend auto must warn that it measures the CPU
# instead, and still run.
set -u
gb=${1:?gpubench} dl=${2:?test_cuda_dlopen} lib=${3:?cuda backend} fake=${4:?fake driver dir}
fail() { echo "FAIL: $*"; exit 1; }
out=$(LD_LIBRARY_PATH="$fake" GB_EXPECT_OLD_DRIVER=1 "$dl" "$lib" 2>&1) ||
    fail "test_cuda_dlopen with the old driver: $out"
echo "$out"
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
LD_LIBRARY_PATH="$fake" GB_CUDA_LIB="$lib" "$gb" train --backend auto --image-size 32 \
    --batch 2 --steps 1 --warmup 0 --format json >"$tmp/out" 2>"$tmp/err" ||
    fail "train --backend auto: $(cat "$tmp/err")"
cat "$tmp/err"
grep -q 'warning: --backend auto runs the CPU backend: cuda: NVIDIA driver too old' "$tmp/err" ||
    fail "no warning on stderr"
grep -q '"backend":"cpu"' "$tmp/out" || fail "not a CPU record: $(head -c 300 "$tmp/out")"
echo "ok"
