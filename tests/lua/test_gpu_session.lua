-- test_gpu_session.lua: scripts/gpu-session.sh, the one call of a session with a GPU, checked
-- where no GPU is: its plan (--dry-run), the summary it reads from its logs (--summary-only on
-- logs written in each tool's format: bench/gpu_seed.sh's table, the step profiles' lines,
-- mnist_fsdp.lua's test lines, ctest's), and a run on a fake build without a GPU whose first
-- step runs out of time: the other steps still leave their logs and the summary says why.
local T = require "testing"

local quote = T.quote
local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. quote(tmp))

-- runs a shell command line; its output and exit code
local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  local _, _, code = p:close()
  return out, code
end

local function has(text, ...)
  for _, needle in ipairs { ... } do
    T.truthy(text:find(needle, 1, true), ("%q in:\n%s"):format(needle, text))
  end
end

T.test("the script parses; --dry-run prints every step with its limit and runs nothing", function()
  local _, code = sh("bash -n scripts/gpu-session.sh")
  T.eq(code, 0)
  local out, c = sh("scripts/gpu-session.sh --dry-run " .. quote(tmp .. "/dry"))
  T.eq(c, 0, out)
  has(out, "ctest --test-dir build --output-on-failure", "-R cuda|pin|doc", "bench/gpu_seed.sh --epochs 4",
    "bench/gpu_step_profile.lua", "bench/torch_step_profile.py", "scripts/gpu-check.sh --prebuilt",
    "lowp bench", "budget 540 s")
  T.truthy(not io.open(tmp .. "/dry/summary.txt"), "nothing written")
  local _, bad = sh("scripts/gpu-session.sh --frobnicate")
  T.eq(bad, 2)
end)

local SEED = [[
== moonshard-fp32: env MS_BENCH_REPORT=1 build/moonshard -n 1 scripts/mnist_fsdp.lua --epochs 4 --data data

== medians of epochs 2..: seconds per epoch (train + test), moonshard's ratio to each
run                train_s    test_s   epoch_s
moonshard-fp32       0.480     0.060     0.540
moonshard-bf16       0.400     0.050     0.450
torch-tuned          4.700     0.030     4.730
torch-seed          14.100     7.800    21.900
ratio torch-tuned / moonshard-fp32: epoch 8.76x, train 9.79x, test 0.50x (above 1: moonshard faster)
bf16 / fp32 epoch: 0.83 (below 1: bf16 faster)
]]
local RAW = [[
== moonshard-fp32: env MS_BENCH_REPORT=1 build/moonshard -n 1 scripts/mnist_fsdp.lua --epochs 4
Test set: Average loss: 0.0478, Accuracy: 9851/10000 (98.51%)
Test set: Average loss: 0.0390, Accuracy: 9880/10000 (98.80%)
Test set: Average loss: 0.0300, Accuracy: 9905/10000 (99.05%)
== moonshard-bf16: env MS_BENCH_REPORT=1 build/moonshard -n 1 scripts/mnist_fsdp.lua --epochs 4 --mixed-precision bfloat16
Test set: Average loss: 0.0500, Accuracy: 9800/10000 (98.00%)
]]
local PROFILE = [[
== step profile (60 s at most): build/moonshard bench/gpu_step_profile.lua --steps 200
plain       B=  64  step 0.450 ms wall, 0.300 ms host enqueue (forward+loss 0.1, backward 0.1, optimizer 0.1)
fsdp        B=  64  step 0.470 ms wall, 0.320 ms host enqueue (forward+loss 0.1, backward 0.1, optimizer 0.1)
plain       B= 256  step 0.900 ms wall, 0.310 ms host enqueue (forward+loss 0.1, backward 0.1, optimizer 0.1)
== step profile: rc 0, 12 s
== step profile (torch) (60 s at most): python3 bench/torch_step_profile.py --steps 200
torch 2.11.0 on NVIDIA H200
plain       B=  64  step 1.922 ms wall, 1.921 ms host enqueue
fsdp        B=  64  step 4.032 ms wall, 4.032 ms host enqueue
]]
local CTEST = [[
95% tests passed, 1 tests failed out of 20

The following tests FAILED:
	 51 - lua.test_cuda_ops (Failed)
]]

T.test("--summary-only reads every figure from the tools' logs, with its verdict", function()
  local d = tmp .. "/logs"
  os.execute("mkdir -p " .. quote(d))
  T.write_file(d .. "/seed.log", SEED)
  T.write_file(d .. "/seed_raw.log", RAW)
  T.write_file(d .. "/profile.log", PROFILE)
  T.write_file(d .. "/ctest.log", CTEST)
  T.write_file(d .. "/gpu_check.log", "== summary (100s in all)\nok      GPU tests (ctest -R 'cuda|pin') (20s)\n")
  local out, code = sh("scripts/gpu-session.sh --summary-only " .. quote(d))
  T.eq(code, 0, out)
  T.eq(T.read_file(d .. "/summary.txt"), out:gsub("\n$", "") .. "\n")
  has(out, "GPU tests: 95% tests passed, 1 tests failed out of 20; 0 skipped",
    "51 - lua.test_cuda_ops (Failed)",
    "epoch float32 (train + test): 0.540 s (train 0.480, test 0.060); target <= 0.6: met",
    "test pass: moonshard 0.060 s, PyTorch tuned 0.030 s; target moonshard <= PyTorch tuned: NOT met",
    "epoch bf16: 0.450 s; bf16 / float32 0.83; target < 1: met",
    "training step B=64: plain 0.450 ms, fsdp 0.470 ms; target <= 0.5: met",
    "PyTorch's step B=64: plain 1.922 ms, fsdp 4.032 ms",
    "accuracy float32 after epoch 1: 98.51%; target >= 98.5%: met; after epoch 4: 99.05%",
    "PyTorch's epochs: tuned 4.730 s, the seed's program 21.900 s",
    "bf16 / fp32 epoch: 0.83", "ok      GPU tests (ctest -R 'cuda|pin')")
  -- again from the summary it wrote: the same figures, its first lines kept
  local again = sh("scripts/gpu-session.sh --summary-only " .. quote(d))
  T.eq(again, out)
  -- a missing log gives n/a, never a wrong figure
  os.remove(d .. "/profile.log")
  os.remove(d .. "/seed.log")
  local partial = sh("scripts/gpu-session.sh --summary-only " .. quote(d))
  has(partial, "training step B=64: plain n/a ms, fsdp n/a ms; target <= 0.5: n/a",
    "epoch float32 (train + test): n/a s", "bf16 / float32 n/a; target < 1: n/a",
    "accuracy float32 after epoch 1: 98.51%")
end)

T.test("a fake build without a GPU: a step out of time, the rest skipped, the summary says so", function()
  local build, bin, d = tmp .. "/fakebuild", tmp .. "/bin", tmp .. "/run"
  os.execute("mkdir -p " .. quote(build) .. " " .. quote(bin))
  -- the build's executable finds no GPU, nor does python3 find torch (both at once, so that
  -- the budget is left whole for the first step); ctest hangs: the first step must time out
  T.write_file(build .. "/moonshard", "#!/bin/sh\necho 'no usable NVIDIA driver (a fake build)'\nexit 3\n")
  T.write_file(bin .. "/python3", "#!/bin/sh\necho 'No module named torch (a fake python3)'\nexit 1\n")
  T.write_file(bin .. "/ctest", "#!/bin/sh\nexec sleep 60\n")
  for _, f in ipairs { build .. "/moonshard", bin .. "/python3", bin .. "/ctest" } do os.execute("chmod +x " .. quote(f)) end
  local out, code = sh(("PATH=%s:$PATH BUILD=%s SESSION_BUDGET_S=14 scripts/gpu-session.sh %s"):format(
    quote(bin), quote(build), quote(d)))
  T.eq(code, 0, out)
  local summary = T.read_file(d .. "/summary.txt")
  has(summary, "moonshard: no usable NVIDIA driver (a fake build)", "PyTorch: No module named torch (a fake python3)",
    "TIMEOUT  GPU tests (ctest) (after ", "-> ctest.log",
    "skipped  seed epochs (gpu_seed): no usable GPU", "skipped  step profile: no usable GPU",
    "skipped  gpu-check --prebuilt (the session's 14 s are spent)",
    "GPU tests: n/a (see ctest.log)", "epoch float32 (train + test): n/a s")
  has(T.read_file(d .. "/ctest.log"), "== GPU tests (ctest) (", " s at most)", "== GPU tests (ctest): rc 124")
  local files = sh("ls " .. quote(d))
  local n = select(2, files:gsub("\n", ""))
  T.truthy(n <= 8, "at most 8 files come back from the device: " .. files)
  T.truthy(not files:find("summary.txt.head", 1, true), files)
end)

os.execute("rm -rf " .. quote(tmp))
T.finish()
