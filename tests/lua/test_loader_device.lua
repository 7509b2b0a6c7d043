-- test_loader_device.lua: the DataLoader's device option without a GPU. The options and their
-- errors (a CUDA device where none is usable fails at construction, saying why); the
-- normalisation the device runs (ToTensor + Normalize as tensor ops) equal bit for bit to the
-- fused CPU pass; the device feed's queue; and the whole device path of iter() run on the CPU
-- (the feed on the CPU is a queue whose transform runs as the same ops): the same batches as
-- the plain loader over epochs, with shuffling, a DistributedSampler, workers, both paths.
-- tests/lua/test_cuda_loader.lua checks the same on a GPU.
local T = require "testing"
local ms = require "moonshard"
local data = require "moonshard.data"
local transforms = require "moonshard.transforms"

local DataLoader, TensorDataset = data.DataLoader, data.TensorDataset
local GPU = ms.cuda.is_available()

-- The float32 bits of every value of t, as a list of integers (0.0 and -0.0 differ here).
local function bits(t)
  local out = {}
  for i, v in ipairs(t:reshape(-1):tolist()) do out[i] = string.unpack("<i4", string.pack("<f", v)) end
  return out
end

local function same_bits(got, want, what)
  T.eq(got.dtype, want.dtype, what .. " dtype")
  T.eq(tostring(got.shape), tostring(want.shape), what .. " shape")
  local g, w = bits(got), bits(want)
  for i = 1, #w do
    if g[i] ~= w[i] then
      error(("%s[%d]: %08x, want %08x"):format(what, i, g[i] & 0xffffffff, w[i] & 0xffffffff), 2)
    end
  end
end

local SEED_TRANSFORM = transforms.Compose({ transforms.ToTensor(), transforms.Normalize({ 0.1307 }, { 0.3081 }) })

-- An MNIST-like dataset: .data uint8 (n, 28, 28) with every byte value, .targets int64.
local function mnist_like(n, transform)
  local pixels, labels = {}, {}
  for i = 1, n * 784 do pixels[i] = (i * 37) % 256 end
  for i = 1, n do labels[i] = (i - 1) % 10 + 1 end
  local ds = { data = ms.tensor(pixels, { dtype = "uint8" }):view(n, 28, 28),
               targets = ms.tensor(labels, { dtype = "int64" }), transform = transform }
  function ds.get(self, i)
    local img = self.data[i]
    if self.transform then img = self.transform(img) end
    return img, self.targets[i]:item()
  end
  return setmetatable(ds, { __len = function(self) return self.data:size(1) end })
end

-- The same samples through Lua (an opaque dataset): the Lua path.
local function as_lua_dataset(ds)
  return setmetatable({}, { __len = function() return #ds end,
                            __index = { get = function(_, i) return ds:get(i) end } })
end

local function epoch(loader, seed)
  if seed then ms.manual_seed(seed) end
  local out = {}
  for k, x, y in loader:iter() do
    T.eq(k, #out + 1, "batch_idx counts from 1")
    out[k] = { x, y }
  end
  return out
end

local function same_epochs(got, want, what)
  T.eq(#got, #want, what .. ": number of batches")
  for k = 1, #want do
    same_bits(got[k][1]:float(), want[k][1]:float(), ("%s: batch %d data"):format(what, k))
    T.truthy(got[k][2]:equal(want[k][2]), ("%s: batch %d target"):format(what, k))
  end
end

-- A loader whose iter() takes the device path with the feed on the CPU (a private hook: the
-- public device = "cpu" keeps the plain path).
local function on_cpu_feed(loader)
  loader._feed_device = "cpu"
  return loader
end

-- ---- options ------------------------------------------------------------------------------------

T.test("options: device_prefetch and transform_on_device are checked; device = 'cpu' is the plain loader", function()
  local ds = mnist_like(10, SEED_TRANSFORM)
  T.raises(function() DataLoader(ds, { device_prefetch = 0 }) end, "device_prefetch", ">= 1", "got 0")
  T.raises(function() DataLoader(ds, { device_prefetch = 17 }) end, "device_prefetch", "at most 16")
  T.raises(function() DataLoader(ds, { device_prefetch = 1.5 }) end, "device_prefetch", "integer")
  T.raises(function() DataLoader(ds, { transform_on_device = 1 }) end, "transform_on_device", "boolean")
  T.raises(function() DataLoader(ds, { device = "gpu" }) end, "option 'device' must be", "\"gpu\"")
  T.raises(function() DataLoader(ds, { device = {} }) end, "option 'device' must be", "table")
  T.raises(function() DataLoader(ds, { device = -1 }) end, "option 'device' must be")
  local plain = DataLoader(ds, { batch_size = 4 })
  local cpu = DataLoader(ds, { batch_size = 4, device = "cpu", device_prefetch = 3 })
  T.eq(cpu._feed_device, nil, "device = 'cpu' moves nothing")
  T.eq(tostring(cpu), tostring(plain))
  same_epochs(epoch(cpu), epoch(plain), "device = 'cpu'")
end)

T.test("a CUDA device where none is usable fails at construction, saying why", function()
  local ds = mnist_like(4, SEED_TRANSFORM)
  if not GPU then
    for _, dev in ipairs({ "cuda", "cuda:0", 0 }) do
      T.raises(function() DataLoader(ds, { device = dev }) end, "DataLoader: option 'device' is",
        "CUDA cannot be used", ms.cuda.unavailable_reason())
    end
    T.raises(function() ms._device_feed("cuda:0", 2) end, "DataLoader") -- the engine refuses too
  else
    local n = ms.cuda.device_count()
    T.raises(function() DataLoader(ds, { device = "cuda:" .. n }) end, ("there are %d CUDA device"):format(n))
    T.eq(DataLoader(ds, { device = "cuda" })._feed_device, "cuda:" .. ms.cuda.current_device())
  end
end)

-- ---- the normalisation the device runs ------------------------------------------------------------

T.test("ToTensor + Normalize as tensor ops: the fused CPU pass's values bit for bit, every byte value", function()
  local all = ms.arange(0, 256):to("uint8"):view(1, 16, 16) -- (B, H, W)
  local chains = {
    { label = "the seed's", specs = SEED_TRANSFORM:native_spec() },
    { label = "ToTensor alone", specs = { { kind = "to_tensor" } } },
    { label = "two Normalizes", specs = { { kind = "to_tensor" }, { kind = "normalize", mean = 0.5, std = 0.25 },
                                          { kind = "normalize", mean = { -0.1 }, std = { 3.7 } } } },
    { label = "odd constants", specs = { { kind = "to_tensor" }, { kind = "normalize", mean = 1 / 3, std = 1e-3 } } },
  }
  for _, c in ipairs(chains) do
    local want = ms.transform_batch(all, c.specs)
    same_bits(ms._transform_ops(all, c.specs), want, c.label)
    same_bits(ms._transform_ops(all[1], c.specs), ms.transform_batch(all[1], c.specs), c.label .. " (H, W)")
  end
  -- a batch of images, and Normalize alone per channel on float32 (C = 3)
  local imgs = mnist_like(3).data
  same_bits(ms._transform_ops(imgs, SEED_TRANSFORM:native_spec()), SEED_TRANSFORM(imgs), "a batch")
  ms.manual_seed(5)
  local x = ms.randn(2, 3, 4, 5)
  local norm = { kind = "normalize", mean = { 0.485, 0.456, 0.406 }, std = { 0.229, 0.224, 0.225 } }
  same_bits(ms._transform_ops(x, { norm }), ms.transform_batch(x, { norm }), "per-channel Normalize")
end)

T.test("the ops path refuses what the fused pass refuses", function()
  T.raises(function() ms._transform_ops(ms.zeros(2, 2), { { kind = "to_tensor" } }) end,
    "ToTensor: expected a uint8 image", "float32")
  T.raises(function() ms._transform_ops(ms.zeros(4, 4), { { kind = "normalize", mean = { 1, 2 }, std = { 1, 1 } } }) end,
    "Normalize: expected a float32 tensor", "(4, 4)")
  T.raises(function() ms._transform_ops(ms.zeros(1, 3, 4, 4), { { kind = "normalize", mean = { 1, 2 }, std = { 1, 1 } } }) end,
    "mean and std have 2 entries", "3 channel")
end)

-- ---- the device feed ----------------------------------------------------------------------------------

T.test("the device feed: first in, first out, at most its depth, errors that say what", function()
  T.raises(function() ms._device_feed("cpu", 0) end, "device_prefetch")
  T.raises(function() ms._device_feed("cpu", 17) end, "device_prefetch")
  local feed <close> = ms._device_feed("cpu", 2, { { { kind = "to_tensor" } } })
  T.raises(function() feed:take() end, "holds no batch")
  local a, b = ms.full({ 1, 2, 2 }, 255):to("uint8"), ms.zeros(1, 2, 2):to("uint8")
  feed:put(a, ms.tensor({ 1 }))
  feed:put(b, ms.tensor({ 2 }))
  T.eq(feed:queued(), 2)
  T.raises(function() feed:put(a, ms.tensor({ 3 })) end, "holds 2 batches already")
  local x, y = feed:take()
  T.truthy(x:equal(ms.ones(1, 1, 2, 2)) and y:equal(ms.tensor({ 1 })), "the first batch, transformed")
  T.eq(feed:queued(), 1)
  x, y = feed:take()
  T.truthy(x:equal(ms.zeros(1, 1, 2, 2)) and y:equal(ms.tensor({ 2 })), "then the second")
  T.raises(function() feed:put("images") end, "moves tensors", "batch value 1")
  T.raises(function() feed:put() end, "1 to 8 values")
  feed:put(a, ms.tensor({ 4 }))
  feed:close() -- drops what is queued
  T.raises(function() feed:take() end, "closed device feed")
end)

-- ---- the device path of iter(), run on the CPU ------------------------------------------------------

T.test("the device path: the plain loader's batches over epochs with shuffling, any workers, both paths", function()
  local ds = mnist_like(23, SEED_TRANSFORM)
  for _, w in ipairs({ 0, 2 }) do
    for _, depth in ipairs({ 1, 2, 3 }) do
      local opts = { batch_size = 5, shuffle = true, num_workers = w, device_prefetch = depth }
      local plain, dev = DataLoader(ds, opts), on_cpu_feed(DataLoader(ds, opts))
      for e = 1, 2 do
        local what = ("workers %d, depth %d, epoch %d"):format(w, depth, e)
        same_epochs(epoch(dev, 10 + e), epoch(plain, 10 + e), what)
      end
    end
  end
  local lua_ds = as_lua_dataset(ds)
  local dev = on_cpu_feed(DataLoader(lua_ds, { batch_size = 4, shuffle = true }))
  T.eq(dev:is_native(), false)
  same_epochs(epoch(dev, 3), epoch(DataLoader(ds, { batch_size = 4, shuffle = true }), 3), "the Lua path")
  local off = on_cpu_feed(DataLoader(ds, { batch_size = 6, transform_on_device = false }))
  same_epochs(epoch(off), epoch(DataLoader(ds, { batch_size = 6 })), "transform_on_device = false")
  local tds = TensorDataset(ms.randn(9, 3), ms.arange(1, 10))
  same_epochs(epoch(on_cpu_feed(DataLoader(tds, { batch_size = 4 }))), epoch(DataLoader(tds, { batch_size = 4 })),
    "a TensorDataset")
end)

T.test("the device path with a DistributedSampler: each rank's slice, a new order each epoch", function()
  local ds = mnist_like(21, SEED_TRANSFORM)
  for rank = 0, 1 do
    local function make()
      local s = data.DistributedSampler(ds, { rank = rank, num_replicas = 2, shuffle = true, seed = 4 })
      return DataLoader(ds, { batch_size = 4, sampler = s, num_workers = 2 }), s
    end
    local plain, ps = make()
    local dev, ds_ = make()
    on_cpu_feed(dev)
    local first
    for e = 1, 2 do
      ps:set_epoch(e)
      ds_:set_epoch(e)
      local got = epoch(dev)
      same_epochs(got, epoch(plain), ("rank %d epoch %d"):format(rank, e))
      if e == 1 then first = got else T.truthy(not got[1][2]:equal(first[1][2]), "epochs differ") end
    end
  end
end)

T.test("the device path: a break or an error mid-epoch closes the feed and the workers", function()
  local ds = mnist_like(30, SEED_TRANSFORM)
  local dev = on_cpu_feed(DataLoader(ds, { batch_size = 3, num_workers = 2 }))
  for _ = 1, 20 do
    for k in dev:iter() do if k == 2 then break end end
  end
  T.raises(function()
    for k in dev:iter() do if k == 3 then error("stop here") end end
  end, "stop here")
  same_epochs(epoch(dev), epoch(DataLoader(ds, { batch_size = 3 })), "after breaks")
end)

T.finish()
