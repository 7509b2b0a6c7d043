-- test_optim.lua: the optimizers, LR schedulers and gradient clipping against PyTorch 1.13's
-- numbers (tests/lua/data/optim_reference.lua, made by gen_optim_reference.py), plus state
-- dicts, parameter groups, memory accounting and bad input.
local T = require "testing"
local ms = require "moonshard"
local optim = require "moonshard.optim"
local nn_utils = require "moonshard.nn_utils"
local ref = dofile("tests/lua/data/optim_reference.lua")

local function tensor_of(flat, shape, dtype)
  return ms.tensor(flat, { dtype = dtype }):reshape(shape)
end

local function flat_of(t)
  local out = {}
  local f = t:reshape({ -1 })
  for i = 1, f:numel() do out[i] = f[i]:item() end
  return out
end

-- Relative comparison: float32 state rounds at every step, float64 agrees to ~1e-12.
local function check_close(got, want, dtype, what)
  local rtol = dtype == "float32" and 1e-5 or 1e-10
  local g = flat_of(got)
  T.eq(#g, #want, what .. ": element count")
  for i = 1, #want do
    local tol = rtol * math.max(math.abs(want[i]), 1e-3) -- relative (values near 0 aside)
    if not (math.abs(g[i] - want[i]) <= tol) then
      error(("%s[%d]: expected %.10g, got %.10g"):format(what, i, want[i], g[i]), 2)
    end
  end
end

local function describe(case)
  local keys = {}
  for k, v in pairs(case.opts) do
    keys[#keys + 1] = k .. "=" .. (type(v) == "table" and table.concat(v, "/") or tostring(v))
  end
  table.sort(keys)
  return ("%s(%s) %s%s"):format(case.name, table.concat(keys, ", "), case.dtype,
    case.groups and " groups" or "")
end

local function make_params(case)
  local params = {}
  for i, shape in ipairs(case.shapes) do
    params[i] = tensor_of(case.init[i], shape, case.dtype)
    params[i].requires_grad = true
  end
  return params
end

local function make_optimizer(case, params)
  local arg = params
  if case.groups then
    arg = {}
    for i, g in ipairs(case.groups) do
      local group = { params = { params[i] } }
      for k, v in pairs(g) do group[k] = v end
      arg[i] = group
    end
  end
  return optim[case.name](arg, case.opts)
end

-- Sets the gradients of one reference step (false: the parameter has none this step).
local function set_grads(case, params, step)
  for i, p in ipairs(params) do
    local g = case.grads[step][i]
    p.grad = g and tensor_of(g, case.shapes[i], case.dtype) or nil
  end
end

local function run_steps(case, params, opt, from, to)
  for step = from, to do
    set_grads(case, params, step)
    opt:step()
    for i, p in ipairs(params) do
      check_close(p, case.expected[step][i], case.dtype, ("step %d param %d"):format(step, i))
    end
  end
end

-- ---- every optimizer and option set against PyTorch --------------------------------------------

for _, case in ipairs(ref.optim) do
  T.test("optim " .. describe(case), function()
    local params = make_params(case)
    local opt = make_optimizer(case, params)
    run_steps(case, params, opt, 1, #case.grads)
  end)
end

-- state_dict after two steps, loaded into a fresh optimizer over copies of the parameters, must
-- continue exactly as the original would have.
for _, case in ipairs(ref.optim) do
  if case.dtype == "float64" then
    T.test("optim state_dict resume " .. describe(case), function()
      local params = make_params(case)
      local opt = make_optimizer(case, params)
      run_steps(case, params, opt, 1, 2)
      local sd = opt:state_dict()
      local copies = {}
      for i, p in ipairs(params) do
        copies[i] = p:detach():clone()
        copies[i].requires_grad = true
      end
      local fresh = make_optimizer(case, copies)
      fresh:load_state_dict(sd)
      run_steps(case, copies, fresh, 3, #case.grads)
    end)
  end
end

T.test("optim state_dict structure", function()
  local a = ms.zeros(3, { requires_grad = true })
  local b = ms.zeros(2, { requires_grad = true })
  local opt = optim.Adam({ { params = { a } }, { params = { b }, lr = 0.5 } }, { lr = 0.1 })
  a.grad = ms.ones(3)
  opt:step()
  local sd = opt:state_dict()
  T.eq(#sd.param_groups, 2)
  T.same(sd.param_groups[1].params, { 1 })
  T.same(sd.param_groups[2].params, { 2 })
  T.eq(sd.param_groups[1].lr, 0.1)
  T.eq(sd.param_groups[2].lr, 0.5)
  T.same(sd.param_groups[2].betas, { 0.9, 0.999 })
  T.eq(sd.state[1].step, 1)
  T.truthy(ms.is_tensor(sd.state[1].exp_avg))
  T.truthy(ms.is_tensor(sd.state[1].exp_avg_sq))
  T.eq(sd.state[2], nil, "no state for a parameter that never had a gradient")
  -- mismatched groups are refused
  local other = optim.Adam({ a }, { lr = 0.1 })
  T.raises(function() other:load_state_dict(sd) end, "parameter groups")
end)

-- A checkpoint through ms.save/ms.load (safetensors, nested tables) resumes exactly.
T.test("optim and scheduler state through ms.save / ms.load", function()
  local function setup(p)
    local opt = optim.Adam({ { params = { p } }, { params = { ms.zeros(2, { requires_grad = true }) }, lr = 0.5 } },
      { lr = 0.1, amsgrad = true })
    return opt, optim.lr_scheduler.OneCycleLR(opt, { max_lr = 1.0, total_steps = 10 })
  end
  local p = ms.randn(3, 2, { dtype = "float64" })
  p.requires_grad = true
  local opt, sched = setup(p)
  p.grad = ms.randn(3, 2, { dtype = "float64" })
  opt:step()
  sched:step()
  local path = os.tmpname()
  ms.save({ optimizer = opt:state_dict(), scheduler = sched:state_dict(), epoch = 3 }, path)
  local ck = ms.load(path)
  os.remove(path)
  T.eq(ck.epoch, 3)
  local p2 = p:detach():clone()
  p2.requires_grad = true
  local opt2, sched2 = setup(p2)
  opt2:load_state_dict(ck.optimizer)
  sched2:load_state_dict(ck.scheduler)
  for _ = 1, 3 do
    local g = ms.randn(3, 2, { dtype = "float64" })
    p.grad, p2.grad = g, g:clone()
    opt:step()
    sched:step()
    opt2:step()
    sched2:step()
    T.truthy(ms.equal(p, p2), "parameters diverged after resuming")
    T.same(sched2:get_last_lr(), sched:get_last_lr())
    T.eq(opt2.param_groups[1].betas[1], opt.param_groups[1].betas[1])
  end
end)

-- ---- Optimizer behaviour -----------------------------------------------------------------------

T.test("optim zero_grad and skipping parameters without grad", function()
  local p = ms.ones(2, { requires_grad = true })
  local q = ms.ones(2, { requires_grad = true })
  local opt = optim.SGD({ p, q }, { lr = 0.5 })
  p.grad = ms.ones(2)
  opt:step()
  T.same(p:tolist(), { 0.5, 0.5 })
  T.same(q:tolist(), { 1, 1 })
  opt:zero_grad({ set_to_none = false })
  T.same(p.grad:tolist(), { 0, 0 })
  opt:zero_grad()
  T.eq(p.grad, nil)
end)

T.test("optim step closure returns the loss", function()
  local p = ms.ones(2, { requires_grad = true })
  local opt = optim.SGD({ p }, { lr = 0.1 })
  local loss = opt:step(function()
    opt:zero_grad()
    local l = (p * p):sum()
    l:backward()
    return l
  end)
  T.near(loss:item(), 2)
  T.near(p[1]:item(), 0.8, 1e-6)
end)

T.test("optim state counted as optimizer memory", function()
  collectgarbage()
  local before = ms.memory_stats().by_category.optimizer
  local p = ms.zeros(1000, { requires_grad = true })
  local opt = optim.Adam({ p })
  p.grad = ms.ones(1000)
  opt:step()
  local after = ms.memory_stats().by_category.optimizer
  T.eq(after - before, 2 * 1000 * 4)
end)

T.test("optim large parameter (parallel path) matches the serial one", function()
  local n = 200003
  local big = ms.randn(n, { dtype = "float64" })
  big.requires_grad = true
  local g = ms.randn(n, { dtype = "float64" })
  local small = big:narrow(1, n - 9, 10):detach():clone()
  small.requires_grad = true
  local o1 = optim.Adadelta({ big }, { weight_decay = 0.1 })
  local o2 = optim.Adadelta({ small }, { weight_decay = 0.1 })
  for _ = 1, 3 do
    big.grad = g
    small.grad = g:narrow(1, n - 9, 10):clone()
    o1:step()
    o2:step()
  end
  T.truthy(ms.equal(big:narrow(1, n - 9, 10), small))
end)

T.test("optim bad input", function()
  local p = ms.zeros(3, { requires_grad = true })
  T.raises(function() optim.SGD({ p }) end, "lr", "required")
  T.raises(function() optim.SGD({ p }, { lr = -1 }) end, "invalid learning rate")
  T.raises(function() optim.Adam({ p }, { betas = { 1.5, 0.9 } }) end, "beta")
  T.raises(function() optim.Adadelta({ p }, { lrr = 1 }) end, "Adadelta: unknown option 'lrr' (expected one of: capturable, eps, foreach, lr, ")
  T.raises(function() optim.Adadelta({}) end, "empty parameter list")
  T.raises(function() optim.SGD({ p, p }, { lr = 1 }) end, "more than once")
  T.raises(function() optim.SGD({ p }, { lr = 1, nesterov = true }) end, "nesterov")
  local q = ms.zeros(3)
  T.raises(function() optim.SGD({ q }, { lr = 1 }) end, "does not require grad")
  -- the native steps check every tensor
  local g = ms.zeros(4)
  T.raises(function() ms._optim.adadelta_step(p, g, ms._optim.state(p), ms._optim.state(p), {}) end,
    "adadelta_step", "grad", "shape")
  local s64 = ms.zeros(3, { dtype = "float64" })
  T.raises(function() ms._optim.adadelta_step(p, ms.zeros(3), s64, ms._optim.state(p), {}) end,
    "square_avg", "dtype")
  local i = ms.zeros(3, { dtype = "int64" })
  T.raises(function() ms._optim.sgd_step(i, i, nil, { lr = 1 }) end, "float32 or float64")
  T.raises(function() ms._optim.sgd_step(p, ms.zeros(3), nil, { lr = 1, momentum = 0.9 }) end,
    "momentum_buffer", "required")
  local t = ms.zeros(2, 3):t()
  T.raises(function() ms._optim.sgd_step(t, ms.zeros(3, 2), nil, { lr = 1 }) end, "contiguous")
  T.raises(function() ms._optim.adam_step(p, ms.zeros(3), ms._optim.state(p), ms._optim.state(p),
    nil, { step = 0 }) end, "step must be >= 1")
end)

T.test("optim empty parameter (a rank holding none of a sharded one)", function()
  for _, name in ipairs({ "SGD", "Adam", "AdamW", "Adadelta", "Adagrad", "RMSprop" }) do
    local p = ms.zeros(0, { requires_grad = true })
    local opt = optim[name]({ p }, { lr = 0.1 })
    p.grad = ms.zeros(0)
    opt:step()
    T.eq(p:numel(), 0)
  end
end)

T.test("optim updates a view in place (parameters as pieces of one flat buffer)", function()
  local flat = ms.zeros(10, { dtype = "float64" })
  local piece = flat:narrow(1, 4, 3)
  piece.requires_grad = true
  local opt = optim.SGD({ piece }, { lr = 1 })
  piece.grad = ms.ones(3, { dtype = "float64" })
  opt:step()
  T.same(flat:tolist(), { 0, 0, 0, -1, -1, -1, 0, 0, 0, 0 })
end)

T.test("optim non-contiguous gradient", function()
  local p = ms.zeros(2, 3, { requires_grad = true })
  local opt = optim.SGD({ p }, { lr = 1 })
  p.grad = ms.arange(6):reshape(3, 2):float():t()
  opt:step()
  T.same(p:tolist(), { { -0, -2, -4 }, { -1, -3, -5 } })
end)

-- ---- schedulers ------------------------------------------------------------------------------

local LAMBDAS = {
  inverse = function(e) return 1.0 / (e + 1) end,
  pow95 = function(e) return 0.95 ^ e end,
}

local function sched_setup(case)
  local p1 = ms.zeros(2, { requires_grad = true })
  local p2 = ms.zeros(2, { requires_grad = true })
  local groups = { { params = { p1 } }, { params = { p2 }, lr = 0.05 } }
  local opt
  if case.optimizer == "SGD" then
    opt = optim.SGD(groups, { lr = 0.1, momentum = 0.9 })
  else
    opt = optim.Adam(groups, { lr = 0.1 })
  end
  local opts = {}
  for k, v in pairs(case.opts) do opts[k] = v end
  if case.name == "LambdaLR" then opts.lr_lambda = LAMBDAS[opts.lr_lambda] end
  return opt, optim.lr_scheduler[case.name](opt, opts)
end

local function momentum_of(g) return g.momentum or g.betas[1] end

local function check_sched_step(case, opt, sched, k)
  T.same(sched:get_last_lr(), case.lrs[k], 1e-15 + 1e-13 * math.abs(case.lrs[k][1]),
    ("lrs[%d]"):format(k))
  for i, g in ipairs(opt.param_groups) do
    T.near(g.lr, case.lrs[k][i], 1e-13, ("group %d lr at %d"):format(i, k))
    T.near(momentum_of(g), case.momentums[k][i], 1e-13, ("group %d momentum at %d"):format(i, k))
  end
end

for _, case in ipairs(ref.sched) do
  T.test("lr_scheduler " .. describe({ name = case.name, opts = case.opts, dtype = case.optimizer }), function()
    local opt, sched = sched_setup(case)
    check_sched_step(case, opt, sched, 1)
    for k = 2, #case.lrs do
      opt:step()
      sched:step()
      check_sched_step(case, opt, sched, k)
    end
  end)
  T.test("lr_scheduler state_dict resume " .. case.name, function()
    local opt, sched = sched_setup(case)
    for _ = 1, 6 do sched:step() end
    local sd, osd = sched:state_dict(), opt:state_dict()
    local opt2, sched2 = sched_setup(case)
    opt2:load_state_dict(osd)
    sched2:load_state_dict(sd)
    for k = 8, #case.lrs do
      sched2:step()
      check_sched_step(case, opt2, sched2, k)
    end
  end)
end

T.test("lr_scheduler closed form (step with an epoch)", function()
  local p = ms.zeros(1, { requires_grad = true })
  local opt = optim.SGD({ p }, { lr = 1.0 })
  local s = optim.lr_scheduler.StepLR(opt, { step_size = 2, gamma = 0.5 })
  s:step(5)
  T.near(s:get_last_lr()[1], 0.25, 1e-15)
  local m = optim.lr_scheduler.MultiStepLR(opt, { milestones = { 2, 4, 4 }, gamma = 0.1 })
  m:step(4)
  T.near(opt.param_groups[1].lr, 1e-3, 1e-15)
end)

T.test("LambdaLR takes its lambda positionally, as PyTorch's LambdaLR(optimizer, lr_lambda)", function()
  local opt = optim.SGD({ ms.zeros(1, { requires_grad = true }) }, { lr = 2.0 })
  local s = optim.lr_scheduler.LambdaLR(opt, function(epoch) return 1 / (epoch + 1) end)
  s:step()
  s:step()
  T.near(opt.param_groups[1].lr, 2.0 / 3, 1e-15)
end)

T.test("lr_scheduler bad input", function()
  local p = ms.zeros(1, { requires_grad = true })
  local opt = optim.Adadelta({ p })
  T.raises(function() optim.lr_scheduler.StepLR(opt, {}) end, "step_size")
  T.raises(function() optim.lr_scheduler.StepLR(opt, { step_size = 1, gama = 0.5 }) end, "StepLR: unknown option 'gama' (expected one of: gamma, last_epoch, step_size)")
  T.raises(function() optim.lr_scheduler.OneCycleLR(opt, { max_lr = 1, total_steps = 10 }) end, "momentum")
  T.raises(function() optim.lr_scheduler.StepLR({}, { step_size = 1 }) end, "optimizer")
  local o2 = optim.SGD({ ms.zeros(1, { requires_grad = true }) }, { lr = 0.1, momentum = 0.9 })
  local s = optim.lr_scheduler.OneCycleLR(o2, { max_lr = 1, total_steps = 2 })
  s:step()
  s:step()
  T.raises(function() s:step() end, "total steps")
  -- option types checked at construction, not inside a formula later
  T.raises(function() optim.lr_scheduler.LinearLR(opt, { start_factor = "a" }) end,
    "LinearLR: option 'start_factor' must be number, got \"a\"")
  T.raises(function() optim.lr_scheduler.StepLR(opt, { step_size = 2.5 }) end, "'step_size' must be integer")
  T.raises(function() optim.lr_scheduler.LambdaLR(opt, { lr_lambda = 3 }) end, "function or table")
  T.raises(function() s:load_state_dict(nil) end, "OneCycleLR:load_state_dict: expected the table")
end)

T.test("zero_grad: options table or PyTorch's positional set_to_none", function()
  local p = ms.ones(2, { requires_grad = true })
  local opt = optim.SGD({ p }, { lr = 0.1 })
  p:sum():backward()
  opt:zero_grad(false)
  T.same(p.grad:tolist(), { 0, 0 }, 0, "set_to_none = false zeroes in place")
  opt:zero_grad(true)
  T.eq(p.grad, nil)
  T.raises(function() opt:zero_grad({ set_to_non = true }) end, "zero_grad: unknown option 'set_to_non' (expected one of: set_to_none)")
  T.raises(function() opt:zero_grad("yes") end, "expected an options table {set_to_none =} or a boolean, got string")
end)

-- ---- gradient clipping ------------------------------------------------------------------------

for _, case in ipairs(ref.clip) do
  T.test(("clip_grad_%s %s"):format(case.kind, tostring(case.norm_type or case.clip_value)), function()
    local params = {}
    for i, shape in ipairs(ref.shapes) do
      params[i] = ms.zeros(shape, { requires_grad = true })
      params[i].grad = tensor_of(case.grads[i], shape, "float32")
    end
    if case.kind == "norm" then
      local total = nn_utils.clip_grad_norm_(params, case.max_norm, { norm_type = case.norm_type })
      T.eq(total:dim(), 0)
      T.eq(total.dtype, "float32")
      T.near(total:item(), case.total, 1e-5 * math.max(1, case.total))
    else
      nn_utils.clip_grad_value_(params, case.clip_value)
    end
    for i, p in ipairs(params) do check_close(p.grad, case.clipped[i], "float32", "grad " .. i) end
  end)
end

T.test("clip_grad_norm_ edge cases", function()
  local p = ms.zeros(2, { requires_grad = true })
  T.eq(nn_utils.clip_grad_norm_({ p }, 1.0):item(), 0.0, "no gradients: zero norm")
  p.grad = ms.tensor({ 3.0, 4.0 })
  T.near(nn_utils.clip_grad_norm_(p, 1.0, { norm_type = "inf" }):item(), 4.0)
  p.grad = ms.tensor({ 0 / 0, 1.0 })
  T.raises(function() nn_utils.clip_grad_norm_({ p }, 1.0, { error_if_nonfinite = true }) end, "non-finite")
end)

-- ---- a whole training loop with autograd against PyTorch --------------------------------------

T.test("training loop: autograd + clip_grad_norm_ + Adadelta + StepLR", function()
  local tr = ref.train
  local w = tensor_of(tr.w0, { 3, 2 }, "float64")
  w.requires_grad = true
  local x = tensor_of(tr.x, { 4, 3 }, "float64")
  local y = tensor_of(tr.y, { 4, 2 }, "float64")
  local opt = optim.Adadelta({ w }, { lr = 1.0 })
  local sched = optim.lr_scheduler.StepLR(opt, { step_size = 1, gamma = 0.7 })
  for step = 1, #tr.losses do
    opt:zero_grad()
    local loss = ms.matmul(x, w):sub(y):square():sum()
    loss:backward()
    nn_utils.clip_grad_norm_({ w }, 5.0)
    opt:step()
    sched:step()
    T.near(loss:item(), tr.losses[step], 1e-10 * math.abs(tr.losses[step]), "loss " .. step)
    check_close(w, tr.w[step], "float64", "w after step " .. step)
  end
end)

T.finish()
