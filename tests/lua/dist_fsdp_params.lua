-- dist_fsdp_params.lua: FSDP's original parameters and what hangs on them, across the ranks of
-- an mpirun launch (registered for 1..4 ranks, with and without MS_DIST_DEBUG=1), each checked
-- against one process training the unwrapped model: names and pieces, param groups, frozen
-- parameters, gradient accumulation and zero_grad, unused parameters, ignored_modules,
-- sync_module_states, no_sync, summon_full_params, clip_grad_norm_, and bad options. Tiny nets
-- in float64, so that equivalence is tested to 1e-10 rather than to float32 rounding.
local ms = require "moonshard"
local nn = require "moonshard.nn"
local F = require "moonshard.functional"
local optim = require "moonshard.optim"
local nn_utils = require "moonshard.nn_utils"
local fsdp = require "moonshard.fsdp"
local T = require "testing"
local dist = ms.distributed

local D = require "launch_testing"
local R, W = D.init()
local DT = "float64"
local TOL = 1e-10

local case = D.case

-- ---- the net, the data, the references ------------------------------------------------------------

local Tiny = nn.Module:extend("Tiny")
function Tiny:init(opts)
  opts = opts or {}
  self.fc1 = nn.Linear(6, 8)
  self.fc2 = nn.Linear(8, 8)
  if opts.spare then self.spare = nn.Linear(8, 8) end -- registered, never used in forward
  if opts.norm then self.norm = nn.BatchNorm1d(8) end
  self.head = nn.Linear(8, 4)
end
function Tiny:forward(x)
  x = F.relu(self.fc1(x))
  x = F.relu(self.fc2(x))
  if self.norm then x = self.norm(x) end
  return F.log_softmax(self.head(x), 2)
end

local BATCH = 24 -- divisible by every world size 1..4

local function make(opts, seed)
  ms.manual_seed(seed or 1)
  local m = Tiny(opts)
  m:to(DT)
  return m
end

local function data(seed)
  ms.manual_seed(seed or 7)
  return ms.randn(BATCH, 6, {dtype = DT}), ms.randint(1, 5, {BATCH})
end

-- This rank's rows of a global batch.
local function slice(x, y)
  local b = BATCH // W
  return x:narrow(1, R * b + 1, b), y:narrow(1, R * b + 1, b)
end

local function loss_of(model, x, y) return F.nll_loss(model(x), y, {reduction = "mean"}) end

local POLICY = fsdp.ModuleWrapPolicy{nn.Linear}

local function wrap(model, strategy, opts)
  opts = opts or {}
  opts.sharding_strategy = strategy
  if opts.auto_wrap_policy == nil then opts.auto_wrap_policy = POLICY end
  if opts.auto_wrap_policy == false then opts.auto_wrap_policy = nil end
  return fsdp.FSDP(model, opts)
end

-- name -> tensor of a model's named_parameters (or of their grads: field = "grad").
local function by_name(model, field)
  local out = {}
  for name, p in model:named_parameters() do
    if field == "grad" then out[name] = p.grad else out[name] = p end
  end
  return out
end

-- name -> full tensor rebuilt from every rank's piece (its grad with field = "grad"; zeros where
-- no rank has one), from fsdp._local_pieces: offsets, numels and shapes are checked on the way.
local function full_of(model, field)
  local out = {}
  for _, e in ipairs(fsdp._local_pieces(model)) do
    local t = e.piece
    if field == "grad" then t = t.grad end
    local full = ms.zeros(e.numel, {dtype = DT})
    if t ~= nil and e.piece:numel() > 0 then full:narrow(1, e.offset + 1, e.piece:numel()):copy_(t) end
    -- NO_SHARD: every rank holds the whole parameter
    if e.unit._attrs.sharding_strategy ~= "NO_SHARD" then dist.all_reduce(full) end
    out[e.name] = full:view(e.shape)
  end
  for name, p in model:named_parameters() do -- ordinary parameters (ignored modules) as they are
    if out[name] == nil then out[name] = field == "grad" and p.grad or p end
  end
  return out
end

local check_near = D.check_state

local STRATEGIES = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"}

-- Between steps a sharded unit holds only its shard (NO_SHARD's full buffer is its shard).
local function check_resharded(model, strategy, what)
  local rep = fsdp.memory_report(model)
  T.eq(rep.gathered, strategy == "NO_SHARD" and rep.units or 0, what .. ": units gathered")
end

-- ---- names and pieces ----------------------------------------------------------------------------

case("named_parameters: the unwrapped names, each rank's 1-D piece of its unit's shard", function()
  local plain = make()
  local want = {}
  for name in plain:named_parameters() do want[#want + 1] = name end
  for _, strategy in ipairs(STRATEGIES) do
    local model = wrap(make(), strategy)
    local got = {}
    for name, p in model:named_parameters() do
      got[#got + 1] = name
      T.eq(p.ndim, 1, name)
      T.truthy(nn.is_parameter(p), name .. " is a parameter")
    end
    T.same(got, want)
    T.eq(#model:parameters(), #want)
    -- the pieces of all ranks put together are the original values
    check_near(full_of(model), D.state_of(plain), 0, strategy .. " pieces")
    -- a submodule's parameters are its pieces too (param groups by module)
    T.eq(model:module().fc2:parameters()[1], by_name(model)["fc2.weight"])
    -- a piece is a view into the shard: writing it changes what the model computes with
    do
      local _ <close> = ms.no_grad()
      for _, p in ipairs(model:parameters()) do p:add_(1) end
    end
    local shifted = {}
    for k, v in pairs(D.state_of(plain)) do shifted[k] = v + 1 end
    check_near(D.state_of(model), shifted, 0, strategy .. " written pieces")
    local x = data()
    local plain2 = make()
    do
      local _ <close> = ms.no_grad()
      for _, p in ipairs(plain2:parameters()) do p:add_(1) end
      local d = (model(x) - plain2(x)):abs():max():item()
      T.truthy(d < 1e-12, ("forward after writing pieces differs by %g"):format(d))
    end
  end
end)

-- ---- param groups, frozen parameters -------------------------------------------------------------

-- Trains steps SGD steps (momentum, per-group options) on the whole batch, or on this rank's
-- slice of it when sliced.
local function train(model, groups, opts, steps, sliced)
  local x, y = data()
  if sliced then x, y = slice(x, y) end
  local opt = optim.SGD(groups(model), opts)
  for _ = 1, steps do
    opt:zero_grad()
    loss_of(model, x, y):backward()
    opt:step()
  end
  return opt
end

case("param groups: another lr and momentum for one layer equal one process", function()
  -- groups picked by name (the usual idiom) and by module
  local by_names = function(model)
    local head, rest = {}, {}
    for name, p in model:named_parameters() do
      if name:match("^head%.") then head[#head + 1] = p else rest[#rest + 1] = p end
    end
    return {{params = rest}, {params = head, lr = 0.5, momentum = 0.0}}
  end
  local by_module = function(model)
    local inner = model.module and model:module() or model
    local rest = {}
    for _, m in ipairs({inner.fc1, inner.fc2}) do
      for _, p in ipairs(m:parameters()) do rest[#rest + 1] = p end
    end
    return {{params = rest}, {params = inner.head:parameters(), lr = 0.5, momentum = 0.0}}
  end
  for _, groups in ipairs({by_names, by_module}) do
    local plain = make()
    train(plain, groups, {lr = 0.1, momentum = 0.9}, 3, false)
    for _, strategy in ipairs(STRATEGIES) do
      local model = wrap(make(), strategy)
      train(model, groups, {lr = 0.1, momentum = 0.9}, 3, true)
      check_near(D.state_of(model), D.state_of(plain), TOL, strategy .. " param groups")
    end
  end
end)

case("frozen parameters: no grad, never moved, even with weight decay", function()
  local trainable = function(model)
    local list = {}
    for _, p in ipairs(model:parameters()) do
      if p.requires_grad then list[#list + 1] = p end
    end
    return list
  end
  local function frozen_make()
    local m = make()
    m.fc1.weight.requires_grad = false
    return m
  end
  local plain = frozen_make()
  train(plain, trainable, {lr = 0.1, weight_decay = 0.1}, 3, false)
  for _, strategy in ipairs(STRATEGIES) do
    local model = wrap(frozen_make(), strategy, {auto_wrap_policy = false})
    local piece = by_name(model)["fc1.weight"]
    T.eq(piece.requires_grad, false, "the frozen piece's requires_grad")
    T.truthy(by_name(model)["fc1.bias"].requires_grad, "the others still require grad")
    train(model, trainable, {lr = 0.1, weight_decay = 0.1}, 3, true)
    T.truthy(piece.grad == nil, "the frozen piece has no grad")
    check_near(D.state_of(model), D.state_of(plain), TOL, strategy .. " frozen")
    check_near({w = full_of(model)["fc1.weight"]}, {w = make().fc1.weight}, 0, strategy .. " fc1.weight unchanged")
  end
end)

-- ---- gradient accumulation and zero_grad -----------------------------------------------------------

case("two backwards accumulate; zero_grad (set_to_none or not) restarts from zero", function()
  local x, y = data()
  local x2, y2 = data(8)
  local plain = make()
  loss_of(plain, x, y):backward()
  local once = {}
  for k, g in pairs(by_name(plain, "grad")) do once[k] = g:clone() end
  loss_of(plain, x2, y2):backward()
  local twice = by_name(plain, "grad")
  local lx, ly = slice(x, y)
  local lx2, ly2 = slice(x2, y2)
  for _, strategy in ipairs(STRATEGIES) do
    local model = wrap(make(), strategy)
    local opt = optim.SGD(model:parameters(), {lr = 0.1})
    loss_of(model, lx, ly):backward()
    check_near(full_of(model, "grad"), once, TOL, strategy .. " one backward")
    loss_of(model, lx2, ly2):backward()
    check_near(full_of(model, "grad"), twice, TOL, strategy .. " two backwards")
    opt:zero_grad()
    for name, p in model:named_parameters() do T.truthy(p.grad == nil, name .. " grad cleared") end
    loss_of(model, lx, ly):backward()
    check_near(full_of(model, "grad"), once, TOL, strategy .. " after zero_grad")
    opt:zero_grad({set_to_none = false})
    loss_of(model, lx, ly):backward()
    check_near(full_of(model, "grad"), once, TOL, strategy .. " after zero_grad(set_to_none=false)")
    -- a grad assigned by hand is what the next reduction adds to
    for _, p in ipairs(model:parameters()) do
      if p.grad ~= nil then p.grad = ms.ones(p:numel(), {dtype = DT}) end
    end
    loss_of(model, lx, ly):backward()
    local want = {}
    for k, g in pairs(once) do want[k] = g + 1 end
    check_near(full_of(model, "grad"), want, TOL, strategy .. " after assigning grads")
  end
end)

-- ---- unused parameters -------------------------------------------------------------------------------

case("unused parameters count as zeros; a wholly unused unit does not block; root waits", function()
  local x, y = data()
  local plain = make({spare = true})
  train(plain, function(m) return m:parameters() end, {lr = 0.1, momentum = 0.9}, 3, false)
  for _, strategy in ipairs(STRATEGIES) do
    -- spare in the root unit (the unit is used, spare is not) ...
    local model = wrap(make({spare = true}), strategy, {auto_wrap_policy = false})
    local opt = train(model, function(m) return m:parameters() end, {lr = 0.1, momentum = 0.9}, 3, true)
    check_near(D.state_of(model), D.state_of(plain), TOL, strategy .. " unused in a used unit")
    for name, p in model:named_parameters() do
      if p:numel() > 0 then
        T.truthy(p.grad ~= nil, name .. ": every reduction finished before backward returned")
        if name:match("^spare") then T.eq(p.grad:abs():max():item(), 0.0, name .. " grad") end
      end
    end
    check_resharded(model, strategy, "unused")
    T.truthy(opt ~= nil)
    -- ... and spare its own unit, never used: no reduction, no grad, no hang
    local m2 = wrap(make({spare = true}), strategy)
    local lx, ly = slice(x, y)
    loss_of(m2, lx, ly):backward()
    loss_of(m2, lx, ly):backward()
    for name, p in m2:named_parameters() do
      if name:match("^spare") then T.truthy(p.grad == nil, name .. " has no grad") end
    end
    check_resharded(m2, strategy, "unused unit")
  end
end)

-- ---- ignored_modules ---------------------------------------------------------------------------------

case("ignored_modules: full parameters on every rank, local gradients, not wrapped", function()
  local x, y = data()
  local lx, ly = slice(x, y)
  local full, loc = make(), make()
  loss_of(full, x, y):backward()
  loss_of(loc, lx, ly):backward()
  for _, strategy in ipairs(STRATEGIES) do
    local inner = make()
    local model = wrap(inner, strategy, {ignored_modules = {inner.fc2}})
    T.truthy(not model:module().fc2:isinstance(fsdp.FullyShardedDataParallel), "fc2 is not a unit")
    T.truthy(model:module().fc1:isinstance(fsdp.FullyShardedDataParallel), "fc1 is")
    local p = by_name(model)
    T.eq(tostring(p["fc2.weight"].shape), "torch.Size([8, 8])")
    T.eq(tostring(p["fc1.weight"].shape), ("torch.Size([%d])"):format(p["fc1.weight"]:numel()))
    T.eq(fsdp.memory_report(model).full_numel, 56 + 36, "fc2 is not flattened")
    loss_of(model, lx, ly):backward()
    local g = full_of(model, "grad")
    local want = by_name(full, "grad")
    local want_local = by_name(loc, "grad")
    want["fc2.weight"], want["fc2.bias"] = want_local["fc2.weight"], want_local["fc2.bias"]
    check_near(g, want, TOL, strategy .. " ignored grads")
  end
end)

-- ---- sync_module_states ------------------------------------------------------------------------------

case("sync_module_states: ranks built differently end up with rank 0's parameters and buffers", function()
  local function rank_model(rank)
    local m = make({norm = true}, 100 + rank)
    local _ <close> = ms.no_grad()
    m.norm.running_mean:fill_(rank + 0.5)
    return m
  end
  local want = D.state_of(rank_model(0))
  for _, policy in ipairs({false, POLICY}) do
    local model = wrap(rank_model(R), "FULL_SHARD", {auto_wrap_policy = policy, sync_module_states = true})
    check_near(D.state_of(model), want, 0, "synced")
  end
  if W > 1 and R > 0 then -- without it, each rank keeps its own buffers
    local model = wrap(rank_model(R), "FULL_SHARD", {})
    T.eq(model:module().norm.running_mean[1]:item(), R + 0.5)
  end
end)

-- ---- no_sync ---------------------------------------------------------------------------------------

case("no_sync: micro-batches accumulated locally, then one reduction, equal one process", function()
  local x, y = data()
  local plain = make()
  local opt_plain = optim.SGD(plain:parameters(), {lr = 0.1})
  loss_of(plain, x, y):backward()
  local want_grads = by_name(plain, "grad")
  opt_plain:step()
  local lx, ly = slice(x, y)
  local b = BATCH // W
  local cuts = {1, b // 3 + 1, 2 * (b // 3) + 1, b + 1} -- three micro-batches
  local function micro(model, i)
    local n = cuts[i + 1] - cuts[i]
    -- sum over the micro-batch / local batch: the three add up to the local mean
    local loss = F.nll_loss(model(lx:narrow(1, cuts[i], n)), ly:narrow(1, cuts[i], n), {reduction = "sum"}) / b
    loss:backward()
  end
  for _, strategy in ipairs(STRATEGIES) do
    local model = wrap(make(), strategy)
    local opt = optim.SGD(model:parameters(), {lr = 0.1})
    do
      local _ <close> = model:no_sync()
      micro(model, 1)
      micro(model, 2)
      for name, p in model:named_parameters() do T.truthy(p.grad == nil, name .. ": nothing reduced yet") end
      check_resharded(model, strategy, "no_sync")
    end
    micro(model, 3)
    check_near(full_of(model, "grad"), want_grads, 1e-5, strategy .. " no_sync grads")
    check_near(full_of(model, "grad"), want_grads, TOL, strategy .. " no_sync grads (float64)")
    opt:step()
    check_near(D.state_of(model), D.state_of(plain), TOL, strategy .. " no_sync step")
  end
end)

-- ---- summon_full_params --------------------------------------------------------------------------

case("summon_full_params: full values in the modules; writeback reaches the shards", function()
  local plain = make()
  local base = D.state_of(plain)
  for _, strategy in ipairs(STRATEGIES) do
    local model = wrap(make(), strategy)
    local inner = model:module()
    do
      local _ <close> = model:summon_full_params()
      T.eq(tostring(inner.fc1.weight.shape), "torch.Size([8, 6])")
      check_near({w = inner.fc1.weight, b = inner.head.bias}, {w = plain.fc1.weight, b = plain.head.bias}, 0,
        "summoned")
      local _ <close> = ms.no_grad()
      inner.fc1.weight:add_(1)
      inner.head.bias:mul_(2)
    end
    T.eq(inner.fc1.weight.ndim, 1, "pieces again after the scope")
    check_resharded(model, strategy, "after summon_full_params")
    local want = {}
    for k, v in pairs(base) do want[k] = v end
    want["fc1.weight"] = base["fc1.weight"] + 1
    want["head.bias"] = base["head.bias"] * 2
    check_near(D.state_of(model), want, 0, strategy .. " written back")
    -- without writeback, a sharded unit drops the change
    if strategy ~= "NO_SHARD" then
      do
        local _ <close> = model:summon_full_params({writeback = false})
        local _ <close> = ms.no_grad()
        inner.fc2.weight:zero_()
      end
      check_near(D.state_of(model), want, 0, strategy .. " not written back")
    end
    -- recurse = false: only the root's own unit (fc1 is a nested unit: still a piece)
    do
      local _ <close> = inner.fc1:summon_full_params({recurse = false})
      T.eq(tostring(inner.fc1:module().weight.shape), "torch.Size([8, 6])")
      T.eq(inner.fc2:module().weight.ndim, 1)
    end
  end
end)

-- ---- clip_grad_norm_ -------------------------------------------------------------------------------

case("clip_grad_norm_: the global norm across shards, as nn_utils on one process", function()
  local x, y = data()
  local lx, ly = slice(x, y)
  for _, norm_type in ipairs({2, 1, 3.5, "inf"}) do
    local plain = make()
    loss_of(plain, x, y):backward()
    local want = nn_utils.clip_grad_norm_(plain:parameters(), 0.05, {norm_type = norm_type}):item()
    local want_grads = by_name(plain, "grad")
    for _, strategy in ipairs(STRATEGIES) do
      local model = wrap(make(), strategy)
      loss_of(model, lx, ly):backward()
      local total = (norm_type == 2 and fsdp.clip_grad_norm_(model, 0.05)
        or model:clip_grad_norm_(0.05, norm_type))
      T.eq(total.ndim, 0)
      T.near(total:item(), want, 1e-9 * want, ("%s norm %s"):format(strategy, norm_type))
      check_near(full_of(model, "grad"), want_grads, 1e-9, ("%s norm %s clipped grads"):format(strategy, norm_type))
    end
  end
  -- ignored parameters hold local grads: counted once, locally
  local full, loc = make(), make()
  loss_of(full, x, y):backward()
  loss_of(loc, lx, ly):backward()
  local grads = by_name(full, "grad")
  local local_grads = by_name(loc, "grad")
  for _, k in ipairs({"fc2.weight", "fc2.bias"}) do grads[k] = local_grads[k] end
  local sq = 0
  for _, g in pairs(grads) do sq = sq + (g * g):sum():item() end
  local inner = make()
  local model = wrap(inner, "FULL_SHARD", {ignored_modules = {inner.fc2}})
  loss_of(model, lx, ly):backward()
  local total = model:clip_grad_norm_(1e6)
  T.near(total:item(), math.sqrt(sq), 1e-9 * math.sqrt(sq), "with an ignored module")
end)

-- ---- bad input ---------------------------------------------------------------------------------------

case("bad options name the function, the argument, what was expected and what came", function()
  T.raises(function() fsdp.FSDP(make(), {ignored_modules = make()}) end,
    "FSDP", "ignored_modules", "expected a list of modules", "got a module")
  T.raises(function() fsdp.FSDP(make(), {ignored_modules = {1}}) end,
    "FSDP", "ignored_modules", "expected a list of modules", "got number")
  local m = make()
  T.raises(function() fsdp.FSDP(m, {ignored_modules = {[m.fc1] = true}}) end,
    "FSDP", "ignored_modules", "expected a list of modules", "not a list")
  T.raises(function() fsdp.FSDP(m, {ignored_modules = {m}}) end, "FSDP", "ignored_modules", "the wrapped module itself")
  T.raises(function() fsdp.FSDP(make(), {sync_module_states = "yes"}) end,
    "FSDP", "sync_module_states", "expected a boolean", "got string")
  T.raises(function() fsdp.FSDP(make(), {use_orig_params = false}) end, "FSDP", "use_orig_params", "expected true")
  local tied = make({spare = true})
  tied.spare.weight = tied.fc2.weight -- one tensor in two units: manual wrapping refuses it, not silently untied
  tied.fc2 = fsdp.FSDP(tied.fc2)
  T.raises(function() fsdp.FSDP(tied) end, "FSDP", "'weight' of Linear", "already in another FSDP unit")
  local tied_one = make({spare = true})
  tied_one.spare.weight = tied_one.fc2.weight -- in one unit: flattened once, given once
  local n = 0
  for _ in fsdp.FSDP(tied_one):named_parameters() do n = n + 1 end
  T.eq(n, 7)
  local model = fsdp.FSDP(make())
  T.raises(function() model:summon_full_params({writeback = 1}) end,
    "summon_full_params", "writeback", "expected a boolean", "got number")
  T.raises(function() model:summon_full_params({rank0_only = true}) end,
    "summon_full_params: unknown option 'rank0_only' (expected one of: recurse, writeback)")
  T.raises(function() model:summon_full_params(true) end,
    "summon_full_params: expected an options table, got boolean")
  T.raises(function() fsdp.clip_grad_norm_(make(), 1.0) end,
    "clip_grad_norm_", "model", "expected an FSDP module", "got Tiny")
  T.raises(function() fsdp.clip_grad_norm_(model, "1") end,
    "clip_grad_norm_", "max_norm", "expected a number", "got string")
  T.raises(function() model:clip_grad_norm_(1.0, -1) end,
    "clip_grad_norm_", "norm_type", "expected a positive number", "got -1")
end)

-- ---- summary: reached only when every rank passed every case ---------------------------------

D.finish("dist_fsdp_params")
