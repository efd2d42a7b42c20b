# exactly_once.sh - the assertion every fault test ends with (sourced by
# tests/hardening/lib.sh and by the control plane's fault tests after their
# tests/control/lib.sh). It reads the store with the sqlite3 shell (q) and
# the agents' logs ($T/NODE.log, where each acknowledgement an agent
# received is an info line).

# acked: "node,job,attempt" lines of every result an agent saw acknowledged
acked() {
    local f
    for f in "$T"/*.log; do
        [ -f "$f" ] || continue
        sed -n "s/.*agent  info  result of job \([0-9]*\) attempt \([0-9]*\) acknowledged\$/$(basename "$f" .log),\1,\2/p" "$f"
    done | sort -u
}

# assert_exactly_once [N_JOBS]: the end of every fault test.
#  - every job (N_JOBS of them, when given) ended: done, or failed or
#    cancelled with its reason kept;
#  - v_results holds each job once; a done job has an ok result of its
#    final attempt; results of other attempts are marked superseded;
#  - every result an agent saw acknowledged is in `results`, once (a lost
#    outcome, its spool entry unreadable: its attempt ended lost); for a
#    multi-node attempt (issue 5), whose job has one results row written
#    when every rank ended, it is that agent's rank's report in `ranks`;
#  - every rank of every multi-node attempt ended;
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
    eq "every rank of every multi-node attempt ended" \
       "$(q "SELECT count(*) FROM ranks WHERE state IN ('waiting','assigned','ready','started')")" 0
    local acks missing=0 line node job att
    acks=$(acked)
    for line in $acks; do
        IFS=, read -r node job att <<<"$line"
        if [ "$(q "SELECT count(*) FROM ranks WHERE job_id = $job AND attempt = $att")" != 0 ]; then
            # (a rank's lost outcome: its row lost, with the agent's why)
            [ "$(q "SELECT count(*) FROM ranks k JOIN nodes n USING (agent_id) WHERE k.job_id = $job
                    AND k.attempt = $att AND n.name = '$node' AND (k.status IS NOT NULL OR
                    (k.state = 'lost' AND k.error LIKE '%the agent''s spooled result %'))")" = 1 ] ||
                { echo "acknowledged but not stored: rank report of $node, job,attempt $job,$att" >&2; missing=$((missing + 1)); }
        else
            # a lost outcome (the agent's spool entry unreadable) is stored
            # as its attempt's end, lost with why, not as a result
            [ "$(q "SELECT count(*) FROM results WHERE job_id = $job AND attempt = $att")" = 1 ] ||
                [ "$(q "SELECT count(*) FROM attempts WHERE job_id = $job AND attempt = $att
                        AND state = 'lost' AND error LIKE 'the agent''s spooled result %'")" = 1 ] ||
                { echo "acknowledged but not stored: job,attempt $job,$att" >&2; missing=$((missing + 1)); }
        fi
    done
    eq "acknowledged results missing from the store" "$missing" 0
    local a
    for a in "${!AGENT_PID[@]}"; do
        [ -d "$T/$a/spool" ] || continue
        eq "spool of $a empty" "$(find "$T/$a/spool" -name 'result-*.pb' | wc -l)" 0
    done
    echo "exactly once: $n job(s), $(echo "$acks" | grep -c , || true) acknowledged result(s) all stored once"
}
