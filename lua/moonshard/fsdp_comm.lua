-- fsdp_comm.lua: FSDP's communication options (used by moonshard.fsdp): overlap, mixed precision
-- and HYBRID_SHARD (validated here; the engine's runtime, moonshard/fsdp_runtime.h, acts on them:
-- prefetching follows the execution order it records), the root's input and buffer casts,
-- HYBRID_SHARD's default groups, the per-model communication counters (fsdp.comm_stats), and the
-- walk over a unit's inputs and outputs (nested tables of tensors).
local ms = require "moonshard"
local nn = require "moonshard.nn"
local options = require "moonshard.check_opts"

local M = {}
local fmt = string.format
local native = ms._fsdp
local dist = ms.distributed

M.progress = native.progress

-- ---- options --------------------------------------------------------------------------------

local PREFETCH = { BACKWARD_PRE = true, BACKWARD_POST = true }
local MP_KEYS = { param_dtype = true, reduce_dtype = true, buffer_dtype = true, cast_forward_inputs = true,
  keep_low_precision_grads = true }

local function bad(opt, expected, got, level)
  error(fmt("FSDP: option '%s': expected %s, got %s", opt, expected, got), level + 1)
end

local function describe(v)
  if type(v) == "string" then return fmt("%q", v) end
  return type(v) == "table" and "a table" or tostring(v)
end

-- A floating dtype name as the engine spells it, or nil when v is nil.
local function dtype_option(opt, v, level)
  if v == nil then return nil end
  local ok, t = pcall(ms.empty, {0}, {dtype = v})
  if type(v) ~= "string" or not ok or not t:is_floating_point() then
    bad(opt, 'a floating dtype name ("bfloat16", "float16", "float32" or "float64")', describe(v), level + 1)
  end
  return v
end

-- Checks the options this file owns; returns the normalised comm settings of a unit:
-- {forward_prefetch, backward_prefetch, limit_all_gathers, mixed_precision = {param_dtype,
-- reduce_dtype, buffer_dtype, cast_forward_inputs, keep_low_precision_grads} or nil}. level: the caller's error level.
function M.check_options(opts, level)
  level = level + 1
  local fwd, bwd, mp = opts.forward_prefetch, opts.backward_prefetch, opts.mixed_precision
  if fwd ~= nil and type(fwd) ~= "boolean" then bad("forward_prefetch", "true or false", describe(fwd), level) end
  local lag = opts.limit_all_gathers
  if lag ~= nil and type(lag) ~= "boolean" then bad("limit_all_gathers", "true or false", describe(lag), level) end
  if bwd ~= nil and not PREFETCH[bwd] then
    bad("backward_prefetch", '"BACKWARD_PRE", "BACKWARD_POST" or nil', describe(bwd), level)
  end
  local c = { forward_prefetch = fwd == true, backward_prefetch = bwd, limit_all_gathers = lag == true }
  if mp ~= nil then
    if type(mp) ~= "table" then bad("mixed_precision", "a table {param_dtype=, reduce_dtype=, buffer_dtype=}", describe(mp), level) end
    options.check_given("FSDP: option 'mixed_precision'", mp, MP_KEYS, level)
    local cfi, klg = mp.cast_forward_inputs, mp.keep_low_precision_grads
    if cfi ~= nil and type(cfi) ~= "boolean" then
      bad("mixed_precision.cast_forward_inputs", "true or false", describe(cfi), level)
    end
    if klg ~= nil and type(klg) ~= "boolean" then
      bad("mixed_precision.keep_low_precision_grads", "true or false", describe(klg), level)
    end
    local pd = dtype_option("mixed_precision.param_dtype", mp.param_dtype, level)
    local rd = dtype_option("mixed_precision.reduce_dtype", mp.reduce_dtype, level)
    local bd = dtype_option("mixed_precision.buffer_dtype", mp.buffer_dtype, level)
    if pd or rd or bd then
      c.mixed_precision = { param_dtype = pd, reduce_dtype = rd or pd, buffer_dtype = bd, cast_forward_inputs = cfi == true,
        keep_low_precision_grads = klg == true }
    end
  end
  return c
end

-- The {param_dtype, reduce_dtype} the native flat parameter takes for a unit of dtype dt, or nil.
function M.native_mp(c, dt)
  local mp = c.mixed_precision
  if not mp or not (mp.param_dtype or mp.reduce_dtype) then return nil end
  return { param_dtype = mp.param_dtype or dt, reduce_dtype = mp.reduce_dtype or mp.param_dtype or dt,
    keep_low_precision_grads = mp.keep_low_precision_grads }
end

-- A small CPU tensor of FSDP's bookkeeping (norms, host keys) where the default group's backend
-- moves tensors: this rank's GPU under nccl (which moves CUDA tensors only), else the CPU.
function M.for_collective(t)
  if dist.is_initialized() and dist.get_backend() == "nccl" then return t:to("cuda:" .. ms.cuda.current_device()) end
  return t
end

-- ---- HYBRID_SHARD groups --------------------------------------------------------------------

local function is_group(g) return type(g) == "userdata" end

-- The {intra, inter} pair: the user's, or by default the ranks on this host (intra) and the ranks
-- with the same position on the other hosts (inter). Every rank must call it (new_group).
function M.hybrid_groups(pg, level)
  level = level + 1
  if pg ~= nil then
    if type(pg) ~= "table" or not is_group(pg[1]) or not is_group(pg[2]) then
      bad("process_group", "a pair {intra_group, inter_group} for HYBRID_SHARD", describe(pg), level)
    end
    return pg[1], pg[2]
  end
  if not dist.is_initialized() then
    error("FSDP: HYBRID_SHARD needs the default process group: call ms.distributed.init_process_group first", level)
  end
  local W = dist.get_world_size()
  local all = M.for_collective(ms.zeros({W}, {dtype = "int64"}))
  dist.all_gather_into_tensor(all, M.for_collective(ms.tensor({native.host_key()}, {dtype = "int64"})))
  local keys, hosts, host_of = all:tolist(), {}, {}
  for r = 0, W - 1 do
    local k = keys[r + 1]
    if not host_of[k] then
      hosts[#hosts + 1] = {}
      host_of[k] = hosts[#hosts]
    end
    local h = host_of[k]
    h[#h + 1] = r
  end
  for _, h in ipairs(hosts) do
    if #h ~= #hosts[1] then
      error(fmt("FSDP: HYBRID_SHARD needs the same number of ranks on every host, got %d and %d", #hosts[1], #h), level)
    end
  end
  -- every rank creates every group, in the same order, as new_group requires
  local me, intra, inter = dist.get_rank()
  for _, h in ipairs(hosts) do
    local g = dist.new_group(h)
    for _, r in ipairs(h) do if r == me then intra = g end end
  end
  for i = 1, #hosts[1] do
    local ranks = {}
    for _, h in ipairs(hosts) do ranks[#ranks + 1] = h[i] end
    local g = dist.new_group(ranks)
    for _, r in ipairs(ranks) do if r == me then inter = g end end
  end
  return intra, inter
end

-- ---- the root: casts, the walk over inputs and outputs -------------------------------------------------------

-- Floating tensors among the arguments (at any depth of plain tables) cast to dt.
function M.cast_inputs(dt, args) return M.map_inputs(args, function(v)
  return v:is_floating_point() and v.dtype ~= dt and v:to(dt) or v
end) end

-- The root's CPU tensor inputs moved to the units' device (PyTorch's root moves its inputs to
-- the compute device); tensors already on a device stay.
function M.move_inputs(device, args) return M.map_inputs(args, function(v)
  return v.device == "cpu" and v:to(device) or v
end) end

-- The one walk over a unit's inputs and outputs (PyTorch's _apply_to_tensors): v is a tensor,
-- or a table holding tensors at any depth, next to other values. Each table is entered once
-- (`seen`), so cycles and tables shared between arguments are fine. Visiting (copy false) calls
-- fn on every tensor and enters any table but a module; mapping (copy true) returns v rebuilt
-- with every tensor t replaced by fn(t): plain tables are copied (a cycle stays a cycle, a shared
-- table stays shared), tables with a metatable are objects and kept as they are.
local function walk(v, fn, copy, seen)
  if ms.is_tensor(v) then return fn(v) end
  if type(v) ~= "table" or (copy and getmetatable(v) ~= nil) or nn.is_module(v) then return v end
  local done = seen[v]
  if done ~= nil then return done end
  local out = copy and {} or v
  seen[v] = out
  for k, x in pairs(v) do
    local y = walk(x, fn, copy, seen)
    if copy then out[k] = y end
  end
  return out
end

-- Calls fn(t) on every tensor t in v (see walk).
function M.each_tensor(v, fn) walk(v, fn, false, {}) end

-- args (table.pack'ed) with every tensor, also inside plain tables at any depth, replaced by fn(tensor).
function M.map_inputs(args, fn)
  local seen = {}
  for i = 1, args.n do args[i] = walk(args[i], fn, true, seen) end
  return args
end

-- Casts the floating buffers of every module in the list to dt (PyTorch 1.13 does it once, at
-- the root's first forward).
function M.cast_buffers(modules, dt)
  local _ <close> = ms.no_grad()
  for _, m in ipairs(modules) do
    for _, name in ipairs(m._buffers.names) do
      local b = m._buffers.map[name]
      if b ~= nil and b:is_floating_point() and b.dtype ~= dt then m._buffers.map[name] = b:to(dt) end
    end
  end
end

-- ---- statistics -----------------------------------------------------------------------------

local FIELDS = { "allgather_calls", "prefetch_calls", "reduce_calls", "allreduce_calls", "allgather_bytes",
  "reduce_bytes", "waits", "wait_seconds" }

-- fsdp.comm_stats's result prints as its counters, one a line.
local Stats = { __name = "CommStats" }
function Stats.__tostring(r)
  local lines = { ("FSDP communication over %d unit%s ("):format(r.units, r.units == 1 and "" or "s") }
  for _, line in ipairs(require("moonshard.repl").fields(r, "    ", { units = true })) do lines[#lines + 1] = line end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

-- The sum of the units' counters (max_gathered: their max); bytes = allgather_bytes + reduce_bytes.
-- reset zeroes them after.
function M.stats(fps, reset)
  local r = { units = #fps, max_gathered = 0 }
  for _, f in ipairs(FIELDS) do r[f] = 0 end
  for _, fp in ipairs(fps) do
    local s = fp:stats(reset)
    for _, f in ipairs(FIELDS) do r[f] = r[f] + s[f] end
    r.max_gathered = math.max(r.max_gathered, s.max_gathered)
    r.param_dtype, r.reduce_dtype = s.param_dtype, s.reduce_dtype
  end
  r.bytes = r.allgather_bytes + r.reduce_bytes
  return setmetatable(r, Stats)
end

return M
