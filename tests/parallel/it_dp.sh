#!/usr/bin/env bash
# Data parallelism through the whole system on loopback: a coordinator,
# agents in separate processes (as on separate nodes) and their workers,
# running the engine on CPU replicas. Each multi-node rank checks its own
# data: every rank records a checksum of the parameters it ended with, and
# all must be equal (identical weights across nodes); the all-reduce kind
# checks every element of every size on every rank.
#
#   it_dp.sh GPUBENCH FAKEAGENT CASE
#     allreduce     one node, 2 CPU replicas: v_allreduce rows, all checked
#     mn_allreduce  2 nodes over the TCP ring
#     mn_resnet     ResNet-50 (32x32) on 2 nodes x 1 replica: the same
#                   weights on both ranks, figures over the global batch
#     mn_dead       a rank's worker killed mid all-reduce: the job fails with
#                   that rank's reason and the other rank stops
#     mn_procs      ResNet-50 on 2 nodes x 2 replicas, each replica a process
#                   of its own ("launch": "processes"): 4 ranks, one ring,
#                   the node's rendezvous relayed by its worker
source "$(dirname "$0")/../control/lib.sh" "$1" "$2"
source "$(dirname "$0")/../multinode/mn_lib.sh"
case=${3:?case}
export GB_COMM_ADDR=127.0.0.1 # the ring's listening address on this one machine

case "$case" in
allreduce)
    start_coord
    start_agent a1
    wait_nodes 1
    sweep=$(submit --spec <(echo '{"kind": "allreduce", "backend": "cpu", "gpus": 2,
        "min_bytes": 8, "max_bytes": 1048576, "iters": 5}'))
    check "wait" "$GB" wait "$sweep" --quiet
    ended_once 1 done
    eq "18 sizes (8 B .. 1 MiB), all checked" \
        "$(q "SELECT count(*) || ',' || sum(ok) || ',' || min(bytes) || ',' || max(bytes) FROM v_allreduce")" \
        "18,18,8,1048576"
    eq "two replicas, shared memory" \
        "$(q "SELECT DISTINCT n_gpus || ',' || n_nodes || ',' || interconnect FROM v_allreduce")" "2,1,shm"
    # the timed window is the all-reduces', inside the job, and the telemetry was cut to it
    eq "timed window within the job" \
        "$(q "SELECT json_extract(record, '$.timed_window_ms[0]') <= json_extract(record, '$.timed_window_ms[1]')
              AND json_extract(record, '$.timed_window_ms[0]') >= (julianday(started_at) - 2440587.5) * 86400000 - 5
              AND json_extract(record, '$.telemetry.window_ms') = json_extract(record, '$.timed_window_ms') FROM results")" 1
    # valid depends on what else the machine ran (CPU contention, spread):
    # either way the result says so, with the reason when it is not
    eq "validity stated, with a reason when invalid" \
        "$(q "SELECT count(*) FROM v_results WHERE job_id = 1 AND (valid = 1 OR
              (valid = 0 AND length(invalid_reason) > 0))")" 1
    eq "busbw = algbw * 2(n-1)/n = algbw at n = 2" \
        "$(q "SELECT count(*) FROM v_allreduce WHERE abs(busbw_gbs - algbw_gbs) > 1e-9 * algbw_gbs")" 0
    eq "algbw = bytes / time" \
        "$(q "SELECT count(*) FROM v_allreduce WHERE abs(algbw_gbs - bytes / time_us / 1e3) > 1e-6 * algbw_gbs")" 0
    ;;
mn_allreduce)
    start_coord
    start_agent a1
    start_agent a2
    wait_nodes 2
    sweep=$(submit --spec <(echo '{"kind": "allreduce", "backend": "cpu", "n_nodes": 2,
        "min_bytes": 4, "max_bytes": 4194304, "iters": 3}'))
    check "wait" "$GB" wait "$sweep" --quiet
    ended_once 1 done
    eq "21 sizes, every one checked on both ranks" \
        "$(q "SELECT count(*) || ',' || sum(ok) FROM v_allreduce")" "21,21"
    eq "over the TCP ring, 2 devices on 2 nodes" \
        "$(q "SELECT DISTINCT n_gpus || ',' || n_nodes || ',' || interconnect FROM v_allreduce")" "2,2,tcp"
    eq "each rank's record: its own rank, all sizes right" \
        "$(q "SELECT count(*) FROM ranks WHERE job_id = 1 AND status = 'ok'
              AND json_extract(record, '$.dist.rank') = rank
              AND json_extract(record, '$.details.wrong_sizes') = 0
              AND json_extract(record, '$.details.transport') = 'threads+tcp'")" 2
    no_workers a1 a2
    ;;
mn_resnet)
    start_coord
    start_agent a1
    start_agent a2
    wait_nodes 2
    sweep=$(submit --spec <(echo '{"kind": "resnet50", "backend": "cpu", "n_nodes": 2, "batch": 2,
        "image_size": 32, "steps": 2, "warmup": 1, "bucket_mb": 10}'))
    check "wait" "$GB" wait "$sweep" --quiet
    ended_once 1 done
    k="FROM ranks WHERE job_id = 1"
    eq "both ranks ok" "$(q "SELECT count(*) $k AND status = 'ok'")" 2
    eq "both ranks ended with the same weights" \
        "$(q "SELECT count(DISTINCT json_extract(record, '$.details.params_fnv'))
              || ',' || count(json_extract(record, '$.details.params_fnv')) $k")" "1,2"
    eq "each rank's replica has its global rank" \
        "$(q "SELECT count(*) $k AND json_extract(record, '$.details.replicas[0].rank') = rank")" 2
    eq "buckets over the ring" \
        "$(q "SELECT count(*) $k AND json_extract(record, '$.details.replicas[0].allreduce.transport') = 'threads+tcp'
              AND json_extract(record, '$.details.buckets') >= 5")" 2
    eq "the job's figures are global" \
        "$(q "SELECT n_devices || ',' || json_extract(record, '$.global_batch') || ',' ||
              json_extract(record, '$.interconnect') FROM results WHERE job_id = 1")" "2,4,tcp"
    # (v_scaling takes valid results only: 2 steps on a busy 2-core box may
    # well be too spread out to quote, so the row is checked in v_results)
    eq "the row over 2 nodes" \
        "$(q "SELECT n_nodes || ',' || n_gpus || ',' || interconnect FROM v_results WHERE job_id = 1")" "2,2,tcp"
    no_workers a1 a2
    ;;
mn_procs)
    start_coord
    start_agent a1
    start_agent a2
    wait_nodes 2
    sweep=$(submit --spec <(echo '{"kind": "resnet50", "backend": "cpu", "n_nodes": 2, "gpus": 2,
        "batch": 2, "image_size": 32, "steps": 2, "warmup": 1, "bucket_mb": 10,
        "launch": "processes"}'))
    check "wait" "$GB" wait "$sweep" --quiet
    ended_once 1 done
    k="FROM ranks WHERE job_id = 1"
    eq "both ranks ok, their replicas as processes" \
        "$(q "SELECT count(*) $k AND status = 'ok' AND json_extract(record, '$.details.launch') = 'processes'")" 2
    eq "every replica of both ranks ended with the same weights" \
        "$(q "SELECT count(DISTINCT json_extract(e.value, '$.params_fnv')) || ',' || count(*)
              FROM ranks, json_each(json_extract(record, '$.details.replicas')) AS e WHERE job_id = 1")" "1,4"
    eq "node r's replica processes have global ranks 2r and 2r+1" \
        "$(q "SELECT count(*) $k AND json_extract(record, '$.details.replicas[0].rank') = 2 * rank
              AND json_extract(record, '$.details.replicas[1].rank') = 2 * rank + 1")" 2
    eq "one ring over the four processes" \
        "$(q "SELECT count(*) $k AND json_extract(record, '$.details.replicas[1].allreduce.transport') = 'threads+tcp'
              AND json_extract(record, '$.interconnect') = 'tcp'")" 2
    eq "the job's figures are global" \
        "$(q "SELECT n_devices || ',' || json_extract(record, '$.global_batch') FROM results WHERE job_id = 1")" "4,8"
    eq "the store's row says how its replicas ran" \
        "$(q "SELECT n_gpus || ',' || launch FROM v_results WHERE job_id = 1")" "4,processes"
    eq "each rank went through its node's start barrier" \
        "$(q "SELECT count(*) $k AND json_extract(record, '$.dist.started_at_ms') >= json_extract(record, '$.dist.start_at_ms')")" 2
    no_workers a1 a2
    ;;
mn_dead)
    start_coord
    start_agent a1
    start_agent a2
    wait_nodes 2
    sweep=$(submit --spec <(echo '{"kind": "allreduce", "backend": "cpu", "n_nodes": 2,
        "min_bytes": 16777216, "max_bytes": 16777216, "iters": 100000}'))
    wait_ranks 1 started 2
    sleep 1 # inside the timed all-reduces
    victim=$(rank_node 1 1)
    w=$(worker_of "$victim")
    [ -n "$w" ] || fail "no worker under $victim"
    kill -KILL "$w"
    "$GB" wait "$sweep" --quiet
    eq "wait fails" "$?" 1
    ended_once 1 failed
    q "SELECT error FROM v_results" >"$T/error.txt"
    # whichever the coordinator hears first: the dead rank's agent, or rank
    # 0's worker, whose ring connection to rank 1 broke (it fails at once)
    grep -qE "rank 1 on $victim: worker killed by signal 9|rank 0 on .*: tcp ring: (peer gone: )?rank 1 \(.*\) closed the connection" \
        "$T/error.txt" || fail "the dead rank is not named: $(cat "$T/error.txt")"
    # the killed rank's own report says what happened to it, even when the
    # coordinator's stop reached its agent before the agent had reaped it
    for _ in $(seq 100); do [ -n "$(q "SELECT status FROM v_ranks WHERE job_id = 1 AND rank = 1")" ] && break; sleep 0.05; done
    eq "the killed rank reports its signal" \
        "$(q "SELECT status || ': ' || error FROM v_ranks WHERE job_id = 1 AND rank = 1")" \
        "crashed: rank 1 on $victim: worker killed by signal 9 (Killed)"
    no_workers a1 a2
    ;;
*)
    fail "unknown case $case"
    ;;
esac
echo "$case: ok"
