-- test_grad_ops.lua: gradients of the unary and binary elementwise ops, clamp, where, masked_fill and the
-- reductions: finite-difference checks on random shapes (keepdim, negative dims, non-contiguous
-- inputs) and exact values where PyTorch defines a choice (relu at 0, ties of max, zeros of prod).
local T = require "testing"
local ms = require "moonshard"
local gradcheck = require "gradcheck"

ms.manual_seed(1)
math.randomseed(7)

local function leaf(values) return ms.tensor(values, {dtype = "float64", requires_grad = true}) end
local function randn(shape) return ms.randn(shape, {dtype = "float64"}) end

-- A random shape of 1 to 3 dims with sizes 1 to 4.
local function random_shape()
  local shape = {}
  for d = 1, math.random(1, 3) do shape[d] = math.random(1, 4) end
  return shape
end

-- Inputs of one shape in three layouts: contiguous, transposed (t() of the transposed shape)
-- and a narrowed slice of a wider tensor.
local function layouts(shape)
  local out = {randn(shape)}
  if #shape == 0 then return out end
  if #shape == 2 then out[#out + 1] = randn({shape[2], shape[1]}):t() end
  local wide = {table.unpack(shape)}
  wide[#wide] = wide[#wide] + 2
  out[#out + 1] = randn(wide):narrow(#wide, 2, shape[#shape])
  return out
end

local function shapes_to_check()
  local list = {{}, {5}, {3, 4}, {2, 3, 2}}
  for _ = 1, 3 do list[#list + 1] = random_shape() end
  return list
end

-- Maps taking randn values into an op's domain (its row's DOMAIN in moonshard/op_list.h).
local DOMAIN = {
  real = function(x) return x end,
  positive = function(x) return x:abs() + 0.5 end,
  above_minus_one = function(x) return x:abs() - 0.5 end,
  -- piecewise constant: keep away from the jumps so finite differences see 0
  step = function(x) return x:floor() + 0.3 end,
}

-- Every differentiable unary op of the engine's table, {name, domain map}: an op added to the
-- table is checked here with no edit.
local unary = {}
for _, row in ipairs(ms._op_info.unary) do
  if row.dtypes ~= "logical" then
    unary[#unary + 1] = {row.name, assert(DOMAIN[row.domain], row.name .. ": unknown domain " .. row.domain)}
  end
end

-- PyTorch's grad_fn names, recorded by gen_ops_reference.py for every op of the unary and binary
-- tables.
local root = (arg and arg[0] or ""):match("^(.-)tests/lua/[^/]*$") or ""
local reference = dofile(root .. "tests/lua/data/ops_reference.lua")
local torch_grad_fns, torch_number_grad_fns = reference.grad_fns, reference.number_grad_fns

T.test("unary ops: gradcheck on random shapes and layouts", function()
  for _, shape in ipairs(shapes_to_check()) do
    for _, x in ipairs(layouts(shape)) do
      for _, u in ipairs(unary) do
        local name, domain = u[1], u[2]
        local input = domain(x)
        local ok, err = pcall(gradcheck, function(a) return a[name](a) end, {input})
        if not ok then error(name .. ": " .. err) end
      end
    end
  end
end)

T.test("unary ops: node names and no grad through logical_not", function()
  local x = leaf({0.5, 1.5})
  for _, u in ipairs(unary) do
    local name = u[1]
    T.eq(x[name](x).grad_fn, assert(torch_grad_fns[name], name .. ": no PyTorch grad_fn recorded"), name)
  end
  T.eq(x:gt(1):logical_not().requires_grad, false)
end)

-- Every differentiable binary op of the engine's table (rows with a grad_fn): an op added to the
-- table is checked here with no edit. One input recipe suits them all: a in [0.5, 1] and b in
-- [1.5, 2] are positive (pow's base), nonzero (div's divisor) and never tie (maximum, minimum).
local binary = {}
for _, row in ipairs(ms._op_info.binary) do
  if row.node then binary[#binary + 1] = row end
end

local function low(shape) return ms.rand(shape, {dtype = "float64"}) * 0.5 + 0.5 end
local function high(shape) return ms.rand(shape, {dtype = "float64"}) * 0.5 + 1.5 end

T.test("binary ops: gradcheck with broadcasting, layouts, numbers and in-place forms", function()
  T.truthy(#binary >= 7, "the table's differentiable binary ops reach Lua")
  for _, row in ipairs(binary) do
    local op = ms[row.name]
    local check = function(f, inputs)
      local ok, err = pcall(gradcheck, f, inputs)
      if not ok then error(row.name .. ": " .. err) end
    end
    check(op, {low({2, 3}), high({3})})                       -- broadcast a row
    check(op, {high({4, 1}), low({1, 3})})                    -- broadcast both ways
    check(op, {low({3, 2}):t(), high({2, 3})})                -- a transposed operand
    check(op, {high({}), low({2, 2})})                        -- a 0-dim tensor
    check(function(a) return op(a, 1.7) end, {low({5})})      -- a number on either side
    check(function(b) return op(0.75, b) end, {high({5})})
    check(function(a, b) local c = a * 1; c[row.name .. "_"](c, b); return c end, {low({2, 3}), high({3})})
  end
end)

T.test("binary ops: node names are PyTorch's, comparisons carry no gradient", function()
  local a, b = leaf({0.5, 0.75}), leaf({1.5, 2})
  for _, row in ipairs(binary) do
    T.eq(ms[row.name](a, b).grad_fn, row.node, row.name)
    T.eq(row.node, assert(torch_grad_fns[row.name], row.name .. ": no PyTorch grad_fn recorded"), row.name)
    local number = assert(torch_number_grad_fns[row.name], row.name .. ": no PyTorch grad_fn recorded")
    T.eq(ms[row.name](a, 1.7).grad_fn, number.right, row.name .. "(tensor, number)")
    T.eq(ms[row.name](0.75, a).grad_fn, number.left, row.name .. "(number, tensor)")
  end
  for _, row in ipairs(ms._op_info.binary) do
    if not row.node then T.eq(ms[row.name](a, b).requires_grad, false, row.name) end
  end
end)

T.test("unary ops: values at the special points", function()
  local x = leaf({-1, 0, 2})
  x:relu():sum():backward()
  T.same(x.grad:tolist(), {0.0, 0.0, 1.0}, 0, "relu at 0 gives 0")
  x.grad = nil
  x:abs():sum():backward()
  T.same(x.grad:tolist(), {-1.0, 0.0, 1.0})
  x.grad = nil
  x:floor():sum():backward()
  T.same(x.grad:tolist(), {0.0, 0.0, 0.0})
  x.grad = nil
  x:square():sum():backward()
  T.same(x.grad:tolist(), {-2.0, 0.0, 4.0})
  local y = leaf({0.25, 4})
  y:sqrt():sum():backward()
  T.same(y.grad:tolist(), {1.0, 0.25}, 1e-12)
end)

T.test("unary ops in place: graph rebased, input copies kept", function()
  local x = leaf({0.5, 2})
  local y = x * 1
  y:log_() -- its derivative reads the input, which log_ overwrites
  T.eq(y.grad_fn, "LogBackward0")
  y:exp_()
  y:sum():backward()
  T.same(x.grad:tolist(), {1.0, 1.0}, 1e-12)
  T.raises(function() x:exp_() end, "exp_", "leaf")
  local z = x * 1
  local w = z:sin() -- saves z
  z:cos_()
  T.raises(function() w:sum():backward() end, "modified by an in-place operation")
  for _, u in ipairs(unary) do
    local name, domain = u[1], u[2]
    local input = domain(randn({2, 3}))
    gradcheck(function(a) local b = a * 1; b[name .. "_"](b); return b end, {input})
  end
end)

T.test("relu_ and exp_ after an op write over its result: no allocation, the same gradients", function()
  for _, dt in ipairs({"float32", "bfloat16"}) do
    for _, name in ipairs(dt == "float32" and {"relu", "exp", "tanh", "neg"} or {"relu"}) do
      local x = ms.randn(64, 32):to(dt):requires_grad_()
      local w = ms.randn(32, 16):to(dt):requires_grad_()
      local h = x:mm(w)
      local before = ms.memory_stats().allocations
      local r = h[name .. "_"](h)
      T.eq(ms.memory_stats().allocations, before, name .. "_ allocated")
      T.truthy(rawequal(r, h), name .. "_ returns its tensor")
      T.eq(h.grad_fn, ({relu = "ReluBackward0", exp = "ExpBackward0", tanh = "TanhBackward0",
                        neg = "NegBackward0"})[name])
      local g = ms.randn(64, 16):to(dt)
      h:backward(g)
      local x2, w2 = x:detach():requires_grad_(), w:detach():requires_grad_()
      local h2 = x2:mm(w2)
      h2[name](h2):backward(g)
      T.truthy(ms.equal(x.grad, x2.grad) and ms.equal(w.grad, w2.grad), name .. " in " .. dt)
    end
  end
  -- without autograd too, and where the kernel cannot write over its input (a transposed view,
  -- float16 computed in float32) the values are still right
  do
    local _ <close> = ms.no_grad()
    for _, t in ipairs({ ms.randn(8, 5), ms.randn(5, 8):t(), ms.randn(8, 5):half(),
                         ms.tensor({{-3, 2}, {4, -1}}, {dtype = "int64"}) }) do
      local want = t:relu()
      local before = ms.memory_stats().allocations
      T.truthy(rawequal(t:relu_(), t))
      if t:is_contiguous() and t.dtype ~= "float16" then
        T.eq(ms.memory_stats().allocations, before, "relu_ over itself allocated")
      end
      T.truthy(ms.equal(t, want), "relu_ of " .. t.dtype)
    end
  end
  -- a tensor saved by an earlier node and then rectified in place is caught at backward
  local x = ms.randn(5):requires_grad_()
  local h = x * 1
  local y = h * h
  h:relu_()
  T.raises(function() y:sum():backward() end, "modified by an in-place operation")
end)

T.test("clamp: gradient passes where min <= x <= max, bounds included", function()
  for _, shape in ipairs(shapes_to_check()) do
    for _, x in ipairs(layouts(shape)) do
      gradcheck(function(a) return a:clamp(-0.5, 0.5) end, {x})
      gradcheck(function(a) return a:clamp({min = 0.1}) end, {x})
      gradcheck(function(a) return a:clamp(nil, -0.2) end, {x})
      gradcheck(function(a) local b = a * 2; b:clamp_(-0.5, 0.7); return b end, {x})
    end
  end
  local x = leaf({-2, -1, 0, 1, 2})
  local y = x:clamp(-1, 1)
  T.eq(y.grad_fn, "ClampBackward1")
  y:sum():backward()
  T.same(x.grad:tolist(), {0.0, 1.0, 1.0, 1.0, 0.0})
  T.raises(function() x:clamp_(0, 1) end, "clamp_", "leaf")
end)

T.test("where: each side gets the gradient where it was chosen, summed over broadcasting", function()
  for _, shape in ipairs(shapes_to_check()) do
    for _, x in ipairs(layouts(shape)) do
      local cond = ms.rand(shape):gt(0.5)
      local y = randn({shape[#shape] or 1})
      if #shape == 0 then y = randn({}) end
      gradcheck(function(a, b) return ms.where(cond, a, b) end, {x, y})
      gradcheck(function(a) return ms.where(cond, 2, a) end, {x})
      gradcheck(function(a) return a:where(cond, 0.5) end, {x})
    end
  end
  local a, b = leaf({1, 2, 3}), leaf({5})
  local cond = ms.tensor({{true, false, true}, {false, false, true}})
  local w = ms.where(cond, a, b)
  T.eq(w.grad_fn, "WhereBackward0")
  w:sum():backward()
  T.same(a.grad:tolist(), {1.0, 0.0, 2.0})
  T.same(b.grad:tolist(), {3.0})
end)

T.test("masked_fill: the gradient flows where nothing was filled in", function()
  for _, shape in ipairs(shapes_to_check()) do
    for _, x in ipairs(layouts(shape)) do
      local mask = ms.rand(shape):gt(0.5)
      gradcheck(function(a) return a:masked_fill(mask, 3) end, {x})
      gradcheck(function(a) local b = a * 1; b:masked_fill_(mask, -1); return b end, {x})
    end
  end
  local x = leaf({1, 2, 3})
  local y = x:masked_fill(ms.tensor({{true, false, false}, {true, true, false}}), 0)
  T.eq(y.grad_fn, "MaskedFillBackward0")
  y:sum():backward()
  T.same(x.grad:tolist(), {0.0, 1.0, 2.0}, 0, "the mask broadcast the row")
  T.raises(function() x:masked_fill_(ms.tensor({true, false, true}), 0) end, "masked_fill_", "leaf")
end)

-- every dim of the shape, as a positive and a negative 1-based dim, with and without keepdim
local function each_dim(shape, fn)
  for d = 1, #shape do
    fn(d, false)
    fn(d - #shape - 1, true)
  end
end

T.test("sum, mean, prod: all elements and each dim", function()
  for _, shape in ipairs(shapes_to_check()) do
    for _, x in ipairs(layouts(shape)) do
      gradcheck(function(a) return a:sum() end, {x})
      gradcheck(function(a) return a:mean() end, {x})
      gradcheck(function(a) return a:prod() end, {x})
      each_dim(shape, function(d, keep)
        gradcheck(function(a) return a:sum(d, keep) end, {x})
        gradcheck(function(a) return a:mean({dim = d, keepdim = keep}) end, {x})
        gradcheck(function(a) return a:prod(d, keep) end, {x})
      end)
    end
  end
  local x = leaf({{1, 2}, {3, 4}})
  T.eq(x:sum().grad_fn, "SumBackward0")
  T.eq(x:sum(1).grad_fn, "SumBackward1")
  T.eq(x:mean().grad_fn, "MeanBackward0")
  T.eq(x:mean(2).grad_fn, "MeanBackward1")
  T.eq(x:prod().grad_fn, "ProdBackward0")
  T.eq(x:prod(1).grad_fn, "ProdBackward1")
  x:mean(2):sum():backward()
  T.same(x.grad:tolist(), {{0.5, 0.5}, {0.5, 0.5}})
end)

T.test("prod: gradients at zeros", function()
  local x = leaf({2, 0, 3})
  x:prod():backward()
  T.same(x.grad:tolist(), {0.0, 6.0, 0.0}, 0, "one zero gets the product of the others")
  local y = leaf({0, 2, 0})
  y:prod():backward()
  T.same(y.grad:tolist(), {0.0, 0.0, 0.0}, 0, "two zeros: everything is flat")
  local z = leaf({{2, 0, 3}, {1, 2, 4}, {0, 5, 0}})
  z:prod(2):sum():backward()
  T.same(z.grad:tolist(), {{0.0, 6.0, 0.0}, {8.0, 4.0, 2.0}, {0.0, 0.0, 0.0}})
  gradcheck(function(a) return a:prod(1) end, {ms.tensor({{2, 0, 3}, {1, 2, 0}, {0, 5, 0.5}}, {dtype = "float64"})})
  gradcheck(function(a) return a:prod() end, {ms.tensor({2, 0, 3, -1}, {dtype = "float64"})})
end)

T.test("max and min over all elements: the gradient splits evenly among ties", function()
  for _, shape in ipairs(shapes_to_check()) do
    for _, x in ipairs(layouts(shape)) do
      gradcheck(function(a) return a:max() end, {x})
      gradcheck(function(a) return a:min() end, {x})
    end
  end
  local x = leaf({1, 3, 3, -2, 3})
  local m = x:max()
  T.eq(m.grad_fn, "MaxBackward1")
  m:backward()
  T.same(x.grad:tolist(), {0.0, 1 / 3, 1 / 3, 0.0, 1 / 3}, 1e-15)
  x.grad = nil
  local n = x:min()
  T.eq(n.grad_fn, "MinBackward1")
  n:backward()
  T.same(x.grad:tolist(), {0.0, 0.0, 0.0, 1.0, 0.0})
  local y = leaf({{-1, -1}, {-1, -1}})
  y:min():backward()
  T.same(y.grad:tolist(), {{0.25, 0.25}, {0.25, 0.25}})
  local z = leaf({1, 0 / 0, 5, 0 / 0})
  z:max():backward()
  T.same(z.grad:tolist(), {0.0, 0.5, 0.0, 0.5}, 0, "a NaN maximum: the NaNs share the gradient")
end)

T.test("max and min over a dim: the gradient goes to the returned index", function()
  for _, shape in ipairs(shapes_to_check()) do
    for _, x in ipairs(layouts(shape)) do
      each_dim(shape, function(d, keep)
        gradcheck(function(a) local v = a:max(d, keep); return v end, {x})
        gradcheck(function(a) local v = a:min(d, keep); return v end, {x})
      end)
    end
  end
  local x = leaf({{1, 3, 3}, {7, 7, 0}})
  local v, i = x:max(2)
  T.eq(v.grad_fn, "MaxBackward0")
  T.eq(i.requires_grad, false)
  v:sum():backward()
  local want = {{0.0, 0.0, 0.0}, {0.0, 0.0, 0.0}}
  for r = 1, 2 do want[r][i[r]:item()] = 1.0 end
  T.same(x.grad:tolist(), want, 0, "ties: only the returned index")
  x.grad = nil
  local w, j = x:min(-2, true)
  T.eq(w.grad_fn, "MinBackward0")
  ;(w * 2):sum():backward()
  T.same(j:tolist(), {{1, 1, 2}})
  T.same(x.grad:tolist(), {{2.0, 2.0, 0.0}, {0.0, 0.0, 2.0}})
  local s = leaf(5)
  local sv = s:max(1)
  sv:backward()
  T.same(s.grad:tolist(), 1.0, 0, "a 0-dim tensor is its own max")
end)

T.test("argmax, argmin and comparisons carry no gradient", function()
  local x = leaf({1, 3, 2})
  T.eq(x:argmax().requires_grad, false)
  T.eq(x:argmin(1).requires_grad, false)
  T.eq(x:gt(1).requires_grad, false)
  T.eq(x:eq(x).requires_grad, false)
end)

T.test("var and std: each dim, both corrections", function()
  for _, shape in ipairs(shapes_to_check()) do
    for _, x in ipairs(layouts(shape)) do
      if x:numel() > 1 then
        gradcheck(function(a) return a:var() end, {x})
        gradcheck(function(a) return a:std() end, {x})
      end
      gradcheck(function(a) return a:var({correction = 0}) end, {x})
      gradcheck(function(a) return a:std({unbiased = false}) end, {x})
      each_dim(shape, function(d, keep)
        gradcheck(function(a) return a:var({dim = d, keepdim = keep, correction = 0}) end, {x})
        gradcheck(function(a) return a:std({dim = d, keepdim = keep, correction = 0}) end, {x})
        if shape[d > 0 and d or #shape + 1 + d] > 1 then
          gradcheck(function(a) return a:var(d, keep) end, {x})
          gradcheck(function(a) return a:std(d, keep) end, {x})
        end
      end)
    end
  end
  local x = leaf({{1, 2, 3}, {4, 4, 4}})
  T.eq(x:var().grad_fn, "VarBackward0")
  T.eq(x:std(2).grad_fn, "StdBackward0")
  x:std(2):sum():backward()
  T.same(x.grad:tolist(), {{-0.5, 0.0, 0.5}, {0.0, 0.0, 0.0}}, 1e-12, "a constant row gives 0, not NaN")
  x.grad = nil
  x:var(2):sum():backward()
  T.same(x.grad:tolist(), {{-1.0, 0.0, 1.0}, {0.0, 0.0, 0.0}}, 1e-12)
end)

T.test("norm: p = 2, 1, 3, 0.5, inf, 0; all elements and each dim", function()
  for _, shape in ipairs(shapes_to_check()) do
    for _, x in ipairs(layouts(shape)) do
      for _, p in ipairs({2, 1, 3, 0.5, "inf", 0}) do
        gradcheck(function(a) return a:norm(p) end, {x})
        each_dim(shape, function(d, keep)
          gradcheck(function(a) return a:norm(p, d, keep) end, {x})
        end)
      end
    end
  end
  local x = leaf({3, -4})
  local n = x:norm()
  T.eq(n.grad_fn, "NormBackward1")
  n:backward()
  T.same(x.grad:tolist(), {0.6, -0.8}, 1e-12)
  local z = leaf({0, 0})
  z:norm():backward()
  T.same(z.grad:tolist(), {0.0, 0.0}, 0, "the norm of zeros has a zero gradient")
  local m = leaf({-2, 2, 1})
  m:norm("inf"):backward()
  T.same(m.grad:tolist(), {-0.5, 0.5, 0.0}, 0, "inf-norm ties split the gradient with signs")
end)

T.test("chains of reductions and elementwise ops", function()
  local x = randn({3, 4})
  gradcheck(function(a) return (a:exp():sum(2, true) / a:abs():max()):log():mean() end, {x})
  gradcheck(function(a) return (a - a:mean(1, true)):square():sum(-1):sqrt() end, {x})
  gradcheck(function(a) return a:t():sigmoid():prod(1) * a:tanh():norm() end, {x})
end)

T.finish()
