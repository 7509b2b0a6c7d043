-- checkpoint_bench.lua: activation checkpointing on the GPT in one process: the activation
-- memory and the step time (forward, backward, AdamW step) with and without every Block
-- checkpointed. One model and optimizer; the Blocks are wrapped and unwrapped between samples,
-- which alternate, so load from other processes falls on both alike.
--   activation peak: the engine's peak during forward + backward minus what it held before
--     (parameters, gradients kept in place, AdamW state): activations, their gradients, and the
--     dead tensors the Lua collector has not reached yet (its headroom: lua/l_tensor.c)
--   held after forward: what forward leaves alive for backward (collected first): the saved
--     activations proper
--   build/moonshard bench/checkpoint_bench.lua [--layers 12] [--width 768] [--heads 12]
--     [--block 256] [--batch 4] [--samples 3] [--threads N]
local ms = require "moonshard"
local optim = require "moonshard.optim"
local gpt = require "moonshard.models.gpt"
local ckpt = require "moonshard.checkpoint"
local argparse = require "moonshard.argparse"

local parser = argparse.ArgumentParser{description = "activation checkpointing: memory and step time on the GPT"}
parser:add_argument("--layers", {type = "int", default = 12, min = 1, metavar = "N"})
parser:add_argument("--width", {type = "int", default = 768, min = 1, metavar = "C"})
parser:add_argument("--heads", {type = "int", default = 12, min = 1, metavar = "H"})
parser:add_argument("--block", {type = "int", default = 256, min = 1, metavar = "T", help = "tokens per sequence"})
parser:add_argument("--batch", {type = "int", default = 4, min = 1, metavar = "B"})
parser:add_argument("--samples", {type = "int", default = 3, min = 1, metavar = "K", help = "steps timed per mode"})
parser:add_argument("--threads", {type = "int", default = 0, min = 0, metavar = "N", help = "engine threads (0: default)"})
local args = parser:parse_args(arg)
if args.threads > 0 then ms.set_num_threads(args.threads) end

local MB = 1024 * 1024
ms.manual_seed(1)
local config = {n_layer = args.layers, n_head = args.heads, n_embd = args.width, block_size = args.block,
  vocab_size = 256, dropout = 0.1}
local model = gpt.GPT(config)
local opt = optim.AdamW(model:parameters(), {lr = 1e-4, weight_decay = 0.1})
local x = ms.randint(1, 257, {args.batch, args.block})
local y = ms.randint(1, 257, {args.batch, args.block})

-- The Blocks in the ModuleList, and their wrappers, to switch between the two modes.
local h = model.transformer.h
local blocks, wrappers = {}, {}
for i, name in ipairs(h._modules.names) do
  blocks[i] = h._modules.map[name]
  wrappers[i] = ckpt.checkpoint_wrapper(blocks[i])
end
local function use_checkpointing(on)
  for i, name in ipairs(h._modules.names) do h._modules.map[name] = on and wrappers[i] or blocks[i] end
end

-- One training step; returns seconds, the activation peak and what forward left held, in bytes.
local function step()
  opt:zero_grad({set_to_none = false})
  collectgarbage()
  local base = ms.memory_stats().current
  ms.reset_peak_memory_stats()
  local t0 = ms.perf_counter()
  local _, loss = model(x, y)
  local t_fwd = ms.perf_counter()
  loss:backward()
  local t1 = ms.perf_counter()
  local peak = ms.memory_stats().peak - base
  opt:step()
  local t2 = ms.perf_counter()
  -- forward again, untimed, for what it leaves held once the collector has run
  local _, loss2 = model(x, y)
  collectgarbage()
  local held = ms.memory_stats().current - base
  loss2 = nil -- luacheck: ignore
  collectgarbage()
  return {total = t2 - t0, fwd = t_fwd - t0, bwd = t1 - t_fwd, opt = t2 - t1, peak = peak, held = held}
end

local function sorted(list, key)
  local v = {}
  for i, s in ipairs(list) do v[i] = s[key] end
  table.sort(v)
  return v
end
local function median(list, key)
  local v = sorted(list, key)
  return v[(#v + 1) // 2]
end
local function fastest(list, key) return sorted(list, key)[1] end

print(("GPT %d layers x %d wide, %d heads, vocab 256, block %d, batch %d: %.1fM parameters, %d engine threads")
  :format(args.layers, args.width, args.heads, args.block, args.batch, model:num_parameters() / 1e6,
    ms.get_num_threads()))
local modes = {plain = {}, checkpoint = {}}
for _, on in ipairs({false, true}) do -- warm-up: AdamW's state, the block cache
  use_checkpointing(on)
  step()
end
local stats = ms.memory_stats()
print(("held between steps (parameters, gradients, AdamW state): %.0f MB"):format(stats.current / MB))
for _ = 1, args.samples do
  for _, on in ipairs({false, true}) do
    use_checkpointing(on)
    local s = step()
    local list = modes[on and "checkpoint" or "plain"]
    list[#list + 1] = s
    print(("  %-10s step %.3f s (fwd %.3f, bwd %.3f, opt %.3f)  activation peak %.0f MB  held after forward %.0f MB")
      :format(on and "checkpoint" or "plain", s.total, s.fwd, s.bwd, s.opt, s.peak / MB, s.held / MB))
  end
end
local p, c = modes.plain, modes.checkpoint
local function line(name, list)
  return ("%-10s median step %.3f s (fwd %.3f, bwd %.3f)  activation peak %.0f MB  held after forward %.0f MB")
    :format(name, median(list, "total"), median(list, "fwd"), median(list, "bwd"), median(list, "peak") / MB,
      median(list, "held") / MB)
end
print(line("plain", p))
print(line("checkpoint", c))
print(("checkpointing: activation peak %.0f%% less, held after forward %.0f%% less, step time %+.0f%% "
  .. "(medians; fastest steps %.3f vs %.3f s: %+.0f%%)")
  :format(100 * (1 - median(c, "peak") / median(p, "peak")), 100 * (1 - median(c, "held") / median(p, "held")),
    100 * (median(c, "total") / median(p, "total") - 1), fastest(c, "total"), fastest(p, "total"),
    100 * (fastest(c, "total") / fastest(p, "total") - 1)))
