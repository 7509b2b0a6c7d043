-- test_summary.lua: ms.summary on the seed's Net and a tiny GPT: each layer's output shape and
-- parameter count, totals equal to model:parameters(), trainable and not, the memory lines; the
-- model's modes and autograd left as they were; mistakes named.
local T = require "testing"
local ms = require "moonshard"
local nn = require "moonshard.nn"
local Net = require "moonshard.seed_net"
local gpt = require "moonshard.models.gpt"

local function numel_sum(params, trainable_only)
  local n = 0
  for _, p in ipairs(params) do if not trainable_only or p.requires_grad then n = n + p:numel() end end
  return n
end

local function row(s, name)
  for _, r in ipairs(s.rows) do if r.name == name then return r end end
end

T.test("the seed's Net: shapes and counts per layer, totals equal model:parameters()", function()
  ms.manual_seed(1)
  local model = Net()
  local s = ms.summary(model, { 2, 1, 28, 28 })
  T.eq(s.total_params, numel_sum(model:parameters()))
  T.eq(s.total_params, 1199882)
  T.eq(s.trainable_params, 1199882); T.eq(s.non_trainable_params, 0)
  T.eq(row(s, "").output_shape, "[2, 10]")
  T.eq(row(s, "conv1").output_shape, "[2, 32, 26, 26]"); T.eq(row(s, "conv1").params, 320)
  T.eq(row(s, "conv2").params, 18496)
  T.eq(row(s, "fc1").output_shape, "[2, 128]"); T.eq(row(s, "fc1").params, 1179776)
  T.eq(row(s, "fc2").params, 1290)
  local leaves = 0
  for _, r in ipairs(s.rows) do if r.depth == 1 then leaves = leaves + r.params end end
  T.eq(leaves, s.total_params, "the layers' counts add up to the total")
  T.eq(s.param_bytes, 4 * 1199882)
  local text = tostring(s)
  T.truthy(text:find("\nconv1 %(Conv2d%) +%[2, 32, 26, 26%] +320\n"), text)
  T.truthy(text:find("\nTotal params: 1,199,882\n", 1, true), text)
  T.truthy(text:find("\nParams size %(MB%): 4%.58\n"), text)
  T.truthy(text:find("Forward/backward pass size (MB): ", 1, true), text)
end)

T.test("frozen parameters count as non-trainable; modes and grad mode are restored", function()
  local model = Net()
  model.conv1:requires_grad_(false)
  model:train()
  model.fc2:eval()
  local s = ms.summary(model, { 1, 1, 28, 28 })
  T.eq(s.non_trainable_params, 320); T.eq(s.trainable_params, 1199882 - 320)
  T.eq(model.training, true); T.eq(model.fc1.training, true); T.eq(model.fc2.training, false)
  T.eq(ms.is_grad_enabled(), true)
end)

T.test("a tiny GPT: integer token input, nested blocks, tied weights counted once", function()
  ms.manual_seed(1)
  local model = gpt.GPT { n_layer = 2, n_head = 2, n_embd = 16, block_size = 8, vocab_size = 11, dropout = 0.0 }
  local s = ms.summary(model, { 1, 8 }, { dtype = ms.int64 })
  T.eq(s.total_params, numel_sum(model:parameters()))
  T.eq(row(s, "").output_shape, "[1, 8, 11]")
  T.eq(row(s, "transformer.h.1.attn.c_attn").output_shape, "[1, 8, 48]")
  T.eq(row(s, "transformer.h.1").depth, 3)
  T.eq(row(s, "transformer.h").output_shape, "--", "a ModuleList is never called")
  local x = ms.ones(1, 8, { dtype = ms.int64 })
  T.eq(ms.summary(model, x).total_params, s.total_params, "a tensor as the input")
end)

T.test("mistakes are named, at the caller's line", function()
  local err = T.raises(function() ms.summary(Net(), { 1, 0, 28 }) end, "summary: input shape[2] must be a positive integer, got 0")
  T.truthy(err:find("test_summary.lua:%d+:"), err)
  T.raises(function() ms.summary({}, { 1 }) end, "summary: argument 1 (model) must be an nn.Module, got table")
  T.raises(function() ms.summary(Net(), "1x28") end, "summary: argument 2 (input) must be a tensor or an input shape")
  T.raises(function() ms.summary(Net(), { 1, 1, 28, 28 }, { dtpye = 1 }) end, "summary: unknown option 'dtpye' (expected one of: device, dtype)")
  -- a forward that fails is the forward's own error
  T.raises(function() ms.summary(nn.Linear(3, 2), { 1, 4 }) end, "linear")
end)

T.finish()
