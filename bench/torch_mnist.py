#!/usr/bin/python3
# torch_mnist.py: the seed's model and loop in PyTorch (CPU), to compare with moonshard on the same
# machine: DDP over gloo on N ranks, or one process, each rank printing bench/run.sh's line.
#   /usr/bin/python3 bench/torch_mnist.py --mode ddp --ranks 2 --threads 1 --data data
#   /usr/bin/python3 bench/torch_mnist.py --mode single --threads 2 --data data
# PyTorch's FSDP asks for CUDA, so DDP is its nearest CPU equivalent. Data: MNIST's raw IDX files
# under DATA/MNIST/raw, read with numpy and normalised once (no torchvision, no network). Batches
# are gathered from that tensor by the DistributedSampler's indices: the cheapest input path
# PyTorch offers, so the comparison is not flattered by a slow DataLoader.
import argparse
import contextlib
import gzip
import struct
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.optim.lr_scheduler import StepLR
from torch.utils.data.distributed import DistributedSampler

from torch_launch import end_rank, spawn, vmhwm_kb


class Net(nn.Module):
    """The seed's Net (PyTorch's MNIST example)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


def read_idx(path):
    """An IDX file, raw or gzip-compressed (by its .gz name), as a uint8 array."""
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(root, split):
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(f"{root}/MNIST/raw/{prefix}-images-idx3-ubyte")
    labels = read_idx(f"{root}/MNIST/raw/{prefix}-labels-idx1-ubyte")
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    x = (x - 0.1307) / 0.3081  # ToTensor + Normalize, as the seed's transform
    return x.contiguous(), torch.from_numpy(labels.astype(np.int64))


def batches(x, y, sampler, batch_size):
    idx = torch.tensor(list(sampler), dtype=torch.int64)
    for i in range(0, len(idx), batch_size):
        b = idx[i:i + batch_size]
        yield x[b], y[b]


def run(rank, args):
    torch.set_num_threads(args.threads)
    world = args.ranks if args.mode == "ddp" else 1
    if args.mode == "ddp":
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(args.seed)
    xtr, ytr = load(args.data, "train")
    xte, yte = load(args.data, "test")
    train_sampler = DistributedSampler(range(len(ytr)), num_replicas=world, rank=rank, shuffle=True)
    test_sampler = DistributedSampler(range(len(yte)), num_replicas=world, rank=rank, shuffle=False)

    model = Net()
    if args.mode == "ddp":
        model = DDP(model)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)

    def all_sum(values):
        t = torch.tensor(values, dtype=torch.float64)
        if args.mode == "ddp":
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t.tolist()

    def autocast():
        if args.autocast == "bfloat16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    train_s = test_s = 0.0
    train_n = test_n = 0
    accuracy = 0.0
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        model.train()
        train_sampler.set_epoch(epoch)
        loss_sum, count = 0.0, 0
        for data, target in batches(xtr, ytr, train_sampler, args.batch_size):
            optimizer.zero_grad()
            with autocast():
                loss = F.nll_loss(model(data), target, reduction="sum")
            loss.backward()
            optimizer.step()
            loss_sum, count = loss_sum + loss.item(), count + len(data)
        total = all_sum([loss_sum, count])
        train_n += count
        if rank == 0:
            print(f"Train Epoch: {epoch} \tLoss: {total[0] / total[1]:.6f}", flush=True)
        t1 = time.perf_counter()

        model.eval()
        loss_sum, correct, count = 0.0, 0, 0
        with torch.no_grad():
            for data, target in batches(xte, yte, test_sampler, args.test_batch_size):
                with autocast():
                    output = model(data)
                loss_sum += F.nll_loss(output, target, reduction="sum").item()
                correct += output.argmax(dim=1).eq(target).sum().item()
                count += len(data)
        total = all_sum([loss_sum, correct, count])
        test_n += count
        accuracy = 100.0 * total[1] / total[2]
        if rank == 0:
            print(f"Test set: Average loss: {total[0] / total[2]:.4f}, "
                  f"Accuracy: {int(total[1])}/{int(total[2])} ({accuracy:.2f}%)", flush=True)
        scheduler.step()
        train_s, test_s = train_s + (t1 - t0), test_s + (time.perf_counter() - t1)

    print(f"BENCH-RANK torch rank={rank} world={world} train_s={train_s:.4f} test_s={test_s:.4f} "
          f"train_samples={train_n} test_samples={test_n} vmhwm_kb={vmhwm_kb()} "
          f"accuracy={accuracy:.2f}", flush=True)
    if args.mode == "ddp":
        end_rank()


def main():
    p = argparse.ArgumentParser(description="the seed's MNIST training in PyTorch, for bench/run.sh")
    p.add_argument("--mode", choices=["ddp", "single"], default="ddp")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="torch threads per process")
    p.add_argument("--data", default="data")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--test-batch-size", type=int, default=1000)
    p.add_argument("--lr", type=float, default=1.0)
    p.add_argument("--gamma", type=float, default=0.7)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--autocast", choices=["none", "bfloat16"], default="none",
                   help="run forward and loss under torch.autocast('cpu', bfloat16): PyTorch's CPU "
                        "mixed precision, the nearest to FSDP's param_dtype=bfloat16")
    args = p.parse_args()
    if args.mode == "ddp":
        spawn(run, args, args.ranks)
    else:
        run(0, args)


if __name__ == "__main__":
    main()
