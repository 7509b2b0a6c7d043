-- dist_fsdp_memory.lua: FSDP's memory on each rank of an mpirun launch (docs/fsdp-memory.md):
-- a unit's gradient reduction is finished (its packed grads and output freed) inside the
-- backward, not at its end; limit_all_gathers keeps at most two units gathered; every unit casts
-- its inputs with mixed_precision.cast_forward_inputs; fsdp.memory_report shows the plan beside
-- what was measured. Each rank trains on the same batch, so results equal one process's.
local ms = require "moonshard"
local nn = require "moonshard.nn"
local optim = require "moonshard.optim"
local fsdp = require "moonshard.fsdp"
local T = require "testing"

local D = require "launch_testing"
local R, W = D.init()
local case = D.case

local E, UNITS = 64, 6

-- UNITS Linear(E, E) in a row; a hook on each intermediate output samples the engine's
-- communication bytes while the backward runs (every unit's reduction is in that category).
local Stack = nn.Module:extend("Stack")
function Stack:init(make)
  self.layers = nn.ModuleList()
  for i = 1, UNITS do self.layers:append(make(i)) end
  self.comm_max = 0
end
function Stack:forward(x)
  for _, l in ipairs(self.layers) do
    x = l(x)
    if x.requires_grad then
      x:register_hook(function()
        self.comm_max = math.max(self.comm_max, ms.memory_stats().by_category.comm)
      end)
    end
  end
  return x
end

local function make_plain()
  ms.manual_seed(3)
  return Stack(function() return nn.Linear(E, E) end)
end

local function input()
  ms.manual_seed(4)
  return ms.randn(8, E)
end

local function train(model, steps)
  local opt = optim.SGD(model:parameters(), {lr = 0.05})
  local x = input()
  for _ = 1, steps do
    opt:zero_grad()
    model(x):pow(2):mean():backward()
    opt:step()
  end
  return opt
end

local function stack_of(model) return model._fsdp_wrapped_module._fpw_module end

case("each unit's reduction is finished inside the backward: at most two are held", function()
  ms.manual_seed(3)
  local model = fsdp.FSDP(Stack(function() return fsdp.FSDP(nn.Linear(E, E)) end))
  train(model, 2)
  local info = stack_of(model).layers[1]._attrs._flat:info()
  local one = (info.padded + info.shard_numel) * 4 -- a reduction's packed grads and output, float32
  local seen = stack_of(model).comm_max
  -- held to the end of backward, the units below the last would hold UNITS - 1 of them
  T.truthy(seen > 0 and seen <= 2 * one, ("comm bytes during backward %d, two reductions %d"):format(seen, 2 * one))
  T.eq(ms.memory_stats().by_category.comm, 0, "nothing held after the backward")
  local plain = make_plain()
  train(plain, 2)
  D.check_state(D.state_of(model), D.state_of(plain), 1e-5, "FSDP against one process")
end)

-- root{A{a1, a2}, B{b1, b2}} with forward_prefetch: while a1 computes, A is gathered around it
-- and a1 prefetches a2, three units; the limiter skips that prefetch.
local Pair = nn.Module:extend("Pair")
function Pair:init(wrap)
  self.a = wrap(nn.Linear(E, E))
  self.b = wrap(nn.Linear(E, E))
  self.mix = nn.Linear(E, E) -- the pair's own parameters: its unit is gathered around a and b
end
function Pair:forward(x) return self.mix(self.b(self.a(x))) end

local Outer = nn.Module:extend("Outer")
function Outer:init(wrap)
  self.p = wrap(Pair(wrap))
  self.q = wrap(Pair(wrap))
end
function Outer:forward(x) return self.q(self.p(x)) end

local function nested(opts)
  ms.manual_seed(5)
  local wrap = opts and function(m) return fsdp.FSDP(m, opts) end or function(m) return m end
  local m = Outer(wrap)
  return opts and fsdp.FSDP(m, opts) or m
end

case("limit_all_gathers keeps at most two units' full buffers gathered", function()
  local free = nested({forward_prefetch = true, backward_prefetch = "BACKWARD_PRE"})
  train(free, 3)
  T.truthy(fsdp.comm_stats(free).max_gathered >= 3, "without the limiter three are gathered at once")
  local limited = nested({forward_prefetch = true, backward_prefetch = "BACKWARD_PRE", limit_all_gathers = true})
  train(limited, 3)
  local s = fsdp.comm_stats(limited)
  T.truthy(s.max_gathered >= 1 and s.max_gathered <= 2, ("max gathered %d"):format(s.max_gathered))
  local plain = nested(nil)
  train(plain, 3)
  D.check_state(D.state_of(limited), D.state_of(plain), 1e-5, "limited FSDP against one process")
  T.raises(function() fsdp.FSDP(nn.Linear(2, 2), {limit_all_gathers = "yes"}) end, "limit_all_gathers",
    "true or false")
end)

-- A child unit fed float32 by its parent (a float32 buffer added to the cast input) sees bfloat16
-- only with cast_forward_inputs.
local Seen = nn.Module:extend("Seen")
function Seen:init() self.fc = nn.Linear(E, E) end
function Seen:forward(x)
  self.dtype = x.dtype
  return self.fc(x)
end

local Parent = nn.Module:extend("Parent")
function Parent:init(wrap)
  self.child = wrap(Seen())
  self.shift = ms.zeros(E) -- float32 (no buffer_dtype): promotes the bfloat16 input
end
function Parent:forward(x) return self.child(x + self.shift) end

local function seen_dtype(cast)
  local mp = {param_dtype = "bfloat16", cast_forward_inputs = cast}
  local wrap = function(m) return fsdp.FSDP(m, {mixed_precision = mp}) end
  ms.manual_seed(6)
  local model = wrap(Parent(wrap))
  model(input())
  return stack_of(model).child._fsdp_wrapped_module._fpw_module.dtype
end

case("mixed_precision.cast_forward_inputs casts every unit's inputs to param_dtype", function()
  T.eq(seen_dtype(false), "float32", "only the root casts by default")
  T.eq(seen_dtype(true), "bfloat16")
  T.raises(function() fsdp.FSDP(nn.Linear(2, 2), {mixed_precision = {param_dtype = "bfloat16", cast_forward_inputs = 1}}) end,
    "cast_forward_inputs", "true or false")
end)

case("fsdp.memory_report: the plan beside the measured peaks", function()
  ms.manual_seed(3)
  local model = fsdp.FSDP(Stack(function() return fsdp.FSDP(nn.Linear(E, E)) end))
  ms.reset_peak_memory_stats()
  local opt = train(model, 1)
  local r = fsdp.memory_report(model, opt)
  T.truthy(r.planned_bytes >= r.params_bytes + r.grads_bytes + r.optimizer_bytes)
  T.truthy(r.reduce_bytes > 0 and r.engine_peak_bytes >= r.engine_current_bytes)
  T.truthy(r.cache_bound_bytes >= 0 and r.cached_bytes <= r.cache_bound_bytes + r.engine_peak_bytes)
  T.truthy(r.vmhwm_bytes == nil or r.vmhwm_bytes > 0)
  local text = tostring(r)
  T.truthy(text:find("measured: engine peak", 1, true) and text:find("cache bound", 1, true), text)
end)

D.finish("dist_fsdp_memory")
