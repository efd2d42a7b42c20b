#!/usr/bin/python3
"""half_emu.py IN PREC:MEDIAN:WORST... - what 16-bit storage alone does to a
whole-step comparison, on the CPU: the bounds of test_cuda_step's fp16 and
bf16 steps, derived and held (test_half_bounds).

IN is twin_torch.py's input (the tiny model, its state, the batch, lr,
momentum, weight decay, steps; written by gb_twin_write_input). The same
torch.optim.SGD steps run twice in float64: once as they are (the reference,
as the double twin) and once with every tensor the CUDA backend stores in 16
bits rounded to fp16 or bf16 where it is stored: the input batch, every
convolution's input, weight copy and output, every batch norm's output, every
residual sum, the classifier's input and weight, and in backward the gradient
of each of these (fp16 scaled by the loss scale, 64 as in the test, before
rounding and unscaled after). Everything else stays float64, so what remains
is the rounding of storage, which no implementation avoids: the GPU's own
arithmetic (fp32 accumulation, cuDNN's algorithms) only adds to it.

PREC fp16fused (bf16fused) is fp16 (bf16) as the fused step (GB_CUDA_FUSE=1,
docs/engine-cuda.md) stores it: bn1's and bn2's outputs never stored,
applied in the next conv's prologue with the scale and bias rounded to the
storage type, conv2's and conv3's inputs kept in fp32 there, the
projection's batch-norm output not stored.

For each PREC (fp16, bf16, fp16fused or bf16fused) it prints the last step's gradient errors as
test_cuda_step's rule measures them (relative L2 per tensor; a batch-norm
bias gradient against the larger of its norm and its weight's gradient) and
the losses', and exits 1 when the median gradient is over MEDIAN/2 or the
worst over WORST/2: a bound the emulation does not clear by a factor of 2
would fail a correct GPU. At 32x32 images (layer4's batch norm over 4 values
per channel) it does not clear the bounds; at 64x64 it does.
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision.models import resnet as tvr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from twin_torch import Net, read_input  # noqa: E402

MARGIN = 2.0
LOSS_SCALE = 64.0  # test_cuda_step's GB_CUDA_LOSS_SCALE
MODE = {"dt": None, "scale": 1.0, "fused": False}


class Store(torch.autograd.Function):
    """Identity in value space, rounding to the storage type both ways."""

    @staticmethod
    def forward(ctx, x):
        dt = MODE["dt"]
        ctx.dt, ctx.scale = dt, MODE["scale"]
        return x.clone() if dt is None else x.to(dt).to(torch.float64)

    @staticmethod
    def backward(ctx, g):
        if ctx.dt is None:
            return g
        gs = (g * ctx.scale).to(ctx.dt)
        assert torch.isfinite(gs).all(), "a scaled gradient overflowed the storage type"
        return gs.to(torch.float64) / ctx.scale


st = Store.apply
_bn_forward = nn.BatchNorm2d.forward
nn.Conv2d.forward = lambda self, x: st(
    F.conv2d(st(x), st(self.weight), None, self.stride, self.padding))
nn.BatchNorm2d.forward = lambda self, x: st(_bn_forward(self, x))
nn.Linear.forward = lambda self, x: F.linear(st(x), st(self.weight), self.bias)


def prologue(bn, t):
    """The fused step's batch norm + ReLU in the next conv's prologue: the
    batch statistics of the conv output t, the affine form a t + b with a
    and b rounded to the storage type (as the prologue reads them; their gradient is
    the exact one, as our backward kernels compute it), nothing stored."""
    mean = t.mean(dim=(0, 2, 3))
    var = t.var(dim=(0, 2, 3), unbiased=False)
    a = bn.weight / torch.sqrt(var + bn.eps)
    b = bn.bias - mean * a
    dt = MODE["dt"]
    a = a + (a.to(dt).to(torch.float64) - a).detach()
    b = b + (b.to(dt).to(torch.float64) - b).detach()
    return F.relu(t * a.view(1, -1, 1, 1) + b.view(1, -1, 1, 1))


def conv_unstored_input(conv, x):
    return st(F.conv2d(x, st(conv.weight), None, conv.stride, conv.padding))


def bottleneck_forward(self, x):
    if MODE["fused"]:
        # GB_CUDA_FUSE=1: u1, u2 and the projection's batch-norm output are
        # never stored; the block's output is (bn_apply)
        idt = x
        if self.downsample is not None:
            idt = _bn_forward(self.downsample[1], self.downsample[0](x))
        out = conv_unstored_input(self.conv2, prologue(self.bn1, self.conv1(x)))
        out = conv_unstored_input(self.conv3, prologue(self.bn2, out))
        return self.relu(st(_bn_forward(self.bn3, out) + idt))
    idt = x if self.downsample is None else self.downsample(x)
    out = self.relu(self.bn1(self.conv1(x)))
    out = self.relu(self.bn2(self.conv2(out)))
    return self.relu(st(self.bn3(self.conv3(out)) + idt))


tvr.Bottleneck.forward = bottleneck_forward


def train(state, dt, scale, fused=False):
    MODE["dt"], MODE["scale"], MODE["fused"] = dt, scale, fused
    model, x, y, (lr, mom, wd), steps = state()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=mom, weight_decay=wd)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(st(x)), y)
        loss.backward()
        losses.append(loss.item())
        grads = {n: p.grad.clone() for n, p in model.named_parameters()}
        opt.step()
    return losses, grads


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    path = sys.argv[1]

    def state():
        cfg, params, buffers, images, labels = read_input(path)
        model = Net(cfg["layers"], cfg["width"], cfg["classes"]).double().train()
        names = dict(model.named_parameters())
        po = bo = 0
        with torch.no_grad():
            for k, t in model.state_dict().items():
                if k.endswith("num_batches_tracked"):
                    continue
                n = t.numel()
                src = params[po:po + n] if k in names else buffers[bo:bo + n]
                t.copy_(torch.from_numpy(src.copy()).view_as(t))
                po, bo = (po + n, bo) if k in names else (po, bo + n)
        x = torch.from_numpy(images).view(cfg["batch"], 3, cfg["h"], cfg["w"])
        return model, x, torch.from_numpy(labels), cfg["hyper"], cfg["steps"]

    ref_loss, ref = train(state, None, 1.0)
    failed = 0
    for arg in sys.argv[2:]:
        prec, med_bound, worst_bound = arg.split(":")
        dt = {"fp16": torch.float16, "fp16fused": torch.float16, "bf16": torch.bfloat16,
              "bf16fused": torch.bfloat16}[prec]
        loss, got = train(state, dt, LOSS_SCALE if prec.startswith("fp16") else 1.0,
                          prec.endswith("fused"))
        errs = []
        for n, r in ref.items():
            den = r.norm().item()
            w = n[:-5] + ".weight"
            if n.endswith(".bias") and ("bn" in n or "downsample.1" in n):
                den = max(den, ref[w].norm().item()) if w in ref else den
            errs.append(((got[n] - r).norm().item() / den, n))
        errs.sort()
        med, (worst, worst_name) = float(np.median([e for e, _ in errs])), errs[-1]
        lerr = max(abs(a - b) / abs(b) for a, b in zip(loss, ref_loss))
        ok = med <= float(med_bound) / MARGIN and worst <= float(worst_bound) / MARGIN
        print("%s: %d gradients median %.2e worst %.2e (%s), losses worst %.2e; bounds %s and %s "
              "over a margin of %g: %s" % (prec, len(errs), med, worst, worst_name, lerr, med_bound,
                                           worst_bound, MARGIN, "ok" if ok else "FAIL"))
        failed += not ok
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
