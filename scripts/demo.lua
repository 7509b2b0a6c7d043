-- demo.lua: a short tour of the engine until the FSDP MNIST training lands: tensors, views,
-- broadcasting, reductions, the packed SGEMM at work, and the memory statistics.
-- Run: build/moonshard scripts/demo.lua [matrix size]
local ms = require "moonshard"
local argparse = require "moonshard.argparse"

local parser = argparse.ArgumentParser{description = "A short tour of the engine: tensors, views, SGEMM, memory"}
parser:add_argument("size", {type = "int", nargs = "?", default = 1024, min = 1, metavar = "N",
                             help = "the size of the square matrices multiplied"})
local n = parser:parse_args(arg).size
ms.manual_seed(1)

local x = ms.arange(1, 7):view(2, 3):float()
print("x =", x)
print("x:t() =", x:t())
print("x + column (broadcast) =", x + ms.tensor({{10}, {20}}))
print("x:sum(2) =", x:sum(2), "x:mean() =", x:mean():item())
local values, indices = x:max(2)
print("x:max(2) =", values, indices)

local a, b = ms.randn(n, n), ms.randn(n, n)
a:mm(b) -- warm-up: the first call packs into fresh buffers
local reps = 5
local t0 = ms.perf_counter()
for _ = 1, reps do a:mm(b) end
local seconds = ms.perf_counter() - t0
print(("sgemm %dx%dx%d on %d thread(s): %.1f GFLOP/s"):format(
  n, n, n, ms.get_num_threads(), 2 * n ^ 3 * reps / seconds / 1e9))

local stats = ms.memory_stats()
print(("memory: %.1f MB held now, %.1f MB at peak, %d allocations"):format(
  stats.current / 2^20, stats.peak / 2^20, stats.allocations))
