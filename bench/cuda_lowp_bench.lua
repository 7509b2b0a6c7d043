-- cuda_lowp_bench.lua: the nn ops with 16-bit CUDA kernels (conv2d through cuDNN, pooling,
-- softmax, activations, norms, embedding) and the seed's Net, each forward + backward
-- at the seed's sizes (batch 64 unless --batch), in float32 and in a 16-bit dtype (bfloat16
-- unless --dtype) on cuda:0, timed with CUDA events after a warm-up; one line per op with both
-- times and the ratio 16-bit / float32 (below 1: the 16-bit op is faster). Without a GPU it
-- says so and exits 0.
--   build/moonshard bench/cuda_lowp_bench.lua [--seconds S] [--batch B] [--dtype float16] [--ops conv2,step]
local ms = require "moonshard"
local F = require "moonshard.functional"
local argparse = require "moonshard.argparse"
local timing = require "bench.lib.cuda_timing"

local parser = argparse.ArgumentParser{description = "nn ops and the seed's step in float32 and 16-bit on cuda:0"}
parser:add_argument("--seconds", {type = "float", default = 0.5, min = 0, metavar = "S",
                                  help = "GPU time spent on each op and dtype"})
parser:add_argument("--batch", {type = "int", default = 64, min = 1, metavar = "B", help = "the batch size"})
parser:add_argument("--dtype", {default = "bfloat16", choices = { "bfloat16", "float16" },
                                help = "the 16-bit dtype set against float32"})
parser:add_argument("--ops", {default = "", metavar = "LIST", help = "comma-separated op names (default: all)"})
local args = parser:parse_args(arg)

local B = args.batch

-- Each case makes its inputs in dtype dt on dev and returns the function one iteration runs
-- (forward and backward, or the whole training step).
local function leaf(t, dt, dev) return t:to(dt):to(dev):requires_grad_() end

local function fwd_bwd(fn, ...)
  local xs = { ... }
  return function()
    for _, x in ipairs(xs) do x.grad = nil end
    local y = fn(table.unpack(xs))
    y:backward(ms.ones_like(y))
  end
end

local CASES = {
  { "conv1", "conv2d (B, 1, 28, 28) * (32, 1, 3, 3) + bias", function(dt, dev)
    return fwd_bwd(F.conv2d, leaf(ms.randn(B, 1, 28, 28), dt, dev), leaf(ms.randn(32, 1, 3, 3), dt, dev),
      leaf(ms.randn(32), dt, dev))
  end },
  { "conv2", "conv2d (B, 32, 26, 26) * (64, 32, 3, 3) + bias", function(dt, dev)
    return fwd_bwd(F.conv2d, leaf(ms.randn(B, 32, 26, 26), dt, dev), leaf(ms.randn(64, 32, 3, 3) * 0.1, dt, dev),
      leaf(ms.randn(64), dt, dev))
  end },
  { "max_pool2d", "max_pool2d 2 of (B, 64, 24, 24)", function(dt, dev)
    return fwd_bwd(function(x) return F.max_pool2d(x, 2) end, leaf(ms.randn(B, 64, 24, 24), dt, dev))
  end },
  { "avg_pool2d", "avg_pool2d 2 of (B, 64, 24, 24)", function(dt, dev)
    return fwd_bwd(function(x) return F.avg_pool2d(x, 2) end, leaf(ms.randn(B, 64, 24, 24), dt, dev))
  end },
  { "log_softmax", "log_softmax of (B, 10)", function(dt, dev)
    return fwd_bwd(function(x) return F.log_softmax(x, 2) end, leaf(ms.randn(B, 10), dt, dev))
  end },
  { "softmax", "softmax of (B * 128, 128)", function(dt, dev)
    return fwd_bwd(function(x) return F.softmax(x, 2) end, leaf(ms.randn(B * 128, 128), dt, dev))
  end },
  { "gelu", "gelu (tanh) of (B, 9216)", function(dt, dev)
    return fwd_bwd(function(x) return F.gelu(x, "tanh") end, leaf(ms.randn(B, 9216), dt, dev))
  end },
  { "silu", "silu of (B, 9216)", function(dt, dev)
    return fwd_bwd(F.silu, leaf(ms.randn(B, 9216), dt, dev))
  end },
  { "layer_norm", "layer_norm of (B * 128, 768)", function(dt, dev)
    return fwd_bwd(function(x, w, b) return F.layer_norm(x, { 768 }, w, b) end, leaf(ms.randn(B * 128, 768), dt, dev),
      leaf(ms.ones(768), dt, dev), leaf(ms.zeros(768), dt, dev))
  end },
  { "batch_norm", "batch_norm (training) of (B, 32, 26, 26)", function(dt, dev)
    local rm, rv = ms.zeros(32):to(dt):to(dev), ms.ones(32):to(dt):to(dev)
    return fwd_bwd(function(x, w, b) return F.batch_norm(x, rm, rv, w, b, true) end,
      leaf(ms.randn(B, 32, 26, 26), dt, dev), leaf(ms.ones(32), dt, dev), leaf(ms.zeros(32), dt, dev))
  end },
  { "embedding", "embedding of B * 128 indices into (30000, 768)", function(dt, dev)
    local idx = ms.randint(1, 30001, { B, 128 }):to(dev)
    return fwd_bwd(function(w) return F.embedding(idx, w) end, leaf(ms.randn(30000, 768), dt, dev))
  end },
  { "step", "the seed Net's forward and backward", function(dt, dev)
    local Net = require "moonshard.seed_net"
    local net = Net():to(dt):to(dev) -- the optimizer's step is float32 either way (FSDP's masters)
    local x = ms.randn(B, 1, 28, 28):to(dt):to(dev)
    local target = ms.randint(1, 11, { B }):to(dev)
    return function()
      net:zero_grad()
      F.nll_loss(net(x), target):backward()
    end
  end },
}

local wanted = {}
for name in args.ops:gmatch("[^,%s]+") do wanted[name] = true end
for name in pairs(wanted) do
  local known = false
  for _, c in ipairs(CASES) do known = known or c[1] == name end
  if not known then
    local names = {}
    for _, c in ipairs(CASES) do names[#names + 1] = c[1] end
    io.stderr:write(("cuda_lowp_bench: unknown op '%s' in --ops (known: %s)\n"):format(name, table.concat(names, ", ")))
    os.exit(2)
  end
end

if not ms.cuda.is_available() then
  print("cuda_lowp_bench: no GPU: " .. tostring(ms.cuda.unavailable_reason()))
  os.exit(0)
end

-- cuDNN's plans and the allocator's blocks settle in the first calls
local function time_ms(fn) return timing.time_ms(fn, { seconds = args.seconds, warmup = 3 }) end

local function timed(case, dt)
  ms.manual_seed(1)
  local ok, res = pcall(function() return time_ms(case[3](dt, "cuda:0")) end)
  return ok and res or nil, not ok and tostring(res) or nil
end

print(("cuda_lowp_bench on %s: batch %d, float32 against %s (ratio < 1: %s is faster)"):format(
  ms.cuda.get_device_name(0), B, args.dtype, args.dtype))
print(("  %-12s %-56s %10s %10s %7s"):format("op", "what", "f32 ms", args.dtype:sub(1, 4) .. " ms", "ratio"))
for _, c in ipairs(CASES) do
  if next(wanted) == nil or wanted[c[1]] then
    local t32, e32 = timed(c, "float32")
    local t16, e16 = timed(c, args.dtype)
    if t32 and t16 then
      print(("  %-12s %-56s %10.4f %10.4f %7.2f"):format(c[1], (c[2]:gsub("B", tostring(B))), t32, t16, t16 / t32))
    else
      print(("  %-12s not run: %s"):format(c[1], e32 or e16))
    end
  end
end
print(("peak memory allocated: %.1f MiB"):format(ms.cuda.max_memory_allocated() / 2 ^ 20))
