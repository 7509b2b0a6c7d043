-- test_pin_memory.lua: DataLoader pin_memory and non-blocking copies. Everywhere: the option is
-- accepted, batches are the same as without it, t:to(..., {non_blocking = true}) and
-- t:cuda{non_blocking = true} parse (and are ordinary copies where nothing is pinned). Without a
-- GPU pinning is a no-op in the loader and an error naming why for t:pin_memory(); with one,
-- batches are page-locked, recycled (the pinned bytes stay flat over an epoch), and a
-- non-blocking copy to the GPU gives the batch's values.
local T = require "testing"
local ms = require "moonshard"
local data = require "moonshard.data"

local DataLoader, TensorDataset = data.DataLoader, data.TensorDataset
local GPU = ms.cuda.is_available()

local function dataset(n)
  ms.manual_seed(3)
  return TensorDataset(ms.randn(n, 3, 4), ms.randint(0, 10, {n}))
end

local function epoch(loader)
  local out = {}
  for _, x, y in loader:iter() do out[#out + 1] = {x, y} end
  return out
end

-- a Lua dataset (rows by index): the Lua path, which pins after collating
local function lua_dataset(ds)
  return setmetatable({}, {__len = function() return #ds end,
    __index = function(_, i) if type(i) == "number" then return {ds.tensors[1][i], ds.tensors[2][i]} end end})
end

T.test("pin_memory = true: the same batches as without, on both paths and any num_workers", function()
  local ds = dataset(22)
  local want = epoch(DataLoader(ds, {batch_size = 5}))
  for _, w in ipairs({0, 2}) do
    local got = epoch(DataLoader(ds, {batch_size = 5, num_workers = w, pin_memory = true}))
    T.eq(#got, #want)
    for k = 1, #want do
      T.truthy(ms.equal(got[k][1], want[k][1]) and ms.equal(got[k][2], want[k][2]), "batch " .. k)
      T.eq(got[k][1].device, "cpu")
      T.eq(got[k][1]:is_pinned(), GPU, "pinned exactly where a GPU is")
      T.eq(got[k][2]:is_pinned(), GPU)
    end
  end
  local lua = DataLoader(lua_dataset(ds), {batch_size = 5, pin_memory = true})
  T.truthy(not lua:is_native())
  local got = epoch(lua)
  for k = 1, #want do
    T.truthy(ms.equal(got[k][1], want[k][1]), "Lua path batch " .. k)
    T.eq(got[k][1]:is_pinned(), GPU)
  end
end)

T.test("non_blocking options parse; unknown ones are refused", function()
  local x = ms.arange(6):float()
  T.truthy(ms.equal(x:to("cpu", {non_blocking = true}), x))
  T.truthy(ms.equal(x:to({device = "cpu", dtype = "float64", non_blocking = true}), x:double()))
  T.truthy(ms.equal(x:to(x, {non_blocking = true}), x))
  T.raises(function() x:to("cpu", {non_blockin = true}) end, "to", "unknown option", "non_blockin")
  T.raises(function() x:to({device = "cpu", non_blocking = 1}) end, "non_blocking")
  T.eq(x:is_pinned(), false)
  if not GPU then
    T.raises(function() x:pin_memory() end, "pin_memory", "CUDA")
    T.raises(function() x:cuda({non_blocking = true}) end, "cuda", "not available")
    T.raises(function() x:to("cuda", {non_blocking = true}) end, "not available")
  end
end)

if GPU then
  T.test("pinned tensors: a non-blocking copy to the GPU has the values; blocks are recycled", function()
    local ds = dataset(200)
    local loader = DataLoader(ds, {batch_size = 16, num_workers = 2, pin_memory = true})
    epoch(loader) -- the first epoch fills the cache
    collectgarbage()
    local before = ms.cuda.pinned_memory_stats()
    local n = 0
    for _, x, y in loader:iter() do
      local xd, yd = x:to("cuda", {non_blocking = true}), y:cuda({non_blocking = true})
      T.eq(xd.device, "cuda:" .. ms.cuda.current_device())
      T.truthy(ms.equal(xd:cpu(), x) and ms.equal(yd:cpu(), y), "values after the copy")
      n = n + 1
    end
    collectgarbage()
    local after = ms.cuda.pinned_memory_stats()
    T.eq(n, 13)
    -- the second epoch took its blocks from the cache: no more page-locked bytes than the first
    T.truthy(after.live + after.cached <= before.live + before.cached,
      ("pinned bytes grew: %d -> %d"):format(before.live + before.cached, after.live + after.cached))
    local p = ms.arange(1000):float():pin_memory()
    T.truthy(p:is_pinned())
    T.truthy(p:pin_memory():is_pinned())
    local d = p:to("cuda", {non_blocking = true})
    p = nil
    collectgarbage() -- the block goes back to the cache; the queued copy still reads its bytes
    local q = ms.zeros(1000):pin_memory() -- must not be handed the same block before the copy ran
    T.truthy(ms.equal(d:cpu(), ms.arange(1000):float()))
    T.truthy(q:is_pinned())
  end)
end

T.finish()
