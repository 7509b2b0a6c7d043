-- fuzz_safetensors.lua: mutation fuzzing of ms.load (the safetensors reader). Valid files are
-- written here (every dtype, 0-3 dims, empty tensors, metadata, escapes and unknown fields,
-- tensors listed out of offset order), then mutated deterministically from MS_FUZZ_SEED: bit
-- flips, bytes set to interesting values, truncation, extension, the header length field,
-- numbers, duplicated keys and fields, semantic edits of dtypes, shapes and offsets, splices
-- from other files. Every outcome is checked against an independent reader written below with
-- string.unpack: a file it rejects must raise a clean Lua error, a file it accepts must load,
-- and what loads must match it byte for byte (the tensors go back through ms.save to get their
-- bytes). Prints a summary and "N passed, 0 failed"; exits non-zero on any wrong outcome.
-- MS_FUZZ_CASES sets the number of cases (default sized for an ASan+UBSan build).
local ms = require "moonshard"
local T = require "testing"
local fuzzing = require "fuzzing"

local SEED, CASES = fuzzing.settings(5000)
local R = math.random

local tmp = os.tmpname()
local path, repath = tmp .. ".safetensors", tmp .. ".resaved.safetensors"

---------------------------------------------------------------------------------------------------
-- The independent reader: the format as specified (and moonshard's documented limits), written
-- without looking at the C code paths: strict JSON (RFC 8259, UTF-8 checked with utf8.len),
-- then the safetensors rules. Returns {tensors = {name -> {dtype, shape, bytes}}, meta = {}} or
-- nil and a reason.
---------------------------------------------------------------------------------------------------

local SIZE = {F32 = 4, F64 = 8, BF16 = 2, F16 = 2, I64 = 8, I32 = 4, U8 = 1, BOOL = 1}
local MAX_DEPTH, MAX_HEADER, MAX_DIMS = 64, 100000000, 8

local function json_decode(s)
  local pos, depth = 1, 0
  local function fail(why) error({why = why .. " at " .. pos}, 0) end
  local function ws() pos = s:find("[^ \t\r\n]", pos) or #s + 1 end
  local value
  local function str()
    pos = pos + 1 -- the quote
    local out = {}
    while true do
      local stop = s:find('[%z\1-\31"\\]', pos)
      if not stop then fail("unterminated string") end
      local raw = s:sub(pos, stop - 1)
      if not utf8.len(raw) then fail("bad UTF-8") end
      out[#out + 1] = raw
      pos = stop
      local c = s:sub(pos, pos)
      if c == '"' then pos = pos + 1; return table.concat(out) end
      if c ~= "\\" then fail("control character") end
      local e = s:sub(pos + 1, pos + 1)
      local simple = ({['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t"})[e]
      if simple then
        out[#out + 1] = simple
        pos = pos + 2
      elseif e == "u" then
        local function hex(at)
          local h = s:sub(at, at + 3)
          if not h:match("^%x%x%x%x$") then fail("bad \\u") end
          return tonumber(h, 16)
        end
        local cp = hex(pos + 2)
        pos = pos + 6
        if cp >= 0xDC00 and cp <= 0xDFFF then fail("lone low surrogate") end
        if cp >= 0xD800 and cp <= 0xDBFF then
          if s:sub(pos, pos + 1) ~= "\\u" then fail("lone high surrogate") end
          local lo = hex(pos + 2)
          if lo < 0xDC00 or lo > 0xDFFF then fail("lone high surrogate") end
          pos = pos + 6
          cp = 0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00)
        end
        if cp == 0 then fail("\\u0000 (moonshard refuses NUL in strings)") end
        out[#out + 1] = utf8.char(cp)
      else
        fail("bad escape")
      end
    end
  end
  local function num()
    local start = pos
    local int = s:match("^-?0", pos) or s:match("^-?[1-9]%d*", pos)
    if not int then fail("bad number") end
    pos = pos + #int
    local frac = s:match("^%.%d+", pos)
    if s:sub(pos, pos) == "." and not frac then fail("bad fraction") end
    pos = pos + (frac and #frac or 0)
    local exp = s:match("^[eE][+-]?%d+", pos)
    if s:find("^[eE]", pos) and not exp then fail("bad exponent") end
    pos = pos + (exp and #exp or 0)
    return {t = "num", text = s:sub(start, pos - 1), uint = not frac and not exp and int:sub(1, 1) ~= "-"}
  end
  local function container(open)
    depth = depth + 1
    if depth > MAX_DEPTH then fail("too deep") end
    local close = open == "{" and "}" or "]"
    local v = open == "{" and {t = "obj", keys = {}, vals = {}} or {t = "arr", items = {}}
    pos = pos + 1
    ws()
    if s:sub(pos, pos) == close then
      pos = pos + 1
      depth = depth - 1
      return v
    end
    while true do
      ws()
      if open == "{" then
        if s:sub(pos, pos) ~= '"' then fail("expected a key") end
        v.keys[#v.keys + 1] = str()
        ws()
        if s:sub(pos, pos) ~= ":" then fail("expected ':'") end
        pos = pos + 1
        v.vals[#v.vals + 1] = value()
      else
        v.items[#v.items + 1] = value()
      end
      ws()
      local c = s:sub(pos, pos)
      pos = pos + 1
      if c == close then
        depth = depth - 1
        return v
      end
      if c ~= "," then fail("expected ',' or " .. close) end
    end
  end
  function value()
    ws()
    local c = s:sub(pos, pos)
    if c == "{" or c == "[" then return container(c) end
    if c == '"' then return {t = "str", v = str()} end
    for word, t in pairs({["true"] = "bool", ["false"] = "bool", ["null"] = "null"}) do
      if s:sub(pos, pos + #word - 1) == word then
        pos = pos + #word
        return {t = t}
      end
    end
    if c == "-" or c:match("%d") then return num() end
    fail("unexpected character")
  end
  local v = value()
  ws()
  if pos <= #s then fail("text after the value") end
  return v
end

-- A JSON number as a non-negative integer up to 2^63-1, or nil.
local function uint(v)
  if v.t ~= "num" or not v.uint then return nil end
  local d = v.text
  if #d > 19 or (#d == 19 and d > "9223372036854775807") then return nil end
  return math.tointeger(tonumber(d))
end

-- Whether a * x overflows 64 unsigned bits (a taken as unsigned, 0 <= x < 2^63).
local function mul_overflows(a, x)
  local ah, al, xh, xl = a >> 32, a & 0xffffffff, x >> 32, x & 0xffffffff
  if ah ~= 0 and xh ~= 0 then return true end
  local mid = ah * xl + al * xh
  if mid >> 32 ~= 0 then return true end
  local low = al * xl
  return math.ult((mid << 32) + low, low)
end

local function check_tensor(name, v, data_len)
  if v.t ~= "obj" then return nil, name .. ": not an object" end
  local f = {}
  for i, k in ipairs(v.keys) do
    if k == "dtype" or k == "shape" or k == "data_offsets" then
      if f[k] then return nil, name .. ": field twice" end
      f[k] = v.vals[i]
    end
  end
  local dt, sh, off = f.dtype, f.shape, f.data_offsets
  if not dt or dt.t ~= "str" or not SIZE[dt.v] then return nil, name .. ": dtype" end
  if not sh or sh.t ~= "arr" or #sh.items > MAX_DIMS then return nil, name .. ": shape" end
  if not off or off.t ~= "arr" or #off.items ~= 2 then return nil, name .. ": offsets" end
  local shape, bytes = {}, SIZE[dt.v]
  for i, item in ipairs(sh.items) do
    shape[i] = uint(item)
    if not shape[i] then return nil, name .. ": shape entry" end
  end
  local b, e = uint(off.items[1]), uint(off.items[2])
  if not b or not e or e < b or e > data_len then return nil, name .. ": offsets range" end
  local span = bytes -- moonshard's limit: the sizes, zeros as 1, times the element size fit in int64
  for _, x in ipairs(shape) do
    if x ~= 0 and mul_overflows(bytes, x) then return nil, name .. ": shape too large" end
    bytes = bytes * x
    if span > math.maxinteger // math.max(x, 1) then return nil, name .. ": sizes multiply past 2^63" end
    span = span * math.max(x, 1)
  end
  if bytes ~= e - b then return nil, name .. ": size" end
  return {name = name, dtype = dt.v, shape = shape, b = b, e = e}
end

local function independent_read(file)
  if #file < 8 then return nil, "short" end
  local n = string.unpack("<i8", file)
  if n < 0 or n > MAX_HEADER or n > #file - 8 then return nil, "header length" end
  local header, data = file:sub(9, 8 + n), file:sub(9 + n)
  if header:sub(1, 1) ~= "{" then return nil, "no '{'" end
  local ok, root = pcall(json_decode, header)
  if not ok then return nil, "json: " .. tostring(root.why or root) end
  local list, meta, names = {}, nil, {}
  for i, k in ipairs(root.keys) do
    local v = root.vals[i]
    if k == "__metadata__" then
      if meta then return nil, "metadata twice" end
      if v.t ~= "obj" then return nil, "metadata not an object" end
      meta = {}
      for j, mk in ipairs(v.keys) do
        if v.vals[j].t ~= "str" or meta[mk] then return nil, "metadata entry" end
        meta[mk] = v.vals[j].v
      end
    else
      if names[k] then return nil, "name twice" end
      names[k] = true
      local t, why = check_tensor(k, v, #data)
      if not t then return nil, why end
      list[#list + 1] = t
    end
  end
  table.sort(list, function(x, y) return x.b < y.b or (x.b == y.b and x.e < y.e) end)
  local at, tensors = 0, {}
  for _, t in ipairs(list) do
    if t.b ~= at then return nil, "tiling" end
    at = t.e
    t.bytes = data:sub(t.b + 1, t.e)
    if t.dtype == "BOOL" and t.bytes:find("[^\0\1]") then return nil, "bool value" end
    tensors[t.name] = t
  end
  if at ~= #data then return nil, "trailing data" end
  return {tensors = tensors, meta = meta or {}}
end

---------------------------------------------------------------------------------------------------
-- Valid files, as ordered lists of (key, JSON text) pairs so that mutations can repeat keys.
---------------------------------------------------------------------------------------------------

local DTYPES = {"F32", "F64", "BF16", "F16", "I64", "I32", "U8", "BOOL"}
local NAMES = {"w", "b", "layer.0.weight", "", "é", "\u{1F600}x", "a\"q", "tab\there", "__meta", "x/y", "0"}

local function quote(s, fancy)
  local body = s:gsub('[%z\1-\31"\\]', function(c)
    local short = ({['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\t"] = "\\t"})[c]
    return short or ("\\u%04x"):format(c:byte())
  end)
  if fancy then body = body:gsub("[a-z]", function(c) return R(4) == 1 and ("\\u%04X"):format(c:byte()) or c end) end
  return '"' .. body .. '"'
end

local function serialize(pairs_, sep)
  local parts = {}
  for i, p in ipairs(pairs_) do
    local v = type(p[2]) == "table" and serialize(p[2], sep) or p[2]
    parts[i] = quote(p[1], p.fancy) .. ":" .. sep .. v
  end
  return "{" .. table.concat(parts, "," .. sep) .. "}"
end

local function random_bytes(n, dtype)
  local t = {}
  for i = 1, n do t[i] = string.char(dtype == "BOOL" and R(0, 1) or R(0, 255)) end
  return table.concat(t)
end

-- A model: {entries = list of {key, value}, data = string}; values are JSON text or field lists.
local function make_model()
  local entries, chunks, at = {}, {}, 0
  local used = {}
  for _ = 1, R(0, 5) do
    local name = NAMES[R(#NAMES)] .. (R(2) == 1 and tostring(R(0, 9)) or "")
    if not used[name] then
      used[name] = true
      local dtype, shape, numel = DTYPES[R(#DTYPES)], {}, 1
      for d = 1, R(0, 3) do
        shape[d] = R(0, 4) == 0 and 0 or R(1, 4)
        numel = numel * shape[d]
      end
      local bytes = random_bytes(numel * SIZE[dtype], dtype)
      local fields = {{"dtype", quote(dtype)}, {"shape", "[" .. table.concat(shape, ",") .. "]"},
                      {"data_offsets", ("[%d,%d]"):format(at, at + #bytes)}}
      if R(4) == 1 then table.insert(fields, R(1, 4), {"extra", R(2) == 1 and '{"x":[null,true,-1.5e3]}' or '"z"'}) end
      if R(3) == 1 then fields[1], fields[3] = fields[3], fields[1] end
      entries[#entries + 1] = {name, fields, fancy = R(5) == 1}
      chunks[#chunks + 1] = bytes
      at = at + #bytes
    end
  end
  if R(2) == 1 then -- metadata, anywhere in the header
    local meta = {}
    for i = 1, R(0, 3) do meta[i] = {({"epoch", "format", "note", "k\u{e9}"})[i], quote(({"3", "pt", "a\nb", "\u{1F600}"})[R(4)])} end
    table.insert(entries, R(1, #entries + 1), {"__metadata__", meta})
  end
  if R(3) == 1 and #entries > 1 then -- list tensors out of offset order
    local i, j = R(#entries), R(#entries)
    entries[i], entries[j] = entries[j], entries[i]
  end
  return {entries = entries, data = table.concat(chunks), sep = R(4) == 1 and " \n" or ""}
end

local function file_of(model)
  local header = serialize(model.entries, model.sep)
  while R(3) == 1 and #header % 8 ~= 0 do header = header .. " " end
  return string.pack("<I8", #header) .. header .. model.data, #header
end

local deep_copy = fuzzing.deep_copy

---------------------------------------------------------------------------------------------------
-- Mutations: of the model (keys, fields, values) and of the file's bytes.
---------------------------------------------------------------------------------------------------

local NUMBERS = {"0", "1", "2", "3", "4", "7", "8", "-1", "-0", "255", "65536", "4294967296", "4611686018427387904",
                 "9223372036854775807", "9223372036854775808", "18446744073709551615", "18446744073709551616",
                 "1e3", "1.0", "00", "1e", "99999999999999999999999"}
local BYTES = {0, 1, 0x7f, 0x80, 0xff, 0x22, 0x7b, 0x7d, 0x5b, 0x5d, 0x2c, 0x3a, 0x30, 0x39, 0x2d, 0x5c, 0x20, 0xc3,
               0xed, 0xf4, 0x0a}

local function a_tensor(model)
  local ts = {}
  for _, e in ipairs(model.entries) do
    if e[1] ~= "__metadata__" then ts[#ts + 1] = e end
  end
  return ts[R(math.max(#ts, 1))]
end

local model_mutations = {
  function(m) -- a tensor repeated (same name)
    local e = a_tensor(m)
    if e then table.insert(m.entries, R(1, #m.entries + 1), deep_copy(e)) end
  end,
  function(m) -- a field repeated in an entry
    local e = a_tensor(m)
    if e then table.insert(e[2], R(1, #e[2] + 1), deep_copy(e[2][R(#e[2])])) end
  end,
  function(m) -- a metadata key repeated, or a second __metadata__
    for _, e in ipairs(m.entries) do
      if e[1] == "__metadata__" and #e[2] > 0 and R(2) == 1 then
        table.insert(e[2], deep_copy(e[2][R(#e[2])]))
        return
      end
    end
    table.insert(m.entries, {"__metadata__", {{"k", R(2) == 1 and '"v"' or "1"}}})
  end,
  function(m) -- a field's value replaced
    local e = a_tensor(m)
    if not e then return end
    local f = e[2][R(#e[2])]
    local values = {'"F32"', '"U8"', '"BOOL"', '"I8"', '"f32"', "[]", "[1]", "[2,2]", "[0,0]", "[1,2,3,4,5,6,7,8,9]",
                    "[" .. NUMBERS[R(#NUMBERS)] .. "]", "[0," .. NUMBERS[R(#NUMBERS)] .. "]", "null", "{}", "7"}
    f[2] = values[R(#values)]
  end,
  function(m) -- a field dropped or renamed
    local e = a_tensor(m)
    if not e then return end
    local i = R(#e[2])
    if R(2) == 1 then table.remove(e[2], i) else e[2][i][1] = ({"dtype", "shape", "data_offsets", "Dtype", ""})[R(5)] end
  end,
  function(m) -- a tensor renamed (maybe onto another, or onto __metadata__)
    local e = a_tensor(m)
    if e then e[1] = R(3) == 1 and "__metadata__" or NAMES[R(#NAMES)] end
  end,
  function(m) -- the data changed: a byte, a byte more, a byte less
    local d = m.data
    local k = R(3)
    if k == 1 and #d > 0 then
      local i = R(#d)
      m.data = d:sub(1, i - 1) .. string.char(({0, 1, 2, 0xff, R(0, 255)})[R(5)]) .. d:sub(i + 1)
    elseif k == 2 then m.data = d .. "\0"
    else m.data = d:sub(1, -2) end
  end,
  function(m) -- two tensors' offsets swapped
    local a, b = a_tensor(m), a_tensor(m)
    if not a or not b then return end
    local function off(e) for _, f in ipairs(e[2]) do if f[1] == "data_offsets" then return f end end end
    local fa, fb = off(a), off(b)
    if fa and fb then fa[2], fb[2] = fb[2], fa[2] end
  end,
  function(m) -- an unknown field nested deep
    local e = a_tensor(m)
    if e then table.insert(e[2], {"deep", ("["):rep(R(60, 70)) .. ("]"):rep(R(60, 70))}) end
  end,
}

local function replace(s, i, j, with) return s:sub(1, i - 1) .. with .. s:sub(j + 1) end

-- Byte mutations get the file and its header length; they return the new file.
local byte_mutations = {
  function(s, hl) -- one bit flipped, mostly in the header
    local i = R(3) > 1 and R(9, 8 + math.max(hl, 1)) or R(#s)
    if i > #s then return s end
    return replace(s, i, i, string.char(s:byte(i) ~ (1 << R(0, 7))))
  end,
  function(s, hl) -- a byte set to an interesting value
    local i = R(3) > 1 and R(9, 8 + math.max(hl, 1)) or R(#s)
    if i > #s then return s end
    return replace(s, i, i, string.char(BYTES[R(#BYTES)]))
  end,
  function(s) return s:sub(1, R(0, #s - 1)) end, -- truncated
  function(s) -- extended
    return s .. (R(2) == 1 and ("\0"):rep(R(1, 16)) or random_bytes(R(1, 16)))
  end,
  function(s, hl) -- the header length field
    local n = ({hl + 1, hl - 1, hl + 8, hl - 8, 0, #s, #s - 8, 1 << 32, 100000001, -1, R(0, #s)})[R(11)]
    return string.pack("<i8", n) .. s:sub(9)
  end,
  function(s, hl) -- a number in the header replaced (the length field follows)
    local header = s:sub(9, 8 + hl)
    local spans = {}
    for i, j in header:gmatch("()%d+()") do spans[#spans + 1] = {i, j - 1} end
    if #spans == 0 then return s end
    local sp = spans[R(#spans)]
    header = replace(header, sp[1], sp[2], NUMBERS[R(#NUMBERS)])
    return string.pack("<I8", #header) .. header .. s:sub(9 + hl)
  end,
  function(s, hl) -- a range deleted from the header (length fixed or not)
    local i = R(9, 8 + math.max(hl, 1))
    local j = math.min(i + R(0, 8), #s)
    local out = replace(s, i, j, "")
    if R(2) == 1 then out = string.pack("<I8", math.max(hl - (j - i + 1), 0)) .. out:sub(9) end
    return out
  end,
}

local bases = {}
for i = 1, 24 do bases[i] = make_model() end

local function splice(s)
  local other = file_of(bases[R(#bases)])
  local i, j = R(#other), R(#other)
  if i > j then i, j = j, i end
  local at = R(#s + 1)
  return s:sub(1, at - 1) .. other:sub(i, j) .. s:sub(at + (R(2) == 1 and (j - i + 1) or 0))
end

-- A third of the cases edit only the model (mostly well-formed JSON with wrong values, so that
-- more files get far into the checks), a third only the bytes, a third both.
local function mutated_case()
  local mode = R(3)
  local m = deep_copy(bases[R(#bases)])
  for _ = 1, mode ~= 2 and R(1, 2) or 0 do model_mutations[R(#model_mutations)](m) end
  local s, hl = file_of(m)
  for _ = 1, mode ~= 1 and R(1, 2) or 0 do
    if R(8) == 1 then s = splice(s) elseif #s > 0 then s = byte_mutations[R(#byte_mutations)](s, hl) end
  end
  return s
end

---------------------------------------------------------------------------------------------------
-- The run
---------------------------------------------------------------------------------------------------

local write, read = T.write_file, T.read_file

local function shape_str(t) return "(" .. table.concat(t, ",") .. ")" end

-- What ms.load returned, through ms.save and the independent reader, against the expected file.
local function compare(tensors, meta, want)
  local ok, err = pcall(ms.save, tensors, repath, {nested = false})
  if not ok then return "ms.save of what loaded failed: " .. tostring(err) end
  local got = independent_read(read(repath))
  if not got then return "ms.save wrote a file the independent reader rejects" end
  for name, w in pairs(want.tensors) do
    local g = got.tensors[name]
    if not g then return ("tensor '%s' missing"):format(name) end
    if g.dtype ~= w.dtype or shape_str(g.shape) ~= shape_str(w.shape) or g.bytes ~= w.bytes then
      return ("tensor '%s': got %s %s, want %s %s (bytes equal: %s)"):format(name, g.dtype, shape_str(g.shape), w.dtype,
                                                                       shape_str(w.shape), tostring(g.bytes == w.bytes))
    end
  end
  for name in pairs(got.tensors) do
    if not want.tensors[name] then return ("extra tensor '%s'"):format(name) end
  end
  for k, v in pairs(want.meta) do
    if meta[k] ~= v then return ("metadata '%s' is %q, want %q"):format(k, tostring(meta[k]), v) end
  end
  for k in pairs(meta) do
    if want.meta[k] == nil then return ("extra metadata '%s'"):format(k) end
  end
end

local counts = {cases = 0, clean = 0, accepted = 0, wrong = 0}
local function wrong(i, why, s)
  counts.wrong = counts.wrong + 1
  if counts.wrong <= 10 then
    io.stderr:write(("case %d (seed %d): %s\n  file: %q\n"):format(i, SEED, why, s:sub(1, 400)))
  end
end

local t0 = os.clock()
for i = 1, CASES do
  local s = i <= #bases and file_of(bases[i]) or mutated_case()
  write(path, s)
  counts.cases = counts.cases + 1
  local want, why = independent_read(s)
  local ok, tensors, meta = pcall(ms.load, path, {nested = false})
  local verdict, why_wrong = fuzzing.judge("load", ok, tensors, want, why,
                                           function() return compare(tensors, meta, want) end)
  if verdict then counts[verdict] = counts[verdict] + 1 else wrong(i, why_wrong, s) end
end
os.remove(path)
os.remove(repath)
os.remove(tmp)

print(("fuzz_safetensors: %d cases, %d clean errors, %d accepted, 0 crashes, %d wrong (seed %d, %.1f s)"):format(
  counts.cases, counts.clean, counts.accepted, counts.wrong, SEED, os.clock() - t0))
print(("%d passed, %d failed"):format(counts.cases - counts.wrong, counts.wrong))
if counts.wrong > 0 then os.exit(1) end
