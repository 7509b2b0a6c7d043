-- optim_foreach.lua: an optimizer step with foreach = true (one native call per group) against
-- foreach = false (one per parameter), on many small parameters and on the seed Net, on the CPU
-- (or --device cuda:0). Prints "BENCH optim <case> foreach=<bool> <ms> ms/step (min <ms>, cpu <ms>)"
-- lines: the median and the fastest of 15 samples of wall time, and the process's CPU time per
-- step (on a loaded machine, with --threads 1, the steadiest of the three).
--   build/moonshard bench/optim_foreach.lua [--device cuda:0] [--steps 200] [--threads N]
local ms = require "moonshard"
local optim = require "moonshard.optim"
local Net = require "moonshard.seed_net"
local argparse = require "moonshard.argparse"

local parser = argparse.ArgumentParser{description = "foreach vs single-tensor optimizer steps"}
parser:add_argument("--device", {default = "cpu", help = "where the parameters live"})
parser:add_argument("--steps", {type = "int", default = 200, help = "steps per sample"})
parser:add_argument("--threads", {type = "int", help = "CPU threads (default: the pool's)"})
local args = parser:parse_args(arg)
if args.threads then ms.set_num_threads(args.threads) end

local function median(xs)
  table.sort(xs)
  return xs[(#xs + 1) // 2]
end

-- Milliseconds per opt:step() over params (their grads set once): median and min of 15 samples.
local function time_steps(params, ctor, opts)
  for _, p in ipairs(params) do p.grad = ms.randn(p.shape):to(args.device) end
  local opt = ctor(params, opts)
  for _ = 1, 3 do opt:step() end
  local samples, cpu0 = {}, os.clock()
  for s = 1, 15 do
    if args.device ~= "cpu" then ms.cuda.synchronize() end
    local t0 = ms.perf_counter()
    for _ = 1, args.steps do opt:step() end
    if args.device ~= "cpu" then ms.cuda.synchronize() end
    samples[s] = (ms.perf_counter() - t0) * 1000 / args.steps
  end
  local cpu = (os.clock() - cpu0) * 1000 / (15 * args.steps)
  local m = median(samples)
  return m, samples[1], cpu
end

local function small_params()
  local ps = {}
  for i = 1, 200 do
    ps[i] = ms.randn(1000):to(args.device)
    ps[i].requires_grad = true
  end
  return ps
end

local cases = {
  { "sgd_200x1000", small_params, optim.SGD, { lr = 0.01, momentum = 0.9 } },
  { "adam_200x1000", small_params, optim.Adam, { lr = 1e-3 } },
  { "adadelta_seed_net", function() return Net():to(args.device):parameters() end, optim.Adadelta, { lr = 1.0 } },
}

for _, c in ipairs(cases) do
  for _, foreach in ipairs({ false, true }) do
    local opts = { foreach = foreach }
    for k, v in pairs(c[4]) do opts[k] = v end
    print(("BENCH optim %s foreach=%s %.4f ms/step (min %.4f, cpu %.4f)"):format(c[1], tostring(foreach),
      time_steps(c[2](), c[3], opts)))
  end
end
