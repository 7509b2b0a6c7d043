-- dist_fsdp_tied.lua: tied parameters under FSDP's auto wrap (PyTorch's lowest-common-ancestor
-- rule): a parameter held by modules in different units is flattened once, into the innermost
-- unit enclosing every holder. Checked on 1..4 ranks, every sharding strategy: two wrapped
-- siblings sharing a weight (the root holds it), a wrapped child sharing one with its parent
-- unit's own module (a GPT's tied embedding and head, both units), a tie inside one unit (left
-- to it), against one process trained the same way; the full state dict keeps both names, as
-- PyTorch's; the sharded state dict round-trips; manual wrapping still refuses a shared
-- parameter.
local ms = require "moonshard"
local nn = require "moonshard.nn"
local F = require "moonshard.functional"
local optim = require "moonshard.optim"
local fsdp = require "moonshard.fsdp"
local T = require "testing"

local D = require "launch_testing"
local R, W = D.init()
local case = D.case
local BATCH, STEPS, TOL = 12, 4, 1e-5 -- 12 rows: every world size of 1..4 divides them

-- Sequential(emb, tanh, Inner{a, tanh, b}, head): ties by `kind`.
--   siblings: head.weight = emb.weight, each a wrapped Linear (root holds it)
--   nested:   Inner.b.weight = head.weight (Inner is a unit, head is the root's)
--   inside:   Inner.b.weight = Inner.a.weight (both in Inner's unit)
local Inner = nn.Module:extend("Inner")
function Inner:init()
  self.a = nn.Linear(6, 6)
  self.b = nn.Linear(6, 6)
end
function Inner:forward(x) return self.b(ms.tanh(self.a(x))) end

local function make(kind)
  ms.manual_seed(3)
  local m = nn.Sequential(nn.Linear(6, 6), nn.Tanh(), Inner(), nn.Linear(6, 6))
  if kind == "siblings" then m[4].weight = m[1].weight end
  if kind == "nested" then m[3].b.weight = m[4].weight end
  if kind == "inside" then m[3].b.weight = m[3].a.weight end
  return m
end

local POLICY = { siblings = { nn.Linear }, nested = { Inner }, inside = { Inner } }

local function data()
  ms.manual_seed(7)
  return ms.randn(BATCH, 6), ms.randn(BATCH, 6)
end

-- Adam on the mean squared error, on the whole batch or this rank's rows of it.
local function train(model, sliced)
  local x, y = data()
  if sliced then x, y = D.my_rows(x, y) end
  local opt = optim.Adam(model:parameters(), { lr = 0.05 })
  for _ = 1, STEPS do
    opt:zero_grad()
    F.mse_loss(model(x), y):backward()
    opt:step()
  end
end

local function names(sd)
  local list = {}
  for k in pairs(sd) do list[#list + 1] = k end
  table.sort(list)
  return table.concat(list, " ")
end

for _, kind in ipairs({ "siblings", "nested", "inside" }) do
  for _, strategy in ipairs({ "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD" }) do
    case(("%s tie, %s: trains as one process"):format(kind, strategy), function()
      local plain = make(kind)
      train(plain, false)
      local model = fsdp.FSDP(make(kind), { sharding_strategy = strategy,
        auto_wrap_policy = fsdp.ModuleWrapPolicy(POLICY[kind]) })
      train(model, true)
      local got, want = D.state_of(model), D.state_of(plain)
      T.eq(names(got), names(want), "both names of the tied parameter are in the state dict")
      D.check_state(got, want, TOL, kind .. " " .. strategy)
      -- named_parameters lists the tied parameter once, under its first name (PyTorch's order)
      local n, plain_n = 0, 0
      for _ in model:named_parameters() do n = n + 1 end
      for _ in plain:named_parameters() do plain_n = plain_n + 1 end
      T.eq(n, plain_n, "parameters listed once")
    end)
  end
end

case("siblings tie: the root unit holds the tied weight, each sibling unit only its own", function()
  local model = fsdp.FSDP(make("siblings"), { auto_wrap_policy = fsdp.ModuleWrapPolicy{ nn.Linear } })
  local inner = model:module()
  local function flat_numel(unit) return unit._attrs._flat:info().numel end
  T.eq(flat_numel(model), 36, "root: the shared 6 x 6 weight")
  T.eq(flat_numel(inner[1]), 6, "first Linear: its bias only")
  T.eq(flat_numel(inner[4]), 6, "last Linear: its bias only")
end)

case("nested tie: the sharded state dict round-trips onto a fresh model", function()
  local model = fsdp.FSDP(make("nested"), { auto_wrap_policy = fsdp.ModuleWrapPolicy{ Inner } })
  train(model, true)
  local sd = model:state_dict({ state_dict_type = "SHARDED" })
  local fresh = fsdp.FSDP(make("nested"), { auto_wrap_policy = fsdp.ModuleWrapPolicy{ Inner } })
  fresh:load_state_dict(sd, { state_dict_type = "SHARDED" })
  D.check_state(D.state_of(fresh), D.state_of(model), 0, "sharded round trip")
end)

case("manual wrapping refuses a parameter shared by two units", function()
  local m = make("siblings")
  m[1] = fsdp.FSDP(m[1])
  T.raises(function() fsdp.FSDP(m[4]) end, "is already in another FSDP unit")
end)

D.finish("dist_fsdp_tied")
