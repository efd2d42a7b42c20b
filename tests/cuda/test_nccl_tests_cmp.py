#!/usr/bin/env python3
"""test_nccl_tests_cmp.py (CPU, CI) - bench/gpu/nccl_tests_cmp.py, which puts
gpubench's allreduce kind beside nccl-tests' all_reduce_perf on a GPU machine.

The all_reduce_perf tables below are laid out as nccl-tests prints them
(its writeResultHeader/writeBenchmarkLineBody formats: with and without the
"root" column, "#wrong" or the older "error", and a trailing timestamp);
the figures are made up for the test. Checked: the in-place busbw is the
one read (not out of place), sizes are matched, the peak and large-message
ratios and the verdict (within, below, n/a on one GPU), nccl-tests' wrong
values (exit 1), -c 0's N/A, and inputs that cannot be read (exit 2).
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "bench", "gpu", "nccl_tests_cmp.py")
MiB = 1 << 20
SIZES = [8, 1024, MiB, 16 * MiB, 64 * MiB, 256 * MiB, 1024 * MiB]
# in-place busbw per size (GB/s); out of place is made 20% lower, so
# reading the wrong column shows
INPLACE = {8: 0.0, 1024: 0.1, MiB: 40.0, 16 * MiB: 180.0, 64 * MiB: 300.0,
           256 * MiB: 350.0, 1024 * MiB: 360.0}

FAILS = 0


def check(name, cond, detail=""):
    global FAILS
    if not cond:
        FAILS += 1
        print(f"FAIL {name} {detail}")
    else:
        print(f"ok   {name}")


def table(style="new", wrong=None, na=False, stamp=False):
    wrong = wrong or {}
    out = ["# nThread 1 nGpus 2 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20",
           "#",
           "# Using devices",
           "#  Rank  0 Group  0 Pid   4242 on      node1 device  0 [0x18] NVIDIA H200",
           "#  Rank  1 Group  0 Pid   4242 on      node1 device  1 [0x2a] NVIDIA H200",
           "#"]
    if style == "new":
        out.append("#                                                              out-of-place"
                   "                       in-place          ")
        out.append("#       size         count      type   redop    root     time   algbw   busbw"
                   " #wrong     time   algbw   busbw #wrong" + ("          timestamp" if stamp else ""))
        out.append("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
                   "            (us)  (GB/s)  (GB/s)       ")
    else:  # before the root column, "error" for the check
        out.append("#                                                       out-of-place"
                   "                       in-place")
        out.append("#       size         count      type   redop     time   algbw   busbw  error"
                   "     time   algbw   busbw  error")
        out.append("#        (B)    (elements)                       (us)  (GB/s)  (GB/s)"
                   "            (us)  (GB/s)  (GB/s)")
    for b in SIZES:
        bi = INPLACE[b]
        bo = bi * 0.8
        t = 10.0 + b / 1e3
        w = "N/A" if na else str(wrong.get(b, 0))
        root = "      -1" if style == "new" else ""
        line = (f"{b:12d}  {b // 4:12d}     float     sum{root}  {t:7.2f}  {bo * 0.5:6.2f}  {bo:6.2f}"
                f"  {w:>6}  {t:7.2f}  {bi * 0.5:6.2f}  {bi:6.2f}  {w:>6}")
        if stamp:
            line += "  2026-12-04 22:00:00"
        out.append(line)
    out.append("# Out of bounds values : 0 OK")
    out.append("# Avg bus bandwidth    : 154.3 ")
    out.append("#")
    return "\n".join(out) + "\n"


def ours(devices=2, scale=1.0, large_scale=None, drop=()):
    sizes = []
    for b in SIZES:
        if b in drop:
            continue
        s = large_scale if (large_scale is not None and b >= 64 * MiB) else scale
        sizes.append({"bytes": b, "count": b // 4, "time_us": 1.0, "algbw_gbs": 1.0,
                      "busbw_gbs": INPLACE[b] * s * (devices > 1), "ok": True})
    return json.dumps({"framework": "gpubench", "kind": "allreduce", "devices": devices,
                       "sizes": sizes}) + "\n"


def run(tmp, theirs_text, ours_text, *extra):
    a = os.path.join(tmp, "nt.out")
    o = os.path.join(tmp, "ours.json")
    with open(a, "w") as f:
        f.write(theirs_text)
    with open(o, "w") as f:
        f.write(ours_text)
    p = subprocess.run([sys.executable, SCRIPT, "--nccl-tests", a, "--ours", o, *extra],
                       capture_output=True, text=True)
    last = [l for l in p.stdout.splitlines() if l.startswith("{")]
    return p.returncode, (json.loads(last[-1]) if last else None), p.stdout, p.stderr


def main():
    with tempfile.TemporaryDirectory() as tmp:
        # the same figures: within, ratios 1, the in-place column read
        for style, stamp in (("new", False), ("old", False), ("new", True)):
            rc, j, out, err = run(tmp, table(style, stamp=stamp), ours())
            tag = f"{style}{' +timestamp' if stamp else ''}"
            check(f"{tag}: exit 0", rc == 0, err)
            check(f"{tag}: every size compared", j and j["sizes_compared"] == len(SIZES), out)
            check(f"{tag}: in-place peak read", j and j["peak_busbw_gbs"]["nccl_tests"] == 360.0, out)
            check(f"{tag}: ratios 1", j and j["peak_ratio"] == 1.0 and j["large_median_ratio"] == 1.0, out)
            check(f"{tag}: within", j and j["verdict"] == "within", out)
            check(f"{tag}: avg line read", j and j["nccl_tests_avg_busbw_gbs"] == 154.3, out)
        # 3% slower: still within 5%; 10% slower on large messages: below
        rc, j, out, _ = run(tmp, table(), ours(scale=0.97))
        check("3% below is within 5%", j and j["verdict"] == "within" and abs(j["peak_ratio"] - 0.97) < 1e-3, out)
        rc, j, out, _ = run(tmp, table(), ours(large_scale=0.9))
        check("10% below on large messages is below", j and j["verdict"] == "below"
              and abs(j["large_median_ratio"] - 0.9) < 1e-3, out)
        rc, j, out, _ = run(tmp, table(), ours(large_scale=0.9), "--tolerance", "0.15")
        check("a wider tolerance takes it", j and j["verdict"] == "within", out)
        # only the sizes both have
        rc, j, out, _ = run(tmp, table(), ours(drop=(8, 1024)))
        check("sizes matched", j and j["sizes_compared"] == len(SIZES) - 2, out)
        # one GPU: busbw 0 in both by definition
        rc, j, out, _ = run(tmp, table(), ours(devices=1))
        check("one GPU: n/a, exit 0", rc == 0 and j and j["verdict"] == "n/a", out)
        # nccl-tests found wrong values: exit 1, the size named
        rc, j, out, _ = run(tmp, table(wrong={MiB: 3}), ours())
        check("wrong values: exit 1", rc == 1 and j and j["nccl_tests_wrong_sizes"] == [MiB], out)
        # run without the check (-c 0): N/A read as unknown, not wrong
        rc, j, out, _ = run(tmp, table(na=True), ours())
        check("N/A is not wrong", rc == 0 and j and j["nccl_tests_wrong_sizes"] == [], out)
        # unreadable inputs: exit 2 with the file named
        rc, j, out, err = run(tmp, "all_reduce_perf: no CUDA-capable device\n", ours())
        check("no table: exit 2", rc == 2 and "no all_reduce_perf table header" in err, err)
        rc, j, out, err = run(tmp, table(), '{"kind": "resnet50"}\n')
        check("not an allreduce record: exit 2", rc == 2 and "not an allreduce record" in err, err)
        hdr_only = "\n".join(l for l in table().splitlines() if l.startswith("#")) + "\n"
        rc, j, out, err = run(tmp, hdr_only, ours())
        check("header, no rows: exit 2", rc == 2 and "no rows" in err, err)
    print(f"{FAILS} failed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
