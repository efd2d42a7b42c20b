#!/usr/bin/python3
"""torch_match.py - gpubench's CPU engine against PyTorch, tensor by tensor.

For each case: build torchvision's resnet50 with random weights (random BN
affine and running statistics too, so batch norm is really exercised), a
random batch, write both as safetensors (the format written here with
struct + numpy: the safetensors package is not in Debian), run `steps` SGD
steps (momentum, weight decay) in PyTorch and in `gpubench train --load
--data --save --save-grads`, and compare:

  - the loss of every step,
  - the gradient of every parameter at the last step,
  - the update (after - before) of every parameter and running statistic,
    and num_batches_tracked,

as relative L2 error per tensor, ||ours - torch|| / ||torch||, against a
bound (1e-4 for fp32 as the issue asks). With --precision bf16 (one-step
cases), gpubench's bf16 step is held to PyTorch's own bf16 (CPU autocast):
per kind of tensor (conv, BN, classifier) the median gradient error against
PyTorch fp32 may be at most 1.5x autocast's, and the loss within 1e-2. Exits non-zero
with the worst tensors listed when any tensor is over the bound, a tensor is
missing, or gpubench fails; exits 77 (skip) for bf16 on a CPU without
avx512_bf16.

Two things make a 1e-4 bound between two fp32 implementations meaningful on
any CPU, whatever its kernels' summation order: condition() moves every
pre-activation away from the ReLU kink before the run (so no mask can flip
between two roundings), and each case is guarded: PyTorch fp32 and fp64 must
agree to 4e-5 with no mask flip, or the case fails as ill-conditioned.

Usage: torch_match.py GPUBENCH [--case N,SIZE,STEPS,SEED ...] [--precision fp32|bf16]
       [--bound X] [--threads N] [--keep DIR] [--survey] [--no-condition]
"""
import argparse
import copy
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torchvision

DT = {np.dtype("float32"): "F32", np.dtype("int64"): "I64"}


def write_safetensors(path, tensors):
    """tensors: dict name -> numpy array (float32 or int64)."""
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        b = a.tobytes()
        header[name] = {"dtype": DT[a.dtype], "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        dt = {"F32": np.float32, "I64": np.int64}[e["dtype"]]
        b, en = e["data_offsets"]
        out[name] = np.frombuffer(raw[base + b:base + en], dtype=dt).reshape(e["shape"])
    return out


def randomize(model, gen, shift):
    """Random weights everywhere, including BN affine and running stats.

    BN shifts are drawn from U(shift) for every BN but the stem's, which gets
    N(0, 0.2): see the module docstring for why."""
    with torch.no_grad():
        for name, mod in model.named_modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.weight.uniform_(0.5, 1.5, generator=gen)
                if name == "bn1":
                    mod.bias.normal_(0.0, 0.2, generator=gen)
                else:
                    mod.bias.uniform_(shift[0], shift[1], generator=gen)
                mod.running_mean.normal_(0.0, 0.2, generator=gen)
                mod.running_var.uniform_(0.5, 2.0, generator=gen)
                mod.num_batches_tracked.fill_(7)
            elif isinstance(mod, torch.nn.Conv2d):
                fan_out = mod.out_channels * mod.kernel_size[0] * mod.kernel_size[1]
                mod.weight.normal_(0.0, (2.0 / fan_out) ** 0.5, generator=gen)
            elif isinstance(mod, torch.nn.Linear):
                bound = 1.0 / mod.in_features ** 0.5
                mod.weight.uniform_(-bound, bound, generator=gen)
                mod.bias.uniform_(-bound, bound, generator=gen)


def relu_bns(model):
    """For each ReLU module, the BN whose output (plus the identity, for a
    bottleneck's last) it clips, in call order."""
    out = {id(model.relu): [model.bn1]}
    for mod in model.modules():
        if isinstance(mod, torchvision.models.resnet.Bottleneck):
            out[id(mod.relu)] = [mod.bn1, mod.bn2, mod.bn3]
    return out


def condition(model, x, rel_window=0.05):
    """Move every activation away from the ReLU kink, in place on model.

    A ReLU network's gradient jumps where an activation crosses zero; two fp32
    computations of the same step differ by rounding (1e-7 per op, ~1e-5 deep
    in the network), so an activation closer to zero than that clips in one
    and not in the other: one such "mask flip" among 10^6 activations moves
    some gradients by 1e-3-1e-2, and a 1e-4 comparison becomes a lottery
    whose odds depend on the CPU's kernels. Here one float64 forward pass
    visits the ReLUs in order; for every channel it finds, among the shifts
    within 5% of the channel's spread, the one that puts zero in the middle of
    the widest gap between the channel's pre-activations, and adds it to the
    BN shift (beta) feeding that ReLU (exact: a training-mode BN's output is
    affine in beta). Later layers see the moved values. Clipping statistics
    barely change (the shift is < 5% of the spread); the smallest |pre-
    activation| becomes 1.5e-3-2.7e-3 of the spread instead of 2-3e-6. Returns that
    smallest relative margin."""
    m = copy.deepcopy(model).double()
    m.train()
    owners = relu_bns(model)          # BNs of the original model
    calls = {k: 0 for k in owners}
    margins = []

    def pre(mod, inputs):
        key = id(orig_of[id(mod)])
        bns = owners[key]
        bn = bns[calls[key] % len(bns)]
        calls[key] += 1
        v = inputs[0].clone()
        n_c = v.shape[1]
        flat = v.transpose(0, 1).reshape(n_c, -1)
        deltas = torch.zeros(n_c, dtype=torch.float64)
        for c in range(n_c):
            vals = flat[c]
            spread = float(vals.std()) if vals.numel() > 1 else 1.0
            spread = spread if spread > 0 else 1.0
            w = rel_window * spread
            near = torch.sort(vals[(vals > -w) & (vals < w)]).values
            pts = torch.cat([torch.tensor([-w], dtype=torch.float64), near,
                             torch.tensor([w], dtype=torch.float64)])
            gaps = pts[1:] - pts[:-1]
            j = int(torch.argmax(gaps))
            d = -float(pts[j] + pts[j + 1]) / 2.0
            deltas[c] = d
            margins.append(float((vals + d).abs().min()) / spread)
        with torch.no_grad():
            bn.bias += deltas.to(bn.bias.dtype)
        shape = [1, n_c] + [1] * (v.dim() - 2)
        return (v + deltas.view(shape),)

    orig_relus = [mod for mod in model.modules() if isinstance(mod, torch.nn.ReLU)]
    copy_relus = [mod for mod in m.modules() if isinstance(mod, torch.nn.ReLU)]
    orig_of = {id(c): o for c, o in zip(copy_relus, orig_relus)}
    hooks = [mod.register_forward_pre_hook(pre) for mod in copy_relus]
    with torch.no_grad():
        m(x.double())
    for h in hooks:
        h.remove()
    return min(margins)


def rel(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    nb = np.linalg.norm(b)
    d = np.linalg.norm(a - b)
    if nb == 0.0:
        return 0.0 if d == 0.0 else float("inf")
    return d / nb


def torch_steps(model, x, y, steps, dtype, lr, mom, wd):
    """Train a copy of model for `steps` SGD steps in dtype. Returns the losses,
    the last step's gradients, the state after, and the ReLU masks of every
    forward pass (for counting mask flips between precisions)."""
    m = copy.deepcopy(model).to(dtype)
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=lr, momentum=mom, weight_decay=wd)
    masks = []
    hooks = [mod.register_forward_hook(lambda mod, i, o: masks.append((o > 0).detach().clone()))
             for mod in m.modules() if isinstance(mod, torch.nn.ReLU)]
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(m(x.to(dtype)), y)
        loss.backward()
        losses.append(loss.item())
        grads = {k: p.grad.detach().double().numpy().copy() for k, p in m.named_parameters()}
        opt.step()
    for h in hooks:
        h.remove()
    after = {k: (v.detach().double().numpy().copy() if v.is_floating_point() else v.numpy().copy())
             for k, v in m.state_dict().items()}
    return losses, grads, after, masks


def autocast_grads(model, x, y):
    """One bf16 step of PyTorch's own mixed precision (CPU autocast)."""
    m = copy.deepcopy(model)
    m.train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = m(x)
    loss = torch.nn.functional.cross_entropy(out.float(), y)
    loss.backward()
    return loss.item(), {k: p.grad.detach().double().numpy().copy() for k, p in m.named_parameters()}


def kind_of(name):
    if name.startswith("fc."):
        return "fc"
    return "bn" if ("bn" in name or "downsample.1" in name) else "conv"


def compare(losses, grads, after, ref_losses, ref_grads, ref_after, before):
    """Relative L2 of every compared quantity: list of (kind, name, err)."""
    rows = []
    for i, (a, b) in enumerate(zip(losses, ref_losses)):
        rows.append(("loss", "step %d" % (i + 1), abs(a - b) / abs(b)))
    for k in ref_grads:
        rows.append(("grad", k, rel(grads[k], ref_grads[k])))
    for k, v in ref_after.items():
        if k.endswith("num_batches_tracked"):
            continue
        rows.append(("update", k, rel(after[k] - before[k], v - before[k])))
    return rows


def run_case(gpubench, n, size, steps, seed, args, work):
    # one step: lr 1e-3, weight decay 1 (the gradient and the decay both large
    # in the update); more steps: lr 1e-5, weight decay 100 (the update is
    # still ~1e-3 of each weight, with the decay and momentum terms large in
    # it, while the gradient part moves the next step's activations by ~1e-5
    # of their spread: they stay clear of the kink that condition() made)
    lr = args.lr if args.lr is not None else (1e-3 if steps == 1 else 1e-5)
    wd = args.weight_decay if args.weight_decay is not None else (1.0 if steps == 1 else 100.0)
    mom = args.momentum
    gen = torch.Generator().manual_seed(seed)
    model = torchvision.models.resnet50()
    randomize(model, gen, args.shift)
    x = torch.randn(n, 3, size, size, generator=gen)
    y = torch.randint(0, 1000, (n,), generator=gen)
    margin = condition(model, x) if args.condition else float("nan")
    before = {k: v.detach().clone().numpy() for k, v in model.state_dict().items()}
    wpath = os.path.join(work, "weights.safetensors")
    dpath = os.path.join(work, "data.safetensors")
    write_safetensors(wpath, before)
    write_safetensors(dpath, {"images": x.numpy(), "labels": y.numpy().astype(np.int64)})
    before = {k: v.astype(np.float64) for k, v in before.items()}

    l32, g32, a32, m32 = torch_steps(model, x, y, steps, torch.float32, lr, mom, wd)
    l64, g64, a64, m64 = torch_steps(model, x, y, steps, torch.float64, lr, mom, wd)
    flips = sum(int((a != b).sum()) for a, b in zip(m32, m64))
    cond = compare(l32, g32, a32, l64, g64, a64, before)
    cond_max = max(e for _, _, e in cond)
    spath = os.path.join(work, "saved.safetensors")
    gpath = os.path.join(work, "grads.safetensors")
    cmd = [gpubench, "train", "--backend", "cpu", "--precision", args.precision,
           "--batch", str(n), "--image-size", str(size), "--steps", str(steps),
           "--warmup", "0", "--threads", str(args.threads), "--lr", str(lr),
           "--momentum", str(mom), "--weight-decay", str(wd), "--load", wpath,
           "--data", dpath, "--save", spath, "--save-grads", gpath, "--format", "json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print("FAIL: gpubench exited %d: %s" % (p.returncode, p.stderr.strip()))
        return False
    rec = json.loads(p.stdout)
    ours_after = {k: v.astype(np.float64) if v.dtype == np.float32 else v
                  for k, v in read_safetensors(spath).items()}
    ours_grads = read_safetensors(gpath)

    problems = []
    for k in g32:
        if k not in ours_grads:
            problems.append("gradient of %s missing" % k)
    for k, v in a32.items():
        if k not in ours_after:
            problems.append("%s missing from --save" % k)
        elif k.endswith("num_batches_tracked") and int(ours_after[k]) != int(v):
            problems.append("%s = %d, torch %d" % (k, int(ours_after[k]), int(v)))
    if problems:
        for pr in problems[:10]:
            print("FAIL: " + pr)
        return False
    rows = compare(rec["loss_samples"], ours_grads, ours_after, l32, g32, a32, before)
    vs64 = compare(rec["loss_samples"], ours_grads, ours_after, l64, g64, a64, before)
    if args.survey:
        print("case %d,%d,%d,%d: ours vs torch fp32 %.2e | torch fp32 vs fp64 %.2e, %d flips"
              " | margin %.1e" % (n, size, steps, seed, max(e for _, _, e in rows), cond_max,
                                  flips, margin))
        return True
    kind_max = {}
    for w, name, e in rows:
        kind_max[w] = max(kind_max.get(w, 0.0), e)
    print("case batch %d size %d steps %d seed %d %s: %d quantities; max rel L2 vs torch fp32: %s"
          % (n, size, steps, seed, args.precision, len(rows),
             ", ".join("%s %.2e" % kv for kv in sorted(kind_max.items()))))
    by = {}
    for w, name, e in rows:
        key = w if w == "loss" else w + (" " + name.rsplit(".", 1)[-1] if "bn" not in name
                                           and "downsample.1" not in name else " bn")
        by.setdefault(key, []).append(e)
    print("    median / max by kind: " + ", ".join(
        "%s %.1e/%.1e" % (k, np.median(v), max(v)) for k, v in sorted(by.items())))
    print("    vs torch fp64: ours %.2e, torch fp32 %.2e (ReLU mask flips fp32/fp64: %d;"
          " smallest |pre-activation| %.1e of its channel's spread)"
          % (max(e for _, _, e in vs64), cond_max, flips, margin))
    for w, name, e in sorted(rows, key=lambda r: -r[2])[:args.show]:
        print("    %-6s %-40s %.3e" % (w, name, e))
    ok = True
    if args.precision == "bf16" and steps != 1:
        print("FAIL: bf16 cases compare one step")
        return False
    if args.precision == "bf16":
        # bf16 is held to what PyTorch's own bf16 gives: per kind of tensor,
        # the median gradient error against fp32 within 1.5x of autocast's
        la, ga = autocast_grads(model, x, y)
        for kind in ("conv", "bn", "fc"):
            ours_k = [e for w, nm, e in rows if w == "grad" and kind_of(nm) == kind]
            ref_k = [rel(ga[k], g32[k]) for k in g32 if kind_of(k) == kind]
            mo, mr = float(np.median(ours_k)), float(np.median(ref_k))
            print("    bf16 %-4s gradients vs fp32: median ours %.2e, PyTorch autocast %.2e"
                  % (kind, mo, mr))
            if not mo <= 1.5 * mr + 1e-3:
                print("FAIL: bf16 %s gradients are further from fp32 than PyTorch's bf16" % kind)
                ok = False
        # and every gradient tensor on its own: within 2x of autocast's
        # error on that tensor, plus 0.02 (a median per kind let a zeroed,
        # negated or 5x-scaled tensor through)
        ref_by = {k: rel(ga[k], g32[k]) for k in g32}
        per = [(nm, e, ref_by[nm]) for w, nm, e in rows if w == "grad" and nm in ref_by]
        nm, e, r = max(per, key=lambda t: t[1] / max(t[2], 1e-12))
        print("    bf16 gradients per tensor: %d, worst %s %.2e vs PyTorch autocast %.2e"
              % (len(per), nm, e, r))
        if len(per) != len(ref_by):
            print("FAIL: %d gradient tensors compared of %d" % (len(per), len(ref_by)))
            ok = False
        for nm, e, r in per:
            if not e <= 2 * r + 0.02:
                print("FAIL: bf16 gradient of %s %.2e from fp32, PyTorch's bf16 %.2e" % (nm, e, r))
                ok = False
        lo = abs(rec["loss_samples"][0] - l32[0]) / abs(l32[0])
        print("    bf16 loss vs fp32: ours %.1e, PyTorch autocast %.1e"
              % (lo, abs(la - l32[0]) / abs(l32[0])))
        if not lo <= 1e-2:  # a few bf16 roundings (2^-9) of the logits
            print("FAIL: bf16 loss %.2e from fp32" % lo)
            ok = False
        return ok
    if args.guard and (flips or cond_max > args.guard):
        print("FAIL: ill-conditioned case: PyTorch fp32 and fp64 differ by %.2e with %d ReLU mask "
              "flips; a %.0e bound means nothing here"
              % (cond_max, flips, args.bound))
        ok = False
    bad = [r for r in rows if not r[2] <= args.bound]
    for w, name, e in bad[:10]:
        print("FAIL: %s %s relative L2 %.3e > %.1e" % (w, name, e, args.bound))
    if len(bad) > 10:
        print("FAIL: ... and %d more" % (len(bad) - 10))
    return ok and not bad


# (batch, image size, steps, seed); each is conditioned (condition()) and
# guarded (PyTorch fp32 and fp64 must agree without a mask flip), so any seed
# works: docs/engine-cpu.md has the survey over seeds on two kinds of CPU.
DEFAULT_CASES = [
    (2, 64, 2, 1000),  # two steps: the momentum buffer is used
    (3, 41, 2, 1001),  # odd batch, odd image size, two steps
    (3, 57, 1, 1003),  # odd batch, odd image size
    (1, 97, 1, 1006),  # batch 1, odd size; layer4 is 4x4
]


def cpu_has_bf16():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return "avx512_bf16" in line.split()
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gpubench")
    ap.add_argument("--case", action="append", default=[],
                    help="batch,image_size,steps,seed (repeatable)")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--bound", type=float, default=1e-4)
    ap.add_argument("--no-condition", dest="condition", action="store_false",
                    help="keep the random BN shifts as drawn (activations may sit at the kink)")
    ap.add_argument("--guard", type=float, default=4e-5,
                    help="largest PyTorch fp32-vs-fp64 difference a case may have (0: off)")
    ap.add_argument("--shift", type=float, nargs=2, default=(0.5, 1.0),
                    help="range of the BN shifts (beta) after the stem")
    ap.add_argument("--lr", type=float, default=None,
                    help="SGD learning rate (default 1e-3 for one step, 1e-5 for more)")
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=None,
                    help="SGD weight decay (default 1 for one step, 100 for more)")
    ap.add_argument("--survey", action="store_true",
                    help="only print PyTorch's fp32-vs-fp64 agreement per case")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--show", type=int, default=3)
    ap.add_argument("--keep", default=None, help="keep the files in this directory")
    args = ap.parse_args()
    if args.precision == "bf16" and not cpu_has_bf16():
        print("skip: bf16 needs avx512_bf16, which this CPU lacks (gpubench refuses bf16 here)")
        return 77
    torch.set_num_threads(args.threads)
    cases = [tuple(int(v) for v in c.split(",")) for c in args.case] or DEFAULT_CASES
    ok = True
    for i, (n, size, steps, seed) in enumerate(cases):
        if args.keep:
            work = os.path.join(args.keep, "case%d" % i)
            os.makedirs(work, exist_ok=True)
            ok &= run_case(args.gpubench, n, size, steps, seed, args, work)
        else:
            with tempfile.TemporaryDirectory() as work:
                ok &= run_case(args.gpubench, n, size, steps, seed, args, work)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
