#!/usr/bin/env python3
"""damage_result.py MODE FILE: damage a spooled Result (protobuf) so that it
still decodes but breaks a field's rule: `status` sets field 3 (status) to 7,
`cut` keeps only fields 1..3 (job, attempt, status: an ok result without its
record)."""
import sys


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def enc(v):
    out = bytearray()
    while True:
        c, v = v & 0x7F, v >> 7
        if v:
            out.append(c | 0x80)
        else:
            out.append(c)
            return bytes(out)


mode, path = sys.argv[1], sys.argv[2]
b = open(path, "rb").read()
i, out, seen = 0, b"", set()
while i < len(b):
    start = i
    key, i = varint(b, i)
    field, wire = key >> 3, key & 7
    if wire == 0:
        _, i = varint(b, i)
    elif wire == 2:
        n, i = varint(b, i)
        i += n
    elif wire == 1:
        i += 8
    elif wire == 5:
        i += 4
    else:
        sys.exit("unexpected wire type %d" % wire)
    seen.add(field)
    if mode == "status" and field == 3:
        out += enc(key) + enc(7)
    elif mode == "cut" and field > 3:
        continue
    else:
        out += b[start:i]
if 3 not in seen:
    sys.exit("no status field in %s" % path)
open(path, "wb").write(out)
