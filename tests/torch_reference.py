#!/usr/bin/env python3
"""tests/torch_reference.py: the reference executor (`autopar run`) against PyTorch (issue 11, point 3).

For each of the three shipped tiny models (tests/data/exec/: Llama, GPT-2, Mixtral-style MoE) this script draws
initial weights with torch, writes them as safetensors with Hugging Face names and layouts, writes a uint16 token
file, trains N steps with `autopar run --init ... --data ...` under a one-process plan and under a two-rank plan,
and trains the same model from the same weights and tokens in PyTorch, written here from the Hugging Face
definitions (transformers v4.46 modeling_llama.py, modeling_gpt2.py, modeling_mixtral.py: RMSNorm, rotate-half
RoPE, grouped KV heads, SwiGLU; LayerNorm, learned positions, Conv1D [in, out] weights, gelu_new, tied head;
softmax top-k routing renormalised, no auxiliary loss) with torch.optim.AdamW. The losses of every step must agree
within relative 1e-5 (docs/executor.md, "PyTorch reference").

Standard library + torch only. Not part of `make test` or CI: where torch is absent it says so and exits 0.
Run: python3 tests/torch_reference.py [--bin bin/autopar] [--steps 4]   (Debian: apt-get install python3-torch,
then /usr/bin/python3).
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("torch_reference: skipped: PyTorch is not installed (Debian: apt-get install python3-torch)")
    sys.exit(0)

HERE = os.path.dirname(os.path.abspath(__file__))
GBS, SEQ, LR, B1, B2, EPS, WD = 8, 16, 3e-4, 0.9, 0.95, 1e-8, 0.1


def cfg_get(c, *keys, default=None):
    for k in keys:
        if k in c and c[k] is not None:
            return c[k]
    return default


def init_weights(c, gen):
    """HF names -> tensors (fp32), in the layouts of the HF checkpoints."""
    fam = c["model_type"]
    H = cfg_get(c, "hidden_size", "n_embd")
    L = cfg_get(c, "num_hidden_layers", "n_layer")
    V = c["vocab_size"]
    w = {}

    def rnd(*shape, std=0.02):
        return torch.randn(*shape, generator=gen) * std

    def norm(n):  # not all ones, so that the norm weights' use is tested
        return 1.0 + rnd(n, std=0.1)

    if fam == "gpt2":
        P = c["n_positions"]
        w["wte.weight"] = rnd(V, H)
        w["wpe.weight"] = rnd(P, H)
        for i in range(L):
            p = f"h.{i}."
            w[p + "ln_1.weight"], w[p + "ln_1.bias"] = norm(H), rnd(H)
            w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"] = rnd(H, 3 * H), rnd(3 * H)
            w[p + "attn.c_proj.weight"], w[p + "attn.c_proj.bias"] = rnd(H, H), rnd(H)
            w[p + "ln_2.weight"], w[p + "ln_2.bias"] = norm(H), rnd(H)
            w[p + "mlp.c_fc.weight"], w[p + "mlp.c_fc.bias"] = rnd(H, 4 * H), rnd(4 * H)
            w[p + "mlp.c_proj.weight"], w[p + "mlp.c_proj.bias"] = rnd(4 * H, H), rnd(H)
        w["ln_f.weight"], w["ln_f.bias"] = norm(H), rnd(H)
        return w
    nh, nkv, F = c["num_attention_heads"], c["num_key_value_heads"], c["intermediate_size"]
    hd = H // nh
    w["model.embed_tokens.weight"] = rnd(V, H)
    for i in range(L):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm(H)
        w[p + "self_attn.q_proj.weight"] = rnd(nh * hd, H)
        w[p + "self_attn.k_proj.weight"] = rnd(nkv * hd, H)
        w[p + "self_attn.v_proj.weight"] = rnd(nkv * hd, H)
        w[p + "self_attn.o_proj.weight"] = rnd(H, nh * hd)
        w[p + "post_attention_layernorm.weight"] = norm(H)
        if fam == "mixtral":
            E = c["num_local_experts"]
            w[p + "block_sparse_moe.gate.weight"] = rnd(E, H, std=0.2)
            for e in range(E):
                q = p + f"block_sparse_moe.experts.{e}."
                w[q + "w1.weight"], w[q + "w2.weight"], w[q + "w3.weight"] = rnd(F, H), rnd(H, F), rnd(F, H)
        else:
            w[p + "mlp.gate_proj.weight"] = rnd(F, H)
            w[p + "mlp.up_proj.weight"] = rnd(F, H)
            w[p + "mlp.down_proj.weight"] = rnd(H, F)
    w["model.norm.weight"] = norm(H)
    if not c.get("tie_word_embeddings", False):
        w["lm_head.weight"] = rnd(V, H)
    return w


def write_safetensors(path, tensors):
    """The safetensors format (huggingface/safetensors README: 8-byte little-endian header size, JSON header
    of dtype, shape and data_offsets, then the raw little-endian bytes)."""
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        b = t.contiguous().to(torch.float32).numpy().tobytes() if hasattr(t, "numpy") else bytes(t)
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def rms_norm(x, w, eps):  # LlamaRMSNorm
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def attention(q, k, v):
    """q [B, nh, S, hd], k, v [B, nkv, S, hd]: causal softmax attention with grouped KV heads (repeat_kv)."""
    B, nh, S, hd = q.shape
    rep = nh // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
    mask = torch.ones(S, S, dtype=torch.bool).triu(1)
    s = s.masked_fill(mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def forward(c, p, tokens):
    """Mean token cross entropy of tokens [B, S+1] (inputs then labels shifted by one)."""
    fam = c["model_type"]
    x_tok, y_tok = tokens[:, :-1], tokens[:, 1:]
    B, S = x_tok.shape
    L = cfg_get(c, "num_hidden_layers", "n_layer")
    if fam == "gpt2":
        H, nh, eps = c["n_embd"], c["n_head"], c.get("layer_norm_epsilon", 1e-5)
        hd = H // nh
        x = p["wte.weight"][x_tok] + p["wpe.weight"][:S]
        for i in range(L):
            q_ = f"h.{i}."
            a = torch.nn.functional.layer_norm(x, (H,), p[q_ + "ln_1.weight"], p[q_ + "ln_1.bias"], eps)
            qkv = a @ p[q_ + "attn.c_attn.weight"] + p[q_ + "attn.c_attn.bias"]
            q, k, v = qkv.split(H, dim=-1)
            q, k, v = (t.view(B, S, nh, hd).transpose(1, 2) for t in (q, k, v))
            o = attention(q, k, v).transpose(1, 2).reshape(B, S, H)
            x = x + o @ p[q_ + "attn.c_proj.weight"] + p[q_ + "attn.c_proj.bias"]
            m = torch.nn.functional.layer_norm(x, (H,), p[q_ + "ln_2.weight"], p[q_ + "ln_2.bias"], eps)
            h = torch.nn.functional.gelu(m @ p[q_ + "mlp.c_fc.weight"] + p[q_ + "mlp.c_fc.bias"], approximate="tanh")
            x = x + h @ p[q_ + "mlp.c_proj.weight"] + p[q_ + "mlp.c_proj.bias"]
        x = torch.nn.functional.layer_norm(x, (H,), p["ln_f.weight"], p["ln_f.bias"], eps)
        logits = x @ p["wte.weight"].T
    else:
        H, nh, nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        eps, theta, hd = c.get("rms_norm_eps", 1e-6), c.get("rope_theta", 10000.0), H // nh
        inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
        fr = torch.arange(S).float()[:, None] * inv[None, :]
        emb = torch.cat((fr, fr), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        x = p["model.embed_tokens.weight"][x_tok]
        for i in range(L):
            q_ = f"model.layers.{i}."
            a = rms_norm(x, p[q_ + "input_layernorm.weight"], eps)
            q = (a @ p[q_ + "self_attn.q_proj.weight"].T).view(B, S, nh, hd).transpose(1, 2)
            k = (a @ p[q_ + "self_attn.k_proj.weight"].T).view(B, S, nkv, hd).transpose(1, 2)
            v = (a @ p[q_ + "self_attn.v_proj.weight"].T).view(B, S, nkv, hd).transpose(1, 2)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            o = attention(q, k, v).transpose(1, 2).reshape(B, S, nh * hd)
            x = x + o @ p[q_ + "self_attn.o_proj.weight"].T
            m = rms_norm(x, p[q_ + "post_attention_layernorm.weight"], eps)
            if fam == "mixtral":
                E, K = c["num_local_experts"], c["num_experts_per_tok"]
                flat = m.reshape(-1, H)
                probs = torch.softmax(flat @ p[q_ + "block_sparse_moe.gate.weight"].T, dim=-1)
                wt, sel = torch.topk(probs, K, dim=-1)
                wt = wt / wt.sum(-1, keepdim=True)
                out = torch.zeros_like(flat)
                for e in range(E):
                    e_ = q_ + f"block_sparse_moe.experts.{e}."
                    rows, slot = (sel == e).nonzero(as_tuple=True)
                    if rows.numel() == 0:
                        continue
                    xe = flat[rows]
                    ye = (torch.nn.functional.silu(xe @ p[e_ + "w1.weight"].T) * (xe @ p[e_ + "w3.weight"].T)) @ \
                        p[e_ + "w2.weight"].T
                    out = out.index_add(0, rows, ye * wt[rows, slot][:, None])
                x = x + out.view(B, S, H)
            else:
                g = torch.nn.functional.silu(m @ p[q_ + "mlp.gate_proj.weight"].T) * (m @ p[q_ + "mlp.up_proj.weight"].T)
                x = x + g @ p[q_ + "mlp.down_proj.weight"].T
        x = rms_norm(x, p["model.norm.weight"], eps)
        head = p["lm_head.weight"] if "lm_head.weight" in p else p["model.embed_tokens.weight"]
        logits = x @ head.T
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y_tok.reshape(-1))


def batch(tokens, t):
    """The global batch of step t (docs/executor.md "Data"): sequence j starts at (t·gbs + j)·seq, wrapping."""
    n = len(tokens)
    rows = [[tokens[((t * GBS + j) * SEQ + i) % n] for i in range(SEQ + 1)] for j in range(GBS)]
    return torch.tensor(rows, dtype=torch.int64)


def torch_losses(c, w, tokens, steps):
    p = {k: v.clone().requires_grad_(True) for k, v in w.items()}
    decay = [v for v in p.values() if v.dim() >= 2]
    flat = [v for v in p.values() if v.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": flat, "weight_decay": 0.0}], lr=LR,
                            betas=(B1, B2), eps=EPS)
    out = []
    for t in range(steps):
        opt.zero_grad()
        loss = forward(c, p, batch(tokens, t))
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def autopar_losses(binp, model, init, data, plan, work, steps):
    path = os.path.join(work, "plan.json")
    with open(path, "w") as f:
        json.dump(plan, f)
    r = subprocess.run([binp, "run", "--model", model, "--plan", path, "--steps", str(steps), "--init", init, "--data",
                        data, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"torch_reference: autopar run failed: {r.stderr.strip()}")
    return [s["loss"] for s in json.loads(r.stdout)["steps"]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "bin", "autopar"))
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    plans = {"1 process": {"parallel": {"dp": 1}, "pipeline": {"micro_batch_size": 4}},
             "dp 2": {"parallel": {"dp": 2}, "pipeline": {"micro_batch_size": 2}}}
    worst, failed = 0.0, False
    with tempfile.TemporaryDirectory(prefix="autopar-torch.") as work:
        for name in ("tiny-llama", "tiny-gpt2", "tiny-mixtral"):
            model = os.path.join(HERE, "data", "exec", name + ".json")
            with open(model) as f:
                c = json.load(f)
            gen = torch.Generator().manual_seed(a.seed + len(name))
            w = init_weights(c, gen)
            init = os.path.join(work, name + ".safetensors")
            write_safetensors(init, w)
            n_tok = (a.steps * GBS + 1) * SEQ + 1
            tokens = torch.randint(0, c["vocab_size"], (n_tok,), generator=gen).tolist()
            data = os.path.join(work, name + ".bin")
            with open(data, "wb") as f:
                f.write(struct.pack(f"<{len(tokens)}H", *tokens))
            ref = torch_losses(c, w, tokens, a.steps)
            for pname, pl in plans.items():
                plan = {"global_batch_size": GBS, "seq_length": SEQ, "precision": "fp32", **pl}
                got = autopar_losses(a.bin, model, init, data, plan, work, a.steps)
                rel = max(abs(x - y) / abs(y) for x, y in zip(got, ref))
                worst = max(worst, rel)
                ok = rel <= 1e-5 and len(got) == len(ref)
                failed |= not ok
                print(f"{name:13s} {pname:9s} torch {' '.join(f'{v:.7f}' for v in ref)}")
                print(f"{'':13s} {'':9s} autopar {' '.join(f'{v:.7f}' for v in got)}  max rel {rel:.2e} "
                      f"{'ok' if ok else 'FAIL'}")
    print(f"torch_reference: {'FAIL' if failed else 'ok'}: worst relative loss difference {worst:.2e} "
          f"(limit 1e-5), torch {torch.__version__}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
