-- fsdp_overlap.lua: how much of FSDP's communication is exposed on this machine, for the
-- seed's Net (fc1 its own unit under the 20000 policy) on random MNIST-shaped batches:
--   build/moonshard -n 2 bench/fsdp_overlap.lua [steps] [batch]
-- For each configuration (no prefetch / forward + BACKWARD_PRE prefetch, with and without the
-- hook-point progress calls, float32 and bfloat16) rank 0 prints the median step time and the
-- time blocked waiting for collectives per step (fsdp.comm_stats's wait_seconds): the exposed
-- communication. Dropout off, so every configuration computes the same thing.
local ms = require "moonshard"
local F = require "moonshard.functional"
local optim = require "moonshard.optim"
local fsdp = require "moonshard.fsdp"
local comm = require "moonshard.fsdp_comm"
local Net = require "moonshard.seed_net"
local argparse = require "moonshard.argparse"
local dist = ms.distributed

local parser = argparse.ArgumentParser{description = "FSDP's exposed communication on the seed's Net"}
parser:add_argument("steps", {type = "int", nargs = "?", default = 20, min = 1, help = "timed steps"})
parser:add_argument("batch", {type = "int", nargs = "?", default = 64, min = 1, help = "global batch size"})
local args = parser:parse_args(arg)
local STEPS, BATCH = args.steps, args.batch

dist.init_process_group("auto")
local R, W = dist.get_rank(), dist.get_world_size()

local real_progress = comm.progress
local function median(t)
  table.sort(t)
  return t[(#t + 1) // 2]
end

local function run(label, opts, progress)
  comm.progress = progress and real_progress or function() end
  ms.manual_seed(1)
  local net = Net()
  net:eval()
  opts.auto_wrap_policy = fsdp.size_based_auto_wrap_policy{min_num_params = 20000}
  local model = fsdp.FSDP(net, opts)
  local opt = optim.Adadelta(model:parameters(), {lr = 1.0})
  ms.manual_seed(2)
  local b = BATCH // W
  local x, y = ms.randn(b, 1, 28, 28), ms.randint(1, 11, {b})
  local times, waits = {}, {}
  for i = 1, STEPS + 3 do
    dist.barrier()
    fsdp.reset_comm_stats(model)
    local t0 = ms.perf_counter()
    opt:zero_grad()
    F.nll_loss(model(x), y):backward()
    opt:step()
    local t1 = ms.perf_counter()
    if i > 3 then
      times[#times + 1] = t1 - t0
      waits[#waits + 1] = fsdp.comm_stats(model).wait_seconds
    end
  end
  local s = fsdp.comm_stats(model)
  if R == 0 then
    print(("%-44s step %7.2f ms   exposed wait %6.2f ms/step (%4.1f%%)   gathered %.1f MB/step"):format(label,
      1e3 * median(times), 1e3 * median(waits), 100 * median(waits) / median(times), s.allgather_bytes / 1e6))
  end
  comm.progress = real_progress
end

if R == 0 then print(("world %d, batch %d (%d per rank), %d timed steps"):format(W, BATCH, BATCH // W, STEPS)) end
for _, dt in ipairs({"float32", "bfloat16"}) do
  local mp = dt ~= "float32" and {param_dtype = dt} or nil
  run(dt .. " no prefetch, no progress calls", {mixed_precision = mp}, false)
  run(dt .. " no prefetch, progress at hooks", {mixed_precision = mp}, true)
  run(dt .. " prefetch, no progress calls", {mixed_precision = mp, forward_prefetch = true,
    backward_prefetch = "BACKWARD_PRE"}, false)
  run(dt .. " prefetch, progress at hooks", {mixed_precision = mp, forward_prefetch = true,
    backward_prefetch = "BACKWARD_PRE"}, true)
end
dist.destroy_process_group()
