-- test_scripts.lua: every script of scripts/ and bench/ seen from the command line: --help answers
-- (status 0, the usage on stdout), a bad option is the usage and one error line (status 2, no
-- traceback), --data mistakes are one line before anything is created or fetched, a rank count
-- that disagrees with the launcher is one line, and mnist.lua honours --log-interval.
local T = require "testing"
local metrics = require "moonshard.metrics"

local build = os.getenv("MS_BUILD_DIR")
if not build then
  print("skip: MS_BUILD_DIR must name the build directory (ctest sets it)")
  os.exit(77)
end
local exe = build .. "/moonshard"
local quote = T.quote
local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. quote(tmp))
local out, err = tmp .. "/stdout", tmp .. "/stderr"

-- Runs `moonshard [launch] script args`; returns the exit status, stdout and stderr.
local function run(launch, script, args)
  local _, _, code = os.execute(("timeout -k 5 120 %s %s %s %s > %s 2> %s"):format(quote(exe), launch, quote(script),
                                                                                 args, quote(out), quote(err)))
  return code, T.read_file(out), T.read_file(err)
end

local function lines_with(text, needle)
  local n = 0
  for line in text:gmatch("[^\n]*") do
    if line:find(needle, 1, true) then n = n + 1 end
  end
  return n
end

-- stderr ends with exactly one line "name: error: want", and nothing looks like a traceback.
local function one_error(e, name, want, what)
  T.eq(lines_with(e, "error:"), 1, what .. ": error lines in " .. e)
  T.eq(e:match("([^\n]*)\n$"), name .. ": error: " .. want, what)
  T.truthy(not e:find("traceback", 1, true) and not e:find("%.lua:%d+:"), what .. ": a traceback in " .. e)
end

local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end

local scripts = {}
for dir in ("scripts bench"):gmatch("%S+") do
  local ls = io.popen("ls " .. dir .. "/*.lua")
  for path in ls:lines() do scripts[#scripts + 1] = path end
  ls:close()
end

T.test("every script of scripts/ and bench/ answers --help and refuses a bad option in one line", function()
  T.truthy(#scripts >= 12, "scripts found: " .. #scripts)
  for _, script in ipairs(scripts) do
    local name = script:match("[^/]*$")
    local code, o, e = run("", script, "--help")
    T.eq(code, 0, script .. " --help: " .. e)
    T.eq(e, "", script .. " --help stderr")
    T.eq(o:sub(1, #name + 8), "usage: " .. name .. " ", script .. " --help")
    T.truthy(o:find("\noptions:\n  -h, --help", 1, true), script .. " --help: " .. o)
    code, o, e = run("", script, "--no-such-option")
    T.eq(code, 2, script .. " --no-such-option")
    T.eq(o, "", script .. " --no-such-option stdout")
    T.eq(e:sub(1, 7), "usage: ", script .. " --no-such-option: " .. e)
    one_error(e, name, "unrecognized arguments: --no-such-option", script)
  end
end)

T.test("bad values name the option, in one line", function()
  local _, _, e = run("", "scripts/mnist.lua", "--epochs two")
  one_error(e, "mnist.lua", "argument --epochs: invalid int value: 'two'", "mnist --epochs two")
  _, _, e = run("", "scripts/mnist_fsdp.lua", "--mixed-precision=fp8")
  one_error(e, "mnist_fsdp.lua", "argument --mixed-precision: invalid choice: 'fp8' (choose from 'none', "
            .. "'bfloat16', 'float16')", "mnist_fsdp --mixed-precision")
  _, _, e = run("", "scripts/mnist.lua", "--log-interval 0")
  one_error(e, "mnist.lua", "argument --log-interval: must be at least 1, got 0", "mnist --log-interval 0")
  _, _, e = run("", "bench/ops_bench.lua", "--threads 1,x")
  one_error(e, "ops_bench.lua", "argument --threads: invalid value: '1,x' (a comma-separated list of positive "
            .. "integers)", "ops_bench --threads")
  local code
  code, _, e = run("", "bench/mnist_subset.lua", "a b 5")
  T.eq(code, 2)
  one_error(e, "mnist_subset.lua", "the following arguments are required: TEST", "mnist_subset")
end)

T.test("a runtime mistake (a missing file) is one line, status 1", function()
  local code, _, e = run("", "bench/report.lua", quote(tmp .. "/no-such-raw"))
  T.eq(code, 1)
  one_error(e, "report.lua", tmp .. "/no-such-raw: No such file or directory", "report.lua")
  code, _, e = run("", "bench/mnist_subset.lua", ("%s %s 1 1"):format(quote(tmp .. "/none"), quote(tmp)))
  T.eq(code, 1)
  one_error(e, "mnist_subset.lua", tmp .. "/none/MNIST/raw/train-images-idx3-ubyte: No such file or directory "
            .. "(expected MNIST's raw IDX files under SRC_ROOT/MNIST/raw)", "mnist_subset")
end)

T.test("--data: a missing directory or missing files are one line; nothing is created or fetched", function()
  local missing = tmp .. "/no/such/dir"
  for _, script in ipairs({"scripts/mnist.lua", "scripts/mnist_fsdp.lua"}) do
    local name = script:match("[^/]*$")
    local code, o, e = run("", script, "--epochs 1 --data " .. quote(missing))
    T.eq(code, 2, script); T.eq(o, "", script)
    one_error(e, name, ("--data %s: no such directory (expected the directory holding MNIST/raw)"):format(missing),
              script)
    T.truthy(not exists(tmp .. "/no"), script .. " created a directory")
  end
  local empty = tmp .. "/empty"
  os.execute("mkdir -p " .. quote(empty))
  local want = ("--data %s: no %s/MNIST/raw/train-images-idx3-ubyte[.gz] (expected MNIST's four IDX files there); "):format(
    empty, empty)
  local _, _, e = run("", "scripts/mnist.lua", "--data " .. quote(empty))
  one_error(e, "mnist.lua", want .. ("--download or scripts/fetch-mnist.sh %s fetches them"):format(empty), "mnist")
  _, _, e = run("", "scripts/mnist_fsdp.lua", "--no-download --data=" .. quote(empty))
  one_error(e, "mnist_fsdp.lua", want .. ("scripts/fetch-mnist.sh %s fetches them"):format(empty), "mnist_fsdp")
  T.truthy(not exists(empty .. "/MNIST"), "MNIST/ was created")
end)

local has_mpirun = os.execute("command -v mpirun > /dev/null 2>&1")

T.test("under `moonshard -n 2`: a bad option and a wrong --nproc are one line, from rank 0", function()
  if not has_mpirun then print("skip: no mpirun") return end
  local empty = tmp .. "/empty"
  os.execute("mkdir -p " .. quote(empty))
  local code, _, e = run("-n 2", "scripts/mnist_fsdp.lua", "--bogus")
  T.truthy(code ~= 0)
  T.eq(lines_with(e, "error: unrecognized arguments: --bogus"), 1, e)
  T.eq(lines_with(e, "usage: "), 1, e)
  T.truthy(not e:find("traceback", 1, true), e)
  code, _, e = run("-n 2", "scripts/mnist_fsdp.lua", "--data " .. quote(empty) .. " --nproc 3")
  T.truthy(code ~= 0)
  T.eq(lines_with(e, "mnist_fsdp.lua: error: --nproc 3, but the launcher started 2 ranks"), 1, e)
  T.truthy(not e:find("traceback", 1, true), e)
  T.truthy(not exists(empty .. "/MNIST"), "MNIST/ was created")
end)

-- ---- watching a run: --metrics, --plot, --summary, --no-progress, the bar on a terminal ----------

local function png_size(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local head = f:read(24)
  f:close()
  if not head or head:sub(1, 8) ~= "\137PNG\r\n\26\n" then return nil end
  return string.unpack(">I4", head, 17), string.unpack(">I4", head, 21)
end

local function text_file()
  local path = tmp .. "/text.txt"
  local words = {}
  for i = 1, 400 do words[i] = ({ "the", "cat", "sat", "on", "a", "mat", "and", "slept" })[i % 8 + 1] end
  T.write_file(path, table.concat(words, " ") .. "\n")
  return path
end

local GPT_TINY = "--steps 4 --log-interval 2 --batch-size 4 --block-size 8 --n-layer 1 --n-embd 16 --sample-tokens 0 "
  .. "--peak-gflops 10 --data "

T.test("--metrics m.csv --plot m.png write both; --summary prints the table; --no-progress is quiet", function()
  local csv, png = tmp .. "/m.csv", tmp .. "/m.png"
  local code, o, e = run("", "scripts/gpt_fsdp.lua", GPT_TINY .. quote(text_file()) .. " --metrics " .. quote(csv)
    .. " --plot " .. quote(png) .. " --summary")
  T.eq(code, 0, e)
  local rows = {}
  for line in T.read_file(csv):gmatch("[^\n]+") do rows[#rows + 1] = line end
  T.eq(rows[1], "kind,step,epoch,loss,test_loss,accuracy,lr,samples_per_s,time")
  T.eq(#rows, 5, "a step row and an eval row every 2 of 4 steps")
  T.truthy(rows[2]:find("^step,2,,%d"), rows[2]); T.truthy(rows[3]:find("^eval,2,,,%d"), rows[3])
  local w, h = png_size(png)
  T.eq(w, 800); T.eq(h, 360, "one chart: the losses")
  T.truthy(o:find("\nTotal params: ", 1, true) and o:find("Layer (type)", 1, true), o)
  T.truthy(e:find("train: 4/4 (100%), ", 1, true), "off a terminal, the bar's last line: " .. e)
  code, _, e = run("", "scripts/gpt_fsdp.lua", GPT_TINY .. quote(text_file()) .. " --no-progress")
  T.eq(code, 0, e)
  T.eq(e, "", "--no-progress: nothing on stderr")
end)

T.test("--metrics and --plot mistakes are one line before anything runs", function()
  for _, script in ipairs({ "scripts/mnist.lua", "scripts/mnist_fsdp.lua", "scripts/gpt_fsdp.lua" }) do
    local name = script:match("[^/]*$")
    local code, _, e = run("", script, "--metrics m.txt")
    T.eq(code, 2, script)
    one_error(e, name, "--metrics m.txt: expected a file name ending .csv, .jsonl or .json", script)
    _, _, e = run("", script, "--plot " .. quote(tmp .. "/no/dir/m.png"))
    one_error(e, name, ("--plot %s/no/dir/m.png: no directory %s/no/dir"):format(tmp, tmp), script)
  end
end)

local has_script = os.execute("script -qec true /dev/null > /dev/null 2>&1") -- util-linux script(1)

-- Runs a command line on a terminal (script(1)'s pty); returns the status and what it showed.
local function on_terminal(cmdline)
  local _, _, code = os.execute(("timeout -k 5 120 script -qec %s /dev/null > %s 2>&1"):format(quote(cmdline), quote(out)))
  return code, T.read_file(out)
end

T.test("on a terminal the bar is live: redrawn with \\r, samples/s and ETA, from the start", function()
  if not has_script then print("skip: no script(1) for a pty") return end
  local code, shown = on_terminal(("%s scripts/gpt_fsdp.lua %s%s"):format(quote(exe), GPT_TINY, quote(text_file())))
  T.eq(code, 0, shown)
  T.truthy(shown:find("\rtrain   0%|--------------------| 0/4 [00:00<?, ? tok/s]", 1, true), shown)
  T.truthy(shown:find("\rtrain 100%%|####################| 4/4 %[%d%d:%d%d<00:00, [%d.]+ tok/s, loss=[%d.]+%]"), shown)
  -- the step lines printed through the bar stay whole, each on its own line
  T.truthy(shown:find("\r\27%[Kstep 2: train loss [%d.]+, lr"), shown)
end)

-- A small MNIST (1280 training samples) made from the real one, for the training loop's printout.
local function small_mnist()
  local root = os.getenv("MS_MNIST_ROOT") or "data"
  if not exists(root .. "/MNIST/raw/train-images-idx3-ubyte") then return nil end
  local dst = tmp .. "/small"
  os.execute("mkdir -p " .. quote(dst .. "/MNIST/raw"))
  local code = run("", "bench/mnist_subset.lua", ("%s %s 1280 256"):format(quote(root), quote(dst)))
  T.eq(code, 0, "mnist_subset")
  return dst
end

T.test("mnist.lua prints the PyTorch example's progress line every --log-interval batches", function()
  local data = small_mnist()
  if not data then print("skip: no raw MNIST under $MS_MNIST_ROOT or data/ (scripts/fetch-mnist.sh)") return end
  local code, o, e = run("", "scripts/mnist.lua", "--epochs 1 --log-interval 5 --data " .. quote(data))
  T.eq(code, 0, e)
  local progress = {}
  for line in o:gmatch("Train Epoch: 1 %[[^\n]*") do progress[#progress + 1] = line:match("^(.-)\tLoss: %d+%.%d+$") end
  -- 20 batches of 64: batches 0, 5, 10 and 15 (0-based, as the example's enumerate)
  T.same(progress, {"Train Epoch: 1 [0/1280 (0%)]", "Train Epoch: 1 [320/1280 (25%)]",
                    "Train Epoch: 1 [640/1280 (50%)]", "Train Epoch: 1 [960/1280 (75%)]"})
  T.truthy(o:find("\nTrain Epoch: 1 \tLoss: %d+%.%d+\nTest set: Average loss: "), o)
  code, o, e = run("", "scripts/mnist.lua", "--epochs 1 --dry-run --data " .. quote(data))
  T.eq(code, 0, e)
  T.eq(lines_with(o, "Train Epoch: 1 ["), 1, o)
end)

T.test("mnist.lua and mnist_fsdp.lua: --metrics and --plot on a tiny run; the bar from the first moment", function()
  local data = small_mnist()
  if not data then print("skip: no raw MNIST under $MS_MNIST_ROOT or data/ (scripts/fetch-mnist.sh)") return end
  local csv, jsonl, png = tmp .. "/mn.csv", tmp .. "/mf.jsonl", tmp .. "/mn.png"
  local code, _, e = run("", "scripts/mnist.lua", "--epochs 1 --log-interval 10 --data " .. quote(data)
    .. " --metrics " .. quote(csv) .. " --plot " .. quote(png))
  T.eq(code, 0, e)
  local text = T.read_file(csv)
  T.truthy(text:find("\nstep,1,1,[%d.]+,,,1,[%d.]+,[%d.]+\nstep,11,1,"), text)
  T.truthy(text:find("\nepoch,20,1,[%d.]+,[%d.]+,[%d.]+,1,,[%d.]+\n$"), text)
  local w, h = png_size(png)
  T.eq(w, 800); T.eq(h, 720, "two charts: losses and accuracy")
  code, _, e = run("", "scripts/mnist_fsdp.lua", "--epochs 1 --nproc 1 --data " .. quote(data) .. " --metrics " .. quote(jsonl))
  T.eq(code, 0, e)
  local epoch_row = metrics.read(jsonl)[3]
  T.truthy(epoch_row and epoch_row.kind == "epoch" and epoch_row.step == 20 and epoch_row.epoch == 1
           and type(epoch_row.loss) == "number", T.read_file(jsonl))
  if not has_script then print("skip: no script(1) for a pty") return end
  local shown
  code, shown = on_terminal(("%s scripts/mnist_fsdp.lua --epochs 1 --nproc 2 --data %s"):format(quote(exe), quote(data)))
  T.eq(code, 0, shown)
  T.truthy(shown:find("\repoch 1   0%|--------------------| 0/10 [00:00<?, ? samples/s]", 1, true), shown)
  T.truthy(shown:find("\repoch 1 100%%|####################| 10/10 %[%d%d:%d%d<00:00, [%d.]+ samples/s, loss=[%d.]+%]"), shown)
end)

os.execute("rm -rf " .. quote(tmp))
T.finish()
