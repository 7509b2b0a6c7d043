#!/usr/bin/python3
# gen_gpt_reference.py: reference values for tests/lua/test_gpt.lua from PyTorch 1.13 (run with
# /usr/bin/python3, which has torch): a tiny GPT as nanoGPT writes it (1.13 has no
# scaled_dot_product_attention: the attention is nanoGPT's "slow" path), in float32 with dropout
# 0, its weights, a batch of token ids and targets (one of them -1, ignored), the logits, the loss
# and every parameter's gradient. Writes tests/lua/data/gpt_reference.safetensors, the format
# written by hand (this python has no safetensors package): names have '.' as '__' so that
# ms.load keeps them flat. Token ids are stored 1-based, as moonshard takes them.
import json
import math
import os
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "gpt_reference.safetensors")
CFG = dict(n_layer=2, n_head=2, n_embd=16, block_size=8, vocab_size=11)


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_attn = nn.Linear(c["n_embd"], 3 * c["n_embd"])
        self.c_proj = nn.Linear(c["n_embd"], c["n_embd"])
        self.n_head, self.n_embd = c["n_head"], c["n_embd"]
        bs = c["block_size"]
        self.register_buffer("bias", torch.tril(torch.ones(bs, bs)).view(1, 1, bs, bs))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c["n_embd"])
        self.attn = CausalSelfAttention(c)
        self.ln_2 = nn.LayerNorm(c["n_embd"])
        self.mlp = nn.Sequential()
        self.mlp.add_module("c_fc", nn.Linear(c["n_embd"], 4 * c["n_embd"]))
        self.mlp.add_module("gelu", nn.GELU(approximate="tanh"))
        self.mlp.add_module("c_proj", nn.Linear(4 * c["n_embd"], c["n_embd"]))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c["vocab_size"], c["n_embd"]),
            wpe=nn.Embedding(c["block_size"], c["n_embd"]),
            h=nn.ModuleList([Block(c) for _ in range(c["n_layer"])]),
            ln_f=nn.LayerNorm(c["n_embd"])))
        self.lm_head = nn.Linear(c["n_embd"], c["vocab_size"], bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        # LayerNorm affine parameters away from ones/zeros, so that a mix-up shows
        with torch.no_grad():
            for name, p in self.named_parameters():
                p.normal_(0, 0.02 if "ln_" not in name else 0.3)
                if "ln_" in name and name.endswith("weight"):
                    p.add_(1)

    def forward(self, idx, targets):
        T = idx.size(1)
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(T))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


def flat(name):
    return name.replace(".", "__")


def save(tensors, path):
    """Writes tensors ({name: tensor}) as a safetensors file."""
    header, blobs, offset = {}, [], 0
    codes = {torch.float32: "F32", torch.int64: "I64"}
    for name, t in tensors.items():
        data = t.detach().contiguous().numpy().tobytes()
        header[name] = dict(dtype=codes[t.dtype], shape=list(t.shape), data_offsets=[offset, offset + len(data)])
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def main():
    torch.manual_seed(0)
    model = GPT(CFG)
    idx = torch.randint(0, CFG["vocab_size"], (3, CFG["block_size"]))
    targets = torch.randint(0, CFG["vocab_size"], (3, CFG["block_size"]))
    targets[1, 2] = -1
    out = {}
    for name, p in model.named_parameters():  # the tied weight once, as transformer.wte.weight
        out["param__" + flat(name)] = p.detach().clone()
    logits, loss = model(idx, targets)
    loss.backward()
    for name, p in model.named_parameters():
        out["grad__" + flat(name)] = p.grad
    out["idx"] = idx + 1
    out["targets"] = torch.where(targets >= 0, targets + 1, targets)
    out["logits"] = logits
    out["loss"] = loss.reshape(1)
    save(out, OUT)
    print("wrote", OUT, "loss", loss.item())


if __name__ == "__main__":
    main()
