-- mpi_progress.lua: does a non-blocking all-gather progress while a rank computes without
-- calling MPI? The evidence behind FSDP's progress calls (engine/src/fsdp/flat_param_comm.c):
--   build/moonshard -n 2 bench/mpi_progress.lua [MB]
-- Each rank issues an all-gather of MB megabytes (fc1's 4.7 MB by default), computes for about
-- as long as the gather takes alone (matmuls), then waits; rank 0 prints, as medians over 30
-- tries, the gather alone, the wait left after computing with no MPI call, and the wait left
-- when the computation tests the request between its matmuls (every ~1 ms or every ~10 ms).
local ms = require "moonshard"
local argparse = require "moonshard.argparse"
local dist = ms.distributed

local parser = argparse.ArgumentParser{description = "Does a non-blocking all-gather progress while a rank computes?"}
parser:add_argument("mb", {type = "float", nargs = "?", default = 4.72, min = 0, metavar = "MB",
                           help = "megabytes gathered (fc1's 4.7 MB)"})
local MB = parser:parse_args(arg).mb

dist.init_process_group("auto")
local R, W = dist.get_rank(), dist.get_world_size()
local TRIES = 30
local n = math.floor(MB * 1e6 / 4 / W)
local shard, out = ms.randn(n), ms.empty({n * W})
local a, b = ms.randn(128, 128), ms.randn(128, 128)

local function median(t)
  table.sort(t)
  return t[(#t + 1) // 2]
end

-- ~k ms of matmuls, testing h every `every` matmuls (0: never).
local unit_ms
local function compute(ms_target, h, every)
  local reps = math.max(1, math.floor(ms_target / unit_ms))
  for i = 1, reps do
    local _ = a:matmul(b)
    if h and every > 0 and i % every == 0 then h:is_completed() end
  end
end

-- calibrate one matmul
local t0 = ms.perf_counter()
for _ = 1, 200 do local _ = a:matmul(b) end
unit_ms = (ms.perf_counter() - t0) * 1e3 / 200

local function gather_alone()
  dist.barrier()
  local t = ms.perf_counter()
  dist.all_gather_into_tensor(out, shard)
  return (ms.perf_counter() - t) * 1e3
end

local alone = {}
for _ = 1, TRIES do alone[#alone + 1] = gather_alone() end
local base = median(alone)
local work_ms = math.max(20, 4 * base)

-- The wait left after computing (from a first test to completion), and whether that test found
-- the gather done.
local function overlapped(every_ms)
  dist.barrier()
  local t0 = ms.perf_counter()
  local h = dist.all_gather_into_tensor(out, shard, {async_op = true})
  local issue = (ms.perf_counter() - t0) * 1e3
  compute(work_ms, h, every_ms > 0 and math.max(1, math.floor(every_ms / unit_ms)) or 0)
  local t = ms.perf_counter() -- the first test may itself move the data: it counts as waiting
  local done = h:is_completed()
  h:wait()
  return (ms.perf_counter() - t) * 1e3, done, issue
end

local res, done_frac, issue_ms = {}, {}, {}
for _, every in ipairs({0, 10, 1}) do
  local w, d, iss = {}, 0, {}
  for _ = 1, TRIES do
    local x, done, issue = overlapped(every)
    w[#w + 1], d, iss[#iss + 1] = x, d + (done and 1 or 0), issue
  end
  res[every], done_frac[every], issue_ms[every] = median(w), d / TRIES, median(iss)
end
if R == 0 then
  print(("world %d, %.2f MB gathered, one 128x128 matmul %.3f ms, %.1f ms of compute per try"):format(W,
    n * W * 4 / 1e6, unit_ms, work_ms))
  print(("all-gather alone:                     %6.2f ms"):format(base))
  for _, k in ipairs({0, 10, 1}) do
    print(("%-30s issue %5.2f ms, wait %5.2f ms, done at the first test after compute in %3.0f%% of tries"):format(
      k == 0 and "compute with no MPI calls:" or ("compute testing every %d ms:"):format(k), issue_ms[k], res[k],
      100 * done_frac[k]))
  end
end
dist.destroy_process_group()
