# torch_launch.py: what the PyTorch references of bench/ (torch_mnist.py, torch_gpt.py) share to
# run on N local ranks: spawning them, ending a gloo rank, and the peak resident memory each
# rank reports.
import os
import socket

import torch.distributed as dist
import torch.multiprocessing as mp


def vmhwm_kb():
    """This process's peak resident memory (VmHWM) in KiB, -1 where /proc has none."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(run, args, nprocs):
    """run(rank, args) on nprocs local processes, with a rendezvous on a free local port."""
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    mp.spawn(run, args=(args,), nprocs=nprocs, join=True)


def end_rank():
    """Ends a gloo rank once its results are printed. Gloo's teardown (destroy_process_group, or
    the interpreter's exit) at times leaves a rank waiting forever once the other has gone; after
    a barrier nothing is left to say."""
    dist.barrier()
    os._exit(0)
