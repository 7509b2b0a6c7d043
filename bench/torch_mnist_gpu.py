#!/usr/bin/env python3
# torch_mnist_gpu.py: the seed's FSDP MNIST program in PyTorch on one GPU (FSDP over nccl, one
# rank), the reference bench/gpu_seed.sh measures moonshard's GPU epoch against, in two variants:
#   --variant seed    the program as the seed writes it: torchvision's MNIST, a DataLoader with 2
#                     workers and pinned memory, .to(rank) per batch, loss.item() per step
#   --variant tuned   the data decoded, normalised and kept on the GPU once; batches gathered there
#                     by the DistributedSampler's indices; metrics summed on the device
# Each epoch prints one line: BENCH-EPOCH torch-<variant> epoch=E train_s=.. test_s=.. accuracy=..
#   python3 bench/torch_mnist_gpu.py --variant tuned --epochs 4 --data DIR   (DIR/MNIST/raw: IDX, raw or .gz)
import argparse
import functools
import gzip
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
import torch.optim as optim
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy
from torch.optim.lr_scheduler import StepLR
from torch.utils.data.distributed import DistributedSampler

from torch_mnist import Net, read_idx  # the seed's Net and the IDX reader of the CPU reference


def idx_path(root, name):
    for p in (os.path.join(root, "MNIST", "raw", name), os.path.join(root, "MNIST", "raw", name + ".gz")):
        if os.path.exists(p):
            return p
    raise SystemExit(f"torch_mnist_gpu.py: no {name}[.gz] under {root}/MNIST/raw")


def seed_loaders(args, rank):
    """torchvision's MNIST (it wants the raw files unpacked) and the seed's DataLoaders."""
    from torchvision import datasets, transforms
    raw = os.path.join(args.data, "MNIST", "raw")
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                 "t10k-labels-idx1-ubyte"):
        if not os.path.exists(os.path.join(raw, name)):
            with gzip.open(os.path.join(raw, name + ".gz"), "rb") as src, open(os.path.join(raw, name), "wb") as dst:
                dst.write(src.read())
    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    dataset1 = datasets.MNIST(args.data, train=True, download=False, transform=transform)
    dataset2 = datasets.MNIST(args.data, train=False, transform=transform)
    sampler1 = DistributedSampler(dataset1, rank=rank, num_replicas=1, shuffle=True)
    sampler2 = DistributedSampler(dataset2, rank=rank, num_replicas=1)
    kw = {"num_workers": 2, "pin_memory": True, "shuffle": False}
    train_loader = torch.utils.data.DataLoader(dataset1, batch_size=args.batch_size, sampler=sampler1, **kw)
    test_loader = torch.utils.data.DataLoader(dataset2, batch_size=args.test_batch_size, sampler=sampler2, **kw)
    return train_loader, test_loader, sampler1


class DeviceLoader:
    """Batches gathered on the GPU from the normalised data set by the sampler's indices."""

    def __init__(self, images, labels, batch_size, sampler):
        self.images, self.labels, self.batch_size, self.sampler = images, labels, batch_size, sampler

    def __iter__(self):
        order = torch.tensor(list(iter(self.sampler)), device=self.images.device)
        for i in range(0, len(order), self.batch_size):
            idx = order[i:i + self.batch_size]
            yield self.images[idx], self.labels[idx]


def tuned_loaders(args, rank):
    def load(split):
        x = read_idx(idx_path(args.data, f"{split}-images-idx3-ubyte"))
        y = read_idx(idx_path(args.data, f"{split}-labels-idx1-ubyte"))
        x = torch.from_numpy(x.copy()).to(rank).float().div_(255).sub_(0.1307).div_(0.3081).unsqueeze(1)
        return x, torch.from_numpy(y.astype(np.int64)).to(rank)
    (x1, y1), (x2, y2) = load("train"), load("t10k")
    sampler1 = DistributedSampler(range(len(y1)), rank=rank, num_replicas=1, shuffle=True)
    sampler2 = DistributedSampler(range(len(y2)), rank=rank, num_replicas=1)
    return (DeviceLoader(x1, y1, args.batch_size, sampler1), DeviceLoader(x2, y2, args.test_batch_size, sampler2),
            sampler1)


def train(args, model, rank, loader, optimizer, epoch, sampler):
    model.train()
    ddp_loss = torch.zeros(2).to(rank)
    sampler.set_epoch(epoch)
    for data, target in loader:
        data, target = data.to(rank, non_blocking=True), target.to(rank, non_blocking=True)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target, reduction="sum")
        loss.backward()
        optimizer.step()
        if args.variant == "seed":
            ddp_loss[0] += loss.item()
        else:
            ddp_loss[0] += loss.detach()
        ddp_loss[1] += len(data)
    dist.all_reduce(ddp_loss, op=dist.ReduceOp.SUM)
    return (ddp_loss[0] / ddp_loss[1]).item()


def test(args, model, rank, loader):
    model.eval()
    ddp_loss = torch.zeros(3).to(rank)
    with torch.no_grad():
        for data, target in loader:
            data, target = data.to(rank, non_blocking=True), target.to(rank, non_blocking=True)
            output = model(data)
            pred = output.argmax(dim=1, keepdim=True)
            if args.variant == "seed":
                ddp_loss[0] += F.nll_loss(output, target, reduction="sum").item()
                ddp_loss[1] += pred.eq(target.view_as(pred)).sum().item()
            else:
                ddp_loss[0] += F.nll_loss(output, target, reduction="sum")
                ddp_loss[1] += pred.eq(target.view_as(pred)).sum()
            ddp_loss[2] += len(data)
    dist.all_reduce(ddp_loss, op=dist.ReduceOp.SUM)
    return 100.0 * (ddp_loss[1] / ddp_loss[2]).item()


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--variant", choices=["seed", "tuned"], default="seed")
    p.add_argument("--data", default="data")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--test-batch-size", type=int, default=1000)
    p.add_argument("--lr", type=float, default=1.0)
    p.add_argument("--gamma", type=float, default=0.7)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    os.environ.setdefault("MASTER_ADDR", "localhost")
    os.environ.setdefault("MASTER_PORT", "12356")
    dist.init_process_group("nccl", rank=0, world_size=1)
    rank = 0
    torch.cuda.set_device(rank)
    loaders = seed_loaders if args.variant == "seed" else tuned_loaders
    train_loader, test_loader, sampler1 = loaders(args, rank)
    model = FSDP(Net().to(rank), auto_wrap_policy=functools.partial(size_based_auto_wrap_policy, min_num_params=20000))
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    for epoch in range(1, args.epochs + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = train(args, model, rank, train_loader, optimizer, epoch, sampler1)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        acc = test(args, model, rank, test_loader)
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        print(f"BENCH-EPOCH torch-{args.variant} epoch={epoch} train_s={t1 - t0:.4f} test_s={t2 - t1:.4f} "
              f"loss={loss:.6f} accuracy={acc:.2f}", flush=True)
        scheduler.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
