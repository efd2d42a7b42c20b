#!/usr/bin/env bash
# CURVE and the ZAP allow-list end to end (CASE), with real processes on
# loopback: a coordinator started with --key coord.key --authorized FILE,
# agents and commands with --key NAME.key --server-key coord.pub (or
# $GB_KEY / $GB_SERVER_KEY).
#   unknown_agent_key  an agent whose key is not listed never registers;
#                      the refusal is logged with its address
#   client_no_key      a command without a key (or with an unlisted one)
#                      cannot submit; with a listed key it can
#   plaintext_peer     a plaintext agent and a plaintext raw peer get no
#                      answer from a CURVE coordinator
#   bind               non-loopback addresses: refused without keys unless
#                      --insecure; served with keys
#   sighup             SIGHUP re-reads the list: a key added is admitted, a
#                      key removed is refused on new connections
#   revoked            ... and on its open connection, from its next message
#   pinned             another listed key cannot speak for a registered
#                      agent id
#   rotated            an agent started again with a new key on its state
#                      directory gets in once the old key is taken off the
#                      list; each result keeps the key it came under
#   result_keys        a multi-node job's result keeps rank 0's key and its
#                      name
#   forgotten_pin      a forgotten node's id stays its key's after a
#                      coordinator restart (forgotten nodes were not loaded,
#                      so any listed key took the id and the node's row)
#   first_pin          a node known only without keys is pinned by the first
#                      listed key to register its id, with a warning
#   ipc_refusal        refused commands over ipc are one log line (each
#                      command is a new pid in libzmq's ipc address: it was
#                      a line per command), naming the local user
#   roles              role=agent / role=control in the list: an agent with a
#                      control key never registers and a command with an
#                      agent key is refused (both say why, and so does the
#                      coordinator's log); a key without a role serves both;
#                      a reload that gives a connected agent's key
#                      role=control has its next messages refused
#   revoked_agent      a real agent whose key is revoked while it runs backs
#                      off (it sent a denied heartbeat every interval for as
#                      long as it ran, a coordinator log line each), says
#                      when it tries again, and meets the handshake's refusal
#   bad_keys           the coordinator refuses to start on a key file others
#                      can read or another user owns, a broken list, a list
#                      another user owns, or one of --key/--authorized;
#                      an agent or a command refuses a --server-key pin
#                      that others can write (our own group may)
#   authorized_dirs    every directory the list really is in is checked, up
#                      to /: a link into a directory anyone can write (the
#                      link's own directory was checked) and a writable
#                      directory above the list's own were let through; a
#                      link within safe directories is fine
#   owned_by_others    (root) a directory of the list that another user owns
#                      (its owner may replace the list), and a key file
#                      given through a link another user owns (they can
#                      point it at any root key), its own or a directory's
#                      on the way, are refused; so is a --server-key pin
#                      reached through another user's link (our own link
#                      to theirs too) or another group may write
source "$(dirname "$0")/lib.sh" "$1" "$2"
case=${3:?case}

make_keys coord a1 a2 me stranger
authorize a1 me

case "$case" in
unknown_agent_key)
    start_coord --key "$T/coord.key" --authorized "$T/authorized"
    start_agent a1 --key "$T/a1.key" --server-key "$T/coord.pub"
    start_agent a2 --key "$T/stranger.key" --server-key "$T/coord.pub"
    use_keys me
    wait_nodes 1
    sleep 1
    eq "only the listed agent registered" "$("$GB" nodes --format csv | tail -n +2 | cut -d, -f1 | sort | tr '\n' ' ')" "a1 "
    stranger=$(cat "$T/stranger.pub")
    contains "refusal logged with the key" "$T/coord.log" "key $stranger is not in $T/authorized"
    contains "... and the address" "$T/coord.log" "refused a handshake on the agents endpoint from 127.0.0.1"
    contains "the agent says why" "$T/a2.log" "the coordinator refused our key"
    eq "no node row for it" "$(q "SELECT count(*) FROM nodes WHERE name = 'a2'")" 0
    # the refused agent retries; the log does not grow a line per retry
    [ "$(grep -cF "key $stranger is not in" "$T/coord.log")" -le 2 ] || fail "a refusal logged at every retry"
    ;;
client_no_key)
    start_coord --key "$T/coord.key" --authorized "$T/authorized"
    start_agent a1 --key "$T/a1.key" --server-key "$T/coord.pub"
    no_keys
    "$GB" submit --kind sleep --param duration_ms=10 >"$T/nokey.log" 2>&1 && fail "submitted without a key"
    contains "says why" "$T/nokey.log" "the coordinator requires CURVE keys: give --key"
    # the coordinator's log says a keyless client was refused, whichever side
    # saw the mismatch first (it said only "the connection ended during the
    # handshake" when the client did)
    sleep 0.3
    grep "refused a peer on the control endpoint" "$T/coord.log" >"$T/refused.log" || fail "the keyless command's refusal was not logged"
    if grep -v -e "does not speak CURVE" -e "as a client without keys does" "$T/refused.log"; then
        fail "a refusal of the keyless command does not say why"
    fi
    "$GB" submit --kind sleep --param duration_ms=10 --key "$T/stranger.key" --server-key "$T/coord.pub" >"$T/stranger.log" 2>&1 &&
        fail "submitted with an unlisted key"
    contains "says why" "$T/stranger.log" "refused our key"
    # wait (which rides out restarts) gives up on a refused handshake
    timeout 20 "$GB" wait 1 --key "$T/stranger.key" --server-key "$T/coord.pub" >"$T/wait.log" 2>&1
    eq "wait with an unlisted key exits 1, not hanging" "$?" 1
    contains "and says why" "$T/wait.log" "refused our key"
    timeout 20 "$GB" wait 1 >"$T/wait2.log" 2>&1
    eq "wait without keys exits 1" "$?" 1
    "$GB" status >"$T/nokey2.log" 2>&1 && fail "status without a key"
    "$GB" submit --kind sleep --key "$T/me.key" >"$T/half.log" 2>&1
    eq "half the keys: exit 2 (a wrong command line), not 1 (a failed sweep)" "$?" 2
    contains "both needed" "$T/half.log" "needs both --key and --server-key: --key given, no --server-key"
    GB_SERVER_KEY=$T/coord.pub timeout 20 "$GB" wait 1 >"$T/half2.log" 2>&1
    eq "wait with half the keys: exit 2" "$?" 2
    contains "says the half came from the environment" "$T/half2.log" '$GB_SERVER_KEY given, no --key'
    timeout 20 "$GB" status --key "$T/missing.key" --server-key "$T/coord.pub" >"$T/miss.log" 2>&1
    eq "a key file that cannot be read: exit 2" "$?" 2
    # the agents' endpoint given as --control: said at once, also by wait
    timeout 20 "$GB" status --control "$LISTEN" --key "$T/me.key" --server-key "$T/coord.pub" >"$T/ag.log" 2>&1 &&
        fail "status on the agents endpoint"
    contains "names the mix-up" "$T/ag.log" "is it the coordinator's agents endpoint? --control wants its control endpoint"
    timeout 20 "$GB" wait 1 --control "$LISTEN" --key "$T/me.key" --server-key "$T/coord.pub" >"$T/ag2.log" 2>&1
    eq "wait on the agents endpoint exits 1 at once, not waiting" "$?" 1
    contains "... and says why" "$T/ag2.log" "agents endpoint"
    eq "nothing stored" "$(q "SELECT count(*) FROM sweeps")" 0
    use_keys me
    wait_nodes 1
    sweep=$(submit --kind sleep --param duration_ms=10)
    check "a listed key submits and waits" "$GB" wait "$sweep" --quiet
    eq "stored" "$(q "SELECT count(*) FROM v_results WHERE status = 'done'")" 1
    ;;
plaintext_peer)
    start_coord --key "$T/coord.key" --authorized "$T/authorized"
    start_agent plain
    "$HPEER" plaintext "$LISTEN" "$CONTROL" >"$T/hpeer.log" 2>&1 || fail "plaintext peer: $(cat "$T/hpeer.log")"
    use_keys me
    sleep 0.5
    eq "no agent registered" "$("$GB" nodes --format csv | tail -n +2 | wc -l)" 0
    contains "the coordinator logged it, with the address" "$T/coord.log" "refused a peer on the agents endpoint"
    contains "... and why" "$T/coord.log" "it does not speak CURVE (a plaintext peer)"
    contains "the plaintext agent says why" "$T/plain.log" "cannot connect to"
    ;;
bind)
    "$GB" coordinator --listen 'tcp://0.0.0.0:*' --control 'tcp://127.0.0.1:*' --db "$T/x.db" >"$T/refuse.log" 2>&1 &&
        fail "bound a public address without keys or --insecure"
    contains "says why" "$T/refuse.log" "without keys the coordinator only binds loopback"
    "$GB" coordinator --listen 'tcp://127.0.0.1:*' --control 'tcp://0.0.0.0:*' --db "$T/x.db" >"$T/refuse2.log" 2>&1 &&
        fail "bound a public control address without keys"
    contains "says why" "$T/refuse2.log" "--insecure"
    "$GB" coordinator --key "$T/coord.key" --db "$T/x.db" >"$T/half.log" 2>&1
    eq "started with --key alone: exit 2" "$?" 2
    contains "both needed" "$T/half.log" "give both --key"
    # with keys, any address is fine and no warning is printed
    LISTEN='tcp://0.0.0.0:*'
    CONTROL='tcp://0.0.0.0:*'
    start_coord --key "$T/coord.key" --authorized "$T/authorized"
    grep -q "insecure" "$T/coord.log" && fail "a keyed coordinator warned about insecurity"
    contains "CURVE announced" "$T/coord.log" "CURVE on both endpoints"
    port=${LISTEN##*:}
    cport=${CONTROL##*:}
    start_agent a1 --connect "tcp://127.0.0.1:$port" --key "$T/a1.key" --server-key "$T/coord.pub"
    use_keys me
    GB_CONTROL=tcp://127.0.0.1:$cport wait_nodes 1
    ;;
sighup)
    start_coord --key "$T/coord.key" --authorized "$T/authorized"
    use_keys me
    start_agent a2 --key "$T/a2.key" --server-key "$T/coord.pub"
    sleep 1
    eq "a2 not listed: not registered" "$(connected)" 0
    authorize a1 a2 me
    kill -HUP "$COORD_PID"
    wait_nodes 1
    contains "reload logged" "$T/coord.log" "key(s) admitted (were 2)"
    eq "a2 registered after the reload" "$("$GB" nodes --format csv | tail -n +2 | cut -d, -f1)" a2
    # a broken list keeps the old one in force
    echo garbage >"$T/authorized"
    kill -HUP "$COORD_PID"
    for _ in $(seq 50); do grep -q "reload failed" "$T/coord.log" && break; sleep 0.1; done
    contains "bad list refused" "$T/coord.log" "reload failed, the previous 3 key(s) stay in force"
    "$GB" nodes >/dev/null || fail "the old list stopped working"
    # me removed: refused on a new connection (every command opens one)
    authorize a1 a2
    kill -HUP "$COORD_PID"
    for _ in $(seq 50); do grep -q "2 key(s) admitted (were 3)" "$T/coord.log" && break; sleep 0.1; done
    "$GB" nodes >"$T/removed.log" 2>&1 && fail "a removed key still reaches the coordinator"
    contains "says why" "$T/removed.log" "refused our key"
    ;;
revoked)
    start_coord --key "$T/coord.key" --authorized "$T/authorized"
    use_keys me
    "$HPEER" revoked "$LISTEN" "$CONTROL" "$T/peer-ready" "$T/go" >"$T/hpeer.log" 2>&1 &
    peer=$!
    for _ in $(seq 100); do [ -f "$T/peer-ready" ] && break; sleep 0.05; done
    [ -f "$T/peer-ready" ] || fail "the peer was not answered: $(cat "$T/hpeer.log")"
    authorize a1
    kill -HUP "$COORD_PID"
    for _ in $(seq 50); do grep -q "1 key(s) admitted" "$T/coord.log" && break; sleep 0.1; done
    touch "$T/go"
    wait "$peer" || fail "revoked: $(cat "$T/hpeer.log")"
    contains "refusal logged" "$T/coord.log" "is no longer authorized"
    ;;
ipc_refusal)
    LISTEN="ipc://$T/ag" CONTROL="ipc://$T/ctl" start_coord --key "$T/coord.key" --authorized "$T/authorized"
    for _ in 1 2 3 4 5; do
        "$GB" status --key "$T/stranger.key" --server-key "$T/coord.pub" >/dev/null 2>&1 &&
            fail "an unlisted key got in"
    done
    sleep 0.5
    n=$(grep -c "auth: refused a handshake on the control endpoint" "$T/coord.log" || true)
    eq "five refused commands, one line" "$n" 1
    contains "named as a local user" "$T/coord.log" "from a local process (ipc: uid $(id -u), gid $(id -g), pid "
    ;;
revoked_agent)
    authorize a1 me
    start_coord --key "$T/coord.key" --authorized "$T/authorized"
    start_agent a1 --key "$T/a1.key" --server-key "$T/coord.pub"
    use_keys me
    wait_nodes 1
    authorize me
    kill -HUP "$COORD_PID"
    for _ in $(seq 50); do grep -q "1 key(s) admitted" "$T/coord.log" && break; sleep 0.1; done
    sleep 6 # 60 heartbeats of 100 ms
    n=$(grep -c "rejected heartbeat\|rejected hello" "$T/coord.log" || true)
    [ "$n" -le 5 ] || fail "$n denied messages logged in 6 s (the agent does not back off)"
    contains "the agent says when it tries again" "$T/a1.log" "trying again in 1 s"
    contains "... and then meets the handshake's refusal" "$T/a1.log" "refused our key"
    grep -q "is the coordinator running" "$T/a1.log" && fail "the agent blames a silent coordinator"
    kill -0 "${AGENT_PID[a1]}" || fail "the agent exited"
    ;;
roles)
    make_keys a3
    # role LINE...: $T/authorized is exactly these lines, NAME replaced by
    # its public key ("role=agent a1" lists a1's key, named a1)
    role() {
        local line words
        : >"$T/authorized.new"
        for line in "$@"; do
            read -ra words <<<"$line"
            if [ ${#words[@]} = 2 ]; then
                echo "${words[0]} $(cat "$T/${words[1]}.pub") ${words[1]}" >>"$T/authorized.new"
            else
                echo "$(cat "$T/${words[0]}.pub") ${words[0]}" >>"$T/authorized.new"
            fi
        done
        mv "$T/authorized.new" "$T/authorized"
    }
    role "role=agent a1" "role=control a2" "role=control me" "a3"
    start_coord --key "$T/coord.key" --authorized "$T/authorized"
    use_keys me
    start_agent a1 --key "$T/a1.key" --server-key "$T/coord.pub"
    start_agent a2 --key "$T/a2.key" --server-key "$T/coord.pub"
    # a3, without a role: an agent and a command both
    start_agent a3 --key "$T/a3.key" --server-key "$T/coord.pub"
    wait_nodes 2
    GB_KEY=$T/a3.key "$GB" nodes --format csv >"$T/a3nodes.csv" 2>&1 || fail "a key without a role cannot use the control endpoint: $(cat "$T/a3nodes.csv")"
    sleep 1
    eq "the role=agent key and the key without a role registered, not the role=control one" \
        "$("$GB" nodes --format csv | tail -n +2 | cut -d, -f1 | sort | tr '\n' ' ')" "a1 a3 "
    a1=$(cat "$T/a1.pub")
    a2=$(cat "$T/a2.pub")
    contains "the coordinator says why the agent is refused" "$T/coord.log" \
        "auth: refused a handshake on the agents endpoint from 127.0.0.1: key $a2 (a2) may use only the control endpoint (role=control in $T/authorized)"
    contains "the agent says why" "$T/a2.log" \
        "the coordinator refused our key (ZAP status 400): is our public key in its --authorized file, with no role or role=agent?"
    # an agent's key is refused by the control endpoint, for every command
    GB_KEY=$T/a1.key "$GB" submit --kind sleep --param duration_ms=10 >"$T/a1submit.log" 2>&1 &&
        fail "submitted with a role=agent key"
    contains "the command says why" "$T/a1submit.log" \
        "the coordinator refused our key (ZAP status 400): is our public key in its --authorized file, with no role or role=control?"
    GB_KEY=$T/a1.key "$GB" status >"$T/a1status.log" 2>&1 && fail "listed with a role=agent key"
    contains "... status too" "$T/a1status.log" "with no role or role=control?"
    contains "the coordinator says why the command is refused" "$T/coord.log" \
        "auth: refused a handshake on the control endpoint from 127.0.0.1: key $a1 (a1) may use only the agents endpoint (role=agent in $T/authorized)"
    eq "nothing submitted" "$(q "SELECT count(*) FROM sweeps")" 0
    # the role=control key submits; the role=agent one runs the job
    sweep=$(submit --kind sleep --param duration_ms=10 --nodes a1)
    check "a role=control key submits and waits" "$GB" wait "$sweep" --quiet
    eq "run by the role=agent agent" "$(q "SELECT node FROM v_results WHERE status = 'done'")" a1
    # a reload that leaves a1's key listed, but for the control endpoint
    # only: its open connection's next messages are refused
    role "role=control a1" "role=control me" "a3"
    kill -HUP "$COORD_PID"
    for _ in $(seq 50); do grep -q "3 key(s) admitted (were 4)" "$T/coord.log" && break; sleep 0.1; done
    contains "reloaded" "$T/coord.log" "3 key(s) admitted (were 4)"
    for _ in $(seq 100); do grep -q "may use only the control endpoint (role=control in the coordinator's" "$T/a1.log" && break; sleep 0.05; done
    contains "the coordinator refuses the agent's next message, saying why" "$T/coord.log" \
        "denied: key $a1 (a1) may use only the control endpoint (role=control in the coordinator's --authorized)"
    contains "... and the agent says it" "$T/a1.log" \
        "denied: key $a1 (a1) may use only the control endpoint (role=control in the coordinator's --authorized); trying again in 1 s"
    for _ in $(seq 100); do grep -q "with no role or role=agent" "$T/a1.log" && break; sleep 0.05; done
    contains "... then meets the handshake's refusal" "$T/a1.log" "with no role or role=agent?"
    # its heartbeats refused, a1 is lost after its window; a3 is not
    for _ in $(seq 100); do
        "$GB" nodes --format csv >"$T/nodes.csv" 2>&1 || fail "nodes: $(cat "$T/nodes.csv")"
        grep '^a1,' "$T/nodes.csv" | grep -q ',connected,' || break
        sleep 0.05
    done
    grep '^a1,' "$T/nodes.csv" | grep -q ',connected,' && fail "a1 stays connected: $(cat "$T/nodes.csv")"
    grep '^a3,' "$T/nodes.csv" | grep -q ',connected,' || fail "a3 is not connected: $(cat "$T/nodes.csv")"
    contains "nodes says why a1 is refused" "$T/nodes.csv" "its key has role=control in --authorized"
    # ... and its id is free for another agent's key, as a revoked key's is
    id=$(cat "$T/a1/agent_id")
    GB_KEY=$T/a3.key "$HPEER" take "$LISTEN" "$CONTROL" "$id" >"$T/hpeer.log" 2>&1 || fail "take: $(cat "$T/hpeer.log")"
    contains "the handover is logged" "$T/coord.log" \
        "its key $a1 is no longer authorized on the agents endpoint (role=control); key a3 registers it now"
    kill -0 "${AGENT_PID[a1]}" || fail "the agent exited"
    ;;
first_pin)
    # a node known only without keys (the fleet moved onto keys, on the
    # same store): the first listed key to register its id pins it, which
    # was logged only as the node being back
    start_coord
    start_agent a1
    wait_nodes 1
    id=$(cat "$T/a1/agent_id")
    kill -TERM "${AGENT_PID[a1]}" "$COORD_PID"
    wait "${AGENT_PID[a1]}" "$COORD_PID" 2>/dev/null
    authorize a1 a2 me
    start_coord --key "$T/coord.key" --authorized "$T/authorized"
    use_keys me
    GB_KEY=$T/a2.key "$HPEER" take "$LISTEN" "$CONTROL" "$id" >"$T/hpeer.log" 2>&1 || fail "take: $(cat "$T/hpeer.log")"
    contains "warned, naming the key" "$T/coord.log" "agent $id (node a1) had registered only without a key: key a2 pins its id now"
    # a pinned node coming back with its key is no news
    GB_KEY=$T/a2.key "$HPEER" take "$LISTEN" "$CONTROL" "$id" >"$T/hpeer2.log" 2>&1 || fail "take again: $(cat "$T/hpeer2.log")"
    eq "said once" "$(grep -c "had registered only without a key" "$T/coord.log")" 1
    ;;
forgotten_pin)
    authorize a1 a2 me
    start_coord --key "$T/coord.key" --authorized "$T/authorized"
    start_agent a1 --key "$T/a1.key" --server-key "$T/coord.pub"
    use_keys me
    wait_nodes 1
    id=$(cat "$T/a1/agent_id")
    kill -TERM "${AGENT_PID[a1]}"; wait "${AGENT_PID[a1]}" 2>/dev/null
    check "forget a1" "$GB" nodes --forget a1
    kill -TERM "$COORD_PID"; wait "$COORD_PID" 2>/dev/null
    start_coord --key "$T/coord.key" --authorized "$T/authorized"
    GB_KEY=$T/a2.key "$HPEER" claim "$LISTEN" "$CONTROL" "$id" 0 >"$T/hpeer.log" 2>&1 || fail "a forgotten id taken after a restart: $(cat "$T/hpeer.log")"
    contains "refusal logged" "$T/coord.log" "is registered with another key (a1)"
    eq "the row is a1's, still forgotten" \
        "$(q "SELECT cpu_model != 'probe' AND forgotten_at IS NOT NULL AND agent_key = '$(cat "$T/a1.pub" | tr -d '\n')' FROM nodes")" 1
    # its own agent comes back: known again
    start_agent a1 --key "$T/a1.key" --server-key "$T/coord.pub"
    wait_nodes 1
    eq "a1 known again" "$(q "SELECT forgotten_at IS NULL FROM nodes WHERE agent_id = '$id'")" 1
    ;;
pinned)
    authorize a1 a2 me
    start_coord --key "$T/coord.key" --authorized "$T/authorized"
    start_agent a1 --key "$T/a1.key" --server-key "$T/coord.pub"
    use_keys me
    wait_nodes 1
    id=$(cat "$T/a1/agent_id")
    kill -STOP "${AGENT_PID[a1]}"   # so that it does not take its routing id back meanwhile
    GB_KEY=$T/a2.key "$HPEER" pinned "$LISTEN" "$CONTROL" "$id" >"$T/hpeer.log" 2>&1 || fail "pinned: $(cat "$T/hpeer.log")"
    kill -CONT "${AGENT_PID[a1]}"
    contains "refusal logged" "$T/coord.log" "is registered with another key (a1)"
    eq "still one node" "$(q "SELECT count(*) FROM nodes")" 1
    sweep=$(submit --kind sleep --param duration_ms=10)
    check "a1 still works" "$GB" wait "$sweep" --quiet
    # the pin is stored with the node: it holds after a restart, before a1
    # is back
    kill -STOP "${AGENT_PID[a1]}"
    kill -TERM "$COORD_PID"; wait "$COORD_PID" 2>/dev/null
    LISTEN=${LISTEN} CONTROL=${CONTROL} start_coord --key "$T/coord.key" --authorized "$T/authorized"
    GB_KEY=$T/a2.key "$HPEER" claim "$LISTEN" "$CONTROL" "$id" 0 >"$T/hpeer2.log" 2>&1 || fail "pinned after a restart: $(cat "$T/hpeer2.log")"
    eq "the row is a1's still" "$(q "SELECT cpu_model != 'probe' FROM nodes")" 1
    # a revoked pinned key frees the id for another listed key
    authorize a2 me
    kill -HUP "$COORD_PID"
    sleep 0.5
    "$GB" nodes --format csv >"$T/nodes.csv" || fail "nodes: $(cat "$T/nodes.csv")"
    contains "nodes says why the node is refused" "$T/nodes.csv" "its key is no longer in --authorized: refused"
    GB_KEY=$T/a2.key "$HPEER" take "$LISTEN" "$CONTROL" "$id" >"$T/hpeer3.log" 2>&1 || fail "take: $(cat "$T/hpeer3.log")"
    contains "the handover is logged" "$T/coord.log" "is no longer authorized; key a2 registers it now"
    kill -CONT "${AGENT_PID[a1]}"
    ;;
rotated)
    # an agent started again with a new key on its state dir: its id is
    # pinned to the old key; the agent says how a rotation goes through
    # (it said only "give the agent a new --state-dir, or its own key"),
    # and taking the old key off the list (SIGHUP) lets it in
    authorize a1 a2 me
    start_coord --key "$T/coord.key" --authorized "$T/authorized"
    use_keys me
    start_agent a1 --key "$T/a1.key" --server-key "$T/coord.pub"
    wait_nodes 1
    sweep=$(submit --kind sleep --param duration_ms=10)
    check "a job under the old key" "$GB" wait "$sweep" --quiet
    kill -TERM "${AGENT_PID[a1]}"; wait "${AGENT_PID[a1]}" 2>/dev/null
    start_agent a1 --key "$T/a2.key" --server-key "$T/coord.pub"
    for _ in $(seq 100); do grep -q "id is another key's" "$T/a1.log" && break; sleep 0.05; done
    contains "the agent names the rotation path" "$T/a1.log" "(this node's id is another key's: a key rotated on purpose is let in once the coordinator's --authorized no longer lists the old one (then SIGHUP it)"
    authorize a2 me
    kill -HUP "$COORD_PID"
    wait_nodes 1
    contains "the handover is logged" "$T/coord.log" "is no longer authorized; key a2 registers it now"
    # each result keeps the key it came under; the node's pin is only the
    # latest key, so the rotation is visible in the node's history
    sweep=$(submit --kind sleep --param duration_ms=10)
    check "a job under the new key" "$GB" wait "$sweep" --quiet
    eq "keys per result" "$(q "SELECT group_concat(agent_key || ' ' || key_name, ',') FROM (SELECT * FROM results ORDER BY job_id)")" \
        "$(cat "$T/a1.pub") a1,$(cat "$T/a2.pub") a2"
    eq "one agent id for both" "$(q "SELECT count(DISTINCT agent_id) FROM results")" 1
    eq "the node's pin is the new key" "$(q "SELECT agent_key FROM nodes")" "$(cat "$T/a2.pub")"
    ;;
result_keys)
    authorize a1 a2 me
    start_coord --key "$T/coord.key" --authorized "$T/authorized"
    use_keys me
    start_agent a1 --key "$T/a1.key" --server-key "$T/coord.pub"
    wait_nodes 1
    start_agent a2 --key "$T/a2.key" --server-key "$T/coord.pub"
    wait_nodes 2
    sweep=$(submit --kind sleep --param duration_ms=10 --param n_nodes=2)
    check "a two-node job" "$GB" wait "$sweep" --quiet
    eq "rank 0's key and name" "$(q "SELECT r.agent_key || ' ' || r.key_name || ' ' || n.name FROM results r JOIN nodes n USING (agent_id)")" \
        "$(cat "$T/a1.pub") a1 a1"
    ;;
hello_repeat)
    # a connected agent saying the same Hello again and again (a peer
    # repeating it): welcomed each time, written and logged once
    authorize a1 me
    start_coord --key "$T/coord.key" --authorized "$T/authorized"
    use_keys me
    GB_KEY=$T/a1.key "$HPEER" hellos "$LISTEN" "$CONTROL" rep-agent 300 >"$T/hpeer.log" 2>&1 || fail "hellos: $(cat "$T/hpeer.log")"
    eq "one node" "$(q "SELECT count(*) FROM nodes WHERE agent_id = 'rep-agent'")" 1
    eq "registered once in the log" "$(grep -c "(rep-agent) registered" "$T/coord.log")" 1
    eq "no re-registered lines" "$(grep -c "(rep-agent) re-registered" "$T/coord.log")" 0
    ;;
claimed)
    # another listed key claims a1's id while a1 runs a job that may not be
    # retried: a1 is not declared lost (it keeps the longer window of a
    # reconnecting agent while it takes its connection back) and the job
    # ends done on its only attempt
    authorize a1 a2 me
    start_coord --key "$T/coord.key" --authorized "$T/authorized"
    start_agent a1 --key "$T/a1.key" --server-key "$T/coord.pub"
    use_keys me
    wait_nodes 1
    id=$(cat "$T/a1/agent_id")
    sweep=$(submit --kind sleep --param duration_ms=3000 --max-attempts 1)
    wait_running "$sweep" 1
    # held for 3 lost windows (500 ms each here), within the 2.5 s grace
    GB_KEY=$T/a2.key "$HPEER" claim "$LISTEN" "$CONTROL" "$id" 1500 >"$T/hpeer.log" 2>&1 || fail "claim: $(cat "$T/hpeer.log")"
    check "the job ends done" "$GB" wait "$sweep" --quiet --timeout 30
    eq "on its one attempt" "$(q "SELECT count(*) || ',' || group_concat(state) FROM attempts")" "1,done"
    contains "the claim is logged" "$T/coord.log" "spoke as agent $id"
    grep -qF "agent a1 lost" "$T/coord.log" && fail "a1 was declared lost"
    ;;
bad_keys)
    cp "$T/coord.key" "$T/open.key"; chmod 644 "$T/open.key"
    "$GB" coordinator --key "$T/open.key" --authorized "$T/authorized" --db "$T/x.db" >"$T/open.log" 2>&1
    eq "started on a world-readable key: exit 2" "$?" 2
    contains "says why" "$T/open.log" "can be read by others"
    # a key or a list another user owns: its owner could change it (and chmod it back)
    if [ "$(id -u)" = 0 ]; then
        cp "$T/coord.key" "$T/theirs.key"; chown 65534 "$T/theirs.key"
        run_for 5 "$GB" coordinator --key "$T/theirs.key" --authorized "$T/authorized" --db "$T/x.db" \
            --listen 'tcp://127.0.0.1:*' --control 'tcp://127.0.0.1:*' >"$T/theirs.log" 2>&1
        eq "started on another user's key: exit 2" "$?" 2
        contains "says why" "$T/theirs.log" "theirs.key belongs to uid 65534, not to this process's user (uid 0) or root"
        cp "$T/authorized" "$T/theirs.list"; chown 65534 "$T/theirs.list"
        run_for 5 "$GB" coordinator --key "$T/coord.key" --authorized "$T/theirs.list" --db "$T/x.db" \
            --listen 'tcp://127.0.0.1:*' --control 'tcp://127.0.0.1:*' >"$T/theirsl.log" 2>&1
        eq "started on another user's list: exit 2" "$?" 2
        contains "says why" "$T/theirsl.log" "theirs.list belongs to uid 65534"
    else
        echo "not root: the checks of files another user owns are skipped"
    fi
    echo "not-a-key" >"$T/bad.list"
    "$GB" coordinator --key "$T/coord.key" --authorized "$T/bad.list" --db "$T/x.db" >"$T/list.log" 2>&1
    eq "started on a broken list: exit 2" "$?" 2
    contains "says why" "$T/list.log" "line 1: not a public key"
    "$GB" coordinator --key "$T/coord.key" --authorized "$T/none" --db "$T/x.db" >"$T/none.log" 2>&1
    eq "started without its list: exit 2" "$?" 2
    contains "says why" "$T/none.log" "authorized keys"
    # whoever can write the list can let any key in
    cp "$T/authorized" "$T/open.list"; chmod 666 "$T/open.list"
    "$GB" coordinator --key "$T/coord.key" --authorized "$T/open.list" --db "$T/x.db" >"$T/openlist.log" 2>&1
    eq "started on a world-writable list: exit 2" "$?" 2
    contains "says why" "$T/openlist.log" "can be written by anyone (mode 666)"
    # ... and whoever can write its directory can put another list there;
    # a sticky directory (as /tmp) lets only the owner replace the file
    mkdir -m 777 "$T/opendir" "$T/sticky"; chmod 777 "$T/opendir"; chmod 1777 "$T/sticky"
    cp "$T/authorized" "$T/opendir/list"; cp "$T/authorized" "$T/sticky/list"
    "$GB" coordinator --key "$T/coord.key" --authorized "$T/opendir/list" --db "$T/x.db" >"$T/opendir.log" 2>&1
    eq "started on a list in a world-writable directory: exit 2" "$?" 2
    contains "says why" "$T/opendir.log" "its directory $T/opendir can be written by anyone (mode 777)"
    run_for 3 "$GB" coordinator --key "$T/coord.key" --authorized "$T/sticky/list" --db "$T/z.db" \
        --listen 'tcp://127.0.0.1:*' --control 'tcp://127.0.0.1:*' >"$T/sticky.log" 2>&1
    grep -q "its directory" "$T/sticky.log" && fail "a sticky directory refused"
    # a key listed twice is a mistake to point at, not a key counted twice
    { cat "$T/authorized"; head -n 1 "$T/authorized"; } >"$T/twice.list"
    "$GB" coordinator --key "$T/coord.key" --authorized "$T/twice.list" --db "$T/x.db" >"$T/twice.log" 2>&1
    eq "started on a list with a key twice: exit 2" "$?" 2
    contains "says which line" "$T/twice.log" "the key of entry 1 again"
    # refused before anything was opened or bound
    [ -e "$T/x.db" ] && fail "a store was made for a coordinator refused for its keys"
    # the other side's pin (--server-key): whoever can write it chooses which
    # coordinator an agent or a command trusts (it was read with no check)
    cp "$T/coord.pub" "$T/open.pub"; chmod 666 "$T/open.pub"
    "$GB" status --control "ipc://$T/none.sock" --key "$T/me.key" --server-key "$T/open.pub" >"$T/pin.log" 2>&1
    eq "a command on a world-writable pin: exit 2" "$?" 2
    contains "says why" "$T/pin.log" "open.pub can be written by anyone (mode 666): anyone could put another coordinator's key in it"
    # ... but one our own group may write (a umask of 002 with a private
    # group makes every file so) is fine: the command goes on to the address
    cp "$T/coord.pub" "$T/grp.pub"; chmod 664 "$T/grp.pub"
    "$GB" status --control "ipc://$T/none.sock" --key "$T/me.key" --server-key "$T/grp.pub" >"$T/grp.log" 2>&1
    eq "a pin our group may write: refused only for the address" "$?" 1
    contains "goes on to the address" "$T/grp.log" "nothing listens there"
    "$GB" agent --connect "ipc://$T/none.sock" --state-dir "$T/pinagent" --key "$T/a1.key" \
        --server-key "$T/open.pub" >"$T/pina.log" 2>&1
    eq "an agent on a world-writable pin: exit 2" "$?" 2
    contains "the agent says why" "$T/pina.log" "open.pub can be written by anyone"
    # an empty list starts (keys may come later, with SIGHUP) and says so
    printf '# no keys yet\n' >"$T/empty.list"
    run_for 3 "$GB" coordinator --key "$T/coord.key" --authorized "$T/empty.list" --db "$T/y.db" \
        --listen 'tcp://127.0.0.1:*' --control 'tcp://127.0.0.1:*' >"$T/empty.log" 2>&1
    contains "an empty list is warned about" "$T/empty.log" "lists no key: no agent or command can connect"
    ;;
authorized_dirs)
    # refused: exit 2 and the reason (started, the coordinator runs until killed)
    refused() {
        local name=$1 list=$2 want=$3
        run_for 5 "$GB" coordinator --key "$T/coord.key" --authorized "$list" --db "$T/x.db" \
            --listen 'tcp://127.0.0.1:*' --control 'tcp://127.0.0.1:*' >"$T/$name.log" 2>&1
        eq "started on $name: exit 2" "$?" 2
        contains "says why" "$T/$name.log" "$want"
    }
    mkdir -m 777 "$T/opendir"; chmod 777 "$T/opendir"
    cp "$T/authorized" "$T/opendir/list"
    # a link in a safe directory to a list in a writable one: the list's
    # directory counts, not the link's
    ln -s "$T/opendir/list" "$T/authlink"
    refused authlink "$T/authlink" \
        "authorized keys $T/authlink (a link to $T/opendir/list): its directory $T/opendir can be written by anyone (mode 777)"
    # a writable directory above the list's own (not sticky, unlike /tmp)
    mkdir -p "$T/gp/p"; chmod 777 "$T/gp"; cp "$T/authorized" "$T/gp/p/list"
    refused grandparent "$T/gp/p/list" "the directory $T/gp above it can be written by anyone (mode 777)"
    chmod 775 "$T/gp"
    refused grandparent_group "$T/gp/p/list" "the directory $T/gp above it can be written by its group (mode 775)"
    # a link within safe directories to a list in one starts
    mkdir -p "$T/safe/lists"; cp "$T/authorized" "$T/safe/lists/list"
    ln -s lists/list "$T/safe/link"
    run_for 3 "$GB" coordinator --key "$T/coord.key" --authorized "$T/safe/link" --db "$T/z.db" \
        --listen 'tcp://127.0.0.1:*' --control 'tcp://127.0.0.1:*' >"$T/safelink.log" 2>&1
    grep -q "authorized keys" "$T/safelink.log" && fail "a link within safe directories refused: $(cat "$T/safelink.log")"
    contains "it started" "$T/safelink.log" "coordinator stopping"
    ;;
owned_by_others)
    if [ "$(id -u)" != 0 ]; then
        echo "SKIP: needs root (to chown a directory and a link to another user)" >&2
        exit 77
    fi
    mkdir "$T/theirs"; cp "$T/authorized" "$T/theirs/list"; chown 65534 "$T/theirs"; chmod 755 "$T/theirs"
    run_for 5 "$GB" coordinator --key "$T/coord.key" --authorized "$T/theirs/list" --db "$T/x.db" \
        --listen 'tcp://127.0.0.1:*' --control 'tcp://127.0.0.1:*' >"$T/theirdir.log" 2>&1
    eq "started on a list in another user's directory: exit 2" "$?" 2
    contains "says why" "$T/theirdir.log" \
        "authorized keys $T/theirs/list: its directory $T/theirs belongs to uid 65534, not to this process's user (uid 0) or root"
    # ... or in a directory below one of theirs
    mkdir -p "$T/theirs2/mine"; cp "$T/authorized" "$T/theirs2/mine/list"; chown 65534 "$T/theirs2"
    run_for 5 "$GB" coordinator --key "$T/coord.key" --authorized "$T/theirs2/mine/list" --db "$T/x.db" \
        --listen 'tcp://127.0.0.1:*' --control 'tcp://127.0.0.1:*' >"$T/theirdir2.log" 2>&1
    eq "started on a list below another user's directory: exit 2" "$?" 2
    contains "says why" "$T/theirdir2.log" "the directory $T/theirs2 above it belongs to uid 65534"
    # a key given through another user's link: root's key behind it passes
    # every check of the file, but the link's owner chooses which key it is
    ln -s "$T/coord.key" "$T/theirlink.key"; chown -h 65534 "$T/theirlink.key"
    run_for 5 "$GB" coordinator --key "$T/theirlink.key" --authorized "$T/authorized" --db "$T/x.db" \
        --listen 'tcp://127.0.0.1:*' --control 'tcp://127.0.0.1:*' >"$T/theirlink.log" 2>&1
    eq "started on a key through another user's link: exit 2" "$?" 2
    contains "says why" "$T/theirlink.log" \
        "theirlink.key is a symbolic link that belongs to uid 65534, not to this process's user (uid 0) or root"
    [ -e "$T/x.db" ] && fail "a store was made for a coordinator refused for its keys"
    # ... or through another user's link to a directory on the way (only
    # the file's own link was checked)
    ln -s "$T" "$T/theirdir"; chown -h 65534 "$T/theirdir"
    run_for 5 "$GB" coordinator --key "$T/theirdir/coord.key" --authorized "$T/authorized" --db "$T/x.db" \
        --listen 'tcp://127.0.0.1:*' --control 'tcp://127.0.0.1:*' >"$T/theirdl.log" 2>&1
    eq "started on a key through another user's directory link: exit 2" "$?" 2
    contains "says why" "$T/theirdl.log" "$T/theirdir is a symbolic link that belongs to uid 65534"
    "$GB" status --control "ipc://$T/none.sock" --key "$T/me.key" --server-key "$T/theirdir/coord.pub" >"$T/theirpin.log" 2>&1
    eq "a command on a pin through another user's link: exit 2" "$?" 2
    contains "says why" "$T/theirpin.log" "$T/theirdir is a symbolic link that belongs to uid 65534"
    # our own link to their link: theirs to point (only the path as typed
    # was looked at)
    ln -s "$T/theirdir/coord.pub" "$T/mine.pub"
    "$GB" status --control "ipc://$T/none.sock" --key "$T/me.key" --server-key "$T/mine.pub" >"$T/theirpin3.log" 2>&1
    eq "a command on our link through another user's link: exit 2" "$?" 2
    contains "says why" "$T/theirpin3.log" "$T/theirdir is a symbolic link that belongs to uid 65534"
    # a pin another user's group may write: its members choose the coordinator
    cp "$T/coord.pub" "$T/theirs.pub"; chown 65534:65534 "$T/theirs.pub"; chmod 664 "$T/theirs.pub"
    "$GB" status --control "ipc://$T/none.sock" --key "$T/me.key" --server-key "$T/theirs.pub" >"$T/theirpin2.log" 2>&1
    eq "a command on a pin another group may write: exit 2" "$?" 2
    contains "says why" "$T/theirpin2.log" "theirs.pub can be written by its group, gid 65534, not this process's (gid 0; mode 664)"
    # ... while one a service account owns, which nobody else may write, is
    # that account's public file: fine
    chmod 644 "$T/theirs.pub"
    "$GB" status --control "ipc://$T/none.sock" --key "$T/me.key" --server-key "$T/theirs.pub" >"$T/theirpin4.log" 2>&1
    eq "a pin another user owns, read-only to others: refused only for the address" "$?" 1
    [ -e "$T/x.db" ] && fail "a store was made for a coordinator refused for its keys"
    # our own link to the key is fine
    ln -s "$T/coord.key" "$T/mylink.key"
    run_for 3 "$GB" coordinator --key "$T/mylink.key" --authorized "$T/authorized" --db "$T/z.db" \
        --listen 'tcp://127.0.0.1:*' --control 'tcp://127.0.0.1:*' >"$T/mylink.log" 2>&1
    contains "started on our own link to the key" "$T/mylink.log" "coordinator stopping"
    ;;
*) fail "unknown case $case" ;;
esac
echo ok
