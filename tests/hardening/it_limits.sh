#!/usr/bin/env bash
# Limits on what arrives (CASE): each refusal is a Reject to the sender
# with a clear reason and a line in the coordinator's log. (Frame sizes,
# decode errors, ranges and sweep size have their tests in tests/control.)
#   rate        a peer sending control requests faster than --rate-limit
#               gets `rate` rejects with a retry hint, then is served again;
#               another peer is not slowed by it
#   max_agents  a new agent id beyond --max-agents is refused; a known one
#               still registers again
#   max_queued  a sweep that would take the unfinished jobs past
#               --max-queued is refused, and accepted once jobs ended
#   max_frame_result
#               a --max-frame (64 KiB) below a real agent's result (a gemm
#               of 10,000 reps: a 230 KB record): the result is still taken
#               and the job ends (it was refused as too_large at every
#               resend, a warning each time, and the job ran for ever)
source "$(dirname "$0")/lib.sh" "$1" "$2"
case=${3:?case}

# at_once I...: one `gpubench status` per I, all started together (one
# after another, an ASan command of 0.8 s under load let a bucket refill
# between them), with the argument `status_args I` prints, if defined;
# refused: how many failed; $T/st.log: what they all said
at_once() {
    local i p pids=()
    refused=0
    for i in "$@"; do
        "$GB" status $(declare -F status_args >/dev/null && status_args "$i") >"$T/st.$i.log" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || refused=$((refused + 1)); done
    cat "$T"/st.*.log >"$T/st.log"
}

case "$case" in
rate)
    start_coord --rate-limit 5 --rate-burst 5
    "$HPEER" rate "$LISTEN" "$CONTROL" 30 >"$T/hpeer.log" 2>&1 || fail "rate: $(cat "$T/hpeer.log")"
    contains "the coordinator logged it" "$T/coord.log" ": rate: rate limit: more than 5 requests a second"
    # reject lines are themselves limited: a flood does not flood the log
    [ "$(grep -c ': rate: rate limit' "$T/coord.log")" -le 25 ] || fail "every refusal was logged"
    check "gpubench status is served" "$GB" status
    ;;
rate_ipc)
    # over ipc:// every command is a new process (a new pid in libzmq's peer
    # address): the bucket is the user's, so separate commands share it
    CONTROL="ipc://$T/ctl" start_coord --rate-limit 1 --rate-burst 2
    at_once 1 2 3 4 5
    [ "$refused" -ge 2 ] || fail "only $refused of 5 commands at once over ipc were limited"
    contains "says why" "$T/st.log" "rate limit"
    ;;
rate_loopback)
    # every loopback source address shares one bucket: commands given
    # sources 127.0.0.2..6 (tcp://SRC:0;DEST) each had a bucket of its own
    start_coord --rate-limit 1 --rate-burst 2
    port=${CONTROL##*:}
    status_args() { echo "--control=tcp://127.0.0.$1:0;127.0.0.1:$port"; }
    at_once 2 3 4 5 6
    [ "$refused" -ge 2 ] || fail "only $refused of 5 commands from 5 loopback addresses were limited"
    contains "says why, naming loopback" "$T/st.log" "from loopback"
    ;;
max_agents)
    start_coord --max-agents 1
    start_agent a1
    wait_nodes 1
    start_agent a2
    for _ in $(seq 100); do grep -q "limit" "$T/a2.log" 2>/dev/null && break; sleep 0.05; done
    contains "the agent was told why" "$T/a2.log" "limit: the coordinator already knows 1 agents, its limit (--max-agents 1)"
    contains "the coordinator logged it" "$T/coord.log" "rejected hello from"
    sleep 0.5
    eq "one node" "$(q "SELECT count(*) FROM nodes")" 1
    eq "a2's warning is not repeated at every retry" "$(grep -c "already knows" "$T/a2.log")" 1
    # nor the coordinator's (it said one every heartbeat: 86k lines a day),
    # and a2 asks again less and less often (a heartbeat doubling to 30 s)
    sleep 1.5
    eq "the coordinator's line is not repeated at every retry" "$(grep -c "rejected hello from" "$T/coord.log")" 1
    # a1 restarts: a known id is not a new agent
    kill -TERM "${AGENT_PID[a1]}"; wait "${AGENT_PID[a1]}" 2>/dev/null
    start_agent a1
    sleep 0.3
    wait_nodes 1
    eq "a1 back" "$("$GB" nodes --format csv | awk -F, '$3 == "connected" {print $1}')" a1
    ;;
max_frame_result)
    start_coord --max-frame 65536
    start_agent a1
    wait_nodes 1
    sweep=$(submit --kind gemm --param m=8 --param n=8 --param k=8 --param reps=10000)
    check "the job ends" "$GB" wait "$sweep" --quiet --timeout 30
    eq "done, its record whole" "$(q "SELECT v.status || ',' || (length(r.record) > 65536) || ',' ||
        json_array_length(json_extract(r.record, '$.details.ms_samples'))
        FROM v_results v JOIN results r USING (job_id, attempt)")" "done,1,10000"
    grep -q "too_large" "$T/coord.log" "$T/a1.log" && fail "the result was refused: $(grep -h too_large "$T/coord.log" | head -n 1)"
    assert_exactly_once 1
    ;;
max_queued)
    start_coord --max-queued 3
    start_agent a1
    wait_nodes 1
    first=$(submit --kind sleep --param duration_ms=800 --repeat 2)
    "$GB" submit --kind sleep --param duration_ms=10 --repeat 2 >"$T/over.log" 2>&1 && fail "a submit past --max-queued was accepted"
    contains "says why" "$T/over.log" "rejected: the coordinator holds 2 unfinished job(s); 2 more would pass its limit of 3 (--max-queued)"
    contains "the coordinator logged it" "$T/coord.log" "rejected submit from"
    eq "one sweep stored" "$(q "SELECT count(*) FROM sweeps")" 1
    check "the first sweep finishes" "$GB" wait "$first" --quiet
    second=$(submit --kind sleep --param duration_ms=10 --repeat 3)
    check "accepted once the queue drained" "$GB" wait "$second" --quiet
    assert_exactly_once 5
    ;;
*) fail "unknown case $case" ;;
esac
echo ok
