#!/usr/bin/env bash
# A sweep spec the coordinator must refuse (CASE): submit exits non-zero with
# a clear reason, nothing is stored, and the coordinator goes on serving.
source "$(dirname "$0")/lib.sh" "$1" "$2"
case=${3:?case}

start_coord
start_agent healthy
wait_nodes 1
busy=$(submit --kind sleep --param duration_ms=800)

case "$case" in
malformed)     printf '{"kind": "gemm", "m": [64, 128' >"$T/spec.json"; want="spec is not valid JSON" ;;
not_object)    printf '["gemm"]' >"$T/spec.json"; want="spec must be a JSON object" ;;
unknown_kind)  printf '{"kind": "bert"}' >"$T/spec.json"; want="unknown job kind 'bert' (known: allreduce, gemm, resnet50, sleep)" ;;
unknown_key)   printf '{"kind": "gemm", "sizes": [1]}' >"$T/spec.json"; want="unknown key 'sizes'" ;;
bad_value)     printf '{"kind": "resnet50", "batch": 0}' >"$T/spec.json"; want="'batch' must be an integer in 1..65536" ;;
too_many)      printf '{"kind": "sleep", "duration_ms": [1,2,3,4,5,6,7,8,9,10], "repeat": 1000}' >"$T/spec.json"; want="the sweep expands to 10,000 jobs, more than the coordinator's --max-jobs 1000 (the most one sweep may have)" ;;
unsatisfiable) printf '{"kind": "resnet50", "gpus": 8, "backend": "cuda"}' >"$T/spec.json"; want="no known node can run job 1 of the sweep" ;;
no_match)      printf '{"kind": "gemm", "nodes": "dgx-*"}' >"$T/spec.json"; want="does not match 'dgx-*'" ;;
cpu_fp16)      printf '{"kind": "resnet50", "precision": ["fp32", "fp16"]}' >"$T/spec.json"; want="fp16 needs a GPU" ;;
*) fail "unknown case $case" ;;
esac
extra=()
[ "$case" = too_many ] && { kill -TERM "$COORD_PID"; wait "$COORD_PID"; start_coord --max-jobs 1000; wait_nodes 1; }
if "$GB" submit --spec "$T/spec.json" >"$T/out.txt" 2>"$T/err.log"; then
    fail "submit accepted a bad spec: $(cat "$T/out.txt")"
fi
case "$case" in
malformed | not_object)
    # not one JSON object: refused by submit itself, at once (it waited for
    # the coordinator's answer, 5 s when none ran); sent raw, by the
    # coordinator too
    contains "submit says why itself" "$T/err.log" "gpubench submit: $T/spec.json: $want"
    grep -q "rejected submit" "$T/coord.log" && fail "the coordinator was asked"
    "$RAWPEER" submit_spec "$LISTEN" "$CONTROL" <"$T/spec.json" >"$T/err.log" 2>&1 ||
        fail "sent raw: $(cat "$T/err.log")"
    ;;
esac
contains "submit says why" "$T/err.log" "rejected: "
# too many jobs: the limit is the coordinator's option (submit has no
# --max-jobs), named so, the whole line exact
[ "$case" = too_many ] && eq "the limit named as the coordinator's" "$(grep -F "rejected: " "$T/err.log")" "gpubench submit: rejected: $want"
contains "the reason is precise" "$T/err.log" "$want"
contains "the coordinator logged it" "$T/coord.log" "rejected submit"
eq "nothing stored" "$(q "SELECT count(*) FROM sweeps")" 1
check "the coordinator still serves" "$GB" wait "$busy" --quiet
next=$(submit --kind sleep --param duration_ms=10)
check "and takes new sweeps" "$GB" wait "$next" --quiet
echo ok
