-- fuzz_idx.lua: mutation fuzzing of ms.read_idx on raw and gzip files. Valid IDX files (1-4
-- dims, unsigned bytes and the other IDX types, which moonshard refuses) are written here, raw
-- and gzip-compressed by a small gzip writer below (stored deflate blocks, optional header
-- fields, one or two members), then mutated deterministically from MS_FUZZ_SEED: bit flips,
-- bytes set to interesting values, truncation, extension and trailing garbage, the type, the
-- dimension count and the sizes, the gzip header, CRC and length, splices from other files.
-- Every outcome is checked against an independent reader written here (string.unpack, its own
-- CRC-32 and gunzip of stored blocks): a file it rejects must raise a clean Lua error, a file it
-- accepts must load, with the same shape and bytes. Prints a summary and "N passed, 0 failed";
-- exits non-zero on any wrong outcome. MS_FUZZ_CASES sets the number of cases.
local ms = require "moonshard"
local T = require "testing"
local fuzzing = require "fuzzing"

local SEED, CASES = fuzzing.settings(5000)
local R = math.random

local tmp = os.tmpname()
local path, repath = tmp .. ".idx", tmp .. ".safetensors"

---------------------------------------------------------------------------------------------------
-- gzip: CRC-32, a writer of stored blocks and a reader of them (RFC 1952, RFC 1951 section 3.2.4)
---------------------------------------------------------------------------------------------------

local CRC = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do c = (c & 1 ~= 0) and (0xEDB88320 ~ (c >> 1)) or (c >> 1) end
  CRC[i] = c
end

local function crc32(s, crc)
  crc = (crc or 0) ~ 0xFFFFFFFF
  for i = 1, #s do crc = CRC[(crc ~ s:byte(i)) & 0xFF] ~ (crc >> 8) end
  return crc ~ 0xFFFFFFFF
end

local FTEXT, FHCRC, FEXTRA, FNAME, FCOMMENT = 1, 2, 4, 8, 16

local function gzip_member(data, flags)
  flags = flags or 0
  local h = string.pack("<BBBBI4BB", 0x1f, 0x8b, 8, flags, R(0, 0x7fffffff), 0, 255)
  if flags & FEXTRA ~= 0 then h = h .. string.pack("<s2", "ab") end
  if flags & FNAME ~= 0 then h = h .. "train-images-idx3-ubyte\0" end
  if flags & FCOMMENT ~= 0 then h = h .. "made by fuzz_idx\0" end
  if flags & FHCRC ~= 0 then h = h .. string.pack("<I2", crc32(h) & 0xFFFF) end
  local blocks, at = {}, 1
  repeat -- stored blocks of random lengths
    local n = math.min(#data - at + 1, R(1, 64) == 1 and 0 or R(1, 4096))
    local final = at + n > #data and 1 or 0
    blocks[#blocks + 1] = string.pack("<BI2I2", final, n, n ~ 0xFFFF) .. data:sub(at, at + n - 1)
    at = at + n
  until final == 1
  return h .. table.concat(blocks) .. string.pack("<I4I4", crc32(data), #data & 0xFFFFFFFF)
end

-- The data of every member, or nil and why; stored blocks only (the writer makes no other).
local function gunzip(s)
  local pos, out = 1, {}
  local function need(n) if pos + n - 1 > #s then error("truncated", 0) end end
  local function member()
    local start = pos
    need(10)
    local id1, id2, cm, flg = s:byte(pos, pos + 3)
    if id1 ~= 0x1f or id2 ~= 0x8b or cm ~= 8 or flg & 0xE0 ~= 0 then error("bad header", 0) end
    pos = pos + 10
    if flg & FEXTRA ~= 0 then
      need(2)
      pos = pos + 2 + string.unpack("<I2", s, pos)
    end
    for _, f in ipairs({FNAME, FCOMMENT}) do
      if flg & f ~= 0 then
        local z = s:find("\0", pos, true)
        if not z then error("truncated", 0) end
        pos = z + 1
      end
    end
    if flg & FHCRC ~= 0 then
      need(2)
      if string.unpack("<I2", s, pos) ~= crc32(s:sub(start, pos - 1)) & 0xFFFF then error("header crc", 0) end
      pos = pos + 2
    end
    local data = {}
    repeat
      need(1)
      local b = s:byte(pos)
      if (b >> 1) & 3 ~= 0 then error("not a stored block", 0) end
      need(5)
      local n, nn = string.unpack("<I2I2", s, pos + 1)
      if n ~ 0xFFFF ~= nn then error("bad stored length", 0) end
      pos = pos + 5
      need(n)
      data[#data + 1] = s:sub(pos, pos + n - 1)
      pos = pos + n
    until b & 1 == 1
    data = table.concat(data)
    need(8)
    local crc, size = string.unpack("<I4I4", s, pos)
    if crc ~= crc32(data) or size ~= #data & 0xFFFFFFFF then error("trailer", 0) end
    pos = pos + 8
    out[#out + 1] = data
  end
  local ok, why = pcall(function()
    repeat member() until pos > #s or s:sub(pos, pos + 1) ~= "\x1f\x8b"
    if pos <= #s then error("bytes after the stream", 0) end
  end)
  if not ok then return nil, why end
  return table.concat(out)
end

---------------------------------------------------------------------------------------------------
-- The independent IDX reader: magic 00 00 type ndim, ndim big-endian 32-bit sizes, the data.
-- moonshard reads unsigned bytes (type 0x08) with 1 to 8 dims, every size at least 1, and
-- refuses a gzip file whose header declares more than 1100 times its size (deflate's limit).
---------------------------------------------------------------------------------------------------

local function independent_read(file)
  if #file == 0 then return nil, "empty" end
  local d = file
  local gz = file:sub(1, 2) == "\x1f\x8b"
  if gz then
    local why
    d, why = gunzip(file)
    if not d then return nil, "gzip: " .. why end
  end
  if #d < 4 then return nil, "no magic" end
  local z0, z1, typ, ndim = d:byte(1, 4)
  if z0 ~= 0 or z1 ~= 0 or typ ~= 0x08 or ndim < 1 or ndim > 8 then return nil, "magic" end
  if #d < 4 + 4 * ndim then return nil, "sizes" end
  local shape, bytes = {}, 1
  for i = 1, ndim do
    shape[i] = string.unpack(">I4", d, 1 + 4 * i)
    if shape[i] == 0 then return nil, "zero size" end
    if bytes > math.maxinteger // shape[i] then return nil, "too large" end
    bytes = bytes * shape[i]
  end
  if gz and bytes // 1100 > #file then return nil, "ratio" end
  local header = 4 + 4 * ndim
  if #d - header ~= bytes then return nil, "data length" end
  return {shape = shape, bytes = d:sub(header + 1)}
end

---------------------------------------------------------------------------------------------------
-- Valid files and mutations
---------------------------------------------------------------------------------------------------

local function random_bytes(n)
  local t = {}
  for i = 1, n do t[i] = string.char(R(0, 255)) end
  return table.concat(t)
end

local ELEMENT = {[0x08] = 1, [0x09] = 1, [0x0B] = 2, [0x0C] = 4, [0x0D] = 4, [0x0E] = 8}
local TYPES = {0x08, 0x08, 0x08, 0x08, 0x09, 0x0B, 0x0C, 0x0D, 0x0E}

local function make_idx()
  local typ, ndim = TYPES[R(#TYPES)], R(1, 10) == 1 and 4 or R(1, 3)
  local sizes, n = {}, ELEMENT[typ]
  for i = 1, ndim do
    sizes[i] = R(1, i == 1 and 40 or 6)
    n = n * sizes[i]
  end
  local parts = {string.pack(">BBBB", 0, 0, typ, ndim)}
  for i = 1, ndim do parts[#parts + 1] = string.pack(">I4", sizes[i]) end
  parts[#parts + 1] = random_bytes(n)
  return table.concat(parts)
end

local function gzip(data)
  local flags = 0
  for _, f in ipairs({FTEXT, FHCRC, FEXTRA, FNAME, FCOMMENT}) do
    if R(4) == 1 then flags = flags | f end
  end
  if R(5) == 1 then -- two members, the data split between them
    local cut = R(0, #data)
    return gzip_member(data:sub(1, cut), flags) .. gzip_member(data:sub(cut + 1))
  end
  return gzip_member(data, flags)
end

local raw_bases, gz_bases = {}, {}
for i = 1, 16 do
  raw_bases[i] = make_idx()
  gz_bases[i] = gzip(raw_bases[i])
end

local function replace(s, i, j, with) return s:sub(1, i - 1) .. with .. s:sub(j + 1) end

local BYTES = {0, 1, 2, 3, 4, 7, 8, 9, 0x0B, 0x0D, 0x7f, 0x80, 0xfe, 0xff, 0x1f, 0x8b}

-- Edits of the IDX itself (before gzip, for compressed cases).
local idx_mutations = {
  function(d) return replace(d, 3, 3, string.char(TYPES[R(#TYPES)])) end, -- type
  function(d) return replace(d, 4, 4, string.char(({0, 1, 2, 3, 4, 8, 9, 255})[R(8)])) end, -- dimension count
  function(d) -- one size
    local ndim = d:byte(4) or 0
    if ndim < 1 or #d < 4 + 4 * ndim then return d end
    local i = R(ndim)
    local v = string.unpack(">I4", d, 1 + 4 * i)
    local values = {0, 1, v + 1, v - 1, v * 2, 0x7fffffff, 0x80000000, 0xffffffff, 65536}
    return replace(d, 1 + 4 * i, 4 + 4 * i, string.pack(">I4", values[R(#values)] & 0xffffffff))
  end,
  function(d) return d .. random_bytes(R(1, 8)) end, -- data longer
  function(d) return d:sub(1, #d - R(1, 8)) end, -- data shorter
}

local function splice(s, others)
  local other = others[R(#others)]
  local i, j = R(#other), R(#other)
  if i > j then i, j = j, i end
  local at = R(#s + 1)
  return s:sub(1, at - 1) .. other:sub(i, j) .. s:sub(at + (R(2) == 1 and (j - i + 1) or 0))
end

-- Edits of the file's bytes: anywhere, or aimed at the gzip header and trailer.
local byte_mutations = {
  function(s) -- a bit flipped
    local i = R(#s)
    return replace(s, i, i, string.char(s:byte(i) ~ (1 << R(0, 7))))
  end,
  function(s) -- a byte set to an interesting value
    local i = R(3) == 1 and R(math.min(#s, 20)) or R(#s)
    return replace(s, i, i, string.char(BYTES[R(#BYTES)]))
  end,
  function(s) return s:sub(1, R(0, #s - 1)) end, -- truncated
  function(s) -- trailing bytes: zeros, garbage, a lone 0x1f, the gzip magic, a whole member
    local tails = {("\0"):rep(R(1, 8)), random_bytes(R(1, 8)), "\x1f", "\x1f\x8b", gzip_member(""),
                   gzip_member(random_bytes(R(1, 4)))}
    return s .. tails[R(#tails)]
  end,
  function(s) -- the gzip trailer: CRC-32 or length
    if #s < 8 then return s end
    local i = #s - R(0, 7)
    return replace(s, i, i, string.char(s:byte(i) ~ (1 << R(0, 7))))
  end,
  function(s) -- the gzip header's flags, method, or a stored block's length
    local i = ({3, 4, 4, 11, 12, 14})[R(6)]
    if i > #s then return s end
    return replace(s, i, i, string.char(BYTES[R(#BYTES)]))
  end,
}

local function mutated_case()
  local gz = R(2) == 1
  local d = raw_bases[R(#raw_bases)]
  local mode = R(3) -- 1: the IDX only, 2: the bytes only, 3: both
  if mode ~= 2 then
    for _ = 1, R(1, 2) do d = idx_mutations[R(#idx_mutations)](d) end
  end
  local s = gz and gzip(d) or d
  if mode ~= 1 then
    for _ = 1, R(1, 2) do
      if #s == 0 then break end
      if R(8) == 1 then s = splice(s, gz and gz_bases or raw_bases) else s = byte_mutations[R(#byte_mutations)](s) end
    end
  end
  return s, gz
end

---------------------------------------------------------------------------------------------------
-- The run
---------------------------------------------------------------------------------------------------

local write, read = T.write_file, T.read_file

-- The tensor's bytes, through ms.save: a one-tensor uint8 file's data section is its bytes.
local function tensor_bytes(t)
  ms.save({x = t}, repath)
  local s = read(repath)
  return s:sub(9 + string.unpack("<I8", s))
end

local function compare(t, want)
  if t.dtype ~= "uint8" then return "dtype " .. tostring(t.dtype) end
  if #t.shape ~= #want.shape then return ("%d dims, want %d"):format(#t.shape, #want.shape) end
  for i = 1, #want.shape do
    if t.shape[i] ~= want.shape[i] then return ("size %d is %d, want %d"):format(i, t.shape[i], want.shape[i]) end
  end
  if tensor_bytes(t) ~= want.bytes then return "different bytes" end
end

local counts = {cases = 0, clean = 0, accepted = 0, wrong = 0, gz = 0}
local function wrong(i, why, s)
  counts.wrong = counts.wrong + 1
  if counts.wrong <= 10 then
    io.stderr:write(("case %d (seed %d): %s\n  file (%d bytes): %q\n"):format(i, SEED, why, #s, s:sub(1, 120)))
  end
end

local t0 = os.clock()
local n_bases = 2 * #raw_bases
for i = 1, CASES do
  local s, gz
  if i <= n_bases then
    gz = i > #raw_bases
    s = gz and gz_bases[i - #raw_bases] or raw_bases[i]
  else
    s, gz = mutated_case()
  end
  write(path, s)
  counts.cases = counts.cases + 1
  counts.gz = counts.gz + (gz and 1 or 0)
  local want, why = independent_read(s)
  local ok, t = pcall(ms.read_idx, path)
  local verdict, why_wrong = fuzzing.judge("read_idx", ok, t, want, why, function() return compare(t, want) end)
  if verdict then counts[verdict] = counts[verdict] + 1 else wrong(i, why_wrong, s) end
end
os.remove(path)
os.remove(repath)
os.remove(tmp)

print(("fuzz_idx: %d cases (%d gzip), %d clean errors, %d accepted, 0 crashes, %d wrong (seed %d, %.1f s)"):format(
  counts.cases, counts.gz, counts.clean, counts.accepted, counts.wrong, SEED, os.clock() - t0))
print(("%d passed, %d failed"):format(counts.cases - counts.wrong, counts.wrong))
if counts.wrong > 0 then os.exit(1) end
