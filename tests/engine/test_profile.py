#!/usr/bin/env python3
"""test_profile.py - bench/cpu/profile.py on a small step: oneDNN's verbose
log is cut into whole steps (from one stem convolution to the next), so
every ResNet-50 primitive is counted as often as the model has it per step, and
the table adds up to the step. Fails if oneDNN's verbose format or our
primitives change under the script."""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "bench", "cpu", "profile.py")


def check_cutting():
    """parse() on a made-up log: a slow warm-up step (its backward 1000 ms)
    and two timed steps of 10 ms stay apart; cut at the classifier, the
    warm-up's backward fell into the timed window (CI, 2026-12-02: the rows
    added up to 1046.6 ms against a step of 926.6)"""
    sys.path.insert(0, os.path.dirname(SCRIPT))
    import profile as prof  # bench/cpu/profile.py, ahead of Python's own
    stem = "mb2_ic3oc64_ih64oh32kh7sh2dh0ph3_iw64ow32kw7sw2dw0pw3"
    fc = "mb2ic2048oc1000"

    def ex(prim, prop, shape, ms):
        return "onednn_verbose,exec,cpu,%s,jit:avx512_core,%s,src_f32,,alg,%s,%s" % (
            prim, prop, shape, ms)

    def step(bwd_ms):
        return [ex("convolution", "forward_training", stem, 2.0),
                ex("inner_product", "forward_training", fc, 1.0),
                ex("inner_product", "backward_data", fc, bwd_ms / 2),
                ex("convolution", "backward_weights", stem, bwd_ms / 2)]

    log = "\n".join([ex("reorder", "undef", "64x3x7x7", 50.0)] + step(1000.0) + step(7.0)
                     + step(7.0))
    rows, counts = prof.parse(log, 1, 2)
    total = sum(rows.values())
    if abs(total - 10.0) > 1e-9 or counts.get("conv 7x7/2 direct, forward") != 1:
        sys.exit("cutting: %.1f ms a timed step (want 10.0), rows %s" % (total, dict(rows)))


def main():
    check_cutting()
    gpubench = sys.argv[1]
    out = subprocess.run([sys.executable, SCRIPT, "--gpubench", gpubench, "--batch", "2",
                          "--image-size", "64", "--steps", "2", "--warmup", "1"],
                         capture_output=True, text=True, timeout=600)
    print(out.stdout, out.stderr)
    if out.returncode != 0:
        sys.exit("profile.py failed")
    runs, ms = {}, {}
    for line in out.stdout.splitlines():
        m = re.match(r"\| (.+?) +\| +(\d*) +\| +([\d.]+) +\| +([\d.]+)% \|$", line)
        if m:
            runs[m.group(1)] = int(m.group(2)) if m.group(2) else None
            ms[m.group(1)] = float(m.group(3))
    # ResNet-50 v1.5 per step: 53 convolutions with a batch norm each: the
    # 7x7/2 stem, 13 3x3/1 and 3 3x3/2 (v1.5 strides in the 3x3), 33 1x1/1
    # and 3 1x1/2 (projections); one classifier
    want = {"batch norm, forward": 53, "batch norm, backward": 53,
            "classifier (inner product), forward": 1, "conv 7x7/2 direct, forward": 1,
            "conv 1x1/1 direct, forward": 33, "conv 1x1/2 direct, backward_weights": 3,
            "conv 3x3/2 direct, forward": 3}
    for k, n in want.items():
        if runs.get(k) != n:
            sys.exit("%s: %s runs a step, want %d" % (k, runs.get(k), n))
    # the 13 3x3/1 convolutions are oneDNN's (Winograd in fp32 on AVX-512,
    # direct in bf16), or ours (our Winograd on AVX2: none in the log)
    conv3 = sum(n for k, n in runs.items() if k.startswith("conv 3x3/1") and k.endswith("forward"))
    if conv3 not in (0, 13):
        sys.exit("3x3/1 forwards: %d a step, want 13 (or 0 where ours run)" % conv3)
    parts = sum(v for k, v in ms.items() if k != "step")
    if abs(parts - ms["step"]) > 0.02 * ms["step"] + 0.2:
        sys.exit("the rows add up to %.1f ms, the step is %.1f ms" % (parts, ms["step"]))
    print("ok")


if __name__ == "__main__":
    main()
