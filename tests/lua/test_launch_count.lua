-- test_launch_count.lua: the engine's dispatch counter (ms._kernel_calls, private) and the
-- number of kernel-table calls of one training step of the seed's Net at batch 8 on the CPU,
-- which is the number of kernels the same step launches on a GPU (the same code path calls the
-- same slots on every device). The bound is the count reached by the fusions of docs/fusion.md:
-- UPDATE IT (down) WHEN ADDING FUSION; a change that adds launches to the step fails here.
local T = require "testing"
local ms = require "moonshard"
local F = require "moonshard.functional"
local optim = require "moonshard.optim"
local Net = require "moonshard.seed_net"

-- The seed step's calls (Adadelta, nll_loss with reduction "sum", as scripts/mnist_fsdp.lua):
-- forward 11, loss 1, backward 16, optimizer 1 (Adadelta's foreach step: one adadelta_step_list
-- for the 8 parameters, docs/optimizers.md). Before the fusions of issue 20 the same step made 44:
-- the optimizer 8 -> 1, dropout's forward 2 -> 1 each, Linear's forward
-- 2 -> 1 each (the bias added by the GEMM), nll_loss's forward 2 -> 1, relu's backward 2 -> 1
-- each (a comparison and a where, which the CPU took through a shortcut the counter did not
-- see). A GPU launches one more: the loss's seed gradient (ones), which the CPU fills on the host.
local SEED_STEP_CALLS = 29

local function cpu_calls() return ms._kernel_calls().cpu end

-- The calls of fn() on the CPU.
local function count(fn)
  local before = cpu_calls()
  fn()
  return cpu_calls() - before
end

T.test("ms._kernel_calls counts every kernel-table call per device type", function()
  local c = ms._kernel_calls()
  T.eq(math.type(c.cpu), "integer")
  T.eq(math.type(c.cuda), "integer")
  local a, b = ms.ones(3), ms.ones(3)
  T.eq(count(function() return a + b end), 1, "one elementwise op, one call")
  T.eq(count(function() return a:sum() end), 1, "one reduction, one call")
  T.eq(count(function() return a:view(3, 1) end), 0, "a view calls no kernel")
  T.raises(function() ms._kernel_calls(1) end, "_kernel_calls")
end)

T.test("relu's backward is one call", function()
  local x = ms.randn(4, 5)
  x.requires_grad = true
  local y = F.relu(x)
  local g = ms.ones(4, 5)
  T.eq(count(function() y:backward(g) end), 1)
  T.truthy(ms.equal(x.grad, x:gt(0):float()))
end)

T.test("dropout's forward is one call (mask drawn and applied in one pass)", function()
  local x = ms.randn(4, 5)
  T.eq(count(function() return F.dropout(x, 0.5) end), 1)
end)

T.test("Linear's forward with a bias is one call", function()
  local x, w, b = ms.randn(4, 6), ms.randn(3, 6), ms.randn(3)
  local y
  T.eq(count(function() y = F.linear(x, w, b) end), 1)
  T.truthy(ms.allclose(y, x:mm(w:t()) + b, { rtol = 1e-5, atol = 1e-6 }))
end)

T.test("nll_loss's reduced forward is one call", function()
  local logp = F.log_softmax(ms.randn(6, 10), 2)
  local target = ms.randint(1, 11, { 6 })
  for _, reduction in ipairs { "sum", "mean" } do
    T.eq(count(function() return F.nll_loss(logp, target, { reduction = reduction }) end), 1, reduction)
  end
end)

T.test("one training step of the seed's Net at batch 8 makes at most " .. SEED_STEP_CALLS .. " calls", function()
  ms.manual_seed(1)
  local model = Net()
  local optimizer = optim.Adadelta(model:parameters(), { lr = 1.0 })
  local data, target = ms.randn(8, 1, 28, 28), ms.randint(1, 11, { 8 })
  local function step()
    optimizer:zero_grad()
    local loss = F.nll_loss(model(data), target, { reduction = "sum" })
    loss:backward()
    optimizer:step()
  end
  step() -- the first step creates the optimizer's state
  local n = count(step)
  print(("seed step at batch 8: %d kernel-table calls"):format(n))
  T.truthy(n <= SEED_STEP_CALLS, ("%d calls, more than the %d reached"):format(n, SEED_STEP_CALLS))
end)

T.finish()
