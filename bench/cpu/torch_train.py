#!/usr/bin/python3
"""torch_train.py - the PyTorch side of bench/cpu: torchvision resnet50
training steps (SGD, momentum 0.9, weight decay 1e-4, lr 0.1) on a synthetic
batch made before timing, timed per step with a monotonic clock, the same way
`gpubench train` times its steps; --bf16 runs forward and loss under CPU
autocast to bfloat16 (PyTorch's mixed precision: fp32 weights, bf16
convolutions and matrix products). Prints one JSON line, with the BLAS
library PyTorch loaded ("blas": Debian's PyTorch runs fp32 matrix products
outside oneDNN, the classifier's among them, through libblas.so.3, whichever
library that resolves to)."""
import argparse
import json
import os
import resource
import time

import torch
import torchvision

ap = argparse.ArgumentParser()
ap.add_argument("--batch", type=int, default=32)
ap.add_argument("--image-size", type=int, default=224)
ap.add_argument("--steps", type=int, default=10)
ap.add_argument("--warmup", type=int, default=3)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--channels-last", action="store_true")
ap.add_argument("--bf16", action="store_true")
a = ap.parse_args()
if a.batch < 1 or a.image_size < 1 or a.steps < 1 or a.threads < 1 or a.warmup < 0:
    ap.error("--batch, --image-size, --steps and --threads must be at least 1, --warmup 0 or more")

torch.set_num_threads(a.threads)
torch.manual_seed(1)
model = torchvision.models.resnet50()
x = torch.randn(a.batch, 3, a.image_size, a.image_size)
y = torch.randint(0, 1000, (a.batch,))
if a.channels_last:
    model = model.to(memory_format=torch.channels_last)
    x = x.contiguous(memory_format=torch.channels_last)
model.train()
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)


def step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


for _ in range(a.warmup):
    step()
ms = []
for _ in range(a.steps):
    t0 = time.monotonic()
    step()
    ms.append((time.monotonic() - t0) * 1000.0)


def blas_library():
    """The BLAS library mapped into this process (resolved), or None."""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "/" in line and "blas" in line.rsplit("/", 1)[-1]}
    # OpenBLAS's libblas.so.3 is a shim over libopenblas*.so: name that one
    real = sorted({os.path.realpath(p) for p in paths})
    named = [p for p in real if "openblas" in p.rsplit("/", 1)[-1]]
    return (named or real or [None])[0]


s = sorted(ms)
med = s[len(s) // 2] if len(s) % 2 else 0.5 * (s[len(s) // 2 - 1] + s[len(s) // 2])
print(json.dumps({"median_ms": med, "images_per_sec": a.batch / (med / 1000.0), "step_ms": ms,
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "torch": torch.__version__, "mkldnn": torch.backends.mkldnn.is_available(),
                  "blas": blas_library()}))
