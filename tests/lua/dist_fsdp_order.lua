-- dist_fsdp_order.lua: FSDP's execution order is checked across ranks (registered for 1..4 ranks,
-- with MS_DIST_DEBUG=0: the default check, each call's signature exchanged alongside it, and
-- MS_DIST_DEBUG=1: the blocking check before each call). Every collective of a unit carries the
-- unit's module path and its phase; ranks that run two same-size units in different orders
-- (issue 17: silently wrong outputs, unnoticed by the debug check of kind, dtype and count) fail
-- on every rank with a message naming both ranks' units and phases. The mismatch cases need more
-- than one rank; the agreeing cases run always.
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
local CHECK = (os.getenv("MS_DIST_DEBUG") or "0") == "0" and "execution order check" or "MS_DIST_DEBUG"
local DT = "float64"

-- Two units of the same size; swapped = true makes ranks other than 0 run dec before enc.
local Body = nn.Module:extend("Body")
function Body:init()
  self.enc = nn.Linear(8, 8)
  self.dec = nn.Linear(8, 8)
end
function Body:forward(x, swapped)
  if swapped and R ~= 0 then return self.enc(F.relu(self.dec(x))) end
  return self.dec(F.relu(self.enc(x)))
end

local Net = nn.Module:extend("Net")
function Net:init()
  self.body = Body()
  self.head = nn.Linear(8, 3)
end
function Net:forward(x, swapped) return F.log_softmax(self.head(F.relu(self.body(x, swapped))), 2) end

local function make(strategy)
  ms.manual_seed(1)
  local m = Net()
  m:to(DT)
  return fsdp.FSDP(m, {sharding_strategy = strategy, auto_wrap_policy = fsdp.ModuleWrapPolicy{nn.Linear}})
end

local function step(model, swapped)
  ms.manual_seed(7 + R)
  local x, y = ms.randn(4, 8, {dtype = DT}), ms.randint(1, 4, {4})
  local opt = optim.SGD(model:parameters(), {lr = 0.1})
  opt:zero_grad()
  F.nll_loss(model(x, swapped), y):backward()
  opt:step()
end

local STRATEGIES = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"}

for _, strategy in ipairs(STRATEGIES) do
  case(strategy .. ": the same order on every rank passes (debug or not)", function()
    local model = make(strategy)
    for _ = 1, 2 do step(model) end
  end)
end

if W > 1 then
  -- sharded units gather in forward; NO_SHARD's first collectives are the grads' all-reduces,
  -- issued in backward in the (swapped) order the units finish
  local PHASE = {FULL_SHARD = "forward all-gather", SHARD_GRAD_OP = "forward all-gather",
    NO_SHARD = "grad all-reduce"}
  for _, strategy in ipairs(STRATEGIES) do
    case(strategy .. ": units run in different orders fail on every rank naming both units", function()
      local model = make(strategy)
      step(model) -- the first iteration in the same order
      local err = T.raises(function() step(model, true) end, CHECK .. ": ranks disagree")
      if os.getenv("MS_FSDP_VERBOSE") and R == 0 then print(err) end
      local a, b = ("unit 'body.enc' (%s)"):format(PHASE[strategy]), ("unit 'body.dec' (%s)"):format(PHASE[strategy])
      T.truthy(err:find(a, 1, true) and err:find(b, 1, true), "both units named: " .. err)
      T.truthy(err:find("rank 0 called", 1, true) and err:find("but rank ", 1, true), "both ranks named: " .. err)
    end)
  end
  case("a broadcast with a different root on each rank fails on every rank, naming both roots", function()
    local t = ms.ones(1000) * R
    local err = T.raises(function() dist.broadcast(t, {src = R}) end, CHECK .. ": ranks disagree",
      "broadcast(float32, 1000 elements, src 0)", "broadcast(float32, 1000 elements, src 1)")
    if os.getenv("MS_FSDP_VERBOSE") and R == 0 then print(err) end
  end)
  case("after the failures the ranks are in step: the same order trains", function()
    local model = make("FULL_SHARD")
    for _ = 1, 2 do step(model) end
  end)
end

D.finish("dist_fsdp_order")
