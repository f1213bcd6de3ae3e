#!/usr/bin/python3
"""Makes the structure-only ONNX test models under examples/onnx/ (not run by CI; the files are committed).

Each model is exported from PyTorch in training mode with static shapes (batch 2, sequence 128 for the text
models), do_constant_folding=False (so BatchNorm stays a node), with ONNX's shape inference saved in
value_info, and its weights written as external data whose data file is then deleted: the file keeps every
initializer's name, dims and dtype, and nothing else of the weights (../shared/docs/NOTES.md, "ONNX exports
from PyTorch 1.13"). params.json records, per model, torch's sum of p.numel() over model.parameters(), which
`autopar describe` must reproduce (tests/test_onnx.c).

Needs Debian's python3-torch, python3-torchvision and python3-onnx (run with /usr/bin/python3):
    /usr/bin/python3 tools/onnx_models/make.py [OUT_DIR [MODEL...]]   (default examples/onnx, all five)

GPT-2 and T5 are written here by hand (transformers is not packaged in Debian) with the shapes of
GPT-2 small (Radford et al. 2019; Hugging Face gpt2 config: 12 layers, 12 heads, d 768, vocab 50257, 1024
positions, tied head) and T5-small (Raffel et al. 2020; t5-small config: 6+6 layers, 8 heads, d_model 512,
d_kv 64, d_ff 2048, vocab 32128, 32 relative-position buckets, tied head).
"""
import json
import math
import os
import sys

import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

BATCH = 2
SEQ = 128


# ---- GPT-2 small shaped decoder ----
class GPT2Block(nn.Module):
    def __init__(self, d, heads, n_pos):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d, eps=1e-5)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d, eps=1e-5)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(0.1)
        # a bool buffer, as Hugging Face's GPT-2 keeps its causal mask: not a parameter
        self.register_buffer("causal", torch.tril(torch.ones(n_pos, n_pos, dtype=torch.bool)), persistent=True)

    def forward(self, x):
        b, s, d = x.shape
        h = self.heads
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q = q.view(b, s, h, d // h).transpose(1, 2)
        k = k.view(b, s, h, d // h).transpose(1, 2)
        v = v.view(b, s, h, d // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // h)
        att = att.masked_fill(~self.causal[:s, :s], float("-inf"))
        att = self.drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.drop(self.c_proj(y))
        x = x + self.drop(self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")))
        return x


class GPT2(nn.Module):
    def __init__(self, vocab=50257, n_pos=1024, d=768, layers=12, heads=12):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(n_pos, d)
        self.drop = nn.Dropout(0.1)
        self.h = nn.ModuleList([GPT2Block(d, heads, n_pos) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d, eps=1e-5)

    def forward(self, ids):
        s = ids.shape[1]
        pos = torch.arange(s, dtype=torch.long).unsqueeze(0)
        x = self.drop(self.wte(ids) + self.wpe(pos))
        for blk in self.h:
            x = blk(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied head


# ---- T5-small shaped encoder-decoder ----
class T5Norm(nn.Module):
    """T5's RMS norm: scale only, no mean subtraction, no bias."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


def relative_bucket(rel, bidirectional, buckets=32, max_distance=128):
    out = torch.zeros_like(rel)
    if bidirectional:
        buckets //= 2
        out = out + (rel > 0).long() * buckets
        rel = rel.abs()
    else:
        rel = -torch.min(rel, torch.zeros_like(rel))
    exact = buckets // 2
    small = rel < exact
    large = exact + (torch.log(rel.float() / exact + 1e-6) / math.log(max_distance / exact) * (buckets - exact)).long()
    large = torch.min(large, torch.full_like(large, buckets - 1))
    return out + torch.where(small, rel, large)


class T5Attention(nn.Module):
    def __init__(self, d, heads, d_kv, bias_table, bidirectional):
        super().__init__()
        self.heads, self.d_kv, self.bidirectional = heads, d_kv, bidirectional
        inner = heads * d_kv
        self.q = nn.Linear(d, inner, bias=False)
        self.k = nn.Linear(d, inner, bias=False)
        self.v = nn.Linear(d, inner, bias=False)
        self.o = nn.Linear(inner, d, bias=False)
        self.rel = nn.Embedding(32, heads) if bias_table else None
        if bias_table:
            # the bucket of every (query, key) pair up to SEQ positions, computed once: an int64 buffer (an
            # initializer, not a parameter), so the export does not inline it as large constants
            pos = torch.arange(SEQ, dtype=torch.long)
            self.register_buffer("buckets", relative_bucket(pos[None, :] - pos[:, None], bidirectional), persistent=True)

    def position_bias(self, sq, sk):
        return self.rel(self.buckets[:sq, :sk]).permute(2, 0, 1).unsqueeze(0)

    def forward(self, x, kv, bias, mask):
        b, sq, _ = x.shape
        sk = kv.shape[1]
        h, dk = self.heads, self.d_kv
        q = self.q(x).view(b, sq, h, dk).transpose(1, 2)
        k = self.k(kv).view(b, sk, h, dk).transpose(1, 2)
        v = self.v(kv).view(b, sk, h, dk).transpose(1, 2)
        scores = q @ k.transpose(-2, -1)  # T5 does not scale the scores
        if bias is None and self.rel is not None:
            bias = self.position_bias(sq, sk)
        if bias is not None:
            scores = scores + bias
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        att = F.dropout(F.softmax(scores.float(), dim=-1), 0.1, self.training)
        y = (att @ v).transpose(1, 2).reshape(b, sq, h * dk)
        return self.o(y), bias


class T5Layer(nn.Module):
    def __init__(self, d, heads, d_kv, d_ff, first, decoder):
        super().__init__()
        self.ln_sa = T5Norm(d)
        self.sa = T5Attention(d, heads, d_kv, first, not decoder)
        self.decoder = decoder
        if decoder:
            self.ln_ca = T5Norm(d)
            self.ca = T5Attention(d, heads, d_kv, False, True)
        self.ln_ff = T5Norm(d)
        self.wi = nn.Linear(d, d_ff, bias=False)
        self.wo = nn.Linear(d_ff, d, bias=False)
        self.drop = nn.Dropout(0.1)

    def forward(self, x, bias, enc=None, mask=None):
        y, bias = self.sa(self.ln_sa(x), self.ln_sa(x), bias, mask)
        x = x + self.drop(y)
        if self.decoder:
            y, _ = self.ca(self.ln_ca(x), enc, None, None)
            x = x + self.drop(y)
        x = x + self.drop(self.wo(self.drop(F.relu(self.wi(self.ln_ff(x))))))
        return x, bias


class T5(nn.Module):
    def __init__(self, vocab=32128, d=512, heads=8, d_kv=64, d_ff=2048, layers=6):
        super().__init__()
        self.d = d
        self.shared = nn.Embedding(vocab, d)
        self.enc = nn.ModuleList([T5Layer(d, heads, d_kv, d_ff, i == 0, False) for i in range(layers)])
        self.enc_ln = T5Norm(d)
        self.dec = nn.ModuleList([T5Layer(d, heads, d_kv, d_ff, i == 0, True) for i in range(layers)])
        self.dec_ln = T5Norm(d)
        self.drop = nn.Dropout(0.1)
        self.register_buffer("future", torch.triu(torch.ones(SEQ, SEQ, dtype=torch.bool), diagonal=1), persistent=True)

    def forward(self, ids, dec_ids):
        x = self.drop(self.shared(ids))
        bias = None
        for layer in self.enc:
            x, bias = layer(x, bias)
        enc = self.drop(self.enc_ln(x))
        s = dec_ids.shape[1]
        mask = self.future[:s, :s]
        y = self.drop(self.shared(dec_ids))
        bias = None
        for layer in self.dec:
            y, bias = layer(y, bias, enc, mask)
        y = self.drop(self.dec_ln(y)) * (self.d ** -0.5)  # tied head, rescaled as T5 does
        return F.linear(y, self.shared.weight)


# ---- U-Net (Ronneberger et al. 2015, with BatchNorm and transposed-conv up-sampling) ----
def double_conv(cin, cout):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
        nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNet(nn.Module):
    def __init__(self, cin=3, classes=2, widths=(64, 128, 256, 512, 1024)):
        super().__init__()
        self.inc = double_conv(cin, widths[0])
        self.downs = nn.ModuleList([double_conv(widths[i], widths[i + 1]) for i in range(4)])
        self.ups = nn.ModuleList([nn.ConvTranspose2d(widths[i + 1], widths[i], 2, stride=2) for i in reversed(range(4))])
        self.up_convs = nn.ModuleList([double_conv(widths[i + 1], widths[i]) for i in reversed(range(4))])
        self.outc = nn.Conv2d(widths[0], classes, 1)

    def forward(self, x):
        skips = [self.inc(x)]
        for down in self.downs:
            skips.append(down(F.max_pool2d(skips[-1], 2)))
        y = skips.pop()
        for up, conv in zip(self.ups, self.up_convs):
            y = conv(torch.cat([skips.pop(), up(y)], dim=1))
        return self.outc(y)


def export(name, model, args, input_names, out_dir, opset):
    model.train()
    path = os.path.join(out_dir, name + ".onnx")
    tmp = path + ".full"
    torch.onnx.export(model, args, tmp, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      opset_version=opset, input_names=input_names, output_names=["output"])
    m = onnx.shape_inference.infer_shapes(onnx.load(tmp), data_prop=True)
    os.remove(tmp)
    # External data for the initializers only (node attributes such as Reshape's shape constants stay inline);
    # then the data file is deleted: only names, dims and dtypes remain.
    data = name + ".weights"
    onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location=data,
                    size_threshold=0, convert_attribute=False)
    os.remove(os.path.join(out_dir, data))
    params = sum(p.numel() for p in model.parameters())
    print(f"{name}: {os.path.getsize(path)} bytes, {len(m.graph.node)} nodes, {params} parameters")
    return params


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "examples/onnx"  # then optional model names to remake
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    img = torch.randn(BATCH, 3, 224, 224)
    ids = torch.randint(0, 1000, (BATCH, SEQ))
    counts = {}
    if os.path.exists(os.path.join(out_dir, "params.json")):
        with open(os.path.join(out_dir, "params.json")) as f:
            counts = json.load(f)["params"]
    only = sys.argv[2:]
    want = lambda n: not only or n in only
    if want("resnet50"):
        counts["resnet50"] = export("resnet50", torchvision.models.resnet50(), (img,), ["image"], out_dir, 14)
    if want("vit_b_16"):
        counts["vit_b_16"] = export("vit_b_16", torchvision.models.vit_b_16(), (img,), ["image"], out_dir, 17)
    if want("unet"):
        counts["unet"] = export("unet", UNet(), (torch.randn(BATCH, 3, 256, 256),), ["image"], out_dir, 14)
    if want("gpt2_small"):
        counts["gpt2_small"] = export("gpt2_small", GPT2(), (ids,), ["input_ids"], out_dir, 14)
    if want("t5_small"):
        counts["t5_small"] = export("t5_small", T5(), (ids, ids), ["input_ids", "decoder_input_ids"], out_dir, 14)
    with open(os.path.join(out_dir, "params.json"), "w") as f:
        json.dump({"_source": "tools/onnx_models/make.py: sum(p.numel() for p in model.parameters()) in PyTorch "
                   + torch.__version__, "batch": BATCH, "seq": SEQ, "params": counts}, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
