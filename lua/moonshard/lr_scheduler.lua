-- lr_scheduler.lua: torch.optim.lr_scheduler for moonshard (also optim.lr_scheduler): StepLR,
-- MultiStepLR, ExponentialLR, CosineAnnealingLR, LinearLR, OneCycleLR and LambdaLR. Each
-- computes its learning rates with PyTorch 1.13's formulas in the same order of operations
-- (the chainable forms, updating each group's current lr), so the sequences match torch's
-- numbers; step(epoch) uses the closed forms where PyTorch has them.
local options = require "moonshard.check_opts"

local M = {}

local function class(parent)
  local c = {}
  c.__index = c
  c.__tostring = parent and parent.__tostring -- metamethods are not inherited through __index
  return setmetatable(c, { __index = parent, __call = function(cls, ...) return cls.new(...) end })
end

local function copy_value(v)
  if type(v) ~= "table" then return v end
  local c = {}
  for k, x in pairs(v) do c[k] = copy_value(x) end
  return c
end

local function map_groups(opt, fn)
  local out = {}
  for i, g in ipairs(opt.param_groups) do out[i] = fn(g, i) end
  return out
end

-- What each option may hold ("a|b": either), checked where the scheduler is made rather than
-- failing later inside a formula.
local OPTION_TYPES = {
  step_size = "integer", gamma = "number", last_epoch = "integer", milestones = "table",
  T_max = "number", eta_min = "number", start_factor = "number", end_factor = "number",
  total_iters = "integer", lr_lambda = "function|table", max_lr = "number|table",
  total_steps = "integer", epochs = "integer", steps_per_epoch = "integer", pct_start = "number",
  anneal_strategy = "string", cycle_momentum = "boolean", base_momentum = "number|table",
  max_momentum = "number|table", div_factor = "number", final_div_factor = "number",
  three_phase = "boolean",
}

local function type_of(v) return math.type(v) == "integer" and "integer" or type(v) end

local function check_type(cname, k, v)
  local want, got = OPTION_TYPES[k], type_of(v)
  for t in want:gmatch("[^|]+") do
    if t == got or (t == "number" and got == "integer") then return end
  end
  error(("%s: option '%s' must be %s, got %s"):format(cname, k, want:gsub("|", " or "),
    got == "string" and ("%q"):format(v) or got), 4)
end

-- Options: unknown keys raise, so that a typo does not pass silently; known ones are type-checked.
local function checked_options(cname, opts, known)
  opts = options.check(cname, opts, known, 3)
  for k, v in pairs(opts) do check_type(cname, k, v) end
  return opts
end

-- ---- the base class --------------------------------------------------------------------------

local LRScheduler = class(nil)
M.LRScheduler = LRScheduler

-- print(scheduler): its class, the last lrs and its settings (the optimizer aside).
function LRScheduler:__tostring()
  local lines = { self.name .. " (", "    last_lr: " .. require("moonshard.repl").format(self._last_lr) }
  for _, line in ipairs(require("moonshard.repl").fields(self, "    ", { optimizer = true, name = true })) do
    lines[#lines + 1] = line
  end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

function LRScheduler.init(self, cname, optimizer, last_epoch)
  if type(optimizer) ~= "table" or type(optimizer.param_groups) ~= "table" then
    error(("%s: the first argument must be an optimizer"):format(cname), 3)
  end
  self.name = cname
  self.optimizer = optimizer
  last_epoch = last_epoch or -1
  for i, g in ipairs(optimizer.param_groups) do
    if last_epoch == -1 then
      if g.initial_lr == nil then g.initial_lr = g.lr end
    elseif g.initial_lr == nil then
      error(("%s: param 'initial_lr' is not specified in param_groups[%d] when resuming an "
        .. "optimizer"):format(cname, i), 3)
    end
  end
  self.base_lrs = map_groups(optimizer, function(g) return g.initial_lr end)
  self.last_epoch = last_epoch
  self._step_count = 0
  self:step()
  return self
end

-- Advances one epoch (or jumps to `epoch`, with the closed form where there is one) and sets
-- every group's lr.
function LRScheduler:step(epoch)
  self._step_count = self._step_count + 1
  local values
  if epoch == nil then
    self.last_epoch = self.last_epoch + 1
    values = self:get_lr()
  else
    self.last_epoch = epoch
    values = self._get_closed_form_lr and self:_get_closed_form_lr() or self:get_lr()
  end
  for i, g in ipairs(self.optimizer.param_groups) do g.lr = values[i] end
  self._last_lr = map_groups(self.optimizer, function(g) return g.lr end)
end

function LRScheduler:get_last_lr()
  return copy_value(self._last_lr)
end

-- Every field except the optimizer (and functions, which cannot be saved).
function LRScheduler:state_dict()
  local sd = {}
  for k, v in pairs(self) do
    if k ~= "optimizer" and k ~= "lr_lambdas" and type(v) ~= "function" then sd[k] = copy_value(v) end
  end
  return sd
end

function LRScheduler:load_state_dict(sd)
  if type(sd) ~= "table" then
    error(("%s:load_state_dict: expected the table state_dict() returned, got %s"):format(self.name, type(sd)), 2)
  end
  for k, v in pairs(sd) do self[k] = copy_value(v) end
end

-- ---- StepLR ----------------------------------------------------------------------------------

local StepLR = class(LRScheduler)
M.StepLR = StepLR

function StepLR.new(optimizer, opts)
  opts = checked_options("StepLR", opts, { step_size = true, gamma = true, last_epoch = true })
  if math.type(opts.step_size) ~= "integer" or opts.step_size < 1 then
    error("StepLR: step_size must be a positive integer", 2)
  end
  local self = setmetatable({ step_size = opts.step_size, gamma = opts.gamma or 0.1 }, StepLR)
  return LRScheduler.init(self, "StepLR", optimizer, opts.last_epoch)
end

function StepLR:get_lr()
  local e = self.last_epoch
  if e == 0 or e % self.step_size ~= 0 then
    return map_groups(self.optimizer, function(g) return g.lr end)
  end
  return map_groups(self.optimizer, function(g) return g.lr * self.gamma end)
end

function StepLR:_get_closed_form_lr()
  local k = self.last_epoch // self.step_size
  local out = {}
  for i, b in ipairs(self.base_lrs) do out[i] = b * self.gamma ^ k end
  return out
end

-- ---- MultiStepLR -----------------------------------------------------------------------------

local MultiStepLR = class(LRScheduler)
M.MultiStepLR = MultiStepLR

function MultiStepLR.new(optimizer, opts)
  opts = checked_options("MultiStepLR", opts, { milestones = true, gamma = true, last_epoch = true })
  if type(opts.milestones) ~= "table" then error("MultiStepLR: milestones must be a list", 2) end
  -- a milestone listed twice decays twice, as PyTorch's Counter does
  local counts = {}
  for _, m in ipairs(opts.milestones) do counts[m] = (counts[m] or 0) + 1 end
  local self = setmetatable({ milestones = counts, gamma = opts.gamma or 0.1 }, MultiStepLR)
  return LRScheduler.init(self, "MultiStepLR", optimizer, opts.last_epoch)
end

function MultiStepLR:get_lr()
  local n = self.milestones[self.last_epoch]
  if n == nil then return map_groups(self.optimizer, function(g) return g.lr end) end
  return map_groups(self.optimizer, function(g) return g.lr * self.gamma ^ n end)
end

function MultiStepLR:_get_closed_form_lr()
  local passed = 0
  for m, n in pairs(self.milestones) do
    if m <= self.last_epoch then passed = passed + n end
  end
  local out = {}
  for i, b in ipairs(self.base_lrs) do out[i] = b * self.gamma ^ passed end
  return out
end

-- ---- ExponentialLR ---------------------------------------------------------------------------

local ExponentialLR = class(LRScheduler)
M.ExponentialLR = ExponentialLR

function ExponentialLR.new(optimizer, opts)
  opts = checked_options("ExponentialLR", opts, { gamma = true, last_epoch = true })
  if type(opts.gamma) ~= "number" then error("ExponentialLR: gamma is required", 2) end
  local self = setmetatable({ gamma = opts.gamma }, ExponentialLR)
  return LRScheduler.init(self, "ExponentialLR", optimizer, opts.last_epoch)
end

function ExponentialLR:get_lr()
  if self.last_epoch == 0 then return map_groups(self.optimizer, function(g) return g.lr end) end
  return map_groups(self.optimizer, function(g) return g.lr * self.gamma end)
end

function ExponentialLR:_get_closed_form_lr()
  local out = {}
  for i, b in ipairs(self.base_lrs) do out[i] = b * self.gamma ^ self.last_epoch end
  return out
end

-- ---- CosineAnnealingLR -----------------------------------------------------------------------

local CosineAnnealingLR = class(LRScheduler)
M.CosineAnnealingLR = CosineAnnealingLR

function CosineAnnealingLR.new(optimizer, opts)
  opts = checked_options("CosineAnnealingLR", opts, { T_max = true, eta_min = true, last_epoch = true })
  if type(opts.T_max) ~= "number" then error("CosineAnnealingLR: T_max is required", 2) end
  local self = setmetatable({ T_max = opts.T_max, eta_min = opts.eta_min or 0 }, CosineAnnealingLR)
  return LRScheduler.init(self, "CosineAnnealingLR", optimizer, opts.last_epoch)
end

-- PyTorch's recursive form: each lr follows from the previous one, so a change to a group's lr
-- made by hand (or by another scheduler) carries on.
function CosineAnnealingLR:get_lr()
  local e, T, eta, pi, cos = self.last_epoch, self.T_max, self.eta_min, math.pi, math.cos
  local base = self.base_lrs
  if e == 0 then return map_groups(self.optimizer, function(g) return g.lr end) end
  if self._step_count == 1 and e > 0 then
    return map_groups(self.optimizer, function(_, i)
      return eta + (base[i] - eta) * (1 + cos(e * pi / T)) / 2
    end)
  end
  if (e - 1 - T) % (2 * T) == 0 then
    return map_groups(self.optimizer, function(g, i)
      return g.lr + (base[i] - eta) * (1 - cos(pi / T)) / 2
    end)
  end
  return map_groups(self.optimizer, function(g)
    return (1 + cos(pi * e / T)) / (1 + cos(pi * (e - 1) / T)) * (g.lr - eta) + eta
  end)
end

function CosineAnnealingLR:_get_closed_form_lr()
  local out = {}
  for i, b in ipairs(self.base_lrs) do
    out[i] = self.eta_min + (b - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
  end
  return out
end

-- ---- LinearLR --------------------------------------------------------------------------------

local LinearLR = class(LRScheduler)
M.LinearLR = LinearLR

function LinearLR.new(optimizer, opts)
  opts = checked_options("LinearLR", opts, { start_factor = true, end_factor = true, total_iters = true,
                                     last_epoch = true })
  local self = setmetatable({
    start_factor = opts.start_factor or 1.0 / 3, end_factor = opts.end_factor or 1.0,
    total_iters = opts.total_iters or 5,
  }, LinearLR)
  if self.start_factor > 1 or self.start_factor <= 0 then
    error("LinearLR: starting multiplicative factor expected to be greater than 0 and less or equal to 1.", 2)
  end
  if self.end_factor > 1 or self.end_factor < 0 then
    error("LinearLR: ending multiplicative factor expected to be between 0 and 1.", 2)
  end
  return LRScheduler.init(self, "LinearLR", optimizer, opts.last_epoch)
end

function LinearLR:get_lr()
  local e, s, f, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
  if e == 0 then return map_groups(self.optimizer, function(g) return g.lr * s end) end
  if e > n then return map_groups(self.optimizer, function(g) return g.lr end) end
  return map_groups(self.optimizer, function(g)
    return g.lr * (1. + (f - s) / (n * s + (e - 1) * (f - s)))
  end)
end

function LinearLR:_get_closed_form_lr()
  local s, f, n = self.start_factor, self.end_factor, self.total_iters
  local out = {}
  for i, b in ipairs(self.base_lrs) do
    out[i] = b * (s + (f - s) * math.min(n, self.last_epoch) / n)
  end
  return out
end

-- ---- LambdaLR --------------------------------------------------------------------------------

local LambdaLR = class(LRScheduler)
M.LambdaLR = LambdaLR

-- lr_lambda: one function of the epoch for every group, or a list with one per group; given
-- alone in place of the options, as PyTorch's positional LambdaLR(optimizer, lr_lambda).
function LambdaLR.new(optimizer, opts)
  if type(opts) == "function" then opts = { lr_lambda = opts } end
  opts = checked_options("LambdaLR", opts, { lr_lambda = true, last_epoch = true })
  local f, lambdas = opts.lr_lambda, {}
  if type(f) == "table" then
    if #f ~= #optimizer.param_groups then
      error(("LambdaLR: expected %d lr_lambdas, but got %d"):format(#optimizer.param_groups, #f), 2)
    end
    for i, fn in ipairs(f) do lambdas[i] = fn end
  elseif type(f) == "function" then
    for i = 1, #optimizer.param_groups do lambdas[i] = f end
  else
    error("LambdaLR: lr_lambda must be a function or a list of functions", 2)
  end
  local self = setmetatable({ lr_lambdas = lambdas }, LambdaLR)
  return LRScheduler.init(self, "LambdaLR", optimizer, opts.last_epoch)
end

function LambdaLR:get_lr()
  local out = {}
  for i, b in ipairs(self.base_lrs) do out[i] = b * self.lr_lambdas[i](self.last_epoch) end
  return out
end

-- ---- OneCycleLR ------------------------------------------------------------------------------

local OneCycleLR = class(LRScheduler)
M.OneCycleLR = OneCycleLR

local function per_group(cname, name, opt, v)
  if type(v) == "table" then
    if #v ~= #opt.param_groups then
      error(("%s: expected %d values for %s, got %d"):format(cname, #opt.param_groups, name, #v), 4)
    end
    return v
  end
  local out = {}
  for i = 1, #opt.param_groups do out[i] = v end
  return out
end

local function total_steps_of(o)
  if o.total_steps ~= nil then
    if math.type(o.total_steps) ~= "integer" or o.total_steps <= 0 then
      error(("OneCycleLR: expected positive integer total_steps, but got %s"):format(tostring(o.total_steps)), 4)
    end
    return o.total_steps
  end
  if math.type(o.epochs) ~= "integer" or o.epochs <= 0
      or math.type(o.steps_per_epoch) ~= "integer" or o.steps_per_epoch <= 0 then
    error("OneCycleLR: you must define either total_steps OR (epochs AND steps_per_epoch) as positive integers", 4)
  end
  return o.epochs * o.steps_per_epoch
end

local function phases_of(total, pct, three_phase)
  if three_phase then
    return {
      { end_step = pct * total - 1, start_lr = "initial_lr", end_lr = "max_lr",
        start_momentum = "max_momentum", end_momentum = "base_momentum" },
      { end_step = 2 * pct * total - 2, start_lr = "max_lr", end_lr = "initial_lr",
        start_momentum = "base_momentum", end_momentum = "max_momentum" },
      { end_step = total - 1, start_lr = "initial_lr", end_lr = "min_lr",
        start_momentum = "max_momentum", end_momentum = "max_momentum" },
    }
  end
  return {
    { end_step = pct * total - 1, start_lr = "initial_lr", end_lr = "max_lr",
      start_momentum = "max_momentum", end_momentum = "base_momentum" },
    { end_step = total - 1, start_lr = "max_lr", end_lr = "min_lr",
      start_momentum = "base_momentum", end_momentum = "max_momentum" },
  }
end

-- Sets up the momentum cycle (SGD's momentum or Adam's beta1) when cycle_momentum is on.
local function init_momentum(self, opt, o)
  local d = opt.defaults or {}
  if d.momentum == nil and d.betas == nil then
    error("OneCycleLR: optimizer must support momentum with `cycle_momentum` option enabled", 4)
  end
  self.use_beta1 = d.betas ~= nil
  local maxm = per_group("OneCycleLR", "max_momentum", opt, o.max_momentum or 0.95)
  local basem = per_group("OneCycleLR", "base_momentum", opt, o.base_momentum or 0.85)
  if (o.last_epoch or -1) ~= -1 then return end
  for i, g in ipairs(opt.param_groups) do
    if self.use_beta1 then g.betas = { maxm[i], g.betas[2] } else g.momentum = maxm[i] end
    g.max_momentum, g.base_momentum = maxm[i], basem[i]
  end
end

function OneCycleLR.new(optimizer, opts)
  local o = checked_options("OneCycleLR", opts, {
    max_lr = true, total_steps = true, epochs = true, steps_per_epoch = true, pct_start = true,
    anneal_strategy = true, cycle_momentum = true, base_momentum = true, max_momentum = true,
    div_factor = true, final_div_factor = true, three_phase = true, last_epoch = true,
  })
  if o.max_lr == nil then error("OneCycleLR: max_lr is required", 2) end
  local self = setmetatable({}, OneCycleLR)
  self.total_steps = total_steps_of(o)
  local pct = o.pct_start or 0.3
  if type(pct) ~= "number" or pct < 0 or pct > 1 then
    error(("OneCycleLR: expected float between 0 and 1 pct_start, but got %s"):format(tostring(pct)), 2)
  end
  self._schedule_phases = phases_of(self.total_steps, pct, o.three_phase)
  self.anneal_strategy = o.anneal_strategy or "cos"
  if self.anneal_strategy ~= "cos" and self.anneal_strategy ~= "linear" then
    error(("OneCycleLR: anneal_strategy must by one of 'cos' or 'linear', instead got %s")
      :format(tostring(self.anneal_strategy)), 2)
  end
  local max_lrs = per_group("OneCycleLR", "max_lr", optimizer, o.max_lr)
  local div, final_div = o.div_factor or 25.0, o.final_div_factor or 1e4
  if (o.last_epoch or -1) == -1 then
    for i, g in ipairs(optimizer.param_groups) do
      g.initial_lr = max_lrs[i] / div
      g.max_lr = max_lrs[i]
      g.min_lr = g.initial_lr / final_div
    end
  end
  self.cycle_momentum = o.cycle_momentum ~= false
  if self.cycle_momentum then init_momentum(self, optimizer, o) end
  return LRScheduler.init(self, "OneCycleLR", optimizer, o.last_epoch)
end

local function anneal(strategy, start, stop, pct)
  if strategy == "cos" then return stop + (start - stop) / 2.0 * (math.cos(math.pi * pct) + 1) end
  return (stop - start) * pct + start
end

function OneCycleLR:get_lr()
  local step = self.last_epoch
  if step > self.total_steps then
    error(("OneCycleLR: tried to step %d times. The specified number of total steps is %d")
      :format(step + 1, self.total_steps), 3)
  end
  local phases = self._schedule_phases
  return map_groups(self.optimizer, function(g)
    local start, lr, mom = 0, nil, nil
    for i, ph in ipairs(phases) do
      if step <= ph.end_step or i == #phases then
        local pct = (step - start) / (ph.end_step - start)
        lr = anneal(self.anneal_strategy, g[ph.start_lr], g[ph.end_lr], pct)
        if self.cycle_momentum then
          mom = anneal(self.anneal_strategy, g[ph.start_momentum], g[ph.end_momentum], pct)
        end
        break
      end
      start = ph.end_step
    end
    if mom ~= nil then
      if self.use_beta1 then g.betas = { mom, g.betas[2] } else g.momentum = mom end
    end
    return lr
  end)
end

return M
