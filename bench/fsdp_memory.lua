-- fsdp_memory.lua: where a rank's memory goes when FSDP trains a model of N x Linear(W, W) with
-- Adam (issue 19's case: 12 x Linear(2048, 2048), 50.4M parameters), each Linear its own unit:
--   build/moonshard -n 2 bench/fsdp_memory.lua [--layers 12] [--width 2048] [--steps 5] [--strategy FULL_SHARD]
-- Each rank prints its process peak (VmHWM), the engine's peak of live bytes, the bytes the block
-- cache holds at the end, and the median step time; rank 0 prints fsdp.memory_report.
local ms = require "moonshard"
local nn = require "moonshard.nn"
local optim = require "moonshard.optim"
local fsdp = require "moonshard.fsdp"
local argparse = require "moonshard.argparse"
local dist = ms.distributed

local parser = argparse.ArgumentParser{description = "FSDP's memory per rank on a stack of Linear layers"}
parser:add_argument("--layers", {type = "int", default = 12, min = 1, help = "Linear layers"})
parser:add_argument("--width", {type = "int", default = 2048, min = 1, help = "their width"})
parser:add_argument("--batch", {type = "int", default = 64, min = 1, help = "rows per rank"})
parser:add_argument("--steps", {type = "int", default = 5, min = 1, help = "timed steps (after 2 warm-up)"})
parser:add_argument("--strategy", {default = "FULL_SHARD", help = "sharding strategy"})
local args = parser:parse_args(arg)

dist.init_process_group("auto")
local R, W = dist.get_rank(), dist.get_world_size()

local function vmhwm_mb() return ms.memory_stats().process_peak / 2 ^ 20 end

ms.manual_seed(1)
local layers = {}
for i = 1, args.layers do layers[i] = nn.Linear(args.width, args.width) end
local net = nn.Sequential(table.unpack(layers))
local model = fsdp.FSDP(net, {sharding_strategy = args.strategy,
  auto_wrap_policy = fsdp.size_based_auto_wrap_policy{min_num_params = args.width * args.width}})
local opt = optim.Adam(model:parameters(), {lr = 1e-4})
local x = ms.randn(args.batch, args.width)
local times = {}
for i = 1, args.steps + 2 do
  dist.barrier()
  local t0 = ms.perf_counter()
  opt:zero_grad()
  model(x):pow(2):mean():backward()
  opt:step()
  if i > 2 then times[#times + 1] = ms.perf_counter() - t0 end
end
table.sort(times)
local s = ms.memory_stats()
if R == 0 then print(tostring(fsdp.memory_report(model, opt))) end
dist.barrier()
io.write(("BENCH-RANK fsdp_memory rank=%d world=%d strategy=%s vmhwm_mb=%.0f engine_peak_mb=%.0f cached_mb=%.0f step_s=%.3f\n")
  :format(R, W, args.strategy, vmhwm_mb(), s.peak / 2^20, (s.cached or 0) / 2^20, times[(#times + 1) // 2]))
dist.destroy_process_group()
