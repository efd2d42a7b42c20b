#!/usr/bin/env bash
# bench/gpu/run.sh - the one command to run on a machine with an NVIDIA GPU:
#   1. build (Release, CUDA architectures named in CMake)
#   2. the `gpu` tests (CUDA ops and whole steps against the host twin)
#   3. compute-sanitizer memcheck on a short run
#   4. gpubench's CUDA engine, ResNet-50 batch 256, synthetic data, per precision
#   5. PyTorch (torchvision resnet50, channels_last) eager and torch.compile,
#      same batch, warm-up and steps, if PyTorch with CUDA is installed
#   6. a table with the ratios, appended to bench/gpu/RESULTS.md with the
#      date, GPU, driver and versions
# Every section prints PASS, FAIL or SKIPPED and the script goes on past any
# failure; it keeps to a time budget (BUDGET_S, default 480 s) by skipping
# the later, optional parts (torch.compile first) when time runs short.
# Knobs: BATCH (256) STEPS (30) WARMUP (10) BUDGET_S (480) PYTHON (python3)
#        BUILD_DIR (build-gpu) JOBS (nproc).
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BATCH=${BATCH:-256}
STEPS=${STEPS:-30}
WARMUP=${WARMUP:-10}
BUDGET_S=${BUDGET_S:-480}
PYTHON=${PYTHON:-python3}
BUILD=${BUILD_DIR:-$ROOT/build-gpu}
JOBS=${JOBS:-$(nproc)}
OUT=$BUILD/bench
START=$(date +%s)
declare -a SUMMARY=()

left() { echo $((BUDGET_S - ($(date +%s) - START))); }
section() { printf '\n=== %s (%ss left) ===\n' "$1" "$(left)"; }
status() { SUMMARY+=("$(printf '%-8s %s' "$1" "$2")"); printf '[%s] %s\n' "$1" "$2"; }

mkdir -p "$OUT" 2>/dev/null || { OUT=$(mktemp -d); }

section "machine"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
NVCC=$( (command -v nvcc || echo /usr/local/cuda/bin/nvcc) | head -1)
CUDA_V=$("$NVCC" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')
echo "GPU: ${GPU:-none} x${NGPU}, driver ${DRIVER:-none}, nvcc ${CUDA_V:-none}, host $(hostname)"
if [ -z "$GPU" ]; then
  status FAIL "no NVIDIA GPU visible (nvidia-smi): this script needs one"
fi

section "build"
if cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$NVCC" \
     >"$OUT/cmake.log" 2>&1 && cmake --build "$BUILD" -j"$JOBS" >"$OUT/build.log" 2>&1; then
  if [ -f "$BUILD/kernels/cuda/libgpubench_cuda.so" ]; then
    status PASS "build (libgpubench_cuda.so, $(grep -o "archs [^,]*" "$OUT/cmake.log" | head -1))"
  else
    status FAIL "build: libgpubench_cuda.so missing (CUDA not found? see $OUT/cmake.log)"
  fi
else
  tail -30 "$OUT/build.log" "$OUT/cmake.log" 2>/dev/null
  status FAIL "build (logs in $OUT)"
fi
GPUBENCH=$(find "$BUILD" -name gpubench -type f -perm -u+x 2>/dev/null | head -1)
export GB_CUDA_LIB="$BUILD/kernels/cuda/libgpubench_cuda.so"

section "gpu tests"
if [ -d "$BUILD/tests/cuda" ]; then
  if timeout 240 ctest --test-dir "$BUILD" -L gpu -R cuda --output-on-failure >"$OUT/gpu_tests.log" 2>&1 \
     && timeout 60 ctest --test-dir "$BUILD" -R "cuda_(dlopen|math|plan)" --output-on-failure >>"$OUT/gpu_tests.log" 2>&1; then
    if grep -q "Skipped\|Not Run" "$OUT/gpu_tests.log"; then
      status FAIL "gpu tests skipped: no usable GPU ($OUT/gpu_tests.log)"
    else
      status PASS "gpu tests (ops and whole steps vs the double host twin)"
    fi
  else
    grep -E "FAIL|CHECK failed|Error|error" "$OUT/gpu_tests.log" | head -40
    status FAIL "gpu tests ($OUT/gpu_tests.log)"
  fi
else
  status SKIPPED "gpu tests: not built"
fi

section "compute-sanitizer"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)
if [ -z "$CS" ]; then
  status SKIPPED "compute-sanitizer not installed"
elif [ ! -x "$BUILD/tests/cuda/test_cuda_step" ]; then
  status SKIPPED "compute-sanitizer: test_cuda_step not built"
else
  if GB_TEST_QUICK=1 timeout 200 "$CS" --tool memcheck --error-exitcode 3 \
       "$BUILD/tests/cuda/test_cuda_step" >"$OUT/memcheck.log" 2>&1; then
    status PASS "compute-sanitizer memcheck: $(grep -o 'ERROR SUMMARY: [0-9]* errors' "$OUT/memcheck.log" | tail -1)"
  else
    grep -E "ERROR SUMMARY|Invalid|CHECK failed" "$OUT/memcheck.log" | head -20
    status FAIL "compute-sanitizer memcheck ($OUT/memcheck.log)"
  fi
fi

PRECS="fp16 bf16 tf32 fp32"
declare -A OURS TORCH_E TORCH_C
json_field() { "$PYTHON" -c 'import json,sys
t=open(sys.argv[1]).read(); i=t.find("{")
d=json.loads(t[i:]) if i>=0 else {}
v=d
for k in sys.argv[2].split("."): v=v.get(k) if isinstance(v,dict) else None
print("" if v is None else v)' "$1" "$2" 2>/dev/null; }

section "gpubench (ours)"
if [ -z "$GPUBENCH" ]; then
  status SKIPPED "gpubench binary not built"
elif ! "$GPUBENCH" help 2>/dev/null | grep -qw train; then
  status SKIPPED "gpubench has no 'train' command in this tree (the engine driver is not merged)"
else
  for p in $PRECS; do
    if [ "$(left)" -lt 40 ]; then status SKIPPED "ours $p: out of time"; continue; fi
    if timeout 180 "$GPUBENCH" train --backend cuda --precision "$p" --batch "$BATCH" --image-size 224 \
         --steps "$STEPS" --warmup "$WARMUP" --format json >"$OUT/ours_$p.json" 2>"$OUT/ours_$p.err"; then
      OURS[$p]=$(json_field "$OUT/ours_$p.json" images_per_sec)
      status PASS "ours $p: ${OURS[$p]} img/s (graph: $(grep -o '"cuda_graph":[a-z]*' "$OUT/ours_$p.json" | head -1))"
    else
      tail -5 "$OUT/ours_$p.err"
      status FAIL "ours $p ($OUT/ours_$p.err)"
    fi
  done
fi

section "PyTorch"
if ! "$PYTHON" -c 'import torch, torchvision, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  status SKIPPED "PyTorch with CUDA and torchvision not installed for $PYTHON: no side-by-side figures"
  TORCH_OK=0
else
  TORCH_OK=1
  TORCH_V=$("$PYTHON" -c 'import torch; print(torch.__version__)')
  for p in $PRECS; do
    if [ "$(left)" -lt 40 ]; then status SKIPPED "torch eager $p: out of time"; continue; fi
    if timeout 150 "$PYTHON" bench/gpu/torch_resnet50.py --precision "$p" --mode eager --batch "$BATCH" \
         --steps "$STEPS" --warmup "$WARMUP" >"$OUT/torch_eager_$p.json" 2>"$OUT/torch_eager_$p.err"; then
      TORCH_E[$p]=$(json_field "$OUT/torch_eager_$p.json" images_per_sec)
      status PASS "torch eager $p: ${TORCH_E[$p]} img/s"
    else
      tail -3 "$OUT/torch_eager_$p.err"
      status FAIL "torch eager $p"
    fi
  done
  # torch.compile takes a minute or two per precision: the AMP ones first
  for p in fp16 bf16 tf32; do
    if [ "$(left)" -lt 150 ]; then status SKIPPED "torch.compile $p: out of time budget"; continue; fi
    if timeout $(( $(left) - 20 )) "$PYTHON" bench/gpu/torch_resnet50.py --precision "$p" --mode compile \
         --batch "$BATCH" --steps "$STEPS" --warmup "$WARMUP" >"$OUT/torch_compile_$p.json" 2>"$OUT/torch_compile_$p.err"; then
      TORCH_C[$p]=$(json_field "$OUT/torch_compile_$p.json" images_per_sec)
      status PASS "torch.compile $p: ${TORCH_C[$p]} img/s"
    else
      tail -3 "$OUT/torch_compile_$p.err"
      status FAIL "torch.compile $p"
    fi
  done
fi

section "table"
ratio() { [ -n "$1" ] && [ -n "$2" ] && "$PYTHON" -c "print('%.2f' % ($1/$2))" 2>/dev/null || echo "-"; }
num() { [ -n "$1" ] && "$PYTHON" -c "print('%.0f' % $1)" 2>/dev/null || echo "-"; }
TABLE=$(
  printf '| precision | gpubench img/s | torch eager img/s | ratio | torch.compile img/s | ratio |\n'
  printf '|---|---:|---:|---:|---:|---:|\n'
  for p in $PRECS; do
    printf '| %s | %s | %s | %s | %s | %s |\n' "$p" "$(num "${OURS[$p]:-}")" "$(num "${TORCH_E[$p]:-}")" \
      "$(ratio "${OURS[$p]:-}" "${TORCH_E[$p]:-}")" "$(num "${TORCH_C[$p]:-}")" "$(ratio "${OURS[$p]:-}" "${TORCH_C[$p]:-}")"
  done)
echo "$TABLE"

CUDNN_V=$(json_field "$OUT/ours_fp16.json" versions.cudnn)
{
  echo
  echo "## $(date -u '+%Y-%m-%d %H:%M UTC') - ${GPU:-no GPU} x${NGPU}"
  echo
  echo "Driver ${DRIVER:-?}, CUDA toolkit ${CUDA_V:-?}, cuDNN ${CUDNN_V:-?}, PyTorch ${TORCH_V:-not installed};"
  echo "ResNet-50 v1.5, batch $BATCH per GPU, 224x224 synthetic data, $WARMUP warm-up + $STEPS timed steps,"
  echo "images/s = batch / median step time (CUDA events). Ratios: gpubench / PyTorch."
  echo
  echo "$TABLE"
  echo
  echo "Sections:"
  echo
  for s in "${SUMMARY[@]}"; do echo "- $s"; done
} >>"$ROOT/bench/gpu/RESULTS.md"

section "summary"
for s in "${SUMMARY[@]}"; do echo "$s"; done
echo "details: $OUT; appended to bench/gpu/RESULTS.md; $(( $(date +%s) - START )) s"
# exit non-zero when a section failed, after everything ran
printf '%s\n' "${SUMMARY[@]}" | grep -q '^FAIL' && exit 1
exit 0
