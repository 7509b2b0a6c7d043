-- test_attention.lua: F.scaled_dot_product_attention, the fused op (engine/src/nn/attention.c,
-- kernels/cpu/attention.c): gradcheck in float64 (causal, bool and float masks, broadcast
-- masks, L ~= S, Ev ~= E, batch and heads, dropout with its mask redrawn), values against the
-- plain composition softmax(q k^T scale + mask) v in moonshard itself and against PyTorch 1.13's
-- composition (data/attention_reference.lua, from gen_attention_reference.py), dropout's mask
-- (ms.dropout's Philox draws, the same seed giving the same output and gradients), 16-bit
-- inputs, and the errors for bad arguments.
local T = require "testing"
local ms = require "moonshard"
local gradcheck = require "gradcheck"
local F = require "moonshard.functional"
local REF = dofile("tests/lua/data/attention_reference.lua")

local sdpa = F.scaled_dot_product_attention

local function randn(...) return ms.randn(...):double() end

-- bool (L, S): key j takes part for query i when j <= i (PyTorch's is_causal, top-left aligned)
local function causal_mask(L, S)
  return ms.arange(S):reshape(1, S):le(ms.arange(L):reshape(L, 1))
end

-- The composition PyTorch's math path computes, in moonshard's own ops.
local function plain(q, k, v, o)
  o = o or {}
  local s = ms.matmul(q, k:transpose(-2, -1)) * (o.scale or 1 / math.sqrt(q:size(-1)))
  local mask = o.attn_mask
  if o.is_causal then mask = causal_mask(q:size(-2), k:size(-2)) end
  if mask and mask.dtype == "bool" then
    s = ms.where(mask, s, ms.full({}, -math.huge, {dtype = s.dtype}))
  elseif mask then
    s = s + mask
  end
  return ms.matmul(ms.softmax(s, -1), v)
end

local function max_diff(a, b) return (a - b):abs():max():item() end

-- ---- gradcheck -------------------------------------------------------------------------------------

local CASES = {
  {name = "plain", q = {5, 4}, k = {7, 4}, v = {7, 3}, o = {}},
  {name = "causal", q = {2, 6, 3}, k = {2, 6, 3}, v = {2, 6, 3}, o = {is_causal = true}},
  {name = "causal L < S", q = {4, 3}, k = {6, 3}, v = {6, 2}, o = {is_causal = true}},
  {name = "causal L > S", q = {7, 3}, k = {4, 3}, v = {4, 5}, o = {is_causal = true}},
  {name = "batch and heads, scale", q = {2, 3, 5, 4}, k = {2, 3, 6, 4}, v = {2, 3, 6, 2}, o = {scale = 0.7}},
  {name = "float mask", q = {2, 5, 4}, k = {2, 6, 4}, v = {2, 6, 3}, mask = function() return randn(2, 5, 6) end},
  {name = "float mask broadcast over batch", q = {2, 2, 5, 3}, k = {2, 2, 6, 3}, v = {2, 2, 6, 3},
   mask = function() return randn(5, 6) end},
  {name = "float mask broadcast over rows and heads", q = {2, 2, 5, 3}, k = {2, 2, 6, 3}, v = {2, 2, 6, 3},
   mask = function() return randn(2, 1, 1, 6) end},
  {name = "bool mask", q = {3, 5, 4}, k = {3, 6, 4}, v = {3, 6, 2},
   mask = function() return ms.rand(3, 5, 6):lt(0.6):logical_or(ms.arange(6):eq(0)) end},
  {name = "bool mask broadcast over heads", q = {2, 3, 4, 3}, k = {2, 3, 5, 3}, v = {2, 3, 5, 3},
   mask = function() return ms.rand(2, 1, 4, 5):lt(0.6):logical_or(ms.arange(5):eq(4)) end},
}

for _, c in ipairs(CASES) do
  T.test("gradcheck: " .. c.name, function()
    ms.manual_seed(3)
    local o = c.o or {}
    if c.mask then o = {attn_mask = c.mask()} end
    gradcheck(function(q, k, v) return sdpa(q, k, v, o) end, {randn(c.q), randn(c.k), randn(c.v)})
  end)
end

T.test("gradcheck: dropout, with the mask redrawn from the same seed", function()
  ms.manual_seed(4)
  local q, k, v = randn(2, 5, 4), randn(2, 7, 4), randn(2, 7, 3)
  gradcheck(function(a, b, c)
    ms.manual_seed(11)
    return sdpa(a, b, c, {dropout_p = 0.3, is_causal = true})
  end, {q, k, v})
end)

T.test("grad_fn is ScaledDotProductAttentionBackward0", function()
  local q = ms.randn(3, 4):requires_grad_()
  T.eq(sdpa(q, ms.randn(5, 4), ms.randn(5, 2)).grad_fn, "ScaledDotProductAttentionBackward0")
end)

-- ---- values ----------------------------------------------------------------------------------------

T.test("float32 on 2x4x256x64 equals the composition (plain, causal, float and bool masks)", function()
  ms.manual_seed(5)
  local q, k, v = ms.randn(2, 4, 256, 64), ms.randn(2, 4, 256, 64), ms.randn(2, 4, 256, 64)
  for _, o in ipairs({{}, {is_causal = true}, {attn_mask = ms.randn(4, 256, 256)},
                      {attn_mask = ms.rand(2, 1, 256, 256):lt(0.5):logical_or(ms.arange(256):eq(7))}}) do
    local d = max_diff(sdpa(q, k, v, o), plain(q, k, v, o))
    T.truthy(d < 2e-5, ("max difference %g"):format(d))
  end
end)

T.test("float32 is as accurate as the float32 composition (the kernel's own exp included)", function()
  ms.manual_seed(3)
  local q, k, v = ms.randn(4, 200, 32) * 1.5, ms.randn(4, 300, 32), ms.randn(4, 300, 16)
  local want = plain(q:double(), k:double(), v:double())
  local fused, composed = max_diff(sdpa(q, k, v):double(), want), max_diff(plain(q, k, v):double(), want)
  -- measured: fused 1.0e-6, composition 8.3e-7 (a 2e-4 error in one exp coefficient gives 4.6e-6)
  T.truthy(fused < 2e-6, ("fused float32 is %g from float64 (composition: %g)"):format(fused, composed))
end)

T.test("is_causal is top-left aligned when L ~= S (as PyTorch), across key blocks", function()
  ms.manual_seed(7)
  for _, ls in ipairs({{5, 9}, {9, 5}, {70, 300}, {300, 70}}) do
    local q, k, v = randn(2, ls[1], 8), randn(2, ls[2], 8), randn(2, ls[2], 4)
    local d = max_diff(sdpa(q, k, v, {is_causal = true}), plain(q, k, v, {is_causal = true}))
    T.truthy(d < 1e-12, ("L = %d, S = %d: max difference %g"):format(ls[1], ls[2], d))
  end
end)

T.test("float32 gradients on 2x2x300x48 (L ~= S, blocks cut rows) equal the composition's", function()
  ms.manual_seed(6)
  local function leaves()
    ms.manual_seed(6)
    return ms.randn(2, 2, 300, 48):requires_grad_(), ms.randn(2, 2, 200, 48):requires_grad_(),
           ms.randn(2, 2, 200, 40):requires_grad_()
  end
  local g = ms.randn(2, 2, 300, 40)
  for _, o in ipairs({{is_causal = true}, {attn_mask = ms.randn(300, 200)}}) do
    local q1, k1, v1 = leaves()
    ms.sum(sdpa(q1, k1, v1, o) * g):backward()
    local q2, k2, v2 = leaves()
    ms.sum(plain(q2, k2, v2, o) * g):backward()
    for _, p in ipairs({{q1, q2}, {k1, k2}, {v1, v2}}) do
      local d = max_diff(p[1].grad, p[2].grad)
      T.truthy(d < 1e-4, ("max gradient difference %g"):format(d))
    end
  end
end)

T.test("results do not depend on the thread count (key groups summed in a fixed order)", function()
  local function run(threads)
    ms.set_num_threads(threads)
    ms.manual_seed(12)
    local q, k, v = ms.randn(1, 2, 150, 32):requires_grad_(), ms.randn(1, 2, 700, 32):requires_grad_(),
                    ms.randn(1, 2, 700, 16):requires_grad_()
    local out = sdpa(q, k, v, {dropout_p = 0.1})
    ms.sum(out * out):backward()
    return {out, q.grad, k.grad, v.grad}
  end
  local before = ms.get_num_threads()
  local one, two, three = run(1), run(2), run(3)
  ms.set_num_threads(before)
  for i = 1, 4 do
    T.eq(max_diff(one[i], two[i]), 0)
    T.eq(max_diff(one[i], three[i]), 0)
  end
end)

T.test("PyTorch 1.13's composition (float64): outputs and gradients", function()
  for name, r in pairs(REF) do
    local function t(x) return ms.tensor(x.values, {dtype = "float64"}):reshape(x.shape) end
    local q, k, v = t(r.q):requires_grad_(), t(r.k):requires_grad_(), t(r.v):requires_grad_()
    local o = {is_causal = r.is_causal, scale = r.scale}
    if r.mask then o.attn_mask = r.mask_bool and t(r.mask):ne(0) or t(r.mask) end
    local out = sdpa(q, k, v, o)
    T.truthy(max_diff(out, t(r.out)) < 1e-12, name .. ": output")
    ms.sum(out * t(r.g)):backward()
    T.truthy(max_diff(q.grad, t(r.gq)) < 1e-12, name .. ": grad q")
    T.truthy(max_diff(k.grad, t(r.gk)) < 1e-12, name .. ": grad k")
    T.truthy(max_diff(v.grad, t(r.gv)) < 1e-12, name .. ": grad v")
  end
end)

T.test("a row with every key masked gives 0 and no gradient (PyTorch 2.5's safe softmax)", function()
  local q, k, v = randn(3, 2):requires_grad_(), randn(4, 2):requires_grad_(), randn(4, 2):requires_grad_()
  local mask = ms.tensor({{true, true, false, false}, {false, false, false, false}, {true, false, false, true}})
  local out = sdpa(q, k, v, {attn_mask = mask})
  T.eq(out[2]:abs():sum():item(), 0)
  T.truthy(max_diff(out[1], plain(q[1]:reshape(1, 2), k, v, {attn_mask = mask[1]:reshape(1, 4)})[1]) < 1e-12)
  ms.sum(out):backward()
  T.eq(q.grad[2]:abs():sum():item(), 0)
end)

T.test("a graph's memory is freed with its last reference (no output <-> node cycle)", function()
  collectgarbage()
  local before = ms.memory_stats().current
  do
    local q = ms.randn(2, 33, 8):requires_grad_()
    local out = sdpa(q, ms.randn(2, 40, 8), ms.randn(2, 40, 8), {is_causal = true})
    T.truthy(ms.memory_stats().current > before)
    out = nil
    q = nil
  end
  collectgarbage()
  collectgarbage()
  T.eq(ms.memory_stats().current, before)
end)

T.test("torch's positional form: (q, k, v, attn_mask, dropout_p, is_causal, scale)", function()
  local q, k, v, m = ms.randn(4, 3), ms.randn(5, 3), ms.randn(5, 3), ms.randn(4, 5)
  T.eq(max_diff(sdpa(q, k, v, m, 0, false, 0.5), sdpa(q, k, v, {attn_mask = m, scale = 0.5})), 0)
end)

T.test("bfloat16 and float16 compute in float32 and keep their dtype, gradients too", function()
  ms.manual_seed(8)
  local q, k, v = ms.randn(2, 9, 8), ms.randn(2, 9, 8), ms.randn(2, 9, 8)
  for _, dt in ipairs({"bfloat16", "float16"}) do
    local qh = q:to(dt):requires_grad_()
    local out = sdpa(qh, k:to(dt), v:to(dt), {is_causal = true})
    T.eq(out.dtype, dt)
    local d = max_diff(out:float(), plain(q:to(dt):float(), k:to(dt):float(), v:to(dt):float(), {is_causal = true}))
    T.truthy(d < 2e-2, dt .. (": max difference %g"):format(d))
    ms.sum(out):backward()
    T.eq(qh.grad.dtype, dt)
  end
end)

T.test("q, k, v as transposed views of one tensor (the GPT's heads) equal contiguous copies, bit for bit", function()
  for _, dt in ipairs({"float32", "float64", "bfloat16"}) do
    ms.manual_seed(16)
    local B, L, nh, hs = 2, 70, 3, 20
    local qkv = ms.randn(B, L, 3 * nh * hs):to(dt)
    local g = ms.randn(B, nh, L, hs):to(dt)
    local function run(contiguous)
      local h = {}
      for i, t in ipairs(qkv:split(nh * hs, 3)) do
        h[i] = t:reshape(B, L, nh, hs):transpose(2, 3)
        if contiguous then h[i] = h[i]:contiguous() end
        h[i] = h[i]:detach():requires_grad_()
        T.eq(h[i]:is_contiguous(), contiguous == true)
      end
      local out = sdpa(h[1], h[2], h[3], {is_causal = true})
      out:backward(g)
      return {out, h[1].grad, h[2].grad, h[3].grad}
    end
    local views, copies = run(false), run(true)
    for i = 1, 4 do T.eq(max_diff(views[i]:double(), copies[i]:double()), 0, dt) end
  end
end)

-- ---- bfloat16 (native on a CPU with AVX-512 BF16: float32 sums, P and dS rounded to bf16) ----------

-- max |a - b| / max |b|: the error relative to the reference's scale
local function rel_diff(a, b) return max_diff(a:float(), b:float()) / b:float():abs():max():item() end

-- The op in bfloat16 against float32 on the same (bf16-rounded) inputs: output and gradients.
-- Rounding P and dS to bf16 as the products' operands costs ~2^-8 relative per term; measured
-- at most 4.9e-3 (outputs) and 5.6e-3 (gradients) on these shapes (the additive mask case rounds
-- its mask too), bounded at 1e-2 and 2e-2.
local function check_bf16(name, qs, ks, vs, o, seed)
  ms.manual_seed(seed or 13)
  local q, k, v = ms.randn(qs):bfloat16(), ms.randn(ks):bfloat16(), ms.randn(vs):bfloat16()
  local g
  local outs, grads = {}, {}
  for i, dt in ipairs({"bfloat16", "float32"}) do
    local function leaf(t) return t:to(dt):detach():requires_grad_() end
    local a, b, c = leaf(q), leaf(k), leaf(v)
    local oo = {}
    for key, val in pairs(o) do oo[key] = val end
    if o.attn_mask and o.attn_mask.dtype ~= "bool" then oo.attn_mask = o.attn_mask:to(dt) end
    ms.manual_seed(21)
    local out = sdpa(a, b, c, oo)
    T.eq(out.dtype, dt)
    g = i == 1 and ms.randn(out:size()):bfloat16() or g
    ms.sum(out * g:to(dt)):backward()
    T.eq(a.grad.dtype, dt)
    outs[i], grads[i] = out, {a.grad, b.grad, c.grad}
  end
  local d = rel_diff(outs[1], outs[2])
  T.truthy(d < 1e-2, ("%s: output relative difference %g"):format(name, d))
  for j, which in ipairs({"q", "k", "v"}) do
    d = rel_diff(grads[1][j], grads[2][j])
    T.truthy(d < 2e-2, ("%s: grad %s relative difference %g"):format(name, which, d))
  end
end

T.test("bfloat16 equals float32 within its rounding: causal or not, odd sizes, E = 1, 3, 64, 80", function()
  check_bf16("GPT head, causal", {2, 3, 256, 64}, {2, 3, 256, 64}, {2, 3, 256, 64}, {is_causal = true})
  check_bf16("plain, L ~= S across blocks", {2, 150, 64}, {2, 300, 64}, {2, 300, 64}, {})
  check_bf16("causal, L > S, E 80", {1, 2, 201, 80}, {1, 2, 133, 80}, {1, 2, 133, 80}, {is_causal = true})
  check_bf16("E 3, Ev 5, odd L and S", {3, 77, 3}, {3, 129, 3}, {3, 129, 5}, {is_causal = true})
  check_bf16("E 1", {2, 9, 1}, {2, 11, 1}, {2, 11, 1}, {scale = 0.5})
end)

T.test("bfloat16 with masks (bool, additive in bfloat16, broadcast) and dropout's same masks", function()
  ms.manual_seed(14)
  local bool = ms.rand(2, 1, 100, 140):lt(0.6):logical_or(ms.arange(140):eq(3))
  check_bf16("bool mask", {2, 2, 100, 64}, {2, 2, 140, 64}, {2, 2, 140, 64}, {attn_mask = bool})
  check_bf16("additive mask", {2, 2, 100, 32}, {2, 2, 140, 32}, {2, 2, 140, 32}, {attn_mask = ms.randn(100, 140)})
  check_bf16("dropout, causal", {2, 2, 90, 64}, {2, 2, 90, 64}, {2, 2, 90, 64}, {is_causal = true, dropout_p = 0.3})
end)

T.test("bfloat16 results do not depend on the thread count", function()
  local function run(threads, shape_k)
    ms.set_num_threads(threads)
    ms.manual_seed(15)
    local q = ms.randn(1, 2, 150, 64):bfloat16():requires_grad_()
    local k = ms.randn(1, 2, shape_k, 64):bfloat16():requires_grad_()
    local v = ms.randn(1, 2, shape_k, 48):bfloat16():requires_grad_()
    local out = sdpa(q, k, v, {dropout_p = 0.1})
    ms.sum(out:float() * out:float()):backward()
    return {out, q.grad, k.grad, v.grad}
  end
  local before = ms.get_num_threads()
  for _, S in ipairs({700, 130}) do -- several key groups summing dQ, and one
    local one, two = run(1, S), run(2, S)
    for i = 1, 4 do T.eq(max_diff(one[i]:float(), two[i]:float()), 0) end
  end
  ms.set_num_threads(before)
end)

-- ---- dropout -----------------------------------------------------------------------------------------

T.test("dropout: the weights are ms.dropout's of the softmax on the same seed", function()
  ms.manual_seed(9)
  local q, k = randn(2, 6, 4), randn(2, 10, 4)
  local eye = ms.eye(10, {dtype = "float64"}):expand(2, 10, 10):contiguous()
  ms.manual_seed(21)
  local got = sdpa(q, k, eye, {dropout_p = 0.4}) -- v = I: the output is the dropped weights
  ms.manual_seed(21)
  local want = ms.dropout(plain(q, k, eye), {p = 0.4})
  T.truthy(max_diff(got, want) < 1e-12)
  local zeros = got:eq(0):sum():item()
  T.truthy(zeros > 0 and zeros < 120, ("%d of 120 weights dropped"):format(zeros))
end)

T.test("dropout: the same seed gives the same output and gradients; the stream advances", function()
  local function run(seed)
    ms.manual_seed(1)
    local q, k, v = ms.randn(2, 70, 16):requires_grad_(), ms.randn(2, 90, 16):requires_grad_(),
                    ms.randn(2, 90, 8):requires_grad_()
    ms.manual_seed(seed)
    local out = sdpa(q, k, v, {dropout_p = 0.2})
    ms.sum(out * out):backward()
    return out, q.grad, k.grad, v.grad
  end
  local a = {run(5)}
  local b = {run(5)}
  for i = 1, 4 do T.eq(max_diff(a[i], b[i]), 0) end
  local c = {run(6)}
  T.truthy(max_diff(a[1], c[1]) > 0)
end)

T.test("dropout_p = 0 equals the plain op", function()
  local q, k, v = ms.randn(3, 8, 4), ms.randn(3, 8, 4), ms.randn(3, 8, 4)
  T.eq(max_diff(sdpa(q, k, v, {dropout_p = 0}), sdpa(q, k, v)), 0)
end)

-- ---- bad input ---------------------------------------------------------------------------------------

T.test("bad input: precise errors", function()
  local q, k, v = ms.randn(2, 4, 3), ms.randn(2, 5, 3), ms.randn(2, 5, 6)
  local name = "scaled_dot_product_attention"
  T.raises(function() sdpa(q:long(), k, v) end, name, "query", "float32 or float64", "int64")
  T.raises(function() sdpa(q, k:double(), v) end, name, "key", "float32", "float64")
  T.raises(function() sdpa(q, ms.randn(2, 5, 4), v) end, name, "key's last dim", "E = 3", "4")
  T.raises(function() sdpa(q, k, ms.randn(2, 6, 6)) end, name, "value", "S = 5", "6")
  T.raises(function() sdpa(q, ms.randn(5, 3), ms.randn(5, 6)) end, name, "same number of dims")
  T.raises(function() sdpa(ms.randn(3), ms.randn(3), ms.randn(3)) end, name, "at least 2")
  T.raises(function() sdpa(q, ms.randn(3, 5, 3), ms.randn(3, 5, 6)) end, name, "batch dims")
  T.raises(function() sdpa(q, k, v, {attn_mask = ms.randn(4, 4)}) end, name, "attn_mask", "(4, 4)",
    "cannot broadcast", "(2, 4, 5)")
  T.raises(function() sdpa(q, k, v, {attn_mask = ms.randn(4, 5):long()}) end, name, "attn_mask",
    "bool or of query's dtype float32", "int64")
  T.raises(function() sdpa(q, k, v, {attn_mask = ms.randn(4, 5), is_causal = true}) end, name, "is_causal")
  T.raises(function() sdpa(q, k, v, {dropout_p = 1.5}) end, name, "dropout_p", "[0, 1]", "1.5")
  T.raises(function() sdpa(q, k, v, {dropout_p = -0.1}) end, name, "dropout_p")
  T.raises(function() sdpa(q, k, v, {scale = math.huge}) end, name, "scale", "finite")
  T.raises(function() sdpa(q, k, v, {bogus = 1}) end, "bogus")
  T.raises(function() sdpa(q, k, v, {attn_mask = 3}) end, "attn_mask", "tensor")
  T.raises(function() sdpa(q, k) end, name)
  T.raises(function() sdpa(q, k, v, {attn_mask = ms.randn(4, 5):requires_grad_()}) end, name, "attn_mask requires grad")
end)

T.finish()
