#!/usr/bin/env bash
# Bad input on the wire: one malformed frame (CASE, see test_rawpeer.c) is
# answered with a clear Reject (or, over the hard cap, a dropped connection)
# and a log line, and the coordinator goes on serving its healthy agent.
source "$(dirname "$0")/lib.sh" "$1" "$2"
case=${3:?case}

start_coord --max-frame 65536
start_agent healthy
wait_nodes 1
busy=$(submit --kind sleep --param duration_ms=1500)   # the healthy agent is mid-job meanwhile
wait_running "$busy" 1

"$RAWPEER" "$case" "$LISTEN" "$CONTROL" >"$T/rawpeer.log" 2>&1 || fail "$case was not answered as expected"
if [ "$case" = hardcap ]; then
    contains "coordinator logged the dropped connection" "$T/coord.log" "peer connection on"
elif [ "$case" = lost_heard_again ]; then
    eq "a lost agent heard again: one line" "$(grep -c "agent lostagain (lost) heard again before its hello: asked to register again" "$T/coord.log")" 1
    grep "warn.*rejected heartbeat" "$T/coord.log" && fail "a warn line per queued heartbeat"
elif [ "$case" = hardcap_control ]; then
    contains "coordinator logged the dropped request" "$T/coord.log" "closed before a whole request arrived: libzmq drops the connection of a frame over the 1052672-byte hard cap"
else
    contains "coordinator logged the reject" "$T/coord.log" "rejected"
fi
kill -0 "$COORD_PID" || fail "the coordinator died"

check "the busy job still finishes" "$GB" wait "$busy" --quiet
next=$(submit --kind sleep --param duration_ms=50)
check "a new sweep on the healthy agent finishes" "$GB" wait "$next" --quiet
eq "both results stored once" "$(q "SELECT count(*) FROM v_results WHERE status = 'done'")" 2
echo ok
