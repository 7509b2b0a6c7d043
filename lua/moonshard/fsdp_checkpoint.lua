-- fsdp_checkpoint.lua: sharded FSDP checkpoints on disk (fsdp.save_sharded, fsdp.load_sharded):
-- each rank writes the pieces it holds (fsdp_state.lua computes them) and loads the ranges it
-- keeps, so a checkpoint saved on one world size and wrapping loads onto any other.
--
-- A sharded checkpoint is a directory holding one generation, named by its save id ID (unique per
-- save: rank 0's clock and 48 random bits from the OS, agreed by every rank):
--   shard-RRRRR-of-WWWWW.ID.safetensors  one per rank of the saving group: tensors named after the
--                                     original parameters, each a 1-D range of the flattened
--                                     original (a name with more than one range on a rank:
--                                     "name@offset" for the others); metadata names the save id
--   index.json                        {"format": "moonshard.fsdp.sharded", "version": 2,
--                                      "index_crc32": "hhhhhhhh", "save_id": ID, "world_size": W,
--                                      "files": [{"name", "size", "crc32"}, ...], "entries": [{"name",
--                                      "kind": "param"|"buffer", "dtype", "shape": [...],
--                                      "pieces": [{"file", "key", "offset", "numel"}]}]}
-- Offsets count elements from 0 in the row-major flattening of the original tensor; "file" is
-- the 0-based rank (an index into "files"). Every element is written once: by the lowest rank
-- holding it (so NO_SHARD params and every buffer come from rank 0, replicas write nothing).
-- crc32 is zlib's over a shard's whole file; index_crc32 is zlib's over the index's own text with
-- its 8 digits written as 0s.
--
-- Why a save never mixes with another: every file is written atomically (ms.save and
-- ms._write_atomic: a temporary, fsync'd, renamed, directory fsync'd); a save writes new names,
-- never the old generation's; the index is written last, by rank 0, once every rank's shard is on
-- disk (an all-gather of their sizes and checksums is the barrier), so until the rename of the
-- new index the old one names the old, complete set; only then are the older generations' files
-- (and stale temporaries of dead writers) removed. A load checks that every file the index names
-- exists with its size and, for the files it reads, its crc32, so a set mixed by hand, a torn or
-- a corrupt shard is refused with the file named.
local ms = require "moonshard"
local state = require "moonshard.fsdp_state"
local comm = require "moonshard.fsdp_comm"
local options = require "moonshard.check_opts"

local M = {}
local fmt = string.format
local dist = ms.distributed
local held_pieces, load_pieces = state._internal.held_pieces, state._internal.load_pieces
local group_of, numel_of = state._internal.group_of, state._internal.numel_of
local replicas_of = state._internal.replicas_of

local INDEX = "index.json"
local FORMAT, VERSION = "moonshard.fsdp.sharded", 2
local SAVE_ID = "^%x+%-%x+$"

local function is_dir(path)
  local f = io.open(path .. "/.", "r")
  if f then f:close() end
  return f ~= nil
end

local function file_name(rank, world, id) return fmt("shard-%05d-of-%05d.%s.safetensors", rank, world, id) end

-- The index's text with its own checksum spelled 00000000, and those 8 digits as found (nil when
-- the text has no index_crc32 field).
local CRC_FIELD = '"index_crc32":"(%x%x%x%x%x%x%x%x)"'
local function without_own_crc(text)
  local a, b, digits = text:find(CRC_FIELD)
  if not a then return text, nil end
  return text:sub(1, a - 1) .. '"index_crc32":"00000000"' .. text:sub(b + 1), digits
end

local function seal(text)
  local crc = ms._crc32((without_own_crc(text)))
  return (text:gsub(CRC_FIELD, fmt('"index_crc32":"%08x"', crc), 1))
end

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

local function file_entry(name, size, crc) return {name = name, size = size, crc32 = crc} end

-- aux: {name, size, crc32} of the files besides the shards that this save wrote (train_checkpoint.lua's
-- training state), listed as "aux_files" so that a load checks them as it checks the shards.
-- The text is ms._json_encode's (engine/src/io/json.c): compact, keys sorted, one line.
local function index_json(id, world, sums, pieces, layout, aux)
  local files = {}
  for r = 0, world - 1 do files[#files + 1] = file_entry(file_name(r, world, id), sums[2 * r + 1], sums[2 * r + 2]) end
  local aux_files = {}
  for _, a in ipairs(aux) do aux_files[#aux_files + 1] = file_entry(a.name, a.size, a.crc32) end
  local entries = {}
  for i, p in ipairs(pieces) do
    local parts = {}
    for _, w in ipairs(layout[i]) do parts[#parts + 1] = {file = w.rank, key = w.key, offset = w.offset, numel = w.numel} end
    entries[#entries + 1] = {name = p.name, kind = p.kind, dtype = tostring(p.dtype), shape = {table.unpack(p.shape)},
      pieces = parts}
  end
  return seal(ms._json_encode({format = FORMAT, version = VERSION, index_crc32 = "00000000", save_id = id,
    world_size = world, files = files, aux_files = #aux > 0 and aux_files or nil, entries = entries}) .. "\n")
end

-- After the index of save `id` is in place: removes the shard files of every other generation
-- (and of version 1, which had no save id) and the temporaries of shard writers that died.
local function remove_old_generations(dir, id)
  for _, name in ipairs(ms._list_dir(dir)) do
    local old = name:match("^shard%-%d+%-of%-%d+%.safetensors$")
      or (name:match("^[%w_]+%-.*%.(%x+%-%x+)%.safetensors$") or id) ~= id
    if old then os.remove(dir .. "/" .. name) end
  end
  ms._remove_stale_temporaries(dir, "shard-")
  ms._remove_stale_temporaries(dir, "train-state.")
end

-- Test hook (tests/lua/test_fsdp_generations.lua): the rank named by MS_TEST_SAVE_SHARDED_DIE
-- kills itself with SIGKILL once its shard is written, as a crash midway through a save would.
local function die_for_test(rank)
  if os.getenv("MS_TEST_SAVE_SHARDED_DIE") == tostring(rank) then os.execute("kill -KILL $PPID") end
end

-- Every rank of the group's int64 values `mine` (the same count on each), as one flat list: rank
-- r's at [r * #mine + 1, (r + 1) * #mine].
local function all_gather_ints(mine, group, world)
  if world == 1 then return mine end
  local all = comm.for_collective(ms.zeros(#mine * world, {dtype = "int64"}))
  dist.all_gather_into_tensor(all, comm.for_collective(ms.tensor(mine, {dtype = "int64"})), {group = group})
  return all:cpu():tolist()
end

-- Writes a sharded generation into dir (which must exist): every rank of the group its part of
-- `pieces` (held_pieces' layout; the same names in the same order on every rank), rank 0 the
-- index last. write_aux(id), when given, runs on rank 0 once the save id is agreed and before any
-- shard is written; it writes more files into dir (their names carry the id) and returns their
-- names, which the index lists with their sizes and checksums.
local function write_pieces(fname, dir, pieces, group, rank, world, write_aux)
  -- everyone learns every rank's (offset, numel) per entry, and rank 0's draw of the save id: the
  -- entries are the same list on every rank of the group, so one all-gather is the whole exchange
  local mine = {}
  for i, p in ipairs(pieces) do mine[2 * i - 1], mine[2 * i] = p.offset, p.numel end
  mine[#mine + 1] = rank == 0 and os.time() or 0
  mine[#mine + 1] = rank == 0 and ms._os_random_int() or 0
  local flat, stride = all_gather_ints(mine, group, world), #mine
  local id = fmt("%x-%012x", flat[stride - 1], flat[stride] & 0xffffffffffff)
  local aux = {}
  for _, name in ipairs(rank == 0 and write_aux and write_aux(id) or {}) do
    local crc, size = ms._file_crc32(dir .. "/" .. name)
    aux[#aux + 1] = {name = name, size = size, crc32 = crc}
  end
  local layout, tensors = {}, {}
  for i, p in ipairs(pieces) do
    layout[i] = {}
    local lower = {}
    for r = 0, world - 1 do
      local off, n = flat[r * stride + 2 * i - 1], flat[r * stride + 2 * i]
      for k, part in ipairs(uncovered(off, off + n, lower)) do
        local key = k == 1 and p.name or fmt("%s@%d", p.name, part[1])
        layout[i][#layout[i] + 1] = {rank = r, key = key, offset = part[1], numel = part[2] - part[1]}
        if r == rank then tensors[key] = p.tensor:narrow(1, part[1] - p.offset + 1, part[2] - part[1]):cpu() end
      end
      if n > 0 then lower[#lower + 1] = {off, n} end
    end
  end
  local path = dir .. "/" .. file_name(rank, world, id)
  ms.save(tensors, path, {nested = false,
    metadata = {format = FORMAT, rank = tostring(rank), world_size = tostring(world), save_id = id}})
  die_for_test(rank)
  -- ms.save synced the shard before returning, so once this all-gather of every shard's size and
  -- checksum is done, every shard is durable: the index may name them
  local crc, size = ms._file_crc32(path)
  local sums = all_gather_ints({size, crc}, group, world)
  if rank == 0 then
    ms._write_atomic(dir .. "/" .. INDEX, index_json(id, world, sums, pieces, layout, aux), fname)
    remove_old_generations(dir, id)
  end
  if world > 1 then dist.barrier({group = group}) end
end

local function check_dir(fname, dir, level)
  if type(dir) ~= "string" then
    error(fmt("%s: bad argument #2 (dir): expected a directory path, got %s", fname, type(dir)), level + 1)
  end
  if not is_dir(dir) then error(fmt("%s: directory '%s' does not exist (create it first)", fname, dir), level + 1) end
end

-- fsdp.save_sharded(model, dir): every rank of the model's group writes its pieces to its file
-- in dir (which must exist), then rank 0 writes the index and removes older generations; returns
-- when all of it is on disk. The model may be wrapped any way, or a plain module (then rank 0
-- writes it all). HYBRID_SHARD: only the first replica's group writes; the others return once it
-- has.
function M.save_sharded(model, dir)
  check_dir("save_sharded", dir, 2)
  local group, rank, world = group_of(model)
  local replicas, replica, nreplicas = replicas_of(model)
  if replica == 0 then write_pieces("save_sharded", dir, held_pieces(model), group, rank, world) end
  if nreplicas > 1 then dist.barrier({group = replicas}) end
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

-- Why the index's list of files is unusable, or nil: one {name, size, crc32} per rank of the
-- save, named after the rank, the world size and the save id.
local function check_files(idx)
  if type(idx.save_id) ~= "string" or not idx.save_id:match(SAVE_ID) then return "\"save_id\" must be hex-hex" end
  local world = idx.world_size
  if not is_count(world) or world < 1 or #idx.files ~= world then
    return fmt("\"world_size\" must be a count >= 1 and \"files\" name that many (got %s and %d)", tostring(world),
      #idx.files)
  end
  for r = 0, world - 1 do
    local f, want = idx.files[r + 1], file_name(r, world, idx.save_id)
    if type(f) ~= "table" or f.name ~= want or not is_count(f.size) or not is_count(f.crc32) or f.crc32 > 0xffffffff then
      return fmt("file %d must be {\"name\": \"%s\", \"size\", \"crc32\"}", r, want)
    end
  end
  if idx.aux_files ~= nil and type(idx.aux_files) ~= "table" then return "\"aux_files\" must be an array" end
  for i, f in ipairs(idx.aux_files or {}) do
    -- a plain name of this save: a load never opens a path outside the directory
    if type(f) ~= "table" or type(f.name) ~= "string" or not f.name:match("^[%w_%-]+%." .. idx.save_id:gsub("%-", "%%-")
        .. "%.safetensors$") or not is_count(f.size) or not is_count(f.crc32) or f.crc32 > 0xffffffff then
      return fmt("aux file %d must be {\"name\": \"NAME.%s.safetensors\", \"size\", \"crc32\"}", i, idx.save_id)
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
  local body, digits = without_own_crc(text)
  if digits and tonumber(digits, 16) ~= ms._crc32(body) then
    error(fmt("%s: '%s' fails its checksum (index_crc32 %s, its text gives %08x): the index is corrupt", fname, path,
      digits, ms._crc32(body)), 3)
  end
  local idx = ms._json_decode(text, fname .. " '" .. path .. "'")
  if type(idx) ~= "table" or idx.format ~= FORMAT or type(idx.entries) ~= "table" or type(idx.files) ~= "table" then
    error(fmt("%s: '%s' is not a moonshard sharded-checkpoint index (expected format '%s')", fname, path, FORMAT), 3)
  end
  if idx.version ~= VERSION then
    error(fmt("%s: '%s' has index version %s; this moonshard reads version %d", fname, path, tostring(idx.version), VERSION), 3)
  end
  if idx.index_crc32 ~= digits then
    error(fmt("%s: '%s' has no valid \"index_crc32\" (8 hex digits)", fname, path), 3)
  end
  local why = check_files(idx)
  if why then error(fmt("%s: '%s': %s", fname, path, why), 3) end
  for i, e in ipairs(idx.entries) do
    why = check_entry(e, #idx.files)
    if why then
      error(fmt("%s: '%s': entry %d (%s) is malformed: %s", fname, path, i,
        type(e) == "table" and type(e.name) == "string" and ("'" .. e.name .. "'") or "unnamed", why), 3)
    end
  end
  return idx, path
end

-- Refuses a checkpoint whose files are not the set its index names: each must exist with the size
-- the index gives (a shard of another save, or a torn one, has another), and each file in
-- `to_read` (0-based shard numbers) and every aux file must match its crc32. Runs before anything
-- is loaded, so a refused load changes nothing.
local function verify_files(fname, dir, idx, to_read)
  local check = {}
  for r, e in ipairs(idx.files) do check[#check + 1] = {e = e, crc = to_read[r - 1], what = "the shard of rank " .. (r - 1)} end
  for _, e in ipairs(idx.aux_files or {}) do check[#check + 1] = {e = e, crc = true, what = "a file"} end
  for _, c in ipairs(check) do
    local path = dir .. "/" .. c.e.name
    local size, why = ms._file_size(path)
    if not size then
      error(fmt("%s: '%s' is missing (%s): the index names it as %s of save %s (the directory holds another "
        .. "save's files, or a file was removed)", fname, path, why, c.what, idx.save_id), 0)
    end
    if size ~= c.e.size then
      error(fmt("%s: '%s' has %s bytes, the index says %d: the file is torn or from another save", fname, path,
        tostring(size), c.e.size), 0)
    end
  end
  for _, c in ipairs(check) do
    local path = dir .. "/" .. c.e.name
    local crc = c.crc and ms._file_crc32(path)
    if crc and crc ~= c.e.crc32 then
      error(fmt("%s: '%s' fails its checksum (crc32 %08x, the index says %08x): the file is corrupt or from another "
        .. "save", fname, path, crc, c.e.crc32), 0)
    end
  end
end

-- The files (0-based) holding elements of the wanted ranges: {name =, offset =, numel =} each.
local function files_to_read(wanted, idx)
  local by_name = {}
  for _, e in ipairs(idx.entries) do by_name[e.name] = e end
  local out = {}
  for _, p in ipairs(wanted) do
    local e = by_name[p.name]
    for _, q in ipairs(e and p.numel > 0 and e.pieces or {}) do
      if q.offset < p.offset + p.numel and p.offset < q.offset + q.numel then out[q.file] = true end
    end
  end
  return out
end

-- The index's entries whose kind `keep` accepts, as load_pieces takes them (name -> {shape =,
-- dtype =, pieces = {{offset =, numel =, read =}}}), reading lazily from the shard files; and a
-- to-be-closed value that closes the files opened.
local function entries_of(idx, dir, keep)
  local open = {}
  local closer = setmetatable({}, {__close = function()
    for _, f in pairs(open) do f:close() end
  end})
  local function reader(file, key)
    local name = idx.files[file + 1].name -- checked: the expected name of a shard of this save
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
    if keep(e.kind) then
      local sources = {}
      for _, p in ipairs(e.pieces) do
        sources[#sources + 1] = {offset = p.offset, numel = p.numel, read = reader(p.file, p.key)}
      end
      entries[e.name] = {shape = e.shape, dtype = e.dtype, pieces = sources}
    end
  end
  return entries, closer
end

local function is_model_kind(kind) return kind == nil or kind == "param" or kind == "buffer" end

-- fsdp.load_sharded(model, dir [, {strict = true}]): loads a checkpoint from save_sharded (or the
-- model of one from save_checkpoint) into the model, whatever world size saved it and however both
-- are wrapped (or into a plain module). Each rank opens only the files holding the ranges it keeps
-- and reads only those. Names and shapes must match the model's (strict = false skips missing and
-- unexpected names); values take the model's dtype, as load_state_dict's copies do.
function M.load_sharded(model, dir, opts)
  local fname = "load_sharded"
  opts = options.check(fname, opts, { "strict" }, 2)
  local idx = read_index(fname, dir)
  verify_files(fname, dir, idx, files_to_read(held_pieces(model), idx))
  return M._load_model(fname, model, dir, idx, opts.strict ~= false)
end

-- The model part of a verified checkpoint into model (what load_sharded does after its checks).
function M._load_model(fname, model, dir, idx, strict)
  local entries, closer <close> = entries_of(idx, dir, is_model_kind)
  return load_pieces(fname, model, entries, strict, fmt("the checkpoint '%s'", dir))
end

M._internal = {write_pieces = write_pieces, read_index = read_index, verify_files = verify_files,
  files_to_read = files_to_read, entries_of = entries_of, is_dir = is_dir, INDEX = INDEX}

return M
