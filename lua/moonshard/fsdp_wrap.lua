-- fsdp_wrap.lua: FSDP's auto-wrap policies and the bottom-up wrapping walk, with the semantics of
-- PyTorch 1.13's torch.distributed.fsdp.wrap (`require "moonshard.fsdp_wrap"`). A policy is
-- called as policy(module, recurse, nonwrapped_numel): with recurse = true it says whether to
-- descend into the module's children, with recurse = false whether to make the module a unit,
-- given the parameters of its subtree that no unit below has taken.
--
--   local wrap = require "moonshard.fsdp_wrap"
--   wrap.size_based_auto_wrap_policy{min_num_params = 20000}   -- the seed's policy
--   wrap.ModuleWrapPolicy{nn.Linear, Block}                     -- every Linear and Block
--   function(module, recurse, numel) ... end                    -- any function
--   wrap.auto_wrap(root, policy, wrap_fn)                       -- what FSDP(...) runs
local ms = require "moonshard"
local nn = require "moonshard.nn"
local options = require "moonshard.check_opts"

local M = {}
local fmt = string.format
local is_module = nn.is_module
local od_set = nn.internal.od_set

-- ---- helpers ------------------------------------------------------------------------------------

local function is_class(v)
  return type(v) == "table" and not is_module(v) and type(rawget(v, "__name")) == "string"
    and type(rawget(v, "__index")) == "function"
end

-- A list of classes from an array of classes or a set {[cls] = true}; who names the caller.
local function class_list(v, who, what)
  if v == nil then return nil end
  if type(v) ~= "table" or is_module(v) then
    error(fmt("%s: %s must be a list of module classes, got %s", who, what, type(v)), 3)
  end
  local out = {}
  if is_class(v) then return { v } end -- a single class is accepted for convenience
  for k, c in pairs(v) do
    local cls = (c == true) and k or c
    if not is_class(cls) then
      error(fmt("%s: %s must hold module classes (nn.Linear, MyBlock, ...), got %s", who, what,
        is_module(cls) and "a module instance" or type(cls)), 3)
    end
    out[#out + 1] = cls
  end
  return out
end

local function isinstance_any(module, classes)
  for _, cls in ipairs(classes) do
    if module:isinstance(cls) then return true end
  end
  return false
end

local function is_callable(v)
  return type(v) == "function" or (type(v) == "table" and (getmetatable(v) or {}).__call ~= nil)
end

-- ---- the size-based policy ---------------------------------------------------------------------

-- PyTorch's defaults: attention layers are never descended into (they touch their weights
-- outside forward), and containers without a forward of their own are never units.
M.FORCE_LEAF_MODULES = { nn.MultiheadAttention } -- empty while moonshard has no attention layer
M.EXCLUDE_WRAP_MODULES = { nn.ModuleList, nn.ModuleDict }

local function size_policy(module, recurse, nonwrapped_numel, min_num_params, force_leaf, exclude)
  local is_large = nonwrapped_numel >= min_num_params
  if recurse then
    -- descend when the subtree is big enough and the module is not a forced leaf
    return is_large and not isinstance_any(module, force_leaf)
  end
  -- make a unit when what is left unwrapped is big enough and the type may be a unit
  return is_large and not isinstance_any(module, exclude)
end

-- size_based_auto_wrap_policy{min_num_params = 1e8, force_leaf_modules = {...},
-- exclude_wrap_modules = {...}} returns the policy (functools.partial's part). Called with a
-- module first, it is the policy itself with the defaults, as PyTorch's function is.
function M.size_based_auto_wrap_policy(a, recurse, nonwrapped_numel)
  if is_module(a) then
    return size_policy(a, recurse, nonwrapped_numel, 1e8, M.FORCE_LEAF_MODULES, M.EXCLUDE_WRAP_MODULES)
  end
  local who = "size_based_auto_wrap_policy"
  local opts = options.check(who, a, { "min_num_params", "force_leaf_modules", "exclude_wrap_modules" }, 2)
  local min = opts.min_num_params
  if min == nil then min = 1e8 end
  if type(min) ~= "number" or min ~= min or min < 0 then
    error(fmt("%s: min_num_params must be a non-negative number, got %s", who, tostring(min)), 2)
  end
  local force_leaf = class_list(opts.force_leaf_modules, who, "force_leaf_modules") or M.FORCE_LEAF_MODULES
  local exclude = class_list(opts.exclude_wrap_modules, who, "exclude_wrap_modules") or M.EXCLUDE_WRAP_MODULES
  return function(module, rec, numel)
    return size_policy(module, rec, numel, min, force_leaf, exclude)
  end
end

-- ---- class-based policies ---------------------------------------------------------------------

local ModuleWrapPolicy = {}
ModuleWrapPolicy.__index = ModuleWrapPolicy
ModuleWrapPolicy.__name = "ModuleWrapPolicy"

-- ModuleWrapPolicy{ClassA, ClassB}: every module of those classes (or subclasses) becomes a
-- unit; the walk always descends. A callable table, so it is used as any policy function.
M.ModuleWrapPolicy = setmetatable({}, {
  __call = function(_, classes)
    local list = class_list(classes, "ModuleWrapPolicy", "module_classes")
    if list == nil then error("ModuleWrapPolicy: expected a list of module classes", 2) end
    return setmetatable({ module_classes = list }, ModuleWrapPolicy)
  end,
})

function ModuleWrapPolicy:__call(module, recurse)
  if recurse then return true end
  return isinstance_any(module, self.module_classes)
end

function ModuleWrapPolicy:__tostring()
  local names = {}
  for i, c in ipairs(self.module_classes) do names[i] = c.__name end
  return "ModuleWrapPolicy(" .. table.concat(names, ", ") .. ")"
end

-- transformer_auto_wrap_policy{transformer_layer_cls = {...}}: 1.13's name for the same rule.
function M.transformer_auto_wrap_policy(opts)
  options.check_given("transformer_auto_wrap_policy", opts, { "transformer_layer_cls" }, 2)
  if opts.transformer_layer_cls == nil then
    error("transformer_auto_wrap_policy: expected {transformer_layer_cls = {ClassA, ...}}", 2)
  end
  local p = M.ModuleWrapPolicy(opts.transformer_layer_cls)
  return function(module, recurse) return p(module, recurse) end
end

-- lambda_auto_wrap_policy{lambda_fn = function(module) ... end}: a unit wherever lambda_fn says.
function M.lambda_auto_wrap_policy(opts)
  options.check_given("lambda_auto_wrap_policy", opts, { "lambda_fn" }, 2)
  local fn = opts.lambda_fn
  if not is_callable(fn) then error("lambda_auto_wrap_policy: expected {lambda_fn = function(module)}", 2) end
  return function(module, recurse)
    if recurse then return true end
    return fn(module) and true or false
  end
end

-- or_policy{p1, p2, ...}: a unit (or a descent) when any of the policies says so.
function M.or_policy(policies)
  if type(policies) ~= "table" then error("or_policy: expected a list of policies", 2) end
  for i, p in ipairs(policies) do
    if not is_callable(p) then error(fmt("or_policy: policy %d is not callable (%s)", i, type(p)), 2) end
  end
  return function(module, recurse, numel)
    for _, p in ipairs(policies) do
      if p(module, recurse, numel) then return true end
    end
    return false
  end
end

-- ---- the walk ------------------------------------------------------------------------------------

local function numel_of(module, ignored_params)
  local n = 0
  for _, p in ipairs(module:parameters()) do
    if not ignored_params[p] then n = n + p:numel() end
  end
  return n
end

-- PyTorch's _recursive_wrap. Returns the (possibly wrapped) module and the number of its
-- subtree's parameters now inside units.
local function recursive_wrap(module, policy, wrap_fn, ctx, only_wrap_children)
  local num_params = numel_of(module, ctx.ignored_params)
  if not policy(module, true, num_params) then return module, 0 end
  local total_wrapped = 0
  for name, child in module:named_children() do
    if not ctx.ignored_modules[child] then
      local wrapped, n = recursive_wrap(child, policy, wrap_fn, ctx, false)
      if not rawequal(wrapped, child) then
        if not is_module(wrapped) then
          error(fmt("auto_wrap: wrap_fn returned %s for '%s', expected a module", type(wrapped), name), 0)
        end
        -- in place: the unit keeps its child's name and position (setattr on an existing key
        -- of torch's _modules OrderedDict keeps its place too)
        od_set(module._modules, name, wrapped)
      end
      total_wrapped = total_wrapped + n
    end
  end
  local remainder = num_params - total_wrapped
  if not only_wrap_children and policy(module, false, remainder) then
    ctx.units = ctx.units + 1
    return wrap_fn(module), num_params
  end
  return module, total_wrapped
end

local function as_set(list, who, what, check)
  local set = {}
  if list == nil then return set end
  if type(list) ~= "table" then error(fmt("%s: %s must be a list, got %s", who, what, type(list)), 3) end
  for _, v in ipairs(list) do
    if not check(v) then error(fmt("%s: %s holds a %s", who, what, type(v)), 3) end
    set[v] = true
  end
  return set
end

-- auto_wrap(root, policy, wrap_fn, opts) wraps, bottom-up, every module below root that the
-- policy chooses, replacing it in its parent by wrap_fn(module); root itself is left to the
-- caller (FSDP wraps it as the root unit, PyTorch's only_wrap_children). Children are visited
-- in registration order. opts: {ignored_modules = {...} (subtrees left alone), ignored_params =
-- {...} (not counted), wrap_root = false (also offer the root to the policy), wrapper_cls =
-- (error if the tree already holds one; FSDP passes its class)}.
-- Returns root (or its wrapper with wrap_root), the number of parameters placed inside units,
-- the number left outside, and the number of units made.
function M.auto_wrap(root, policy, wrap_fn, opts)
  local who = "auto_wrap"
  if not is_module(root) then error(fmt("%s: bad argument #1 (root): expected a module, got %s", who, type(root)), 2) end
  if not is_callable(policy) then
    error(fmt("%s: bad argument #2 (policy): expected a policy function, got %s", who, type(policy)), 2)
  end
  if not is_callable(wrap_fn) then
    error(fmt("%s: bad argument #3 (wrap_fn): expected a function, got %s", who, type(wrap_fn)), 2)
  end
  opts = options.check(who, opts, { "ignored_modules", "ignored_params", "wrapper_cls", "wrap_root" }, 2)
  local ctx = {
    ignored_modules = as_set(opts.ignored_modules, who, "ignored_modules", is_module),
    ignored_params = as_set(opts.ignored_params, who, "ignored_params", ms.is_tensor),
    units = 0,
  }
  -- an ignored module's whole subtree is ignored, parameters included
  for m in pairs(ctx.ignored_modules) do
    for _, sub in ipairs(m:modules()) do ctx.ignored_modules[sub] = true end
    for _, p in ipairs(m:parameters()) do ctx.ignored_params[p] = true end
  end
  if opts.wrapper_cls ~= nil then
    for name, m in root:named_modules() do
      if not ctx.ignored_modules[m] and m:isinstance(opts.wrapper_cls) then
        error(fmt("%s: module '%s' is already wrapped in %s; wrap a tree once", who,
          name == "" and "(root)" or name, opts.wrapper_cls.__name), 2)
      end
    end
  end
  local total = numel_of(root, ctx.ignored_params)
  local out, wrapped = recursive_wrap(root, policy, wrap_fn, ctx, opts.wrap_root ~= true)
  return out, wrapped, total - wrapped, ctx.units
end

return M
