-- gpu_step_profile.lua: where a training step of the seed's Net on cuda:0 spends its time, as the
-- host sees it: per phase (forward with the loss, backward, zero_grad + optimizer step), the
-- host's enqueue time with no synchronization inside the loop, then the wall time once the
-- device has caught up. Plain and wrapped in FSDP (one rank), float32 and FSDP bfloat16, at
-- batch 64, 256 and 1024. If enqueue equals wall, the host is the bottleneck (or something waits
-- for the device); if wall is larger, the device is.
--   build/moonshard bench/gpu_step_profile.lua [--steps N]
local ms = require "moonshard"
local F, optim = require "moonshard.functional", require "moonshard.optim"
local Net = require "moonshard.seed_net"
local fsdp, fw = require "moonshard.fsdp", require "moonshard.fsdp_wrap"
local dist = ms.distributed

if not ms.cuda.is_available() then
  print("gpu_step_profile.lua: no GPU: " .. tostring(ms.cuda.unavailable_reason()))
  os.exit(0)
end
local steps = 200
for i = 1, #arg do if arg[i] == "--steps" then steps = math.tointeger(tonumber(arg[i + 1])) or steps end end

local clock = ms.perf_counter

local function profile(name, make, B)
  local model = make()
  local x, y = ms.randn(B, 1, 28, 28):cuda(), ms.randint(1, 11, { B }):cuda()
  local opt = optim.Adadelta(model:parameters(), { lr = 1.0 })
  local t = { fwd = 0, bwd = 0, opt = 0 }
  local function step(timed)
    local t0 = clock()
    local loss = F.nll_loss(model(x), y, { reduction = "sum" })
    local t1 = clock()
    loss:backward()
    local t2 = clock()
    opt:zero_grad()
    opt:step()
    local t3 = clock()
    if timed then t.fwd, t.bwd, t.opt = t.fwd + t1 - t0, t.bwd + t2 - t1, t.opt + t3 - t2 end
  end
  for _ = 1, 20 do step(false) end
  ms.cuda.synchronize()
  local n = B == 64 and steps or steps // 2
  local s0 = clock()
  for _ = 1, n do step(true) end
  local enq = clock() - s0
  ms.cuda.synchronize()
  local wall = clock() - s0
  local ms_ = function(v) return v / n * 1e3 end
  print(("%-11s B=%4d  step %.3f ms wall, %.3f ms host enqueue (forward+loss %.3f, backward %.3f, optimizer %.3f)"):format(
    name, B, ms_(wall), ms_(enq), ms_(t.fwd), ms_(t.bwd), ms_(t.opt)))
  io.stdout:flush()
end

local policy = fw.size_based_auto_wrap_policy { min_num_params = 20000 }
local bf16 = { param_dtype = "bfloat16", reduce_dtype = "bfloat16", buffer_dtype = "bfloat16" }
dist.init_process_group("auto")
for _, B in ipairs { 64, 256, 1024 } do
  profile("plain", function() return Net():to("cuda:0") end, B)
  profile("fsdp", function() return fsdp.FSDP(Net():to("cuda:0"), { auto_wrap_policy = policy }) end, B)
  profile("fsdp-bf16", function()
    return fsdp.FSDP(Net():to("cuda:0"), { auto_wrap_policy = policy, mixed_precision = bf16 })
  end, B)
end
dist.destroy_process_group()
