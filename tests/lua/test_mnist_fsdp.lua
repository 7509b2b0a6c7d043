-- test_mnist_fsdp.lua: scripts/mnist_fsdp.lua end to end on real MNIST, briefly (--dry-run: one
-- batch per epoch): launched by ms.spawn and by `moonshard -n`, the seed-shaped printouts, the
-- wrapped tree for both policies the seed shows, and the saved full state dict loading into an
-- unwrapped Net. Skipped (exit 77) without the build directory, mpirun or the MNIST files.
local T = require "testing"
local ms = require "moonshard"
local Net = require "moonshard.seed_net"

local build = os.getenv("MS_BUILD_DIR")
if not build then
  print("skip: MS_BUILD_DIR must name the build directory (ctest sets it)")
  os.exit(77)
end
if not os.execute("command -v mpirun > /dev/null 2>&1") then
  print("skip: no mpirun")
  os.exit(77)
end
local data = os.getenv("MS_MNIST_ROOT") or "data"
local f = io.open(data .. "/MNIST/raw/t10k-labels-idx1-ubyte", "rb") or io.open(data .. "/MNIST/raw/t10k-labels-idx1-ubyte.gz", "rb")
if not f then
  print(("skip: no MNIST under %s/MNIST/raw (scripts/fetch-mnist.sh)"):format(data))
  os.exit(77)
end
f:close()
local has_fsdp, why = pcall(require, "moonshard.fsdp")
if not has_fsdp then
  print("skip: moonshard.fsdp does not load yet: " .. tostring(why):match("[^\n]*"))
  os.exit(77)
end

local quote = T.quote
local exe = build .. "/moonshard"
local cwd = io.popen("pwd"):read("l")
local script = cwd .. "/scripts/mnist_fsdp.lua"
local data_abs = data:sub(1, 1) == "/" and data or cwd .. "/" .. data

local function slurp(path)
  local h = io.open(path, "rb")
  if not h then return "" end
  local s = h:read("a")
  h:close()
  return s
end

-- Runs the script in dir (a fresh temporary directory by default); returns code, stdout, stderr, dir.
local function run(launch, args, dir)
  dir = dir or os.tmpname()
  os.remove(dir)
  os.execute("mkdir -p " .. quote(dir))
  local out, err = dir .. "/stdout", dir .. "/stderr"
  local cmd = ("cd %s && timeout -k 5 240 %s %s %s --data %s %s > %s 2> %s"):format(quote(dir), quote(exe), launch,
    quote(script), quote(data_abs), args, quote(out), quote(err))
  local _, _, code = os.execute(cmd)
  return code, slurp(out), slurp(err), dir
end

local function count(s, pat)
  local n = 0
  for _ in s:gmatch(pat) do n = n + 1 end
  return n
end

local REPRS = dofile(debug.getinfo(1, "S").source:sub(2):match("^(.*)/") .. "/data/fsdp_reprs.lua")

T.test("options: --help, and bad options are errors before any rank starts", function()
  local code, out = run("", "--help")
  T.eq(code, 0)
  T.truthy(out:find("--auto-wrap-min-params N", 1, true))
  local err
  code, _, err = run("", "--epochs two")
  T.truthy(code ~= 0)
  T.truthy(err:find("mnist_fsdp.lua: error: argument --epochs: invalid int value: 'two'\n", 1, true), err)
  code, _, err = run("", "--no-such-thing")
  T.truthy(code ~= 0)
  T.truthy(err:find("mnist_fsdp.lua: error: unrecognized arguments: --no-such-thing\n", 1, true), err)
end)

T.test("ms.spawn launch (2 ranks by default): seed-shaped output, fc1 its own unit", function()
  local code, out, err = run("", "--dry-run --epochs 2")
  T.eq(code, 0, err)
  T.eq(count(out, "Train Epoch: %d \tLoss: %d+%.%d%d%d%d%d%d\n"), 2, out)
  T.truthy(out:find("Train Epoch: 1 \tLoss:", 1, true) and out:find("Train Epoch: 2 \tLoss:", 1, true), out)
  -- one test batch of 1000 per rank, all-reduced: 2000 samples counted
  T.eq(count(out, "Test set: Average loss: %d+%.%d%d%d%d, Accuracy: %d+/2000 %(%d+%.%d%d%%%)\n\n"), 2, out)
  T.truthy(out:find("elapsed time: %d+%.%d%d%dsec\n"), out)
  T.truthy(out:find(REPRS.min_20000, 1, true), out)
end)

T.test("moonshard -n 2 with --auto-wrap-min-params 2e9 (one unit) and --save-model", function()
  local code, out, err, dir = run("-n 2", "--dry-run --epochs 1 --auto-wrap-min-params 2000000000 --save-model")
  T.eq(code, 0, err)
  T.eq(count(out, "Train Epoch: "), 1, out)
  T.truthy(out:find(REPRS.whole, 1, true), out)
  local sd = ms.load(dir .. "/mnist_cnn.safetensors")
  local net = Net()
  net:load_state_dict(sd) -- strict: the original names and shapes, nothing else
  local n = 0
  for _ in pairs(sd) do n = n + 1 end
  T.eq(n, 8)
end)

T.test("--mixed-precision bfloat16: trains in bfloat16, saves the float32 master weights", function()
  local code, out, err, dir = run("-n 2", "--dry-run --epochs 1 --mixed-precision bfloat16 --save-model")
  T.eq(code, 0, err)
  T.truthy(out:find("Test set: Average loss: %d"), out)
  local sd = ms.load(dir .. "/mnist_cnn.safetensors")
  for name, t in pairs(sd) do T.eq(t.dtype, "float32", name) end
  code, _, err = run("", "--mixed-precision fp8")
  T.truthy(code ~= 0)
  T.truthy(err:find("argument --mixed-precision: invalid choice: 'fp8' (choose from 'none', 'bfloat16', 'float16')",
                    1, true), err)
end)

T.test("--nproc 1: one rank in this process's launch", function()
  local code, out, err = run("", "--dry-run --epochs 1 --nproc 1 --test-batch-size 500")
  T.eq(code, 0, err)
  T.truthy(out:find("Accuracy: %d+/500 "), out)
end)

T.test("--nproc 3 under `moonshard -n 2` is refused", function()
  local code, _, err = run("-n 2", "--dry-run --epochs 1 --nproc 3")
  T.truthy(code ~= 0)
  T.truthy(err:find("mnist_fsdp.lua: error: --nproc 3, but the launcher started 2 ranks\n", 1, true), err)
end)

T.finish()
