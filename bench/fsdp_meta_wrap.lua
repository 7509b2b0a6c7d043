-- fsdp_meta_wrap.lua: what wrapping a GPT in FSDP costs when it is built on meta
-- (nn.deferred_init; FSDP materialises unit by unit) against building it normally first: wrap
-- time (building included), the engine's peak bytes and the process peak (VmHWM) at the end of
-- wrapping, per rank. One mode per run, so VmHWM is that mode's:
--   build/moonshard -n 2 bench/fsdp_meta_wrap.lua --mode meta
--   build/moonshard -n 2 bench/fsdp_meta_wrap.lua --mode normal
-- Defaults: GPT 12 x 768, 12 heads, byte vocabulary (256), block 256 (about 85M parameters).
local ms = require "moonshard"
local nn = require "moonshard.nn"
local fsdp = require "moonshard.fsdp"
local gpt = require "moonshard.models.gpt"
local argparse = require "moonshard.argparse"
local dist = ms.distributed

local parser = argparse.ArgumentParser{description = "FSDP wrap of a GPT built on meta vs normally"}
parser:add_argument("--mode", {choices = {"meta", "normal"}, default = "meta"})
parser:add_argument("--n_layer", {type = "int", default = 12})
parser:add_argument("--n_embd", {type = "int", default = 768})
parser:add_argument("--n_head", {type = "int", default = 12})
local args = parser:parse_args(arg)

dist.init_process_group("mpi")
local rank, world = dist.get_rank(), dist.get_world_size()
local config = {n_layer = args.n_layer, n_embd = args.n_embd, n_head = args.n_head, block_size = 256,
                vocab_size = 256, dropout = 0}

local function vm_hwm_mb() return ms.memory_stats().process_peak / 2 ^ 20 end

dist.barrier()
local hwm0 = vm_hwm_mb()
local base = ms.memory_stats().current
ms.reset_peak_memory_stats()
local t0 = ms.perf_counter()
ms.manual_seed(1)
local model = args.mode == "meta" and nn.deferred_init(gpt.GPT, config) or gpt.GPT(config)
model = fsdp.FSDP(model, {auto_wrap_policy = fsdp.ModuleWrapPolicy{gpt.Block}})
local secs = ms.perf_counter() - t0
local stats = ms.memory_stats()
local n = 0
for _, p in ipairs(model:parameters()) do n = n + p:numel() end -- this rank's shard
local line = ("BENCH fsdp_meta_wrap mode=%s world=%d rank=%d wrap_s=%.2f engine_peak_mb=%.1f "
  .. "engine_now_mb=%.1f shard_mb=%.1f vmhwm_mb=%.1f vmhwm_before_mb=%.1f"):format(args.mode, world, rank, secs,
  (stats.peak - base) / 2^20, (stats.current - base) / 2^20, n * 4 / 2^20, vm_hwm_mb(), hwm0)
for r = 0, world - 1 do
  if r == rank then print(line); io.stdout:flush() end
  dist.barrier()
end
dist.destroy_process_group()
