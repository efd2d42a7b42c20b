#!/usr/bin/env bash
# A coordinator and three agents as separate processes on loopback; a sweep of
# 15 jobs (gemm and sleep) submitted through the CLI; every result in
# v_results exactly once; then a clean SIGTERM stop of every daemon.
source "$(dirname "$0")/lib.sh" "$@"

start_coord
for a in a1 a2 a3; do start_agent $a; done
wait_nodes 3

cat >"$T/spec.json" <<'JSON'
{
  "name": "three agents",
  "kind": ["gemm", "sleep"],
  "m": [64, 128, 256], "n": 128, "k": 128, "reps": 3,
  "duration_ms": [150, 300, 450], "repeat": 4
}
JSON
sweep=$(submit --spec "$T/spec.json")
eq "sweep id" "$sweep" 1
check "wait exits 0 when every job is done" "$GB" wait "$sweep" --quiet

eq "jobs in the sweep" "$(q "SELECT count(*) FROM jobs WHERE sweep_id = $sweep")" 24
eq "v_results rows" "$(q "SELECT count(*) FROM v_results WHERE sweep_id = $sweep")" 24
eq "v_results distinct jobs" "$(q "SELECT count(DISTINCT job_id) FROM v_results")" 24
eq "results rows (one per job and attempt)" "$(q "SELECT count(*) FROM results")" 24
eq "all done" "$(q "SELECT count(*) FROM v_results WHERE status = 'done'")" 24
eq "sleep rows are synthetic" "$(q "SELECT count(*) FROM v_results WHERE synthetic = 1")" 12
eq "gemm rows are real" "$(q "SELECT count(*) FROM v_results WHERE kind = 'gemm' AND synthetic = 0 AND gflops > 0")" 12
eq "the cpu backend ran them" "$(q "SELECT count(*) FROM v_results WHERE backend = 'cpu'")" 24
nodes_used=$(q "SELECT count(DISTINCT node) FROM v_results")
[ "$nodes_used" -ge 2 ] || fail "jobs ran on $nodes_used node(s), want them spread"
eq "a node runs one job at a time" \
   "$(q "SELECT count(*) FROM attempts a JOIN attempts b ON a.agent_id = b.agent_id AND a.rowid < b.rowid
         WHERE a.started_at < b.ended_at AND b.started_at < a.ended_at")" 0
eq "sweep state" "$(q "SELECT state FROM sweeps WHERE sweep_id = $sweep")" done
eq "gpu_model is the CPU model on CPU nodes" \
   "$(q "SELECT count(*) FROM v_results r JOIN nodes n ON n.name = r.node WHERE r.gpu_model = n.cpu_model")" 24

# the CLI views of the same
"$GB" results --db "$T/gb.db" --sweep "$sweep" --format csv >"$T/results.csv"
eq "results csv rows" "$(($(wc -l <"$T/results.csv") - 1))" 24
"$GB" results --db "$T/gb.db" --format json >"$T/results.json"
eq "results json rows" "$(sqlite3 :memory: "SELECT json_array_length(readfile('$T/results.json'))")" 24
"$GB" results --db "$T/gb.db" >"$T/results.txt"
contains "results table header" "$T/results.txt" "images_per_sec"
# the columns that tell configurations apart, in this order (interconnect and
# n_nodes were missing: NVLink and PCIe rows, one node and two, read alike)
eq "results table columns" "$(head -n 1 "$T/results.txt" | tr -s ' ')" \
    "sweep_id job_id node gpu_model backend kind n_gpus n_nodes precision batch_per_gpu image_size m n k interconnect images_per_sec step_ms_median gflops valid status error"
"$GB" status >"$T/status.txt"
contains "status shows the sweep" "$T/status.txt" "three agents"
"$GB" nodes --format csv >"$T/nodes.csv"
eq "nodes listed" "$(grep -c ',connected,' "$T/nodes.csv")" 3
eq "v_nodes rows" "$(q "SELECT count(*) FROM v_nodes WHERE state = 'connected' AND n_gpus = 0")" 3

# SIGTERM stops every daemon cleanly (exit 0)
for a in a1 a2 a3; do kill -TERM "${AGENT_PID[$a]}"; done
kill -TERM "$COORD_PID"
for p in "${AGENT_PID[@]}" "$COORD_PID"; do
    wait "$p"
    eq "exit status after SIGTERM" "$?" 0
done
contains "coordinator logged its stop" "$T/coord.log" "coordinator stopping"
eq "the store is intact" "$(q "PRAGMA integrity_check")" ok
echo "ok"
