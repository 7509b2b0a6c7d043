-- lib/cuda_timing.lua: the GPU benchmarks' one timer (bench/cuda_half_ops.lua, bench/cuda_lowp_bench.lua,
-- scripts/cuda_bench.lua, each run from the repository root, where Lua's ./?.lua path finds it as
-- "bench.lib.cuda_timing"): the mean milliseconds of GPU time per call of fn, from CUDA events around
-- doubling batches of calls, until about `seconds` of GPU time have passed.
local ms = require "moonshard"

local M = {}

-- opts: seconds (GPU time to spend, default 1), warmup (untimed calls first, default 1: cuBLAS
-- and cuDNN plans, the allocator's blocks), max_calls (default 100000), close (true: each call's
-- result is closed at once, as a training loop releases its tensors).
function M.time_ms(fn, opts)
  opts = opts or {}
  local seconds, max_calls = opts.seconds or 1, opts.max_calls or 100000
  local function call()
    if opts.close then
      local _ <close> = fn()
    else
      fn()
    end
  end
  for _ = 1, opts.warmup or 1 do call() end
  ms.cuda.synchronize()
  local start, stop = ms.cuda.Event({ enable_timing = true }), ms.cuda.Event({ enable_timing = true })
  local calls, total = 0, 0
  while total < seconds * 1000 and calls < max_calls do
    local n = math.max(1, calls)
    start:record()
    for _ = 1, n do call() end
    stop:record()
    stop:synchronize()
    total, calls = total + start:elapsed_time(stop), calls + n
  end
  return total / calls
end

return M
