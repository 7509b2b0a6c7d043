-- gpu_step_profile.lua: where a training step of the seed's Net on cuda:0 spends its time, as the
-- host sees it: per phase (forward with the loss, backward, zero_grad + optimizer step), the
-- host's enqueue time with no synchronization inside the loop, then the wall time once the
-- device has caught up. Plain and wrapped in FSDP (one rank), float32 and FSDP bfloat16, at
-- batch 64, 256 and 1024. If enqueue equals wall, the host is the bottleneck (or something waits
-- for the device); if wall is larger, the device is.
--   build/moonshard bench/gpu_step_profile.lua [--steps N] [--ops] [--cpu]   (--help)
local ms = require "moonshard"
local F, optim = require "moonshard.functional", require "moonshard.optim"
local Net = require "moonshard.seed_net"
local fsdp, fw = require "moonshard.fsdp", require "moonshard.fsdp_wrap"
local dist = ms.distributed

local argparse = require "moonshard.argparse"
local parser = argparse.ArgumentParser { description = "Host enqueue and wall time of the seed's training step on cuda:0." }
parser:add_argument("--steps", { type = "int", default = 200, min = 1, metavar = "N", help = "timed steps at batch 64 (half at larger batches)" })
parser:add_argument("--ops", { action = "store_true", help = "time each op of the forward alone instead" })
parser:add_argument("--cpu", { action = "store_true", help = "a dry run of this script on the CPU, where no GPU is" })
local args = parser:parse_args(arg)
local steps, DEV = args.steps, args.cpu and "cpu" or "cuda:0"
if DEV ~= "cpu" and not ms.cuda.is_available() then
  print("gpu_step_profile.lua: no GPU: " .. tostring(ms.cuda.unavailable_reason()))
  os.exit(0)
end
local function sync() if DEV ~= "cpu" then ms.cuda.synchronize() end end

local clock = ms.perf_counter

local function profile(name, make, B)
  local model = make()
  local x, y = ms.randn(B, 1, 28, 28):to(DEV), ms.randint(1, 11, { B }):to(DEV)
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
  sync()
  local n = B == 64 and steps or steps // 2
  local s0 = clock()
  for _ = 1, n do step(true) end
  local enq = clock() - s0
  sync()
  local wall = clock() - s0
  local ms_ = function(v) return v / n * 1e3 end
  print(("%-11s B=%4d  step %.3f ms wall, %.3f ms host enqueue (forward+loss %.3f, backward %.3f, optimizer %.3f)"):format(
    name, B, ms_(wall), ms_(enq), ms_(t.fwd), ms_(t.bwd), ms_(t.opt)))
  io.stdout:flush()
end

-- --ops: each op of the seed's forward alone, with autograd recording as in training: host
-- enqueue time per call beside its wall time. An op whose host time tracks its wall time as the
-- batch grows waits for the device.
local function profile_ops(B)
  local net = Net():to(DEV)
  local x, y = ms.randn(B, 1, 28, 28):to(DEV), ms.randint(1, 11, { B }):to(DEV)
  local h1 = F.relu(net.conv1(x))
  local h2 = F.relu(net.conv2(h1))
  local p = F.max_pool2d(h2, 2)
  local f = ms.flatten(p, 2)
  local z = F.relu(net.fc1(f))
  local o = net.fc2(z)
  local lp = F.log_softmax(o, 2)
  local ops = {
    { "conv1", function() return net.conv1(x) end }, { "relu(conv1 out)", function() return F.relu(h1) end },
    { "conv2", function() return net.conv2(h1) end }, { "max_pool2d", function() return F.max_pool2d(h2, 2) end },
    { "dropout(0.25)", function() return F.dropout(p, 0.25, true) end }, { "fc1", function() return net.fc1(f) end },
    { "fc2", function() return net.fc2(z) end }, { "log_softmax", function() return F.log_softmax(o, 2) end },
    { "nll_loss(sum)", function() return F.nll_loss(lp, y, { reduction = "sum" }) end },
    { "backward(conv2 out sum)", function() local s = net.conv2(h1:detach()):sum(); s:backward(); return s end },
  }
  for _, op in ipairs(ops) do
    for _ = 1, 5 do op[2]() end
    sync()
    local n = 50
    local t0 = clock()
    for _ = 1, n do op[2]() end
    local enq = clock() - t0
    sync()
    local wall = clock() - t0
    print(("ops B=%4d  %-24s host %8.1f us  wall %8.1f us"):format(B, op[1], enq / n * 1e6, wall / n * 1e6))
  end
  io.stdout:flush()
end
-- The fixed cost of one op, apart from its arithmetic: 4-element tensors, host time per call.
local function profile_overhead()
  local x, g = ms.randn(4):to(DEV), ms.randn(4, { requires_grad = true }):to(DEV)
  local cases = {
    { "ms.empty (allocation)", function() return ms.empty(4, { device = DEV }) end },
    { "fill_ (one launch)", function() return x:fill_(1) end },
    { "relu, no graph", function() return F.relu(x) end },
    { "relu, recorded", function() return F.relu(g) end },
    { "x + x", function() return x + x end },
    { "x * 2", function() return x * 2 end },
    { "sum()", function() return x:sum() end },
    { "x.shape (Lua only)", function() return x.shape end },
  }
  for _, c in ipairs(cases) do
    for _ = 1, 200 do c[2]() end
    sync()
    local n, t0 = 5000, clock()
    for _ = 1, n do c[2]() end
    print(("overhead  %-24s host %7.2f us a call"):format(c[1], (clock() - t0) / n * 1e6))
  end
  io.stdout:flush()
end

if args.ops then
  profile_overhead()
  for _, B in ipairs { 64, 1024 } do profile_ops(B) end
  os.exit(0)
end

local policy = fw.size_based_auto_wrap_policy { min_num_params = 20000 }
local bf16 = { param_dtype = "bfloat16", reduce_dtype = "bfloat16", buffer_dtype = "bfloat16" }
dist.init_process_group("auto")
for _, B in ipairs { 64, 256, 1024 } do
  profile("plain", function() return Net():to(DEV) end, B)
  profile("fsdp", function() return fsdp.FSDP(Net():to(DEV), { auto_wrap_policy = policy }) end, B)
  profile("fsdp-bf16", function()
    return fsdp.FSDP(Net():to(DEV), { auto_wrap_policy = policy, mixed_precision = bf16 })
  end, B)
end
dist.destroy_process_group()
