-- resume_testing.lua: what the training-checkpoint tests (test_train_checkpoint.lua,
-- dist_fsdp_resume.lua) share: a tiny GPT with dropout, AdamW with weight-decay groups, a cosine
-- schedule and batches drawn at random from a generated token stream, so that a resumed run
-- matches only when the model, the optimizer, the scheduler and the RNG all come back.
local ms = require "moonshard"
local optim = require "moonshard.optim"
local gpt = require "moonshard.models.gpt"
local token_dataset = require "moonshard.token_dataset"

local M = {}
M.CONFIG = { n_layer = 2, n_head = 2, n_embd = 16, block_size = 8, vocab_size = 13, dropout = 0.1 }
M.STEPS, M.BATCH = 6, 3

function M.model(seed)
  ms.manual_seed(seed or 1)
  return gpt.GPT(M.CONFIG)
end

local function dataset()
  local ids = {}
  for i = 1, 200 do ids[i] = (i * 7 + i // 5) % M.CONFIG.vocab_size + 1 end
  return token_dataset.TokenDataset(ms.tensor(ids, { dtype = "int64" }), M.CONFIG.block_size)
end

-- AdamW over two groups (weight decay on matrices only) and its cosine schedule, for the
-- parameters of `model` (wrapped or not).
function M.optimizer(model)
  local groups = { { params = {}, weight_decay = 0.1 }, { params = {}, weight_decay = 0.0 } }
  for name, p in model:named_parameters() do
    local g = (name:match("weight$") and not name:match("ln")) and groups[1] or groups[2]
    g.params[#g.params + 1] = p
  end
  local opt = optim.AdamW(groups, { lr = 1e-2 })
  return opt, optim.lr_scheduler.CosineAnnealingLR(opt, { T_max = M.STEPS, eta_min = 1e-3 })
end

-- A training run's objects: {model, opt, sched, data}.
function M.run(model)
  local opt, sched = M.optimizer(model)
  return { model = model, opt = opt, sched = sched, data = dataset() }
end

-- One step on a random batch; the loss.
function M.step(run)
  local x, y = run.data:get_batch(M.BATCH)
  run.opt:zero_grad()
  local _, loss = run.model(x, y)
  loss:backward()
  run.opt:step()
  run.sched:step()
  return loss:item()
end

-- name -> a copy of every tensor of the (full) state dict.
function M.params(model)
  local out = {}
  for k, v in pairs(model:state_dict()) do out[k] = v:clone() end
  return out
end

-- Every entry of `got` bit-identical to want's (same names).
function M.check_identical(got, want, what)
  local n = 0
  for k, w in pairs(want) do
    local g = got[k]
    if g == nil then error(("%s: missing %s"):format(what, k), 2) end
    local diff = (g:to("cpu"):double() - w:to("cpu"):double()):abs():max():item()
    if diff ~= 0 then error(("%s: %s differs by %.3g (expected bit-identical)"):format(what, k, diff), 2) end
    n = n + 1
  end
  for k in pairs(got) do
    if want[k] == nil then error(("%s: unexpected %s"):format(what, k), 2) end
  end
  return n
end

return M
