#!/usr/bin/env bash
# bench/control-plane/run.sh - the control plane under load: a real
# coordinator (the gpubench binary, its store on local disk) and
# gb_loadgen's simulated agents (tests/load/loadgen.c), each phase on a fresh
# store. Results: one JSON file per phase in OUT, and a summary on stdout.
#
#   bench/control-plane/run.sh [BUILD_DIR] [OUT_DIR]
#
# Phases (sizes from the environment):
#   throughput  AGENTS (2000) agents run JOBS (50000) sleep jobs of duration
#               0, in sweeps of SWEEP (10000): jobs committed and
#               acknowledged per second, assign->ack and slot-refill latency,
#               coordinator CPU and peak RSS
#   latency     an idle fleet of AGENTS; LAT_JOBS (1000) one-job sweeps at
#               LAT_RATE (50) a second: submit->assign latency
#   steady      STEADY_JOBS (25000) jobs offered at STEADY_RATE (100) sweeps of
#               STEADY_SWEEP (50) a second, 5,000 jobs/s, below saturation:
#               submit->assign and assign->ack latency at the target rate
#   idle        AGENTS agents heartbeating at 1 Hz for IDLE_S (30) seconds:
#               the coordinator's CPU, % of one core
# Knobs: SYNC=group|full|normal (the coordinator's --sync, default group),
# LOG_LEVEL (default info, as shipped: one line per job assigned and ended),
# CURVE=1 (keys on every connection).
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-$(mktemp -d "${TMPDIR:-/tmp}/gb-cp-bench.XXXXXX")}
GB=$BUILD/bin/gpubench
LOADGEN=$BUILD/tests/load/gb_loadgen
AGENTS=${AGENTS:-2000}
JOBS=${JOBS:-50000}
SWEEP=${SWEEP:-10000}
LAT_JOBS=${LAT_JOBS:-1000}
LAT_RATE=${LAT_RATE:-50}
STEADY_JOBS=${STEADY_JOBS:-25000}
STEADY_RATE=${STEADY_RATE:-100}
STEADY_SWEEP=${STEADY_SWEEP:-50}
IDLE_S=${IDLE_S:-30}
SYNC=${SYNC:-group}
LOG_LEVEL=${LOG_LEVEL:-info}
CURVE=${CURVE:-0}
[ -x "$GB" ] && [ -x "$LOADGEN" ] || { echo "build first: cmake --build $BUILD (gpubench, gb_loadgen)" >&2; exit 2; }
mkdir -p "$OUT"
COORD=
trap '[ -n "$COORD" ] && kill -TERM "$COORD" 2>/dev/null; wait 2>/dev/null' EXIT

keys=()
if [ "$CURVE" = 1 ]; then
    "$GB" keygen --force "$OUT/coord" >/dev/null 2>&1
    "$GB" keygen --force "$OUT/sim" >/dev/null 2>&1
    cp "$OUT/sim.pub" "$OUT/authorized"
    keys=(--key "$OUT/sim.key" --server-key "$OUT/coord.pub")
fi

start_coord() { # PHASE
    rm -f "$OUT/$1.db"* "$OUT/ready"
    local ck=()
    [ "$CURVE" = 1 ] && ck=(--key "$OUT/coord.key" --authorized "$OUT/authorized")
    # --rate-limit: the load generator submits up to 100 sweeps a second
    # from one address, over the default per-peer limit of 50
    "$GB" coordinator --listen 'tcp://127.0.0.1:*' --control 'tcp://127.0.0.1:*' --db "$OUT/$1.db" \
        --ready-file "$OUT/ready" --max-jobs "$SWEEP" --sync "$SYNC" --log-level "$LOG_LEVEL" \
        --rate-limit 1000 --rate-burst 1000 \
        "${ck[@]}" 2>"$OUT/$1.coord.log" &
    COORD=$!
    for _ in $(seq 200); do [ -f "$OUT/ready" ] && break; sleep 0.05; done
    [ -f "$OUT/ready" ] || { echo "the coordinator did not start:" >&2; tail -n 5 "$OUT/$1.coord.log" >&2; exit 1; }
    LISTEN=$(sed -n 's/^listen=//p' "$OUT/ready")
    CONTROL=$(sed -n 's/^control=//p' "$OUT/ready")
}
stop_coord() {
    kill -TERM "$COORD"; wait "$COORD" || true; COORD=
}

echo "gpubench control plane: $(nproc) cores, $(uname -r), $AGENTS agents, sync=$SYNC, log=$LOG_LEVEL, curve=$CURVE"
echo "out: $OUT"

start_coord throughput
"$LOADGEN" --mode throughput --connect "$LISTEN" --control "$CONTROL" --agents "$AGENTS" --jobs "$JOBS" \
    --sweep-size "$SWEEP" --coord-pid "$COORD" "${keys[@]}" >"$OUT/throughput.json" 2>"$OUT/throughput.log"
stop_coord
echo "store check: $(sqlite3 "$OUT/throughput.db" "SELECT count(*) || ' jobs, ' || sum(status = 'done') || ' done, ' || count(DISTINCT job_id) || ' distinct, ' || sum(synthetic) || ' synthetic' FROM v_results")"

start_coord latency
"$LOADGEN" --mode latency --connect "$LISTEN" --control "$CONTROL" --agents "$AGENTS" --jobs "$LAT_JOBS" \
    --rate "$LAT_RATE" --coord-pid "$COORD" "${keys[@]}" >"$OUT/latency.json" 2>"$OUT/latency.log"
stop_coord

start_coord steady
"$LOADGEN" --mode latency --connect "$LISTEN" --control "$CONTROL" --agents "$AGENTS" --jobs "$STEADY_JOBS" \
    --rate "$STEADY_RATE" --sweep-size "$STEADY_SWEEP" --coord-pid "$COORD" "${keys[@]}" \
    >"$OUT/steady.json" 2>"$OUT/steady.log"
stop_coord

start_coord idle
"$LOADGEN" --mode idle --connect "$LISTEN" --control "$CONTROL" --agents "$AGENTS" --jobs 0 \
    --duration "$IDLE_S" --coord-pid "$COORD" "${keys[@]}" >"$OUT/idle.json" 2>"$OUT/idle.log"
stop_coord

for p in throughput latency steady idle; do
    echo "== $p"
    grep -h "gb_loadgen:" "$OUT/$p.log" | sed 's/^gb_loadgen: /  /'
done
