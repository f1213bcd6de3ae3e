#!/usr/bin/env python3
"""Writes tests/data/graph/packed.{onnx,init.safetensors,data.safetensors} and packed_losses.json: a small graph
with two packed projections (src/model/onnx_packed.c), for the graph executor's test (tests/graph_exec.py).

    x [B, 6] -> MatMul(x, Transpose(qkv.weight [12, 6])) + qkv.bias [12] -> Split 3 -> q, k, v [B, 4]
             (torch's nn.Linear as torch.onnx writes it, packed as GPT-2's c_attn / MultiheadAttention's in_proj)
    h = Tanh(q) * k + v
    MatMul(h, glu.weight [4, 8]) -> Split 2 -> u, z [B, 4]      (no bias, the weight stored [K, 2N])
    y = u * Sigmoid(z);  logits = MatMul(y, head.weight [4, 3]) + head.bias [3]

The ONNX file is written in the protobuf wire format with the standard library (tools/gen_onnx.py's helpers).
The reference losses are those of plain SGD (lr 0.05) on the mean cross entropy, computed here in float64 by
hand-written forward and backward passes of the same arithmetic (no torch on this machine; the derivatives are
the textbook ones: d tanh = 1 - tanh^2, d sigmoid = s(1 - s), d softmax-xent = p - onehot). Deterministic
(a fixed linear congruential generator), so rerunning it rewrites the same bytes.
Usage: python3 tests/gen_packed_model.py [OUTDIR]
"""
import json
import math
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import gen_onnx as g  # noqa: E402

B, SAMPLES, STEPS, LR = 8, 24, 4, 0.05
D, P3, P2, C = 6, 4, 4, 3


class Lcg:
    def __init__(self, seed):
        self.s = seed

    def uniform(self, scale):
        self.s = (self.s * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return scale * (2.0 * ((self.s >> 11) / float(1 << 53)) - 1.0)


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def mat(rng, r, c, scale):
    return [[f32(rng.uniform(scale)) for _ in range(c)] for _ in range(r)]


def flat(m):
    return [v for row in m for v in row] if m and isinstance(m[0], list) else list(m)


def attr_ints(name, vals):
    return g.f_bytes(5, g.f_bytes(1, name) + b"".join(g.f_int(8, v) for v in vals) + g.f_int(20, 7))


def raw(vals):
    return struct.pack("<%df" % len(vals), *vals)


def onnx_bytes(w):
    nodes = [
        g.node("Transpose", ["qkv.weight"], ["wt"], "/qkv/Transpose", attr_ints("perm", [1, 0])),
        g.node("MatMul", ["x", "wt"], ["qkv_mm"], "/qkv/MatMul"),
        g.node("Add", ["qkv.bias", "qkv_mm"], ["qkv_out"], "/qkv/Add"),
        g.node("Split", ["qkv_out"], ["q", "k", "v"], "/Split", g.attr_int("axis", -1)),
        g.node("Tanh", ["q"], ["tq"], "/Tanh"),
        g.node("Mul", ["tq", "k"], ["tk"], "/Mul"),
        g.node("Add", ["tk", "v"], ["h"], "/Add"),
        g.node("MatMul", ["h", "glu.weight"], ["uz"], "/glu/MatMul"),
        g.node("Split", ["uz"], ["u", "z"], "/Split_1", g.attr_int("axis", 1)),
        g.node("Sigmoid", ["z"], ["sz"], "/Sigmoid"),
        g.node("Mul", ["u", "sz"], ["y"], "/Mul_1"),
        g.node("MatMul", ["y", "head.weight"], ["hm"], "/head/MatMul"),
        g.node("Add", ["hm", "head.bias"], ["logits"], "/head/Add"),
    ]
    inits = [g.tensor(n, dims, g.FLOAT, raw(flat(w[n]))) for n, dims in
             (("qkv.weight", [3 * P3, D]), ("qkv.bias", [3 * P3]), ("glu.weight", [P3, 2 * P2]),
              ("head.weight", [P2, C]), ("head.bias", [C]))]
    gr = g.graph(nodes, [g.value_info("x", g.FLOAT, [B, D])], [g.value_info("logits", g.FLOAT, [B, C])], inits,
                 "packed")
    return g.model(gr)


def safetensors(tensors):
    """tensors: [(name, dtype, shape, values)] -> bytes."""
    hdr, body, off = {}, b"", 0
    for name, dt, shape, vals in tensors:
        b = struct.pack("<%d%s" % (len(vals), "f" if dt == "F32" else "q"), *vals)
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
        body += b
        off += len(b)
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + body


def mm(a, b):
    return [[sum(a[i][t] * b[t][j] for t in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]


def tr(a):
    return [list(r) for r in zip(*a)]


def step(w, xs, ys):
    """One SGD step on the batch; returns the mean loss and updates w in place."""
    n = len(xs)
    wt = tr(w["qkv.weight"])
    pre = [[r[j] + w["qkv.bias"][j] for j in range(3 * P3)] for r in mm(xs, wt)]
    q = [r[:P3] for r in pre]
    k = [r[P3:2 * P3] for r in pre]
    v = [r[2 * P3:] for r in pre]
    tq = [[math.tanh(a) for a in r] for r in q]
    h = [[tq[i][j] * k[i][j] + v[i][j] for j in range(P3)] for i in range(n)]
    uz = mm(h, w["glu.weight"])
    u = [r[:P2] for r in uz]
    sz = [[1.0 / (1.0 + math.exp(-a)) for a in r[P2:]] for r in uz]
    y = [[u[i][j] * sz[i][j] for j in range(P2)] for i in range(n)]
    logits = [[r[j] + w["head.bias"][j] for j in range(C)] for r in mm(y, w["head.weight"])]
    loss, dl = 0.0, []
    for i in range(n):
        m = max(logits[i])
        e = [math.exp(a - m) for a in logits[i]]
        s = sum(e)
        loss += -(logits[i][ys[i]] - m - math.log(s))
        dl.append([(e[j] / s - (1.0 if j == ys[i] else 0.0)) / n for j in range(C)])
    g_hw = mm(tr(y), dl)
    g_hb = [sum(dl[i][j] for i in range(n)) for j in range(C)]
    dy = mm(dl, tr(w["head.weight"]))
    du = [[dy[i][j] * sz[i][j] for j in range(P2)] for i in range(n)]
    dz = [[dy[i][j] * u[i][j] * sz[i][j] * (1 - sz[i][j]) for j in range(P2)] for i in range(n)]
    duz = [du[i] + dz[i] for i in range(n)]
    g_glu = mm(tr(h), duz)
    dh = mm(duz, tr(w["glu.weight"]))
    dq = [[dh[i][j] * k[i][j] * (1 - tq[i][j] ** 2) for j in range(P3)] for i in range(n)]
    dk = [[dh[i][j] * tq[i][j] for j in range(P3)] for i in range(n)]
    dpre = [dq[i] + dk[i] + dh[i] for i in range(n)]
    g_qkv = tr(mm(tr(xs), dpre))  # d(x · W^T)/dW = dpre^T · x
    g_qb = [sum(dpre[i][j] for i in range(n)) for j in range(3 * P3)]
    for name, gr in (("qkv.weight", g_qkv), ("qkv.bias", g_qb), ("glu.weight", g_glu), ("head.weight", g_hw),
                     ("head.bias", g_hb)):
        if isinstance(gr[0], list):
            w[name] = [[f32(w[name][i][j] - LR * gr[i][j]) for j in range(len(gr[0]))] for i in range(len(gr))]
        else:
            w[name] = [f32(w[name][j] - LR * gr[j]) for j in range(len(gr))]
    return loss / n


def main(argv):
    out = argv[1] if len(argv) > 1 else os.path.join(HERE, "data", "graph")
    rng = Lcg(21)
    w = {"qkv.weight": mat(rng, 3 * P3, D, 0.6), "qkv.bias": [f32(rng.uniform(0.2)) for _ in range(3 * P3)],
         "glu.weight": mat(rng, P3, 2 * P2, 0.7), "head.weight": mat(rng, P2, C, 0.8),
         "head.bias": [f32(rng.uniform(0.2)) for _ in range(C)]}
    xs = mat(rng, SAMPLES, D, 1.0)
    ys = [int((rng.uniform(1.0) + 1.0) * 1.5) % C for _ in range(SAMPLES)]
    with open(os.path.join(out, "packed.onnx"), "wb") as f:
        f.write(onnx_bytes(w))
    shapes = {"qkv.weight": [3 * P3, D], "qkv.bias": [3 * P3], "glu.weight": [P3, 2 * P2], "head.weight": [P2, C],
              "head.bias": [C]}
    with open(os.path.join(out, "packed.init.safetensors"), "wb") as f:
        f.write(safetensors([(n, "F32", shapes[n], flat(w[n])) for n in shapes]))
    with open(os.path.join(out, "packed.data.safetensors"), "wb") as f:
        f.write(safetensors([("x", "F32", [SAMPLES, D], flat(xs)), ("labels", "I64", [SAMPLES], ys)]))
    losses = []
    for t in range(STEPS):
        idx = [(t * B + j) % SAMPLES for j in range(B)]
        losses.append(step(w, [xs[i] for i in idx], [ys[i] for i in idx]))
    ref = {"steps": STEPS, "gbs": B, "lr": LR, "optimizer": "sgd", "reference": "tests/gen_packed_model.py, float64",
           "losses": losses}
    with open(os.path.join(out, "packed_losses.json"), "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
