-- test_nn_lowp.lua: the NN layers in bfloat16 and float16 on the CPU (activations, softmax,
-- layer and batch norm, embedding, cross entropy): the output keeps the input's dtype and each
-- gradient its input's, as PyTorch's; values equal the float32 op on the same (rounded) inputs
-- rounded once, and PyTorch 1.13's values (data/nn_lowp_reference.lua, from
-- gen_nn_lowp_reference.py) within the format's rounding; a small transformer-like block in
-- bfloat16 trains as float32 does.
local T = require "testing"
local ms = require "moonshard"
local F = require "moonshard.functional"
local REF = dofile("tests/lua/data/nn_lowp_reference.lua")

-- Each op rebuilt from its inputs I (the float ones in their case's dtypes, the indices int64).
local CALLS = {
  gelu = function(I) return F.gelu(I.x) end,
  gelu_tanh = function(I) return F.gelu(I.x, {approximate = "tanh"}) end,
  silu = function(I) return F.silu(I.x) end,
  hardswish = function(I) return F.hardswish(I.x) end,
  softmax = function(I) return F.softmax(I.x, 2) end,
  log_softmax = function(I) return F.log_softmax(I.x, 2) end,
  layer_norm = function(I) return F.layer_norm(I.x, {16}, I.w, I.b) end,
  embedding = function(I) return F.embedding(I.idx, I.w) end,
  batch_norm = function(I) return F.batch_norm(I.x, ms.zeros(3), ms.ones(3), I.w, I.b, true) end,
  cross_entropy = function(I) return F.cross_entropy(I.x, I.target) end,
}

local function from_ref(r, dtype)
  return ms.tensor(r.values, {dtype = dtype}):reshape(r.shape)
end

-- max |a - b| over max |b| (both read as float32).
local function rel(a, b)
  local af, bf = a:to("float32"), b:to("float32")
  return (af - bf):abs():max():item() / math.max(bf:abs():max():item(), 1e-30)
end

-- One ulp at the largest magnitude, relative: bfloat16 keeps 8 significant bits, float16 11, so
-- two values one rounding apart differ by at most 2^-7 (2^-10) of the larger.
local ULP = { bfloat16 = 2 ^ -7, float16 = 2 ^ -10 }

-- Runs case c's op on its inputs in dtypes; returns the inputs (leaves), the output and the
-- gradient fed back.
local function run(c, dtypes)
  local I, leaves = {}, {}
  for k, r in pairs(c.inputs) do
    I[k] = from_ref(r, "float32"):to(dtypes[k]):requires_grad_()
    leaves[k] = I[k]
  end
  for k, r in pairs(c.ints) do I[k] = from_ref(r, "int64") end
  local y = CALLS[c.op](I)
  local g = from_ref(c.gout, "float32"):to(y.dtype)
  y:backward(g)
  return leaves, y
end

-- The ops whose backward reads their (rounded) output.
local FROM_OUTPUT = { softmax = true, log_softmax = true }

local function param_key(c, k)
  return (c.op == "layer_norm" or c.op == "batch_norm") and (k == "w" or k == "b")
end

for _, c in ipairs(REF) do
  local label = ("%s, %s input, %s parameters"):format(c.op, c.dtype, c.param_dtype)
  local dtypes, wide = {}, {}
  for k in pairs(c.inputs) do
    dtypes[k] = param_key(c, k) and c.param_dtype or c.dtype
    wide[k] = "float32"
  end

  -- The kernels widen to float32, run the float32 body and round once (or the op widens as a
  -- whole), so the 16-bit result is the float32 one rounded, bit for bit: no tolerance. Except
  -- softmax's gradient, computed (as PyTorch's) from the rounded 16-bit output: one ulp.
  T.test(label .. ": equals float32 on the same inputs, rounded once", function()
    local lo, yl = run(c, dtypes)
    local hi, yh = run(c, wide)
    T.eq(yl.dtype, c.dtype, "output dtype")
    T.truthy(ms.equal(yl, yh:to(c.dtype)), ("output differs by %g"):format(rel(yl, yh)))
    for k, leaf in pairs(lo) do
      T.eq(leaf.grad.dtype, dtypes[k], k .. " grad dtype")
      local want = hi[k].grad:to(dtypes[k])
      if FROM_OUTPUT[c.op] then
        T.truthy(rel(leaf.grad, want) <= ULP[c.dtype], ("%s grad differs by %g"):format(k, rel(leaf.grad, want)))
      else
        T.truthy(ms.equal(leaf.grad, want), ("%s grad differs by %g"):format(k, rel(leaf.grad, want)))
      end
    end
  end)

  -- Against PyTorch: "float32 rounded" cases are float32 results rounded once, and "torch" cases
  -- torch's own bfloat16 kernels, which also compute in float32 and round once (a few round an
  -- intermediate too); either way two float32 computations may round to neighbouring 16-bit
  -- values, so allow one ulp at the largest element (measured: at most 0.99 ulp).
  T.test(label .. ": matches PyTorch 1.13 (" .. c.source .. ")", function()
    local lo, y = run(c, dtypes)
    local tol = ULP[c.dtype]
    T.truthy(rel(y, from_ref(c.out, "float32")) <= tol, ("output off by %g"):format(rel(y, from_ref(c.out, "float32"))))
    for k, leaf in pairs(lo) do
      local want = from_ref(c.grads[k], "float32")
      T.truthy(rel(leaf.grad, want) <= tol, ("%s grad off by %g"):format(k, rel(leaf.grad, want)))
    end
  end)
end

-- (CUDA computes these natively too: test_cuda_nn_lowp.lua compares it with the CPU.)

T.test("avg_pool2d and adaptive_avg_pool2d in 16 bits on the CPU: float32's pool rounded once", function()
  for _, dt in ipairs({ "bfloat16", "float16" }) do
    ms.manual_seed(14)
    local x = ms.randn(2, 3, 9, 7):to(dt)
    local pools = {
      avg = function(t) return F.avg_pool2d(t, 3, { stride = 2, padding = 1 }) end,
      adaptive = function(t) return F.adaptive_avg_pool2d(t, { 4, 3 }) end,
    }
    for name, pool in pairs(pools) do
      local lo, hi = x:detach():requires_grad_(), x:float():requires_grad_()
      local yl, yh = pool(lo), pool(hi)
      T.eq(yl.dtype, dt, name)
      T.truthy(ms.equal(yl, yh:to(dt)), name .. " " .. dt .. " output")
      local g = ms.randn(table.unpack(yh:size())):to(dt)
      yl:backward(g)
      yh:backward(g:float())
      T.eq(lo.grad.dtype, dt, name)
      T.truthy(ms.equal(lo.grad, hi.grad:to(dt)), name .. " " .. dt .. " grad")
    end
  end
end)

T.test("layer_norm refuses a float64 weight on a bfloat16 input, naming both dtypes", function()
  local x = ms.randn(2, 4):bfloat16()
  T.raises(function() F.layer_norm(x, {4}, ms.ones(4):double()) end, "weight must have the input's dtype bfloat16, got float64")
end)

T.test("long rows and many rows: layer_norm and gelu in bfloat16 over several work blocks", function()
  ms.manual_seed(7)
  local x = ms.randn(33, 1500):bfloat16()
  local w, b = ms.randn(1500):bfloat16(), ms.randn(1500):bfloat16()
  local lo = {x:detach():requires_grad_(), w:detach():requires_grad_(), b:detach():requires_grad_()}
  local hi = {x:float():requires_grad_(), w:float():requires_grad_(), b:float():requires_grad_()}
  local yl = F.gelu(F.layer_norm(lo[1], {1500}, lo[2], lo[3]), "tanh")
  local yh = F.gelu(F.layer_norm(hi[1], {1500}, hi[2], hi[3]):bfloat16():float(), "tanh")
  T.truthy(ms.equal(yl, yh:bfloat16()), "forward")
  local g = ms.randn(33, 1500):bfloat16()
  yl:backward(g)
  yh:backward(g:float())
  for i = 1, 3 do
    -- float32 ran the gelu backward on its own unrounded gradient path: one rounding apart
    T.truthy(rel(lo[i].grad, hi[i].grad) <= 2 * ULP.bfloat16, ("grad %d off by %g"):format(i, rel(lo[i].grad, hi[i].grad)))
  end
end)

T.test("softmax and log_softmax in 16-bit over a middle dim (rows strided in memory)", function()
  ms.manual_seed(8)
  for _, dt in ipairs({ "bfloat16", "float16" }) do
    local x = (ms.randn(7, 5, 3) * 3):to(dt)
    for _, f in ipairs({ F.softmax, F.log_softmax }) do
      local y = f(x, 2)
      T.eq(y.dtype, dt)
      T.truthy(ms.equal(y, f(x:float(), 2):to(dt)), dt)
    end
  end
end)

T.test("batch_norm in bfloat16 updates bfloat16 running statistics as float32's, rounded once", function()
  ms.manual_seed(4)
  local x = ms.randn(6, 3, 5):bfloat16()
  local rm, rv = ms.randn(3):bfloat16(), ms.rand(3):bfloat16() + 0.5
  local rm32, rv32 = rm:float(), rv:float()
  local y = F.batch_norm(x, rm, rv, nil, nil, true, 0.3)
  local y32 = F.batch_norm(x:float(), rm32, rv32, nil, nil, true, 0.3)
  T.eq(y.dtype, "bfloat16")
  T.eq(rm.dtype, "bfloat16")
  T.truthy(ms.equal(y, y32:bfloat16()), "output")
  T.truthy(ms.equal(rm, rm32:bfloat16()) and ms.equal(rv, rv32:bfloat16()), "running statistics")
  T.raises(function() F.batch_norm(x:float(), nil, nil, ms.ones(3):bfloat16(), nil, true) end,
    "batch_norm", "weight must have the input's dtype float32, got bfloat16")
end)

-- A transformer-like block (tied embedding, attention by softmax, pre-LayerNorm MLP with GELU
-- tanh, cross entropy) with parameters and inputs in bfloat16, as FSDP's mixed precision runs it,
-- against the same parameters in float32: bfloat16 keeps about 3 significant digits, and the
-- loss sums a few hundred rounded terms, so the loss agrees within 2e-2 relative and each
-- gradient within 5e-2 of its largest element.
local function block(P, idx, target)
  local h = F.embedding(idx, P.emb) + P.pos -- (T, D)
  local a = F.layer_norm(h, {16}, P.ln1_w, P.ln1_b)
  local att = F.softmax(a:mm(a:t()) / 4, 2)
  h = h + att:mm(a)
  local m = F.linear(F.gelu(F.linear(F.layer_norm(h, {16}, P.ln2_w, P.ln2_b), P.fc1), "tanh"), P.fc2)
  h = h + m
  return F.cross_entropy(F.linear(h, P.emb), target)
end

T.test("a transformer-like block in bfloat16 gives float32's loss and gradients", function()
  ms.manual_seed(19)
  local V, D, Tn = 20, 16, 12
  local shapes = { emb = {V, D}, pos = {Tn, D}, ln1_w = {D}, ln1_b = {D}, ln2_w = {D}, ln2_b = {D},
                   fc1 = {4 * D, D}, fc2 = {D, 4 * D} }
  local lo, hi = {}, {}
  for k, s in pairs(shapes) do
    local v = (ms.randn(table.unpack(s)) * 0.3):bfloat16()
    if k:match("_w$") then v = v + 1 end
    lo[k] = v:detach():requires_grad_()
    hi[k] = v:float():requires_grad_()
  end
  local idx = ms.randint(1, V + 1, {Tn})
  local target = ms.randint(1, V + 1, {Tn})
  local ll, lh = block(lo, idx, target), block(hi, idx, target)
  T.eq(ll.dtype, "bfloat16")
  T.truthy(math.abs(ll:item() - lh:item()) <= 2e-2 * math.abs(lh:item()), ("loss %g vs %g"):format(ll:item(), lh:item()))
  ll:backward()
  lh:backward()
  for k in pairs(shapes) do
    T.eq(lo[k].grad.dtype, "bfloat16", k)
    T.truthy(rel(lo[k].grad, hi[k].grad) <= 5e-2, ("%s grad off by %g"):format(k, rel(lo[k].grad, hi[k].grad)))
  end
end)

T.test("a gradient reaches a non-leaf 16-bit parameter in its dtype (the walk casts, as PyTorch's engine)", function()
  -- layer_norm computes a bfloat16 weight's gradient in float32; the hook sees what flows on
  -- to the weight's producer, which must be bfloat16 (a leaf would hide it: .grad converts)
  local x = ms.randn(4, 8):bfloat16():requires_grad_()
  local w32 = ms.ones(8):requires_grad_()
  local w = w32:bfloat16()
  local seen
  w:register_hook(function(g) seen = g.dtype end)
  F.layer_norm(x, {8}, {weight = w}):sum():backward()
  T.eq(seen, "bfloat16")
  T.eq(w32.grad.dtype, "float32")
end)

T.finish()
