#!/usr/bin/python3
"""twin_torch.py IN OUT - the reference for test_cuda_twin: one or more
torch.optim.SGD steps of a torchvision-Bottleneck ResNet in float64.

IN (little-endian, written by test_cuda_twin.c): b"GBTW", int32 image_h,
image_w, classes, layers[4], base_width, batch, steps; float64 lr, momentum,
weight_decay; int64 n_params, n_buffers; float32 params[n_params] and
buffers[n_buffers] in state_dict order (num_batches_tracked left out);
float32 images[batch*3*h*w] NCHW; int32 labels[batch].

OUT: float64 loss[steps]; grads of the last step[n_params]; params after
the last step[n_params]; buffers after[n_buffers].
"""
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
from torchvision.models.resnet import Bottleneck


class Net(nn.Module):
    """torchvision's ResNet with a free base width (same names and order)."""

    def __init__(self, layers, w0, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, w0, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(w0)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        inpl = w0
        for s in range(4):
            planes = w0 << s
            blocks = []
            for i in range(layers[s]):
                stride = 2 if (i == 0 and s > 0) else 1
                down = None
                if stride != 1 or inpl != planes * 4:
                    down = nn.Sequential(
                        nn.Conv2d(inpl, planes * 4, 1, stride, bias=False),
                        nn.BatchNorm2d(planes * 4))
                blocks.append(Bottleneck(inpl, planes, stride, down))
                inpl = planes * 4
            setattr(self, "layer%d" % (s + 1), nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inpl, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def read_input(path):
    """IN as (cfg, params, buffers, images, labels), arrays in float64."""
    raw = open(path, "rb").read()
    assert raw[:4] == b"GBTW", "bad magic"
    o = 4
    ih, iw, classes, l0, l1, l2, l3, w0, batch, steps = struct.unpack_from("<10i", raw, o)
    o += 40
    lr, mom, wd = struct.unpack_from("<3d", raw, o)
    o += 24
    n_params, n_buffers = struct.unpack_from("<2q", raw, o)
    o += 16

    def take(dtype, count):
        nonlocal o
        a = np.frombuffer(raw, dtype=dtype, count=count, offset=o)
        o += a.nbytes
        return a

    params = take("<f4", n_params).astype(np.float64)
    buffers = take("<f4", n_buffers).astype(np.float64)
    images = take("<f4", batch * 3 * ih * iw).astype(np.float64)
    labels = take("<i4", batch).astype(np.int64)
    assert o == len(raw), "trailing bytes in input"
    cfg = {"h": ih, "w": iw, "classes": classes, "layers": [l0, l1, l2, l3], "width": w0,
           "batch": batch, "steps": steps, "hyper": (lr, mom, wd)}
    return cfg, params, buffers, images, labels


def main():
    cfg, params, buffers, images, labels = read_input(sys.argv[1])
    ih, iw, classes, w0, batch, steps = (cfg[k] for k in ("h", "w", "classes", "width", "batch",
                                                          "steps"))
    l0, l1, l2, l3 = cfg["layers"]
    lr, mom, wd = cfg["hyper"]
    n_params, n_buffers = len(params), len(buffers)

    torch.manual_seed(0)
    model = Net([l0, l1, l2, l3], w0, classes).double().train()
    names = dict(model.named_parameters())
    sd = model.state_dict()
    po = bo = 0
    with torch.no_grad():
        for k, t in sd.items():
            if k.endswith("num_batches_tracked"):
                continue
            n = t.numel()
            if k in names:
                t.copy_(torch.from_numpy(params[po:po + n].copy()).view_as(t))
                po += n
            else:
                t.copy_(torch.from_numpy(buffers[bo:bo + n].copy()).view_as(t))
                bo += n
    assert po == n_params and bo == n_buffers, "slab sizes differ: %d/%d %d/%d" % (
        po, n_params, bo, n_buffers)

    x = torch.from_numpy(images).view(batch, 3, ih, iw)
    y = torch.from_numpy(labels)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=mom, weight_decay=wd)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        losses.append(loss.item())
        grads = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        opt.step()
    after = model.state_dict()
    p_after = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    b_after = torch.cat([t.reshape(-1) for k, t in after.items()
                         if k not in names and not k.endswith("num_batches_tracked")])
    with open(sys.argv[2], "wb") as f:
        f.write(np.asarray(losses, dtype="<f8").tobytes())
        f.write(grads.numpy().astype("<f8").tobytes())
        f.write(p_after.numpy().astype("<f8").tobytes())
        f.write(b_after.numpy().astype("<f8").tobytes())


if __name__ == "__main__":
    main()
