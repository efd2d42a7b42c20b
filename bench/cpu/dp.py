#!/usr/bin/python3
"""dp.py - data parallelism on CPU replicas, measured on this machine.

1. ResNet-50 training (`gpubench train --backend cpu`) with 1 replica of T
   threads against R replicas of T/R threads each, the same batch per
   replica (so R times the global batch), in interleaved rounds: images/s
   (global batch / median step), scaling efficiency (img/s at R / img/s at
   1), and from the record the time each replica spent in the gradient
   all-reduce per step and how much of it the update still waited for.
2. The `allreduce` job kind on R CPU replicas through `gpubench run` (a
   coordinator and a local agent in one process), 8 B .. MAX: busbw per size
   from the store's v_allreduce.

Writes DP_RESULTS.md next to this script. Figures from a shared 2-core VM
are noisy (the load average is recorded); they show that the machinery works
and what it costs, not what a quiet many-core machine would do.

Usage: dp.py [--gpubench PATH] [--rounds 3] [--steps 6] [--warmup 2]
             [--batch 8] [--image-size 224] [--threads 2] [--replicas 2]
             [--max-bytes 67108864] [--out DP_RESULTS.md]
Relative --gpubench and --out are the current directory's (a bare name is
looked up in PATH); both and the sizes (--max-bytes too) are checked before
the first run. Ctrl-C or SIGTERM stops the run under way with everything it
started, and removes the allreduce phase's temporary folder.
"""
import argparse
import datetime
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile

from benchutil import emit, program, run, stop_on_sigterm, writable_dir_of

HERE = os.path.dirname(os.path.abspath(__file__))


def train(gb, devices, a):
    cmd = [gb, "train", "--backend", "cpu", "--format", "json", "--devices", str(devices),
           "--threads", str(a.threads), "--batch", str(a.batch), "--image-size",
           str(a.image_size), "--steps", str(a.steps), "--warmup", str(a.warmup)]
    p = run(cmd)
    if p.returncode != 0:
        raise SystemExit("failed: %s\n%s" % (" ".join(cmd), p.stderr[-2000:]))
    return json.loads(p.stdout.strip().splitlines()[-1])


def load():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpubench", default=os.path.join(HERE, "../../build/bin/gpubench"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--max-bytes", type=int, default=64 << 20)
    ap.add_argument("--out", default=os.path.join(HERE, "DP_RESULTS.md"))
    a = ap.parse_args()
    gb = program(a.gpubench)
    if not os.access(gb, os.X_OK):
        ap.error("no gpubench at %s (build it first: ./scripts/build.sh)" % gb)
    why = writable_dir_of(a.out)
    if why:
        ap.error("--out %s: %s" % (a.out, why))
    if a.replicas < 2:
        ap.error("--replicas is at least 2 (it is compared with 1 replica)")
    if a.threads < a.replicas:
        # gpubench would give each replica one thread anyway: more threads in
        # all than --threads, and an efficiency that is not on the same cores
        ap.error("--threads %d is fewer than --replicas %d: each replica needs a thread of its own"
                 % (a.threads, a.replicas))
    if a.rounds < 1 or a.steps < 1 or a.batch < 1 or a.image_size < 1 or a.warmup < 0:
        ap.error("--rounds, --steps, --batch and --image-size must be at least 1, --warmup 0 or more")
    # the allreduce kind's limits (min_bytes is 8): checked now, not after the training rounds
    if not 8 <= a.max_bytes <= 1 << 30 or a.max_bytes % 4:
        ap.error("--max-bytes must be a multiple of 4 from 8 to %d" % (1 << 30))
    loads = [load()]
    ips = {1: [], a.replicas: []}
    reduce_ms, exposed_ms, buckets = [], [], None
    for r in range(a.rounds):
        order = [1, a.replicas] if r % 2 == 0 else [a.replicas, 1]
        for d in order:
            rec = train(gb, d, a)
            ips[d].append(rec["images_per_sec"])
            if d > 1:
                det = rec["details"]
                buckets = det.get("buckets")
                for rep in det["replicas"]:
                    reduce_ms.append(rep["allreduce"]["reduce_ms_per_step"])
                    exposed_ms.append(rep["allreduce"]["exposed_ms_per_step"])
                assert len({rep["params_fnv"] for rep in det["replicas"]}) == 1, \
                    "replicas ended with different weights"
            print("round %d, %d replica(s): %.2f img/s" % (r + 1, d, rec["images_per_sec"]),
                  flush=True)
        loads.append(load())
    one, many = statistics.median(ips[1]), statistics.median(ips[a.replicas])

    # the allreduce kind through the whole system (coordinator + agent in one process)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        spec = os.path.join(tmp, "ar.json")
        with open(spec, "w") as f:
            json.dump({"kind": "allreduce", "backend": "cpu", "gpus": a.replicas,
                       "min_bytes": 8, "max_bytes": a.max_bytes, "iters": 20, "warmup": 3}, f)
        db = os.path.join(tmp, "ar.db")
        p = run([gb, "run", "--db", db, "--spec", spec, "--timeout", "1800"])
        if p.returncode != 0:
            raise SystemExit("gpubench run (allreduce) failed:\n%s" % p.stderr[-2000:])
        con = sqlite3.connect(db)
        rows = con.execute("SELECT bytes, time_us, algbw_gbs, busbw_gbs, ok FROM v_allreduce "
                           "ORDER BY bytes").fetchall()
        con.close()
    loads.append(load())

    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    out = []
    out.append("# bench/cpu: data parallelism on CPU replicas\n")
    out.append("Run: %s, `bench/cpu/dp.py --rounds %d --steps %d --warmup %d --batch %d "
               "--image-size %d --threads %d --replicas %d --max-bytes %d`\n" %
               (datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), a.rounds, a.steps, a.warmup,
                a.batch, a.image_size, a.threads, a.replicas, a.max_bytes))
    out.append("Machine: %s, %d online cores; load average during the run: %s\n" %
               (cpu, os.cpu_count(), ", ".join(loads)))
    out.append("## ResNet-50 training, %dx%d fp32, batch %d per replica, %d threads in all\n" %
               (a.image_size, a.image_size, a.batch, a.threads))
    out.append("| replicas | threads each | global batch | images/s (median of %d) | runs |" %
               a.rounds)
    out.append("| ---: | ---: | ---: | ---: | --- |")
    out.append("| 1 | %d | %d | %.2f | %s |" % (a.threads, a.batch, one,
                                                 ", ".join("%.2f" % v for v in ips[1])))
    out.append("| %d | %d | %d | %.2f | %s |" % (a.replicas, max(1, a.threads // a.replicas),
                                                 a.batch * a.replicas, many,
                                                 ", ".join("%.2f" % v for v in ips[a.replicas])))
    out.append("")
    out.append("Scaling efficiency (img/s with %d replicas / img/s with 1, the same cores): %.2f. "
               "Gradient all-reduce per replica and step (%s buckets of 25 MB): %.0f ms in the "
               "collectives (median), of which the update still waited %.0f ms (the rest "
               "overlapped backward).\n" %
               (a.replicas, many / one, buckets, statistics.median(reduce_ms),
                statistics.median(exposed_ms)))
    out.append("## The allreduce kind on %d CPU replicas (threads, shared memory)\n" % a.replicas)
    out.append("| bytes | time (us) | algbw (GB/s) | busbw (GB/s) | checked |")
    out.append("| ---: | ---: | ---: | ---: | --- |")
    for b, t, alg, bus, ok in rows:
        out.append("| %d | %.1f | %.3f | %.3f | %s |" % (b, t, alg, bus, "ok" if ok else "WRONG"))
    out.append("")
    emit(out, a.out)


if __name__ == "__main__":
    stop_on_sigterm()
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
