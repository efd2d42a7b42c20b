#!/usr/bin/env bash
# Faults (CASE), each ending with assert_exactly_once: every job ended once
# (done, or failed with its reason) and every result an agent saw
# acknowledged is in the store, once. (SIGKILL of an agent and of the
# coordinator mid-sweep are tests/control/it_agent_kill.sh and
# it_coord_kill.sh, which end with the same assertion; the partition is
# it_partition.sh.)
#   worker_kill  SIGKILL of a worker mid-job: the job fails as crashed, the
#                agent lives on and runs the next job
#   worker_hang  a worker that hangs (SIGSTOP: deaf to SIGTERM) past its
#                time limit is killed after the grace period; the job fails
#                as timed out
#   coord_storm  the coordinator SIGKILLed three times while 4 agents with 4
#                slots each stream results of 200 short jobs, restarted each
#                time: acknowledged results are never lost, none doubled
#   disk_full    the coordinator's store on a small tmpfs fills up while
#                results arrive: nothing is acknowledged that is not
#                committed, the agents keep their results and resend, and once
#                there is room every result lands once (--sync group, the
#                default; disk_full_sync_full: the same with --sync full)
source "$(dirname "$0")/lib.sh" "$1" "$2"
case=${3:?case}

worker_of() { pgrep -P "${AGENT_PID[$1]}" | head -n 1; }

case "$case" in
worker_kill)
    start_coord
    start_agent a1
    wait_nodes 1
    sweep=$(submit --kind sleep --param duration_ms=5000 --name victim)
    wait_running "$sweep" 1
    w=$(worker_of a1)
    [ -n "$w" ] || fail "no worker under the agent"
    kill -KILL "$w"
    "$GB" wait "$sweep" --quiet --timeout 20
    eq "wait fails" "$?" 1
    eq "the job failed once, as crashed" "$(q "SELECT v.status || ',' || r.status || ',' || r.exit_code FROM v_results v JOIN results r USING (job_id, attempt)")" "failed,crashed,-9"
    q "SELECT error FROM v_results" >"$T/err.txt"
    contains "reason kept" "$T/err.txt" "worker killed by signal 9"
    eq "not retried (a worker failure is a result)" "$(q "SELECT count(*) FROM attempts")" 1
    kill -0 "${AGENT_PID[a1]}" || fail "the agent died with its worker"
    next=$(submit --kind sleep --param duration_ms=10)
    check "the agent runs the next job" "$GB" wait "$next" --quiet
    assert_exactly_once 2
    ;;
worker_hang)
    start_coord
    start_agent a1    # --kill-grace-ms 500 (lib.sh)
    wait_nodes 1
    sweep=$(submit --kind sleep --param duration_ms=60000 --timeout 1 --name hang)
    wait_running "$sweep" 1
    w=$(worker_of a1)
    [ -n "$w" ] || fail "no worker under the agent"
    kill -STOP "$w"
    t0=$(date +%s%N)
    "$GB" wait "$sweep" --quiet --timeout 20
    eq "wait fails" "$?" 1
    t1=$(date +%s%N)
    eq "the job failed once, as timed out" "$(q "SELECT v.status || ',' || r.status FROM v_results v JOIN results r USING (job_id, attempt)")" "failed,timeout"
    q "SELECT error FROM v_results" >"$T/err.txt"
    contains "reason kept" "$T/err.txt" "timed out after 1 s (worker killed)"
    # limit 1 s + grace 0.5 s, plus reporting; well under the worker's 60 s
    eq "ended within the limit and the grace" "$(q "SELECT (julianday(finished_at) - julianday(started_at)) * 86400 < 4 FROM results")" 1
    [ $(( (t1 - t0) / 1000000 )) -lt 10000 ] || fail "the hung worker held the job for $(( (t1 - t0) / 1000000 )) ms"
    kill -0 "$w" 2>/dev/null && fail "the hung worker $w is still there"
    assert_exactly_once 1
    ;;
coord_storm)
    start_coord
    for a in a1 a2 a3 a4; do start_agent $a --slots 4; done
    wait_nodes 4
    sweep=$(submit --kind sleep --param duration_ms=30 --repeat 200 --name storm)
    for round in 1 2 3; do
        for _ in $(seq 400); do
            [ "$(q "SELECT count(*) FROM results")" -ge $((round * 40)) ] && break
            sleep 0.02
        done
        kill -KILL "$COORD_PID"
        wait "$COORD_PID" 2>/dev/null
        sleep 0.3   # results pile up in the spools meanwhile
        start_coord
    done
    check "the sweep finishes" "$GB" wait "$sweep" --quiet --timeout 60
    eq "all done" "$(q "SELECT count(*) FROM v_results WHERE status = 'done'")" 200
    [ "$(grep -c "resumed:" "$T/coord.log")" = 3 ] || fail "the coordinator did not resume three times"
    assert_exactly_once 200
    ;;
disk_full | disk_full_sync_full)
    sync=group
    [ "$case" = disk_full_sync_full ] && sync=full
    mkdir -p "$T/dbfs"
    if ! mount -t tmpfs -o size=3m gb-test-dbfs "$T/dbfs" 2>"$T/mount.err"; then
        echo "SKIP: cannot mount a tmpfs here ($(cat "$T/mount.err")); the disk-full test needs root" >&2
        exit 77
    fi
    trap 'rc=$?; umount -l "$T/dbfs" 2>/dev/null; (exit $rc); cleanup' EXIT
    rm -f "$T/gb.db"; ln -s "$T/dbfs/gb.db" "$T/gb.db"   # q() reads $T/gb.db
    start_coord --db "$T/dbfs/gb.db" --sync "$sync"
    start_agent a1 --slots 2
    start_agent a2 --slots 2
    wait_nodes 2
    sweep=$(submit --kind sleep --param duration_ms=800 --repeat 16 --name full)
    # the first four results are in, the next four jobs run: fill the disk
    for _ in $(seq 200); do [ "$(q "SELECT count(*) FROM results")" -ge 4 ] && break; sleep 0.05; done
    wait_running "$sweep" 4
    # empty the WAL (a WAL keeps its size and is reused once checkpointed:
    # commits that fit in it would not need the disk), then fill the file
    # system to the last block
    q "PRAGMA wal_checkpoint(TRUNCATE)" >/dev/null
    dd if=/dev/zero of="$T/dbfs/filler" bs=4k >/dev/null 2>&1
    full_at=$(q "SELECT count(*) FROM results")
    for _ in $(seq 100); do grep -q "commit failed" "$T/coord.log" && break; sleep 0.05; done
    contains "the failed commit is logged" "$T/coord.log" "database or disk is full"
    contains "... and nothing of it acknowledged" "$T/coord.log" "not acknowledged (their agents resend)"
    # the running jobs end meanwhile: their results wait in the spools
    for _ in $(seq 200); do
        [ "$(find "$T/a1/spool" "$T/a2/spool" -name 'result-*.pb' | wc -l)" -ge 2 ] && break
        sleep 0.05
    done
    sleep 0.5   # resent at least once, refused again
    find "$T/a1/spool" "$T/a2/spool" -name 'result-*.pb' | sed 's/.*result-\([0-9]*\)-\([0-9]*\)\.pb$/\1,\2/' >"$T/held.txt"
    held=$(wc -l <"$T/held.txt")
    [ "$held" -ge 1 ] || fail "no result waits in an agent's spool while the disk is full"
    stored=$(q "SELECT count(*) FROM results")
    [ "$stored" -le "$((full_at + 1))" ] || fail "$stored results stored on a full disk (had $full_at)"
    kill -0 "$COORD_PID" || fail "the coordinator died on a full disk"
    echo "disk full: $stored result(s) stored, $held waiting in the agents' spools"
    rm -f "$T/dbfs/filler"
    check "the sweep finishes once there is room" "$GB" wait "$sweep" --quiet --timeout 60
    eq "all done" "$(q "SELECT count(*) FROM v_results WHERE status = 'done'")" 16
    for ja in $(cat "$T/held.txt"); do
        eq "the held result of job,attempt $ja landed once" "$(q "SELECT count(*) FROM results WHERE job_id = ${ja%,*} AND attempt = ${ja#*,}")" 1
    done
    assert_exactly_once 16
    ;;
checker)
    # the assertion itself: it passes on a clean run and fails on each
    # fault injected into the store afterwards
    start_coord
    start_agent a1
    wait_nodes 1
    sweep=$(submit --kind sleep --param duration_ms=10 --repeat 2)
    check "the sweep finishes" "$GB" wait "$sweep" --quiet
    assert_exactly_once 2
    kill -TERM "$COORD_PID"; wait "$COORD_PID" 2>/dev/null
    cp "$T/gb.db" "$T/clean.db"
    q "DELETE FROM samples WHERE job_id = 1; DELETE FROM results WHERE job_id = 1"
    (assert_exactly_once 2) >"$T/c0.log" 2>&1 && fail "a lost result went unnoticed"
    contains "lost result named" "$T/c0.log" "a done job has an ok result of its final attempt"
    # the same loss, with the job's row made to look failed: the agent's
    # acknowledgement still tells
    q "UPDATE jobs SET state = 'failed', error = 'x' WHERE job_id = 1"
    (assert_exactly_once 2) >"$T/c1.log" 2>&1 && fail "a lost acknowledged result went unnoticed"
    contains "lost result named" "$T/c1.log" "acknowledged but not stored: job,attempt 1,1"
    cp "$T/clean.db" "$T/gb.db"
    q "INSERT INTO attempts (job_id, attempt, agent_id, backend, state, assigned_at)
         SELECT job_id, 2, agent_id, backend, 'done', assigned_at FROM attempts WHERE job_id = 1;
       CREATE TEMP TABLE t AS SELECT * FROM results WHERE job_id = 1; UPDATE t SET attempt = 2;
       INSERT INTO results SELECT * FROM t"
    (assert_exactly_once 2) >"$T/c2.log" 2>&1 && fail "a doubled result went unnoticed"
    contains "doubled result named" "$T/c2.log" "results of other attempts are superseded"
    cp "$T/clean.db" "$T/gb.db"
    q "UPDATE jobs SET state = 'running' WHERE job_id = 2"
    (assert_exactly_once 2) >"$T/c3.log" 2>&1 && fail "an unfinished job went unnoticed"
    contains "unfinished job named" "$T/c3.log" "every job ended"
    cp "$T/clean.db" "$T/gb.db"
    (assert_exactly_once 3) >"$T/c4.log" 2>&1 && fail "a missing job went unnoticed"
    touch "$T/a1/spool/result-9-1.pb"
    (assert_exactly_once 2) >"$T/c5.log" 2>&1 && fail "a result left in a spool went unnoticed"
    contains "spool named" "$T/c5.log" "spool of a1 empty"
    rm "$T/a1/spool/result-9-1.pb"
    assert_exactly_once 2
    ;;
*) fail "unknown case $case" ;;
esac
echo ok
