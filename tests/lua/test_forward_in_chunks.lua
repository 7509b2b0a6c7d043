-- test_forward_in_chunks.lua: nn_utils.forward_in_chunks, the scripts' test-time forward: the
-- same values as one call on the seed's Net in evaluation, near-equal slices of at most
-- chunk_size samples in order, one plain call when the batch fits, and precise argument errors.
local T = require "testing"
local ms = require "moonshard"
local nn_utils = require "moonshard.nn_utils"
local Net = require "moonshard.seed_net"

T.test("the seed's Net in eval mode: the same output as one forward", function()
  ms.manual_seed(1)
  local model = Net()
  model:eval()
  local _ <close> = ms.no_grad()
  local x = ms.randn({150, 1, 28, 28})
  local whole = model(x)
  local chunked = nn_utils.forward_in_chunks(model, x, {chunk_size = 64})
  T.same(chunked.shape, {150, 10})
  T.truthy((chunked - whole):abs():max():item() <= 1e-5, "chunked vs whole")
end)

T.test("slices: near-equal, at most chunk_size, in order; one call when the batch fits", function()
  local sizes = {}
  local function model(x)
    sizes[#sizes + 1] = x:size(1)
    return x * 2
  end
  local x = ms.arange(10):float():view(10, 1)
  local out = nn_utils.forward_in_chunks(model, x, {chunk_size = 4})
  T.same(sizes, {3, 3, 4})
  T.same(out:view(-1):tolist(), {0, 2, 4, 6, 8, 10, 12, 14, 16, 18})
  sizes = {}
  nn_utils.forward_in_chunks(model, x, {chunk_size = 10})
  T.same(sizes, {10})
  sizes = {}
  nn_utils.forward_in_chunks(model, x, {chunk_size = 1})
  T.eq(#sizes, 10)
end)

T.test("bad arguments name the function, the argument and what came", function()
  local x = ms.zeros({4, 2})
  local id = function(t) return t end
  T.raises(function() nn_utils.forward_in_chunks(42, x, {chunk_size = 2}) end,
    "forward_in_chunks: bad argument #1 (model)", "got number")
  T.raises(function() nn_utils.forward_in_chunks(id, {1, 2}, {chunk_size = 2}) end,
    "bad argument #2 (input): expected a tensor, got table")
  T.raises(function() nn_utils.forward_in_chunks(id, ms.tensor(1.0), {chunk_size = 2}) end,
    "bad argument #2 (input)", "0-dim")
  T.raises(function() nn_utils.forward_in_chunks(id, x, {chunk_size = 0}) end,
    "bad argument #3 (opts.chunk_size): expected a positive integer, got 0")
  T.raises(function() nn_utils.forward_in_chunks(id, x, {chunk_size = 1.5}) end, "got 1.5")
  T.raises(function() nn_utils.forward_in_chunks(id, x) end, "got nil")
end)

T.finish()
