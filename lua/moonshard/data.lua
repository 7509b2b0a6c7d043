-- data.lua: torch.utils.data for Lua (`ms.data`, or `require "moonshard.data"`): the DataLoader,
-- plus the samplers and TensorDataset re-exported from their own modules.
--
--   local loader = ms.data.DataLoader(dataset, {batch_size = 64, shuffle = true, num_workers = 2})
--   for batch_idx, data, target in loader:iter() do ... end      -- batch_idx is 1-based
--   #loader                                                       -- the number of batches
--
-- Each epoch's batches are index lists drawn in Lua from the batch sampler (cheap, and the one
-- place randomness enters, so batches are the same for any num_workers). Then one of two paths:
--
-- * native: a dataset whose samples are rows of tensors (a TensorDataset, or MNIST-like:
--   .data (or :data_rows(), rows read from an IDX file per batch) and .targets tensors, a
--   transform that is nil or has a native spec, no
--   target_transform) with no collate_fn. The index lists, the tensors and the transform specs
--   go to the native loader (lua/l_loader.c, engine/src/data/loader.c): num_workers threads
--   gather rows, transform and collate batches ahead into a bounded in-order queue of
--   prefetch_factor * num_workers batches, while the caller trains; num_workers = 0 makes each
--   batch on the caller's thread when asked. An error in a worker is raised in the caller when
--   its batch is reached ("DataLoader: batch 3: ...").
-- * Lua: any other dataset, a Lua transform or a collate_fn. Samples are read on the calling
--   thread (a Lua state cannot be shared with threads), so num_workers is ignored there.
--
-- Both paths give the same batches for the same dataset and sampler. The loop closes the native
-- loader when it ends, on break and on error (the iterator's fourth value is to-be-closed), so
-- its threads never outlive the loop. pin_memory = true with a usable GPU: batch tensors end in
-- page-locked host memory (recycled blocks of the CUDA allocator: engine/src/data/pinned.c;
-- on the native path the workers do it), so batch:to("cuda", {non_blocking = true}) copies
-- without waiting; without a GPU it is a no-op, as PyTorch's. persistent_workers is
-- accepted, and each epoch starts fresh threads (microseconds, against an epoch of batches).
--
-- device = "cuda:N" (ours: PyTorch leaves the move to the loop): the batches, made as above and
-- pinned, are copied to the device ahead of the step by the engine's device feed
-- (engine/src/data/device_feed.c): device_prefetch batches at once, counting the one in use (2:
-- batch k + 1 crosses on a side stream while step k runs), ordered by events, never by host
-- waits; the loop gets device tensors. A native dataset whose transform starts with ToTensor
-- (ToTensor + Normalize) then ships its raw uint8 images and is normalised on the device, the
-- same float32 values bit for bit (transform_on_device = false keeps it in the workers).
--
-- A dataset is any value with #ds and its samples by 1-based index: ds:get(i) returning the
-- sample's values when the dataset has that method (as moonshard.datasets' MNIST does), else
-- ds[i] (one value, or a plain table {v1, v2, ...} that is unpacked). Its string fields
-- (tensors, data, targets, transform, get) are read to choose the path, so an __index
-- function must answer them (nil is fine). The default collate stacks tensors along a new first dim,
-- makes int64 / float64 / bool tensors of Lua integers / floats / booleans (as PyTorch's
-- default_collate) and leaves other values as a list. collate_fn(samples) receives the list
-- of samples, each a table.pack of its values, and returns the batch's values.
local ms = require "moonshard"
local options = require "moonshard.check_opts"
local samplers = require "moonshard.samplers"
local TensorDataset = require "moonshard.tensor_dataset"

local data = {
  SequentialSampler = samplers.SequentialSampler,
  RandomSampler = samplers.RandomSampler,
  BatchSampler = samplers.BatchSampler,
  DistributedSampler = samplers.DistributedSampler,
  TensorDataset = TensorDataset,
}

local fmt, is_tensor = string.format, ms.is_tensor

-- ---- options ---------------------------------------------------------------------------------

local defaults = {
  batch_size = 1, shuffle = false, num_workers = 0, pin_memory = false, drop_last = false,
  prefetch_factor = 2, persistent_workers = false, device_prefetch = 2, transform_on_device = true,
}
local optional = { sampler = true, batch_sampler = true, collate_fn = true, device = true }

local known = options.union(defaults, optional)

local function check_options(opts)
  local o = {}
  for k, v in pairs(options.check("DataLoader", opts, known, 3)) do
    if defaults[k] ~= nil and type(v) ~= type(defaults[k]) then
      error(fmt("DataLoader: option '%s' must be a %s, got %s", k, type(defaults[k]), type(v)), 3)
    end
    o[k] = v
  end
  for k, v in pairs(defaults) do if o[k] == nil then o[k] = v end end
  return o
end

local function check_integer(name, v, min)
  if math.type(v) ~= "integer" or v < min then
    error(fmt("DataLoader: option '%s' must be an integer >= %d, got %s", name, min, tostring(v)), 4)
  end
end

-- PyTorch's rules: a batch_sampler replaces batch_size, shuffle, sampler and drop_last.
local function check_sampling(o, explicit)
  if o.batch_sampler ~= nil then
    if explicit.batch_size or o.shuffle or o.sampler ~= nil or o.drop_last then
      error("DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle, "
        .. "sampler and drop_last", 3)
    end
  elseif o.sampler ~= nil and o.shuffle then
    error("DataLoader: sampler option is mutually exclusive with shuffle", 3)
  end
  check_integer("batch_size", o.batch_size, 1)
  check_integer("num_workers", o.num_workers, 0)
  check_integer("prefetch_factor", o.prefetch_factor, 1)
  check_integer("device_prefetch", o.device_prefetch, 1)
  if o.device_prefetch > 16 then
    error(fmt("DataLoader: option 'device_prefetch' must be at most 16, got %d", o.device_prefetch), 3)
  end
  if o.collate_fn ~= nil and type(o.collate_fn) ~= "function" then
    error(fmt("DataLoader: option 'collate_fn' must be a function, got %s", type(o.collate_fn)), 3)
  end
end

-- The device option as "cuda:N" when it names a CUDA device (nil for none or the CPU): checked
-- here, so a loader that cannot reach its device fails where it is made, not in the loop.
local function check_device(v)
  if v == nil or v == "cpu" then return nil end
  local index = math.type(v) == "integer" and v >= 0 and v
    or type(v) == "string" and (v == "cuda" and -1 or tonumber(v:match("^cuda:(%d+)$")))
  if not index then
    error(fmt("DataLoader: option 'device' must be \"cpu\", \"cuda\", \"cuda:N\" or a CUDA device index, got %s",
      type(v) == "string" and fmt("%q", v) or type(v)), 3)
  end
  local cuda = rawget(ms, "cuda")
  if not (cuda and cuda.is_available()) then
    error(fmt("DataLoader: option 'device' is %s but CUDA cannot be used: %s", tostring(v),
      cuda and cuda.unavailable_reason() or "this moonshard has no CUDA support"), 3)
  end
  if index < 0 then index = cuda.current_device() end
  if index >= cuda.device_count() then
    error(fmt("DataLoader: option 'device' is %s but there are %d CUDA device(s) (cuda:0 to cuda:%d)",
      tostring(v), cuda.device_count(), cuda.device_count() - 1), 3)
  end
  return "cuda:" .. index
end

-- ---- the DataLoader ----------------------------------------------------------------------------

local DataLoader = {}
DataLoader.__index = DataLoader
DataLoader.__name = "DataLoader"

function DataLoader.new(dataset, opts)
  local o = check_options(opts)
  check_sampling(o, opts or {})
  local self = setmetatable({}, DataLoader)
  self.dataset = dataset
  for k, v in pairs(o) do self[k] = v end
  self._feed_device = check_device(o.device) -- where iter() moves batches (nil: they stay)
  if o.batch_sampler == nil then
    self.sampler = o.sampler or (o.shuffle and samplers.RandomSampler(dataset)
      or samplers.SequentialSampler(dataset))
    self.batch_sampler = samplers.BatchSampler(self.sampler, o.batch_size, o.drop_last)
  else
    self.batch_size, self.drop_last = nil, false -- as PyTorch: the batch sampler decides
  end
  return self
end

function DataLoader:__len() return #self.batch_sampler end

function DataLoader:__tostring()
  local dev = self._feed_device and fmt(", device=%s", self._feed_device) or ""
  return fmt("DataLoader(%d batches, num_workers=%d%s)", #self, self.num_workers, dev)
end

-- This epoch's batches: a list of lists of 1-based dataset indices.
local function epoch_batches(self)
  local batches = {}
  for b in self.batch_sampler:iter() do
    local copy = {}
    for j = 1, #b do copy[j] = b[j] end -- samplers may reuse their table
    batches[#batches + 1] = copy
  end
  return batches
end

-- The native loader's sources when the dataset's samples are rows of its tensors, else nil.
local function native_sources(ds)
  if type(ds) ~= "table" then return nil end
  local ts = ds.tensors
  if type(ts) == "table" and #ts > 0 then
    local sources = {}
    for i, t in ipairs(ts) do
      if not is_tensor(t) then return nil end
      sources[i] = { tensor = t }
    end
    return sources
  end
  -- data_rows: images read from their file per batch rather than held (moonshard.datasets)
  local rows = type(ds.data_rows) == "function" and ds:data_rows() or nil
  if not ((rows or is_tensor(ds.data)) and is_tensor(ds.targets)) or ds.target_transform ~= nil then return nil end
  local spec
  if ds.transform ~= nil then
    local tr = ds.transform
    spec = type(tr) == "table" and type(tr.native_spec) == "function" and tr:native_spec() or nil
    if spec == nil then return nil end -- a Lua transform: samples go through Lua
  end
  if rows then return { { rows = rows, transform = spec }, { tensor = ds.targets } } end
  return { { tensor = ds.data, transform = spec }, { tensor = ds.targets } }
end

-- Yields (k, values...) or ends the loop when `...` is empty.
local function yield(k, ...)
  if select("#", ...) == 0 then return nil end
  return k, ...
end

local function native_iter(self, sources, batches, pin)
  local h = ms._loader_new(sources, batches, {
    num_workers = self.num_workers, prefetch_factor = self.prefetch_factor,
    pin_memory = pin or self.pin_memory })
  local k = 0
  local function step()
    k = k + 1
    return yield(k, h:next())
  end
  return step, nil, nil, h -- h is to-be-closed: break and errors stop its workers
end

-- ---- the Lua path: samples read one by one and collated -----------------------------------------

local function get_item(ds, i)
  if type(ds) == "table" or type(ds) == "userdata" then
    local get = ds.get
    if type(get) == "function" then return get(ds, i) end
  end
  local v = ds[i]
  if type(v) == "table" and getmetatable(v) == nil then return table.unpack(v) end
  return v
end

local function collate_values(values)
  local first = values[1]
  if is_tensor(first) then return ms.stack(values, 1) end
  if type(first) == "number" then
    local dt = "int64" -- PyTorch's default_collate: Python ints -> int64, floats -> float64
    for _, v in ipairs(values) do if math.type(v) == "float" then dt = "float64" end end
    return ms.tensor(values, { dtype = dt })
  end
  if type(first) == "boolean" then return ms.tensor(values, { dtype = "bool" }) end
  return values
end

-- The batch's values: one collated value per position of the samples.
local function default_collate(samples)
  local out = {}
  for p = 1, samples[1].n do
    local column = {}
    for j, s in ipairs(samples) do column[j] = s[p] end
    out[p] = collate_values(column)
  end
  return table.unpack(out, 1, samples[1].n)
end

-- pin_memory on the Lua path: the batch's tensors (also inside plain tables) pinned.
local function pin_values(...)
  local out = table.pack(...)
  local function pin(v)
    if is_tensor(v) then return v.device == "cpu" and v:pin_memory() or v end
    if type(v) == "table" and getmetatable(v) == nil then
      local t = {}
      for key, x in pairs(v) do t[key] = pin(x) end
      return t
    end
    return v
  end
  for i = 1, out.n do out[i] = pin(out[i]) end
  return table.unpack(out, 1, out.n)
end

local function lua_iter(self, batches)
  local ds, collate = self.dataset, self.collate_fn or default_collate
  local cuda = rawget(ms, "cuda")
  local pin = self.pin_memory and cuda and cuda.is_available()
  local k = 0
  local function step()
    k = k + 1
    local idx = batches[k]
    if idx == nil then return nil end
    local samples = {}
    for j, i in ipairs(idx) do samples[j] = table.pack(get_item(ds, i)) end
    if pin then return yield(k, pin_values(collate(samples))) end
    return yield(k, collate(samples))
  end
  return step, nil, nil, nil
end

-- ---- the device path: the batches above, moved ahead to the device --------------------------------

-- A data transform that starts with ToTensor leaves the workers for the device (raw uint8
-- images cross: a quarter of float32's bytes); returns its specs, or nil when it stays.
local function take_device_transform(sources)
  local specs = sources[1].transform
  if specs == nil then return nil end
  local first = specs.kind and specs or specs[1]
  if first == nil or first.kind ~= "to_tensor" then return nil end
  sources[1].transform = nil
  return specs
end

local function device_iter(self, batches)
  local sources = self.collate_fn == nil and native_sources(self.dataset) or nil
  local specs = sources and self.transform_on_device and take_device_transform(sources) or nil
  local depth = self.device_prefetch
  local feed = ms._device_feed(self._feed_device, depth, specs and { specs } or nil)
  local inner, _, _, workers
  if sources then
    inner, _, _, workers = native_iter(self, sources, batches, true) -- pinned: copies need no host wait
  else
    inner = lua_iter(self, batches)
  end
  local ended, k = false, 0
  local function put(i, ...)
    if i == nil then ended = true else feed:put(...) end
  end
  local function step()
    while not ended and feed:queued() < depth do put(inner()) end
    if feed:queued() == 0 then return nil end
    k = k + 1
    return k, feed:take()
  end
  -- one to-be-closed value for both: the queued batches, then the worker threads
  local close = setmetatable({}, { __close = function()
    feed:close()
    if workers then workers:close() end
  end })
  return step, nil, nil, close
end

-- for batch_idx, data, target in loader:iter() do ... end
function DataLoader:iter()
  local batches = epoch_batches(self)
  if self._feed_device then return device_iter(self, batches) end
  local sources = self.collate_fn == nil and native_sources(self.dataset) or nil
  if sources then return native_iter(self, sources, batches) end
  return lua_iter(self, batches)
end

-- Whether iter() takes the native path (for tests and benchmarks).
function DataLoader:is_native()
  return self.collate_fn == nil and native_sources(self.dataset) ~= nil
end

data.DataLoader = setmetatable(DataLoader, {
  __call = function(_, dataset, opts) return DataLoader.new(dataset, opts) end,
})

return data
