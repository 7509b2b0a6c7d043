-- dist_fsdp_state.lua: FSDP state dicts across the ranks of an mpirun launch (registered for
-- 1..4 ranks, with and without MS_DIST_DEBUG=1): full state dicts after training equal one
-- process and load into the unwrapped model (rank0_only, offload_to_cpu, streamed one unit at
-- a time within the memory bound), sharded state dicts in memory, sharded checkpoints saved on
-- W ranks (and on sub-groups of 2) loading onto every sub-group size 1..W, other wrappings and
-- the unwrapped model, the state_dict_type scope, and precise errors for bad checkpoints.
-- Every rank runs every case in the same order; a failed case ends the launch.
local ms = require "moonshard"
local nn = require "moonshard.nn"
local F = require "moonshard.functional"
local optim = require "moonshard.optim"
local fsdp = require "moonshard.fsdp"
local Net = require "moonshard.seed_net"
local T = require "testing"
local dist = ms.distributed

local D = require "launch_testing"
local R, W = D.init()

local case = D.case

-- ---- models, data, one-process reference ---------------------------------------------------------

local Small = D.Small

local BATCH = 12 -- divisible by every world size 1..4

local function batch(shape, dtype)
  ms.manual_seed(7)
  local x = ms.randn(BATCH, table.unpack(shape))
  local y = ms.randint(1, 6, {BATCH})
  return dtype and x:to(dtype) or x, y
end

-- `steps` Adadelta steps on the whole batch, or on this rank's slice of it (of `size` ranks).
local function train(model, shape, steps, rank, size, dtype)
  local x, y = batch(shape, dtype)
  if size then
    local b = BATCH // size
    x, y = x:narrow(1, rank * b + 1, b), y:narrow(1, rank * b + 1, b)
  end
  local opt = optim.Adadelta(model:parameters(), {lr = 1.0})
  for _ = 1, steps do
    opt:zero_grad()
    F.nll_loss(model(x), y, {reduction = "mean"}):backward()
    opt:step()
  end
end

local SMALL = {1, 8, 8}

local function fresh(make, dtype)
  ms.manual_seed(1)
  local m = make()
  if dtype then m:to(dtype) end
  m:eval() -- dropout off
  return m
end

local function reference(make, shape, steps, dtype)
  local m = fresh(make, dtype)
  train(m, shape, steps, nil, nil, dtype)
  return m:state_dict()
end

local check_state = D.check_state

local function count(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

local LINEAR_UNITS = fsdp.ModuleWrapPolicy{nn.Linear}

-- Small wrapped with each Linear its own unit, trained 20 steps on W ranks: its full state dict
-- is what the sharded checkpoints below must reproduce.
local small_ref = reference(Small, SMALL, 20)
local trained = fsdp.FSDP(fresh(Small), {auto_wrap_policy = LINEAR_UNITS})
train(trained, SMALL, 20, R, W)

-- A directory every rank names alike: rank 0 draws a number and broadcasts it.
local function shared_dir(tag)
  local n = ms.tensor({R == 0 and math.random(1, 1 << 40) + os.time() or 0}, {dtype = "int64"})
  dist.broadcast(n, {src = 0})
  local dir = ("/tmp/ms_fsdp_state_%s_%d"):format(tag, n:tolist()[1])
  if R == 0 then assert(os.execute("mkdir -p '" .. dir .. "'")) end
  dist.barrier()
  return dir
end
local dirs = {}

-- ---- FULL state dicts -----------------------------------------------------------------------------

case(("full state dict after 20 steps on %d ranks equals one process, and loads into the unwrapped model"):format(W),
  function()
    local sd = trained:state_dict()
    check_state(sd, small_ref, 1e-5, "full")
    local dir = shared_dir("full")
    dirs[#dirs + 1] = dir
    local only = trained:state_dict{rank0_only = true, offload_to_cpu = true}
    if R == 0 then
      check_state(only, small_ref, 1e-5, "rank0_only")
      ms.save(only, dir .. "/full.safetensors")
    else
      T.eq(count(only), 0, "rank0_only: entries on rank " .. R)
    end
    dist.barrier()
    local plain = Small()
    plain:load_state_dict(ms.load(dir .. "/full.safetensors"))
    check_state(plain:state_dict(), small_ref, 1e-5, "unwrapped after load")
  end)

case(("the seed's Net with the 20000 policy: 3 float64 steps on %d ranks, full state dict into the unwrapped Net"):format(W),
  function()
    local ref = reference(Net, {1, 28, 28}, 3, "float64")
    local model = fsdp.FSDP(fresh(Net, "float64"), {auto_wrap_policy = fsdp.size_based_auto_wrap_policy{min_num_params = 20000}})
    train(model, {1, 28, 28}, 3, R, W, "float64")
    local net = fresh(Net, "float64")
    net:load_state_dict(model:state_dict{rank0_only = false})
    check_state(net:state_dict(), ref, 1e-10, "seed Net")
  end)

-- Streaming: saving holds at most one unit's full buffer on top of the shards, plus the copies
-- it returns (FULL_SHARD: nothing is gathered at rest).
local function live()
  collectgarbage()
  collectgarbage()
  return ms.memory_stats().current
end

local function unit_bytes(model, elt)
  local largest, sum = 0, 0
  for _, m in ipairs(model:modules()) do
    local fp = m:isinstance(fsdp.FullyShardedDataParallel) and m._attrs._flat
    if fp then
      largest = math.max(largest, fp:info().padded * elt)
      sum = sum + fp:info().padded * elt
    end
  end
  return largest, sum
end

case("a full state dict is gathered one unit at a time (memory statistics)", function()
  local model = fsdp.FSDP(fresh(Net), {auto_wrap_policy = fsdp.size_based_auto_wrap_policy{min_num_params = 20000}})
  local largest, sum = unit_bytes(model, 4)
  for _, rank0_only in ipairs({false, true}) do
    local before = live()
    ms.reset_peak_memory_stats()
    local sd = model:state_dict{rank0_only = rank0_only}
    local peak = ms.memory_stats().peak - before
    local copies = 0
    for _, t in pairs(sd) do copies = copies + t:numel() * 4 end
    local bound = largest + copies
    T.truthy(peak <= bound, ("rank0_only=%s: peak %d bytes over the shards, bound %d (largest unit %d, copies %d)")
      :format(rank0_only, peak, bound, largest, copies))
    if W > 1 then T.truthy(peak < sum + copies, "more than one unit was gathered at once") end
    sd = nil
  end
end)

case("state_dict_type scope: SHARDED inside, FULL again after; bad types and options are named", function()
  do
    local _ <close> = fsdp.state_dict_type(trained, "SHARDED_STATE_DICT")
    local sd = trained:state_dict()
    T.truthy(type(sd["fc1.weight"]) == "table" and ms.is_tensor(sd["fc1.weight"].tensor), "SHARDED inside the scope")
    local nested = trained._fsdp_wrapped_module._fpw_module.fc1
    T.eq(nested._attrs._state_dict_type.type, "SHARDED", "the scope reaches nested units")
  end
  T.truthy(ms.is_tensor(trained:state_dict()["fc1.weight"]), "FULL after the scope")
  do
    local _ <close> = fsdp.state_dict_type(trained, fsdp.StateDictType.FULL_STATE_DICT, {rank0_only = true})
    T.eq(count(trained:state_dict()), R == 0 and 6 or 0, "rank0_only from the scope's config")
  end
  T.raises(function() fsdp.state_dict_type(trained, "LOCAL_STATE_DICT") end, "state_dict_type", "LOCAL_STATE_DICT",
    "not supported yet")
  T.raises(function() fsdp.state_dict_type(trained, "FULL_STATEDICT") end, "state_dict_type", "FULL_STATE_DICT",
    "got 'FULL_STATEDICT'")
  T.raises(function() fsdp.state_dict_type(trained, "SHARDED_STATE_DICT", {rank0_only = true}) end,
    "state_dict_type (SHARDED state dict): unknown option 'rank0_only' (expected one of: offload_to_cpu)")
  T.raises(function() trained:state_dict{rank0only = true} end,
    "state_dict: unknown option 'rank0only' (expected one of: keep_vars, offload_to_cpu, prefix, rank0_only, ")
  T.raises(function() trained:load_state_dict({}, {stict = true}) end,
    "load_state_dict: unknown option 'stict' (expected one of: offload_to_cpu, rank0_only, state_dict_type, strict)")
  T.raises(function() fsdp.state_dict_type(Small(), "FULL_STATE_DICT") end, "expected an FSDP module")
end)

-- ---- SHARDED ----------------------------------------------------------------------------------------

case("a sharded state dict holds this rank's pieces under the original names and loads back", function()
  local sd = trained:state_dict{state_dict_type = "SHARDED"}
  local total = 0
  for name, e in pairs(sd) do
    T.truthy(small_ref[name] ~= nil, "original name " .. name)
    T.eq(table.concat(e.shape, ","), table.concat(small_ref[name].shape, ","), "global shape of " .. name)
    T.eq(e.dtype, "float32")
    if e.tensor:numel() > 0 then
      local want = small_ref[name]:reshape(-1):narrow(1, e.offset + 1, e.tensor:numel())
      T.truthy((e.tensor - want):abs():max():item() <= 1e-5 * math.max(small_ref[name]:abs():max():item(), 1e-6),
        "piece of " .. name)
    end
    total = total + e.tensor:numel()
  end
  local all = ms.tensor({total}, {dtype = "int64"})
  dist.all_reduce(all)
  local n = 0
  for _, t in pairs(small_ref) do n = n + t:numel() end
  T.eq(all:tolist()[1], n, "the pieces of all ranks cover every element once")
  local again = fsdp.FSDP(fresh(Small), {auto_wrap_policy = LINEAR_UNITS})
  again:load_state_dict(sd, {state_dict_type = "SHARDED"})
  check_state(again:state_dict(), trained:state_dict(), 0, "sharded load_state_dict")
end)

local ckpt = shared_dir("sharded")
dirs[#dirs + 1] = ckpt

case(("save_sharded on %d ranks: one file per rank and an index"):format(W), function()
  fsdp.save_sharded(trained, ckpt)
  local f = assert(io.open(ckpt .. "/index.json"))
  local idx = ms._json_decode(f:read("a"))
  f:close()
  T.eq(#idx.files, W)
  for r = 0, W - 1 do
    local name = ("shard-%05d-of-%05d.%s.safetensors"):format(r, W, idx.save_id)
    T.eq(idx.files[r + 1].name, name)
    T.eq(ms._file_size(ckpt .. "/" .. name), idx.files[r + 1].size, "file of rank " .. r)
  end
  T.eq(idx.world_size, W)
  T.eq(#idx.entries, 6)
  local got = {}
  for _, e in ipairs(idx.entries) do
    local n = 0
    for _, p in ipairs(e.pieces) do n = n + p.numel end
    T.eq(n, small_ref[e.name]:numel(), "pieces of " .. e.name .. " cover it once")
    got[#got + 1] = e.name .. " " .. table.concat(e.shape, "x")
  end
  T.same(got, {"conv.weight 4x1x3x3", "conv.bias 4", "fc1.weight 16x144", "fc1.bias 16", "fc2.weight 5x16", "fc2.bias 5"})
end)

case("a sharded checkpoint loads into the unwrapped model and into other wrappings", function()
  local want = trained:state_dict()
  local plain = Small()
  fsdp.load_sharded(plain, ckpt)
  check_state(plain:state_dict(), want, 0, "unwrapped")
  for _, how in ipairs({{sharding_strategy = "NO_SHARD"}, {sharding_strategy = "SHARD_GRAD_OP"},
                        {auto_wrap_policy = fsdp.size_based_auto_wrap_policy{min_num_params = 100}}}) do
    local model = fsdp.FSDP(Small(), how)
    fsdp.load_sharded(model, ckpt)
    check_state(model:state_dict(), want, 0, "wrapped " .. (how.sharding_strategy or "by size"))
    -- the shards hold the loaded values: a forward uses them
    local x = batch(SMALL)
    local _ <close> = ms.no_grad()
    T.truthy((model(x) - plain(x)):abs():max():item() < 1e-5, "forward after load_sharded")
  end
end)

case("NO_SHARD saves each element once (rank 0 holds them all) and loads back unwrapped", function()
  local want = trained:state_dict()
  local model = fsdp.FSDP(Small(), {sharding_strategy = "NO_SHARD"})
  fsdp.load_sharded(model, ckpt)
  local dir = shared_dir("noshard")
  dirs[#dirs + 1] = dir
  fsdp.save_sharded(model, dir)
  local f = assert(io.open(dir .. "/index.json"))
  local idx = ms._json_decode(f:read("a"))
  f:close()
  for _, e in ipairs(idx.entries) do
    T.eq(#e.pieces, 1, "pieces of " .. e.name)
    T.eq(e.pieces[1].file, 0, "file of " .. e.name)
  end
  local plain = Small()
  fsdp.load_sharded(plain, dir)
  check_state(plain:state_dict(), want, 0, "NO_SHARD round trip")
end)

-- Members of the first `size` ranks wrap a fresh Small over that sub-group and load `dir`.
local function load_on_subgroups(dir, want, what)
  for size = 1, W do
    local ranks = {}
    for r = 0, size - 1 do ranks[#ranks + 1] = r end
    local g = dist.new_group(ranks) -- every rank calls new_group
    if R < size then
      local model = fsdp.FSDP(Small(), {auto_wrap_policy = LINEAR_UNITS, process_group = g})
      fsdp.load_sharded(model, dir)
      check_state(model:state_dict(), want, 0, ("%s, loaded on %d ranks"):format(what, size))
    end
    dist.barrier()
  end
end

case(("a checkpoint saved on %d ranks loads on every world size 1..%d"):format(W, W), function()
  load_on_subgroups(ckpt, trained:state_dict(), ("saved on %d"):format(W))
end)

case("a checkpoint saved on 2 ranks loads on 1..W (a sub-group of 2 saves)", function()
  if W < 2 then return end
  local want = trained:state_dict()
  local dir = shared_dir("two")
  dirs[#dirs + 1] = dir
  local g = dist.new_group({0, 1})
  if R < 2 then
    local model = fsdp.FSDP(Small(), {auto_wrap_policy = fsdp.size_based_auto_wrap_policy{min_num_params = 100},
      process_group = g})
    model:load_state_dict(want)
    fsdp.save_sharded(model, dir)
  end
  dist.barrier()
  load_on_subgroups(dir, want, "saved on 2")
end)

case("bad checkpoints: missing directory or index, names and shapes that do not match", function()
  T.raises(function() fsdp.load_sharded(Small(), ckpt .. "/nope") end, "load_sharded", "nope", "does not exist")
  T.raises(function() fsdp.save_sharded(trained, ckpt .. "/nope") end, "save_sharded", "nope", "does not exist")
  T.raises(function() fsdp.load_sharded(Small(), "/tmp") end, "load_sharded", "no index at '/tmp/index.json'")
  T.raises(function() fsdp.load_sharded(Small(8), ckpt) end, "load_sharded", "shape of 'fc1.weight' differs",
    "has (16, 144)", "the model expects (8, 144)")
  local bigger = Small()
  bigger.extra = nn.Linear(2, 2)
  T.raises(function() fsdp.load_sharded(bigger, ckpt) end, "load_sharded", "'extra.weight' is in the model but not in")
  local Smaller = nn.Module:extend("Smaller")
  function Smaller:init()
    self.conv = nn.Conv2d(1, 4, 3, 1)
    self.fc1 = nn.Linear(144, 16)
  end
  local smaller = Smaller()
  T.raises(function() fsdp.load_sharded(smaller, ckpt) end, "load_sharded", "has 'fc2.bias', which the model does not have")
  local r = fsdp.load_sharded(bigger, ckpt, {strict = false})
  T.same(r.missing_keys, {"extra.weight", "extra.bias"})
  -- an index whose piece runs past its tensor is refused before anything is read
  local bad = shared_dir("bad")
  dirs[#dirs + 1] = bad
  if R == 0 then
    local text = '{"format":"moonshard.fsdp.sharded","version":2,"index_crc32":"00000000","save_id":"1-2",'
      .. '"world_size":1,"files":[{"name":"shard-00000-of-00001.1-2.safetensors","size":0,"crc32":0}],'
      .. '"entries":[{"name":"fc2.bias","kind":"param","dtype":"float32","shape":[5],"pieces":[{"file":0,'
      .. '"key":"fc2.bias","offset":3,"numel":4}]}]}'
    T.write_file(bad .. "/index.json", (text:gsub("00000000", ("%08x"):format(ms._crc32(text)), 1)))
  end
  dist.barrier()
  T.raises(function() fsdp.load_sharded(Small(), bad) end, "load_sharded", "entry 1 ('fc2.bias') is malformed",
    "inside its 5 elements")
  T.raises(function() trained:load_state_dict({["fc1.weight"] = 1}, {state_dict_type = "SHARDED"}) end,
    "load_state_dict", "SHARDED state dict maps names to {tensor =")
end)

-- ---- memory_report ---------------------------------------------------------------------------------

local function held_bytes()
  collectgarbage()
  collectgarbage()
  local c = ms.memory_stats().by_category
  return c.params + c.grads + c.optimizer
end

case("memory_report: the engine's byte counts, the planned gathered peak, printable, printed by verbose = true", function()
  local before = held_bytes()
  local printed = {}
  local print0 = print
  print = function(...) printed[#printed + 1] = table.concat({...}, "\t") end -- luacheck: ignore
  local ok, model = pcall(fsdp.FSDP, fresh(Small), {auto_wrap_policy = LINEAR_UNITS, verbose = true})
  print = print0 -- luacheck: ignore
  assert(ok, model)
  T.eq(#printed, R == 0 and 1 or 0, "reports printed at wrap time on rank " .. R)
  local x, y = batch(SMALL)
  local opt = optim.Adadelta(model:parameters(), {lr = 1.0})
  F.nll_loss(model(x), y):backward()
  opt:step()
  local rep = fsdp.memory_report(model, opt)
  T.eq(held_bytes() - before, rep.params_bytes + rep.grads_bytes + rep.optimizer_bytes, "bytes held")
  local piece_numel = 0 -- the optimizer's parameters are the pieces: the shards less padding
  for _, p in ipairs(model:parameters()) do piece_numel = piece_numel + p:numel() end
  T.eq(rep.optimizer_bytes, 2 * 4 * piece_numel, "Adadelta keeps two states a piece element")
  T.eq(rep.params_bytes, 4 * rep.shard_numel)
  -- the worst moment: a Linear unit inside the root (both gathered)
  local function padded(n) return (n + W - 1) // W * W end
  T.eq(rep.peak_gathered_bytes, 4 * (padded(4 * 9 + 4) + padded(144 * 16 + 16)), "planned peak")
  T.eq(rep.rank, R)
  local text = tostring(rep)
  for _, want in ipairs({("rank %d of %d: 3 units"):format(R, W), "sharded parameters", "gradients", "optimizer state",
                         "gathered units", tostring(rep.peak_gathered_bytes) .. " bytes"}) do
    T.truthy(text:find(want, 1, true), ("report lacks %q:\n%s"):format(want, text))
  end
  local function plan(t) return t:match("^(.-)\n  cache bound") end -- the measured lines differ by the moment
  if R == 0 then T.eq(plan(printed[1]), plan(tostring(fsdp.memory_report(fsdp.FSDP(fresh(Small),
    {auto_wrap_policy = LINEAR_UNITS})))), "the verbose report") end
  T.truthy(not tostring(fsdp.memory_report(model)):find("optimizer", 1, true), "no optimizer line without an optimizer")
end)

-- ---- summary: reached only when every rank passed every case ---------------------------------

dist.barrier()
if R == 0 then
  for _, d in ipairs(dirs) do os.execute("rm -rf '" .. d .. "'") end
end
D.finish("dist_fsdp_state")
