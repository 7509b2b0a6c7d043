-- fsdp_memory.lua: fsdp.memory_report(model [, optimizer]): what FSDP keeps on this rank (sharded
-- parameters, their gradients, the optimizer's state), the planned peak of gathered full buffers
-- and the block cache's bound, beside what was measured: the engine's peak of live bytes (since
-- ms.reset_peak_memory_stats()) and the process's peak resident memory (VmHWM), as numbers and,
-- through tostring, as a short table (FSDP's verbose option prints it). docs/fsdp-memory.md.
local ms = require "moonshard"

local M = {}
local fmt = string.format

local function fsdp_class() return require("moonshard.fsdp").FullyShardedDataParallel end

local function mib(b) return fmt("%.2f MiB", b / (1024 * 1024)) end

local Report = {}
Report.__index = Report
Report.__name = "MemoryReport"

function Report.__tostring(r)
  local lines = {
    fmt("FSDP memory on rank %d of %d: %d unit%s, %d parameters (%d with padding)", r.rank, r.world, r.units,
      r.units == 1 and "" or "s", r.full_numel, r.padded_numel),
    fmt("  sharded parameters  %12d bytes  %s", r.params_bytes, mib(r.params_bytes)),
    fmt("  gradients           %12d bytes  %s  (the shards' gradients, once a backward ran)", r.grads_bytes,
      mib(r.grads_bytes)),
  }
  if r.optimizer_bytes then
    lines[#lines + 1] = fmt("  optimizer state     %12d bytes  %s", r.optimizer_bytes, mib(r.optimizer_bytes))
  end
  lines[#lines + 1] = fmt("  gathered units      %12d bytes  %s  (planned peak of full buffers)", r.peak_gathered_bytes,
    mib(r.peak_gathered_bytes))
  lines[#lines + 1] = fmt("  reductions          %12d bytes  %s  (two in flight: packed grads and output)", r.reduce_bytes,
    mib(r.reduce_bytes))
  lines[#lines + 1] = fmt("  planned total       %12d bytes  %s  (the above, without activations)", r.planned_bytes,
    mib(r.planned_bytes))
  lines[#lines + 1] = fmt("  cache bound now     %12d bytes  %s  (cached %s)", r.cache_bound_bytes, mib(r.cache_bound_bytes),
    mib(r.cached_bytes))
  lines[#lines + 1] = fmt("  measured: engine peak %s (live now %s), process peak (VmHWM) %s", mib(r.engine_peak_bytes),
    mib(r.engine_current_bytes), r.vmhwm_bytes and mib(r.vmhwm_bytes) or "n/a")
  return table.concat(lines, "\n")
end

-- The bytes of every tensor in the optimizer's state for the given parameters (a set: the
-- units' pieces, which the optimizer updates).
local function optimizer_bytes(opt, params)
  local n = 0
  for p in pairs(params) do
    for _, v in pairs(opt.state[p] or {}) do
      if ms.is_tensor(v) then n = n + v:numel() * v:element_size() end
    end
  end
  return n
end

-- What was measured on this rank: the engine's bytes (peak since ms.reset_peak_memory_stats()),
-- the cache's, and the process's peak.
local function measured(r)
  local s = ms.memory_stats()
  r.engine_peak_bytes, r.engine_current_bytes = s.peak, s.current
  r.cached_bytes, r.cache_bound_bytes = s.cached, s.cache_bound
  r.vmhwm_bytes = s.process_peak >= 0 and s.process_peak or nil
end

-- Per rank: units; numel of the originals (full_numel), of the shards (shard_numel: what params,
-- grads and each optimizer state take) and of the padded full buffers; units gathered now; the
-- same in bytes (params_bytes, grads_bytes, optimizer_bytes when an optimizer is given); and
-- peak_gathered_bytes, the most full-buffer bytes held at once in a step: FULL_SHARD frees a
-- unit after its forward and backward, so the worst is a unit with its ancestors (gathered
-- around it); SHARD_GRAD_OP units stay gathered from forward through backward, so all count;
-- NO_SHARD's full buffers are its shards, nothing extra. reduce_bytes: the two largest units'
-- reductions (packed grads + output; at most two are in flight). planned_bytes: params + grads +
-- optimizer state + peak_gathered_bytes + reduce_bytes. Measured: engine_peak_bytes, engine_current_bytes, cached_bytes,
-- cache_bound_bytes, vmhwm_bytes (the process's peak, memory_stats().process_peak).
function M.memory_report(model, optimizer)
  local FSDP = fsdp_class()
  local r = setmetatable({units = 0, full_numel = 0, shard_numel = 0, padded_numel = 0, gathered = 0,
                          params_bytes = 0, grads_bytes = 0, peak_gathered_bytes = 0, rank = 0, world = 1}, Report)
  if ms.distributed.is_initialized() then
    local g = model._attrs.process_group
    r.rank, r.world = ms.distributed.get_rank(g), ms.distributed.get_world_size(g)
  end
  local pieces, chain_max, kept, reductions = {}, 0, 0, {}
  local function visit(m, chain)
    local fp = m:isinstance(FSDP) and m._attrs._flat
    if fp then
      local i = fp:info()
      local elt = m._attrs._orig[1].piece:element_size()
      r.units, r.full_numel = r.units + 1, r.full_numel + i.numel
      r.shard_numel, r.padded_numel = r.shard_numel + i.shard_numel, r.padded_numel + i.padded
      r.params_bytes = r.params_bytes + i.shard_numel * elt
      reductions[#reductions + 1] = (i.padded + i.shard_numel) * elt -- a reduction's input and output
      if fp:is_gathered() or fp:compute_gathered() then r.gathered = r.gathered + 1 end
      for _, e in ipairs(m._attrs._orig) do pieces[e.piece] = true end
      local strategy = m._attrs.sharding_strategy
      if strategy == "FULL_SHARD" or strategy == "HYBRID_SHARD" then
        chain = chain + i.padded * elt
        chain_max = math.max(chain_max, chain)
      elseif strategy == "SHARD_GRAD_OP" then
        kept = kept + i.padded * elt
      end
    end
    for _, c in ipairs(m:children()) do visit(c, chain) end
  end
  visit(model, 0)
  r.grads_bytes = r.params_bytes
  r.peak_gathered_bytes = chain_max + kept
  if optimizer ~= nil then r.optimizer_bytes = optimizer_bytes(optimizer, pieces) end
  table.sort(reductions, function(a, b) return a > b end) -- at most two in flight (flat_param_comm.c)
  r.reduce_bytes = (reductions[1] or 0) + (reductions[2] or 0)
  r.planned_bytes = r.params_bytes + r.grads_bytes + (r.optimizer_bytes or 0) + r.peak_gathered_bytes + r.reduce_bytes
  measured(r)
  return r
end

-- Prints the report on rank 0 of the model's group (FSDP's verbose option, at wrap time).
function M.print_report(model)
  local r = M.memory_report(model)
  if r.rank == 0 then print(tostring(r)) end
end

return M
