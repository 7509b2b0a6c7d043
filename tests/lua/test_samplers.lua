-- test_samplers.lua: the samplers of moonshard.samplers. DistributedSampler without shuffle is
-- compared with PyTorch's index lists (data/sampler_reference.lua, made by
-- gen_sampler_reference.py) for every rank of world sizes 1..5; with shuffle, the ranks
-- together must cover the dataset, each with the right count, in an order that set_epoch
-- changes deterministically and that does not depend on the global generator.
local T = require "testing"
local ms = require "moonshard"
local samplers = require "moonshard.samplers"
local reference = dofile("tests/lua/data/sampler_reference.lua")

local SequentialSampler, RandomSampler = samplers.SequentialSampler, samplers.RandomSampler
local BatchSampler, DistributedSampler = samplers.BatchSampler, samplers.DistributedSampler

-- A stand-in dataset of n samples: only its length matters to a sampler.
local function dataset(n) return setmetatable({}, { __len = function() return n end }) end

local function collect(s)
  local out = {}
  for v in s:iter() do out[#out + 1] = v end
  return out
end

local function sorted(list)
  local c = table.move(list, 1, #list, 1, {})
  table.sort(c)
  return c
end

local function range(n)
  local r = {}
  for i = 1, n do r[i] = i end
  return r
end

-- ---- DistributedSampler against PyTorch -------------------------------------------------------

T.test("DistributedSampler(shuffle=false) equals PyTorch's index lists", function()
  T.truthy(#reference > 100, "reference list loaded")
  for _, c in ipairs(reference) do
    local s = DistributedSampler(dataset(c.n), {
      num_replicas = c.num_replicas, rank = c.rank, shuffle = false, drop_last = c.drop_last })
    local what = ("n=%d R=%d rank=%d drop_last=%s"):format(c.n, c.num_replicas, c.rank, tostring(c.drop_last))
    T.eq(#s, c.len, what .. ": #s")
    T.same(collect(s), c.indices, 0, what)
  end
end)

T.test("DistributedSampler(shuffle=false) ignores set_epoch", function()
  local s = DistributedSampler(dataset(13), { num_replicas = 3, rank = 2, shuffle = false })
  local before = collect(s)
  s:set_epoch(5)
  T.same(collect(s), before)
end)

-- ---- DistributedSampler with shuffle ----------------------------------------------------------

-- The lists of every rank for one configuration and epoch.
local function all_ranks(n, R, drop_last, epoch, seed)
  local lists = {}
  for rank = 0, R - 1 do
    local s = DistributedSampler(dataset(n), { num_replicas = R, rank = rank, drop_last = drop_last, seed = seed })
    s:set_epoch(epoch)
    lists[rank + 1] = collect(s)
    T.eq(#lists[rank + 1], #s, "rank list length equals #s")
  end
  return lists
end

T.test("DistributedSampler(shuffle=true): coverage and counts for R = 1..5", function()
  for _, n in ipairs({ 0, 1, 2, 7, 10, 12, 13 }) do
    for R = 1, 5 do
      for _, drop_last in ipairs({ false, true }) do
        local what = ("n=%d R=%d drop_last=%s"):format(n, R, tostring(drop_last))
        local lists = all_ranks(n, R, drop_last, 0)
        local want_count = (drop_last and n % R ~= 0) and n // R or (n + R - 1) // R
        local seen, total = {}, 0
        for _, l in ipairs(lists) do
          T.eq(#l, want_count, what .. ": per-rank count")
          for _, i in ipairs(l) do
            T.truthy(math.type(i) == "integer" and i >= 1 and i <= n, what .. ": index in 1..n")
            seen[i] = (seen[i] or 0) + 1
            total = total + 1
          end
        end
        local distinct = 0
        for _ in pairs(seen) do distinct = distinct + 1 end
        if drop_last then
          -- dropping the tail: every index at most once, R * count of them
          T.eq(distinct, total, what .. ": no repeats with drop_last")
          T.eq(total, R * want_count, what .. ": total")
        else
          -- padding: every index at least once, repeats only to fill the last round
          T.eq(distinct, n, what .. ": ranks together cover the dataset")
          T.eq(total - n, R * want_count - n, what .. ": padding count")
        end
      end
    end
  end
end)

T.test("DistributedSampler(shuffle=true): same permutation on every rank", function()
  -- Interleaving the ranks' lists rebuilds the shuffled, padded list: with n a multiple of R
  -- it is a permutation of 1..n, which it could not be if ranks disagreed.
  local n, R = 12, 4
  local lists = all_ranks(n, R, false, 3)
  local whole = {}
  for pos = 1, n do whole[pos] = lists[(pos - 1) % R + 1][(pos - 1) // R + 1] end
  T.same(sorted(whole), range(n))
  T.truthy(table.concat(whole, ",") ~= table.concat(range(n), ","), "shuffled")
end)

T.test("DistributedSampler: set_epoch changes the order deterministically", function()
  local n = 50
  local function order(epoch, seed)
    local s = DistributedSampler(dataset(n), { num_replicas = 1, rank = 0, seed = seed })
    if epoch then s:set_epoch(epoch) end
    return table.concat(collect(s), ",")
  end
  T.eq(order(nil), order(0), "epoch 0 is the default")
  T.truthy(order(0) ~= order(1), "epoch 1 differs from epoch 0")
  T.truthy(order(1) ~= order(2), "epoch 2 differs from epoch 1")
  T.eq(order(1), order(1), "same epoch, same order")
  T.truthy(order(0, 7) ~= order(0, 0), "the seed changes the order")
  T.eq(order(0, 7), order(7, 0), "the permutation is seeded with seed + epoch")
  -- the global generator is neither read nor advanced
  ms.manual_seed(1)
  local a = order(3)
  local r1 = ms.rand(4):tolist()
  ms.manual_seed(99)
  ms.rand(17)
  T.eq(order(3), a, "independent of the global generator")
  ms.manual_seed(1)
  order(3)
  T.same(ms.rand(4):tolist(), r1, 0, "global stream untouched")
  -- iterating twice in the same epoch gives the same list, as in PyTorch
  local s = DistributedSampler(dataset(n), { num_replicas = 2, rank = 1 })
  s:set_epoch(4)
  T.same(collect(s), collect(s))
end)

T.test("DistributedSampler: argument errors", function()
  local ds = dataset(10)
  T.raises(function() DistributedSampler(ds, { num_replicas = 2, rank = 2 }) end,
    "Invalid rank 2, rank should be in the interval [0, 1]")
  T.raises(function() DistributedSampler(ds, { num_replicas = 2, rank = -1 }) end, "Invalid rank -1")
  T.raises(function() DistributedSampler(ds, { num_replicas = 0 }) end,
    "num_replicas should be a positive integer value, but got num_replicas=0")
  T.raises(function() DistributedSampler(ds, { shufle = false }) end, "DistributedSampler: unknown option 'shufle' (expected one of: drop_last, ")
  T.raises(function() DistributedSampler(ds, { shuffle = 1 }) end, "shuffle should be a boolean value")
  T.raises(function() DistributedSampler(ds, { seed = 0.5 }) end, "seed should be an integer")
  T.raises(function() DistributedSampler(42) end, "the dataset must have a length")
  T.raises(function() DistributedSampler(ds):set_epoch("1") end, "set_epoch expects an integer")
end)

-- ---- SequentialSampler, RandomSampler, BatchSampler -------------------------------------------

T.test("SequentialSampler", function()
  local s = SequentialSampler(dataset(5))
  T.eq(#s, 5)
  T.same(collect(s), { 1, 2, 3, 4, 5 })
  T.same(collect(SequentialSampler(dataset(0))), {})
  -- a tensor is a dataset of its first dim
  T.same(collect(SequentialSampler(ms.zeros(3, 2))), { 1, 2, 3 })
end)

T.test("RandomSampler without replacement: a seeded permutation", function()
  local s = RandomSampler(dataset(20))
  T.eq(#s, 20)
  ms.manual_seed(5)
  local a = collect(s)
  T.same(sorted(a), range(20))
  ms.manual_seed(5)
  T.same(collect(s), a, 0, "reproducible under manual_seed")
  T.truthy(table.concat(collect(s), ",") ~= table.concat(a, ","), "a new order each iteration")
  -- more samples than the dataset: whole permutations back to back, the last one cut
  local long = collect(RandomSampler(dataset(4), { num_samples = 10 }))
  T.eq(#long, 10)
  T.same(sorted({ table.unpack(long, 1, 4) }), range(4))
  T.same(sorted({ table.unpack(long, 5, 8) }), range(4))
  local short = collect(RandomSampler(dataset(10), { num_samples = 3 }))
  T.eq(#short, 3)
  T.truthy(short[1] ~= short[2] and short[2] ~= short[3] and short[1] ~= short[3], "distinct")
end)

T.test("RandomSampler with replacement", function()
  local s = RandomSampler(dataset(3), { replacement = true, num_samples = 200 })
  T.eq(#s, 200)
  local counts = {}
  for _, i in ipairs(collect(s)) do
    T.truthy(i >= 1 and i <= 3, "index in range")
    counts[i] = (counts[i] or 0) + 1
  end
  T.truthy(counts[1] and counts[2] and counts[3], "every index drawn")
  T.eq(#RandomSampler(dataset(3), { replacement = true }), 3)
end)

T.test("RandomSampler: argument errors", function()
  T.raises(function() RandomSampler(dataset(3), { num_samples = 0 }) end,
    "num_samples should be a positive integer value, but got num_samples=0")
  T.raises(function() RandomSampler(dataset(0)) end, "num_samples=0")
  T.raises(function() RandomSampler(dataset(3), { replacement = "yes" }) end,
    "replacement should be a boolean value")
  T.raises(function() RandomSampler(dataset(3), { generator = 1 }) end, "RandomSampler: unknown option 'generator' (expected one of: num_samples, replacement)")
end)

T.test("BatchSampler", function()
  local b = BatchSampler(SequentialSampler(dataset(10)), 3, false)
  T.eq(#b, 4)
  T.same(collect(b), { { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 }, { 10 } })
  local d = BatchSampler(SequentialSampler(dataset(10)), 3, true)
  T.eq(#d, 3)
  T.same(collect(d), { { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 } })
  T.same(collect(BatchSampler(SequentialSampler(dataset(6)), 3, true)), { { 1, 2, 3 }, { 4, 5, 6 } })
  T.eq(#BatchSampler(SequentialSampler(dataset(0)), 3, false), 0)
  T.same(collect(BatchSampler(SequentialSampler(dataset(0)), 3, false)), {})
  -- a plain list of indices, and batches that are new tables each time
  local l = BatchSampler({ 9, 8, 7, 6, 5 }, 2, false)
  local got = collect(l)
  T.same(got, { { 9, 8 }, { 7, 6 }, { 5 } })
  T.truthy(got[1] ~= got[2], "fresh tables")
  -- over a DistributedSampler: this rank's indices in batches
  local ds = DistributedSampler(dataset(10), { num_replicas = 3, rank = 1, shuffle = false })
  T.same(collect(BatchSampler(ds, 2, false)), { { 2, 5 }, { 8, 1 } })
end)

T.test("BatchSampler: argument errors", function()
  local s = SequentialSampler(dataset(4))
  T.raises(function() BatchSampler(s, 0, false) end, "batch_size should be a positive integer value, but got batch_size=0")
  T.raises(function() BatchSampler(s, 2.5, false) end, "batch_size should be a positive integer value")
  T.raises(function() BatchSampler(s, 2, "no") end, "drop_last should be a boolean value")
  T.raises(function() BatchSampler(42, 2, false) end, "sampler must be a sampler or a list of indices")
end)

T.test("randperm(n, {seed =}) is its own generator", function()
  ms.manual_seed(3)
  local a = ms.randperm(10, { seed = 42 }):tolist()
  local g = ms.rand(3):tolist()
  ms.manual_seed(3)
  T.same(ms.rand(3):tolist(), g, 0, "global stream not advanced")
  T.same(ms.randperm(10, { seed = 42 }):tolist(), a, 0, "same seed, same permutation")
  T.truthy(table.concat(ms.randperm(10, { seed = 43 }):tolist(), ",") ~= table.concat(a, ","))
  T.eq(ms.randperm(10, { seed = 42, dtype = "int32" }).dtype, "int32")
  T.raises(function() ms.randperm(5, { seed = 1.5 }) end, "option 'seed': expected an integer")
  T.raises(function() ms.randperm(5, { sed = 1 }) end, "unknown option 'sed'", "seed")
end)

T.finish()
