-- test_cuda_fusion.lua: the fused kernels of docs/fusion.md on cuda:0 against the CPU: dropout's
-- one-pass forward (the CPU's mask and values bit for bit, in float32 and float64; bfloat16 and
-- float16 scaled as they are, equal to the CPU's float32 dropout rounded once), nll_loss's
-- one-launch forward and its backward (a mean's weight sum divided on the device), 16-bit
-- log-probabilities native, Linear's bias in the GEMM, and the seed step's launches counted on
-- the GPU. Exits 77 (skipped) where no GPU is usable.
local T = require "testing"
local ms = require "moonshard"
local F = require "moonshard.functional"
local optim = require "moonshard.optim"
local Net = require "moonshard.seed_net"

T.need_cuda()

local DEV = "cuda:0"

-- got (any device) equals want (CPU) elementwise within tol relative (0: exactly, NaN = NaN).
local function same(got, want, tol, what)
  T.eq(got.dtype, want.dtype, what .. " dtype")
  local g, w = got:cpu():double():reshape(-1):tolist(), want:double():reshape(-1):tolist()
  T.eq(#g, #w, what .. " size")
  for i = 1, #w do
    local a, b = g[i], w[i]
    local ok = a == b or (a ~= a and b ~= b) or math.abs(a - b) <= tol * math.max(1, math.abs(b))
    if not ok then error(("%s[%d]: cuda %.9g, cpu %.9g"):format(what, i, a, b), 2) end
  end
end

local function data(shape, seed)
  ms.manual_seed(seed)
  return ms.randn(shape):mul(3)
end

-- y = dropout(x) on dev with a fixed seed, and x's gradient for the weights w.
local function dropout_on(x, w, p, dev)
  local xd = x:to(dev):detach()
  xd.requires_grad = true
  ms.manual_seed(4321)
  local y = F.dropout(xd, p)
  ;(y * w:to(dev)):sum():backward()
  return y:detach(), xd.grad
end

T.test("dropout in one pass: the CPU's mask and values; 16-bit as the CPU's float32 rounded once", function()
  -- sizes around a Philox block (4 elements), one thread's block count and the CPU's chunk
  for _, n in ipairs { 1, 5, 255, 4097, 37 * 53 } do
    for _, p in ipairs { 0.25, 0.5 } do
      local x, w = data({ n }, n), data({ n }, n + 1)
      for _, dt in ipairs { "float32", "float64" } do
        local yc, gc = dropout_on(x:to(dt), w:to(dt), p, "cpu")
        local yg, gg = dropout_on(x:to(dt), w:to(dt), p, DEV)
        same(yg, yc, 0, ("dropout %s n=%d p=%g"):format(dt, n, p))
        same(gg, gc, 0, ("dropout backward %s n=%d p=%g"):format(dt, n, p))
      end
      for _, dt in ipairs { "bfloat16", "float16" } do
        local xh, wh = x:to(dt), w:to(dt)
        local yc, gc = dropout_on(xh:float(), wh:float(), p, "cpu")
        local yg, gg = dropout_on(xh, wh, p, DEV)
        T.eq(yg.dtype, dt, "scaled as it is, not widened")
        same(yg, yc:to(dt), 0, ("dropout %s n=%d p=%g"):format(dt, n, p))
        -- the gradient: w (16-bit) times the mask's scale, rounded once
        same(gg, (wh:float() * yc:ne(0):float() / (1 - p)):to(dt), 0,
          ("dropout backward %s n=%d p=%g"):format(dt, n, p))
      end
    end
  end
end)

-- The loss and the input's gradient of nll_loss on dev.
local function nll_on(logp, target, opts, dev)
  local x = logp:to(dev):detach()
  x.requires_grad = true
  local loss = F.nll_loss(x, target:to(dev), opts)
  ;(loss * 3):sum():backward()
  return loss:detach(), x.grad
end

T.test("nll_loss: one launch forward, backward dividing a mean on the device; 16-bit native", function()
  local logp = F.log_softmax(data({ 64, 10 }, 5), 2)
  local classes = ms.randint(1, 11, { 64 }):tolist()
  classes[3] = 0 -- ignored below
  local target = ms.tensor(classes):long()
  local weight = ms.rand(10)
  for _, opts in ipairs {
    { reduction = "sum" }, { reduction = "mean" }, { reduction = "none" },
    { reduction = "mean", weight = weight, ignore_index = 0 },
  } do
    local what = opts.reduction .. (opts.weight and " weighted" or "")
    for _, dt in ipairs { "float32", "float64" } do
      local o = { reduction = opts.reduction, ignore_index = opts.ignore_index,
                  weight = opts.weight and opts.weight:to(dt) }
      local t = opts.ignore_index and target or target:clamp(1, 10)
      local lc, gc = nll_on(logp:to(dt), t, o, "cpu")
      local og = { reduction = o.reduction, ignore_index = o.ignore_index, weight = o.weight and o.weight:to(DEV) }
      local lg, gg = nll_on(logp:to(dt), t, og, DEV)
      -- the sums run in float64 in another order: within float32's and float64's rounding
      local tol = dt == "float32" and 1e-6 or 1e-14
      same(lg, lc, tol, "nll_loss " .. what .. " " .. dt)
      same(gg, gc, tol, "nll_loss backward " .. what .. " " .. dt)
    end
    for _, dt in ipairs { "bfloat16", "float16" } do
      local o = { reduction = opts.reduction, ignore_index = opts.ignore_index,
                  weight = opts.weight and opts.weight:to(dt) }
      local t = opts.ignore_index and target or target:clamp(1, 10)
      local lh = logp:to(dt)
      local lc, gc = nll_on(lh, t, o, "cpu") -- the CPU widens to float32 and rounds once
      local og = { reduction = o.reduction, ignore_index = o.ignore_index, weight = o.weight and o.weight:to(DEV) }
      local lg, gg = nll_on(lh, t, og, DEV)
      -- float32 sums in another order may round to the neighbouring 16-bit value: one ulp
      local tol = dt == "bfloat16" and 2 ^ -7 or 2 ^ -10
      same(lg, lc, tol, "nll_loss " .. what .. " " .. dt)
      same(gg, gc, tol, "nll_loss backward " .. what .. " " .. dt)
    end
  end
end)

T.test("linear: the bias added by the GEMM (cuBLASLt's epilogue) as the CPU's", function()
  -- the seed's fc1 and fc2, the GPT's MLP up-projection, a transposed input (a column-major
  -- operand), odd sizes (alignments cuBLASLt may decline: the fill-then-beta-1 path)
  local cases = { { 64, 9216, 128 }, { 64, 128, 10 }, { 1024, 768, 3072 }, { 7, 13, 5 } }
  for _, c in ipairs(cases) do
    local M, K, N = c[1], c[2], c[3]
    for _, dt in ipairs { "float32", "float64", "bfloat16", "float16" } do
      local x, w, b = data({ M, K }, 11):to(dt), data({ N, K }, 12):div(math.sqrt(K)):to(dt), data({ N }, 13):to(dt)
      local half = dt == "bfloat16" or dt == "float16"
      -- 16-bit: float32 sums of the 16-bit values, rounded once (the CPU's widened product)
      local want = half and F.linear(x:float(), w:float(), b:float()):to(dt) or F.linear(x, w, b)
      local got = F.linear(x:to(DEV), w:to(DEV), b:to(DEV))
      -- float32 and float64 sum in another order than the CPU (relative to max(1, |y|), y ~ 1);
      -- 16-bit may round to the neighbouring value
      local tol = ({ float32 = 1e-4, float64 = 1e-12, bfloat16 = 2 ^ -7, float16 = 2 ^ -10 })[dt]
      same(got, want, tol, ("linear %dx%dx%d %s"):format(M, K, N, dt))
      local xt = x:t():contiguous():t() -- the same values, column-major
      same(F.linear(xt:to(DEV), w:to(DEV), b:to(DEV)), want, tol, ("linear column-major x %d %s"):format(M, dt))
    end
  end
end)

T.test("a seed step launches on the GPU what it calls on the CPU", function()
  local counts = {}
  for _, dev in ipairs { "cpu", DEV } do
    ms.manual_seed(1)
    local model = Net():to(dev)
    local optimizer = optim.Adadelta(model:parameters(), { lr = 1.0 })
    local data8, target = ms.randn(8, 1, 28, 28):to(dev), ms.randint(1, 11, { 8 }):to(dev)
    local function step()
      optimizer:zero_grad()
      local loss = F.nll_loss(model(data8), target, { reduction = "sum" })
      loss:backward()
      optimizer:step()
    end
    step()
    local kind = dev == "cpu" and "cpu" or "cuda"
    local before = ms._kernel_calls()[kind]
    step()
    counts[kind] = ms._kernel_calls()[kind] - before
  end
  print(("seed step at batch 8: cpu %d calls, cuda %d launches"):format(counts.cpu, counts.cuda))
  -- the same slots on either device, and on the GPU the loss's seed gradient (ones), which the
  -- CPU fills on the host
  T.truthy(counts.cuda <= counts.cpu + 1, ("cuda %d launches, cpu %d calls"):format(counts.cuda, counts.cpu))
end)

T.finish()
