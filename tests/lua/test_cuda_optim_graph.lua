-- test_cuda_optim_graph.lua: the multi-tensor optimizer steps on the GPU: foreach against the
-- single-tensor kernels (bit for bit: both run optim.cu's same per-element code with the same
-- numbers), capturable (numbers read from device memory) against plain, the CUDA result against
-- the CPU's, and a step captured in a CUDA graph then replayed under a learning-rate schedule
-- against the same steps taken eagerly (bit for bit), for SGD, Adam, AdamW and Adadelta.
-- Exits 77 (skipped) where no GPU is usable.
local T = require "testing"
local ms = require "moonshard"
local optim = require "moonshard.optim"

T.need_cuda()

local DEV = "cuda:0"
local SIZES = { 70000, 0, 1, 5000 }
for i = 1, 55 do SIZES[#SIZES + 1] = (i * 53) % 301 + 1 end -- more than one list (48)

local CASES = {
  { "SGD", optim.SGD, { lr = 0.1 } },
  { "SGD momentum nesterov", optim.SGD, { lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 0.01 } },
  { "Adam amsgrad", optim.Adam, { lr = 0.01, amsgrad = true, weight_decay = 0.1 } },
  { "AdamW", optim.AdamW, { lr = 0.01, betas = { 0.8, 0.99 } } },
  { "Adadelta", optim.Adadelta, { lr = 1.0, weight_decay = 0.05 } },
}

local function params(dtype, device)
  ms.manual_seed(11)
  local ps = {}
  for i, n in ipairs(SIZES) do
    ps[i] = ms.randn(n, { dtype = dtype }):to(device)
    ps[i].requires_grad = true
  end
  return ps
end

-- Step k's gradients, written into the grads the parameters already hold (a captured graph
-- reads those addresses) or made fresh.
local function set_grads(ps, k)
  ms.manual_seed(500 + k)
  for _, p in ipairs(ps) do
    local g = ms.randn(p:numel(), { dtype = p.dtype }):to(p.device)
    if p.grad ~= nil then p.grad:copy_(g) else p.grad = g end
  end
end

local function with(opts, extra)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  for k, v in pairs(extra) do o[k] = v end
  return o
end

-- tol nil: every element equal; else |a - b| <= tol max(1, |b|).
local function compare(a, b, what, tol)
  for i = 1, #a do
    local x, y = a[i]:detach():cpu():double():reshape(-1), b[i]:detach():cpu():double():reshape(-1)
    if x:numel() > 0 then
      local bound = tol and y:abs():clamp(1, math.huge):mul(tol) or ms.zeros_like(y)
      local bad = x:sub(y):abs():gt(bound):logical_and(x:eq(x):logical_or(y:eq(y)))
      if bad:any():item() then
        local j = bad:nonzero()[1][1]:item()
        error(("%s: tensor %d at %d: %.17g vs %.17g"):format(what, i, j, x[j]:item(), y[j]:item()), 2)
      end
    end
  end
end

-- steps eager steps with a StepLR schedule (gamma 0.7 every step).
local function eager(ctor, opts, dtype, device, steps)
  local ps = params(dtype, device)
  local opt = ctor(ps, opts)
  local sched = optim.lr_scheduler.StepLR(opt, { step_size = 1, gamma = 0.7 })
  for k = 1, steps do
    set_grads(ps, k)
    opt:step()
    sched:step()
  end
  return ps
end

for _, case in ipairs(CASES) do
  local name, ctor, opts = case[1], case[2], case[3]
  for _, dtype in ipairs({ "float32", "float64" }) do
    T.test(("%s %s on CUDA: foreach = single-tensor = capturable, near the CPU"):format(name, dtype), function()
      local single = eager(ctor, with(opts, { foreach = false }), dtype, DEV, 4)
      local list = eager(ctor, with(opts, { foreach = true }), dtype, DEV, 4)
      local cap = eager(ctor, with(opts, { capturable = true }), dtype, DEV, 4)
      compare(list, single, name .. " foreach vs single")
      compare(cap, single, name .. " capturable vs plain")
      -- the CPU: the same formulas in double, rounded once per stored value; the GPU may fuse a
      -- multiply-add (one rounding fewer), which float32 storage mostly absorbs
      local cpu = eager(ctor, with(opts, { foreach = true }), dtype, "cpu", 4)
      compare(list, cpu, name .. " cuda vs cpu", dtype == "float32" and 1e-5 or 1e-12)
    end)
  end
end

for _, case in ipairs(CASES) do
  local name, ctor, opts = case[1], case[2], case[3]
  T.test(name .. ": a captured step replayed under a schedule = the eager steps", function()
    local steps = 6
    local want = eager(ctor, opts, "float32", DEV, steps)
    local ps = params("float32", DEV)
    local opt = ctor(ps, opts)
    local sched = optim.lr_scheduler.StepLR(opt, { step_size = 1, gamma = 0.7 })
    set_grads(ps, 1)
    opt:step() -- warm-up: makes the state
    sched:step()
    set_grads(ps, 2)
    local g = ms.cuda.CUDAGraph()
    g:capture_begin()
    opt:step()
    g:capture_end()
    T.eq(opt.state[ps[1]].step or 1, 1, "the capture took no step")
    for k = 2, steps do
      if k > 2 then set_grads(ps, k) end
      g:replay()
      sched:step()
    end
    compare(ps, want, name .. " captured vs eager")
    if opt.state[ps[1]].step then T.eq(opt.state[ps[1]].step, steps, "step count after the replays") end
  end)
end

T.test("make_graphed_step: a training step with Adam under StepLR = the eager steps", function()
  local graphed_step = ms.cuda.make_graphed_step
  local nn = require "moonshard.nn"
  local F = require "moonshard.functional"
  local function train(graphed)
    ms.manual_seed(3)
    local model = nn.Linear(20, 5):to(DEV)
    local opt = optim.Adam(model:parameters(), { lr = 0.01 })
    local sched = optim.lr_scheduler.StepLR(opt, { step_size = 1, gamma = 0.8 })
    local function step(x, y)
      opt:zero_grad()
      local loss = F.mse_loss(model(x), y)
      loss:backward()
      opt:step()
      return loss
    end
    local f = graphed and graphed_step(step, { warmup = 2 }) or step
    for k = 1, 8 do
      ms.manual_seed(100 + k)
      f(ms.randn(16, 20):to(DEV), ms.randn(16, 5):to(DEV))
      sched:step()
    end
    return model:parameters(), opt
  end
  local want = train(false)
  local got, opt = train(true)
  -- the same kernels with the same numbers; the tolerance only allows cuBLAS another algorithm
  -- inside a capture
  compare(got, want, "graphed vs eager", 1e-6)
  T.eq(opt.state[got[1]].step, 8, "Adam's step count after warm-up steps and replays")
end)

T.finish()
