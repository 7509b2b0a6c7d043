-- test_graphs_cpu.lua: CUDA graphs where they cannot run. ms.cuda.make_graphed_step on CPU
-- tensors (or without a device) calls the step eagerly every time, so a training step through it
-- gives exactly the parameters of the plain loop (dropout, a learning-rate schedule); its
-- arguments are checked; the graph object says why it cannot exist. tests/lua/test_cuda_graphs.lua
-- covers the GPU side.
local T = require "testing"
local ms = require "moonshard"
local F = require "moonshard.functional"
local optim = require "moonshard.optim"
local Net = require "moonshard.seed_net"

-- Trains the seed Net for `steps` steps of batch 4 (dropout on, Adadelta, StepLR halving the
-- rate every 2 steps), each step through wrap(step) when given; returns the parameters.
local function train(steps, wrap)
  ms.manual_seed(3)
  local model = Net()
  model:train()
  local opt = optim.Adadelta(model:parameters(), { lr = 1.0 })
  local sched = optim.lr_scheduler.StepLR(opt, { step_size = 2, gamma = 0.5 })
  -- the rate is an argument, so a graph would be captured per rate (docs/cuda-graphs.md)
  local function step(data, target, lr)
    T.eq(lr, opt.param_groups[1].lr, "the rate the step sees")
    opt:zero_grad()
    local loss = F.nll_loss(model(data), target)
    loss:backward()
    opt:step()
    return loss:detach(), "done"
  end
  local run, losses = wrap and wrap(step) or step, {}
  for i = 1, steps do
    local data, target = ms.randn(4, 1, 28, 28), ms.randint(1, 11, { 4 }) -- classes 1..10
    local loss, tag = run(data, target, opt.param_groups[1].lr)
    T.eq(tag, "done", "the step's second result")
    losses[i] = loss:item()
    sched:step()
  end
  local out = {}
  for i, p in ipairs(model:parameters()) do out[i] = p:detach():reshape(-1):tolist() end
  return out, losses
end

T.test("make_graphed_step on the CPU is the eager step, exactly", function()
  local want, want_losses = train(5)
  local calls = 0
  local got, got_losses = train(5, function(step)
    return ms.cuda.make_graphed_step(function(...)
      calls = calls + 1
      return step(...)
    end, { warmup = 1 })
  end)
  T.eq(calls, 5, "the step ran eagerly at every call")
  T.same(got_losses, want_losses, 0, "losses")
  T.same(got, want, 0, "parameters")
  local off = train(5, function(step) return ms.cuda.make_graphed_step(step, { enabled = false }) end)
  T.same(off, want, 0, "parameters with enabled = false")
end)

T.test("make_graphed_step passes every argument and result through", function()
  local step = ms.cuda.make_graphed_step(function(a, b, c)
    return a + b, c, nil, "last"
  end)
  local x = ms.ones(2)
  local s, c, n, last = step(x, 2, "c")
  T.same(s:tolist(), { 3, 3 })
  T.eq(c, "c")
  T.eq(n, nil)
  T.eq(last, "last")
  T.eq(select("#", step(1, 2)), 4, "trailing nils kept")
  T.eq(step(1, 2), 3, "numbers only: eager too")
end)

T.test("make_graphed_step checks its arguments", function()
  T.raises(function() ms.cuda.make_graphed_step(42) end, "make_graphed_step", "expected a function", "number")
  T.raises(function() ms.cuda.make_graphed_step(print, "fast") end, "make_graphed_step", "options table", "string")
  T.raises(function() ms.cuda.make_graphed_step(print, { warmpu = 2 }) end, "make_graphed_step: unknown option 'warmpu' (expected one of: enabled, max_graphs, warmup)")
  T.raises(function() ms.cuda.make_graphed_step(print, { warmup = -1 }) end, "warmup", "integer >= 0", "-1")
  T.raises(function() ms.cuda.make_graphed_step(print, { warmup = 1.5 }) end, "warmup", "1.5")
  T.raises(function() ms.cuda.make_graphed_step(print, { max_graphs = 0 }) end, "max_graphs", ">= 1")
  T.raises(function() ms.cuda.make_graphed_step(print, { enabled = "yes" }) end, "enabled", "boolean", "string")
  T.raises(function() ms.cuda.graph({}) end, "ms.cuda.graph", "CUDAGraph", "table")
  T.raises(function() ms.cuda.graph(ms.ones(1)) end, "ms.cuda.graph", "Tensor")
end)

T.test("nothing is captured on the CPU", function()
  T.eq(ms.cuda.is_current_stream_capturing(), false)
  T.eq(ms.cuda.current_graph(), nil)
  if not ms.cuda.is_available() then
    T.raises(function() return ms.cuda.CUDAGraph() end, "CUDAGraph", "CUDA graphs need a CUDA build and a CUDA device")
  end
end)

T.finish()
