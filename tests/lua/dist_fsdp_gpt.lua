-- dist_fsdp_gpt.lua: the GPT of moonshard.models.gpt (2 layers, head tied to the token
-- embedding) wrapped in FSDP with one unit per Block and the embeddings, ln_f and the head in
-- the root unit (the tie stays inside one unit) trains as one process over 20 AdamW steps, each
-- rank on its slice of the batch: float32 FULL_SHARD and SHARD_GRAD_OP, with and without
-- activation checkpointing, built on the meta device, to a relative 1e-5 of the parameters
-- (issue 19's bound); bfloat16 mixed precision with the losses within 1e-2 of float32 one
-- process's. A policy that puts the embeddings in units of their own leaves the tied weight to
-- the unit enclosing both its holders (the root), and trains as one process.
local ms = require "moonshard"
local nn = require "moonshard.nn"
local optim = require "moonshard.optim"
local fsdp = require "moonshard.fsdp"
local gpt = require "moonshard.models.gpt"
local T = require "testing"

local D = require "launch_testing"
local R, W = D.init()
local case = D.case
local BATCH, STEPS, TOL, BF16_LOSS_TOL = 12, 20, 1e-5, 1e-2
-- Without biases (nanoGPT's bias = false): the key third of c_attn's bias has a gradient of
-- exactly zero in exact arithmetic (a constant added to every score of a query), so its float32
-- gradient is rounding noise, which Adam's normalisation turns into full steps in a direction
-- that depends on the order of summation: no two reduction orders can agree on it.
local CONFIG = { n_layer = 2, n_head = 2, n_embd = 16, block_size = 8, vocab_size = 13, bias = false }

local function make(meta)
  ms.manual_seed(1)
  return meta and nn.deferred_init(gpt.GPT, CONFIG) or gpt.GPT(CONFIG)
end

local function data()
  ms.manual_seed(7)
  return ms.randint(1, 14, { BATCH, 8 }), ms.randint(1, 14, { BATCH, 8 })
end

-- AdamW for STEPS steps on the whole batch or this rank's rows of it; the mean loss over the
-- ranks of each step.
local function train(model, sliced)
  local x, y = data()
  if sliced then x, y = D.my_rows(x, y) end
  local opt = optim.AdamW(model:parameters(), { lr = 1e-3 })
  local losses = {}
  for step = 1, STEPS do
    opt:zero_grad()
    local _, loss = model(x, y)
    loss:backward()
    opt:step()
    local l = loss:detach():double():view(1)
    if sliced and W > 1 then ms.distributed.all_reduce(l, { op = "sum" }) end
    losses[step] = l:item() / (sliced and W or 1)
  end
  return losses
end

local reference -- one process, float32: its final state and losses
local function one_process()
  if not reference then
    local plain = make()
    local losses = train(plain, false)
    reference = { state = D.state_of(plain), losses = losses }
  end
  return reference
end

local function wrapped(opts)
  local model = fsdp.FSDP(make(opts.meta), { sharding_strategy = opts.strategy,
    auto_wrap_policy = fsdp.ModuleWrapPolicy{ gpt.Block }, mixed_precision = opts.mixed_precision })
  if opts.checkpointing then
    fsdp.apply_activation_checkpointing(model, { check_fn = function(m) return m:isinstance(gpt.Block) end })
  end
  return model
end

for _, strategy in ipairs({ "FULL_SHARD", "SHARD_GRAD_OP" }) do
  for _, checkpointing in ipairs({ false, true }) do
    local what = strategy .. (checkpointing and ", activation checkpointing" or "") .. ", built on meta"
    case(what .. ": a GPT with a unit per Block trains as one process for 20 AdamW steps", function()
      local want = one_process()
      local model = wrapped{ strategy = strategy, checkpointing = checkpointing, meta = true }
      train(model, true)
      D.check_state(D.state_of(model), want.state, TOL, what, "l2")
    end)
  end
end

case("bfloat16 mixed precision with activation checkpointing: the losses within 1e-2 of float32", function()
  local want = one_process()
  local model = wrapped{ strategy = "FULL_SHARD", checkpointing = true, meta = true,
    mixed_precision = { param_dtype = "bfloat16", reduce_dtype = "bfloat16", buffer_dtype = "bfloat16" } }
  local losses = train(model, true)
  for step, l in ipairs(losses) do
    T.truthy(math.abs(l - want.losses[step]) <= BF16_LOSS_TOL,
      ("step %d: bfloat16 loss %.5f, float32 %.5f"):format(step, l, want.losses[step]))
  end
end)

case("the embeddings in units of their own: the tied weight stays with the head (the root), as one process", function()
  local want = one_process()
  local model = fsdp.FSDP(make(true), { auto_wrap_policy = fsdp.ModuleWrapPolicy{ gpt.Block, nn.Embedding } })
  T.eq(model:module().transformer.wte._attrs._flat, nil, "wte's unit holds nothing: its weight is the head's")
  T.truthy(model:module().transformer.wpe._attrs._flat ~= nil, "wpe's unit holds its own weight")
  train(model, true)
  D.check_state(D.state_of(model), want.state, TOL, "embedding units", "l2")
end)

D.finish("dist_fsdp_gpt")
