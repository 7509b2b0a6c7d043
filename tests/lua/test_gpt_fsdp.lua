-- test_gpt_fsdp.lua: scripts/gpt_fsdp.lua on a generated text: one process drives the
-- training loss down and prints a sample; under `moonshard -n 2` (FSDP) it trains too; a
-- missing --data file is one error line.
local T = require "testing"

local exe = T.launcher_exe()
local quote = T.quote
local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p " .. quote(dir))
local text_path, out, err = dir .. "/text.txt", dir .. "/stdout", dir .. "/stderr"

-- A text with a learnable structure: counting sentences in words.
local WORDS = { "one", "two", "three", "four", "five", "six", "seven", "eight" }
local lines = {}
for i = 1, 400 do
  lines[i] = ("%s plus %s is %s.\n"):format(WORDS[i % 8 + 1], WORDS[i % 3 + 1], WORDS[(i % 8 + i % 3 + 1) % 8 + 1])
end
T.write_file(text_path, table.concat(lines))

local function run(launch, args)
  local _, _, code = os.execute(("timeout -k 5 200 %s %s scripts/gpt_fsdp.lua %s > %s 2> %s"):format(quote(exe),
    launch, args, quote(out), quote(err)))
  return code, T.read_file(out), T.read_file(err)
end

local function train_losses(o)
  local losses = {}
  for loss in o:gmatch("train loss ([%d.]+)") do losses[#losses + 1] = tonumber(loss) end
  return losses
end

T.test("one process: the loss falls and a sample is printed", function()
  local code, o, e = run("", "--data " .. quote(text_path) .. " --steps 60 --log-interval 20 --sample-tokens 40")
  T.eq(code, 0, e)
  T.truthy(o:find("1 rank(s)", 1, true), o)
  local losses = train_losses(o)
  T.eq(#losses, 3, o)
  T.truthy(losses[3] < losses[1] - 0.5, o)
  T.truthy(o:find("sample:\n", 1, true), o)
end)

T.test("two ranks with FSDP: the loss falls", function()
  local code, o, e = run("-n 2", "--data " .. quote(text_path) .. " --steps 40 --log-interval 20 --sample-tokens 10")
  T.eq(code, 0, e)
  T.truthy(o:find("2 rank(s)", 1, true), o)
  local losses = train_losses(o)
  T.eq(#losses, 2, o)
  T.truthy(losses[2] < losses[1], o)
end)

-- The loss lines without their rates (which differ from run to run).
local function loss_lines(o)
  local lines = {}
  for line in o:gmatch("[^\n]+") do
    if line:match("loss") then lines[#lines + 1] = (line:gsub(", [%d.]+ tokens/s.*", "")) end
  end
  return lines
end

T.test("two ranks: stopped at step 6 and resumed, the losses are those of an uninterrupted run", function()
  local common = "--data " .. quote(text_path) .. " --steps 10 --log-interval 2 --sample-tokens 0 --dropout 0.1"
  local code, full, e = run("-n 2", common .. " --checkpoint-dir " .. quote(dir .. "/full"))
  T.eq(code, 0, e)
  local code_a, first, e_a = run("-n 2", common .. " --stop-after 6 --checkpoint-dir " .. quote(dir .. "/cut"))
  T.eq(code_a, 0, e_a)
  T.truthy(first:find("step 6: saved", 1, true), first)
  local code_b, second, e_b = run("-n 2", common .. " --resume --checkpoint-dir " .. quote(dir .. "/cut"))
  T.eq(code_b, 0, e_b)
  T.truthy(second:find("resumed from .*step%-00000006 at step 6"), second)
  local resumed = loss_lines(first)
  for _, line in ipairs(loss_lines(second)) do resumed[#resumed + 1] = line end
  T.eq(#loss_lines(full), 10)
  T.same(resumed, loss_lines(full))
end)

T.test("two ranks: --activation-checkpointing and bfloat16 train as without checkpointing", function()
  local common = "--data " .. quote(text_path) .. " --steps 4 --log-interval 2 --sample-tokens 0 --dropout 0.1"
    .. " --mixed-precision bfloat16"
  local code, plain, e = run("-n 2", common)
  T.eq(code, 0, e)
  local code_ac, ac, e_ac = run("-n 2", common .. " --activation-checkpointing")
  T.eq(code_ac, 0, e_ac)
  T.eq(#loss_lines(plain), 4)
  T.same(loss_lines(ac), loss_lines(plain))
end)

T.test("text_to_tokens.lua writes byte-level token files that --tokens trains on", function()
  local bin = dir .. "/text.bin"
  local _, _, code = os.execute(("%s scripts/text_to_tokens.lua --data %s --out %s > %s 2> %s"):format(quote(exe),
    quote(text_path), quote(bin), quote(out), quote(err)))
  T.eq(code, 0, T.read_file(err))
  local text = T.read_file(text_path)
  local n_val = math.floor(#text * 0.1)
  T.eq(#T.read_file(bin), 1024 + 2 * (#text - n_val))
  T.eq(#T.read_file(dir .. "/text_val.bin"), 1024 + 2 * n_val)
  local o, e
  code, o, e = run("", "--tokens " .. quote(bin) .. " --steps 40 --log-interval 20 --sample-tokens 0")
  T.eq(code, 0, e)
  T.truthy(o:find("vocab 256", 1, true), o)
  local losses = train_losses(o)
  T.eq(#losses, 2, o)
  T.truthy(losses[2] < losses[1], o)
end)

T.test("a missing --data file is one error line", function()
  local code, _, e = run("", "--data " .. quote(dir .. "/none.txt"))
  T.eq(code, 2)
  T.eq(e:match("([^\n]*)\n$"), "gpt_fsdp.lua: error: --data " .. dir .. "/none.txt: cannot open the file")
end)

os.execute("rm -rf " .. quote(dir))
T.finish()
