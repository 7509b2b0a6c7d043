-- fsdp_optim.lua: optimizer state dicts of an FSDP model keyed by the original parameter names
-- (PyTorch 2's FSDP.optim_state_dict / optim_state_dict_to_load), so a checkpoint outlives the
-- world size and the wrapping. Used through moonshard.fsdp:
--
--   local osd = fsdp.optim_state_dict(model, opt)                 -- FULL: full shapes, every rank
--   local osd = fsdp.optim_state_dict(model, opt, {rank0_only = true})   -- others get {}
--   local osd = fsdp.optim_state_dict(model, opt, {state_dict_type = "SHARDED"})  -- local pieces
--   opt:load_state_dict(fsdp.optim_state_dict_to_load(model, opt, osd))
--   fsdp.load_optim_state_dict(model, opt, osd)                    -- the two lines above in one
--
-- Both forms are {state = {[name] = {step = n, square_avg = v, ...}}, param_groups = {{lr = ...,
-- params = {name, ...}}, ...}}: v is the full-shaped tensor (FULL) or {tensor = this rank's 1-D
-- piece, shape = the global shape, offset = where the piece starts in the flattened original,
-- from 0} (SHARDED, the layout of model:state_dict{state_dict_type = "SHARDED"}).
-- Per-parameter state is what has the parameter's number of elements; numbers ('step') are kept
-- as they are. Gathering a FULL dict streams one (parameter, state) at a time: a zeroed full
-- tensor into which each rank writes its piece, summed over the unit's group.
local ms = require "moonshard"

local M = {}
local fmt = string.format
local dist = ms.distributed

local function fsdp() return require("moonshard.fsdp") end
local comm = require "moonshard.fsdp_comm"
local options = require "moonshard.check_opts"

local function shape_list(t)
  local s = {}
  for i, d in ipairs(t.shape) do s[i] = d end
  return s
end

-- name, the piece's layout and the unit's group/strategy for every parameter of the model, by
-- tensor: units' pieces from fsdp._local_pieces, other (ignored) parameters whole.
local function layout_of(model)
  local by_piece = {}
  for _, i in ipairs(fsdp()._local_pieces(model)) do by_piece[i.piece] = i end
  local out = {}
  for name, p in model:named_parameters() do
    local i = by_piece[p]
    if i then
      local u = i.unit._attrs
      out[p] = { name = name, shape = shape_list(i), offset = i.offset, numel = i.numel,
        group = u.process_group, sharded = u.sharding_strategy ~= "NO_SHARD" }
    else
      out[p] = { name = name, shape = shape_list(p), offset = 0, numel = p:numel(), sharded = false }
    end
  end
  return out
end

-- The optimizer's parameters in order, each with its layout; an unknown one is an error.
local function optim_params(fname, model, opt)
  if type(opt) ~= "table" or type(opt.param_groups) ~= "table" then
    error(fmt("%s: bad argument #2 (optim): expected an optimizer, got %s", fname, type(opt)), 3)
  end
  local layout, list = layout_of(model), {}
  for gi, g in ipairs(opt.param_groups) do
    for pi, p in ipairs(g.params) do
      local l = layout[p]
      if not l then
        error(fmt("%s: parameter %d of the optimizer's group %d is not a parameter of the model "
          .. "(build the optimizer from model:parameters() after wrapping)", fname, pi, gi), 3)
      end
      list[#list + 1] = { param = p, group_index = gi, layout = l }
    end
  end
  return list
end

local function param_groups_by_name(opt, list)
  local groups, k = {}, 0
  for gi, g in ipairs(opt.param_groups) do
    local packed = { params = {} }
    for key, v in pairs(g) do
      if key ~= "params" then packed[key] = type(v) == "table" and table.move(v, 1, #v, 1, {}) or v end
    end
    for i = 1, #g.params do
      k = k + 1
      packed.params[i] = list[k].layout.name
    end
    groups[gi] = packed
  end
  return groups
end

-- ---- agreeing on the state across ranks ----------------------------------------------------------

-- "key=T" for per-parameter tensors, "key=N<number>" for numbers, sorted: what every rank needs
-- to take part in the same collectives, from a rank that holds state (an empty piece gets no
-- gradient, so no state).
local function describe(fname, name, s, numel)
  local items = {}
  for k, v in pairs(s) do
    if ms.is_tensor(v) and v:numel() == numel then
      items[#items + 1] = k .. "=T"
    elseif type(v) == "number" then
      items[#items + 1] = k .. "=N" .. fmt(math.type(v) == "integer" and "%d" or "%.17g", v)
    elseif ms.is_tensor(v) and v:numel() == 1 then
      items[#items + 1] = k .. "=N" .. fmt("%.17g", v:item())
    else
      error(fmt("%s: state '%s' of '%s' is neither a number nor a tensor with the parameter's %d elements",
        fname, tostring(k), name, numel), 0)
    end
  end
  table.sort(items)
  return table.concat(items, ";")
end

local function parse(desc)
  local out = {}
  for k, kind, v in desc:gmatch("([^=;]+)=([TN])([^;]*)") do
    out[#out + 1] = { key = k, tensor = kind == "T", value = kind == "N" and (math.tointeger(tonumber(v)) or tonumber(v)) }
  end
  return out
end

local function broadcast_string(s, src, group)
  local len = comm.for_collective(ms.tensor({ s and #s or 0 }, { dtype = "int64" }))
  dist.broadcast(len, { src = src, group = group })
  local n = len:cpu():item()
  if n == 0 then return "" end
  -- the source sends its string; every other rank receives n bytes (its own string, which may
  -- differ, is not what arrives)
  local bytes = ms.zeros(n, { dtype = "uint8" })
  if s and dist.get_rank() == src then bytes = ms.tensor({ s:byte(1, -1) }, { dtype = "uint8" }) end
  bytes = comm.for_collective(bytes)
  dist.broadcast(bytes, { src = src, group = group })
  local t = bytes:cpu():tolist()
  local parts = {}
  for i = 1, #t, 4096 do parts[#parts + 1] = string.char(table.unpack(t, i, math.min(#t, i + 4095))) end
  return table.concat(parts)
end

-- The description of each listed parameter's state, the same on every rank of the group: each
-- parameter's comes from the lowest rank that holds state for it ("" where none does).
local function agreed_descriptions(fname, opt, list, group)
  local mine = {}
  for i, e in ipairs(list) do
    local s = opt.state[e.param]
    mine[i] = s and next(s) ~= nil and describe(fname, e.layout.name, s, e.param:numel()) or nil
  end
  if not dist.is_initialized() or dist.get_world_size(group) == 1 or #list == 0 then
    for i = 1, #list do mine[i] = mine[i] or "" end
    return mine
  end
  local big = math.maxinteger
  local me = dist.get_rank()
  local src = ms.tensor((function()
    local v = {}
    for i = 1, #list do v[i] = mine[i] and me or big end
    return v
  end)(), { dtype = "int64" })
  src = comm.for_collective(src)
  dist.all_reduce(src, { op = "min", group = group })
  local srcs, out = src:cpu():tolist(), {}
  for i = 1, #list do
    out[i] = srcs[i] == big and "" or broadcast_string(mine[i], srcs[i], group)
  end
  return out
end

-- ---- FULL and SHARDED -------------------------------------------------------------------------

-- The full tensor of one state: each rank writes its piece into zeros, summed over the unit's
-- group (pieces are disjoint and cover the parameter).
local function gather_full(e, t)
  local l = e.layout
  local full = ms.zeros(l.numel, { dtype = e.param.dtype })
  local _ <close> = ms.no_grad()
  if t and t:numel() > 0 then full:narrow(1, l.offset + 1, t:numel()):copy_(t:view(-1)) end
  if l.sharded and dist.is_initialized() then
    full = comm.for_collective(full) -- nccl: through the GPU, back to where the parameter is
    dist.all_reduce(full, { op = "sum", group = l.group })
    full = full:to(e.param.device)
  end
  return full:view(table.unpack(l.shape))
end

local function check_opts(fname, opts)
  opts = options.check(fname, opts, { "state_dict_type", "rank0_only" }, 3)
  local t = opts.state_dict_type or "FULL"
  local kinds = { FULL = "FULL", FULL_STATE_DICT = "FULL", SHARDED = "SHARDED", SHARDED_STATE_DICT = "SHARDED" }
  if not kinds[t] then
    error(fmt("%s: option 'state_dict_type': expected 'FULL' or 'SHARDED', got %s", fname, tostring(t)), 3)
  end
  return { kind = kinds[t], rank0_only = opts.rank0_only == true }
end

-- fsdp.optim_state_dict(model, optim, {state_dict_type = "FULL"|"SHARDED", rank0_only = false})
function M.optim_state_dict(model, opt, opts)
  local fname = "optim_state_dict"
  opts = check_opts(fname, opts)
  local list = optim_params(fname, model, opt)
  local root_group = model._attrs and model._attrs.process_group
  local descs = agreed_descriptions(fname, opt, list, root_group)
  local keep = not opts.rank0_only or not dist.is_initialized() or dist.get_rank() == 0
  local state = {}
  for i, e in ipairs(list) do
    local s, own = {}, opt.state[e.param] or {}
    for _, item in ipairs(parse(descs[i])) do
      if not item.tensor then
        s[item.key] = item.value
      elseif opts.kind == "FULL" then
        s[item.key] = gather_full(e, own[item.key])
      else
        local t = own[item.key] or ms.zeros(e.param:numel(), { dtype = e.param.dtype })
        s[item.key] = { tensor = t:detach():view(-1), shape = e.layout.shape, offset = e.layout.offset }
      end
    end
    if next(s) ~= nil then state[e.layout.name] = s end
  end
  if not keep then return {} end
  return { state = state, param_groups = param_groups_by_name(opt, list) }
end

-- This rank's slice of a saved state value v for the parameter e: a full tensor, or a SHARDED
-- piece entry that covers the slice.
local function local_slice(fname, e, key, v)
  local l, n = e.layout, e.param:numel()
  if ms.is_tensor(v) then
    if v:numel() ~= l.numel then
      error(fmt("%s: state '%s' of '%s' has %d elements, the parameter has %d", fname, key, l.name, v:numel(), l.numel), 0)
    end
    return v:reshape(-1):narrow(1, l.offset + 1, n)
  end
  if type(v) == "table" and ms.is_tensor(v.tensor) and math.type(v.offset) == "integer" then
    local t = v.tensor:view(-1)
    if v.offset > l.offset or v.offset + t:numel() < l.offset + n then
      error(fmt("%s: state '%s' of '%s' holds elements [%d, %d); this rank needs [%d, %d) (a SHARDED optimizer "
        .. "state dict loads onto the layout it was saved from)", fname, key, l.name, v.offset, v.offset + t:numel(),
        l.offset, l.offset + n), 0)
    end
    -- in the parameter's own shape (a whole parameter outside any unit is not 1-D)
    return t:narrow(1, l.offset - v.offset + 1, n):view(table.unpack(shape_list(e.param)))
  end
  error(fmt("%s: state '%s' of '%s': expected a tensor or {tensor =, shape =, offset =}, got %s", fname, key,
    l.name, type(v)), 0)
end

-- fsdp.optim_state_dict_to_load(model, optim, osd): the optimizer's own (positional) state dict
-- for this rank, ready for optim:load_state_dict.
function M.optim_state_dict_to_load(model, opt, osd)
  local fname = "optim_state_dict_to_load"
  if type(osd) ~= "table" or type(osd.state) ~= "table" or type(osd.param_groups) ~= "table" then
    error(fmt("%s: bad argument #3 (osd): expected {state =, param_groups =} as optim_state_dict gives, got %s",
      fname, type(osd) == "table" and "a table without them" or type(osd)), 2)
  end
  local list = optim_params(fname, model, opt)
  local position = {}
  for i, e in ipairs(list) do position[e.layout.name] = i end
  local state, groups = {}, {}
  for gi, g in ipairs(osd.param_groups) do
    local packed = { params = {} }
    for k, v in pairs(g) do
      if k ~= "params" then packed[k] = v end
    end
    for i, name in ipairs(g.params or {}) do
      local at = position[name]
      if not at then error(fmt("%s: param group %d names '%s', which the optimizer does not hold", fname, gi, tostring(name)), 2) end
      packed.params[i] = at
    end
    groups[gi] = packed
  end
  for name, s in pairs(osd.state) do
    local at = position[name]
    if not at then error(fmt("%s: state for '%s', which the optimizer does not hold", fname, tostring(name)), 2) end
    local e, fresh = list[at], {}
    for k, v in pairs(s) do
      fresh[k] = type(v) == "number" and v or local_slice(fname, e, k, v)
    end
    -- a rank whose piece is empty never steps it (no grad), so it holds no state for it, as in
    -- a run that was not interrupted
    if e.param:numel() > 0 then state[at] = fresh end
  end
  return { state = state, param_groups = groups }
end

function M.load_optim_state_dict(model, opt, osd)
  opt:load_state_dict(M.optim_state_dict_to_load(model, opt, osd))
end

return M
