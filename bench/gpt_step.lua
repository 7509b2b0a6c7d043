-- gpt_step.lua: the GPT's training step reduced to its computation: one process, forward and
-- backward of the model with its parameters in float32 or bfloat16 (no optimizer, no FSDP, no
-- communication). Per dtype: the median step and its forward/backward split, the model FLOP rate
-- (nanoGPT's 6 N + 12 L T E per token, as scripts/gpt_fsdp.lua counts) against the best rate of
-- a 1024^3 product in that dtype (the GEMM's own practical peak), and the tokens/s of one
-- process, which bounds what N ranks that each compute the same batch can reach together: N
-- times it, before FSDP's gathers, reductions, optimizer and waits. The steps alternate between
-- the dtypes, so load from other processes falls on both alike.
--   build/moonshard bench/gpt_step.lua [--layers 12] [--width 768] [--heads 12] [--block 256]
--     [--batch 4] [--samples 5] [--threads 1] [--dtypes float32,bfloat16]
local ms = require "moonshard"
local gpt = require "moonshard.models.gpt"
local argparse = require "moonshard.argparse"

local parser = argparse.ArgumentParser{description = "the GPT's forward and backward alone, against the GEMM's rate"}
parser:add_argument("--layers", {type = "int", default = 12, min = 1, metavar = "N"})
parser:add_argument("--width", {type = "int", default = 768, min = 1, metavar = "C"})
parser:add_argument("--heads", {type = "int", default = 12, min = 1, metavar = "H"})
parser:add_argument("--block", {type = "int", default = 256, min = 1, metavar = "T", help = "tokens per sequence"})
parser:add_argument("--batch", {type = "int", default = 4, min = 1, metavar = "B"})
parser:add_argument("--samples", {type = "int", default = 5, min = 1, metavar = "K",
  help = "steps timed per dtype, after one untimed"})
parser:add_argument("--threads", {type = "int", default = 1, min = 1, metavar = "N", help = "engine threads"})
parser:add_argument("--dtypes", {default = "float32,bfloat16", metavar = "LIST",
  help = "comma-separated: float32, bfloat16"})
local args = parser:parse_args(arg)
ms.set_num_threads(args.threads)

local dtypes = {}
for name in args.dtypes:gmatch("[^,]+") do
  if name ~= "float32" and name ~= "bfloat16" then
    parser:error(("argument --dtypes: invalid value: '%s' (float32 or bfloat16)"):format(name))
  end
  dtypes[#dtypes + 1] = name
end

-- The best rate of a few 1024^3 products in dtype dt, FLOP/s.
local function gemm_rate(dt)
  local n = 1024
  local a, b = ms.randn(n, n):to(dt), ms.randn(n, n):to(dt)
  ms.matmul(a, b)
  local best = math.huge
  for _ = 1, 6 do
    local t0 = ms.perf_counter()
    ms.matmul(a, b)
    best = math.min(best, ms.perf_counter() - t0)
  end
  return 2 * n ^ 3 / best
end

local function median(xs)
  local s = table.move(xs, 1, #xs, 1, {})
  table.sort(s)
  return s[(#s + 1) // 2]
end

ms.manual_seed(1)
local config = {n_layer = args.layers, n_head = args.heads, n_embd = args.width, block_size = args.block,
  vocab_size = 256}
local x = ms.randint(1, 257, {args.batch, args.block})
local y = ms.randint(1, 257, {args.batch, args.block})
local runs = {}
for _, name in ipairs(dtypes) do
  local model = gpt.GPT(config):to(ms[name])
  runs[#runs + 1] = {name = name, model = model, params = model:num_parameters(false), fwd = {}, bwd = {}}
end

-- One forward and backward; the gradients are dropped after, so each step allocates them afresh
-- as a training step after zero_grad does.
local function step(run)
  local t0 = ms.perf_counter()
  local _, loss = run.model(x, y)
  local t1 = ms.perf_counter()
  loss:backward()
  local t2 = ms.perf_counter()
  for _, p in ipairs(run.model:parameters()) do p.grad = nil end
  return t1 - t0, t2 - t1
end

for i = 0, args.samples do
  for _, run in ipairs(runs) do
    local f, b = step(run)
    if i > 0 then run.fwd[i], run.bwd[i] = f, b end
  end
end

local tokens = args.batch * args.block
print(("# gpt step: %d layers x %d, %d heads, %d x %d tokens, %d thread(s), median of %d steps"):format(
  args.layers, args.width, args.heads, args.batch, args.block, args.threads, args.samples))
for _, run in ipairs(runs) do
  local totals = {}
  for i = 1, args.samples do totals[i] = run.fwd[i] + run.bwd[i] end
  local t = median(totals)
  local flops = (6 * run.params + 12 * args.layers * args.block * args.width) * tokens / t
  local peak = gemm_rate(ms[run.name])
  print(("BENCH gpt_step dtype=%s threads=%d step_ms=%.1f fwd_ms=%.1f bwd_ms=%.1f tokens_per_s=%.1f "
    .. "model_gflops=%.1f gemm1024_gflops=%.1f pct_of_gemm=%.1f"):format(run.name, args.threads, t * 1e3,
    median(run.fwd) * 1e3, median(run.bwd) * 1e3, tokens / t, flops / 1e9, peak / 1e9, 100 * flops / peak))
end
