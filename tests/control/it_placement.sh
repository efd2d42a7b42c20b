#!/usr/bin/env bash
# Placement on real agents: labels and node globs pick the nodes, one job per
# node at a time unless the agent offers more slots; bf16 on the CPU only on
# nodes whose agent reports it (avx512_bf16), also after a coordinator restart.
source "$(dirname "$0")/lib.sh" "$1" "$2"

start_coord
start_agent rack-a-1 --labels rack=a,pool=gpu
start_agent rack-b-1 --labels rack=b
start_agent rack-b-2 --labels rack=b --slots 2
start_agent rack-c-1 --labels rack=c
wait_nodes 4
s1=$(submit --kind sleep --param duration_ms=100 --repeat 4 --labels rack=a)
s2=$(submit --kind sleep --param duration_ms=100 --repeat 4 --nodes 'rack-b-*')
# (2.5 s: each poll below starts python3, ~0.8 s through pyenv's shim on a
# loaded CI machine, which missed a 0.6 s overlap)
s3=$(submit --kind sleep --param duration_ms=2500 --repeat 3 --nodes rack-b-2)
# while two run there, nodes lists both (it showed the first only)
for _ in $(seq 100); do
    jobs=$("$GB" nodes --format json | python3 -c 'import json, sys
print(next(n["running_jobs"] or "" for n in json.load(sys.stdin) if n["node"] == "rack-b-2"))')
    case "$jobs" in *,*) break ;; esac
    sleep 0.05
done
eq "nodes lists both jobs of a two-slot node" "$(echo "$jobs" | tr , '\n' | wc -l)" 2
for s in $s1 $s2 $s3; do check "sweep $s" "$GB" wait "$s" --quiet; done
eq "labels pick rack a" "$(q "SELECT group_concat(DISTINCT node) FROM v_results WHERE sweep_id = $s1")" rack-a-1
eq "glob picks rack b" "$(q "SELECT count(*) FROM v_results WHERE sweep_id = $s2 AND node LIKE 'rack-b-%'")" 4
eq "labels of the node stored" "$(q "SELECT labels FROM v_nodes WHERE node = 'rack-a-1'")" "rack=a,pool=gpu"
# rack-b-2 offers 2 slots: two of s3's jobs overlapped there
eq "two slots used at once" \
   "$(q "SELECT count(*) > 0 FROM attempts a JOIN attempts b ON a.job_id < b.job_id AND a.agent_id = b.agent_id
         JOIN jobs ja ON ja.job_id = a.job_id JOIN jobs jb ON jb.job_id = b.job_id
         WHERE ja.sweep_id = $s3 AND jb.sweep_id = $s3 AND a.started_at < b.ended_at AND b.started_at < a.ended_at")" 1
# a one-slot node never overlaps
eq "one slot, one job at a time" \
   "$(q "SELECT count(*) FROM attempts a JOIN attempts b ON a.job_id < b.job_id AND a.agent_id = b.agent_id
         JOIN nodes n ON n.agent_id = a.agent_id AND n.slots = 1
         WHERE a.started_at < b.ended_at AND b.started_at < a.ended_at")" 0
# no node can run it: the reason of the node the job chose comes first, not
# "does not match" of the three registered before it
"$GB" submit --kind resnet50 --backend cpu --precision tf32 --nodes rack-c-1 >/dev/null 2>"$T/none.log" && fail "tf32 on a CPU accepted"
contains "the chosen node's reason first" "$T/none.log" "of the sweep {"
grep -q "}: tf32 needs a GPU and node rack-c-1 would run it on the CPU; " "$T/none.log" || fail "rack-c-1's reason is not first: $(cat "$T/none.log")"
contains "the rest counted" "$T/none.log" "; and 1 more node(s)"
# the agents report the CPU's precisions; bf16 goes only where the CPU has it
precs=$(q "SELECT group_concat(value) FROM nodes, json_each(json_extract(inventory, '$.cpu_precisions')) WHERE name = 'rack-a-1'")
case "$precs" in fp32|fp32,bf16) ;; *) fail "cpu_precisions in the inventory: '$precs'" ;; esac
bf16_spec='{"kind": "resnet50", "backend": "cpu", "precision": "bf16", "batch": 2, "image_size": 32, "steps": 1, "warmup": 0}'
for round in live restarted; do
    if [ "$precs" = fp32 ]; then
        echo "$bf16_spec" | "$GB" submit --spec - >/dev/null 2>"$T/bf16.log" && fail "bf16 accepted on CPUs without avx512_bf16 ($round)"
        contains "says why ($round)" "$T/bf16.log" "CPU trains in fp32 only (bf16 needs avx512_bf16)"
    else
        echo "$bf16_spec" | "$GB" submit --spec - >/dev/null 2>"$T/bf16.log" || fail "bf16 refused on avx512_bf16 CPUs ($round)"
        "$GB" cancel "$(q "SELECT max(sweep_id) FROM sweeps")" >/dev/null
    fi
    # a restarted coordinator knows the nodes from the store only
    kill -TERM "$COORD_PID"; wait "$COORD_PID" 2>/dev/null
    for n in rack-a-1 rack-b-1 rack-b-2 rack-c-1; do kill -TERM "${AGENT_PID[$n]}"; wait "${AGENT_PID[$n]}" 2>/dev/null; done
    start_coord
done
echo ok
