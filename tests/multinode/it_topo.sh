#!/usr/bin/env bash
# Topology: a fake agent process registers two nodes over a real socket with
# synthetic GPU inventories (this machine has no GPU): "dgx", 8 GPUs in two
# NVLink islands, and "pcie", 4 cards with every PCIe path class. The store
# must hold each GPU pair's NVLink lanes and PCIe path, `gpubench nodes
# --topo` must print the matrix as nvidia-smi topo -m does (compared with
# topo_expected.txt, checked by hand against test_fakeagent.c's tables),
# and placement must use it (an NVLink job is refused on the PCIe node, and
# on the dgx when it spans both islands).
#
#   it_topo.sh GPUBENCH FAKEAGENT
source "$(dirname "$0")/../control/lib.sh" "$1" "$2"
FAKE=$2
start_coord
"$FAKE" topo "$LISTEN" 60 >"$T/fake.log" 2>&1 &
PIDS+=("$!")
wait_nodes 2
# connected is said from memory; the rows land with the commit that ends
# the coordinator's loop turn
for _ in $(seq 100); do [ "$(q "SELECT count(*) FROM links")" = 34 ] && break; sleep 0.05; done

# the store
eq "every pair of dgx stored" "$(q "SELECT count(*) FROM links WHERE agent_id = 'fakedgx01'")" 28
eq "every pair of pcie stored" "$(q "SELECT count(*) FROM links WHERE agent_id = 'fakepcie01'")" 6
eq "a pair's lanes and path" \
    "$(q "SELECT nvlink_lanes || ',' || pcie_path FROM links WHERE agent_id = 'fakedgx01' AND gpu_a = 0 AND gpu_b = 1")" \
    "12,single_switch"
eq "across the islands" \
    "$(q "SELECT nvlink_lanes || ',' || pcie_path FROM links WHERE agent_id = 'fakedgx01' AND gpu_a = 3 AND gpu_b = 4")" \
    "0,cross_socket"
eq "NVLink on the dgx only" "$(q "SELECT group_concat(name || '=' || has_nvlink) FROM (SELECT * FROM nodes ORDER BY name)")" \
    "dgx=1,pcie=0"
eq "the inventory JSON has the links too" \
    "$(q "SELECT json_array_length(inventory, '$.links') FROM nodes WHERE name = 'dgx'")" 28

# the matrix, the legend
check "nodes --topo" "$GB" nodes --topo --db "$T/gb.db" >"$T/topo.txt"
diff -u "$(dirname "$0")/topo_expected.txt" "$T/topo.txt" || fail "the matrix differs from topo_expected.txt"
# one node, by name or by agent id
"$GB" nodes --topo fakepcie01 --db "$T/gb.db" >"$T/one.txt" || fail "nodes --topo fakepcie01"
contains "one node" "$T/one.txt" "node pcie (agent fakepcie01): 4 GPU(s), NVIDIA L40S"
if grep -q "node dgx" "$T/one.txt"; then fail "--topo fakepcie01 printed dgx"; fi
# one row per pair for scripts
"$GB" nodes --topo --db "$T/gb.db" --format csv >"$T/topo.csv" || fail "csv"
eq "csv rows: header + 28 + 6" "$(wc -l <"$T/topo.csv")" 35
contains "a csv row" "$T/topo.csv" "dgx,2,3,NV12,12,single_switch"
"$GB" nodes --topo dgx --db "$T/gb.db" --format json >"$T/topo.json" || fail "json"
eq "json: the 8 NV6 pairs of dgx" "$(grep -c '"link":[[:space:]]*"NV6"' "$T/topo.json")" 8
eq "json: 28 pairs" "$(grep -c '"gpu_b":' "$T/topo.json")" 28
"$GB" nodes --topo pcie --db "$T/gb.db" --format md >"$T/topo.md" || fail "md"
eq "md: a pipe table of the 6 pairs" "$(head -n 2 "$T/topo.md")" "| node | gpu_a | gpu_b | link | nvlink_lanes | pcie_path |
| --- | ---: | ---: | --- | ---: | --- |"
eq "md rows: header, rule + 6" "$(wc -l <"$T/topo.md")" 8
# failures: no such node, no store, NODE without --topo
if "$GB" nodes --topo nosuch --db "$T/gb.db" 2>"$T/err.txt"; then fail "--topo nosuch succeeded"; fi
contains "no such node" "$T/err.txt" "no node named 'nosuch'"
if "$GB" nodes --topo --db "$T/none.db" 2>"$T/err.txt"; then fail "--topo on no store succeeded"; fi
contains "no store" "$T/err.txt" "no store at $T/none.db"
if "$GB" nodes --topo --db "$T" 2>"$T/err.txt"; then fail "--topo on a directory succeeded"; fi
contains "a directory" "$T/err.txt" "is a directory; --db names the store file"
"$GB" nodes dgx 2>"$T/err.txt"
eq "NODE without --topo is a usage error" "$?" 2

# placement reads the same matrix
if "$GB" submit --kind resnet50 --backend cuda --gpus 4 --interconnect nvlink --nodes pcie 2>"$T/err.txt"; then
    fail "an NVLink job was accepted for the PCIe node"
fi
contains "refused for lack of NVLink" "$T/err.txt" "node pcie has no NVLink between its GPUs"
check "an NVLink job on one island fits the dgx" "$GB" submit --kind resnet50 --backend cuda --gpus 4 --interconnect nvlink --nodes dgx
# all 8 span both islands, which only PCIe and the CPUs join
if "$GB" submit --kind resnet50 --backend cuda --gpus 8 --interconnect nvlink --nodes dgx 2>"$T/err.txt"; then
    fail "an NVLink job over both islands was accepted"
fi
contains "refused, saying why" "$T/err.txt" "node dgx's GPUs 0..7, which a job of 8 GPUs takes, are not joined by NVLink"
# a job over 3 nodes where 2 run it on GPUs and 1 on its CPU: nodes enough,
# but a job's ranks share one backend, which the refusal says (it read as
# a count of nodes that did not add up)
start_agent c1
wait_nodes 3
if "$GB" submit --kind sleep --param n_nodes=3 2>"$T/err.txt"; then fail "3 nodes on two backends accepted"; fi
contains "refused, saying why" "$T/err.txt" \
    "the job spans 3 nodes, and 2 known node(s) could run it together (2 on GPUs, 1 on CPUs: a job's ranks all run on one backend; \"backend\" chooses it)"
echo ok
