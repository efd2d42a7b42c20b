#!/usr/bin/env bash
# it_compare.sh GPUBENCH TEST_MODELS CASE - `gpubench compare` on a real
# store that test_models fills through the store's own code (see its
# header for the runs: H100 3000/3100/2300 fp16 and 1000/1100 fp32, H100
# NVL 2600, A100-SXM4 1000/1600/1700/1800 (median 1650) and 600, A100-PCIE 1200,
# V100 750 and 300, a Xeon's CPU run 50 in fp32, all at batch 64 and
# 224 px; H100 3500 and A100-SXM4 1750 at batch 128; V100 2000 at 128 px;
# and invalid, failed, two-GPU, two-node and gemm runs that must not count;
# gemm: H100 650000 (of 600k/700k/650k) fp16 and 51000 (50k/52k) fp32,
# A100-SXM4 280000 and 19000, the Xeon 380 fp32 and 700 bf16, all 4096^3,
# A100-SXM4 250000 at 2048^3, H100 620000 at 8192x1024x4096 and 50000 at
# 64^3, and an invalid and a failed gemm that must not count).
# Cases: table csv json baseline precision errors empty store gemm by_node
# (compare --by node: each node against its model's median), and
# results (`gpubench results`' filters on the same store), peer_text
# (agents' text printed beside the tables, control characters cleaned).
# shellcheck source=tests/control/lib.sh
source "$(dirname "$0")/lib.sh" "$1" "$2"
MODELS=$2
case=${3:?case}
DB=$T/m.db
check "test_models fills the store" "$MODELS" make "$DB"

case $case in
peer_text)
    # text from agents (an invalid_reason, a GPU model's name) printed
    # beside the tables: its control characters as '?', as in the cells.
    # They reached the terminal raw (an escape sequence, a forged line)
    sqlite3 "$DB" "UPDATE results SET invalid_reason = 'evil ' || char(27) || '[31mRED' || char(10) || 'forged' WHERE valid = 0;
                   UPDATE results SET device_model = 'Tesla' || char(27) || '[2JV100' WHERE device_model = 'Tesla V100-SXM2-16GB'"
    check "results" "$GB" results --db "$DB" >"$T/r.txt"
    contains "the reason, cleaned" "$T/r.txt" "invalid: evil ?[31mRED?forged"
    check "compare" "$GB" compare --db "$DB" >"$T/c.txt"
    contains "the baseline's name, cleaned" "$T/c.txt" "rel is over Tesla?[2JV100"
    for f in r c; do
        if LC_ALL=C grep -q "$(printf '\033')" "$T/$f.txt"; then fail "an escape in $f.txt"; fi
    done
    ;;
csv)
    # every configuration its own group with its own baseline (the slowest in
    # the first precision, fp16): no batch 128 or 128 px figure in batch 64 /
    # 224's cells; medians of an odd (3000) and an even (1650) count; the CPU
    # row has no fp16 figure, so it sorts last; full digits
    check "compare csv" "$GB" compare --db "$DB" --format csv >"$T/out.csv" 2>"$T/err.log"
    same "csv, every configuration" "$T/out.csv" <<'EOF'
gpu_model,backend,batch_per_gpu,image_size,fp16_img_s,fp16_runs,fp16_rel,fp32_img_s,fp32_runs,fp32_rel,baseline
Tesla V100-SXM2-16GB,cuda,64,128,2000,1,1,,,,Tesla V100-SXM2-16GB
NVIDIA H100,cuda,64,224,3000,3,4,1050,2,3.5,Tesla V100-SXM2-16GB
NVIDIA H100 NVL,cuda,64,224,2600,1,3.466666666666667,,,,Tesla V100-SXM2-16GB
NVIDIA A100-SXM4-80GB,cuda,64,224,1650,4,2.2,600,1,2,Tesla V100-SXM2-16GB
NVIDIA A100-PCIE-40GB,cuda,64,224,1200,1,1.6,,,,Tesla V100-SXM2-16GB
Tesla V100-SXM2-16GB,cuda,64,224,750,1,1,300,1,1,Tesla V100-SXM2-16GB
Intel Xeon Gold 6338,cpu,64,224,,,,50,1,0.16666666666666666,Tesla V100-SXM2-16GB
NVIDIA H100,cuda,128,224,3500,1,2,,,,NVIDIA A100-SXM4-80GB
NVIDIA A100-SXM4-80GB,cuda,128,224,1750,1,1,,,,NVIDIA A100-SXM4-80GB
EOF
    [ -s "$T/err.log" ] && fail "stderr: $(cat "$T/err.log")"
    # one configuration
    check "compare --batch 128" "$GB" compare --db "$DB" --format csv --batch 128 >"$T/b128.csv"
    same "batch 128 only" "$T/b128.csv" <<'EOF'
gpu_model,backend,batch_per_gpu,image_size,fp16_img_s,fp16_runs,fp16_rel,baseline
NVIDIA H100,cuda,128,224,3500,1,2,NVIDIA A100-SXM4-80GB
NVIDIA A100-SXM4-80GB,cuda,128,224,1750,1,1,NVIDIA A100-SXM4-80GB
EOF
    check "compare --backend cpu" "$GB" compare --db "$DB" --format csv --backend cpu >"$T/cpu.csv"
    same "the CPU run" "$T/cpu.csv" <<'EOF'
gpu_model,backend,batch_per_gpu,image_size,fp32_img_s,fp32_runs,fp32_rel,baseline
Intel Xeon Gold 6338,cpu,64,224,50,1,1,Intel Xeon Gold 6338
EOF
    ;;
table)
    # the table: one configuration, so no batch or image size column; the
    # backend column only where backends differ; '-' for a missing figure
    check "compare table" "$GB" compare --db "$DB" --batch 64 --image-size 224 >"$T/t.txt"
    same "table" "$T/t.txt" <<'EOF'
gpu_model              backend  fp16_img_s  fp16_runs  fp16_rel  fp32_img_s  fp32_runs  fp32_rel
NVIDIA H100            cuda         3000.0          3      4.00      1050.0          2      3.50
NVIDIA H100 NVL        cuda         2600.0          1      3.47           -          -         -
NVIDIA A100-SXM4-80GB  cuda         1650.0          4      2.20       600.0          1      2.00
NVIDIA A100-PCIE-40GB  cuda         1200.0          1      1.60           -          -         -
Tesla V100-SXM2-16GB   cuda          750.0          1      1.00       300.0          1      1.00
Intel Xeon Gold 6338   cpu               -          -         -       50.00          1      0.17

rel is over Tesla V100-SXM2-16GB on cuda in the same precision
EOF
    check "compare table, GPUs" "$GB" compare --db "$DB" --backend cuda --batch 128 >"$T/t2.txt"
    same "no backend column" "$T/t2.txt" <<'EOF'
gpu_model              fp16_img_s  fp16_runs  fp16_rel
NVIDIA H100                3500.0          1      2.00
NVIDIA A100-SXM4-80GB      1750.0          1      1.00

rel is over NVIDIA A100-SXM4-80GB in the same precision
EOF
    # a slow figure keeps four significant digits: one decimal made a CPU's
    # 2.345 and 2.234 img/s (5% apart) both 2.3
    sqlite3 "$DB" "UPDATE results SET images_per_sec = 2.345 WHERE images_per_sec = 50"
    check "compare table, a slow figure" "$GB" compare --db "$DB" --backend cpu >"$T/slow.txt"
    contains "four digits" "$T/slow.txt" "2.345"
    check "results, a slow figure" "$GB" results --db "$DB" --kind resnet50 >"$T/slowr.txt"
    contains "four digits in results" "$T/slowr.txt" " 2.345 "
    sqlite3 "$DB" "UPDATE results SET images_per_sec = 50 WHERE images_per_sec = 2.345"
    # several configurations: the columns that tell them apart, a line each
    check "compare table, all" "$GB" compare --db "$DB" --backend cuda --precision fp16 >"$T/t3.txt"
    same "every configuration" "$T/t3.txt" <<'EOF'
gpu_model              batch_per_gpu  image_size  fp16_img_s  fp16_runs  fp16_rel
Tesla V100-SXM2-16GB              64         128      2000.0          1      1.00
NVIDIA H100                       64         224      3000.0          3      4.00
NVIDIA H100 NVL                   64         224      2600.0          1      3.47
NVIDIA A100-SXM4-80GB             64         224      1650.0          4      2.20
NVIDIA A100-PCIE-40GB             64         224      1200.0          1      1.60
Tesla V100-SXM2-16GB              64         224       750.0          1      1.00
NVIDIA H100                      128         224      3500.0          1      2.00
NVIDIA A100-SXM4-80GB            128         224      1750.0          1      1.00

batch 64, image size 128: rel is over Tesla V100-SXM2-16GB in the same precision
batch 64, image size 224: rel is over Tesla V100-SXM2-16GB in the same precision
batch 128, image size 224: rel is over NVIDIA A100-SXM4-80GB in the same precision
EOF
    # --format md: the table's columns and rounding as a Markdown pipe table,
    # numbers right-aligned, the line under it a paragraph
    check "compare md" "$GB" compare --db "$DB" --batch 64 --image-size 224 --format md >"$T/t.md"
    same "markdown" "$T/t.md" <<'EOF'
| gpu_model | backend | fp16_img_s | fp16_runs | fp16_rel | fp32_img_s | fp32_runs | fp32_rel |
| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |
| NVIDIA H100 | cuda | 3000.0 | 3 | 4.00 | 1050.0 | 2 | 3.50 |
| NVIDIA H100 NVL | cuda | 2600.0 | 1 | 3.47 | - | - | - |
| NVIDIA A100-SXM4-80GB | cuda | 1650.0 | 4 | 2.20 | 600.0 | 1 | 2.00 |
| NVIDIA A100-PCIE-40GB | cuda | 1200.0 | 1 | 1.60 | - | - | - |
| Tesla V100-SXM2-16GB | cuda | 750.0 | 1 | 1.00 | 300.0 | 1 | 1.00 |
| Intel Xeon Gold 6338 | cpu | - | - | - | 50.00 | 1 | 0.17 |

rel is over Tesla V100-SXM2-16GB on cuda in the same precision
EOF
    check "compare --by node markdown" "$GB" compare --db "$DB" --by node --below 0.95 --format markdown >"$T/n.md"
    same "by node, markdown" "$T/n.md" <<'EOF'
| node | gpu_model | fp16_img_s | fp16_runs | fp16_rel | fp32_img_s | fp32_runs | fp32_rel |
| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |
| node-a | NVIDIA H100 | 2650.0 | 2 | 0.883 | 1000.0 | 1 | 0.952 |

rel is each node's median over its model's median on every node (v_models), in the same precision and configuration (a model run on one node is its own median)
only the nodes under 0.95 of it in a precision shown
EOF
    # results in md: the table's columns (not csv's every one), rounded
    check "results md" "$GB" results --db "$DB" --kind gemm --node node-c --format md >"$T/r.md"
    eq "results md header" "$(head -n 2 "$T/r.md")" "| sweep_id | job_id | node | gpu_model | backend | kind | n_gpus | n_nodes | precision | batch_per_gpu | image_size | m | n | k | interconnect | images_per_sec | step_ms_median | gflops | valid | status | error |
| ---: | ---: | --- | --- | --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | --- | --- |"
    contains "results md, a row" "$T/r.md" "| node-c | NVIDIA A100-SXM4-80GB | cuda | gemm | 1 | 1 | fp16 |"
    # gpubench help lists it; help compare is compare -h
    "$GB" help >"$T/help.txt"
    contains "help lists compare" "$T/help.txt" "  compare      "
    "$GB" help compare >"$T/h.txt"; eq "help compare" "$?" 0
    contains "its usage" "$T/h.txt" "usage: gpubench compare [--db FILE] [--kind resnet50|gemm] [--baseline MODEL]"
    ;;
json)
    check "compare json" "$GB" compare --db "$DB" --format json --batch 64 --image-size 224 >"$T/out.json"
    # an array of objects, every column in each, numbers as numbers, a
    # missing figure null
    python3 - "$T/out.json" <<'EOF' || fail "json shape"
import json, sys
rows = json.load(open(sys.argv[1]))
assert isinstance(rows, list) and len(rows) == 6, rows
keys = ["gpu_model", "backend", "batch_per_gpu", "image_size", "fp16_img_s", "fp16_runs",
        "fp16_rel", "fp32_img_s", "fp32_runs", "fp32_rel", "baseline"]
for r in rows:
    assert list(r.keys()) == keys, r.keys()
h = rows[0]
assert h["gpu_model"] == "NVIDIA H100" and h["fp16_img_s"] == 3000 and h["fp16_runs"] == 3, h
assert h["fp16_rel"] == 4 and h["fp32_img_s"] == 1050 and h["fp32_rel"] == 3.5, h
assert h["batch_per_gpu"] == 64 and h["image_size"] == 224 and h["baseline"] == "Tesla V100-SXM2-16GB", h
nvl = rows[1]
assert nvl["gpu_model"] == "NVIDIA H100 NVL" and nvl["fp32_img_s"] is None, nvl
assert nvl["fp32_runs"] is None and nvl["fp32_rel"] is None, nvl
cpu = rows[5]
assert cpu["backend"] == "cpu" and cpu["fp16_img_s"] is None and cpu["fp32_img_s"] == 50, cpu
EOF
    # a baseline not run in a configuration: its rel null, the rest there
    check "compare json, baseline missing" "$GB" compare --db "$DB" --format json \
        --baseline 'NVIDIA H100' --precision fp16 >"$T/b.json"
    python3 - "$T/b.json" <<'EOF' || fail "json, a configuration without the baseline"
import json, sys
rows = json.load(open(sys.argv[1]))
v = [r for r in rows if r["image_size"] == 128]
assert len(v) == 1 and v[0]["fp16_img_s"] == 2000 and v[0]["fp16_rel"] is None, v
assert v[0]["baseline"] is None, v
b128 = [r["fp16_rel"] for r in rows if r["batch_per_gpu"] == 128]
assert b128 == [1, 0.5], b128
EOF
    ;;
baseline)
    # an exact name wins over a part of a longer one (NVIDIA H100 is in
    # NVIDIA H100 NVL); a part of one name, any case
    check "--baseline exact" "$GB" compare --db "$DB" --format csv --batch 64 --image-size 224 \
        --backend cuda --baseline 'NVIDIA H100' >"$T/h.csv"
    same "over the H100" "$T/h.csv" <<'EOF'
gpu_model,backend,batch_per_gpu,image_size,fp16_img_s,fp16_runs,fp16_rel,fp32_img_s,fp32_runs,fp32_rel,baseline
NVIDIA H100,cuda,64,224,3000,3,1,1050,2,1,NVIDIA H100
NVIDIA H100 NVL,cuda,64,224,2600,1,0.8666666666666667,,,,NVIDIA H100
NVIDIA A100-SXM4-80GB,cuda,64,224,1650,4,0.55,600,1,0.5714285714285714,NVIDIA H100
NVIDIA A100-PCIE-40GB,cuda,64,224,1200,1,0.4,,,,NVIDIA H100
Tesla V100-SXM2-16GB,cuda,64,224,750,1,0.25,300,1,0.2857142857142857,NVIDIA H100
EOF
    check "--baseline a part" "$GB" compare --db "$DB" --format csv --batch 64 --image-size 224 \
        --backend cuda --precision fp16 --baseline a100-sxm >"$T/a.csv"
    same "over the A100-SXM4" "$T/a.csv" <<'EOF'
gpu_model,backend,batch_per_gpu,image_size,fp16_img_s,fp16_runs,fp16_rel,baseline
NVIDIA H100,cuda,64,224,3000,3,1.8181818181818181,NVIDIA A100-SXM4-80GB
NVIDIA H100 NVL,cuda,64,224,2600,1,1.5757575757575757,NVIDIA A100-SXM4-80GB
NVIDIA A100-SXM4-80GB,cuda,64,224,1650,4,1,NVIDIA A100-SXM4-80GB
NVIDIA A100-PCIE-40GB,cuda,64,224,1200,1,0.7272727272727273,NVIDIA A100-SXM4-80GB
Tesla V100-SXM2-16GB,cuda,64,224,750,1,0.45454545454545453,NVIDIA A100-SXM4-80GB
EOF
    # ambiguous: both matches named, exit 1, nothing on stdout
    "$GB" compare --db "$DB" --baseline A100 >"$T/o.txt" 2>"$T/e.txt"; eq "ambiguous" "$?" 1
    contains "names the matches" "$T/e.txt" "gpubench compare: --baseline 'A100' is ambiguous: it matches 2 models: 'NVIDIA A100-PCIE-40GB', 'NVIDIA A100-SXM4-80GB' (give more of the name, or all of it)"
    [ -s "$T/o.txt" ] && fail "ambiguous: stdout $(cat "$T/o.txt")"
    "$GB" compare --db "$DB" --baseline h100 >"$T/o.txt" 2>"$T/e.txt"; eq "ambiguous h100" "$?" 1
    contains "h100 and NVL" "$T/e.txt" "it matches 2 models: 'NVIDIA H100', 'NVIDIA H100 NVL'"
    # none: the models there are named
    "$GB" compare --db "$DB" --baseline 4090 >"$T/o.txt" 2>"$T/e.txt"; eq "no match" "$?" 1
    contains "says so" "$T/e.txt" "gpubench compare: --baseline '4090' names no model compared here (models: 'Intel Xeon Gold 6338', 'NVIDIA A100-PCIE-40GB', 'NVIDIA A100-SXM4-80GB', 'NVIDIA H100', 'NVIDIA H100 NVL', 'Tesla V100-SXM2-16GB') in $DB"
    # a model left out by the filters is no baseline
    "$GB" compare --db "$DB" --backend cuda --baseline xeon >"$T/o.txt" 2>"$T/e.txt"; eq "filtered out" "$?" 1
    contains "says so" "$T/e.txt" "--baseline 'xeon' names no model compared here"
    ;;
precision)
    # the order given: sorted by fp32 (the H100 NVL and A100-PCIE, with no
    # fp32 figure, after the rest), the baseline the slowest in fp32 (the CPU)
    check "--precision fp32,fp16" "$GB" compare --db "$DB" --format csv --batch 64 \
        --image-size 224 --precision fp32,fp16 >"$T/p.csv"
    same "fp32 first" "$T/p.csv" <<'EOF'
gpu_model,backend,batch_per_gpu,image_size,fp32_img_s,fp32_runs,fp32_rel,fp16_img_s,fp16_runs,fp16_rel,baseline
NVIDIA H100,cuda,64,224,1050,2,21,3000,3,,Intel Xeon Gold 6338
NVIDIA A100-SXM4-80GB,cuda,64,224,600,1,12,1650,4,,Intel Xeon Gold 6338
Tesla V100-SXM2-16GB,cuda,64,224,300,1,6,750,1,,Intel Xeon Gold 6338
Intel Xeon Gold 6338,cpu,64,224,50,1,1,,,,Intel Xeon Gold 6338
NVIDIA H100 NVL,cuda,64,224,,,,2600,1,,Intel Xeon Gold 6338
NVIDIA A100-PCIE-40GB,cuda,64,224,,,,1200,1,,Intel Xeon Gold 6338
EOF
    # a known precision with no runs: its cells empty; the baseline is the
    # slowest in the first precision that has figures (fp16 here)
    check "--precision tf32,fp16" "$GB" compare --db "$DB" --format csv --batch 128 \
        --precision tf32,fp16 >"$T/t.csv"
    same "tf32 empty" "$T/t.csv" <<'EOF'
gpu_model,backend,batch_per_gpu,image_size,tf32_img_s,tf32_runs,tf32_rel,fp16_img_s,fp16_runs,fp16_rel,baseline
NVIDIA H100,cuda,128,224,,,,3500,1,2,NVIDIA A100-SXM4-80GB
NVIDIA A100-SXM4-80GB,cuda,128,224,,,,1750,1,1,NVIDIA A100-SXM4-80GB
EOF
    ;;
by_node)
    # a fleet's nodes: each node's median on its model over the model's median
    # on every node (v_models'). H100 fp16 at batch 64 / 224: node-a 3000 and
    # 2300 -> 2650, node-b 3100, the model 3000 (0.883, 1.033); fp32 1000 and
    # 1100 over 1050. Sorted by rel in the first precision, slowest first, each
    # configuration its own group; the model's median beside in csv and json;
    # invalid, failed, two-GPU and two-node runs count for no node
    check "compare --by node csv" "$GB" compare --db "$DB" --by node --format csv >"$T/n.csv" 2>"$T/err.log"
    same "by node, csv" "$T/n.csv" <<'EOF'
node,gpu_model,backend,batch_per_gpu,image_size,fp16_img_s,fp16_runs,fp16_rel,fp16_model_img_s,fp32_img_s,fp32_runs,fp32_rel,fp32_model_img_s
node-e,Tesla V100-SXM2-16GB,cuda,64,128,2000,1,1,2000,,,,
node-a,NVIDIA H100,cuda,64,224,2650,2,0.8833333333333333,3000,1000,1,0.9523809523809523,1050
node-c,NVIDIA A100-SXM4-80GB,cuda,64,224,1650,4,1,1650,600,1,1,600
node-e,Tesla V100-SXM2-16GB,cuda,64,224,750,1,1,750,300,1,1,300
node-g,NVIDIA H100 NVL,cuda,64,224,2600,1,1,2600,,,,
node-d,NVIDIA A100-PCIE-40GB,cuda,64,224,1200,1,1,1200,,,,
node-b,NVIDIA H100,cuda,64,224,3100,1,1.0333333333333334,3000,1100,1,1.0476190476190477,1050
node-f,Intel Xeon Gold 6338,cpu,64,224,,,,,50,1,1,50
node-a,NVIDIA H100,cuda,128,224,3500,1,1,3500,,,,
node-c,NVIDIA A100-SXM4-80GB,cuda,128,224,1750,1,1,1750,,,,
EOF
    [ -s "$T/err.log" ] && fail "stderr: $(cat "$T/err.log")"
    # the slow ones: under 0.95 in some precision shown (node-a: 0.883 in fp16)
    check "compare --by node --below 0.95" "$GB" compare --db "$DB" --by node --below 0.95 >"$T/slow.txt"
    same "the slow node, as a table" "$T/slow.txt" <<'EOF'
node    gpu_model    fp16_img_s  fp16_runs  fp16_rel  fp32_img_s  fp32_runs  fp32_rel
node-a  NVIDIA H100      2650.0          2     0.883      1000.0          1     0.952

rel is each node's median over its model's median on every node (v_models), in the same precision and configuration (a model run on one node is its own median)
only the nodes under 0.95 of it in a precision shown
EOF
    # fp32 alone: 0.952 is not under 0.95; under 0.96 it is
    check "fp32, under 0.95" "$GB" compare --db "$DB" --by node --below 0.95 --precision fp32 >"$T/o.txt"
    eq "none under 0.95 in fp32" "$(cat "$T/o.txt")" "every node is at 0.95 or more of its model's median (5 node row(s))"
    check "fp32, under 0.96" "$GB" compare --db "$DB" --by node --below 0.96 --precision fp32 --format csv >"$T/o.csv"
    same "node-a under 0.96 in fp32" "$T/o.csv" <<'EOF'
node,gpu_model,backend,batch_per_gpu,image_size,fp32_img_s,fp32_runs,fp32_rel,fp32_model_img_s
node-a,NVIDIA H100,cuda,64,224,1000,1,0.9523809523809523,1050
EOF
    # none left: csv its header, json [], the reason on stderr; exit 0
    check "none under 0.5, csv" "$GB" compare --db "$DB" --by node --below 0.5 --format csv --precision fp16 >"$T/o.csv" 2>"$T/e.txt"
    eq "csv header" "$(cat "$T/o.csv")" "node,gpu_model,backend,batch_per_gpu,image_size,fp16_img_s,fp16_runs,fp16_rel,fp16_model_img_s"
    contains "stderr says why" "$T/e.txt" "gpubench compare: every node is at 0.5 or more of its model's median (9 node row(s))"
    check "none under 0.5, json" "$GB" compare --db "$DB" --by node --below 0.5 --format json >"$T/o.json" 2>/dev/null
    eq "json []" "$(tr -d ' \n' <"$T/o.json")" "[]"
    # gemm: H100 fp16 at 4096^3, node-a 600k and 650k (the invalid 999999 and
    # the failed 1 left out) -> 625k over the model's 650k; one backend
    check "compare --by node gemm" "$GB" compare --db "$DB" --by node --kind gemm --shape 4096 --backend cuda --format csv >"$T/g.csv"
    same "gemm by node" "$T/g.csv" <<'EOF'
node,gpu_model,backend,m,n,k,fp16_gflops,fp16_runs,fp16_rel,fp16_model_gflops,fp32_gflops,fp32_runs,fp32_rel,fp32_model_gflops
node-a,NVIDIA H100,cuda,4096,4096,4096,625000,2,0.9615384615384616,650000,50000,1,0.9803921568627451,51000
node-c,NVIDIA A100-SXM4-80GB,cuda,4096,4096,4096,280000,1,1,280000,19000,1,1,19000
node-b,NVIDIA H100,cuda,4096,4096,4096,700000,1,1.0769230769230769,650000,52000,1,1.0196078431372548,51000
EOF
    # --by model is the default's output, byte for byte
    "$GB" compare --db "$DB" --format csv >"$T/def.csv"
    check "--by model" "$GB" compare --db "$DB" --by model --format csv >"$T/model.csv"
    cmp -s "$T/def.csv" "$T/model.csv" || fail "--by model differs from the default"
    # nothing yet: said as without --by node
    check "test_models empty" "$MODELS" empty "$T/e.db"
    check "by node, nothing" "$GB" compare --db "$T/e.db" --by node >"$T/o.txt"
    contains "says so" "$T/o.txt" "no one-GPU ResNet-50 results in $T/e.db yet (v_models is empty"
    # stores it cannot read: refused, said
    store_refusals compare v_models 18 --by node
    usage_errors compare --db "$DB" <<'EOF'
--by gpu|gpubench compare: --by is model or node
--by node --by model|--by given twice
--by node --baseline a100|gpubench compare: --baseline is --by model's: --by node divides each node's figure by its own model's median
--below 0.9|gpubench compare: --below is --by node's
--by node --below x|gpubench compare: --below is a ratio above 0, at most 100 (0.95: 5% or more below the model)
--by node --below 0|--below is a ratio above 0
--by node --below 101|--below is a ratio above 0
--by node --below 0.9x|--below is a ratio above 0
--by node --below nan|--below is a ratio above 0
--by node --below +0.5|--below is a ratio above 0
--by node --below 0.9 --below 0.8|--below given twice
EOF
    ;;
errors)
    # usage errors: exit 2, said on stderr, nothing on stdout
    usage_errors compare --db "$DB" <<'EOF'
--precision fp8|gpubench compare: --precision: unknown precision 'fp8' (fp16, bf16, tf32, fp32)
--precision fp16,,fp32|unknown precision ''
--precision fp16,fp16|gpubench compare: --precision: fp16 given twice
--precision fp16 --precision fp32|--precision given twice
--baseline a --baseline b|--baseline given twice
--backend rocm|gpubench compare: --backend is cpu or cuda
--batch 0|gpubench compare: --batch
--batch x|gpubench compare: --batch
--image-size 5000|gpubench compare: --image-size
--kind allreduce|gpubench compare: --kind is resnet50 or gemm
--kind gemm --batch 64|gpubench compare: --batch and --image-size are resnet50's: a gemm's configuration is its shape (--shape MxNxK)
--image-size 224 --kind gemm|--batch and --image-size are resnet50's
--shape 4096|gpubench compare: --shape is a gemm's (add --kind gemm)
--kind gemm --shape 4096x4096|gpubench compare: --shape: '4096x4096' is not MxNxK (or N for NxNxN), each a whole number from 1 to 1048576
--kind gemm --shape 0|is not MxNxK
--kind gemm --shape 2048x2048x2048x1|is not MxNxK
--kind gemm --shape 2048x-1x8|is not MxNxK
--kind gemm --shape 2048y2048y2048|is not MxNxK
--kind gemm --shape 2048x2048x|is not MxNxK
--kind gemm --shape 2097152|is not MxNxK
--kind gemm --shape 99999999999999999999|is not MxNxK
--kind gemm --kind resnet50|--kind given twice
--format xml|gpubench compare: --format is table, csv, json or md
--bogus|see 'gpubench compare -h'
stray|gpubench compare: unexpected argument 'stray'
EOF
    "$GB" compare --db "$DB" --baseline '' >/dev/null 2>"$T/e.txt"; eq "--baseline ''" "$?" 2
    contains "empty baseline" "$T/e.txt" "--baseline needs a model"
    ;;
empty)
    # a store with jobs, none that v_models counts: said plainly, exit 0
    # (as results with an empty store); csv the header, json []
    check "test_models empty" "$MODELS" empty "$T/e.db"
    check "compare, nothing" "$GB" compare --db "$T/e.db" >"$T/o.txt" 2>"$T/e.txt"
    contains "says so" "$T/o.txt" "no one-GPU ResNet-50 results in $T/e.db yet (v_models is empty"
    [ -s "$T/e.txt" ] && fail "stderr: $(cat "$T/e.txt")"
    check "compare json, nothing" "$GB" compare --db "$T/e.db" --format json >"$T/o.json" 2>"$T/e.txt"
    eq "json []" "$(tr -d ' \n' <"$T/o.json")" "[]"
    contains "stderr says so" "$T/e.txt" "gpubench compare: no one-GPU ResNet-50 results"
    check "compare csv, nothing" "$GB" compare --db "$T/e.db" --format csv --precision fp16 >"$T/o.csv" 2>/dev/null
    eq "csv header" "$(cat "$T/o.csv")" "gpu_model,backend,batch_per_gpu,image_size,fp16_img_s,fp16_runs,fp16_rel,baseline"
    # rows in the view, none under the filters: that is said
    check "compare --batch 7" "$GB" compare --db "$DB" --batch 7 >"$T/o.txt"
    contains "says the filters" "$T/o.txt" "no one-GPU ResNet-50 results in $DB match the --backend, --batch, --image-size or --precision given (v_models has 12 row(s))"
    # the same for gemm: a store with a ResNet-50 run, an invalid and a failed gemm
    check "test_models empty_gemm" "$MODELS" empty_gemm "$T/eg.db"
    check "compare gemm, nothing" "$GB" compare --db "$T/eg.db" --kind gemm >"$T/o.txt" 2>"$T/e.txt"
    contains "gemm says so" "$T/o.txt" "no gemm results in $T/eg.db yet (v_gemm_models is empty: it counts done, valid runs on one device of one node)"
    check "compare gemm csv, nothing" "$GB" compare --db "$T/eg.db" --kind gemm --format csv --precision fp16 >"$T/o.csv" 2>/dev/null
    eq "gemm csv header" "$(cat "$T/o.csv")" "gpu_model,backend,m,n,k,fp16_gflops,fp16_runs,fp16_rel,baseline"
    check "compare gemm --shape 7" "$GB" compare --db "$DB" --kind gemm --shape 7 >"$T/o.txt"
    contains "gemm says the filters" "$T/o.txt" "no gemm results in $DB match the --backend, --shape or --precision given (v_gemm_models has 9 row(s))"
    ;;
store)
    # as results: no store, a directory, not SQLite, another program's file,
    # an older store without v_models; exit 1, said
    store_refusals compare v_models 18
    store_refusals compare v_gemm_models 20 --kind gemm
    # a stored model name with an escape sequence (a record's device_model)
    # is never printed raw in the --baseline refusals (it was: a terminal
    # ran it)
    cp "$DB" "$T/esc.db"
    sqlite3 "$T/esc.db" "UPDATE results SET device_model = 'GPU ' || char(27) || '[2J X'
        WHERE device_model IS NOT NULL"
    "$GB" compare --db "$T/esc.db" --baseline zzz >/dev/null 2>"$T/e.txt"; eq "esc: unknown baseline" "$?" 1
    grep -q "$(printf '\033')" "$T/e.txt" && fail "an escape byte printed: $(cat -v "$T/e.txt")"
    contains "esc: named safely" "$T/e.txt" "'GPU ?[2J X'"
    # rows of a precision this gpubench does not know, and no filter given:
    # said so (it blamed the filters)
    cp "$DB" "$T/int8.db"
    sqlite3 "$T/int8.db" "UPDATE results SET precision = 'int8'"
    check "compare, unknown precisions" "$GB" compare --db "$T/int8.db" >"$T/o.txt" 2>&1
    contains "says why" "$T/o.txt" "have a precision this gpubench does not know (it shows fp16, bf16, tf32, fp32)"
    # read-only: the store is not written (no -wal left behind, same bytes)
    sum=$(cksum <"$DB")
    check "compare reads" "$GB" compare --db "$DB" >/dev/null
    eq "store unchanged" "$(cksum <"$DB")" "$sum"
    [ -e "$DB-wal" ] && fail "a -wal left behind"
    ;;
gemm)
    # the matrix rate, model by model: each shape its own group with its own
    # baseline (the slowest in fp16 there), m n k in order (8192x1024x4096 is
    # not 1024x8192x4096), medians of an odd (650000) and an even (51000)
    # count, the CPU's bf16 and fp32; no ResNet-50 figure in any cell
    check "compare gemm csv" "$GB" compare --db "$DB" --kind gemm --format csv >"$T/g.csv" 2>"$T/err.log"
    same "gemm csv" "$T/g.csv" <<'EOF'
gpu_model,backend,m,n,k,fp16_gflops,fp16_runs,fp16_rel,bf16_gflops,bf16_runs,bf16_rel,fp32_gflops,fp32_runs,fp32_rel,baseline
NVIDIA H100,cuda,64,64,64,50000,1,1,,,,,,,NVIDIA H100
NVIDIA A100-SXM4-80GB,cuda,2048,2048,2048,250000,1,1,,,,,,,NVIDIA A100-SXM4-80GB
NVIDIA H100,cuda,4096,4096,4096,650000,3,2.3214285714285716,,,,51000,2,2.6842105263157894,NVIDIA A100-SXM4-80GB
NVIDIA A100-SXM4-80GB,cuda,4096,4096,4096,280000,1,1,,,,19000,1,1,NVIDIA A100-SXM4-80GB
Intel Xeon Gold 6338,cpu,4096,4096,4096,,,,700,1,,380,1,0.02,NVIDIA A100-SXM4-80GB
NVIDIA H100,cuda,8192,1024,4096,620000,1,1,,,,,,,NVIDIA H100
EOF
    [ -s "$T/err.log" ] && fail "stderr: $(cat "$T/err.log")"
    # one shape, as a table: no m n k columns (one shape), rel over the CPU
    # in fp32 when it is named (a part of its name)
    check "compare gemm table" "$GB" compare --db "$DB" --kind gemm --shape 4096 \
        --precision fp32,bf16 --baseline xeon >"$T/g.txt"
    same "gemm table" "$T/g.txt" <<'EOF'
gpu_model              backend  fp32_gflops  fp32_runs  fp32_rel  bf16_gflops  bf16_runs  bf16_rel
NVIDIA H100            cuda         51000.0          2    134.21            -          -         -
NVIDIA A100-SXM4-80GB  cuda         19000.0          1     50.00            -          -         -
Intel Xeon Gold 6338   cpu            380.0          1      1.00        700.0          1      1.00

rel is over Intel Xeon Gold 6338 on cpu in the same precision
EOF
    # a non-square shape, and the same backend filter as resnet50
    check "compare gemm MxNxK" "$GB" compare --db "$DB" --kind gemm --shape 8192x1024x4096 \
        --format csv >"$T/s.csv"
    same "8192x1024x4096" "$T/s.csv" <<'EOF'
gpu_model,backend,m,n,k,fp16_gflops,fp16_runs,fp16_rel,baseline
NVIDIA H100,cuda,8192,1024,4096,620000,1,1,NVIDIA H100
EOF
    check "compare gemm --backend cpu" "$GB" compare --db "$DB" --kind gemm --backend cpu \
        --format json >"$T/c.json"
    python3 - "$T/c.json" <<'EOF' || fail "gemm json"
import json, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == 1, rows
r = rows[0]
assert list(r.keys()) == ["gpu_model", "backend", "m", "n", "k", "bf16_gflops", "bf16_runs",
                          "bf16_rel", "fp32_gflops", "fp32_runs", "fp32_rel", "baseline"], r.keys()
assert r["m"] == r["n"] == r["k"] == 4096 and r["bf16_gflops"] == 700 and r["fp32_rel"] == 1, r
EOF
    # several shapes in a table: a line each saying what rel is over
    check "compare gemm, every shape" "$GB" compare --db "$DB" --kind gemm --backend cuda \
        --precision fp16 >"$T/a.txt"
    contains "shape line" "$T/a.txt" "shape 8192x1024x4096: rel is over NVIDIA H100 in the same precision"
    contains "shape line 2" "$T/a.txt" "shape 4096x4096x4096: rel is over NVIDIA A100-SXM4-80GB in the same precision"
    # --kind resnet50 is the default: the same output
    check "compare --kind resnet50" "$GB" compare --db "$DB" --kind resnet50 --format csv >"$T/r1.csv"
    check "compare" "$GB" compare --db "$DB" --format csv >"$T/r2.csv"
    cmp -s "$T/r1.csv" "$T/r2.csv" || fail "--kind resnet50 differs from the default"
    # an older store (0020) has no v_gemm_models: said as for v_models
    cp "$DB" "$T/old.db"
    sqlite3 "$T/old.db" "DROP VIEW v_gemm_models; PRAGMA user_version = 20"
    "$GB" compare --db "$T/old.db" --kind gemm >/dev/null 2>"$T/e.txt"; eq "older store" "$?" 1
    contains "older store" "$T/e.txt" "has schema version 20, this gpubench reads"
    ;;
results)
    # gpubench results' filters on the same store: kinds, job states, a
    # node's name (any rank's: job 7 ran on node-b and, as rank 1, node-e),
    # the last N; each against the store read directly, and a count
    sqlite3 "$DB" "INSERT INTO ranks (job_id, attempt, rank, agent_id, state, placed_at) VALUES
        (7, 1, 0, 'agent-b', 'done', 't'), (7, 1, 1, 'agent-e', 'done', 't')"
    ids() { "$GB" results --db "$DB" --format csv "$@" | python3 -c '
import csv, sys
print(" ".join(r["job_id"] for r in csv.DictReader(sys.stdin)))'; }
    sql() { sqlite3 "$DB" "SELECT group_concat(job_id, ' ') FROM (SELECT job_id FROM v_results WHERE $1 ORDER BY job_id)"; }
    eq "every job" "$(ids | wc -w)" "$(sqlite3 "$DB" "SELECT count(*) FROM v_results")"
    eq "--kind gemm" "$(ids --kind gemm)" "$(sql "kind = 'gemm'")"
    eq "gemm jobs" "$(ids --kind gemm | wc -w)" 14
    eq "--kind gemm,resnet50" "$(ids --kind gemm,resnet50 | wc -w)" "$(ids | wc -w)"
    eq "--status failed" "$(ids --status failed)" "$(sql "status = 'failed'")"
    eq "failed jobs" "$(ids --status failed | wc -w)" 2
    eq "--node 'node-[ab]'" "$(ids --node 'node-[ab]')" "$(sql "node IN ('node-a', 'node-b')")"
    eq "--node node-e: its own and rank 1 of job 7" "$(ids --node node-e)" "$(sql "node = 'node-e' OR job_id = 7")"
    eq "--node is case-sensitive" "$(ids --node NODE-E)" ""
    # the shell's pattern syntax (fnmatch, as a spec's nodes): [!..] negates;
    # SQLite's GLOB wanted [^..] and matched nothing with [!..]
    eq "--node 'node-[!ab]'" "$(ids --node 'node-[!ab]')" "$(sql "node NOT IN ('node-a', 'node-b') OR job_id = 7")"
    eq "--node 'node-\\e'" "$(ids --node 'node-\e')" "$(ids --node node-e)"
    eq "--last 3" "$(ids --last 3)" "34 35 36"
    eq "--kind resnet50 --status failed --node node-a" "$(ids --kind resnet50 --status failed --node node-a)" "5"
    eq "--last 2 of the filtered" "$(ids --kind resnet50 --last 2)" "22 23"  # jobs 24 on are gemms
    eq "--sweep 1 --kind sleep" "$(ids --sweep 1 --kind sleep)" ""
    # the table: the same rows, said invalid under it as before
    check "results table, filtered" "$GB" results --db "$DB" --kind gemm --status "done" --node node-a >"$T/r.txt"
    eq "table rows" "$(grep -c ' gemm ' "$T/r.txt")" "$(sqlite3 "$DB" "SELECT count(*) FROM v_results WHERE kind = 'gemm' AND status = 'done' AND node = 'node-a'")"
    contains "its invalid one said" "$T/r.txt" "invalid: "
    # usage errors: exit 2, said, nothing on stdout
    usage_errors results --db "$DB" <<'EOF'
--kind train|gpubench results: --kind: unknown 'train' (resnet50, gemm, allreduce, sleep)
--kind gemm,,sleep|--kind: unknown ''
--kind gemm,gemm|gpubench results: --kind: gemm given twice
--status running|gpubench results: --status: unknown 'running' (done, failed, cancelled)
--status done --status failed|--status given twice
--last 0|gpubench results: --last
--last x|gpubench results: --last
--node|gpubench results: option '--node' requires an argument
EOF
    "$GB" results --db "$DB" --node '' >/dev/null 2>"$T/e.txt"; eq "--node ''" "$?" 2
    contains "empty node" "$T/e.txt" "--node needs a name or a pattern"
    ;;
*)
    fail "unknown case $case"
    ;;
esac
exit 0
