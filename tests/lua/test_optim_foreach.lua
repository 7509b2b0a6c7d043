-- test_optim_foreach.lua: the multi-tensor optimizer steps (foreach, the default for SGD, Adam,
-- AdamW and Adadelta) against the single-tensor path (foreach = false), bit for bit on the CPU;
-- capturable on the CPU (accepted, changes nothing); and the replay hooks of a step captured in
-- a CUDA graph, through a fake graph (the hook logic needs no GPU: tests/lua/
-- test_cuda_optim_graph.lua runs real captures).
local T = require "testing"
local ms = require "moonshard"
local optim = require "moonshard.optim"
local native = ms._optim

-- Odd sizes, more tensors than one native call takes (48), one empty (a rank holding no piece of
-- a sharded parameter) and one over the CPU's threading grain (a range cut inside a tensor).
local SIZES = { 40000, 0 }
for i = 1, 58 do SIZES[#SIZES + 1] = (i * 37) % 211 + 1 end

local function make_params(dtype, seed)
  ms.manual_seed(seed)
  local ps = {}
  for i, n in ipairs(SIZES) do
    local p = ms.randn(n, { dtype = dtype })
    if i % 7 == 3 then p = p:reshape(1, n) end -- a 2-D one now and then
    p.requires_grad = true
    ps[i] = p
  end
  return ps
end

-- Fresh gradients for step k: the same on both parameter sets; some parameters skip some steps
-- (no grad: no update, and for Adam a step count of their own), one gradient is strided.
local function set_grads(ps, k)
  ms.manual_seed(1000 + k)
  for i, p in ipairs(ps) do
    if (i + k) % 5 == 0 then
      p.grad = nil
    else
      local g = ms.randn(p:numel(), { dtype = p.dtype }):reshape(p.shape)
      if i == 4 and p:dim() == 1 and p:numel() > 1 then g = ms.randn(p:numel(), 2, { dtype = p.dtype }):select(2, 1) end
      p.grad = g
    end
  end
end

-- Every element equal (NaN where NaN), as bits would be up to the sign of zero.
local function check_identical(a, b, what)
  T.eq(#a, #b, what .. ": count")
  for i = 1, #a do
    local x, y = a[i]:detach():reshape(-1), b[i]:detach():reshape(-1)
    local same = x:eq(y):logical_or(x:ne(x):logical_and(y:ne(y)))
    if x:numel() > 0 and not same:all():item() then
      local idx = same:logical_not():nonzero()[1][1]:item()
      error(("%s: tensor %d differs at %d: %.17g vs %.17g"):format(what, i, idx, x[idx]:item(), y[idx]:item()), 2)
    end
  end
end

local function run(ctor, opts, foreach, dtype, steps, sched_opts)
  local ps = make_params(dtype, 7)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.foreach = foreach
  local opt = ctor(ps, o)
  local sched = sched_opts and optim.lr_scheduler.StepLR(opt, sched_opts)
  for k = 1, steps do
    set_grads(ps, k)
    opt:step()
    if sched then sched:step() end
  end
  return ps, opt
end

local CASES = {
  { "SGD", optim.SGD, { lr = 0.1 } },
  { "SGD momentum", optim.SGD, { lr = 0.1, momentum = 0.9, dampening = 0.1, weight_decay = 0.01 } },
  { "SGD nesterov maximize", optim.SGD, { lr = 0.05, momentum = 0.8, nesterov = true, maximize = true } },
  { "Adam", optim.Adam, { lr = 0.01, weight_decay = 0.1 } },
  { "Adam amsgrad maximize", optim.Adam, { lr = 0.01, amsgrad = true, maximize = true } },
  { "AdamW", optim.AdamW, { lr = 0.01, betas = { 0.8, 0.99 } } },
  { "Adadelta", optim.Adadelta, { lr = 1.0 } },
  { "Adadelta decay maximize", optim.Adadelta, { lr = 0.5, rho = 0.8, weight_decay = 0.1, maximize = true } },
}

for _, case in ipairs(CASES) do
  local name, ctor, opts = case[1], case[2], case[3]
  for _, dtype in ipairs({ "float32", "float64" }) do
    T.test(("foreach %s %s: bit for bit the single-tensor steps"):format(name, dtype), function()
      local a, oa = run(ctor, opts, true, dtype, 4, { step_size = 2, gamma = 0.5 })
      local b, ob = run(ctor, opts, false, dtype, 4, { step_size = 2, gamma = 0.5 })
      check_identical(a, b, name .. " params")
      -- the state too: every tensor and the step counts
      local sa, sb = oa:state_dict().state, ob:state_dict().state
      for i = 1, #SIZES do
        local x, y = sa[i] or {}, sb[i] or {}
        for k, v in pairs(y) do
          if ms.is_tensor(v) then check_identical({ x[k] }, { v }, ("%s state %d %s"):format(name, i, k))
          else T.eq(x[k], v, ("%s state %d %s"):format(name, i, k)) end
        end
        for k in pairs(x) do T.truthy(y[k] ~= nil, ("%s: foreach made state %s of %d, the single path none"):format(name, k, i)) end
      end
      -- and a change of the path changes the result (the comparison can fail)
      local c = run(ctor, opts, true, dtype, 3)
      T.truthy(not c[1]:equal(a[1]), name .. ": 3 steps and 4 differ")
    end)
  end
end

T.test("foreach is the default, listed in param_groups; false keeps the single-tensor path", function()
  local p = ms.zeros(3, { requires_grad = true })
  for _, ctor in ipairs({ optim.SGD, optim.Adam, optim.AdamW, optim.Adadelta }) do
    local opt = ctor({ p }, { lr = 0.1 })
    T.eq(opt.param_groups[1].foreach, true, "foreach default")
    T.eq(opt.param_groups[1].capturable, false, "capturable default")
  end
  T.eq(optim.RMSprop({ p }, { lr = 0.1 }).param_groups[1].foreach, nil, "RMSprop has no foreach step")
  -- counting native calls: one per list with foreach, one per parameter without
  local calls = { list = 0, single = 0 }
  local list_fn, single_fn = optim.Adam._list.step, native.adam_step
  optim.Adam._list.step = function(...) calls.list = calls.list + 1; return list_fn(...) end
  native.adam_step = function(...) calls.single = calls.single + 1; return single_fn(...) end
  local ok, err = pcall(function()
    for _, foreach in ipairs({ true, false }) do
      local ps = make_params("float32", 3)
      local opt = optim.Adam(ps, { foreach = foreach })
      for _, q in ipairs(ps) do q.grad = ms.ones_like(q) end
      opt:step()
    end
  end)
  optim.Adam._list.step, native.adam_step = list_fn, single_fn
  assert(ok, err)
  T.eq(calls.list, 1, "one list call for 60 parameters (native chunks them by 48)")
  T.eq(calls.single, #SIZES, "one call per parameter without foreach")
end)

T.test("a subclass that overrides _update keeps its _update (the list step is the class's own)", function()
  local Clipped = setmetatable({}, { __index = optim.SGD })
  Clipped.__index = Clipped
  local calls = 0
  function Clipped:_update(p, grad, g, state)
    calls = calls + 1
    optim.SGD._update(self, p, grad:clamp(-0.5, 0.5), g, state)
  end
  local w = ms.zeros(2, { requires_grad = true })
  local opt = optim.Optimizer.init(setmetatable({}, Clipped), "Clipped", { w }, optim.SGD.defaults, { lr = 1 })
  w.grad = ms.tensor({ 3.0, -0.25 })
  opt:step()
  T.eq(calls, 1, "its _update ran")
  T.same(w:tolist(), { -0.5, 0.25 }, 0, "clipped update")
end)

T.test("capturable on the CPU: accepted, the same result bit for bit", function()
  for _, case in ipairs(CASES) do
    local opts = {}
    for k, v in pairs(case[3]) do opts[k] = v end
    opts.capturable = true
    local a = run(case[2], opts, true, "float32", 3)
    local b = run(case[2], case[3], false, "float32", 3)
    check_identical(a, b, case[1] .. " capturable")
  end
end)

-- ---- a captured step's replay hooks, through a fake graph ----------------------------------------

local function fake_graph()
  local g = { hooks = {} }
  function g:add_replay_hook(fn) self.hooks[#self.hooks + 1] = fn end
  function g:replay() for _, fn in ipairs(self.hooks) do fn() end end
  return g
end

-- opt:step() while graph is "being captured".
local function capture(opt, graph)
  local saved = optim._current_graph
  optim._current_graph = function() return graph end
  local ok, err = pcall(opt.step, opt)
  optim._current_graph = saved
  if not ok then error(err, 0) end
end

local function params2()
  local ps = { ms.randn(5, { requires_grad = true }), ms.randn(3, 2, { requires_grad = true }) }
  for _, p in ipairs(ps) do p.grad = ms.ones_like(p) end
  return ps
end

T.test("captured Adam: replays advance the step and write an eager step's numbers, lr from the schedule", function()
  local ps = params2()
  local opt = optim.AdamW(ps, { lr = 0.1, betas = { 0.9, 0.99 }, weight_decay = 0.5 })
  local sched = optim.lr_scheduler.StepLR(opt, { step_size = 1, gamma = 0.5 })
  opt:step() -- the warm-up step makes the state
  sched:step()
  local graph = fake_graph()
  capture(opt, graph)
  T.eq(#graph.hooks, 1, "one hook for the one list")
  T.eq(opt.state[ps[1]].step, 1, "a capture does not advance the step (its kernels have not run)")
  local lists = opt._graph_lists[graph]
  T.eq(#lists, 1, "one captured list")
  local hp = lists[1].hp
  T.eq(hp.dtype, "float64", "hp dtype")
  for k = 2, 4 do
    graph:replay()
    for _, p in ipairs(ps) do T.eq(opt.state[p].step, k, "step after replay") end
    local lr = 0.1 * 0.5 ^ (k - 1)
    local want = native.adam_slots({ lr = lr, beta1 = 0.9, beta2 = 0.99, eps = 1e-8, weight_decay = 0.5,
      decoupled = true, step = k })
    check_identical({ hp }, { want }, "slots of replay " .. k)
    -- the numbers themselves, as PyTorch derives them
    T.eq(hp[4]:item(), lr / (1 - 0.9 ^ k), "step size")
    T.eq(hp[5]:item(), math.sqrt(1 - 0.99 ^ k), "bias correction")
    T.eq(hp[6]:item(), 1 - lr * 0.5, "AdamW decay")
    sched:step()
  end
end)

T.test("captured SGD and Adadelta: the learning rate a scheduler sets reaches hp", function()
  for _, ctor in ipairs({ optim.SGD, optim.Adadelta }) do
    local ps = params2()
    local opt = ctor(ps, { lr = 0.3, momentum = ctor == optim.SGD and 0.9 or nil })
    opt:step()
    local graph = fake_graph()
    capture(opt, graph)
    local hp = opt._graph_lists[graph][1].hp
    opt.param_groups[1].lr = 0.25
    graph:replay()
    T.eq(hp[1]:item(), 0.25, opt.name .. " lr slot")
    if ctor == optim.SGD then T.eq(hp[2]:item(), 0.9, "momentum slot")
    else T.eq(opt.state[ps[1]].step, 2, "Adadelta step count") end
  end
end)

T.test("a capture needs the state of an eager step; RMSprop cannot be captured", function()
  local graph = fake_graph()
  T.raises(function() capture(optim.Adam(params2()), graph) end, "Adam", "take one eager step first")
  T.raises(function() capture(optim.SGD(params2(), { lr = 0.1, momentum = 0.9 }), graph) end,
    "SGD", "take one eager step first")
  T.raises(function() capture(optim.RMSprop(params2()), graph) end, "RMSprop", "cannot be captured")
  -- SGD without momentum keeps no state: capturable from the first step
  local opt = optim.SGD(params2(), { lr = 0.1 })
  capture(opt, graph)
  T.eq(#graph.hooks, 1, "SGD's hook")
end)

T.test("list steps: bad input names the argument", function()
  local p, q = ms.zeros(3), ms.zeros(4)
  local o = { lr = 0.1, rho = 0.9, eps = 1e-6 }
  T.raises(function() native.adadelta_step_list({ p }, { p, q }, { p }, { p }, o) end,
    "_optim.adadelta_step_list", "grads has 2 tensors, params has 1")
  T.raises(function() native.adadelta_step_list({ p, q }, { p, p }, { p, q }, { p, q }, o) end,
    "adadelta_step_list", "grads[2] must have the parameter's shape (4,), got (3,)")
  T.raises(function() native.adadelta_step_list({ p, q:double() }, { p, q:double() }, { p, q:double() }, { p, q:double() }, o) end,
    "adadelta_step_list", "params[2] has dtype float64, params[1] float32")
  T.raises(function() native.adam_step_list({ p }, { p }, { p }, { p }, nil, { step = 0 }) end,
    "adam_step_list", "step must be >= 1")
  T.raises(function() native.sgd_step_list({ p }, { p }, nil, { momentum = 0.9 }) end,
    "sgd_step_list", "momentum_buffers is required")
  T.raises(function() native.adadelta_step_list({ p }, { p }, { p }, { q }, o) end,
    "acc_deltas[1] must have the parameter's shape")
  native.adadelta_step_list({}, {}, {}, {}, o) -- an empty list is no work
  -- the numbers of a captured step: written into a buffer that slots_buffer makes
  local hp = native.slots_buffer(p)
  T.eq(hp.dtype, "float64", "slots_buffer dtype")
  T.eq(hp:numel(), 8, "slots_buffer size")
  T.truthy(rawequal(native.sgd_slots({ lr = 0.5, momentum = 0.25 }, hp), hp), "returns hp")
  T.same(hp:tolist(), { 0.5, 0.25, 0, 0, 0, 0, 0, 0 }, 0, "sgd slots")
  T.raises(function() native.sgd_slots({ lr = 0.5 }, ms.zeros(8)) end,
    "optim_slots_write", "hp must be a contiguous float64 tensor of at least 8 elements, got float32")
  T.raises(function() native.sgd_slots({ lr = 0.5 }, hp, 3) end, "_optim.sgd_slots", "unexpected argument")
end)

T.finish()
