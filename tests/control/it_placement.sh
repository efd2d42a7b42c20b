#!/usr/bin/env bash
# Placement on real agents: labels and node globs pick the nodes, one job per
# node at a time unless the agent offers more slots.
source "$(dirname "$0")/lib.sh" "$1" "$2"

start_coord
start_agent rack-a-1 --labels rack=a,pool=gpu
start_agent rack-b-1 --labels rack=b
start_agent rack-b-2 --labels rack=b --slots 2
wait_nodes 3
s1=$(submit --kind sleep --param duration_ms=100 --repeat 4 --labels rack=a)
s2=$(submit --kind sleep --param duration_ms=100 --repeat 4 --nodes 'rack-b-*')
s3=$(submit --kind sleep --param duration_ms=600 --repeat 3 --nodes rack-b-2)
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
echo ok
