#!/usr/bin/env python3
"""torch_resnet50.py - the PyTorch side of bench/gpu/run.sh: torchvision
resnet50 training steps on one GPU, channels_last, synthetic data on the
device, SGD(lr 0.1, momentum 0.9, weight decay 1e-4), as gpubench runs them.

--precision fp16|bf16 (autocast; fp16 with GradScaler), tf32 (fp32 storage,
TF32 matmul and cuDNN), fp32 (TF32 off). --mode eager|compile (torch.compile
of the model). Each step is timed between two CUDA events recorded around
it while the loop runs freely, as a training script runs: nothing waits for
the GPU inside the timed steps (GradScaler's own check of the fp16 overflow
flag, which a user pays too, aside), and losses are read after the last
step. Warm-up excluded. Prints one JSON line: images_per_sec (batch /
median step), images_per_sec_window (all timed images / first start to last
end), step_ms stats, peak memory, versions.
"""
import argparse
import json
import math
import statistics
import sys

import torch
import torch.nn.functional as F
import torchvision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--precision", default="fp16", choices=["fp16", "bf16", "tf32", "fp32"])
    ap.add_argument("--mode", default="eager", choices=["eager", "compile"])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    a = ap.parse_args()
    if a.batch < 1 or a.image_size < 1 or a.steps < 1 or a.warmup < 0:
        ap.error("--batch, --image-size and --steps must be at least 1, --warmup 0 or more")
    if not torch.cuda.is_available():
        print("no CUDA device visible to PyTorch", file=sys.stderr)
        return 2
    torch.backends.cudnn.benchmark = True
    tf32 = a.precision == "tf32"
    if a.precision in ("tf32", "fp32"):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    dev = torch.device("cuda")
    model = torchvision.models.resnet50().to(dev).to(memory_format=torch.channels_last)
    model.train()
    fwd = torch.compile(model) if a.mode == "compile" else model
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(a.batch, 3, a.image_size, a.image_size, device=dev)
    x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (a.batch,), device=dev)
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.precision)
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        scaler = torch.amp.GradScaler("cuda", enabled=a.precision == "fp16")
    else:  # PyTorch < 2.3
        scaler = torch.cuda.amp.GradScaler(enabled=a.precision == "fp16")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = F.cross_entropy(fwd(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    scale0 = scaler.get_scale() if scaler.is_enabled() else 1.0
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(a.steps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(a.steps)]
    losses = []
    for i in range(a.steps):
        starts[i].record()
        loss = step()
        ends[i].record()
        losses.append(loss.detach())
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    window = starts[0].elapsed_time(ends[-1])
    losses = [float(v) for v in losses]
    med = statistics.median(times)
    # fp16 steps the scaler skipped (an overflow halves the scale; it grows
    # only every 2000 steps): read once, after the timed steps
    skipped = round(math.log2(scale0 / scaler.get_scale())) if scaler.is_enabled() else 0
    finite = all(math.isfinite(v) for v in losses)
    print(json.dumps({
        "framework": "pytorch", "mode": a.mode, "precision": a.precision, "batch": a.batch,
        "images_per_sec": a.batch / (med / 1000.0),
        "images_per_sec_window": a.batch * a.steps / (window / 1000.0),
        "step_ms": {"median": med, "min": min(times), "max": max(times),
                    "p90": sorted(times)[int(0.9 * (len(times) - 1))]},
        "loss_first": losses[0], "loss_last": losses[-1], "skipped_steps": skipped, "valid": finite,
        "peak_mem_bytes": torch.cuda.max_memory_allocated(),
        "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "torchvision": torchvision.__version__, "cudnn": torch.backends.cudnn.version(),
        "cuda": torch.version.cuda}))
    if not finite:
        print("a timed step's loss is not finite", file=sys.stderr)
    return 0 if finite else 1


if __name__ == "__main__":
    sys.exit(main())
