#!/usr/bin/env bash
# bench/gpu/run.sh - the one command to run on a machine with an NVIDIA GPU.
#   1. build the CUDA-only tree (bench/gpu/CMakeLists.txt: model, reference
#      ops, libgpubench_cuda.so, tests/cuda, gb_cuda_bench) for this GPU's
#      architecture; it needs only the CUDA toolkit, cuDNN and NCCL, which are
#      looked for next to CUDA, in the system and in PyTorch's Python wheels
#   2. the `gpu` tests (CUDA ops and whole steps against the double host twin)
#   3. gpubench's CUDA engine (gb_cuda_bench), ResNet-50, batch 256,
#      synthetic data on the device, per precision; then the fused step
#      (GB_CUDA_FUSE=1, fp16 and bf16; section fuse) beside the defaults (on
#      a GPU model RESULTS.md has PyTorch's figures for; elsewhere after 5)
#   4. data parallelism: the same job through NCCL (--dp: a one-rank
#      communicator on one GPU, every GPU with more), and the allreduce
#      kind (nccl-tests style, 8 B .. AR_MAX_BYTES, busbw) on every GPU,
#      then nccl-tests' own all_reduce_perf beside it when carried
#      (bench/gpu/carry_nccltests.sh): busbw size by size, the ratio
#   5. PyTorch eager (torchvision resnet50, channels_last), same batch,
#      warm-up and steps, when PyTorch with CUDA is installed
#   5b. the gemm kind's matrix rate in fp32 (TF32 off), tf32, fp16 and bf16
#      (cuBLAS; GEMM_N cubed, STEPS products) against torch.matmul set the
#      same way (torch_gemm.py)
#   6. ours in bf16 once more with our batch-norm kernels (cuDNN's is the
#      default): what ours cost against cuDNN's
#   6b. ours in bf16 with the image in 4 channels and fp16 in 8
#      (GB_CUDA_STEM_C; bf16's default is 8, the others' 4): which count
#      conv1 is faster with in each
#   6c. cuDNN's graph-API fusions (kernels/cuda/fuse.c; section fuse too):
#      each ResNet-50 conv's fused graph (conv + batch-norm statistics,
#      with the previous batch norm's scale, bias and ReLU in its prologue;
#      the wgrad with that prologue) against the unfused calls (conv, cuDNN
#      batch norm; wgrad on the materialized input); their correctness and
#      the fused step's are test_cuda_fuse, test_cuda_ops and
#      test_cuda_step in the gpu tests
#   7. ours in fp32 with FFT/Winograd allowed (GB_CUDA_FP32_ALGOS=any): its
#      speed and the op and step tests' fp32 lines under it
#   7b. compute-sanitizer memcheck on a short run of the whole-step test
#   8. (run right after 4: it had never run on a GPU, and at the end it was
#      always out of time) the product path: `gpubench run` (coordinator, local agent, worker,
#      SQLite store, NVML telemetry) with a fp16/bf16(/tf32) sweep on one
#      GPU, built elsewhere and carried in .gpu-deps/full
#      (bench/gpu/carry_full.sh), or with FULL=1 built here when this
#      machine has the whole tree's Debian packages
#   9. torch.compile (fp16, bf16, tf32), as the time left allows
#  10. a table with the ratios; the entry for bench/gpu/RESULTS.md
# Every section prints PASS, FAIL or SKIPPED and the script goes on past any
# failure, keeping to BUDGET_S seconds in all (the most useful parts first).
# Results: appended to bench/gpu/RESULTS.md here, and, when $OUT names a
# folder (the device tool's), copied there as results.md (at the end),
# summary.txt and logs.tgz (refreshed after every section, so a killed run
# still leaves them).
# Knobs: BATCH (256; less on a GPU too small for it) STEPS (30) WARMUP (10) BUDGET_S (480) PYTHON (python3)
#        BUILD_DIR (build-gpu) JOBS (nproc) ARCHS (from nvidia-smi) FULL (0)
#        AR_MAX_BYTES (1073741824) GEMM_N (8192) SKIP (sections to leave out, by
#        name: tests ours dp torch gemm ownbn stem fuse fp32any sanitizer product
#        compile; e.g. a second call with
#        SKIP="tests ours dp torch gemm ownbn stem fuse fp32any sanitizer product"
#        gives torch.compile the time)
#        BUILD_ONLY (0; 1: build, check the libraries resolve, and stop: no
#        GPU needed, ARCHS then defaults to sm_80..sm_90 + PTX).
# Without a usable GPU (no nvidia-smi, nvidia-smi fails or lists none) it
# says why and exits 2 before building, unless BUILD_ONLY=1; otherwise it
# exits 1 when a section failed, 0 when none did.
# Relative paths in BUILD_DIR, OUT, PYTHON and GB_DNNL_ROOT are the
# caller's: resolved against the directory it was called from (the script
# then works from the repository root; BUILD_DIR defaults to build-gpu there).
set -uo pipefail
caller_path() { case $1 in '' | /*) printf '%s' "$1" ;; *) printf '%s/%s' "$PWD" "$1" ;; esac; }
BUILD_DIR=$(caller_path "${BUILD_DIR:-}")
OUT=$(caller_path "${OUT:-}")
GB_DNNL_ROOT=$(caller_path "${GB_DNNL_ROOT:-}")
case ${PYTHON:-} in */*) PYTHON=$(caller_path "$PYTHON") ;; esac # a bare name is looked up in PATH
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
BATCH_ASKED=${BATCH:-}
BATCH=${BATCH:-256}
STEPS=${STEPS:-30}
WARMUP=${WARMUP:-10}
BUDGET_S=${BUDGET_S:-480}
PYTHON=${PYTHON:-python3}
BUILD=${BUILD_DIR:-$ROOT/build-gpu}
JOBS=${JOBS:-$(nproc)}
FULL=${FULL:-0}
BUILD_ONLY=${BUILD_ONLY:-0}
AR_MAX_BYTES=${AR_MAX_BYTES:-1073741824}
GEMM_N=${GEMM_N:-8192}
RESULT_DIR=${OUT:-} # the device tool's folder of files that come back
# the sizes are checked before anything runs (a BATCH of 0 would fail every
# section on the GPU, a BUDGET_S of abc broke the clock): need_int
ME=run.sh
# shellcheck source=../lib.sh
source bench/lib.sh
# gb_cuda_bench's limits for the sizes
need_int BATCH 1 1000000
need_int STEPS 1 1000000
need_int WARMUP 0 1000000
need_int BUDGET_S 1 86400
need_int JOBS 1 4096
need_int AR_MAX_BYTES 8 17179869184
need_int GEMM_N 1 65536
[ $((AR_MAX_BYTES % 4)) = 0 ] || { echo "run.sh: AR_MAX_BYTES=$AR_MAX_BYTES: must be a multiple of 4 (floats)" >&2; exit 2; }
for v in FULL BUILD_ONLY; do
  case ${!v} in 0 | 1) ;; *) echo "run.sh: $v='${!v}': 0 or 1" >&2; exit 2 ;; esac
done
# a misspelled section in SKIP would run it, on a device budget
for s in ${SKIP:-}; do
  case $s in tests | ours | dp | torch | gemm | ownbn | stem | fuse | fp32any | sanitizer | product | compile) ;;
  *) echo "run.sh: SKIP names '$s', not a section (tests ours dp torch gemm ownbn stem fuse fp32any sanitizer product compile)" >&2; exit 2 ;;
  esac
done
LOG=$BUILD/bench
START=$(date +%s)
# the figures are read out of JSON with a Python that runs: $PYTHON (the one
# with PyTorch) if it does, else python3; with neither every figure would be
# empty while the sections PASS
JSON_PY=$PYTHON
"$JSON_PY" -c 'import json' >/dev/null 2>&1 || JSON_PY=python3
"$JSON_PY" -c 'import json' >/dev/null 2>&1 || { echo "run.sh: neither PYTHON=$PYTHON nor python3 runs: the figures could not be read" >&2; exit 2; }
declare -a SUMMARY=()
PRECS="fp16 bf16 tf32 fp32"
declare -A OURS=() TORCH_E=() TORCH_C=() RTE_OF=()

mkdir -p "$LOG" 2>/dev/null || LOG=$(mktemp -d)
# everything this script prints goes into logs.tgz too: only the last 12,000
# characters of it come back from the device otherwise
exec > >(tee -a "$LOG/run.log") 2>&1
if [ -n "$RESULT_DIR" ] && ! mkdir -p "$RESULT_DIR" 2>/dev/null; then RESULT_DIR=; fi

left() { echo $((BUDGET_S - ($(date +%s) - START))); }
section() { printf '\n=== %s (%ss left) ===\n' "$1" "$(left)"; }
# a step that failed: its exit status said, a timeout as such (124, or 137
# when it had to be killed), not as a failure of what it ran
failed() {
  case $1 in
  124 | 137) status FAIL "$2: out of time (its slot ended, exit $1; ${3:-see its log})" ;;
  *) status FAIL "$2 (exit $1; ${3:-see its log})" ;;
  esac
}
# results.md (the table and every section's line so far): written by pack,
# so a run cut short still leaves it in $OUT; awk, not a Python per cell
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f\n", a / b; else print "-" }' || echo "-"; }
num() { [ -n "$1" ] && awk -v a="$1" 'BEGIN { printf "%.0f\n", a }' || echo "-"; }
write_results() {
  local p s
  TABLE=$(
    printf '| precision | gpubench img/s | torch eager img/s | ratio | torch.compile img/s | ratio |\n'
    printf '|---|---:|---:|---:|---:|---:|\n'
    for p in $PRECS; do
      printf '| %s | %s%s | %s | %s | %s | %s |\n' "$p" "$(num "${OURS[$p]:-}")" "${RTE_OF[$p]:+ (cuDNN runtime error)}" "$(num "${TORCH_E[$p]:-}")" \
        "$(ratio "${OURS[$p]:-}" "${TORCH_E[$p]:-}")" "$(num "${TORCH_C[$p]:-}")" "$(ratio "${OURS[$p]:-}" "${TORCH_C[$p]:-}")"
    done)
  [ -n "${CUDNN_V:-}" ] || CUDNN_V=$(json_field "$LOG/ours_fp16.json" versions.cudnn)
  # PyTorch's own cuDNN (its wheel's: 9.19 against our system 9.14 on
  # 2026-12-04), whose version the ratios also compare
  TORCH_CUDNN=
  for f in "$LOG"/torch_eager_*.json; do
    [ -f "$f" ] && TORCH_CUDNN=$(json_field "$f" cudnn) && [ -n "$TORCH_CUDNN" ] && break
  done
  # torch.backends.cudnn.version(): 91900 for 9.19.0
  case $TORCH_CUDNN in
  [1-9][0-9][0-9][0-9][0-9]) TORCH_CUDNN="$((TORCH_CUDNN / 10000)).$((TORCH_CUDNN % 10000 / 100)).$((TORCH_CUDNN % 100))" ;;
  esac
  {
    echo
    echo "## $(date -u '+%Y-%m-%d %H:%M UTC') - ${GPU:-no GPU} x${NGPU:-0}"
    echo
    echo "Driver ${DRIVER:-?}, CUDA toolkit ${CUDA_V:-?}, cuDNN ${CUDNN_V:-?} (PyTorch's own: ${TORCH_CUDNN:-?}), PyTorch ${TORCH_V:-not installed};"
    echo "ResNet-50 v1.5, batch $BATCH per GPU, 224x224 synthetic data, $WARMUP warm-up + $STEPS timed steps,"
    echo "images/s = batch / median step time (CUDA events). Ratios: gpubench / PyTorch."
    echo "gpubench: bench/gpu/gb_cuda_bench over gb_cuda_backend_ops (the engine driver's calls), steps replayed"
    echo "as a CUDA graph; its fp32 takes only FMA convolution algorithms (no FFT/Winograd), PyTorch's fp32 any."
    echo
    echo "$TABLE"
    echo
    [ -n "${DP_NOTE:-}" ] && { echo "$DP_NOTE."; echo; }
    [ -n "${AR_NOTE:-}" ] && { echo "$AR_NOTE (busbw = algbw x 2(n-1)/n: 0 on one GPU)."; echo; }
    [ -n "${GEMM_NOTE:-}" ] && { echo "$GEMM_NOTE."; echo; }
    [ -n "${NT_NOTE:-}" ] && [ -f "$LOG/nccl_tests_cmp.txt" ] && { echo "$NT_NOTE:"; echo; grep '^|' "$LOG/nccl_tests_cmp.txt"; echo; }
    echo "Sections:"
    echo
    for s in "${SUMMARY[@]}"; do echo "- $s"; done
  } >"$LOG/results.md"
  [ -z "$RESULT_DIR" ] || cp "$LOG/results.md" "$RESULT_DIR/results.md" 2>/dev/null
  return 0
}
pack() {
  printf '%s\n' "${SUMMARY[@]}" >"$LOG/summary.txt"
  # NCCL's own logs (its WARN lines say why a call failed): kernels/cuda
  # sends them to a gb-nccl-* folder of the temporary directory
  mkdir -p "$LOG/nccl" 2>/dev/null && cp -r "${TMPDIR:-/tmp}"/gb-nccl-* "$LOG/nccl/" 2>/dev/null
  write_results
  [ -n "$RESULT_DIR" ] || return 0
  cp "$LOG/summary.txt" "$RESULT_DIR/summary.txt" 2>/dev/null
  # written beside and renamed: a kill during the tar leaves the last whole one
  tar -czf "$RESULT_DIR/logs.tgz.new" -C "$LOG" . 2>/dev/null && mv -f "$RESULT_DIR/logs.tgz.new" "$RESULT_DIR/logs.tgz"
  return 0
}
# is section $1 wanted (not named in SKIP)?
want() {
  case " ${SKIP:-} " in *" $1 "*) status SKIPPED "$1: named in SKIP"; return 1 ;; esac
  return 0
}
status() { SUMMARY+=("$(printf '%-8s %s' "$1" "$2")"); printf '[%s] %s\n' "$1" "$2"; pack; }
# seconds for a step: at most $1, and never past the budget (minus $2 kept back)
slot() {
  local l=$(( $(left) - ${2:-15} ))
  [ "$l" -lt 5 ] && l=5
  [ "$l" -lt "$1" ] && echo "$l" || echo "$1"
}
json_field() { "$JSON_PY" -c 'import json,sys
ls=[l for l in open(sys.argv[1]).read().splitlines() if l.startswith("{")]
v=json.loads(ls[-1]) if ls else {}
for k in sys.argv[2].split("."): v=v.get(k) if isinstance(v,dict) else None
print("" if v is None else json.dumps(v) if isinstance(v,(bool,list,dict)) else v)' "$1" "$2" 2>/dev/null; }

# clocks, power, temperature and clock-event reasons into $1 (newer drivers
# name the last field clocks_event_reasons, older ones clocks_throttle_reasons)
gpu_state() {
  local f
  for f in clocks_event_reasons.active clocks_throttle_reasons.active; do
    timeout -k 5 20 nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu,$f --format=csv >"$1" 2>&1 && return 0
  done
  return 0
}

# the summary and where the logs are, for a run that stops early
finish() {
  section "summary"
  for s in "${SUMMARY[@]}"; do echo "$s"; done
  echo "details: $LOG${RESULT_DIR:+ (and summary.txt, logs.tgz in $RESULT_DIR)}; $(( $(date +%s) - START )) s"
  exit "$1"
}

section "machine"
# a GPU only when nvidia-smi runs and lists one: when it fails (no driver,
# a driver/library mismatch) or finds none, it says so on stdout, which is
# no GPU's name
GPU='' DRIVER='' CAP='' NGPU=0 NOGPU=''
if ! command -v nvidia-smi >/dev/null 2>&1; then
  NOGPU="no nvidia-smi in PATH (no NVIDIA driver)"
elif ! GPUS=$(timeout -k 5 30 nvidia-smi --query-gpu=name --format=csv,noheader 2>"$LOG/nvidia-smi.err"); then
  NOGPU="nvidia-smi failed: $(printf '%s\n' "$GPUS" | cat - "$LOG/nvidia-smi.err" | grep -m1 .)"
elif [ -z "$GPUS" ]; then
  NOGPU="nvidia-smi lists no GPU"
elif case $GPUS in *[Nn]o\ devices\ were\ found*) true ;; *) false ;; esac; then
  NOGPU="nvidia-smi: $GPUS"
else
  GPU=$(printf '%s\n' "$GPUS" | head -1)
  DRIVER=$(timeout -k 5 30 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
  CAP=$(timeout -k 5 30 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  NGPU=$(printf '%s\n' "$GPUS" | wc -l) # GPUs, not MIG lines
  # BATCH unset: 256, halved while a tf32/fp32 step would not fit in 95% of
  # the smallest GPU (107 MB an image and 3.5 GB besides, as `gpubench
  # run`'s default sweep; a 24 GB card held 128, not 256)
  MEM_MIB=$(timeout -k 5 30 nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | sort -n | head -1)
  if [ -z "$BATCH_ASKED" ] && [ -n "$MEM_MIB" ] && [ "$MEM_MIB" -gt 0 ] 2>/dev/null; then
    while [ "$BATCH" -gt 8 ] && [ $(( BATCH * 107 + 3500 )) -gt $(( MEM_MIB * 1048576 / 1000000 * 95 / 100 )) ]; do
      BATCH=$(( BATCH / 2 ))
    done
    [ "$BATCH" = 256 ] || echo "batch $BATCH per GPU: the smallest GPU has $MEM_MIB MiB (BATCH=256 to insist)"
  fi
fi
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
CUDA_V=$("$NVCC" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')
ARCHS=${ARCHS:-${CAP:+${CAP}-real}}
ARCHS=${ARCHS:-80-real;86-real;89-real;90-real;90-virtual}
echo "GPU: ${GPU:-none} x${NGPU} (sm_${CAP:-?}), driver ${DRIVER:-none}, nvcc ${CUDA_V:-none} at $NVCC," \
  "host $(hostname), $(nproc) cores, python $("$PYTHON" -c 'import sys; print(sys.executable)' 2>/dev/null)"
if [ -n "$GPU" ]; then :
elif [ "$BUILD_ONLY" = 1 ]; then
  echo "no usable NVIDIA GPU: $NOGPU; BUILD_ONLY=1, so building only (ARCHS=$ARCHS)"
else
  # nothing here needs the tree without a GPU: the build (a minute of CPU)
  # would only be followed by sections that fail
  status FAIL "no usable NVIDIA GPU: $NOGPU; nothing was run, not even the build (BUILD_ONLY=1 builds without a GPU; SKIP does not)"
  finish 2
fi

# cuDNN and NCCL: with CUDA or in the system (CMake finds those), else in
# the Python wheels PyTorch brings (site-packages/nvidia/{cudnn,nccl}).
SITES=$("$PYTHON" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
prefix_of() { # header library-glob: the install prefix holding both, or nothing
  local h d l
  # shellcheck disable=SC2044,SC2086 # SITES: several folders, split on purpose; no spaces in these paths
  for h in $(find -H /usr/local/cuda/include /usr/include $SITES -maxdepth 5 -name "$1" 2>/dev/null); do
    d=$(dirname "$(dirname "$h")")
    # any one of these (ls of all four fails when one is missing)
    for l in "$d"/lib/$2 "$d"/lib64/$2 "$d"/lib/x86_64-linux-gnu/$2 /usr/lib/x86_64-linux-gnu/$2; do
      [ -e "$l" ] && { echo "$d"; return 0; }
    done
  done
}
CUDNN_ROOT=$(prefix_of cudnn.h 'libcudnn.so*')
NCCL_ROOT=$(prefix_of nccl.h 'libnccl.so*')
echo "cuDNN: ${CUDNN_ROOT:-not found}; NCCL: ${NCCL_ROOT:-not found}"
# PyTorch runs with the environment it came with: these folders (with CUDA's
# own cuBLAS/cudart when cuDNN sits next to CUDA) must not replace its wheels'
TORCH_LDP=${LD_LIBRARY_PATH:-}
for d in "$CUDNN_ROOT" "$NCCL_ROOT"; do
  [ -n "$d" ] && export LD_LIBRARY_PATH="$d/lib:$d/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
# CUDA's own libraries (cudart, cuBLAS): the backend's RUNPATH names the
# toolkit's lib folder only (not lib64 or targets/), so the loader is told
# of them all; last, so cuDNN and NCCL above keep their place
CUDA_TK=$(dirname "$(dirname "$NVCC")")
for d in "$CUDA_TK/lib64" "$CUDA_TK/lib" "$CUDA_TK/targets/x86_64-linux/lib"; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
# oneDNN for the CPU engine, which test_cuda_step then compares the CUDA
# backend with: GB_DNNL_ROOT, or .gpu-deps/dnnl carried from a machine that
# has it (bench/gpu/carry_dnnl.sh); without it the comparison is with the
# double host twin only
DNNL_ROOT=${GB_DNNL_ROOT:-}
[ -z "$DNNL_ROOT" ] && [ -d "$ROOT/.gpu-deps/dnnl/lib" ] && DNNL_ROOT=$ROOT/.gpu-deps/dnnl
[ -n "$DNNL_ROOT" ] && export LD_LIBRARY_PATH="$DNNL_ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "oneDNN for the CPU engine: ${DNNL_ROOT:-from the system, if there}"
# one machine: NCCL's bootstrap stays on the loopback interface (a VM may
# have no other, or one that is down)
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
# make, or else ninja (the device image lists ninja and CMake)
GEN=()
command -v make >/dev/null 2>&1 || { command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja); }
gpu_state "$LOG/gpu_state_before.csv"

section "build"
BUILD_OK=0 BENCH_OK=0
if timeout -k 10 "$(slot 300)" cmake ${GEN[@]+"${GEN[@]}"} -S bench/gpu -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
     -DCMAKE_CUDA_COMPILER="$NVCC" "-DGB_CUDA_ARCHS=$ARCHS" \
     ${CUDNN_ROOT:+-DGB_CUDNN_ROOT=$CUDNN_ROOT} ${NCCL_ROOT:+-DGB_NCCL_ROOT=$NCCL_ROOT} \
     ${DNNL_ROOT:+-DGB_DNNL_ROOT=$DNNL_ROOT} \
     >"$LOG/cmake.log" 2>&1; then
  # the timing harness and the backend first: a test that does not build
  # (the carried oneDNN's CPU engine, say) must not cost the figures
  timeout -k 10 "$(slot 300)" cmake --build "$BUILD" -j"$JOBS" --target gb_cuda_bench gpubench_cuda \
    >"$LOG/build.log" 2>&1 && BENCH_OK=1
  timeout -k 10 "$(slot 300)" cmake --build "$BUILD" -j"$JOBS" >>"$LOG/build.log" 2>&1 && BUILD_OK=1
fi
if [ "$BUILD_OK" = 1 ]; then
  status PASS "build ($(grep -o 'GPU build): .*' "$LOG/cmake.log" | head -1 | cut -c13-)), $(( $(date +%s) - START )) s"
  # test_cuda_step links the carried libdnnl.so.2 too (its glibc, libgomp)
  MISSING=$(ldd "$BUILD/gb_cuda_bench" "$BUILD"/lib/libgpubench_cuda.so "$BUILD/tests/cuda/test_cuda_step" 2>/dev/null | grep 'not found' | sort -u | tr -s ' \t\n' ' ')
  [ -n "$MISSING" ] && status FAIL "unresolved libraries (ldd): $MISSING"
else
  tail -n 30 "$LOG/cmake.log" "$LOG/build.log" 2>/dev/null
  if [ "$BENCH_OK" = 1 ]; then
    status FAIL "build: gb_cuda_bench built, the tests did not (build.log): gpu tests and sanitizer left out"
  else
    status FAIL "build (logs: cmake.log, build.log)"
  fi
fi
if [ "$BUILD_ONLY" = 1 ]; then
  status SKIPPED "everything after the build: BUILD_ONLY=1"
  printf '%s\n' "${SUMMARY[@]}" | grep -q '^FAIL' && finish 1
  finish 0
fi

section "gpu tests"
if ! want tests; then :
elif [ "$BUILD_OK" = 1 ]; then
  # -V: the passing tests' own lines (each setting's agreement figures) come
  # back too, not only "Passed"
  # the host-side CUDA checks (the .so naming the GPU, the plan, the graphs)
  # on their own: a GPU test that failed hid them (2026-12-04)
  if timeout -k 10 "$(slot 60)" ctest --test-dir "$BUILD" -R "cuda_(dlopen|math|plan|fuse_graphs)" --output-on-failure >"$LOG/cuda_host_tests.log" 2>&1; then
    status PASS "cuda host checks (dlopen, math, plan, fuse graphs)"
  else
    failed "$?" "cuda host checks: $(grep -A20 'The following tests FAILED' "$LOG/cuda_host_tests.log" | grep -o '[a-z_]*cuda[a-z_]*' | sort -u | tr '\n' ' ')" cuda_host_tests.log
  fi
  # at most 150 s: the fused parts run last in each test and print as they
  # go, so a cut costs only their verdicts, not the figures after
  if timeout -k 10 "$(slot 150 100)" ctest --test-dir "$BUILD" -L gpu --no-tests=error --timeout 120 -V >"$LOG/gpu_tests.log" 2>&1; then
    if grep -q "Skipped\|Not Run" "$LOG/gpu_tests.log"; then
      status FAIL "gpu tests skipped: no usable GPU (gpu_tests.log)"
    else
      # test_cuda_step skips the comparison (and passes) when the CPU
      # engine refuses this host: said, not claimed
      SKIPCPU=$(grep -o 'cuda-vs-cpu fp32: skipped.*' "$LOG/gpu_tests.log" | head -1 | cut -c1-160)
      if [ -n "$SKIPCPU" ]; then
        status PASS "gpu tests (ops and whole steps vs the double host twin; $SKIPCPU)"
      elif grep -q "cuda-vs-cpu fp32: [0-9]" "$LOG/gpu_tests.log"; then
        status PASS "gpu tests (ops and whole steps vs the double host twin, and vs the CPU engine)"
      elif grep -q "CPU engine on oneDNN" "$LOG/cmake.log"; then
        status PASS "gpu tests (ops and whole steps vs the double host twin; the CPU engine was built but no cuda-vs-cpu line was printed)"
      else
        status PASS "gpu tests (ops and whole steps vs the double host twin; no oneDNN here, so not vs the CPU engine: bench/gpu/carry_dnnl.sh)"
      fi
    fi
  else
    rc=$?
    grep -E "FAIL|CHECK failed|Error|error|Timeout" "$LOG/gpu_tests.log" | head -40
    failed "$rc" "gpu tests: $(sed -n '/The following tests FAILED/,$p' "$LOG/gpu_tests.log" | grep -o '[0-9]* - [a-z_0-9]*' | cut -d' ' -f3 | tr '\n' ' ')" gpu_tests.log
  fi
else
  status SKIPPED "gpu tests: not built"
fi


section "gpubench (ours): gb_cuda_bench"
if ! want ours; then :
elif [ "$BENCH_OK" = 1 ] && [ -x "$BUILD/gb_cuda_bench" ]; then
  for p in $PRECS; do
    if [ "$(left)" -lt 90 ]; then status SKIPPED "ours $p: out of time"; continue; fi
    if timeout -k 10 "$(slot 150 30)" "$BUILD/gb_cuda_bench" --precision "$p" --batch "$BATCH" --image-size 224 \
         --steps "$STEPS" --warmup "$WARMUP" >"$LOG/ours_$p.json" 2>"$LOG/ours_$p.err"; then
      RTE=$(json_field "$LOG/ours_$p.json" details.cudnn_runtime_error)
      OURS[$p]=$(json_field "$LOG/ours_$p.json" images_per_sec)
      if [ -z "${OURS[$p]}" ]; then status FAIL "ours $p: exit 0 but no images_per_sec (ours_$p.json)"; continue; fi
      # a cuDNN runtime error (a batch norm out of range; cuDNN has raised
      # one on input whose output was right): a failure, and the figure is
      # kept in the table, marked, since the steps' time was measured; a
      # device session is too scarce to lose it
      if [ -n "$RTE" ]; then
        RTE_OF[$p]=$RTE
        status FAIL "ours $p: ${OURS[$p]} img/s, marked in the table: cuDNN runtime error: $RTE (GB_CUDA_BN=own runs our batch norm instead)"
        continue
      fi
      status PASS "ours $p: ${OURS[$p]} img/s, median $(json_field "$LOG/ours_$p.json" step_ms.median) ms, graph $(json_field "$LOG/ours_$p.json" details.cuda_graph), BN cuDNN/own $(json_field "$LOG/ours_$p.json" details.batchnorm.cudnn)/$(json_field "$LOG/ours_$p.json" details.batchnorm.own), skipped $(json_field "$LOG/ours_$p.json" skipped_steps), setup $(json_field "$LOG/ours_$p.json" setup_s) s"
    else
      rc=$?
      tail -5 "$LOG/ours_$p.err"
      failed "$rc" "ours $p" "ours_$p.err"
    fi
  done
else
  status SKIPPED "ours: gb_cuda_bench not built"
fi

# torch_resnet50.py in mode $1 (eager, compile) at precision $2 for at most
# $3 s: its images/s in TORCH_IPS and a PASS, or a FAIL said (status 1)
torch_run() {
  local mode=$1 p=$2 what="torch $1" rc
  [ "$mode" = compile ] && what=torch.compile
  TORCH_IPS=
  if timeout -k 10 "$3" env LD_LIBRARY_PATH="$TORCH_LDP" "$PYTHON" bench/gpu/torch_resnet50.py --precision "$p" --mode "$mode" \
       --batch "$BATCH" --steps "$STEPS" --warmup "$WARMUP" >"$LOG/torch_${mode}_$p.json" 2>"$LOG/torch_${mode}_$p.err"; then
    TORCH_IPS=$(json_field "$LOG/torch_${mode}_$p.json" images_per_sec)
    if [ -z "$TORCH_IPS" ]; then status FAIL "$what $p: exit 0 but no images_per_sec"; return 1; fi
    status PASS "$what $p: $TORCH_IPS img/s"
  else
    rc=$?
    tail -3 "$LOG/torch_${mode}_$p.err"
    failed "$rc" "$what $p" "torch_${mode}_$p.err"
    return 1
  fi
}

# gb_cuda_bench once more at precision $2 under the setting $3 (VAR=value),
# into ours_$1.json, when $4 s are left, for at most $5 s: its images/s in
# VARIANT_IPS (status 0), or SKIPPED or FAIL said (status 1)
variant_run() {
  local name=$1 prec=$2 setting=$3 rc
  VARIANT_IPS=
  if [ "$BENCH_OK" != 1 ] || [ ! -x "$BUILD/gb_cuda_bench" ]; then
    status SKIPPED "ours $prec with $setting: gb_cuda_bench not built"
    return 1
  elif [ "$(left)" -lt "$4" ]; then
    status SKIPPED "ours $prec with $setting: out of time"
    return 1
  fi
  if env "$setting" timeout -k 10 "$(slot "$5" 30)" "$BUILD/gb_cuda_bench" --precision "$prec" --batch "$BATCH" \
       --image-size 224 --steps "$STEPS" --warmup "$WARMUP" >"$LOG/ours_$name.json" 2>"$LOG/ours_$name.err"; then
    VARIANT_IPS=$(json_field "$LOG/ours_$name.json" images_per_sec)
    [ -n "$VARIANT_IPS" ] && return 0
    status FAIL "ours $prec with $setting: exit 0 but no images_per_sec (ours_$name.json)"
  else
    rc=$?
    tail -5 "$LOG/ours_$name.err"
    failed "$rc" "ours $prec with $setting" "ours_$name.err"
  fi
  return 1
}

# the fused step (GB_CUDA_FUSE=1: fp16, then bf16, which cuDNN may or may
# not take; not yet the default) beside fp16's default; its set-up plans
# about 35 cuDNN graphs, which cuDNN may compile (not yet timed: setup_s
# says); its correctness: test_cuda_ops and test_cuda_step's fused lines in
# the gpu tests
fused_section() {
  section "the fused step (GB_CUDA_FUSE=1): $*"
  want fuse || return 0
  for p in "$@"; do
    if variant_run "${p}_fused" "$p" GB_CUDA_FUSE=1 150 240; then
      status PASS "ours $p with GB_CUDA_FUSE=1: $VARIANT_IPS img/s (default: ${OURS[$p]:-?}), fused step $(json_field "$LOG/ours_${p}_fused.json" details.fused_step): $(json_field "$LOG/ours_${p}_fused.json" details.fused_note), graph $(json_field "$LOG/ours_${p}_fused.json" details.cuda_graph), setup $(json_field "$LOG/ours_${p}_fused.json" setup_s) s"
    fi
  done
}
# data parallel through NCCL: right after ours (about 11 s on the H200 on
# 2026-12-04, and never yet run with several GPUs), before the fused step
# and PyTorch, whose long runs cut it on an H100 with no figures here yet
dp_section() {
  section "data parallel through NCCL"
  DP_NOTE=
  AR_NOTE=
  if ! want dp; then :
  elif [ "$BENCH_OK" = 1 ] && [ -x "$BUILD/gb_cuda_bench" ]; then
    # the fp16 job once more with a communicator: on one GPU a one-rank one
    # (what NCCL and the buckets cost), on several every GPU of the machine
    DPN=${NGPU:-1}; [ "$DPN" -ge 1 ] 2>/dev/null || DPN=1
    if [ "$(left)" -lt 90 ]; then
      status SKIPPED "data parallel fp16: out of time"
    elif timeout -k 10 "$(slot 150 30)" "$BUILD/gb_cuda_bench" --devices "$DPN" --precision fp16 --batch "$BATCH" \
           --image-size 224 --steps "$STEPS" --warmup "$WARMUP" >"$LOG/ours_dp_fp16.json" 2>"$LOG/ours_dp_fp16.err"; then
      DP_IPS=$(json_field "$LOG/ours_dp_fp16.json" images_per_sec)
      RTE=$(json_field "$LOG/ours_dp_fp16.json" details.cudnn_runtime_error)
      [ -n "$RTE" ] && status FAIL "data parallel fp16: cuDNN runtime error: $RTE"
      DP_NOTE="data parallel fp16 on $DPN GPU(s): $DP_IPS img/s (one GPU without NCCL: ${OURS[fp16]:-?}), interconnect $(json_field "$LOG/ours_dp_fp16.json" details.interconnect), NCCL transports $(json_field "$LOG/ours_dp_fp16.json" details.nccl_transports), $(json_field "$LOG/ours_dp_fp16.json" details.allreduce.buckets) buckets, graph $(json_field "$LOG/ours_dp_fp16.json" details.cuda_graph)"
      if [ -z "$RTE" ] && [ -z "$DP_IPS" ]; then status FAIL "data parallel fp16: exit 0 but no images_per_sec (ours_dp_fp16.json)"
      elif [ -z "$RTE" ]; then status PASS "$DP_NOTE"; fi
    else
      rc=$?
      tail -5 "$LOG/ours_dp_fp16.err"
      failed "$rc" "data parallel fp16 on $DPN GPU(s)" ours_dp_fp16.err
    fi
    if [ "$(left)" -lt 45 ]; then
      status SKIPPED "allreduce: out of time"
    elif timeout -k 10 "$(slot 120 30)" "$BUILD/gb_cuda_bench" --allreduce --devices "$DPN" --min-bytes 8 \
           --max-bytes "$AR_MAX_BYTES" --iters 20 --warmup 5 >"$LOG/allreduce.json" 2>"$LOG/allreduce.err"; then
      AR_NOTE="allreduce on $DPN GPU(s), 8 B .. $AR_MAX_BYTES B: every size checked, peak busbw $(json_field "$LOG/allreduce.json" peak_busbw_gbs) GB/s, transports $(json_field "$LOG/allreduce.json" details.nccl_transports)"
      status PASS "$AR_NOTE"
    else
      rc=$?
      tail -5 "$LOG/allreduce.err"
      failed "$rc" "allreduce on $DPN GPU(s)" allreduce.err
    fi
    # nccl-tests' all_reduce_perf on the same GPUs, sizes, iterations and
    # warm-up (carried in .gpu-deps/nccl-tests by bench/gpu/carry_nccltests.sh,
    # or NCCL_TESTS naming one): in-place busbw size by size against the
    # allreduce kind's (issue 5: within 5%; on one GPU busbw is 0 in both and
    # this checks only that both ran)
    NT=${NCCL_TESTS:-$ROOT/.gpu-deps/nccl-tests/all_reduce_perf}
    if [ ! -x "$NT" ]; then
      status SKIPPED "nccl-tests: no all_reduce_perf ($NT; bench/gpu/carry_nccltests.sh, or NCCL_TESTS=path)"
    elif [ -z "$AR_NOTE" ]; then
      status SKIPPED "nccl-tests: the allreduce kind did not run, nothing to compare with"
    elif [ "$(left)" -lt 45 ]; then
      status SKIPPED "nccl-tests: out of time"
    elif timeout -k 10 "$(slot 120 30)" "$NT" -b 8 -e "$AR_MAX_BYTES" -f 2 -g "$DPN" -n 20 -w 5 -c 1 \
           >"$LOG/nccl_tests.out" 2>&1; then
      "$JSON_PY" bench/gpu/nccl_tests_cmp.py --nccl-tests "$LOG/nccl_tests.out" --ours "$LOG/allreduce.json" \
        >"$LOG/nccl_tests_cmp.txt" 2>&1
      rc=$?
      NT_V=$(json_field "$LOG/nccl_tests_cmp.txt" verdict)
      NT_NOTE="nccl-tests all_reduce_perf on $DPN GPU(s): verdict ${NT_V:-?}; peak busbw ours/theirs $(json_field "$LOG/nccl_tests_cmp.txt" peak_busbw_gbs.gpubench)/$(json_field "$LOG/nccl_tests_cmp.txt" peak_busbw_gbs.nccl_tests) GB/s, ratio $(json_field "$LOG/nccl_tests_cmp.txt" peak_ratio), median ratio at 64 MiB and more $(json_field "$LOG/nccl_tests_cmp.txt" large_median_ratio) (nccl_tests_cmp.txt)"
      if [ "$rc" = 0 ] && [ "$NT_V" != below ]; then status PASS "$NT_NOTE"
      elif [ "$rc" = 0 ]; then status FAIL "$NT_NOTE: more than 5% below nccl-tests"
      elif [ "$rc" = 1 ]; then status FAIL "$NT_NOTE: nccl-tests found wrong values"
      else tail -3 "$LOG/nccl_tests_cmp.txt"; status FAIL "nccl-tests: its output or ours could not be read (nccl_tests_cmp.txt)"; fi
    else
      rc=$?
      tail -5 "$LOG/nccl_tests.out"
      failed "$rc" "nccl-tests all_reduce_perf on $DPN GPU(s)" nccl_tests.out
    fi
  else
    status SKIPPED "data parallel: gb_cuda_bench not built"
  fi
}
dp_section

# the product path right after the engine's own figures: it had never run on
# a GPU and, after the fused step and PyTorch, was always out of time
# The product as README's first command runs it, on the GPU: `gpubench run`
# (a coordinator and one local agent in one process, the sweep, every result
# in a SQLite file, the table) with the agent sampling the GPU through NVML
# into the store. A lent GPU machine lacks the whole tree's Debian packages
# (libzmq, protobuf-c, SQLite, cJSON, oneDNN), so the tree is built on a
# machine that has them and carried: bench/gpu/carry_full.sh puts gpubench,
# libgpubench_cuda.so and the libraries they need in .gpu-deps/full (oneDNN
# in .gpu-deps/dnnl). With FULL=1 and no carried copy the whole tree is built
# here instead, for a GPU machine that has the packages.
# product_run GPUBENCH BACKEND_SO [CARRIED_LIB_DIR]: the sweep, then what the
# store says; PASS/FAIL said (the run, then its telemetry)
product_run() {
  local exe=$1 so=$2 carried=${3:-} ldp=${LD_LIBRARY_PATH:-} plib="" ldc=ldconfig known f n missing rc s precs info
  local db=$LOG/product.db spec=$LOG/product_spec.json
  # the carried libraries this machine lacks, and only those: a link to each
  # in a folder of their own on LD_LIBRARY_PATH, so a newer copy the system
  # has is never shadowed by ours (ldconfig's cache: the loader's names)
  if [ -n "$carried" ]; then
    plib=$LOG/product_lib
    rm -rf "$plib" && mkdir -p "$plib"
    command -v ldconfig >/dev/null 2>&1 || ldc=/sbin/ldconfig
    known=$("$ldc" -p 2>/dev/null | awk 'NR > 1 {print $1}')
    [ -n "$known" ] || echo "product: ldconfig -p lists nothing: every carried library is used"
    for f in "$carried"/*.so*; do
      n=${f##*/}
      [ "$n" = libgpubench_cuda.so ] && continue
      grep -qxF "$n" <<<"$known" || ln -s "$f" "$plib/$n"
    done
    ldp=$plib${ldp:+:$ldp}
    # shellcheck disable=SC2012 # sonames: no odd characters
    f=$(cd "$plib" && ls | tr '\n' ' ')
    echo "product: carried libraries used (the machine lacks them): ${f:-none}"
  fi
  missing=$(LD_LIBRARY_PATH=$ldp ldd "$exe" "$so" 2>/dev/null | grep 'not found' | sort -u | tr -s ' \t\n' ' ')
  if [ -n "$missing" ]; then
    status FAIL "product: unresolved libraries (ldd): $missing(oneDNN travels in .gpu-deps/dnnl: bench/gpu/carry_dnnl.sh)"
    return
  fi
  # fp16 and bf16 always, tf32 (the default sweep's third, seconds) when the
  # time allows; one GPU, run.sh's batch, steps and warm-up
  precs='"fp16", "bf16"'
  [ "$(left)" -ge 180 ] && precs="$precs, \"tf32\""
  s=$(slot 200 30)
  rm -rf "$db" "$db-wal" "$db-shm" "$db.agent"
  printf '{"name": "bench/gpu/run.sh product", "kind": "resnet50", "backend": "cuda", "gpus": 1, "precision": [%s], "batch": %s, "steps": %s, "warmup": %s, "timeout_s": %s}\n' \
    "$precs" "$BATCH" "$STEPS" "$WARMUP" "$s" >"$spec"
  # gpubench's own --timeout first (the sweep cancelled, what finished
  # printed and kept), timeout's after it
  env LD_LIBRARY_PATH="$ldp" GB_CUDA_LIB="$so" timeout -k 10 "$s" "$exe" run --db "$db" --spec "$spec" \
    --timeout $(( s > 30 ? s - 15 : s )) --verbose >"$LOG/product.out" 2>"$LOG/product.err"
  rc=$?
  cat "$LOG/product.out"
  # what the store holds, whatever the exit status (sqlite3 may not be
  # installed: Python's module, with the carried libsqlite3 where the
  # machine has none); the last line is JSON for json_field
  LD_LIBRARY_PATH=$ldp "$JSON_PY" - "$db" >"$LOG/product_store.txt" 2>&1 <<'EOF'
import json, sqlite3, sys
out = {"ips": {}, "lines": [], "bad": [], "invalid": [], "notel": []}
try:
    db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
    db.row_factory = sqlite3.Row
    rows = db.execute("SELECT job_id, precision, backend, gpu_model, status, error, images_per_sec, step_ms_median,"
                      " valid, invalid_reason, telemetry_flag FROM v_results ORDER BY job_id").fetchall()
except sqlite3.Error as e:
    out["bad"].append("the store could not be read: %s" % e)
    rows = []
if not rows and not out["bad"]:
    out["bad"].append("no result in the store")
for r in rows:
    p = r["precision"] or "?"
    if r["status"] != "done" or not r["images_per_sec"] or r["backend"] != "cuda":
        out["bad"].append("%s: %s on %s (%s)" % (p, r["status"], r["backend"], r["error"] or "no error said"))
        continue
    out["ips"][p] = round(r["images_per_sec"], 1)
    if r["valid"] != 1:
        out["invalid"].append("%s: %s" % (p, r["invalid_reason"] or "no reason stored"))
    tel = db.execute("SELECT gpu, samples, sm_clock_median_mhz, mem_clock_median_mhz, power_median_w, power_max_w,"
                     " power_limit_w, temp_max_c, reasons, throttle_reasons, throttled FROM v_telemetry"
                     " WHERE job_id = ?", (r["job_id"],)).fetchall()
    n = db.execute("SELECT count(*) FROM telemetry WHERE job_id = ?", (r["job_id"],)).fetchone()[0]
    why = db.execute("SELECT json_extract(record, '$.telemetry.error') FROM results WHERE job_id = ?"
                     " ORDER BY attempt DESC LIMIT 1", (r["job_id"],)).fetchone()
    why = why[0] if why else None
    line = "%s on %s: %.1f img/s, median %.2f ms, valid %s%s" % (
        p, r["gpu_model"], r["images_per_sec"], r["step_ms_median"] or 0, r["valid"],
        " (%s)" % r["invalid_reason"] if r["valid"] != 1 else "")
    for t in tel:
        line += ("; GPU %s: %s samples (%d rows), SM %s MHz, mem %s MHz, power median %s W, max %s W (limit %s W),"
                 " %s C max, reasons %s, throttled %s") % (
            t["gpu"], t["samples"], n, t["sm_clock_median_mhz"], t["mem_clock_median_mhz"], t["power_median_w"],
            t["power_max_w"], t["power_limit_w"], t["temp_max_c"], t["reasons"] or "none", t["throttled"])
    if not tel or not n:
        out["notel"].append("%s: %s" % (p, why or r["telemetry_flag"] or "no telemetry in the record"))
        line += "; no telemetry (%s)" % (why or r["telemetry_flag"] or "none in the record")
    out["lines"].append(line)
for l in out["lines"] + out["bad"]:
    print(l)
out = {k: (v if k == "ips" else " | ".join(v)) for k, v in out.items()}
print(json.dumps(out))
EOF
  cat "$LOG/product_store.txt"
  info=$(sed -n 's/^commit \(.\{12\}\).*/carried build of \1/p' "${carried%/lib}/BUILD_INFO" 2>/dev/null)
  local ips bad inval notel why
  ips=$(json_field "$LOG/product_store.txt" ips | tr -d '{}"')
  bad=$(json_field "$LOG/product_store.txt" bad)
  grep -q '^{' "$LOG/product_store.txt" || bad="the store was not read (product_store.txt)"
  # gpubench run's own last word on stderr (a sweep refused, say)
  why=$(grep '^gpubench run: ' "$LOG/product.err" | grep -v '^gpubench run: sweep [0-9]*: ' | tail -1 | cut -c1-300)
  inval=$(json_field "$LOG/product_store.txt" invalid)
  notel=$(json_field "$LOG/product_store.txt" notel)
  if [ "$rc" != 0 ]; then
    failed "$rc" "product: ${why:-gpubench run}${bad:+; $bad}${ips:+; stored: $ips img/s}" "product.out, product.err, product_store.txt"
  elif [ -n "$bad" ] || [ -z "$ips" ]; then
    status FAIL "product: gpubench run exit 0, but ${bad:-no figure in the store}${ips:+; stored: $ips img/s} (product.out, product_store.txt)"
  else
    status PASS "product: gpubench run on the GPU, $ips img/s (gb_cuda_bench: fp16 ${OURS[fp16]:-?}, bf16 ${OURS[bf16]:-?}, tf32 ${OURS[tf32]:-?}), ${inval:+valid 0: $inval, }${info:-built here}"
  fi
  [ -z "$ips" ] && return
  if [ -n "$notel" ]; then
    status FAIL "product telemetry: results without NVML rows: $notel (product.err, product_store.txt)"
  else
    status PASS "product telemetry: NVML rows for every result ($(grep -o 'GPU 0: .*' "$LOG/product_store.txt" | head -1 | cut -c1-200))"
  fi
}

section "gpubench run (product path)"
FULL_DIR=$ROOT/.gpu-deps/full
if ! want product; then :
elif [ "$(left)" -lt 90 ]; then
  status SKIPPED "product: out of time"
elif [ -x "$FULL_DIR/bin/gpubench" ] && [ -f "$FULL_DIR/lib/libgpubench_cuda.so" ]; then
  echo "product: $(tr '\n' ' ' <"$FULL_DIR/BUILD_INFO" 2>/dev/null)"
  product_run "$FULL_DIR/bin/gpubench" "$FULL_DIR/lib/libgpubench_cuda.so" "$FULL_DIR/lib"
elif [ "$FULL" != 1 ]; then
  status SKIPPED "product: no .gpu-deps/full (bench/gpu/carry_full.sh on a machine with the whole tree's packages, carry [\".gpu-deps\"]; or FULL=1 to build it here)"
elif timeout -k 10 "$(slot 200 60)" cmake -S . -B "$BUILD-full" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$NVCC" \
       "-DGB_CUDA_ARCHS=$ARCHS" ${CUDNN_ROOT:+-DGB_CUDNN_ROOT=$CUDNN_ROOT} ${NCCL_ROOT:+-DGB_NCCL_ROOT=$NCCL_ROOT} \
       >"$LOG/full_cmake.log" 2>&1 && timeout -k 10 "$(slot 200 60)" cmake --build "$BUILD-full" -j"$JOBS" \
       --target gpubench gpubench_cuda >"$LOG/full_build.log" 2>&1; then
  product_run "$BUILD-full/bin/gpubench" "$BUILD-full/lib/libgpubench_cuda.so"
else
  status FAIL "product: FULL=1, and the whole tree did not build here (full_cmake.log, full_build.log: its Debian packages?)"
fi


# fp16's fused step before PyTorch everywhere (its correctness and speed are
# the run's first unknowns); bf16's too on a GPU model whose PyTorch figures
# RESULTS.md holds already (an H200's, 2026-12-04), elsewhere after PyTorch
# eager's 16-bit and tf32 figures (the side-by-side ratios), and PyTorch's
# fp32 (73 s on the H200) after both
FUSED_FIRST=0
if [ -n "$GPU" ] && grep -qF -- " - $GPU x" "$ROOT/bench/gpu/RESULTS.md" 2>/dev/null; then FUSED_FIRST=1; fi
if [ "$FUSED_FIRST" = 1 ]; then fused_section fp16 bf16; else fused_section fp16; fi

# PyTorch eager in the precisions given, each if time is left
torch_eager() {
  local p
  for p in "$@"; do
    if [ "$(left)" -lt 90 ]; then status SKIPPED "torch eager $p: out of time"; continue; fi
    torch_run eager "$p" "$(slot 150 30)" && TORCH_E[$p]=$TORCH_IPS
  done
}

section "PyTorch eager"
TORCH_OK=0
# one cold import (it was two, a minute's slot each): the version, or exit 1
if ! TORCH_V=$(LD_LIBRARY_PATH=$TORCH_LDP timeout -k 10 "$(slot 60)" "$PYTHON" -c 'import torch, torchvision, sys; print(torch.__version__, "torchvision", torchvision.__version__); sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null); then
  status SKIPPED "PyTorch with CUDA and torchvision not installed for $PYTHON: no side-by-side figures"
else
  TORCH_OK=1
  want torch && torch_eager $(printf '%s\n' $PRECS | grep -vx fp32)
fi

[ "$FUSED_FIRST" = 1 ] || fused_section bf16
if [ "$TORCH_OK" = 1 ] && want torch && printf '%s\n' $PRECS | grep -qx fp32; then
  section "PyTorch eager fp32"
  torch_eager fp32
fi

section "gemm: matrix rate (cuBLAS) per precision"
# the gemm kind's figure (GFLOP/s beside each node's ResNet-50 number) in
# fp32 (TF32 off), tf32, fp16 and bf16 (16-bit inputs, fp32 accumulation):
# ours (the backend's gemm op, as the worker runs it) against torch.matmul
# set the same way, same size and repetitions, each checked after timing
if ! want gemm; then :
elif [ "$BENCH_OK" != 1 ] || [ ! -x "$BUILD/gb_cuda_bench" ]; then
  status SKIPPED "gemm: gb_cuda_bench not built"
else
  GEMM_ROWS=
  for p in fp32 tf32 fp16 bf16; do
    if [ "$(left)" -lt 45 ]; then status SKIPPED "gemm $p: out of time"; continue; fi
    GO=; GT=
    if timeout -k 10 "$(slot 60 30)" "$BUILD/gb_cuda_bench" --gemm "$GEMM_N" --precision "$p" --steps "$STEPS" \
         >"$LOG/gemm_ours_$p.json" 2>"$LOG/gemm_ours_$p.err"; then
      GO=$(json_field "$LOG/gemm_ours_$p.json" gflops)
    else
      failed $? "gemm ours $p" "gemm_ours_$p.err"
    fi
    if [ "${TORCH_OK:-0}" = 1 ] && [ "$(left)" -ge 45 ]; then
      if timeout -k 10 "$(slot 90 30)" env LD_LIBRARY_PATH="$TORCH_LDP" "$PYTHON" bench/gpu/torch_gemm.py --size "$GEMM_N" \
           --reps "$STEPS" --precision "$p" >"$LOG/gemm_torch_$p.json" 2>"$LOG/gemm_torch_$p.err"; then
        GT=$(json_field "$LOG/gemm_torch_$p.json" gflops)
      else
        failed $? "gemm torch.matmul $p" "gemm_torch_$p.err"
      fi
    fi
    [ -n "$GO$GT" ] && status PASS "gemm $p ${GEMM_N}^3: ours $(num "$GO") GFLOP/s, torch.matmul $(num "$GT") GFLOP/s, ratio $(ratio "$GO" "$GT") (each checked)"
    GEMM_ROWS="$GEMM_ROWS $p $(num "$GO")/$(num "$GT")"
  done
  GEMM_NOTE="gemm ${GEMM_N}x${GEMM_N}x${GEMM_N}, median of $STEPS, GFLOP/s ours/torch.matmul:$GEMM_ROWS"
fi

section "gpubench bf16 with our batch norm"
# cuDNN's batch norm is the default; this says what our kernels cost beside it
if want ownbn && variant_run bf16_ownbn bf16 GB_CUDA_BN=own 150 120; then
  status PASS "ours bf16 with GB_CUDA_BN=own: $VARIANT_IPS img/s (cuDNN's batch norm: ${OURS[bf16]:-?}), BN cuDNN/own $(json_field "$LOG/ours_bf16_ownbn.json" details.batchnorm.cudnn)/$(json_field "$LOG/ours_bf16_ownbn.json" details.batchnorm.own)"
fi

section "gpubench with the image in the other channel count"
# bf16 stores the image in 8 channels by default (GB_CUDA_STEM_C; 3 and
# zeros), the others in 4: with 4, conv1 in bf16 took 2.0 ms forward and
# 1.2 ms backward (filter) against fp16's 0.5 and 0.5 on the H200,
# 2026-12-04. This times bf16 with 4 and fp16 with 8 beside their defaults,
# with conv1's cudnnFind times in each, to tell which count each should use
conv1_times() { "$JSON_PY" -c 'import json,sys
out=[]
for f in sys.argv[1:]:
    try:
        ls=[l for l in open(f) if l.startswith("{")]
    except OSError:
        ls=[]
    d=json.loads(ls[-1]).get("details",{}) if ls else {}
    c=[x for x in d.get("convs",[]) if x["name"]=="conv1"]
    out.append("%s channels: conv1 fwd %s ms, bwd_filter %s ms"%(d.get("stem_channels","?"),
               c[0]["fwd"]["ms"] if c else "?", c[0]["bwd_filter"]["ms"] if c else "?"))
print("; ".join(out))' "$@" 2>/dev/null; }
if want stem; then
  if variant_run bf16_stem4 bf16 GB_CUDA_STEM_C=4 150 120; then
    status PASS "ours bf16 with GB_CUDA_STEM_C=4: $VARIANT_IPS img/s (default, 8: ${OURS[bf16]:-?}); $(conv1_times "$LOG/ours_bf16.json" "$LOG/ours_bf16_stem4.json")"
  fi
  if variant_run fp16_stem8 fp16 GB_CUDA_STEM_C=8 150 120; then
    status PASS "ours fp16 with GB_CUDA_STEM_C=8: $VARIANT_IPS img/s (default, 4: ${OURS[fp16]:-?}); $(conv1_times "$LOG/ours_fp16.json" "$LOG/ours_fp16_stem8.json")"
  fi
fi

section "cuDNN's graph-API fusions one by one"
# the fused step's graphs one by one (fuse.h), per conv at this batch
# against the unfused calls: where the fused step's time goes
if ! want fuse; then :
elif [ "$BUILD_OK" != 1 ] || [ ! -x "$BUILD/tests/cuda/test_cuda_fuse" ]; then
  status SKIPPED "fusions: test_cuda_fuse not built"
elif [ "$(left)" -lt 100 ]; then
  status SKIPPED "fusions: out of time"
elif timeout -k 10 "$(slot 150 30)" "$BUILD/tests/cuda/test_cuda_fuse" bench "$BATCH" >"$LOG/fuse_bench.log" 2>&1; then
  status PASS "$(grep '^fuse:' "$LOG/fuse_bench.log" | tail -1) (fuse_bench.log; correctness: test_cuda_fuse in the gpu tests)"
else
  rc=$?
  tail -5 "$LOG/fuse_bench.log"
  failed "$rc" "fusions bench" "fuse_bench.log"
fi

section "gpubench fp32 with FFT and Winograd allowed"
# ours takes only FMA implicit-GEMM algorithms in fp32 (0.78x PyTorch's fp32
# on the H200, 2026-12-04); GB_CUDA_FP32_ALGOS=any lets cudnnFind's FFT and
# Winograd in (still FMA math, as PyTorch's fp32 with TF32 off): its speed,
# and the op and whole-step tests' fp32 lines under it (their bounds: fp32
# ops 1e-5, steps 2e-4), to tell whether it can be the default
if want fp32any && variant_run fp32_any fp32 GB_CUDA_FP32_ALGOS=any 120 100; then
  ANY_ALGOS=$("$JSON_PY" -c 'import json,sys
ls=[l for l in open(sys.argv[1]) if l.startswith("{")]
c=json.loads(ls[-1])["details"]["convs"] if ls else []
n={}
for x in c:
    for d in ("fwd","bwd_data","bwd_filter"):
        if d in x: k=d+":"+x[d]["algo"]; n[k]=n.get(k,0)+1
print(" ".join("%s x%d"%kv for kv in sorted(n.items())))' "$LOG/ours_fp32_any.json" 2>/dev/null)
  ACC=
  if [ "$BUILD_OK" = 1 ] && [ -x "$BUILD/tests/cuda/test_cuda_step" ]; then
    # their fp32 runs alone (GB_TEST_PRECS): the whole tests took up to 200 s
    for t in test_cuda_ops test_cuda_step; do
      GB_TEST_PRECS=fp32 GB_CUDA_FP32_ALGOS=any timeout -k 10 "$(slot 90 20)" "$BUILD/tests/cuda/$t" >"$LOG/${t}_fp32any.log" 2>&1
      ACC="$ACC $t exit $?;"
    done
    ACC="$ACC $(grep -ho '^[a-z]*/fp32: [0-9]* losses median [^;]*; [0-9]* gradients median [0-9.e+-]* worst [0-9.e+-]*' "$LOG/test_cuda_step_fp32any.log" | tr '\n' ';')"
  fi
  status PASS "ours fp32 with GB_CUDA_FP32_ALGOS=any: $VARIANT_IPS img/s (FMA implicit GEMM only: ${OURS[fp32]:-?}, torch eager fp32: ${TORCH_E[fp32]:-?}); algorithms: $ANY_ALGOS; accuracy under it:$ACC (logs test_cuda_*_fp32any.log)"
fi

section "compute-sanitizer"
# shellcheck disable=SC2012 # two fixed paths: the first that exists
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)
if ! want sanitizer; then :
elif [ -z "$CS" ]; then
  status SKIPPED "compute-sanitizer not installed"
elif [ "$BUILD_OK" != 1 ] || [ ! -x "$BUILD/tests/cuda/test_cuda_step" ]; then
  status SKIPPED "compute-sanitizer: test_cuda_step not built (by this run)"
elif [ "$(left)" -lt 90 ]; then
  status SKIPPED "compute-sanitizer: out of time"
else
  GB_TEST_QUICK=1 timeout -k 10 "$(slot 200 30)" "$CS" --tool memcheck --error-exitcode 3 \
    "$BUILD/tests/cuda/test_cuda_step" >"$LOG/memcheck.log" 2>&1
  rc=$?
  if [ "$rc" = 0 ]; then
    status PASS "compute-sanitizer memcheck: $(grep -o 'ERROR SUMMARY: [0-9]* errors' "$LOG/memcheck.log" | tail -1)"
  else
    grep -E "ERROR SUMMARY|Invalid|CHECK failed" "$LOG/memcheck.log" | head -20
    status FAIL "compute-sanitizer memcheck, exit $rc (3: errors found, 124: out of time; memcheck.log)"
  fi
fi

section "torch.compile"
if ! want compile; then :
elif [ "$TORCH_OK" = 1 ]; then
  # a minute or two per precision: the AMP ones first
  for p in fp16 bf16 tf32; do
    if [ "$(left)" -lt 110 ]; then status SKIPPED "torch.compile $p: out of time budget"; continue; fi
    torch_run compile "$p" "$(slot 300 20)" && TORCH_C[$p]=$TORCH_IPS
  done
else
  status SKIPPED "torch.compile: no PyTorch with CUDA"
fi

section "table"
gpu_state "$LOG/gpu_state_after.csv"
write_results
# only figures from a GPU go into the record
[ -n "$GPU" ] && cat "$LOG/results.md" >>"$ROOT/bench/gpu/RESULTS.md"
pack

section "summary"
echo "$TABLE"
for s in "${SUMMARY[@]}"; do echo "$s"; done
echo "details: $LOG${RESULT_DIR:+ (and results.md, summary.txt, logs.tgz in $RESULT_DIR)}; $(( $(date +%s) - START )) s"
# exit non-zero when a section failed, after everything ran
printf '%s\n' "${SUMMARY[@]}" | grep -q '^FAIL' && exit 1
exit 0
