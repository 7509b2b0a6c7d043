-- comm_bench.lua: all_gather_into_tensor and reduce_scatter_tensor (float32, the collectives FSDP
-- issues) from 1 KB to 64 MB between the launched ranks, printed by rank 0 as bench/run.sh's
-- "BENCH comm ..." lines. Run: build/moonshard -n 2 bench/comm_bench.lua [--quick] [--copy1 GB/s]
local ms = require "moonshard"
local argparse = require "moonshard.argparse"
local dist = ms.distributed

local parser = argparse.ArgumentParser{description = "all_gather and reduce_scatter bandwidth between the ranks"}
parser:add_argument("--quick", {action = "store_true", help = "fewer, shorter samples"})
parser:add_argument("--copy1", {type = "float", metavar = "GB/s",
                                help = "one core's copy rate (sgemm_bench --peak), for pct_peak"})
local args = parser:parse_args(arg)
local quick, copy1 = args.quick, args.copy1

dist.init_process_group("mpi")
local rank, world = dist.get_rank(), dist.get_world_size()

local SAMPLE_S = quick and 0.005 or 0.05
local SAMPLES = quick and 3 or 9

local function median(xs)
  table.sort(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) // 2] or (xs[n // 2] + xs[n // 2 + 1]) / 2
end

-- Seconds per call, median of samples. The ranks agree on the inner count (rank 0's, broadcast)
-- so every rank issues the same collectives; the collectives themselves keep the ranks in step.
local function time_collective(fn)
  fn()
  dist.barrier()
  local t0 = ms.perf_counter()
  fn()
  local n = ms.tensor({ math.max(1, math.floor(SAMPLE_S / math.max(ms.perf_counter() - t0, 1e-7))) })
  dist.broadcast(n, { src = 0 })
  local inner = math.tointeger(n:item())
  local samples = {}
  for s = 1, SAMPLES do
    dist.barrier()
    t0 = ms.perf_counter()
    for _ = 1, inner do fn() end
    samples[s] = (ms.perf_counter() - t0) / inner
  end
  return median(samples)
end

-- Bandwidths as nccl-tests defines them: algbw = size / time, busbw = algbw * (n - 1) / n, the
-- bytes each rank must receive per second. pct_peak compares busbw with one core's memcpy rate
-- (copy1 / 2, copy1 counting bytes read plus written): a rank must at least copy in what it gets.
local function report(name, bytes, s)
  if rank ~= 0 then return end
  local busbw = bytes / s / 1e9 * (world - 1) / world
  local pct = copy1 and ("%.1f"):format(100 * busbw / (copy1 / 2)) or "n/a"
  print(("BENCH comm %s/%dB/r%d gbs=%.3f pct_peak=%s ms=%.4f algbw=%.3f"):format(
    name, bytes, world, busbw, pct, s * 1e3, bytes / s / 1e9))
  io.stdout:flush()
end

if rank == 0 then
  print(("# comm_bench: %d ranks, float32, size = the gathered (all-gather) or reduced (reduce-scatter) tensor"):format(world))
end
local size = 1024
while size <= 64 * 1024 * 1024 do
  local n = size // 4
  local shard = n // world
  local full, part = ms.randn(shard * world), ms.randn(shard)
  report("all_gather", shard * world * 4, time_collective(function() dist.all_gather_into_tensor(full, part) end))
  report("reduce_scatter", shard * world * 4, time_collective(function() dist.reduce_scatter_tensor(part, full) end))
  full, part = nil, nil
  collectgarbage()
  size = size * (quick and 16 or 4)
end
dist.destroy_process_group()
