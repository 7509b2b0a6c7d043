-- test_train_checkpoint_launch.lua: a training checkpoint saved on 2 ranks (`moonshard -n 2`,
-- FSDP with a unit per Block) survives a save killed midway on either rank (SIGKILL through the
-- MS_TEST_SAVE_SHARDED_DIE hook, once that rank's shard is written), of a later step or of the
-- same step again: latest still names the complete generation and it loads, in one process
-- unwrapped, as it was. Skips without mpirun or when run under mpirun itself.
local ms = require "moonshard"
local fsdp = require "moonshard.fsdp"
local T = require "testing"
local R = require "resume_testing"

local exe = T.launcher_exe()
local quote = T.quote
local base = os.tmpname()
local root, script, out = base .. ".ckpt", base .. ".lua", base .. ".out"

-- Trains `steps` steps from seed `seed` on 2 ranks and saves at step `steps`.
T.write_file(script, [[
local ms = require "moonshard"
local fsdp = require "moonshard.fsdp"
local gpt = require "moonshard.models.gpt"
local R = require "resume_testing"
local root, seed, steps = ...
ms.distributed.init_process_group("mpi")
local run = R.run(fsdp.FSDP(R.model(tonumber(seed)), { auto_wrap_policy = fsdp.ModuleWrapPolicy{ gpt.Block } }))
for _ = 1, tonumber(steps) do R.step(run) end
fsdp.save_checkpoint(root, { model = run.model, optimizer = run.opt, scheduler = run.sched, step = tonumber(steps) })
ms.distributed.destroy_process_group()
]])

local function save(seed, steps, die_rank)
  local env = die_rank and ("MS_TEST_SAVE_SHARDED_DIE=%d "):format(die_rank) or ""
  local _, _, code = os.execute(("%stimeout -k 5 120 %s -n 2 %s %s %d %d < /dev/null > %s 2>&1"):format(env,
    quote(exe), quote(script), quote(root), seed, steps, quote(out)))
  return code
end

-- The checkpoint loaded in one process: step and full views of the model and the optimizer.
local function loaded()
  local run = R.run(R.model(77))
  local step = fsdp.load_checkpoint(root, { model = run.model, optimizer = run.opt, scheduler = run.sched })
  local views = R.params(run.model)
  for at, s in pairs(run.opt:state_dict().state) do
    for k, v in pairs(s) do
      if ms.is_tensor(v) then views[("opt %d %s"):format(at, k)] = v:clone() end
    end
  end
  return step, views, run.sched.last_epoch
end

T.test("a complete save on 2 ranks loads in one process", function()
  T.eq(save(1, 3), 0, T.read_file(out))
  local step, _, epoch = loaded()
  T.eq(step, 3)
  T.eq(epoch, 3)
end)

T.test("a save killed on either rank, of a later step or of the same one, leaves the last one loadable", function()
  local _, want = loaded()
  for _, case in ipairs({ { 4, 1 }, { 4, 0 }, { 3, 1 }, { 3, 0 } }) do
    local steps, rank = case[1], case[2]
    local code = save(2, steps, rank)
    local what = ("a save of step %d killed on rank %d"):format(steps, rank)
    T.truthy(code ~= 0, what .. " should fail: " .. T.read_file(out))
    T.eq(fsdp.latest_checkpoint(root), root .. "/step-00000003", what)
    local step, got = loaded()
    T.eq(step, 3, what)
    T.truthy(R.check_identical(got, want, what) > 28, what)
  end
end)

os.execute(("rm -rf %s.*"):format(quote(base)))
os.remove(base)
T.finish()
