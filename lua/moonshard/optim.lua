-- optim.lua: torch.optim for moonshard: SGD, Adam, AdamW, Adadelta, Adagrad and RMSprop over
-- parameter groups with per-group options, each update fused native passes: one per group for
-- SGD, Adam, AdamW and Adadelta (foreach, the default: ms._optim.*_step_list over every
-- parameter of one device and dtype), else one per parameter (ms._optim.*_step). capturable and
-- CUDA graph capture: see docs/optimizers.md. The learning-rate schedulers live in
-- optim.lr_scheduler.
--
--   local optim = require "moonshard.optim"
--   local opt = optim.Adadelta(model:parameters(), {lr = 1.0})
--   local sched = optim.lr_scheduler.StepLR(opt, {step_size = 1, gamma = 0.7})
--
-- state_dict() follows PyTorch's structure with Lua's 1-based positions:
--   { state = { [i] = {step = n, square_avg = <tensor>, ...} },     -- i: the parameter's position
--     param_groups = { {lr = ..., rho = ..., params = {1, 2, ...}}, ... } }
-- State tensors are the live ones (as in PyTorch); numbers stay Lua numbers ('step' included,
-- a 0-dim tensor step from elsewhere is read back as a number). ms.save/ms.load store the dict
-- as it is. load_state_dict copies the tensors into fresh state (counted as optimizer memory),
-- so the loaded dict may be reused. zero_grad() sets gradients to nil by default (PyTorch 2's
-- set_to_none = true); zero_grad({set_to_none = false}) zeroes them in place.
local ms = require "moonshard"
local options = require "moonshard.check_opts"
local native = ms._optim

local optim = {}

-- ---- helpers ---------------------------------------------------------------------------------

local function copy_value(v)
  if type(v) ~= "table" then return v end
  local c = {}
  for k, x in pairs(v) do c[k] = copy_value(x) end
  return c
end

-- A class table: `Class(...)` builds an instance through Class.new.
local function class(parent)
  local c = {}
  c.__index = c
  c.__tostring = parent and parent.__tostring -- metamethods are not inherited through __index
  return setmetatable(c, { __index = parent, __call = function(cls, ...) return cls.new(...) end })
end

-- ---- Optimizer -------------------------------------------------------------------------------

local Optimizer = class(nil)
optim.Optimizer = Optimizer

-- print(optimizer): its class and each group's hyper-parameters, as PyTorch's repr (groups
-- counted from 1, as param_groups[1]).
function Optimizer:__tostring()
  local fields = require("moonshard.repl").fields
  local lines = { self.name .. " (" }
  for i, g in ipairs(self.param_groups) do
    lines[#lines + 1] = ("Parameter Group %d"):format(i)
    lines[#lines + 1] = ("    params: %d tensor%s"):format(#g.params, #g.params == 1 and "" or "s")
    for _, line in ipairs(fields(g, "    ", { params = true })) do lines[#lines + 1] = line end
  end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

-- Normalises params (an array of tensors, an array of group tables, or an iterator function
-- returning tensors) into an array of group tables.
local function param_groups_of(cname, params)
  if type(params) == "function" then
    local list = {}
    for p in params do list[#list + 1] = p end
    params = list
  end
  if ms.is_tensor(params) then params = { params } end
  if type(params) == "table" and rawget(params, "_parameters") ~= nil then
    error(("%s: bad argument #1 (params): expected model:parameters(), got a Module (%s)"):format(cname,
      params:_get_name()), 3)
  end
  if type(params) ~= "table" or #params == 0 then
    error(("%s: optimizer got an empty parameter list"):format(cname), 3)
  end
  if ms.is_tensor(params[1]) then return { { params = params } } end
  return params
end

-- Sets up an optimizer: `defaults` holds every option with its default value (nil for a
-- required one, listed in `required`).
function Optimizer.init(self, cname, params, defaults, opts)
  self.name = cname
  opts = options.check(cname, opts, options.union(defaults, { "lr" }), 2)
  self.defaults = copy_value(defaults)
  for k, v in pairs(opts) do self.defaults[k] = copy_value(v) end
  self.state = {}
  self.param_groups = {}
  -- the parameters already placed in a group (the same userdata twice is PyTorch's error)
  self._seen = setmetatable({}, { __mode = "k" })
  -- by CUDA graph: the lists its capture holds ({group, params, hp}: hp the device numbers its
  -- replay hook writes), for inspection
  self._graph_lists = setmetatable({}, { __mode = "k" })
  for _, g in ipairs(param_groups_of(cname, params)) do self:add_param_group(g) end
  return self
end

function Optimizer:add_param_group(group)
  if type(group) ~= "table" or group.params == nil then
    error(("%s: a parameter group must be a table with a 'params' list"):format(self.name), 2)
  end
  options.check_given(self.name .. ": a parameter group", group, options.union(self.defaults, { "params", "lr" }), 2)
  local g = {}
  for k, v in pairs(group) do g[k] = copy_value(v) end
  local params = ms.is_tensor(group.params) and { group.params } or group.params
  g.params = {}
  for i, p in ipairs(params) do
    if not ms.is_tensor(p) then
      error(("%s: parameter %d of a group is not a tensor"):format(self.name, i), 2)
    end
    if not p.requires_grad then
      error(("%s: can't optimize a tensor that does not require grad (parameter %d)"):format(self.name, i), 2)
    end
    if self._seen[p] then
      error(("%s: some parameters appear more than once in the parameter list"):format(self.name), 2)
    end
    self._seen[p] = true
    g.params[i] = p
  end
  for k, v in pairs(self.defaults) do
    if g[k] == nil then g[k] = copy_value(v) end
  end
  if g.lr == nil then error(("%s: the option 'lr' is required"):format(self.name), 2) end
  self:_check_group(g)
  self.param_groups[#self.param_groups + 1] = g
  self:_init_group_state(g)
end

-- Hooks for the subclasses: option checks, state made at construction, one update.
function Optimizer:_check_group(_) end
function Optimizer:_init_group_state(_) end

-- Clears every parameter's gradient: removed (set_to_none, the default, as in PyTorch 2) or
-- zeroed in place.
-- zero_grad({set_to_none = true}), or PyTorch's positional zero_grad(set_to_none).
function Optimizer:zero_grad(opts)
  local set_to_none = options.flag("zero_grad", opts, "set_to_none", true, 2)
  for _, g in ipairs(self.param_groups) do
    for _, p in ipairs(g.params) do
      local grad <close> = p.grad -- closed: a dead box would hold the grad until a collection
      if grad ~= nil then
        if set_to_none then p.grad = nil else grad:zero_() end
      end
    end
  end
end

-- The CUDA graph being captured, or nil (nil on every build without CUDA). A field, so that the
-- tests can stand a fake graph in for it on the CPU.
optim._current_graph = function() return ms.cuda.current_graph() end

local function state_of(self, p)
  local state = self.state[p]
  if state == nil then
    state = {}
    self.state[p] = state
  end
  return state
end

-- One update of every parameter that has a gradient. closure, if given, recomputes the loss
-- (with grad mode on) and its value is returned. A group whose optimizer class has a
-- multi-tensor step (its own _list: a subclass that overrides _update keeps its _update) takes it
-- with foreach, capturable or while a CUDA graph is captured (whose replays must read the
-- hyper-parameters from the device); otherwise one native call per parameter.
function Optimizer:step(closure)
  local loss
  if closure ~= nil then loss = ms.enable_grad(closure) end
  local graph = optim._current_graph()
  local has_list = rawget(getmetatable(self) or {}, "_list") ~= nil
  for _, g in ipairs(self.param_groups) do
    if has_list and (g.foreach or g.capturable or graph ~= nil) then
      self:_step_lists(g, graph)
    else
      if graph ~= nil then
        error(("%s: its step cannot be captured in a CUDA graph (its hyper-parameters would be frozen "
          .. "at their capture values); SGD, Adam, AdamW and Adadelta can be"):format(self.name), 2)
      end
      for _, p in ipairs(g.params) do
        local grad <close> = p.grad
        if grad ~= nil then self:_update(p, grad, g, state_of(self, p)) end
      end
    end
  end
  return loss
end

-- ---- multi-tensor steps (foreach, capturable) ------------------------------------------------------

-- The parameters of g that have a gradient, in buckets of what one native call shares: device,
-- dtype and the optimizer's own key (the step count the kernels use, a new momentum buffer).
local function list_buckets(self, g)
  local L = self._list
  local buckets, order = {}, {}
  local last_device, last_dtype, last_part, b -- parameters in a row mostly share a bucket
  for _, p in ipairs(g.params) do
    local grad = p.grad
    if grad ~= nil then
      local state = state_of(self, p)
      local device, dtype, part = p.device, p.dtype, L.key(state, g)
      if device ~= last_device or dtype ~= last_dtype or part ~= last_part then
        local key = device .. "|" .. dtype .. "|" .. part
        b = buckets[key]
        if b == nil then
          b = { part = part, n = 0, params = {}, grads = {}, states = {} }
          buckets[key] = b
          order[#order + 1] = b
        end
        last_device, last_dtype, last_part = device, dtype, part
      end
      local n = b.n + 1
      b.n, b.params[n], b.grads[n], b.states[n] = n, p, grad, state
    end
  end
  return order
end

-- One native call over bucket b. Eagerly the states advance now; under capture they do not (the
-- captured kernels run only at replays): a replay hook advances them and writes the numbers the
-- kernels read (the learning rate a scheduler set, the step's bias corrections) into hp before
-- each replay, as an eager step would compute them.
function Optimizer:_step_list(g, b, graph)
  local L = self._list
  if graph ~= nil then
    for _, state in ipairs(b.states) do
      if not L.ready(state, g) then
        error(("%s: a step captured in a CUDA graph needs the optimizer's state: take one eager step "
          .. "first (make_graphed_step's warmup does)"):format(self.name), 4)
      end
    end
  else
    for _, state in ipairs(b.states) do L.advance(state) end
  end
  local args = { b.params, b.grads }
  for k, arr in ipairs(L.states(b, g)) do args[2 + k] = arr end
  local nargs = 2 + L.nstates
  local opts = L.opts(g, b, graph ~= nil)
  local hp
  if graph ~= nil then
    -- made without a kernel or a copy (either would be captured and redone at every replay,
    -- after the hook's write) and not filled here: the hook fills it before each replay
    hp = native.slots_buffer(b.params[1])
    local lists = self._graph_lists[graph] or {}
    self._graph_lists[graph] = lists
    lists[#lists + 1] = { group = g, params = b.params, hp = hp }
    graph:add_replay_hook(function()
      for _, state in ipairs(b.states) do L.advance(state) end
      L.slots(L.opts(g, b, false), hp) -- a kernel carries the numbers: the host never waits
    end)
  elseif g.capturable and b.params[1].is_cuda then
    hp = L.slots(opts, native.slots_buffer(b.params[1]))
  end
  args[nargs + 1], args[nargs + 2] = opts, hp
  L.step(table.unpack(args, 1, nargs + 2))
end

function Optimizer:_step_lists(g, graph)
  for _, b in ipairs(list_buckets(self, g)) do
    self:_step_list(g, b, graph)
    -- closed: a dead box would hold the grad until a collection
    for i = 1, #b.grads do local _ <close> = b.grads[i] end
  end
end

function Optimizer:state_dict()
  local index, groups, state = {}, {}, {}
  local n = 0
  for gi, g in ipairs(self.param_groups) do
    local packed = {}
    for k, v in pairs(g) do
      if k ~= "params" then packed[k] = copy_value(v) end
    end
    packed.params = {}
    for i, p in ipairs(g.params) do
      n = n + 1
      index[p] = n
      packed.params[i] = n
    end
    groups[gi] = packed
  end
  for p, s in pairs(self.state) do
    if index[p] then
      local copy = {}
      for k, v in pairs(s) do copy[k] = v end
      state[index[p]] = copy
    end
  end
  return { state = state, param_groups = groups }
end

local function same_shape(a, b)
  if a:dim() ~= b:dim() then return false end
  for d = 1, a:dim() do
    if a:size(d) ~= b:size(d) then return false end
  end
  return true
end

-- A state tensor for p holding a copy of the saved one (in p's dtype, counted as optimizer
-- memory).
local function load_state_tensor(cname, p, saved, key)
  if not same_shape(p, saved) then
    error(("%s: load_state_dict: state '%s' has shape %s but its parameter has shape %s")
      :format(cname, key, tostring(saved:size()), tostring(p:size())), 3)
  end
  local t = native.state(p)
  t:copy_(saved)
  return t
end

function Optimizer:load_state_dict(sd)
  local groups = sd.param_groups
  if type(groups) ~= "table" or type(sd.state) ~= "table" then
    error(("%s: load_state_dict expects a table with 'state' and 'param_groups'"):format(self.name), 2)
  end
  if #groups ~= #self.param_groups then
    error(("%s: loaded state dict has %d parameter groups, the optimizer has %d")
      :format(self.name, #groups, #self.param_groups), 2)
  end
  for gi, g in ipairs(self.param_groups) do
    if #groups[gi].params ~= #g.params then
      error(("%s: loaded state dict contains a parameter group that doesn't match the size of "
        .. "optimizer's group %d"):format(self.name, gi), 2)
    end
  end
  local state = {}
  for gi, g in ipairs(self.param_groups) do
    local saved = groups[gi]
    for i, p in ipairs(g.params) do
      local s = sd.state[saved.params[i]]
      if s ~= nil then
        local fresh = {}
        for k, v in pairs(s) do
          if k == "step" then
            -- PyTorch keeps some steps as 0-dim tensors; ours are Lua integers
            local n = ms.is_tensor(v) and v:item() or v
            fresh[k] = math.tointeger(n) or n
          else
            fresh[k] = ms.is_tensor(v) and load_state_tensor(self.name, p, v, k) or v
          end
        end
        state[p] = fresh
      end
    end
    for k, v in pairs(saved) do
      if k ~= "params" then g[k] = copy_value(v) end
    end
  end
  self.state = state
end

local function check_range(cname, what, v, lo)
  if type(v) ~= "number" or not (v >= lo) then
    error(("%s: invalid %s: %s"):format(cname, what, tostring(v)), 4)
  end
end

-- Lazily made state tensors, zero unless `value` says otherwise.
local function state_tensor(state, key, p, value)
  local t = state[key]
  if t == nil then
    t = native.state(p, value)
    state[key] = t
  end
  return t
end

-- The arrays of each named state over a bucket, made where missing.
local function state_arrays(b, names)
  local out, params, states = {}, b.params, b.states
  for k, name in ipairs(names) do
    local arr = {}
    for i = 1, b.n do arr[i] = states[i][name] or state_tensor(states[i], name, params[i]) end
    out[k] = arr
  end
  return out
end

-- ---- SGD -------------------------------------------------------------------------------------

local SGD = class(Optimizer)
optim.SGD = SGD
SGD.defaults = { momentum = 0, dampening = 0, weight_decay = 0, nesterov = false, maximize = false,
                 foreach = true, capturable = false }

local function sgd_opts(g, init)
  return {
    lr = g.lr, momentum = g.momentum, dampening = g.dampening, weight_decay = g.weight_decay,
    nesterov = g.nesterov, maximize = g.maximize, init = init,
  }
end

function SGD.new(params, opts)
  local self = setmetatable({}, SGD)
  return Optimizer.init(self, "SGD", params, SGD.defaults, opts)
end

function SGD:_check_group(g)
  check_range("SGD", "learning rate", g.lr, 0)
  check_range("SGD", "momentum value", g.momentum, 0)
  check_range("SGD", "weight_decay value", g.weight_decay, 0)
  if g.nesterov and (g.momentum <= 0 or g.dampening ~= 0) then
    error("SGD: nesterov momentum requires a momentum and zero dampening", 3)
  end
end

function SGD:_update(p, grad, g, state)
  local buf, init = nil, false
  if g.momentum ~= 0 then
    init = state.momentum_buffer == nil
    buf = state_tensor(state, "momentum_buffer", p)
  end
  native.sgd_step(p, grad, buf, sgd_opts(g, init))
end

-- The multi-tensor step of each optimizer: key (what a bucket shares), ready (the state a
-- captured step needs exists), advance (the state an eager step changes), states (the state
-- arrays of a bucket, made where missing), opts (the native options; under capture those of
-- the next step), slots and step (the native calls).
SGD._list = {
  nstates = 1,
  key = function(state, g) return (g.momentum ~= 0 and state.momentum_buffer == nil) and "init" or "" end,
  ready = function(state, g) return g.momentum == 0 or state.momentum_buffer ~= nil end,
  advance = function() end,
  states = function(b, g)
    if g.momentum == 0 then return {} end
    return state_arrays(b, { "momentum_buffer" })
  end,
  opts = function(g, b) return sgd_opts(g, b.part == "init") end,
  slots = native.sgd_slots,
  step = native.sgd_step_list,
}

-- ---- Adam and AdamW --------------------------------------------------------------------------

local function check_adam(cname, g)
  check_range(cname, "learning rate", g.lr, 0)
  check_range(cname, "epsilon value", g.eps, 0)
  check_range(cname, "weight_decay value", g.weight_decay, 0)
  local b = g.betas
  if type(b) ~= "table" or type(b[1]) ~= "number" or type(b[2]) ~= "number" then
    error(("%s: betas must be a table of two numbers"):format(cname), 4)
  end
  for i = 1, 2 do
    if not (b[i] >= 0 and b[i] < 1) then
      error(("%s: invalid beta parameter at index %d: %s"):format(cname, i, tostring(b[i])), 4)
    end
  end
end

local function adam_opts(g, step, decoupled)
  return {
    lr = g.lr, beta1 = g.betas[1], beta2 = g.betas[2], eps = g.eps,
    weight_decay = g.weight_decay, amsgrad = g.amsgrad, maximize = g.maximize,
    decoupled = decoupled, step = step,
  }
end

local function adam_update(p, grad, g, state, decoupled)
  state.step = (state.step or 0) + 1
  local m = state_tensor(state, "exp_avg", p)
  local v = state_tensor(state, "exp_avg_sq", p)
  local vmax = g.amsgrad and state_tensor(state, "max_exp_avg_sq", p) or nil
  native.adam_step(p, grad, m, v, vmax, adam_opts(g, state.step, decoupled))
end

local function step_advance(state) state.step = (state.step or 0) + 1 end

-- Adam's and AdamW's multi-tensor step (a bucket shares its step count).
local function adam_list(decoupled)
  return {
    nstates = 3,
    key = function(state) return state.step or 0 end,
    ready = function(state) return state.exp_avg ~= nil end,
    advance = step_advance,
    states = function(b, g)
      return state_arrays(b, g.amsgrad and { "exp_avg", "exp_avg_sq", "max_exp_avg_sq" } or { "exp_avg", "exp_avg_sq" })
    end,
    opts = function(g, b, capturing)
      return adam_opts(g, (b.states[1].step or 0) + (capturing and 1 or 0), decoupled)
    end,
    slots = native.adam_slots,
    step = native.adam_step_list,
  }
end

local Adam = class(Optimizer)
optim.Adam = Adam
Adam.defaults = { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0,
                  amsgrad = false, maximize = false, foreach = true, capturable = false }
Adam._list = adam_list(false)

function Adam.new(params, opts)
  return Optimizer.init(setmetatable({}, Adam), "Adam", params, Adam.defaults, opts)
end
function Adam:_check_group(g) check_adam("Adam", g) end
function Adam:_update(p, grad, g, state) adam_update(p, grad, g, state, false) end

local AdamW = class(Optimizer)
optim.AdamW = AdamW
AdamW.defaults = { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 1e-2,
                   amsgrad = false, maximize = false, foreach = true, capturable = false }
AdamW._list = adam_list(true)

function AdamW.new(params, opts)
  return Optimizer.init(setmetatable({}, AdamW), "AdamW", params, AdamW.defaults, opts)
end
function AdamW:_check_group(g) check_adam("AdamW", g) end
function AdamW:_update(p, grad, g, state) adam_update(p, grad, g, state, true) end

-- ---- Adadelta --------------------------------------------------------------------------------

local Adadelta = class(Optimizer)
optim.Adadelta = Adadelta
Adadelta.defaults = { lr = 1.0, rho = 0.9, eps = 1e-6, weight_decay = 0, maximize = false,
                      foreach = true, capturable = false }

function Adadelta.new(params, opts)
  return Optimizer.init(setmetatable({}, Adadelta), "Adadelta", params, Adadelta.defaults, opts)
end

function Adadelta:_check_group(g)
  check_range("Adadelta", "learning rate", g.lr, 0)
  check_range("Adadelta", "epsilon value", g.eps, 0)
  check_range("Adadelta", "weight_decay value", g.weight_decay, 0)
  if not (g.rho >= 0 and g.rho <= 1) then
    error(("Adadelta: invalid rho value: %s"):format(tostring(g.rho)), 3)
  end
end

local function adadelta_opts(g)
  return { lr = g.lr, rho = g.rho, eps = g.eps, weight_decay = g.weight_decay, maximize = g.maximize }
end

function Adadelta:_update(p, grad, g, state)
  state.step = (state.step or 0) + 1
  native.adadelta_step(p, grad, state_tensor(state, "square_avg", p),
    state_tensor(state, "acc_delta", p), adadelta_opts(g))
end

Adadelta._list = {
  nstates = 2,
  key = function() return "" end, -- its kernels do not use the step count
  ready = function(state) return state.square_avg ~= nil end,
  advance = step_advance,
  states = function(b) return state_arrays(b, { "square_avg", "acc_delta" }) end,
  opts = adadelta_opts,
  slots = native.adadelta_slots,
  step = native.adadelta_step_list,
}

-- ---- Adagrad ---------------------------------------------------------------------------------

local Adagrad = class(Optimizer)
optim.Adagrad = Adagrad
Adagrad.defaults = { lr = 1e-2, lr_decay = 0, weight_decay = 0, initial_accumulator_value = 0,
                     eps = 1e-10, maximize = false }

function Adagrad.new(params, opts)
  return Optimizer.init(setmetatable({}, Adagrad), "Adagrad", params, Adagrad.defaults, opts)
end

function Adagrad:_check_group(g)
  check_range("Adagrad", "learning rate", g.lr, 0)
  check_range("Adagrad", "lr_decay value", g.lr_decay, 0)
  check_range("Adagrad", "weight_decay value", g.weight_decay, 0)
  check_range("Adagrad", "initial_accumulator_value value", g.initial_accumulator_value, 0)
  check_range("Adagrad", "epsilon value", g.eps, 0)
end

-- As PyTorch, Adagrad makes its state when a parameter joins, not at the first step.
function Adagrad:_init_group_state(g)
  for _, p in ipairs(g.params) do
    self.state[p] = { step = 0, sum = native.state(p, g.initial_accumulator_value) }
  end
end

function Adagrad:_update(p, grad, g, state)
  state.step = (state.step or 0) + 1
  native.adagrad_step(p, grad, state_tensor(state, "sum", p, g.initial_accumulator_value), {
    lr = g.lr, lr_decay = g.lr_decay, weight_decay = g.weight_decay, eps = g.eps,
    maximize = g.maximize, step = state.step,
  })
end

-- ---- RMSprop ---------------------------------------------------------------------------------

local RMSprop = class(Optimizer)
optim.RMSprop = RMSprop
RMSprop.defaults = { lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0,
                     centered = false, maximize = false }

function RMSprop.new(params, opts)
  return Optimizer.init(setmetatable({}, RMSprop), "RMSprop", params, RMSprop.defaults, opts)
end

function RMSprop:_check_group(g)
  check_range("RMSprop", "learning rate", g.lr, 0)
  check_range("RMSprop", "epsilon value", g.eps, 0)
  check_range("RMSprop", "momentum value", g.momentum, 0)
  check_range("RMSprop", "weight_decay value", g.weight_decay, 0)
  check_range("RMSprop", "alpha value", g.alpha, 0)
end

function RMSprop:_update(p, grad, g, state)
  state.step = (state.step or 0) + 1
  local sq = state_tensor(state, "square_avg", p)
  local buf = g.momentum > 0 and state_tensor(state, "momentum_buffer", p) or nil
  local gavg = g.centered and state_tensor(state, "grad_avg", p) or nil
  native.rmsprop_step(p, grad, sq, gavg, buf, {
    lr = g.lr, alpha = g.alpha, eps = g.eps, weight_decay = g.weight_decay,
    momentum = g.momentum, centered = g.centered, maximize = g.maximize,
  })
end

optim.lr_scheduler = require "moonshard.lr_scheduler"

return optim
