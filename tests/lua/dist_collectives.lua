-- dist_collectives.lua: every collective of ms.distributed across the ranks of an mpirun launch
-- (registered for 1..4 ranks, with and without MS_DIST_DEBUG=1): every dtype and op, odd sizes,
-- in-place slots, async handles, subgroups, and under MS_DIST_DEBUG a mismatch that must become
-- the same error on every rank instead of a hang. Every rank runs every case in the same order;
-- only rank 0 prints the summary. A failed case ends the launch at once (see `case`), so every
-- rank exits non-zero.
local ms = require "moonshard"
local T = require "testing"
local dist = ms.distributed

-- A short timeout turns a stuck collective into an error on the waiting rank instead of a hang.
dist.init_process_group({backend = "mpi", timeout = 60})
local R, N = dist.get_rank(), dist.get_world_size()
local DEBUG = (os.getenv("MS_DIST_DEBUG") or "0") ~= "0"

local DTYPES = {"float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8", "bool"}
local OPS = {"sum", "avg", "max", "min", "product"}
local SIZES = {1, 7, 1001}

local results = {} -- 1 per failed case, in case order: identical lengths on every rank
local names = {}
local function case(name, fn)
  local ok, err = xpcall(fn, debug.traceback)
  names[#names + 1] = name
  results[#results + 1] = ok and 0 or 1
  if not ok then
    -- A case that failed between two collectives leaves this rank out of step with the others,
    -- so going on could only stall: exit now, and mpirun ends every rank with a non-zero status.
    io.stderr:write(("FAIL [rank %d of %d] %s\n%s\n"):format(R, N, name, err))
    io.stderr:flush()
    os.exit(1)
  end
end

-- The value rank r contributes at 0-based position i: small integers, exact in every dtype.
local function value(dt, i, r)
  if dt == "bool" then return (i + r) % 3 ~= 0 and 1 or 0 end
  return (i % 5) + 1 + r
end

local function make(n, dt, r, offset)
  local v = {}
  for i = 0, n - 1 do v[i + 1] = value(dt, i + (offset or 0), r) end
  return ms.tensor(v, {dtype = "float64"}):to(dt)
end

-- The reduction over ranks 0..N-1 of value(dt, i, r), as the backend defines it.
local function reduced(dt, op, i)
  local acc
  for r = 0, N - 1 do
    local v = value(dt, i, r)
    if not acc then acc = v
    elseif dt == "bool" then
      acc = (op == "sum" or op == "max") and math.max(acc, v) or math.min(acc, v)
    elseif op == "sum" or op == "avg" then acc = acc + v
    elseif op == "max" then acc = math.max(acc, v)
    elseif op == "min" then acc = math.min(acc, v)
    else acc = acc * v end
  end
  if dt == "uint8" then acc = acc % 256 end
  if op == "avg" then
    acc = (dt == "int64" or dt == "int32" or dt == "uint8") and acc // N or acc / N
  end
  return acc
end

local function tol(dt)
  if dt == "bfloat16" then return 1e-2 elseif dt == "float16" then return 1e-3 end
  return 1e-6
end

local function check(t, want, dt, what)
  local got = t:double():reshape(-1):tolist()
  T.eq(#got, #want, what .. ": length")
  for k = 1, #want do
    local w = want[k]
    if math.abs(got[k] - w) > tol(dt) * math.max(1, math.abs(w)) then
      error(("%s: element %d: expected %.9g, got %.9g"):format(what, k, w, got[k]), 2)
    end
  end
end

local function want_reduced(n, dt, op, offset)
  local w = {}
  for i = 0, n - 1 do w[i + 1] = reduced(dt, op, i + (offset or 0)) end
  return w
end

local function valid(dt, op) return not (dt == "bool" and op == "avg") end

-- ---- the world ---------------------------------------------------------------------------------

case("world", function()
  T.eq(dist.is_initialized(), true)
  T.eq(dist.get_backend(), "mpi")
  T.truthy(R >= 0 and R < N, "rank in range")
  T.eq(tonumber(os.getenv("OMPI_COMM_WORLD_SIZE")), N)
  T.eq(dist.get_local_rank(), tonumber(os.getenv("OMPI_COMM_WORLD_LOCAL_RANK")))
  local ranks = dist.get_process_group_ranks()
  T.eq(#ranks, N)
  T.eq(ranks[N], N - 1)
end)

case("all_reduce: every dtype, op and size", function()
  for _, dt in ipairs(DTYPES) do
    for _, op in ipairs(OPS) do
      if valid(dt, op) then
        for _, n in ipairs(SIZES) do
          local t = make(n, dt, R)
          dist.all_reduce(t, {op = op})
          check(t, want_reduced(n, dt, op), dt, ("all_reduce %s %s n=%d"):format(dt, op, n))
        end
      end
    end
  end
end)

case("all_reduce: a 2-d tensor keeps its shape", function()
  local t = make(21, "float32", R):reshape(3, 7)
  dist.all_reduce(t)
  T.eq(t:size(1), 3)
  check(t, want_reduced(21, "float32", "sum"), "float32", "2-d")
end)

case("all_gather_into_tensor: every dtype, odd sizes", function()
  for _, dt in ipairs(DTYPES) do
    for _, n in ipairs({1, 7, 1001}) do
      local out = ms.zeros(N * n, {dtype = dt})
      dist.all_gather_into_tensor(out, make(n, dt, R))
      local want = {}
      for r = 0, N - 1 do
        for i = 0, n - 1 do want[#want + 1] = value(dt, i, r) end
      end
      check(out, want, dt, ("all_gather_into_tensor %s n=%d"):format(dt, n))
    end
  end
end)

case("all_gather_into_tensor: input is this rank's slot of the output (in place)", function()
  local n = 7
  local out = ms.zeros(N * n)
  out:narrow(1, R * n + 1, n):copy_(make(n, "float32", R))
  dist.all_gather_into_tensor(out, out:narrow(1, R * n + 1, n))
  local want = {}
  for r = 0, N - 1 do
    for i = 0, n - 1 do want[#want + 1] = value("float32", i, r) end
  end
  check(out, want, "float32", "in-place slot")
end)

case("reduce_scatter_tensor: every dtype and op", function()
  for _, dt in ipairs(DTYPES) do
    for _, op in ipairs(OPS) do
      if valid(dt, op) then
        for _, n in ipairs({1, 7}) do
          local out = ms.zeros(n, {dtype = dt})
          dist.reduce_scatter_tensor(out, make(N * n, dt, R), {op = op})
          check(out, want_reduced(n, dt, op, R * n), dt, ("reduce_scatter %s %s n=%d"):format(dt, op, n))
        end
      end
    end
  end
end)

case("reduce_scatter_tensor: 1001 elements per rank, avg", function()
  local out = ms.zeros(1001, {dtype = "float64"})
  dist.reduce_scatter_tensor(out, make(N * 1001, "float64", R), {op = "avg"})
  check(out, want_reduced(1001, "float64", "avg", R * 1001), "float64", "reduce_scatter 1001")
end)

-- Non-integer values, where the order of the sums shows in the last bits: every rank builds every
-- rank's input from its seed, so each knows the float64 sum of its shard. Odd sizes (not a
-- multiple of any vector width), large enough to take several messages.
case("reduce_scatter_tensor: random floats, odd sizes: near the exact sum, the same bits every call", function()
  for _, n in ipairs({3, 4099, 100003}) do
    local inputs = {}
    for r = 0, N - 1 do
      ms.manual_seed(1000 + r)
      inputs[r + 1] = ms.randn(N * n)
    end
    local exact = ms.zeros(n, {dtype = "float64"})
    for r = 1, N do exact:add_(inputs[r]:narrow(1, R * n + 1, n):double()) end
    local out, again = ms.zeros(n), ms.zeros(n)
    dist.reduce_scatter_tensor(out, inputs[R + 1]:clone())
    dist.reduce_scatter_tensor(again, inputs[R + 1]:clone())
    T.truthy((out:double() - exact):abs():max():item() <= 1e-5 * N, ("n=%d: near the float64 sum"):format(n))
    T.truthy(out:equal(again), ("n=%d: the same bits on a second call"):format(n))
    -- the output inside the input (its own slot): read before written, same result
    local inplace = inputs[R + 1]:clone()
    local slot = inplace:narrow(1, R * n + 1, n)
    dist.reduce_scatter_tensor(slot, inplace)
    T.truthy(slot:equal(out), ("n=%d: output in the input's own slot"):format(n))
  end
end)

-- 16-bit floats travel as they are and are summed in float32 on arrival, in the fixed order
-- piece 1 + (piece 2 + (... + piece N)), then rounded once: bit for bit the float32 sum of the
-- widened pieces, rounded (what widening the whole input before sending gave, at twice the bytes).
case("reduce_scatter_tensor: bfloat16 and float16 sum in float32 and round once, bit for bit", function()
  for _, dt in ipairs({"bfloat16", "float16"}) do
    for _, n in ipairs({1, 4099, 100003}) do
      local inputs = {}
      for r = 0, N - 1 do
        ms.manual_seed(2000 + r)
        inputs[r + 1] = ms.randn(N * n):to(dt)
      end
      local function piece(r) return inputs[r]:narrow(1, R * n + 1, n):float() end
      local acc = piece(N)
      for r = N - 1, 1, -1 do acc = piece(r) + acc end
      for _, op in ipairs({"sum", "avg"}) do
        local out = ms.zeros(n, {dtype = dt})
        dist.reduce_scatter_tensor(out, inputs[R + 1]:clone(), {op = op})
        local want = (op == "avg" and acc / N or acc):to(dt)
        T.truthy(out:equal(want), ("%s %s n=%d: the rounded float32 sum"):format(dt, op, n))
      end
    end
  end
end)

case("broadcast: every dtype from every source", function()
  for _, dt in ipairs(DTYPES) do
    for src = 0, N - 1 do
      local t = make(1001, dt, R)
      dist.broadcast(t, {src = src})
      local want = {}
      for i = 0, 1000 do want[i + 1] = value(dt, i, src) end
      check(t, want, dt, ("broadcast %s src=%d"):format(dt, src))
    end
  end
end)

case("reduce: to every destination", function()
  for _, dt in ipairs({"float32", "bfloat16", "int64", "bool"}) do
    for dst = 0, N - 1 do
      local t = make(7, dt, R)
      dist.reduce(t, {dst = dst, op = dt == "bool" and "max" or "sum"})
      if R == dst then check(t, want_reduced(7, dt, dt == "bool" and "max" or "sum"), dt, "reduce " .. dt) end
    end
  end
end)

case("all_gather into a list", function()
  local list = {}
  for r = 1, N do list[r] = ms.zeros(7, {dtype = "int32"}) end
  dist.all_gather(list, make(7, "int32", R))
  for r = 0, N - 1 do
    local want = {}
    for i = 0, 6 do want[i + 1] = value("int32", i, r) end
    check(list[r + 1], want, "int32", "all_gather list " .. r)
  end
end)

case("barrier", function()
  dist.barrier()
  dist.barrier({async_op = true}):wait()
end)

case("async handles, several in flight", function()
  local a, b = make(1001, "float32", R), make(7, "bfloat16", R)
  local out = ms.zeros(N * 7, {dtype = "int64"})
  local rs = ms.zeros(7, {dtype = "float16"})
  local bc = make(7, "uint8", R)
  local list = {}
  for r = 1, N do list[r] = ms.zeros(7) end
  local works = {
    dist.all_reduce(a, {op = "avg", async_op = true}),
    dist.all_reduce(b, {op = "max", async_op = true}),
    dist.all_gather_into_tensor(out, make(7, "int64", R), {async_op = true}),
    dist.reduce_scatter_tensor(rs, make(N * 7, "float16", R), {op = "sum", async_op = true}),
    dist.broadcast(bc, {src = N - 1, async_op = true}),
    dist.all_gather(list, make(7, "float32", R), {async_op = true}),
  }
  for k = #works, 1, -1 do T.eq(works[k]:wait(), true) end -- any order
  for _, w in ipairs(works) do T.eq(w:is_completed(), true) end
  check(a, want_reduced(1001, "float32", "avg"), "float32", "async avg")
  check(b, want_reduced(7, "bfloat16", "max"), "bfloat16", "async max")
  check(rs, want_reduced(7, "float16", "sum", R * 7), "float16", "async reduce_scatter")
  local want = {}
  for i = 0, 6 do want[i + 1] = value("uint8", i, N - 1) end
  check(bc, want, "uint8", "async broadcast")
  check(list[N], (function()
    local w = {}
    for i = 0, 6 do w[i + 1] = value("float32", i, N - 1) end
    return w
  end)(), "float32", "async all_gather list")
end)

case("is_completed polls without blocking", function()
  local t = make(7, "float32", R)
  local w = dist.all_reduce(t, {async_op = true})
  local polls = 0
  while not w:is_completed() do polls = polls + 1 end
  check(t, want_reduced(7, "float32", "sum"), "float32", "polled")
end)

case("subgroups: members reduce among themselves, others do nothing", function()
  -- given in reverse: group ranks follow sorted world ranks, as in PyTorch
  local g = dist.new_group(N == 1 and {0} or {N - 1, 0})
  local members = N == 1 and {0} or {0, N - 1}
  local me = R == 0 and 0 or (R == N - 1 and #members - 1) or -1
  T.eq(dist.get_rank(g), me)
  T.eq(g:size(), #members)
  T.same(dist.get_process_group_ranks(g), members)
  local t = ms.full({5}, R + 1.0)
  dist.all_reduce(t, {group = g})
  local sum = 0
  for _, r in ipairs(members) do sum = sum + r + 1 end
  T.same(t:tolist(), me >= 0 and {sum, sum, sum, sum, sum} or {R + 1, R + 1, R + 1, R + 1, R + 1})
  -- src is a world rank, as in PyTorch
  local b = ms.full({3}, R + 0.0)
  dist.broadcast(b, {src = N - 1, group = g})
  T.same(b:tolist(), me >= 0 and {N - 1, N - 1, N - 1} or {R, R, R})
  local out = ms.zeros(#members * 2)
  dist.all_gather_into_tensor(out, ms.full({2}, R + 0.0), {group = g})
  if me >= 0 then
    local want = {}
    for _, r in ipairs(members) do want[#want + 1], want[#want + 2] = r, r end
    T.same(out:tolist(), want)
  end
  dist.barrier({group = g})
  if me < 0 then T.eq(dist.all_reduce(t, {group = g, async_op = true}):wait(), true) end
end)

case("subgroups: the even ranks, async, then everyone again", function()
  local evens = {}
  for r = 0, N - 1, 2 do evens[#evens + 1] = r end
  local g = dist.new_group(evens)
  local t = ms.ones(1001, {dtype = "int64"})
  if R % 2 == 0 then
    dist.all_reduce(t, {group = g, async_op = true}):wait()
    T.eq(t:tolist()[1001], #evens)
  end
  local all = dist.new_group() -- every rank
  T.eq(all:size(), N)
  local u = ms.ones(3)
  dist.all_reduce(u, {group = all})
  T.eq(u:tolist()[3], N + 0.0)
end)

case("errors are precise and raised on every rank before any communication", function()
  T.raises(function() dist.all_reduce(ms.zeros(2, 3):t()) end, "all_reduce: tensor must be contiguous")
  T.raises(function() dist.reduce_scatter_tensor(ms.zeros(4), ms.zeros(N * 4 + 2)) end,
    ("reduce_scatter_tensor: input has %d elements, expected world_size (%d) x output (4) = %d")
      :format(N * 4 + 2, N, N * 4))
  T.raises(function() dist.all_gather_into_tensor(ms.zeros(N * 2 + 1), ms.zeros(2)) end,
    ("all_gather_into_tensor: output has %d elements, expected world_size (%d) x input (2) = %d")
      :format(N * 2 + 1, N, N * 2))
  T.raises(function() dist.broadcast(ms.ones(2), {src = N}) end, ("src %d is not a rank of the group"):format(N))
  T.raises(function() dist.init_process_group("mpi") end, "already initialized")
  -- still in step after the errors
  local t = ms.ones(2)
  dist.all_reduce(t)
  T.eq(t:tolist()[1], N + 0.0)
end)

case("new_group: ranks that pass different lists all get the same error", function()
  if N == 1 then return end
  T.raises(function() dist.new_group(R == 1 and {0, 1} or {0}) end,
    "new_group: ranks disagree on the group: rank 0 passed 1 ranks, rank 1 passed 2")
  T.raises(function() dist.new_group(R == 1 and {1} or {0}) end, "rank 1 passed 1 different ones")
  local g = dist.new_group({0, 1}) -- still in step
  T.eq(g:size(), 2)
end)

if DEBUG then
  case("MS_DIST_DEBUG: a count mismatch names both sides on every rank", function()
    if N == 1 then return end
    local t = ms.ones(R == 1 and 8 or 7)
    local err = T.raises(function() dist.all_reduce(t) end, "MS_DIST_DEBUG", "rank 0 called all_reduce(float32, 7 elements",
      "rank 1 called all_reduce(float32, 8 elements")
    T.truthy(err:find("ranks disagree", 1, true), err)
  end)
  case("MS_DIST_DEBUG: different collectives and dtypes", function()
    if N == 1 then return end
    local err = T.raises(function()
      if R == N - 1 then dist.barrier() else dist.all_reduce(ms.ones(3, {dtype = "int32"})) end
    end, "MS_DIST_DEBUG", "rank 0 called all_reduce(int32, 3 elements, op sum", ("rank %d called barrier"):format(N - 1))
    err = T.raises(function()
      dist.broadcast(ms.ones(3, {dtype = R == 0 and "float64" or "float32"}), {src = 0})
    end, "rank 0 called broadcast(float64", "rank 1 called broadcast(float32")
  end)
  case("MS_DIST_DEBUG: agreeing calls pass, and the ranks are in step after errors", function()
    local t = ms.ones(7)
    dist.all_reduce(t)
    T.eq(t:tolist()[7], N + 0.0)
  end)
end

-- ---- summary: reached only when every rank passed every case ---------------------------------

local done = ms.tensor({#names}, {dtype = "int64"})
dist.all_reduce(done, {op = "min"}) -- every rank ran every case
if R == 0 then print(("%d passed, %d failed"):format(done:tolist()[1], #names - done:tolist()[1])) end
dist.destroy_process_group()
os.exit(done:tolist()[1] == #names and 0 or 1)
