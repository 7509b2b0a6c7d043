-- fsdp.lua: Fully Sharded Data Parallel (`require "moonshard.fsdp"`), PyTorch's FSDP with
-- use_orig_params=True: each unit flattens the parameters of its subtree that no nested unit
-- owns into one FlatParameter (engine/src/fsdp/flat_param.c) and keeps only this rank's shard;
-- the original parameters stay first-class, each one this rank's piece of the shard.
--
--   local fsdp = require "moonshard.fsdp"
--   local model = fsdp.FSDP(Net(), {auto_wrap_policy = fsdp.size_based_auto_wrap_policy{min_num_params = 20000},
--                                   sharding_strategy = "FULL_SHARD"})
--   local opt = optim.Adadelta(model:parameters(), {lr = 1.0})   -- updates the pieces (the shards)
--
-- Tree: FullyShardedDataParallel -> (_fsdp_wrapped_module) FlattenParamsWrapper -> (_fpw_module)
-- the original module. Parameters: model:named_parameters() gives the unwrapped names
-- ("conv1.weight"; FSDP's own path segments are left out) with each rank's piece: a 1-D view
-- into the unit's shard, numel 0 on ranks holding none of it, requires_grad as the original
-- had before wrapping. The modules hold the pieces as their parameters; while a unit computes
-- (and inside summon_full_params) they hold full-shaped views of the gathered buffer instead
-- (kept as plain attributes in between), so forward code is unchanged. After a unit's
-- reduction each piece's .grad is the matching view of the shard's grad (none for frozen and
-- empty pieces): param groups, frozen parameters, gradient accumulation across backwards and
-- optimizer:zero_grad() (set_to_none: the next reduction starts from zero) work as in PyTorch.
--
-- Per unit and step (FSDP:forward is where the pre- and post-forward work runs, as in PyTorch, so
-- user hooks on the unit still see the module as usual): forward gathers the full buffer (all-gather of the shards); FULL_SHARD frees
-- it after forward and gathers it again when the gradient of the unit's output arrives (a tensor
-- hook: the unit's backward is about to start); once every parameter of the unit has its grad
-- (native post-accumulate hooks) the grads are packed and reduce-scattered (averaged) into the
-- shard's grad and the full buffer is freed (FULL_SHARD, SHARD_GRAD_OP). NO_SHARD keeps
-- everything on every rank and all-reduces the packed grads. The root (the outermost unit of a
-- forward) queues one end-of-backward callback (ms_autograd_queue_callback): units whose
-- parameters got only some of their gradients (unused parameters count as zeros) reduce there,
-- and every unit is resharded, before backward returns. A unit none of whose parameters got a
-- gradient does not reduce (as PyTorch); ranks must agree on which units those are.
--
-- Options: auto_wrap_policy, sharding_strategy, process_group, ignored_modules = {m, ...}
-- (their subtrees stay ordinary, unsharded, unreduced parameters on every rank),
-- sync_module_states = true (each unit broadcasts its parameters and buffers from the group's
-- first rank before sharding), use_orig_params (true only: always on). Scopes and helpers:
-- model:no_sync() (to-be-closed: backwards accumulate locally, the first one after reduces the
-- total), model:summon_full_params{writeback = true, recurse = true} (to-be-closed: every unit
-- gathered, modules read full values; writeback copies changes into the shards at close),
-- fsdp.clip_grad_norm_(model, max_norm, norm_type) / model:clip_grad_norm_(...) (the global
-- norm across ranks, as PyTorch's FSDP), fsdp.memory_report(model).
--
-- For the state-dict code: fsdp._local_pieces(model) -> array, in named_parameters order, of
-- {name =, shape =, numel =, offset =, piece =, unit =} for every parameter that a unit
-- manages: name as named_parameters gives it, shape and numel of the original parameter,
-- offset the element (0-based) at which this rank's piece starts within the flattened original
-- (piece:numel() elements; 0 when the rank holds none), piece the tensor itself, unit the FSDP
-- module that owns it. Ignored parameters are not in it: they are ordinary full parameters.
--
-- Not built yet: HYBRID_SHARD, mixed_precision, the prefetch options (refused with "not
-- supported yet"); sharded state dicts and optimizer state dicts by name; communication is
-- synchronous (no overlap). A parameter shared by two units (tied) is refused at wrap time.
local ms = require "moonshard"
local nn = require "moonshard.nn"

local M = {}
local fmt = string.format
local pack, unpack = table.pack, table.unpack
local native = ms._fsdp
local is_module = nn.is_module

local ok_wrap, wrap = pcall(require, "moonshard.fsdp_wrap")
if ok_wrap then
  M.size_based_auto_wrap_policy = wrap.size_based_auto_wrap_policy
  M.ModuleWrapPolicy = wrap.ModuleWrapPolicy
  M.transformer_auto_wrap_policy = wrap.transformer_auto_wrap_policy
  M.lambda_auto_wrap_policy = wrap.lambda_auto_wrap_policy
end

local STRATEGIES = { FULL_SHARD = true, SHARD_GRAD_OP = true, NO_SHARD = true }
M.ShardingStrategy = { FULL_SHARD = "FULL_SHARD", SHARD_GRAD_OP = "SHARD_GRAD_OP", NO_SHARD = "NO_SHARD" }

-- ---- the wrapper classes --------------------------------------------------------------------

local FlattenParamsWrapper = nn.Module:extend("FlattenParamsWrapper")
M.FlattenParamsWrapper = FlattenParamsWrapper

function FlattenParamsWrapper:init(module) self._fpw_module = module end
function FlattenParamsWrapper:forward(...) return self._fpw_module(...) end

local FSDP = nn.Module:extend("FullyShardedDataParallel")
M.FullyShardedDataParallel = FSDP

-- As PyTorch's __getattr__ on both wrappers: a name the wrapper does not have is looked up on
-- the module it wraps (model.fc1.weight reads through a nested unit).
local function forward_missing(cls, inner_name)
  local index = cls.__index
  cls.__index = function(self, k)
    local v = index(self, k)
    if v ~= nil or type(k) ~= "string" then return v end
    local inner = self._modules.map[inner_name]
    if inner ~= nil then return inner[k] end
  end
end
forward_missing(FlattenParamsWrapper, "_fpw_module")
forward_missing(FSDP, "_fsdp_wrapped_module")

-- ---- options --------------------------------------------------------------------------------

-- Options the issue names that this version does not implement: refused, never ignored.
local NOT_YET = {
  mixed_precision = true, backward_prefetch = true, forward_prefetch = true,
  device_id = true, cpu_offload = true, limit_all_gathers = true,
}

local KNOWN = "auto_wrap_policy, ignored_modules, process_group, sharding_strategy, sync_module_states, "
  .. "use_orig_params"

local function check_options(opts)
  if opts == nil then return {} end
  if type(opts) ~= "table" then error(fmt("FSDP: expected an options table, got %s", type(opts)), 3) end
  for k, v in pairs(opts) do
    if NOT_YET[k] then
      error(fmt("FSDP: option '%s' is not supported yet", tostring(k)), 3)
    elseif k == "sync_module_states" or k == "use_orig_params" then
      if type(v) ~= "boolean" then
        error(fmt("FSDP: option '%s': expected a boolean, got %s", k, type(v)), 3)
      end
      if k == "use_orig_params" and not v then
        error("FSDP: option 'use_orig_params': expected true (moonshard's FSDP always keeps the original "
          .. "parameters), got false", 3)
      end
    elseif k == "ignored_modules" then
      if type(v) ~= "table" or is_module(v) then
        error(fmt("FSDP: option 'ignored_modules': expected a list of modules, got %s",
          is_module(v) and "a module" or type(v)), 3)
      end
      if #v == 0 and next(v) ~= nil then
        error("FSDP: option 'ignored_modules': expected a list of modules, got a table that is not a list", 3)
      end
      for i, m in ipairs(v) do
        if not is_module(m) then
          error(fmt("FSDP: option 'ignored_modules': expected a list of modules, got %s at position %d",
            ms.is_tensor(m) and "a tensor" or type(m), i), 3)
        end
      end
    elseif k ~= "auto_wrap_policy" and k ~= "sharding_strategy" and k ~= "process_group" then
      error(fmt("FSDP: unknown option '%s' (known: %s)", tostring(k), KNOWN), 3)
    end
  end
  local s = opts.sharding_strategy or "FULL_SHARD"
  if not STRATEGIES[s] then
    error(fmt("FSDP: sharding_strategy '%s' is not supported yet (FULL_SHARD, SHARD_GRAD_OP or NO_SHARD)",
      tostring(s)), 3)
  end
  return opts
end

-- Every module in the subtrees of the ignored modules, as a set.
local function ignored_set(list)
  local set = {}
  for _, m in ipairs(list or {}) do
    for _, sub in ipairs(m:modules()) do set[sub] = true end
  end
  return set
end

-- ---- flattening -----------------------------------------------------------------------------

-- The (module, name, tensor) of every parameter in m's subtree outside nested units and ignored
-- subtrees, in named_parameters order; the buffers of the same modules go to `buffers`.
local function unit_params(m, out, ignored, buffers)
  for _, name in ipairs(m._parameters.names) do
    out[#out + 1] = { module = m, name = name, tensor = m._parameters.map[name] }
  end
  if buffers then
    for _, name in ipairs(m._buffers.names) do buffers[#buffers + 1] = m._buffers.map[name] end
  end
  for _, cname in ipairs(m._modules.names) do
    local child = m._modules.map[cname]
    if not child:isinstance(FSDP) and not (ignored and ignored[child]) then
      unit_params(child, out, ignored, buffers)
    end
  end
  return out
end

-- Each module keeps its piece as the registered parameter (same place in the order, so
-- named_parameters keeps torch's order) and the full-shaped view as a plain attribute that
-- use_full_views swaps in; _fsdp_param_names keeps the order for state dicts.
local function install_views(entries, index, views, pieces)
  local orig = {}
  for i, e in ipairs(entries) do
    local m = e.module
    local names = rawget(m, "_fsdp_param_names")
    if not names then
      names = {}
      rawset(m, "_fsdp_param_names", names)
      rawset(m, "_fsdp_param_set", {})
    end
    names[#names + 1] = e.name
    m._fsdp_param_set[e.name] = true
    local piece = nn.internal.mark_parameter(pieces[index[i]])
    m._parameters.map[e.name] = piece
    m._attrs[e.name] = views[index[i]]
    orig[i] = { module = m, name = e.name, view = views[index[i]], piece = piece, index = index[i] }
  end
  return orig
end

-- sync_module_states: rank 0 of the group sends its values, packed per dtype (one broadcast
-- each), before any rank keeps its shard.
local function broadcast_from_first(tensors, group)
  local by_dtype, order = {}, {}
  for _, t in ipairs(tensors) do
    if t:numel() > 0 then
      local list = by_dtype[t.dtype]
      if not list then
        list = {}
        by_dtype[t.dtype] = list
        order[#order + 1] = t.dtype
      end
      list[#list + 1] = t
    end
  end
  local src = group and ms.distributed.get_process_group_ranks(group)[1] or 0
  local _ <close> = ms.no_grad()
  for _, dt in ipairs(order) do
    local flat = {}
    for i, t in ipairs(by_dtype[dt]) do flat[i] = t:reshape(-1) end
    local packed = ms.cat(flat)
    ms.distributed.broadcast(packed, { src = src, group = group })
    local at = 1
    for _, t in ipairs(by_dtype[dt]) do
      t:copy_(packed:narrow(1, at, t:numel()):view_as(t))
      at = at + t:numel()
    end
  end
end

-- The original tensors already flattened by some unit (weak: a flattened tensor lives on only
-- where a module still holds it, i.e. where a tie would flatten it a second time).
local FLATTENED = setmetatable({}, { __mode = "k" })

-- Builds the unit's flat parameter; a parameter shared by two modules is flattened once.
local function flatten(self, module, strategy, group, ignored, sync)
  local buffers = sync and {} or nil
  local entries = unit_params(module, {}, ignored, buffers)
  local uniq, index, seen = {}, {}, {}
  for i, e in ipairs(entries) do
    local k = seen[e.tensor]
    if not k then
      uniq[#uniq + 1] = e.tensor
      k = #uniq
      seen[e.tensor] = k
    end
    index[i] = k
    if FLATTENED[e.tensor] then
      error(fmt("FSDP: parameter '%s' of %s is already in another FSDP unit (tied parameters must be in "
        .. "one unit: wrap a module holding every user of it)", e.name, e.module:_get_name()), 4)
    end
  end
  if sync then
    local all = {}
    for _, t in ipairs(uniq) do all[#all + 1] = t end
    for _, t in ipairs(buffers) do all[#all + 1] = t end
    broadcast_from_first(all, group)
  end
  if #uniq == 0 then return end
  local fp, _, views, pieces = native.flat_param(uniq, strategy, group)
  for _, t in ipairs(uniq) do FLATTENED[t] = true end
  self._attrs._orig = install_views(entries, index, views, pieces)
  self._attrs._flat = fp
end

-- ---- construction ---------------------------------------------------------------------------

function FSDP:init(module, opts)
  if not is_module(module) then
    error(fmt("FSDP: bad argument #1 (module): expected a module, got %s", type(module)), 3)
  end
  opts = check_options(opts)
  local strategy = opts.sharding_strategy or "FULL_SHARD"
  local group = opts.process_group
  local ignored = ignored_set(opts.ignored_modules)
  if ignored[module] then
    error("FSDP: option 'ignored_modules': expected modules inside the wrapped module, got the wrapped "
      .. "module itself (or a module around it)", 3)
  end
  if opts.auto_wrap_policy ~= nil then
    if not ok_wrap then error("FSDP: auto_wrap_policy needs moonshard.fsdp_wrap: " .. tostring(wrap), 3) end
    local child_opts = { sharding_strategy = strategy, process_group = group,
      ignored_modules = opts.ignored_modules, sync_module_states = opts.sync_module_states }
    module = wrap.auto_wrap(module, opts.auto_wrap_policy, function(m) return FSDP(m, child_opts) end,
      { wrapper_cls = FSDP, ignored_modules = opts.ignored_modules })
  end
  self._fsdp_wrapped_module = FlattenParamsWrapper(module)
  self._attrs.sharding_strategy = strategy
  self._attrs.process_group = group
  flatten(self, module, strategy, group, ignored, opts.sync_module_states == true)
end

-- FSDP(module, opts): the wrapped module (see the file's header).
function M.FSDP(module, opts) return FSDP(module, opts) end

function FSDP:extra_repr() return "" end

-- The wrapped module, as PyTorch's .module property.
function FSDP:module() return self._fsdp_wrapped_module._fpw_module end

-- ---- parameters under their original names ----------------------------------------------------

-- "_fsdp_wrapped_module._fpw_module.fc1._fsdp_wrapped_module._fpw_module.weight" -> "fc1.weight"
local function clean_name(name)
  local parts = {}
  for seg in name:gmatch("[^.]+") do
    if seg ~= "_fsdp_wrapped_module" and seg ~= "_fpw_module" then parts[#parts + 1] = seg end
  end
  return table.concat(parts, ".")
end

local function cleaned(iter, state, init)
  local list = {}
  for name, v in iter, state, init do list[#list + 1] = { clean_name(name), v } end
  local i = 0
  return function()
    i = i + 1
    local e = list[i]
    if e then return e[1], e[2] end
  end
end

-- As nn.Module's, under the unwrapped module's names (parameters() is nn.Module's: the pieces).
function FSDP:named_parameters(prefix, recurse)
  return cleaned(nn.Module.named_parameters(self, prefix, recurse))
end

function FSDP:named_buffers(prefix, recurse)
  return cleaned(nn.Module.named_buffers(self, prefix, recurse))
end

-- The units (FSDP modules with a flat parameter) of model's tree, in modules() order.
local function units_of(model)
  local out = {}
  for _, m in ipairs(model:modules()) do
    if m:isinstance(FSDP) and m._attrs._flat then out[#out + 1] = m end
  end
  return out
end

-- Points the unit's modules at the full-shaped views (full = true) or back at the pieces.
local function use_full_views(unit, full)
  for _, e in ipairs(unit._attrs._orig) do
    e.module._parameters.map[e.name] = full and e.view or e.piece
  end
end

-- A to-be-closed value running fn at close.
local CLOSER = { __close = function(c) c.fn() end }
local function closer(fn) return setmetatable({ fn = fn }, CLOSER) end

-- ---- forward and backward -------------------------------------------------------------------

-- Calls fn on each tensor of an output: a tensor, or a (shallow) table of tensors.
local function each_tensor(v, fn)
  if ms.is_tensor(v) then return fn(v) end
  if type(v) == "table" and not is_module(v) then
    for _, x in pairs(v) do
      if ms.is_tensor(x) then fn(x) end
    end
  end
end

-- Registers hook on every output that requires grad: it runs when the output's gradient
-- arrives, i.e. when the backward through the unit is about to start.
local function on_backward_start(outs, hook)
  for i = 1, outs.n do
    each_tensor(outs[i], function(t)
      if t.requires_grad then t:register_hook(hook) end
    end)
  end
end

-- FULL_SHARD freed the full buffer after forward; the first gradient reaching an output of the
-- unit means its backward is about to read the saved parameter views: gather them back.
local function pre_backward_hooks(fp, outs)
  on_backward_start(outs, function()
    if not fp:is_gathered() then fp:gather() end
  end)
end

local function needs_backward(outs)
  local any = false
  for i = 1, outs.n do
    each_tensor(outs[i], function(t) any = any or t.requires_grad end)
  end
  return any
end

-- FSDP forwards in progress: the outermost is the root of this forward, the one that finishes
-- every unit of its tree at the end of the backward.
local forward_depth = 0

-- The root's finisher (engine side: one callback finishing all its units), made at its first
-- forward as root (the tree is complete by then).
local function finisher_of(root)
  local f = root._attrs._finisher
  if not f then
    local fps = {}
    for i, u in ipairs(units_of(root)) do fps[i] = u._attrs._flat end
    f = native.finisher(fps)
    root._attrs._finisher = f
  end
  return f
end

function FSDP:forward(...)
  local fp, strategy = self._attrs._flat, self._attrs.sharding_strategy
  local finisher = forward_depth == 0 and finisher_of(self) or nil
  if finisher then finisher:reset() end -- a failed backward may have left it queued
  if fp then
    fp:reset_pending()
    fp:drop_unused_grad()
    -- gathered every forward: the optimizer may have changed the shards since the last gather
    fp:gather()
    use_full_views(self, true)
  end
  forward_depth = forward_depth + 1
  local outs
  do
    local _ <close> = closer(function()
      forward_depth = forward_depth - 1
      if fp then use_full_views(self, false) end
    end)
    outs = pack(self._fsdp_wrapped_module(...))
  end
  local backward = needs_backward(outs)
  if finisher and backward then on_backward_start(outs, function() finisher:queue() end) end
  if fp and strategy ~= "NO_SHARD" then
    if strategy == "FULL_SHARD" or not backward then fp:release() end
    if strategy == "FULL_SHARD" and backward then pre_backward_hooks(fp, outs) end
  end
  return unpack(outs, 1, outs.n)
end

-- ---- scopes: no_sync, summon_full_params --------------------------------------------------------

-- local _ <close> = model:no_sync(): backwards inside accumulate their gradients in each unit's
-- full-shaped parameters without communicating; the first backward after the scope reduces
-- the accumulated total (PyTorch's no_sync; memory: the unsharded grads are kept meanwhile).
function FSDP:no_sync()
  local units = units_of(self)
  local depth = (self._attrs._no_sync_depth or 0) + 1
  self._attrs._no_sync_depth = depth
  for _, u in ipairs(units) do u._attrs._flat:set_no_sync(true) end
  return closer(function()
    self._attrs._no_sync_depth = self._attrs._no_sync_depth - 1
    if self._attrs._no_sync_depth == 0 then
      for _, u in ipairs(units) do u._attrs._flat:set_no_sync(false) end
    end
  end)
end

-- local _ <close> = model:summon_full_params{writeback = true, recurse = true}: every unit of the
-- tree (only this one with recurse = false) is gathered and its modules read the full values.
-- With writeback (the default) what was written into them reaches the shards at close;
-- without, sharded units drop it (NO_SHARD keeps it: its shard is the full buffer).
function FSDP:summon_full_params(opts)
  if opts ~= nil and type(opts) ~= "table" then
    error(fmt("summon_full_params: bad argument #1 (opts): expected an options table, got %s", type(opts)), 2)
  end
  opts = opts or {}
  for k, v in pairs(opts) do
    if k ~= "writeback" and k ~= "recurse" then
      error(fmt("summon_full_params: unknown option '%s' (known: recurse, writeback)", tostring(k)), 2)
    end
    if type(v) ~= "boolean" then
      error(fmt("summon_full_params: option '%s': expected a boolean, got %s", k, type(v)), 2)
    end
  end
  if forward_depth > 0 then error("summon_full_params: expected no forward in progress, got one", 2) end
  local writeback = opts.writeback ~= false
  local units = opts.recurse == false and (self._attrs._flat and { self } or {}) or units_of(self)
  local was = {}
  for i, u in ipairs(units) do
    local fp = u._attrs._flat
    was[i] = fp:is_gathered()
    fp:gather()
    use_full_views(u, true)
  end
  return closer(function()
    for i, u in ipairs(units) do
      local fp = u._attrs._flat
      use_full_views(u, false)
      if writeback then fp:update_shard() end
      if not was[i] then fp:release() end
    end
  end)
end

-- ---- gradient clipping ------------------------------------------------------------------------

local function norm_type_of(v)
  if v == nil then return 2.0 end
  if v == "inf" or v == math.huge then return math.huge end
  if type(v) ~= "number" or not (v > 0) then
    error(fmt("clip_grad_norm_: bad argument #3 (norm_type): expected a positive number or 'inf', got %s",
      type(v) == "number" and tostring(v) or type(v)), 3)
  end
  return v
end

-- The norm (p finite: the sum of |g|^p; inf: the max |g|) of a list of grads, as a Lua number.
local function local_norm(grads, p)
  local acc = 0.0
  for _, g in ipairs(grads) do
    if p == math.huge then
      local n = g:abs():max():item()
      if n > acc or n ~= n then acc = n end
    else
      acc = acc + ms.norm(g, p):item() ^ p
    end
  end
  return acc
end

-- fsdp.clip_grad_norm_(model, max_norm, norm_type = 2) as PyTorch's FSDP.clip_grad_norm_: the
-- norm of all of the model's gradients together across ranks (sharded units' pieces: local
-- sums all-reduced, max for inf; NO_SHARD units and ignored parameters, the same on every rank:
-- counted once, locally), gradients scaled in place by min(1, max_norm / (norm + 1e-6)).
-- Returns the total norm as a 0-dim tensor. Every rank of the model's group must call it.
function M.clip_grad_norm_(model, max_norm, norm_type)
  if not (is_module(model) and model:isinstance(FSDP)) then
    error(fmt("clip_grad_norm_: bad argument #1 (model): expected an FSDP module, got %s",
      is_module(model) and model:_get_name() or type(model)), 2)
  end
  if type(max_norm) ~= "number" then
    error(fmt("clip_grad_norm_: bad argument #2 (max_norm): expected a number, got %s", type(max_norm)), 2)
  end
  local p = norm_type_of(norm_type)
  local sharded_set = {}
  for _, u in ipairs(units_of(model)) do
    if u._attrs.sharding_strategy ~= "NO_SHARD" then
      for _, e in ipairs(u._attrs._orig) do sharded_set[e.piece] = true end
    end
  end
  local sharded, replicated, all, dtype = {}, {}, {}, nil
  for _, param in ipairs(model:parameters()) do
    dtype = dtype or param.dtype
    local g = param.grad
    if g ~= nil then
      local list = sharded_set[param] and sharded or replicated
      list[#list + 1] = g
      all[#all + 1] = g
    end
  end
  local t = ms.tensor({ local_norm(sharded, p) }, { dtype = "float64" })
  ms.distributed.all_reduce(t, { op = p == math.huge and "max" or "sum", group = model._attrs.process_group })
  local mine, total = local_norm(replicated, p), t:tolist()[1]
  if p == math.huge then
    if mine > total or mine ~= mine then total = mine end
  else
    total = (total + mine) ^ (1 / p)
  end
  local coef = max_norm / (total + 1e-6)
  if coef > 1.0 then coef = 1.0 end
  for _, g in ipairs(all) do g:mul_(coef) end -- by 1 too, as PyTorch (the same NaN behaviour)
  return ms.tensor(total, { dtype = all[1] and all[1].dtype or dtype or "float32" })
end

function FSDP:clip_grad_norm_(max_norm, norm_type) return M.clip_grad_norm_(self, max_norm, norm_type) end

-- ---- the pieces, for state dicts ----------------------------------------------------------------

-- See the file's header.
function M._local_pieces(model)
  local info = {}
  for _, u in ipairs(units_of(model)) do
    local offsets = u._attrs._flat:piece_offsets()
    for _, e in ipairs(u._attrs._orig) do
      if not info[e.piece] then
        info[e.piece] = { shape = e.view.shape, numel = e.view:numel(), offset = offsets[e.index],
          piece = e.piece, unit = u }
      end
    end
  end
  local out = {}
  for name, param in model:named_parameters() do
    local i = info[param]
    if i then
      i.name = name
      out[#out + 1] = i
    end
  end
  return out
end

-- ---- state dicts (FULL type) ----------------------------------------------------------------

-- Walks the tree under the original names: each unit is gathered while its subtree is visited
-- (one unit and its ancestors at a time, never the whole model twice).
local function walk_state(m, prefix, visit)
  if m:isinstance(FSDP) then
    local fp = m._attrs._flat
    local was = fp and fp:is_gathered()
    if fp and not was then fp:gather() end
    walk_state(m._fsdp_wrapped_module._fpw_module, prefix, visit)
    if fp and not was then fp:release() end
    return
  end
  for _, name in ipairs(rawget(m, "_fsdp_param_names") or {}) do visit(prefix .. name, m._attrs[name], m) end
  local managed = rawget(m, "_fsdp_param_set") or {}
  for _, name in ipairs(m._parameters.names) do
    if not managed[name] then visit(prefix .. name, m._parameters.map[name], m) end
  end
  for _, name in ipairs(m._buffers.names) do
    if not m._non_persistent[name] then visit(prefix .. name, m._buffers.map[name], m) end
  end
  for _, cname in ipairs(m._modules.names) do walk_state(m._modules.map[cname], prefix .. cname .. ".", visit) end
end

-- The full state dict under the unwrapped module's names, on every rank (every rank takes part
-- in the gathers; rank 0 usually saves it). Tensors are copies: the full buffers are freed after.
function FSDP:state_dict(opts)
  opts = opts or {}
  local sd, keys = {}, {}
  local _ <close> = ms.no_grad()
  walk_state(self, opts.prefix or "", function(name, t)
    keys[#keys + 1] = name
    sd[name] = t:detach():clone()
  end)
  return setmetatable(sd, { __pairs = nn.internal.ordered_pairs_of(keys) }), keys
end

-- Loads a full state dict (unwrapped names, as state_dict gives or an unwrapped model saved):
-- every key must be there with its shape; then each rank keeps its slice.
function FSDP:load_state_dict(sd, opts)
  if type(sd) ~= "table" then error(fmt("load_state_dict: expected a table of name -> tensor, got %s", type(sd)), 2) end
  local strict = not (type(opts) == "table" and opts.strict == false)
  local own, own_keys = self:state_dict()
  local missing, unexpected = {}, {}
  for _, k in ipairs(own_keys) do
    local v = rawget(sd, k)
    if v == nil then missing[#missing + 1] = k
    elseif tostring(v.shape) ~= tostring(own[k].shape) then
      error(fmt("load_state_dict: size mismatch for %s: copying a param with shape %s, the shape in current model is %s",
        k, tostring(v.shape), tostring(own[k].shape)), 2)
    end
  end
  for k in pairs(sd) do
    if rawget(own, k) == nil then unexpected[#unexpected + 1] = tostring(k) end
  end
  if strict and (#missing > 0 or #unexpected > 0) then
    error(fmt("Error(s) in loading state_dict for %s: missing keys: %s; unexpected keys: %s", self:_get_name(),
      table.concat(missing, ", "), table.concat(unexpected, ", ")), 2)
  end
  local _ <close> = ms.no_grad()
  local units = {}
  for _, m in ipairs(self:modules()) do
    if m:isinstance(FSDP) and m._attrs._flat then units[#units + 1] = m._attrs._flat end
  end
  -- gather every unit, write through the views, then each rank copies back its slice
  for _, fp in ipairs(units) do fp:gather() end
  walk_state(self, "", function(name, t)
    local v = rawget(sd, name)
    if v ~= nil then t:copy_(v) end
  end)
  for _, fp in ipairs(units) do
    fp:update_shard()
    if self._attrs.sharding_strategy ~= "NO_SHARD" then fp:release() end
  end
  return { missing_keys = missing, unexpected_keys = unexpected }
end

-- Per rank: units, numel of the originals, of the shards (what params, grads and each
-- optimizer state take) and of the padded full buffers, and how many units are gathered now.
function M.memory_report(model)
  local r = { units = 0, full_numel = 0, shard_numel = 0, padded_numel = 0, gathered = 0 }
  for _, m in ipairs(model:modules()) do
    local fp = m:isinstance(FSDP) and m._attrs._flat
    if fp then
      local i = fp:info()
      r.units, r.full_numel = r.units + 1, r.full_numel + i.numel
      r.shard_numel, r.padded_numel = r.shard_numel + i.shard_numel, r.padded_numel + i.padded
      if fp:is_gathered() then r.gathered = r.gathered + 1 end
    end
  end
  return r
end

return M
