-- test_conv.lua: conv2d, max_pool2d, avg_pool2d and adaptive_avg_pool2d: values and gradients
-- against PyTorch 1.13 (tests/lua/data/conv_reference.lua, made by gen_conv_reference.py),
-- finite-difference gradient checks in float64, argument errors, and the MNIST seed's shapes.
local root = (arg and arg[0] or ""):match("^(.-)tests/lua/[^/]*$") or ""
package.path = root .. "tests/lua/?.lua;" .. package.path

local T = require "testing"
local ms = require "moonshard"
local gradcheck = require "gradcheck"
local ref = dofile(root .. "tests/lua/data/conv_reference.lua")

-- The generator's inputs: scale * sin(a*i + b) over the flat index, rounded to float32.
local function formula(spec, dtype)
  local n = 1
  for _, s in ipairs(spec.shape) do n = n * s end
  local v = {}
  for i = 0, n - 1 do v[i + 1] = spec.scale * math.sin(spec.a * i + spec.b) end
  return ms.tensor(v, {dtype = "float32"}):view(spec.shape):to(dtype or "float32")
end

local function flat(t)
  return t:contiguous():view(-1):tolist()
end

-- Every element within 1e-5 relative (absolute below magnitude 1).
local function check_close(got, want, what)
  T.same({table.unpack(got:size())}, want.shape, 0, what .. " shape")
  local g = flat(got)
  for i, w in ipairs(want.values) do
    local tol = 1e-5 * math.max(1, math.abs(w))
    if not (math.abs(g[i] - w) <= tol) then
      error(("%s[%d]: expected %.9g, got %.9g"):format(what, i, w, g[i]), 2)
    end
  end
end

local function run_case(case, inputs)
  local o = case.opts
  if case.op == "conv2d" then return ms.conv2d(inputs.x, inputs.w, inputs.b, o) end
  if case.op == "adaptive_avg_pool2d" then return ms.adaptive_avg_pool2d(inputs.x, case.arg) end
  return ms[case.op](inputs.x, case.arg, o)
end

for _, case in ipairs(ref) do
  T.test("reference " .. case.name, function()
    local inputs = {}
    for k, spec in pairs(case.inputs) do inputs[k] = formula(spec):requires_grad_() end
    local out = run_case(case, inputs)
    check_close(out, case.out, case.name .. " out")
    out:backward(formula(case.weight))
    for k, want in pairs(case.grads) do check_close(inputs[k].grad, want, case.name .. " grad " .. k) end
  end)
end

-- ---- gradient checks (float64) -----------------------------------------------------------------

local function rand64(...) return ms.randn({...}, {dtype = "float64"}) end

local conv_variants = {
  {x = {2, 3, 5, 6}, w = {4, 3, 3, 2}, bias = true, opts = {}},
  {x = {1, 4, 7, 6}, w = {6, 2, 3, 3}, bias = true, opts = {stride = 2, padding = 1, groups = 2}},
  {x = {2, 2, 7, 7}, w = {3, 2, 2, 3}, bias = false, opts = {stride = {2, 1}, padding = {1, 2}, dilation = {2, 1}}},
  {x = {2, 3, 4, 4}, w = {2, 3, 1, 1}, bias = true, opts = {}},
}
for i, v in ipairs(conv_variants) do
  T.test("gradcheck conv2d variant " .. i, function()
    local b = v.bias and rand64(v.w[1]) or nil
    local f = function(x, w, bb) return ms.conv2d(x, w, bb, v.opts) end
    gradcheck(f, {rand64(table.unpack(v.x)), rand64(table.unpack(v.w)), b, n = 3})
  end)
end

-- Distinct values so that no max-pool window has a tie that finite differences would split.
local function distinct64(...)
  local t = ms.randn({...}, {dtype = "float64"})
  local n = t:numel()
  local perm = ms.arange(n, {dtype = "float64"}):view(t:size())
  return perm * 0.1 + t * 0.01
end

T.test("gradcheck max_pool2d", function()
  gradcheck(function(x) return ms.max_pool2d(x, 2) end, {distinct64(2, 2, 5, 6)})
  gradcheck(function(x) return ms.max_pool2d(x, 3, {stride = 2, padding = 1, ceil_mode = true}) end,
            {distinct64(1, 2, 6, 7)})
  gradcheck(function(x) return ms.max_pool2d(x, {2, 3}, {stride = {1, 2}, dilation = {2, 1}}) end,
            {distinct64(1, 2, 6, 7)})
end)

T.test("gradcheck avg_pool2d", function()
  gradcheck(function(x) return ms.avg_pool2d(x, 2) end, {rand64(2, 2, 5, 6)})
  gradcheck(function(x) return ms.avg_pool2d(x, 3, {stride = 2, padding = 1, ceil_mode = true}) end,
            {rand64(1, 2, 6, 7)})
  gradcheck(function(x)
    return ms.avg_pool2d(x, {3, 2}, {stride = {2, 1}, padding = 1, count_include_pad = false})
  end, {rand64(1, 2, 6, 7)})
end)

T.test("gradcheck adaptive_avg_pool2d", function()
  gradcheck(function(x) return ms.adaptive_avg_pool2d(x, {3, 4}) end, {rand64(2, 2, 7, 6)})
  gradcheck(function(x) return ms.adaptive_avg_pool2d(x, 1) end, {rand64(1, 3, 4, 5)})
end)

-- ---- behaviour -----------------------------------------------------------------------------------

T.test("grad_fn names and no_grad", function()
  local x = ms.randn(1, 2, 6, 6):requires_grad_()
  local w = ms.randn(3, 2, 3, 3):requires_grad_()
  T.eq(ms.conv2d(x, w).grad_fn, "ConvolutionBackward0")
  T.eq(ms.max_pool2d(x, 2).grad_fn, "MaxPool2DWithIndicesBackward0")
  T.eq(ms.avg_pool2d(x, 2).grad_fn, "AvgPool2DBackward0")
  T.eq(ms.adaptive_avg_pool2d(x, 2).grad_fn, "AdaptiveAvgPool2DBackward0")
  T.eq(x:conv2d(w).grad_fn, "ConvolutionBackward0")
  local _ <close> = ms.no_grad()
  T.eq(ms.conv2d(x, w).grad_fn, nil)
  T.eq(ms.max_pool2d(x, 2).requires_grad, false)
end)

T.test("non-contiguous input gives the same result", function()
  local x = ms.randn(2, 3, 7, 5)
  local xt = x:transpose(3, 4):contiguous():transpose(3, 4) -- same values, other strides
  local w = ms.randn(4, 3, 3, 3)
  T.truthy(ms.equal(ms.conv2d(x, w), ms.conv2d(xt, w)))
  T.truthy(ms.equal(ms.max_pool2d(x, 2), ms.max_pool2d(xt, 2)))
  T.truthy(ms.equal(ms.avg_pool2d(x, 2), ms.avg_pool2d(xt, 2)))
end)

T.test("conv2d takes its options third when there is no bias", function()
  local x, w = ms.randn(1, 2, 7, 7), ms.randn(3, 2, 3, 3)
  T.truthy(ms.equal(ms.conv2d(x, w, {stride = 2, padding = {1, 0}}), ms.conv2d(x, w, nil, {stride = 2, padding = {1, 0}})))
  T.same({table.unpack(ms.conv2d(x, w, {stride = 2}):size())}, {1, 3, 3, 3})
end)

T.test("max_pool2d return_indices is 1-based in each plane", function()
  local x = ms.tensor({{1, 5, 2, 0}, {3, 4, 9, 8}}, {dtype = "float32"}):view(1, 1, 2, 4)
  local v, i = ms.max_pool2d(x, 2, {return_indices = true})
  T.same(flat(v), {5, 9})
  T.same(flat(i), {2, 7})
end)

T.test("conv2d on a batch larger than the thread count matches one sample at a time", function()
  local x, w, b = ms.randn(9, 3, 8, 8), ms.randn(5, 3, 3, 3), ms.randn(5)
  local all = ms.conv2d(x, w, b, {padding = 1})
  for n = 1, 9 do
    local one = ms.conv2d(x:narrow(1, n, 1), w, b, {padding = 1})
    T.truthy(ms.allclose(all:narrow(1, n, 1), one, {rtol = 1e-5, atol = 1e-6}), "sample " .. n)
  end
end)

-- float32 with groups = 1 runs the implicit GEMM (kernels/cpu/conv_gemm.c); float64 runs the im2col
-- path. Both compute the same conv, so each case compares forward and all three gradients.
T.test("conv2d float32 implicit GEMM matches the float64 im2col path", function()
  local cases = {
    {n = 1, c = 1, h = 28, w = 28, o = 32, k = {3, 3}, opts = {}},                  -- the seed's conv1
    {n = 3, c = 32, h = 12, w = 11, o = 64, k = {3, 3}, opts = {}},                 -- conv2-like, odd
    {n = 2, c = 3, h = 9, w = 7, o = 5, k = {3, 2}, opts = {stride = {2, 1}, padding = {1, 2}}},
    {n = 5, c = 4, h = 8, w = 10, o = 7, k = {3, 3}, opts = {padding = 1, dilation = 2}},
    {n = 2, c = 6, h = 5, w = 5, o = 13, k = {1, 1}, opts = {}},                    -- pointwise
    {n = 3, c = 2, h = 11, w = 13, o = 3, k = {5, 4}, opts = {stride = 3, padding = {2, 0}}},
    {n = 1, c = 1, h = 1, w = 1, o = 2, k = {1, 1}, opts = {padding = 1}},         -- all padding edges
  }
  for i, cs in ipairs(cases) do
    for _, bias in ipairs({true, false}) do
      local x = ms.randn(cs.n, cs.c, cs.h, cs.w)
      local w = ms.randn(cs.o, cs.c, cs.k[1], cs.k[2])
      local b = bias and ms.randn(cs.o) or nil
      local x32, w32 = x:clone():requires_grad_(), w:clone():requires_grad_()
      local x64, w64 = x:double():requires_grad_(), w:double():requires_grad_()
      local b32 = b and b:clone():requires_grad_(), b64
      b64 = b and b:double():requires_grad_()
      local y32, y64 = ms.conv2d(x32, w32, b32, cs.opts), ms.conv2d(x64, w64, b64, cs.opts)
      local g = ms.randn(y32:size())
      y32:backward(g)
      y64:backward(g:double())
      local what = ("case %d%s"):format(i, bias and " with bias" or "")
      local tol = {rtol = 1e-4, atol = 1e-4}
      T.truthy(ms.allclose(y32:double(), y64:detach(), tol), what .. " forward")
      T.truthy(ms.allclose(x32.grad:double(), x64.grad, tol), what .. " grad input")
      T.truthy(ms.allclose(w32.grad:double(), w64.grad, tol), what .. " grad weight")
      if bias then T.truthy(ms.allclose(b32.grad:double(), b64.grad, tol), what .. " grad bias") end
    end
  end
end)

T.test("conv2d float32 on a non-contiguous input and weight", function()
  local x = ms.randn(3, 5, 9, 8):transpose(3, 4) -- (3, 5, 8, 9), not contiguous
  local w = ms.randn(6, 3, 3, 5):transpose(2, 4)  -- (6, 5, 3, 3), not contiguous
  local y = ms.conv2d(x, w, nil, {padding = 1})
  local y64 = ms.conv2d(x:double(), w:double(), nil, {padding = 1})
  T.truthy(ms.allclose(y:double(), y64, {rtol = 1e-4, atol = 1e-4}))
end)

-- Equal values, NaN where the other has NaN.
local function same_or_nan(a, b, what)
  local fa, fb = flat(a:double()), flat(b:double())
  T.eq(#fa, #fb, what)
  for i = 1, #fa do
    local ok = (fa[i] ~= fa[i] and fb[i] ~= fb[i]) or fa[i] == fb[i]
    if not ok then error(("%s: element %d is %s, expected %s"):format(what, i, fa[i], fb[i]), 2) end
  end
end

-- max_pool2d's 2x2 / stride 2 float32 fast path against the general window loop (float64).
T.test("max_pool2d 2x2 float32 fast path matches the general path, NaN and ties included", function()
  -- rows of 8+ windows (the vector path, 8 forward and 4 backward at a time) with scalar tails
  for _, shape in ipairs({{1, 1, 4, 4}, {2, 3, 7, 9}, {3, 2, 6, 5}, {1, 1, 2, 2}, {2, 3, 7, 37},
                          {1, 2, 34, 33}, {1, 1, 5, 24}}) do
    local x = ms.randn(shape)
    local flat_x = x:view(-1)
    local W = shape[4]
    flat_x[1] = 0 / 0                  -- a NaN wins its window
    flat_x[3], flat_x[4] = 2.5, 2.5    -- a tie keeps the first in scan order
    if shape[3] > 2 then flat_x[W + 3], flat_x[W + 4] = 2.5, 2.5 end -- ties across its rows
    if W >= 12 then flat_x[W + 12] = 0 / 0 end -- a NaN in the bottom right after a larger value
    flat_x[flat_x:size(1)] = 0 / 0
    local x32, x64 = x:clone():requires_grad_(), x:double():requires_grad_()
    local v32, i32 = ms.max_pool2d(x32, 2, {return_indices = true})
    local v64, i64 = ms.max_pool2d(x64, 2, {return_indices = true})
    T.truthy(ms.equal(i32, i64), "indices " .. table.concat(shape, "x"))
    same_or_nan(v32, v64, "values")
    local g = ms.randn(v32:size())
    v32:backward(g)
    v64:backward(g:double())
    T.truthy(ms.equal(x32.grad:double(), x64.grad), "gradients")
    local _ <close> = ms.no_grad()
    same_or_nan(ms.max_pool2d(x, 2), v64, "no_grad values (no indices made)")
  end
end)

T.test("relu's gradient: the contiguous fast path and the general path agree", function()
  local x = ms.randn(4, 6)
  x[1][1], x[2][2] = 0, 0 / 0
  local a = x:clone():requires_grad_()
  local g = ms.randn(6, 4):t() -- a non-contiguous gradient takes the general path
  local ya = a:relu()
  ya:backward(g:contiguous())
  local b = x:clone():requires_grad_()
  b:relu():backward(g)
  T.truthy(ms.equal(a.grad, b.grad))
  T.eq(a.grad[1][1]:item(), 0.0)
  T.eq(a.grad[2][2]:item(), 0.0)
end)

-- ---- errors -------------------------------------------------------------------------------------

T.test("conv2d argument errors", function()
  local w = ms.randn(32, 1, 3, 3)
  T.raises(function() ms.conv2d(ms.randn(64, 784), w) end, "conv2d: input must be 4-D (N, C, H, W), got (64, 784)")
  T.raises(function() ms.conv2d(ms.randn(2, 3, 8, 8), w) end, "expected input (2, 3, 8, 8) to have 1 channels, but got 3")
  T.raises(function() ms.conv2d(ms.randn(2, 4, 8, 8), ms.randn(5, 2, 3, 3), nil, {groups = 3}) end,
           "conv2d: out_channels 5", "groups 3")
  T.raises(function() ms.conv2d(ms.randn(2, 4, 8, 8), ms.randn(6, 2, 3, 3), nil, {groups = 0}) end,
           "groups must be positive, got 0")
  T.raises(function() ms.conv2d(ms.randn(1, 1, 2, 2), w) end, "kernel size can't be greater than actual input size")
  T.raises(function() ms.conv2d(ms.randn(1, 1, 8, 8), w, ms.randn(5)) end, "bias must be 1-D with 32 elements")
  T.raises(function() ms.conv2d(ms.randn(1, 1, 8, 8), w:double()) end, "weight dtype float64 does not match input dtype float32")
  T.raises(function() ms.conv2d(ms.randn(1, 1, 8, 8):long(), w) end, "input must be float32 or float64, got int64")
  T.raises(function() ms.conv2d(ms.randn(1, 1, 8, 8), w, nil, {stride = 0}) end, "stride must be >= 1, got (0, 0)")
  T.raises(function() ms.conv2d(ms.randn(1, 1, 8, 8), w, nil, {padding = {1, 2, 3}}) end,
           "option 'padding' must be an integer or a pair {h, w}")
  T.raises(function() ms.conv2d(ms.randn(1, 1, 8, 8), w, nil, {strides = 1}) end, "strides")
  T.raises(function() ms.conv2d(ms.randn(1, 1, 8, 8), "w") end, "conv2d")
end)

T.test("pooling argument errors", function()
  local x = ms.randn(1, 2, 5, 5)
  T.raises(function() ms.max_pool2d(ms.randn(5, 5), 2) end, "max_pool2d: input must be 4-D (N, C, H, W), got (5, 5)")
  T.raises(function() ms.max_pool2d(x, 2, {padding = 2}) end, "pad should be smaller than or equal to half of kernel size")
  T.raises(function() ms.max_pool2d(x, 7) end, "max_pool2d: given input size (2 x 5 x 5)", "too small")
  T.raises(function() ms.avg_pool2d(x, 0) end, "avg_pool2d: kernel_size must be >= 1, got (0, 0)")
  T.raises(function() ms.avg_pool2d(x, "2") end, "avg_pool2d: kernel_size must be an integer or a pair")
  T.raises(function() ms.adaptive_avg_pool2d(x, 0) end, "adaptive_avg_pool2d: output_size must be >= 1")
  T.raises(function() ms.adaptive_avg_pool2d(ms.randn(2, 5, 5), 2) end, "adaptive_avg_pool2d: input must be 4-D")
end)

-- ---- the MNIST seed's shapes (batch 64): run forward and backward; print a speed figure -------------

T.test("seed shapes run", function()
  local x = ms.randn(64, 1, 28, 28)
  local w1, b1 = (ms.randn(32, 1, 3, 3) * 0.3):requires_grad_(), ms.zeros(32):requires_grad_()
  local w2, b2 = (ms.randn(64, 32, 3, 3) * 0.06):requires_grad_(), ms.zeros(64):requires_grad_()
  local h1 = ms.conv2d(x, w1, b1):relu()
  T.same({table.unpack(h1:size())}, {64, 32, 26, 26})
  local h2 = ms.conv2d(h1, w2, b2)
  T.same({table.unpack(h2:size())}, {64, 64, 24, 24})
  local p = ms.max_pool2d(h2, 2)
  T.same({table.unpack(p:size())}, {64, 64, 12, 12})
  p:backward(ms.ones(p:size()))
  T.same({table.unpack(w1.grad:size())}, {32, 1, 3, 3})
  T.same({table.unpack(w2.grad:size())}, {64, 32, 3, 3})
  T.same({table.unpack(b2.grad:size())}, {64})
  -- conv2 alone, forward and backward (grad of input and weight and bias): 3 GEMM-sized passes
  local h1d = h1:detach():requires_grad_()
  local reps, flops = 3, 3 * 2 * 64 * 64 * 24 * 24 * 32 * 9
  local g = ms.ones(64, 64, 24, 24)
  ms.conv2d(h1d, w2, b2):backward(g) -- warm-up
  local t0 = ms.perf_counter()
  for _ = 1, reps do ms.conv2d(h1d, w2, b2):backward(g) end
  local dt = (ms.perf_counter() - t0) / reps
  print(("conv2 (64x32x26x26 -> 64x64x24x24) forward+backward: %.1f ms, %.1f GFLOP/s on %d threads")
        :format(dt * 1e3, flops / dt / 1e9, ms.get_num_threads()))
end)

T.finish()
