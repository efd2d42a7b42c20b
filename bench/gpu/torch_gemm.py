#!/usr/bin/env python3
"""torch_gemm.py - the PyTorch side of bench/gpu/run.sh's gemm section:
C = A B for N x N matrices on one GPU, as gpubench's gemm kind runs them:
--precision fp32 (TF32 off), tf32 (fp32 data, TF32 matmul), fp16 or bf16
(16-bit A, B and C, reduced-precision reductions off, so cuBLAS accumulates
in fp32 as ours does; ours writes C in fp32). Inputs uniform in [-1, 1) on
the device, 3 warm-up products, then --reps products, each timed between two
CUDA events; after timing, 16 entries of C are checked against float64 dot
products of the inputs as stored: |err| <= (2 N 2^-24, 4 N 2^-24 where
tensor cores add, + 2^-9 for tf32's inputs, + C's own rounding for 16-bit C)
sum|a b|, the bounds gpubench's check uses. Prints one JSON line: ms_median,
ms_p90 (nearest rank), gflops (2 N^3 / median), versions; exits 1 when the
check fails.
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
    ap.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "fp16", "bf16"])
    a = ap.parse_args()
    if a.size < 1 or a.reps < 1:
        ap.error("--size and --reps must be at least 1")
    p = a.precision
    torch.backends.cuda.matmul.allow_tf32 = p == "tf32"
    for flag in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        try:  # (a PyTorch without the flag has no such reduction to turn off)
            setattr(torch.backends.cuda.matmul, flag, False)
        except (AssertionError, AttributeError):
            pass
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(p, torch.float32)
    n = a.size
    g = torch.Generator(device="cuda").manual_seed(7)
    x = (torch.rand(n, n, device="cuda", generator=g) * 2 - 1).to(dt)
    y = (torch.rand(n, n, device="cuda", generator=g) * 2 - 1).to(dt)
    c = torch.empty(n, n, device="cuda", dtype=dt)
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
        prod = x[i, :].double() * y[:, j].double()
        ref, mag = prod.sum().item(), prod.abs().sum().item()
        rel = (2 if p == "fp32" else 4) * n * 2.0 ** -24 + (2.0 ** -9 if p == "tf32" else 0)
        rel += {"fp16": 2.0 ** -11, "bf16": 2.0 ** -8}.get(p, 0)
        if abs(c[i, j].item() - ref) > rel * mag + 1e-30:
            print(f"C[{i},{j}] = {c[i, j].item()!r}, float64 gives {ref!r}", file=sys.stderr)
            ok = False
    print(json.dumps({
        "framework": "pytorch", "kind": "gemm", "precision": p, "m": n, "n": n, "k": n,
        "reps": a.reps, "ms_median": med, "ms_p90": p90, "gflops": 2.0 * n ** 3 / (med * 1e6),
        "checked": ok, "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "cuda": torch.version.cuda}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
