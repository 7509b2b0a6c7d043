-- train_checkpoint.lua: everything a training run needs to resume, in one call each way
-- (fsdp.save_checkpoint, fsdp.load_checkpoint, fsdp.latest_checkpoint; docs/checkpointing.md):
-- the model and the optimizer state as sharded pieces keyed by the original parameter names (so
-- either loads onto any world size, or into one unwrapped process), and one small file of the
-- rest: step, lr scheduler, optimizer hyper-parameters and scalar state, every rank's RNG state
-- and the caller's `extra` (data position, ...).
--
--   ROOT/latest                     "step-00000300": the last complete checkpoint, written last
--   ROOT/step-00000300/             one generation of fsdp_checkpoint.lua's sharded format:
--     shard-RRRRR-of-WWWWW.ID.safetensors   entries of kind "param", "buffer" and "optim"
--                                           ("optimizer/<parameter name>/<state key>")
--     train-state.ID.safetensors            the rest (nested table, rank 0), listed in the index's
--                                           "aux_files" with its size and crc32
--     index.json                            written after every other file of the generation
local ms = require "moonshard"
local ckpt = require "moonshard.fsdp_checkpoint"
local state = require "moonshard.fsdp_state"
local optim_state = require "moonshard.fsdp_optim"
local comm = require "moonshard.fsdp_comm"
local options = require "moonshard.check_opts"

local M = {}
local fmt = string.format
local dist = ms.distributed
local I = ckpt._internal
local held_pieces, group_of, fill = state._internal.held_pieces, state._internal.group_of, state._internal.fill
local replicas_of = state._internal.replicas_of
local numel_of = state._internal.numel_of

local FORMAT, VERSION = "moonshard.train_checkpoint", 1
local LATEST = "latest"
local OPTIM_PREFIX = "optimizer/"

local function gen_name(step) return fmt("step-%08d", step) end
local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Options: a table of known keys; `model` required.
local function check_opts(fname, opts, known)
  options.check_given(fname, opts, known, 3)
  if type(opts.model) ~= "table" or type(opts.model.named_parameters) ~= "function" then
    error(fmt("%s: option 'model': expected a module, got %s", fname, type(opts.model)), 3)
  end
  if opts.optimizer ~= nil and (type(opts.optimizer) ~= "table" or type(opts.optimizer.param_groups) ~= "table") then
    error(fmt("%s: option 'optimizer': expected an optimizer, got %s", fname, type(opts.optimizer)), 3)
  end
  if opts.scheduler ~= nil and (type(opts.scheduler) ~= "table" or type(opts.scheduler.state_dict) ~= "function") then
    error(fmt("%s: option 'scheduler': expected an lr scheduler, got %s", fname, type(opts.scheduler)), 3)
  end
end

-- Why `v` cannot go into the train-state file, or nil: ms.save flattens nested tables to dotted
-- names, so a key with a dot would come back as another nesting.
local function unsavable(v, path)
  if type(v) ~= "table" or ms.is_tensor(v) then
    local t = type(v)
    if ms.is_tensor(v) or t == "number" or t == "string" or t == "boolean" then return nil end
    return fmt("%s is a %s (expected numbers, strings, booleans, tensors and tables of them)", path, t)
  end
  for k, x in pairs(v) do
    if type(k) == "string" and k:find(".", 1, true) then return fmt("%s has the key '%s' (keys cannot hold '.')", path, k) end
    if type(k) ~= "string" and math.type(k) ~= "integer" then return fmt("%s has a %s key", path, type(k)) end
    local why = unsavable(x, fmt("%s.%s", path, tostring(k)))
    if why then return why end
  end
end

-- The values of every rank of group (world ranks), rank r's at [r + 1]: each rank's `mine`, a
-- list of integers of one length on every rank.
local function gather_lists(mine, group, world)
  if world == 1 then return {mine} end
  local all = comm.for_collective(ms.zeros(#mine * world, {dtype = "int64"}))
  dist.all_gather_into_tensor(all, comm.for_collective(ms.tensor(mine, {dtype = "int64"})), {group = group})
  local flat, out = all:cpu():tolist(), {}
  for r = 0, world - 1 do out[r + 1] = table.move(flat, r * #mine + 1, (r + 1) * #mine, 1, {}) end
  return out
end

-- Every rank's RNG state (a list of byte values): rank r of the model's group at [r + 1], and
-- with HYBRID_SHARD's replicas, replica k's rank r at [k * world + r + 1] (rng_index).
local function gather_rng(model, group, world)
  local state = ms.get_rng_state():tolist()
  local mine = gather_lists(state, group, world)
  local replicas, _, nreplicas = replicas_of(model)
  if nreplicas == 1 then return mine end
  local flat, n, out = {}, #state, {}
  for r = 1, world do table.move(mine[r], 1, n, #flat + 1, flat) end
  for _, replica in ipairs(gather_lists(flat, replicas, nreplicas)) do
    for r = 0, world - 1 do out[#out + 1] = table.move(replica, r * n + 1, (r + 1) * n, 1, {}) end
  end
  return out
end

-- Where this rank's RNG state lies in a checkpoint's list of n (gather_rng's order): on another
-- layout, that of the rank with the same place modulo n.
local function rng_index(model, n)
  local _, rank, world = group_of(model)
  local _, replica = replicas_of(model)
  return (replica * world + rank) % n + 1
end

-- The optimizer's state tensors as pieces for the writer (same list on every rank: the SHARDED
-- optimizer state dict is agreed across ranks), and its numbers as {name =, values = {...}}.
local function optimizer_pieces(model, opt)
  local osd = optim_state.optim_state_dict(model, opt, {state_dict_type = "SHARDED"})
  local pieces, scalars = {}, {}
  for _, g in ipairs(osd.param_groups) do
    for _, name in ipairs(g.params) do
      local s, keys, values = osd.state[name] or {}, {}, {}
      for k in pairs(s) do keys[#keys + 1] = k end
      table.sort(keys)
      for _, k in ipairs(keys) do
        local v = s[k]
        if type(v) == "number" then
          values[k] = v
        else
          pieces[#pieces + 1] = {name = OPTIM_PREFIX .. name .. "/" .. k, kind = "optim", shape = v.shape,
            dtype = v.tensor.dtype, offset = v.offset, numel = v.tensor:numel(), tensor = v.tensor}
        end
      end
      if next(values) then scalars[#scalars + 1] = {name = name, values = values} end
    end
  end
  return pieces, scalars, osd.param_groups
end

-- Rank 0 creates the directory; every rank waits for it.
local function make_dir(fname, path, rank, world, group)
  if rank == 0 and not I.is_dir(path) then os.execute("mkdir -p -- " .. quote(path)) end
  if world > 1 then dist.barrier({group = group}) end
  if not I.is_dir(path) then error(fmt("%s: cannot create the directory '%s'", fname, path), 0) end
end

-- Rank 0, after latest names the new generation: removes the generations of root other than the
-- `keep` newest steps (the new one always stays).
local function remove_older(root, keep, newest)
  local steps = {}
  for _, name in ipairs(ms._list_dir(root) or {}) do
    local n = name:match("^step%-(%d+)$")
    if n and name ~= newest then steps[#steps + 1] = math.tointeger(tonumber(n)) end
  end
  table.sort(steps, function(a, b) return a > b end)
  for i = keep, #steps do os.execute("rm -rf -- " .. quote(root .. "/" .. gen_name(steps[i]))) end
end

-- save_checkpoint's writing, by the ranks of the model's group (the first replica's).
local function write_generation(fname, root, gen, opts, rng)
  local model, opt = opts.model, opts.optimizer
  local group, rank, world = group_of(model)
  make_dir(fname, gen, rank, world, group)
  local pieces = held_pieces(model)
  local train = {format = FORMAT, version = VERSION, step = opts.step, world_size = world, rng = rng,
    extra = opts.extra}
  if opt then
    local more, scalars, groups = optimizer_pieces(model, opt)
    table.move(more, 1, #more, #pieces + 1, pieces)
    train.optimizer = {param_groups = groups, scalars = scalars}
  end
  if opts.scheduler then train.scheduler = opts.scheduler:state_dict() end
  I.write_pieces(fname, gen, pieces, group, rank, world, function(id)
    local name = fmt("train-state.%s.safetensors", id)
    ms.save(train, gen .. "/" .. name)
    return {name}
  end)
  -- the generation is complete on disk (the writer's barrier): only now may latest name it
  if rank == 0 then
    ms._write_atomic(root .. "/" .. LATEST, gen_name(opts.step) .. "\n", fname)
    if opts.keep_last then remove_older(root, opts.keep_last, gen_name(opts.step)) end
  end
  if world > 1 then dist.barrier({group = group}) end
end

-- fsdp.save_checkpoint(root, {model =, optimizer =, scheduler =, step =, extra =, keep_last =}):
-- writes root/step-<step> and then points root/latest at it; returns the generation's path. Every
-- rank of the model's group calls it. keep_last = k then removes all but the k newest generations.
-- HYBRID_SHARD: every rank calls it; the first replica's group writes (every rank's RNG state
-- included), and every rank returns once the generation is complete.
function M.save_checkpoint(root, opts)
  local fname = "save_checkpoint"
  if type(root) ~= "string" then error(fmt("%s: bad argument #1 (root): expected a directory path, got %s", fname, type(root)), 2) end
  check_opts(fname, opts, {model = true, optimizer = true, scheduler = true, step = true, extra = true, keep_last = true})
  if math.type(opts.step) ~= "integer" or opts.step < 0 or opts.step > 99999999 then
    error(fmt("%s: option 'step': expected an integer in 0..99999999, got %s", fname, tostring(opts.step)), 2)
  end
  if opts.keep_last ~= nil and (math.type(opts.keep_last) ~= "integer" or opts.keep_last < 1) then
    error(fmt("%s: option 'keep_last': expected an integer >= 1, got %s", fname, tostring(opts.keep_last)), 2)
  end
  local why = opts.extra ~= nil and unsavable(opts.extra, "extra")
  if why then error(fmt("%s: option 'extra': %s", fname, why), 2) end
  local group, _, world = group_of(opts.model)
  local replicas, replica, nreplicas = replicas_of(opts.model)
  local gen = root .. "/" .. gen_name(opts.step)
  local rng = gather_rng(opts.model, group, world)
  if replica == 0 then write_generation(fname, root, gen, opts, rng) end
  if nreplicas > 1 then dist.barrier({group = replicas}) end
  return gen
end

-- fsdp.latest_checkpoint(root): the path of the generation root/latest names, or nil when there
-- is none yet (a fresh run).
function M.latest_checkpoint(root)
  if type(root) ~= "string" then error(fmt("latest_checkpoint: bad argument #1 (root): expected a directory path, got %s", type(root)), 2) end
  local f = io.open(root .. "/" .. LATEST, "rb")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  local name = text:match("^(step%-%d+)\n?$")
  if not name then
    error(fmt("latest_checkpoint: '%s/%s' should name a generation (step-NNNNNNNN), holds %q", root, LATEST,
      text:sub(1, 40)), 2)
  end
  return root .. "/" .. name
end

-- The generation to load: path itself when it holds an index, else the one path/latest names.
local function resolve(fname, path)
  if type(path) ~= "string" then error(fmt("%s: bad argument #1 (path): expected a directory path, got %s", fname, type(path)), 3) end
  if ms._file_size(path .. "/" .. I.INDEX) then return path end
  local ok, gen = pcall(M.latest_checkpoint, path)
  if not ok then error((gen:gsub("^latest_checkpoint", fname)), 3) end
  if not gen then
    error(fmt("%s: '%s' holds no checkpoint (neither %s nor %s)", fname, path, I.INDEX, LATEST), 3)
  end
  return gen
end

-- The train-state table of the generation (after verify_files checked its crc32).
local function read_train_state(fname, gen, idx)
  local aux = idx.aux_files and idx.aux_files[1]
  if not aux or not aux.name:match("^train%-state%.") then
    error(fmt("%s: '%s' is a model checkpoint without training state (written by save_sharded? load it with "
      .. "load_sharded)", fname, gen), 0)
  end
  local t = ms.load(gen .. "/" .. aux.name)
  if type(t) ~= "table" or t.format ~= FORMAT or t.version ~= VERSION then
    error(fmt("%s: '%s/%s' is not a moonshard training state (expected format '%s' version %d)", fname, gen,
      aux.name, FORMAT, VERSION), 0)
  end
  return t
end

-- This rank's optimizer state as fsdp.optim_state_dict's SHARDED form, read from the index's
-- "optim" entries into fresh tensors (nothing live is touched).
local function read_optimizer(fname, model, idx, gen, train)
  local by_param = {}
  for _, e in ipairs(idx.entries) do
    if e.kind == "optim" then
      local name, key = e.name:sub(#OPTIM_PREFIX + 1):match("^(.*)/([^/]+)$")
      if not name then error(fmt("%s: '%s': optimizer entry '%s' is malformed", fname, gen, e.name), 0) end
      by_param[name] = by_param[name] or {}
      by_param[name][key] = e
    end
  end
  local entries, closer <close> = I.entries_of(idx, gen, function(kind) return kind == "optim" end)
  local osd = {state = {}, param_groups = train.optimizer.param_groups}
  for _, p in ipairs(held_pieces(model)) do
    for key, e in pairs(p.kind == "param" and by_param[p.name] or {}) do
      if table.concat(e.shape, ",") ~= table.concat(p.shape, ",") then
        error(fmt("%s: shape of '%s' differs: the checkpoint '%s' has its optimizer state '%s' of shape (%s), the "
          .. "model expects (%s)", fname, p.name, gen, key, table.concat(e.shape, ", "), table.concat(p.shape, ", ")), 0)
      end
      local t = ms.zeros(p.numel, {dtype = e.dtype})
      fill(fname, {name = e.name, offset = p.offset, numel = p.numel, numel_total = numel_of(e.shape), tensor = t},
        entries[e.name].pieces)
      osd.state[p.name] = osd.state[p.name] or {}
      osd.state[p.name][key] = {tensor = t, shape = e.shape, offset = p.offset}
    end
  end
  for _, s in ipairs(train.optimizer.scalars) do
    osd.state[s.name] = osd.state[s.name] or {}
    for k, v in pairs(s.values) do osd.state[s.name][k] = v end
  end
  return osd
end

-- The ranges this rank reads: its model pieces and the optimizer state of its parameters.
local function wanted_ranges(model, idx, with_optimizer)
  local out, mine = {}, {}
  for _, p in ipairs(held_pieces(model)) do
    out[#out + 1] = p
    mine[p.name] = p
  end
  for _, e in ipairs(with_optimizer and idx.entries or {}) do
    local p = e.kind == "optim" and mine[e.name:sub(#OPTIM_PREFIX + 1):match("^(.*)/[^/]+$")]
    if p then out[#out + 1] = {name = e.name, offset = p.offset, numel = p.numel} end
  end
  return out
end

-- Refuses an optimizer whose groups do not match the saved ones before anything is loaded.
local function check_groups(fname, opt, saved)
  if #saved ~= #opt.param_groups then
    error(fmt("%s: the checkpoint's optimizer has %d parameter groups, the optimizer %d", fname, #saved,
      #opt.param_groups), 0)
  end
  for gi, g in ipairs(opt.param_groups) do
    if #saved[gi].params ~= #g.params then
      error(fmt("%s: the checkpoint's parameter group %d has %d parameters, the optimizer's %d", fname, gi,
        #saved[gi].params, #g.params), 0)
    end
  end
end

-- fsdp.load_checkpoint(path, {model =, optimizer =, scheduler =, strict = true}) -> step, extra:
-- path is a root (its latest generation) or a generation. Restores the model, the optimizer and
-- the scheduler given, and this rank's RNG state (on another world size: saved rank r % W's).
-- Every check runs before anything is loaded; a refused load changes nothing.
function M.load_checkpoint(path, opts)
  local fname = "load_checkpoint"
  check_opts(fname, opts, {model = true, optimizer = true, scheduler = true, strict = true})
  local gen = resolve(fname, path)
  local model, opt = opts.model, opts.optimizer
  local idx = I.read_index(fname, gen)
  I.verify_files(fname, gen, idx, I.files_to_read(wanted_ranges(model, idx, opt ~= nil), idx))
  local train = read_train_state(fname, gen, idx)
  if opt and not train.optimizer then error(fmt("%s: '%s' holds no optimizer state", fname, gen), 0) end
  if opts.scheduler and not train.scheduler then error(fmt("%s: '%s' holds no scheduler state", fname, gen), 0) end
  local osd
  if opt then
    check_groups(fname, opt, train.optimizer.param_groups)
    osd = optim_state.optim_state_dict_to_load(model, opt, read_optimizer(fname, model, idx, gen, train))
  end
  ckpt._load_model(fname, model, gen, idx, opts.strict ~= false)
  if opt then opt:load_state_dict(osd) end
  if opts.scheduler then opts.scheduler:load_state_dict(train.scheduler) end
  ms.set_rng_state(ms.tensor(train.rng[rng_index(model, #train.rng)], {dtype = "uint8"}))
  return train.step, train.extra
end

return M
