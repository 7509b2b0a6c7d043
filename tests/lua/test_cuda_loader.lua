-- test_cuda_loader.lua: the DataLoader's device option on a GPU. Device batches equal the CPU
-- loader's batches moved to the device, bit for bit, over 2 shuffled epochs (the native path
-- with raw images normalised on the device, the Lua path, a TensorDataset); a step loop that
-- reads every batch, keeps the GPU busy so copies run ahead, frees each batch at once (its
-- blocks are reused) and reads its sums back once at the end gets the CPU's numbers; breaks and
-- many epochs leave no device memory behind. Exits 77 (skipped) where no GPU is usable.
local T = require "testing"
local ms = require "moonshard"
local data = require "moonshard.data"
local transforms = require "moonshard.transforms"

T.need_cuda()

local DEV = "cuda:0"
local DataLoader, TensorDataset = data.DataLoader, data.TensorDataset
local SEED_TRANSFORM = transforms.Compose({ transforms.ToTensor(), transforms.Normalize({ 0.1307 }, { 0.3081 }) })

local function mnist_like(n)
  local pixels, labels = {}, {}
  for i = 1, n * 784 do pixels[i] = (i * 37) % 256 end
  for i = 1, n do labels[i] = (i - 1) % 10 + 1 end
  local ds = { data = ms.tensor(pixels, { dtype = "uint8" }):view(n, 28, 28),
               targets = ms.tensor(labels, { dtype = "int64" }), transform = SEED_TRANSFORM }
  function ds.get(self, i) return self.transform(self.data[i]), self.targets[i]:item() end
  return setmetatable(ds, { __len = function(self) return self.data:size(1) end })
end

local function epoch(loader, seed)
  ms.manual_seed(seed)
  local out = {}
  for k, x, y in loader:iter() do out[k] = { x, y } end
  return out
end

-- Device batches against the CPU loader's: same count, device, dtype, shape and values (equal on
-- the host: float32 equality of the same bits; the normalisation is exact, see transforms_ops.c).
local function same_epochs(got, want, what)
  T.eq(#got, #want, what .. ": number of batches")
  for k = 1, #want do
    for p = 1, 2 do
      local g, w = got[k][p], want[k][p]
      local at = ("%s: batch %d value %d"):format(what, k, p)
      T.eq(g.device, DEV, at .. " device")
      T.eq(g.dtype, w.dtype, at .. " dtype")
      T.eq(tostring(g.shape), tostring(w.shape), at .. " shape")
      T.truthy(g:cpu():equal(w), at .. " values")
    end
  end
end

T.test("device batches equal the CPU loader's batches moved to the GPU, 2 shuffled epochs", function()
  local ds = mnist_like(300)
  for _, w in ipairs({ 0, 2 }) do
    local opts = { batch_size = 64, shuffle = true, num_workers = w, pin_memory = true }
    local plain = DataLoader(ds, opts)
    opts.device = DEV
    local dev = DataLoader(ds, opts)
    for e = 1, 2 do same_epochs(epoch(dev, 20 + e), epoch(plain, 20 + e), ("workers %d epoch %d"):format(w, e)) end
  end
  local lua_ds = setmetatable({}, { __len = function() return #ds end,
                                    __index = { get = function(_, i) return ds:get(i) end } })
  same_epochs(epoch(DataLoader(lua_ds, { batch_size = 50, shuffle = true, device = DEV }), 5),
    epoch(DataLoader(ds, { batch_size = 50, shuffle = true }), 5), "the Lua path")
  local tds = TensorDataset(ms.randn(70, 3, 5), ms.arange(1, 71))
  same_epochs(epoch(DataLoader(tds, { batch_size = 16, device = DEV, device_prefetch = 3 }), 1),
    epoch(DataLoader(tds, { batch_size = 16 }), 1), "a TensorDataset")
end)

T.test("ms.transform_batch on a CUDA uint8 batch: the CPU's values bit for bit", function()
  local all = ms.arange(0, 256):to("uint8"):view(4, 8, 8)
  local want = SEED_TRANSFORM(all)
  local got = ms.transform_batch(all:to(DEV), SEED_TRANSFORM:native_spec())
  T.eq(got.device, DEV)
  local g, w = got:cpu():reshape(-1):tolist(), want:reshape(-1):tolist()
  for i = 1, #w do
    T.eq(string.pack("<f", g[i]), string.pack("<f", w[i]), ("value %d: the same float32 bits"):format(i))
  end
end)

T.test("a step loop reading device batches, sums kept on the GPU and read once, gets the CPU's numbers", function()
  local ds = mnist_like(640)
  local opts = { batch_size = 64, shuffle = true, num_workers = 2, pin_memory = true }
  local plain = DataLoader(ds, opts)
  opts.device = DEV
  local dev = DataLoader(ds, opts)
  ms.manual_seed(1)
  local w = ms.randn(784, 784):to(DEV)
  for e = 1, 2 do
    local want_x, want_y = 0, 0
    ms.manual_seed(e)
    for _, x, y in plain:iter() do
      want_x, want_y = want_x + x:double():sum():item(), want_y + y:sum():item()
    end
    local sx, sy = ms.zeros(1, { dtype = "float64", device = DEV }), ms.zeros(1, { dtype = "int64", device = DEV })
    ms.manual_seed(e)
    for _, x, y in dev:iter() do
      -- keep the GPU busy for a while, so the next copies are queued while this batch is read
      local h = x:view(x:size(1), 784)
      for _ = 1, 20 do h = (h:mm(w)):tanh() end
      sx:add_(x:double():sum())
      sy:add_(y:sum())
      x, y, h = nil, nil, nil
      collectgarbage() -- the batch's blocks go back to the cache at once and are reused
    end
    local gx, gy = sx:item(), sy:item()
    T.eq(gy, want_y, "targets' sum, epoch " .. e)
    T.near(gx, want_x, 1e-9 * math.abs(want_x), "data's sum, epoch " .. e) -- float64 sums of the same values, another order
  end
end)

-- The loop never waits for the GPU: each step queues ~21 ms of matrix products (8192^3 * 2
-- flops at ~50 TFLOP/s) and the host's side of a step (a batch from the workers, a put, a take)
-- is tens of microseconds, so unless something in the loader synchronizes, the host reaches
-- the end of the epoch while most of the GPU's work is still queued: an event recorded there is
-- not complete yet. (A 100x margin: with one host wait per step the event would be complete.)
T.test("the loop runs ahead of the GPU: nothing in the device loader waits for it", function()
  local ds = mnist_like(512)
  local dev = DataLoader(ds, { batch_size = 64, shuffle = true, num_workers = 2, device = DEV })
  ms.manual_seed(2)
  local w = ms.randn(8192, 8192):to(DEV):div_(8192)
  local sx = ms.zeros(1, { dtype = "float64", device = DEV })
  -- one epoch of steps; the product of the step before is freed first, so its cached block is
  -- reused (no cudaMalloc, which may wait for the device, once warm)
  local function run()
    local done = ms.cuda.Event()
    local p
    for _, x in dev:iter() do
      p = nil
      collectgarbage()
      p = w:mm(w)
      sx:add_(x:double():sum())
    end
    done:record()
    return done
  end
  run() -- warm: every block the loop asks for is cached
  ms.cuda.synchronize()
  local done = run()
  T.eq(done:query(), false, "the GPU is still busy when the host has queued the whole epoch")
  ms.cuda.synchronize()
  T.truthy(sx:item() == sx:item(), "the sums are read once, at the end")
end)

T.test("breaks and many epochs leave no device memory behind", function()
  local ds = mnist_like(200)
  local dev = DataLoader(ds, { batch_size = 32, shuffle = true, num_workers = 2, device = DEV })
  for _ in dev:iter() do end
  collectgarbage()
  ms.cuda.synchronize()
  local base = ms.cuda.memory_allocated(0)
  for e = 1, 10 do
    for k in dev:iter() do if e % 2 == 0 and k == 3 then break end end
  end
  collectgarbage()
  ms.cuda.synchronize()
  T.eq(ms.cuda.memory_allocated(0), base, "live device bytes after 10 epochs, half of them broken off")
end)

T.finish()
