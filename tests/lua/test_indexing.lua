-- test_indexing.lua: t[i] reads and writes (views of the first dim), chains, #t, shape
-- queries, tolist/item, printing, and the to-be-closed life cycle of a tensor.
local T = require "testing"
local ms = require "moonshard"

local function m23() return ms.tensor { { 1, 2, 3 }, { 4, 5, 6 } } end

T.test("t[i] selects along the first dim, negative from the end", function()
  local x = m23()
  T.same(x[1]:tolist(), { 1, 2, 3 })
  T.same(x[2]:tolist(), { 4, 5, 6 })
  T.same(x[-1]:tolist(), { 4, 5, 6 })
  T.same(x[-2]:tolist(), { 1, 2, 3 })
  local e = x[2][3]
  T.eq(e:dim(), 0)
  T.eq(e:item(), 6)
  T.eq(x[-1][-3]:item(), 4)
  T.eq(x[1][2]:item(), 2)
  local v = ms.arange(5)
  T.eq(v[5]:item(), 4)
  T.eq(v[-5]:item(), 0)
end)

T.test("t[i] is a view", function()
  local x = m23()
  local row = x[2]
  row[1] = 40
  T.same(x:tolist(), { { 1, 2, 3 }, { 40, 5, 6 } })
  x[2][2] = 50
  T.same(row:tolist(), { 40, 50, 6 })
  local col = x:t()[3]
  col[1] = 30
  T.eq(x:tolist()[1][3], 30)
  T.same(x[1]:stride(), { 1 })
  T.eq(x[2]:storage_offset(), 3)
end)

T.test("t[i] = number", function()
  local x = ms.zeros(2, 3)
  x[1] = 7
  T.same(x:tolist(), { { 7, 7, 7 }, { 0, 0, 0 } })
  x[-1] = 2.5
  T.same(x:tolist(), { { 7, 7, 7 }, { 2.5, 2.5, 2.5 } })
  x[1][2] = -1
  T.same(x:tolist(), { { 7, -1, 7 }, { 2.5, 2.5, 2.5 } })
  local v = ms.zeros(3, { dtype = "int64" })
  v[2] = 9
  T.same(v:tolist(), { 0, 9, 0 })
  local b = ms.zeros(2, { dtype = "bool" })
  b[1] = true
  T.same(b:tolist(), { true, false })
  local f = ms.zeros(2)
  f[2] = true
  T.same(f:tolist(), { 0, 1 })
end)

T.test("t[i] = tensor (broadcast, dtype converted)", function()
  local x = ms.zeros(2, 3)
  x[1] = ms.tensor { 1, 2, 3 }
  T.same(x:tolist(), { { 1, 2, 3 }, { 0, 0, 0 } })
  x[2] = ms.tensor(5)
  T.same(x[2]:tolist(), { 5, 5, 5 })
  x[2] = ms.tensor { 8 }
  T.same(x[2]:tolist(), { 8, 8, 8 })
  local y = ms.zeros(2, 2, 2)
  y[1] = ms.tensor { 1, 2 } -- broadcast over rows
  T.same(y[1]:tolist(), { { 1, 2 }, { 1, 2 } })
  y[2] = ms.tensor { { 1.5 }, { 2.5 } }
  T.same(y[2]:tolist(), { { 1.5, 1.5 }, { 2.5, 2.5 } })
  -- overlapping source: a view of the tensor itself
  local z = ms.arange(6):view(2, 3)
  z[2] = z[1]
  T.same(z:tolist(), { { 0, 1, 2 }, { 0, 1, 2 } })
  local w = ms.arange(4):float()
  w[1] = w:narrow(1, 2, 1)
  T.same(w:tolist(), { 1, 1, 2, 3 })
  T.raises(function() x[1] = ms.tensor { 1, 2 } end, "copy_", "(2,)", "(3,)")
end)

T.test("t[i] errors", function()
  local x = m23()
  T.raises(function() return x[0] end, "index", "1..2", "got 0")
  T.raises(function() return x[3] end, "index", "1..2", "got 3")
  T.raises(function() return x[-3] end, "index", "-2..-1", "got -3")
  T.raises(function() return x[1.5] end, "index", "an integer", "1.5")
  T.raises(function() return x[1][4] end, "index", "1..3", "got 4")
  T.raises(function() return ms.tensor(3)[1] end, "index", "0-dim", "item")
  T.raises(function() return ms.zeros(0, 2)[1] end, "index", "empty")
  T.raises(function() x[3] = 1 end, "newindex", "index", "got 3")
  T.raises(function() x[0] = 1 end, "newindex", "index", "got 0")
  T.raises(function() x[1] = "a" end, "newindex", "value", "string 'a'")
  T.raises(function() x[1] = { 1, 2, 3 } end, "newindex", "value", "table")
  T.raises(function() x.foo = 1 end, "newindex", "foo")
  T.raises(function() ms.tensor(3)[1] = 1 end, "newindex", "0-dim")
  T.raises(function() return x.nonexistent end, "Tensor has no field 'nonexistent'")
  T.raises(function() return x.szie end, "Tensor has no field 'szie' (did you mean 'size'?)")
  T.raises(function() return x[{1, 2}] end, "index: a tensor is indexed by an integer", "got table")
end)

T.test("#t, shape, size, dim, numel, ndim", function()
  local x = ms.zeros(2, 3, 4)
  T.eq(#x, 2)
  T.eq(#x[1], 3)
  T.same(x.shape, { 2, 3, 4 })
  T.same(x:size(), { 2, 3, 4 })
  T.eq(x:size(1), 2)
  T.eq(x:size(3), 4)
  T.eq(x:size(-1), 4)
  T.eq(x:size(-3), 2)
  T.eq(x:dim(), 3)
  T.eq(x.ndim, 3)
  T.eq(x:numel(), 24)
  T.eq(x.shape[2], 3)
  T.eq(#x.shape, 3)
  T.eq(tostring(ms.zeros(2, 3).shape), "torch.Size([2, 3])")
  T.eq(tostring(ms.zeros(5):size()), "torch.Size([5])")
  T.eq(tostring(ms.tensor(1).shape), "torch.Size([])")
  T.truthy(ms.zeros(2, 3).shape == ms.ones(2, 3):size())
  T.truthy(ms.zeros(2, 3).shape ~= ms.ones(3, 2):size())
  T.eq(ms.zeros(0, 5):numel(), 0)
  T.eq(#ms.zeros(0, 5), 0)
  local s = ms.tensor(4)
  T.eq(s:dim(), 0)
  T.eq(s.ndim, 0)
  T.eq(s:numel(), 1)
  T.same(s:size(), {})
  T.raises(function() return #s end, "len", "0-dim")
  T.raises(function() return x:size(4) end, "size", "dim", "got 4")
  T.raises(function() return x:size(0) end, "size", "dim", "got 0")
  T.raises(function() return x:size(-4) end, "size", "dim", "got -4")
  T.raises(function() return x:size("a") end, "size", "dim", "string 'a'")
end)

T.test("other fields", function()
  local x = ms.zeros(2)
  T.eq(x.device, "cpu")
  T.eq(x.requires_grad, false)
  T.eq(x.grad, nil)
  x.requires_grad = true
  T.eq(x.requires_grad, true)
  x.requires_grad = false
  T.eq(x.requires_grad, false)
  T.eq(x:is_floating_point(), true)
  T.eq(ms.tensor { 1 }:is_floating_point(), false)
  T.eq(x:element_size(), 4)
  T.truthy(ms.is_tensor(x))
  T.eq(ms.is_tensor({}), false)
  T.raises(function() ms.tensor { 1 }.requires_grad = true end, "requires_grad", "floating point", "int64")
  T.raises(function() x.requires_grad = 1 end, "boolean")
  T.raises(function() x.grad = ms.zeros(3) end, "grad", "(3,)", "(2,)")
  x.grad = ms.ones(2)
  T.same(x.grad:tolist(), { 1, 1 })
  x.grad = nil
  T.eq(x.grad, nil)
end)

T.test("tolist and item", function()
  T.same(ms.zeros(2, 0):tolist(), { {}, {} })
  T.eq(ms.tensor(2.5):tolist(), 2.5)
  T.eq(ms.tensor(3):item(), 3)
  T.eq(math.type(ms.tensor(3):item()), "integer")
  T.eq(math.type(ms.tensor(3.0):item()), "float")
  T.eq(ms.tensor { 9 }:item(), 9)
  T.eq(ms.tensor { { { 1.5 } } }:item(), 1.5)
  T.eq(ms.tensor { true }:item(), true)
  T.eq(ms.tensor({ 7 }, { dtype = "uint8" }):item(), 7)
  local t = ms.arange(6):view(2, 3):t()
  T.same(t:tolist(), { { 0, 3 }, { 1, 4 }, { 2, 5 } })
  T.same(ms.tensor { 5 }:expand(2, 2):tolist(), { { 5, 5 }, { 5, 5 } })
  T.raises(function() ms.tensor { 1, 2, 3 }:item() end, "item", "one-element", "(3,)")
  T.raises(function() ms.zeros(2, 2):item() end, "item", "(2, 2)")
  T.raises(function() ms.zeros(0):item() end, "item", "(0,)")
end)

T.test("tostring and print", function()
  T.eq(tostring(ms.tensor { { 1, 2 }, { 3, 4 } }), "tensor([[1, 2],\n        [3, 4]])")
  T.eq(tostring(ms.tensor { 1.5, 2 }), "tensor([1.5000, 2.0000])")
  T.eq(tostring(ms.tensor(3)), "tensor(3)")
  T.eq(tostring(ms.tensor { true, false }), "tensor([ True, False])")
  T.eq(tostring(ms.tensor({ 1, 2 }, { dtype = "float64" })), "tensor([1., 2.], dtype=torch.float64)")
  T.eq(tostring(ms.zeros(0)), "tensor([])")
  T.eq(tostring(ms.zeros(2, { requires_grad = true })), "tensor([0., 0.], requires_grad=True)")
  T.eq(tostring(ms.arange(6):view(2, 3):t()), "tensor([[0, 3],\n        [1, 4],\n        [2, 5]])")
  local printed = {}
  local old = print
  print = function(...) printed[#printed + 1] = table.concat({ tostring(...) }, "\t") end -- luacheck: ignore
  print(ms.tensor { 1, 2 })
  print = old -- luacheck: ignore
  T.eq(printed[1], "tensor([1, 2])")
end)

T.test("to-be-closed tensors", function()
  local u
  do
    local t <close> = ms.zeros(3)
    u = t
    T.eq(u:sum():item(), 0)
  end
  T.raises(function() return u:sum() end, "sum", "closed")
  T.raises(function() return u:view(3) end, "view", "closed")
  T.raises(function() return u.shape end, "closed")
  T.raises(function() return u[1] end, "closed")
  T.raises(function() u[1] = 1 end, "closed")
  T.raises(function() return #u end, "closed")
  T.raises(function() return u + 1 end, "add", "closed tensor")
  T.raises(function() return ms.cat { u } end, "cat", "closed tensor")
  T.raises(function() return ms.zeros_like(u) end, "zeros_like", "closed")
  T.eq(tostring(u), "tensor(<closed>)")
  -- closing twice and then collecting are both harmless
  local mt = getmetatable(u)
  mt.__close(u)
  mt.__gc(u)
  u = nil
  collectgarbage()
  collectgarbage()
end)

T.test("closing a view keeps the base alive, and the reverse", function()
  local base = ms.arange(4)
  local v
  do
    local view <close> = base:view(2, 2)
    v = view[2]
  end
  T.same(v:tolist(), { 2, 3 })
  local w = ms.arange(4):view(2, 2)[1]
  collectgarbage()
  T.same(w:tolist(), { 0, 1 })
  do local b <close> = base end
  collectgarbage()
  T.same(v:tolist(), { 2, 3 })
end)

T.test("many temporaries are collected without collectgarbage()", function()
  local before = ms.memory_stats().current
  for _ = 1, 300 do
    local _ = ms.zeros(1024, 1024) -- 4 MiB each, 1.2 GiB in all if never freed
  end
  T.truthy(ms.memory_stats().current - before < 512 * 1024 * 1024, "memory stays bounded")
end)

T.test("size and stride of a 0-dim tensor take no dim", function()
  local s = ms.tensor(3.5)
  T.eq(#s:size(), 0)
  T.eq(#s:stride(), 0)
  T.raises(function() return s:size(1) end, "size", "0-dim", "no dimensions")
  T.raises(function() return s:stride(-1) end, "stride", "0-dim")
end)

T.finish()
