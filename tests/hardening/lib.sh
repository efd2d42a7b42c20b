# lib.sh - helpers for the hardening integration tests (sourced after the
# control plane's tests/control/lib.sh, whose coordinator/agent/check
# helpers they use): keys, and the exactly-once assertion every fault test
# ends with.
#
# Usage: source lib.sh GPUBENCH [HPEER]
source "$(dirname "${BASH_SOURCE[0]}")/../control/lib.sh" "$1" "${2:-}"
HPEER=${2:-}

# make_keys NAME...: $T/NAME.key and $T/NAME.pub
make_keys() {
    local n
    for n in "$@"; do "$GB" keygen "$T/$n" >/dev/null 2>&1 || fail "keygen $n"; done
}

# authorize NAME...: $T/authorized lists exactly these public keys
authorize() {
    local n
    : >"$T/authorized.new"
    for n in "$@"; do echo "$(cat "$T/$n.pub") $n" >>"$T/authorized.new"; done
    mv "$T/authorized.new" "$T/authorized"
}

# use_keys NAME: the gpubench commands (and test_hpeer) use NAME's key and
# pin coord.pub
use_keys() { export GB_KEY=$T/$1.key GB_SERVER_KEY=$T/coord.pub; }
no_keys() { unset GB_KEY GB_SERVER_KEY; }

# acked: "job,attempt" lines of every result an agent saw acknowledged
acked() {
    cat "$T"/*.log 2>/dev/null |
        sed -n 's/.*agent  info  result of job \([0-9]*\) attempt \([0-9]*\) acknowledged$/\1,\2/p' |
        sort -u
}

# assert_exactly_once [N_JOBS]: the end of every fault test.
#  - every job (N_JOBS of them, when given) ended: done, or failed or
#    cancelled with its reason kept;
#  - v_results holds each job once; a done job has an ok result of its
#    final attempt; results of other attempts are marked superseded;
#  - every result an agent saw acknowledged is in `results`, once;
#  - no agent's spool still holds a result.
assert_exactly_once() {
    local want=${1:-}
    local n
    n=$(q "SELECT count(*) FROM jobs")
    [ -z "$want" ] || eq "jobs" "$n" "$want"
    eq "every job ended" "$(q "SELECT count(*) FROM jobs WHERE state NOT IN ('done','failed','cancelled')")" 0
    eq "v_results: one row per job" "$(q "SELECT count(*) || ',' || count(DISTINCT job_id) FROM v_results")" "$n,$n"
    eq "a done job has an ok result of its final attempt" \
       "$(q "SELECT count(*) FROM jobs j WHERE state = 'done' AND NOT EXISTS
             (SELECT 1 FROM results r WHERE r.job_id = j.job_id AND r.attempt = j.attempt AND r.status = 'ok')")" 0
    eq "a failed or cancelled job says why" \
       "$(q "SELECT count(*) FROM jobs WHERE state IN ('failed','cancelled') AND coalesce(error, '') = ''")" 0
    eq "results of other attempts are superseded" \
       "$(q "SELECT count(*) FROM results r JOIN jobs j USING (job_id) JOIN attempts a USING (job_id, attempt)
             WHERE r.attempt != j.attempt AND a.state != 'superseded'")" 0
    eq "no job counted twice" \
       "$(q "SELECT count(*) FROM (SELECT job_id FROM results r JOIN attempts a USING (job_id, attempt)
             WHERE a.state != 'superseded' GROUP BY job_id HAVING count(*) > 1)")" 0
    local acks missing=0 line
    acks=$(acked)
    for line in $acks; do
        [ "$(q "SELECT count(*) FROM results WHERE job_id = ${line%,*} AND attempt = ${line#*,}")" = 1 ] ||
            { echo "acknowledged but not stored: job,attempt $line" >&2; missing=$((missing + 1)); }
    done
    eq "acknowledged results missing from the store" "$missing" 0
    local a
    for a in "${!AGENT_PID[@]}"; do
        [ -d "$T/$a/spool" ] || continue
        eq "spool of $a empty" "$(find "$T/$a/spool" -name 'result-*.pb' | wc -l)" 0
    done
    echo "exactly once: $n job(s), $(echo "$acks" | grep -c , || true) acknowledged result(s) all stored once"
}
