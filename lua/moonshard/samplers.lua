-- samplers.lua: torch.utils.data's samplers for Lua (`require "moonshard.samplers"`, re-exported
-- by moonshard.data): SequentialSampler, RandomSampler, BatchSampler and DistributedSampler,
-- with PyTorch's semantics and argument checks. Every sampler has s:iter(), an iterator of
-- 1-based dataset indices (of tables of them for BatchSampler), and #s, its length.
--
-- Randomness comes from moonshard's one Philox generator: RandomSampler draws from the global
-- one (ms.manual_seed makes it reproducible); DistributedSampler's shuffle draws a permutation
-- from a generator of its own seeded with seed + epoch, so every rank computes the same
-- permutation whatever else it drew, as PyTorch's sampler does with its torch.Generator.
local ms = require "moonshard"
local options = require "moonshard.check_opts"

local M = {}
local fmt = string.format

local function class(name)
  local cls = { __name = name }
  cls.__index = cls
  return setmetatable(cls, {
    __call = function(c, ...)
      local obj = setmetatable({}, c)
      obj:init(...)
      return obj
    end,
  })
end

local function is_int(v) return math.type(v) == "integer" end

local function default(v, d)
  if v == nil then return d end
  return v
end

local function check_bool(v, who, what)
  if type(v) ~= "boolean" then
    error(fmt("%s: %s should be a boolean value, but got %s=%s", who, what, what, tostring(v)), 4)
  end
  return v
end

local function check_positive_int(v, who, what)
  if not is_int(v) or v <= 0 then
    error(fmt("%s: %s should be a positive integer value, but got %s=%s", who, what, what, tostring(v)), 4)
  end
  return v
end

local function dataset_len(ds, who)
  local ok, n = pcall(function() return #ds end)
  if not ok or not is_int(n) then
    error(fmt("%s: the dataset must have a length (#dataset), got %s", who, type(ds)), 4)
  end
  return n
end

local function list_iter(list)
  local i = 0
  return function()
    i = i + 1
    return list[i]
  end
end

-- A permutation of 1..n as a Lua list, from ms.randperm with opts passed on.
local function permutation(n, opts)
  return ms.randperm(n, opts):tolist()
end

-- ---- SequentialSampler ------------------------------------------------------------------------

M.SequentialSampler = class("SequentialSampler")

function M.SequentialSampler:init(data_source)
  dataset_len(data_source, "SequentialSampler")
  self.data_source = data_source
end

function M.SequentialSampler:__len() return #self.data_source end

function M.SequentialSampler:iter()
  local i, n = 0, #self.data_source
  return function()
    if i >= n then return nil end
    i = i + 1
    return i
  end
end

-- ---- RandomSampler ----------------------------------------------------------------------------

M.RandomSampler = class("RandomSampler")

-- RandomSampler(data_source, {replacement = false, num_samples = #data_source})
function M.RandomSampler:init(data_source, opts)
  local who = "RandomSampler"
  opts = options.check(who, opts, { "replacement", "num_samples" }, 3)
  self.data_source = data_source
  self.replacement = check_bool(default(opts.replacement, false), who, "replacement")
  self._num_samples = opts.num_samples
  check_positive_int(opts.num_samples or dataset_len(data_source, who), who, "num_samples")
end

function M.RandomSampler:num_samples() return self._num_samples or #self.data_source end
function M.RandomSampler:__len() return self:num_samples() end

-- With replacement: num_samples uniform draws from 1..n. Without: whole permutations of 1..n
-- back to back, the last one cut to make num_samples (PyTorch's order of draws).
function M.RandomSampler:iter()
  local n, count = #self.data_source, self:num_samples()
  if self.replacement then
    if n == 0 then error("RandomSampler: cannot draw with replacement from an empty dataset", 2) end
    return list_iter(ms.randint(1, n + 1, { count }):tolist())
  end
  local list = {}
  while #list < count do
    local perm = permutation(n)
    table.move(perm, 1, math.min(n, count - #list), #list + 1, list)
  end
  return list_iter(list)
end

-- ---- BatchSampler -----------------------------------------------------------------------------

M.BatchSampler = class("BatchSampler")

-- BatchSampler(sampler, batch_size, drop_last): sampler is a sampler (anything with :iter() and
-- #) or a plain list of indices.
function M.BatchSampler:init(sampler, batch_size, drop_last)
  local who = "BatchSampler"
  local ok = type(sampler) == "table" and (type(sampler.iter) == "function" or getmetatable(sampler) == nil)
  if not ok then
    error(fmt("%s: sampler must be a sampler or a list of indices, got %s", who, type(sampler)), 3)
  end
  self.sampler = sampler
  self.batch_size = check_positive_int(batch_size, who, "batch_size")
  self.drop_last = check_bool(default(drop_last, false), who, "drop_last")
end

function M.BatchSampler:__len()
  local n, b = #self.sampler, self.batch_size
  if self.drop_last then return n // b end
  return (n + b - 1) // b
end

-- Yields a new table of indices per batch (so a caller may keep them).
function M.BatchSampler:iter()
  local s = self.sampler
  local next_index = type(s.iter) == "function" and s:iter() or list_iter(s)
  local size, drop_last = self.batch_size, self.drop_last
  return function()
    local batch = {}
    for i = 1, size do
      local idx = next_index()
      if idx == nil then
        if #batch == 0 or drop_last then return nil end
        return batch
      end
      batch[i] = idx
    end
    return batch
  end
end

-- ---- DistributedSampler -----------------------------------------------------------------------

M.DistributedSampler = class("DistributedSampler")

-- ceil(a / b) for b > 0 and any sign of a, in integers (PyTorch applies math.ceil to a
-- possibly negative quotient when drop_last leaves fewer samples than replicas).
local function ceil_div(a, b) return -((-a) // b) end

-- DistributedSampler(dataset, {num_replicas = 1, rank = 0, shuffle = true, seed = 0,
-- drop_last = false}); rank is 0-based, as in PyTorch and MPI.
function M.DistributedSampler:init(dataset, opts)
  local who = "DistributedSampler"
  opts = options.check(who, opts, { "num_replicas", "rank", "shuffle", "seed", "drop_last" }, 3)
  local n = dataset_len(dataset, who)
  local R = check_positive_int(opts.num_replicas or 1, who, "num_replicas")
  local rank = opts.rank or 0
  if not is_int(rank) or rank < 0 or rank >= R then
    error(fmt("%s: Invalid rank %s, rank should be in the interval [0, %d]", who, tostring(rank), R - 1), 3)
  end
  local seed = opts.seed or 0
  if not is_int(seed) then
    error(fmt("%s: seed should be an integer, but got seed=%s", who, tostring(seed)), 3)
  end
  self.dataset, self.num_replicas, self.rank, self.seed, self.epoch = dataset, R, rank, seed, 0
  self.shuffle = check_bool(default(opts.shuffle, true), who, "shuffle")
  self.drop_last = check_bool(default(opts.drop_last, false), who, "drop_last")
  -- As PyTorch: with drop_last and a remainder, drop the tail so that every rank gets the same
  -- number; otherwise pad up to the next multiple of the replicas.
  if self.drop_last and n % R ~= 0 then
    self.num_samples = math.max(ceil_div(n - R, R), 0)
  else
    self.num_samples = ceil_div(n, R)
  end
  self.total_size = self.num_samples * R
end

function M.DistributedSampler:__len() return self.num_samples end

-- The epoch decides the shuffle (seed + epoch): call it before each epoch's iter(), with the
-- same value on every rank.
function M.DistributedSampler:set_epoch(epoch)
  if not is_int(epoch) then
    error(fmt("DistributedSampler: set_epoch expects an integer epoch, got %s", tostring(epoch)), 2)
  end
  self.epoch = epoch
end

-- What a resumed run needs to draw the same epochs (for fsdp.save_checkpoint's extra): the epoch
-- and the seed; the position inside the epoch is the caller's (the batches it has consumed).
function M.DistributedSampler:state_dict() return { epoch = self.epoch, seed = self.seed } end

function M.DistributedSampler:load_state_dict(sd)
  if type(sd) ~= "table" or not is_int(sd.epoch) or not is_int(sd.seed) then
    error(fmt("DistributedSampler: load_state_dict expects {epoch = integer, seed = integer}, got %s",
      type(sd) == "table" and fmt("{epoch = %s, seed = %s}", tostring(sd.epoch), tostring(sd.seed)) or type(sd)), 2)
  end
  self.epoch, self.seed = sd.epoch, sd.seed
end

-- The whole index list (1-based) before the rank's slice: shuffled or in order, then padded by
-- repeating it from the start or cut, to total_size.
local function padded_list(self)
  local n = #self.dataset
  local list
  if self.shuffle then
    list = permutation(n, { seed = self.seed + self.epoch })
  else
    list = {}
    for i = 1, n do list[i] = i end
  end
  local total = self.total_size
  if self.drop_last then
    for i = total + 1, #list do list[i] = nil end
  elseif n > 0 then
    for i = n + 1, total do list[i] = list[(i - 1) % n + 1] end
  end
  return list
end

-- This rank's indices for the current epoch: positions rank, rank + R, ... (0-based) of the
-- padded list.
function M.DistributedSampler:indices()
  local list, out = padded_list(self), {}
  for pos = self.rank + 1, self.total_size, self.num_replicas do out[#out + 1] = list[pos] end
  assert(#out == self.num_samples, "DistributedSampler: rank slice has the wrong length")
  return out
end

function M.DistributedSampler:iter() return list_iter(self:indices()) end

return M
