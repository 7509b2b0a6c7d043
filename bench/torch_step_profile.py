#!/usr/bin/env python3
# torch_step_profile.py: PyTorch's side of bench/gpu_step_profile.lua: one training step of the
# seed's Net (bench/torch_mnist.py's) on cuda:0, Adadelta, nll_loss(sum), plain and wrapped in
# FSDP (one rank, nccl, the 20000 auto-wrap policy), at batch 64, 256 and 1024: the wall time per
# step once the device has caught up, beside the host's enqueue time (no synchronisation inside
# the loop). Lines match gpu_step_profile.lua's, so scripts/gpu-session.sh reads both alike:
#   plain       B=  64  step 1.922 ms wall, 1.921 ms host enqueue
#   python3 bench/torch_step_profile.py [--steps N]
import argparse
import functools
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_mnist import Net  # noqa: E402  the seed's Net, as the CPU reference defines it


def profile(name, make, batch, steps):
    model = make()
    x = torch.randn(batch, 1, 28, 28, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)

    def step():
        opt.zero_grad()
        F.nll_loss(model(x), y, reduction="sum").backward()
        opt.step()

    for _ in range(20):  # cuDNN's autotuning and the allocator's growth
        step()
    torch.cuda.synchronize()
    n = steps if batch == 64 else steps // 2
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    enqueue = time.perf_counter() - t0
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    print(f"{name:<11s} B={batch:4d}  step {wall / n * 1e3:.3f} ms wall, {enqueue / n * 1e3:.3f} ms host enqueue",
          flush=True)


def main():
    parser = argparse.ArgumentParser(description="Host enqueue and wall time of the seed's training step in PyTorch on cuda:0.")
    parser.add_argument("--steps", type=int, default=200, help="timed steps at batch 64 (half at larger batches)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("torch_step_profile.py: no GPU for PyTorch")
        return
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}", flush=True)
    os.environ.setdefault("MASTER_ADDR", "localhost")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("nccl", rank=0, world_size=1)
    policy = functools.partial(size_based_auto_wrap_policy, min_num_params=20000)
    for batch in (64, 256, 1024):
        profile("plain", lambda: Net().cuda(), batch, args.steps)
        profile("fsdp", lambda: FSDP(Net().cuda(), auto_wrap_policy=policy), batch, args.steps)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
