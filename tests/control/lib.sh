# lib.sh - helpers for the control-plane integration tests (sourced).
#
# Every test runs real processes on loopback with ephemeral ports and a
# fresh temp dir: a coordinator (`gpubench coordinator`) and agents
# (`gpubench agent`), fast timers (heartbeat 100 ms, lost after 5 = 0.5 s),
# and asserts with `check`. Processes a test starts are remembered by pid and
# stopped by pid on exit; nothing is killed by name.
#
# Usage: source lib.sh GPUBENCH [RAWPEER]
set -u
GB=${1:?gpubench binary}
RAWPEER=${2:-}
T=$(mktemp -d "${TMPDIR:-/tmp}/gb-control.XXXXXX")
PIDS=()
HB=100
LOST=5
export GB_LOG_LEVEL=info

# The watchdog: ctest's timeout kills a script that hangs without a word
# (seen once in CI: hardening_security_client_no_key at 120 s, nothing
# said). After GB_WATCHDOG_S seconds (100) it says what runs under the
# script (each process, and each of its threads with its state and kernel
# wait channel) and the logs' last lines. It stops nothing: a test still
# running then goes on. It is the script's first background job: stop
# yours by pid, never as %1.
watchdog() {
    local s p t
    trap 'kill "${s:-}" 2>/dev/null; exit 0' TERM
    sleep "${GB_WATCHDOG_S:-100}" </dev/null >/dev/null 2>&1 &
    s=$!
    wait "$s"
    {
        echo "---- WATCHDOG: the test still runs after ${GB_WATCHDOG_S:-100} s ($T) ----"
        for p in $(ps -e -o pid=,ppid= | awk -v root="$$" '{pp[$1] = $2}
            END { for (p in pp) { q = p; while (q in pp && q != root && q > 1) q = pp[q]
                  if (q == root) print p } }'); do
            [ "$p" = "$BASHPID" ] && continue
            ps -o pid=,ppid=,stat=,etimes=,args= -p "$p" || continue # gone meanwhile
            for t in /proc/"$p"/task/*; do
                [ -e "$t" ] || continue
                echo "    thread ${t##*/} $(cat "$t/comm" 2>/dev/null)" \
                    "state $(awk '{print $3}' "$t/stat" 2>/dev/null) wchan $(cat "$t/wchan" 2>/dev/null)"
            done
        done
        for p in "$T"/*.log; do [ -f "$p" ] && { echo "== $p"; tail -n 20 "$p"; }; done
    } >&2
}
watchdog &
WATCHDOG_PID=$!

cleanup() {
    local rc=$?
    kill -TERM "$WATCHDOG_PID" 2>/dev/null
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null
    done
    # a background job the test did not put in PIDS would hold the wait
    # below (and ctest's output pipe) until ctest's timeout: named, stopped
    for p in $(jobs -p); do
        [ "$p" = "$WATCHDOG_PID" ] && continue
        kill -0 "$p" 2>/dev/null || continue
        echo "cleanup: stopping a background job not in PIDS: $(ps -o args= -p "$p")" >&2
        kill -KILL "$p" 2>/dev/null
    done
    wait 2>/dev/null
    if [ $rc -ne 0 ]; then
        echo "---- logs ($T) ----" >&2
        for f in "$T"/*.log; do [ -f "$f" ] && { echo "== $f" >&2; tail -n 60 "$f" >&2; }; done
    fi
    [ "${GB_KEEP_TMP:-0}" = 1 ] || rm -rf "$T"
    exit $rc
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
# check "what" cmd...: run cmd, fail with "what" unless it succeeds
check() { local what=$1; shift; "$@" || fail "$what"; }
# eq "what" got want
eq() { [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"; }
contains() { grep -qF -- "$3" "$2" || fail "$1: '$3' not in $2, which ends:
$(tail -n 5 "$2" 2>&1)"; }
# same NAME FILE: FILE holds exactly the text on stdin
same() {
    local want
    want=$(cat)
    [ "$(cat "$2")" = "$want" ] || fail "$1: got
$(cat "$2")
want
$want"
}
# store_refusals CMD VIEW VERSION [ARG...]: `gpubench CMD --db FILE ARG...`
# where FILE is no store, a directory, not SQLite, another program's, or
# $DB with VIEW dropped and user_version VERSION (an older store): exit 1,
# each said
store_refusals() {
    local cmd=$1 view=$2 version=$3
    shift 3
    "$GB" "$cmd" --db "$T/none.db" "$@" >/dev/null 2>"$T/e.txt"; eq "$cmd: no store" "$?" 1
    contains "$cmd: no store" "$T/e.txt" "gpubench $cmd: no store at $T/none.db"
    "$GB" "$cmd" --db "$T" "$@" >/dev/null 2>"$T/e.txt"; eq "$cmd: a directory" "$?" 1
    contains "$cmd: a directory" "$T/e.txt" "is a directory"
    echo "not sqlite" >"$T/text.db"
    "$GB" "$cmd" --db "$T/text.db" "$@" >/dev/null 2>"$T/e.txt"; eq "$cmd: not sqlite" "$?" 1
    contains "$cmd: not sqlite" "$T/e.txt" "gpubench $cmd:"
    rm -f "$T/foo.db"
    sqlite3 "$T/foo.db" "CREATE TABLE foo(x)"
    "$GB" "$cmd" --db "$T/foo.db" "$@" >/dev/null 2>"$T/e.txt"; eq "$cmd: not ours" "$?" 1
    contains "$cmd: not ours" "$T/e.txt" "gpubench $cmd: $T/foo.db is not a gpubench store"
    cp "$DB" "$T/old.db"
    sqlite3 "$T/old.db" "DROP VIEW $view; PRAGMA user_version = $version"
    "$GB" "$cmd" --db "$T/old.db" "$@" >/dev/null 2>"$T/e.txt"; eq "$cmd: an older store" "$?" 1
    contains "$cmd: an older store" "$T/e.txt" "has schema version $version, this gpubench reads"
    # an older store whose views all work: read without a word, its views
    # showed the figures later migrations corrected
    cp "$DB" "$T/old.db"
    sqlite3 "$T/old.db" "PRAGMA user_version = $version"
    "$GB" "$cmd" --db "$T/old.db" "$@" >/dev/null 2>"$T/e.txt"; eq "$cmd: an older store that reads" "$?" 1
    contains "$cmd: an older store that reads" "$T/e.txt" "its views are older than this version's"
    # a --db is a file name, not a URI ("file:X" read X)
    cp "$DB" "$T/file:x.db"
    (cd "$T" && "$GB" "$cmd" --db "file:x.db" "$@" >/dev/null 2>"$T/e.txt") ||
        fail "$cmd: a store named file:x.db: $(cat "$T/e.txt")"
    rm -f "$T/file:x.db"
}
# usage_errors CMD [ARG...]: each line on stdin, "MORE|WANT", is a usage
# error of `gpubench CMD ARG... MORE` (MORE split at blanks): exit 2, WANT
# on stderr, nothing on stdout
usage_errors() {
    local cmd=$1 what want
    shift
    while IFS='|' read -r what want; do
        # shellcheck disable=SC2086
        "$GB" "$cmd" "$@" $what >"$T/o.txt" 2>"$T/e.txt"
        eq "$cmd $what" "$?" 2
        contains "$cmd $what says why" "$T/e.txt" "$want"
        [ -s "$T/o.txt" ] && fail "$cmd $what: stdout $(cat "$T/o.txt")"
    done
}

# run_for SECS cmd...: run cmd for SECS seconds (or until it ends), then
# stop it with one SIGTERM; returns its status. Not coreutils' timeout for a
# process meant to be stopped: that follows its SIGTERM with a SIGCONT,
# which under LeakSanitizer can land while the exit-time leak check stops
# the threads, discard its SIGSTOP and hang the check (a CI pass under ASan
# timed out so).
run_for() {
    local secs=$1 p i
    shift
    "$@" &
    p=$!
    PIDS+=("$p")
    for ((i = 0; i < secs * 20; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
    kill -TERM "$p" 2>/dev/null
    wait "$p"
}

# named OPT ARGS...: whether ARGS give the option OPT (--opt V or --opt=V)
named() {
    local o=$1 a
    shift
    for a in "$@"; do
        if [ "$a" = "$o" ] || [ "${a%%=*}" = "$o" ]; then return 0; fi
    done
    return 1
}

# OPT VALUE pairs into the array named DEFAULTS, but those the ARGS after
# -- give (an option given twice is a usage error): defaults OPT VALUE...
# -- ARGS...
defaults() {
    DEFAULTS=()
    local -a pairs=()
    while [ "$1" != -- ]; do pairs+=("$1" "$2"); shift 2; done
    shift
    local i
    for ((i = 0; i < ${#pairs[@]}; i += 2)); do
        named "${pairs[i]}" "$@" || DEFAULTS+=("${pairs[i]}" "${pairs[i + 1]}")
    done
}

# start_coord [flags...]: coordinator on ephemeral ports, store $T/gb.db;
# sets LISTEN, CONTROL, COORD_PID. Reuses LISTEN/CONTROL if already set
# (a restart binds the same ports).
start_coord() {
    local listen=${LISTEN:-tcp://127.0.0.1:*} control=${CONTROL:-tcp://127.0.0.1:*}
    rm -f "$T/ready"
    # flags give their own (--db, --lost-after...) in place of these
    defaults --listen "$listen" --control "$control" --db "$T/gb.db" \
        --heartbeat-ms "$HB" --lost-after "$LOST" -- "$@"
    "$GB" coordinator "${DEFAULTS[@]}" --ready-file "$T/ready" "$@" >>"$T/coord.log" 2>&1 &
    COORD_PID=$!
    PIDS+=("$COORD_PID")
    for _ in $(seq 100); do
        [ -f "$T/ready" ] && break
        kill -0 "$COORD_PID" 2>/dev/null || fail "coordinator exited: $(tail -n 5 "$T/coord.log")"
        sleep 0.05
    done
    [ -f "$T/ready" ] || fail "coordinator did not start"
    LISTEN=$(sed -n 's/^listen=//p' "$T/ready")
    CONTROL=$(sed -n 's/^control=//p' "$T/ready")
    export GB_CONTROL=$CONTROL
}

# start_agent NAME [flags...]: sets AGENT_PID[NAME]
declare -A AGENT_PID
start_agent() {
    local name=$1; shift
    defaults --connect "$LISTEN" --state-dir "$T/$name" --name "$name" --heartbeat-ms "$HB" \
        --lost-after "$LOST" --kill-grace-ms 500 -- "$@"
    "$GB" agent "${DEFAULTS[@]}" "$@" >>"$T/$name.log" 2>&1 &
    AGENT_PID[$name]=$!
    PIDS+=("$!")
}

# connected: number of connected agents
connected() { "$GB" nodes --format csv 2>/dev/null | grep -c ',connected,' || true; }

# wait_nodes N: until N agents are connected (10 s)
wait_nodes() {
    for _ in $(seq 200); do
        [ "$(connected)" -ge "$1" ] && return 0
        sleep 0.05
    done
    fail "only $(connected) of $1 agents connected"
}

# sweep_field SWEEP FIELD: a column of `gpubench status SWEEP --format csv`
sweep_field() {
    "$GB" status "$1" --format csv | awk -F, -v f="$2" 'NR==1{for(i=1;i<=NF;i++) if($i==f) c=i} NR==2{print $c}'
}

# wait_running SWEEP N: until N jobs of SWEEP run (10 s)
wait_running() {
    for _ in $(seq 200); do
        [ "$(sweep_field "$1" running 2>/dev/null)" = "$2" ] && return 0
        sleep 0.05
    done
    fail "sweep $1 never had $2 running job(s)"
}

# q SQL: one sqlite3 query on the store
q() { sqlite3 -batch -noheader -cmd ".timeout 5000" "$T/gb.db" "$1"; }

# submit args...: prints the sweep id, fails the test if rejected
submit() { "$GB" submit "$@" 2>>"$T/cli.log" || fail "submit $* was rejected: $(tail -n 1 "$T/cli.log")"; }

# run_while_disconnected HOW NAME OUT CMD...: run the control command CMD
# (output to OUT; the test fails if CMD fails) so that the coordinator
# handles it while agent NAME has no connection: whatever it sends NAME in
# answer (a JobAssign, a Cancel) the ROUTER drops, as a connection cut
# loses it. NAME is held (SIGSTOP) until CMD has its answer, so that it
# cannot connect again in between; then it goes on (SIGCONT), connects
# anew and registers, saying what it runs. HOW its connection goes:
#   stall    the coordinator stopped (SIGSTOP) for the agent's ZMQ
#            heartbeat timeout (HB * LOST ms: 2 s with the LOST=20 the
#            callers set) and 1.5 s more: NAME drops the connection and
#            starts a new one, which cannot finish while the coordinator
#            or NAME is stopped. CMD is sent 0.2 s before the coordinator
#            goes on, so that the coordinator handles it in its first turn
#   restart  NAME held, the coordinator stopped (SIGTERM) and started again
#            on the same ports: the new one never had NAME's connection
#   stall_restart  as stall, and once CMD has its answer the coordinator
#            is restarted as by restart before NAME goes on: what CMD
#            changed reaches NAME only from the new coordinator, which
#            knows of it only what the store kept
run_while_disconnected() {
    local how=$1 agent=${AGENT_PID[$2]} out=$3 cmd ms
    shift 3
    case $how in
    stall | stall_restart)
        kill -STOP "$COORD_PID"
        ms=$((HB * LOST + 1500))
        sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
        kill -STOP "$agent"
        ;;
    restart)
        kill -STOP "$agent"
        kill -TERM "$COORD_PID"
        wait "$COORD_PID"
        start_coord
        ;;
    *) fail "run_while_disconnected: no way '$how'" ;;
    esac
    "$@" >"$out" 2>&1 &
    cmd=$!
    if [ "$how" != restart ]; then
        sleep 0.2
        kill -CONT "$COORD_PID"
    fi
    wait "$cmd" || fail "${*:2} failed: $(cat "$out")"
    if [ "$how" = stall_restart ]; then
        kill -TERM "$COORD_PID"
        wait "$COORD_PID"
        start_coord
    fi
    kill -CONT "$agent"
}
