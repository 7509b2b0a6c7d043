#!/usr/bin/python3
# gen_sampler_reference.py: reference index lists for tests/lua/test_samplers.lua, from
# PyTorch 1.13's torch.utils.data.DistributedSampler with shuffle=False (run with
# /usr/bin/python3, which has torch). Every dataset size in SIZES, world size 1..5, every rank,
# drop_last off and on; indices are written 1-based, as moonshard's samplers yield them.
# Writes tests/lua/data/sampler_reference.lua.
import os

import torch
from torch.utils.data import DistributedSampler

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "sampler_reference.lua")
SIZES = [0, 1, 2, 7, 10, 12, 13]
WORLD_SIZES = range(1, 6)


def case(n, replicas, rank, drop_last):
    s = DistributedSampler(range(n), num_replicas=replicas, rank=rank, shuffle=False,
                           drop_last=drop_last)
    indices = [i + 1 for i in s]
    assert len(indices) == len(s)
    return ("  {n = %d, num_replicas = %d, rank = %d, drop_last = %s, len = %d, indices = {%s}},"
            % (n, replicas, rank, "true" if drop_last else "false", len(s),
               ", ".join(map(str, indices))))


def main():
    lines = ["-- sampler_reference.lua: made by gen_sampler_reference.py with PyTorch %s; do not edit."
             % torch.__version__,
             "-- DistributedSampler(range(n), shuffle=False) index lists, 1-based.",
             "return {"]
    for n in SIZES:
        for replicas in WORLD_SIZES:
            for drop_last in (False, True):
                for rank in range(replicas):
                    lines.append(case(n, replicas, rank, drop_last))
    lines.append("}")
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
