#!/usr/bin/env python3
"""torch_gemm.py - the PyTorch side of bench/gpu/run.sh's gemm section:
C = A B for N x N fp32 matrices on one GPU with TF32 off, as gpubench's gemm
kind runs them (cuBLAS with pedantic fp32 math): inputs uniform in [-1, 1)
on the device, 3 warm-up products, then --reps products, each timed between
two CUDA events; after timing, 16 entries of C are checked against float64
dot products (|err| <= 2 N 2^-24 sum|a b|, the bound gpubench's check uses).
Prints one JSON line: ms_median, ms_p90 (nearest rank), gflops (2 N^3 /
median), versions; exits 1 when the check fails.
"""
import argparse
import json
import math
import statistics
import sys

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=30)
    a = ap.parse_args()
    if a.size < 1 or a.reps < 1:
        ap.error("--size and --reps must be at least 1")
    torch.backends.cuda.matmul.allow_tf32 = False
    n = a.size
    g = torch.Generator(device="cuda").manual_seed(7)
    x = torch.rand(n, n, device="cuda", generator=g) * 2 - 1
    y = torch.rand(n, n, device="cuda", generator=g) * 2 - 1
    c = torch.empty(n, n, device="cuda")
    times = []
    for r in range(-3, a.reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        torch.matmul(x, y, out=c)
        e1.record()
        e1.synchronize()
        if r >= 0:
            times.append(e0.elapsed_time(e1))
    med = statistics.median(times)
    p90 = sorted(times)[max(0, math.ceil(0.9 * len(times)) - 1)]
    ok = True
    idx = torch.randint(0, n, (16, 2), generator=torch.Generator().manual_seed(9))
    for i, j in idx.tolist():
        p = x[i, :].double() * y[:, j].double()
        ref, mag = p.sum().item(), p.abs().sum().item()
        if abs(c[i, j].item() - ref) > 2 * n * 2.0 ** -24 * mag + 1e-30:
            print(f"C[{i},{j}] = {c[i, j].item()!r}, float64 gives {ref!r}", file=sys.stderr)
            ok = False
    print(json.dumps({
        "framework": "pytorch", "kind": "gemm", "precision": "fp32", "m": n, "n": n, "k": n,
        "reps": a.reps, "ms_median": med, "ms_p90": p90, "gflops": 2.0 * n ** 3 / (med * 1e6),
        "checked": ok, "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "cuda": torch.version.cuda}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
