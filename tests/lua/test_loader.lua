-- test_loader.lua: ms.data.DataLoader on small generated data: the same batches for 0, 1 and 2
-- workers and for the native and the Lua path; shapes and dtypes; the last partial batch and
-- drop_last; Lua-defined datasets and collate_fn; an error made in a worker reaching the caller
-- as a Lua error naming the batch; an early break stopping the workers; many epochs leaking
-- nothing.
local T = require "testing"
local ms = require "moonshard"
local data = require "moonshard.data"

local DataLoader, TensorDataset = data.DataLoader, data.TensorDataset

-- ---- helpers -----------------------------------------------------------------------------------

local function same_tensor(a, b, what)
  T.eq(a.dtype, b.dtype, what .. " dtype")
  T.eq(tostring(a.shape), tostring(b.shape), what .. " shape")
  T.truthy(a:equal(b), what .. " values")
end

-- Every batch of one epoch, each a packed list of its values; batch_idx checked on the way.
local function collect(loader, seed)
  if seed then ms.manual_seed(seed) end
  local out = {}
  for k, a, b, c, d in loader:iter() do
    T.eq(k, #out + 1, "batch_idx counts from 1")
    local values = {a, b, c, d} -- batches here have at most 3 values, none nil
    values.n = #values
    out[k] = values
  end
  return out
end

local function same_epochs(a, b, what)
  T.eq(#a, #b, what .. ": number of batches")
  for k = 1, #a do
    T.eq(a[k].n, b[k].n, what .. ": values per batch")
    for p = 1, a[k].n do same_tensor(a[k][p], b[k][p], ("%s: batch %d value %d"):format(what, k, p)) end
  end
end

local function rows(t, first, count)
  return t:narrow(1, first, count)
end

-- A (n, 3, 4) float tensor and n int64 labels 1..5, different in every row.
local function tensor_data(n)
  local x = ms.arange(0, n * 12, 1, {dtype = "float32"}):view(n, 3, 4)
  local labels = {}
  for i = 1, n do labels[i] = (i - 1) % 5 + 1 end
  return x, ms.tensor(labels, {dtype = "int64"})
end

-- An MNIST-like dataset: .data uint8 (n, 28, 28), .targets int64, samples by get.
local function mnist_like(n, transform)
  local pixels, labels = {}, {}
  for i = 1, n * 784 do pixels[i] = (i - 1) % 251 end
  for i = 1, n do labels[i] = (i - 1) % 10 + 1 end
  local ds = {
    data = ms.tensor(pixels, {dtype = "uint8"}):view(n, 28, 28),
    targets = ms.tensor(labels, {dtype = "int64"}),
    transform = transform,
  }
  function ds.get(self, i)
    local img = self.data[i]
    if self.transform then img = self.transform(img) end
    return img, self.targets[i]:item()
  end
  return setmetatable(ds, {__len = function(self) return self.data:size(1) end})
end

-- The same samples as an opaque Lua dataset: forces the Lua path.
local function as_lua_dataset(ds)
  return setmetatable({}, {
    __len = function() return #ds end,
    __index = {get = function(_, i) return ds:get(i) end},
  })
end

-- ---- batches, shapes, dtypes -------------------------------------------------------------------

T.test("TensorDataset: shapes, dtypes, the last partial batch, same for 0, 1 and 2 workers", function()
  local x, y = tensor_data(10)
  local ds = TensorDataset(x, y)
  local epochs = {}
  for w = 0, 2 do
    local loader = DataLoader(ds, {batch_size = 4, num_workers = w})
    T.truthy(loader:is_native(), "a TensorDataset takes the native path")
    T.eq(#loader, 3)
    epochs[w] = collect(loader)
  end
  local e = epochs[0]
  T.eq(#e, 3)
  T.eq(tostring(e[1][1].shape), "torch.Size([4, 3, 4])")
  T.eq(e[1][1].dtype, "float32")
  T.eq(e[1][2].dtype, "int64")
  T.eq(tostring(e[3][1].shape), "torch.Size([2, 3, 4])", "last partial batch")
  same_tensor(e[2][1], rows(x, 5, 4), "batch 2 data")
  same_tensor(e[3][2], rows(y, 9, 2), "batch 3 targets")
  same_epochs(epochs[1], e, "1 worker")
  same_epochs(epochs[2], e, "2 workers")
  local lua = DataLoader(as_lua_dataset(ds), {batch_size = 4})
  T.truthy(not lua:is_native())
  same_epochs(collect(lua), e, "the Lua path")
end)

T.test("drop_last drops the partial batch, and #loader says so", function()
  local x, y = tensor_data(10)
  for w = 0, 2 do
    local loader = DataLoader(TensorDataset(x, y), {batch_size = 4, drop_last = true, num_workers = w})
    T.eq(#loader, 2)
    local e = collect(loader)
    T.eq(#e, 2)
    same_tensor(e[2][1], rows(x, 5, 4), "second batch")
  end
  T.eq(#DataLoader(TensorDataset(x, y), {batch_size = 5, drop_last = true}), 2, "exact multiple")
  T.eq(#DataLoader(TensorDataset(x, y)), 10, "batch_size 1 by default")
end)

T.test("shuffle: the same seed gives the same batches for any num_workers and both paths", function()
  local ds = mnist_like(50)
  local ref = collect(DataLoader(ds, {batch_size = 8, shuffle = true}), 7)
  T.eq(#ref, 7)
  for w = 1, 2 do
    same_epochs(collect(DataLoader(ds, {batch_size = 8, shuffle = true, num_workers = w}), 7), ref,
      ("%d workers"):format(w))
  end
  local lua = DataLoader(as_lua_dataset(ds), {batch_size = 8, shuffle = true, num_workers = 2})
  T.truthy(not lua:is_native())
  same_epochs(collect(lua, 7), ref, "Lua path")
  -- the epoch really is shuffled, and every sample appears once
  local seen, moved = {}, false
  for k, b in ipairs(ref) do
    T.eq(b[1].dtype, "uint8")
    T.eq(b[2].dtype, "int64")
    for j = 1, b[1]:size(1) do
      local first = b[1][j][1][1]:item()
      local i = (k - 1) * 8 + j
      if first ~= ((i - 1) * 784) % 251 then moved = true end
      seen[first] = (seen[first] or 0) + 1
    end
  end
  T.truthy(moved, "shuffled")
end)

T.test("a sampler and a batch_sampler choose the batches", function()
  local x, y = tensor_data(12)
  local ds = TensorDataset(x, y)
  local order = {12, 1, 11, 2, 10, 3}
  local sampler = setmetatable({}, {
    __len = function() return #order end,
    __index = {iter = function() local i = 0 return function() i = i + 1 return order[i] end end},
  })
  for w = 0, 2 do
    local e = collect(DataLoader(ds, {batch_size = 4, sampler = sampler, num_workers = w}))
    T.eq(#e, 2)
    same_tensor(e[1][2], y:index_select(1, ms.tensor({12, 1, 11, 2})), "sampled rows")
    same_tensor(e[2][1], x:index_select(1, ms.tensor({10, 3})), "sampled partial batch")
  end
  local bs = data.BatchSampler(data.SequentialSampler(ds), 5, false)
  local loader = DataLoader(ds, {batch_sampler = bs, num_workers = 1})
  T.eq(#loader, 3)
  local e = collect(loader)
  same_tensor(e[3][1], rows(x, 11, 2), "batch_sampler's last batch")
  T.raises(function() DataLoader(ds, {batch_sampler = bs, batch_size = 3}) end, "mutually exclusive")
  T.raises(function() DataLoader(ds, {sampler = sampler, shuffle = true}) end, "mutually exclusive")
  T.raises(function() DataLoader(ds, {batch_sise = 3}) end, "DataLoader: unknown option 'batch_sise' (expected one of: batch_sampler, batch_size, ")
  T.raises(function() DataLoader(ds, {num_workers = -1}) end, "num_workers")
  local too_far = setmetatable({}, {
    __len = function() return 2 end,
    __index = {iter = function() local i = 11 return function() i = i + 1 if i <= 13 then return i end end end},
  })
  T.raises(function() for _ in DataLoader(ds, {sampler = too_far, batch_size = 2}):iter() do end end,
    "batch 1, entry 2: index 13 is out of range for a dataset of 12 samples (1 to 12)")
end)

-- ---- Lua datasets and collate -----------------------------------------------------------------

T.test("a Lua-defined dataset: numbers, tensors, three values, ds[i] tables", function()
  local ds = setmetatable({}, {
    __len = function() return 7 end,
    __index = {get = function(_, i) return ms.full({2}, i), i, i / 2 end},
  })
  for w = 0, 2 do
    local loader = DataLoader(ds, {batch_size = 3, num_workers = w})
    T.eq(#loader, 3)
    local e = collect(loader)
    T.eq(e[1].n, 3, "all three values")
    T.eq(tostring(e[1][1].shape), "torch.Size([3, 2])")
    T.eq(e[1][2].dtype, "int64")
    T.eq(e[1][3].dtype, "float64")
    T.eq(tostring(e[3][1].shape), "torch.Size([1, 2])")
    T.eq(e[3][2][1]:item(), 7)
    T.near(e[2][3][3]:item(), 3)
  end
  local plain = setmetatable({}, {
    __len = function() return 4 end,
    __index = function(_, i)
      if math.type(i) == "integer" then return {ms.full({1}, i), i % 2 == 0} end
    end,
  })
  local e = collect(DataLoader(plain, {batch_size = 4}))
  T.eq(e[1][2].dtype, "bool")
  T.eq(e[1][1][4][1]:item(), 4)
end)

T.test("collate_fn receives the samples and returns the batch", function()
  local x, y = tensor_data(6)
  local ds = TensorDataset(x, y)
  local loader = DataLoader(ds, {batch_size = 4, collate_fn = function(samples)
    local s = 0
    for _, sample in ipairs(samples) do s = s + sample[2]:item() end
    return #samples, s
  end})
  T.truthy(not loader:is_native(), "collate_fn takes the Lua path")
  local e = {}
  for k, n, s in loader:iter() do e[k] = {n, s} end
  T.same(e, {{4, 1 + 2 + 3 + 4}, {2, 5 + 1}})
end)

-- ---- workers: errors, early exit, memory -------------------------------------------------------

T.test("a native transform's error in a worker is a Lua error naming the batch", function()
  local ok, transforms = pcall(require, "moonshard.transforms")
  if not ok then return print("skipped: moonshard.transforms is not built") end
  local tr = transforms.Compose({transforms.ToTensor(), transforms.Normalize({0.5}, {0.5})})
  local ds = mnist_like(20, tr)
  ds.data = ds.data:float() -- ToTensor wants uint8 images
  for w = 0, 2 do
    local loader = DataLoader(ds, {batch_size = 8, num_workers = w})
    T.truthy(loader:is_native())
    local err = T.raises(function() for _ in loader:iter() do end end, "DataLoader: batch 1:")
    T.truthy(err:find("uint8"), "the worker's message: " .. err)
  end
  -- and the good case: the native transform matches the per-sample Lua transform
  ds = mnist_like(20, tr)
  local ref = collect(DataLoader(ds, {batch_size = 8, num_workers = 2}))
  T.eq(tostring(ref[1][1].shape), "torch.Size([8, 1, 28, 28])")
  T.eq(ref[1][1].dtype, "float32")
  same_epochs(collect(DataLoader(as_lua_dataset(ds), {batch_size = 8})), ref, "native transform")
end)

T.test("breaking out early stops the workers; many epochs leak nothing", function()
  local x, y = tensor_data(400)
  local ds = TensorDataset(x, y)
  collectgarbage()
  local base = ms.memory_stats().current
  for epoch = 1, 30 do
    local loader = DataLoader(ds, {batch_size = 7, shuffle = epoch % 2 == 0, num_workers = epoch % 3,
                                   prefetch_factor = 1 + epoch % 2})
    local n = 0
    for k in loader:iter() do
      n = k
      if epoch % 5 == 0 and k == 3 then break end
    end
    T.eq(n, epoch % 5 == 0 and 3 or #loader)
  end
  -- an error raised by the loop body closes the loader too
  local loader = DataLoader(ds, {batch_size = 7, num_workers = 2})
  T.raises(function() for k in loader:iter() do if k == 2 then error("stop here") end end end, "stop here")
  collectgarbage()
  collectgarbage()
  T.eq(ms.memory_stats().current, base, "bytes held after the epochs")
end)

T.test("ms.data is moonshard.data", function()
  T.eq(ms.data, data)
  T.eq(ms.data.DataLoader, DataLoader)
end)

T.finish()
