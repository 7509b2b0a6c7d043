-- dist_fsdp_gpt.lua: the GPT of moonshard.models.gpt (2 layers, head tied to the token
-- embedding) wrapped in FSDP with one unit per Block and the embeddings, ln_f and the head in
-- the root unit (the tie stays inside one unit) trains as one process over AdamW steps, each
-- rank on its slice of the batch (FULL_SHARD, SHARD_GRAD_OP; float64, 1e-10). A policy that
-- would put the token embedding in a unit of its own, apart from the head, is refused.
local ms = require "moonshard"
local optim = require "moonshard.optim"
local fsdp = require "moonshard.fsdp"
local gpt = require "moonshard.models.gpt"
local T = require "testing"

local D = require "launch_testing"
local R, W = D.init()
local case = D.case
local BATCH, STEPS, TOL = 12, 3, 1e-10
local CONFIG = { n_layer = 2, n_head = 2, n_embd = 16, block_size = 8, vocab_size = 13 }

local function make()
  ms.manual_seed(1)
  return gpt.GPT(CONFIG):double()
end

local function data()
  ms.manual_seed(7)
  return ms.randint(1, 14, { BATCH, 8 }), ms.randint(1, 14, { BATCH, 8 })
end

-- AdamW for STEPS steps on the whole batch or this rank's rows of it; the losses.
local function train(model, sliced)
  local x, y = data()
  if sliced then
    local b = BATCH // W
    x, y = x:narrow(1, R * b + 1, b), y:narrow(1, R * b + 1, b)
  end
  local opt = optim.AdamW(model:parameters(), { lr = 1e-2 })
  for _ = 1, STEPS do
    opt:zero_grad()
    local _, loss = model(x, y)
    loss:backward()
    opt:step()
  end
end

for _, strategy in ipairs({ "FULL_SHARD", "SHARD_GRAD_OP" }) do
  case(strategy .. ": a GPT with a unit per Block trains as one process", function()
    local plain = make()
    train(plain, false)
    local model = fsdp.FSDP(make(), { sharding_strategy = strategy, auto_wrap_policy = fsdp.ModuleWrapPolicy{ gpt.Block } })
    train(model, true)
    D.check_state(D.state_of(model), D.state_of(plain), TOL, strategy .. " gpt")
  end)
end

case("the token embedding in a unit apart from its tied head is refused", function()
  local nn = require "moonshard.nn"
  T.raises(function() fsdp.FSDP(make(), { auto_wrap_policy = fsdp.ModuleWrapPolicy{ nn.Embedding } }) end,
    "already in another FSDP unit")
end)

D.finish("dist_fsdp_gpt")
