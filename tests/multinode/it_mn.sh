#!/usr/bin/env bash
# Multi-node jobs with real processes: a coordinator, agents (each its own
# process, as on separate nodes) and their workers, on loopback with fast
# timers (heartbeat 100 ms, lost after 5). The sleep kind stands in for
# training: each rank's worker checks it got rank 0's id of this attempt,
# its rank and the world size, waits at the start barrier and records when
# it really began. Every case ends by asserting that every rank stopped and
# the job ended exactly once.
#
#   it_mn.sh GPUBENCH FAKEAGENT CASE
source "$(dirname "$0")/../control/lib.sh" "$1" "$2"
source "$(dirname "$0")/mn_lib.sh"
FAKE=$2
case=${3:?case}

case "$case" in
idle)
    # agents with two slots: a rank goes only to an idle agent (a free slot
    # beside another job is not enough), and nothing goes beside a rank
    start_coord
    start_agent a1 --slots 2
    start_agent a2 --slots 2
    wait_nodes 2
    s1=$(submit --kind sleep --param duration_ms=1500 --nodes a1)
    wait_running "$s1" 1
    s2=$(submit --kind sleep --param duration_ms=1500 --param n_nodes=2)
    s3=$(submit --kind sleep --param duration_ms=100 --repeat 2)
    for s in $s1 $s2 $s3; do check "wait $s" "$GB" wait "$s" --quiet --timeout 60; done
    eq "the ranks waited for a1's job to end" \
        "$(q "SELECT min(k.placed_at) >= (SELECT ended_at FROM attempts WHERE job_id = 1)
              FROM ranks k WHERE k.job_id = 2")" 1
    eq "no one-node job ran beside a rank" \
        "$(q "SELECT count(*) FROM attempts x JOIN jobs jx ON jx.job_id = x.job_id AND jx.sweep_id = $s3
              JOIN ranks k ON k.agent_id = x.agent_id AND k.job_id = 2
              WHERE x.started_at < k.ended_at AND k.placed_at < x.ended_at")" 0
    no_workers a1 a2
    ;;
two)
    start_coord
    start_agent a1
    wait_nodes 1 # a1 registers first
    start_agent a2
    wait_nodes 2
    # an agent without the rendezvous takes no rank (it fails the test if
    # it is assigned one), and does not count for a multi-node spec
    "$FAKE" old "$LISTEN" 60 >"$T/fake.log" 2>&1 &
    old=$!
    PIDS+=("$old")
    wait_nodes 3
    if "$GB" submit --kind sleep --param n_nodes=3 2>"$T/refused.txt"; then fail "3 nodes on 2 accepted"; fi
    contains "refusal says why" "$T/refused.txt" \
        "the job spans 3 nodes, and 2 known node(s) could run it together; 1 agent(s) too old for multi-node jobs"
    sweep=$(submit --kind sleep --param duration_ms=300 --param n_nodes=2 --name two)
    check "wait" "$GB" wait "$sweep" --quiet
    job_ok 1 2 1
    eq "rank 0 on the first agent registered" "$(rank_node 1 0)" a1
    eq "one attempt" "$(q "SELECT count(*) FROM attempts WHERE job_id = 1")" 1
    eq "the job's result is rank 0's, synthetic" \
        "$(q "SELECT status || ',' || synthetic || ',' || n_devices || ',' || json_extract(record, '$.dist.rank') || ',' || quote(agent_key) || quote(key_name) FROM results")" "ok,1,2,0,''''"
    eq "no rank on the old agent" "$(q "SELECT count(*) FROM ranks WHERE agent_id = 'fakeold01'")" 0
    kill -0 "$old" 2>/dev/null || fail "the old agent ended: $(cat "$T/fake.log")"
    no_workers a1 a2
    ;;
three)
    # three ranks of 2 CPU replicas each, then a sweep of 2- and 3-node jobs
    # on 3 agents: a 3-node job waits until all three are idle (never a part
    # of them held), and no agent ever runs two ranks at once
    start_coord
    start_agent a1
    start_agent a2
    start_agent a3
    wait_nodes 3
    sweep=$(submit --kind sleep --param duration_ms=300 --param n_nodes=3 --gpus 2)
    check "wait" "$GB" wait "$sweep" --quiet
    job_ok 1 3 2
    sweep=$(submit --spec <(echo '{"kind": "sleep", "duration_ms": 200, "n_nodes": [2, 3], "repeat": 2}'))
    check "wait" "$GB" wait "$sweep" --quiet
    eq "four jobs" "$(q "SELECT group_concat(job_id) FROM jobs WHERE sweep_id = $sweep")" "2,3,4,5"
    job_ok 2 2 1
    job_ok 3 2 1
    job_ok 4 3 1
    job_ok 5 3 1
    eq "no agent ran two ranks at once" \
        "$(q "SELECT count(*) FROM ranks x JOIN ranks y ON x.agent_id = y.agent_id
              AND (x.job_id, x.attempt) < (y.job_id, y.attempt)
              AND x.placed_at < y.ended_at AND y.placed_at < x.ended_at")" 0
    no_workers a1 a2 a3
    ;;
kill_worker)
    # SIGKILL of rank 1's worker mid-job: the job fails with that rank's
    # reason (a worker failure is not retried), rank 0 is stopped
    start_coord
    start_agent a1
    start_agent a2
    wait_nodes 2
    sweep=$(submit --kind sleep --param duration_ms=20000 --param n_nodes=2)
    wait_ranks 1 started 2
    victim=$(rank_node 1 1)
    w=$(worker_of "$victim")
    [ -n "$w" ] || fail "no worker under $victim"
    # ps, pgrep and top name it (it was "exe": /proc/self/exe)
    eq "the worker's name" "$(ps -o comm= -p "$w")" gpubench
    case $(ps -o args= -p "$w") in "gpubench worker --job "*) ;; *) fail "worker args: $(ps -o args= -p "$w")" ;; esac
    kill -KILL "$w"
    "$GB" wait "$sweep" --quiet
    eq "wait fails" "$?" 1
    ended_once 1 failed
    q "SELECT error FROM v_results" >"$T/error.txt"
    contains "the failing rank is named" "$T/error.txt" "rank 1 on $victim: worker killed by signal 9"
    eq "rank states" "$(q "SELECT group_concat(state || '/' || status) FROM (SELECT * FROM ranks ORDER BY rank)")" \
        "cancelled/cancelled,crashed/crashed"
    eq "one attempt, failed" "$(q "SELECT group_concat(state) FROM attempts")" failed
    eq "the job's result row is the failing rank's" \
        "$(q "SELECT r.status || ',' || n.name FROM results r JOIN nodes n USING (agent_id)")" "crashed,$victim"
    no_workers a1 a2
    ;;
kill_agent | kill_agent_give_up)
    # SIGKILL of rank 1's agent mid-job: after the lost window the attempt
    # is lost, rank 0 stopped, and the job runs again on the two nodes left
    # as attempt 2 (or, with max_attempts 1, fails with the reason)
    start_coord
    start_agent a1
    start_agent a2
    extra=()
    if [ "$case" = kill_agent ]; then start_agent a3; wait_nodes 3; else wait_nodes 2; extra=(--max-attempts 1); fi
    sweep=$(submit --kind sleep --param duration_ms=3000 --param n_nodes=2 "${extra[@]}")
    wait_ranks 1 started 2
    victim=$(rank_node 1 1)
    survivor=$(rank_node 1 0)
    w=$(worker_of "$victim")
    [ -n "$w" ] || fail "no worker under $victim"
    kill -KILL "${AGENT_PID[$victim]}"
    wait "${AGENT_PID[$victim]}" 2>/dev/null
    "$GB" wait "$sweep" --quiet
    rc=$?
    # the killed agent's worker died with it (PR_SET_PDEATHSIG)
    for _ in $(seq 20); do kill -0 "$w" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$w" 2>/dev/null && fail "worker $w outlived its agent"
    eq "attempt 1 lost" "$(q "SELECT state FROM attempts WHERE attempt = 1")" lost
    q "SELECT error FROM attempts WHERE attempt = 1" >"$T/lost.txt"
    contains "loss reason" "$T/lost.txt" "rank 1: agent $victim lost (silent for"
    eq "attempt 1's ranks: 0 stopped, 1 lost" \
        "$(q "SELECT group_concat(state) FROM (SELECT state FROM ranks WHERE attempt = 1 ORDER BY rank)")" "cancelled,lost"
    if [ "$case" = kill_agent ]; then
        eq "wait succeeds" "$rc" 0
        job_ok 1 2 1
        eq "attempt 2 on the nodes left" \
            "$(q "SELECT count(*) FROM ranks k JOIN nodes n USING (agent_id) WHERE attempt = 2 AND n.name != '$victim'")" 2
        no_workers_but "$victim"
    else
        eq "wait fails" "$rc" 1
        ended_once 1 failed
        q "SELECT error FROM v_results" >"$T/error.txt"
        contains "gave up, saying why" "$T/error.txt" "gave up after 1 attempt(s); last: rank 1: agent $victim lost"
        eq "no result rows" "$(q "SELECT count(*) FROM results")" 0
        no_workers "$survivor"
    fi
    ;;
kill_agent_ring)
    # the same with ranks that talk (a CPU all-reduce): the survivor's ring
    # sees its peer go at once and fails; that failure is held until the
    # peer's agent is found lost, so the attempt is lost and runs again (it
    # failed the job on the spot, blaming the survivor). A 2 s lost window:
    # with 0.5 s a loaded machine found the agent lost before the
    # survivor's ring failure came, and nothing was held
    LOST=20
    start_coord
    start_agent a1
    start_agent a2
    start_agent a3
    wait_nodes 3
    ring_job
    victim=$(rank_node 1 1)
    survivor=$(rank_node 1 0)
    kill -KILL "${AGENT_PID[$victim]}"
    wait "${AGENT_PID[$victim]}" 2>/dev/null
    "$GB" wait "$sweep" --quiet
    eq "wait succeeds: the job ran again" "$?" 0
    eq "attempt 1 lost" "$(q "SELECT state FROM attempts WHERE attempt = 1")" lost
    q "SELECT error FROM attempts WHERE attempt = 1" >"$T/lost.txt"
    contains "lost for the agent" "$T/lost.txt" "rank 1: agent $victim lost (silent for"
    contains "the survivor's failure was held" "$T/coord.log" "held"
    eq "attempt 1's ranks: 0 failed (its ring), 1 lost" \
        "$(q "SELECT group_concat(state) FROM (SELECT state FROM ranks WHERE attempt = 1 ORDER BY rank)")" "failed,lost"
    # the held rank's row names it and its node, as every failed rank's does
    # (it kept its worker's bare error when another rank's event ended it)
    q "SELECT error FROM ranks WHERE attempt = 1 AND rank = 0" >"$T/held.txt"
    contains "the held rank's own reason" "$T/held.txt" "rank 0 on $survivor: tcp ring: "
    ended_once 1 done
    eq "attempt 2, every rank done" \
        "$(q "SELECT group_concat(state || '/' || status) FROM ranks WHERE attempt = 2")" "done/ok,done/ok"
    eq "attempt 2 on the nodes left" \
        "$(q "SELECT count(*) FROM ranks k JOIN nodes n USING (agent_id) WHERE attempt = 2 AND n.name != '$victim'")" 2
    no_workers_but "$victim"
    ;;
kill_agent_flood)
    # kill_agent_ring while the coordinator leaves agent messages unread
    # (a flood of frames on the agent endpoint, from before the dead agent
    # would be found lost): no agent's silence is judged while they wait
    # (a lost window at most), and the survivor's held failure waits with
    # it. The hold ran out first, and the job failed for good blaming the
    # survivor, though its peer's agent was found lost a moment later.
    # A 3 s lost window: the hold is 4.1 s, the verdict held back to ~5 s
    RAWPEER=${4:?test_rawpeer}
    LOST=30
    start_coord
    start_agent a1
    start_agent a2
    start_agent a3
    wait_nodes 3
    ring_job
    victim=$(rank_node 1 1)
    # the flood 1.5 s after the kill, before the loss would be found (3 s):
    # the flooder connects first and starts it itself (one started after
    # the hold was seen came 10 s late at three ASan tests a core, and the
    # hold itself came over 1.2 s after the kill there)
    "$RAWPEER" flood "$LISTEN" "$CONTROL" "$T/killed" killed 1500 >"$T/flood.log" 2>&1 &
    flood=$!
    PIDS+=("$flood")
    for _ in $(seq 200); do grep -q connected "$T/flood.log" && break; sleep 0.05; done
    contains "the flooder connected" "$T/flood.log" connected
    kill -KILL "${AGENT_PID[$victim]}"
    echo killed >"$T/killed"
    wait "${AGENT_PID[$victim]}" 2>/dev/null
    for _ in $(seq 100); do grep -q "held" "$T/coord.log" && break; sleep 0.02; done
    contains "the survivor's failure was held" "$T/coord.log" "held"
    # attempt 2 runs the whole ring job again: 44 s at three ASan tests a core
    "$GB" wait "$sweep" --quiet --timeout 100
    rc=$?
    silent=$(sed -n "s/.*agent $victim lost (silent for \([0-9]*\) ms).*/\1/p" "$T/coord.log" | head -n 1)
    [ -n "$silent" ] || fail "agent $victim was never found lost"
    # the case means something only if the flood held the verdict past the hold
    [ "$silent" -gt 4100 ] || fail "the flood did not hold the verdict back (silent for $silent ms)"
    eq "wait succeeds: the job ran again" "$rc" 0
    eq "attempt 1 lost" "$(q "SELECT state FROM attempts WHERE attempt = 1")" lost
    q "SELECT error FROM attempts WHERE attempt = 1" >"$T/lost.txt"
    contains "lost for the agent" "$T/lost.txt" "rank 1: agent $victim lost (silent for"
    ended_once 1 done
    no_workers_but "$victim"
    wait "$flood" || fail "flood: $(cat "$T/flood.log")"
    ;;
ring_stall)
    # rank 1's worker stops (SIGSTOP) while its agent stays: rank 0's ring
    # times out and its failure is held for a lost window; no agent is lost
    # and rank 1 says nothing, so the held failure becomes the job's
    export GB_COMM_TIMEOUT_MS=1500
    start_coord
    start_agent a1
    start_agent a2
    wait_nodes 2
    ring_job
    victim=$(rank_node 1 1)
    survivor=$(rank_node 1 0)
    w=$(worker_of "$victim")
    [ -n "$w" ] || fail "no worker under $victim"
    kill -STOP "$w"
    "$GB" wait "$sweep" --quiet
    eq "wait fails" "$?" 1
    kill -CONT "$w" 2>/dev/null
    contains "the failure was held first" "$T/coord.log" "held"
    ended_once 1 failed
    q "SELECT error FROM v_results" >"$T/error.txt"
    contains "the held failure is the job's, saying a peer is gone (gb_peer.h)" "$T/error.txt" \
        "rank 0 on $survivor: tcp ring: rank 0: peer gone: no progress for"
    eq "one attempt" "$(q "SELECT group_concat(state) FROM attempts")" failed
    no_workers a1 a2
    ;;
silent)
    # a rank that never arrives: its agent goes silent after it took the
    # assignment, before it reports ready. Rank 0 waits at the barrier until
    # the agent is lost; then it is stopped and the job gives up.
    fake_rank_fails rank_silent 2 --param duration_ms=100 --max-attempts 1
    contains "the fake got rank 1 with rank 0's id" "$T/fake.log" "rank 1 of 2 node(s), world 2, id 44 bytes"
    ended_once 1 failed
    q "SELECT error FROM v_results" >"$T/error.txt"
    contains "gave up on the silent rank" "$T/error.txt" "gave up after 1 attempt(s); last: rank 1: agent fake lost (silent for"
    eq "ranks: 0 waited and was stopped, 1 lost" \
        "$(q "SELECT group_concat(state) FROM (SELECT state FROM ranks ORDER BY rank)")" "cancelled,lost"
    eq "rank 0 was ready, and never started" "$(q "SELECT (ready_at IS NOT NULL) || (start_at IS NULL) FROM ranks WHERE rank = 0")" 11
    no_workers a1
    ;;
deadline)
    # a rank whose agent keeps beating but whose worker never reports ready:
    # the rendezvous deadline (rendezvous_s 2) loses the attempt; both ranks
    # are stopped before the job gives up
    # a time limit (1 s) below rendezvous_s counts from the start, not from
    # the fork: rank 0 waits out the rendezvous (it was killed as timed out
    # after 1 s and blamed for the job)
    fake_rank_fails rank_mute 20 --param duration_ms=100 --param rendezvous_s=2 --timeout 1 --max-attempts 1
    contains "the fake was told to stop" "$T/fake.log" "cancelled"
    ended_once 1 failed
    q "SELECT error FROM v_results" >"$T/error.txt"
    contains "the deadline names the rank" "$T/error.txt" "gave up after 1 attempt(s); last: rank 1 (node fake) was not ready within 2 s"
    eq "both ranks stopped" "$(q "SELECT group_concat(state || '/' || status) FROM (SELECT * FROM ranks ORDER BY rank)")" \
        "cancelled/cancelled,cancelled/cancelled"
    # rank 0, which was ready, says why it was stopped (not "cancelled by request")
    eq "rank 0's reason" "$(q "SELECT error FROM ranks WHERE rank = 0")" \
        "rank 0 on a1: stopped: the multi-node attempt ended (rank 1 (node fake) was not ready within 2 s)"
    no_workers a1
    ;;
early_ok)
    # a rank whose worker ends "ok" before it ever said ready (it ran
    # without the others): the job fails naming that rank and its node, and
    # its row says failed, without the figures it measured alone
    fake_rank_fails rank_early 30 --param duration_ms=100 --max-attempts 1
    ended_once 1 failed
    eq "the job's error names the rank and its node" "$(q "SELECT error FROM jobs WHERE job_id = 1")" \
        "rank 1 on fake: finished before the start barrier (a worker that does not take part in the rendezvous)"
    eq "its row: failed, no record, no figures" \
        "$(q "SELECT r.status || ',' || (r.record IS NULL) || ',' || quote(r.images_per_sec) || ',' || n.name
              FROM results r JOIN nodes n ON n.agent_id = r.agent_id WHERE r.job_id = 1")" "failed,1,NULL,fake"
    eq "ranks: 0 stopped, 1 failed" \
        "$(q "SELECT group_concat(state) FROM (SELECT state FROM ranks ORDER BY rank)")" "cancelled,failed"
    no_workers a1
    ;;
rank_lost)
    # a rank's agent lost what its worker reported (the spool entry
    # unreadable): the outcome is unknown, so the attempt is lost (as for a
    # lost agent, and run again while attempts are left), not failed; no
    # rank's report is kept as the job's result
    fake_rank_fails rank_lost 30 --param duration_ms=100 --max-attempts 1
    ended_once 1 failed
    eq "the job gave up after its one attempt, naming the rank" "$(q "SELECT error FROM jobs WHERE job_id = 1")" \
        "gave up after 1 attempt(s); last: rank 1 on fake: the agent's spooled result was unreadable"
    eq "the attempt is lost" "$(q "SELECT state FROM attempts WHERE job_id = 1")" lost
    # the rank itself: lost, with why (it was left for the heartbeats to
    # find gone, "no longer runs it and holds no result for it")
    eq "rank 1 lost, saying why" "$(q "SELECT state || ',' || error FROM ranks WHERE rank = 1")" \
        "lost,rank 1 on fake: the agent's spooled result was unreadable"
    eq "no rank's result stored" "$(q "SELECT count(*) FROM results WHERE status = 'ok'")" 0
    no_workers a1
    ;;
stop_then_lost)
    # rank 1's agent stops holding the rank's result in its spool (kept for
    # its restart grace), then rank 0's agent is lost: the attempt is lost
    # for rank 0's agent, and rank 1's row names its own agent (it had
    # a1's reason alone)
    fake_rank_start rank_stop 20 --param duration_ms=100 --max-attempts 1
    for _ in $(seq 200); do grep -q "stopping sent" "$T/fake.log" && break; sleep 0.05; done
    contains "the fake stopped holding rank 1's result" "$T/fake.log" "stopping sent"
    kill -KILL "${AGENT_PID[a1]}"
    wait "${AGENT_PID[a1]}" 2>/dev/null
    "$GB" wait "$sweep" --quiet
    eq "wait fails" "$?" 1
    ended_once 1 failed
    q "SELECT error FROM v_results" >"$T/error.txt"
    contains "the lost agent's rank is the cause" "$T/error.txt" "gave up after 1 attempt(s); last: rank 0: agent a1 lost (silent for"
    q "SELECT error FROM ranks WHERE rank = 1" >"$T/rank1.txt"
    contains "rank 1 names its own agent" "$T/rank1.txt" "rank 1: its agent fake is stopped, and the attempt was lost: agent a1 lost (silent for"
    eq "ranks: both lost" "$(q "SELECT group_concat(state) FROM (SELECT state FROM ranks ORDER BY rank)")" "lost,lost"
    ;;
rank0_restart | rank0_two_ids)
    # rank 0's worker sent its unique id, but its Progress "started" was
    # lost (a reconnect); then its agent comes back without it (restarted),
    # or a second worker of it sends another id: the attempt is lost (the
    # other ranks hold the first id, which no one answers any more). Rank 0
    # was assigned again, the new worker's id ignored, and rank 1 started
    # on the dead worker's
    start_coord
    "$FAKE" "$case" "$LISTEN" 20 >"$T/fake.log" 2>&1 &
    FAKE_PID=$!
    PIDS+=("$FAKE_PID")
    wait_nodes 1
    start_agent a1
    wait_nodes 2
    sweep=$(submit --kind sleep --param n_nodes=2 --param duration_ms=300 --max-attempts 1)
    "$GB" wait "$sweep" --quiet
    eq "wait fails" "$?" 1
    wait "$FAKE_PID" || fail "fake agent: $(cat "$T/fake.log")"
    ended_once 1 failed
    q "SELECT error FROM jobs WHERE job_id = 1" >"$T/error.txt"
    if [ "$case" = rank0_restart ]; then
        contains "the fake was not assigned rank 0 again" "$T/fake.log" "not assigned again"
        contains "rank 0 lost with its agent's return" "$T/error.txt" \
            "gave up after 1 attempt(s); last: rank 0: agent fake came back without it"
    else
        contains "rank 0's second id loses the attempt" "$T/error.txt" \
            "gave up after 1 attempt(s); last: rank 0 on fake made a second unique id (its worker started again); the other ranks hold the first"
    fi
    no_workers a1
    ;;
rank0_dies)
    # rank 0's worker dies before it makes the id: the other rank was never
    # assigned (no worker ever ran there) and the job fails with the reason
    start_coord
    start_agent a1
    start_agent a2
    wait_nodes 2
    sweep=$(submit --kind sleep --param n_nodes=2 --param signal=9 --param fail_rank=0 --param fail_at=rendezvous)
    "$GB" wait "$sweep" --quiet
    eq "wait fails" "$?" 1
    ended_once 1 failed
    q "SELECT error FROM v_results" >"$T/error.txt"
    r0=$(rank_node 1 0)
    r1=$(rank_node 1 1)
    contains "rank 0's death" "$T/error.txt" "rank 0 on $r0: worker killed by signal 9"
    eq "rank 1 skipped, never assigned" \
        "$(q "SELECT state || ',' || (assigned_at IS NULL) || ',' || (status IS NULL) FROM ranks WHERE rank = 1")" "skipped,1,1"
    if grep -q "job 1 attempt 1 started" "$T/$r1.log"; then fail "$r1 started a worker"; fi
    no_workers a1 a2
    ;;
cancel)
    start_coord
    start_agent a1
    start_agent a2
    wait_nodes 2
    sweep=$(submit --kind sleep --param duration_ms=20000 --param n_nodes=2)
    wait_ranks 1 started 2
    check "cancel" "$GB" cancel "$sweep"
    "$GB" wait "$sweep" --quiet
    eq "wait fails" "$?" 1
    ended_once 1 cancelled
    eq "both ranks stopped" "$(q "SELECT group_concat(state || '/' || status) FROM (SELECT * FROM ranks ORDER BY rank)")" \
        "cancelled/cancelled,cancelled/cancelled"
    eq "attempt cancelled" "$(q "SELECT state FROM attempts")" cancelled
    # one results row, as a one-node cancelled job has (there was none)
    eq "a results row, cancelled, with rank 0's exit" \
        "$(q "SELECT count(*) || '/' || status || '/' || exit_code || '/' || error FROM results WHERE job_id = 1")" \
        "1/cancelled/-15/cancelled by request"
    no_workers a1 a2
    ;;
reserve)
    # a multi-node job that waits for busy nodes holds them: one-node jobs
    # submitted after it are not placed on them as they come free. They
    # took each node as it came free, and the two-node job ran after every
    # one of them (it waits as long as they keep coming)
    start_coord
    start_agent a1
    start_agent a2
    wait_nodes 2
    s1=$(submit --kind sleep --param duration_ms=600 --repeat 4)
    wait_running "$s1" 2
    s2=$(submit --kind sleep --param n_nodes=2 --param duration_ms=200)
    s3=$(submit --kind sleep --param duration_ms=600 --repeat 6)
    check "all ends" "$GB" wait "$s3" --quiet --timeout 60
    check "the gang ends" "$GB" wait "$s2" --quiet --timeout 60
    gang=$(q "SELECT min(a.assigned_at) FROM attempts a JOIN jobs j USING (job_id) WHERE j.sweep_id = $s2")
    later=$(q "SELECT min(a.assigned_at) FROM attempts a JOIN jobs j USING (job_id) WHERE j.sweep_id = $s3")
    [[ "$gang" < "$later" ]] || fail "the two-node job ($gang) was placed after a newer one-node job ($later)"
    ;;
cancel_held)
    # cancelled while rank 0's "peer gone" failure is held and rank 1 has
    # ended ok: the cancel ends the gang at once, which frees the job, and
    # the coordinator wrote the Cancel's time into it after (a write to
    # freed memory: ASan stopped the coordinator, the cancel got no reply)
    start_coord
    start_agent a1
    start_agent a2
    wait_nodes 2
    sweep=$(submit --kind sleep --param n_nodes=2 --param duration_ms=300 --param fail_rank=0 \
        --param 'fail=peer gone: test')
    for _ in $(seq 200); do grep -q "peer gone: test; held" "$T/coord.log" && break; sleep 0.02; done
    contains "rank 0's failure is held" "$T/coord.log" "peer gone: test; held"
    for _ in $(seq 100); do [ "$(q "SELECT count(*) FROM ranks WHERE rank = 1 AND status = 'ok'")" = 1 ] && break; sleep 0.02; done
    check "cancel" "$GB" cancel "$sweep"
    "$GB" wait "$sweep" --quiet --timeout 20
    eq "wait fails" "$?" 1
    kill -0 "$COORD_PID" || fail "the coordinator died"
    ended_once 1 cancelled
    no_workers a1 a2
    ;;
cancel_lost)
    # a rank's stop that never reached its agent: the coordinator stopped
    # (SIGSTOP) past a lost window, so the agents' connections timed out
    # (their ZMQ heartbeat) and are made anew; rank 1's agent, held
    # (SIGSTOP) until the cancel was answered, had no connection when the
    # Cancel went, and the ROUTER dropped it. The stop goes again when the
    # agent registers or heartbeats still running the rank; it went once,
    # and the worker ran its 20 s to the end (the job cancelled only then)
    LOST=20
    start_coord
    start_agent a1
    start_agent a2
    wait_nodes 2
    sweep=$(submit --kind sleep --param duration_ms=20000 --param n_nodes=2)
    wait_ranks 1 started 2
    victim=$(rank_node 1 1)
    run_while_disconnected stall "$victim" "$T/cancel.txt" "$GB" cancel "$sweep"
    contains "cancel reports" "$T/cancel.txt" "1 running job(s) stopping"
    t0=$(date +%s)
    "$GB" wait "$sweep" --quiet --timeout 40
    eq "wait fails" "$?" 1
    took=$(($(date +%s) - t0))
    [ "$took" -lt 10 ] || fail "the job ended ${took} s after the cancel: a rank's worker ran on"
    ended_once 1 cancelled
    eq "both ranks stopped" "$(q "SELECT group_concat(state || '/' || status) FROM (SELECT * FROM ranks ORDER BY rank)")" \
        "cancelled/cancelled,cancelled/cancelled"
    contains "the agent was told" "$T/$victim.log" "job 1 attempt 1: cancelling"
    contains "the stop went again" "$T/coord.log" "agent $victim still runs rank 1: its stop sent again"
    no_workers a1 a2
    ;;
skewed)
    # a node whose clock is 20 s behind the coordinator's: its rank starts
    # after the longest lead (2 s), not 20 s later, and the job keeps its
    # time limit (the worker slept the 20 s, the limit stretched by as much,
    # and the job ran 22 s under --timeout 5); the agent says why
    SKEW=$4
    start_coord
    start_agent a1
    wait_nodes 1
    GB_TEST_SKEW_S=20 LD_PRELOAD=$SKEW \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" start_agent a2
    wait_nodes 2
    t0=$(date +%s%N)
    sweep=$(submit --kind sleep --param duration_ms=300 --param n_nodes=2 --timeout 5)
    check "wait" "$GB" wait "$sweep" --quiet --timeout 60
    dt=$((($(date +%s%N) - t0) / 1000000))
    [ "$dt" -lt 12000 ] || fail "the job took $dt ms: the skewed node slept the difference"
    ended_once 1 done
    eq "both ranks done" "$(q "SELECT count(*) FROM ranks WHERE job_id = 1 AND state = 'done' AND status = 'ok'")" 2
    # the skew shows in the records: a2's rank began about 20 s earlier on
    # its own clock
    eq "the skew is in the records" \
        "$(q "SELECT max(json_extract(record, '$.dist.started_at_ms')) - min(json_extract(record, '$.dist.started_at_ms')) > 15000 FROM ranks WHERE job_id = 1")" 1
    contains "the skewed agent says so" "$T/a2.log" "this clock is behind the coordinator's; starting in 2000 ms"
    no_workers a1 a2
    ;;
restart_cancel)
    # a cancel with a reason (`gpubench run --timeout`'s) while both ranks
    # run, their agents held (SIGSTOP) so that the attempt cannot end, then
    # the coordinator restarted: the new one gives the attempt up (its
    # rendezvous was in memory) and, the cancel asked, ends the job
    # cancelled with the reason the store kept (jobs.cancel_reason). It kept
    # only cancel_requested, and the job said "cancelled by request"
    RAWPEER=${4:?test_rawpeer}
    LOST=20 # the agents held are not found lost before the restart
    start_coord
    start_agent a1
    start_agent a2
    wait_nodes 2
    sweep=$(submit --kind sleep --param duration_ms=20000 --param n_nodes=2)
    wait_ranks 1 started 2
    why="cancelled: gpubench run --timeout 9 s ran out"
    kill -STOP "${AGENT_PID[a1]}" "${AGENT_PID[a2]}"
    "$RAWPEER" cancel_reason - "$CONTROL" "$sweep" "$why" >"$T/cancel.txt" 2>&1 ||
        fail "cancel: $(cat "$T/cancel.txt")"
    contains "cancel reports" "$T/cancel.txt" "0 queued job(s) cancelled, 1 running job(s) stopping"
    eq "still running, the reason stored" "$(q "SELECT state || ',' || cancel_reason FROM jobs")" "running,$why"
    kill -TERM "$COORD_PID"
    wait "$COORD_PID"
    start_coord
    kill -CONT "${AGENT_PID[a1]}" "${AGENT_PID[a2]}"
    "$GB" wait "$sweep" --quiet --timeout 30
    eq "wait fails" "$?" 1
    eq "the restart gave the attempt up" "$(q "SELECT state || ': ' || error FROM attempts")" \
        "lost: the coordinator restarted during this multi-node attempt"
    ended_once 1 cancelled
    eq "the job's error is the reason" "$(q "SELECT error FROM v_results WHERE job_id = 1")" "$why"
    no_workers a1 a2
    ;;
assign_lost)
    # a rank's assignment that never reached its agent: placed in the first
    # turn after the coordinator was stopped (SIGSTOP) past the agents'
    # heartbeat timeout, rank 0's agent held (SIGSTOP) so that its new
    # connection was not up, and the ROUTER dropped the JobAssign. The agent
    # registers again without the rank, and the assignment goes again: the
    # attempt runs (--max-attempts 1). The rank that never ran was waited
    # for forever, the job running and both agents held; then it was lost
    # after the restart grace, an attempt used up
    LOST=20
    start_coord
    start_agent a1
    wait_nodes 1 # a1 registers first: rank 0
    start_agent a2
    wait_nodes 2
    run_while_disconnected stall a1 "$T/submit.txt" \
        "$GB" submit --kind sleep --param duration_ms=300 --param n_nodes=2 --param rendezvous_s=30 --max-attempts 1
    check "the job runs and ends" "$GB" wait 1 --quiet --timeout 25
    contains "the resend said" "$T/coord.log" "registered without rank 0: its assignment sent again"
    eq "one attempt" "$(q "SELECT count(*) FROM attempts WHERE job_id = 1")" 1
    job_ok 1 2 1
    no_workers a1 a2
    ;;
restart)
    # SIGKILL of the coordinator mid-job: the rendezvous lived in its memory,
    # so the restarted one gives the attempt up (without using up one: max
    # attempts 1 here), stops the ranks as their agents register, and runs
    # the job again
    start_coord
    start_agent a1
    start_agent a2
    wait_nodes 2
    sweep=$(submit --kind sleep --param duration_ms=3000 --param n_nodes=2 --max-attempts 1)
    wait_ranks 1 started 2
    kill -KILL "$COORD_PID"
    wait "$COORD_PID" 2>/dev/null
    start_coord
    check "wait" "$GB" wait "$sweep" --quiet
    eq "attempt 1 given up" "$(q "SELECT state || ': ' || error FROM attempts WHERE attempt = 1")" \
        "lost: the coordinator restarted during this multi-node attempt"
    eq "attempt 1's ranks lost" "$(q "SELECT group_concat(DISTINCT state) FROM ranks WHERE attempt = 1")" lost
    job_ok 1 2 1
    no_workers a1 a2
    ;;
*) fail "unknown case $case" ;;
esac
echo ok
