-- op_coverage.lua: the plan of test_cuda_op_coverage.lua, derived from the engine's op tables
-- (ms._op_info: unary, binary, activation, reduce, triangle): one case per op and dtype (float32,
-- float64, int64), with its inputs, its call, and its tolerance family. Only the family of each op and
-- the call of each reduction are written here by hand, keyed by name; a row these rules cannot
-- place (an op added to a table, a new table, a new domain) makes plan() raise, naming it, so a
-- new op without coverage fails test_op_coverage.lua on any machine, GPU or not.
local ms = require "moonshard"
local F = require "moonshard.functional"

local M = {}

M.DTYPES = { "float32", "float64", "int64" }

-- The unit of every tolerance: the spacing of the result's dtype at 1 (integers: exact).
local EPS = { float32 = 2 ^ -23, float64 = 2 ^ -52 }

-- Tolerances in units of EPS, relative to max(1, |cpu value|). Each family says why.
M.FAMILIES = {
  exact = { fwd = 0, bwd = 0, int = 0,
    why = "IEEE operations (+ - * /, sqrt, comparisons, rounding to integers, min/max), each "
      .. "rounded once in the same order on both devices; their gradients are composed of the "
      .. "same native ops on both devices: the same bits" },
  libm = { fwd = 8, bwd = 64, int = 1,
    why = "the libraries' transcendental functions: CUDA's within 2 ulps (powf 4), glibc's "
      .. "within 1 ulp of the exact value, composed with a few IEEE roundings: 8 eps. The "
      .. "derivatives of saturating functions (1 - y^2, y (1 - y)) turn an error of 8 eps in y "
      .. "into an absolute 16 eps, times the upstream weights (|w| < 4 here): 64 eps. Integer "
      .. "inputs compute in float64 on both devices and round once to float32: the float64 "
      .. "difference (a few ulps of 2^-52) moves the rounding by at most one float32 step" },
  reduce = { fwd = 16 * 63, bwd = 16 * 63, int = 0,
    why = "n - 1 = 62 roundings in another order (a tree on the GPU, a sequence on the CPU); the "
      .. "inputs are centred at 3, so every partial sum stays below the result and each rounding "
      .. "costs at most 1 eps of it: 63 eps; var and std lose (1 + mean^2 / var) ~ 10 times more "
      .. "to cancellation; 16 * 63 covers both. Integer sums and products wrap alike (mod 2^64)" },
}

-- Which family each op belongs to (an op missing here is an op without coverage).
M.FAMILY_OF = {
  unary = {
    neg = "exact", abs = "exact", relu = "exact", sign = "exact", floor = "exact", ceil = "exact",
    round = "exact", sqrt = "exact", rsqrt = "exact", reciprocal = "exact", square = "exact",
    logical_not = "exact",
    exp = "libm", log = "libm", tanh = "libm", sigmoid = "libm", sin = "libm", cos = "libm",
    log1p = "libm", expm1 = "libm", softplus = "libm",
  },
  binary = {
    add = "exact", sub = "exact", mul = "exact", div = "exact", maximum = "exact", minimum = "exact",
    eq = "exact", ne = "exact", lt = "exact", le = "exact", gt = "exact", ge = "exact",
    logical_and = "exact", logical_or = "exact",
    pow = "libm",
  },
  activation = { gelu = "libm", silu = "libm", hardswish = "libm" },
  reduce = {
    sum = "reduce", mean = "reduce", prod = "reduce", var = "reduce", std = "reduce", norm = "reduce",
    max = "exact", min = "exact", argmax = "exact", argmin = "exact", any = "exact", all = "exact",
  },
  triangle = { tril = "exact", triu = "exact" }, -- copies and zeros: the same bits
}

-- The inputs: 7x9 values ~ N(0, 9), transposed (a strided operand), made on the CPU.
local function data(dtype, seed, shape)
  ms.manual_seed(seed)
  local x = ms.randn(shape or { 7, 9 }):mul(3)
  if dtype == "int64" then x = x:round() end
  return x:to(dtype):t()
end

-- Where each unary op is defined and smooth (the rows' DOMAIN).
local DOMAIN = {
  real = function(x) return x end,
  step = function(x) return x end, -- random floats miss the jumps
  positive = function(x) return x:abs() + (x:is_floating_point() and 0.5 or 1) end,
  above_minus_one = function(x) return x:abs() - (x:is_floating_point() and 0.5 or 0) end,
}

-- How each reduction is called: over everything, and over dim 2 (values only).
local REDUCE_CALL = {
  norm = function(x, dim) if dim then return x:norm(2, dim) end return x:norm() end,
}
local function reduce_call(name)
  return REDUCE_CALL[name] or function(x, dim)
    if dim then return (x[name](x, dim)) end
    return (x[name](x))
  end
end

-- The cases of one kind of table; each case builds its inputs (CPU tensors) and calls the op.
local KINDS = {
  unary = function(row, dt)
    local domain = DOMAIN[row.domain]
    if not domain then error(("op_coverage: unary op %s has domain %s, which has no input rule"):format(row.name, tostring(row.domain)), 0) end
    return { { inputs = function() return { domain(data(dt, 1)) } end,
               call = function(x) return x[row.name](x) end } }
  end,
  binary = function(row, dt)
    local function inputs()
      local a, b = data(dt, 1), data(dt, 2, { 1, 7 }):reshape(7) -- b broadcasts along a's rows
      if row.name == "pow" then -- a positive base; exponents that keep x^y finite in float32
        a = a:abs() + (a:is_floating_point() and 0.5 or 1)
        b = a:is_floating_point() and b / 3 or b:abs():clamp(0, 6)
      end
      return { a, b }
    end
    return { { inputs = inputs, call = function(a, b) return a[row.name](a, b) end },
             { what = "number", inputs = function() return { inputs()[1] } end,
               call = function(a) return a[row.name](a, 2) end } }
  end,
  activation = function(row, dt)
    return { { inputs = function() return { data(dt, 1) } end, call = function(x) return F[row.name](x) end } }
  end,
  -- on a strided (transposed) 9x7 input, and on a batch of 3 of them, each at a few diagonals
  triangle = function(row, dt)
    local cases = {}
    for _, d in ipairs { 0, 2, -3 } do
      cases[#cases + 1] = { what = "diagonal " .. d, inputs = function() return { data(dt, 1) } end,
                            call = function(x) return x[row.name](x, d) end }
    end
    local function batch() local x = data(dt, 1) return ms.stack { x, x + 1, -x } end
    cases[#cases + 1] = { what = "batched", inputs = function() return { batch() } end,
                          call = function(x) return x[row.name](x, 1) end }
    return cases
  end,
  reduce = function(row, dt)
    local call = reduce_call(row.name)
    local function inputs() return { data(dt, 1) + 3 } end
    return { { what = "all", inputs = inputs, call = function(x) return call(x) end },
             { what = "dim 2", inputs = inputs, call = function(x) return call(x, 2) end } }
  end,
}

-- The cases of `info` (default ms._op_info): {kind, name, dtype, what, family, inputs, call},
-- or an error naming the first row (or table) without a rule.
function M.plan(info)
  info = info or ms._op_info
  local cases, kinds = {}, {}
  for kind in pairs(info) do kinds[#kinds + 1] = kind end
  table.sort(kinds)
  for _, kind in ipairs(kinds) do
    local make = KINDS[kind]
    if not make then error(("op_coverage: ms._op_info.%s is a table of ops without a rule in op_coverage.lua"):format(kind), 0) end
    for _, row in ipairs(info[kind]) do
      local family = M.FAMILY_OF[kind][row.name]
      if not family then
        error(("op_coverage: %s op %s has no tolerance family in op_coverage.lua (FAMILY_OF.%s)"):format(kind, row.name, kind), 0)
      end
      for _, dt in ipairs(M.DTYPES) do
        for _, c in ipairs(make(row, dt)) do
          c.kind, c.name, c.dtype, c.family = kind, row.name, dt, family
          c.label = ("%s %s %s%s"):format(kind, row.name, dt, c.what and (" " .. c.what) or "")
          cases[#cases + 1] = c
        end
      end
    end
  end
  return cases
end

-- Runs case c on device d: {ok = true, y =, grads = {...}} or {ok = false, err =}. The inputs
-- are fresh leaves on d (floating ones require grad); the gradient is that of sum(y * w).
function M.run(c, d)
  local xs = {}
  for i, t in ipairs(c.inputs()) do
    xs[i] = t:to(d):detach()
    if t:is_floating_point() then xs[i].requires_grad = true end
  end
  local ok, y = pcall(c.call, table.unpack(xs))
  if not ok then return { ok = false, err = tostring(y) } end
  local grads = {}
  if y.requires_grad then
    ms.manual_seed(7)
    local w = ms.randn(y:size(), { dtype = y.dtype }):to(d)
    ;(y * w):sum():backward()
    for i, x in ipairs(xs) do grads[i] = x.grad end
  end
  return { ok = true, y = y:detach(), grads = grads }
end

-- The tolerance (relative to max(1, |b|)) of a value of dtype `dt` in case c; `grad`: of a gradient.
function M.tolerance(c, dt, grad)
  local f = M.FAMILIES[c.family]
  local eps = EPS[dt]
  if not eps then return 0 end -- integer and bool results: exact
  if c.dtype == "int64" then return f.int * eps end
  return (grad and f.bwd or f.fwd) * eps
end

-- nil when a (on any device) matches b (CPU) within tol; else the first difference, described.
function M.differ(a, b, tol)
  if a.dtype ~= b.dtype then return ("dtype %s, cpu %s"):format(a.dtype, b.dtype) end
  if tostring(a:size()) ~= tostring(b:size()) then return ("shape %s, cpu %s"):format(tostring(a:size()), tostring(b:size())) end
  local g, w = a:cpu():double():reshape(-1):tolist(), b:double():reshape(-1):tolist()
  for i = 1, #w do
    local x, y = g[i], w[i]
    if not (x == y or (x ~= x and y ~= y) or math.abs(x - y) <= tol * math.max(1, math.abs(y))) then
      return ("[%d]: %.17g, cpu %.17g (tolerance %.3g relative)"):format(i, x, y, tol)
    end
  end
  return nil
end

return M
