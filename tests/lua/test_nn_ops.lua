-- test_nn_ops.lua: the functional NN layers: values and gradients against PyTorch
-- (data/nn_ops_reference.lua, from gen_nn_ops_reference.py), finite-difference gradient checks
-- in float64, dropout's determinism and statistics, and the errors for bad arguments. Class
-- targets and embedding indices are 1-based here, as everywhere in Lua.
local T = require "testing"
local ms = require "moonshard"
local gradcheck = require "gradcheck"
local F = require "moonshard.functional"
local REF = dofile("tests/lua/data/nn_ops_reference.lua")

local function from_ref(r, dtype)
  return ms.tensor(r.values, {dtype = dtype}):reshape(r.shape)
end

-- Each reference case rebuilt: I holds the float32 inputs (requiring grad), extras and indices.
local CALLS = {
  softmax_d2 = function(I) return ms.softmax(I.x, 2) end,
  softmax_d1_3d = function(I) return I.x:softmax(1) end,
  log_softmax_d2 = function(I) return ms.log_softmax(I.x, 2) end,
  log_softmax_d2_3d = function(I) return I.x:log_softmax(2) end,
  log_softmax_last_3d = function(I) return ms.log_softmax(I.x, -1) end,
  gelu_tanh = function(I) return ms.gelu(I.x, {approximate = "tanh"}) end,
  linear_bias = function(I) return ms.linear(I.x, I.w, I.b) end,
  linear_nobias_3d = function(I) return ms.linear(I.x, I.w) end,
  embedding = function(I) return ms.embedding(I.idx, I.w) end,
  embedding_padding = function(I) return ms.embedding(I.idx, I.w, {padding_idx = 3}) end,
  layer_norm = function(I) return ms.layer_norm(I.x, 4, I.w, I.b) end,
  layer_norm_2d_noaffine = function(I) return ms.layer_norm(I.x, {3, 4}, nil, nil, {eps = 1e-3}) end,
  batch_norm_train = function(I)
    return ms.batch_norm(I.x, I.rm, I.rv, I.w, I.b, {training = true, momentum = 0.2})
  end,
  batch_norm_eval = function(I) return ms.batch_norm(I.x, I.rm, I.rv, I.w, I.b) end,
  batch_norm_train_2d = function(I) return ms.batch_norm(I.x, nil, nil, nil, nil, {training = true}) end,
  nll_mean = function(I) return ms.nll_loss(I.x, I.t) end,
  nll_sum_weight = function(I) return ms.nll_loss(I.x, I.t, {weight = I.w, reduction = "sum"}) end,
  nll_mean_weight_ignore = function(I) return ms.nll_loss(I.x, I.t, {weight = I.w}) end,
  nll_none_ignore = function(I) return ms.nll_loss(I.x, I.t, {reduction = "none"}) end,
  nll_3d = function(I) return ms.nll_loss(I.x, I.t) end,
  ce_mean = function(I) return ms.cross_entropy(I.x, I.t) end,
  ce_none_weight = function(I) return ms.cross_entropy(I.x, I.t, {weight = I.w, reduction = "none"}) end,
  ce_smooth_ignore = function(I) return ms.cross_entropy(I.x, I.t, {label_smoothing = 0.2}) end,
  ce_smooth_weight_ignore = function(I)
    return ms.cross_entropy(I.x, I.t, {weight = I.w, label_smoothing = 0.3})
  end,
  ce_smooth_sum_3d = function(I) return ms.cross_entropy(I.x, I.t, {label_smoothing = 0.1, reduction = "sum"}) end,
  ce_smooth_none = function(I) return ms.cross_entropy(I.x, I.t, {label_smoothing = 0.1, reduction = "none"}) end,
  softplus_beta_threshold = function(I) return F.softplus(I.x, 2, 3) end,
  mse_mean = function(I) return ms.mse_loss(I.a, I.b) end,
  mse_sum = function(I) return ms.mse_loss(I.a, I.b, {reduction = "sum"}) end,
  mse_none = function(I) return ms.mse_loss(I.a, I.b, {reduction = "none"}) end,
}

-- every activation of the engine's table, by its function name (gelu: the exact form)
local ACTIVATION = {}
for _, row in ipairs(ms._op_info.activation) do
  ACTIVATION[row.name] = true
  CALLS[row.name] = function(I) return ms[row.name](I.x) end
end

-- Elementwise |got - want| <= rtol |want| + atol, naming the first element that is not.
local function check_close(what, got, want_ref, rtol, atol)
  local want = from_ref(want_ref, "float32")
  T.same({table.unpack(got:size())}, want_ref.shape, 0, what .. " shape")
  local g, w = got:detach():reshape(-1):tolist(), want:reshape(-1):tolist()
  for i = 1, #w do
    if not (math.abs(g[i] - w[i]) <= rtol * math.abs(w[i]) + atol) then
      error(("%s: element %d: got %.9g, want %.9g"):format(what, i, g[i], w[i]), 2)
    end
  end
end

-- Reference cases run in the order of their names, so failures are reproducible.
local names = {}
for name in pairs(CALLS) do names[#names + 1] = name end
table.sort(names)
for _, name in ipairs(names) do
  T.test("PyTorch reference: " .. name, function()
    local case = assert(REF[name], "no reference data for " .. name)
    local I = {}
    for k, r in pairs(case.inputs) do I[k] = from_ref(r, "float32"):requires_grad_() end
    for k, r in pairs(case.extra) do I[k] = from_ref(r, "float32") end
    for k, r in pairs(case.ints) do I[k] = from_ref(r, "int64") end
    local out = CALLS[name](I)
    if ACTIVATION[name] then T.eq(out.grad_fn, case.grad_fn, name .. ": PyTorch's grad_fn") end
    check_close(name .. " output", out, case.out, 1e-5, 1e-6)
    out:backward(from_ref(case.gout, "float32"))
    for k, r in pairs(case.grads) do check_close(name .. " grad of " .. k, I[k].grad, r, 1e-5, 1e-5) end
    if name == "batch_norm_train" then
      check_close("running_mean", I.rm, REF.batch_norm_running.mean, 1e-5, 1e-6)
      check_close("running_var", I.rv, REF.batch_norm_running.var, 1e-5, 1e-6)
    end
  end)
end

-- ---- finite-difference gradient checks (float64) ------------------------------------------------

local function randn(...) return ms.randn({...}, {dtype = "float64"}) end

T.test("gradcheck: softmax, log_softmax and every activation of the table", function()
  ms.manual_seed(1)
  local x = randn(3, 4, 2)
  for _, d in ipairs({1, 2, 3, -1}) do
    gradcheck(function(a) return ms.softmax(a, d) end, {x})
    gradcheck(function(a) return ms.log_softmax(a, d) end, {x})
  end
  gradcheck(function(a) return ms.log_softmax(a:t(), 1) end, {randn(4, 3)}) -- non-contiguous input
  gradcheck(function(a) return ms.gelu(a, {approximate = "tanh"}) end, {x})
  for _, row in ipairs(ms._op_info.activation) do gradcheck(function(a) return ms[row.name](a) end, {x}) end
end)

-- The float32 GELU(tanh) and SiLU run a polynomial exp (kernels/cpu/activation_f32*.c): within a
-- few float32 ulps of the float64 values, forward and backward, over a range wide enough to
-- reach both clamps, at every vector length's tail, and with PyTorch's values at the extremes.
T.test("float32 GELU(tanh) and SiLU agree with float64 to a few ulps, and keep PyTorch's extremes", function()
  local xs = {}
  for i = 0, 2002 do xs[#xs + 1] = -100 + 200 * (i / 2002) ^ 3 end -- dense near -100, sparse at 100
  for i = -300, 300 do xs[#xs + 1] = i / 40 end
  local x64 = ms.tensor(xs, { dtype = ms.float64 })
  local cases = {
    { "gelu", function(x) return F.gelu(x, { approximate = "tanh" }) end },
    { "silu", F.silu },
  }
  for _, c in ipairs(cases) do
    local name, fn = c[1], c[2]
    local x32 = x64:float():requires_grad_()
    local y32 = fn(x32)
    y32:backward(ms.ones_like(y32))
    local xd = x64:clone():requires_grad_()
    local yd = fn(xd)
    yd:backward(ms.ones_like(yd))
    -- forward relative to each value (floor 1e-6: GELU's tail near -inf is conditioned by u's
    -- own rounding, measured 1.9e-6 where libm's tanhf formula was 7% off); the derivative,
    -- which crosses zero, to its scale 1 (measured 1.7e-7)
    local function worst(got, want, floor)
      return ((got:double() - want):abs() / want:abs():clamp(floor, math.huge)):max():item()
    end
    T.truthy(worst(y32, yd, 1e-6) < 4e-6, name .. " forward: " .. worst(y32, yd, 1e-6))
    T.truthy(worst(x32.grad, xd.grad, 1) < 1e-6, name .. " backward: " .. worst(x32.grad, xd.grad, 1))
  end
  local edge = ms.tensor({ -math.huge, -1e30, -50, 50, 1e30, math.huge, 0 / 0 })
  local g = F.gelu(edge, { approximate = "tanh" }):tolist()
  T.truthy(g[1] ~= g[1], "gelu(-inf) is NaN as in PyTorch, got " .. g[1])
  T.eq(g[2], 0.0)
  T.eq(g[3], 0.0)
  T.eq(g[4], 50.0)
  T.eq(g[5], edge[5]:item()) -- 1e30 as a float32
  T.eq(g[6], math.huge)
  T.truthy(g[7] ~= g[7], "gelu(NaN) is NaN")
  local s = F.silu(edge):tolist()
  T.truthy(s[3] < 0 and s[3] > -1e-19, "silu(-50) = -50 / (1 + e^50) = -9.6e-21, got " .. s[3])
  T.eq(s[6], math.huge)
  T.truthy(s[7] ~= s[7], "silu(NaN) is NaN")
end)

T.test("gradcheck: linear with and without bias, 1-D to 3-D inputs, transposed weight", function()
  ms.manual_seed(2)
  gradcheck(function(x, w, b) return ms.linear(x, w, b) end, {randn(4, 5), randn(3, 5), randn(3)})
  gradcheck(function(x, w) return ms.linear(x, w) end, {randn(2, 4, 5), randn(3, 5)})
  gradcheck(function(x, w, b) return ms.linear(x, w, b) end, {randn(5), randn(3, 5), randn(3)})
  gradcheck(function(x, w) return ms.linear(x, w:t()) end, {randn(4, 5), randn(5, 3)})
end)

T.test("gradcheck: embedding (repeated indices accumulate, padding row gets none)", function()
  ms.manual_seed(3)
  local idx = ms.tensor({{1, 3, 3}, {6, 1, 2}})
  gradcheck(function(w) return ms.embedding(idx, w) end, {randn(6, 4)})
  local w = randn(6, 4):requires_grad_()
  ms.embedding(idx, w, {padding_idx = 3}):sum():backward()
  T.same(w.grad[3]:tolist(), {0.0, 0.0, 0.0, 0.0})
  T.same(w.grad[1]:tolist(), {2.0, 2.0, 2.0, 2.0})
  T.same(w.grad[4]:tolist(), {0.0, 0.0, 0.0, 0.0})
end)

T.test("gradcheck: layer_norm and batch_norm (training and evaluation)", function()
  ms.manual_seed(4)
  gradcheck(function(x, w, b) return ms.layer_norm(x, 4, w, b) end, {randn(3, 4), randn(4), randn(4)})
  gradcheck(function(x) return ms.layer_norm(x, {2, 3}) end, {randn(2, 2, 3)})
  gradcheck(function(x, w, b) return ms.batch_norm(x, nil, nil, w, b, {training = true}) end,
    {randn(4, 3, 2), randn(3), randn(3)})
  gradcheck(function(x) return ms.batch_norm(x, nil, nil, nil, nil, {training = true}) end, {randn(5, 2)})
  local rm, rv = randn(3), ms.rand({3}, {dtype = "float64"}) + 0.5
  gradcheck(function(x, w, b) return ms.batch_norm(x, rm, rv, w, b) end, {randn(4, 3, 2), randn(3), randn(3)})
end)

T.test("gradcheck: nll_loss, cross_entropy, mse_loss over reductions, weights, ignore_index", function()
  ms.manual_seed(5)
  local t = ms.tensor({1, 4, -100, 2, 4})
  local w = ms.tensor({0.5, 1.0, 2.0, 1.5}, {dtype = "float64"})
  for _, red in ipairs({"mean", "sum", "none"}) do
    gradcheck(function(x) return ms.nll_loss(x, t, {reduction = red}) end, {randn(5, 4)})
    gradcheck(function(x) return ms.nll_loss(x, t, {weight = w, reduction = red}) end, {randn(5, 4)})
    for _, s in ipairs({0, 0.25}) do
      gradcheck(function(x) return ms.cross_entropy(x, t, {reduction = red, label_smoothing = s}) end, {randn(5, 4)})
      gradcheck(function(x)
        return ms.cross_entropy(x, t, {weight = w, reduction = red, label_smoothing = s})
      end, {randn(5, 4)})
    end
    gradcheck(function(a, b) return ms.mse_loss(a, b, {reduction = red}) end, {randn(3, 4), randn(3, 4)})
  end
  local t3 = ms.tensor({{1, 4, 2}, {3, 3, 1}})
  gradcheck(function(x) return ms.cross_entropy(x, t3, {label_smoothing = 0.1}) end, {randn(2, 4, 3)})
  gradcheck(function(x) return ms.nll_loss(x, t3) end, {randn(2, 4, 3)})
  gradcheck(function(x) return ms.cross_entropy(x, ms.tensor(2)) end, {randn(4)})
  gradcheck(function(a, b) return ms.mse_loss(a, b) end, {randn(3, 4), randn(4)}) -- broadcast
end)

T.test("gradcheck: dropout is linear in x with its mask fixed", function()
  local x = randn(50):requires_grad_()
  ms.manual_seed(6)
  local y = ms.dropout(x, {p = 0.3})
  y:backward(ms.ones({50}, {dtype = "float64"}))
  local kept = y:ne(0)
  T.truthy(ms.equal(x.grad, kept:double() / 0.7))
  T.truthy(ms.allclose(y, x:detach() * kept:double() / 0.7))
end)

-- ---- dropout ---------------------------------------------------------------------------------------

T.test("dropout: the same seed gives the same mask; the stream advances", function()
  local x = ms.ones({1000})
  ms.manual_seed(7)
  local a, b = ms.dropout(x, {p = 0.5}), ms.dropout(x, {p = 0.5})
  ms.manual_seed(7)
  local c = ms.dropout(x, {p = 0.5})
  T.truthy(ms.equal(a, c))
  T.truthy(not ms.equal(a, b))
end)

T.test("dropout: about p of the elements are zeroed, the rest scaled by 1/(1-p)", function()
  ms.manual_seed(8)
  local n = 100000
  for _, p in ipairs({0.1, 0.5, 0.8}) do
    local y = ms.dropout(ms.ones({n}), {p = p})
    local zeros = y:eq(0):sum():item()
    T.near(zeros / n, p, 0.01)
    local kept = y:ne(0)
    T.near(y:sum():item() / (n - zeros), 1 / (1 - p), 1e-4)
    T.eq(kept:sum():item(), n - zeros)
  end
end)

T.test("dropout: p = 0 or evaluation returns the input; p = 1 zeroes everything", function()
  local x = ms.randn(4, 5)
  T.truthy(ms.equal(ms.dropout(x, {p = 0}), x))
  T.truthy(ms.equal(ms.dropout(x, {p = 0.5, training = false}), x))
  T.truthy(ms.equal(ms.dropout(x, {p = 1}), ms.zeros({4, 5})))
  T.raises(function() ms.dropout(x, {p = 1.5}) end, "dropout: probability has to be between 0 and 1, but got 1.5")
end)

-- ---- grad_fn names, options and running statistics ---------------------------------------------------

T.test("grad_fn names follow PyTorch's", function()
  local x = ms.randn(3, 4, {requires_grad = true})
  local w, b = ms.randn(2, 4, {requires_grad = true}), ms.randn(2, {requires_grad = true})
  local t = ms.tensor({1, 2, 4})
  T.eq(ms.softmax(x, 2).grad_fn, "SoftmaxBackward0")
  T.eq(ms.log_softmax(x, 2).grad_fn, "LogSoftmaxBackward0")
  T.eq(ms.gelu(x).grad_fn, "GeluBackward0")
  T.eq(ms.silu(x).grad_fn, "SiluBackward0")
  T.eq(ms.dropout(x).grad_fn, "NativeDropoutBackward0")
  T.eq(ms.linear(x, w, b).grad_fn, "AddmmBackward0")
  T.eq(ms.linear(x, w).grad_fn, "MmBackward0")
  T.eq(ms.embedding(t, ms.randn(4, 2, {requires_grad = true})).grad_fn, "EmbeddingBackward0")
  T.eq(ms.layer_norm(x, 4).grad_fn, "NativeLayerNormBackward0")
  T.eq(ms.batch_norm(x, nil, nil, nil, nil, {training = true}).grad_fn, "NativeBatchNormBackward0")
  T.eq(ms.nll_loss(x, t).grad_fn, "NllLossBackward0")
  T.eq(ms.cross_entropy(x, t).grad_fn, "NllLossBackward0")
  T.eq(ms.mse_loss(x, x * 2).grad_fn, "MseLossBackward0")
  local _ <close> = ms.no_grad()
  T.eq(ms.log_softmax(x, 2).requires_grad, false)
end)

T.test("batch_norm: evaluation reads the running statistics and leaves them alone", function()
  local x = ms.randn(6, 2, 3)
  local rm, rv = ms.tensor({0.5, -1.0}), ms.tensor({2.0, 0.5})
  local y = ms.batch_norm(x, rm, rv)
  local want = (x - rm:view(1, 2, 1)) / (rv:view(1, 2, 1) + 1e-5):sqrt()
  T.truthy(ms.allclose(y, want, {atol = 1e-6}))
  T.same(rm:tolist(), {0.5, -1.0})
  local r = ms.batch_norm(x, rm, rv, nil, nil, {training = true, momentum = 0.5})
  T.truthy(ms.allclose(r:mean(1):mean(2), ms.zeros({2}), {atol = 1e-6}))
  -- running statistics: halfway to the batch's mean and unbiased variance
  local per_channel = x:permute(2, 1, 3):reshape(2, -1)
  T.truthy(ms.allclose(rm, ms.tensor({0.25, -0.5}) + per_channel:mean(2) * 0.5, {atol = 1e-6}))
  T.truthy(ms.allclose(rv, ms.tensor({1.0, 0.25}) + per_channel:var(2) * 0.5, {atol = 1e-5}))
end)

-- ---- errors --------------------------------------------------------------------------------------------

T.test("errors name the op, the argument and what was expected (1-based targets and indices)", function()
  local x, t = ms.randn(3, 10), ms.tensor({1, 11, 2})
  T.raises(function() ms.nll_loss(x, t) end,
    "nll_loss: target 11 is out of bounds for 10 classes (targets are 1-based class indices)")
  T.raises(function() ms.cross_entropy(x, ms.tensor({0, 1, 2})) end,
    "cross_entropy: target 0 is out of bounds for 10 classes (targets are 1-based class indices)")
  T.raises(function() ms.nll_loss(x, ms.tensor({1.0, 2.0, 3.0})) end, "nll_loss: target must be an int64 tensor, got float32")
  T.raises(function() ms.nll_loss(x, ms.tensor({1, 2})) end, "nll_loss: expected input (N, C, d...)", "(3, 10)", "(2,)")
  T.raises(function() ms.nll_loss(x, t, {reduction = "avg"}) end, "nll_loss: option 'reduction': expected one of")
  T.raises(function() ms.nll_loss(x, ms.tensor({1, 2, 3}), {weight = ms.ones({9})}) end,
    "nll_loss: weight must have shape (10,), got (9,)")
  T.raises(function() ms.embedding(ms.tensor({1, 7}), ms.randn(6, 2)) end,
    "embedding: index 7 is out of range for 6 embeddings (indices are 1-based)")
  T.raises(function() ms.embedding(ms.tensor({0}), ms.randn(6, 2)) end, "index 0 is out of range")
  T.raises(function() ms.embedding(ms.tensor({1}), ms.randn(6, 2), {padding_idx = 0}) end, "padding_idx")
  T.raises(function() ms.linear(ms.randn(4, 5), ms.randn(3, 6)) end,
    "linear: input shape (4, 5) and weight shape (3, 6) cannot be multiplied")
  T.raises(function() ms.linear(ms.randn(4, 5), ms.randn(3, 5), ms.randn(4)) end, "linear: bias must have shape (3,), got (4,)")
  T.raises(function() ms.linear(ms.randn(4, 5), ms.randn(3, 5):double()) end, "linear: weight must have the input's dtype float32, got float64")
  T.raises(function() ms.softmax(ms.randn(2, 3), 3) end, "softmax", "dim")
  T.raises(function() ms.softmax(ms.randn(2, 3)) end, "softmax: the dim argument is required")
  T.raises(function() ms.log_softmax(ms.tensor({1, 2}), 1) end, "log_softmax: input must be float32, float64, bfloat16 or float16, got int64")
  T.raises(function() ms.layer_norm(ms.randn(2, 3), 4) end, "layer_norm: normalized_shape (4,) must match the last dims of the input (2, 3)")
  T.raises(function() ms.batch_norm(ms.randn(2, 3)) end, "batch_norm: running_mean and running_var are required")
  T.raises(function() ms.batch_norm(ms.randn(1, 3), nil, nil, nil, nil, {training = true}) end,
    "expected more than 1 value per channel when training")
  T.raises(function() ms.gelu(ms.randn(2), {approximate = "fast"}) end, "gelu: option 'approximate': expected one of \"none\", \"tanh\"")
  T.raises(function() ms.cross_entropy(x, ms.tensor({1, 2, 3}), {label_smoothing = 2}) end,
    "cross_entropy: label_smoothing must be between 0.0 and 1.0")
end)

T.finish()
