#!/usr/bin/env bash
# bench/gpu/carry_full.sh - build the whole tree here (Release, the CUDA
# backend for sm_90 only unless ARCHS says otherwise) and put the product in
# .gpu-deps/full, for a GPU machine that lacks the whole tree's Debian
# packages (libzmq, protobuf-c, SQLite, cJSON, oneDNN): carried there (the
# device tool's `carry`: [".gpu-deps"]), bench/gpu/run.sh runs `gpubench run`
# on the GPU with it (its `product` section).
#   .gpu-deps/full/bin/gpubench
#   .gpu-deps/full/lib/libgpubench_cuda.so  (where bin/gpubench looks: ../lib)
#   .gpu-deps/full/lib/<soname>             the libraries ldd finds for those
#        two, as real files, less glibc's, the compiler's (libstdc++,
#        libgcc_s, libgomp), CUDA's (cudart, cuBLAS, cuDNN, NCCL, NVML, the
#        driver) and those .gpu-deps/dnnl already carries (oneDNN, OpenCL)
#   .gpu-deps/full/BUILD_INFO              the commit, ARCHS and date
# oneDNN travels once, in .gpu-deps/dnnl: run bench/gpu/carry_dnnl.sh first
# (a second 39 MB copy would break the device call's 64 MiB). The copy is
# made beside the old one and put in place only when complete.
# Knobs: ARCHS (90-real: GB_CUDA_ARCHS) BUILD_DIR (build-carry) JOBS (2)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/gpu/carry_lib.sh
source bench/gpu/carry_lib.sh
ARCHS=${ARCHS:-90-real}
BUILD=${BUILD_DIR:-build-carry}
JOBS=${JOBS:-2}
D=.gpu-deps/full
DNNL=.gpu-deps/dnnl/lib
[ -f "$DNNL/libdnnl.so.2" ] ||
  { echo "carry_full: no $DNNL/libdnnl.so.2: run bench/gpu/carry_dnnl.sh first (gpubench links oneDNN, which travels there)" >&2; exit 1; }
mkdir -p "$BUILD"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DGB_CUDA=ON "-DGB_CUDA_ARCHS=$ARCHS" >"$BUILD/carry_cmake.log" 2>&1 ||
  { tail -20 "$BUILD/carry_cmake.log" >&2; echo "carry_full: cmake failed ($BUILD/carry_cmake.log)" >&2; exit 1; }
# GB_CUDA=ON builds the backend only when nvcc, cuDNN and NCCL are found:
# without it there is nothing for the GPU to run
grep -q 'gpubench: CUDA backend ON' "$BUILD/carry_cmake.log" ||
  { grep 'gpubench: CUDA backend' "$BUILD/carry_cmake.log" >&2; echo "carry_full: no CUDA backend in this build (nvcc, cuDNN, NCCL)" >&2; exit 1; }
cmake --build "$BUILD" -j"$JOBS" --target gpubench gpubench_cuda
EXE=$BUILD/bin/gpubench
SO=$BUILD/lib/libgpubench_cuda.so
for f in "$EXE" "$SO"; do [ -f "$f" ] || { echo "carry_full: the build made no $f" >&2; exit 1; }; done
if ldd "$EXE" "$SO" | grep -q 'not found'; then
  ldd "$EXE" "$SO" | grep 'not found' >&2
  echo "carry_full: libraries missing here" >&2
  exit 1
fi
carry_begin full
mkdir -p "$NEW/bin" "$NEW/lib"
cp "$EXE" "$NEW/bin/gpubench"
cp "$SO" "$NEW/lib/libgpubench_cuda.so"
# "soname => path (address)": the soname is what the loader looks for
ldd "$EXE" "$SO" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u | while read -r name path; do
  case $name in
  # glibc's own, the compiler's runtime, CUDA's: every GPU machine has
  # them, in versions that must match its driver and toolkit
  libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | libresolv.so.* | ld-linux*.so.* | \
    libutil.so.* | libanl.so.* | libstdc++.so.* | libgcc_s.so.* | libgomp.so.* | \
    libcudart.so.* | libcublas*.so.* | libcudnn*.so.* | libnccl*.so.* | libnvidia-ml.so.* | libcuda.so.*) continue ;;
  esac
  [ -e "$DNNL/$name" ] && continue # carried by carry_dnnl.sh
  cp -L "$path" "$NEW/lib/$name"
done
{
  echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD -- 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "archs $ARCHS"
  echo "built $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname)"
  # shellcheck disable=SC2012 # sonames: no odd characters
  echo "lib $(cd "$NEW/lib" && ls | tr '\n' ' ')"
} >"$NEW/BUILD_INFO"
carry_commit full
cat "$D/BUILD_INFO"
# du counts a folder once: the total apart
du -sh "$D"
du -sh .gpu-deps
