#!/usr/bin/env python3
"""tests/torch_graph_reference.py: the graph executor (`autopar run --model NET.onnx`) against PyTorch (issue 21, 5).

Three modules written here in PyTorch: an MLP, a small CNN with branches and a concat of 5 inputs (Conv,
BatchNormalization in training mode, MaxPool, AveragePool, GlobalAveragePool), and a small transformer encoder
with a classification head (nn.TransformerEncoderLayer: packed in_proj weights sliced, LayerNorm decomposed,
GELU as Erf, Dropout nodes with ratio 0, Transposes), each exported as users export,
`torch.onnx.export(..., training=TrainingMode.TRAINING, do_constant_folding=False)` at the default opset. The
script draws the batches, writes them (one tensor per graph input, samples on the leading axis, and `labels`)
and the initial weights as safetensors, plans each model with `autopar plan --model NET.onnx --export json -o`,
trains N steps with `autopar run` on that one-device plan, and trains the module from the same weights on the
same batches in PyTorch (mean cross entropy over the global batch; AdamW with decay on tensors of 2+ dims as the
executor applies it, or plain SGD). Every step's loss must agree within relative 1e-5.

With --ranks N the planner's own plan on N devices (`plan --cluster h100:N`; at these sizes it replicates every
op) runs too and must equal PyTorch; tests/graph_exec.py runs every plan kind against the serial run.

Standard library + torch + onnx (Debian python3-torch, python3-onnx; /usr/bin/python3). Not part of `make test`
or CI's required path: where torch is absent it says so and exits 0.
Run: /usr/bin/python3 tests/torch_graph_reference.py [--bin bin/autopar] [--steps 4] [--keep DIR]
With --keep DIR the models, data, weights and PyTorch's losses (torch_losses.json) stay in DIR: the fixtures of
tests/data/graph/ are `--keep tests/data/graph` (then delete its plan files), which tests/sh_graph_exec.sh runs
in `make test` without torch.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.nn as nn
except ImportError:
    print("torch_graph_reference: skipped: PyTorch is not installed (Debian: apt-get install python3-torch python3-onnx)")
    sys.exit(0)

HERE = os.path.dirname(os.path.abspath(__file__))
LR, B1, B2, EPS, WD = 3e-3, 0.9, 0.95, 1e-8, 0.1


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(12, 32), nn.Linear(32, 24), nn.Linear(24, 5)

    def forward(self, x):
        return self.fc3(torch.tanh(self.fc2(torch.relu(self.fc1(x)))))


class CNN(nn.Module):
    """A stem, five branches concatenated on channels (1x1, 3x3, 5x5 convs, an average pool and a max pool
    branch), then BN, ReLU, global average pool and a linear head."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn0 = nn.BatchNorm2d(8)
        self.b1 = nn.Conv2d(8, 4, 1)
        self.b2 = nn.Conv2d(8, 4, 3, padding=1)
        self.b3 = nn.Conv2d(8, 2, 5, padding=2)
        self.b4 = nn.Conv2d(8, 3, 1)
        self.b5 = nn.Conv2d(8, 3, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.down = nn.Conv2d(16, 8, 3, stride=2, padding=1)
        self.head = nn.Linear(8, 6)

    def forward(self, x):
        x = torch.relu(self.bn0(self.stem(x)))
        x = nn.functional.max_pool2d(x, 2)
        y = torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(nn.functional.avg_pool2d(x, 3, 1, 1, count_include_pad=False)),
                       self.b5(nn.functional.max_pool2d(x, 3, 1, 1))], dim=1)
        y = torch.relu(self.bn1(y))
        y = torch.relu(self.down(y))
        y = nn.functional.adaptive_avg_pool2d(y, 1).flatten(1)
        return self.head(y)


class Encoder(nn.Module):
    def __init__(self, V=24, S=6, d=16, heads=2, C=4):
        super().__init__()
        self.emb = nn.Embedding(V, d)
        self.pos = nn.Parameter(torch.randn(1, S, d) * 0.1)
        layer = nn.TransformerEncoderLayer(d, heads, 32, dropout=0.0, activation="gelu", batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(d, C)

    def forward(self, tokens):
        return self.head(self.enc(self.emb(tokens) + self.pos).mean(dim=1))


def make_case(name, gen, n_samples):
    if name == "mlp":
        m, x, C = MLP(), torch.randn(n_samples, 12, generator=gen), 5
        return m, {"x": x}, torch.randint(0, C, (n_samples,), generator=gen), "sgd"
    if name == "cnn":
        m, x = CNN(), torch.randn(n_samples, 3, 8, 8, generator=gen)
        return m, {"x": x}, torch.randint(0, 6, (n_samples,), generator=gen), "adamw"
    m = Encoder()
    return m, {"tokens": torch.randint(0, 24, (n_samples, 6), generator=gen)}, \
        torch.randint(0, 4, (n_samples,), generator=gen), "adamw"


def write_safetensors(path, tensors):
    """name -> tensor; F32, or I64 for integer tensors (the safetensors README's format)."""
    header, blobs, off = {}, [], 0
    for k, t in tensors.items():
        t = t.detach().contiguous()
        if t.dtype in (torch.int64, torch.int32):
            b, dt = t.to(torch.int64).numpy().tobytes(), "I64"
        else:
            b, dt = t.to(torch.float32).numpy().tobytes(), "F32"
        header[k] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def torch_losses(model, inputs, labels, gbs, steps, opt_name):
    if opt_name == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=LR)
    else:
        decay = [p for p in model.parameters() if p.dim() >= 2]
        rest = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": rest, "weight_decay": 0.0}],
                                lr=LR, betas=(B1, B2), eps=EPS)
    n = labels.shape[0]
    out = []
    for t in range(steps):
        idx = torch.tensor([(t * gbs + j) % n for j in range(gbs)])
        opt.zero_grad()
        y = model(*[v[idx] for v in inputs.values()])
        loss = nn.functional.cross_entropy(y, labels[idx])
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("torch_graph_reference: %s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
    return p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "bin", "autopar"))
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--gbs", type=int, default=8)
    ap.add_argument("--ranks", type=int, default=0, help="also run the data-parallel plan on this many ranks")
    ap.add_argument("--cases", default="mlp,cnn,encoder")
    ap.add_argument("--keep", help="write the models, data and plans here (default: a temporary folder)")
    a = ap.parse_args()
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1234)
    work = a.keep or tempfile.mkdtemp(prefix="torch-graph-ref.")
    os.makedirs(work, exist_ok=True)
    worst, failed, record = 0.0, [], {"steps": a.steps, "gbs": a.gbs, "lr": LR, "beta1": B1, "beta2": B2, "eps": EPS,
                                       "weight_decay": WD, "torch": torch.__version__, "models": {}}
    for name in a.cases.split(","):
        model, inputs, labels, opt_name = make_case(name, gen, 3 * a.gbs)
        model.train()
        onnx_path = os.path.join(work, name + ".onnx")
        ex = tuple(v[: a.gbs] for v in inputs.values())
        torch.onnx.export(model, ex, onnx_path, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=list(inputs), output_names=["logits"])
        state = {k: v.clone() for k, v in model.state_dict().items()}
        data = dict(inputs)
        data["labels"] = labels
        write_safetensors(os.path.join(work, name + ".data.safetensors"), data)
        write_safetensors(os.path.join(work, name + ".init.safetensors"),
                          {k: v for k, v in model.named_parameters()})
        ref = torch_losses(model, inputs, labels, a.gbs, a.steps, opt_name)
        record["models"][name] = {"optimizer": opt_name, "losses": ref}
        model.load_state_dict(state)
        runs = [1] + ([a.ranks] if a.ranks > 1 else [])
        for n_dev in runs:
            plan = os.path.join(work, "%s.plan%d.json" % (name, n_dev))
            run([a.bin, "plan", "--model", onnx_path, "--cluster", "h100:%d" % n_dev, "--gbs", str(a.gbs),
                 "--export", "json", "-o", plan])
            cmd = [a.bin, "run", "--model", onnx_path, "--plan", plan, "--data",
                   os.path.join(work, name + ".data.safetensors"), "--init",
                   os.path.join(work, name + ".init.safetensors"), "--steps", str(a.steps), "--lr", str(LR),
                   "--optimizer", opt_name, "--json"]
            if opt_name == "adamw":
                cmd += ["--beta1", str(B1), "--beta2", str(B2), "--eps", str(EPS), "--weight-decay", str(WD)]
            got = [s["loss"] for s in json.loads(run(cmd))["steps"]]
            rel = max(abs(g - r) / max(abs(r), 1e-12) for g, r in zip(got, ref))
            worst = max(worst, rel)
            ok = rel <= 1e-5
            print("torch_graph_reference: %-8s %d rank(s) %-5s max rel %.2e  autopar %s  torch %s" %
                  (name, n_dev, opt_name, rel, " ".join("%.6f" % x for x in got), " ".join("%.6f" % x for x in ref)))
            if not ok:
                failed.append("%s on %d rank(s)" % (name, n_dev))
    if a.keep:  # the fixture tests/sh_graph_exec.sh checks the serial run against (tests/data/graph/)
        with open(os.path.join(work, "torch_losses.json"), "w") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
    if failed:
        print("torch_graph_reference: FAILED (relative 1e-5): " + ", ".join(failed))
        return 1
    print("torch_graph_reference: ok (worst relative difference %.2e)" % worst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
