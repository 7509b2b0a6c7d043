-- dist_fsdp_comm.lua: FSDP's communication options across the ranks of an mpirun launch
-- (registered for 1..4 ranks, with and without MS_DIST_DEBUG=1): prefetching (forward and both
-- backward modes) and asynchronous reductions keep training equal to one process, and
-- fsdp.comm_stats counts what ran; mixed precision (bfloat16, float16) gathers low-precision
-- buffers and trains within a stated tolerance of float32; HYBRID_SHARD with explicit groups
-- and with the default (per-host) ones equals one process; bad option values are refused by name.
-- MS_FSDP_VERBOSE=1 prints the worst relative difference of each equivalence case.
local ms = require "moonshard"
local nn = require "moonshard.nn"
local F = require "moonshard.functional"
local optim = require "moonshard.optim"
local fsdp = require "moonshard.fsdp"
local T = require "testing"
local dist = ms.distributed

local D = require "launch_testing"
local R, W = D.init()

local case = D.case

-- ---- a small conv + linear net, three units under the Linear policy ----------------------------

local Small = D.Small

local BATCH = 12 -- divisible by every world size 1..4

local function batch()
  ms.manual_seed(7)
  return ms.randn(BATCH, 1, 8, 8), ms.randint(1, 6, {BATCH})
end

-- Trains `steps` Adadelta steps on this rank's slice of the batch (of the group's slice when
-- `slices` ranks share the batch); after_step(i) runs after step i.
local function train(model, steps, slices, my_slice, after_step)
  local x, y = batch()
  if slices > 1 then
    local b = BATCH // slices
    x, y = x:narrow(1, my_slice * b + 1, b), y:narrow(1, my_slice * b + 1, b)
  end
  local opt = optim.Adadelta(model:parameters(), {lr = 1.0})
  for i = 1, steps do
    opt:zero_grad()
    F.nll_loss(model(x), y):backward()
    opt:step()
    if after_step then after_step(i) end
  end
end

local function reference(steps)
  ms.manual_seed(1)
  local model = Small()
  train(model, steps, 1, 0)
  return model:state_dict()
end

-- The worst relative difference of got from want over every tensor (relative to each tensor's
-- largest magnitude), after checking names and shapes.
local function worst_diff(got, want, what)
  local worst = 0
  for k, w in pairs(want) do
    local g = rawget(got, k)
    T.truthy(g ~= nil, what .. ": missing " .. k)
    T.eq(tostring(g.shape), tostring(w.shape), what .. ": shape of " .. k)
    T.eq(g.dtype, w.dtype, what .. ": dtype of " .. k)
    local diff = (g - w):abs():max():item()
    worst = math.max(worst, diff / math.max(w:abs():max():item(), 1e-6))
  end
  if os.getenv("MS_FSDP_VERBOSE") and R == 0 then print(("%s: worst relative difference %.3g"):format(what, worst)) end
  return worst
end

local function check_state(got, want, rel, what)
  local worst = worst_diff(got, want, what)
  T.truthy(worst <= rel, ("%s: relative difference %.3g > %g"):format(what, worst, rel))
end

local function wrap(opts)
  ms.manual_seed(1)
  opts.auto_wrap_policy = fsdp.ModuleWrapPolicy{nn.Linear}
  return fsdp.FSDP(Small(), opts)
end

-- The padded numel of each unit (root, fc1, fc2) for a shard group of size g.
local function padded(g)
  local function pad(n) return (n + g - 1) // g * g end
  return pad(4 * 9 + 4), pad(144 * 16 + 16), pad(16 * 5 + 5)
end

-- ---- options ----------------------------------------------------------------------------------

case("bad option values name FSDP, the option, what was expected and what came", function()
  T.raises(function() fsdp.FSDP(Small(), {forward_prefetch = "yes"}) end, "FSDP", "forward_prefetch", "true or false", '"yes"')
  T.raises(function() fsdp.FSDP(Small(), {backward_prefetch = "PRE"}) end, "backward_prefetch", "BACKWARD_PRE", '"PRE"')
  T.raises(function() fsdp.FSDP(Small(), {mixed_precision = "bf16"}) end, "mixed_precision", "a table", '"bf16"')
  T.raises(function() fsdp.FSDP(Small(), {mixed_precision = {param_dtype = "bf16"}}) end,
    "mixed_precision.param_dtype", "floating dtype", '"bf16"')
  T.raises(function() fsdp.FSDP(Small(), {mixed_precision = {param_dtype = "int32"}}) end, "param_dtype", '"int32"')
  T.raises(function() fsdp.FSDP(Small(), {mixed_precision = {param_type = "bfloat16"}}) end,
    "FSDP: option 'mixed_precision': unknown option 'param_type' (expected one of: buffer_dtype, ")
  T.raises(function() fsdp.FSDP(Small(), {process_group = {dist.new_group(), dist.new_group()}}) end,
    "process_group", "HYBRID_SHARD")
  T.raises(function() fsdp.FSDP(Small(), {sharding_strategy = "HYBRID_SHARD", process_group = {1, 2}}) end,
    "process_group", "{intra_group, inter_group}")
  T.raises(function() fsdp.comm_stats(42) end, "comm_stats", "FSDP module")
end)

-- ---- overlap: prefetching and asynchronous reductions ----------------------------------------

local ref = reference(20)

local PREFETCH = {
  { forward_prefetch = true },
  { forward_prefetch = true, backward_prefetch = "BACKWARD_PRE" },
  { backward_prefetch = "BACKWARD_POST" },
}

for _, strategy in ipairs({"FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD"}) do
  for _, p in ipairs(PREFETCH) do
    local label = ("%s forward_prefetch=%s backward_prefetch=%s"):format(strategy, tostring(p.forward_prefetch),
      tostring(p.backward_prefetch))
    case(label .. ": 20 steps equal one process", function()
      local model = wrap({sharding_strategy = strategy, forward_prefetch = p.forward_prefetch,
        backward_prefetch = p.backward_prefetch})
      train(model, 20, W, R)
      check_state(model:state_dict(), ref, 1e-5, label)
    end)
  end
end

-- Per step on Small (units root, fc1, fc2; forward order root, fc1, fc2; backward order root,
-- fc2, fc1): FULL_SHARD gathers each unit for forward and fc1, fc2 again for backward (the root
-- stays gathered), 5 all-gathers; one reduction per unit. From the second step, forward
-- prefetch issues fc1's and fc2's ahead, BACKWARD_PRE fc2's and fc1's ahead of their backward.
case("comm_stats counts the collectives, the prefetches and the bytes", function()
  local model = wrap({forward_prefetch = true, backward_prefetch = "BACKWARD_PRE"})
  local first
  train(model, 3, W, R, function(i)
    if i == 1 then first = fsdp.comm_stats(model, {reset = true}) end
  end)
  T.eq(first.allgather_calls, 5)
  T.eq(first.prefetch_calls, 0, "nothing recorded to prefetch from on the first step")
  local s = fsdp.comm_stats(model)
  T.eq(s.units, 3)
  T.eq(s.allgather_calls, 10)
  T.eq(s.prefetch_calls, 8)
  T.eq(s.reduce_calls, 6)
  T.eq(s.allreduce_calls, 0)
  local root, fc1, fc2 = padded(W)
  T.eq(s.allgather_bytes, 2 * 4 * (root + 2 * fc1 + 2 * fc2))
  T.eq(s.reduce_bytes, 2 * 4 * (root + fc1 + fc2))
  T.eq(s.bytes, s.allgather_bytes + s.reduce_bytes)
  T.truthy(s.wait_seconds >= 0 and s.waits >= 0)
  T.eq(s.param_dtype, "float32")
  fsdp.reset_comm_stats(model)
  T.eq(fsdp.comm_stats(model).allgather_calls, 0)
end)

-- ---- mixed precision --------------------------------------------------------------------------

-- 5 steps of 16-bit training end within these of float32 training's parameters (relative to
-- each tensor's largest magnitude). Measured on 1..3 ranks: bfloat16 0.044, float16 5e-4..4.7e-3,
-- while the parameters themselves move by 0.06..0.36 in those steps: Adadelta's early updates
-- are nearly lr * 3e-3 * sign(g), so a gradient near zero that rounds to the other sign moves
-- its element the other way, which is where the worst differences are.
local MP_TOL = { bfloat16 = 6e-2, float16 = 1e-2 }
local ref5 = reference(5)

for _, dt in ipairs({"bfloat16", "float16"}) do
  for _, strategy in ipairs({"FULL_SHARD", "NO_SHARD"}) do
    case(("mixed precision %s, %s: trains within %g of float32, gathering %s buffers"):format(dt, strategy,
        MP_TOL[dt], dt), function()
      local model = wrap({sharding_strategy = strategy, mixed_precision = {param_dtype = dt},
        forward_prefetch = true})
      local seen = {}
      model:module().fc1:module():register_forward_pre_hook(function(m, x)
        seen.weight, seen.input = m.weight.dtype, x.dtype
      end)
      train(model, 5, W, R)
      T.eq(seen.weight, dt, "fc1 computes with the gathered low-precision weight")
      T.eq(seen.input, dt, "the root cast the input")
      for _, p in ipairs(model:parameters()) do T.eq(p.dtype, "float32", "the shards stay float32") end
      local s = fsdp.comm_stats(model)
      T.eq(s.param_dtype, dt)
      T.eq(s.reduce_dtype, dt)
      if strategy == "FULL_SHARD" then
        local root, fc1, fc2 = padded(W)
        T.eq(s.allgather_bytes, 5 * 2 * (root + 2 * fc1 + 2 * fc2), "2-byte elements gathered")
        T.eq(s.reduce_bytes, 5 * 2 * (root + fc1 + fc2), "reduced in 2-byte elements")
      end
      check_state(model:state_dict(), ref5, MP_TOL[dt], ("mixed precision %s %s"):format(dt, strategy))
    end)
  end
end

case("mixed precision: reduce_dtype float32 reduces in float32; buffer_dtype casts buffers", function()
  ms.manual_seed(1)
  local net = Small()
  net:register_buffer("scale", ms.ones(1))
  local model = fsdp.FSDP(net, {auto_wrap_policy = fsdp.ModuleWrapPolicy{nn.Linear},
    mixed_precision = {param_dtype = "bfloat16", reduce_dtype = "float32", buffer_dtype = "float16"}})
  train(model, 1, W, R)
  local s = fsdp.comm_stats(model)
  T.eq(s.reduce_dtype, "float32")
  local root, fc1, fc2 = padded(W)
  T.eq(s.reduce_bytes, 4 * (root + fc1 + fc2))
  T.eq(s.allgather_bytes, 2 * (root + 2 * fc1 + 2 * fc2))
  T.eq(net.scale.dtype, "float16")
end)

-- ---- HYBRID_SHARD -----------------------------------------------------------------------------

-- Groups by a key per rank: every rank creates every group, in the same order.
local function groups_by(key)
  local lists, mine = {}, nil
  for r = 0, W - 1 do
    local k = key(r)
    lists[k] = lists[k] or {}
    table.insert(lists[k], r)
  end
  local keys = {}
  for k in pairs(lists) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local g = dist.new_group(lists[k])
    if k == key(R) then mine = g end
  end
  return mine
end

-- Each layout: intra group key, inter group key (ranks with equal keys share a group).
local LAYOUTS = {
  { name = "intra = each rank alone, inter = the world", intra = function(r) return r end,
    inter = function() return 0 end, replicas = W },
}
if W % 2 == 0 then
  LAYOUTS[#LAYOUTS + 1] = { name = "intra = consecutive pairs, inter = same position in the pair",
    intra = function(r) return r // 2 end, inter = function(r) return r % 2 end, replicas = W // 2 }
end

for _, l in ipairs(LAYOUTS) do
  case(("HYBRID_SHARD, explicit groups (%s): 20 steps equal one process"):format(l.name), function()
    local intra, inter = groups_by(l.intra), groups_by(l.inter)
    local model = wrap({sharding_strategy = "HYBRID_SHARD", process_group = {intra, inter}, forward_prefetch = true})
    train(model, 20, W, R)
    check_state(model:state_dict(), ref, 1e-5, "HYBRID_SHARD " .. l.name)
    local s = fsdp.comm_stats(model)
    T.eq(s.allreduce_calls, l.replicas > 1 and 20 * 3 or 0, "one all-reduce across nodes per unit and step")
    local root = padded(W // l.replicas)
    T.eq(model._attrs._flat:info().shard_numel, root // (W // l.replicas), "the root's shard is 1/intra of it")
  end)
end

case("HYBRID_SHARD, default groups (one host): behaves as FULL_SHARD", function()
  local model = wrap({sharding_strategy = "HYBRID_SHARD"})
  train(model, 20, W, R)
  check_state(model:state_dict(), ref, 1e-5, "HYBRID_SHARD default")
  local s = fsdp.comm_stats(model)
  T.eq(s.allreduce_calls, 0, "one host: no replicas to all-reduce with")
  local root = padded(W)
  T.eq(model._attrs._flat:info().shard_numel, root // W)
end)

-- ---- summary: reached only when every rank passed every case ---------------------------------

D.finish("dist_fsdp_comm")
