-- test_select_ops.lua: gather, scatter, scatter_add, sort, argsort, topk, cumsum, cumprod, any and
-- all: PyTorch 1.13's values (tests/lua/data/select_reference.lua, made by
-- gen_select_reference.py), gradients (gradcheck and grad_fn names), in-place forms, empty and
-- 0-dim tensors, and the errors for bad arguments.
local root = (arg and arg[0] or ""):match("^(.-)tests/lua/[^/]*$") or ""
package.path = root .. "tests/lua/?.lua;" .. package.path

local T = require "testing"
local ms = require "moonshard"
local gradcheck = require "gradcheck"
local cases = dofile(root .. "tests/lua/data/select_reference.lua")

-- |got - want| <= atol + rtol |want| by result dtype; the 16-bit formats may round a running
-- sum or product once more than PyTorch.
local TOL = {
  float64 = {1e-12, 1e-12}, float32 = {2e-6, 1e-6}, bfloat16 = {1.6e-2, 1e-2}, float16 = {2e-3, 1e-3},
}

local function build(s)
  if #s.shape == 0 then return ms.tensor(s.values[1], {dtype = s.dtype}) end
  return ms.tensor(s.values, {dtype = s.dtype}):view(s.shape)
end

local function lua_args(args)
  local out = {}
  for i, a in ipairs(args) do
    if type(a) == "table" and a.tensor then out[i] = build(a.tensor)
    elseif type(a) == "table" and a.opts then out[i] = a.opts
    else out[i] = a end
  end
  return out, #args
end

local function check(got, want, what)
  T.eq(got.dtype, want.dtype, what .. ": dtype")
  T.same(got:size(), want.shape, 0, what .. ": shape")
  local tol = TOL[want.dtype]
  local flat = got:reshape(-1):tolist()
  for i, w in ipairs(want.values) do
    local g = flat[i]
    local bad
    if tol then
      bad = not ((g ~= g and w ~= w) or math.abs(g - w) <= tol[2] + tol[1] * math.abs(w))
    else
      bad = g ~= w
    end
    if bad then error(("%s: element %d: expected %s, got %s"):format(what, i, tostring(w), tostring(g)), 0) end
  end
end

T.test("PyTorch's values for every case of the reference", function()
  local ops = {}
  for n, c in ipairs(cases) do
    local x = build(c.x)
    if c.t then x = x:t() end
    local args, nargs = lua_args(c.args)
    local what = ("case %d: %s (%s)"):format(n, c.op, c.note)
    local results = table.pack(pcall(x[c.op], x, table.unpack(args, 1, nargs)))
    if c.error then
      T.truthy(not results[1], what .. ": expected an error")
    else
      if not results[1] then error(what .. ": " .. tostring(results[2]), 0) end
      for k, want in ipairs(c.expected) do check(results[k + 1], want, ("%s, result %d"):format(what, k)) end
    end
    ops[c.op] = true
  end
  for _, op in ipairs({"gather", "scatter", "scatter_add", "sort", "argsort", "topk", "cumsum", "cumprod", "any", "all"}) do
    T.truthy(ops[op], op .. " has reference cases")
  end
end)

T.test("module functions are the methods, and in-place forms write their input", function()
  local x = ms.tensor({{1, 2, 3}, {4, 5, 6}})
  local i = ms.tensor({{3, 1}, {2, 2}})
  T.same(ms.gather(x, 2, i):tolist(), x:gather(2, i):tolist())
  local y = x:clone()
  T.eq(y:scatter_(2, i, 0), y)
  T.same(y:tolist(), {{0, 2, 0}, {4, 0, 6}})
  local z = ms.zeros(2, 3)
  z:scatter_add_(2, i, ms.ones(2, 2))
  T.same(z:tolist(), {{1, 0, 1}, {0, 2, 0}})
  local w = ms.zeros(3, 4):t() -- a non-contiguous target
  w:scatter_(1, ms.tensor({{4, 1, 2}}), 7)
  T.same(w:tolist(), {{0, 7, 0}, {0, 0, 7}, {0, 0, 0}, {7, 0, 0}})
  local v, k = ms.sort(ms.tensor({3, 1, 2}))
  T.same({v:tolist(), k:tolist()}, {{1, 2, 3}, {2, 3, 1}})
  T.same(ms.argsort(ms.tensor({3, 1, 2}), {descending = true}):tolist(), {1, 3, 2})
  T.same(ms.cumsum(ms.tensor({1, 2, 3}), 1):tolist(), {1, 3, 6})
end)

T.test("sort is stable, NaN sorts last (first descending), 0-dim and empty tensors", function()
  local x = ms.tensor({2, 1, 2, 1, 0 / 0, 2})
  local v, i = x:sort({stable = true})
  T.same(i:tolist(), {2, 4, 1, 3, 6, 5})
  v, i = x:sort({descending = true})
  T.same(i:tolist(), {5, 1, 3, 6, 2, 4})
  T.truthy(v[1]:item() ~= v[1]:item(), "NaN first descending")
  v, i = ms.tensor(5.0):sort()
  T.eq(v:dim(), 0)
  T.eq(i:item(), 1)
  v, i = ms.zeros(2, 0):sort(2)
  T.same(v:size(), {2, 0})
  T.same(i:size(), {2, 0})
  -- long rows go through the merge passes (and many rows over the thread pool)
  local big = ms.randn(64, 1000)
  local s = big:sort(2)
  T.truthy((s:narrow(2, 2, 999) - s:narrow(2, 1, 999)):min():item() >= 0, "sorted rows")
  T.truthy(ms.equal(s:sum(2), big:sum(2)) or (s:sum(2) - big:sum(2)):abs():max():item() < 1e-3, "a permutation")
end)

T.test("topk of a few of many (selected, not sorted) is the stable sort's first k, ties and NaN included", function()
  ms.manual_seed(9)
  local x = ms.randint(0, 20, {7, 300}):float()
  x[2][7], x[2][150], x[5][1] = 0 / 0, 0 / 0, 0 / 0
  for _, k in ipairs({1, 5, 30, 300}) do
    for _, largest in ipairs({true, false}) do
      local v, i = x:topk(k, {largest = largest})
      local sv, si = x:sort({descending = largest, stable = true})
      T.same(v:tolist(), sv:narrow(2, 1, k):tolist(), 0, ("values k %d"):format(k))
      T.same(i:tolist(), si:narrow(2, 1, k):tolist(), 0, ("indices k %d"):format(k))
    end
  end
  local v = x:t():topk(3, 1) -- a strided row
  T.same(v:tolist(), x:t():sort({dim = 1, descending = true}):narrow(1, 1, 3):tolist())
end)

T.test("gradients: gradcheck of each differentiable op, grad_fn names", function()
  ms.manual_seed(5)
  local idx = ms.tensor({{1, 3, 3}, {2, 1, 4}})
  gradcheck(function(a) return a:gather(2, idx) end, {ms.randn(3, 4, {dtype = "float64"})})
  gradcheck(function(a) return a:t():gather(1, ms.tensor({{4, 1, 2}, {3, 3, 1}})) end, {ms.randn(3, 4, {dtype = "float64"})})
  local uniq = ms.tensor({{2, 4, 1}, {3, 1, 4}})
  gradcheck(function(a, s) return a:scatter(2, uniq, s) end,
    {ms.randn(2, 5, {dtype = "float64"}), ms.randn(3, 4, {dtype = "float64"})})
  gradcheck(function(a) return a:scatter(2, uniq, 1.5) end, {ms.randn(2, 5, {dtype = "float64"})})
  gradcheck(function(a, s) return a:scatter_add(1, ms.tensor({{1, 2}, {1, 1}, {2, 2}}), s) end,
    {ms.randn(2, 2, {dtype = "float64"}), ms.randn(3, 3, {dtype = "float64"})})
  gradcheck(function(a, s) return a:clone():scatter_add_(2, idx, s) end,
    {ms.randn(2, 5, {dtype = "float64"}), ms.randn(2, 3, {dtype = "float64"})})
  gradcheck(function(a) return (a:sort(1)) end, {ms.randn(4, 3, {dtype = "float64"})})
  gradcheck(function(a) return (a:sort({dim = 2, descending = true})) end, {ms.randn(3, 5, {dtype = "float64"})})
  gradcheck(function(a) return (a:topk(2, 1)) end, {ms.randn(4, 3, {dtype = "float64"})})
  gradcheck(function(a) return (a:topk(3, {largest = false})) end, {ms.randn(2, 5, {dtype = "float64"})})
  gradcheck(function(a) return a:cumsum(2) end, {ms.randn(3, 4, {dtype = "float64"})})
  gradcheck(function(a) return a:t():cumsum(1) end, {ms.randn(3, 4, {dtype = "float64"})})
  gradcheck(function(a) return a:cumprod(1) end, {ms.rand(4, 3, {dtype = "float64"}) + 0.5})
  local a = ms.randn(3, 4, {requires_grad = true})
  local names = {
    gather = a:gather(2, idx), scatter = a:scatter(2, uniq, a:narrow(2, 1, 3):narrow(1, 1, 2)),
    scatter_n = a:scatter(2, uniq, 0), scatter_add = a:scatter_add(2, idx, a:narrow(2, 1, 3):narrow(1, 1, 2)),
    sort = a:sort(), sort_stable = a:sort({stable = true}), topk = a:topk(2), cumsum = a:cumsum(1),
    cumprod = a:cumprod(1),
  }
  local want = {
    gather = "GatherBackward0", scatter = "ScatterBackward0", scatter_n = "ScatterBackward1",
    scatter_add = "ScatterAddBackward0", sort = "SortBackward0", sort_stable = "SortBackward1",
    topk = "TopkBackward0", cumsum = "CumsumBackward0", cumprod = "CumprodBackward0",
  }
  for k, t in pairs(names) do T.eq(t.grad_fn, want[k], k) end
  T.eq(a:any().requires_grad, false)
  T.eq(a:all(1).requires_grad, false)
  local _, i = a:sort()
  T.eq(i.requires_grad, false)
end)

T.test("gradients: repeated positions add up, scatter's overwritten places get none", function()
  local a = ms.tensor({1.0, 2.0, 3.0}, {requires_grad = true})
  a:gather(1, ms.tensor({3, 3, 1})):sum():backward()
  T.same(a.grad:tolist(), {1, 0, 2})
  local b = ms.tensor({1.0, 2.0, 3.0}, {requires_grad = true})
  local s = ms.tensor({5.0, 6.0}, {requires_grad = true})
  local weighted = b:scatter(1, ms.tensor({2, 3}), s) * ms.tensor({1.0, 10.0, 100.0})
  weighted:sum():backward()
  T.same(b.grad:tolist(), {1, 0, 0})
  T.same(s.grad:tolist(), {10, 100})
  -- src larger than the index: its other elements get zeros
  local s2 = ms.ones(2, 3, {requires_grad = true})
  ms.zeros(2, 3):scatter_add(2, ms.tensor({{1}}), s2):sum():backward()
  T.same(s2.grad:tolist(), {{1, 0, 0}, {0, 0, 0}})
  -- cumprod through zeros (PyTorch 1.13's values): a row's first zero gets the running products
  -- around it, the places after it nothing
  local c = ms.tensor({{2.0, 0.0, 3.0, 0.0, 4.0}, {0.0, 2.0, 2.0, 1.0, 1.0}, {1.0, 2.0, 3.0, 4.0, 5.0}},
    {requires_grad = true})
  c:cumprod(2):sum():backward()
  T.same(c.grad:tolist(), {{1, 8, 0, 0, 0}, {15, 0, 0, 0, 0}, {153, 76, 50, 36, 24}})
  local z = ms.randn(3, 6, {dtype = "float64"})
  z[1][2], z[1][5], z[2][1], z[2][2], z[3][6] = 0, 0, 0, 0, 0
  gradcheck(function(a) return a:cumprod(2) end, {z})
  gradcheck(function(a) return a:cumprod(1) end, {z})
end)

T.test("CPU kernels over many lines agree with a plain loop (threads never share a line)", function()
  ms.manual_seed(3)
  local x = ms.randn(300, 40)
  local idx = ms.randint(1, 41, {300, 25})
  local got = x:gather(2, idx)
  local xl, il, gl = x:tolist(), idx:tolist(), got:tolist()
  for r = 1, 300, 37 do
    for j = 1, 25 do T.eq(gl[r][j], xl[r][il[r][j]], ("gather %d %d"):format(r, j)) end
  end
  local acc = ms.zeros(300, 40):scatter_add(2, idx, ms.ones(300, 25))
  T.same(acc:sum(2):tolist(), ms.full({300}, 25.0):tolist())
  local c = ms.ones(500, 64):cumsum(2)
  T.same(c:select(2, 64):tolist(), ms.full({500}, 64.0):tolist())
end)

T.test("errors name the op, the argument, what was expected and what came", function()
  local x = ms.tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}})
  T.raises(function() x:gather(2, ms.tensor({{4}, {1}})) end, "gather", "index value 4", "dim 2", "1..3")
  T.raises(function() x:gather(2, ms.tensor({{0}, {1}})) end, "gather", "index value 0", "1..3")
  T.raises(function() x:gather(1, ms.tensor({{-1}})) end, "gather", "index value -1")
  T.raises(function() x:gather(2, ms.tensor({{1.0}})) end, "gather", "#3", "int64 tensor", "float32")
  T.raises(function() x:gather(2, ms.tensor({{1}}, {dtype = "int32"})) end, "gather", "index", "int64")
  T.raises(function() x:gather(2, ms.tensor({1, 2})) end, "gather", "as many dims", "2", "1")
  T.raises(function() x:gather(3, ms.tensor({{1}})) end, "gather", "dim", "1..2")
  T.raises(function() x:gather(2, ms.tensor({{1}, {1}, {1}})) end, "gather", "larger than the input", "dim 1")
  T.raises(function() x:gather(2, ms.tensor({{1}}), 3) end, "gather", "unexpected argument")
  T.raises(function() x:scatter(2, ms.tensor({{1}}), ms.tensor({{1}})) end, "scatter", "dtype", "float32", "int64")
  T.raises(function() x:scatter(2, ms.tensor({{1, 2}}), ms.ones(1, 1)) end, "scatter", "larger than src")
  T.raises(function() x:scatter(2, ms.tensor({{1}}), "a") end, "scatter", "src", "a tensor or a number")
  T.raises(function() x:scatter_add(2, ms.tensor({{1}}), 1.0) end, "scatter_add", "#4")
  T.raises(function() x:scatter(2, ms.tensor({{7}}), 0) end, "scatter", "index value 7", "1..3")
  T.raises(function() x:sort(3) end, "sort", "dim")
  T.raises(function() x:sort(1, "yes") end, "sort", "descending", "a boolean")
  T.raises(function() x:sort({descend = true}) end, "sort", "descend")
  T.raises(function() x:topk(4) end, "topk", "k (4)", "0..3")
  T.raises(function() x:topk(-1) end, "topk", "k (-1)")
  T.raises(function() x:topk(1.5) end, "topk", "k", "an integer")
  T.raises(function() ms.tensor({true, false}):topk(1) end, "topk", "bool")
  T.raises(function() x:cumsum() end, "cumsum", "dim")
  T.raises(function() x:cumsum(1, {dtype = "float99"}) end, "cumsum", "dtype")
  T.raises(function() x:any(3) end, "any", "dim")
  local leaf = ms.ones(3, {requires_grad = true})
  T.raises(function() leaf:scatter_(1, ms.tensor({1}), 0) end, "scatter", "leaf")
end)

T.test("every op here has its docstring, under the names bound to it", function()
  local docs = require "moonshard.docs.ops_select"
  local x, documented = ms.zeros(1), {}
  for _, e in ipairs(docs) do
    local m = assert(e.name:match("^Tensor:(.+)$"), e.name)
    T.eq(type(x[m]), "function", e.name)
    for _, a in ipairs(e.also or {}) do T.truthy(rawequal(ms[a:match("^ms%.(.+)$")], x[m]), a .. " is " .. e.name) end
    T.truthy(e.sig and e.doc and e.example, e.name .. ": sig, doc and example")
    documented[m] = true
  end
  for _, op in ipairs({"gather", "scatter", "scatter_", "scatter_add", "scatter_add_", "sort", "argsort", "topk",
                       "cumsum", "cumprod", "any", "all"}) do
    T.truthy(documented[op], op .. " is documented")
  end
end)

T.finish()
