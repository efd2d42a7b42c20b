#!/usr/bin/env bash
# SIGKILL of an agent in the middle of a job: the coordinator finds it lost
# after lost-after heartbeats, re-queues the job as attempt 2, another agent
# runs it, and the job ends exactly once. With max_attempts 1 (CASE
# give_up) the job fails instead, with the reason kept.
# CASE term: SIGTERM instead, a clean stop. The agent says so (its last
# heartbeat): the node is `stopped`, not `lost`, and its job goes back to the
# queue at once (a lost window of 10 s here), without using up an attempt
# (--max-attempts 1 and it runs again); the state survives a coordinator
# restart, and the agent starting again is connected.
# CASE term_stuck: the stopping agent's worker does not end on SIGTERM (it
# stopped itself with SIGSTOP): the agent says it stops only once the worker
# is gone (killed after --kill-grace-ms), so the job's next run cannot
# overlap it (it said so first, and the worker lived on for the grace); it
# heartbeats meanwhile, so a grace (2.5 s) longer than the lost window
# (0.5 s) does not have it found lost (and the job placed again) either.
# CASE term_group: SIGTERM to the agent and to its worker at once, as
# `systemctl stop` sends it to every process of a unit's cgroup (and Slurm
# to every process of a job step), the agent busy in a turn meanwhile
# (SIGSTOP until both were sent): the worker died of the stop, not of a
# fault of its own, so the job goes back to the queue as at a plain stop
# (--max-attempts 1: it runs again elsewhere). It failed as "worker killed
# by signal 15", not retried.
# CASE term_worker_first: the same signals the other way round, the worker's
# first (`pkill gpubench` or a job step's signal going down the process
# list), and its death seen by the agent before its own SIGTERM came: the job
# goes back to the queue too (a worker killed by SIGTERM or SIGINT that its
# agent did not kill waits up to 0.5 s for its agent's stop before it is
# reported as a crash). It failed as "worker killed by signal 15", not
# retried (--max-attempts 3 counts lost agents, not failed runs).
source "$(dirname "$0")/lib.sh" "$1" "$2"
case=${3:-rerun}

if [ "$case" = term_worker_first ]; then
    start_coord --lost-after 100 --max-attempts 3
    start_agent a1
    wait_nodes 1
    # a worker dead of SIGTERM while its agent goes on is a crash, reported
    # after the wait
    s0=$(submit --kind sleep --param duration_ms=10 --param signal=15 --name self)
    "$GB" wait "$s0" --quiet --timeout 30
    eq "the self-killed job fails" "$?" 1
    eq "as a crash" "$(q "SELECT status || ',' || error FROM v_results WHERE sweep_id = $s0")" \
        "failed,worker killed by signal 15 (Terminated)"
    contains "after the wait" "$T/a1.log" "reported in 500 ms unless the agent stops meanwhile"
    sweep=$(submit --kind sleep --param duration_ms=3000 --name victim)
    wait_running "$sweep" 1
    worker=$(pgrep -P "${AGENT_PID[a1]}" || true)
    [ -n "$worker" ] || fail "no worker under the agent"
    kill -TERM "$worker"
    # the agent has reaped it and said so (as a crash, or as waiting for a stop)
    for _ in $(seq 250); do grep -q "job 2 attempt 1.*killed by signal 15" "$T/a1.log" && break; sleep 0.02; done
    grep -q "job 2 attempt 1.*killed by signal 15" "$T/a1.log" || fail "the agent did not see its worker die"
    kill -TERM "${AGENT_PID[a1]}"
    wait "${AGENT_PID[a1]}"
    eq "the agent stops cleanly" "$?" 0
    start_agent a2
    "$GB" wait "$sweep" --quiet --timeout 30
    eq "the job runs again and ends" "$?" 0
    eq "attempt 1 ended lost" "$(q "SELECT state FROM attempts WHERE job_id = 2 AND attempt = 1")" lost
    q "SELECT error FROM attempts WHERE job_id = 2 AND attempt = 1" >"$T/why.txt"
    contains "why" "$T/why.txt" "agent a1 stopped (SIGTERM/SIGINT) while it ran it"
    eq "re-run on a2" "$(q "SELECT node || ',' || attempt || ',' || status FROM v_results WHERE job_id = 2")" "a2,2,done"
    eq "no result of attempt 1" "$(q "SELECT count(*) FROM results WHERE job_id = 2 AND attempt = 1")" 0
    source "$(dirname "$0")/../hardening/exactly_once.sh"
    assert_exactly_once 2
    echo ok
    exit 0
fi

if [ "$case" = term ]; then
    start_coord --lost-after 100 --max-attempts 1
    start_agent a1
    start_agent a2
    wait_nodes 2
    sweep=$(submit --kind sleep --param duration_ms=2000 --name victim)
    wait_running "$sweep" 1
    victim=$("$GB" nodes --format csv | awk -F, '$9 != "" && NR > 1 {print $1}')
    [ -n "$victim" ] || fail "no node runs the job"
    survivor=a1; [ "$victim" = a1 ] && survivor=a2
    t0=$(date +%s)
    kill -TERM "${AGENT_PID[$victim]}"
    wait "${AGENT_PID[$victim]}"
    eq "the agent stops cleanly" "$?" 0
    check "the job runs again and ends" "$GB" wait "$sweep" --quiet --timeout 30
    took=$(($(date +%s) - t0))
    [ "$took" -lt 9 ] || fail "the job ended ${took} s after the stop: it waited for the lost window"
    eq "attempt 1 ended lost" "$(q "SELECT state FROM attempts WHERE attempt = 1")" lost
    q "SELECT error FROM attempts WHERE attempt = 1" >"$T/why.txt"
    contains "why" "$T/why.txt" "agent $victim stopped (SIGTERM/SIGINT) while it ran it"
    eq "re-run elsewhere, the attempt free" \
        "$(q "SELECT node || ',' || attempt || ',' || status FROM v_results")" "$survivor,2,done"
    eq "v_nodes: stopped" "$(q "SELECT state FROM v_nodes WHERE node = '$victim'")" stopped
    eq "nodes: stopped" "$("$GB" nodes --format csv | awk -F, -v n="$victim" '$1 == n {print $3}')" stopped
    contains "the coordinator says so" "$T/coord.log" "agent $victim stops; its jobs go back to the queue"
    grep -q "agent $victim lost" "$T/coord.log" && fail "the stopped agent was also found lost"
    kill -TERM "$COORD_PID"
    wait "$COORD_PID"
    start_coord --lost-after 100 --max-attempts 1
    eq "still stopped after a coordinator restart" \
        "$("$GB" nodes --format csv | awk -F, -v n="$victim" '$1 == n {print $3}')" stopped
    start_agent "$victim"
    wait_nodes 2
    eq "connected again" "$(q "SELECT state FROM v_nodes WHERE node = '$victim'")" connected
    source "$(dirname "$0")/../hardening/exactly_once.sh"
    assert_exactly_once 1
    echo ok
    exit 0
fi

if [ "$case" = term_group ]; then
    start_coord --lost-after 100 --max-attempts 1
    start_agent a1
    wait_nodes 1
    sweep=$(submit --kind sleep --param duration_ms=3000 --name victim)
    wait_running "$sweep" 1
    worker=$(pgrep -P "${AGENT_PID[a1]}" || true)
    [ -n "$worker" ] || fail "no worker under the agent"
    kill -STOP "${AGENT_PID[a1]}"
    kill -TERM "$worker" "${AGENT_PID[a1]}"
    for _ in $(seq 100); do kill -0 "$worker" 2>/dev/null || [ "$(awk '{print $3}' "/proc/$worker/stat" 2>/dev/null)" = Z ] && break; sleep 0.02; done
    kill -CONT "${AGENT_PID[a1]}"
    wait "${AGENT_PID[a1]}"
    eq "the agent stops cleanly" "$?" 0
    start_agent a2
    check "the job runs again and ends" "$GB" wait "$sweep" --quiet --timeout 30
    eq "attempt 1 ended lost" "$(q "SELECT state FROM attempts WHERE attempt = 1")" lost
    q "SELECT error FROM attempts WHERE attempt = 1" >"$T/why.txt"
    contains "why" "$T/why.txt" "agent a1 stopped (SIGTERM/SIGINT) while it ran it"
    eq "re-run on a2, the attempt free" \
        "$(q "SELECT node || ',' || attempt || ',' || status FROM v_results")" "a2,2,done"
    eq "no result of attempt 1" "$(q "SELECT count(*) FROM results WHERE attempt = 1")" 0
    source "$(dirname "$0")/../hardening/exactly_once.sh"
    assert_exactly_once 1
    echo ok
    exit 0
fi

if [ "$case" = stale_store ]; then
    # a result left unacknowledged in an agent's spool, its store then
    # removed and made anew: job ids start at 1 again, and the new store's
    # job 1 took the old result (timed before its sweep existed). Results
    # carry their store's id; the agent keeps another store's for it.
    start_coord
    start_agent a1 --telemetry-ms 0
    wait_nodes 1
    submit --kind sleep --param duration_ms=1500 >/dev/null
    wait_running 1 1
    kill -STOP "$COORD_PID"
    for _ in $(seq 200); do ls "$T/a1/spool/"result-* >/dev/null 2>&1 && break; sleep 0.05; done
    ls "$T/a1/spool/"result-* >/dev/null 2>&1 || fail "no result in a1's spool"
    kill -TERM "${AGENT_PID[a1]}"
    wait "${AGENT_PID[a1]}"
    kill -KILL "$COORD_PID"
    wait "$COORD_PID" 2>/dev/null
    rm -f "$T/gb.db" "$T/gb.db-wal" "$T/gb.db-shm"
    start_coord
    # a node of the kind known to the new store, then gone: job 1 waits
    start_agent a2 --telemetry-ms 0
    wait_nodes 1
    kill -TERM "${AGENT_PID[a2]}"
    wait "${AGENT_PID[a2]}"
    submit --kind sleep --param duration_ms=300 --max-attempts 1 >/dev/null
    start_agent a1 --telemetry-ms 0
    check "job 1 ends, done" "$GB" wait 1 --quiet --timeout 30
    # one attempt, run (it was answered "already finished" from the old
    # result, never sent, and lost: with --max-attempts 1 the job failed)
    eq "one attempt" "$(q "SELECT count(*) FROM attempts WHERE job_id = 1")" 1
    contains "the old result set aside" "$T/a1.log" "of store"
    ls "$T/a1/spool/"*.bad >/dev/null 2>&1 || fail "the old result was not kept aside"
    eq "job 1's record is its own (300 ms), not the old store's (1500 ms)" \
        "$(q "SELECT json_extract(record, '\$.duration_ms') FROM results WHERE job_id = 1")" 300
    contains "the agent kept the old one" "$T/a1.log" "resending 0 spooled result(s); keeping 1 of other stores"
    echo ok
    exit 0
fi

if [ "$case" = foreign_running ]; then
    # the store made anew under an agent still running the old store's job
    # 1 (attempt 1), slow to die: the new store's job 1 attempt 1 comes to
    # it while that worker ends. It was taken as "already running", and the
    # job was lost (failed with --max-attempts 1); now it is refused (no
    # attempt used) and runs once the old worker is gone
    start_coord
    # 8 s: the new store's job must reach a1 before the grace ends (3 s
    # left about 2 s for wait_nodes, the submit and the dispatch)
    start_agent a1 --telemetry-ms 0 --slots 2 --kill-grace-ms 8000
    wait_nodes 1
    submit --kind sleep --param duration_ms=30000 >/dev/null
    wait_running 1 1
    worker=$(pgrep -P "${AGENT_PID[a1]}" | head -1)
    [ -n "$worker" ] || fail "no worker"
    kill -STOP "$worker" # deaf to the cancel's SIGTERM until the grace's SIGKILL
    kill -KILL "$COORD_PID"
    wait "$COORD_PID" 2>/dev/null
    rm -f "$T/gb.db" "$T/gb.db-wal" "$T/gb.db-shm"
    start_coord
    wait_nodes 1
    submit --kind sleep --param duration_ms=300 --max-attempts 1 >/dev/null
    check "job 1 of the new store ends, done" "$GB" wait 1 --quiet --timeout 30
    contains "the old one cancelled" "$T/coord.log" "that is another store's: cancelling"
    q "SELECT group_concat(attempt || ':' || state || ':' || COALESCE(error, ''), ' | ') FROM attempts WHERE job_id = 1" >"$T/att.txt"
    contains "refused while the old worker ended" "$T/att.txt" "another store's job of this id and attempt is still ending here"
    echo ok
    exit 0
fi

if [ "$case" = term_stuck_two ]; then
    # two slots: one worker deaf to the stop (it stopped itself), the other
    # ended by it at once. While the agent waits out its kill grace for the
    # first, its heartbeats list the second as ended by the stop: they listed
    # it nowhere, and two of them had the coordinator lose it ("no longer
    # runs it and holds no result for it"), using up its attempt (with
    # --max-attempts 1 it failed) where the stop gives it back for free
    start_coord
    start_agent a1 --slots 2 --kill-grace-ms 2500
    wait_nodes 1
    s1=$(submit --kind sleep --param duration_ms=10 --param signal=19 --max-attempts 1)
    wait_running "$s1" 1
    s2=$(submit --kind sleep --param duration_ms=60000 --max-attempts 1)
    wait_running "$s2" 1
    stuck=
    for _ in $(seq 100); do
        for w in $(pgrep -P "${AGENT_PID[a1]}" || true); do
            [ "$(awk '{print $3}' "/proc/$w/stat" 2>/dev/null)" = T ] && stuck=$w
        done
        [ -n "$stuck" ] && break
        sleep 0.05
    done
    [ -n "$stuck" ] || fail "no worker stopped itself"
    kill -TERM "${AGENT_PID[a1]}"
    wait "${AGENT_PID[a1]}"
    eq "the agent stops cleanly" "$?" 0
    contains "the agent stopped the deaf worker" "$T/a1.log" "stopping job 1 (worker pid $stuck)"
    q "SELECT group_concat(job_id || ': ' || error, ' | ') FROM (SELECT * FROM attempts ORDER BY job_id)" >"$T/why.txt"
    if grep -q "no longer runs it" "$T/why.txt"; then fail "a job was lost during the stop: $(cat "$T/why.txt")"; fi
    eq "both back in the queue, for free" \
        "$(q "SELECT group_concat(state || '/' || free_attempts) FROM (SELECT * FROM jobs ORDER BY job_id)")" "queued/1,queued/1"
    contains "job 2 was running" "$T/why.txt" "2: agent a1 stopped (SIGTERM/SIGINT) while it ran it"
    echo ok
    exit 0
fi

if [ "$case" = term_stuck ]; then
    start_coord
    start_agent a1 --kill-grace-ms 2500
    wait_nodes 1
    sweep=$(submit --kind sleep --param duration_ms=10 --param signal=19)
    wait_running "$sweep" 1
    worker=
    for _ in $(seq 100); do
        worker=$(pgrep -P "${AGENT_PID[a1]}" || true)
        [ -n "$worker" ] && [ "$(awk '{print $3}' "/proc/$worker/stat" 2>/dev/null)" = T ] && break
        sleep 0.05
    done
    [ "$(awk '{print $3}' "/proc/$worker/stat" 2>/dev/null)" = T ] || fail "the worker did not stop itself"
    kill -TERM "${AGENT_PID[a1]}"
    for _ in $(seq 400); do grep -q "agent a1 stops" "$T/coord.log" && break; sleep 0.025; done
    kill -0 "$worker" 2>/dev/null && fail "the coordinator was told of the stop while worker $worker lived"
    contains "the coordinator was told" "$T/coord.log" "agent a1 stops; its jobs go back to the queue"
    wait "${AGENT_PID[a1]}"
    eq "the agent stops cleanly" "$?" 0
    contains "the agent stopped the worker" "$T/a1.log" "stopping job 1 (worker pid $worker)"
    q "SELECT error FROM attempts WHERE attempt = 1" >"$T/why.txt"
    contains "the job was running" "$T/why.txt" "agent a1 stopped (SIGTERM/SIGINT) while it ran it"
    grep -q "agent a1 lost" "$T/coord.log" && fail "found lost while its worker died: $(grep "agent a1 lost" "$T/coord.log")"
    eq "the node is stopped" "$(q "SELECT state FROM v_nodes WHERE node = 'a1'")" stopped
    echo ok
    exit 0
fi

start_coord
start_agent a1
start_agent a2
wait_nodes 2
extra=()
[ "$case" = give_up ] && extra=(--max-attempts 1)
sweep=$(submit --kind sleep --param duration_ms=2000 --name victim "${extra[@]}")
wait_running "$sweep" 1
victim=$("$GB" nodes --format csv | awk -F, '$9 != "" && NR > 1 {print $1}')
[ -n "$victim" ] || fail "no node runs the job"
worker=$(pgrep -P "${AGENT_PID[$victim]}" || true)
[ -n "$worker" ] || fail "no worker process under agent $victim"
kill -KILL "${AGENT_PID[$victim]}"
wait "${AGENT_PID[$victim]}" 2>/dev/null
survivor=a1; [ "$victim" = a1 ] && survivor=a2

"$GB" wait "$sweep" --quiet
rc=$?
# the worker died with its agent (PR_SET_PDEATHSIG), not left running unwatched
for _ in $(seq 20); do kill -0 "$worker" 2>/dev/null || break; sleep 0.1; done
kill -0 "$worker" 2>/dev/null && fail "worker $worker outlived its agent"

eq "attempt 1 was lost" "$(q "SELECT state FROM attempts WHERE attempt = 1")" lost
q "SELECT error FROM attempts WHERE attempt = 1" >"$T/lost.txt"
contains "loss reason kept" "$T/lost.txt" "agent $victim lost (silent for"
eq "v_nodes shows the agent lost" "$(q "SELECT state FROM v_nodes WHERE node = '$victim'")" lost
eq "one row in v_results" "$(q "SELECT count(*) FROM v_results")" 1
if [ "$case" = give_up ]; then
    eq "wait fails" "$rc" 1
    eq "job failed" "$(q "SELECT status FROM v_results")" failed
    q "SELECT error FROM v_results" >"$T/error.txt"
    contains "reason kept" "$T/error.txt" "gave up after 1 attempt(s); last: agent $victim lost"
    eq "no result rows" "$(q "SELECT count(*) FROM results")" 0
else
    eq "wait succeeds" "$rc" 0
    eq "re-run elsewhere as attempt 2" "$(q "SELECT node || ',' || attempt || ',' || status FROM v_results")" "$survivor,2,done"
    eq "one result in all" "$(q "SELECT count(*) FROM results")" 1
    # the killed agent comes back with the same state dir: same id, registers again
    start_agent "$victim"
    wait_nodes 2
    eq "same node row" "$(q "SELECT count(*) FROM nodes WHERE name = '$victim'")" 1
    eq "connected again" "$(q "SELECT state FROM v_nodes WHERE node = '$victim'")" connected
fi
# every job ended once; every acknowledged result is stored, once (issue 6)
source "$(dirname "$0")/../hardening/exactly_once.sh"
assert_exactly_once 1
echo ok
