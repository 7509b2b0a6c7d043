-- test_cuda_nn_lowp.lua: the nn kernels in bfloat16 and float16 on CUDA (conv2d through cuDNN,
-- max / avg / adaptive pooling, layer and batch norm, softmax and log_softmax, the activations of
-- the table, embedding, linear, attention), forward and backward, against the CPU's 16-bit result on the same
-- inputs (a native 16-bit CPU kernel, or float32 rounded once where the CPU widens): both
-- compute in float32 and round each stored value once, so they differ only where float32
-- arithmetic in another order or libdevice's exp/erf/tanh rounds a value across a 16-bit
-- rounding boundary. Each output keeps its input's dtype, stays on the GPU and comes from the
-- op's own node (not a widening conversion's). Also a seed-Net step in bfloat16 on CUDA against
-- the CPU's. Exits 77 (skipped) where no GPU is usable.
local T = require "testing"
local ms = require "moonshard"
local F = require "moonshard.functional"

T.need_cuda()

local DEV = "cuda:0"
local DTYPES = { "bfloat16", "float16" }

-- One unit in the last place at the largest magnitude, relative: bfloat16 keeps 8 significant
-- bits, float16 11. Two values one rounding apart differ by at most this much of the larger.
local ULP = { bfloat16 = 2 ^ -7, float16 = 2 ^ -10 }

-- Tolerances in ULPs, by what can differ between the devices:
-- ELEMENTWISE (activations, pooling's max, embedding's gather): the same float32 formula per
-- element; only libdevice's erff / tanhf / expf against the CPU's may differ in float32's last
-- bit, which moves a 16-bit result by at most one rounding.
-- REDUCED (softmax, norms, average pooling, embedding's scattered sum, conv): float32 or double
-- sums in another order (block sums, cuDNN's algorithms) differ in float32's last bits; rounded
-- once that is at most one 16-bit ulp, and conv's bias is added to cuDNN's already rounded
-- output on the GPU (two roundings), the CPU adds it before its one rounding: a second ulp.
local ELEMENTWISE, REDUCED = 1, 2

-- max |a - b| over max |b| (both read as float32 on the CPU).
local function rel(a, b)
  local af, bf = a:cpu():float(), b:cpu():float()
  return (af - bf):abs():max():item() / math.max(bf:abs():max():item(), 1e-30)
end

local function close(got, want, dtype, ulps, what)
  T.eq(got.dtype, want.dtype, what .. " dtype")
  T.eq(got.device, DEV, what .. " device")
  T.same(got:size(), want:size(), 0, what .. " shape")
  local r = rel(got, want)
  T.truthy(r <= ulps * ULP[dtype], ("%s in %s: cuda and cpu differ by %g (allowed %g)"):format(what, dtype, r,
    ulps * ULP[dtype]))
end

-- Runs fn(inputs...) on both devices with the float inputs as fresh 16-bit leaves, feeds back
-- the same 16-bit gradient, and compares the output and every input gradient; `node` is the
-- grad_fn the CUDA output must have (its op's, not a widening conversion's).
local function compare(what, dtype, inputs, fn, ulps, node)
  local res = {}
  for _, dev in ipairs { "cpu", DEV } do
    local xs = {}
    for i, t in ipairs(inputs) do
      xs[i] = t:is_floating_point() and t:to(dtype):to(dev):detach():requires_grad_() or t:to(dev)
    end
    local y = fn(table.unpack(xs))
    ms.manual_seed(7)
    local g = ms.randn(y:size()):to(dtype):to(dev)
    y:backward(g)
    res[dev] = { y = y, xs = xs }
  end
  local c, g = res.cpu, res[DEV]
  if node then T.eq(g.y.grad_fn, node, what .. ": the CUDA op runs natively in " .. dtype) end
  close(g.y, c.y, dtype, ulps, what .. " output")
  for i, x in ipairs(c.xs) do
    if x.requires_grad then close(g.xs[i].grad, x.grad, dtype, ulps, ("%s grad %d"):format(what, i)) end
  end
end

local function randn(...)
  return ms.randn(...)
end

for _, dt in ipairs(DTYPES) do
  -- ---- convolution through cuDNN ----
  local CONV = {
    { "seed conv1", { 4, 1, 28, 28 }, { 32, 1, 3, 3 }, 1, 0, 1 },
    { "seed conv2", { 4, 32, 26, 26 }, { 64, 32, 3, 3 }, 1, 0, 1 },
    { "stride 2, padding 1", { 3, 5, 9, 8 }, { 8, 5, 3, 3 }, 2, 1, 1 },
    { "groups 2", { 2, 4, 10, 10 }, { 6, 2, 3, 3 }, 1, 1, 2 },
  }
  for _, c in ipairs(CONV) do
    T.test(("conv2d %s in %s on CUDA matches the CPU's"):format(c[1], dt), function()
      ms.manual_seed(5)
      local x, w, b = randn(table.unpack(c[2])), randn(table.unpack(c[3])) * 0.2, randn(c[3][1])
      compare("conv2d " .. c[1], dt, { x, w, b }, function(xi, wi, bi)
        return F.conv2d(xi, wi, bi, { stride = c[4], padding = c[5], groups = c[6] })
      end, REDUCED, "ConvolutionBackward0")
    end)
  end

  -- ---- linear: cuBLAS's GEMM on the 16-bit operands ----
  -- cuBLAS accumulates in float32 but, in its default math mode, may add split-K partial sums
  -- in the output's 16-bit dtype (each partial rounded once): a few roundings more than the
  -- CPU's one, so 4 ulps.
  T.test(("linear in %s on CUDA matches the CPU's (the seed's fc1 and fc2)"):format(dt), function()
    ms.manual_seed(15)
    for _, s in ipairs { { 8, 9216, 128 }, { 8, 128, 10 } } do
      local x, w, b = randn(s[1], s[2]), randn(s[3], s[2]) * 0.05, randn(s[3])
      compare(("linear %dx%d"):format(s[2], s[3]), dt, { x, w, b }, function(xi, wi, bi)
        return F.linear(xi, wi, bi)
      end, 4, "AddmmBackward0")
    end
  end)

  -- ---- pooling ----
  T.test(("max_pool2d in %s on CUDA: the CPU's winners and gradients"):format(dt), function()
    ms.manual_seed(6)
    local x = randn(2, 3, 12, 11)
    compare("max_pool2d 2x2", dt, { x }, function(xi) return F.max_pool2d(xi, 2) end, ELEMENTWISE,
      "MaxPool2DWithIndicesBackward0")
    -- overlapping windows: a shared winner's gradient is a float32 sum, rounded once
    compare("max_pool2d 3x3 stride 2 padding 1", dt, { x }, function(xi)
      return F.max_pool2d(xi, 3, { stride = 2, padding = 1 })
    end, REDUCED, "MaxPool2DWithIndicesBackward0")
  end)

  T.test(("avg_pool2d and adaptive_avg_pool2d in %s on CUDA match the CPU's"):format(dt), function()
    ms.manual_seed(8)
    local x = randn(2, 3, 13, 10)
    compare("avg_pool2d", dt, { x }, function(xi)
      return F.avg_pool2d(xi, 3, { stride = 2, padding = 1, count_include_pad = false })
    end, REDUCED, "AvgPool2DBackward0")
    compare("adaptive_avg_pool2d", dt, { x }, function(xi) return F.adaptive_avg_pool2d(xi, { 4, 3 }) end, REDUCED,
      "AdaptiveAvgPool2DBackward0")
  end)

  -- ---- softmax ----
  T.test(("softmax and log_softmax in %s on CUDA match the CPU's"):format(dt), function()
    ms.manual_seed(9)
    local x = randn(6, 10) * 3
    compare("softmax", dt, { x }, function(xi) return F.softmax(xi, 2) end, REDUCED, "SoftmaxBackward0")
    compare("log_softmax", dt, { x }, function(xi) return F.log_softmax(xi, 2) end, REDUCED, "LogSoftmaxBackward0")
    -- a middle dim: rows `inner` apart
    local x3 = randn(3, 7, 5)
    compare("softmax over dim 2 of 3", dt, { x3 }, function(xi) return F.softmax(xi, 2) end, REDUCED,
      "SoftmaxBackward0")
  end)

  -- ---- activations of the table ----
  T.test(("gelu (erf and tanh), silu, hardswish in %s on CUDA match the CPU's"):format(dt), function()
    ms.manual_seed(10)
    local x = randn(7, 33) * 2
    compare("gelu", dt, { x }, function(xi) return F.gelu(xi) end, ELEMENTWISE, "GeluBackward0")
    compare("gelu tanh", dt, { x }, function(xi) return F.gelu(xi, { approximate = "tanh" }) end, ELEMENTWISE,
      "GeluBackward0")
    compare("silu", dt, { x }, function(xi) return F.silu(xi) end, ELEMENTWISE, "SiluBackward0")
    compare("hardswish", dt, { x }, function(xi) return F.hardswish(xi) end, ELEMENTWISE, "HardswishBackward0")
  end)

  -- ---- norms ----
  T.test(("layer_norm in %s on CUDA matches the CPU's (16-bit and float32 parameters)"):format(dt), function()
    ms.manual_seed(11)
    local x, w, b = randn(5, 4, 24), randn(24) * 0.5 + 1, randn(24) * 0.1
    compare("layer_norm", dt, { x, w, b }, function(xi, wi, bi) return F.layer_norm(xi, { 24 }, wi, bi) end, REDUCED,
      "NativeLayerNormBackward0")
    for _, dev in ipairs { "cpu", DEV } do
      local y = F.layer_norm(x:to(dt):to(dev), { 24 }, w:to(dev), b:to(dev))
      T.eq(y.dtype, dt, "float32 parameters keep the input's dtype")
    end
  end)

  T.test(("batch_norm in %s on CUDA matches the CPU's, running statistics too"):format(dt), function()
    ms.manual_seed(12)
    local x, w, b = randn(6, 3, 5, 4) * 2 + 1, randn(3) * 0.5 + 1, randn(3) * 0.1
    local rms, rvs = {}, {}
    compare("batch_norm training", dt, { x, w, b }, function(xi, wi, bi)
      local dev = xi.device
      rms[dev], rvs[dev] = ms.zeros(3):to(dt):to(dev), ms.ones(3):to(dt):to(dev)
      return F.batch_norm(xi, rms[dev], rvs[dev], wi, bi, true, 0.1, 1e-5)
    end, REDUCED, "NativeBatchNormBackward0")
    close(rms[DEV], rms.cpu, dt, REDUCED, "running_mean")
    close(rvs[DEV], rvs.cpu, dt, REDUCED, "running_var")
    compare("batch_norm evaluation", dt, { x, w, b }, function(xi, wi, bi)
      return F.batch_norm(xi, rms[xi.device], rvs[xi.device], wi, bi, false)
    end, REDUCED, "NativeBatchNormBackward0")
  end)

  -- ---- attention ----
  -- Dot products, the online softmax and the gradients' sums run in float32 in another order
  -- than the CPU's (which widens float16, and computes bfloat16 with its own float32 sums):
  -- REDUCED. Dropout draws the same Philox words on both devices.
  T.test(("scaled_dot_product_attention in %s on CUDA matches the CPU's"):format(dt), function()
    ms.manual_seed(16)
    local q, k, v = randn(2, 3, 13, 16) * 0.3, randn(2, 3, 17, 16), randn(2, 3, 17, 8)
    local add_mask = randn(13, 17)
    for name, o in pairs { plain = {}, causal = { is_causal = true }, bool_mask = { mask = ms.rand(13, 17):gt(0.3) },
                           float_mask = { mask = add_mask, float = true }, dropout = { dropout_p = 0.3 } } do
      compare("attention " .. name, dt, { q, k, v }, function(a, b, c)
        ms.manual_seed(17)
        local m = o.mask and (o.float and o.mask:to(dt) or o.mask):to(a.device)
        return F.scaled_dot_product_attention(a, b, c, { attn_mask = m, is_causal = o.is_causal,
          dropout_p = o.dropout_p })
      end, REDUCED, "ScaledDotProductAttentionBackward0")
    end
  end)

  -- ---- embedding ----
  T.test(("embedding in %s on CUDA: the CPU's rows, and gradients summed in float32"):format(dt), function()
    ms.manual_seed(13)
    local w = randn(9, 6)
    local idx = ms.tensor({ { 1, 4, 4, 9 }, { 2, 4, 3, 4 } }, { dtype = "int64" }) -- repeats sum
    compare("embedding", dt, { idx, w }, function(i, wi) return F.embedding(i, wi) end, REDUCED, "EmbeddingBackward0")
    compare("embedding with padding_idx", dt, { idx, w }, function(i, wi)
      return F.embedding(i, wi, { padding_idx = 4 })
    end, REDUCED, "EmbeddingBackward0")
  end)
end

-- ---- the seed's Net: a bfloat16 training step on CUDA against the CPU's ----
-- As FSDP's mixed precision runs it: bfloat16 parameters compute, their gradients update float32
-- masters (SGD, lr 0.1). The step composes ~10 ops whose 16-bit results may each sit one
-- rounding apart between the devices; the differences add up through the layers (and the loss
-- averages them), so the loss agrees within 4 bfloat16 ulps and each gradient within 8 of its
-- largest element; the float32 masters move by lr times those gradients, so they agree within
-- lr times that bound (plus float32's rounding of the subtraction). Dropout is off (evaluation
-- mode): this compares arithmetic, not masks.
T.test("the seed Net's bfloat16 step on CUDA gives the CPU's loss, gradients and parameters", function()
  local Net = require "moonshard.seed_net"
  local res = {}
  for _, dev in ipairs { "cpu", DEV } do
    ms.manual_seed(3)
    local net = Net():to(dev)
    local masters = {}
    for i, p in ipairs(net:parameters()) do masters[i] = p:detach():clone() end
    net = net:to("bfloat16")
    net:eval()
    ms.manual_seed(4)
    local x = ms.randn(8, 1, 28, 28):to("bfloat16"):to(dev)
    local target = ms.randint(1, 11, { 8 }):to(dev)
    local loss = F.nll_loss(net(x), target)
    T.eq(loss.dtype, "bfloat16", dev .. " loss dtype")
    loss:backward()
    local grads = {}
    for i, p in ipairs(net:parameters()) do
      grads[i] = p.grad
      masters[i] = masters[i] - p.grad:float() * 0.1
    end
    res[dev] = { loss = loss:float():item(), grads = grads, masters = masters }
  end
  local c, g = res.cpu, res[DEV]
  T.truthy(math.abs(g.loss - c.loss) <= 4 * ULP.bfloat16 * math.abs(c.loss), ("loss cuda %g, cpu %g"):format(g.loss,
    c.loss))
  for i = 1, #c.grads do
    close(g.grads[i], c.grads[i], "bfloat16", 8, ("parameter %d's gradient"):format(i))
    local gmax, pmax = c.grads[i]:float():abs():max():item(), c.masters[i]:abs():max():item()
    local d = (g.masters[i]:cpu() - c.masters[i]):abs():max():item()
    T.truthy(d <= 0.1 * 8 * ULP.bfloat16 * gmax + 2 ^ -22 * pmax,
      ("parameter %d's float32 master after the step: cuda and cpu differ by %g"):format(i, d))
  end
end)

T.finish()
