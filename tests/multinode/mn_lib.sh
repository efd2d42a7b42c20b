# mn_lib.sh - helpers for the multi-node integration tests (sourced after
# tests/control/lib.sh, whose coordinator/agent helpers they use).
#
# START_WINDOW_MS: how far apart the ranks of one job may begin their timed
# work. Every worker sleeps until the same wall-clock start time (all on
# this machine's clock), so the spread is the scheduler's wake-up latency;
# it is a few ms on an idle machine, and 250 ms leaves room for a shared,
# loaded 2-core CI box without letting a rank that ignored the barrier (it
# would go as soon as it was ready, hundreds of ms early) pass.
START_WINDOW_MS=250

# attempt_of JOB: the job's current attempt
attempt_of() { q "SELECT attempt FROM jobs WHERE job_id = $1"; }

# rank_node JOB RANK: the node of RANK in the job's current attempt
rank_node() {
    q "SELECT n.name FROM ranks k JOIN jobs j ON j.job_id = k.job_id AND j.attempt = k.attempt
       JOIN nodes n ON n.agent_id = k.agent_id WHERE k.job_id = $1 AND k.rank = $2"
}

# wait_ranks JOB STATE N: until N ranks of the job's current attempt are in STATE (10 s)
wait_ranks() {
    for _ in $(seq 200); do
        [ "$(q "SELECT count(*) FROM ranks k JOIN jobs j ON j.job_id = k.job_id
                AND j.attempt = k.attempt WHERE k.job_id = $1 AND k.state = '$2'")" = "$3" ] && return 0
        sleep 0.05
    done
    fail "job $1: never $3 rank(s) $2 ($(q "SELECT group_concat(state) FROM ranks WHERE job_id = $1"))"
}

# worker_of AGENT: the pid of the worker the agent runs (one slot), or ""
worker_of() { pgrep -P "${AGENT_PID[$1]}" || true; }

# no_workers NAME...: no agent among NAME runs a worker any more
no_workers() {
    for n in "$@"; do
        for _ in $(seq 40); do [ -z "$(worker_of "$n")" ] && break; sleep 0.05; done
        [ -z "$(worker_of "$n")" ] || fail "agent $n still runs worker $(worker_of "$n")"
    done
}

# no_workers_but VICTIM: no agent of a1 a2 a3 but VICTIM runs a worker
no_workers_but() {
    local n others=()
    for n in a1 a2 a3; do [ "$n" != "$1" ] && others+=("$n"); done
    no_workers "${others[@]}"
}

# ring_job: submits a two-node CPU all-reduce as job 1 (ranks that talk:
# a rank's ring sees its peer go at once) and waits until both ranks have
# started and run 0.3 s; sets sweep. 1000 iterations: the job lasts seconds
# on an idle machine; with 100 it ended in 0.3 s, before the test's fault
ring_job() {
    sweep=$(submit --kind allreduce --backend cpu --param n_nodes=2 --param max_bytes=4194304 --param iters=1000)
    wait_ranks 1 started 2
    sleep 0.3
}

# ended_once JOB STATE: the job ended exactly once, in STATE: one row in
# v_results, one line in the coordinator's log, at most one results row
# per attempt and none for an attempt that did not end the job
ended_once() {
    # `wait` hears the end from the coordinator, which may answer before the
    # commit that ends its loop turn has landed
    for _ in $(seq 100); do
        [ "$(q "SELECT count(*) FROM v_results WHERE job_id = $1")" = 1 ] && break
        sleep 0.05
    done
    eq "job $1 in v_results once" "$(q "SELECT count(*) FROM v_results WHERE job_id = $1")" 1
    eq "job $1 state" "$(q "SELECT status FROM v_results WHERE job_id = $1")" "$2"
    eq "job $1 ended once in the log" "$(grep -cE "job $1 $2( \(|:)" "$T/coord.log")" 1
    eq "job $1: results only for its last attempt" \
        "$(q "SELECT count(*) FROM results r JOIN jobs j USING (job_id)
              WHERE r.job_id = $1 AND r.attempt != j.attempt")" 0
    eq "job $1: every rank of every attempt ended" \
        "$(q "SELECT count(*) FROM ranks WHERE job_id = $1
              AND state IN ('waiting', 'assigned', 'ready', 'started')")" 0
}

# job_ok JOB NODES GPUS: a multi-node sleep job that succeeded: every rank
# ran on its own node, got rank 0's id of this attempt and its own rank and
# world size, and began within START_WINDOW_MS of the others, not before
# the start time, which was set after every rank was ready
job_ok() {
    local job=$1 n=$2 gpus=$3 att
    att=$(attempt_of "$job")
    ended_once "$job" done
    local k="FROM ranks WHERE job_id = $job AND attempt = $att"
    eq "job $job: $n ranks" "$(q "SELECT count(*) $k")" "$n"
    eq "job $job: ranks 0..n-1 on distinct nodes" \
        "$(q "SELECT count(DISTINCT agent_id) || ',' || min(rank) || ',' || max(rank) $k")" "$n,0,$((n - 1))"
    eq "job $job: every rank done" "$(q "SELECT group_concat(DISTINCT state || '/' || status) $k")" "done/ok"
    eq "job $job: each record names its own rank, the node count and world size" \
        "$(q "SELECT count(*) $k AND json_extract(record, '$.dist.rank') = rank
              AND json_extract(record, '$.dist.n_nodes') = $n
              AND json_extract(record, '$.dist.world_size') = $((n * gpus))")" "$n"
    # rank 0's id: "GBSLEEP1" (4742534c45455031), then this job and attempt
    local want
    want=$(printf '4742534c45455031%016x%08x' "$job" "$att")
    eq "job $job: one unique id, rank 0's of this attempt" \
        "$(q "SELECT count(DISTINCT json_extract(record, '$.dist.unique_id')) || ','
              || substr(min(json_extract(record, '$.dist.unique_id')), 1, 40) $k")" "1,$want"
    # the attempt's started_at is when the coordinator set the start time
    eq "job $job: one start time, set once every rank was ready" \
        "$(q "SELECT count(DISTINCT start_at) || ',' || (count(ready_at) = count(*)) || ','
              || (max(ready_at) <= (SELECT started_at FROM attempts WHERE job_id = $job AND attempt = $att))
              || ',' || (min(start_at) > max(ready_at)) $k")" "1,1,1,1"
    eq "job $job: no rank began before the start time" \
        "$(q "SELECT count(*) $k AND json_extract(record, '$.dist.started_at_ms')
              < json_extract(record, '$.dist.start_at_ms')")" 0
    local spread
    spread=$(q "SELECT max(json_extract(record, '$.dist.started_at_ms'))
                - min(json_extract(record, '$.dist.started_at_ms')) $k")
    [ "$spread" -le "$START_WINDOW_MS" ] || fail "job $job: ranks began $spread ms apart (window $START_WINDOW_MS ms)"
    eq "job $job: v_results counts every node and GPU" \
        "$(q "SELECT n_nodes || ',' || n_gpus || ',' || (length(nodes) - length(replace(nodes, ',', '')) + 1)
              FROM v_results WHERE job_id = $job")" "$n,$((n * gpus)),$n"
    echo "job $job: $n ranks began $spread ms apart"
}

# fake_rank_start CASE SECONDS SUBMIT-ARGS...: a coordinator, agent a1, and
# test_fakeagent CASE as the second node (rank 1, pid FAKE_PID); a
# two-node sleep job submitted with SUBMIT-ARGS (sets sweep)
fake_rank_start() {
    local what=$1 secs=$2
    shift 2
    start_coord
    start_agent a1
    wait_nodes 1
    "$FAKE" "$what" "$LISTEN" "$secs" >"$T/fake.log" 2>&1 &
    FAKE_PID=$!
    PIDS+=("$FAKE_PID")
    wait_nodes 2
    sweep=$(submit --kind sleep --param n_nodes=2 "$@")
}

# fake_rank_fails CASE SECONDS SUBMIT-ARGS...: fake_rank_start, and the job
# must fail, the fake agent end well
fake_rank_fails() {
    fake_rank_start "$@"
    "$GB" wait "$sweep" --quiet
    eq "wait fails" "$?" 1
    wait "$FAKE_PID" || fail "fake agent: $(cat "$T/fake.log")"
}
