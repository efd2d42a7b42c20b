#!/usr/bin/env python3
"""nccl_tests_cmp.py - gpubench's allreduce kind against nccl-tests' all_reduce_perf
on the same GPUs, size by size (issue 5's target: busbw within 5% of nccl-tests).

    nccl_tests_cmp.py --nccl-tests all_reduce_perf.out --ours allreduce.json [--tolerance 0.05]

--nccl-tests: what all_reduce_perf printed (float sum, in place and out of
place; the in-place busbw is compared, as gpubench's kind is in place).
Its columns are found by the table's header, so versions with and without
the "root" column, "error" or "#wrong", and a trailing timestamp all read.
--ours: gb_cuda_bench --allreduce's JSON line (sizes[].bytes, busbw_gbs, ok).

Prints a table (bytes, busbw of each, ratio) and a last line of JSON:
devices, sizes compared, peak busbw of each and their ratio, the median
ratio over messages of 64 MiB and more (where bandwidth, not latency,
decides), and the verdict: "within" (peak and large-message ratios at
least 1 - tolerance), "below", or "n/a" on one GPU (busbw is 0 by its
definition, 2(n-1)/n, so there is nothing to compare). Exit 0 when it read
both (whatever the verdict), 1 when nccl-tests reported wrong values, 2
when an input could not be read.
"""
import argparse
import json
import statistics
import sys

LARGE = 64 << 20


def parse_nccl_tests(text):
    """{bytes: (in-place busbw GB/s, wrong count or None)}, avg busbw or None."""
    cols = None
    rows = {}
    avg = None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#"):
            body = s.lstrip("#").split()
            if "size" in body and body.count("busbw") >= 2:
                cols = body
            if "Avg bus bandwidth" in s:
                try:
                    avg = float(s.split(":", 1)[1].split()[0])
                except (IndexError, ValueError):
                    pass
            continue
        if cols is None or not s:
            continue
        tok = s.split()
        if len(tok) < len(cols) or not tok[0].isdigit():
            continue
        bw_i = [i for i, c in enumerate(cols) if c == "busbw"][-1]
        try:
            size = int(tok[cols.index("size")])
            busbw = float(tok[bw_i])
        except ValueError:
            continue
        wrong = None
        if bw_i + 1 < len(cols) and cols[bw_i + 1] in ("#wrong", "error"):
            try:
                wrong = float(tok[bw_i + 1])
            except ValueError:  # N/A: run without the check (-c 0)
                wrong = None
        rows[size] = (busbw, wrong)
    if cols is None:
        raise ValueError("no all_reduce_perf table header (a '#' line with size and busbw)")
    if not rows:
        raise ValueError("no rows under all_reduce_perf's table header")
    return rows, avg


def parse_ours(text):
    lines = [l for l in text.splitlines() if l.startswith("{")]
    if not lines:
        raise ValueError("no JSON line")
    d = json.loads(lines[-1])
    if d.get("kind") != "allreduce" or not isinstance(d.get("sizes"), list):
        raise ValueError("not an allreduce record (kind, sizes)")
    sizes = {int(x["bytes"]): (float(x["busbw_gbs"]), bool(x.get("ok"))) for x in d["sizes"]}
    return sizes, int(d.get("devices", 0))


def compare(theirs, ours, devices, tol):
    both = sorted(set(theirs) & set(ours))
    table = []
    for b in both:
        t, o = theirs[b][0], ours[b][0]
        table.append((b, o, t, o / t if t > 0 else None))
    peak_o = max((ours[b][0] for b in both), default=0.0)
    peak_t = max((theirs[b][0] for b in both), default=0.0)
    large = [r for (b, _o, _t, r) in table if b >= LARGE and r is not None]
    out = {
        "devices": devices,
        "sizes_compared": len(both),
        "peak_busbw_gbs": {"gpubench": peak_o, "nccl_tests": peak_t},
        "peak_ratio": round(peak_o / peak_t, 4) if peak_t > 0 else None,
        "large_median_ratio": round(statistics.median(large), 4) if large else None,
        "tolerance": tol,
    }
    if devices < 2 or peak_t <= 0:
        out["verdict"] = "n/a"
        out["why"] = "one GPU: busbw is 0 by definition" if devices < 2 else "nccl-tests busbw 0"
    else:
        ok = out["peak_ratio"] >= 1 - tol and (
            out["large_median_ratio"] is None or out["large_median_ratio"] >= 1 - tol)
        out["verdict"] = "within" if ok else "below"
    return table, out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nccl-tests", required=True)
    ap.add_argument("--ours", required=True)
    ap.add_argument("--tolerance", type=float, default=0.05)
    a = ap.parse_args(argv)
    try:
        with open(a.nccl_tests) as f:
            theirs, avg = parse_nccl_tests(f.read())
    except (OSError, ValueError) as e:
        print(f"nccl_tests_cmp: {a.nccl_tests}: {e}", file=sys.stderr)
        return 2
    try:
        with open(a.ours) as f:
            ours, devices = parse_ours(f.read())
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"nccl_tests_cmp: {a.ours}: {e}", file=sys.stderr)
        return 2
    table, out = compare(theirs, ours, devices, a.tolerance)
    out["nccl_tests_avg_busbw_gbs"] = avg
    wrong = sorted(b for b, (_bw, w) in theirs.items() if w)
    out["nccl_tests_wrong_sizes"] = wrong
    out["gpubench_unchecked_sizes"] = sorted(b for b, (_bw, ok) in ours.items() if not ok)
    print("| bytes | gpubench busbw GB/s | nccl-tests busbw GB/s | ratio |")
    print("| ---: | ---: | ---: | ---: |")
    for b, o, t, r in table:
        print(f"| {b} | {o:.2f} | {t:.2f} | {'-' if r is None else f'{r:.3f}'} |")
    print(json.dumps(out))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
