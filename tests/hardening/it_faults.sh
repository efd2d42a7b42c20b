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
#   store_damaged a store SQLite finds damaged: the coordinator stops at the
#                first error, says how to recover, writes nothing more
#   disk_full_requests
#                a submit and a sweep's cancel (one statement for all its
#                queued jobs) on a full disk: refused with why, nothing of
#                them stored or forgotten; with room, the same requests work
#   disk_full_multinode
#                the disk fills while a two-node job is mid-rendezvous, and
#                again while it is finishing: each failed commit gives the
#                attempt up once it can be committed (the rendezvous lived in
#                memory the reload replaced), without using one up; no start
#                or cancel goes out before that commit; the ranks' reports
#                are acknowledged only once stored; the third attempt runs
#   agent_spool_full
#                the agent's spool (its state dir's spool/, a 64 KiB tmpfs)
#                is full when a job ends: the result is sent from memory
#                and stored, the measurement is not lost; once acknowledged
#                nothing is left in memory or on disk. Again with the
#                coordinator down: spooled once there is room, it survives
#                the agent's SIGKILL
#   agent_stop_unspooled
#                the agent stopped (SIGTERM) while a result is held only in
#                memory (spool full, coordinator down): saved as a spool
#                entry in $TMPDIR/gpubench-state-AGENT_ID (a state dir of
#                the agent's id), said, exit status 1; moved into the spool,
#                it is sent and stored once; with "link" that name is
#                taken (a link to someone's directory): saved beside it
#   agent_spool_unsynced
#                the spool's directory cannot be synced when a job ends (its
#                read permission taken, so the fsync's open fails, as a
#                failing disk's fsync would): the entry is renamed into
#                place, the result counted as not spooled and sent from
#                memory; once acknowledged its file is deleted all the same
#                (it stayed until the agent's next start, which sent the
#                result again)
#   agent_taken_unspooled
#                a result waiting for a coordinator that is down when the
#                state dir is removed and taken by a second agent: the first
#                saves it there too and stops (exit 1); an agent started on
#                the saved directory delivers it, stored once
#   worker_disk_full
#                the agent's disk (its whole state dir) fills while a job
#                runs: the worker writes its record into the blocks reserved
#                at its start (cutting the file to the record frees the rest,
#                where the agent's spool then fits), the result is stored;
#                the next job is refused before it starts (no room
#                to reserve), not lost at its end, and runs once there is room
#   state_dir_removed
#                the agent's state dir removed (rm -rf) while a job runs, and
#                again while a result waits for a coordinator that is down,
#                then only its files (as a tmp cleaner does):
#                the agent makes it again (lock, same id, spool entry from
#                its copy in memory, the job's directory) and both results
#                are stored with their records; a second agent on the
#                directory is refused
#   state_dir_lost
#                the same with --result-memory-mb 0 (no copies in memory):
#                the removed result is lost, and its job ends failed saying
#                so instead of waiting for ever
#   state_dir_taken
#                the state dir removed and a second agent started on it at
#                once: exactly one agent keeps it (whichever locks first;
#                the other stops saying why)
#   store_removed
#                the coordinator's store removed (rm gb.db*) while it runs:
#                written back from the open store (VACUUM INTO) within a
#                heartbeat, with every result, and used again; a second
#                coordinator on it is refused (--sync group; store_removed_full:
#                --sync full, and only the file removed, its WAL left)
#   wal_removed  the store's WAL and shared-memory files removed (rm
#                gb.db-wal gb.db-shm) while it runs, a `sqlite3` reading the
#                store meanwhile: within a heartbeat everything in the WAL is
#                checkpointed into the store's file and the store opened
#                again; the reader keeps working; a result that comes after
#                survives the coordinator's SIGKILL (before, it lived in the
#                WAL that had no name: lost, after being acknowledged)
#                (--sync group; wal_removed_full: --sync full, where nothing
#                else checkpoints, so `sqlite3` read an empty file)
#   wal_removed_writer
#                the same (--sync full) with another process writing to the
#                store before the repair: its writes, made into a WAL of
#                its own against the file without what ours held, are set
#                aside (PATH-wal.aside-TIME), not applied over the store
#                (a close of the writer's in the repair's own moment, between
#                the coordinator's close and reopen, once checkpointed it
#                over the store: control_test_store_hold_* force that one)
#   wal_removed_disk_full
#                the same (--sync full) on a full disk: the checkpoint cannot
#                grow the store's file; said, the coordinator goes on and
#                repairs it once there is room (wal_removed_stop: stopped
#                before there is room, it saves the store in $TMPDIR and
#                exits 1; a coordinator on the saved store finds the result)
#   store_removed_disk_full
#                the same on a full disk (the store on a 3 MiB tmpfs behind a
#                symbolic link, as --db): it cannot be written back, the
#                coordinator says so and goes on (stopping would lose it: its
#                open file is the only copy); once there is room it is
#                written back beside the link's target, every result kept
#   store_dir_removed
#                the store removed with its directory (rm -rf): the
#                directory is made again (with its mode, 0750) and the store
#                written back
#   store_dir_blocked
#                the store's directory removed and a file put in its place:
#                it cannot be made again, said every 30 s; a stop saves the
#                store in $TMPDIR (exit 1), every result in it
#   store_removed_stop
#                the coordinator stopped (SIGTERM) while a store removed on a
#                full disk could not be written back: it is saved in $TMPDIR
#                (NAME.saved-TIME), said, exit status 1; a coordinator on the
#                saved store finds every result
#   store_watched
#                a heartbeat of 30 s: the store's -wal and -shm removed, then
#                the store itself; each seen within a second (the directory
#                is watched with inotify), not at the next heartbeat, and
#                sqlite3 reads the result after each repair
#   store_replaced
#                another file moved over the store while the coordinator
#                runs: what it stored is saved beside it (.saved-TIME), the
#                new file is left alone, the coordinator stops (exit 1); the
#                result that waited is stored once a coordinator runs again
#   store_taken  the store removed and a second coordinator started on the
#                path at once: exactly one goes on (whichever locks first);
#                when the new one does (its file there before the old one
#                looked, or made while the old one copied its store: CI hit
#                that one), the old one saves what it stored and stops
#                without touching the new store's WAL (integrity_check)
#   sick_node    a node that cannot start workers refuses its jobs to a
#                healthy one instead of failing them
#   sick_alone   the only node cannot start workers: offered no job until its
#                back-off ends, `nodes` says why, the job runs once it can
#   disk_full_stale
#                an agent frozen (SIGSTOP) past the lost window while its job
#                runs again elsewhere, thawed on a full disk: the turn of its
#                Hello is rolled back, with the Cancel of its stale attempt,
#                but its registration stands (the Welcome went at once). Its
#                heartbeats list the stale attempt, which is stopped on them
#                (only a Hello stopped one: it ran to its end, holding the
#                node, long after there was room again)
source "$(dirname "$0")/lib.sh" "$1" "$2"
case=${3:?case}

worker_of() { pgrep -P "${AGENT_PID[$1]}" | head -n 1; }

# small_disk DIR SIZE: a tmpfs of SIZE at DIR, unmounted at the end (the
# test is skipped where none can be mounted: it needs root)
small_disk() {
    mkdir -p "$1"
    if ! mount -t tmpfs -o "size=$2" gb-test-disk "$1" 2>"$T/mount.err"; then
        echo "SKIP: cannot mount a tmpfs here ($(cat "$T/mount.err")); this test needs root" >&2
        exit 77
    fi
    trap "rc=\$?; umount -l '$1' 2>/dev/null; (exit \$rc); cleanup" EXIT
}

# mount_dbfs: a 3 MiB tmpfs at $T/dbfs for the store, $T/gb.db pointing
# into it (q reads $T/gb.db); exits 77 (skip) where mounting is not allowed
mount_dbfs() {
    small_disk "$T/dbfs" 3m
    rm -f "$T/gb.db"
    ln -s "$T/dbfs/gb.db" "$T/gb.db"
}

# fill_disk: empty the WAL (a WAL keeps its size and is reused once
# checkpointed: commits that fit in it would not need the disk), then fill
# the file system to the last block; twice, because the coordinator's
# commits between the first emptying and the fill grow the WAL again (under
# ASan on a busy machine, by two results' worth)
fill_disk() {
    q "PRAGMA wal_checkpoint(TRUNCATE)" >/dev/null
    dd if=/dev/zero of="$T/dbfs/filler" bs=4k >/dev/null 2>&1
    q "PRAGMA wal_checkpoint(TRUNCATE)" >/dev/null
    dd if=/dev/zero of="$T/dbfs/filler" bs=4k oflag=append conv=notrunc >/dev/null 2>&1
}

# alive PID...: how many of the processes live
alive() {
    local n=0 p
    for p in "$@"; do kill -0 "$p" 2>/dev/null && n=$((n + 1)); done
    echo "$n"
}

# one_alive PID PID: until only one of the two lives (5 s); says how many do
one_alive() {
    local n
    for _ in $(seq 100); do
        n=$(alive "$@")
        [ "$n" = 1 ] && break
        sleep 0.05
    done
    echo "$n"
}

# stopped_worker AGENT: the pid of the agent's worker once it has stopped
# itself (SIGSTOP; state T), 10 s at most
stopped_worker() {
    local w
    for _ in $(seq 200); do
        w=$(worker_of "$1")
        [ -n "$w" ] && [ "$(ps -o stat= -p "$w" | cut -c1)" = T ] && { echo "$w"; return 0; }
        sleep 0.05
    done
    fail "no stopped worker under $1"
}

# first_job COORD_ARGS...: a coordinator (with the arguments), agent a1
# and one job done
first_job() {
    start_coord "$@"
    start_agent a1
    wait_nodes 1
    local sweep
    sweep=$(submit --kind sleep --param duration_ms=50 --max-attempts 1)
    check "a first job" "$GB" wait "$sweep" --quiet --timeout 30
}

# second_job_survives_kill: a second job done, the coordinator SIGKILLed
# right after: the store is whole and both results are in it, once
second_job_survives_kill() {
    local sweep
    sweep=$(submit --kind sleep --param duration_ms=50 --max-attempts 1)
    check "a second job" "$GB" wait "$sweep" --quiet --timeout 30
    kill -KILL "$COORD_PID"
    wait "$COORD_PID" 2>/dev/null
    eq "the store is whole after a SIGKILL" "$(sqlite3 "$T/gb.db" "PRAGMA integrity_check")" ok
    start_coord
    assert_exactly_once 2
}

# stop_saves_store WHAT: SIGTERM to the coordinator, which cannot keep its
# store where it belongs: it exits 1 saying "WHAT: everything this
# coordinator stored is saved in $T/rescue/gb.db.saved-..." (its TMPDIR),
# and the saved store has the one result; sets SAVED
stop_saves_store() {
    kill -TERM "$COORD_PID"
    wait "$COORD_PID"
    eq "the coordinator's exit status says so" "$?" 1
    contains "says where the store is" "$T/coord.log" "$1: everything this coordinator stored is saved in $T/rescue/gb.db.saved-"
    SAVED=$(ls "$T"/rescue/gb.db.saved-* | head -n 1)
    eq "the saved store has the result" "$(sqlite3 "$SAVED" "SELECT count(*) FROM results WHERE status = 'ok'")" 1
    eq "... and is whole" "$(sqlite3 "$SAVED" "PRAGMA integrity_check")" ok
}

# ends_while_down AGENT [MAX_ATTEMPTS]: submits a job (1 attempt unless
# said) whose worker stops itself, stops the
# coordinator, then lets the worker go on: its result comes while nobody is
# there to take it; sets SWEEP. (A job of a fixed length raced the test's
# polls under load: its result was stored before the coordinator stopped.)
ends_while_down() {
    local w
    SWEEP=$(submit --kind sleep --param duration_ms=0 --param signal=19 --max-attempts "${2:-1}")
    w=$(stopped_worker "$1")
    kill -TERM "$COORD_PID"
    wait "$COORD_PID" 2>/dev/null
    kill -CONT "$w"
}

# spooled_while_down AGENT JOB: ends_while_down, then waits (5 s) for the
# result in AGENT's spool; sets SWEEP and SPOOLED (the entry's path). JOB is
# the job id the submission gets.
spooled_while_down() {
    ends_while_down "$1"
    SPOOLED="$T/$1/spool/result-$2-1.pb"
    for _ in $(seq 100); do [ -s "$SPOOLED" ] && break; sleep 0.05; done
    [ -s "$SPOOLED" ] || fail "job $2: nothing spooled"
}

case "$case" in
agent_spool_full)
    small_disk "$T/a1/spool" 64k
    start_coord
    start_agent a1
    wait_nodes 1
    dd if=/dev/zero of="$T/a1/spool/filler" bs=4k >/dev/null 2>&1
    sweep=$(submit --kind sleep --param duration_ms=50 --max-attempts 1)
    check "the job ends done" "$GB" wait "$sweep" --quiet --timeout 30
    contains "the agent says what it did" "$T/a1.log" "sending it from memory"
    eq "the result is stored" "$(q "SELECT status FROM results")" ok
    eq "one attempt" "$(q "SELECT count(*) FROM attempts")" 1
    # again with the coordinator down: held in memory, spooled once there
    # is room, so it survives the agent's SIGKILL
    ends_while_down a1
    sweep2=$SWEEP
    for _ in $(seq 100); do [ "$(grep -c "sending it from memory" "$T/a1.log")" = 2 ] && break; sleep 0.05; done
    eq "held in memory" "$(grep -c "sending it from memory" "$T/a1.log")" 2
    rm -f "$T/a1/spool/filler"
    for _ in $(seq 100); do [ -s "$T/a1/spool/result-2-1.pb" ] && break; sleep 0.05; done
    contains "spooled once there is room" "$T/a1.log" "the result of job 2 attempt 1, held in memory, is in the spool now"
    kill -KILL "${AGENT_PID[a1]}"; wait "${AGENT_PID[a1]}" 2>/dev/null
    start_agent a1
    start_coord
    check "it lands after the agent's restart" "$GB" wait "$sweep2" --quiet --timeout 30
    q "SELECT record FROM results WHERE job_id = 2" >"$T/rec2.txt"
    contains "... with its record" "$T/rec2.txt" '"slept_ms":'
    assert_exactly_once 2
    ;;
agent_stop_unspooled)
    # a result held only in memory (spool full, coordinator down) when the
    # agent is stopped: saved as a spool entry in $TMPDIR, moved back, sent
    small_disk "$T/a1/spool" 64k
    mkdir "$T/rescue"
    start_coord
    TMPDIR="$T/rescue" start_agent a1
    wait_nodes 1
    id=$(cat "$T/a1/agent_id")
    dd if=/dev/zero of="$T/a1/spool/filler" bs=4k >/dev/null 2>&1
    ends_while_down a1
    for _ in $(seq 100); do grep -q "sending it from memory" "$T/a1.log" && break; sleep 0.05; done
    contains "held in memory" "$T/a1.log" "sending it from memory"
    r="$T/rescue/gpubench-state-$id"
    if [ "${4:-}" = link ]; then
        # its name is known to anyone: someone made it first, a link to
        # a directory of theirs. The agent makes one of its own beside it
        mkdir "$T/theirs"
        ln -s "$T/theirs" "$r"
    fi
    kill -TERM "${AGENT_PID[a1]}"
    wait "${AGENT_PID[a1]}"
    eq "the agent's exit status says so" "$?" 1
    contains "says where it is" "$T/a1.log" "spool: the result of job 1 attempt 1, held only in memory, cannot be spooled at the stop"
    if [ "${4:-}" = link ]; then
        [ -z "$(ls -A "$T/theirs")" ] || fail "written through the link: $(ls -A "$T/theirs")"
        contains "says why not there" "$T/a1.log" "spool: $r is a symbolic link: the results the stop saves go to $r-"
        r=$(ls -d "$r"-??????)
        eq "... a directory of its own" "$(stat -c '%F %a' "$r")" "directory 700"
    fi
    contains "... and what to do" "$T/a1.log" "saved in $r, a state directory of this agent's id: \`gpubench agent --state-dir $r\` (with the other options) sends it; or move its spool/result-*.pb into $T/a1/spool/ before the agent starts again"
    [ -s "$r/spool/result-1-1.pb" ] || fail "nothing saved"
    eq "... with the agent's id" "$(cat "$r/agent_id")" "$id"
    rm -f "$T/a1/spool/filler"
    mv "$r"/spool/result-*.pb "$T/a1/spool/"
    start_agent a1
    start_coord
    check "it lands" "$GB" wait "$SWEEP" --quiet --timeout 30
    q "SELECT record FROM results WHERE job_id = 1" >"$T/rec1.txt"
    contains "... with its record" "$T/rec1.txt" '"slept_ms":'
    assert_exactly_once 1
    ;;
agent_spool_unsynced)
    # root opens a directory it may not read: the agent runs without
    # CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH there (setpriv)
    printf '#!/bin/sh\nexec %s "%s" "$@"\n' \
        "$([ "$(id -u)" = 0 ] && echo "setpriv --inh-caps -dac_override,-dac_read_search --bounding-set -dac_override,-dac_read_search")" \
        "$GB" >"$T/gb-nodac"
    chmod +x "$T/gb-nodac"
    "$T/gb-nodac" version >/dev/null 2>&1 || { echo "SKIP: cannot drop CAP_DAC_OVERRIDE here (setpriv)" >&2; exit 77; }
    start_coord
    GB="$T/gb-nodac" start_agent a1
    wait_nodes 1
    chmod 0300 "$T/a1/spool"
    sweep=$(submit --kind sleep --param duration_ms=50 --max-attempts 1)
    check "the job ends done" "$GB" wait "$sweep" --quiet --timeout 30
    contains "the spool's directory was not synced" "$T/a1.log" "cannot fsync the directory of $T/a1/spool/result-1-1.pb"
    for _ in $(seq 100); do grep -q "result of job 1 attempt 1 acknowledged" "$T/a1.log" && break; sleep 0.05; done
    contains "the result is acknowledged" "$T/a1.log" "result of job 1 attempt 1 acknowledged"
    chmod 0700 "$T/a1/spool"
    eq "nothing left in the spool once acknowledged" "$(ls "$T/a1/spool")" ""
    kill -TERM "${AGENT_PID[a1]}"
    wait "${AGENT_PID[a1]}"
    start_agent a1
    wait_nodes 1
    eq "nothing sent again at the next start" "$(grep -cE "resending [0-9]+ spooled result" "$T/a1.log")" 0
    assert_exactly_once 1
    ;;
agent_taken_unspooled)
    # a result waiting for a coordinator that is down, the agent's state dir
    # removed and taken by a second agent before the first looks (it is
    # stopped meanwhile): the first saves the result in a state dir of its
    # id under $TMPDIR and stops; an agent on that directory delivers it
    mkdir "$T/rescue"
    start_coord
    TMPDIR="$T/rescue" start_agent a1
    wait_nodes 1
    id=$(cat "$T/a1/agent_id")
    spooled_while_down a1 1
    kill -STOP "${AGENT_PID[a1]}"
    remove_whole "$T/a1"
    start_agent a2 --state-dir "$T/a1"
    for _ in $(seq 100); do [ -s "$T/a1/agent_id" ] && break; sleep 0.05; done
    [ "$(cat "$T/a1/agent_id")" != "$id" ] || fail "the second agent has the first one's id"
    kill -CONT "${AGENT_PID[a1]}"
    wait "${AGENT_PID[a1]}"
    eq "the first agent stops, exit status 1" "$?" 1
    r="$T/rescue/gpubench-state-$id"
    contains "says where the result is" "$T/a1.log" "spool: the result of job 1 attempt 1, held only in memory, cannot be spooled at the stop (the state directory is another agent's now): saved in $r, a state directory of this agent's id: \`gpubench agent --state-dir $r\` (with the other options) sends it"
    [ -s "$r/spool/result-1-1.pb" ] || fail "nothing saved"
    kill -TERM "${AGENT_PID[a2]}"
    wait "${AGENT_PID[a2]}"
    start_coord
    "$GB" agent --connect "$LISTEN" --state-dir "$r" --name a1 --heartbeat-ms $HB \
        --lost-after $LOST >>"$T/a1.log" 2>&1 &
    AGENT_PID[a1]=$!
    PIDS+=("$!")
    check "it lands, sent by an agent on the saved directory" "$GB" wait "$SWEEP" --quiet --timeout 30
    q "SELECT record FROM results WHERE job_id = 1" >"$T/rec1.txt"
    contains "... with its record" "$T/rec1.txt" '"slept_ms":'
    assert_exactly_once 1
    ;;
worker_disk_full)
    small_disk "$T/a1" 4m
    start_coord
    start_agent a1
    wait_nodes 1
    sweep=$(submit --kind sleep --param duration_ms=1500 --max-attempts 1)
    wait_running "$sweep" 1
    dd if=/dev/zero of="$T/a1/filler" bs=4k >/dev/null 2>&1
    check "the job ends done" "$GB" wait "$sweep" --quiet --timeout 30
    eq "the measurement is stored" "$(q "SELECT status FROM results")" ok
    q "SELECT record FROM results" >"$T/rec.txt"
    contains "... with its record" "$T/rec.txt" '"slept_ms":'
    # fill again (the first job's reservation was freed at its end), then
    # free 256 KiB: room for a job file, not for a record's 512 KiB
    dd if=/dev/zero of="$T/a1/filler" bs=4k oflag=append conv=notrunc >/dev/null 2>&1
    truncate -s -256K "$T/a1/filler"
    sweep2=$(submit --kind sleep --param duration_ms=10 --max-attempts 1)
    for _ in $(seq 100); do grep -q "cannot start a worker" "$T/a1.log" && break; sleep 0.05; done
    contains "the next job is refused at its start, for want of room for its record" "$T/a1.log" \
        "cannot start a worker: no room for the result record (512 KiB) in $T/a1/"
    for _ in $(seq 100); do [ "$(sweep_field "$sweep2" queued)" = 1 ] && break; sleep 0.05; done
    eq "... and waits queued" "$(sweep_field "$sweep2" queued)" 1
    rm -f "$T/a1/filler"
    check "it runs once there is room" "$GB" wait "$sweep2" --quiet --timeout 30
    eq "both done" "$(q "SELECT count(*) FROM v_results WHERE status = 'done'")" 2
    assert_exactly_once 2
    ;;
state_dir_removed)
    start_coord
    start_agent a1
    wait_nodes 1
    id=$(cat "$T/a1/agent_id")
    # workers stop themselves before they end and go on when the test says
    # (a job of a fixed length raced the test's polls under load)
    sweep=$(submit --kind sleep --param duration_ms=0 --param signal=19 --max-attempts 1)
    w=$(stopped_worker a1)
    remove_whole "$T/a1"
    for _ in $(seq 100); do [ -f "$T/a1/agent_id" ] && break; sleep 0.05; done
    contains "the agent says so" "$T/a1.log" "state directory $T/a1 was removed while the agent ran: made it again"
    eq "the same id again" "$(cat "$T/a1/agent_id")" "$id"
    run_for 10 "$GB" agent --connect "$LISTEN" --state-dir "$T/a1" --name other >"$T/other.log" 2>&1
    eq "a second agent on it is refused" "$?" 1
    contains "... because it is locked" "$T/other.log" "is in use by another agent"
    kill -CONT "$w"
    check "the running job ends done" "$GB" wait "$sweep" --quiet --timeout 30
    contains "its directory was made again" "$T/a1.log" "the directory of job 1 was removed while it ran"
    q "SELECT record FROM results WHERE job_id = 1" >"$T/rec1.txt"
    contains "... and its record stored" "$T/rec1.txt" '"slept_ms":'
    # a result waiting in the spool for a coordinator that is down
    spooled_while_down a1 2
    sweep2=$SWEEP f=$SPOOLED
    remove_whole "$T/a1"
    for _ in $(seq 100); do [ -s "$f" ] && break; sleep 0.05; done
    [ -s "$f" ] || fail "the spool entry was not written again"
    contains "the agent says so" "$T/a1.log" "the result of job 2 attempt 1 was removed from the spool: written again from memory"
    # a tmp cleaner removes old files, not directories: the entry alone
    sleep 0.3
    rm -f "$f" "$T/a1/lock" "$T/a1/agent_id"
    for _ in $(seq 100); do [ -s "$f" ] && [ -s "$T/a1/agent_id" ] && break; sleep 0.05; done
    [ -s "$f" ] || fail "the spool entry removed alone was not written again"
    eq "written again twice" "$(grep -c "job 2 attempt 1 was removed from the spool: written again" "$T/a1.log")" 2
    contains "the lock too" "$T/a1.log" "its lock file was removed: locked it again"
    eq "the same id again" "$(cat "$T/a1/agent_id")" "$id"
    start_coord
    check "the waiting result lands" "$GB" wait "$sweep2" --quiet --timeout 30
    q "SELECT record FROM results WHERE job_id = 2" >"$T/rec2.txt"
    contains "... with its record" "$T/rec2.txt" '"slept_ms":'
    for _ in $(seq 100); do [ -e "$f" ] || break; sleep 0.05; done
    [ -e "$f" ] && fail "the acknowledged result is still spooled"
    assert_exactly_once 2
    ;;
state_dir_lost)
    start_coord
    start_agent a1 --result-memory-mb 0
    wait_nodes 1
    spooled_while_down a1 1
    sweep=$SWEEP f=$SPOOLED
    remove_whole "$T/a1"
    for _ in $(seq 100); do grep -q "it is lost" "$T/a1.log" && break; sleep 0.05; done
    contains "the agent says so" "$T/a1.log" "the result of job 1 attempt 1 was removed from the spool and has no copy in memory: it is lost"
    sleep 0.5
    eq "... once" "$(grep -c "it is lost" "$T/a1.log")" 1
    start_coord
    "$GB" wait "$sweep" --quiet --timeout 20
    eq "the job ends failed" "$?" 1
    eq "why" "$(q "SELECT state || ',' || error FROM attempts WHERE job_id = 1")" \
        "lost,the agent's spooled result was removed before it was acknowledged (with its state directory?) and no copy was held in memory"
    eq "no result stored" "$(q "SELECT count(*) FROM results")" 0
    assert_exactly_once 1
    ;;
state_dir_taken)
    start_coord
    start_agent a1
    wait_nodes 1
    remove_whole "$T/a1"
    start_agent a2 --state-dir "$T/a1"
    eq "one agent keeps the directory" "$(one_alive "${AGENT_PID[a1]}" "${AGENT_PID[a2]}")" 1
    if kill -0 "${AGENT_PID[a1]}" 2>/dev/null; then
        contains "the new one is refused" "$T/a2.log" "is in use by another agent"
    else
        contains "the old one stops, saying why" "$T/a1.log" "another agent holds the new one: this agent stops"
    fi
    sleep 0.5
    eq "... and the other goes on" "$(alive "${AGENT_PID[a1]}" "${AGENT_PID[a2]}")" 1
    ;;
store_removed)
    start_coord ${4:+--sync "$4"}
    start_agent a1
    wait_nodes 1
    sweep=$(submit --kind sleep --param duration_ms=50 --max-attempts 1)
    check "a first job" "$GB" wait "$sweep" --quiet --timeout 30
    if [ "${4:-}" = full ]; then
        # the file alone: its WAL (with frames not yet checkpointed, no
        # syncer) stays beside it and must not be applied to the copy
        rm -f "$T/gb.db"
    else
        rm -f "$T/gb.db" "$T/gb.db-wal" "$T/gb.db-shm"
    fi
    for _ in $(seq 100); do grep -q "was removed while the coordinator ran" "$T/coord.log" && break; sleep 0.05; done
    contains "the coordinator says so" "$T/coord.log" "store $T/gb.db was removed while the coordinator ran: wrote it back from the open store"
    eq "the first result is there" "$(q "SELECT count(*) FROM results WHERE status = 'ok'")" 1
    ls "$T" | grep -q 'restore-' && fail "a restore file was left: $(ls "$T")"
    sweep2=$(submit --kind sleep --param duration_ms=50 --max-attempts 1)
    check "a second job" "$GB" wait "$sweep2" --quiet --timeout 30
    eq "both results stored" "$(q "SELECT count(*) FROM results WHERE status = 'ok'")" 2
    run_for 10 "$GB" coordinator --listen 'tcp://127.0.0.1:*' --control 'tcp://127.0.0.1:*' --db "$T/gb.db" >"$T/other.log" 2>&1
    eq "a second coordinator on it is refused" "$?" 1
    contains "... because it is locked" "$T/other.log" "is in use by another coordinator"
    kill -TERM "$COORD_PID"; wait "$COORD_PID"
    eq "the coordinator stops cleanly" "$?" 0
    eq "and the store is whole" "$(sqlite3 "$T/gb.db" "PRAGMA integrity_check")" ok
    start_coord
    assert_exactly_once 2
    ;;
wal_removed)
    first_job ${4:+--sync "$4"}
    rm -f "$T/gb.db-wal" "$T/gb.db-shm"
    # a reader that opens the store now (making new files at those names)
    # and stays across the coordinator's repair
    { echo "SELECT 'before', count(*) FROM results;"; sleep 3
      echo "SELECT 'after', count(*) FROM results;"; } |
        sqlite3 -batch -noheader -separator , -cmd ".timeout 5000" "$T/gb.db" >"$T/reader.out" 2>&1 &
    reader=$!
    for _ in $(seq 100); do grep -q "write-ahead log" "$T/coord.log" && break; sleep 0.05; done
    contains "the coordinator says so" "$T/coord.log" "store $T/gb.db: its write-ahead log ($T/gb.db-wal or -shm) was removed while the coordinator ran: wrote everything in it into the store and opened it again"
    eq "sqlite3 reads the first result" "$(q "SELECT count(*) FROM results WHERE status = 'ok'")" 1
    wait "$reader"
    # (its first query may come before the repair: with --sync full it then
    # reads the store's file without the WAL, where nothing is yet)
    eq "the reader reads on after the repair" "$(tail -n 1 "$T/reader.out")" "after,1"
    # the crash that lost a result that came after
    second_job_survives_kill
    ;;
store_watched)
    HB=30000
    first_job --sync full # its result is in the WAL alone, not in the file
    rm -f "$T/gb.db-wal" "$T/gb.db-shm"
    for _ in $(seq 100); do grep -q "write-ahead log" "$T/coord.log" && break; sleep 0.05; done
    contains "the WAL's removal seen within 5 s" "$T/coord.log" "store $T/gb.db: its write-ahead log ($T/gb.db-wal or -shm) was removed while the coordinator ran: wrote everything in it into the store and opened it again"
    eq "sqlite3 reads the result" "$(q "SELECT count(*) FROM results WHERE status = 'ok'")" 1
    rm -f "$T/gb.db" "$T/gb.db-wal" "$T/gb.db-shm"
    for _ in $(seq 100); do grep -q "wrote it back" "$T/coord.log" && break; sleep 0.05; done
    contains "the store's removal seen within 5 s" "$T/coord.log" "store $T/gb.db was removed while the coordinator ran: wrote it back from the open store and use it again"
    eq "sqlite3 reads the result again" "$(q "SELECT count(*) FROM results WHERE status = 'ok'")" 1
    ;;
wal_removed_writer)
    # --sync full: the store's file is a page or so, the store in the WAL
    first_job --sync full
    rm -f "$T/gb.db-wal" "$T/gb.db-shm"
    # another process writes to the store now: into a WAL of its own, made
    # against the file without what the coordinator's WAL holds (unless the
    # coordinator repaired it first: then it writes into the store)
    sqlite3 -cmd ".timeout 5000" "$T/gb.db" "CREATE TABLE mine(x); INSERT INTO mine VALUES (7)" ||
        fail "the writer failed"
    for _ in $(seq 100); do grep -q "wrote everything in it" "$T/coord.log" && break; sleep 0.05; done
    contains "repaired" "$T/coord.log" "was removed while the coordinator ran: wrote everything in it into the store and opened it again"
    # the file was held across the repair's close and reopen (gb_store_hold)
    grep -q "opening it again without" "$T/coord.log" && fail "the repair ran without holding the file"
    eq "the store is whole" "$(sqlite3 "$T/gb.db" "PRAGMA integrity_check")" ok
    eq "the first result is there" "$(q "SELECT count(*) FROM results WHERE status = 'ok'")" 1
    if grep -q "set aside in" "$T/coord.log"; then
        echo "the writer came before the repair: its WAL set aside"
        ls "$T"/gb.db-wal.aside-* >/dev/null 2>&1 || fail "nothing set aside"
        contains "said" "$T/coord.log" "store $T/gb.db: another process wrote to the store while the coordinator's write-ahead log had no name; what it wrote is set aside in $T/gb.db-wal.aside-"
    else
        echo "the repair came before the writer"
        eq "the writer's table is in the store" "$(q "SELECT x FROM mine")" 7
    fi
    second_job_survives_kill
    ;;
wal_removed_disk_full)
    # --sync full: nothing checkpoints but the coordinator's repair, so the
    # WAL holds the store (its file is a page or so) when the disk fills
    mount_dbfs
    mkdir "$T/rescue"
    TMPDIR="$T/rescue" first_job --sync full
    dd if=/dev/zero of="$T/dbfs/filler" bs=4k >/dev/null 2>&1
    rm -f "$T/dbfs/gb.db-wal" "$T/dbfs/gb.db-shm"
    real=$(cd "$T/dbfs" && pwd -P)/gb.db
    for _ in $(seq 100); do grep -q "cannot be written into the store yet" "$T/coord.log" && break; sleep 0.05; done
    contains "the coordinator says why and what to do" "$T/coord.log" "store $T/gb.db: its write-ahead log ($real-wal or -shm) was removed while the coordinator ran, and what it holds cannot be written into the store yet (database or disk is full): it lives only in this coordinator's open file until then (trying again at each heartbeat): make room, and do not stop the coordinator"
    kill -0 "$COORD_PID" || fail "the coordinator stopped"
    if [ "${4:-}" = stop ]; then
        # stopped now: what the nameless WAL holds would go with the process
        stop_saves_store "store $T/gb.db: its write-ahead log was removed while the coordinator ran and could not be written into the store"
        rm -f "$T/dbfs/filler" "$T/dbfs/gb.db-wal" "$T/dbfs/gb.db-shm"
        mv "$SAVED" "$T/dbfs/gb.db"
        start_coord
        assert_exactly_once 1
    else
        rm -f "$T/dbfs/filler"
        for _ in $(seq 100); do grep -q "wrote everything in it" "$T/coord.log" && break; sleep 0.05; done
        contains "repaired once there is room" "$T/coord.log" "store $T/gb.db: its write-ahead log ($real-wal or -shm) was removed while the coordinator ran: wrote everything in it into the store and opened it again"
        eq "the first result is there" "$(q "SELECT count(*) FROM results WHERE status = 'ok'")" 1
        second_job_survives_kill
    fi
    ;;
store_dir_removed)
    # the store in a directory of its own ($T/gb.db a link into it), removed
    # with the directory (rm -rf): the directory is made again
    mkdir -m 0750 "$T/sd"
    ln -s "$T/sd/gb.db" "$T/gb.db"
    first_job
    remove_whole "$T/sd"
    for _ in $(seq 100); do grep -q "wrote it back" "$T/coord.log" && break; sleep 0.05; done
    contains "the directory made again" "$T/coord.log" "store $T/gb.db was removed while the coordinator ran, with its directory: made $T/sd again (mode 0750, as it was)"
    eq "with its mode" "$(stat -c %a "$T/sd")" 750
    contains "the store written back" "$T/coord.log" "store $T/gb.db was removed while the coordinator ran: wrote it back from the open store and use it again"
    eq "the first result is there" "$(q "SELECT count(*) FROM results WHERE status = 'ok'")" 1
    second_job_survives_kill
    ;;
store_dir_blocked)
    # the store's directory removed and a file put where it was (the
    # coordinator stopped meanwhile, so it cannot look in between): the
    # directory cannot be made again, said; a stop saves the store in
    # $TMPDIR
    mkdir -p "$T/x/y" "$T/rescue"
    ln -s "$T/x/y/gb.db" "$T/gb.db"
    TMPDIR="$T/rescue" first_job
    kill -STOP "$COORD_PID"
    rm -rf "$T/x"
    touch "$T/x"
    kill -CONT "$COORD_PID"
    for _ in $(seq 100); do grep -q "with its directory, and" "$T/coord.log" && break; sleep 0.05; done
    contains "says why" "$T/coord.log" "store $T/gb.db was removed while the coordinator ran, with its directory, and cannot create directory $T/x/y: Not a directory: everything stored lives only in this coordinator's open file until it can be written back (trying again at each heartbeat): a stop saves it in \$TMPDIR or /tmp"
    stop_saves_store "store $T/gb.db was removed while the coordinator ran and could not be written back there"
    rm -f "$T/x"
    mkdir -p "$T/x/y"
    mv "$SAVED" "$T/x/y/gb.db"
    start_coord
    assert_exactly_once 1
    ;;
store_removed_stop)
    # removed on a full disk (not written back), then the coordinator is
    # stopped: the store, only an open file, is saved in $TMPDIR
    mount_dbfs
    mkdir "$T/rescue"
    TMPDIR="$T/rescue" first_job
    fill_disk
    rm -f "$T/dbfs/gb.db" "$T/dbfs/gb.db-wal" "$T/dbfs/gb.db-shm"
    for _ in $(seq 100); do grep -q "cannot copy the store" "$T/coord.log" && break; sleep 0.05; done
    contains "not written back" "$T/coord.log" "cannot copy the store into"
    stop_saves_store "store $T/gb.db was removed while the coordinator ran and could not be written back there"
    rm -f "$T/dbfs/filler"
    mv "$SAVED" "$T/dbfs/gb.db"
    start_coord
    assert_exactly_once 1
    ;;
store_removed_disk_full)
    mount_dbfs
    start_coord
    start_agent a1
    wait_nodes 1
    sweep=$(submit --kind sleep --param duration_ms=50 --max-attempts 1)
    check "a first job" "$GB" wait "$sweep" --quiet --timeout 30
    fill_disk
    rm -f "$T/dbfs/gb.db" "$T/dbfs/gb.db-wal" "$T/dbfs/gb.db-shm"
    for _ in $(seq 100); do grep -q "cannot copy the store" "$T/coord.log" && break; sleep 0.05; done
    contains "the coordinator says why" "$T/coord.log" "store $T/gb.db was removed while the coordinator ran, and cannot copy the store into $(cd "$T/dbfs" && pwd -P)/gb.db.restore-"
    contains "... and what to do" "$T/coord.log" "make room, and do not stop the coordinator"
    kill -0 "$COORD_PID" 2>/dev/null || fail "the coordinator stopped"
    # each failed copy removes its partial file; the coordinator tries again
    # every heartbeat, so one may exist mid-try (seen under ASan): left
    # behind, it would be there at every look
    gone=0
    for _ in $(seq 40); do ls "$T/dbfs" | grep -q 'restore-' || { gone=1; break; }; sleep 0.025; done
    [ "$gone" = 1 ] || fail "a partial copy was left: $(ls "$T/dbfs")"
    rm -f "$T/dbfs/filler"
    for _ in $(seq 100); do grep -q "wrote it back" "$T/coord.log" && break; sleep 0.05; done
    contains "written back once there is room" "$T/coord.log" "store $T/gb.db was removed while the coordinator ran: wrote it back from the open store"
    [ -f "$T/dbfs/gb.db" ] || fail "not written back behind the link"
    eq "the first result is there" "$(q "SELECT count(*) FROM results WHERE status = 'ok'")" 1
    sweep2=$(submit --kind sleep --param duration_ms=50 --max-attempts 1)
    check "a second job" "$GB" wait "$sweep2" --quiet --timeout 30
    assert_exactly_once 2
    ;;
store_taken)
    start_coord
    start_agent a1
    wait_nodes 1
    sweep=$(submit --kind sleep --param duration_ms=50 --max-attempts 1)
    check "a first job" "$GB" wait "$sweep" --quiet --timeout 30
    rm -f "$T/gb.db" "$T/gb.db-wal" "$T/gb.db-shm"
    "$GB" coordinator --listen 'tcp://127.0.0.1:*' --control 'tcp://127.0.0.1:*' --db "$T/gb.db" \
        --ready-file "$T/ready2" --heartbeat-ms $HB --lost-after $LOST >"$T/coord2.log" 2>&1 &
    C2=$!
    PIDS+=("$C2")
    eq "one coordinator goes on" "$(one_alive "$COORD_PID" "$C2")" 1
    if kill -0 "$C2" 2>/dev/null; then
        contains "the old one saved its store" "$T/coord.log" "was replaced by another file while the coordinator ran: everything this coordinator stored is saved in"
        saved=$(ls "$T"/gb.db.saved-* | grep -v -- '-wal$\|-shm$' | head -n 1)
        eq "... with its result" "$(sqlite3 "$saved" "SELECT count(*) FROM results WHERE status = 'ok'")" 1
        # the new store works, its WAL untouched by the old coordinator
        wait "$COORD_PID"
        [ -e "$T/gb.db-wal" ] || fail "the old coordinator deleted the new store's WAL"
        # the old one can stop before the new one has written its ready file
        # (CI under ASan read it too early)
        for _ in $(seq 200); do [ -f "$T/ready2" ] && break; sleep 0.05; done
        [ -f "$T/ready2" ] || fail "the new coordinator wrote no ready file: $(tail -n 5 "$T/coord2.log")"
        GB_CONTROL=$(sed -n 's/^control=//p' "$T/ready2") "$GB" status >/dev/null || fail "the new coordinator does not answer"
        kill -TERM "$C2"; wait "$C2"
        eq "the new coordinator stops cleanly" "$?" 0
        eq "the new store is whole" "$(sqlite3 "$T/gb.db" "PRAGMA integrity_check")" ok
        eq "... and has its schema, no old rows" "$(sqlite3 "$T/gb.db" "SELECT count(*) FROM results")" 0
    else
        contains "the new one is refused" "$T/coord2.log" "is in use by another coordinator"
        eq "the old store was written back" "$(q "SELECT count(*) FROM results WHERE status = 'ok'")" 1
    fi
    ;;
store_replaced)
    # --sync full: no syncer checkpointing the WAL, so frames of ours wait
    # in it when the file is replaced (whoever opened the new file would
    # have them applied to it, unless the coordinator removes its WAL)
    start_coord --sync full
    start_agent a1
    wait_nodes 1
    sweep=$(submit --kind sleep --param duration_ms=50 --max-attempts 1)
    check "a first job" "$GB" wait "$sweep" --quiet --timeout 30
    sweep2=$(submit --kind sleep --param duration_ms=0 --param signal=19 --max-attempts 1)
    w=$(stopped_worker a1)
    sqlite3 "$T/other.db" "CREATE TABLE mine(x); INSERT INTO mine VALUES (7)"
    mv -f "$T/other.db" "$T/gb.db"
    for _ in $(seq 100); do kill -0 "$COORD_PID" 2>/dev/null || break; sleep 0.05; done
    wait "$COORD_PID"
    eq "the coordinator stops" "$?" 1
    kill -CONT "$w"
    contains "says why and where" "$T/coord.log" "store $T/gb.db was replaced by another file while the coordinator ran: everything this coordinator stored is saved in $(cd "$T" && pwd -P)/gb.db.saved-"
    eq "the new file is left alone" "$(sqlite3 "$T/gb.db" "SELECT x FROM mine")" 7
    saved=$(ls "$T"/gb.db.saved-* | grep -v -- '-wal$\|-shm$' | head -n 1)
    eq "the saved store has the result" "$(sqlite3 "$saved" "SELECT count(*) FROM results WHERE status = 'ok'")" 1
    # a coordinator on the saved store: the job that ran meanwhile lands there
    mv "$saved" "$T/gb.db"
    rm -f "$T/gb.db-wal" "$T/gb.db-shm"
    start_coord
    check "the waiting result lands" "$GB" wait "$sweep2" --quiet --timeout 30
    assert_exactly_once 2
    ;;
store_damaged)
    # a store SQLite finds damaged (the results table's index overwritten
    # while no coordinator ran): every result's insert failed, was rolled
    # back and resent for ever, each logged, the sweep never ending. The
    # coordinator now stops at the first such error, says so and how to
    # recover, and writes nothing more; the agent keeps the results
    start_coord
    start_agent a1
    wait_nodes 1
    sweep=$(submit --kind sleep --param duration_ms=0 --repeat 10)
    check "a first sweep" "$GB" wait "$sweep" --quiet --timeout 60
    kill -TERM "$COORD_PID"; wait "$COORD_PID"
    page=$(sqlite3 "$T/gb.db" "SELECT rootpage FROM sqlite_master WHERE name = 'sqlite_autoindex_results_1'")
    size=$(sqlite3 "$T/gb.db" "PRAGMA page_size")
    python3 -c "import sys; f = open(sys.argv[1], 'r+b'); f.seek((int(sys.argv[2]) - 1) * int(sys.argv[3])); f.write(b'\xff' * int(sys.argv[3]))" "$T/gb.db" "$page" "$size"
    start_coord
    sweep2=$(submit --kind sleep --param duration_ms=0 --repeat 5)
    for _ in $(seq 200); do kill -0 "$COORD_PID" 2>/dev/null || break; sleep 0.05; done
    wait "$COORD_PID"
    eq "the coordinator stops" "$?" 1
    contains "says why and what to do" "$T/coord.log" "store $T/gb.db is damaged (database disk image is malformed): stopping. Nothing more is written to it; the agents keep the results it did not acknowledge"
    n=$(grep -c "database disk image is malformed" "$T/coord.log")
    [ "$n" -le 4 ] || fail "the damage was logged $n times"
    # the agent kept what it could not deliver: a coordinator started on
    # the damaged store again meets the same error at its first result
    # and stops the same way
    [ -n "$(ls "$T/a1/spool" 2>/dev/null)" ] || fail "the agent kept no result: $(ls -R "$T/a1")"
    mv "$T/coord.log" "$T/coord1.log"
    start_coord
    for _ in $(seq 200); do kill -0 "$COORD_PID" 2>/dev/null || break; sleep 0.05; done
    wait "$COORD_PID"
    eq "stopped again" "$?" 1
    contains "and says so again" "$T/coord.log" "store $T/gb.db is damaged"
    ;;
sick_node)
    # one node cannot start workers (its state dir's disk is full): it
    # refuses its jobs, which go to the healthy node, instead of failing
    # them for good (it drained half a sweep into failures)
    small_disk "$T/nc" 2m
    start_coord
    start_agent nb
    start_agent nc
    wait_nodes 2
    dd if=/dev/zero of="$T/nc/filler" bs=4k >/dev/null 2>&1
    sweep=$(submit --kind sleep --param duration_ms=100 --repeat 12)
    check "the sweep ends done" "$GB" wait "$sweep" --quiet --timeout 60
    eq "none failed" "$(q "SELECT count(*) FROM jobs WHERE state != 'done'")" 0
    eq "all on the healthy node" "$(q "SELECT count(DISTINCT node) || ',' || min(node) FROM v_results")" "1,nb"
    contains "the sick node says why" "$T/nc.log" "cannot start a worker"
    assert_exactly_once 12
    ;;
sick_alone)
    # the only node cannot start workers: it says so in its heartbeats and
    # is offered nothing until a back-off ends (2 s, doubling), instead of
    # bouncing the job once a heartbeat up to the 1000-attempt cap; the job
    # waits queued; `nodes` says why; once there is room again it runs
    small_disk "$T/nc" 2m
    start_coord
    start_agent nc
    wait_nodes 1
    dd if=/dev/zero of="$T/nc/filler" bs=4k >/dev/null 2>&1
    sweep=$(submit --kind sleep --param duration_ms=100)
    for _ in $(seq 100); do grep -q "cannot run jobs now" "$T/coord.log" && break; sleep 0.05; done
    contains "the coordinator says so" "$T/coord.log" "agent nc cannot run jobs now: cannot start a worker: "
    "$GB" nodes --format csv >"$T/nodes.csv" || fail "nodes"
    contains "nodes says why" "$T/nodes.csv" ",cannot start a worker: "
    sleep 2.5 # 25 heartbeats: it was offered the job once a heartbeat
    eq "still queued" "$(q "SELECT state FROM jobs")" queued
    tries=$(q "SELECT attempt FROM jobs")
    [ "$tries" -le 3 ] || fail "offered $tries times in ~3 s (a back-off of 2 s, then 4 s)"
    rm -f "$T/nc/filler"
    check "it runs once there is room" "$GB" wait "$sweep" --quiet --timeout 20
    eq "done" "$(q "SELECT state FROM jobs")" done
    for _ in $(seq 40); do grep -q "agent nc tries to run jobs again" "$T/coord.log" && break; sleep 0.05; done
    contains "said" "$T/coord.log" "agent nc tries to run jobs again"
    "$GB" nodes --format csv >"$T/nodes.csv" || fail "nodes"
    grep -q "cannot start a worker" "$T/nodes.csv" && fail "nodes still shows the problem"
    assert_exactly_once 1
    ;;
spool_damaged)
    # a spooled result damaged while the agent was down: a directory, a
    # FIFO, an empty file, an entry under another attempt's name, one whose
    # status byte is flipped to 7, one cut after its status (an ok result
    # with no record: both read, but the coordinator refuses them). Each ends
    # the job failed ("unreadable", moved aside) instead of a job running
    # for ever while the agent retried 5 times a second (or, for the FIFO,
    # hung in open()). The coordinator is down when the job ends, so the
    # result is only in the spool.
    start_coord
    job=0
    for mode in dir fifo empty wrongname status cut; do
        job=$((job + 1))
        start_agent a1
        wait_nodes 1
        spooled_while_down a1 "$job"
        sweep=$SWEEP f=$SPOOLED
        kill -KILL "${AGENT_PID[a1]}"; wait "${AGENT_PID[a1]}" 2>/dev/null
        case $mode in
        dir) rm "$f"; mkdir "$f" ;;
        fifo) rm "$f"; mkfifo "$f" ;;
        empty) : >"$f" ;;
        wrongname) mv "$f" "$T/a1/spool/result-$job-2.pb" ;;
        status | cut) python3 "$(dirname "$0")/damage_result.py" "$mode" "$f" ;;
        esac
        start_coord
        start_agent a1
        "$GB" wait "$sweep" --quiet --timeout 20
        eq "$mode: the job ends failed (one attempt allowed)" "$?" 1
        # the outcome is lost, not failed: no result is stored, the
        # attempt ends lost and the job gives up as after a lost agent
        eq "$mode: no result stored" "$(q "SELECT count(*) FROM results WHERE job_id = $job")" 0
        eq "$mode: the attempt is lost" "$(q "SELECT state FROM attempts WHERE job_id = $job")" lost
        q "SELECT state || ',' || error FROM jobs WHERE job_id = $job" >"$T/why.txt"
        if [ "$mode" != wrongname ]; then
            contains "$mode: the job says so" "$T/why.txt" "failed,gave up after 1 attempt(s); last: the agent's spooled result was"
        fi
        if [ "$mode" = wrongname ]; then
            # the entry says attempt 1 under attempt 2's name: attempt 1
            # came back without its result (it was stored as superseded and
            # attempt 2 waited for ever)
            contains "$mode: said" "$T/a1.log" "the entry of job $job attempt 2 holds job $job attempt 1"
        elif [ "$mode" = status ] || [ "$mode" = cut ]; then
            # it reads, but breaks a field's rule: the coordinator refused
            # it at every resend, and the job never ended
            q "SELECT state || ',' || error FROM attempts WHERE job_id = $job" >"$T/why.txt"
            contains "$mode: why" "$T/why.txt" "lost,the agent's spooled result was damaged ($(
                [ "$mode" = status ] && echo "result.status 7 is not a known status" || echo "result.record_json")"
        else
            eq "$mode: why" "$(q "SELECT state || ',' || error FROM attempts WHERE job_id = $job")" \
                "lost,the agent's spooled result was unreadable"
        fi
        kill -TERM "${AGENT_PID[a1]}"; wait "${AGENT_PID[a1]}" 2>/dev/null
    done
    eq "every one moved aside" "$(grep -c "is unreadable: moved aside" "$T/a1.log")" 4
    eq "the damaged ones said so" "$(grep -c "is damaged: moved aside" "$T/a1.log")" 2
    ;;
spool_damaged_retry)
    # a spooled result lost (here emptied) while the agent was down, with
    # attempts left: the outcome is unknown, not a failure of the job, so
    # the job runs again and ends done (it ended failed at the first loss)
    start_coord
    start_agent a1
    wait_nodes 1
    ends_while_down a1 2
    sweep=$SWEEP f="$T/a1/spool/result-1-1.pb"
    for _ in $(seq 100); do [ -s "$f" ] && break; sleep 0.05; done
    [ -s "$f" ] || fail "nothing spooled"
    kill -KILL "${AGENT_PID[a1]}"; wait "${AGENT_PID[a1]}" 2>/dev/null
    : >"$f"
    start_coord
    start_agent a1
    # attempt 2 stops itself as attempt 1 did (signal=19): let it go on
    w=$(stopped_worker a1)
    kill -CONT "$w"
    check "the job runs again and ends done" "$GB" wait "$sweep" --quiet --timeout 20
    eq "attempt 1 lost, 2 done" "$(q "SELECT group_concat(attempt || ':' || state || ':' || ifnull(error, ''), '|') FROM (SELECT * FROM attempts ORDER BY attempt)")" \
        "1:lost:the agent's spooled result was unreadable|2:done:"
    eq "one result, attempt 2's" "$(q "SELECT group_concat(attempt || ':' || status) FROM results")" "2:ok"
    contains "the coordinator says why" "$T/coord.log" "job 1 attempt 1 lost: the agent's spooled result was unreadable"
    assert_exactly_once 1
    ;;
agent_id_lost)
    # the agent's id file lost while it was down with a result in its spool
    # (a tmp cleaner takes the oldest file first): it comes back under a new
    # id, and the result is taken as the attempt's (same node name, the old
    # id not connected). It matched no attempt of the new id and was
    # dropped, acknowledged, and the job ran again
    start_coord
    start_agent a1
    wait_nodes 1
    id=$(cat "$T/a1/agent_id")
    spooled_while_down a1 1
    sweep=$SWEEP
    kill -TERM "${AGENT_PID[a1]}"; wait "${AGENT_PID[a1]}" 2>/dev/null
    rm "$T/a1/agent_id"
    start_coord
    start_agent a1
    check "the job succeeds" "$GB" wait "$sweep" --quiet --timeout 20
    [ "$(cat "$T/a1/agent_id")" = "$id" ] && fail "the agent kept its id (the case is not made)"
    contains "said" "$T/coord.log" "the attempt ran under its agent id before, $id"
    eq "stored as attempt 1 of the old id, once" "$(q "SELECT attempt || ',' || status || ',' || agent_id FROM results")" "1,ok,$id"
    eq "one attempt" "$(q "SELECT count(*) FROM attempts")" 1
    ;;
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
    # the worker stops itself (SIGSTOP) at once: the test stopped it from
    # outside once `status` said running, and on a loaded CI machine that
    # came after the 1 s limit had already killed it (no worker to stop)
    t0=$(date +%s%N)
    sweep=$(submit --kind sleep --param duration_ms=0 --param signal=19 --timeout 1 --name hang)
    "$GB" wait "$sweep" --quiet --timeout 20
    eq "wait fails" "$?" 1
    t1=$(date +%s%N)
    w=$(sed -n 's/.*job 1 attempt 1 started: .*(worker pid \([0-9]*\),.*/\1/p' "$T/a1.log")
    [ -n "$w" ] || fail "the agent did not say its worker's pid"
    q "SELECT output_tail FROM results" >"$T/tail.txt"
    contains "the worker stopped itself" "$T/tail.txt" "raising signal 19 at end"
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
    mount_dbfs
    start_coord --db "$T/dbfs/gb.db" --sync "$sync"
    start_agent a1 --slots 2
    start_agent a2 --slots 2
    wait_nodes 2
    sweep=$(submit --kind sleep --param duration_ms=800 --repeat 16 --name full)
    # the first four results are in, the next four jobs run: fill the disk
    for _ in $(seq 200); do [ "$(q "SELECT count(*) FROM results")" -ge 4 ] && break; sleep 0.05; done
    wait_running "$sweep" 4
    fill_disk
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
    # A commit that fails on a full disk leaves its partly written frames in
    # the WAL file; SQLite writes the next commit over them, so one or two
    # smaller commits after it can still fit (a CI pass stored 7 after 5).
    # What must hold: results wait in the spools (above), and the full disk
    # stops the sweep well short of its 16 results.
    stored=$(q "SELECT count(*) FROM results")
    [ "$stored" -le "$((full_at + 4))" ] || fail "$stored results stored on a full disk (had $full_at)"
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
disk_full_requests)
    mount_dbfs
    start_coord --db "$T/dbfs/gb.db"
    start_agent a1
    wait_nodes 1
    sweep=$(submit --kind sleep --param duration_ms=20000 --repeat 40 --name big)
    wait_running "$sweep" 1
    fill_disk
    # a submit's commit fails whole: none of its 500 jobs is stored
    "$GB" submit --kind sleep --param duration_ms=1 --repeat 500 --name more >"$T/submit.txt" 2>&1 &&
        fail "a submit on a full disk succeeded: $(cat "$T/submit.txt")"
    contains "the submit says why" "$T/submit.txt" "database or disk is full"
    eq "no sweep of it, nor a job" "$(q "SELECT count(*) FROM sweeps") $(q "SELECT count(*) FROM jobs")" "1 40"
    # the queued jobs end in one statement now: its commit fails whole
    "$GB" cancel "$sweep" >"$T/cancel.txt" 2>&1 && fail "a cancel on a full disk succeeded: $(cat "$T/cancel.txt")"
    contains "the cancel says why" "$T/cancel.txt" "database or disk is full"
    kill -0 "$COORD_PID" || fail "the coordinator died on a full disk"
    eq "nothing of it stored" "$(q "SELECT group_concat(state || ':' || n) FROM (SELECT state, count(*) AS n FROM jobs GROUP BY state ORDER BY state)")" "queued:39,running:1"
    eq "the sweep runs on" "$(q "SELECT state FROM sweeps")" running
    rm -f "$T/dbfs/filler"
    # the coordinator holds what the store holds: the same requests, with room
    more=$(submit --kind sleep --param duration_ms=1 --repeat 500 --name more)
    eq "the submit with room makes the next sweep" "$more" 2
    eq "its jobs" "$(q "SELECT count(*) || ',' || min(seq) || ',' || max(seq) FROM jobs WHERE sweep_id = 2")" "500,0,499"
    check "its cancel" "$GB" cancel "$more"
    check "a cancel with room" "$GB" cancel "$sweep"
    "$GB" cancel "$sweep" >/dev/null 2>&1 && fail "the sweep had jobs left to cancel"
    "$GB" wait "$sweep" --quiet --timeout 20
    eq "wait exits 1 for a cancelled sweep" "$?" 1
    "$GB" wait "$more" --quiet --timeout 20
    eq "wait exits 1 for the other one" "$?" 1
    eq "every job ended once" "$(q "SELECT count(*) || ':' || count(DISTINCT job_id) FROM v_results WHERE sweep_id = 1 AND status = 'cancelled'")" "40:40"
    eq "the queued ones' rows" "$(q "SELECT count(*) FROM jobs WHERE sweep_id = 1 AND attempt = 0 AND state = 'cancelled' AND error = 'cancelled by request' AND finished_at IS NOT NULL")" 39
    eq "nothing of the second sweep left" "$(q "SELECT count(*) FROM jobs WHERE sweep_id = 2 AND state IN ('queued', 'running')")" 0
    assert_exactly_once 540
    ;;
disk_full_multinode)
    source "$(dirname "$0")/../multinode/mn_lib.sh"
    mount_dbfs
    start_coord --db "$T/dbfs/gb.db"
    start_agent a1
    wait_nodes 1 # a1 registers first: rank 0
    start_agent a2
    wait_nodes 2
    # rank 1's worker stops itself (SIGSTOP) before it reports ready, in
    # every attempt: the test holds each attempt mid-rendezvous, and lets it
    # go on with SIGCONT. One attempt allowed: giving one up after a failed
    # commit must not use it up.
    sweep=$(submit --kind sleep --param duration_ms=1500 --param n_nodes=2 --param signal=19 \
        --param fail_rank=1 --param fail_at=rendezvous --max-attempts 1 --name mnfull)

    # 1. mid-rendezvous: rank 0 waits at the barrier, rank 1 never said ready
    wait_ranks 1 ready 1
    w=$(stopped_worker a2)
    fill_disk
    if "$GB" submit --kind sleep --param duration_ms=10 >/dev/null 2>"$T/refused.txt"; then
        fail "a sweep was accepted on a full disk"
    fi
    contains "the submit is refused, nothing of it kept" "$T/refused.txt" "could not commit this to its store"
    contains "the failed commit is logged" "$T/coord.log" "database or disk is full"
    kill -CONT "$w" # rank 1 says ready now: the attempt was given up, it gets no start
    sleep 1         # ten heartbeats: ready resent, reloads retried after their back-off
    eq "attempt 1 is still assigned in the store" "$(q "SELECT state FROM attempts WHERE attempt = 1")" assigned
    [ -n "$(worker_of a1)" ] || fail "rank 0 was stopped before the end of its attempt was committed"
    [ -n "$(worker_of a2)" ] || fail "rank 1 was stopped before the end of its attempt was committed"
    if grep -E "cancelling|starts at" "$T/a1.log" "$T/a2.log"; then
        fail "a cancel or a start reached an agent before the commit"
    fi
    rm -f "$T/dbfs/filler"

    # 2. finishing: attempt 2 runs, and the disk fills before its ranks end
    for _ in $(seq 200); do [ "$(attempt_of 1)" = 2 ] && break; sleep 0.05; done
    eq "attempt 1 given up once committed; the job runs again" "$(attempt_of 1)" 2
    w=$(stopped_worker a2)
    kill -CONT "$w"
    wait_ranks 1 started 2
    fill_disk
    for _ in $(seq 200); do
        [ "$(find "$T/a1/spool" "$T/a2/spool" -name 'result-1-2.pb' | wc -l)" = 2 ] && break
        sleep 0.05
    done
    eq "both ranks' results wait in the spools" "$(find "$T/a1/spool" "$T/a2/spool" -name 'result-1-2.pb' | wc -l)" 2
    sleep 0.5 # resent at least once, refused again
    eq "attempt 2: no rank report stored, no result, still running in the store" \
        "$(q "SELECT (SELECT count(*) FROM ranks WHERE attempt = 2 AND status IS NOT NULL) || ','
              || (SELECT count(*) FROM results) || ',' || (SELECT state FROM attempts WHERE attempt = 2)")" "0,0,running"
    eq "attempt 2: nothing acknowledged" "$(cat "$T/a1.log" "$T/a2.log" | grep -c "result of job 1 attempt 2 acknowledged")" 0
    kill -0 "$COORD_PID" || fail "the coordinator died on a full disk"
    rm -f "$T/dbfs/filler"

    # 3. attempt 3 runs to the end
    for _ in $(seq 200); do [ "$(attempt_of 1)" = 3 ] && break; sleep 0.05; done
    eq "attempt 2 given up once committed; the job runs again" "$(attempt_of 1)" 3
    w=$(stopped_worker a2)
    kill -CONT "$w"
    check "the sweep finishes" "$GB" wait "$sweep" --quiet --timeout 60
    job_ok 1 2 1
    why="a commit failed during this multi-node attempt: the coordinator reloaded its state from the store"
    eq "attempts 1 and 2 given up, without using up one" \
        "$(q "SELECT group_concat(attempt || ':' || state || ':' || error, '|') FROM
              (SELECT * FROM attempts WHERE attempt < 3 ORDER BY attempt)")" "1:lost:$why|2:lost:$why"
    eq "their ranks lost, and each report kept once acknowledged" \
        "$(q "SELECT group_concat(attempt || '/' || rank || '/' || state || '/' || status) FROM
              (SELECT * FROM ranks WHERE attempt < 3 ORDER BY attempt, rank)")" \
        "1/0/lost/cancelled,1/1/lost/cancelled,2/0/lost/ok,2/1/lost/ok"
    no_workers a1 a2
    assert_exactly_once 1
    ;;
disk_full_stale)
    mount_dbfs
    start_coord --db "$T/dbfs/gb.db"
    start_agent a1
    wait_nodes 1
    # the stale worker must still run long after the agent thaws (see
    # tests/control/it_agent_stop.sh superseded)
    sweep=$(submit --kind sleep --param duration_ms=8000 --name stale)
    wait_running "$sweep" 1
    start_agent a2
    wait_nodes 2
    kill -STOP "${AGENT_PID[a1]}"
    for _ in $(seq 200); do
        [ "$(q "SELECT count(*) FROM attempts a JOIN nodes n USING (agent_id) WHERE attempt = 2 AND n.name = 'a2' AND a.state = 'running'")" = 1 ] && break
        sleep 0.05
    done
    eq "re-run as attempt 2 on a2" "$(q "SELECT count(*) FROM attempts a JOIN nodes n USING (agent_id) WHERE attempt = 2 AND n.name = 'a2' AND a.state = 'running'")" 1
    fill_disk
    kill -CONT "${AGENT_PID[a1]}"
    for _ in $(seq 200); do
        [ "$(grep -c "registered with coordinator" "$T/a1.log")" -ge 2 ] && break
        sleep 0.05
    done
    [ "$(grep -c "registered with coordinator" "$T/a1.log")" -ge 2 ] || fail "a1 did not register again"
    contains "its Hello decided the stale attempt's stop" "$T/coord.log" "runs job 1 attempt 1 that is no longer its: cancelling"
    sleep 0.3
    eq "the turn of its Hello was rolled back" "$(q "SELECT state FROM nodes WHERE name = 'a1'")" lost
    rm -f "$T/dbfs/filler"
    # stopped within a few heartbeats of the room (it ran on for 6 s more)
    for _ in $(seq 60); do [ -z "$(worker_of a1)" ] && break; sleep 0.05; done
    [ -z "$(worker_of a1)" ] || fail "a1 still runs the stale attempt 1 (worker $(worker_of a1))"
    check "the sweep finishes" "$GB" wait "$sweep" --quiet --timeout 30
    for _ in $(seq 100); do [ "$(q "SELECT count(*) FROM results")" = 2 ] && break; sleep 0.05; done
    eq "attempt 2 ended it" "$(q "SELECT attempt || ',' || node || ',' || status FROM v_results")" "2,a2,done"
    eq "the stale attempt was stopped, kept as superseded" \
       "$(q "SELECT a.state || ',' || r.status FROM attempts a JOIN results r USING (job_id, attempt) WHERE attempt = 1")" \
       "superseded,cancelled"
    assert_exactly_once 1
    ;;
checker)
    # the assertion itself: it passes on a clean run and fails on each
    # fault injected into the store afterwards (jobs 1 and 2 one-node, job 3
    # over two nodes)
    start_coord
    start_agent a1
    start_agent a2
    wait_nodes 2
    sweep=$(submit --kind sleep --param duration_ms=10 --repeat 2)
    check "the sweep finishes" "$GB" wait "$sweep" --quiet
    sweep=$(submit --kind sleep --param duration_ms=10 --param n_nodes=2)
    check "the two-node sweep finishes" "$GB" wait "$sweep" --quiet
    for _ in $(seq 100); do [ "$(q "SELECT count(*) FROM v_results")" = 3 ] && break; sleep 0.05; done
    assert_exactly_once 3
    kill -TERM "$COORD_PID"; wait "$COORD_PID" 2>/dev/null
    cp "$T/gb.db" "$T/clean.db"
    q "DELETE FROM samples WHERE job_id = 1; DELETE FROM results WHERE job_id = 1"
    (assert_exactly_once 3) >"$T/c0.log" 2>&1 && fail "a lost result went unnoticed"
    contains "lost result named" "$T/c0.log" "a done job has an ok result of its final attempt"
    # the same loss, with the job's row made to look failed: the agent's
    # acknowledgement still tells
    q "UPDATE jobs SET state = 'failed', error = 'x' WHERE job_id = 1"
    (assert_exactly_once 3) >"$T/c1.log" 2>&1 && fail "a lost acknowledged result went unnoticed"
    contains "lost result named" "$T/c1.log" "acknowledged but not stored: job,attempt 1,1"
    cp "$T/clean.db" "$T/gb.db"
    q "INSERT INTO attempts (job_id, attempt, agent_id, backend, state, assigned_at)
         SELECT job_id, 2, agent_id, backend, 'done', assigned_at FROM attempts WHERE job_id = 1;
       CREATE TEMP TABLE t AS SELECT * FROM results WHERE job_id = 1; UPDATE t SET attempt = 2;
       INSERT INTO results SELECT * FROM t"
    (assert_exactly_once 3) >"$T/c2.log" 2>&1 && fail "a doubled result went unnoticed"
    contains "doubled result named" "$T/c2.log" "results of other attempts are superseded"
    cp "$T/clean.db" "$T/gb.db"
    q "UPDATE jobs SET state = 'running' WHERE job_id = 2"
    (assert_exactly_once 3) >"$T/c3.log" 2>&1 && fail "an unfinished job went unnoticed"
    contains "unfinished job named" "$T/c3.log" "every job ended"
    cp "$T/clean.db" "$T/gb.db"
    (assert_exactly_once 4) >"$T/c4.log" 2>&1 && fail "a missing job went unnoticed"
    touch "$T/a1/spool/result-9-1.pb"
    (assert_exactly_once 3) >"$T/c5.log" 2>&1 && fail "a result left in a spool went unnoticed"
    contains "spool named" "$T/c5.log" "spool of a1 empty"
    rm "$T/a1/spool/result-9-1.pb"
    # a rank's acknowledged report lost (the job's own row is rank 0's)
    r1=$(q "SELECT n.name FROM ranks k JOIN nodes n USING (agent_id) WHERE k.job_id = 3 AND k.rank = 1")
    q "UPDATE ranks SET status = NULL, record = NULL WHERE job_id = 3 AND rank = 1"
    (assert_exactly_once 3) >"$T/c6.log" 2>&1 && fail "a lost rank report went unnoticed"
    contains "lost rank report named" "$T/c6.log" "acknowledged but not stored: rank report of $r1, job,attempt 3,1"
    cp "$T/clean.db" "$T/gb.db"
    q "UPDATE ranks SET state = 'started' WHERE job_id = 3 AND rank = 0"
    (assert_exactly_once 3) >"$T/c7.log" 2>&1 && fail "a rank left running went unnoticed"
    contains "rank left running named" "$T/c7.log" "every rank of every multi-node attempt ended"
    cp "$T/clean.db" "$T/gb.db"
    assert_exactly_once 3
    ;;
*) fail "unknown case $case" ;;
esac
echo ok
