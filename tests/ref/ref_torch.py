#!/usr/bin/python3
"""ref_torch.py - PyTorch's answer for the cases test_ref_torch writes.

Usage: ref_torch.py IN1 OUT1 [IN2 OUT2 ...]

Each IN is a safetensors file (read here with json + numpy; Debian has no
python3-safetensors) whose metadata "kind" says what to compute, in float64:

  resnet   a torchvision ResNet with Bottleneck blocks at the given widths
           (torchvision's own Bottleneck and _make_layer, so names and strides
           are torchvision's), loaded with param.* and buffer.*, trained for
           `steps` SGD steps on images.S / labels.S; writes, per step S,
           stepS.loss, stepS.grad.NAME and stepS.delta.NAME (after - before,
           for parameters and running statistics).
  conv     y = conv2d(x, w, stride, padding) and dx, dw for y.backward(dy).
  maxpool  y = max_pool2d(x, k, stride, padding) and dx for y.backward(dy).

Exits non-zero on any error, so the C test fails.
"""
import json
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision.models.resnet import Bottleneck, ResNet

DTYPES = {"F64": np.float64, "F32": np.float32, "I32": np.int32, "I64": np.int64}


def read_st(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    data = raw[8 + n :]
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        arr = np.frombuffer(data[b:e], dtype=DTYPES[t["dtype"]]).reshape(t["shape"])
        tensors[name] = torch.from_numpy(arr.copy())
    return meta, tensors


def write_st(path, tensors):
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        a = np.ascontiguousarray(t.detach().cpu().numpy().astype(np.float64))
        b = a.tobytes()
        header[name] = {"dtype": "F64", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


class TinyResNet(ResNet):
    """torchvision's ResNet with the stem width, stage widths and norm layer
    as parameters (ResNet.__init__ fixes the stem at 64 channels). Built from
    torchvision's Bottleneck and ResNet._make_layer, so module names, strides
    (v1.5: on the 3x3) and the downsample are exactly torchvision's."""

    def __init__(self, layers, base, classes, bn):
        nn.Module.__init__(self)
        norm = nn.BatchNorm2d if bn else nn.Identity
        self._norm_layer = norm
        self.inplanes = base
        self.dilation = 1
        self.groups = 1
        self.base_width = 64  # Bottleneck's mid width is then `planes`
        self.conv1 = nn.Conv2d(3, base, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = norm(base)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(Bottleneck, base, layers[0])
        self.layer2 = self._make_layer(Bottleneck, base * 2, layers[1], stride=2)
        self.layer3 = self._make_layer(Bottleneck, base * 4, layers[2], stride=2)
        self.layer4 = self._make_layer(Bottleneck, base * 8, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(base * 8 * Bottleneck.expansion, classes)


def run_resnet(meta, t):
    layers = [int(v) for v in meta["layers"].split(",")]
    model = TinyResNet(layers, int(meta["base"]), int(meta["classes"]), int(meta["bn"]))
    model = model.double().train()
    sd = model.state_dict()
    want = {k for k in sd if not k.endswith("num_batches_tracked")}
    have = {k.split(".", 1)[1] for k in t if k.startswith(("param.", "buffer."))}
    if want != have:
        raise SystemExit(f"state_dict names differ: torch only {sorted(want - have)}, "
                         f"C only {sorted(have - want)}")
    with torch.no_grad():
        for k in want:
            src = t[("param." if k in dict(model.named_parameters()) else "buffer.") + k]
            if tuple(src.shape) != tuple(sd[k].shape):
                raise SystemExit(f"{k}: shape {tuple(src.shape)} vs torch {tuple(sd[k].shape)}")
            sd[k].copy_(src)
    opt = torch.optim.SGD(model.parameters(), lr=float(meta["lr"]),
                          momentum=float(meta["momentum"]),
                          weight_decay=float(meta["weight_decay"]))
    out = {}
    for s in range(int(meta["steps"])):
        before = {k: v.clone() for k, v in model.state_dict().items()
                  if not k.endswith("num_batches_tracked")}
        opt.zero_grad()
        logits = model(t[f"images.{s}"])
        loss = F.cross_entropy(logits, t[f"labels.{s}"].long())
        loss.backward()
        opt.step()
        out[f"step{s}.loss"] = loss.detach().reshape(1)
        for k, p in model.named_parameters():
            out[f"step{s}.grad.{k}"] = p.grad.clone()  # zero_grad() reuses the tensor
        for k, v in model.state_dict().items():
            if k in before:
                out[f"step{s}.delta.{k}"] = v - before[k]
    return out


def run_conv(meta, t):
    x = t["x"].requires_grad_()
    w = t["w"].requires_grad_()
    stride = (int(meta["stride_h"]), int(meta["stride_w"]))
    pad = (int(meta["pad_h"]), int(meta["pad_w"]))
    y = F.conv2d(x, w, stride=stride, padding=pad)
    y.backward(t["dy"])
    return {"y": y, "dx": x.grad, "dw": w.grad}


def run_maxpool(meta, t):
    x = t["x"].requires_grad_()
    y = F.max_pool2d(x, int(meta["kernel"]), int(meta["stride"]), int(meta["pad"]))
    y.backward(t["dy"])
    return {"y": y, "dx": x.grad}


def main(argv):
    if len(argv) < 3 or len(argv) % 2 != 1:
        raise SystemExit("usage: ref_torch.py IN OUT [IN OUT ...]")
    torch.set_num_threads(1)
    for src, dst in zip(argv[1::2], argv[2::2]):
        meta, t = read_st(src)
        kind = meta.get("kind")
        run = {"resnet": run_resnet, "conv": run_conv, "maxpool": run_maxpool}.get(kind)
        if run is None:
            raise SystemExit(f"{src}: unknown kind {kind!r}")
        write_st(dst, run(meta, t))
    print(f"torch {torch.__version__}: {len(argv) // 2} cases", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
