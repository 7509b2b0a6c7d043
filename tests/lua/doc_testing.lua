-- doc_testing.lua: runs a documentation example the way a reader would type it, shared by
-- test_docstrings.lua (the docstrings' examples) and test_doc_examples.lua (the ```lua blocks of
-- docs/ and README.md).
--
-- Each example runs in a fresh environment holding ms, nn, F and optim, as the REPL predefines
-- them, over the real globals. Its print calls are captured, not shown; a line ending in a
-- `--> text` comment must print text first (whitespace runs compare as one space, and a text
-- ending in "..." need only begin the output), so what the docs say a line prints is checked.
local ms = require "moonshard"

local M = {}

-- What an example may need that this machine may lack; each answers whether it is here.
local NEEDS = {
  cuda = function() return ms.cuda.is_available() end,
  mpi = function() return ms.distributed.is_mpi_available() end,
  mnist = function()
    local root = os.getenv("MS_MNIST_ROOT") or "data"
    local f = io.open(root .. "/MNIST/raw/train-images-idx3-ubyte")
    if f then f:close() end
    return f ~= nil
  end,
}
M.NEEDS = NEEDS

-- nil when `needs` is met here, else the reason to skip; an unknown need is an error.
function M.missing(needs)
  if needs == nil then return nil end
  local have = NEEDS[needs]
  if not have then error(("unknown needs %q (expected cuda, mnist or mpi)"):format(tostring(needs)), 2) end
  if not have() then return "needs " .. needs end
end

local function squash(s) return (s:gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")) end

-- The `--> text` claims of src: { [line number] = text }. A line holding only a comment
-- continues its neighbour's output and is not a claim of its own.
function M.claims(src)
  local out, n = {}, 0
  for line in (src .. "\n"):gmatch("(.-)\n") do
    n = n + 1
    local code, want = line:match("^(.-)%-%->%s?(.*)$")
    if code and code:find("%S") and not code:find("^%s*%-%-") then out[n] = want end
  end
  return out
end

local function matches(got, want)
  got, want = squash(got), squash(want)
  if want:sub(-3) == "..." then return got:sub(1, #want - 3) == want:sub(1, -4) end
  return got == want
end

local function new_env(printed, chunkname)
  local env = setmetatable({}, { __index = _G })
  env.ms = ms
  env.nn = require "moonshard.nn"
  env.F = require "moonshard.functional"
  env.optim = require "moonshard.optim"
  env.print = function(...)
    local parts = table.pack(...)
    for i = 1, parts.n do parts[i] = tostring(parts[i]) end
    local text = table.concat(parts, "\t", 1, parts.n)
    printed.all[#printed.all + 1] = text
    -- the line of the example that printed (a function the example defined counts as well)
    for level = 2, 20 do
      local info = debug.getinfo(level, "Sl")
      if not info then break end
      if info.source == "=" .. chunkname then
        printed[info.currentline] = printed[info.currentline] or text
        break
      end
    end
  end
  return env
end

-- Runs src (an example) as chunk `chunkname`; returns true, or false and a message saying what
-- failed: the error with its traceback, or the claim that did not hold, with what was printed.
function M.run(src, chunkname)
  local printed = { all = {} }
  local env = new_env(printed, chunkname)
  local fn, err = load(src, "=" .. chunkname, "t", env)
  if not fn then return false, "does not compile: " .. err end
  local ok, msg = xpcall(fn, debug.traceback)
  local output = table.concat(printed.all, "\n")
  if not ok then return false, ("%s\nprinted:\n%s"):format(msg, output) end
  local lines = {}
  for n in pairs(M.claims(src)) do lines[#lines + 1] = n end
  table.sort(lines)
  for _, n in ipairs(lines) do
    local want, got = M.claims(src)[n], printed[n]
    if got == nil then
      return false, ("%s:%d: the comment says it prints %q, but the line printed nothing"):format(chunkname, n, want)
    end
    if not matches(got, want) then
      return false, ("%s:%d: the comment says it prints\n  %s\nbut it printed\n  %s"):format(chunkname, n,
        squash(want), squash(got))
    end
  end
  return true
end

return M
