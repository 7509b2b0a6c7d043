-- test_train_checkpoint.lua: fsdp.save_checkpoint / load_checkpoint in one process on an
-- unwrapped model (a tiny GPT with dropout, AdamW in two groups, a cosine schedule, batches drawn
-- from the engine's generator): 6 steps with a save after step 3, then steps 4..6 on fresh objects
-- loaded from it give the same losses and parameters bit for bit; a save killed midway (the
-- MS_TEST_SAVE_SHARDED_DIE hook) leaves the previous checkpoint loadable, even one of the same
-- step; a checkpoint of another model, a missing file and a corrupt one are refused by name, and
-- a refused load changes nothing.
local ms = require "moonshard"
local fsdp = require "moonshard.fsdp"
local samplers = require "moonshard.samplers"
local T = require "testing"
local R = require "resume_testing"

local quote = T.quote
local base = os.tmpname()
os.remove(base)
local root = base .. ".ckpt"

local function list(d)
  local names = ms._list_dir(d)
  table.sort(names)
  return names
end

-- The uninterrupted run: losses of steps 1..6 and the final state.
local full = R.run(R.model())
local full_losses = {}
for i = 1, R.STEPS do full_losses[i] = R.step(full) end
local full_params = R.params(full.model)

-- Steps 1..3, then a save; what the run was at the save.
local first = R.run(R.model())
for i = 1, 3 do T.eq(R.step(first), full_losses[i], "loss of step " .. i) end
local sampler = samplers.DistributedSampler(first.data, { num_replicas = 1, rank = 0, seed = 5 })
sampler:set_epoch(2)
local gen = fsdp.save_checkpoint(root, { model = first.model, optimizer = first.opt, scheduler = first.sched,
  step = 3, extra = { sampler = sampler:state_dict(), batch = 7, note = "three" } })
local saved_params = R.params(first.model)

-- Fresh objects of another seed and a disturbed generator: everything must come from the files.
local function fresh()
  local run = R.run(R.model(99))
  ms.manual_seed(12345)
  return run
end

T.test("the save is one generation and a latest pointer", function()
  T.eq(gen, root .. "/step-00000003")
  T.eq(fsdp.latest_checkpoint(root), gen)
  local names = list(gen)
  T.eq(#names, 3, table.concat(names, " "))
  T.truthy(names[1] == "index.json" and names[2]:match("^shard%-00000%-of%-00001%.") and names[3]:match("^train%-state%."),
    table.concat(names, " "))
  T.eq(T.read_file(root .. "/latest"), "step-00000003\n")
  T.eq(fsdp.latest_checkpoint(base .. ".none"), nil)
end)

T.test("resuming from step 3 gives steps 4..6 bit-identical to the uninterrupted run", function()
  local run = fresh()
  local step, extra = fsdp.load_checkpoint(root, { model = run.model, optimizer = run.opt, scheduler = run.sched })
  T.eq(step, 3)
  T.eq(extra.batch, 7)
  T.eq(extra.note, "three")
  local s2 = samplers.DistributedSampler(run.data, { num_replicas = 1, rank = 0 })
  s2:load_state_dict(extra.sampler)
  T.eq(s2.epoch, 2)
  T.eq(s2.seed, 5)
  T.eq(run.sched.last_epoch, 3)
  for i = 4, R.STEPS do T.eq(R.step(run), full_losses[i], "loss of step " .. i) end
  T.truthy(R.check_identical(R.params(run.model), full_params, "final parameters") > 10)
end)

T.test("the RNG state comes back: without it dropout and the batches differ", function()
  local run = fresh()
  fsdp.load_checkpoint(root, { model = run.model, optimizer = run.opt, scheduler = run.sched })
  ms.manual_seed(777) -- what a forgotten RNG restore looks like
  T.truthy(R.step(run) ~= full_losses[4])
end)

T.test("the optimizer state comes back: without it step 4 differs", function()
  local run = fresh()
  fsdp.load_checkpoint(root, { model = run.model, scheduler = run.sched })
  T.eq(R.step(run), full_losses[4], "step 4's loss (before the optimizer acts)")
  T.truthy(R.step(run) ~= full_losses[5], "step 5 after fresh Adam moments should differ")
end)

T.test("a generation path loads as the root does; load_sharded reads its model", function()
  local run = fresh()
  T.eq(fsdp.load_checkpoint(gen, { model = run.model, optimizer = run.opt }), 3)
  R.check_identical(R.params(run.model), saved_params, "model")
  local m = R.model(98)
  fsdp.load_sharded(m, gen)
  R.check_identical(R.params(m), saved_params, "load_sharded")
end)

T.test("every optimizer's state round-trips: SGD momentum, Adam amsgrad, Adadelta, Adagrad, RMSprop", function()
  local optim = require "moonshard.optim"
  local makers = {
    function(ps) return optim.SGD(ps, { lr = 0.1, momentum = 0.9 }) end,
    function(ps) return optim.Adam(ps, { lr = 0.01, amsgrad = true }) end,
    function(ps) return optim.Adadelta(ps, { lr = 0.5 }) end,
    function(ps) return optim.Adagrad(ps, { lr = 0.1 }) end,
    function(ps) return optim.RMSprop(ps, { lr = 0.01, momentum = 0.5, centered = true }) end,
  }
  for i, make in ipairs(makers) do
    local d = ("%s.opt%d"):format(base, i)
    local run = R.run(R.model())
    run.opt = make(run.model:parameters())
    R.step(run)
    R.step(run)
    fsdp.save_checkpoint(d, { model = run.model, optimizer = run.opt, step = 2 })
    local other = R.model(3)
    local opt2 = make(other:parameters())
    fsdp.load_checkpoint(d, { model = other, optimizer = opt2 })
    local want, got = run.opt:state_dict(), opt2:state_dict()
    local n = 0
    for at, s in pairs(want.state) do
      for k, v in pairs(s) do
        local g = got.state[at] and got.state[at][k]
        local what = ("optimizer %d state %d.%s"):format(i, at, k)
        if ms.is_tensor(v) then
          R.check_identical({ x = g }, { x = v }, what)
          n = n + 1
        else
          T.eq(g, v, what)
        end
      end
    end
    T.truthy(n >= #run.model:parameters(), ("optimizer %d: %d state tensors"):format(i, n))
  end
end)

-- A child process saving step `step` of a fresh model into root and killing itself (SIGKILL)
-- once its shard is written.
local function torn_save(step)
  local script = base .. ".torn.lua"
  T.write_file(script, ([[
local fsdp = require "moonshard.fsdp"
local R = require "resume_testing"
local run = R.run(R.model(42))
R.step(run)
fsdp.save_checkpoint(%q, { model = run.model, optimizer = run.opt, scheduler = run.sched, step = %d })
print("not killed")
]]):format(root, step))
  local exe = assert(os.getenv("MS_BUILD_DIR")) .. "/moonshard"
  local ok, how, code = os.execute(("MS_TEST_SAVE_SHARDED_DIE=0 timeout -k 5 60 %s %s > %s.out 2>&1"):format(quote(exe),
    quote(script), quote(base)))
  T.truthy(not ok and (how == "signal" or code == 137 or code == 128 + 9), ("child ended %s %s: %s"):format(how, code,
    T.read_file(base .. ".out")))
end

T.test("a save killed midway leaves the previous checkpoint loadable (a new step and the same step)", function()
  for _, step in ipairs({ 4, 3 }) do
    torn_save(step)
    T.eq(fsdp.latest_checkpoint(root), gen, "latest after a torn save of step " .. step)
    local run = fresh()
    T.eq(fsdp.load_checkpoint(root, { model = run.model, optimizer = run.opt, scheduler = run.sched }), 3)
    R.check_identical(R.params(run.model), saved_params, "after a torn save of step " .. step)
    T.eq(R.step(run), full_losses[4], "step 4 after a torn save of step " .. step)
  end
  T.eq(ms._file_size(root .. "/step-00000004/index.json"), nil, "the torn generation has no index")
end)

-- Copies of the checkpoint to break by hand.
local function copy()
  local d = base .. ".copy"
  os.execute(("rm -rf %s && cp -r %s %s"):format(quote(d), quote(root), quote(d)))
  return d, d .. "/step-00000003"
end

-- The file of d's current save (the one its index names) matching pattern: a torn save of the
-- same step above leaves another save's files beside them, which sort first at times.
local function file_matching(d, pattern)
  local f <close> = assert(io.open(d .. "/index.json", "rb"))
  local id = assert(f:read("a"):match('"save_id"%s*:%s*"([^"]+)"'), "no save_id in the index")
  for _, name in ipairs(list(d)) do
    if name:match(pattern) and (name:match("^index") or name:find(id, 1, true)) then return d .. "/" .. name end
  end
end

-- Loading `path` into fresh objects raises with every needle; the model is left untouched.
local function refused(path, opts, ...)
  local run = fresh()
  local before = R.params(run.model)
  local o = { model = run.model, optimizer = run.opt, scheduler = run.sched }
  for k, v in pairs(opts or {}) do o[k] = v end
  local err = T.raises(function() fsdp.load_checkpoint(path, o) end, ...)
  R.check_identical(R.params(run.model), before, "a refused load")
  return err
end

T.test("a missing shard or train-state file is refused, naming it", function()
  local d, g = copy()
  local shard = file_matching(g, "^shard")
  os.remove(shard)
  refused(d, nil, "load_checkpoint", shard, "is missing")
  d, g = copy()
  local ts = file_matching(g, "^train%-state")
  os.remove(ts)
  refused(d, nil, "load_checkpoint", ts, "is missing")
  refused(base .. ".nothing", nil, "load_checkpoint", "holds no checkpoint")
end)

-- Flips one byte at `at` bytes before the end of the file.
local function flip(path, at)
  local f = assert(io.open(path, "r+b"))
  local pos = f:seek("end") - at
  f:seek("set", pos)
  local b = f:read(1):byte()
  f:seek("set", pos)
  f:write(string.char(b ~ 0xff))
  f:close()
end

T.test("a corrupt shard, train-state file or index is refused, naming it", function()
  for _, pattern in ipairs({ "^shard", "^train%-state", "^index" }) do
    local d, g = copy()
    local path = file_matching(g, pattern)
    flip(path, 10)
    refused(d, nil, "load_checkpoint", path, "fails its checksum")
  end
end)

T.test("a checkpoint of another model is refused: names, shapes, optimizer groups", function()
  local gpt = require "moonshard.models.gpt"
  local function other(opts)
    local c = {}
    for k, v in pairs(R.CONFIG) do c[k] = v end
    for k, v in pairs(opts) do c[k] = v end
    return gpt.GPT(c)
  end
  local deeper = other({ n_layer = 3 })
  T.raises(function() fsdp.load_checkpoint(root, { model = deeper }) end, "load_checkpoint", "h.2.ln_1.weight' is in the model but not in")
  local optd = R.optimizer(deeper)
  T.raises(function() fsdp.load_checkpoint(root, { model = deeper, optimizer = optd }) end, "load_checkpoint",
    "parameter group 1 has", "parameters, the optimizer's")
  local wider = other({ n_embd = 24 })
  T.raises(function() fsdp.load_checkpoint(root, { model = wider, optimizer = (R.optimizer(wider)) }) end,
    "load_checkpoint", "shape of 'transformer.wte.weight' differs", "(13, 16)", "(13, 24)")
  T.raises(function() fsdp.load_checkpoint(root, { model = wider }) end, "load_checkpoint",
    "shape of 'transformer.wte.weight' differs", "(13, 16)", "(13, 24)")
end)

T.test("keep_last = 2 keeps the two newest generations", function()
  local d = base .. ".keep"
  local run = fresh()
  for step = 1, 4 do fsdp.save_checkpoint(d, { model = run.model, step = step * 10, keep_last = 2 }) end
  T.eq(table.concat(list(d), " "), "latest step-00000030 step-00000040")
  T.eq(fsdp.load_checkpoint(d, { model = run.model }), 40)
end)

T.test("bad arguments are precise errors", function()
  local run = fresh()
  T.raises(function() fsdp.save_checkpoint(root, { model = run.model, step = -1 }) end, "save_checkpoint", "'step'",
    "got -1")
  T.raises(function() fsdp.save_checkpoint(root, { model = run.model, step = 1, keep_last = 0 }) end, "save_checkpoint",
    "'keep_last'", "got 0")
  T.raises(function() fsdp.save_checkpoint(root, { model = run.model, step = 1, extra = { ["a.b"] = 1 } }) end,
    "save_checkpoint", "extra", "'a.b'")
  T.raises(function() fsdp.save_checkpoint(root, { model = run.model, step = 1, extra = { f = print } }) end,
    "save_checkpoint", "extra.f is a function")
  T.raises(function() fsdp.save_checkpoint(root, { model = run.model, step = 1, optimiser = run.opt }) end,
    "save_checkpoint: unknown option 'optimiser' (expected one of: extra, keep_last, ")
  T.raises(function() fsdp.load_checkpoint(root, { optimizer = run.opt }) end, "load_checkpoint", "option 'model'")
  local plain = base .. ".sharded"
  os.execute("mkdir -p " .. quote(plain))
  fsdp.save_sharded(run.model, plain)
  T.raises(function() fsdp.load_checkpoint(plain, { model = run.model }) end, "load_checkpoint",
    "without training state")
end)

os.execute(("rm -rf %s.*"):format(quote(base)))
T.finish()
