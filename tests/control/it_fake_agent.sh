#!/usr/bin/env bash
# A peer posing as an agent (test_rawpeer fake_*) answers a job in a
# particular way; the store must show what the coordinator made of it.
source "$(dirname "$0")/lib.sh" "$1" "$2"
case=${3:?case}

start_coord --max-frame 65536
start_agent healthy
wait_nodes 1
"$RAWPEER" "$case" "$LISTEN" "$CONTROL" >"$T/rawpeer.log" 2>&1 &
fake=$!
PIDS+=("$fake")

if [ "$case" = fake_unknown_result ]; then
    wait "$fake" || fail "rawpeer: $(cat "$T/rawpeer.log")"
    contains "the stray result is logged" "$T/coord.log" "matches no attempt of that agent: dropped"
    eq "nothing stored" "$(q "SELECT count(*) FROM results")" 0
    echo ok
    exit 0
fi

wait_nodes 2
attempts=1
[ "$case" = fake_vanish ] || [ "$case" = fake_foreign_spooled ] && attempts=2
sweep=$(submit --kind gemm --param m=8 --param n=8 --param k=8 --nodes fake --max-attempts $attempts)
wait "$fake" || fail "rawpeer: $(cat "$T/rawpeer.log")"
if [ "$case" = fake_stop_gone ]; then
    # its result never comes: after the restart grace (2.5 s here) the job
    # goes back to the queue, the attempt free (max-attempts 1: it waits
    # for its node again instead of failing)
    for _ in $(seq 100); do [ "$(q "SELECT state FROM attempts WHERE attempt = 1")" = lost ] && break; sleep 0.1; done
    q "SELECT state || ': ' || error FROM attempts WHERE attempt = 1" >"$T/a1.txt"
    contains "given back after the grace" "$T/a1.txt" "lost: agent fake stopped (SIGTERM/SIGINT) holding its result unsent, and has not come back with it within 2500 ms"
    eq "queued again, not failed" "$(q "SELECT state FROM jobs")" queued
    eq "the node is stopped" "$(q "SELECT state FROM v_nodes WHERE node = 'fake'")" stopped
    echo ok
    exit 0
fi
"$GB" wait "$sweep" --quiet
rc=$?
case "$case" in
fake_bad_record)
    eq "wait fails" "$rc" 1
    eq "job failed" "$(q "SELECT status FROM v_results")" failed
    q "SELECT error FROM v_results" >"$T/error.txt"
    contains "reason kept" "$T/error.txt" "invalid result record: record is not valid JSON"
    eq "result row marks it failed" "$(q "SELECT status || ',' || (record IS NULL) FROM results")" "failed,1"
    ;;
fake_wrong_kind)
    eq "wait fails" "$rc" 1
    q "SELECT error FROM v_results" >"$T/error.txt"
    contains "reason kept" "$T/error.txt" "record is of kind 'sleep' but the job is 'gemm'"
    ;;
fake_resend)
    eq "wait succeeds" "$rc" 0
    eq "three sends, one row" "$(q "SELECT count(*) FROM results")" 1
    eq "v_results once" "$(q "SELECT count(*) FROM v_results")" 1
    eq "columns extracted from the record" "$(q "SELECT gflops || ',' || node || ',' || gpu_model FROM v_results")" "12.5,fake,Test CPU"
    ;;
fake_other_store)
    eq "wait succeeds" "$rc" 0
    contains "another store's result dropped" "$T/coord.log" "is of store 0123456789abcdef, not this one"
    eq "the job's own result stored, once" "$(q "SELECT count(*) || ',' || max(gflops) FROM v_results")" "1,12.5"
    ;;
fake_refuse)
    # a refusal (busy agent) does not count against max_attempts (1 here)
    eq "wait succeeds" "$rc" 0
    eq "done as attempt 2" "$(q "SELECT attempt || ',' || status FROM v_results")" "2,done"
    q "SELECT state || ': ' || error FROM attempts WHERE attempt = 1" >"$T/a1.txt"
    contains "the refusal is kept" "$T/a1.txt" "lost: agent fake refused it: busy: 1 job(s) running"
    ;;
fake_vanish)
    eq "wait succeeds" "$rc" 0
    eq "done as attempt 2" "$(q "SELECT attempt || ',' || status FROM v_results")" "2,done"
    q "SELECT state || ': ' || error FROM attempts WHERE attempt = 1" >"$T/a1.txt"
    contains "the vanished attempt is given up" "$T/a1.txt" "lost: agent fake no longer runs it and holds no result for it"
    ;;
fake_foreign_spooled)
    # back listing only another store's result of that job and attempt:
    # not taken for this job's (it waited for it, then lost it to the
    # heartbeat check, before JobRef.store_id)
    eq "wait succeeds" "$rc" 0
    eq "done as attempt 2" "$(q "SELECT attempt || ',' || status FROM v_results")" "2,done"
    q "SELECT state || ': ' || error FROM attempts WHERE attempt = 1" >"$T/a1.txt"
    contains "attempt 1 lost" "$T/a1.txt" "lost: agent fake came back without it"
    ;;
fake_stop_back)
    # stopped with the result in its spool, back within the grace with it:
    # the attempt is kept, not run again elsewhere
    eq "wait succeeds" "$rc" 0
    eq "done as attempt 1" "$(q "SELECT attempt || ',' || status FROM v_results")" "1,done"
    eq "one attempt" "$(q "SELECT count(*) FROM attempts")" 1
    contains "said" "$T/coord.log" "agent fake stops; 0 job(s) back to the queue, 1 wait for the result it holds"
    ;;
*) fail "unknown case $case" ;;
esac
echo ok
