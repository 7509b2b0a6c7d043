-- fsdp.lua: Fully Sharded Data Parallel (`require "moonshard.fsdp"`), PyTorch's FSDP with
-- use_orig_params=True: each unit flattens the parameters of its subtree that no nested unit
-- owns into one FlatParameter (engine/src/fsdp/flat_param.c) and keeps only this rank's shard;
-- the original parameters stay first-class, each one this rank's piece of the shard.
--
--   local fsdp = require "moonshard.fsdp"
--   local model = fsdp.FSDP(Net(), {auto_wrap_policy = fsdp.size_based_auto_wrap_policy{min_num_params = 20000},
--                                   sharding_strategy = "FULL_SHARD"})
--   local opt = optim.Adadelta(model:parameters(), {lr = 1.0})   -- updates the pieces (the shards)
--
-- Tree: FullyShardedDataParallel -> (_fsdp_wrapped_module) FlattenParamsWrapper -> (_fpw_module)
-- the original module. Parameters: model:named_parameters() gives the unwrapped names
-- ("conv1.weight"; FSDP's own path segments are left out) with each rank's piece: a 1-D view
-- into the unit's shard, numel 0 on ranks holding none of it, requires_grad as the original
-- had before wrapping. The modules hold the pieces as their parameters; while a unit computes
-- (and inside summon_full_params) they hold full-shaped views of the gathered buffer instead
-- (kept as plain attributes in between), so forward code is unchanged. After a unit's
-- reduction each piece's .grad is the matching view of the shard's grad (none for frozen and
-- empty pieces): param groups, frozen parameters, gradient accumulation across backwards and
-- optimizer:zero_grad() (set_to_none: the next reduction starts from zero) work as in PyTorch.
--
-- Per unit and step (FSDP:forward calls the engine's pre- and post-forward, as PyTorch runs them
-- in its forward, so user hooks on the unit still see the module as usual; the engine's runtime,
-- engine/include/moonshard/fsdp_runtime.h, decides and does the following): forward gathers the unit's compute
-- buffer (all-gather of the shards); FULL_SHARD and HYBRID_SHARD free it after forward (not the
-- root's, used again at once by backward, as PyTorch 1.13) and gather it again when the gradient
-- of the unit's output arrives (a tensor hook: the unit's backward is about to start); once every
-- parameter of the unit has its grad (native post-accumulate hooks) the grads are packed and
-- their reduce-scatter (averaged) into the shard's grad is issued, and the buffer is freed
-- (sharded strategies). NO_SHARD keeps everything on every rank and all-reduces the packed
-- grads. The root (the outermost unit of a forward) queues one end-of-backward callback
-- (ms_autograd_queue_callback), the one place where a backward's reductions are waited for: per
-- unit it waits for the reduction (the pieces' grads then view the shard's grad), units whose
-- parameters got only some of their gradients (unused parameters count as zeros) reduce there,
-- and every unit is resharded, before backward returns. After a failed backward it only waits
-- and cleans up. A unit none of whose parameters got a gradient does not reduce (as PyTorch);
-- ranks must agree on which units those are. A unit's inputs and outputs are tensors or tables
-- holding them at any depth, next to other values (fsdp_comm.each_tensor, map_inputs). Each
-- unit's collectives carry its module path and phase ("forward all-gather", "grad
-- reduce-scatter", ...), which every rank compares: units run in a different order on some rank
-- fail on every rank, naming both (engine/include/moonshard/dist.h, ms_dist_init).
--
-- Communication (fsdp_comm.lua validates the options; engine/src/fsdp/fsdp_runtime.c and
-- flat_param_comm.c act on them): all-gathers and gradient
-- reductions are non-blocking collectives, moved along by testing them at hook points.
-- forward_prefetch = true issues the next unit's all-gather (in the forward order recorded on the
-- previous iteration) before the current unit computes; backward_prefetch = "BACKWARD_PRE"
-- issues the next-in-backward unit's when the current unit's backward begins, "BACKWARD_POST"
-- once the current unit's grads are reduced; only units not yet run in this pass are prefetched,
-- and the root drops stale gathers at each new iteration. fsdp.comm_stats(model) counts calls,
-- bytes and the time blocked waiting. mixed_precision = {param_dtype =, reduce_dtype =,
-- buffer_dtype =} (PyTorch 1.13's MixedPrecision): shards and pieces stay in the parameters'
-- dtype (float32), units compute with a param_dtype buffer gathered in param_dtype (forward
-- sees its views; summon_full_params and state dicts see full-precision ones), grads are
-- reduced in reduce_dtype (default param_dtype), the root casts floating inputs to param_dtype
-- and buffers to buffer_dtype. HYBRID_SHARD shards within a node and replicates across nodes
-- (process_group = {intra, inter}, or by host by default); the pieces are views of the
-- intra-node shard.
--
-- Options: auto_wrap_policy, sharding_strategy, process_group, ignored_modules = {m, ...}
-- (their subtrees stay ordinary, unsharded, unreduced parameters on every rank),
-- sync_module_states = true (each unit broadcasts its parameters and buffers from the group's
-- first rank before sharding), use_orig_params (true only: always on), forward_prefetch,
-- backward_prefetch, mixed_precision, cpu_offload; child units get the same. device_id = N or
-- "cuda:N" moves the module to that GPU at wrap time (an error saying why where there is none);
-- the units' buffers live on the parameters' device and the collectives go through the group's
-- backend (nccl for CUDA: "auto" picks it under mpirun when every rank has a GPU), ordered
-- with the compute stream by CUDA events (engine/src/dist/pg_nccl.c). The root moves CPU tensor
-- inputs to that device, as PyTorch's root does. cpu_offload = {offload_params = true}: on a GPU
-- each shard and its grad live in page-locked host memory and the optimizer steps there; the
-- shard is copied to the GPU for each all-gather and the reduce-scattered grad copied back. On
-- a CPU-only run it is accepted and changes nothing (the shards are in host memory already).
-- limit_all_gathers = true (PyTorch's rate limiter): a prefetch is skipped while two units' full
-- buffers (the root's aside) are gathered; fsdp.comm_stats(model).max_gathered says the most seen
-- (docs/fsdp-memory.md). mixed_precision.cast_forward_inputs = true: every unit, not only the
-- root, casts its floating inputs to param_dtype. Scopes and helpers:
-- model:no_sync() (to-be-closed: backwards accumulate locally, the first one after reduces the
-- total), model:summon_full_params{writeback = true, recurse = true} (to-be-closed: every unit
-- gathered, modules read full values; writeback copies changes into the shards at close),
-- fsdp.clip_grad_norm_(model, max_norm, norm_type) / model:clip_grad_norm_(...) (the global
-- norm across ranks, as PyTorch's FSDP), verbose = true (rank 0 prints fsdp.memory_report at
-- wrap time).
--
-- State dicts (fsdp_state.lua, fsdp_checkpoint.lua): model:state_dict() is FULL by default
-- (unwrapped names and shapes, streamed one unit at a time; rank0_only, offload_to_cpu) or
-- SHARDED (each rank's pieces with their global shapes and offsets), chosen per call or by the
-- fsdp.state_dict_type(model, type, config) scope; fsdp.save_sharded / fsdp.load_sharded write
-- one safetensors file per rank plus an index and load onto any world size and wrapping.
-- Optimizer state dicts by parameter name (fsdp_optim.lua): fsdp.optim_state_dict(model, optim,
-- {state_dict_type =, rank0_only =}) and fsdp.optim_state_dict_to_load / load_optim_state_dict.
-- Training checkpoints (train_checkpoint.lua, docs/checkpointing.md): fsdp.save_checkpoint(root,
-- {model =, optimizer =, scheduler =, step =, extra =}), fsdp.load_checkpoint(path, {...}) -> step,
-- extra and fsdp.latest_checkpoint(root): model, sharded optimizer state, scheduler, RNG states.
-- fsdp.memory_report(model [, optimizer]) (fsdp_memory.lua) gives what this rank holds in
-- bytes.
--
-- For the state-dict code: fsdp._local_pieces(model) -> array, in named_parameters order, of
-- {name =, shape =, numel =, offset =, piece =, unit =} for every parameter that a unit
-- manages: name as named_parameters gives it, shape and numel of the original parameter,
-- offset the element (0-based) at which this rank's piece starts within the flattened original
-- (piece:numel() elements; 0 when the rank holds none), piece the tensor itself, unit the FSDP
-- module that owns it. Ignored parameters are not in it: they are ordinary full parameters.
--
-- mixed_precision.keep_low_precision_grads = true leaves each piece's .grad in reduce_dtype (the
-- optimizers widen it for their update). Tied parameters: an auto wrap
-- flattens a parameter held by several modules into the innermost unit enclosing them all
-- (PyTorch's lowest common ancestor); manual wrapping refuses one shared by two units.
local ms = require "moonshard"
local nn = require "moonshard.nn"
local comm = require "moonshard.fsdp_comm"
local options = require "moonshard.check_opts"

local M = {}
local fmt = string.format
local pack, unpack = table.pack, table.unpack
local native = ms._fsdp
local is_module = nn.is_module

local state = require "moonshard.fsdp_state"
local checkpoint = require "moonshard.fsdp_checkpoint"
local memory = require "moonshard.fsdp_memory"
M.state_dict_type = state.state_dict_type
M.save_sharded = checkpoint.save_sharded
M.load_sharded = checkpoint.load_sharded
local optim_state = require "moonshard.fsdp_optim"
M.optim_state_dict = optim_state.optim_state_dict
M.optim_state_dict_to_load = optim_state.optim_state_dict_to_load
M.load_optim_state_dict = optim_state.load_optim_state_dict
local train_checkpoint = require "moonshard.train_checkpoint"
M.save_checkpoint = train_checkpoint.save_checkpoint
M.load_checkpoint = train_checkpoint.load_checkpoint
M.latest_checkpoint = train_checkpoint.latest_checkpoint
M.StateDictType = { FULL_STATE_DICT = "FULL_STATE_DICT", SHARDED_STATE_DICT = "SHARDED_STATE_DICT" }

local ok_wrap, wrap = pcall(require, "moonshard.fsdp_wrap")
if ok_wrap then
  M.size_based_auto_wrap_policy = wrap.size_based_auto_wrap_policy
  M.ModuleWrapPolicy = wrap.ModuleWrapPolicy
  M.transformer_auto_wrap_policy = wrap.transformer_auto_wrap_policy
  M.lambda_auto_wrap_policy = wrap.lambda_auto_wrap_policy
end

local STRATEGIES = { FULL_SHARD = true, SHARD_GRAD_OP = true, NO_SHARD = true, HYBRID_SHARD = true }
M.ShardingStrategy = { FULL_SHARD = "FULL_SHARD", SHARD_GRAD_OP = "SHARD_GRAD_OP", NO_SHARD = "NO_SHARD",
  HYBRID_SHARD = "HYBRID_SHARD" }
M.BackwardPrefetch = { BACKWARD_PRE = "BACKWARD_PRE", BACKWARD_POST = "BACKWARD_POST" }

-- ---- the wrapper classes --------------------------------------------------------------------

local FlattenParamsWrapper = nn.Module:extend("FlattenParamsWrapper")
M.FlattenParamsWrapper = FlattenParamsWrapper

function FlattenParamsWrapper:init(module) self._fpw_module = module end
function FlattenParamsWrapper:forward(...) return self._fpw_module(...) end

local FSDP = nn.Module:extend("FullyShardedDataParallel")
M.FullyShardedDataParallel = FSDP

-- As PyTorch's __getattr__ on both wrappers: names the wrapper lacks are read from the module it
-- wraps (model.fc1.weight reads through a nested unit).
nn.internal.forward_missing(FlattenParamsWrapper, "_fpw_module")
nn.internal.forward_missing(FSDP, "_fsdp_wrapped_module")

-- ---- options --------------------------------------------------------------------------------

-- validated by fsdp_comm.check_options
local COMM_OPTIONS = { mixed_precision = true, backward_prefetch = true, forward_prefetch = true, limit_all_gathers = true }

local KNOWN = options.union(COMM_OPTIONS, { "auto_wrap_policy", "cpu_offload", "device_id", "ignored_modules",
  "param_init_fn", "process_group", "sharding_strategy", "sync_module_states", "use_orig_params", "verbose" })

-- cpu_offload = {offload_params = true|false} (PyTorch's CPUOffload) -> the flag.
local function check_cpu_offload(v)
  if type(v) ~= "table" or ms.is_tensor(v) or is_module(v) then
    error(fmt("FSDP: option 'cpu_offload': expected a table {offload_params = true}, got %s", type(v)), 4)
  end
  options.check_given("FSDP: option 'cpu_offload'", v, { "offload_params" }, 4)
  if v.offload_params ~= nil and type(v.offload_params) ~= "boolean" then
    error(fmt("FSDP: option 'cpu_offload': offload_params: expected a boolean, got %s", type(v.offload_params)), 4)
  end
  return v.offload_params == true
end

-- device_id = 0 / "cuda:0" / "cuda" (PyTorch's device_id): the CUDA device the module is moved to
-- at wrap time; a clear error where there is none.
local function check_device_id(v)
  local name = math.type(v) == "integer" and ("cuda:" .. v) or v
  if type(name) ~= "string" or not (name == "cuda" or name:match("^cuda:%d+$")) then
    error(fmt("FSDP: option 'device_id': expected a CUDA device (an index or \"cuda:N\"), got %s",
      type(v) == "string" and fmt("%q", v) or type(v)), 4)
  end
  local cuda = rawget(ms, "cuda")
  if not (cuda and cuda.is_available()) then
    error(fmt("FSDP: option 'device_id': cannot use %s: CUDA is not available: %s", name,
      cuda and cuda.unavailable_reason() or "no CUDA support"), 4)
  end
  local index = name == "cuda" and cuda.current_device() or tonumber(name:match("%d+"))
  if index >= cuda.device_count() then
    error(fmt("FSDP: option 'device_id': %s does not exist (%d CUDA device(s))", name, cuda.device_count()), 4)
  end
  return "cuda:" .. index
end

local function check_options(opts)
  opts = options.check("FSDP", opts, KNOWN, 3)
  for k, v in pairs(opts) do
    if k == "sync_module_states" or k == "use_orig_params" then
      if type(v) ~= "boolean" then
        error(fmt("FSDP: option '%s': expected a boolean, got %s", k, type(v)), 3)
      end
      if k == "use_orig_params" and not v then
        error("FSDP: option 'use_orig_params': expected true (moonshard's FSDP always keeps the original "
          .. "parameters), got false", 3)
      end
    elseif k == "ignored_modules" then
      if type(v) ~= "table" or is_module(v) then
        error(fmt("FSDP: option 'ignored_modules': expected a list of modules, got %s",
          is_module(v) and "a module" or type(v)), 3)
      end
      if #v == 0 and next(v) ~= nil then
        error("FSDP: option 'ignored_modules': expected a list of modules, got a table that is not a list", 3)
      end
      for i, m in ipairs(v) do
        if not is_module(m) then
          error(fmt("FSDP: option 'ignored_modules': expected a list of modules, got %s at position %d",
            ms.is_tensor(m) and "a tensor" or type(m), i), 3)
        end
      end
    elseif k == "cpu_offload" then
      check_cpu_offload(v)
    elseif k == "device_id" then
      check_device_id(v)
    elseif k == "param_init_fn" then
      if type(v) ~= "function" and not (type(v) == "table" and (getmetatable(v) or {}).__call) then
        error(fmt("FSDP: option 'param_init_fn': expected a function(module), got %s", type(v)), 3)
      end
    elseif k == "verbose" then
      if type(v) ~= "boolean" then error(fmt("FSDP: option 'verbose': expected a boolean, got %s", type(v)), 3) end
    end
  end
  local s = opts.sharding_strategy or "FULL_SHARD"
  if not STRATEGIES[s] then
    error(fmt("FSDP: option 'sharding_strategy': expected FULL_SHARD, SHARD_GRAD_OP, NO_SHARD or HYBRID_SHARD, got %s",
      tostring(s)), 3)
  end
  if s ~= "HYBRID_SHARD" and type(opts.process_group) == "table" then
    error("FSDP: option 'process_group': a pair {intra_group, inter_group} is for HYBRID_SHARD, got sharding_strategy "
      .. s, 3)
  end
  return opts
end

-- Every module in the subtrees of the ignored modules, as a set.
local function ignored_set(list)
  local set = {}
  for _, m in ipairs(list or {}) do
    for _, sub in ipairs(m:modules()) do set[sub] = true end
  end
  return set
end

-- ---- flattening -----------------------------------------------------------------------------

-- The (module, name, tensor) of every parameter in m's subtree outside nested units and ignored
-- subtrees, in named_parameters order; the buffers of the same modules go to `buffers`.
local function unit_params(m, out, ignored, buffers)
  for _, name in ipairs(m._parameters.names) do
    out[#out + 1] = { module = m, name = name, tensor = m._parameters.map[name] }
  end
  if buffers then
    for _, name in ipairs(m._buffers.names) do buffers[#buffers + 1] = m._buffers.map[name] end
  end
  for _, cname in ipairs(m._modules.names) do
    local child = m._modules.map[cname]
    if not child:isinstance(FSDP) and not (ignored and ignored[child]) then
      unit_params(child, out, ignored, buffers)
    end
  end
  return out
end

-- Each module keeps its piece as the registered parameter (same place in the order, so
-- named_parameters keeps torch's order) and the full-shaped view as a plain attribute that
-- use_full_views swaps in; _fsdp_param_names keeps the order for state dicts, _fsdp_param_set
-- maps each name to the unit holding it. cviews: the
-- param_dtype views forward computes with (mixed precision), else nil.
local function install_views(unit, entries, index, views, pieces, cviews)
  local orig = {}
  for i, e in ipairs(entries) do
    local m = e.module
    local names = rawget(m, "_fsdp_param_names")
    if not names then
      names = {}
      rawset(m, "_fsdp_param_names", names)
      rawset(m, "_fsdp_param_set", {})
    end
    names[#names + 1] = e.name
    m._fsdp_param_set[e.name] = unit -- the unit whose flat parameter holds it (a tied one's may enclose m's)
    local piece = nn.internal.mark_parameter(pieces[index[i]])
    m._parameters.map[e.name] = piece
    m._attrs[e.name] = views[index[i]]
    orig[i] = { module = m, name = e.name, view = views[index[i]], piece = piece, index = index[i],
      compute = cviews and cviews[index[i]] or views[index[i]] }
  end
  return orig
end

-- sync_module_states: rank 0 of the group sends its values, packed per dtype (one broadcast
-- each), before any rank keeps its shard.
local function broadcast_from_first(tensors, group)
  local by_dtype, order = {}, {}
  for _, t in ipairs(tensors) do
    if t:numel() > 0 then
      local list = by_dtype[t.dtype]
      if not list then
        list = {}
        by_dtype[t.dtype] = list
        order[#order + 1] = t.dtype
      end
      list[#list + 1] = t
    end
  end
  local src = group and ms.distributed.get_process_group_ranks(group)[1] or 0
  local _ <close> = ms.no_grad()
  for _, dt in ipairs(order) do
    local flat = {}
    for i, t in ipairs(by_dtype[dt]) do flat[i] = t:reshape(-1) end
    local packed = ms.cat(flat)
    ms.distributed.broadcast(packed, { src = src, group = group })
    local at = 1
    for _, t in ipairs(by_dtype[dt]) do
      t:copy_(packed:narrow(1, at, t:numel()):view_as(t))
      at = at + t:numel()
    end
  end
end

-- The original tensors already flattened by some unit (weak: a flattened tensor lives on only
-- where a module still holds it, i.e. where a tie would flatten it a second time).
local FLATTENED = setmetatable({}, { __mode = "k" })

-- forward_prefetch: Open MPI moves a non-blocking collective only inside MPI calls, so each
-- module of the unit (outside nested units) tests the in-flight ones before it runs; unit
-- boundaries alone are too far apart (the seed Net's root runs both convs before fc1's gather
-- is needed). Evidence: bench/mpi_progress.lua, numbers in flat_param_comm.c.
local function progress_hooks(m, ignored)
  for _, cname in ipairs(m._modules.names) do
    local child = m._modules.map[cname]
    if not child:isinstance(FSDP) and not ignored[child] then
      child:register_forward_pre_hook(function() comm.progress() end)
      progress_hooks(child, ignored)
    end
  end
end

-- Builds the unit's flat parameter; a parameter shared by two modules is flattened once.
-- c: the unit's comm settings (fsdp_comm.check_options); inter: HYBRID_SHARD's inter group.
-- A unit built on meta (nn.deferred_init) gets its real parameters and buffers here, one unit
-- at a time, innermost first: param_init_fn(module) when given (PyTorch's option), else the
-- recorded initialisers (nn_meta.lua). Returns the parameters that were meta.
local function materialize_unit(module, entries, buffers, c)
  local any = false
  for _, e in ipairs(entries) do any = any or e.tensor.is_meta end
  for _, b in ipairs(buffers) do any = any or b.is_meta end
  if not any then return {} end
  if c.param_init_fn then
    c.param_init_fn(module)
    for _, e in ipairs(entries) do
      if e.tensor.is_meta then
        error(fmt("FSDP: option 'param_init_fn': parameter '%s' of %s is still on meta after param_init_fn(%s)",
          e.name, e.module:_get_name(), module:_get_name()), 5)
      end
    end
    return entries
  end
  local mods, seen = {}, {}
  for i = #entries, 1, -1 do -- the unit's modules, innermost first (reset_parameters' fallback)
    local m = entries[i].module
    if not seen[m] then seen[m] = true; mods[#mods + 1] = m end
  end
  nn.internal.materialize_entries(nn.internal.own_entries(mods), c.device or "cpu", "FSDP")
  for _, b in ipairs(buffers) do
    if b.is_meta then error("FSDP: a buffer of a module without parameters is on meta: materialize it first", 5) end
  end
  return entries
end

-- Tied parameters under auto wrapping, PyTorch's rule for them (fully_shard's lowest common
-- ancestor): while an auto wrap builds its units, wrap_users maps each parameter of the tree to
-- the modules holding it; a unit flattens a parameter only when every holder is inside its
-- subtree, else it leaves it, with its holders' entries, to the innermost unit enclosing them all
-- (whose forward and backward enclose theirs, so its gathered view serves every holder). A
-- manually wrapped tree keeps the error below, as PyTorch's manual wrapping.
local wrap_users

local function parameter_holders(root)
  local users = {}
  for _, m in ipairs(root:modules()) do
    for _, name in ipairs(m._parameters.names) do
      local t = m._parameters.map[name]
      users[t] = users[t] or {}
      table.insert(users[t], m)
    end
  end
  return users
end

local function tied_scope(root)
  wrap_users = parameter_holders(root)
  return setmetatable({}, { __close = function() wrap_users = nil end })
end

-- The FSDP units nearest below m (not below those).
local function nested_units(m, ignored, out)
  for _, cname in ipairs(m._modules.names) do
    local child = m._modules.map[cname]
    if child:isinstance(FSDP) then out[#out + 1] = child
    elseif not (ignored and ignored[child]) then nested_units(child, ignored, out) end
  end
  return out
end

-- The entries this unit flattens: its own and those its nested units left to it, less those
-- with a holder outside its subtree (kept in self._attrs._left for the unit above).
local function claim_tied(self, module, entries, ignored)
  if not wrap_users then return entries end
  for _, u in ipairs(nested_units(module, ignored, {})) do
    for _, e in ipairs(u._attrs._left or {}) do entries[#entries + 1] = e end
    u._attrs._left = nil
  end
  local inside, kept, left = {}, {}, {}
  for _, m in ipairs(module:modules()) do inside[m] = true end
  for _, e in ipairs(entries) do
    local enclosed = true
    for _, m in ipairs(wrap_users[e.tensor] or {}) do enclosed = enclosed and inside[m] == true end
    local list = enclosed and kept or left
    list[#list + 1] = e
  end
  self._attrs._left = left[1] and left or nil
  return kept
end

local function flatten(self, module, strategy, group, ignored, sync, c, inter)
  local buffers = {}
  local entries = claim_tied(self, module, unit_params(module, {}, ignored, buffers), ignored)
  local was_meta = materialize_unit(module, entries, buffers, c)
  local uniq, index, seen = {}, {}, {}
  for i, e in ipairs(entries) do
    local k = seen[e.tensor]
    if not k then
      uniq[#uniq + 1] = e.tensor
      k = #uniq
      seen[e.tensor] = k
    end
    index[i] = k
    if FLATTENED[e.tensor] then
      error(fmt("FSDP: parameter '%s' of %s is already in another FSDP unit (tied parameters must be in "
        .. "one unit: wrap a module holding every user of it)", e.name, e.module:_get_name()), 4)
    end
  end
  if sync and #was_meta == 0 then -- meta units: the records give every rank the same values
    local all = {}
    for _, t in ipairs(uniq) do all[#all + 1] = t end
    for _, t in ipairs(buffers) do all[#all + 1] = t end
    -- HYBRID_SHARD: the first node's values across nodes, then each node's first rank's inside it
    if inter then broadcast_from_first(all, inter) end
    broadcast_from_first(all, group)
  end
  if #uniq == 0 then return end
  local fp, _, views, pieces = native.flat_param(uniq, strategy == "HYBRID_SHARD" and "FULL_SHARD" or strategy,
    group, comm.native_mp(c, uniq[1].dtype), c.offload_params)
  if inter then fp:set_inter_group(inter) end
  for _, t in ipairs(uniq) do FLATTENED[t] = true end
  -- a materialised unit's full parameters go now, not at Lua's next collection: only the shard stays
  for _, e in ipairs(was_meta) do ms._release_storage(e.tensor) end
  local cviews = fp:compute_views()
  self._attrs._orig = install_views(self, entries, index, views, pieces, cviews)
  self._attrs._flat = fp
  self._attrs._device = views[1].device
  fp:set_prefetch(c.forward_prefetch, c.backward_prefetch)
  fp:set_limit_all_gathers(c.limit_all_gathers)
end

-- ---- construction ---------------------------------------------------------------------------

-- "_fsdp_wrapped_module._fpw_module.fc1._fsdp_wrapped_module._fpw_module.weight" -> "fc1.weight"
local function clean_name(name)
  local parts = {}
  for seg in name:gmatch("[^.]+") do
    if seg ~= "_fsdp_wrapped_module" and seg ~= "_fpw_module" and seg ~= "_checkpoint_wrapped_module" then
      parts[#parts + 1] = seg
    end
  end
  return table.concat(parts, ".")
end

-- Each unit's collectives carry its module path in the outermost unit's tree ("layers.0"; that
-- unit: "(root)"; every FSDP() names its subtree, so the outermost's names stay), the same on
-- every rank from construction on, whatever each rank runs later, and its phase, so that the
-- ranks compare the execution order: units run in different orders fail naming both
-- (engine/include/moonshard/dist.h).
local function name_units(root)
  for path, m in root:named_modules() do
    if m:isinstance(FSDP) and m._attrs._flat then
      local name = clean_name(path)
      m._attrs._flat:set_name(name == "" and "(root)" or name)
    end
  end
end

function FSDP:init(module, opts)
  if not is_module(module) then
    error(fmt("FSDP: bad argument #1 (module): expected a module, got %s", type(module)), 3)
  end
  opts = check_options(opts)
  local c = comm.check_options(opts, 2)
  c.offload_params = opts.cpu_offload ~= nil and check_cpu_offload(opts.cpu_offload)
  -- device_id: the module goes to the device before anything is flattened or broadcast
  if opts.device_id ~= nil then
    c.device = check_device_id(opts.device_id)
    module:_apply(function(t) return t.is_meta and t or t:to(c.device) end) -- meta: materialised there
  end
  c.param_init_fn = opts.param_init_fn
  local strategy = opts.sharding_strategy or "FULL_SHARD"
  local group, inter = opts.process_group, nil
  if strategy == "HYBRID_SHARD" then group, inter = comm.hybrid_groups(group, 2) end
  local ignored = ignored_set(opts.ignored_modules)
  if ignored[module] then
    error("FSDP: option 'ignored_modules': expected modules inside the wrapped module, got the wrapped "
      .. "module itself (or a module around it)", 3)
  end
  -- the outermost auto wrap knows every holder of every parameter until its own unit is built
  local _ <close> = opts.auto_wrap_policy ~= nil and wrap_users == nil and tied_scope(module) or nil
  if opts.auto_wrap_policy ~= nil then
    if not ok_wrap then error("FSDP: auto_wrap_policy needs moonshard.fsdp_wrap: " .. tostring(wrap), 3) end
    local child_opts = { sharding_strategy = strategy, process_group = inter and { group, inter } or group,
      ignored_modules = opts.ignored_modules, sync_module_states = opts.sync_module_states,
      mixed_precision = opts.mixed_precision, forward_prefetch = opts.forward_prefetch,
      backward_prefetch = opts.backward_prefetch, cpu_offload = opts.cpu_offload,
      param_init_fn = opts.param_init_fn, device_id = opts.device_id, limit_all_gathers = opts.limit_all_gathers }
    module = wrap.auto_wrap(module, opts.auto_wrap_policy, function(m) return FSDP(m, child_opts) end,
      { wrapper_cls = FSDP, ignored_modules = opts.ignored_modules })
  end
  self._fsdp_wrapped_module = FlattenParamsWrapper(module)
  self._attrs.sharding_strategy = strategy
  self._attrs.process_group = group -- HYBRID_SHARD: the intra-node group (clip_grad_norm_)
  self._attrs.replicate_group = inter -- HYBRID_SHARD: the group of this rank's replicas across nodes
  self._attrs._comm = c
  flatten(self, module, strategy, group, ignored, opts.sync_module_states == true, c, inter)
  if c.forward_prefetch then progress_hooks(module, ignored) end
  name_units(self)
  -- verbose = true: rank 0 prints fsdp.memory_report at wrap time (nested units never get it)
  if opts.verbose then memory.print_report(self) end
end

-- FSDP(module, opts): the wrapped module (see the file's header).
function M.FSDP(module, opts) return FSDP(module, opts) end

function FSDP:extra_repr() return "" end

-- The wrapped module, as PyTorch's .module property.
function FSDP:module() return self._fsdp_wrapped_module._fpw_module end

-- ---- parameters under their original names ----------------------------------------------------

local function cleaned(iter, state, init)
  local list = {}
  for name, v in iter, state, init do list[#list + 1] = { clean_name(name), v } end
  local i = 0
  return function()
    i = i + 1
    local e = list[i]
    if e then return e[1], e[2] end
  end
end

-- As nn.Module's, under the unwrapped module's names (parameters() is nn.Module's: the pieces).
function FSDP:named_parameters(prefix, recurse)
  return cleaned(nn.Module.named_parameters(self, prefix, recurse))
end

function FSDP:named_buffers(prefix, recurse)
  return cleaned(nn.Module.named_buffers(self, prefix, recurse))
end

-- The units (FSDP modules with a flat parameter) of model's tree, in modules() order.
local function units_of(model)
  local out = {}
  for _, m in ipairs(model:modules()) do
    if m:isinstance(FSDP) and m._attrs._flat then out[#out + 1] = m end
  end
  return out
end

-- Points the unit's modules at full-shaped views or back at the pieces: which = "compute" (what
-- forward computes with: the param_dtype views under mixed precision), "full" (the dtype views
-- of the full buffer: summon_full_params, state dicts) or nil (the pieces).
local function use_full_views(unit, which)
  for _, e in ipairs(unit._attrs._orig) do
    e.module._parameters.map[e.name] = which == "compute" and e.compute or which == "full" and e.view or e.piece
  end
end

-- A to-be-closed value running fn at close.
local CLOSER = { __close = function(c) c.fn() end }
local function closer(fn) return setmetatable({ fn = fn }, CLOSER) end

-- ---- forward and backward -------------------------------------------------------------------

-- The tensors of a unit's packed outputs (tensors, or tables of them at any depth), as a list
-- for the engine's post-forward (it hooks those that require grad).
local function tensors_of(outs)
  local list = {}
  for i = 1, outs.n do
    comm.each_tensor(outs[i], function(t) list[#list + 1] = t end)
  end
  return list
end

-- The root whose forward is running (the outermost FSDP forward; nested units see it), else nil.
local active_root

-- One unit's forward: the engine's pre- and post-forward (moonshard/fsdp_runtime.h: gather,
-- prefetch, reshard, the pre-backward hooks on the outputs) around the wrapped module; returns
-- the packed outputs.
local function unit_forward(self, ...)
  local fp = self._attrs._flat
  if fp == nil then return pack(self._fsdp_wrapped_module(...)) end
  fp:pre_forward()
  local outs
  do
    use_full_views(self, "compute")
    local _ <close> = closer(function() use_full_views(self, nil) end)
    outs = pack(self._fsdp_wrapped_module(...))
  end
  fp:post_forward(tensors_of(outs))
  return outs
end

-- The root's lazy initialisation (PyTorch's _lazy_init) at its first forward as root, when the
-- tree is complete: the engine's root state over every unit below (in modules() order: the
-- order its end of backward finishes them), whose execution order they record from then on;
-- buffers are cast to buffer_dtype once.
local function lazy_init(root)
  if root._attrs._runtime then return end
  local mods, fps = root:modules(), {}
  for _, m in ipairs(mods) do
    if m:isinstance(FSDP) and m._attrs._flat then fps[#fps + 1] = m._attrs._flat end
  end
  for _, m in ipairs(mods) do -- the units' device: where the root's CPU inputs go
    if m:isinstance(FSDP) and m._attrs._device then
      root._attrs._input_device = m._attrs._device
      break
    end
  end
  local mp = root._attrs._comm.mixed_precision
  if mp and mp.buffer_dtype then comm.cast_buffers(mods, mp.buffer_dtype) end
  root._attrs._runtime = native.state(fps, root._attrs._flat)
end

local function root_forward(self, ...)
  lazy_init(self)
  local runtime = self._attrs._runtime
  runtime:root_pre_forward()
  local args = pack(...)
  local dev = self._attrs._input_device
  if dev and dev ~= "cpu" then comm.move_inputs(dev, args) end
  local mp = self._attrs._comm.mixed_precision
  if mp and mp.param_dtype then comm.cast_inputs(mp.param_dtype, args) end
  local outs
  do
    active_root = self
    local _ <close> = closer(function() active_root = nil end)
    outs = unit_forward(self, unpack(args, 1, args.n))
  end
  runtime:root_post_forward(tensors_of(outs))
  return unpack(outs, 1, outs.n)
end

-- A unit below the root casts its floating inputs to param_dtype with cast_forward_inputs
-- (PyTorch 2's MixedPrecision option; the root always casts its own).
function FSDP:forward(...)
  if active_root == nil then return root_forward(self, ...) end
  local mp = self._attrs._comm.mixed_precision
  local outs
  if mp and mp.param_dtype and mp.cast_forward_inputs then
    local args = pack(...)
    comm.cast_inputs(mp.param_dtype, args)
    outs = unit_forward(self, unpack(args, 1, args.n))
  else
    outs = unit_forward(self, ...)
  end
  return unpack(outs, 1, outs.n)
end

-- fsdp.comm_stats(model[, {reset = true}]) -> this rank's communication counters summed over
-- the model's units: allgather_calls, prefetch_calls, reduce_calls (reduce-scatters, NO_SHARD's
-- all-reduces), allreduce_calls (HYBRID_SHARD's across nodes), allgather_bytes, reduce_bytes,
-- bytes, waits and wait_seconds (time blocked waiting: the exposed communication), units,
-- param_dtype, reduce_dtype. reset zeroes the counters after reading them.
function M.comm_stats(model, opts)
  if not is_module(model) then
    error(fmt("comm_stats: bad argument #1 (model): expected an FSDP module, got %s", type(model)), 2)
  end
  opts = options.check("comm_stats", opts, { "reset" }, 2)
  local fps = {}
  for i, u in ipairs(units_of(model)) do fps[i] = u._attrs._flat end
  return comm.stats(fps, opts.reset)
end

-- fsdp.reset_comm_stats(model): zeroes the model's counters.
function M.reset_comm_stats(model)
  M.comm_stats(model, { reset = true })
end

-- ---- scopes: no_sync, summon_full_params --------------------------------------------------------

-- local _ <close> = model:no_sync(): backwards inside accumulate their gradients in each unit's
-- full-shaped parameters without communicating; the first backward after the scope reduces
-- the accumulated total (PyTorch's no_sync; memory: the unsharded grads are kept meanwhile).
function FSDP:no_sync()
  local units = units_of(self)
  local depth = (self._attrs._no_sync_depth or 0) + 1
  self._attrs._no_sync_depth = depth
  for _, u in ipairs(units) do u._attrs._flat:set_no_sync(true) end
  return closer(function()
    self._attrs._no_sync_depth = self._attrs._no_sync_depth - 1
    if self._attrs._no_sync_depth == 0 then
      for _, u in ipairs(units) do u._attrs._flat:set_no_sync(false) end
    end
  end)
end

-- local _ <close> = model:summon_full_params{writeback = true, recurse = true}: every unit of the
-- tree (only this one with recurse = false) is gathered and its modules read the full values.
-- With writeback (the default) what was written into them reaches the shards at close;
-- without, sharded units drop it (NO_SHARD keeps it: its shard is the full buffer).
function FSDP:summon_full_params(opts)
  opts = options.check("summon_full_params", opts, { "writeback", "recurse" }, 2)
  for k, v in pairs(opts) do
    if type(v) ~= "boolean" then
      error(fmt("summon_full_params: option '%s': expected a boolean, got %s", k, type(v)), 2)
    end
  end
  if active_root ~= nil then error("summon_full_params: expected no forward in progress, got one", 2) end
  local writeback = opts.writeback ~= false
  local units = opts.recurse == false and (self._attrs._flat and { self } or {}) or units_of(self)
  local was = {}
  for i, u in ipairs(units) do
    local fp = u._attrs._flat
    was[i] = fp:is_gathered()
    fp:gather()
    use_full_views(u, "full")
  end
  return closer(function()
    for i, u in ipairs(units) do
      local fp = u._attrs._flat
      use_full_views(u, nil)
      if writeback then fp:update_shard() end
      if not was[i] then fp:release() end
    end
  end)
end

-- ---- gradient clipping ------------------------------------------------------------------------

local function norm_type_of(v)
  if v == nil then return 2.0 end
  if v == "inf" or v == math.huge then return math.huge end
  if type(v) ~= "number" or not (v > 0) then
    error(fmt("clip_grad_norm_: bad argument #3 (norm_type): expected a positive number or 'inf', got %s",
      type(v) == "number" and tostring(v) or type(v)), 3)
  end
  return v
end

-- The norm (p finite: the sum of |g|^p; inf: the max |g|) of a list of grads, as a Lua number.
local function local_norm(grads, p)
  local acc = 0.0
  for _, g in ipairs(grads) do
    if p == math.huge then
      local n = g:abs():max():item()
      if n > acc or n ~= n then acc = n end
    else
      acc = acc + ms.norm(g, p):item() ^ p
    end
  end
  return acc
end

-- fsdp.clip_grad_norm_(model, max_norm, norm_type = 2) as PyTorch's FSDP.clip_grad_norm_: the
-- norm of all of the model's gradients together across ranks (sharded units' pieces: local
-- sums all-reduced, max for inf; NO_SHARD units and ignored parameters, the same on every rank:
-- counted once, locally), gradients scaled in place by min(1, max_norm / (norm + 1e-6)).
-- Returns the total norm as a 0-dim tensor. Every rank of the model's group must call it.
function M.clip_grad_norm_(model, max_norm, norm_type)
  if not (is_module(model) and model:isinstance(FSDP)) then
    error(fmt("clip_grad_norm_: bad argument #1 (model): expected an FSDP module, got %s",
      is_module(model) and model:_get_name() or type(model)), 2)
  end
  if type(max_norm) ~= "number" then
    error(fmt("clip_grad_norm_: bad argument #2 (max_norm): expected a number, got %s", type(max_norm)), 2)
  end
  local p = norm_type_of(norm_type)
  local sharded_set = {}
  for _, u in ipairs(units_of(model)) do
    if u._attrs.sharding_strategy ~= "NO_SHARD" then
      for _, e in ipairs(u._attrs._orig) do sharded_set[e.piece] = true end
    end
  end
  local sharded, replicated, all, dtype = {}, {}, {}, nil
  for _, param in ipairs(model:parameters()) do
    dtype = dtype or param.dtype
    local g = param.grad
    if g ~= nil then
      local list = sharded_set[param] and sharded or replicated
      list[#list + 1] = g
      all[#all + 1] = g
    end
  end
  local t = comm.for_collective(ms.tensor({ local_norm(sharded, p) }, { dtype = "float64" }))
  ms.distributed.all_reduce(t, { op = p == math.huge and "max" or "sum", group = model._attrs.process_group })
  local mine, total = local_norm(replicated, p), t:tolist()[1]
  if p == math.huge then
    if mine > total or mine ~= mine then total = mine end
  else
    total = (total + mine) ^ (1 / p)
  end
  local coef = max_norm / (total + 1e-6)
  if coef > 1.0 then coef = 1.0 end
  for _, g in ipairs(all) do g:mul_(coef) end -- by 1 too, as PyTorch (the same NaN behaviour)
  return ms.tensor(total, { dtype = all[1] and all[1].dtype or dtype or "float32" })
end

function FSDP:clip_grad_norm_(max_norm, norm_type) return M.clip_grad_norm_(self, max_norm, norm_type) end

-- ---- the pieces, for state dicts ----------------------------------------------------------------

-- See the file's header.
function M._local_pieces(model)
  local info = {}
  for _, u in ipairs(units_of(model)) do
    local offsets = u._attrs._flat:piece_offsets()
    for _, e in ipairs(u._attrs._orig) do
      if not info[e.piece] then
        info[e.piece] = { shape = e.view.shape, numel = e.view:numel(), offset = offsets[e.index],
          piece = e.piece, unit = u }
      end
    end
  end
  local out = {}
  for name, param in model:named_parameters() do
    local i = info[param]
    if i then
      i.name = name
      out[#out + 1] = i
    end
  end
  return out
end

-- ---- state dicts, memory -------------------------------------------------------------------

-- State dicts (fsdp_state.lua): FULL (the default; opts {rank0_only =, offload_to_cpu =}) or
-- SHARDED (opts.state_dict_type, or the fsdp.state_dict_type scope).
function FSDP:state_dict(opts) return state.state_dict(self, opts) end
function FSDP:load_state_dict(sd, opts) return state.load_state_dict(self, sd, opts) end

-- fsdp.memory_report(model [, optimizer]): see fsdp_memory.lua (tostring prints it).
M.memory_report = memory.memory_report

-- Activation checkpointing (moonshard.checkpoint) under FSDP's names too, as PyTorch exports it
-- beside FSDP: wrap first, then fsdp.apply_activation_checkpointing(model, {check_fn = ...}).
local checkpoint = require "moonshard.checkpoint"
M.apply_activation_checkpointing = checkpoint.apply_activation_checkpointing
M.checkpoint_wrapper = checkpoint.checkpoint_wrapper
M.CheckpointWrapper = checkpoint.CheckpointWrapper

return M
