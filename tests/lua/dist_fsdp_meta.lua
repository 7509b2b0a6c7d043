-- dist_fsdp_meta.lua: deferred initialisation under FSDP (docs/deferred-init.md). A GPT built
-- under nn.deferred_init (meta parameters) and wrapped with a unit per Block is materialised
-- unit by unit, innermost first: its full state dict equals, bit for bit, the GPT built normally
-- from the same seed on one process (FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, with
-- sync_module_states, with param_init_fn), and the engine's peak bytes while wrapping stay
-- below the full model's bytes on 2..4 ranks (one rank: the model plus two units at most).
local ms = require "moonshard"
local nn = require "moonshard.nn"
local fsdp = require "moonshard.fsdp"
local gpt = require "moonshard.models.gpt"
local T = require "testing"

local D = require "launch_testing"
local R, W = D.init()
local case = D.case
-- eight small blocks and a small root unit: one unit is much smaller than the model
local CONFIG = { n_layer = 8, n_head = 2, n_embd = 32, block_size = 8, vocab_size = 16 }

local function plain()
  ms.manual_seed(1)
  return gpt.GPT(CONFIG)
end

local function wrapped(opts)
  ms.manual_seed(1)
  local model = nn.deferred_init(gpt.GPT, CONFIG)
  for name, p in model:named_parameters() do T.truthy(p.is_meta, name .. " is not meta") end
  opts = opts or {}
  opts.auto_wrap_policy = fsdp.ModuleWrapPolicy{ gpt.Block }
  return fsdp.FSDP(model, opts)
end

local function nbytes(tensors)
  local n = 0
  for _, t in ipairs(tensors) do n = n + t:numel() * t:element_size() end
  return n
end

for _, strategy in ipairs({ "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD" }) do
  case(strategy .. ": a GPT built on meta equals the GPT built normally, bit for bit", function()
    local model = wrapped({ sharding_strategy = strategy })
    D.check_state(D.state_of(model), D.state_of(plain()), 0, strategy .. " meta")
  end)
end

case("sync_module_states with meta: no broadcast is needed, the values agree", function()
  local model = wrapped({ sync_module_states = true })
  D.check_state(D.state_of(model), D.state_of(plain()), 0, "sync meta")
end)

case("param_init_fn materialises each unit instead of the records, innermost first", function()
  local calls = {}
  local model = wrapped({ param_init_fn = function(m)
    calls[#calls + 1] = m:_get_name()
    nn.materialize_module(m)
  end })
  T.eq(#calls, CONFIG.n_layer + 1, "one call per unit")
  T.eq(calls[1], "Block")
  T.eq(calls[#calls], "GPT")
  D.check_state(D.state_of(model), D.state_of(plain()), 0, "param_init_fn")
  T.raises(function() wrapped({ param_init_fn = function() end }) end,
    "param_init_fn", "is still on meta after param_init_fn(Block)")
  T.raises(function() wrapped({ param_init_fn = 3 }) end, "FSDP: option 'param_init_fn': expected a function")
end)

case("no rank's engine peak reaches the full model while wrapping from meta", function()
  local ref = plain()
  local full = nbytes(ref:parameters())
  local block = nbytes(ref.transformer.h[1]:parameters())
  ref = nil
  collectgarbage()
  collectgarbage()
  local base = ms.memory_stats().current
  ms.reset_peak_memory_stats()
  local model = wrapped()
  local peak = ms.memory_stats().peak - base
  if W == 1 then -- the shards are the whole model here: at most two units more
    T.truthy(peak <= full + 2 * block, ("peak %d B above the model's %d B + 2 x %d B"):format(peak, full, block))
  else
    T.truthy(peak < full, ("rank %d: peak %d B while wrapping, the model is %d B"):format(R, peak, full))
  end
  T.truthy(model ~= nil)
end)

D.finish("dist_fsdp_meta")
