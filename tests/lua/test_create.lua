-- test_create.lua: tensor factories (ms.tensor, zeros/ones/empty/full, arange, linspace, eye,
-- the random factories, *_like) and dtype conversions, checked by value, shape and dtype.
local T = require "testing"
local ms = require "moonshard"

local function shape(t) return t:size() end
local function sz(...) return { ... } end

---------------------------------------------------------------------------------------------
-- ms.tensor

T.test("tensor: nested integers give int64", function()
  local t = ms.tensor { { 1, 2, 3 }, { 4, 5, 6 } }
  T.eq(t.dtype, "int64")
  T.same(shape(t), sz(2, 3))
  T.same(t:tolist(), { { 1, 2, 3 }, { 4, 5, 6 } })
  T.eq(math.type(t:tolist()[1][1]), "integer")
end)

T.test("tensor: floats give float32, bools give bool", function()
  local f = ms.tensor { 1.5, -2.25 }
  T.eq(f.dtype, "float32")
  T.same(f:tolist(), { 1.5, -2.25 })
  T.eq(math.type(f:tolist()[1]), "float")
  local b = ms.tensor { true, false, true }
  T.eq(b.dtype, "bool")
  T.same(b:tolist(), { true, false, true })
end)

T.test("tensor: mixed leaves promote as torch.tensor does", function()
  local a = ms.tensor { 1, 2.5 }
  T.eq(a.dtype, "float32")
  T.same(a:tolist(), { 1.0, 2.5 })
  local b = ms.tensor { true, 3 }
  T.eq(b.dtype, "int64")
  T.same(b:tolist(), { 1, 3 })
  local c = ms.tensor { { true, 1.5 }, { 2, false } }
  T.eq(c.dtype, "float32")
  T.same(c:tolist(), { { 1.0, 1.5 }, { 2.0, 0.0 } })
end)

T.test("tensor: dtype option", function()
  local t = ms.tensor({ 1, 2, 3 }, { dtype = ms.float64 })
  T.eq(t.dtype, "float64")
  T.same(t:tolist(), { 1.0, 2.0, 3.0 })
  T.eq(ms.tensor({ 1.7, -1.7 }, { dtype = "int32" }).dtype, "int32")
  T.same(ms.tensor({ 1.7, -1.7 }, { dtype = "int32" }):tolist(), { 1, -1 })
  T.same(ms.tensor({ 0, 2, 0.5 }, { dtype = "bool" }):tolist(), { false, true, true })
  T.eq(ms.tensor({ 1 }, { dtype = "torch.float16" }).dtype, "float16")
  local g = ms.tensor({ 1.0, 2.0 }, { requires_grad = true })
  T.eq(g.requires_grad, true)
  T.eq(ms.tensor({ 1.0 }).requires_grad, false)
end)

T.test("tensor: large int64 values stay exact", function()
  local big = 9007199254740993 -- 2^53 + 1: not a double
  local t = ms.tensor { big, -big, math.maxinteger, math.mininteger }
  T.eq(t.dtype, "int64")
  T.same(t:tolist(), { big, -big, math.maxinteger, math.mininteger })
end)

T.test("tensor: 0-dim from a number or boolean", function()
  local t = ms.tensor(3)
  T.eq(t:dim(), 0)
  T.eq(t.dtype, "int64")
  T.eq(t:item(), 3)
  T.same(shape(t), {})
  local f = ms.tensor(2.5)
  T.eq(f.dtype, "float32")
  T.eq(f:item(), 2.5)
  T.eq(f:tolist(), 2.5)
  local b = ms.tensor(true)
  T.eq(b.dtype, "bool")
  T.eq(b:item(), true)
  T.eq(ms.tensor(7, { dtype = "float64" }).dtype, "float64")
end)

T.test("tensor: empty tables", function()
  local t = ms.tensor {}
  T.eq(t.dtype, "float32")
  T.same(shape(t), { 0 })
  T.eq(t:numel(), 0)
  T.same(t:tolist(), {})
  local u = ms.tensor { {}, {} }
  T.same(shape(u), { 2, 0 })
end)

T.test("tensor: from a tensor copies", function()
  local a = ms.tensor { 1.0, 2.0, 3.0 }
  local b = ms.tensor(a)
  T.eq(b.dtype, "float32")
  T.same(b:tolist(), { 1.0, 2.0, 3.0 })
  b[1] = 10
  T.same(a:tolist(), { 1.0, 2.0, 3.0 })
  a[2] = 20
  T.same(b:tolist(), { 10.0, 2.0, 3.0 })
  local c = ms.tensor(a, { dtype = "int64" })
  T.eq(c.dtype, "int64")
  T.same(c:tolist(), { 1, 20, 3 })
  -- a non-contiguous source
  local m = ms.tensor { { 1, 2 }, { 3, 4 } }
  T.same(ms.tensor(m:t()):tolist(), { { 1, 3 }, { 2, 4 } })
end)

T.test("tensor: ragged table errors name the position", function()
  T.raises(function() ms.tensor { { 1, 2 }, { 3 } } end, "tensor", "data[2]", "length 2", "length 1")
  T.raises(function() ms.tensor { { 1, 2 }, 3 } end, "tensor", "data[2]", "length 2")
  T.raises(function() ms.tensor { { { 1 }, { 2 } }, { { 3 }, { 4, 5 } } } end, "tensor", "data[2][2]")
  T.raises(function() ms.tensor { 1, { 2 } } end, "tensor", "data[2]", "number or a boolean", "table")
end)

T.test("tensor: bad leaves and bad data", function()
  T.raises(function() ms.tensor { 1, "x" } end, "tensor", "data[2]", "string 'x'")
  T.raises(function() ms.tensor { { 1 }, { print } } end, "tensor", "data[2][1]", "function")
  T.raises(function() ms.tensor("abc") end, "tensor", "#1", "data", "string 'abc'")
  T.raises(function() ms.tensor() end, "tensor", "#1", "no value")
  T.raises(function() ms.tensor(nil) end, "tensor", "#1", "nil")
  T.raises(function() ms.tensor({ 1 }, { dtype = "float8" }) end, "tensor", "dtype", "float8")
  T.raises(function() ms.tensor({ 1 }, { dtyp = "float32" }) end, "tensor", "unknown option", "dtyp")
end)

T.test("tensor: requires_grad on integers errors without corrupting memory", function()
  for _ = 1, 3 do
    T.raises(function() ms.tensor({ 1, 2 }, { requires_grad = true }) end,
      "tensor", "floating point", "int64")
    collectgarbage()
  end
  T.raises(function() ms.tensor(ms.tensor { 1, 2 }, { requires_grad = true }) end, "tensor", "int64")
  collectgarbage()
end)

---------------------------------------------------------------------------------------------
-- zeros / ones / empty / full

T.test("zeros/ones: varargs and table sizes", function()
  local z = ms.zeros(2, 3)
  T.eq(z.dtype, "float32")
  T.same(shape(z), { 2, 3 })
  T.same(z:tolist(), { { 0, 0, 0 }, { 0, 0, 0 } })
  local o = ms.ones { 3, 1 }
  T.same(shape(o), { 3, 1 })
  T.same(o:tolist(), { { 1 }, { 1 }, { 1 } })
  T.same(shape(ms.ones(ms.zeros(4, 5).shape)), { 4, 5 })
  T.same(shape(ms.empty(2, 2, 2)), { 2, 2, 2 })
  T.same(shape(ms.empty { 5 }), { 5 })
end)

T.test("zeros/ones: 0-dim and zero-sized dims", function()
  local s = ms.zeros {}
  T.eq(s:dim(), 0)
  T.eq(s:numel(), 1)
  T.eq(s:item(), 0.0)
  local o = ms.ones()
  T.eq(o:dim(), 0)
  T.eq(o:item(), 1.0)
  local e = ms.zeros(0, 3)
  T.same(shape(e), { 0, 3 })
  T.eq(e:numel(), 0)
  T.same(e:tolist(), {})
  local e2 = ms.ones(3, 0)
  T.same(e2:tolist(), { {}, {}, {} })
  T.same(e2:stride(), { 1, 1 })
end)

T.test("zeros/ones: options", function()
  local z = ms.zeros(2, { dtype = ms.int64 })
  T.eq(z.dtype, "int64")
  T.same(z:tolist(), { 0, 0 })
  local o = ms.ones({ 2 }, { dtype = "bool" })
  T.same(o:tolist(), { true, true })
  local g = ms.zeros(2, 2, { requires_grad = true })
  T.eq(g.requires_grad, true)
  local c = ms.ones(1, { device = "cpu" })
  T.eq(c.device, "cpu")
  T.raises(function() ms.zeros(2, { device = "cuda" }) end, "zeros", "device", "cuda")
  T.raises(function() ms.zeros(2, { dtype = "float32", shape = 3 }) end,
    "zeros", "unknown option 'shape'", "dtype")
  T.raises(function() ms.ones(2, { requires_grad = 1 }) end, "ones", "requires_grad", "a boolean")
  T.raises(function() ms.zeros(2, { requires_grad = true, dtype = "int32" }) end,
    "zeros", "floating point", "int32")
end)

T.test("full: fill value and dtype inference", function()
  local a = ms.full({ 2 }, 7)
  T.eq(a.dtype, "int64")
  T.same(a:tolist(), { 7, 7 })
  local b = ms.full({ 2 }, 7.5)
  T.eq(b.dtype, "float32")
  T.same(b:tolist(), { 7.5, 7.5 })
  local c = ms.full({ 2 }, true)
  T.eq(c.dtype, "bool")
  T.same(c:tolist(), { true, true })
  local d = ms.full(2, 3, -1.25)
  T.same(shape(d), { 2, 3 })
  T.same(d:tolist(), { { -1.25, -1.25, -1.25 }, { -1.25, -1.25, -1.25 } })
  local e = ms.full({ 2, 2 }, 3, { dtype = "float64" })
  T.eq(e.dtype, "float64")
  T.same(e:tolist(), { { 3.0, 3.0 }, { 3.0, 3.0 } })
  local f = ms.full({}, 4)
  T.eq(f:dim(), 0)
  T.eq(f:item(), 4)
  local g = ms.full(2, 2, { dtype = "float32" })
  T.same(g:tolist(), { 2.0, 2.0 })
  T.raises(function() ms.full({ 2 }, "x") end, "full", "fill_value", "string 'x'")
  T.raises(function() ms.full({ 2 }) end, "full", "fill_value")
  T.raises(function() ms.full(7) end, "full", "size", "sizes and a fill value", "7")
  T.raises(function() ms.full() end, "full", "size", "no value")
end)

---------------------------------------------------------------------------------------------
-- arange / linspace / eye

T.test("arange: one, two and three arguments", function()
  local a = ms.arange(5)
  T.eq(a.dtype, "int64")
  T.same(a:tolist(), { 0, 1, 2, 3, 4 })
  T.same(ms.arange(2, 5):tolist(), { 2, 3, 4 })
  T.same(ms.arange(1, 10, 3):tolist(), { 1, 4, 7 })
  T.same(ms.arange(5, 0, -2):tolist(), { 5, 3, 1 })
  T.same(ms.arange(0):tolist(), {})
  T.same(ms.arange(3, 3):tolist(), {})
end)

T.test("arange: float steps and dtype inference", function()
  local a = ms.arange(0, 1, 0.25)
  T.eq(a.dtype, "float32")
  T.same(a:tolist(), { 0, 0.25, 0.5, 0.75 })
  local b = ms.arange(1.0, 4)
  T.eq(b.dtype, "float32")
  T.same(b:tolist(), { 1, 2, 3 })
  T.eq(ms.arange(0, 1, 0.1):numel(), 10)
  T.same(ms.arange(0.5, -1, -0.5):tolist(), { 0.5, 0, -0.5 })
  local c = ms.arange(4, { dtype = "float64" })
  T.eq(c.dtype, "float64")
  T.same(c:tolist(), { 0.0, 1.0, 2.0, 3.0 })
  T.eq(ms.arange(3, { requires_grad = true, dtype = "float32" }).requires_grad, true)
end)

T.test("arange: errors", function()
  T.raises(function() ms.arange(0, 5, 0) end, "arange", "step")
  T.raises(function() ms.arange(5, 0) end, "arange", "step")
  T.raises(function() ms.arange(0, 5, -1) end, "arange", "step")
  T.raises(function() ms.arange("5") end, "arange", "#1", "string '5'")
  T.raises(function() ms.arange() end, "arange", "#1", "a number")
  T.raises(function() ms.arange(0, math.huge) end, "arange", "finite")
  T.raises(function() ms.arange(3, { requires_grad = true }) end, "arange", "floating point", "int64")
end)

T.test("linspace", function()
  local t = ms.linspace(0, 1, 5)
  T.eq(t.dtype, "float32")
  T.same(t:tolist(), { 0, 0.25, 0.5, 0.75, 1 })
  local u = ms.linspace(-1, 1, 3, { dtype = "float64" })
  T.eq(u.dtype, "float64")
  T.same(u:tolist(), { -1, 0, 1 })
  local v = ms.linspace(0.1, 0.7, 7, { dtype = "float64" })
  T.eq(v:tolist()[1], 0.1)
  T.eq(v:tolist()[7], 0.7)
  T.same(ms.linspace(2, 3, 0):tolist(), {})
  T.same(ms.linspace(2, 3, 1):tolist(), { 2 })
  T.same(ms.linspace(3, 1, 2):tolist(), { 3, 1 })
  T.raises(function() ms.linspace(0, 1, -1) end, "linspace", "steps", "-1")
  T.raises(function() ms.linspace(0, 1, 2.5) end, "linspace", "steps")
  T.raises(function() ms.linspace(0, 1) end, "linspace", "steps")
  T.raises(function() ms.linspace("a", 1, 2) end, "linspace")
end)

T.test("eye", function()
  local e = ms.eye(3)
  T.eq(e.dtype, "float32")
  T.same(e:tolist(), { { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 } })
  T.same(ms.eye(2, 3):tolist(), { { 1, 0, 0 }, { 0, 1, 0 } })
  T.same(ms.eye(3, 2):tolist(), { { 1, 0 }, { 0, 1 }, { 0, 0 } })
  T.same(shape(ms.eye(0)), { 0, 0 })
  T.same(shape(ms.eye(2, 0)), { 2, 0 })
  local i = ms.eye(2, { dtype = "int64" })
  T.eq(i.dtype, "int64")
  T.same(i:tolist(), { { 1, 0 }, { 0, 1 } })
  T.raises(function() ms.eye(-1) end, "eye", "non-negative")
  T.raises(function() ms.eye(2, -3) end, "eye", "non-negative", "-3")
  T.raises(function() ms.eye("2") end, "eye", "n", "string '2'")
end)

---------------------------------------------------------------------------------------------
-- random factories

T.test("rand/randn: shape, range, reproducibility", function()
  ms.manual_seed(1234)
  local a = ms.rand(100)
  T.eq(a.dtype, "float32")
  T.same(shape(a), { 100 })
  for _, v in ipairs(a:tolist()) do T.truthy(v >= 0 and v < 1) end
  local n = ms.randn(2, 50)
  T.same(shape(n), { 2, 50 })
  ms.manual_seed(1234)
  T.same(ms.rand(100):tolist(), a:tolist())
  T.same(ms.randn(2, 50):tolist(), n:tolist())
  local b = ms.rand(100)
  T.truthy(not pcall(T.same, b:tolist(), a:tolist()), "a second draw differs")
  T.eq(ms.rand({ 3 }, { dtype = "float64" }).dtype, "float64")
  T.eq(ms.randn(3, { requires_grad = true }).requires_grad, true)
  T.eq(ms.rand({}):dim(), 0)
  local big = ms.randn(10000, { dtype = "float64" })
  T.near(big:mean():item(), 0, 0.05)
  T.raises(function() ms.rand(2, { dtype = "int64" }) end, "rand", "floating point", "int64")
  T.raises(function() ms.randn(2, { dtype = "bool" }) end, "randn", "floating point", "bool")
end)

T.test("randint: both forms", function()
  ms.manual_seed(7)
  local a = ms.randint(10, { 200 })
  T.eq(a.dtype, "int64")
  T.same(shape(a), { 200 })
  local seen = {}
  for _, v in ipairs(a:tolist()) do
    T.truthy(v >= 0 and v < 10)
    seen[v] = true
  end
  for v = 0, 9 do T.truthy(seen[v], "value " .. v .. " drawn") end
  local b = ms.randint(-3, 3, { 4, 50 })
  T.same(shape(b), { 4, 50 })
  for _, row in ipairs(b:tolist()) do
    for _, v in ipairs(row) do T.truthy(v >= -3 and v < 3) end
  end
  T.eq(ms.randint(0, 5, { 3 }, { dtype = "float32" }).dtype, "float32")
  ms.manual_seed(7)
  T.same(ms.randint(10, { 200 }):tolist(), a:tolist())
  T.raises(function() ms.randint(5, 5, { 2 }) end, "randint", "low")
  T.raises(function() ms.randint(5, 3) end, "randint", "size")
  T.raises(function() ms.randint(5, { 2 }, { requires_grad = true }) end, "randint", "floating point")
end)

T.test("randperm is a permutation", function()
  ms.manual_seed(3)
  local p = ms.randperm(50)
  T.eq(p.dtype, "int64")
  local l = p:tolist()
  T.eq(#l, 50)
  local sorted = { table.unpack(l) }
  table.sort(sorted)
  for i = 1, 50 do T.eq(sorted[i], i) end -- 1..n: Lua positions (torch's 0..n-1, plus one)
  T.same(ms.randperm(0):tolist(), {})
  T.eq(ms.randperm(4, { dtype = "float32" }).dtype, "float32")
  T.eq(ms.randperm(255, { dtype = "uint8" }):max():item(), 255)
  T.raises(function() ms.randperm(256, { dtype = "uint8" }) end, "randperm: n (256) is too large for dtype uint8")
  local x = ms.arange(1, 6)
  T.same(x:index_select(1, ms.randperm(5, { seed = 7 })):tolist(), ms.randperm(5, { seed = 7 }):tolist(),
    0, "a permutation indexes directly")
  T.raises(function() ms.randperm(-1) end, "randperm", "non-negative")
end)

T.test("bernoulli: tensor p and scalar p", function()
  ms.manual_seed(11)
  local p = ms.tensor { 0.0, 1.0, 0.0, 1.0 }
  local b = ms.bernoulli(p)
  T.eq(b.dtype, "float32")
  T.same(b:tolist(), { 0, 1, 0, 1 })
  T.same(p:bernoulli():tolist(), { 0, 1, 0, 1 })
  local s = ms.bernoulli(ms.zeros(1000), 0.5)
  T.same(shape(s), { 1000 })
  local ones = s:sum():item()
  T.truthy(ones > 400 and ones < 600, "about half are ones")
  T.same(ms.bernoulli(ms.zeros(5), 1.0):tolist(), { 1, 1, 1, 1, 1 })
  T.same(ms.bernoulli(ms.ones(3), 0):tolist(), { 0, 0, 0 })
  T.raises(function() ms.bernoulli(ms.tensor { 0.5, 1.5 }) end, "bernoulli", "[0, 1]", "1.5")
  T.raises(function() ms.bernoulli(ms.tensor { 1, 0 }) end, "bernoulli", "int64")
  T.raises(function() ms.bernoulli(ms.zeros(2), 2) end, "bernoulli", "[0, 1]")
  T.raises(function() ms.bernoulli(0.5) end, "bernoulli", "#1", "tensor")
  T.raises(function() ms.bernoulli(ms.zeros(2), "0.5") end, "bernoulli", "#2", "p", "string '0.5'")
end)

---------------------------------------------------------------------------------------------
-- *_like

T.test("*_like factories keep shape and dtype", function()
  local x = ms.zeros(2, 3, { dtype = "float64" })
  for _, name in ipairs { "zeros_like", "ones_like", "empty_like", "rand_like", "randn_like" } do
    local y = ms[name](x)
    T.same(shape(y), { 2, 3 }, 0, name)
    T.eq(y.dtype, "float64", name)
  end
  T.same(ms.zeros_like(x):tolist(), { { 0, 0, 0 }, { 0, 0, 0 } })
  T.same(ms.ones_like(x):tolist(), { { 1, 1, 1 }, { 1, 1, 1 } })
  local f = ms.full_like(x, 2.5)
  T.eq(f.dtype, "float64")
  T.same(f:tolist(), { { 2.5, 2.5, 2.5 }, { 2.5, 2.5, 2.5 } })
  local fi = ms.full_like(x, 3, { dtype = "int32" })
  T.eq(fi.dtype, "int32")
  T.same(fi:tolist(), { { 3, 3, 3 }, { 3, 3, 3 } })
  local r = ms.rand_like(x)
  for _, row in ipairs(r:tolist()) do for _, v in ipairs(row) do T.truthy(v >= 0 and v < 1) end end
  local i = ms.randint_like(x, 5)
  T.eq(i.dtype, "float64")
  for _, row in ipairs(i:tolist()) do for _, v in ipairs(row) do T.truthy(v >= 0 and v < 5 and v == math.floor(v)) end end
  local j = ms.randint_like(ms.zeros(100, { dtype = "int64" }), 10, 12)
  T.eq(j.dtype, "int64")
  for _, v in ipairs(j:tolist()) do T.truthy(v == 10 or v == 11) end
  local z = ms.zeros_like(ms.tensor { 1, 2 }, { dtype = "float32" })
  T.eq(z.dtype, "float32")
  local g = ms.ones_like(x, { requires_grad = true })
  T.eq(g.requires_grad, true)
  local s = ms.zeros_like(ms.tensor(5))
  T.eq(s:dim(), 0)
  T.raises(function() ms.zeros_like({ 1, 2 }) end, "zeros_like", "#1", "a tensor", "table")
  T.raises(function() ms.full_like(x, "a") end, "full_like", "fill_value", "string 'a'")
  T.raises(function() ms.ones_like(x, { dtype = "complex64" }) end, "ones_like", "dtype", "complex64")
  T.raises(function() ms.rand_like(ms.tensor { 1 }) end, "rand_like", "int64")
  T.eq(ms.randint_like(x, 5, { requires_grad = true }).requires_grad, true)
  T.raises(function() ms.randint_like(ms.tensor { 1 }, 5, { requires_grad = true }) end,
    "randint_like", "floating point", "int64")
  T.raises(function() ms.randn_like(ms.tensor { 1 }) end, "randn_like", "floating point", "int64")
end)

T.test("*_like of a non-contiguous tensor is contiguous", function()
  local x = ms.zeros(2, 3):t()
  local y = ms.ones_like(x)
  T.same(shape(y), { 3, 2 })
  T.eq(y:is_contiguous(), true)
end)

---------------------------------------------------------------------------------------------
-- dtypes: round trips and conversions

T.test("dtype round trips: float64, int32, bool", function()
  local d = ms.tensor({ 0.1, 1e300, -2.5 }, { dtype = "float64" })
  T.same(d:tolist(), { 0.1, 1e300, -2.5 })
  T.eq(d:element_size(), 8)
  local i = ms.tensor({ 2147483647, -2147483648, 5 }, { dtype = "int32" })
  T.same(i:tolist(), { 2147483647, -2147483648, 5 })
  T.eq(i:element_size(), 4)
  T.same(ms.tensor({ 2147483648 }):int():tolist(), { -2147483648 })
  local b = ms.tensor { 1.5, 0, -0.0, -3 }:bool()
  T.same(b:tolist(), { true, false, false, true })
  T.same(b:long():tolist(), { 1, 0, 0, 1 })
  T.same(b:float():tolist(), { 1, 0, 0, 1 })
end)

T.test("dtype: float32 rounds from float64", function()
  local f = ms.tensor { 0.1 }
  T.eq(f:tolist()[1], string.unpack("f", string.pack("f", 0.1)))
  T.eq(ms.tensor({ 16777217 }, { dtype = "float32" }):tolist()[1], 16777216.0)
end)

T.test("dtype: bfloat16 rounds to nearest even", function()
  local t = ms.tensor({ 1.00390625, 1.01171875, 3.14159, -2.0, 0.0, 65536.0, 1e-3 }, { dtype = "bfloat16" })
  T.eq(t.dtype, "bfloat16")
  T.eq(t:element_size(), 2)
  local l = t:tolist()
  T.eq(l[1], 1.0)              -- exactly halfway, 1.0 is even
  T.eq(l[2], 1.015625)         -- halfway, rounds up to the even mantissa
  T.eq(l[3], 3.140625)
  T.eq(l[4], -2.0)
  T.eq(l[5], 0.0)
  T.eq(l[6], 65536.0)
  T.eq(l[7], 0.00099945068359375)
  T.same(ms.tensor({ 1.00390625 }):bfloat16():float():tolist(), { 1.0 })
  local inf = ms.tensor({ 1e39 }, { dtype = "float64" }):bfloat16():tolist()[1]
  T.eq(inf, math.huge)
  local nan = ms.tensor({ 0 / 0 }, { dtype = "float64" }):bfloat16():tolist()[1]
  T.truthy(nan ~= nan)
end)

T.test("dtype: float16 rounds and overflows as IEEE half", function()
  local t = ms.tensor({ 1 + 2 ^ -11, 1 + 3 * 2 ^ -11, 65504, 70000, 2 ^ -24, 0.1, -1.5 },
    { dtype = "float16" })
  T.eq(t.dtype, "float16")
  local l = t:tolist()
  T.eq(l[1], 1.0)
  T.eq(l[2], 1 + 2 ^ -9)
  T.eq(l[3], 65504.0)
  T.eq(l[4], math.huge)
  T.eq(l[5], 2 ^ -24)
  T.eq(l[6], 0.0999755859375)
  T.eq(l[7], -1.5)
  T.same(ms.tensor({ 0.1 }):half():double():tolist(), { 0.0999755859375 })
end)

T.test("dtype: uint8 wraps", function()
  local t = ms.tensor { 300, -1, 255, 256 }
  local u = t:byte()
  T.eq(u.dtype, "uint8")
  T.same(u:tolist(), { 44, 255, 255, 0 })
  T.same(ms.tensor({ 300 }, { dtype = "uint8" }):tolist(), { 44 })
  T.same(ms.tensor({ 3.7 }, { dtype = "uint8" }):tolist(), { 3 })
  T.eq(u:element_size(), 1)
end)

T.test("conversion methods", function()
  local x = ms.tensor { 1.5, -2.5, 3 }
  local cases = {
    { "float", "float32", { 1.5, -2.5, 3 } }, { "double", "float64", { 1.5, -2.5, 3 } },
    { "half", "float16", { 1.5, -2.5, 3 } }, { "bfloat16", "bfloat16", { 1.5, -2.5, 3 } },
    { "long", "int64", { 1, -2, 3 } }, { "int", "int32", { 1, -2, 3 } },
    { "bool", "bool", { true, true, true } }, { "byte", "uint8", { 1, 254, 3 } },
  }
  for _, c in ipairs(cases) do
    local y = x[c[1]](x)
    T.eq(y.dtype, c[2], c[1])
    T.same(y:tolist(), c[3], 0, c[1])
  end
  T.eq(ms.Tensor.long(x).dtype, "int64")
end)

T.test("to: dtype names, options, tensors, devices", function()
  local x = ms.tensor { 1, 2 }
  T.eq(x:to("float64").dtype, "float64")
  T.eq(x:to("double").dtype, "float64")
  T.eq(x:to(ms.float16).dtype, "float16")
  T.eq(x:to({ dtype = "float32" }).dtype, "float32")
  T.eq(x:to(ms.zeros(1, { dtype = "bfloat16" })).dtype, "bfloat16")
  T.eq(x:to({ device = "cpu" }).dtype, "int64")
  local c = x:to("cpu")
  T.eq(c.dtype, "int64")
  T.eq(c.device, "cpu")
  T.raises(function() x:to("cuda") end, "to", "cuda", "not available")
  T.raises(function() x:to("cuda:1") end, "to", "cuda:1")
  T.raises(function() x:to({ device = "cuda" }) end, "to", "cuda")
  T.raises(function() x:to("float128") end, "to", "float128", "dtype")
  T.raises(function() x:to(3) end, "to", "cuda:3", "not available") -- an index names a CUDA device, as in torch
  T.raises(function() x:to(true) end, "to", "#2", "a dtype name")
  T.raises(function() x:to({ dtyp = "float32" }) end, "to", "unknown option", "dtyp")
end)

T.test("to: same dtype returns the same storage, other dtype a copy", function()
  local x = ms.tensor { 1.0, 2.0 }
  local y = x:to("float32")
  y[1] = 5
  T.same(x:tolist(), { 5, 2 })
  local z = x:double()
  z[1] = 7
  T.same(x:tolist(), { 5, 2 })
end)

T.test("dtype constants", function()
  T.eq(ms.float32, "float32")
  T.eq(ms.float, "float32")
  T.eq(ms.double, "float64")
  T.eq(ms.half, "float16")
  T.eq(ms.long, "int64")
  T.eq(ms.int, "int32")
  T.eq(ms.int64, "int64")
  T.eq(ms.bfloat16 ~= nil, true)
  T.eq(ms.uint8, "uint8")
  T.eq(ms.bool ~= nil, true)
end)

T.finish()
