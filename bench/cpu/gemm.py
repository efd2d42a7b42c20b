#!/usr/bin/python3
"""gemm.py - the `gemm` kind on the CPU (fp32: oneDNN's sgemm; bf16: oneDNN's
matmul, fp32 accumulation) against torch.matmul on the same machine, in one
run.

For each size N (N x N by N x N) and precision it runs `gpubench worker` on a
gemm job (the very code an agent runs: untimed products until the rate
settles, at least 2 and on to 8 unless 1 s went by, then --reps timed, median)
and a PyTorch process doing the same, with the same warm-up rule, on the same
inputs (multiples of
1/8, exact in bf16), rounds interleaved and the order rotated each round. In
bf16 both multiply bf16 inputs with fp32 accumulation; ours writes C in fp32,
torch.matmul in bf16 (its one rounding at the end). It prints the median
GFLOP/s over rounds and ours / PyTorch, and writes GEMM_RESULTS.md next to
this script.

Usage: gemm.py [--gpubench PATH] [--sizes 1024,2048] [--precisions fp32,bf16]
               [--rounds 5] [--reps 10] [--threads 2] [--python /usr/bin/python3]
               [--out GEMM_RESULTS.md]
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile

from benchutil import emit, program, run, stop_on_sigterm, writable_dir_of

HERE = os.path.dirname(os.path.abspath(__file__))

TORCH = r"""
import statistics, sys, time, torch
n, prec, reps, threads = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
i = torch.arange(n * n, dtype=torch.int64)
a = (((i * 7 + 3) % 17 - 8).float() / 8).reshape(n, n)
b = (((i * 5 + 1) % 13 - 6).float() / 8).reshape(n, n)
if prec == "bf16":
    a, b = a.bfloat16(), b.bfloat16()
if sys.argv[5] == "linear":  # oneDNN's inner product: B transposed, both oneDNN tensors
    am, bm = a.to_mkldnn(), b.t().contiguous().to_mkldnn()
    f = lambda: torch._C._nn.mkldnn_linear(am, bm, None)
else:
    f = lambda: torch.matmul(a, b)
w0, done = time.perf_counter(), 0
while done < 2 or (done < 8 and time.perf_counter() - w0 < 1.0):  # gpubench's rule
    c = f()
    done += 1
ms = []
for r in range(reps):
    t0 = time.perf_counter()
    c = f()
    ms.append((time.perf_counter() - t0) * 1e3)
if c.is_mkldnn:
    c = c.to_dense()
ref = a[n // 2].double() @ b[:, n // 3].double()
assert float(c[n // 2, n // 3].double()) == float(ref.to(c.dtype).double()), "wrong product"
med = statistics.median(ms)
print("%.6f %.3f" % (med, 2.0 * n ** 3 / (med * 1e6)))
"""


def ours(gb, n, prec, reps, threads, tmp):
    job = {"job_id": 1, "attempt": 1,
           "params": {"kind": "gemm", "backend": "cpu", "m": n, "n": n, "k": n,
                      "reps": reps}}
    if prec != "fp32":
        job["params"]["precision"] = prec
    jpath, rpath = os.path.join(tmp, "job.json"), os.path.join(tmp, "rec.json")
    with open(jpath, "w") as f:
        json.dump(job, f)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    p = run([gb, "worker", "--job", jpath, "--out", rpath], env=env)
    with open(rpath) as f:
        rec = json.load(f)
    if rec.get("status", "ok") != "ok" or "gflops" not in rec:
        sys.exit("gpubench worker, %d %s: %s %s" % (n, prec, rec.get("error"), p.stderr[-500:]))
    return rec["gflops"], rec["details"]["impl"], rec["versions"].get("isa", "?")


def torch_gf(py, n, prec, reps, threads, how):
    p = run([py, "-c", TORCH, str(n), prec, str(reps), str(threads), how])
    if p.returncode != 0:
        sys.exit("torch %s, %d %s: %s" % (how, n, prec, p.stderr[-800:]))
    return float(p.stdout.split()[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpubench", default="build/bin/gpubench")
    ap.add_argument("--sizes", default="1024,2048")  # 4096: fp32 torch.matmul (netlib) ~30 s a product
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--python", default="/usr/bin/python3", help="a Python with torch")
    ap.add_argument("--out", default=os.path.join(HERE, "GEMM_RESULTS.md"))
    a = ap.parse_args()
    stop_on_sigterm()
    gb = program(a.gpubench)
    if not os.access(gb, os.X_OK):
        sys.exit("no gpubench at %s (--gpubench)" % gb)
    why = writable_dir_of(a.out)
    if why:
        sys.exit("--out: %s" % why)
    sizes = [int(s) for s in a.sizes.split(",")]
    precs = a.precisions.split(",")
    peers = ("matmul", "linear")
    configs = [(n, p, who) for n in sizes for p in precs for who in ("gpubench",) + peers]
    got = {c: [] for c in configs}
    impl = {}
    load0 = os.getloadavg()
    started = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            order = configs[r % len(configs):] + configs[:r % len(configs)]
            for c in order:
                n, p, who = c
                if who == "gpubench":
                    gf, impl[(n, p)], isa = ours(gb, n, p, a.reps, a.threads, tmp)
                else:
                    gf = torch_gf(a.python, n, p, a.reps, a.threads, who)
                got[c].append(gf)
                print("round %d  %-8s %5d %-4s %9.1f GFLOP/s" % (r + 1, who, n, p, gf),
                      file=sys.stderr)
    load1 = os.getloadavg()
    tv = run([a.python, "-c", "import torch; print(torch.__version__)"]).stdout.strip()
    lines = ["# bench/cpu gemm results", "",
             "Run: %s, `bench/cpu/gemm.py --sizes %s --precisions %s --rounds %d --reps %d "
             "--threads %d`" % (started, a.sizes, a.precisions, a.rounds, a.reps, a.threads), "",
             "Machine: %s, %d online cores, Linux %s, PyTorch %s; gpubench's oneDNN ISA %s" %
             (platform.processor() or platform.machine(), os.cpu_count(), platform.release(),
              tv, isa), "",
             "C = A·B, N×N by N×N, %d threads. gpubench: `gpubench worker` on a gemm job "
             "(untimed products until the rate settles: at least 2, on to 8 unless 1 s went by; "
             "then %d timed, median; 68 entries checked exactly after timing). PyTorch, on the "
             "same inputs, the same warm-up rule, %d timed, median, one entry checked: "
             "`torch.matmul` (fp32 goes to the BLAS PyTorch was built with: Debian's is "
             "BLAS_INFO=generic, libblas.so.3, which here is netlib's reference BLAS unless "
             "OpenBLAS is installed; bf16 goes to oneDNN, C in bf16) and "
             "`torch._C._nn.mkldnn_linear` (oneDNN's inner product on oneDNN tensors, B "
             "transposed beforehand). GFLOP/s = 2N³ ÷ median time; the median of %d rounds, "
             "interleaved." % (a.threads, a.reps, a.reps, a.rounds), "",
             "| N | precision | gpubench GFLOP/s | torch.matmul | gpubench ÷ it | "
             "mkldnn_linear | gpubench ÷ it | gpubench's implementation |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for n in sizes:
        for p in precs:
            o = statistics.median(got[(n, p, "gpubench")])
            row = "| %d | %s | %.1f |" % (n, p, o)
            for peer in peers:
                t = statistics.median(got[(n, p, peer)])
                row += " %.1f | %.2f× |" % (t, o / t)
            lines.append(row + " %s |" % impl[(n, p)])
    lines += ["", "Load average (1, 5, 15 min) at the start %.2f %.2f %.2f, at the end %.2f %.2f "
              "%.2f." % (load0 + load1), ""]
    emit(lines, a.out)


if __name__ == "__main__":
    main()
