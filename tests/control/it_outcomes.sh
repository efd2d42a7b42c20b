#!/usr/bin/env bash
# How a job can end on a healthy agent (CASE), each kept with its reason:
# the worker reports an error, crashes on a signal, outlives its time limit,
# or runs a kind this build cannot; and gemm's real record. (The crash is
# SIGKILL: under ASan a SIGSEGV becomes an exit, not a death by signal.)
source "$(dirname "$0")/lib.sh" "$1" "$2"
case=${3:?case}

start_coord
start_agent a1
wait_nodes 1
case "$case" in
fail)     args=(--kind sleep --param duration_ms=10 --param fail=disk-on-fire); status=failed; rstatus=failed; want="disk-on-fire" ;;
# a --param fail message that looks like a number, with a comma: one
# string as given (it became a number, refused, or a list)
fail_text) args=(--kind sleep --param duration_ms=10 --param "fail=404,not found"); status=failed; rstatus=failed; want="404,not found" ;;
crash)    args=(--kind sleep --param duration_ms=10 --param signal=9); status=failed; rstatus=crashed; want="worker killed by signal 9" ;;
timeout)  args=(--kind sleep --param duration_ms=60000 --timeout 1); status=failed; rstatus=timeout; want="timed out after 1 s" ;;
resnet50)
    if "$GB" version | grep -q "resnet50 engine built in"; then
        args=(--kind resnet50 --backend cpu --batch 2 --steps 2 --warmup 1 --image-size 64); status=done; rstatus=ok; want=""
    else
        args=(--kind resnet50 --backend cpu --batch 2 --steps 2 --warmup 1 --image-size 64); status=failed; rstatus=failed; want="resnet50 engine not built"
    fi ;;
gemm)     args=(--kind gemm --param m=96 --param n=80 --param k=72 --param reps=5); status=done; rstatus=ok; want="" ;;
gemm_half_cpu)
    # a gemm in fp16 or tf32 on a CPU node: refused at submit with the
    # reason (placement), and a worker given one anyway (a job from
    # elsewhere) fails saying so, before any work
    "$GB" submit --kind gemm --backend cpu --precision fp16 >/dev/null 2>"$T/sub.err" && fail "gemm fp16 on the CPU accepted"
    contains "submit says why" "$T/sub.err" "gemm in fp16 needs a GPU (the CPU's gemm runs in fp32 and bf16) and node a1 would run it on the CPU"
    printf '{"job_id": 7, "attempt": 1, "params": {"kind": "gemm", "backend": "cpu", "precision": "tf32", "m": 8, "n": 8, "k": 8, "reps": 1}}' >"$T/job.json"
    "$GB" worker --job "$T/job.json" --out "$T/rec.json" >"$T/worker.log" 2>&1
    contains "the worker's record says why" "$T/rec.json" "gemm in tf32: the CPU's gemm runs in fp32 (oneDNN's sgemm) and bf16 (its matmul) only (run it with backend cuda)"
    echo ok
    exit 0 ;;
gemm_bf16_cpu)
    # bf16 on a CPU with avx512_bf16: oneDNN's matmul, checked exactly as
    # fp32 is; where the CPU lacks it, placement says so
    precs=$(q "SELECT group_concat(value) FROM nodes, json_each(json_extract(inventory, '$.cpu_precisions'))")
    if [ "$precs" = fp32 ]; then
        "$GB" submit --kind gemm --backend cpu --precision bf16 >/dev/null 2>"$T/sub.err" && fail "gemm bf16 accepted without avx512_bf16"
        contains "submit says why" "$T/sub.err" "node a1's CPU multiplies in fp32 only (bf16 needs avx512_bf16)"
        echo "no avx512_bf16 here: refused"
        exit 0
    fi
    args=(--kind gemm --backend cpu --precision bf16 --param m=96 --param n=80 --param k=72 --param reps=5); status=done; rstatus=ok; want="" ;;
*) fail "unknown case $case" ;;
esac
sweep=$(submit "${args[@]}")
"$GB" wait "$sweep" --quiet --timeout 60 2>"$T/wait.err"
rc=$?
eq "job status" "$(q "SELECT status FROM v_results")" "$status"
eq "result status" "$(q "SELECT status FROM results")" "$rstatus"
if [ "$status" = done ]; then
    eq "wait exits 0" "$rc" 0
else
    eq "wait exits 1" "$rc" 1
    # and says where each job's error is (it gave the counts alone)
    contains "wait says where the reason is" "$T/wait.err" "gpubench wait: sweep $sweep failed: 0 done, 1 failed, 0 cancelled; each job's error: gpubench results --sweep $sweep on the coordinator's store"
    q "SELECT error FROM v_results" >"$T/error.txt"
    contains "reason kept" "$T/error.txt" "$want"
    q "SELECT output_tail FROM results" >"$T/tail.txt"
    contains "worker output tail kept" "$T/tail.txt" "worker: job 1 attempt 1"
fi
case "$case" in
timeout) eq "killed within the limit plus grace" "$(q "SELECT (julianday(finished_at) - julianday(started_at)) * 86400 < 4 FROM results")" 1 ;;
crash)   eq "exit code is -signal" "$(q "SELECT exit_code FROM results")" -9 ;;
gemm)
    eq "record columns" "$(q "SELECT kind || ',' || backend || ',' || n_gpus || ',' || precision || ',' || (gflops > 0) FROM v_results")" "gemm,cpu,1,fp32,1"
    # the job's own precision, not the record's alone: a gemm that fails
    # before its record says it keeps it (fp32, the default, not given here)
    eq "the job's precision" "$(q "SELECT precision FROM jobs")" fp32
    eq "record shape" "$(q "SELECT json_extract(record, '$.m') || 'x' || json_extract(record, '$.n') || 'x' || json_extract(record, '$.k') || ',' || json_extract(record, '$.details.verified_entries') || ',' || json_array_length(json_extract(record, '$.details.ms_samples'))  FROM results")" "96x80x72,68,5"
    eq "versions recorded" "$(q "SELECT json_extract(record, '$.versions.onednn') IS NOT NULL AND json_extract(record, '$.versions.isa') IS NOT NULL FROM results")" 1
    eq "not synthetic" "$(q "SELECT synthetic FROM v_results")" 0
    # the shape the GFLOP/s was measured on, and the measured median and
    # p90 time of one product, in v_results (they were not) and the table
    eq "v_results shape" "$(q "SELECT m || 'x' || n || 'x' || k FROM v_results")" "96x80x72"
    eq "median and p90 per product" "$(q "SELECT v.step_ms_median = json_extract(r.record, '$.ms_median') AND v.step_ms_p90 = json_extract(r.record, '$.details.ms_p90') AND v.step_ms_median > 0 FROM v_results v JOIN results r USING (job_id)")" 1
    # one product is a gemm's step: steps is the reps given (it was NULL),
    # in the view and in results' json (every column)
    eq "steps are the timed products" "$(q "SELECT steps || ',' || json_extract(r.record, '$.reps') FROM v_results v JOIN results r USING (job_id)")" "5,5"
    "$GB" results --db "$T/gb.db" --format json >"$T/results.json" || fail "gpubench results --format json"
    eq "json steps" "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[0]["steps"])' "$T/results.json")" 5
    eq "GFLOP/s is 2mnk over that median" "$(q "SELECT abs(gflops - 2.0 * m * n * k / (step_ms_median * 1e6)) < 1e-6 * gflops FROM v_results")" 1
    "$GB" results --db "$T/gb.db" >"$T/table.txt" || fail "gpubench results"
    # (counted from the end: the CPU model has spaces)
    eq "the table's columns" "$(awk 'NR == 1 {print $(NF-9), $(NF-8), $(NF-7), $(NF-4)}' "$T/table.txt")" "m n k step_ms_median"
    eq "the table's row" "$(awk 'NR == 2 {print $(NF-9), $(NF-8), $(NF-7), ($(NF-4) > 0)}' "$T/table.txt")" "96 80 72 1"
    # compare --kind gemm on this real record: the CPU model's row at this
    # shape, its median the result's GFLOP/s (one run); a result judged
    # invalid (a noisy machine) is left out, and that is said
    "$GB" compare --db "$T/gb.db" --kind gemm --format csv >"$T/cmp.csv" 2>"$T/cmp.err" || fail "compare --kind gemm: $(cat "$T/cmp.err")"
    python3 - "$T/cmp.csv" "$(q "SELECT valid || '|' || gflops || '|' || gpu_model FROM v_results")" <<'EOF' || fail "compare --kind gemm: $(cat "$T/cmp.csv" "$T/cmp.err")"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
valid, gflops, model = sys.argv[2].split("|", 2)
if valid != "1":
    assert rows == [], rows
    sys.exit(0)
assert len(rows) == 1, rows
r = rows[0]
assert (r["gpu_model"], r["backend"], r["m"], r["n"], r["k"]) == (model, "cpu", "96", "80", "72"), r
assert abs(float(r["fp32_gflops"]) - float(gflops)) <= 1e-9 * float(gflops), (r, gflops)
assert r["fp32_runs"] == "1" and r["fp32_rel"] == "1" and r["baseline"] == model, r
EOF
    ;;
gemm_bf16_cpu)
    eq "record columns" "$(q "SELECT kind || ',' || backend || ',' || precision || ',' || (gflops > 0) FROM v_results")" "gemm,cpu,bf16,1"
    eq "the job's precision" "$(q "SELECT precision FROM jobs")" bf16
    eq "every checked entry exact" "$(q "SELECT json_extract(record, '$.details.verified_entries') FROM results")" 68
    impl=$(q "SELECT json_extract(record, '$.details.impl') FROM results")
    case "$impl" in "dnnl matmul bf16 (ref"*) fail "a reference loop measured: $impl" ;; "dnnl matmul bf16 ("*) ;; *) fail "impl: $impl" ;; esac ;;
esac
echo ok
