-- fsdp_state.lua: FSDP state dicts (moonshard.fsdp delegates here). The FULL type streamed one
-- unit at a time with PyTorch's FullStateDictConfig options, the SHARDED type (each rank's
-- pieces of the original parameters under their unwrapped names), sharded checkpoints on disk
-- that load onto any world size and any wrapping, and the state_dict_type scope.
--
-- A sharded checkpoint is a directory:
--   shard-RRRRR-of-WWWWW.safetensors  one per rank of the saving group: tensors named after the
--                                     original parameters, each a 1-D range of the flattened
--                                     original (a name with more than one range on a rank:
--                                     "name@offset" for the others)
--   index.json                        {"format": "moonshard.fsdp.sharded", "version": 1,
--                                      "world_size": W, "files": [...], "entries": [{"name",
--                                      "kind": "param"|"buffer", "dtype", "shape": [...],
--                                      "pieces": [{"file", "key", "offset", "numel"}]}]}
-- Offsets count elements from 0 in the row-major flattening of the original tensor; "file" is
-- the 0-based rank (an index into "files"). Every element is written once: by the lowest rank
-- holding it (so NO_SHARD params and every buffer come from rank 0, replicas write nothing).
-- Each file is written to a temporary name, flushed and renamed; the index last, after every
-- rank file exists, so a directory with an index is a complete checkpoint.
local ms = require "moonshard"
local ordered_pairs_of = require("moonshard.nn").internal.ordered_pairs_of

local M = {}
local fmt = string.format
local dist = ms.distributed

local INDEX = "index.json"
local FORMAT, VERSION = "moonshard.fsdp.sharded", 1

local function fsdp_class() return require("moonshard.fsdp").FullyShardedDataParallel end

local function is_unit(m) return m:isinstance(fsdp_class()) end

-- ---- the tree under the unwrapped names ---------------------------------------------------------

-- Visits every parameter and persistent buffer of m's tree under the unwrapped module's names,
-- in state-dict order: fn(name, tensor, kind, unit), kind "flat" (a view into the flat
-- parameter of `unit`, the nearest enclosing FSDP unit), "param" (a parameter of no unit) or
-- "buffer".
local function walk(m, prefix, unit, fn)
  if is_unit(m) then
    return walk(m._fsdp_wrapped_module._fpw_module, prefix, m._attrs._flat and m or unit, fn)
  end
  for _, name in ipairs(rawget(m, "_fsdp_param_names") or {}) do fn(prefix .. name, m._attrs[name], "flat", unit) end
  for _, name in ipairs(m._parameters.names) do fn(prefix .. name, m._parameters.map[name], "param", unit) end
  for _, name in ipairs(m._buffers.names) do
    if not m._non_persistent[name] then fn(prefix .. name, m._buffers.map[name], "buffer", unit) end
  end
  for _, cname in ipairs(m._modules.names) do walk(m._modules.map[cname], prefix .. cname .. ".", unit, fn) end
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
-- A unit's shard covers elements [rank * S, (rank + 1) * S) of its padded flat buffer; NO_SHARD
-- holds all of it, so its pieces are whole. Parameters outside units are whole pieces. This
-- is the one place that knows the flat layout (fp:info and each view's storage offset).
local function local_pieces(model)
  local out = {}
  walk(model, "", nil, function(name, t, kind, unit)
    if kind == "buffer" then return end
    local p = {name = name, shape = shape_list(t), dtype = t.dtype}
    if kind == "param" then
      p.offset, p.numel, p.tensor = 0, t:numel(), t:detach():view(-1)
    else
      local info = unit._attrs._flat:info()
      local shard = unit._fsdp_wrapped_module._parameters.map.flat_param:detach()
      local base = unit._attrs.sharding_strategy == "NO_SHARD" and 0 or info.rank * info.shard_numel
      local first = t:storage_offset()
      local lo = math.max(first, base)
      local hi = math.min(first + t:numel(), base + shard:numel())
      if hi > lo then
        p.offset, p.numel, p.tensor = lo - first, hi - lo, shard:narrow(1, lo - base + 1, hi - lo)
      else
        p.offset, p.numel, p.tensor = 0, 0, ms.zeros(0, {dtype = t.dtype})
      end
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
  local g = model._attrs and model._attrs._process_group
  if not dist.is_initialized() then return nil, 0, 1 end
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

local function check_config(fname, kind, config, skip)
  if config == nil then return {} end
  if type(config) ~= "table" then error(fmt("%s: expected a config table, got %s", fname, type(config)), 3) end
  for k, v in pairs(config) do
    if not (skip and skip[k]) then
      if not CONFIG_KEYS[kind][k] then
        local known = {}
        for n in pairs(CONFIG_KEYS[kind]) do known[#known + 1] = n end
        table.sort(known)
        error(fmt("%s: unknown option '%s' for a %s state dict (known: %s)", fname, tostring(k), kind,
          table.concat(known, ", ")), 3)
      end
      if type(v) ~= "boolean" then
        error(fmt("%s: option '%s' must be a boolean, got %s", fname, k, type(v)), 3)
      end
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
local function resolve(model, fname, opts)
  if opts ~= nil and type(opts) ~= "table" then error(fmt("%s: expected an options table, got %s", fname, type(opts)), 3) end
  opts = opts or {}
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

function M.state_dict(model, opts)
  local t, o = resolve(model, "state_dict", opts)
  if t == "SHARDED" then return sharded_state_dict(model, o) end
  return full_state_dict(model, o)
end

-- rank0_only and offload_to_cpu (from a scope's config) change nothing on load: as in PyTorch,
-- a FULL state dict is loaded on every rank.
local LOAD_KEYS = {state_dict_type = true, strict = true, rank0_only = true, offload_to_cpu = true}

function M.load_state_dict(model, sd, opts)
  if type(sd) ~= "table" then error(fmt("load_state_dict: expected a table of name -> tensor, got %s", type(sd)), 3) end
  for k in pairs(type(opts) == "table" and opts or {}) do
    if not LOAD_KEYS[k] then
      error(fmt("load_state_dict: unknown option '%s' (known: offload_to_cpu, rank0_only, state_dict_type, strict)",
        tostring(k)), 3)
    end
  end
  local t, o = resolve(model, "load_state_dict", opts)
  if t == "SHARDED" then return load_sharded_state_dict(model, sd, o) end
  return load_full(model, sd, o)
end

-- ---- sharded checkpoints on disk ----------------------------------------------------------------

local function json_str(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return c == '"' and '\\"' or c == "\\" and "\\\\" or fmt("\\u%04x", c:byte())
  end) .. '"'
end

-- Writes text to path atomically: a temporary name, flushed and closed, then renamed.
local function write_atomic(fname, path, text)
  local tmp = fmt("%s.tmp.%d", path, math.random(0, 1 << 30))
  local f, err = io.open(tmp, "wb")
  if not f then error(fmt("%s: could not create '%s': %s", fname, tmp, err), 0) end
  local ok, werr = f:write(text)
  ok = ok and f:flush()
  f:close()
  local renamed, rerr = false, nil
  if ok then renamed, rerr = os.rename(tmp, path) end
  if not renamed then
    os.remove(tmp)
    error(fmt("%s: could not write '%s': %s", fname, path, tostring(werr or rerr)), 0)
  end
end

local function is_dir(path)
  local f = io.open(path .. "/.", "r")
  if f then f:close() end
  return f ~= nil
end

local function file_name(rank, world) return fmt("shard-%05d-of-%05d.safetensors", rank, world) end

-- The parts of [a, b) that no range in `lower` ({offset, numel} pairs) covers.
local function uncovered(a, b, lower)
  table.sort(lower, function(x, y) return x[1] < y[1] end)
  local out, cur = {}, a
  for _, r in ipairs(lower) do
    if cur >= b then break end
    if r[1] > cur then out[#out + 1] = {cur, math.min(r[1], b)} end
    cur = math.max(cur, r[1] + r[2])
  end
  if cur < b then out[#out + 1] = {cur, b} end
  return out
end

local function index_json(world, pieces, layout)
  local files = {}
  for r = 0, world - 1 do files[#files + 1] = json_str(file_name(r, world)) end
  local entries = {}
  for i, p in ipairs(pieces) do
    local parts = {}
    for _, w in ipairs(layout[i]) do
      parts[#parts + 1] = fmt('{"file":%d,"key":%s,"offset":%d,"numel":%d}', w.rank, json_str(w.key), w.offset, w.numel)
    end
    local shape = {}
    for j, d in ipairs(p.shape) do shape[j] = tostring(d) end
    entries[#entries + 1] = fmt('  {"name":%s,"kind":"%s","dtype":"%s","shape":[%s],"pieces":[%s]}', json_str(p.name),
      p.kind, p.dtype, table.concat(shape, ","), table.concat(parts, ","))
  end
  return fmt('{"format":"%s","version":%d,"world_size":%d,\n "files":[%s],\n "entries":[\n%s\n]}\n', FORMAT, VERSION,
    world, table.concat(files, ","), table.concat(entries, ",\n"))
end

-- fsdp.save_sharded(model, dir): every rank of the model's group writes its pieces to its file
-- in dir (which must exist), then rank 0 writes the index; returns when all of it is on disk
-- (a barrier). The model may be wrapped any way, or a plain module (then rank 0 writes it all).
function M.save_sharded(model, dir)
  local fname = "save_sharded"
  if type(dir) ~= "string" then error(fmt("%s: bad argument #2 (dir): expected a directory path, got %s", fname, type(dir)), 2) end
  if not is_dir(dir) then error(fmt("%s: directory '%s' does not exist (create it first)", fname, dir), 2) end
  local group, rank, world = group_of(model)
  local pieces = held_pieces(model)
  -- everyone learns every rank's (offset, numel) per entry: the entries are the same list on
  -- every rank of the group, so one all-gather of 2 integers an entry is the whole exchange
  local ranges = {}
  for i, p in ipairs(pieces) do ranges[2 * i - 1], ranges[2 * i] = p.offset, p.numel end
  local mine = #ranges > 0 and ms.tensor(ranges, {dtype = "int64"}) or ms.zeros(0, {dtype = "int64"})
  local all = mine
  if world > 1 then
    all = ms.zeros(2 * #pieces * world, {dtype = "int64"})
    dist.all_gather_into_tensor(all, mine, {group = group})
  end
  local flat = all:tolist()
  local layout, tensors = {}, {}
  for i, p in ipairs(pieces) do
    layout[i] = {}
    local lower = {}
    for r = 0, world - 1 do
      local off, n = flat[r * 2 * #pieces + 2 * i - 1], flat[r * 2 * #pieces + 2 * i]
      for k, part in ipairs(uncovered(off, off + n, lower)) do
        local key = k == 1 and p.name or fmt("%s@%d", p.name, part[1])
        layout[i][#layout[i] + 1] = {rank = r, key = key, offset = part[1], numel = part[2] - part[1]}
        if r == rank then tensors[key] = p.tensor:narrow(1, part[1] - p.offset + 1, part[2] - part[1]) end
      end
      if n > 0 then lower[#lower + 1] = {off, n} end
    end
  end
  ms.save(tensors, dir .. "/" .. file_name(rank, world), {nested = false,
    metadata = {format = FORMAT, rank = tostring(rank), world_size = tostring(world)}})
  if world > 1 then dist.barrier({group = group}) end
  if rank == 0 then write_atomic(fname, dir .. "/" .. INDEX, index_json(world, pieces, layout)) end
  if world > 1 then dist.barrier({group = group}) end
end

local function is_count(v) return math.type(v) == "integer" and v >= 0 end

-- Why an index entry is unusable, or nil: a name, a shape of counts, pieces naming a listed
-- file, a key and an element range inside the shape.
local function check_entry(e, nfiles)
  if type(e) ~= "table" or type(e.name) ~= "string" then return "expected an object with a string \"name\"" end
  if type(e.shape) ~= "table" then return "\"shape\" must be an array of sizes" end
  for _, d in ipairs(e.shape) do
    if not is_count(d) then return "\"shape\" must be an array of sizes" end
  end
  if type(e.pieces) ~= "table" then return "\"pieces\" must be an array" end
  local n = numel_of(e.shape)
  for j, p in ipairs(e.pieces) do
    if type(p) ~= "table" or not is_count(p.file) or p.file >= nfiles or type(p.key) ~= "string"
        or not is_count(p.offset) or not is_count(p.numel) or p.offset + p.numel > n then
      return fmt("piece %d must be {file < %d, key, offset, numel} inside its %d elements", j, nfiles, n)
    end
  end
end

local function read_index(fname, dir)
  if type(dir) ~= "string" then error(fmt("%s: bad argument #2 (dir): expected a directory path, got %s", fname, type(dir)), 3) end
  if not is_dir(dir) then error(fmt("%s: directory '%s' does not exist", fname, dir), 3) end
  local path = dir .. "/" .. INDEX
  local f, err = io.open(path, "rb")
  if not f then
    error(fmt("%s: no index at '%s' (not a sharded checkpoint, or save_sharded did not finish): %s", fname, path, err), 3)
  end
  local text = f:read("a")
  f:close()
  local idx = ms._json_decode(text, fname .. " '" .. path .. "'")
  if type(idx) ~= "table" or idx.format ~= FORMAT or type(idx.entries) ~= "table" or type(idx.files) ~= "table" then
    error(fmt("%s: '%s' is not a moonshard sharded-checkpoint index (expected format '%s')", fname, path, FORMAT), 3)
  end
  if idx.version ~= VERSION then
    error(fmt("%s: '%s' has index version %s; this moonshard reads version %d", fname, path, tostring(idx.version), VERSION), 3)
  end
  for i, e in ipairs(idx.entries) do
    local why = check_entry(e, #idx.files)
    if why then
      error(fmt("%s: '%s': entry %d (%s) is malformed: %s", fname, path, i,
        type(e) == "table" and type(e.name) == "string" and ("'" .. e.name .. "'") or "unnamed", why), 3)
    end
  end
  return idx, path
end

-- fsdp.load_sharded(model, dir [, {strict = true}]): loads a checkpoint from save_sharded into
-- the model, whatever world size saved it and however both are wrapped (or into a plain
-- module). Each rank opens only the files holding the ranges it keeps and reads only those.
-- Names and shapes must match the model's (strict = false skips missing and unexpected names);
-- values take the model's dtype, as load_state_dict's copies do.
function M.load_sharded(model, dir, opts)
  local fname = "load_sharded"
  if opts ~= nil and type(opts) ~= "table" then error(fmt("%s: expected an options table, got %s", fname, type(opts)), 2) end
  local idx, path = read_index(fname, dir)
  local open = {}
  local _ <close> = setmetatable({}, {__close = function()
    for _, f in pairs(open) do f:close() end
  end})
  local function reader(file, key)
    local name = idx.files[file + 1]
    if type(name) ~= "string" or name:find("/", 1, true) then
      error(fmt("%s: '%s': file %d is not a file name in the checkpoint's directory", fname, path, file), 0)
    end
    return function(first, count)
      local f = open[file]
      if not f then
        f = ms._safetensors_open(dir .. "/" .. name)
        open[file] = f
      end
      return f:read(key, first, count)
    end
  end
  local entries = {}
  for _, e in ipairs(idx.entries) do
    local sources = {}
    for _, p in ipairs(e.pieces) do
      sources[#sources + 1] = {offset = p.offset, numel = p.numel, read = reader(p.file, p.key)}
    end
    entries[e.name] = {shape = e.shape, pieces = sources}
  end
  local what = fmt("the checkpoint '%s'", dir)
  return load_pieces(fname, model, entries, not (opts and opts.strict == false), what)
end

return M
