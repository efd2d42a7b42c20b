#!/usr/bin/env bash
# SIGKILL of the coordinator mid-sweep, then a restart on the same store and
# ports: the agents keep running their jobs, spool the results they cannot
# send, register again and resend; the sweep finishes with every result
# stored exactly once. A `gpubench wait` started before the kill rides it out.
source "$(dirname "$0")/lib.sh" "$1" "$2"

start_coord
start_agent a1
start_agent a2
wait_nodes 2
sweep=$(submit --kind sleep --param duration_ms=400 --repeat 12 --name restart)
"$GB" wait "$sweep" --quiet >"$T/wait.log" 2>&1 &
waiter=$!
PIDS+=("$waiter")

# kill once a few jobs are done and two are running
for _ in $(seq 200); do
    [ "$(q "SELECT count(*) FROM results")" -ge 3 ] && break
    sleep 0.05
done
wait_running "$sweep" 2
kill -KILL "$COORD_PID"
wait "$COORD_PID" 2>/dev/null
before=$(q "SELECT count(*) FROM results")
sleep 1.2   # the running jobs end while nobody listens: their results stay in the spools
start_coord

wait "$waiter"
eq "the wait started before the kill succeeds" "$?" 0
check "an agent resent from its spool" grep -qE "resending [1-9][0-9]* spooled result" "$T"/a1.log "$T"/a2.log
eq "said once per registration, each result only at debug" \
    "$(cat "$T"/a1.log "$T"/a2.log | grep -c "resending spooled result of job")" 0
eq "jobs" "$(q "SELECT count(*) FROM jobs")" 12
eq "v_results: every job once" "$(q "SELECT count(*) || ',' || count(DISTINCT job_id) FROM v_results")" "12,12"
eq "all done" "$(q "SELECT count(*) FROM v_results WHERE status = 'done'")" 12
eq "results: one per job (no attempt lost, none doubled)" "$(q "SELECT count(*) || ',' || count(DISTINCT job_id) FROM results")" "12,12"
[ "$before" -lt 12 ] || fail "the sweep had finished before the kill ($before results)"
contains "the new coordinator resumed" "$T/coord.log" "resumed:"
for a in a1 a2; do
    eq "spool of $a empty" "$(ls "$T/$a/spool" | wc -l)" 0
done
# every job ended once; every acknowledged result is stored, once (issue 6)
source "$(dirname "$0")/../hardening/exactly_once.sh"
assert_exactly_once 12
echo ok
