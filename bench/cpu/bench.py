#!/usr/bin/python3
"""bench.py - gpubench's CPU engine against PyTorch on this machine, in one run.

For batch 8 and 32 (224x224, 2 threads, same warm-up and steps), it runs
`gpubench train` and PyTorch (torchvision resnet50: default NCHW and
channels_last, each with Debian's default glibc allocator and with the tuned
one: GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.mmap_max=0:
glibc.malloc.trim_threshold=68719476736), in rounds, the order rotated each
round so the machine's drift hits every configuration. Each run is one
process under /usr/bin/time -v (peak RSS). It prints a table of median
images/s over rounds, the ratio gpubench / PyTorch and peak memory, and writes
RESULTS.md next to this script with the date and the machine line.

With --torch-blas DIR it also runs PyTorch's tuned-allocator configurations
(NCHW and channels_last) with the libblas.so.3 in DIR (an optimized
BLAS, e.g. /usr/lib/x86_64-linux-gnu/openblas-pthread from Debian's
libopenblas0-pthread, or that package unpacked with dpkg -x): Debian's
PyTorch runs its fp32 matrix products outside oneDNN (the classifier's)
through libblas.so.3, which is netlib's reference BLAS unless an optimized
one is installed. The BLAS each PyTorch configuration loaded is written
under the table. --torch-only TEXT keeps, of the PyTorch configurations,
those whose name holds TEXT (gpubench always runs): --torch-only
"tuned" with --torch-blas times the BLAS alone.

With --precision bf16 it runs `gpubench train --precision bf16` against
PyTorch under CPU autocast to bfloat16 (the same four PyTorch configurations)
and writes BF16_RESULTS.md; both need a CPU with avx512_bf16.

Usage: bench.py [--gpubench PATH] [--precision fp32|bf16] [--rounds 3]
                [--steps 8] [--warmup 2] [--threads 2] [--batches 8,32]
                [--torch-blas DIR] [--torch-only TEXT] [--out RESULTS.md]
Relative --gpubench and --out are the current directory's (a bare name is
looked up in PATH); both, the sizes and PyTorch are checked before the first
run. Ctrl-C or SIGTERM stops the run under way with everything it started.
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

from benchutil import program, run, stop_on_sigterm, writable_dir_of

HERE = os.path.dirname(os.path.abspath(__file__))
TUNED = ("glibc.malloc.hugetlb=1:glibc.malloc.mmap_max=0:"
         "glibc.malloc.trim_threshold=68719476736")


def configs(gpubench, precision, batch, steps, warmup, threads, blas=None, only=None):
    """(name, command, GLIBC_TUNABLES, BLAS directory) of each configuration;
    only: the PyTorch ones whose name holds it."""
    common = ["--batch", str(batch), "--steps", str(steps), "--warmup", str(warmup),
              "--threads", str(threads)]
    g = [gpubench, "train", "--backend", "cpu", "--precision", precision, "--format",
         "json"] + common
    t = ["/usr/bin/python3", os.path.join(HERE, "torch_train.py")] + common
    if precision == "bf16":
        t.append("--bf16")
    c = [
        ("gpubench " + precision, g, None, None),
        ("PyTorch NCHW, default malloc", t, None, None),
        ("PyTorch NCHW, tuned malloc", t, TUNED, None),
        ("PyTorch channels_last, default malloc", t + ["--channels-last"], None, None),
        ("PyTorch channels_last, tuned malloc", t + ["--channels-last"], TUNED, None),
    ]
    if blas:  # the tuned ones again with that BLAS
        c += [(name + ", --torch-blas", cmd, tun, blas) for name, cmd, tun, _ in c
              if tun == TUNED]
    return [x for x in c if not only or x[0].startswith("gpubench") or only in x[0]]


def run_one(cmd, tunables, threads, blas=None):
    env = dict(os.environ)
    env.pop("GLIBC_TUNABLES", None)
    if tunables:
        env["GLIBC_TUNABLES"] = tunables
    env["OMP_NUM_THREADS"] = str(threads)
    if blas:
        # found before the system's libblas.so.3; an OpenBLAS's own thread
        # pool sized as PyTorch's
        env["LD_LIBRARY_PATH"] = blas + (":" + env["LD_LIBRARY_PATH"]
                                         if env.get("LD_LIBRARY_PATH") else "")
        env["OPENBLAS_NUM_THREADS"] = str(threads)
    timed = os.path.exists("/usr/bin/time")
    p = run((["/usr/bin/time", "-v"] if timed else []) + cmd, env=env)
    if p.returncode != 0:
        raise SystemExit("failed: %s\n%s" % (" ".join(cmd), p.stderr[-2000:]))
    rec = json.loads(p.stdout.strip().splitlines()[-1])
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    # without /usr/bin/time (Debian package "time"): the process's own getrusage
    rss = int(m.group(1)) * 1024 if m else rec.get("peak_rss_bytes",
                                                    rec.get("details", {}).get("peak_rss_bytes", 0))
    ips = rec["images_per_sec"]
    return ips, rss, rec


def first_touch_us(mib=256):
    """What a first write to a fresh 4 KiB page costs here, in µs: a fresh
    private mapping written once, minus writing it again (the premise of the
    Debian-default configurations: PyTorch frees and re-maps its activations
    every step). It varies by VM kind and with load."""
    import ctypes
    import mmap
    n = mib << 20
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    buf = (ctypes.c_char * n).from_buffer(m)
    addr = ctypes.addressof(buf)
    t0 = time.perf_counter()
    ctypes.memset(addr, 1, n)
    t1 = time.perf_counter()
    ctypes.memset(addr, 2, n)
    t2 = time.perf_counter()
    del buf
    m.close()
    return ((t1 - t0) - (t2 - t1)) / (n // 4096) * 1e6


def machine_line():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    import torch
    ft = statistics.median(first_touch_us() for _ in range(3))
    return "%s, %d online cores, %.0f GiB, %s %s, PyTorch %s; first touch of a 4 KiB page %.1f µs" % (
        cpu, os.cpu_count(), mem, platform.system(), platform.release(), torch.__version__, ft)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpubench", default=os.path.join(HERE, "..", "..", "build", "bin", "gpubench"))
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", default="8,32")
    ap.add_argument("--torch-blas", metavar="DIR")
    ap.add_argument("--torch-only", metavar="TEXT")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.out is None:
        a.out = os.path.join(HERE, "RESULTS.md" if a.precision == "fp32" else "BF16_RESULTS.md")
    try:
        batches = [int(b) for b in a.batches.split(",")]
    except ValueError:
        ap.error("--batches is a comma-separated list of whole numbers, e.g. 8,32")
    if a.rounds < 1 or a.steps < 1 or a.warmup < 0 or a.threads < 1 or min(batches) < 1:
        ap.error("--rounds, --steps, --threads and every batch must be at least 1, --warmup 0 or more")
    a.gpubench = program(a.gpubench)
    if not os.access(a.gpubench, os.X_OK):
        ap.error("no gpubench at %s (build it first: ./scripts/build.sh)" % a.gpubench)
    if a.torch_blas:
        a.torch_blas = os.path.abspath(a.torch_blas)
        if not os.path.exists(os.path.join(a.torch_blas, "libblas.so.3")):
            ap.error("--torch-blas %s: no libblas.so.3 there" % a.torch_blas)
    if len(configs("", a.precision, 1, 1, 0, 1, a.torch_blas, a.torch_only)) < 2:
        ap.error("--torch-only %r: no PyTorch configuration has that in its name" % a.torch_only)
    why = writable_dir_of(a.out)
    if why:
        ap.error("--out %s: %s" % (a.out, why))
    # the PyTorch side (torch_train.py, and the machine line at the end)
    if subprocess.run(["/usr/bin/python3", "-c", "import torch, torchvision"],
                      capture_output=True).returncode != 0:
        ap.error("/usr/bin/python3 cannot import torch and torchvision (the PyTorch side)")
    if a.precision == "bf16":
        with open("/proc/cpuinfo") as f:
            if "avx512_bf16" not in f.read():
                ap.error("--precision bf16: this CPU has no avx512_bf16 (gpubench refuses bf16 "
                         "without it, and PyTorch's autocast would emulate it slowly)")
    started = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    load0 = os.getloadavg()
    results = {}  # (batch, name) -> list of (ips, rss)
    versions = {}
    blas_of = {}  # configuration -> the BLAS its PyTorch loaded
    for batch in batches:
        cfgs = configs(a.gpubench, a.precision, batch, a.steps, a.warmup, a.threads, a.torch_blas,
                       a.torch_only)
        for r in range(a.rounds):
            order = cfgs[r % len(cfgs):] + cfgs[:r % len(cfgs)]
            for name, cmd, tun, blas in order:
                ips, rss, rec = run_one(cmd, tun, a.threads, blas)
                results.setdefault((batch, name), []).append((ips, rss))
                if "versions" in rec:
                    versions = rec["versions"]
                if "blas" in rec:
                    blas_of[name] = rec["blas"] or "none loaded"
                print("batch %2d round %d  %-40s %7.2f img/s  peak RSS %6.2f GiB"
                      % (batch, r + 1, name, ips, rss / 2**30), flush=True)
    lines = []
    lines.append("| batch | configuration | images/s (median of %d) | gpubench ÷ this | peak RSS |"
                 % a.rounds)
    lines.append("| ---: | --- | ---: | ---: | ---: |")
    for batch in batches:
        ours = statistics.median(v[0] for v in results[(batch, "gpubench " + a.precision)])
        for name, _, _, _ in configs(a.gpubench, a.precision, batch, a.steps, a.warmup,
                                     a.threads, a.torch_blas, a.torch_only):
            v = results[(batch, name)]
            ips = statistics.median(x[0] for x in v)
            rss = max(x[1] for x in v)
            lines.append("| %d | %s | %.2f | %s | %.2f GiB |" % (
                batch, name, ips, "—" if name.startswith("gpubench") else "%.2f×" % (ours / ips),
                rss / 2**30))
    blas_line = "; ".join("%s: %s" % (name, path) for name, path in sorted(blas_of.items()))
    table = "\n".join(lines)
    print()
    print(table)
    print("\nPyTorch's BLAS: " + (blas_line or "?"))
    with open(a.out, "w") as f:
        f.write("# bench/cpu results%s%s\n\n" % ("" if a.precision == "fp32" else ", bf16",
                                                ", PyTorch's BLAS" if a.torch_blas else ""))
        f.write("Run: %s, `bench/cpu/bench.py --precision %s --rounds %d --steps %d --warmup %d "
                "--threads %d --batches %s%s`\n\n" % (
                    started, a.precision, a.rounds, a.steps, a.warmup, a.threads, a.batches,
                    (" --torch-blas " + a.torch_blas if a.torch_blas else "") +
                    (" --torch-only '%s'" % a.torch_only if a.torch_only else "")))
        f.write("Machine: %s; gpubench oneDNN %s (%s)\n\n" % (
            machine_line(), versions.get("onednn", "?"), versions.get("isa", "?")))
        how = ("fp32" if a.precision == "fp32" else
               "bf16 (gpubench: bf16 activations, gradients and compute weights, fp32 master "
               "weights and batch-norm statistics; PyTorch: forward and loss under CPU autocast "
               "to bfloat16, fp32 weights)")
        f.write("ResNet-50 v1.5 training step (forward, loss, backward, SGD with momentum and "
                "weight decay), 224x224, %s, %d threads, synthetic data, %d warm-up and %d "
                "timed steps per run; every configuration once per round, rounds interleaved. "
                "Peak RSS from /usr/bin/time -v (the whole process).\n\n"
                % (how, a.threads, a.warmup, a.steps))
        f.write(table + "\n")
        f.write("\nThe BLAS library each PyTorch configuration loaded (its fp32 matrix products "
                "outside oneDNN, the classifier's): %s.\n" % (blas_line or "?"))
        load1 = os.getloadavg()
        f.write("\nLoad average (1, 5, 15 min) at the start %.2f %.2f %.2f, at the end %.2f %.2f "
                "%.2f. The benchmark itself keeps about %d runnable threads, so a start above ~0.3 "
                "or an end well above %d means something else ran, and the figures carry its "
                "noise.\n" % (load0 + load1 + (a.threads, a.threads)))
    print("\nwrote " + a.out)


if __name__ == "__main__":
    stop_on_sigterm()
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
