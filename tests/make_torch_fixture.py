#!/usr/bin/env python3
"""Writes tests/data/torch_fixture.json: a tiny GPT and a tiny Llama built in PyTorch from the same
seed-derived weights as the harness (validate/model_state.cpp, init_value), with their logits, loss, every
parameter gradient and the losses of several AdamW steps, all in fp32.

Run by developers, not CI:  /usr/bin/python3 tests/make_torch_fixture.py   (Debian's python3-torch)
The model is written out with plain tensor operations, independently of the harness's C++ kernels; only
the weight initialisation and the parameter order are shared, by construction.
"""
import json
import math
import os

import torch
import torch.nn.functional as F

MASK64 = (1 << 64) - 1
SEED = 1234


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def uniform_hash(seed, site, index):
    h = splitmix64(splitmix64(splitmix64(seed) ^ site) ^ index)
    return (h >> 11) * (1.0 / 9007199254740992.0)


def init_value(param_index, name, i):
    if name.endswith(".bias"):
        return 0.0
    if ".ln1." in name or ".ln2." in name or name.startswith("final_norm."):
        return 1.0
    return 0.02 * math.sqrt(12.0) * (uniform_hash(SEED, param_index, i) - 0.5)


def param_shapes(cfg):
    """Parameters in the planner's order (planner/model/param_count.cpp): embeddings, one layer's tensors
    (named layer{}), final norm, untied head."""
    h, f, v = cfg["hidden"], cfg["ffn"], cfg["vocab"]
    hd = h // cfg["heads"]
    qkv = (cfg["heads"] + 2 * cfg["kv_heads"]) * hd
    shapes = [("embed.tokens", (v, h))]
    if cfg["family"] == "gpt":
        shapes.append(("embed.positions", (cfg["max_positions"], h)))
        shapes += [("layer{}.ln1.weight", (h,)), ("layer{}.ln1.bias", (h,)),
                   ("layer{}.attn.qkv.weight", (qkv, h)), ("layer{}.attn.qkv.bias", (qkv,)),
                   ("layer{}.attn.out.weight", (h, h)), ("layer{}.attn.out.bias", (h,)),
                   ("layer{}.ln2.weight", (h,)), ("layer{}.ln2.bias", (h,)),
                   ("layer{}.mlp.fc.weight", (f, h)), ("layer{}.mlp.fc.bias", (f,)),
                   ("layer{}.mlp.proj.weight", (h, f)), ("layer{}.mlp.proj.bias", (h,)),
                   ("final_norm.weight", (h,)), ("final_norm.bias", (h,))]
    else:
        shapes += [("layer{}.ln1.weight", (h,)), ("layer{}.attn.qkv.weight", (qkv, h)),
                   ("layer{}.attn.out.weight", (h, h)), ("layer{}.ln2.weight", (h,)),
                   ("layer{}.mlp.gate.weight", (f, h)), ("layer{}.mlp.up.weight", (f, h)),
                   ("layer{}.mlp.down.weight", (h, f)), ("final_norm.weight", (h,))]
    if not cfg["tied"]:
        shapes.append(("lm_head.weight", (v, h)))
    # The harness orders non-layer tensors first, then layer by layer (validate/model_state.cpp).
    ordered = [(n, s) for n, s in shapes if not n.startswith("layer")]
    for layer in range(cfg["layers"]):
        ordered += [(n.replace("{}", str(layer)), s) for n, s in shapes if n.startswith("layer")]
    return ordered


def make_params(cfg):
    params = {}
    for index, (name, shape) in enumerate(param_shapes(cfg)):
        count = math.prod(shape)
        values = [init_value(index, name, i) for i in range(count)]
        params[name] = torch.tensor(values, dtype=torch.float32).reshape(shape).requires_grad_(True)
    return params


def rope(x, positions, head_dim):
    # Hugging Face rotate_half layout, theta 10000: x' = x cos + rotate_half(x) sin
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    angles = positions[:, None].double() * inv_freq[None, :]
    cos = torch.cat([angles.cos(), angles.cos()], dim=-1).float()
    sin = torch.cat([angles.sin(), angles.sin()], dim=-1).float()
    x1, x2 = x[..., : head_dim // 2], x[..., head_dim // 2:]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def forward(cfg, p, tokens):
    b, s = tokens.shape
    h, a, kv = cfg["hidden"], cfg["heads"], cfg["kv_heads"]
    hd = h // a
    gpt = cfg["family"] == "gpt"
    x = p["embed.tokens"][tokens]
    if gpt:
        x = x + p["embed.positions"][:s][None]
    causal = torch.tril(torch.ones(s, s, dtype=torch.bool))
    for layer in range(cfg["layers"]):
        w = lambda n: p[f"layer{layer}.{n}"]
        if gpt:
            y = F.layer_norm(x, (h,), w("ln1.weight"), w("ln1.bias"), eps=1e-5)
            qkv = F.linear(y, w("attn.qkv.weight"), w("attn.qkv.bias"))
        else:
            y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w("ln1.weight")
            qkv = F.linear(y, w("attn.qkv.weight"))
        q = qkv[..., : a * hd].reshape(b, s, a, hd).transpose(1, 2)
        k = qkv[..., a * hd: (a + kv) * hd].reshape(b, s, kv, hd).transpose(1, 2)
        v = qkv[..., (a + kv) * hd:].reshape(b, s, kv, hd).transpose(1, 2)
        if not gpt:
            pos = torch.arange(s)
            q, k = rope(q, pos, hd), rope(k, pos, hd)
        k = k.repeat_interleave(a // kv, dim=1)
        v = v.repeat_interleave(a // kv, dim=1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
        probs = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        attn = (probs @ v).transpose(1, 2).reshape(b, s, h)
        x = x + F.linear(attn, w("attn.out.weight"), w("attn.out.bias") if gpt else None)
        if gpt:
            y = F.layer_norm(x, (h,), w("ln2.weight"), w("ln2.bias"), eps=1e-5)
            x = x + F.linear(F.gelu(F.linear(y, w("mlp.fc.weight"), w("mlp.fc.bias")), approximate="tanh"),
                             w("mlp.proj.weight"), w("mlp.proj.bias"))
        else:
            y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w("ln2.weight")
            x = x + F.linear(F.silu(F.linear(y, w("mlp.gate.weight"))) * F.linear(y, w("mlp.up.weight")),
                             w("mlp.down.weight"))
    if gpt:
        x = F.layer_norm(x, (h,), p["final_norm.weight"], p["final_norm.bias"], eps=1e-5)
    else:
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * p["final_norm.weight"]
    head = p["embed.tokens"] if cfg["tied"] else p["lm_head.weight"]
    return F.linear(x, head)


def case(cfg, adam_steps=3):
    torch.manual_seed(7)
    b, s = cfg["batch"], cfg["seq"]
    data = torch.randint(0, cfg["vocab"], (b, s + 1))
    tokens, targets = data[:, :s], data[:, 1:]
    p = make_params(cfg)
    logits = forward(cfg, p, tokens)
    loss = F.cross_entropy(logits.reshape(-1, cfg["vocab"]), targets.reshape(-1))
    loss.backward()
    out = dict(config=cfg, tokens=tokens.flatten().tolist(), targets=targets.flatten().tolist(), loss=loss.item(),
               logits=logits.detach().flatten().tolist(),
               grads={n: t.grad.flatten().tolist() for n, t in p.items()})
    # AdamW on the same batch; the losses are those computed before each update.
    p = make_params(cfg)
    opt = torch.optim.AdamW(list(p.values()), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    losses = []
    for _ in range(adam_steps):
        opt.zero_grad(set_to_none=True)
        logits = forward(cfg, p, tokens)
        loss = F.cross_entropy(logits.reshape(-1, cfg["vocab"]), targets.reshape(-1))
        losses.append(loss.item())
        loss.backward()
        opt.step()
    out["adamw_losses"] = losses
    return out


def main():
    gpt = dict(family="gpt", layers=2, hidden=16, heads=2, kv_heads=2, ffn=64, vocab=32, max_positions=8, tied=True,
               batch=2, seq=8)
    llama = dict(family="llama", layers=2, hidden=16, heads=4, kv_heads=2, ffn=40, vocab=32, max_positions=0,
                 tied=False, batch=2, seq=8)
    fixture = dict(source="tests/make_torch_fixture.py, torch " + torch.__version__, seed=SEED,
                   cases=[case(gpt), case(llama)])
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "torch_fixture.json")
    with open(path, "w") as fh:
        json.dump(fixture, fh, separators=(",", ":"))
    print("wrote", path, [c["loss"] for c in fixture["cases"]])


if __name__ == "__main__":
    main()
