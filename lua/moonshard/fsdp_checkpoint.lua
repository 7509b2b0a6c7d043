-- fsdp_checkpoint.lua: sharded FSDP checkpoints on disk (fsdp.save_sharded, fsdp.load_sharded):
-- each rank writes the pieces it holds (fsdp_state.lua computes them) and loads the ranges it
-- keeps, so a checkpoint saved on one world size and wrapping loads onto any other.
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
local state = require "moonshard.fsdp_state"
local comm = require "moonshard.fsdp_comm"

local M = {}
local fmt = string.format
local dist = ms.distributed
local held_pieces, load_pieces = state._internal.held_pieces, state._internal.load_pieces
local group_of, numel_of = state._internal.group_of, state._internal.numel_of

local INDEX = "index.json"
local FORMAT, VERSION = "moonshard.fsdp.sharded", 1

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
    all = comm.for_collective(ms.zeros(2 * #pieces * world, {dtype = "int64"}))
    dist.all_gather_into_tensor(all, comm.for_collective(mine), {group = group})
  end
  local flat = all:cpu():tolist()
  local layout, tensors = {}, {}
  for i, p in ipairs(pieces) do
    layout[i] = {}
    local lower = {}
    for r = 0, world - 1 do
      local off, n = flat[r * 2 * #pieces + 2 * i - 1], flat[r * 2 * #pieces + 2 * i]
      for k, part in ipairs(uncovered(off, off + n, lower)) do
        local key = k == 1 and p.name or fmt("%s@%d", p.name, part[1])
        layout[i][#layout[i] + 1] = {rank = r, key = key, offset = part[1], numel = part[2] - part[1]}
        if r == rank then tensors[key] = p.tensor:narrow(1, part[1] - p.offset + 1, part[2] - part[1]):cpu() end
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
