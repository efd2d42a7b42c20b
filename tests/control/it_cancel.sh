#!/usr/bin/env bash
# gpubench cancel: queued jobs end as cancelled at once, the running one is
# stopped on its agent and ends as cancelled; wait exits non-zero; a job id
# of another sweep, or none, is refused, and so is an ended sweep.
# CASE restart: the coordinator restarted while a job runs, and the job
# cancelled before its agent registered again (a connection cut loses a
# Cancel the same way): the Cancel goes out again when the agent says it
# still runs the job, and the worker is stopped. It was sent once, into no
# connection: the worker ran to its end and the job ended `done`.
# CASE restart_reason: a cancel with a reason (`gpubench run --timeout`'s),
# its Cancel lost (the agent had no connection), and the coordinator
# restarted before the running job ended: the new one sends the Cancel
# with the reason the store kept (jobs.cancel_reason), and the job's error
# is that reason. It kept only cancel_requested, and the job said
# "cancelled by request", as for a `gpubench cancel`.
source "$(dirname "$0")/lib.sh" "$1" "$2"

if [ "${3:-}" = restart_reason ]; then
    LOST=20 # the stall: the agent's ZMQ heartbeat timeout is HB * LOST
    start_coord
    start_agent a1
    wait_nodes 1
    sweep=$(submit --kind sleep --param duration_ms=20000 --repeat 2)
    wait_running "$sweep" 1
    why="cancelled: gpubench run --timeout 7 s ran out"
    run_while_disconnected stall_restart a1 "$T/cancel.txt" "$RAWPEER" cancel_reason - "$CONTROL" "$sweep" "$why"
    contains "cancel reports" "$T/cancel.txt" "1 queued job(s) cancelled, 1 running job(s) stopping"
    t0=$(date +%s)
    "$GB" wait "$sweep" --quiet --timeout 30
    eq "wait exits 1 for a cancelled sweep" "$?" 1
    took=$(($(date +%s) - t0))
    [ "$took" -lt 10 ] || fail "the job ended ${took} s after the cancel: its worker ran on"
    contains "the new coordinator sent the cancel" "$T/coord.log" "job 1 attempt 1: agent a1 still runs it: its cancel sent again"
    eq "the running job's error is the reason" "$(q "SELECT status || ',' || error FROM v_results WHERE job_id = 1")" "cancelled,$why"
    eq "its agent was told the reason" "$(q "SELECT status || ',' || error FROM results")" "cancelled,$why"
    eq "the queued job's too" "$(q "SELECT status || ',' || error FROM v_results WHERE job_id = 2")" "cancelled,$why"
    eq "kept in the store" "$(q "SELECT group_concat(job_id || ':' || cancel_requested || ':' || ifnull(cancel_reason, '-')) FROM jobs")" "1:1:$why,2:0:-"
    echo ok
    exit 0
fi

if [ "${3:-}" = restart ]; then
    start_coord
    start_agent a1
    wait_nodes 1
    sweep=$(submit --kind sleep --param duration_ms=20000)
    wait_running "$sweep" 1
    # a1 registers with the new coordinator only after the cancel
    run_while_disconnected restart a1 "$T/cancel.txt" "$GB" cancel "$sweep"
    contains "cancel reports" "$T/cancel.txt" "1 running job(s) stopping"
    t0=$(date +%s)
    "$GB" wait "$sweep" --quiet --timeout 30
    eq "wait exits 1 for a cancelled sweep" "$?" 1
    took=$(($(date +%s) - t0))
    [ "$took" -lt 10 ] || fail "the job ended ${took} s after the cancel: its worker ran on"
    eq "the job is cancelled" "$(q "SELECT status FROM v_results")" cancelled
    eq "its worker was stopped" "$(q "SELECT status || ',' || error FROM results")" "cancelled,cancelled by request"
    contains "the agent was told" "$T/a1.log" "job 1 attempt 1: cancelling"
    source "$(dirname "$0")/../hardening/exactly_once.sh"
    assert_exactly_once 1
    echo ok
    exit 0
fi

start_coord
start_agent a1
wait_nodes 1
sweep=$(submit --kind sleep --param duration_ms=20000 --repeat 3)
wait_running "$sweep" 1
other=$(submit --kind sleep --param duration_ms=20000)
other_job=$(q "SELECT job_id FROM jobs WHERE sweep_id = $other")
# a job id that is not the sweep's, or no job at all, is an error, not "0 cancelled"
"$GB" cancel --job "$other_job" "$sweep" >"$T/wrong.txt" 2>&1 && fail "cancel of another sweep's job succeeded"
contains "names the right sweep" "$T/wrong.txt" "job $other_job belongs to sweep $other, not $sweep"
"$GB" cancel --job 999 "$sweep" >"$T/wrong.txt" 2>&1 && fail "cancel of a job that does not exist succeeded"
contains "says there is none" "$T/wrong.txt" "no queued or running job 999 in sweep $sweep"
eq "the other sweep's job is untouched" "$(q "SELECT state FROM jobs WHERE job_id = $other_job")" queued
"$GB" cancel "$other" >/dev/null 2>&1 || fail "cancel of the other sweep"
"$GB" cancel "$sweep" >"$T/cancel.txt" 2>&1 || fail "cancel failed: $(cat "$T/cancel.txt")"
contains "cancel reports" "$T/cancel.txt" "2 queued job(s) cancelled, 1 running job(s) stopping"
"$GB" wait "$sweep" --quiet --timeout 10
eq "wait exits 1 for a cancelled sweep" "$?" 1
eq "all cancelled" "$(q "SELECT count(*) FROM v_results WHERE status = 'cancelled'")" 4
eq "the running one reported" "$(q "SELECT status || ',' || error FROM results")" "cancelled,cancelled by request"
eq "sweep state" "$(q "SELECT state FROM sweeps WHERE sweep_id = $sweep")" cancelled
# the queued ones end in one statement: each row its error and end time,
# the other sweep's rows untouched by it
eq "the queued ones' rows" "$(q "SELECT group_concat(job_id || ':' || error || ':' || (finished_at IS NOT NULL) || ':' || (agent_id IS NULL)) FROM jobs WHERE sweep_id = $sweep AND attempt = 0")" \
    "2:cancelled by request:1:1,3:cancelled by request:1:1"
eq "the other sweep's job, cancelled on its own" "$(q "SELECT state || ':' || error FROM jobs WHERE sweep_id = $other")" "cancelled:cancelled by request"
# the log: one line for the cancel, not one per queued job (10,000 lines for
# a big sweep)
contains "one line for the cancel" "$T/coord.log" "sweep $sweep: cancelled 2 queued job(s), stopping 1 running"
eq "no line per queued job" "$(grep -c "cancelled: cancelled by request" "$T/coord.log")" 0
# an ended sweep has nothing to cancel: an error, not "0 cancelled" and exit 0
"$GB" cancel "$sweep" >"$T/again.txt" 2>&1 && fail "cancel of an ended sweep succeeded"
contains "says why" "$T/again.txt" "sweep $sweep has no job left to cancel"
"$GB" cancel 99 >"$T/none.txt" 2>&1 && fail "cancel of an unknown sweep succeeded"
contains "unknown sweep" "$T/none.txt" "no sweep 99"
"$GB" wait 99 --quiet
eq "wait on an unknown sweep exits 2" "$?" 2
echo ok
