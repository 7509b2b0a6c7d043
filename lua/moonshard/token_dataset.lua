-- token_dataset.lua: language-model data over a flat 1-D tensor of token ids (1-based, as every
-- index in moonshard). TokenDataset(tokens, block_size) yields (x, y) windows of block_size
-- tokens, y shifted by one: as a map-style dataset, item i is the i-th non-overlapping window
-- (for a DataLoader and a DistributedSampler per rank); get_batch(B) draws B windows at random
-- offsets from the engine's generator, as nanoGPT's get_batch. Token files use llm.c's .bin
-- layout: a header of 256 little-endian int32 (magic 20240520, version 1, the token count), then
-- the tokens as uint16 holding id - 1. open_tokens(path) maps such a file (ms.from_file) and a
-- TokenDataset over it decodes only the windows it draws: a corpus costs no copy and no memory
-- beyond the pages read; read_tokens(path) decodes the whole file into an int64 tensor.
local ms = require "moonshard"
local fmt = string.format

local M = {}

local TokenDataset = {}
TokenDataset.__index = TokenDataset
M.TokenDataset = TokenDataset

local MAGIC, VERSION, HEADER_INTS = 20240520, 1, 256

local TokenFile = {}
TokenFile.__index = TokenFile
M.TokenFile = TokenFile

-- tokens: a 1-D integer tensor of ids, or a TokenFile (open_tokens).
function TokenDataset.new(tokens, block_size)
  local is_file = getmetatable(tokens) == TokenFile
  if not is_file and (not ms.is_tensor(tokens) or tokens:dim() ~= 1 or tokens:is_floating_point()) then
    error(fmt("TokenDataset: tokens must be a 1-D integer tensor or a TokenFile (open_tokens), got %s",
      ms.is_tensor(tokens) and (tokens:dim() .. "-d " .. tostring(tokens.dtype)) or type(tokens)), 2)
  end
  if math.type(block_size) ~= "integer" or block_size < 1 then
    error(fmt("TokenDataset: block_size must be an integer >= 1, got %s", tostring(block_size)), 2)
  end
  if tokens:numel() - 1 < block_size then -- (not numel < block_size + 1: that overflows at maxinteger)
    error(fmt("TokenDataset: %d tokens cannot make one window of block_size %d (%d tokens needed)",
      tokens:numel(), block_size, block_size + 1), 2)
  end
  if not is_file then tokens = tokens:long():contiguous() end
  return setmetatable({ tokens = tokens, block_size = block_size }, TokenDataset)
end
setmetatable(TokenDataset, { __call = function(_, ...) return TokenDataset.new(...) end })

-- Whole non-overlapping windows (each needs one token more for its last target).
function TokenDataset:__len() return (self.tokens:numel() - 1) // self.block_size end

-- x, y of the window starting at token `start` (1-based).
function TokenDataset:window(start)
  local n = self.tokens:numel() - self.block_size
  if math.type(start) ~= "integer" or start < 1 or start > n then
    error(fmt("TokenDataset:window: start must be an integer in 1..%d, got %s", n, tostring(start)), 2)
  end
  if getmetatable(self.tokens) ~= TokenFile then -- views, no copy
    return self.tokens:narrow(1, start, self.block_size), self.tokens:narrow(1, start + 1, self.block_size)
  end
  local ids = self.tokens:ids(ms.arange(start, start + self.block_size + 1))
  return ids:narrow(1, 1, self.block_size), ids:narrow(1, 2, self.block_size)
end

-- The ids at the 1-based positions pos (an int64 tensor of any shape), shaped as pos.
function TokenDataset:ids(pos)
  if getmetatable(self.tokens) == TokenFile then return self.tokens:ids(pos) end
  return self.tokens:index_select(1, pos:reshape(-1)):view(pos.shape)
end

function TokenDataset:num_tokens() return self.tokens:numel() end

function TokenDataset:get(i)
  local len = #self
  if math.type(i) ~= "integer" or i == 0 or i > len or i < -len then
    error(fmt("TokenDataset:get: index must be an integer in 1..%d (or -%d..-1), got %s", len, len,
      tostring(i)), 2)
  end
  if i < 0 then i = len + i + 1 end
  return self:window((i - 1) * self.block_size + 1)
end

-- B windows at uniform random offsets: x, y as (B, block_size) int64.
function TokenDataset:get_batch(batch_size)
  if math.type(batch_size) ~= "integer" or batch_size < 1 then
    error(fmt("TokenDataset:get_batch: batch_size must be an integer >= 1, got %s", tostring(batch_size)), 2)
  end
  local T = self.block_size
  local starts = ms.randint(1, self.tokens:numel() - T + 1, { batch_size, 1 })
  local ids = self:ids(starts + ms.arange(0, T + 1):view(1, T + 1)) -- (B, T + 1): x and y overlap
  return ids:narrow(2, 1, T):contiguous(), ids:narrow(2, 2, T):contiguous()
end

-- ---- llm.c's .bin token files -----------------------------------------------------------------

-- Writes token ids (1-based, at most 65536) to path in llm.c's layout.
function M.write_tokens(path, tokens)
  if not ms.is_tensor(tokens) or tokens:dim() ~= 1 or tokens:is_floating_point() then
    error("write_tokens: tokens must be a 1-D integer tensor", 2)
  end
  local ids = tokens:tolist()
  local parts = { string.pack("<i4i4i4", MAGIC, VERSION, #ids), string.rep("\0", 4 * (HEADER_INTS - 3)) }
  for i, id in ipairs(ids) do
    if id < 1 or id > 65536 then
      error(fmt("write_tokens: token %d is %d, outside the uint16 file's ids 1..65536", i, id), 2)
    end
    parts[#parts + 1] = string.pack("<I2", id - 1)
  end
  local f <close> = assert(io.open(path, "wb"))
  assert(f:write(table.concat(parts)))
end

-- Maps an llm.c .bin token file: a TokenFile of its n tokens, decoded on demand.
function M.open_tokens(path)
  local f <close>, err = io.open(path, "rb")
  if not f then error(fmt("open_tokens: cannot open %s", err), 2) end -- err names the path
  local header = f:read(4 * HEADER_INTS) or ""
  local size = f:seek("end")
  if #header < 4 * HEADER_INTS then
    error(fmt("open_tokens: %s: %d bytes, shorter than the %d-byte header", path, size, 4 * HEADER_INTS), 2)
  end
  local magic, version, n = string.unpack("<i4i4i4", header)
  if magic ~= MAGIC or version ~= VERSION then
    error(fmt("open_tokens: %s: not an llm.c token file (magic %d version %d, expected %d and %d)", path,
      magic, version, MAGIC, VERSION), 2)
  end
  local want = 4 * HEADER_INTS + 2 * n
  if n < 0 or size ~= want then
    error(fmt("open_tokens: %s: header says %d tokens (%d bytes), the file has %d bytes", path, n, want, size), 2)
  end
  local bytes = ms.from_file(path, { offset = 4 * HEADER_INTS, size = 2 * n }):view(n, 2)
  return setmetatable({ path = path, n = n, bytes = bytes }, TokenFile)
end

function TokenFile:numel() return self.n end

-- The 1-based ids at the 1-based positions pos (an int64 tensor of any shape), shaped as pos:
-- each uint16 from its two bytes, id = lo + 256 hi + 1.
function TokenFile:ids(pos)
  local b = self.bytes:index_select(1, pos:reshape(-1)):long()
  return (b:select(2, 1) + b:select(2, 2):mul(256) + 1):view(pos.shape)
end

-- The largest id (0 for an empty file), decoded a chunk at a time: never a copy of the file.
function TokenFile:max_id()
  local best, chunk = 0, 1 << 16
  for first = 1, self.n, chunk do
    local last = math.min(first + chunk, self.n + 1)
    best = math.max(best, self:ids(ms.arange(first, last)):max():item())
  end
  return best
end

-- Every id, decoded into a 1-D int64 tensor.
function TokenFile:read()
  if self.n == 0 then return ms.zeros(0, { dtype = ms.int64 }) end
  return self:ids(ms.arange(1, self.n + 1))
end

function TokenFile:__tostring() return fmt("TokenFile(%s, %d tokens)", self.path, self.n) end

-- Reads an llm.c .bin token file into a 1-D int64 tensor of 1-based ids.
function M.read_tokens(path)
  local ok, file = pcall(M.open_tokens, path)
  if not ok then error((file:gsub("^open_tokens", "read_tokens")), 2) end
  return file:read()
end

-- ---- character- and byte-level tokenizers -----------------------------------------------------

-- CharTokenizer(text): the vocabulary is the distinct bytes of text, sorted (a UTF-8 character
-- of several bytes is several tokens); ids are 1-based. ByteTokenizer(): all 256 bytes, id =
-- byte + 1, the same for every text (what a token file needs: its vocabulary is not stored).
local CharTokenizer = {}
CharTokenizer.__index = CharTokenizer
M.CharTokenizer = CharTokenizer

-- The tokenizer of the bytes b for which present[b] is true.
local function of_bytes(present)
  local itos, stoi = {}, {}
  for byte = 0, 255 do
    if present[byte] then
      itos[#itos + 1] = string.char(byte)
      stoi[string.char(byte)] = #itos
    end
  end
  return setmetatable({ itos = itos, stoi = stoi, vocab_size = #itos }, CharTokenizer)
end

function CharTokenizer.new(text)
  if type(text) ~= "string" or #text == 0 then error("CharTokenizer: text must be a non-empty string", 2) end
  local present = {}
  for i = 1, #text do present[text:byte(i)] = true end
  return of_bytes(present)
end
setmetatable(CharTokenizer, { __call = function(_, ...) return CharTokenizer.new(...) end })

function M.ByteTokenizer()
  local all = {}
  for byte = 0, 255 do all[byte] = true end
  local tok = of_bytes(all)
  tok.byte_level = true
  return tok
end

-- The ids of s as a 1-D int64 tensor; a byte outside the vocabulary raises.
function CharTokenizer:encode(s)
  if type(s) ~= "string" then error(fmt("CharTokenizer:encode: expected a string, got %s", type(s)), 2) end
  if self.byte_level and #s > 0 then return ms.frombuffer(s):long():add(1) end -- id = byte + 1
  local ids = {}
  for i = 1, #s do
    local id = self.stoi[s:sub(i, i)]
    if id == nil then error(fmt("CharTokenizer:encode: byte %d at %d is not in the vocabulary", s:byte(i), i), 2) end
    ids[i] = id
  end
  return ms.tensor(ids, { dtype = ms.int64 })
end

-- The text of ids (a 1-D tensor or an array).
function CharTokenizer:decode(ids)
  if ms.is_tensor(ids) then ids = ids:tolist() end
  local out = {}
  for i, id in ipairs(ids) do
    local ch = self.itos[id]
    if ch == nil then error(fmt("CharTokenizer:decode: id %s at %d is outside 1..%d", tostring(id), i, #self.itos), 2) end
    out[i] = ch
  end
  return table.concat(out)
end

return M
