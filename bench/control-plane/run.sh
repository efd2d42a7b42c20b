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
# LOG_LEVEL=debug|info|warn|error (default info, as shipped: one line per
# job assigned and ended), CURVE=1 (keys on every connection). The sizes
# are whole numbers, checked before anything starts.
# BUILD_DIR (default: the repository's build) and OUT_DIR are taken from the
# directory the script is called from; without OUT_DIR it makes one in
# TMPDIR. A signal (INT, TERM) or a failure stops gb_loadgen and the
# coordinator; OUT is kept when it holds something (it says where) and
# removed when it made it and it stayed empty.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
abs() { case $1 in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$PWD" "$1" ;; esac; }
BUILD=$(abs "${1:-$ROOT/build}")
OUT_ARG=${2:-}
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

ME=control-plane/run.sh
# shellcheck source=../lib.sh
source "$(dirname "$0")/../lib.sh"
# the limits of gb_loadgen (agents), of the coordinator this script starts
# (--max-jobs, --max-queued 1000000, --rate-limit 1000 sweeps a second)
need_int AGENTS 1 60000
need_int JOBS 1 1000000
need_int SWEEP 1 1000000
need_int LAT_JOBS 1 1000000
need_int LAT_RATE 1 1000
need_int STEADY_JOBS 1 1000000
need_int STEADY_RATE 1 1000
need_int STEADY_SWEEP 1 1000000
need_int IDLE_S 1 86400
for v in SWEEP STEADY_SWEEP; do # gb_loadgen sends a sweep above 1000 in groups of 1000
    [ "${!v}" -le 1000 ] || [ $(("${!v}" % 1000)) = 0 ] || die "$v=${!v}: above 1000 it must be a multiple of 1000"
done
[ "$STEADY_SWEEP" -le "$SWEEP" ] || die "STEADY_SWEEP=$STEADY_SWEEP is above SWEEP=$SWEEP (the coordinator's --max-jobs)"
case $SYNC in group | full | normal) ;; *) die "SYNC='$SYNC': group, full or normal" ;; esac
case $LOG_LEVEL in debug | info | warn | error) ;; *) die "LOG_LEVEL='$LOG_LEVEL': debug, info, warn or error" ;; esac
case $CURVE in 0 | 1) ;; *) die "CURVE='$CURVE': 0 or 1" ;; esac
if ! [ -x "$GB" ] || ! [ -x "$LOADGEN" ]; then
    die "build first: cmake --build $BUILD (gpubench, gb_loadgen)"
fi
command -v sqlite3 >/dev/null 2>&1 || die "needs the sqlite3 command (apt-get install sqlite3)"

MADE_OUT=0
if [ -n "$OUT_ARG" ]; then
    OUT=$(abs "$OUT_ARG")
    [ -d "$OUT" ] || MADE_OUT=1
    mkdir -p "$OUT"
else
    OUT=$(mktemp -d "${TMPDIR:-/tmp}/gb-cp-bench.XXXXXX")
    MADE_OUT=1
fi
COORD=''
LOADGEN_PID=''
FINISHED=0
alive() { case $(ps -o stat= -p "$1" 2>/dev/null) in '' | Z*) return 1 ;; esac; }
stop_pid() { # PID: TERM, up to 10 s to end, then KILL
    kill -TERM "$1" 2>/dev/null || return 0
    for _ in $(seq 100); do alive "$1" || break; sleep 0.1; done
    kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
}
cleanup() {
    local rc=$?
    set +e
    trap - EXIT INT TERM
    [ -n "$LOADGEN_PID" ] && stop_pid "$LOADGEN_PID"
    [ -n "$COORD" ] && stop_pid "$COORD"
    if [ "$FINISHED" != 1 ]; then
        if [ "$MADE_OUT" = 1 ] && rmdir "$OUT" 2>/dev/null; then :
        elif [ -d "$OUT" ]; then
            echo "$ME: stopped (exit $rc); logs and partial results are in $OUT" >&2
        fi
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

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
# PHASE ARGS...: gb_loadgen against the running coordinator, output in
# OUT/PHASE.json and .log; waited for in the background, so that a signal
# to this script stops it at once (through cleanup)
loadgen() {
    local phase=$1
    shift
    "$LOADGEN" "$@" --connect "$LISTEN" --control "$CONTROL" --coord-pid "$COORD" ${keys[@]+"${keys[@]}"} \
        >"$OUT/$phase.json" 2>"$OUT/$phase.log" &
    LOADGEN_PID=$!
    local rc=0
    wait "$LOADGEN_PID" || rc=$?
    LOADGEN_PID=''
    if [ "$rc" != 0 ]; then
        echo "gb_loadgen failed in the $phase phase (exit $rc):" >&2
        tail -n 5 "$OUT/$phase.log" >&2
        exit 1
    fi
}

echo "gpubench control plane: $(nproc) cores, $(uname -r), $AGENTS agents, sync=$SYNC, log=$LOG_LEVEL, curve=$CURVE"
echo "out: $OUT"

start_coord throughput
loadgen throughput --mode throughput --agents "$AGENTS" --jobs "$JOBS" --sweep-size "$SWEEP"
stop_coord
echo "store check: $(sqlite3 "$OUT/throughput.db" "SELECT count(*) || ' jobs, ' || sum(status = 'done') || ' done, ' || count(DISTINCT job_id) || ' distinct, ' || sum(synthetic) || ' synthetic' FROM v_results")"

start_coord latency
loadgen latency --mode latency --agents "$AGENTS" --jobs "$LAT_JOBS" --rate "$LAT_RATE"
stop_coord

start_coord steady
loadgen steady --mode latency --agents "$AGENTS" --jobs "$STEADY_JOBS" --rate "$STEADY_RATE" \
    --sweep-size "$STEADY_SWEEP"
stop_coord

start_coord idle
loadgen idle --mode idle --agents "$AGENTS" --jobs 0 --duration "$IDLE_S"
stop_coord

for p in throughput latency steady idle; do
    echo "== $p"
    grep -h "gb_loadgen:" "$OUT/$p.log" | sed 's/^gb_loadgen: /  /'
done
FINISHED=1
