#!/usr/bin/env bash
# gpubench nodes --forget: a node gone for good stops counting. A connected
# node and an unknown one are refused; a job running on the gone node
# (waiting for it since a coordinator restart) is queued again without
# using up an attempt, and fails at once when no remaining node can run it,
# as does a queued job only it could run; the submit check no longer counts
# it, also after a restart; `nodes` no longer lists it, v_nodes keeps its
# row with forgotten_at; its agent coming back makes it known again.
source "$(dirname "$0")/lib.sh" "$1" "$2"

start_coord
start_agent a1
start_agent a2 --labels role=big
wait_nodes 2

"$GB" nodes --forget a1 >"$T/f1.out" 2>"$T/f1.err"
eq "a connected node cannot be forgotten" "$?" 1
contains "and says why" "$T/f1.err" "node 'a1' is connected: stop its agent first"
"$GB" nodes --forget nope >/dev/null 2>"$T/f2.err"
eq "an unknown node is an error" "$?" 1
contains "and says so" "$T/f2.err" "no known node 'nope'"

# a job only a2 can run, running there; then the coordinator and a2 die
big=$(submit --kind sleep --labels role=big --param duration_ms=60000 --name big)
wait_running "$big" 1
kill -KILL "$COORD_PID" "${AGENT_PID[a2]}"
wait "$COORD_PID" "${AGENT_PID[a2]}" 2>/dev/null
# a 20 s restart grace (2.5 s at the usual window): a2 still waited for
# when it is forgotten, after four commands that took 1.1 s under load
LOST=100 start_coord
# a2 is disconnected (the job waits for it), a1 comes back
wait_nodes 1
eq "a2 waits as disconnected" "$(q "SELECT state FROM v_nodes WHERE node = 'a2'")" disconnected
queued=$(submit --kind sleep --labels role=big --param duration_ms=10 --name queued)
"$GB" nodes --forget a2 >"$T/f3.out" 2>"$T/f3.err" || fail "forget a2: $(cat "$T/f3.err")"
contains "forget reports" "$T/f3.out" \
    "1 job(s) that waited for it queued again, 2 queued job(s) no remaining node can run failed"
"$GB" wait "$big" --quiet --timeout 10
eq "the running job ended" "$?" 1
eq "its attempt was lost, not counted" \
    "$(q "SELECT state || ',' || error FROM attempts WHERE job_id = 1 AND attempt = 1")" \
    "lost,node a2 (agent $(q "SELECT agent_id FROM nodes WHERE name = 'a2'")) was forgotten"
eq "free attempts" "$(q "SELECT free_attempts FROM jobs WHERE job_id = 1")" 1
for s in "$big" "$queued"; do
    q "SELECT error FROM v_results WHERE sweep_id = $s" >"$T/why.txt"
    contains "sweep $s failed with the reason" "$T/why.txt" \
        "no known node can run it since node a2 was forgotten"
done
eq "nodes lists a1 only" "$("$GB" nodes --format csv | tail -n +2 | cut -d, -f1)" a1
eq "v_nodes keeps a2, forgotten" "$(q "SELECT forgotten_at IS NOT NULL FROM v_nodes WHERE node = 'a2'")" 1
"$GB" submit --kind sleep --labels role=big >/dev/null 2>"$T/s.err"
eq "a spec only a2 could run is refused" "$?" 1
contains "as unsatisfiable" "$T/s.err" "no known node can run job 1"
"$GB" nodes --forget a2 >/dev/null 2>"$T/f5.err"
eq "forgetting it twice is an error" "$?" 1
# that says so, not "no known node" as for a name mistyped
contains "says it is forgotten already" "$T/f5.err" "node 'a2' is forgotten already (v_nodes.forgotten_at; its agent registering again makes it known again)"

# a restarted coordinator keeps it forgotten (loaded for its id's pin, never
# placed on), and its row as it was forgotten (a restart moved its
# last_seen past forgotten_at)
seen=$(q "SELECT state || ',' || last_seen FROM nodes WHERE name = 'a2'")
kill -TERM "$COORD_PID"
wait "$COORD_PID" 2>/dev/null
sleep 1.1
start_coord
wait_nodes 1
"$GB" submit --kind sleep --labels role=big >/dev/null 2>&1
eq "still refused after a restart" "$?" 1
eq "its row untouched by the restart" "$(q "SELECT state || ',' || last_seen FROM nodes WHERE name = 'a2'")" "$seen"

# its agent returns: known again
start_agent a2 --labels role=big
wait_nodes 2
eq "forgotten_at cleared" "$(q "SELECT forgotten_at IS NULL FROM v_nodes WHERE node = 'a2'")" 1
back=$(submit --kind sleep --labels role=big --param duration_ms=10)
check "and it runs jobs again" "$GB" wait "$back" --quiet --timeout 30
# forgotten by its agent id: the answer names the node (it printed the id twice)
id=$(q "SELECT agent_id FROM nodes WHERE name = 'a2'")
kill -TERM "${AGENT_PID[a2]}"
wait "${AGENT_PID[a2]}" 2>/dev/null
waiting=$(submit --kind sleep --labels role=big --param duration_ms=10)
"$GB" nodes --forget "$id" >"$T/f4.out" 2>"$T/f4.err" || fail "forget by id: $(cat "$T/f4.err")"
contains "named by its node" "$T/f4.out" "forgot node a2 (agent $id)"
q "SELECT error FROM v_results WHERE sweep_id = $waiting" >"$T/why2.txt"
contains "the job it failed names the node too" "$T/why2.txt" "since node a2 was forgotten"
echo ok
