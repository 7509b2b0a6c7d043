-- dist_fsdp_checkpoint.lua: activation checkpointing inside FSDP units, in PyTorch's order: the
-- GPT wrapped with a unit per Block, then fsdp.apply_activation_checkpointing (each unit is
-- FSDP(CheckpointWrapper(Block))): the recompute runs in the unit's backward while its
-- parameters are gathered. With dropout on (the recompute replays the masks), AdamW steps give
-- the parameters of the same run without checkpointing (float32, max rel. error 1e-5), under
-- FULL_SHARD and SHARD_GRAD_OP, and with bfloat16 mixed precision (the recompute uses the unit's
-- bfloat16 compute views); the state dict keeps the Block's names.
local ms = require "moonshard"
local optim = require "moonshard.optim"
local fsdp = require "moonshard.fsdp"
local gpt = require "moonshard.models.gpt"
local T = require "testing"

local D = require "launch_testing"
local R, W = D.init()
local case = D.case
local BATCH, STEPS, TOL = 12, 3, 1e-5
local CONFIG = { n_layer = 2, n_head = 2, n_embd = 16, block_size = 8, vocab_size = 13, dropout = 0.2 }

local function is_block(m) return m:isinstance(gpt.Block) end

local function make(strategy, use_ckpt, param_dtype)
  ms.manual_seed(1)
  local model = fsdp.FSDP(gpt.GPT(CONFIG), { sharding_strategy = strategy,
    auto_wrap_policy = fsdp.ModuleWrapPolicy{ gpt.Block },
    mixed_precision = param_dtype and { param_dtype = param_dtype } or nil })
  if use_ckpt then fsdp.apply_activation_checkpointing(model, { check_fn = is_block }) end
  return model
end

-- AdamW for STEPS steps on this rank's rows of the batch, from the same random state; the losses.
local function train(model)
  ms.manual_seed(7)
  local x, y = ms.randint(1, 14, { BATCH, 8 }), ms.randint(1, 14, { BATCH, 8 })
  local b = BATCH // W
  x, y = x:narrow(1, R * b + 1, b), y:narrow(1, R * b + 1, b)
  ms.manual_seed(100 + R) -- each rank its own dropout masks, the same in both runs
  local opt = optim.AdamW(model:parameters(), { lr = 1e-2 })
  local losses = {}
  for i = 1, STEPS do
    opt:zero_grad()
    local _, loss = model(x, y)
    loss:backward()
    opt:step()
    losses[i] = loss:item()
  end
  return losses
end

local CASES = { { "FULL_SHARD" }, { "SHARD_GRAD_OP" }, { "FULL_SHARD", "bfloat16" } }
for _, c in ipairs(CASES) do
  local strategy, param_dtype = c[1], c[2]
  local what = strategy .. (param_dtype and " " .. param_dtype or "")
  case(what .. ": FSDP(CheckpointWrapper(Block)) trains as without checkpointing", function()
    local plain = make(strategy, false, param_dtype)
    local want_losses = train(plain)
    local model = make(strategy, true, param_dtype)
    local n = 0
    for _, m in ipairs(model:modules()) do
      if m:isinstance(fsdp.CheckpointWrapper) then n = n + 1 end
    end
    T.eq(n, CONFIG.n_layer, "a CheckpointWrapper per Block")
    local losses = train(model)
    T.same(losses, want_losses, 1e-5)
    D.check_state(D.state_of(model), D.state_of(plain), TOL, what .. " checkpointed gpt")
  end)
end

D.finish("dist_fsdp_checkpoint")
