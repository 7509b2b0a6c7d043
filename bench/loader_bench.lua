-- loader_bench.lua: how fast ms.data.DataLoader feeds MNIST at batch 64 with 0, 1 and 2 workers,
-- against the time of one training step of the seed's Net (forward, backward, Adadelta step),
-- and training steps fed by the loader, to see the workers overlap loading with compute. With a
-- GPU also the device loader (device = "cuda:0": copies ahead on a side stream, normalisation
-- on the GPU) against pinned batches moved in the loop with :to(device, {non_blocking = true}).
-- Run: build/moonshard bench/loader_bench.lua [data-root]   (default root: data)
local ms = require "moonshard"
local F = require "moonshard.functional"
local optim = require "moonshard.optim"
local datasets = require "moonshard.datasets"
local argparse = require "moonshard.argparse"
local DataLoader = ms.data.DataLoader

local parser = argparse.ArgumentParser{description = "DataLoader throughput on MNIST against a training step"}
parser:add_argument("root", {nargs = "?", default = "data", help = "the directory holding MNIST/raw"})
local root = parser:parse_args(arg).root
local BATCH = 64

local function find_mnist()
  for _, name in ipairs({"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz"}) do
    local f = io.open(root .. "/MNIST/raw/" .. name, "rb")
    if f then f:close() return true end
  end
end
if not find_mnist() then
  print(("loader_bench: skipped: no MNIST under %s/MNIST/raw (see scripts/fetch-mnist.sh)"):format(root))
  return
end

-- The seed's transform, natively when moonshard.transforms is there.
local ok, transforms = pcall(require, "moonshard.transforms")
local transform = ok and transforms.Compose({transforms.ToTensor(), transforms.Normalize({0.1307}, {0.3081})}) or nil
local ds = datasets.MNIST(root, {train = true, transform = transform})
print(("MNIST train: %d images, batch %d, transform %s, %d compute threads"):format(
  #ds, BATCH, transform and "ToTensor+Normalize (native)" or "none (uint8 batches)",
  ms.get_num_threads()))

-- The same samples through Lua (ds:get per sample, then stack): what the native path saves.
local lua_ds = setmetatable({}, {
  __len = function() return #ds end,
  __index = {get = function(_, i) return ds:get(i) end},
})

-- One epoch of batches, nothing else: batches per second (best of `runs`).
local function loader_rate(workers, runs, dataset)
  local best = math.huge
  local loader = DataLoader(dataset or ds, {batch_size = BATCH, shuffle = true, num_workers = workers})
  for _ = 1, runs do
    local t0 = ms.perf_counter()
    for _ in loader:iter() do end
    best = math.min(best, ms.perf_counter() - t0)
  end
  return #loader / best, loader:is_native()
end

local Net = require "moonshard.seed_net"
local model = Net()
local optimizer = optim.Adadelta(model:parameters(), {lr = 1.0})

local function train_step(data, target)
  optimizer:zero_grad()
  local loss = F.nll_loss(model(data), target)
  loss:backward()
  optimizer:step()
end

-- Seconds of `steps` training steps fed by a loader with `workers` workers (after one warm-up).
local function fed_training(workers, steps)
  local loader = DataLoader(ds, {batch_size = BATCH, shuffle = true, num_workers = workers})
  local t0
  for k, data, target in loader:iter() do
    if not transform then data = data:float():div_(255):unsqueeze(2) end
    train_step(data, target)
    if k == 1 then t0 = ms.perf_counter() end
    if k == steps + 1 then break end
  end
  return (ms.perf_counter() - t0) / steps
end

model:train()
local function report(w, rate, native)
  print(("loader workers=%d  %8.0f batches/s  (%.3f ms/batch, %s path)"):format(
    w, rate, 1000 / rate, native and "native" or "Lua"))
end
for w = 0, 2 do report(w, loader_rate(w, 3)) end
report(0, loader_rate(0, 1, lua_ds))

-- One training step on a fixed batch, best of several.
local loader = DataLoader(ds, {batch_size = BATCH})
local _, data, target = loader:iter()()
if not transform then data = data:float():div_(255):unsqueeze(2) end
train_step(data, target)
local best = math.huge
for _ = 1, 10 do
  local t0 = ms.perf_counter()
  train_step(data, target)
  best = math.min(best, ms.perf_counter() - t0)
end
print(("train step (seed Net, fwd+bwd+Adadelta, batch %d)  %.2f ms  (%.0f steps/s)"):format(BATCH, best * 1000, 1 / best))

-- Interleaved, best of 3: on a shared machine the load of other programs moves these the most.
local fed = {[0] = math.huge, [2] = math.huge}
for _ = 1, 3 do
  for _, w in ipairs({0, 2}) do fed[w] = math.min(fed[w], fed_training(w, 30)) end
end
for _, w in ipairs({0, 2}) do
  print(("training fed by loader workers=%d  %.2f ms/step (best of 3 runs of 30 steps)"):format(w, fed[w] * 1000))
end

-- ---- on a GPU: the device loader against moving batches in the loop ------------------------------

if not ms.cuda.is_available() then return end
local DEV = "cuda:0"
local gmodel = Net():to(DEV)
local gopt = optim.Adadelta(gmodel:parameters(), {lr = 1.0})

-- Seconds per step of `steps` GPU training steps (after 5 warm-up steps), the batches coming
-- from a loader with opts; move = true copies each batch in the loop as the seed does.
local function gpu_fed(opts, move, steps)
  local loader = DataLoader(ds, opts)
  local t0
  for k, data, target in loader:iter() do
    if move then data, target = data:to(DEV, {non_blocking = true}), target:to(DEV, {non_blocking = true}) end
    gopt:zero_grad()
    F.nll_loss(gmodel(data), target):backward()
    gopt:step()
    if k == 5 then ms.cuda.synchronize(); t0 = ms.perf_counter() end
    if k == steps + 5 then break end
  end
  ms.cuda.synchronize()
  return (ms.perf_counter() - t0) / steps
end

local base = {batch_size = BATCH, shuffle = true, num_workers = 2, pin_memory = true}
local dev_opts = {batch_size = BATCH, shuffle = true, num_workers = 2, pin_memory = true, device = DEV}
local moved, fed_dev = math.huge, math.huge
for _ = 1, 3 do
  moved = math.min(moved, gpu_fed(base, true, 200))
  fed_dev = math.min(fed_dev, gpu_fed(dev_opts, false, 200))
end
print(("GPU training step fed by pinned batches moved in the loop  %.3f ms/step"):format(moved * 1000))
print(("GPU training step fed by the device loader (device = %s)  %.3f ms/step  (%.2fx)"):format(
  DEV, fed_dev * 1000, moved / fed_dev))
local t0 = ms.perf_counter()
local dl = DataLoader(ds, dev_opts)
for _ in dl:iter() do end
ms.cuda.synchronize()
print(("device loader alone  %8.0f batches/s"):format(#dl / (ms.perf_counter() - t0)))
