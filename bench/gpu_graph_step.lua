-- gpu_graph_step.lua: the seed Net's training step on cuda:0, eager and replayed as a CUDA graph
-- (ms.cuda.make_graphed_step), plain and wrapped in FSDP (one rank), at batch 64, 256 and 1024:
-- wall time per step beside the host's enqueue time (docs/cuda-graphs.md). With the graph the
-- host should run far ahead of the device (enqueue << wall) unless the device is idle-bound.
--   build/moonshard bench/gpu_graph_step.lua [--steps N] [--cpu]
local ms = require "moonshard"
local F, optim = require "moonshard.functional", require "moonshard.optim"
local Net = require "moonshard.seed_net"
local fsdp, fw = require "moonshard.fsdp", require "moonshard.fsdp_wrap"
local argparse = require "moonshard.argparse"

local parser = argparse.ArgumentParser { description = "The seed's training step, eager and as a CUDA graph, on cuda:0." }
parser:add_argument("--steps", { type = "int", default = 200, min = 1, metavar = "N", help = "timed steps per case" })
parser:add_argument("--cpu", { action = "store_true", help = "a dry run on the CPU (both columns eager)" })
local args = parser:parse_args(arg)
local DEV = args.cpu and "cpu" or "cuda:0"
if DEV ~= "cpu" and not ms.cuda.is_available() then
  print("gpu_graph_step.lua: no GPU: " .. tostring(ms.cuda.unavailable_reason()))
  os.exit(0)
end
local function sync() if DEV ~= "cpu" then ms.cuda.synchronize() end end

-- ms per step: wall and host enqueue, over `steps` steps after a warm-up of 10.
local function time_steps(step, x, y)
  for _ = 1, 10 do step(x, y) end
  sync()
  local t0 = ms.perf_counter()
  for _ = 1, args.steps do step(x, y) end
  local enq = ms.perf_counter() - t0
  sync()
  local wall = ms.perf_counter() - t0
  return wall / args.steps * 1e3, enq / args.steps * 1e3
end

local function case(name, make, B)
  local out = {}
  for _, graphed in ipairs { false, true } do
    ms.manual_seed(1)
    local model = make()
    local opt = optim.Adadelta(model:parameters(), { lr = 1.0 })
    local step = ms.cuda.make_graphed_step(function(x, y)
      opt:zero_grad()
      local loss = F.nll_loss(model(x), y, { reduction = "sum" })
      loss:backward()
      opt:step()
      return loss:detach()
    end, { enabled = graphed })
    local x, y = ms.randn(B, 1, 28, 28):to(DEV), ms.randint(1, 11, { B }):to(DEV)
    out[#out + 1] = ("%.3f ms (host %.3f)"):format(time_steps(step, x, y))
  end
  print(("%-6s B=%4d  eager %s   graph %s"):format(name, B, out[1], out[2]))
  io.stdout:flush()
end

for _, B in ipairs { 64, 256, 1024 } do case("plain", function() return Net():to(DEV) end, B) end
ms.distributed.init_process_group(DEV == "cpu" and "self" or "auto")
local policy = fw.size_based_auto_wrap_policy { min_num_params = 20000 }
for _, B in ipairs { 64, 256, 1024 } do
  case("fsdp", function() return fsdp.FSDP(Net():to(DEV), { auto_wrap_policy = policy }) end, B)
end
ms.distributed.destroy_process_group()
