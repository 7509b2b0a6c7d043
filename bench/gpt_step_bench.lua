-- gpt_step_bench.lua: one training step's forward and backward of the issue's 85M GPT (12 layers,
-- 12 heads, 768 wide, block 256, 256 tokens) on a (4, 256) batch of ids, in bfloat16 by default;
-- one warm-up step, then the fastest and the median of --repeat steps, in seconds. One thread
-- unless --threads N. On a shared machine, run two builds in turn several times (each print is
-- one sample of the load at that moment).
--   build/moonshard bench/gpt_step_bench.lua [--threads N] [--repeat K] [--dtype float32]
local ms = require "moonshard"
local gpt = require "moonshard.models.gpt"
local argparse = require "moonshard.argparse"
local parser = argparse.ArgumentParser{description = "the 85M GPT's forward + backward step on the CPU"}
parser:add_argument("--threads", {type = "int", default = 1, min = 1, metavar = "N", help = "engine threads"})
parser:add_argument("--repeat", {type = "int", default = 5, min = 1, metavar = "K", help = "timed steps"})
parser:add_argument("--dtype", {default = "bfloat16", choices = {"bfloat16", "float32"}, help = "the model's dtype"})
local args = parser:parse_args(arg)
ms.set_num_threads(args.threads)

ms.manual_seed(1)
local model = gpt.GPT{n_layer = 12, n_head = 12, n_embd = 768, block_size = 256, vocab_size = 256}:to(args.dtype)
local idx = ms.randint(1, 257, {4, 256})
local targets = ms.randint(1, 257, {4, 256})

local function step()
  model:zero_grad()
  local _, loss = model(idx, targets)
  loss:backward()
end

step() -- warm-up
local samples = {}
for i = 1, args["repeat"] do
  local t0 = ms.perf_counter()
  step()
  samples[i] = ms.perf_counter() - t0
end
table.sort(samples)
print(("gpt_step %s (4, 256) threads %d: min %.3f s  median %.3f s"):format(args.dtype, args.threads, samples[1],
  samples[(#samples + 1) // 2]))
