#!/usr/bin/env bash
# A network partition between an agent and the coordinator (CASE), made with
# a network namespace and a veth pair: the agent "r" runs in namespace NS
# behind veth VB (10.X.Y.2); the coordinator listens on the root side, VA
# (10.X.Y.1), with CURVE keys (a non-loopback address). `ip link set VA
# down` cuts the link both ways; `up` heals it. Timers: heartbeat 200 ms,
# lost after 10 (a 2 s lease).
#   before       cut for 0.6 s while r runs a job, healed before the lease
#                expires: nothing is lost, the job ends on attempt 1
#   after        cut for 4 s, past the lease: the coordinator gives r's
#                attempt up and agent "l" (root side) re-runs it; r finishes
#                attempt 1 behind the cut, keeps its result in its spool and
#                sends it once healed: stored, marked superseded; the job
#                ends once, with attempt 2
#   after_adopt  the same with no other agent: the job waits in the queue,
#                r comes back holding attempt 1's result, and that attempt is
#                taken back rather than run again
# Skips (exit 77, a message) only where network namespaces are not
# permitted (not root, no CAP_NET_ADMIN); these machines permit them.
source "$(dirname "$0")/lib.sh" "$1" "$2"
case=${3:?case}
HB=200
LOST=10

NS=gbp$$
VA=gbva$$
VB=gbvb$$
NET=10.$((200 + $$ % 50)).$((($$ / 50) % 250))
ns_cleanup() {
    [ -n "${AGENT_PID[r]:-}" ] && { pkill -KILL -P "${AGENT_PID[r]}" 2>/dev/null; kill -KILL "${AGENT_PID[r]}" 2>/dev/null; }
    ip link del "$VA" 2>/dev/null
    ip netns del "$NS" 2>/dev/null
}
if ! ip netns add "$NS" 2>"$T/netns.err"; then
    echo "SKIP: network namespaces are not permitted here: $(cat "$T/netns.err")" >&2
    exit 77
fi
trap 'rc=$?; ns_cleanup; (exit $rc); cleanup' EXIT
check "veth pair" ip link add "$VA" type veth peer name "$VB"
check "VB into the namespace" ip link set "$VB" netns "$NS"
check "VA address" ip addr add "$NET.1/30" dev "$VA"
check "VA up" ip link set "$VA" up
check "VB address" ip -n "$NS" addr add "$NET.2/30" dev "$VB"
check "VB up" ip -n "$NS" link set "$VB" up
check "lo up" ip -n "$NS" link set lo up

make_keys coord r l me
authorize r l me
LISTEN="tcp://$NET.1:*"
start_coord --key "$T/coord.key" --authorized "$T/authorized"
use_keys me
# r in the namespace: `ip netns exec` execs the agent, so its pid is the agent's
ip netns exec "$NS" "$GB" agent --connect "$LISTEN" --state-dir "$T/r" --name r \
    --heartbeat-ms $HB --lost-after $LOST --kill-grace-ms 500 \
    --key "$T/r.key" --server-key "$T/coord.pub" >>"$T/r.log" 2>&1 &
AGENT_PID[r]=$!
PIDS+=("$!")
wait_nodes 1
check "r reaches the coordinator through the veth pair" grep -q "registered with coordinator" "$T/r.log"

cut() { check "cut" ip link set "$VA" down; }
heal() { check "heal" ip link set "$VA" up; }

case "$case" in
before)
    sweep=$(submit --kind sleep --param duration_ms=2500)
    wait_running "$sweep" 1
    cut
    sleep 0.6
    heal
    check "the job finishes" "$GB" wait "$sweep" --quiet --timeout 30
    eq "one attempt, done on r" "$(q "SELECT count(*) || ',' || max(state) FROM attempts")" "1,done"
    eq "ended on r, attempt 1" "$(q "SELECT node || ',' || attempt || ',' || status FROM v_results")" "r,1,done"
    grep -q "lost (silent\|attempt 1 lost" "$T/coord.log" && fail "the coordinator gave something up during a short cut"
    assert_exactly_once 1
    ;;
after | after_adopt)
    sweep=$(submit --kind sleep --param duration_ms=3000)
    wait_running "$sweep" 1
    # l registers while r is cut off: waiting for it first let r's job end
    # before the cut when l took over 3 s to start (ASan, 4 tests a core)
    [ "$case" = after ] && start_agent l
    cut
    for _ in $(seq 100); do [ "$(q "SELECT state FROM attempts WHERE attempt = 1")" = lost ] && break; sleep 0.05; done
    eq "attempt 1 given up when r's lease expired" "$(q "SELECT state FROM attempts WHERE attempt = 1")" lost
    contains "the loss is logged" "$T/coord.log" "agent r lost (silent for"
    # r's job ends behind the cut: its result waits in its spool
    for _ in $(seq 100); do [ "$(find "$T/r/spool" -name 'result-*.pb' | wc -l)" = 1 ] && break; sleep 0.05; done
    eq "r holds its result" "$(find "$T/r/spool" -name 'result-*.pb' | wc -l)" 1
    grep -q "attempt 2 .*-> r\|job 1 .* done" "$T/coord.log" && fail "the coordinator heard from r during the cut"
    if [ "$case" = after ]; then # attempt 2 is l's, not r's once healed
        for _ in $(seq 200); do [ "$(q "SELECT state FROM v_nodes WHERE node = 'l'")" = connected ] && break; sleep 0.05; done
        eq "l registered during the cut" "$(q "SELECT state FROM v_nodes WHERE node = 'l'")" connected
    fi
    heal
    check "the sweep finishes" "$GB" wait "$sweep" --quiet --timeout 30
    if [ "$case" = after ]; then
        eq "attempt 2 on l ended it" "$(q "SELECT node || ',' || attempt || ',' || status FROM v_results")" "l,2,done"
        for _ in $(seq 100); do [ "$(q "SELECT count(*) FROM results")" = 2 ] && break; sleep 0.05; done
        eq "r's late result kept, superseded" \
           "$(q "SELECT a.state || ',' || r.status FROM attempts a JOIN results r USING (job_id, attempt) WHERE attempt = 1")" \
           "superseded,ok"
    else
        eq "attempt 1 taken back" "$(q "SELECT node || ',' || attempt || ',' || status FROM v_results")" "r,1,done"
        eq "never run again" "$(q "SELECT count(*) FROM attempts")" 1
        contains "logged" "$T/coord.log" "is alive on r after all: kept"
    fi
    for _ in $(seq 100); do [ "$(connected)" -ge 1 ] && [ "$(find "$T/r/spool" -name 'result-*.pb' | wc -l)" = 0 ] && break; sleep 0.05; done
    eq "r is back" "$(q "SELECT state FROM v_nodes WHERE node = 'r'")" connected
    assert_exactly_once 1
    ;;
*) fail "unknown case $case" ;;
esac
echo ok
