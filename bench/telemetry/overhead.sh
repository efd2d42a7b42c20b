#!/usr/bin/env bash
# overhead.sh - the CPU the agent spends sampling: an agent with telemetry
# at MS (0 = off) runs a CPU `sleep` job of SECONDS; the agent's own CPU
# time (utime + stime from /proc) over the job, and the samples taken. On a
# GPU node the NVML queries add to this; here (no GPU) it is the /proc path.
#
#   bench/telemetry/overhead.sh [GPUBENCH] [SECONDS]
#
# GPUBENCH defaults to the repository's build/bin/gpubench (a relative path
# is the caller's); SECONDS (1..86400, the sleep kind's limit) is checked
# before anything starts.
set -euo pipefail
ME=overhead.sh
GB=${1:-$(dirname "$0")/../../build/bin/gpubench}
SECS=${2:-10}
# shellcheck source=../lib.sh
source "$(dirname "$0")/../lib.sh"
need_int SECS 1 86400 "SECONDS (argument 2)"
[ -x "$GB" ] || die "no gpubench at $GB (build first: ./scripts/build.sh)"
command -v sqlite3 >/dev/null 2>&1 || die "needs the sqlite3 command (apt-get install sqlite3)"
T=$(mktemp -d "${TMPDIR:-/tmp}/gb-overhead.XXXXXX")
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
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
tck=$(getconf CLK_TCK)
# is agent $1 connected? (grep reads it all: no SIGPIPE under pipefail)
connected() { "$GB" nodes --format csv 2>/dev/null | grep "^$1,.*,connected," >/dev/null; }
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; a ${SECS} s CPU job"
for ms in 0 10 100; do
    GB_NVML_LIB=/nonexistent "$GB" agent --connect "$LISTEN" --state-dir "$T/a$ms" --name "a$ms" \
        --telemetry-ms $ms >"$T/a$ms.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    for _ in $(seq 200); do connected "a$ms" && break; sleep 0.05; done
    connected "a$ms" || { echo "agent a$ms did not connect:" >&2; tail -n 5 "$T/a$ms.log" >&2; exit 1; }
    t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    sweep=$("$GB" submit --kind sleep --param duration_ms=$((SECS * 1000)) --nodes "a$ms" 2>"$T/submit.err") ||
        { echo "gpubench submit failed:" >&2; cat "$T/submit.err" >&2; exit 1; }
    # in the background, waited for by the shell: a signal to this script
    # runs the cleanup at once (a foreground child would delay it)
    "$GB" wait "$sweep" --quiet --timeout $((SECS + 60)) &
    PIDS+=("$!")
    wait "$!" || true
    t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    n=$(sqlite3 "$T/gb.db" "SELECT COALESCE(json_array_length(record, '$.telemetry.samples'), 0) FROM results r JOIN jobs j USING (job_id) WHERE j.sweep_id = $sweep")
    awk -v ms=$ms -v t=$((t1 - t0)) -v tck="$tck" -v n="$n" -v s="$SECS" 'BEGIN {
        printf "telemetry-ms %-4d agent CPU %6.0f ms over %d s (%.2f%% of a core), %d samples kept%s\n",
            ms, 1000 * t / tck, s, 100 * t / tck / s, n, n ? sprintf(", %.3f ms a sample", 1000 * t / tck / n) : "" }'
    kill "$pid"
    wait "$pid" || true
done
