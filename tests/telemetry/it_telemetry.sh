#!/usr/bin/env bash
# Telemetry through a real coordinator, agent and worker (CASE). A GPU job
# here is the synthetic `sleep` kind placed on an agent whose NVML is the
# stand-in library (tests/multinode/fake_nvml.c, readings scripted with
# $GB_FAKE_NVML_TELEMETRY): the agent sees 4 GPUs, places the job as a
# cuda job on GPU 0 (or 0 and 1), samples the stand-in while the worker
# sleeps, and the record's timed window is the sleep. The row stays
# `synthetic`. The CPU case is real: busy loops compete with the job.
#
#   it_telemetry.sh GPUBENCH LIBFAKENVML CASE
source "$(dirname "$0")/../control/lib.sh" "$1"
FAKE=${2:?libgbfakenvml.so}
case=${3:?case}
SCRIPT=$T/nvml-script.txt

# agent_fake NAME [flags]: an agent on the stand-in NVML
agent_fake() {
    local name=$1; shift
    GB_NVML_LIB=$FAKE GB_FAKE_NVML_TELEMETRY=$SCRIPT start_agent "$name" "$@"
}
threads() { ls "/proc/$1/task" 2>/dev/null | wc -l; }
# the job's record key
rec() { q "SELECT json_extract(record, '$1') FROM results WHERE job_id = ${2:-1}"; }
# the stored sample rows equal the record's rows: stored once, all of them
rows_stored_once() {
    local table=$1 job=${2:-1}
    local stored want
    stored=$(q "SELECT count(*) FROM $table WHERE job_id = $job")
    want=$(q "SELECT json_array_length(record, '$.telemetry.samples') FROM results WHERE job_id = $job")
    eq "rows in $table" "$stored" "$want"
    [ "$stored" -gt 0 ] || fail "no rows in $table"
}

# hung: a reactor held up by the sampler would miss 70 heartbeats; a lost
# window of 2 s (not 0.5 s) still sees that, and not the ~0.5 s a loaded
# 2-core machine can stall a process (seen once: "silent for 526 ms")
[ "$case" = hung ] && LOST=20
start_coord
case "$case" in
throttled)
    # GPU 0 under a thermal slowdown the whole time: the result is invalid
    # and names the reason; samples every 50 ms of a 600 ms window
    echo '0 * sm=1410 mem=2619 power=650.5 temp=88 util=97 used=40000 reasons=0x48' >"$SCRIPT"
    agent_fake a1 --telemetry-ms 50
    wait_nodes 1
    # judge_telemetry: a sleep is judged as a measurement (a test hook)
    sweep=$(submit --kind sleep --param duration_ms=600 --param judge_telemetry=1)
    "$GB" wait "$sweep" --quiet --timeout 60 || fail "the sweep failed"
    eq "placed as a GPU job" "$(q "SELECT backend FROM attempts")" cuda
    eq "synthetic" "$(q "SELECT synthetic FROM v_results")" 1
    # not the CPU's model as its gpu_model (it was)
    eq "no GPU claimed" "$(q "SELECT gpu_model FROM v_results")" "none (the sleep kind uses no GPU)"
    eq "invalid" "$(q "SELECT valid FROM v_results")" 0
    eq "reason" "$(q "SELECT invalid_reason FROM v_results")" \
        "GPU throttling in the timed window: hw_slowdown, hw_thermal_slowdown (GPU 0: $(rec '$.telemetry.gpus[0].samples') of $(rec '$.telemetry.gpus[0].samples') samples)"
    eq "flag" "$(q "SELECT telemetry_flag FROM v_results")" "throttled: hw_slowdown, hw_thermal_slowdown"
    rows_stored_once telemetry
    n=$(q "SELECT count(*) FROM telemetry")
    # 600 ms at 50 ms is 12 or 13 samples; a loaded machine runs late, never early
    [ "$n" -ge 6 ] && [ "$n" -le 14 ] || fail "$n samples in a 600 ms window at 50 ms"
    len=$(q "SELECT json_extract(record, '$.timed_window_ms[1]') - json_extract(record, '$.timed_window_ms[0]') FROM results")
    eq "cut to the window" "$(q "SELECT min(t_ms) >= 0 AND max(t_ms) <= $len FROM telemetry")" 1
    eq "readings" "$(q "SELECT DISTINCT sm_clock_mhz || ',' || mem_clock_mhz || ',' || power_w || ',' || temp_c || ',' || util_pct || ',' || mem_used_bytes || ',' || throttle_reasons || ',' || power_limit_w FROM telemetry")" \
        "1410,2619,650.5,88,97,41943040000,72,700.0"
    eq "v_telemetry" "$(q "SELECT gpu || '|' || sm_clock_median_mhz || '|' || temp_max_c || '|' || power_median_w || '|' || power_max_w || '|' || reasons || '|' || throttled FROM v_telemetry")" \
        "0|1410|88|650.5|650.5|hw_slowdown,hw_thermal_slowdown|1"
    # without the hook a sleep measures nothing: the same throttled GPU
    # does not make it invalid; what was seen is kept, and the verdict it
    # would have drawn
    sweep=$(submit --kind sleep --param duration_ms=300)
    "$GB" wait "$sweep" --quiet --timeout 60 || fail "the second sweep failed"
    eq "a sleep is not judged" "$(q "SELECT valid || ',' || COALESCE(invalid_reason, '-') || ',' || telemetry_flag FROM v_results WHERE job_id = 2")" \
        "1,-,throttled: hw_slowdown, hw_thermal_slowdown"
    case "$(rec '$.telemetry.not_judged' 2)" in
    "GPU throttling in the timed window: hw_slowdown, hw_thermal_slowdown (GPU 0: "*) ;;
    *) fail "not_judged: $(rec '$.telemetry.not_judged' 2)" ;;
    esac
    ;;
idle)
    # only the reasons that are not throttling (idle, application clocks)
    # and the power cap at the default limit: valid, the reasons recorded
    echo '0 * reasons=0x7 limit=700 default=700' >"$SCRIPT"
    agent_fake a1
    wait_nodes 1
    sweep=$(submit --kind sleep --param duration_ms=500)
    "$GB" wait "$sweep" --quiet --timeout 60 || fail "the sweep failed"
    eq "valid" "$(q "SELECT valid || ',' || COALESCE(invalid_reason, '-') || ',' || COALESCE(telemetry_flag, '-') FROM v_results")" "1,-,-"
    eq "reasons seen" "$(q "SELECT reasons || '|' || COALESCE(throttle_reasons, '-') || '|' || throttled FROM v_telemetry")" \
        "gpu_idle,applications_clocks_setting,sw_power_cap|-|0"
    rows_stored_once telemetry
    ;;
two_gpus)
    # a 2-GPU job: GPU 1 alone slows down for temperature (software)
    printf '0 * sm=1980 reasons=0\n0 1 sm=1600 temp=91 reasons=0x20\n' >"$SCRIPT"
    agent_fake a1
    wait_nodes 1
    sweep=$(submit --kind sleep --gpus 2 --param duration_ms=500 --param judge_telemetry=1)
    "$GB" wait "$sweep" --quiet --timeout 60 || fail "the sweep failed"
    eq "GPUs sampled" "$(q "SELECT group_concat(gpu || ':' || sm_clock_median_mhz || ':' || throttled, ' ') FROM v_telemetry")" \
        "0:1980:0 1:1600:1"
    q "SELECT invalid_reason FROM v_results" >"$T/reason.txt"
    contains "GPU 1 named" "$T/reason.txt" "sw_thermal_slowdown (GPU 1: "
    eq "both GPUs' rows" "$(q "SELECT count(DISTINCT gpu_idx) FROM telemetry")" 2
    rows_stored_once telemetry
    ;;
multinode)
    # a multi-node job's row is valid only if every rank's record is: agents
    # in their own processes, each on its own stand-in NVML; b2 and b3's
    # GPUs throttle the whole time, b1 and b4's do not. The ranks' sleeps
    # are judged as measurements (judge_telemetry), so a throttled node's
    # rank records itself invalid; rank 0 goes to the first agent listed
    # in registration order
    echo '0 * sm=1980 reasons=0' >"$T/clean.txt"
    echo '0 * sm=1410 temp=88 reasons=0x48' >"$T/hot.txt"
    for n in b1 b2 b3 b4; do
        script=$T/clean.txt
        case $n in b2 | b3) script=$T/hot.txt ;; esac
        GB_NVML_LIB=$FAKE GB_FAKE_NVML_TELEMETRY=$script start_agent "$n" --telemetry-ms 50
        wait_nodes "${n#b}" # registration order: b1, b2, b3, b4
    done
    mn() { # mn N GLOB: a sleep over N nodes whose names match GLOB, judged; waits for it
        sweep=$(submit --kind sleep --param duration_ms=400 --param judge_telemetry=1 \
            --param n_nodes="$1" --nodes "$2")
        "$GB" wait "$sweep" --quiet --timeout 60 || fail "the job over $2 failed"
    }
    hot="GPU throttling in the timed window: hw_slowdown, hw_thermal_slowdown (GPU 0: "
    rank_why() { q "SELECT json_extract(record, '$.invalid_reason') FROM ranks WHERE job_id = $1 AND rank = $2"; }
    # job 1: rank 0 (b1) valid, rank 1 (b2) throttled
    mn 2 "b[12]"
    eq "job 1: ranks on b1, b2" "$(q "SELECT group_concat(n.name, ',') FROM (SELECT agent_id FROM ranks WHERE job_id = 1 ORDER BY rank) JOIN nodes n USING (agent_id)")" b1,b2
    eq "job 1: each rank's own verdict" "$(q "SELECT group_concat(json_extract(record, '$.valid'), ',') FROM (SELECT record FROM ranks WHERE job_id = 1 ORDER BY rank)")" 1,0
    case "$(rank_why 1 1)" in "$hot"*) ;; *) fail "rank 1's reason: $(rank_why 1 1)" ;; esac
    eq "job 1 done, invalid: rank 1's reason, its node named" \
        "$(q "SELECT status || '|' || valid || '|' || invalid_reason FROM v_results WHERE job_id = 1")" \
        "done|0|rank 1 on b2: $(rank_why 1 1)"
    eq "job 1: the row's figures are still rank 0's" "$(q "SELECT json_extract(record, '$.dist.rank') || ',' || json_extract(record, '$.valid') FROM results WHERE job_id = 1")" 0,1
    eq "v_telemetry says the job's verdict" "$(q "SELECT DISTINCT valid FROM v_telemetry WHERE job_id = 1")" 0
    # job 2: ranks 1 and 2 (b2, b3) throttled: both named, in rank order
    mn 3 "b[123]"
    eq "job 2 invalid, both ranks named" \
        "$(q "SELECT valid || '|' || invalid_reason FROM v_results WHERE job_id = 2")" \
        "0|rank 1 on b2: $(rank_why 2 1); rank 2 on b3: $(rank_why 2 2)"
    # job 3: rank 0 (b2) throttled, rank 1 (b4) valid: rank 0's reason, as before
    mn 2 "b[24]"
    eq "job 3: rank 0's own reason, unchanged" \
        "$(q "SELECT valid || '|' || invalid_reason FROM v_results WHERE job_id = 3")" \
        "0|$(q "SELECT json_extract(record, '$.invalid_reason') FROM results WHERE job_id = 3")"
    case "$(rank_why 3 0)" in "$hot"*) ;; *) fail "rank 0's reason: $(rank_why 3 0)" ;; esac
    # job 4: every rank valid (b1, b4)
    mn 2 "b[14]"
    eq "job 4 valid" "$(q "SELECT valid || '|' || COALESCE(invalid_reason, '-') FROM v_results WHERE job_id = 4")" "1|-"
    eq "job 4: both ranks valid" "$(q "SELECT group_concat(json_extract(record, '$.valid'), ',') FROM ranks WHERE job_id = 4")" 1,1
    # jobs 5 and 6: the ranks' reports in either order, the other rank's
    # well after: b2's worker (rank 1, job 5), then b1's (rank 0, job 6)
    # held (SIGSTOP) until the other rank's report is stored (its agent
    # samples on: the held rank's window only grows); the row waits for the
    # last one and has its verdict
    late() { # late JOB GLOB HELD HELD_RANK
        local other=$((1 - $4)) st
        sweep=$(submit --kind sleep --param duration_ms=400 --param judge_telemetry=1 \
            --param n_nodes=2 --nodes "$2")
        for _ in $(seq 200); do
            [ "$(q "SELECT count(*) FROM ranks WHERE job_id = $1 AND state = 'started'")" = 2 ] && break
            sleep 0.02
        done
        local w
        w=$(pgrep -P "${AGENT_PID[$3]}") || fail "job $1: no worker on $3"
        kill -STOP "$w"
        for _ in $(seq 200); do
            st=$(q "SELECT state FROM ranks WHERE job_id = $1 AND rank = $other")
            [ "$st" = done ] && break
            sleep 0.02
        done
        eq "job $1: rank $other reported first" "$st" done
        eq "job $1: no row before rank $4's report" "$(q "SELECT count(*) FROM results WHERE job_id = $1")" 0
        kill -CONT "$w"
        "$GB" wait "$sweep" --quiet --timeout 60 || fail "job $1 failed"
        eq "job $1: rank $4 reported last" "$(q "SELECT (SELECT ended_at FROM ranks WHERE job_id = $1 AND rank = $4) >= (SELECT ended_at FROM ranks WHERE job_id = $1 AND rank = $other)")" 1
    }
    late 5 "b[12]" b2 1
    eq "job 5: rank 1's late reason" "$(q "SELECT valid || '|' || invalid_reason FROM v_results WHERE job_id = 5")" \
        "0|rank 1 on b2: $(rank_why 5 1)"
    late 6 "b[12]" b1 0
    eq "job 6: rank 1's reason, rank 0 late" "$(q "SELECT valid || '|' || invalid_reason FROM v_results WHERE job_id = 6")" \
        "0|rank 1 on b2: $(rank_why 6 1)"
    eq "one attempt each" "$(q "SELECT count(*) FROM attempts")" 6
    # `gpubench results` lists the reasons under the table
    "$GB" results --db "$T/gb.db" >"$T/results.txt" || fail "results"
    contains "five invalid" "$T/results.txt" "5 of 6 result(s) invalid, not to be trusted"
    contains "job 1's line names rank 1" "$T/results.txt" "job 1 invalid: rank 1 on b2: $hot"
    contains "job 2's line names rank 2" "$T/results.txt" "; rank 2 on b3: $hot"
    grep -q "^job 4 invalid" "$T/results.txt" && fail "job 4 is listed invalid: $(cat "$T/results.txt")"
    grep -q "job 1 attempt 1 invalid: rank 1 on b2" "$T/coord.log" || fail "the coordinator does not log job 1's verdict"
    ;;
default_batch)
    # `gpubench run`'s default GPU sweep takes batch 256 only where the
    # smallest GPU holds it in tf32 (27.3 GB of activations): a 24 GB card
    # ran out of memory in its first job
    for m in 141:256 80:256 40:256 24:128 16:64 8:32; do
        GB_NVML_LIB=$FAKE GB_FAKE_NVML_MEM_GB=${m%:*} "$GB" run -h >"$T/h.txt" || fail "run -h"
        contains "${m%:*} GiB: batch ${m#*:}" "$T/h.txt" "ResNet-50 on one GPU in tf32, fp16 and bf16, batch ${m#*:}"
    done
    contains "and says why" "$T/h.txt" "batch 32 (256 does not fit in its memory), and the matrix rate in each: gemm 8192x8192x8192"
    # the default GPU sweep is one the coordinator takes: ResNet-50 and the
    # gemm beside it in each precision (the jobs fail here, with no CUDA
    # driver; a build without the engine runs the gemm probe instead)
    if "$GB" version | grep -q "resnet50 engine built in"; then
        GB_NVML_LIB=$FAKE GB_FAKE_NVML_MEM_GB=80 timeout 120 "$GB" run --db "$T/run.db" >"$T/run.out" 2>"$T/run.err"
        eq "run: the jobs fail (no CUDA driver)" "$?" 1
        contains "six jobs" "$T/run.err" "gpubench run: sweep 1: 6 job(s); store $T/run.db"
        eq "the default GPU sweep" "$(sqlite3 "$T/run.db" "SELECT group_concat(kind || ':' || backend || ':' || precision || ':' || COALESCE(batch_per_gpu, '-') || ':' || COALESCE(m || 'x' || n || 'x' || k, '-') || ':' || status, ' ') FROM (SELECT * FROM v_results ORDER BY job_id)")" \
            "resnet50:cuda:tf32:256:-:failed resnet50:cuda:fp16:256:-:failed resnet50:cuda:bf16:256:-:failed gemm:cuda:tf32:-:8192x8192x8192:failed gemm:cuda:fp16:-:8192x8192x8192:failed gemm:cuda:bf16:-:8192x8192x8192:failed"
    fi
    ;;
nvlink_place)
    # NVLink bridges join GPUs 0-1 and 2-3 only: an nvlink job of 2 GPUs
    # (0 and 1) fits, one of 4 does not; also for a coordinator that knows
    # the node from its store only
    echo '0 * sm=1980' >"$SCRIPT"
    GB_FAKE_NVML=bridge agent_fake a1
    wait_nodes 1
    ar='{"kind": "allreduce", "backend": "cuda", "interconnect": "nvlink", "min_bytes": 8, "max_bytes": 8}'
    for round in live stored; do
        s=$(echo "${ar%\}}, \"gpus\": 2}" | "$GB" submit --spec - 2>"$T/two.log") || fail "2 bridged GPUs refused ($round): $(cat "$T/two.log")"
        "$GB" cancel "$s" >/dev/null 2>&1
        echo "${ar%\}}, \"gpus\": 4}" | "$GB" submit --spec - >/dev/null 2>"$T/four.log" && fail "4 GPUs over nvlink accepted ($round)"
        contains "says why ($round)" "$T/four.log" "node a1's GPUs 0..3, which a job of 4 GPUs takes, are not joined by NVLink"
        kill -TERM "$COORD_PID"; wait "$COORD_PID" 2>/dev/null
        kill -TERM "${AGENT_PID[a1]}"; wait "${AGENT_PID[a1]}" 2>/dev/null
        start_coord
    done
    ;;
cancel)
    # the sampler runs with the job and stops when it is killed; the agent
    # samples the next job as before
    : >"$SCRIPT"
    agent_fake a1
    wait_nodes 1
    base=$(threads "${AGENT_PID[a1]}")
    sweep=$(submit --kind sleep --param duration_ms=60000)
    wait_running "$sweep" 1
    for _ in $(seq 100); do [ "$(threads "${AGENT_PID[a1]}")" -gt "$base" ] && break; sleep 0.05; done
    eq "a sampler thread while the job runs" "$(threads "${AGENT_PID[a1]}")" $((base + 1))
    "$GB" cancel "$sweep" >/dev/null || fail "cancel refused"
    "$GB" wait "$sweep" --quiet --timeout 30
    eq "cancelled" "$(q "SELECT status FROM v_results")" cancelled
    for _ in $(seq 100); do [ "$(threads "${AGENT_PID[a1]}")" -eq "$base" ] && break; sleep 0.05; done
    eq "the sampler is gone" "$(threads "${AGENT_PID[a1]}")" "$base"
    eq "no telemetry of a killed job" "$(q "SELECT count(*) FROM telemetry")" 0
    sweep=$(submit --kind sleep --param duration_ms=400)
    "$GB" wait "$sweep" --quiet --timeout 60 || fail "the second sweep failed"
    rows_stored_once telemetry 2
    eq "threads after the second job" "$(threads "${AGENT_PID[a1]}")" "$base"
    ;;
hung)
    # every SM clock query takes 7 s: the agent's reactor never waits for
    # the sampler, heartbeats go on (lost after 0.5 s here), the result
    # comes 5 s (the stop grace) after the worker ended, says its telemetry
    # is incomplete, and the abandoned thread later ends on its own
    : >"$SCRIPT"
    GB_FAKE_NVML_DELAY_MS=7000 agent_fake a1
    wait_nodes 1
    sweep=$(submit --kind sleep --param duration_ms=300)
    "$GB" wait "$sweep" --quiet --timeout 60 || fail "the sweep failed"
    eq "one attempt, never lost" "$(q "SELECT count(*) || ',' || group_concat(state) FROM attempts")" "1,done"
    eq "still connected" "$(q "SELECT state FROM v_nodes")" connected
    if grep -qE "lost \(silent|attempt [0-9]+ lost" "$T/coord.log"; then
        fail "the coordinator lost the agent: $(grep -E "lost \(silent|attempt [0-9]+ lost" "$T/coord.log")"
    fi
    eq "valid" "$(q "SELECT valid FROM v_results")" 1
    q "SELECT telemetry_flag FROM v_results" >"$T/flag.txt"
    contains "flagged incomplete" "$T/flag.txt" "telemetry incomplete: the sampler did not stop"
    contains "logged" "$T/a1.log" "the sampler did not stop within 5000 ms"
    gap=$(q "SELECT CAST(round((julianday(committed_at) - julianday(finished_at)) * 86400) AS INTEGER) FROM results")
    [ "$gap" -ge 4 ] && [ "$gap" -le 7 ] || fail "the result came ${gap} s after the worker ended"
    sleep 3 # the abandoned thread returns from NVML and frees itself
    kill -TERM "${AGENT_PID[a1]}"
    wait "${AGENT_PID[a1]}"
    eq "the agent stops cleanly (no leak under the sanitizers)" "$?" 0
    ;;
cpu)
    # a CPU job while busy loops take every core: others' share of the CPU
    # time in the window makes the result invalid. Job 1 is a sleep judged
    # as a measurement (its test hook judge_telemetry); job 2 a plain
    # sleep, which measures nothing: valid, its telemetry kept (on a shared
    # machine most of the smoke spec's sleep jobs were valid 0)
    GB_NVML_LIB=/nonexistent/libnvidia-ml.so.1 start_agent a1
    wait_nodes 1
    for _ in $(seq "$(nproc)"); do
        bash -c 'while :; do :; done' &
        PIDS+=("$!")
        BUSY+=("$!")
    done
    sweep=$(submit --kind sleep --param duration_ms=1500 --param judge_telemetry=1)
    "$GB" wait "$sweep" --quiet --timeout 60 || fail "the sweep failed"
    sweep=$(submit --kind sleep --param duration_ms=1500)
    "$GB" wait "$sweep" --quiet --timeout 60 || fail "the second sweep failed"
    kill -KILL "${BUSY[@]}"
    eq "placed on the CPU" "$(q "SELECT group_concat(backend) FROM attempts")" cpu,cpu
    for j in 1 2; do
        taken=$(q "SELECT CAST(taken_pct AS INTEGER) FROM v_cpu_telemetry WHERE job_id = $j")
        # the worker sleeps: nearly all the time is the busy loops'
        [ "$taken" -ge 50 ] || fail "job $j: others took only ${taken}% with a busy loop on every core"
        eq "job $j flagged" "$(q "SELECT flagged FROM v_cpu_telemetry WHERE job_id = $j")" 1
        rows_stored_once telemetry_cpu "$j"
    done
    eq "invalid" "$(q "SELECT valid FROM v_results WHERE job_id = 1")" 0
    q "SELECT invalid_reason FROM v_results WHERE job_id = 1" >"$T/reason.txt"
    contains "reason" "$T/reason.txt" "CPU contention in the timed window: "
    eq "a sleep is not judged" "$(q "SELECT valid || ',' || COALESCE(invalid_reason, '-') FROM v_results WHERE job_id = 2")" "1,-"
    eq "v_cpu_telemetry's valid" "$(q "SELECT group_concat(valid) FROM (SELECT valid FROM v_cpu_telemetry ORDER BY job_id)")" 0,1
    rec '$.telemetry.not_judged' 2 >"$T/not_judged.txt"
    contains "the verdict it would have drawn" "$T/not_judged.txt" "CPU contention in the timed window: "
    # the results table lists job 1 alone as not to be trusted
    "$GB" results --db "$T/gb.db" >"$T/results.txt" || fail "results"
    contains "one invalid" "$T/results.txt" "1 of 2 result(s) invalid, not to be trusted"
    grep -q "^job 2 invalid" "$T/results.txt" && fail "the sleep job 2 is listed invalid: $(cat "$T/results.txt")"
    eq "no GPU rows" "$(q "SELECT count(*) FROM telemetry")" 0
    ;;
off)
    # --telemetry-ms 0: no sampler, no telemetry key, validity as before
    agent_fake a1 --telemetry-ms 0
    wait_nodes 1
    sweep=$(submit --kind sleep --param duration_ms=200)
    "$GB" wait "$sweep" --quiet --timeout 60 || fail "the sweep failed"
    eq "no telemetry" "$(q "SELECT json_type(record, '$.telemetry') IS NULL FROM results")" 1
    eq "the window is still recorded" "$(q "SELECT json_array_length(record, '$.timed_window_ms') FROM results")" 2
    eq "valid" "$(q "SELECT valid FROM v_results")" 1
    ;;
uuid)
    # CUDA_VISIBLE_DEVICES by UUID: the agent cannot tell which NVML GPU a
    # job's GPU is, so nothing is sampled, and the record says so (it must
    # not read like telemetry turned off); valid, flagged
    echo '0 * reasons=0' >"$SCRIPT"
    CUDA_VISIBLE_DEVICES=GPU-fake-2 agent_fake a1
    wait_nodes 1
    sweep=$(submit --kind sleep --param duration_ms=200)
    "$GB" wait "$sweep" --quiet --timeout 60 || fail "the sweep failed"
    eq "telemetry present" "$(rec '$.telemetry.source')" nvml
    case "$(rec '$.telemetry.error')" in
    "no telemetry: CUDA_VISIBLE_DEVICES='GPU-fake-2'"*"cannot tell which GPUs to sample"*) ;;
    *) fail "the error says why: $(rec '$.telemetry.error')" ;;
    esac
    eq "valid" "$(q "SELECT valid FROM v_results")" 1
    case "$(q "SELECT telemetry_flag FROM v_results")" in
    "telemetry incomplete: no telemetry: CUDA_VISIBLE_DEVICES"*) ;;
    *) fail "flagged: $(q "SELECT telemetry_flag FROM v_results")" ;;
    esac
    ;;
flags)
    # the interval: listed in -h, refused out of range
    "$GB" agent -h >"$T/help.txt" || fail "agent -h"
    contains "-h lists it" "$T/help.txt" "--telemetry-ms N"
    for bad in 5 60001 -1 x; do
        "$GB" agent --connect "$LISTEN" --state-dir "$T/bad" --telemetry-ms "$bad" >"$T/bad.txt" 2>&1
        eq "--telemetry-ms $bad refused" "$?" 2
        contains "--telemetry-ms $bad named, with the one range" "$T/bad.txt" "--telemetry-ms: 0 (off) or 10..60000"
    done
    ;;
no_gpu)
    # gpu_model of a job that used no GPU, on a node with GPUs, in every way
    # it can end: a sleep job (placed as a cuda job) says it used none
    # whether it finished, failed, its worker died or its agent was lost;
    # a cpu job says the CPU finished or failed. A failed or lost one said
    # the node's GPU: it has no device_model of its own, and v_results fell
    # back to the node's gpu_model (the first GPU's name)
    : >"$SCRIPT"
    agent_fake a1
    wait_nodes 1
    none="none (the sleep kind uses no GPU)"
    cpu=$(q "SELECT cpu_model FROM v_nodes")
    gpu=$(q "SELECT gpu_model FROM v_nodes")
    [ -n "$cpu" ] && [ "$gpu" != "$cpu" ] || fail "the node's GPU '$gpu' is not told from its CPU '$cpu'"
    s=$(submit --kind sleep --param duration_ms=100)
    "$GB" wait "$s" --quiet --timeout 60 || fail "the sleep failed"
    s=$(submit --kind sleep --param duration_ms=100 --param fail=asked)
    "$GB" wait "$s" --quiet --timeout 60 && fail "fail=asked finished"
    s=$(submit --kind sleep --param duration_ms=100 --param signal=9)
    "$GB" wait "$s" --quiet --timeout 60 && fail "signal=9 finished"
    s=$(submit --kind sleep --backend cpu --param duration_ms=100)
    "$GB" wait "$s" --quiet --timeout 60 || fail "the cpu sleep failed"
    s=$(submit --kind sleep --backend cpu --param duration_ms=100 --param fail=asked)
    "$GB" wait "$s" --quiet --timeout 60 && fail "the cpu fail=asked finished"
    s=$(submit --kind sleep --param duration_ms=60000 --param max_attempts=1)
    wait_running "$s" 1
    kill -KILL "${AGENT_PID[a1]}"; wait "${AGENT_PID[a1]}" 2>/dev/null
    "$GB" wait "$s" --quiet --timeout 60 && fail "the lost job finished"
    eq "how each ended" "$(q "SELECT group_concat(status || ':' || COALESCE(error, '-'), '|') FROM (SELECT * FROM v_results ORDER BY job_id)" | sed 's/:[^|]*lost[^|]*/:lost/')" \
        "done:-|failed:asked|failed:worker killed by signal 9 (Killed)|done:-|failed:asked|failed:lost"
    eq "backends" "$(q "SELECT group_concat(backend, ',') FROM (SELECT * FROM v_results ORDER BY job_id)")" cuda,cuda,cuda,cpu,cpu,cuda
    for j in 1 2 3 6; do eq "job $j's gpu_model" "$(q "SELECT gpu_model FROM v_results WHERE job_id = $j")" "$none"; done
    for j in 4 5; do eq "job $j's gpu_model" "$(q "SELECT gpu_model FROM v_results WHERE job_id = $j")" "$cpu"; done
    # jobs cancelled before any node took them (no agent now) have no
    # gpu_model, whatever their kind: a never-run sleep said none beside
    # the gemm's empty one
    s=$(submit --kind sleep --param duration_ms=100)
    "$GB" cancel "$s" >/dev/null || fail "cancel of the queued sleep refused"
    s=$(submit --kind gemm --param m=8 --param n=8 --param k=8)
    "$GB" cancel "$s" >/dev/null || fail "cancel of the queued gemm refused"
    eq "never ran" "$(q "SELECT group_concat(job_id || ':' || kind || ':' || status || ':' || COALESCE(gpu_model, '-') || ':' || COALESCE(node, '-'), '|') FROM (SELECT * FROM v_results WHERE job_id > 6 ORDER BY job_id)")" \
        "7:sleep:cancelled:-:-|8:gemm:cancelled:-:-"
    ;;
*) fail "unknown case $case" ;;
esac
echo ok
