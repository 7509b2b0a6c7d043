-- ops_bench.lua: per-op microbenchmarks of the engine at the seed's shapes (SGEMM, conv2d forward
-- and both backwards, max_pool2d, relu, log_softmax+nll_loss, the Adadelta step, bfloat16 add/mul,
-- column sums, split's backward) and of the Adam(W) and SGD steps on a GPT shard (42M floats),
-- each timed through the Lua face as training calls it, printed as bench/run.sh's "BENCH ops ..." lines.
--   build/moonshard bench/ops_bench.lua [--quick] [--threads 1,2] [--only PATTERN]
--                                       [--fma1 G] [--fma2 G] [--copy1 G] [--copy2 G]
-- --only keeps the ops whose id matches the Lua pattern (e.g. "conv2d_fwd", "b64").
-- The peaks (GFLOP/s of the FMA loop, GB/s of a streaming copy, per thread count) come from
-- `build/bench/sgemm_bench --peak`; without them pct_peak is "n/a".
local ms = require "moonshard"
local F = require "moonshard.functional"
local optim = require "moonshard.optim"
local Net = require "moonshard.seed_net"

local argparse = require "moonshard.argparse"

-- "1,2" -> {1, 2}: positive thread counts
local function thread_list(s)
  local list = {}
  for word in (s .. ","):gmatch("([^,]*),") do
    local t = math.tointeger(tonumber(word))
    if not t or t < 1 then return nil, "a comma-separated list of positive integers" end
    list[#list + 1] = t
  end
  return list
end

local parser = argparse.ArgumentParser{description = "Per-op microbenchmarks at the seed's shapes"}
parser:add_argument("--quick", {action = "store_true", help = "one short sample per op"})
parser:add_argument("--threads", {type = thread_list, default = "1,2", metavar = "LIST",
                                  help = "thread counts to time each op with"})
parser:add_argument("--only", {metavar = "PATTERN", help = "run the ops whose id matches this Lua pattern"})
for _, peak in ipairs({ "fma1", "fma2", "copy1", "copy2" }) do
  parser:add_argument("--" .. peak, {type = "float", metavar = "G",
                                     help = ("%s peak from sgemm_bench --peak (%s), for pct_peak"):format(
                                       peak, peak:match("fma") and "GFLOP/s" or "GB/s")})
end
local args = parser:parse_args(arg)
local opts = { quick = args.quick, threads = args.threads, only = args.only, peak = { fma1 = args.fma1, fma2 = args.fma2, copy1 = args.copy1, copy2 = args.copy2 } }

-- A sample is a run of `inner` back-to-back calls lasting about `sample_s`, so short ops are not
-- lost in the clock's resolution; the result is the median sample, after warm-up calls.
local SAMPLE_S = opts.quick and 0.005 or 0.05
local SAMPLES = opts.quick and 1 or 9
local WARMUP = opts.quick and 1 or 3

local function median(xs)
  table.sort(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) // 2] or (xs[n // 2] + xs[n // 2 + 1]) / 2
end

-- One call of fn whose result (a tensor, or nothing) is released at once, as PyTorch's
-- reference count frees a loop's previous result: the caching allocator then hands the same
-- block, warm in the caches, to the next call. Left to Lua's collector instead (`keep`), results
-- pile up until a collection and each call writes a block that is cold, as a training step's
-- activations are (see bench/README.md: the fresh-output lines).
local function call_released(fn)
  local _ <close> = fn()
end

local function call_kept(fn)
  fn()
end

-- Seconds per call of fn(), median over samples.
local function time_call(fn, keep)
  local call = keep and call_kept or call_released
  local t0 = ms.perf_counter()
  for _ = 1, WARMUP do call(fn) end
  local per = (ms.perf_counter() - t0) / WARMUP
  local inner = math.max(1, math.floor(SAMPLE_S / math.max(per, 1e-7)))
  local samples = {}
  for s = 1, SAMPLES do
    t0 = ms.perf_counter()
    for _ = 1, inner do call(fn) end
    samples[s] = (ms.perf_counter() - t0) / inner
  end
  return median(samples)
end

local function fmt_pct(v, peak)
  return peak and ("%.1f"):format(100 * v / peak) or "n/a"
end

-- One line per measurement: id, then GFLOP/s (flops given) or GB/s (bytes given), % of the peak
-- with the same thread count (times work.peak_scale: 2 for bfloat16 dot products, which do two
-- multiply-adds a lane where an FMA does one), milliseconds per call.
local function report(id, t, s, work)
  local line
  if work.flops then
    local g, peak = work.flops / s / 1e9, opts.peak["fma" .. t]
    peak = peak and peak * (work.peak_scale or 1)
    line = ("BENCH ops %s/t%d gflops=%.2f pct_peak=%s ms=%.4f"):format(id, t, g, fmt_pct(g, peak), s * 1e3)
  else
    local g = work.bytes / s / 1e9
    line = ("BENCH ops %s/t%d gbs=%.2f pct_peak=%s ms=%.4f"):format(id, t, g, fmt_pct(g, opts.peak["copy" .. t]), s * 1e3)
  end
  print(line)
  io.stdout:flush()
end

-- ---- the benchmarks: each returns fn (one call) and its work ------------------------------------
-- Work counts: a GEMM or convolution is 2 multiply-adds' flops per MAC (bias and activation not
-- counted); a memory-bound op counts the float32 bytes it must read plus those it must write.

local cases = {}
local function case(id, make) cases[#cases + 1] = { id = id, make = make } end

-- SGEMM C (m x n) = A (m x k) B (k x n); B given as its transpose where the layer stores it so.
local function sgemm(m, k, n, b_transposed)
  return function()
    local a = ms.randn(m, k)
    local b = b_transposed and ms.randn(n, k):t() or ms.randn(k, n)
    return function() return a:mm(b) end, { flops = 2.0 * m * k * n }
  end
end
case("sgemm/1024x1024x1024", sgemm(1024, 1024, 1024))
-- fc1 (9216 -> 128): forward x W^T, grad-input gout W, grad-weight gout^T x; batch 64 and 1000
case("sgemm/fc1_fwd_b64/64x9216x128", sgemm(64, 9216, 128, true))
case("sgemm/fc1_gin_b64/64x128x9216", sgemm(64, 128, 9216))
case("sgemm/fc1_gw_b64/128x64x9216", function()
  local gout, x = ms.randn(64, 128), ms.randn(64, 9216)
  return function() return gout:t():mm(x) end, { flops = 2.0 * 128 * 64 * 9216 }
end)
case("sgemm/fc1_fwd_b1000/1000x9216x128", sgemm(1000, 9216, 128, true))
-- fc1's forward in bfloat16 (FSDP's bfloat16 mixed precision), on AVX-512 BF16 where the CPU has
-- it: % of twice the FMA peak
case("linear_bf16/fc1_fwd_b64/64x9216x128", function()
  local x, w, b = ms.randn(64, 9216):bfloat16(), ms.randn(128, 9216):bfloat16(), ms.randn(128):bfloat16()
  local _ <close> = ms.no_grad()
  return function() return F.linear(x, w, b) end, { flops = 2.0 * 64 * 9216 * 128, peak_scale = 2 }
end)
-- the 85M GPT's MLP up-projection, Linear(768, 3072) over 4 x 256 tokens, as training runs it in
-- float32 and in bfloat16 (its bias added in the GEMM's store, issue 20)
for _, dt in ipairs({ "float32", "bfloat16" }) do
  case(("linear_%s/gpt_fc_fwd/1024x768x3072"):format(dt == "float32" and "f32" or "bf16"), function()
    local x, w, b = ms.randn(1024, 768):to(dt), ms.randn(3072, 768):to(dt), ms.randn(3072):to(dt)
    local _ <close> = ms.no_grad()
    return function() return F.linear(x, w, b) end,
      { flops = 2.0 * 1024 * 768 * 3072, peak_scale = dt == "bfloat16" and 2 or 1 }
  end)
end

-- conv2d at the seed's layers: conv1 1->32 on 28x28, conv2 32->64 on 26x26, 3x3, stride 1.
-- The seed's passes are those at batch 64: the forward, the weight gradient with the bias's
-- (gwb) and, for conv2 only, the input gradient (conv1's input, the data, needs none); its test
-- loop runs the forward at batch 64 too (nn_utils.forward_in_chunks). The batch-1000 lines are
-- that loop unchunked; gw and gin alone are the kernels without the bias.
local CONVS = { { name = "conv1", c = 1, o = 32, hw = 28 }, { name = "conv2", c = 32, o = 64, hw = 26 } }
for _, batch in ipairs({ 64, 1000 }) do
  for _, L in ipairs(CONVS) do
    local oh = L.hw - 2
    local flops = 2.0 * batch * L.o * oh * oh * L.c * 9
    local tag = ("%s_b%d"):format(L.name, batch)
    local function forward()
      local x, w, b = ms.randn(batch, L.c, L.hw, L.hw), ms.randn(L.o, L.c, 3, 3), ms.randn(L.o)
      local _ <close> = ms.no_grad()
      return function() return F.conv2d(x, w, b) end, { flops = flops }
    end
    case("conv2d_fwd/" .. tag, forward)
    -- As in training: each output is new to the caches (written cold, then read by the next layer)
    if batch == 64 then
      case("conv2d_fwd_fresh/" .. tag, function()
        local fn, work = forward()
        work.keep = true
        return fn, work
      end)
    end
    -- Each backward alone: only the wanted inputs require grad, so the node computes only them.
    for _, which in ipairs({ "gin", "gw", "gwb" }) do
      case(("conv2d_%s/%s"):format(which, tag), function()
        local x, w, b = ms.randn(batch, L.c, L.hw, L.hw), ms.randn(L.o, L.c, 3, 3), ms.randn(L.o)
        local wanted = which == "gin" and { x } or which == "gw" and { w } or { w, b }
        for _, t in ipairs(wanted) do t:requires_grad_() end
        local y = F.conv2d(x, w, which == "gwb" and b or nil)
        local gout = ms.randn(batch, L.o, oh, oh)
        return function()
          for _, t in ipairs(wanted) do t.grad = nil end
          y:backward(gout, { retain_graph = true })
        end, { flops = flops }
      end)
    end
  end
end

-- The memory-bound layers at batch 64 on conv2's output (64, 64, 24, 24), as in training.
local ACT = { 64, 64, 24, 24 }
local ACT_BYTES = 4.0 * 64 * 64 * 24 * 24
case("relu_fwd/64x64x24x24", function()
  local x = ms.randn(table.unpack(ACT))
  local _ <close> = ms.no_grad()
  return function() return F.relu(x) end, { bytes = 2 * ACT_BYTES }
end)
-- Forward as in training (grad enabled, the winners' indices kept); bytes: input + output floats.
case("max_pool2d_fwd/64x64x24x24", function()
  local x = ms.randn(table.unpack(ACT)):requires_grad_()
  return function() return F.max_pool2d(x, 2) end, { bytes = ACT_BYTES * 1.25 }
end)
case("max_pool2d_bwd/64x64x24x24", function()
  local x = ms.randn(table.unpack(ACT)):requires_grad_()
  local y = F.max_pool2d(x, 2)
  local g = ms.randn(y:size())
  return function()
    x.grad = nil
    y:backward(g, { retain_graph = true })
  end, { bytes = ACT_BYTES * 1.25 }
end)
-- log_softmax + nll_loss (sum) forward and backward on the (N, 10) logits: bytes of logits read,
-- log-probabilities written and read back, gradient written (N x 10 floats each).
for _, batch in ipairs({ 64, 1000 }) do
  case(("log_softmax_nll_fwdbwd/b%d"):format(batch), function()
    local z = ms.randn(batch, 10):requires_grad_()
    local target = ms.randint(1, 11, { batch })
    return function()
      z.grad = nil
      F.nll_loss(F.log_softmax(z, 2), target, { reduction = "sum" }):backward()
    end, { bytes = 4.0 * batch * 10 * 4 }
  end)
end
-- The backward of the GPT attention's split of c_attn's output (B, T, 3C) into q, k, v (GPT-2
-- small: C = 768, B = 4, T = 256), float32 and bfloat16: the three pieces' gradients written into
-- one new gradient of the input's shape. The pieces are summed so one backward reaches all three
-- (AddBackward0 hands its gradient on as it is); bytes: the pieces' gradients read, the input's
-- gradient written.
for _, dt in ipairs({ "float32", "bfloat16" }) do
  case(("split3_bwd_%s/4x256x2304"):format(dt), function()
    local x = ms.randn(4, 256, 2304):to(dt):requires_grad_()
    local p = x:split(768, 3)
    local y = p[1] + p[2] + p[3]
    local g = ms.randn(4, 256, 768):to(dt)
    return function()
      x.grad = nil
      y:backward(g, { retain_graph = true })
    end, { bytes = 2.0 * x:numel() * x:element_size() }
  end)
end
-- The fused Adadelta step over the seed Net's 8 parameters (1,199,882 floats): reads param, grad,
-- square_avg, acc_delta, writes param, square_avg, acc_delta.
case("adadelta_step/seed_net_1.2M", function()
  local net = Net()
  local numel = 0
  for _, p in ipairs(net:parameters()) do numel = numel + p:numel() end
  local opt = optim.Adadelta(net:parameters(), { lr = 1.0 })
  F.nll_loss(net(ms.randn(2, 1, 28, 28)), ms.randint(1, 11, { 2 })):backward()
  opt:step() -- the state exists before timing
  return function() opt:step() end, { bytes = 4.0 * 7 * numel }
end)
-- The fused Adam(W) and SGD-with-momentum steps on one float32 shard of the GPT's size (85M
-- parameters over 2 ranks: 42M each), state made before timing. Bytes: Adam reads param, grad,
-- exp_avg, exp_avg_sq and writes back three (amsgrad: max_exp_avg_sq read and written too); SGD
-- reads param, grad, momentum_buffer and writes two.
local SHARD = 42 * 1000 * 1000
local function optim_step(make_opt, arrays)
  return function()
    local p = ms.randn(SHARD):requires_grad_()
    p.grad = ms.randn(SHARD)
    local opt = make_opt({ p })
    opt:step()
    return function() opt:step() end, { bytes = 4.0 * arrays * SHARD }
  end
end
case("adamw_step/shard_42M", optim_step(function(ps) return optim.AdamW(ps, { lr = 1e-3 }) end, 7))
case("adamw_amsgrad_step/shard_42M",
     optim_step(function(ps) return optim.AdamW(ps, { lr = 1e-3, amsgrad = true }) end, 9))
case("adam_l2_step/shard_42M",
     optim_step(function(ps) return optim.Adam(ps, { lr = 1e-3, weight_decay = 0.01 }) end, 7))
case("sgd_momentum_step/shard_42M",
     optim_step(function(ps) return optim.SGD(ps, { lr = 0.1, momentum = 0.9, nesterov = true }) end, 5))

-- 16-bit elementwise arithmetic at the GPT's MLP activation (4, 256, 3072), as bfloat16 mixed
-- precision runs it: out of place (residual adds, the backward's products), in place (a leaf's
-- gradient accumulation) and the autograd walk summing two gradients of one tensor (y = x + x);
-- bytes: two inputs read, one output written, 2 bytes each.
local EW16 = { 4, 256, 3072 }
local EW16_BYTES = 2.0 * 3 * 4 * 256 * 3072
for _, op in ipairs({ "add", "mul" }) do
  case(("binary_bf16/%s/4x256x3072"):format(op), function()
    local a, b = ms.randn(table.unpack(EW16)):bfloat16(), ms.randn(table.unpack(EW16)):bfloat16()
    local _ <close> = ms.no_grad()
    return function() return a[op](a, b) end, { bytes = EW16_BYTES }
  end)
end
case("binary_bf16/add_/4x256x3072", function()
  local a, b = ms.randn(table.unpack(EW16)):bfloat16(), ms.randn(table.unpack(EW16)):bfloat16()
  local _ <close> = ms.no_grad()
  return function() a:add_(b) end, { bytes = EW16_BYTES }
end)
case("binary_bf16/grad_sum/4x256x3072", function()
  local x = ms.randn(table.unpack(EW16)):bfloat16():requires_grad_()
  local y = x + x
  local gout = ms.randn(table.unpack(EW16)):bfloat16()
  return function()
    x.grad = nil
    y:backward(gout, { retain_graph = true })
  end, { bytes = EW16_BYTES }
end)
-- Linear's bias gradient: the sum over the batch dim of a contiguous (1024, N) output gradient (a
-- column reduction), float32 and bfloat16 (FSDP's mixed precision); bytes: the input read.
for _, dt in ipairs({ "float32", "bfloat16" }) do
  for _, n in ipairs({ 768, 3072 }) do
    case(("sum_dim1/%s/1024x%d"):format(dt, n), function()
      local g = ms.randn(1024, n):to(dt)
      local _ <close> = ms.no_grad()
      return function() return g:sum(1) end, { bytes = (dt == "float32" and 4.0 or 2.0) * 1024 * n }
    end)
  end
end
-- clip_grad_norm's per-gradient 2-norm: a whole contiguous float32 tensor.
case("norm2/f32/3072x768", function()
  local g = ms.randn(3072, 768)
  local _ <close> = ms.no_grad()
  return function() return g:norm() end, { bytes = 4.0 * 3072 * 768 }
end)

-- F.scaled_dot_product_attention at the GPT's per-rank shape (batch 4, 12 heads, T 256, head 64),
-- causal, q, k and v the transposed (B, nh, T, hs) views of one (B, T, 3C) tensor as the model
-- makes them. Flops: the forward's two products (q k^T, p v) over the causal half; the forward
-- and backward also count the backward's five (scores and gout v^T recomputed, dV, dK, dQ).
local SDPA = { B = 4, nh = 12, T = 256, hs = 64 }
for _, dt in ipairs({ "float32", "bfloat16" }) do
  local function heads()
    local C = SDPA.nh * SDPA.hs
    local qkv = ms.randn(SDPA.B, SDPA.T, 3 * C):to(dt)
    local out = {}
    for i, t in ipairs(qkv:split(C, 3)) do
      out[i] = t:reshape(SDPA.B, SDPA.T, SDPA.nh, SDPA.hs):transpose(2, 3)
    end
    return out
  end
  local product = 2.0 * SDPA.B * SDPA.nh * SDPA.T * SDPA.T * SDPA.hs / 2
  local tag = ("%s/%dx%dx%dx%d_causal"):format(dt, SDPA.B, SDPA.nh, SDPA.T, SDPA.hs)
  local scale = dt == "bfloat16" and 2 or 1
  case("sdpa_fwd/" .. tag, function()
    local h = heads()
    local _ <close> = ms.no_grad()
    return function() return F.scaled_dot_product_attention(h[1], h[2], h[3], { is_causal = true }) end,
      { flops = 2 * product, peak_scale = scale }
  end)
  case("sdpa_fwdbwd/" .. tag, function()
    local h = heads()
    for _, t in ipairs(h) do t:requires_grad_() end
    local g = ms.randn(SDPA.B, SDPA.nh, SDPA.T, SDPA.hs):to(dt)
    return function()
      for _, t in ipairs(h) do t.grad = nil end
      F.scaled_dot_product_attention(h[1], h[2], h[3], { is_causal = true }):backward(g)
    end, { flops = 7 * product, peak_scale = scale }
  end)
end

-- Selection and scans on (1024, 1000) float32 logits (a classifier's batch over ImageNet's classes):
-- gather of one position per row (a loss's target), scatter_add of every element (index_add
-- style), sort and topk(5) of every row (top-5 accuracy), cumsum along rows, any over all. Bytes:
-- what the op must read and write (indices 8 bytes each); sort and topk count the row read and
-- the outputs written, not their compares.
local SEL = { 1024, 1000 }
local SEL_N = 1024 * 1000
local function select_case(id, bytes, make)
  case(id .. "/1024x1000", function()
    ms.manual_seed(1)
    local x = ms.randn(table.unpack(SEL))
    local _ <close> = ms.no_grad()
    return make(x), { bytes = bytes }
  end)
end
select_case("gather_rows", 4.0 * 1024 * 3, function(x)
  local idx = ms.randint(1, 1001, { 1024, 1 })
  return function() return x:gather(2, idx) end
end)
select_case("scatter_add", SEL_N * (4.0 + 8 + 4 + 4), function(x)
  local idx, z = ms.randint(1, 1001, SEL), ms.zeros(table.unpack(SEL))
  return function() return z:scatter_add(2, idx, x) end
end)
select_case("sort_rows", SEL_N * (4.0 + 4 + 8), function(x)
  return function()
    local v, i <close> = x:sort(2)
    return v
  end
end)
select_case("topk5_rows", SEL_N * 4.0 + 1024 * 5 * 12, function(x)
  return function()
    local v, i <close> = x:topk(5, 2)
    return v
  end
end)
select_case("cumsum_rows", SEL_N * 8.0, function(x)
  return function() return x:cumsum(2) end
end)
select_case("any", SEL_N * 4.0, function(x)
  return function() return x:any() end
end)

-- ---- run ------------------------------------------------------------------------------------------

print(("# ops_bench: %s, threads %s, %d samples of ~%g s after %d warm-up calls"):format(
  opts.quick and "quick" or "full", table.concat(opts.threads, ","), SAMPLES, SAMPLE_S, WARMUP))
ms.manual_seed(1)
for _, c in ipairs(cases) do
  if opts.only and not c.id:find(opts.only) then goto next_case end
  local fn, work = c.make()
  for _, t in ipairs(opts.threads) do
    ms.set_num_threads(t)
    report(c.id, t, time_call(fn, work.keep), work)
  end
  fn, work = nil, nil -- the case's tensors go before the next case allocates its own
  collectgarbage()
  ::next_case::
end
