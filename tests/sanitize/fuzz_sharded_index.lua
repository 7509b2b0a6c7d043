-- fuzz_sharded_index.lua: mutation fuzzing of sharded checkpoints (fsdp.load_sharded), per
-- tests/sanitize's convention: MS_FUZZ_SEED (default 1), MS_FUZZ_CASES (default 2000).
--
-- The base checkpoint is made here, independently of save_sharded: a small model's parameters cut
-- into uneven pieces over 3 shard files (a tensor may have several pieces in one file, keyed
-- "name@offset"), written with ms.save, indexed and sealed by this file's own JSON writer. Each
-- case mutates a copy, then loads it into a fresh model:
--   raw      bytes of the index flipped, inserted, deleted or cut, not resealed
--   resealed the same, with index_crc32 recomputed (so the parser and the checks behind it run)
--   field    one field of the decoded index set to a boundary value (0, -1, 2^31, 2^53, 2^63-1, a
--            float, a string, a table, removed, +-1, another piece's), re-encoded, resealed
--   shard    bytes of a shard flipped, cut or appended, the index unchanged
--   shard+   the same with the index's size and crc32 updated and resealed
-- Every outcome must be a clean Lua error from load_sharded, or a load whose values an
-- independent assembly confirms: for raw and shard cases exactly the saved values; for the others,
-- each element one of the values the (mutated) index's pieces give it, read through ms.load.
local ms = require "moonshard"
local T = require "testing"
local fuzzing = require "fuzzing"
local nn = require "moonshard.nn"
local fsdp = require "moonshard.fsdp"

local SEED, CASES = fuzzing.settings(2000)
local fmt = string.format

local dir = os.tmpname() .. ".fuzz"
local work = dir .. "/case"
assert(os.execute(fmt("mkdir -p '%s' '%s'", dir, work)))

local read, write = T.read_file, T.write_file

local function make_model()
  ms.manual_seed(SEED)
  return nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3))
end
local saved = make_model():state_dict()
local NAMES = {}
for k in pairs(saved) do NAMES[#NAMES + 1] = k end
table.sort(NAMES)

-- ---- an independent JSON writer and the seal ---------------------------------------------------------

local function is_array(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n == #t
end

local function encode(v)
  local ty = type(v)
  if ty == "string" then
    return '"' .. v:gsub('[%c"\\]', function(c) return fmt("\\u%04x", c:byte()) end) .. '"'
  elseif ty == "number" then
    if math.type(v) == "integer" then return tostring(v) end
    if v ~= v or v == math.huge or v == -math.huge then return "1e999" end
    return fmt("%.17g", v)
  elseif ty == "boolean" then
    return tostring(v)
  elseif ty == "table" then
    local parts = {}
    if is_array(v) then
      for i = 1, #v do parts[i] = encode(v[i]) end
      return "[" .. table.concat(parts, ",") .. "]"
    end
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    -- index_crc32 first: where save_sharded puts it, and where the seal looks for it
    table.sort(keys, function(a, b) return (a == "index_crc32" and 0 or 1) < (b == "index_crc32" and 0 or 1) end)
    for _, k in ipairs(keys) do parts[#parts + 1] = encode(k) .. ":" .. encode(v[k]) end
    return "{" .. table.concat(parts, ",") .. "}"
  end
  return "null"
end

local CRC_FIELD = '"index_crc32":"(%x%x%x%x%x%x%x%x)"'
local function seal(text)
  local zeroed = text:gsub(CRC_FIELD, '"index_crc32":"00000000"', 1)
  return (zeroed:gsub(CRC_FIELD, fmt('"index_crc32":"%08x"', ms._crc32(zeroed)), 1))
end

-- ---- the base checkpoint -------------------------------------------------------------------------------

local ID, W = "1234abcd-00000000beef", 3
local function shard_name(r) return fmt("shard-%05d-of-%05d.%s.safetensors", r, W, ID) end

-- Each tensor's flat range cut at random points; piece k goes to file (k + i) % W, so every file
-- holds pieces of several tensors and some file two pieces of one tensor.
local function base_checkpoint()
  local tensors, entries = {{}, {}, {}}, {}
  for i, name in ipairs(NAMES) do
    local t = saved[name]:reshape(-1)
    local n = t:numel()
    local cuts = {0, n}
    for _ = 1, 3 do cuts[#cuts + 1] = math.random(1, n - 1) end
    table.sort(cuts)
    local pieces = {}
    for k = 1, #cuts - 1 do
      local a, b = cuts[k], cuts[k + 1]
      if b > a then
        local file = (k + i) % W
        local key = tensors[file + 1][name] and fmt("%s@%d", name, a) or name
        tensors[file + 1][key] = t:narrow(1, a + 1, b - a):clone()
        pieces[#pieces + 1] = {file = file, key = key, offset = a, numel = b - a}
      end
    end
    local shape = {}
    for d = 1, saved[name]:dim() do shape[d] = saved[name]:size(d) end
    entries[#entries + 1] = {name = name, kind = "param", dtype = "float32", shape = shape, pieces = pieces}
  end
  local files = {}
  for r = 0, W - 1 do
    local path = dir .. "/" .. shard_name(r)
    ms.save(tensors[r + 1], path, {nested = false, metadata = {save_id = ID}})
    local crc, size = ms._file_crc32(path)
    files[r + 1] = {name = shard_name(r), size = size, crc32 = crc}
  end
  return {format = "moonshard.fsdp.sharded", version = 2, index_crc32 = "00000000", save_id = ID, world_size = W,
    files = files, entries = entries}
end

local base_index = base_checkpoint()
local base_text = seal(encode(base_index))
local base_shards = {}
for r = 0, W - 1 do base_shards[r + 1] = read(dir .. "/" .. shard_name(r)) end

-- ---- outcomes ------------------------------------------------------------------------------------------

local function load_case()
  local m = make_model()
  do
    local _ <close> = ms.no_grad()
    for _, p in ipairs(m:parameters()) do p:zero_() end
  end
  local ok, err = pcall(fsdp.load_sharded, m, work)
  return ok, ok and m:state_dict() or err
end

local function bits(v) return v ~= v and "nan" or string.pack("<f", v) end

local function exactly_saved(sd)
  for _, name in ipairs(NAMES) do
    if not sd[name] or sd[name]:ne(saved[name]):sum():item() ~= 0 then return false, name end
  end
  return true
end

-- For each name, each element's candidate values (as bit strings) from the pieces of the index at
-- `work` that read cleanly through ms.load; nil where a piece cannot be read.
local function candidates()
  local idx = ms._json_decode(read(work .. "/index.json"))
  local shard_cache = {}
  local function shard(file)
    if shard_cache[file] == nil then
      local ok, t = pcall(ms.load, work .. "/" .. idx.files[file + 1].name, {nested = false})
      shard_cache[file] = ok and t or false
    end
    return shard_cache[file]
  end
  local out = {}
  for _, e in ipairs(idx.entries) do
    out[e.name] = out[e.name] or {}
    for _, p in ipairs(e.pieces) do
      local s = shard(p.file)
      local t = s and s[p.key]
      if t and t:numel() >= p.numel then
        local vals = t:reshape(-1):narrow(1, 1, p.numel):to("float32"):tolist()
        for j, v in ipairs(vals) do
          local c = out[e.name][p.offset + j - 1] or {}
          c[bits(v)] = true
          out[e.name][p.offset + j - 1] = c
        end
      end
    end
  end
  return out
end

local function confirmed_by_index(sd)
  local cand = candidates()
  for _, name in ipairs(NAMES) do
    local vals = sd[name]:reshape(-1):tolist()
    for j, v in ipairs(vals) do
      local c = cand[name] and cand[name][j - 1]
      if not c or not c[bits(v)] then return false, fmt("%s[%d] = %s", name, j - 1, tostring(v)) end
    end
  end
  return true
end

-- ---- mutations -----------------------------------------------------------------------------------------

local function mutate_bytes(s)
  local n = #s
  local op, at = math.random(4), math.random(1, math.max(n, 1))
  if op == 1 then return s:sub(1, at - 1) .. string.char(s:byte(at) ~ (1 << math.random(0, 7))) .. s:sub(at + 1) end
  if op == 2 then return s:sub(1, at - 1) .. string.char(math.random(0, 255)) .. s:sub(at) end
  if op == 3 then return s:sub(1, at - 1) .. s:sub(at + 1 + math.random(0, 7)) end
  return s:sub(1, at - 1)
end

local BOUNDARY = {0, -1, 1, 2, (1 << 31), (1 << 53), math.maxinteger, math.mininteger, 1.5, 0 / 0, "x", "", true, {},
  {1}}

-- A random field of the decoded index (a path of keys) and its parent.
local function pick_field(idx)
  local t, parent, key = idx, nil, nil
  for _ = 1, math.random(1, 6) do
    if type(t) ~= "table" then break end
    local keys = {}
    for k in pairs(t) do keys[#keys + 1] = k end
    if #keys == 0 then break end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    parent, key = t, keys[math.random(#keys)]
    t = t[key]
  end
  return parent, key
end

local function mutate_field(idx)
  local parent, key = pick_field(idx)
  if not parent then return end
  local old, r = parent[key], math.random(10)
  if r == 1 then
    parent[key] = nil
  elseif r <= 3 and math.type(old) == "integer" then
    parent[key] = old + (math.random(2) == 1 and 1 or -1)
  elseif r == 4 then -- another piece's value for the same field
    local e = idx.entries[math.random(#idx.entries)]
    local p = e and e.pieces and e.pieces[math.random(math.max(#e.pieces, 1))]
    parent[key] = type(p) == "table" and p[key] or old
  else
    parent[key] = BOUNDARY[math.random(#BOUNDARY)]
  end
end

local function setup(index_text, shards)
  write(work .. "/index.json", index_text)
  for r = 0, W - 1 do write(work .. "/" .. shard_name(r), shards[r + 1]) end
end

local deep_copy = fuzzing.deep_copy

-- One case: returns its kind and how the shards/index were made; `strict` when only the exact
-- saved values may be accepted.
local function make_case()
  local kind = ({"raw", "resealed", "field", "field", "shard", "shard+"})[math.random(6)]
  local shards = {table.unpack(base_shards)}
  local text = base_text
  if kind == "raw" then
    text = mutate_bytes(base_text)
  elseif kind == "resealed" then
    text = seal(mutate_bytes(base_text))
  elseif kind == "field" then
    local idx = deep_copy(base_index)
    mutate_field(idx)
    idx.index_crc32 = "00000000"
    text = seal(encode(idx))
  else
    local r = math.random(W)
    shards[r] = mutate_bytes(shards[r])
    if kind == "shard+" then
      local idx = deep_copy(base_index)
      idx.files[r].size = #shards[r]
      idx.files[r].crc32 = ms._crc32(shards[r])
      text = seal(encode(idx))
    end
  end
  setup(text, shards)
  return kind, kind == "raw" or kind == "shard"
end

-- ---- the run -------------------------------------------------------------------------------------------

setup(base_text, base_shards)
local ok0, sd0 = load_case()
assert(ok0 and exactly_saved(sd0), "the base checkpoint loads exactly: " .. tostring(sd0))

local counts = {cases = 0, clean = 0, accepted = 0, crashes = 0, wrong = 0}
local by_kind = {}
for c = 1, CASES do
  local kind, strict = make_case()
  local ok, res = load_case()
  counts.cases = counts.cases + 1
  by_kind[kind] = (by_kind[kind] or 0) + 1
  if not ok then
    if type(res) ~= "string" or not res:find("load_sharded", 1, true) and not res:find("safetensors", 1, true)
        or res:find("attempt to ", 1, true) then
      counts.crashes = counts.crashes + 1
      print(fmt("case %d (%s): unclean error: %s", c, kind, tostring(res)))
    else
      counts.clean = counts.clean + 1
    end
  else
    counts.accepted = counts.accepted + 1
    local good, why
    if strict then good, why = exactly_saved(res) else good, why = confirmed_by_index(res) end
    if not good then
      counts.wrong = counts.wrong + 1
      print(fmt("case %d (%s): accepted with values the checkpoint does not hold: %s", c, kind, tostring(why)))
      write(fmt("%s.wrong%d.json", dir, c), read(work .. "/index.json"))
    end
  end
end

local kinds = {}
for k, n in pairs(by_kind) do kinds[#kinds + 1] = fmt("%s %d", k, n) end
table.sort(kinds)
print(fmt("fuzz_sharded_index: %d cases (%s), %d clean errors, %d accepted, %d crashes, %d wrong", counts.cases,
  table.concat(kinds, ", "), counts.clean, counts.accepted, counts.crashes, counts.wrong))
os.execute(fmt("rm -rf '%s'", dir))
local failed = counts.crashes + counts.wrong
print(fmt("%d passed, %d failed", counts.cases - failed, failed))
os.exit(failed == 0 and 0 or 1)
