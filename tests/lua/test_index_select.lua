-- test_index_select.lua: gathering rows by 1-based positions, its gradient, and frombuffer.
local T = require "testing"
local ms = require "moonshard"

T.test("index_select gathers slices by 1-based positions", function()
  local x = ms.arange(12):view(4, 3)
  T.same(x:index_select(1, ms.tensor({4, 1, 4})):tolist(), {{9, 10, 11}, {0, 1, 2}, {9, 10, 11}})
  T.same(x:index_select(2, ms.tensor({3}, {dtype = "int32"})):tolist(), {{2}, {5}, {8}, {11}})
  T.same(x:t():index_select(-1, ms.tensor({2})):tolist(), {{3}, {4}, {5}})
  T.raises(function() x:index_select(1, ms.tensor({5})) end, "index_select", "1..4")
  T.raises(function() x:index_select(1, ms.tensor({0})) end, "index_select", "1..4")
  T.raises(function() x:index_select(1, ms.tensor({1.0})) end, "index_select", "int64")
  T.raises(function() x:index_select(3, ms.tensor({1})) end, "index_select", "dim")
end)

T.test("index_select passes gradients back to the rows it read", function()
  local x = ms.ones(3, 2, {dtype = "float64", requires_grad = true})
  local y = x:index_select(1, ms.tensor({3, 3, 1}))
  T.eq(y.grad_fn, "IndexSelectBackward0")
  y:backward(ms.arange(6, {dtype = "float64"}):view(3, 2))
  T.same(x.grad:tolist(), {{4.0, 5.0}, {0.0, 0.0}, {2.0, 4.0}})
end)

T.test("frombuffer copies bytes as little-endian elements", function()
  T.same(ms.frombuffer("\1\2\255"):tolist(), {1, 2, 255})
  T.same(ms.frombuffer(string.pack("<i4i4", 7, -3), {dtype = "int32"}):tolist(), {7, -3})
  T.same(ms.frombuffer(string.pack("<ff", 1.5, 2), {dtype = "float32", offset = 4}):tolist(), {2.0})
  T.same(ms.frombuffer("abcd", {count = 2}):tolist(), {97, 98})
  T.raises(function() ms.frombuffer("abc", {dtype = "int32"}) end, "frombuffer", "whole number")
  T.raises(function() ms.frombuffer("abc", {offset = 9}) end, "frombuffer", "offset")
  T.raises(function() ms.frombuffer("abc", {count = 9}) end, "frombuffer", "count")
  T.raises(function() ms.frombuffer({}) end, "string expected")
end)

T.finish()
