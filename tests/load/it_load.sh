#!/usr/bin/env bash
# gb_loadgen against a real coordinator, small: 50 simulated agents run
# 2,000 sleep jobs (four sweeps); every job is in the store once, marked
# synthetic, and the load generator saw each acknowledged. (The
# measurements at 2,000 agents and 50,000 jobs are bench/control-plane.)
source "$(dirname "$0")/../hardening/lib.sh" "$1" ""
LOADGEN=$2
HB=1000
start_coord --max-jobs 500
"$LOADGEN" --connect "$LISTEN" --control "$CONTROL" --agents 50 --jobs 2000 --sweep-size 500 \
    --coord-pid "$COORD_PID" >"$T/load.json" 2>"$T/load.log" || fail "gb_loadgen: $(tail -n 5 "$T/load.log")"
cat "$T/load.log"
grep -q '"ok": true' "$T/load.json" || fail "gb_loadgen reported a problem: $(cat "$T/load.json")"
eq "jobs" "$(q "SELECT count(*) FROM jobs")" 2000
eq "v_results: every job once, done, synthetic" \
   "$(q "SELECT count(*) || ',' || count(DISTINCT job_id) || ',' || sum(status = 'done') || ',' || sum(synthetic) FROM v_results")" \
   "2000,2000,2000,2000"
eq "results rows marked synthetic" "$(q "SELECT count(*) FROM results WHERE synthetic = 1")" 2000
eq "sweeps done" "$(q "SELECT count(*) FROM sweeps WHERE state = 'done'")" 4
eq "fleet" "$(q "SELECT count(*) FROM nodes WHERE state = 'connected'")" 50
echo ok
