-- test_ops_reference.lua: replays the math-op cases recorded from PyTorch 1.13
-- (tests/lua/data/ops_reference.lua, made by gen_ops_reference.py) through moonshard and
-- compares dtype, shape and values; then checks a float64 matmul against a plain Lua loop.
local root = (arg and arg[0] or ""):match("^(.-)tests/lua/[^/]*$") or ""
package.path = root .. "tests/lua/?.lua;" .. package.path

local T = require "testing"
local ms = require "moonshard"
local ref = dofile(root .. "tests/lua/data/ops_reference.lua")

-- Tolerances by result dtype: |got - want| <= atol + rtol * |want|. The 16-bit formats allow a
-- rounding step of their own (PyTorch and moonshard may round an intermediate differently).
local TOL = {
  float64 = {rtol = 1e-12, atol = 1e-12}, float32 = {rtol = 2e-6, atol = 1e-6},
  bfloat16 = {rtol = 1.6e-2, atol = 1e-3}, float16 = {rtol = 2e-3, atol = 1e-4},
}

local function build(spec)
  local input = assert(ref.inputs[spec.ref], spec.ref)
  local dtype, shape, values = input[1], input[2], input[3]
  local t
  if #shape == 0 then
    t = ms.tensor(values[1], {dtype = dtype})
  else
    t = ms.tensor(values, {dtype = dtype}):view(shape)
  end
  if spec.t then t = t:t() end
  return t
end

local function is_ref(v) return type(v) == "table" and v.ref ~= nil end

local function flatten(v, out)
  out = out or {}
  if type(v) == "table" then
    for i = 1, #v do flatten(v[i], out) end
  else
    out[#out + 1] = v
  end
  return out
end

local function describe_case(c)
  local parts = {}
  for i = 1, c.args.n or #c.args do
    local a = c.args[i]
    if is_ref(a) then parts[#parts + 1] = a.ref .. (a.t and ":t()" or "")
    elseif type(a) == "table" then
      local kv = {}
      for k, v in pairs(a) do kv[#kv + 1] = k .. "=" .. tostring(v) end
      table.sort(kv)
      parts[#parts + 1] = "{" .. table.concat(kv, ",") .. "}"
    elseif math.type(a) == "float" then parts[#parts + 1] = ("%.17g"):format(a) .. (a == math.floor(a) and ".0" or "")
    else parts[#parts + 1] = tostring(a) end
  end
  return ("%s(%s)"):format(c.op, table.concat(parts, ", "))
end

local function check_values(got, want, dtype, what)
  T.eq(#got, #want, what .. ": element count")
  local tol = TOL[dtype]
  for i = 1, #want do
    local g, w = got[i], want[i]
    local ok
    if tol then
      ok = (g ~= g and w ~= w) or g == w or math.abs(g - w) <= tol.atol + tol.rtol * math.abs(w)
    else
      ok = g == w and math.type(g) == math.type(w) -- ints exact (and integers), bools exact
    end
    if not ok then
      error(("%s: element %d: expected %s, got %s"):format(what, i, tostring(w), tostring(g)), 0)
    end
  end
end

local function check_result(got, want, what)
  if want.value ~= nil then
    T.eq(got, want.value, what)
    return
  end
  T.truthy(type(got) == "userdata", what .. ": expected a tensor, got " .. type(got))
  T.eq(got.dtype, want.dtype, what .. ": dtype")
  local shape = {}
  for i = 1, got:dim() do shape[i] = got:size(i) end
  T.eq(table.concat(shape, ","), table.concat(want.shape, ","), what .. ": shape")
  check_values(flatten(got:tolist()), want.values, want.dtype, what)
end

local counts = {}
for i, c in ipairs(ref.cases) do
  local name = ("#%d %s"):format(i, describe_case(c))
  counts[c.op] = (counts[c.op] or 0) + 1
  T.test(name, function()
    local n = c.args.n or #c.args
    local args = {}
    for k = 1, n do
      local a = c.args[k]
      args[k] = is_ref(a) and build(a) or a
    end
    local fn = assert(ms[c.op], "moonshard has no " .. c.op)
    if c.expected_error then
      T.raises(function() return fn(table.unpack(args, 1, n)) end, table.unpack(c.error_has or {}))
      return
    end
    local r1, r2 = fn(table.unpack(args, 1, n))
    check_result(r1, c.expected, "result")
    if c.expected2 then check_result(r2, c.expected2, "second result") end
    if c.op:sub(-1) == "_" then
      T.truthy(rawequal(r1, args[1]), "an in-place op returns its first argument")
    end
  end)
end

-- The data cover the engine's tables: an op added to a table without PyTorch cases fails here
-- (gen_ops_reference.py reads the tables from the binary, so regenerating gives it cases).
T.test("every unary and binary op of the engine's tables has PyTorch cases", function()
  for _, kind in ipairs({"unary", "binary"}) do
    for _, row in ipairs(ms._op_info[kind]) do
      T.truthy((counts[row.name] or 0) > 0, kind .. " op " .. row.name .. " has no case in ops_reference.lua")
    end
  end
end)

---------------------------------------------------------------------------------------------
-- Cases not from the data file.

-- A float64 matmul of odd sizes (past the GEMM's block edges) against the textbook loop.
T.test("matmul float64 37x29x41 against a Lua loop", function()
  local M, K, N = 37, 29, 41
  local a, b = {}, {}
  for i = 1, M * K do a[i] = ((i * 37) % 101 - 50) / 16 end
  for i = 1, K * N do b[i] = ((i * 53) % 97 - 48) / 8 end
  local A = ms.tensor(a, {dtype = "float64"}):view(M, K)
  local B = ms.tensor(b, {dtype = "float64"}):view(K, N)
  for _, form in ipairs({"plain", "transposed"}) do
    local C
    if form == "plain" then
      C = A:matmul(B)
    else -- the same values laid out column-major: the GEMM reads them through strides
      C = ms.matmul(A:t():contiguous():t(), B:t():contiguous():t())
    end
    local got = flatten(C:tolist())
    T.eq(#got, M * N)
    for i = 1, M do
      for j = 1, N do
        local s = 0.0
        for k = 1, K do s = s + a[(i - 1) * K + k] * b[(k - 1) * N + j] end
        T.near(got[(i - 1) * N + j], s, 1e-9, ("%s C[%d][%d]"):format(form, i, j))
      end
    end
  end
end)

-- The same through 32 float64 batches broadcast against one matrix, sliced back out.
T.test("matmul float64 batched broadcast equals per-batch mm", function()
  local A = ms.arange(0, 3 * 5 * 7):view(3, 5, 7):double():div(10):sub(1)
  local B = ms.arange(0, 7 * 4):view(7, 4):double():mul(0.25)
  local C = A:matmul(B)
  T.eq(C.dtype, "float64")
  for i = 1, 3 do
    T.truthy(ms.allclose(C[i], A[i]:mm(B), {rtol = 0, atol = 1e-12}), "batch " .. i)
  end
end)

-- In-place results land in the tensor itself, visible through other views of its storage.
T.test("in-place ops write through views", function()
  local base = ms.zeros(2, 3)
  local v = base:t()
  v:add_(ms.tensor({1, 2}))
  T.same(base:tolist(), {{1, 1, 1}, {2, 2, 2}})
  base:narrow(2, 2, 1):mul_(10)
  T.same(base:tolist(), {{1, 10, 1}, {2, 20, 2}})
  local x = ms.arange(1, 7):view(2, 3):float()
  x:add_(x) -- self aliasing self
  T.same(x:tolist(), {{2, 4, 6}, {8, 10, 12}})
  x:add_(x:narrow(1, 1, 1)) -- broadcast from its own first row
  T.same(x:tolist(), {{4, 8, 12}, {10, 14, 18}})
end)

-- Sizes past the thread pool's grain (elementwise splits at 32768 elements, reductions group
-- short rows), on transposed and broadcast operands, against plain Lua loops.
T.test("large elementwise and reductions across threads", function()
  local R, C = 300, 700
  local vals = {}
  for i = 1, R * C do vals[i] = ((i * 7919) % 1009 - 504) / 8 end
  local a = ms.tensor(vals, {dtype = "float64"}):view(R, C)
  local at = a:t() -- (C, R), non-contiguous
  local col = ms.arange(0, R):double():view(R, 1)
  local sum = ms.add(a, col, {alpha = 2}):mul(at:t()) -- (a + 2 * col) * a
  local got = sum:view(-1):tolist()
  for i = 1, R do
    for j = 1, C do
      local v = vals[(i - 1) * C + j]
      local want = (v + 2 * (i - 1)) * v
      if got[(i - 1) * C + j] ~= want then error(("(a+2col)*a [%d][%d]: %s vs %s"):format(i, j, got[(i - 1) * C + j], want)) end
    end
  end
  local rows, cols = a:sum(2):tolist(), at:sum(2):tolist() -- at:sum(2) sums a's columns
  local maxv, maxi = at:max(2) -- per column of a
  maxv, maxi = maxv:tolist(), maxi:tolist()
  for i = 1, R do
    local s = 0.0
    for j = 1, C do s = s + vals[(i - 1) * C + j] end
    T.near(rows[i], s, 1e-9, "row sum " .. i)
  end
  for j = 1, C do
    local s, best, at_i = 0.0, -math.huge, 0
    for i = 1, R do
      local v = vals[(i - 1) * C + j]
      s = s + v
      if v > best then best, at_i = v, i end
    end
    T.near(cols[j], s, 1e-9, "column sum " .. j)
    T.eq(maxv[j], best, "column max " .. j)
    T.eq(maxi[j], at_i, "column argmax " .. j)
  end
  -- float32 sums accumulate in double: a million 0.1s stay near 100000
  local ones = ms.full({1000, 1000}, 0.1)
  T.near(ones:sum():item(), 100000, 0.1)
  T.near(ones:t():sum(1):sum():item(), 100000, 0.1)
  T.near(ones:mean():item(), 0.1, 1e-6)
end)

T.test("error messages", function()
  T.raises(function() return ms.add(ms.zeros(2, 3), ms.zeros(4)) end, "(2, 3)", "(4,)")
  T.raises(function() return ms.mm(ms.zeros(2, 3), ms.zeros(4, 5)) end, "mm", "(2, 3)", "(4, 5)")
  T.raises(function() return ms.mean(ms.zeros(3, {dtype = "int64"})) end, "floating point")
  T.raises(function() return ms.zeros(3, {dtype = "int64"}):div_(2) end, "can't be cast")
end)

local summary = {}
for op, n in pairs(counts) do summary[#summary + 1] = op .. "=" .. n end
table.sort(summary)
print(("%d reference cases: %s"):format(#ref.cases, table.concat(summary, " ")))
T.finish()
