-- dist_fsdp_resume.lua: fsdp.save_checkpoint / load_checkpoint on 1..4 ranks with a tiny GPT
-- (dropout 0.1, a unit per Block), AdamW in two groups and a cosine schedule, each rank drawing its
-- own batches from its own generator. A run saved after step 3 and resumed on fresh objects gives
-- steps 4..6 (losses on every rank, final parameters) bit-identical to the uninterrupted run
-- (FULL_SHARD, SHARD_GRAD_OP). A checkpoint saved on the first N ranks loads onto the first M
-- (every N != M up to the world size, and unwrapped onto every rank): the model and the
-- optimizer state, gathered to full views, equal the saved ones exactly, and training goes on.
-- HYBRID_SHARD (pairs of ranks shard, the pairs replicate) resumes bit-identically too, and its
-- checkpoint loads onto FULL_SHARD.
local ms = require "moonshard"
local fsdp = require "moonshard.fsdp"
local gpt = require "moonshard.models.gpt"
local T = require "testing"
local RT = require "resume_testing"

local D = require "launch_testing"
local R, W = D.init()
local case = D.case
local dist = ms.distributed

-- A directory every rank names alike (rank 0's random number), made by rank 0.
local dirs = {}
local function shared_dir(tag)
  local n = ms.tensor({ R == 0 and ms._os_random_int() & 0xffffffffff or 0 }, { dtype = "int64" })
  dist.broadcast(n, { src = 0 })
  local dir = ("/tmp/ms_fsdp_resume_%s_%d"):format(tag, n:tolist()[1])
  dirs[#dirs + 1] = dir
  return dir
end

local function wrapped(strategy, group)
  return fsdp.FSDP(RT.model(), { sharding_strategy = strategy, auto_wrap_policy = fsdp.ModuleWrapPolicy{ gpt.Block },
    process_group = group })
end

-- A run whose ranks' generators differ (each its own batches and dropout masks).
local function start(model)
  local run = RT.run(model)
  ms.manual_seed(100 + R)
  return run
end

for _, strategy in ipairs({ "FULL_SHARD", "SHARD_GRAD_OP" }) do
  case(strategy .. ": resuming at step 3 gives steps 4..6 bit-identical to the uninterrupted run", function()
    local full = start(wrapped(strategy))
    local losses = {}
    for i = 1, RT.STEPS do losses[i] = RT.step(full) end
    local want = RT.params(full.model)

    local first = start(wrapped(strategy))
    for i = 1, 3 do T.eq(RT.step(first), losses[i], "loss of step " .. i) end
    local root = shared_dir("resume")
    fsdp.save_checkpoint(root, { model = first.model, optimizer = first.opt, scheduler = first.sched, step = 3,
      extra = { rank_count = W } })

    local run = RT.run(fsdp.FSDP(RT.model(99), { sharding_strategy = strategy,
      auto_wrap_policy = fsdp.ModuleWrapPolicy{ gpt.Block } }))
    ms.manual_seed(5)
    local step, extra = fsdp.load_checkpoint(root, { model = run.model, optimizer = run.opt, scheduler = run.sched })
    T.eq(step, 3)
    T.eq(extra.rank_count, W)
    for i = 4, RT.STEPS do T.eq(RT.step(run), losses[i], ("loss of step %d on rank %d"):format(i, R)) end
    RT.check_identical(RT.params(run.model), want, strategy .. " final parameters")
  end)
end

-- The model's and the optimizer's full views (collectives over the model's group).
local function full_views(run)
  local out = RT.params(run.model)
  local osd = fsdp.optim_state_dict(run.model, run.opt)
  for name, s in pairs(osd.state) do
    for k, v in pairs(s) do
      out["optim:" .. name .. ":" .. k] = ms.is_tensor(v) and v:clone() or ms.tensor({ v }, { dtype = "float64" })
    end
  end
  for gi, g in ipairs(osd.param_groups) do
    out["group" .. gi .. ".lr"] = ms.tensor({ g.lr }, { dtype = "float64" })
    out["group" .. gi .. ".weight_decay"] = ms.tensor({ g.weight_decay }, { dtype = "float64" })
    out["group" .. gi .. ".params"] = ms.tensor({ #g.params }, { dtype = "float64" })
  end
  return out
end

-- Saves on the first n ranks (after 2 steps), returns the root and the saved full views (on those
-- ranks); every rank calls it.
local function save_on(n, strategy)
  local root = shared_dir("n" .. n)
  local ranks = {}
  for r = 0, n - 1 do ranks[#ranks + 1] = r end
  local g = dist.new_group(ranks)
  local saved
  if R < n then
    local run = start(wrapped(strategy, g))
    RT.step(run)
    RT.step(run)
    fsdp.save_checkpoint(root, { model = run.model, optimizer = run.opt, scheduler = run.sched, step = 2 })
    saved = full_views(run)
  end
  dist.barrier()
  return root, saved
end


local function load_on(m, root, strategy)
  local ranks = {}
  for r = 0, m - 1 do ranks[#ranks + 1] = r end
  local g = dist.new_group(ranks)
  local views
  if R < m then
    local run = RT.run(fsdp.FSDP(RT.model(77), { sharding_strategy = strategy,
      auto_wrap_policy = fsdp.ModuleWrapPolicy{ gpt.Block }, process_group = g }))
    T.eq(fsdp.load_checkpoint(root, { model = run.model, optimizer = run.opt, scheduler = run.sched }), 2)
    views = full_views(run)
    RT.step(run) -- training goes on after a reshard
  end
  dist.barrier()
  return views
end

-- Rank 0 compares (it holds both the saved and the loaded full views).
local function compare(got, want, what)
  if R == 0 then
    local n = RT.check_identical(got, want, what)
    T.truthy(n > 20, what .. ": entries compared " .. n)
  end
end

local STRATEGY = { "FULL_SHARD", "SHARD_GRAD_OP" }
for n = 1, W do
  for m = 1, W do
    if n ~= m then
      case(("saved on %d ranks, loaded on %d: model and optimizer state equal the saved ones"):format(n, m), function()
        local strategy = STRATEGY[(n + m) % 2 + 1]
        local root, saved = save_on(n, strategy)
        local got = load_on(m, root, STRATEGY[(n + m + 1) % 2 + 1])
        compare(got, saved, ("%d -> %d ranks"):format(n, m))
      end)
    end
  end
end

case(("saved on %d ranks, loaded unwrapped on every rank"):format(W), function()
  local root, saved = save_on(W, "FULL_SHARD")
  local run = RT.run(RT.model(55))
  T.eq(fsdp.load_checkpoint(root, { model = run.model, optimizer = run.opt, scheduler = run.sched }), 2)
  local got = full_views(run)
  compare(got, saved, ("%d ranks -> unwrapped"):format(W))
  T.eq(run.sched.last_epoch, 2)
  RT.step(run)
end)

-- HYBRID_SHARD with explicit groups: consecutive pairs shard, the ranks at one position in the
-- pairs replicate (every rank creates every group, in the same order). Each piece is saved once,
-- by the first replica, and a checkpoint of it loads onto FULL_SHARD over the whole world.
local function hybrid_groups()
  local intra, inter
  for p = 0, W // 2 - 1 do
    local g = dist.new_group({ 2 * p, 2 * p + 1 })
    if R // 2 == p then intra = g end
  end
  for q = 0, 1 do
    local ranks = {}
    for r = q, W - 1, 2 do ranks[#ranks + 1] = r end
    local g = dist.new_group(ranks)
    if R % 2 == q then inter = g end
  end
  return { intra, inter }
end

if W % 2 == 0 then
  case("HYBRID_SHARD (pairs): resuming at step 3 is bit-identical, and the checkpoint loads onto FULL_SHARD",
    function()
      local groups = hybrid_groups()
      local full = start(wrapped("HYBRID_SHARD", groups))
      local losses = {}
      for i = 1, RT.STEPS do losses[i] = RT.step(full) end
      local want = RT.params(full.model)

      local first = start(wrapped("HYBRID_SHARD", groups))
      for i = 1, 3 do T.eq(RT.step(first), losses[i], "loss of step " .. i) end
      local root = shared_dir("hybrid")
      fsdp.save_checkpoint(root, { model = first.model, optimizer = first.opt, scheduler = first.sched, step = 3 })
      local saved = full_views(first)

      local run = RT.run(fsdp.FSDP(RT.model(99), { sharding_strategy = "HYBRID_SHARD",
        auto_wrap_policy = fsdp.ModuleWrapPolicy{ gpt.Block }, process_group = groups }))
      ms.manual_seed(5)
      T.eq(fsdp.load_checkpoint(root, { model = run.model, optimizer = run.opt, scheduler = run.sched }), 3)
      for i = 4, RT.STEPS do T.eq(RT.step(run), losses[i], ("loss of step %d on rank %d"):format(i, R)) end
      RT.check_identical(RT.params(run.model), want, "HYBRID_SHARD final parameters")

      local other = RT.run(wrapped("FULL_SHARD"))
      T.eq(fsdp.load_checkpoint(root, { model = other.model, optimizer = other.opt, scheduler = other.sched }), 3)
      compare(full_views(other), saved, "HYBRID_SHARD -> FULL_SHARD")

      -- fsdp.save_sharded alike: the first replica writes, and the model loads onto FULL_SHARD
      local dir = shared_dir("hybrid_sharded")
      if R == 0 then os.execute("mkdir -p '" .. dir .. "'") end
      dist.barrier()
      fsdp.save_sharded(run.model, dir)
      local plain = wrapped("FULL_SHARD")
      fsdp.load_sharded(plain, dir)
      RT.check_identical(RT.params(plain), RT.params(run.model), "save_sharded HYBRID_SHARD -> FULL_SHARD")
    end)
end

dist.barrier()
if R == 0 then
  for _, d in ipairs(dirs) do os.execute("rm -rf '" .. d .. "'") end
end
D.finish("dist_fsdp_resume")
