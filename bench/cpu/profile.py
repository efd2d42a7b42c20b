#!/usr/bin/env python3
"""profile.py - where a CPU training step's time goes, by oneDNN primitive.

Runs `gpubench train` once with ONEDNN_VERBOSE=1 (oneDNN then times and
prints every primitive it executes), cuts the log into steps at the
stem convolution (once a step, its first), keeps the steps after the warm-up, and
prints a table: milliseconds per step and share of the step for each kind of
primitive (convolution 1x1 / 3x3 / 7x7 by pass, batch norm, the residual
add, ReLU backward, pooling, the classifier, reorders). What oneDNN did not
run is the last row, "ours": the step's mean wall time (from gpubench's own
record) less the primitives' sum: SGD, the loss, our AVX2 Winograd where it
runs, and the glue. Timing every primitive slows the step a little: the
table says by how much against a run without it.

    python3 bench/cpu/profile.py --precision bf16 --batch 16
"""
import argparse
import collections
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchutil  # noqa: E402

TUNABLES = ("glibc.malloc.hugetlb=1:glibc.malloc.mmap_max=0:"
            "glibc.malloc.trim_threshold=68719476736")


def train(gpubench, args, verbose):
    cmd = [gpubench, "train", "--backend", "cpu", "--precision", args.precision,
           "--batch", str(args.batch), "--image-size", str(args.image_size),
           "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--threads", str(args.threads), "--format", "json"]
    env = dict(os.environ, GLIBC_TUNABLES=TUNABLES)
    env.pop("ONEDNN_VERBOSE", None)
    env.pop("DNNL_VERBOSE", None)
    if verbose:
        env["ONEDNN_VERBOSE"] = "1"
    p = benchutil.run(cmd, env=env)
    if p.returncode != 0:
        sys.exit("gpubench train failed (%d): %s" % (p.returncode, p.stderr.strip()[-800:]))
    # the record is the last line that is a JSON object; verbose lines are not
    rec = None
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            try:
                rec = json.loads(line)
            except ValueError:
                pass
    if rec is None:
        sys.exit("no result record in gpubench's output")
    return rec, p.stdout + p.stderr


def kind_of(prim, impl, prop, shape):
    """The row a primitive execution is counted under."""
    if prim == "convolution":
        k = re.search(r"kh(\d+)", shape)
        s = re.search(r"sh(\d+)", shape)
        size = "%sx%s" % (k.group(1), k.group(1)) if k else "?"
        stride = "/%s" % s.group(1) if s else ""
        algo = "winograd" if "wino" in impl else "direct"
        return "conv %s%s %s, %s" % (size, stride, algo, prop.replace("_training", ""))
    if prim == "batch_normalization":
        return "batch norm, %s" % prop.replace("_training", "")
    if prim == "binary":
        return "residual add (binary)"
    if prim == "eltwise":
        return "ReLU, %s" % prop.replace("_training", "")
    if prim.startswith("pooling"):
        return "pooling, %s" % prop.replace("_training", "")
    if prim == "inner_product":
        return "classifier (inner product), %s" % prop.replace("_training", "")
    if prim == "reorder":
        return "reorder (weight copies, layouts)"
    return "%s, %s" % (prim, prop)


def parse(log, warmup, steps):
    """{row: ms per step} over the `steps` whole steps after the warm-up."""
    execs = []
    for line in log.splitlines():
        if not line.startswith("onednn_verbose,exec,cpu,"):
            continue
        f = line.split(",")
        try:
            ms = float(f[-1])
        except ValueError:
            continue
        execs.append((f[3], f[4], f[5], f[-2], ms))
    # a step's first primitive is the stem's forward (the only 7x7): the
    # weights' set-up reorders come before the first one, and the step's
    # last primitive is the stem's backward, so [stem, next stem) is one
    # whole step, lined up with the step gpubench times (a window cut
    # elsewhere, at the classifier, holds the backward of one step and the
    # forward of the next, and adds up to more than either when the host
    # slows one of them)
    marks = [i for i, e in enumerate(execs)
             if e[0] == "convolution" and e[2] == "forward_training" and "kh7" in e[3]]
    if len(marks) != warmup + steps:
        sys.exit("expected %d stem convolutions (one a step), found %d: is this oneDNN's "
                 "verbose format?" % (warmup + steps, len(marks)))
    bounds = marks[warmup:] + [len(execs)]
    rows = collections.defaultdict(float)
    counts = collections.defaultdict(int)
    for prim, impl, prop, shape, ms in execs[bounds[0]:bounds[-1]]:
        k = kind_of(prim, impl, prop, shape)
        rows[k] += ms / steps
        counts[k] += 1
    return rows, {k: counts[k] / steps for k in counts}


def main():
    benchutil.stop_on_sigterm()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpubench", default="build/bin/gpubench")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    if args.warmup < 1 or args.steps < 1:
        sys.exit("--warmup and --steps must be at least 1")
    gpubench = benchutil.program(args.gpubench)
    plain, _ = train(gpubench, args, verbose=False)
    rec, log = train(gpubench, args, verbose=True)
    rows, counts = parse(log, args.warmup, args.steps)
    # the rows are means over the timed steps, so the step is too
    wall = statistics.mean(rec["step_ms_samples"])
    wall_plain = statistics.mean(plain["step_ms_samples"])
    total = sum(rows.values())
    ours = max(wall - total, 0.0)
    versions = rec.get("versions", {})
    print("resnet50 cpu %s, batch %d, %dx%d, %d threads; %s, oneDNN %s, ISA %s" % (
        args.precision, args.batch, args.image_size, args.image_size, rec.get("threads", 0),
        rec.get("device_model", "?"), versions.get("onednn", "?"), versions.get("isa", "?")))
    print("step %.1f ms with every primitive timed, %.1f ms without (%+.1f%%); "
          "mean of %d steps after %d warm-up" % (
              wall, wall_plain, 100.0 * (wall / wall_plain - 1.0), args.steps, args.warmup))
    print()
    print("| %-44s | %6s | %9s | %6s |" % ("what", "runs", "ms/step", "share"))
    print("|%s|%s|%s|%s|" % ("-" * 46, "-" * 8, "-" * 11, "-" * 8))
    for k, v in sorted(rows.items(), key=lambda kv: -kv[1]):
        print("| %-44s | %6.0f | %9.1f | %5.1f%% |" % (k, counts[k], v, 100.0 * v / wall))
    print("| %-44s | %6s | %9.1f | %5.1f%% |" % ("ours (SGD, loss, our Winograd, glue)", "",
                                                 ours, 100.0 * ours / wall))
    print("| %-44s | %6s | %9.1f | %5.1f%% |" % ("step", "", wall, 100.0))


if __name__ == "__main__":
    main()
