-- fsdp_state.lua: FSDP state dicts (moonshard.fsdp delegates here). The FULL type streamed one
-- unit at a time with PyTorch's FullStateDictConfig options, the SHARDED type (each rank's
-- pieces of the original parameters under their unwrapped names) and the state_dict_type scope.
-- Sharded checkpoints on disk, built on the pieces, are in fsdp_checkpoint.lua.
local ms = require "moonshard"
local options = require "moonshard.check_opts"
local ordered_pairs_of = require("moonshard.nn").internal.ordered_pairs_of

local M = {}
local fmt = string.format
local dist = ms.distributed

local function fsdp_class() return require("moonshard.fsdp").FullyShardedDataParallel end

local function is_unit(m) return m:isinstance(fsdp_class()) end

-- ---- the tree under the unwrapped names ---------------------------------------------------------

-- Visits every parameter and persistent buffer of m's tree under the unwrapped module's names,
-- in state-dict order: fn(name, tensor, kind, unit, piece), kind "flat" (a full-shaped view
-- into the flat parameter of `unit`, the nearest enclosing FSDP unit; piece: this rank's piece
-- of it), "param" (a parameter of no unit) or "buffer".
local function walk(m, prefix, unit, fn)
  if is_unit(m) then
    return walk(m._fsdp_wrapped_module._fpw_module, prefix, m._attrs._flat and m or unit, fn)
  end
  -- a unit's parameters: the full-shaped view (m._attrs) and, registered, this rank's piece
  local managed = rawget(m, "_fsdp_param_set") or {}
  for _, name in ipairs(rawget(m, "_fsdp_param_names") or {}) do -- a tied one's unit may enclose m's
    fn(prefix .. name, m._attrs[name], "flat", managed[name], m._parameters.map[name])
  end
  for _, name in ipairs(m._parameters.names) do
    if not managed[name] then fn(prefix .. name, m._parameters.map[name], "param", unit) end
  end
  for _, name in ipairs(m._buffers.names) do
    if not m._non_persistent[name] then fn(prefix .. name, m._buffers.map[name], "buffer", unit) end
  end
  for _, cname in ipairs(m._modules.names) do -- a CheckpointWrapper's child keeps its module's names
    walk(m._modules.map[cname], cname == "_checkpoint_wrapped_module" and prefix or prefix .. cname .. ".", unit, fn)
  end
end

local function shape_list(t)
  local s = {}
  for i, d in ipairs(t.shape) do s[i] = d end
  return s
end

local function shape_str(s) return "(" .. table.concat(s, ", ") .. ")" end

-- This rank's piece of every original parameter, in state-dict order: {name =, shape = (the
-- global shape, a list), dtype =, offset = (of the piece in the flattened original, from 0),
-- numel =, tensor = (the piece's values: a 1-D view into the shard, written through on load)}.
-- The layout comes from fsdp._local_pieces (NO_SHARD's pieces are whole: its shard is the whole
-- flat buffer); parameters outside units are whole pieces.
local function local_pieces(model)
  local of = {}
  for _, i in ipairs(require("moonshard.fsdp")._local_pieces(model)) do of[i.piece] = i end
  local out = {}
  walk(model, "", nil, function(name, t, kind, _, piece)
    if kind == "buffer" then return end
    local p = {name = name, shape = shape_list(t), dtype = t.dtype}
    if kind == "param" then
      p.offset, p.numel, p.tensor = 0, t:numel(), t:detach():view(-1)
    else
      local i = of[piece]
      p.offset, p.numel, p.tensor = i.offset, piece:numel(), piece:detach()
    end
    out[#out + 1] = p
  end)
  return out
end

-- Every piece this rank holds: the parameters' pieces, then the buffers whole, with `kind`.
local function held_pieces(model)
  local out = local_pieces(model)
  for _, p in ipairs(out) do p.kind = "param" end
  walk(model, "", nil, function(name, t, kind)
    if kind == "buffer" then
      out[#out + 1] = {name = name, kind = "buffer", shape = shape_list(t), dtype = t.dtype, offset = 0,
                       numel = t:numel(), tensor = t:detach():view(-1)}
    end
  end)
  return out
end

-- The process group of the model's units (nil: the world) and this rank's place in it.
local function group_of(model)
  local g = model._attrs and model._attrs.process_group
  if not dist.is_initialized() then return nil, 0, 1 end
  return g, dist.get_rank(g), dist.get_world_size(g)
end

-- HYBRID_SHARD's replicas: the group of the ranks holding the same shard on other nodes, this
-- rank's place in it and its size (nil, 0, 1 for every other strategy). Each replica holds every
-- piece its group does, so only replica 0 writes a checkpoint.
local function replicas_of(model)
  local g = model._attrs and model._attrs.replicate_group
  if not g or not dist.is_initialized() then return nil, 0, 1 end
  return g, dist.get_rank(g), dist.get_world_size(g)
end

-- ---- the state_dict_type scope ----------------------------------------------------------------

local TYPES = {FULL = "FULL", FULL_STATE_DICT = "FULL", SHARDED = "SHARDED", SHARDED_STATE_DICT = "SHARDED"}
local CONFIG_KEYS = {FULL = {rank0_only = true, offload_to_cpu = true}, SHARDED = {offload_to_cpu = true}}

local function check_type(fname, kind)
  local t = TYPES[kind]
  if t then return t end
  if kind == "LOCAL_STATE_DICT" or kind == "LOCAL" then
    error(fmt("%s: state_dict_type 'LOCAL_STATE_DICT' is not supported yet (FULL_STATE_DICT or SHARDED_STATE_DICT)",
      fname), 3)
  end
  error(fmt("%s: state_dict_type must be 'FULL_STATE_DICT' or 'SHARDED_STATE_DICT', got %s", fname,
    type(kind) == "string" and ("'" .. kind .. "'") or type(kind)), 3)
end

-- A state dict type's config (rank0_only is FULL's only); `skip` names the call's other options.
local function check_config(fname, kind, config, skip)
  local known = options.union(CONFIG_KEYS[kind], skip or {})
  config = options.check(fmt("%s (%s state dict)", fname, kind), config, known, 3)
  for k, v in pairs(config) do
    if not (skip and skip[k]) and type(v) ~= "boolean" then
      error(fmt("%s: option '%s' must be a boolean, got %s", fname, k, type(v)), 3)
    end
  end
  return config
end

-- fsdp.state_dict_type(model, "SHARDED_STATE_DICT" | "FULL_STATE_DICT" [, config]): a
-- to-be-closed scope in which model:state_dict() and model:load_state_dict() use that type (and
-- config: {rank0_only =, offload_to_cpu =}) on every unit of the model, as PyTorch's context
-- manager; closing it restores what was there before.
function M.state_dict_type(model, kind, config)
  if not (type(model) == "table" and model.isinstance and is_unit(model)) then
    error(fmt("state_dict_type: bad argument #1 (model): expected an FSDP module, got %s", type(model)), 2)
  end
  local t = check_type("state_dict_type", kind)
  config = check_config("state_dict_type", t, config)
  local saved = {}
  for _, m in ipairs(model:modules()) do
    if is_unit(m) then
      saved[#saved + 1] = {m, m._attrs._state_dict_type}
      m._attrs._state_dict_type = {type = t, config = config}
    end
  end
  local closed = false
  return setmetatable({type = t}, {__close = function()
    if closed then return end
    closed = true
    for _, s in ipairs(saved) do s[1]._attrs._state_dict_type = s[2] end
  end})
end

-- The type and options for a state_dict/load_state_dict call: opts.state_dict_type, else the
-- scope's, else FULL; opts' own options over the scope's config.
local function resolve(model, fname, opts, known)
  opts = options.check(fname, opts, known, 3)
  local scope = model._attrs._state_dict_type
  local t = opts.state_dict_type ~= nil and check_type(fname, opts.state_dict_type) or (scope and scope.type) or "FULL"
  local merged = {}
  if scope and scope.type == t then
    for k, v in pairs(scope.config) do merged[k] = v end
  end
  for k, v in pairs(opts) do merged[k] = v end
  return t, merged
end

local function ordered(sd, keys) return setmetatable(sd, {__pairs = ordered_pairs_of(keys)}) end

-- ---- FULL: streamed one unit at a time --------------------------------------------------------

-- The entries of the walk grouped by unit: entries (state-dict order) and the units in the
-- order they first appear, each with its flat entries (items).
local function by_unit(model)
  local entries, units, of = {}, {}, {}
  walk(model, "", nil, function(name, t, kind, unit)
    entries[#entries + 1] = {name = name, tensor = t, kind = kind}
    if kind == "flat" then
      local u = of[unit]
      if not u then
        u = {unit = unit, items = {}}
        of[unit] = u
        units[#units + 1] = u
      end
      u.items[#u.items + 1] = entries[#entries]
    end
  end)
  return entries, units
end

-- Runs fn with the unit's full buffer gathered (only that unit's: its ancestors stay sharded),
-- leaving it as it was found (also when fn raises). Every rank calls this for the same units
-- in the same order.
local function with_gathered(unit, fn)
  local fp = unit._attrs._flat
  local was = fp:is_gathered()
  if not was then fp:gather() end
  local _ <close> = setmetatable({}, {__close = function()
    if not was then fp:release() end
  end})
  fn(fp)
end

local function copy_out(t, offload)
  t = t:detach()
  if offload and t.device ~= "cpu" then return t:to("cpu") end
  return t:clone()
end

-- The full state dict under the unwrapped names. Every rank takes part in the gathers; with
-- rank0_only the other ranks copy nothing and get an empty table. offload_to_cpu puts the
-- copies in host memory (where the parameters live on a device).
local function full_state_dict(model, opts)
  check_config("state_dict", "FULL", opts, {state_dict_type = true, prefix = true, keep_vars = true})
  local _, rank = group_of(model)
  local keep = not opts.rank0_only or rank == 0
  local prefix = opts.prefix or ""
  local entries, units = by_unit(model)
  local sd, keys = {}, {}
  local _ <close> = ms.no_grad()
  for _, u in ipairs(units) do
    with_gathered(u.unit, function()
      for _, e in ipairs(u.items) do
        if keep then e.value = copy_out(e.tensor, opts.offload_to_cpu) end
      end
    end)
  end
  if keep then
    for _, e in ipairs(entries) do
      keys[#keys + 1] = prefix .. e.name
      sd[prefix .. e.name] = e.value or copy_out(e.tensor, opts.offload_to_cpu)
    end
  end
  return ordered(sd, keys), keys
end

local function quoted(list)
  local q = {}
  for i, k in ipairs(list) do q[i] = '"' .. k .. '"' end
  return table.concat(q, ", ")
end

-- Loads a full state dict (present on every rank): every key must be there with its shape
-- (unless strict = false: then missing ones are skipped); nothing is copied when anything is
-- wrong. Each unit is gathered in turn, written through its views, and each rank keeps its
-- slice.
local function load_full(model, sd, opts)
  local strict = opts.strict ~= false
  local entries, units = by_unit(model)
  local own, missing, unexpected, errors = {}, {}, {}, {}
  for _, e in ipairs(entries) do
    own[e.name] = true
    local v = rawget(sd, e.name)
    if v == nil then
      missing[#missing + 1] = e.name
    elseif not ms.is_tensor(v) then
      errors[#errors + 1] = fmt('While copying the parameter named "%s", expected a tensor from checkpoint but received %s',
        e.name, type(v))
    elseif tostring(v.shape) ~= tostring(e.tensor.shape) then
      errors[#errors + 1] = fmt("size mismatch for %s: copying a param with shape %s from checkpoint, the shape in current model is %s.",
        e.name, tostring(v.shape), tostring(e.tensor.shape))
    end
  end
  for k in pairs(sd) do
    if not own[k] then unexpected[#unexpected + 1] = tostring(k) end
  end
  if strict and #unexpected > 0 then table.insert(errors, 1, fmt("Unexpected key(s) in state_dict: %s. ", quoted(unexpected))) end
  if strict and #missing > 0 then table.insert(errors, 1, fmt("Missing key(s) in state_dict: %s. ", quoted(missing))) end
  if #errors > 0 then
    error(fmt("Error(s) in loading state_dict for %s:\n\t%s", model:_get_name(), table.concat(errors, "\n\t")), 3)
  end
  local _ <close> = ms.no_grad()
  for _, e in ipairs(entries) do
    local v = rawget(sd, e.name)
    if v ~= nil and e.kind ~= "flat" then e.tensor:copy_(v) end
  end
  for _, u in ipairs(units) do
    with_gathered(u.unit, function(fp)
      for _, e in ipairs(u.items) do
        local v = rawget(sd, e.name)
        if v ~= nil then e.tensor:copy_(v) end
      end
      fp:update_shard()
    end)
  end
  return {missing_keys = missing, unexpected_keys = unexpected}
end

-- ---- SHARDED in memory ------------------------------------------------------------------------

-- name -> {tensor = this rank's piece (1-D; a view of the shard), shape = the global shape (a
-- list), dtype =, offset = of the piece in the flattened original, from 0}; buffers whole (offset
-- 0) on every rank. Pieces a rank does not hold have 0 elements.
local function sharded_state_dict(model, opts)
  check_config("state_dict", "SHARDED", opts, {state_dict_type = true, prefix = true, keep_vars = true})
  local prefix = opts.prefix or ""
  local sd, keys = {}, {}
  for _, p in ipairs(held_pieces(model)) do
    keys[#keys + 1] = prefix .. p.name
    local t = p.tensor
    if opts.offload_to_cpu and t.device ~= "cpu" then t = t:to("cpu") end
    sd[prefix .. p.name] = {tensor = t, shape = p.shape, dtype = p.dtype, offset = p.offset}
  end
  return ordered(sd, keys), keys
end

-- Copies into the piece p (elements [p.offset, p.offset + p.numel) of the flattened original)
-- from `sources` covering them: {offset =, numel =, read = function(first, count) -> tensor},
-- first counted from the source's own start. Overlapping sources are fine (each element is read
-- once); a gap is an error naming what is missing.
local function fill(fname, p, sources)
  table.sort(sources, function(a, b) return a.offset < b.offset end)
  local at, hi = p.offset, p.offset + p.numel
  while at < hi do
    local src
    for _, s in ipairs(sources) do
      if s.offset <= at and at < s.offset + s.numel then src = s break end
    end
    if not src then
      error(fmt("%s: the checkpoint lacks elements [%d, %d) of '%s' (%s elements)", fname, at, hi, p.name,
        math.tointeger(p.numel_total) or "?"), 0)
    end
    local stop = math.min(hi, src.offset + src.numel)
    p.tensor:narrow(1, at - p.offset + 1, stop - at):copy_(src.read(at - src.offset, stop - at))
    at = stop
  end
end

local function numel_of(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end

local function same_shape(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do
    if a[i] ~= b[i] then return false end
  end
  return true
end

-- Loads into every piece this rank holds from `entries` (name -> {shape =, pieces = {sources}}),
-- after checking names and shapes; nothing is written when anything is wrong. Units that are
-- gathered right now are gathered again so their full buffers show what was loaded.
local function load_pieces(fname, model, entries, strict, what)
  local targets = held_pieces(model)
  local own, missing, unexpected = {}, {}, {}
  for _, p in ipairs(targets) do
    own[p.name] = true
    local e = entries[p.name]
    if e == nil then
      missing[#missing + 1] = p.name
    elseif not same_shape(e.shape, p.shape) then
      error(fmt("%s: shape of '%s' differs: %s has %s, the model expects %s", fname, p.name, what,
        shape_str(e.shape), shape_str(p.shape)), 0)
    end
  end
  for name in pairs(entries) do
    if not own[name] then unexpected[#unexpected + 1] = name end
  end
  table.sort(unexpected)
  if strict and #missing > 0 then
    error(fmt("%s: '%s' is in the model but not in %s (missing: %s)", fname, missing[1], what, table.concat(missing, ", ")), 0)
  end
  if strict and #unexpected > 0 then
    error(fmt("%s: %s has '%s', which the model does not have (unexpected: %s)", fname, what, unexpected[1],
      table.concat(unexpected, ", ")), 0)
  end
  local _ <close> = ms.no_grad()
  for _, p in ipairs(targets) do
    local e = entries[p.name]
    if e and p.numel > 0 then
      p.numel_total = numel_of(p.shape)
      fill(fname, p, e.pieces)
    end
  end
  for _, m in ipairs(model:modules()) do
    local fp = is_unit(m) and m._attrs._flat
    if fp and m._attrs.sharding_strategy ~= "NO_SHARD" and fp:is_gathered() then fp:gather() end
  end
  return {missing_keys = missing, unexpected_keys = unexpected}
end

local function load_sharded_state_dict(model, sd, opts)
  local entries = {}
  for k, v in pairs(sd) do
    if type(k) ~= "string" or type(v) ~= "table" or not ms.is_tensor(v.tensor) or type(v.shape) ~= "table"
        or math.type(v.offset) ~= "integer" then
      error(fmt("load_state_dict: a SHARDED state dict maps names to {tensor =, shape =, dtype =, offset =} "
        .. "(as state_dict{state_dict_type = 'SHARDED'} gives), got %s = %s", tostring(k), type(v)), 3)
    end
    local t = v.tensor:view(-1)
    entries[k] = {shape = v.shape, pieces = {{offset = v.offset, numel = t:numel(),
      read = function(first, count) return t:narrow(1, first + 1, count) end}}}
  end
  return load_pieces("load_state_dict", model, entries, opts.strict ~= false, "the state dict")
end

-- ---- dispatch from FSDP:state_dict / load_state_dict ----------------------------------------------

-- every option of state_dict, whatever the type (check_config then refuses the type's strangers)
local STATE_DICT_KEYS = {state_dict_type = true, prefix = true, keep_vars = true, rank0_only = true, offload_to_cpu = true}

function M.state_dict(model, opts)
  local t, o = resolve(model, "state_dict", opts, STATE_DICT_KEYS)
  if t == "SHARDED" then return sharded_state_dict(model, o) end
  return full_state_dict(model, o)
end

-- rank0_only and offload_to_cpu (from a scope's config) change nothing on load: as in PyTorch,
-- a FULL state dict is loaded on every rank.
local LOAD_KEYS = {state_dict_type = true, strict = true, rank0_only = true, offload_to_cpu = true}

function M.load_state_dict(model, sd, opts)
  if type(sd) ~= "table" then error(fmt("load_state_dict: expected a table of name -> tensor, got %s", type(sd)), 3) end
  local t, o = resolve(model, "load_state_dict", opts, LOAD_KEYS)
  if t == "SHARDED" then return load_sharded_state_dict(model, sd, o) end
  return load_full(model, sd, o)
end

-- What fsdp_checkpoint.lua (sharded checkpoints on disk) shares with this file.
M._internal = {held_pieces = held_pieces, load_pieces = load_pieces, group_of = group_of, numel_of = numel_of,
  fill = fill, replicas_of = replicas_of}

return M
