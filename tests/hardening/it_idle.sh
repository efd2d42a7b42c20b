#!/usr/bin/env bash
# The coordinator sleeps when there is nothing to do: after a few jobs (so
# that commits, WAL flushes and acknowledgements happened), while one agent
# heartbeats every 100 ms and runs a long job, it spends less than 30% of a
# core over 3 s.
# Not a speed test (bench/control-plane measures that): a guard against a
# busy loop, which costs a whole core (a wake-up descriptor left readable,
# for one, spun the reactor). CPU time is read from /proc, so a loaded
# machine slows the test down but cannot make it fail.
source "$(dirname "$0")/lib.sh" "$1" "$2"
cpu_s() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }
start_coord
start_agent a1
wait_nodes 1
sweep=$(submit --kind sleep --param duration_ms=10 --repeat 3)
check "the sweep finishes" "$GB" wait "$sweep" --quiet
# and a job that runs on while we measure: its assignment was a commit with
# nothing to hold back (what once left the flush descriptor readable)
long=$(submit --kind sleep --param duration_ms=8000)
wait_running "$long" 1
sleep 0.5
c0=$(cpu_s "$COORD_PID"); t0=$(date +%s%N)
sleep 3
c1=$(cpu_s "$COORD_PID"); t1=$(date +%s%N)
pct=$(awk -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" 'BEGIN {printf "%d", 100 * (c1 - c0) / ((t1 - t0) / 1e9)}')
echo "coordinator at rest: ${pct}% of one core"
[ "$pct" -lt 30 ] || fail "the coordinator spends ${pct}% of a core with nothing to do"
echo ok
