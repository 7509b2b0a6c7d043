-- dist_fsdp_optim.lua: FSDP optimizer state dicts keyed by parameter name, across the ranks of an
-- mpirun launch (registered for 1..4 ranks, with and without MS_DIST_DEBUG=1): the FULL dict
-- after training equals the one-process optimizer's state under the same names; FULL and
-- SHARDED dicts load back (into a fresh wrapped model) and training continues exactly as one
-- process does; rank0_only; precise errors. Every rank runs every case in the same order.
local ms = require "moonshard"
local nn = require "moonshard.nn"
local F = require "moonshard.functional"
local optim = require "moonshard.optim"
local fsdp = require "moonshard.fsdp"
local T = require "testing"
local dist = ms.distributed

local D = require "launch_testing"
local R, W = D.init()

local case = D.case

local Small = D.Small

local BATCH = 12 -- divisible by every world size 1..4

local function data(seed)
  ms.manual_seed(seed)
  return ms.randn(BATCH, 1, 8, 8):double(), ms.randint(1, 6, {BATCH})
end

local function fresh()
  ms.manual_seed(1)
  local m = Small()
  m:double()
  return m
end

-- `steps` Adadelta steps; `sliced` takes this rank's share of each batch.
local function train(model, opt, steps, seed, sliced)
  for s = 1, steps do
    local x, y = data(seed + s)
    if sliced then
      local b = BATCH // W
      x, y = x:narrow(1, R * b + 1, b), y:narrow(1, R * b + 1, b)
    end
    opt:zero_grad()
    F.nll_loss(model(x), y):backward()
    opt:step()
  end
end

local POLICY = fsdp.size_based_auto_wrap_policy{min_num_params = 1000} -- fc1 becomes its own unit

local function wrapped(strategy)
  return fsdp.FSDP(fresh(), {auto_wrap_policy = POLICY, sharding_strategy = strategy})
end

local function optimizer(model)
  -- two groups: per-parameter options by name
  local main, last = {}, {}
  for name, p in model:named_parameters() do
    if name:find("^fc2%.") then last[#last + 1] = p else main[#main + 1] = p end
  end
  return optim.Adadelta({{params = main}, {params = last, lr = 0.5}}, {lr = 1.0, weight_decay = 0.01})
end

local function near(got, want, what)
  T.eq(tostring(got.shape), tostring(want.shape), what .. ": shape")
  local diff = (got - want):abs():max():item()
  local scale = math.max(want:abs():max():item(), 1e-12)
  if diff > 1e-10 * scale then error(("%s differs by %.3g (scale %.3g)"):format(what, diff, scale), 2) end
end

-- The one-process reference: the unwrapped model and its optimizer state by name.
local function reference(steps)
  local m = fresh()
  local opt = optimizer(m)
  train(m, opt, steps, 100, false)
  local by_name = {}
  for name, p in m:named_parameters() do by_name[name] = opt.state[p] end
  return m, opt, by_name
end

local function check_full(osd, ref_state, what)
  local n = 0
  for name, s in pairs(ref_state) do
    local got = osd.state[name]
    T.truthy(got ~= nil, what .. ": state of " .. name)
    T.eq(got.step, s.step, what .. ": step of " .. name)
    near(got.square_avg, s.square_avg, what .. ": square_avg of " .. name)
    near(got.acc_delta, s.acc_delta, what .. ": acc_delta of " .. name)
    n = n + 1
  end
  local m = 0
  for _ in pairs(osd.state) do m = m + 1 end
  T.eq(m, n, what .. ": number of parameters with state")
end

for _, strategy in ipairs({"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"}) do
  case("FULL optimizer state dict equals one process (" .. strategy .. ")", function()
    local _, ref_opt, ref_state = reference(3)
    local model = wrapped(strategy)
    local opt = optimizer(model)
    train(model, opt, 3, 100, true)
    local osd = fsdp.optim_state_dict(model, opt)
    check_full(osd, ref_state, strategy)
    T.eq(#osd.param_groups, 2)
    T.eq(osd.param_groups[2].lr, 0.5)
    T.same(osd.param_groups[2].params, {"fc2.weight", "fc2.bias"})
    T.eq(#osd.param_groups[1].params, #ref_opt.param_groups[1].params)
  end)
end

case("FULL and SHARDED dicts load into a fresh wrapped model; training continues as one process", function()
  local ref_model, ref_opt = reference(2)
  train(ref_model, ref_opt, 2, 200, false)
  local want = ref_model:state_dict()
  for _, kind in ipairs({"FULL", "SHARDED"}) do
    local model = wrapped("FULL_SHARD")
    local opt = optimizer(model)
    train(model, opt, 2, 100, true)
    local msd = model:state_dict()
    local osd = fsdp.optim_state_dict(model, opt, {state_dict_type = kind})
    -- a fresh model and optimizer (different initial weights), loaded from the dicts
    ms.manual_seed(99)
    local model2 = fsdp.FSDP((function() local m = Small() m:double() return m end)(),
      {auto_wrap_policy = POLICY})
    model2:load_state_dict(msd)
    local opt2 = optimizer(model2)
    fsdp.load_optim_state_dict(model2, opt2, osd)
    train(model2, opt2, 2, 200, true)
    local got = model2:state_dict()
    for k, w in pairs(want) do near(got[k], w, kind .. ": " .. k) end
  end
end)

case("SHARDED pieces have the global shapes and this rank's offsets", function()
  local model = wrapped("FULL_SHARD")
  local opt = optimizer(model)
  train(model, opt, 1, 100, true)
  local osd = fsdp.optim_state_dict(model, opt, {state_dict_type = "SHARDED"})
  local pieces = {}
  for _, i in ipairs(fsdp._local_pieces(model)) do pieces[i.name] = i end
  for name, s in pairs(osd.state) do
    local p = pieces[name]
    T.truthy(p ~= nil, name)
    T.eq(s.square_avg.offset, p.offset, name .. ": offset")
    T.eq(s.square_avg.tensor:numel(), p.piece:numel(), name .. ": piece size")
    T.eq(#s.square_avg.shape, #p.shape, name .. ": global shape")
  end
end)

case("rank0_only: only rank 0 keeps the FULL dict", function()
  local model = wrapped("FULL_SHARD")
  local opt = optimizer(model)
  train(model, opt, 1, 100, true)
  local osd = fsdp.optim_state_dict(model, opt, {rank0_only = true})
  if R == 0 then T.truthy(osd.state ~= nil and osd.state["fc1.weight"] ~= nil) else T.eq(next(osd), nil) end
end)

case("errors name the function, the argument and what came", function()
  local model = wrapped("FULL_SHARD")
  local stranger = optim.Adadelta({ms.zeros(3, {requires_grad = true})})
  T.raises(function() fsdp.optim_state_dict(model, stranger) end, "not a parameter of the model")
  local opt = optimizer(model)
  T.raises(function() fsdp.optim_state_dict(model, opt, {state_dict_type = "LOCAL"}) end,
    "expected 'FULL' or 'SHARDED', got LOCAL")
  T.raises(function() fsdp.optim_state_dict(model, opt, {rank0 = true}) end, "unknown option 'rank0'")
  T.raises(function() fsdp.optim_state_dict_to_load(model, opt, 5) end, "expected {state =, param_groups =}")
  T.raises(function()
    fsdp.optim_state_dict_to_load(model, opt, {state = {["nope.weight"] = {step = 1}}, param_groups = {}})
  end, "state for 'nope.weight'")
end)

case("the pieces take the multi-tensor step: one native call per group, bit for bit the single path", function()
  local list_step, calls = optim.Adadelta._list.step, 0
  local results = {}
  for _, foreach in ipairs({true, false}) do
    local model = wrapped("FULL_SHARD")
    local opt = optimizer(model)
    for _, g in ipairs(opt.param_groups) do g.foreach = foreach end
    optim.Adadelta._list.step = function(...) calls = calls + 1; return list_step(...) end
    local ok, err = pcall(train, model, opt, 2, 100, true)
    optim.Adadelta._list.step = list_step
    assert(ok, err)
    local pieces = {}
    for _, p in ipairs(model:parameters()) do pieces[#pieces + 1] = p:detach():clone() end
    results[foreach] = pieces
    if foreach then T.truthy(calls >= 1 and calls <= 2 * #opt.param_groups, "calls: " .. calls) end
  end
  for i, p in ipairs(results[true]) do
    T.truthy(p:equal(results[false][i]), "piece " .. i .. " bit for bit")
  end
end)

D.finish("dist_fsdp_optim")
