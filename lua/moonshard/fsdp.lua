-- fsdp.lua: Fully Sharded Data Parallel (`require "moonshard.fsdp"`), PyTorch 1.13's FSDP with
-- use_orig_params=False: each unit flattens the parameters of its subtree that no nested unit
-- owns into one FlatParameter (engine/src/fsdp/flat_param.c) and keeps only this rank's shard.
--
--   local fsdp = require "moonshard.fsdp"
--   local model = fsdp.FSDP(Net(), {auto_wrap_policy = fsdp.size_based_auto_wrap_policy{min_num_params = 20000},
--                                   sharding_strategy = "FULL_SHARD"})
--   local opt = optim.Adadelta(model:parameters(), {lr = 1.0})   -- updates the shards
--
-- Tree: FullyShardedDataParallel -> (_fsdp_wrapped_module) FlattenParamsWrapper -> (_fpw_module)
-- the original module. model:parameters() gives one shard per unit (named
-- "_fsdp_wrapped_module.flat_param", ...); the original parameters live on as plain attributes
-- of their modules, views into the unit's full buffer, so forward code is unchanged.
--
-- Per unit and step (FSDP:forward is where the pre- and post-forward work runs, as in PyTorch, so
-- user hooks on the unit still see the module as usual): forward gathers the full buffer (all-gather of the shards); FULL_SHARD frees
-- it after forward and gathers it again when the gradient of the unit's output arrives (a tensor
-- hook: the unit's backward is about to start); once every parameter of the unit has its grad
-- (native post-accumulate hooks) the grads are packed and reduce-scattered (averaged) into the
-- shard's grad and the full buffer is freed (FULL_SHARD, SHARD_GRAD_OP). NO_SHARD keeps
-- everything on every rank and all-reduces the packed grads.
--
-- Not built yet: the options HYBRID_SHARD, mixed_precision, the prefetch options,
-- ignored_modules, sync_module_states=true raise "not supported yet"; no_sync,
-- summon_full_params, clip_grad_norm_ and optimizer state dicts by name are absent;
-- communication is synchronous (no overlap); use_orig_params (named_parameters under the original names), unused
-- parameters: a parameter that requires grad but gets no gradient in a backward keeps its unit
-- from reducing, which the next forward reports as an error. Frozen parameters
-- (requires_grad=false before wrapping) get zero gradients in the shard, so an optimizer with
-- weight decay would still move them.
local ms = require "moonshard"
local nn = require "moonshard.nn"

local M = {}
local fmt = string.format
local pack, unpack = table.pack, table.unpack
local native = ms._fsdp
local is_module = nn.is_module
local od_set, od_remove = nn.internal.od_set, nn.internal.od_remove

local state = require "moonshard.fsdp_state"
local checkpoint = require "moonshard.fsdp_checkpoint"
local memory = require "moonshard.fsdp_memory"
M.state_dict_type = state.state_dict_type
M.save_sharded = checkpoint.save_sharded
M.load_sharded = checkpoint.load_sharded
M.StateDictType = { FULL_STATE_DICT = "FULL_STATE_DICT", SHARDED_STATE_DICT = "SHARDED_STATE_DICT" }

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

-- ---- options --------------------------------------------------------------------------------

-- Options the issue names that this version does not implement: refused, never ignored.
local NOT_YET = {
  mixed_precision = true, backward_prefetch = true, forward_prefetch = true, ignored_modules = true,
  device_id = true, cpu_offload = true, use_orig_params = true, limit_all_gathers = true,
}

local function check_options(opts)
  if opts == nil then return {} end
  if type(opts) ~= "table" then error(fmt("FSDP: expected an options table, got %s", type(opts)), 3) end
  for k, v in pairs(opts) do
    if NOT_YET[k] then
      error(fmt("FSDP: option '%s' is not supported yet", tostring(k)), 3)
    elseif k == "sync_module_states" then
      if v then error("FSDP: sync_module_states=true is not supported yet", 3) end
    elseif k ~= "auto_wrap_policy" and k ~= "sharding_strategy" and k ~= "process_group" and k ~= "verbose" then
      error(fmt("FSDP: unknown option '%s' (known: auto_wrap_policy, process_group, sharding_strategy, verbose)",
        tostring(k)), 3)
    end
  end
  local s = opts.sharding_strategy or "FULL_SHARD"
  if not STRATEGIES[s] then
    error(fmt("FSDP: sharding_strategy '%s' is not supported yet (FULL_SHARD, SHARD_GRAD_OP or NO_SHARD)",
      tostring(s)), 3)
  end
  return opts
end

-- ---- flattening -----------------------------------------------------------------------------

-- The (module, name, tensor) of every parameter in m's subtree outside nested units, in
-- named_parameters order.
local function unit_params(m, out)
  for _, name in ipairs(m._parameters.names) do
    out[#out + 1] = { module = m, name = name, tensor = m._parameters.map[name] }
  end
  for _, cname in ipairs(m._modules.names) do
    local child = m._modules.map[cname]
    if not child:isinstance(FSDP) then unit_params(child, out) end
  end
  return out
end

-- Moves each original parameter out of _parameters (so parameters() yields only shards) into a
-- plain attribute holding its view; _fsdp_param_names keeps the order for state dicts.
local function install_views(entries, index, views)
  for i, e in ipairs(entries) do
    local m = e.module
    local names = rawget(m, "_fsdp_param_names")
    if not names then
      names = {}
      rawset(m, "_fsdp_param_names", names)
    end
    names[#names + 1] = e.name
    od_remove(m._parameters, e.name)
    m._attrs[e.name] = views[index[i]]
  end
end

-- Builds the unit's flat parameter; a parameter shared by two modules is flattened once.
local function flatten(self, module, strategy, group)
  local entries = unit_params(module, {})
  local uniq, index, seen = {}, {}, {}
  for i, e in ipairs(entries) do
    local k = seen[e.tensor]
    if not k then
      uniq[#uniq + 1] = e.tensor
      k = #uniq
      seen[e.tensor] = k
    end
    index[i] = k
  end
  if #uniq == 0 then return end
  local fp, shard, views = native.flat_param(uniq, strategy, group)
  install_views(entries, index, views)
  self._attrs._flat = fp
  od_set(self._fsdp_wrapped_module._parameters, "flat_param", shard)
end

-- ---- construction ---------------------------------------------------------------------------

function FSDP:init(module, opts)
  if not is_module(module) then
    error(fmt("FSDP: bad argument #1 (module): expected a module, got %s", type(module)), 3)
  end
  opts = check_options(opts)
  local strategy = opts.sharding_strategy or "FULL_SHARD"
  local group = opts.process_group
  if opts.auto_wrap_policy ~= nil then
    if not ok_wrap then error("FSDP: auto_wrap_policy needs moonshard.fsdp_wrap: " .. tostring(wrap), 3) end
    local child_opts = { sharding_strategy = strategy, process_group = group }
    module = wrap.auto_wrap(module, opts.auto_wrap_policy, function(m) return FSDP(m, child_opts) end,
      { wrapper_cls = FSDP })
  end
  self._fsdp_wrapped_module = FlattenParamsWrapper(module)
  self._attrs.sharding_strategy = strategy
  self._attrs._process_group = group
  flatten(self, module, strategy, group)
  -- verbose = true: rank 0 prints fsdp.memory_report at wrap time (nested units never get it)
  if opts.verbose then memory.print_report(self) end
end

-- FSDP(module, opts): the wrapped module (see the file's header).
function M.FSDP(module, opts) return FSDP(module, opts) end

function FSDP:extra_repr() return "" end

-- The wrapped module, as PyTorch's .module property.
function FSDP:module() return self._fsdp_wrapped_module._fpw_module end

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

-- FULL_SHARD freed the full buffer after forward; the first gradient reaching an output of the
-- unit means its backward is about to read the saved parameter views: gather them back.
local function pre_backward_hooks(fp, outs)
  local function hook()
    if not fp:is_gathered() then fp:gather() end
  end
  for i = 1, outs.n do
    each_tensor(outs[i], function(t)
      if t.requires_grad then t:register_hook(hook) end
    end)
  end
end

local function needs_backward(outs)
  local any = false
  for i = 1, outs.n do
    each_tensor(outs[i], function(t) any = any or t.requires_grad end)
  end
  return any
end

function FSDP:forward(...)
  local fp, strategy = self._attrs._flat, self._attrs.sharding_strategy
  if fp == nil then return self._fsdp_wrapped_module(...) end
  if fp:grads_incomplete() then
    fp:reset_pending()
    error("FSDP: the last backward gave gradients to only some parameters of a unit, so its gradients were "
      .. "never reduced (unused parameters are not supported yet: every parameter that requires grad "
      .. "must take part in the loss)", 2)
  end
  -- gathered every forward: the optimizer may have changed the shards since the last gather
  fp:gather()
  local outs = pack(self._fsdp_wrapped_module(...))
  if strategy ~= "NO_SHARD" then
    local backward = needs_backward(outs)
    if strategy == "FULL_SHARD" or not backward then fp:release() end
    if strategy == "FULL_SHARD" and backward then pre_backward_hooks(fp, outs) end
  end
  return unpack(outs, 1, outs.n)
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
  for _, name in ipairs(m._parameters.names) do visit(prefix .. name, m._parameters.map[name], m) end
  for _, name in ipairs(m._buffers.names) do
    if not m._non_persistent[name] then visit(prefix .. name, m._buffers.map[name], m) end
  end
  for _, cname in ipairs(m._modules.names) do walk_state(m._modules.map[cname], prefix .. cname .. ".", visit) end
end

-- State dicts (fsdp_state.lua): FULL (the default; opts {rank0_only =, offload_to_cpu =}) or
-- SHARDED (opts.state_dict_type, or the fsdp.state_dict_type scope).
function FSDP:state_dict(opts) return state.state_dict(self, opts) end
function FSDP:load_state_dict(sd, opts) return state.load_state_dict(self, sd, opts) end

-- fsdp.memory_report(model [, optimizer]): see fsdp_memory.lua (tostring prints it).
M.memory_report = memory.memory_report

return M
