#!/usr/bin/python3
# torch_gpt.py: scripts/gpt_fsdp.lua's model and loop in PyTorch (CPU), to compare with moonshard on
# the same machine: DDP over gloo on N ranks (PyTorch 1.13's FSDP asks for CUDA), or one process
# with N threads (--ranks 1 --threads N: on 2 cores its faster bfloat16 configuration, the gloo
# all-reduce of float32 gradients costing DDP a third). The same GPT-2 (pre-LayerNorm blocks, causal attention as
# PyTorch 1.13 writes it without a fused op, GELU(tanh), tied head, GPT-2's init), byte vocabulary,
# AdamW with nanoGPT's weight-decay groups, gradient clipping, random windows of a token file or of
# random bytes. Each rank prints one BENCH-RANK line: tokens/s over the timed steps and VmHWM.
#   /usr/bin/python3 bench/torch_gpt.py --ranks 2 --n-layer 12 --n-embd 768 --n-head 12 \
#       --block-size 256 --batch-size 4 --steps 6
import argparse
import contextlib
import math
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from torch_launch import end_rank, spawn, vmhwm_kb


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd)
        self.c_proj = nn.Linear(c.n_embd, c.n_embd)
        self.attn_dropout = nn.Dropout(c.dropout)
        self.resid_dropout = nn.Dropout(c.dropout)
        self.n_head = c.n_head
        # a plain attribute, not a buffer: gloo cannot broadcast bool tensors (DDP's buffer sync)
        self.mask = torch.tril(torch.ones(c.block_size, c.block_size, dtype=torch.bool)).view(
            1, 1, c.block_size, c.block_size)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c.n_embd)
        self.attn = CausalSelfAttention(c)
        self.ln_2 = nn.LayerNorm(c.n_embd)
        self.c_fc = nn.Linear(c.n_embd, 4 * c.n_embd)
        self.c_proj = nn.Linear(4 * c.n_embd, c.n_embd)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        h = F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")
        return x + self.dropout(self.c_proj(h))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wte = nn.Embedding(c.vocab_size, c.n_embd)
        self.wpe = nn.Embedding(c.block_size, c.n_embd)
        self.drop = nn.Dropout(c.dropout)
        self.h = nn.ModuleList([Block(c) for _ in range(c.n_layer)])
        self.ln_f = nn.LayerNorm(c.n_embd)
        self.lm_head = nn.Linear(c.n_embd, c.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * c.n_layer))

    def forward(self, idx, targets):
        T = idx.size(1)
        x = self.drop(self.wte(idx) + self.wpe(torch.arange(T)))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def tokens_of(args):
    if args.tokens:  # llm.c's layout: a 256 x int32 header, then uint16 tokens
        return torch.from_numpy(np.fromfile(args.tokens, dtype=np.uint16, offset=1024).astype(np.int64))
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, args.vocab_size, (1 << 20,), generator=g)


def run(rank, args):
    torch.set_num_threads(args.threads)
    world = args.ranks
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(args.seed)
    model = GPT(args)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    if world > 1:
        model = DDP(model)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    data = tokens_of(args)
    torch.manual_seed(args.seed + 1 + rank)

    def autocast():
        if args.autocast == "bfloat16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def step():
        starts = torch.randint(0, data.numel() - args.block_size - 1, (args.batch_size,))
        x = torch.stack([data[s:s + args.block_size] for s in starts.tolist()])
        y = torch.stack([data[s + 1:s + 1 + args.block_size] for s in starts.tolist()])
        with autocast():
            loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    for _ in range(args.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    seconds = time.perf_counter() - t0
    tokens = args.steps * args.batch_size * args.block_size
    print(f"BENCH-RANK torch_gpt rank={rank} world={world} params={n_params} steps={args.steps} "
          f"seconds={seconds:.4f} tokens_per_s={tokens / seconds:.1f} loss={loss:.4f} "
          f"vmhwm_kb={vmhwm_kb()}", flush=True)
    if world > 1:
        end_rank()


def main():
    p = argparse.ArgumentParser(description="scripts/gpt_fsdp.lua's GPT in PyTorch, for bench/gpt_bench.sh")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="torch threads per process")
    p.add_argument("--n-layer", type=int, default=12)
    p.add_argument("--n-head", type=int, default=12)
    p.add_argument("--n-embd", type=int, default=768)
    p.add_argument("--block-size", type=int, default=256)
    p.add_argument("--vocab-size", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=4, help="sequences per step and rank")
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--steps", type=int, default=5, help="timed steps")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    p.add_argument("--tokens", help="an llm.c .bin token file (default: random bytes)")
    p.add_argument("--autocast", choices=["none", "bfloat16"], default="none")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if args.ranks > 1:
        spawn(run, args, args.ranks)
    else:
        run(0, args)


if __name__ == "__main__":
    main()
