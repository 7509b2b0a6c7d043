-- test_cuda_graphs.lua: CUDA graphs on a GPU: a captured seed training step replays as the eager
-- steps run (dropout, Adadelta, a StepLR schedule), each replay draws fresh dropout masks (the
-- ones eager steps would draw), hooks run before replays, and what a capture cannot hold (a copy
-- to the host) comes back as an error naming it, leaving the device usable. Exits 77 (skipped)
-- where no GPU is usable; tests/lua/test_graphs_cpu.lua covers the CPU side.
local T = require "testing"
local ms = require "moonshard"

T.need_cuda()

local F = require "moonshard.functional"
local optim = require "moonshard.optim"
local Net = require "moonshard.seed_net"

local DEV = "cuda:0"

T.test("CUDAGraph: capture, replay with new inputs, hooks in order, reset", function()
  local x = ms.ones(4, { device = DEV })
  local g = ms.cuda.CUDAGraph()
  T.eq(ms.cuda.current_graph(), nil)
  g:capture_begin()
  T.eq(ms.cuda.is_current_stream_capturing(), true)
  T.truthy(rawequal(ms.cuda.current_graph(), g), "current_graph() is the graph being captured")
  local y = x * 2 + 1
  g:capture_end()
  T.eq(ms.cuda.is_current_stream_capturing(), false)
  T.eq(g:is_captured(), true)
  local order = {}
  g:add_replay_hook(function(graph) order[#order + 1] = "a"; T.truthy(rawequal(graph, g)) end)
  g:add_replay_hook(function() order[#order + 1] = "b" end)
  x:fill_(3)
  g:replay()
  T.same(y:cpu():tolist(), { 7, 7, 7, 7 }, 0, "the replay read the new input")
  T.same(order, { "a", "b" }, 0, "hooks ran in registration order")
  g:reset()
  T.raises(function() g:replay() end, "replay", "holds no capture")
  T.raises(function() g:add_replay_hook(42) end, "add_replay_hook", "function")
end)

T.test("a graph's memory is its own until reset", function()
  local n = 1 << 20 -- 4 MB of float32
  local x = ms.ones(n, { device = DEV })
  local g = ms.cuda.CUDAGraph()
  g:capture_begin()
  local tmp = x * 2
  local y = tmp + 1
  tmp = nil -- freed during the capture: the graph's block, reused by that capture only
  collectgarbage()
  g:capture_end()
  local reserved = ms.cuda.memory_reserved()
  local z = ms.zeros(n, { device = DEV }) -- eager memory: never a block the replay writes
  g:replay()
  T.eq(z:abs():sum():item(), 0.0, "eager memory untouched by the replay")
  T.eq(y:min():item(), 3.0, "the replay's result")
  y = nil
  collectgarbage()
  g:reset()
  T.truthy(ms.cuda.memory_reserved() < reserved, "reset gave the pool's blocks back to the driver")
end)

T.test("ms.cuda.graph captures a scope", function()
  local g, x = ms.cuda.CUDAGraph(), ms.full(3, 2.0, { device = DEV })
  local y
  do
    local _ <close> = ms.cuda.graph(g)
    y = x:mul(x)
  end
  x:fill_(5)
  g:replay()
  T.same(y:cpu():tolist(), { 25, 25, 25 })
end)

T.test("constant factories on the device may be captured (a fill kernel, no copy from the host)", function()
  local g, x = ms.cuda.CUDAGraph(), ms.full(3, 2.0, { device = DEV })
  local y
  do
    local _ <close> = ms.cuda.graph(g)
    y = x + ms.ones(3, { device = DEV }) + ms.zeros_like(x) + ms.full({ 3 }, 0.5, { device = DEV })
  end
  x:fill_(4)
  g:replay()
  T.same(y:cpu():tolist(), { 5.5, 5.5, 5.5 })
end)

T.test("a copy to the host inside a capture is an error naming it; the device stays usable", function()
  local step = ms.cuda.make_graphed_step(function(t) return t * t:sum():item() end, { warmup = 0 })
  T.raises(function() step(ms.ones(3, { device = DEV })) end, "capturing the step failed", "copy",
           "not allowed while a CUDA graph is being captured")
  T.eq(ms.cuda.is_current_stream_capturing(), false)
  local g = ms.cuda.CUDAGraph()
  T.raises(function()
    local _ <close> = ms.cuda.graph(g)
    ms.cuda.synchronize()
  end, "synchronize", "not allowed while a CUDA graph is being captured")
  T.eq(g:is_captured(), false)
  T.same((ms.ones(2, { device = DEV }) + 1):cpu():tolist(), { 2, 2 }, 0, "eager work after the failures")
end)

T.test("each replay draws the dropout masks the eager steps would", function()
  local x = ms.ones(4096, { device = DEV })
  ms.manual_seed(11)
  local want = {}
  for i = 1, 5 do want[i] = F.dropout(x, 0.5, true):cpu():tolist() end
  ms.manual_seed(11)
  local step = ms.cuda.make_graphed_step(function(t) return F.dropout(t, 0.5, true) end, { warmup = 1 })
  for i = 1, 5 do
    T.same(step(x):cpu():tolist(), want[i], 0, ("call %d"):format(i))
  end
  T.truthy(table.concat(want[4], ",") ~= table.concat(want[5], ","), "fresh masks per step")
  local after_graph = ms.randn(1):item()
  ms.manual_seed(11)
  for _ = 1, 5 do F.dropout(x, 0.5, true) end
  T.eq(after_graph, ms.randn(1):item(), "the generator moved as far as the eager steps moved it")
end)

-- The seed Net's training step on cuda:0 for `steps` batches (batch 8, dropout on, Adadelta,
-- StepLR halving every 3 steps), through wrap(step) when given; the parameters and losses.
local function train(steps, wrap, shard)
  ms.manual_seed(5)
  local model = Net():to(DEV)
  if shard then model = shard(model) end
  model:train()
  local opt = optim.Adadelta(model:parameters(), { lr = 1.0 })
  local sched = optim.lr_scheduler.StepLR(opt, { step_size = 3, gamma = 0.5 })
  local function step(data, target, lr) -- lr: a new rate is a new graph (docs/cuda-graphs.md)
    assert(lr == opt.param_groups[1].lr)
    opt:zero_grad()
    local loss = F.nll_loss(model(data), target, { reduction = "sum" })
    loss:backward()
    opt:step()
    return loss:detach()
  end
  local run, losses = wrap and wrap(step) or step, {}
  for i = 1, steps do
    local data = ms.randn(8, 1, 28, 28):to(DEV)
    local target = ms.randint(1, 11, { 8 }):to(DEV)
    losses[i] = run(data, target, opt.param_groups[1].lr):item()
    sched:step()
  end
  local out = {}
  for i, p in ipairs(model:parameters()) do out[i] = p:detach():cpu():reshape(-1):tolist() end
  return out, losses
end

T.test("a captured seed step replays as the eager steps over 9 steps with a schedule", function()
  local want, want_losses = train(9)
  local captures = 0
  local got, got_losses = train(9, function(step)
    return ms.cuda.make_graphed_step(function(...)
      if ms.cuda.is_current_stream_capturing() then captures = captures + 1 end
      return step(...)
    end, { warmup = 1 })
  end)
  -- StepLR changes the rate every 3 steps: each rate warms up once, is captured, replays twice
  T.eq(captures, 3, "one capture per learning rate")
  -- the same kernels on the same inputs; cuDNN may pick another algorithm for a fresh handle
  -- state, whose sums differ in the last bits, hence a tolerance rather than equality
  T.same(got_losses, want_losses, 1e-3, "losses")
  T.same(got, want, 1e-4, "parameters")
end)

-- The seed's own setting: FSDP over nccl (a world of one), whose collectives join the capture.
T.test("a captured FSDP seed step (nccl, one rank) replays as the eager steps", function()
  local dist = ms.distributed
  if not dist.is_nccl_available() then return print("skipped: this build has no nccl backend") end
  local fsdp = require "moonshard.fsdp"
  if not dist.is_initialized() then dist.init_process_group({ backend = "nccl", timeout = 120 }) end
  local shard = function(m) return fsdp.FSDP(m, { auto_wrap_policy = require("moonshard.fsdp_wrap")
    .size_based_auto_wrap_policy { min_num_params = 20000 } }) end
  local want = train(6, nil, shard)
  local got = train(6, function(step) return ms.cuda.make_graphed_step(step, { warmup = 1 }) end, shard)
  T.same(got, want, 1e-4, "parameters")
end)

T.finish()
