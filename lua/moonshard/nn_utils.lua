-- nn_utils.lua: torch.nn.utils' gradient clipping for moonshard: clip_grad_norm_ and
-- clip_grad_value_, with PyTorch 1.13's semantics (the norm over all gradients together, the
-- scale clamped at 1 so gradients never grow; the total norm returned as a 0-dim tensor); and
-- forward_in_chunks, a large evaluation batch through a model a few samples at a time.
--
--   local nn_utils = require "moonshard.nn_utils"
--   local total = nn_utils.clip_grad_norm_(model:parameters(), 1.0, {norm_type = 2})
--   local output = nn_utils.forward_in_chunks(model, data, {chunk_size = 64})
local ms = require "moonshard"
local options = require "moonshard.check_opts"

local M = {}

-- The gradients of `parameters` (a tensor, an array of tensors or an iterator) that exist.
local function grads_of(fname, parameters)
  if ms.is_tensor(parameters) then parameters = { parameters } end
  if type(parameters) == "function" then
    local list = {}
    for p in parameters do list[#list + 1] = p end
    parameters = list
  end
  if type(parameters) ~= "table" then
    error(("%s: parameters must be a tensor or a list of tensors, got %s"):format(fname, type(parameters)), 3)
  end
  local grads = {}
  for i, p in ipairs(parameters) do
    if not ms.is_tensor(p) then
      error(("%s: parameter %d is not a tensor"):format(fname, i), 3)
    end
    local g = p.grad
    if g ~= nil then grads[#grads + 1] = g end
  end
  return grads
end

local function norm_type_of(v)
  if v == nil then return 2.0 end
  if v == "inf" then return math.huge end
  if type(v) ~= "number" then error("clip_grad_norm_: norm_type must be a number or 'inf'", 3) end
  return v
end

-- The norm of all gradients as one vector: the norm of the per-gradient norms.
local function total_norm_of(grads, p)
  local acc = 0.0
  for _, g in ipairs(grads) do
    local n = (p == math.huge and g:abs():max() or ms.norm(g, p)):item()
    if p == math.huge then
      if n > acc or n ~= n then acc = n end
    else
      acc = acc + n ^ p
    end
  end
  if p == math.huge then return acc end
  return acc ^ (1 / p)
end

-- Scales the gradients in place so that their joint norm is at most max_norm; returns the norm
-- they had (0-dim tensor of the gradients' dtype). opts: norm_type (2; math.huge or 'inf' for
-- the max norm), error_if_nonfinite (false).
function M.clip_grad_norm_(parameters, max_norm, opts)
  opts = options.check("clip_grad_norm_", opts, { "norm_type", "error_if_nonfinite" }, 2)
  local grads = grads_of("clip_grad_norm_", parameters)
  if type(max_norm) ~= "number" then error("clip_grad_norm_: max_norm must be a number", 2) end
  local p = norm_type_of(opts.norm_type)
  if #grads == 0 then return ms.tensor(0.0) end
  local total = total_norm_of(grads, p)
  if opts.error_if_nonfinite and (total ~= total or total == math.huge) then
    error(("clip_grad_norm_: the total norm of order %s for gradients from `parameters` is "
      .. "non-finite, so it cannot be clipped"):format(tostring(p)), 2)
  end
  local coef = max_norm / (total + 1e-6)
  if coef > 1.0 then coef = 1.0 end
  -- PyTorch multiplies even by a coefficient of 1 (no branch on the device); so do we, for the
  -- same NaN behaviour
  for _, g in ipairs(grads) do g:mul_(coef) end
  return ms.tensor(total, { dtype = grads[1].dtype })
end

-- Clamps every gradient element into [-clip_value, clip_value] in place.
function M.clip_grad_value_(parameters, clip_value)
  if type(clip_value) ~= "number" then error("clip_grad_value_: clip_value must be a number", 2) end
  for _, g in ipairs(grads_of("clip_grad_value_", parameters)) do
    g:clamp_(-clip_value, clip_value)
  end
end

-- forward_in_chunks(model, input, {chunk_size = n}) -> model(input), computed on near-equal
-- slices of at most chunk_size samples along dim 1 and concatenated along it. For a model that
-- treats samples independently (evaluation: dropout off, batch norm on running statistics), the
-- same values as one call. Why: a large test batch (the seed's 1000) through a convnet needs
-- every layer's activations for all samples at once (~500 MB for the seed's Net), while a slice
-- the size of a training batch reuses the blocks the training step freed and stays in cache.
function M.forward_in_chunks(model, input, opts)
  if type(model) ~= "table" and type(model) ~= "function" and type(model) ~= "userdata" then
    error(("forward_in_chunks: bad argument #1 (model): expected a module or function, got %s")
      :format(type(model)), 2)
  end
  if not ms.is_tensor(input) then
    error(("forward_in_chunks: bad argument #2 (input): expected a tensor, got %s"):format(type(input)), 2)
  end
  if input:dim() == 0 then
    error("forward_in_chunks: bad argument #2 (input): expected a batch, got a 0-dim tensor", 2)
  end
  local size = options.check_given("forward_in_chunks", opts, { "chunk_size" }, 2).chunk_size
  if math.type(size) ~= "integer" or size < 1 then
    error(("forward_in_chunks: bad argument #3 (opts.chunk_size): expected a positive integer, got %s")
      :format(tostring(size)), 2)
  end
  local n = input:size(1)
  local k = (n + size - 1) // size
  if k <= 1 then return model(input) end
  local outs = {}
  for c = 1, k do
    local first, last = (n * (c - 1)) // k, (n * c) // k
    outs[c] = model(input:narrow(1, first + 1, last - first))
  end
  return ms.cat(outs, 1)
end

return M
