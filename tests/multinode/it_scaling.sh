#!/usr/bin/env bash
# gpubench scaling on a real store that test_scaling fills through the
# store's own code (see its main for the runs: node-a's one-GPU bf16 median
# 100 at batch 64, 125 at 128; 2 GPUs over NVLink 196; 8 GPUs over NVLink
# 780 and 770 as threads, 800 as processes, 790 with 1 MB buckets, over
# PCIe 700; two nodes of 8 GPUs 1500 (rank 0 on node-a) and 1520 (rank 0
# on node-b: the GPU model's median), one GPU on each of two nodes over tcp
# 190; fp16 without a baseline; node-b's 4 GPUs against a 0 img/s one-GPU
# run; and invalid and failed runs that must not count).
#
#   it_scaling.sh GPUBENCH TEST_SCALING CASE
# Cases: table (the table, md, filters), csv (every column and digit,
# json), empty (nothing yet, nothing matching, errors, an older store)
source "$(dirname "$0")/../control/lib.sh" "$1"
SCALING=$2
case=${3:?case}
DB=$T/s.db
check "test_scaling fills the store" "$SCALING" make "$DB"

case $case in
table)
    # one precision and batch: the columns every row shares (backend, batch,
    # image size) are said once under the table (node, model and precision
    # always shown); the median of two runs (780 and 770 as
    # threads: 775) beside PCIe's 700 (nvlink_gain 1.107); runs as processes
    # and with 1 MB buckets each their own row; a row without a baseline
    # has no speedup or eff, never a division by zero
    check "scaling" "$GB" scaling --db "$DB" --node node-a --precision bf16 --batch 64 >"$T/t.txt" 2>"$T/err.log"
    same "the table" "$T/t.txt" <<'EOF'
node    gpu_model    precision  n_nodes  bucket_mb  launch     n_gpus  base_img_s  nvlink_img_s  nvlink_runs  nvlink_speedup  nvlink_eff  pcie_img_s  pcie_runs  pcie_speedup  pcie_eff  tcp_img_s  tcp_runs  tcp_speedup  tcp_eff  nvlink_gain
node-a  NVIDIA H100  bf16             1          1  threads         8       100.0         790.0            1            7.90       0.988           -          -             -         -          -         -            -        -            -
node-a  NVIDIA H100  bf16             1         25  processes       8       100.0         800.0            1            8.00       1.000           -          -             -         -          -         -            -        -            -
node-a  NVIDIA H100  bf16             1         25  threads         2       100.0         196.0            1            1.96       0.980           -          -             -         -          -         -            -        -            -
node-a  NVIDIA H100  bf16             1         25  threads         8       100.0         775.0            2            7.75       0.969       700.0          1          7.00     0.875          -         -            -        -        1.107
node-a  NVIDIA H100  bf16             2         25  -               2       100.0             -            -               -           -           -          -             -         -      190.0         1         1.90    0.950            -
node-a  NVIDIA H100  bf16             2         25  threads        16       100.0        1500.0            1           15.00       0.938           -          -             -         -          -         -            -        -            -

every row: backend cuda, batch 64 per GPU, 224 px images
speedup and eff are over base_img_s, the one-GPU median of the same node and configuration (v_scaling's baseline; none measured: '-'); nvlink_gain is nvlink_img_s over pcie_img_s
EOF
    [ -s "$T/err.log" ] && fail "stderr: $(cat "$T/err.log")"
    # node-b: rank 0 of a two-node run, measured against the GPU model's
    # median (it has no one-GPU run of its own); its 4 GPUs have no baseline
    # (a one-GPU run of 0 img/s is none); no PCIe run there: no nvlink_gain;
    # the two-node row's baseline is the GPU model's (node-b has no one-GPU
    # run): base_of says so, and the line under the table (both said it was
    # node-b's own)
    check "scaling node-b" "$GB" scaling --db "$DB" --node 'node-[!a]' --format md >"$T/b.md"
    same "node-b, markdown" "$T/b.md" <<'EOF'
| node | gpu_model | precision | n_nodes | n_gpus | base_img_s | base_of | nvlink_img_s | nvlink_runs | nvlink_speedup | nvlink_eff |
| --- | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |
| node-b | NVIDIA H100 | bf16 | 1 | 4 | - | - | 400.0 | 1 | - | - |
| node-b | NVIDIA H100 | bf16 | 2 | 16 | 100.0 | gpu_model | 1520.0 | 1 | 15.20 | 0.950 |

every row: backend cuda, batch 64 per GPU, 224 px images, 25 MB all-reduce buckets, replicas as threads
speedup and eff are over base_img_s, the one-GPU median of the same node and configuration, or where base_of says gpu_model (a multi-node row whose rank-0 node has none) the GPU model's over every node (v_scaling's baseline; none measured: '-')
EOF
    # a glob, and the other filters
    check "scaling node-?" "$GB" scaling --db "$DB" --node 'node-?' --format csv >"$T/all.csv"
    eq "every multi-GPU row" "$(tail -n +2 "$T/all.csv" | wc -l)" 10
    check "scaling fp16" "$GB" scaling --db "$DB" --precision fp16 --format csv >"$T/fp16.csv"
    same "fp16: no baseline" "$T/fp16.csv" <<'EOF'
node,gpu_model,backend,precision,batch_per_gpu,image_size,n_nodes,bucket_mb,launch,n_gpus,base_img_s,nvlink_img_s,nvlink_runs,nvlink_speedup,nvlink_eff
node-a,NVIDIA H100,cuda,fp16,64,224,1,25,threads,8,,1600,1,,
EOF
    check "scaling batch 128" "$GB" scaling --db "$DB" --batch 128 --backend cuda --format csv >"$T/b128.csv"
    same "batch 128: an even count's median (125)" "$T/b128.csv" <<'EOF'
node,gpu_model,backend,precision,batch_per_gpu,image_size,n_nodes,bucket_mb,launch,n_gpus,base_img_s,pcie_img_s,pcie_runs,pcie_speedup,pcie_eff
node-a,NVIDIA H100,cuda,bf16,128,224,1,25,threads,4,125,490,1,3.92,0.98
EOF
    # CPU replicas (the same rows, said to be the CPU's): the caveat under
    # the table, since their efficiency is by construction about 1/N
    cp "$DB" "$T/cpu.db"
    sqlite3 "$T/cpu.db" "UPDATE results SET backend = 'cpu'"
    check "scaling cpu" "$GB" scaling --db "$T/cpu.db" --backend cpu --node node-b >"$T/cpu.txt"
    contains "the CPU caveat" "$T/cpu.txt" "CPU replicas split one node's cores: their efficiency tests the data-parallel logic, it says nothing about scaling"
    contains "the backend said" "$T/cpu.txt" "every row: backend cpu, batch 64 per GPU"
    grep -q "CPU replicas" "$T/t.txt" && fail "the CPU caveat under GPU rows"
    # the 8-GPU line alone (as published tables quote it)
    check "scaling --gpus 8" "$GB" scaling --db "$DB" --gpus 8 --precision bf16 --format csv >"$T/g8.csv"
    same "8 GPUs" "$T/g8.csv" <<'EOF'
node,gpu_model,backend,precision,batch_per_gpu,image_size,n_nodes,bucket_mb,launch,n_gpus,base_img_s,nvlink_img_s,nvlink_runs,nvlink_speedup,nvlink_eff,pcie_img_s,pcie_runs,pcie_speedup,pcie_eff,nvlink_gain
node-a,NVIDIA H100,cuda,bf16,64,224,1,1,threads,8,100,790,1,7.9,0.9875,,,,,
node-a,NVIDIA H100,cuda,bf16,64,224,1,25,processes,8,100,800,1,8,1,,,,,
node-a,NVIDIA H100,cuda,bf16,64,224,1,25,threads,8,100,775,2,7.75,0.96875,700,1,7,0.875,1.1071428571428572
EOF
    check "scaling --gpus 2,16" "$GB" scaling --db "$DB" --gpus 16,2 --format csv >"$T/g2.csv"
    eq "2 and 16 GPUs" "$(cut -d, -f1,7,10 "$T/g2.csv" | tail -n +2 | tr '\n' ' ')" "node-a,1,2 node-a,2,2 node-a,2,16 node-b,2,16 "
    # gpubench help lists it; help scaling is scaling -h
    "$GB" help >"$T/help.txt"
    contains "help lists scaling" "$T/help.txt" "  scaling      "
    "$GB" help scaling >"$T/h.txt"; eq "help scaling" "$?" 0
    contains "its usage" "$T/h.txt" "usage: gpubench scaling [--db FILE] [--node GLOB]"
    ;;
csv)
    # every column (those the table leaves out too) and every digit
    check "scaling csv" "$GB" scaling --db "$DB" --format csv >"$T/s.csv" 2>"$T/err.log"
    same "csv" "$T/s.csv" <<'EOF'
node,gpu_model,backend,precision,batch_per_gpu,image_size,n_nodes,bucket_mb,launch,n_gpus,base_img_s,base_of,nvlink_img_s,nvlink_runs,nvlink_speedup,nvlink_eff,pcie_img_s,pcie_runs,pcie_speedup,pcie_eff,tcp_img_s,tcp_runs,tcp_speedup,tcp_eff,nvlink_gain
node-a,NVIDIA H100,cuda,bf16,64,224,1,1,threads,8,100,node,790,1,7.9,0.9875,,,,,,,,,
node-a,NVIDIA H100,cuda,bf16,64,224,1,25,processes,8,100,node,800,1,8,1,,,,,,,,,
node-a,NVIDIA H100,cuda,bf16,64,224,1,25,threads,2,100,node,196,1,1.96,0.98,,,,,,,,,
node-a,NVIDIA H100,cuda,bf16,64,224,1,25,threads,8,100,node,775,2,7.75,0.96875,700,1,7,0.875,,,,,1.1071428571428572
node-a,NVIDIA H100,cuda,bf16,64,224,2,25,,2,100,node,,,,,,,,,190,1,1.9,0.95,
node-a,NVIDIA H100,cuda,bf16,64,224,2,25,threads,16,100,node,1500,1,15,0.9375,,,,,,,,,
node-a,NVIDIA H100,cuda,bf16,128,224,1,25,threads,4,125,node,,,,,490,1,3.92,0.98,,,,,
node-a,NVIDIA H100,cuda,fp16,64,224,1,25,threads,8,,,1600,1,,,,,,,,,,,
node-b,NVIDIA H100,cuda,bf16,64,224,1,25,threads,4,,,400,1,,,,,,,,,,,
node-b,NVIDIA H100,cuda,bf16,64,224,2,25,threads,16,100,gpu_model,1520,1,15.2,0.95,,,,,,,,,
EOF
    [ -s "$T/err.log" ] && fail "stderr: $(cat "$T/err.log")"
    check "scaling json" "$GB" scaling --db "$DB" --node node-a --batch 128 --format json >"$T/s.json"
    eq "json" "$(tr -d ' \t\n' <"$T/s.json")" '[{"node":"node-a","gpu_model":"NVIDIAH100","backend":"cuda","precision":"bf16","batch_per_gpu":128,"image_size":224,"n_nodes":1,"bucket_mb":25,"launch":"threads","n_gpus":4,"base_img_s":125,"pcie_img_s":490,"pcie_runs":1,"pcie_speedup":3.92,"pcie_eff":0.98}]'
    # read-only: the store is not written (no -wal left behind, same bytes)
    sum=$(cksum <"$DB")
    check "scaling reads" "$GB" scaling --db "$DB" >/dev/null
    eq "store unchanged" "$(cksum <"$DB")" "$sum"
    [ -e "$DB-wal" ] && fail "a -wal left behind"
    ;;
empty)
    # nothing matching the filters: said, exit 0 (csv: the header; json: [])
    check "no node-z" "$GB" scaling --db "$DB" --node node-z >"$T/o.txt"
    eq "said" "$(cat "$T/o.txt")" "no data-parallel ResNet-50 results in $DB match the --node, --precision, --batch, --gpus or --backend given (v_scaling has 12 row(s) of more than one GPU)"
    check "no cpu rows, csv" "$GB" scaling --db "$DB" --backend cpu --format csv >"$T/o.csv" 2>"$T/e.txt"
    eq "csv header" "$(cat "$T/o.csv")" "node,gpu_model,backend,precision,batch_per_gpu,image_size,n_nodes,bucket_mb,launch,n_gpus,base_img_s"
    contains "on stderr" "$T/e.txt" "gpubench scaling: no data-parallel ResNet-50 results in $DB match"
    check "no 3 GPUs" "$GB" scaling --db "$DB" --gpus 3 >"$T/o.txt"
    contains "said" "$T/o.txt" "match the --node, --precision, --batch, --gpus or --backend given"
    check "no tf32, json" "$GB" scaling --db "$DB" --precision tf32 --format json >"$T/o.json" 2>/dev/null
    eq "json []" "$(tr -d ' \n' <"$T/o.json")" "[]"
    # a store with no multi-GPU row: said so, with how to make one
    sqlite3 "$DB" "DELETE FROM results WHERE n_devices > 1"
    check "nothing yet" "$GB" scaling --db "$DB" >"$T/o.txt"
    eq "said" "$(cat "$T/o.txt")" "no data-parallel ResNet-50 results in $DB yet (v_scaling has no done, valid run of more than one GPU: submit one with --gpus 2,4,8)"
    # as results: no store, a directory, not SQLite, another program's file, an
    # older store; exit 1, said
    store_refusals scaling v_scaling 1
    # usage errors: exit 2, said, nothing on stdout
    usage_errors scaling --db "$DB" <<'EOF'
--precision fp8|gpubench scaling: --precision: unknown precision 'fp8' (fp16, bf16, tf32, fp32)
--precision bf16,bf16|gpubench scaling: --precision: bf16 given twice
--batch 0|gpubench scaling: --batch
--backend rocm|gpubench scaling: --backend is cpu or cuda
--format xml|gpubench scaling: --format is table, csv, json or md
--node a --node b|--node given twice
--gpus 1|gpubench scaling: --gpus: '1' is not a list of GPU counts from 2 to 65536 (16 at most; one GPU is base_img_s)
--gpus 8,x|--gpus: '8,x' is not a list of GPU counts
--gpus 8,|is not a list of GPU counts
--gpus 8,8|gpubench scaling: --gpus: 8 given twice
--gpus 70000|is not a list of GPU counts
--gpus 2 --gpus 4|--gpus given twice
--bogus|see 'gpubench scaling -h'
stray|gpubench scaling: unexpected argument 'stray'
EOF
    "$GB" scaling --db "$DB" --node '' >/dev/null 2>"$T/e.txt"; eq "--node ''" "$?" 2
    contains "empty node" "$T/e.txt" "--node needs a name or a pattern"
    "$GB" scaling --db '' >/dev/null 2>"$T/e.txt"; eq "--db ''" "$?" 2
    contains "empty db" "$T/e.txt" "--db needs a file name"
    ;;
*)
    fail "unknown case $case"
    ;;
esac
echo ok
