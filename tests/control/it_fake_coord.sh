#!/usr/bin/env bash
# The agent against a coordinator played by test_fakecoord.c: a burst of
# results answered "unknown agent" (a coordinator restarted within the
# agent's lost window) brings one new registration and each result again
# once, not a Hello per reject and every result again per Welcome (N^2).
#   it_fake_coord.sh GPUBENCH RAWPEER FAKECOORD
source "$(dirname "$0")/lib.sh" "$1" "$2"
FAKECOORD=${3:?test_fakecoord}
if [ "${4:-}" = bad_status ]; then
    # a coordinator whose every status reply this client refuses (a sweep
    # name with a C1 control, stored before the spec refused one): wait
    # gives up after three, saying why; it asked for ever, and at
    # --timeout said "no answer" of a coordinator that answered
    "$FAKECOORD" "tcp://127.0.0.1:*" bad_status >"$T/fake.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 100); do grep -q '^listen=' "$T/fake.log" && break; sleep 0.05; done
    CONTROL=$(sed -n 's/^listen=//p' "$T/fake.log")
    [ -n "$CONTROL" ] || fail "the fake coordinator did not start: $(cat "$T/fake.log")"
    run_for 20 "$GB" wait 1 --control "$CONTROL" --timeout 15 --interval-ms 100 --quiet >"$T/wait.out" 2>"$T/wait.err"
    eq "wait gives up, exit 1" "$?" 1
    contains "saying what it refused" "$T/wait.err" "invalid reply from $CONTROL: status_reply.name: must be"
    eq "after three replies" "$(grep -c '^answered' "$T/fake.log")" 3
    grep -q "no answer" "$T/wait.err" && fail "it said no answer: $(cat "$T/wait.err")"
    echo ok
    exit 0
fi
"$FAKECOORD" "tcp://127.0.0.1:*" 6 >"$T/fake.log" 2>&1 &
fake=$!
PIDS+=("$fake")
for _ in $(seq 100); do grep -q '^listen=' "$T/fake.log" && break; sleep 0.05; done
LISTEN=$(sed -n 's/^listen=//p' "$T/fake.log")
[ -n "$LISTEN" ] || fail "the fake coordinator did not start: $(cat "$T/fake.log")"
start_agent a1 --slots 6 --telemetry-ms 0
wait "$fake" || fail "fake coordinator: $(cat "$T/fake.log")"
cat "$T/fake.log"
contains "the agent registered again once" "$T/a1.log" "the coordinator does not know us (restarted?): registering"
echo ok
