#!/usr/bin/env bash
# contention.sh - what a competing process costs a CPU benchmark, and what
# the agent's CPU telemetry says about it: a coordinator and an agent on
# this machine, a CPU gemm (m = n = k = SIZE, REPS timed products) run
# alone and beside 1..N busy loops, interleaved over ROUNDS rounds. For each
# run: GFLOP/s, the share of the node's CPU time others took in the timed
# window (taken = others + steal, v_cpu_telemetry), and whether the result
# stayed valid. The slowdown against the median of the runs alone shows
# how the 5% flag and 10% limit of docs/telemetry.md relate to the figure.
#
#   bench/telemetry/contention.sh [GPUBENCH] [ROUNDS] [SIZE] [REPS]
#
# GPUBENCH defaults to the repository's build/bin/gpubench (a relative path
# is the caller's); ROUNDS 1..1000, SIZE 1..65536 and REPS 1..10000 (the
# gemm kind's limits) are checked before anything starts.
set -euo pipefail
ME=contention.sh
GB=${1:-$(dirname "$0")/../../build/bin/gpubench}
ROUNDS=${2:-3}
SIZE=${3:-1024}
REPS=${4:-30}
N=$(nproc)
# shellcheck source=../lib.sh
source "$(dirname "$0")/../lib.sh"
need_int ROUNDS 1 1000 "ROUNDS (argument 2)"
need_int SIZE 1 65536 "SIZE (argument 3)"
need_int REPS 1 10000 "REPS (argument 4)"
[ -x "$GB" ] || die "no gpubench at $GB (build first: ./scripts/build.sh)"
command -v sqlite3 >/dev/null 2>&1 || die "needs the sqlite3 command (apt-get install sqlite3)"
T=$(mktemp -d "${TMPDIR:-/tmp}/gb-contention.XXXXXX")
PIDS=()
BUSY=()
cleanup() {
    for p in "${BUSY[@]}" "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$T"
}
trap cleanup EXIT

"$GB" coordinator --listen 'tcp://127.0.0.1:*' --control 'tcp://127.0.0.1:*' --db "$T/gb.db" \
    --ready-file "$T/ready" >"$T/coord.log" 2>&1 &
PIDS+=("$!")
for _ in $(seq 100); do [ -f "$T/ready" ] && break; sleep 0.05; done
[ -f "$T/ready" ] || { echo "the coordinator did not start ($GB):" >&2; tail -n 5 "$T/coord.log" >&2; exit 1; }
LISTEN=$(sed -n 's/^listen=//p' "$T/ready")
GB_CONTROL=$(sed -n 's/^control=//p' "$T/ready")
export GB_CONTROL
GB_NVML_LIB=/nonexistent "$GB" agent --connect "$LISTEN" --state-dir "$T/agent" --name bench \
    --telemetry-ms 50 >"$T/agent.log" 2>&1 &
PIDS+=("$!")
# (grep reads it all: no SIGPIPE under pipefail)
connected() { "$GB" nodes --format csv 2>/dev/null | grep ',connected,' >/dev/null; }
for _ in $(seq 100); do connected && break; sleep 0.05; done
connected || { echo "the agent did not connect:" >&2; tail -n 5 "$T/agent.log" >&2; exit 1; }

echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $N cores"
echo "# gemm ${SIZE}^3 fp32, $REPS timed products, telemetry every 50 ms; load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %-5s %9s %8s %8s %8s %6s  %s\n' round loops gflops taken% others% steal% valid why
for r in $(seq "$ROUNDS"); do
    for loops in $(seq 0 "$N"); do
        BUSY=()
        for _ in $(seq "$loops"); do
            bash -c 'while :; do :; done' &
            BUSY+=("$!")
        done
        sweep=$("$GB" submit --kind gemm --param m="$SIZE" --param n="$SIZE" --param k="$SIZE" \
            --param reps="$REPS" 2>"$T/submit.err") ||
            { echo "gpubench submit failed:" >&2; cat "$T/submit.err" >&2; exit 1; }
        # in the background, waited for by the shell: a signal to this script
        # runs the cleanup (which stops the loops) at once
        "$GB" wait "$sweep" --quiet --timeout 600 &
        PIDS+=("$!")
        wait "$!" || true
        if [ ${#BUSY[@]} -gt 0 ]; then # (a bare `wait` would wait for the daemons)
            kill "${BUSY[@]}" 2>/dev/null
            wait "${BUSY[@]}" 2>/dev/null || true
        fi
        BUSY=()
        sqlite3 -separator ' ' "$T/gb.db" "SELECT printf('%-6d %-5d %9.1f %8.1f %8.1f %8.1f %6d  %s', $r,
            $loops, r.gflops, c.taken_pct, c.others_pct, c.steal_pct, r.valid,
            substr(COALESCE(r.invalid_reason, '-'), 1, 40))
            FROM v_results r JOIN v_cpu_telemetry c USING (job_id) WHERE r.sweep_id = $sweep" |
            tee -a "$T/runs.txt"
    done
done # not piped: the loops' pids stay in this shell, where the cleanup sees them
echo
echo "# per load: median GFLOP/s, its slowdown against the runs alone, median taken%"
# median of column $2 of the rows whose loops are $1
median() {
    awk -v l="$1" -v c="$2" '$2 == l { print $c }' "$T/runs.txt" | sort -g |
        awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
base=$(median 0 3)
for loops in $(seq 0 "$N"); do
    g=$(median "$loops" 3)
    awk -v l="$loops" -v g="$g" -v b="$base" -v t="$(median "$loops" 4)" \
        'BEGIN { printf "loops %d: %8.1f GFLOP/s  %5.1f%% slower  taken %5.1f%%\n", l, g, 100 * (1 - g / b), t }'
done
