-- test_repl.lua: the REPL's pieces in lua/moonshard/repl.lua (completion candidates, the pretty
-- printer, what a typed line compiles to, `_`), the readable text of the library's result
-- objects (optimizer, scheduler), and ms.Timer / ms.timeit. The terminal session itself is
-- tests/c/test_repl_pty.c.
local T = require "testing"
local ms = require "moonshard"
local nn = require "moonshard.nn"
local optim = require "moonshard.optim"
local repl = require "moonshard.repl"

-- The candidates for the word that ends the line (as readline splits words: '.' and ':' inside).
local function complete(line, env)
  local first = line:find("[^%s\"'(=,]*$")
  return repl.complete(line, first, #line, env)
end

local function has(list, want)
  for _, v in ipairs(list) do if v == want then return true end end
  return false
end

local function all_start(list, prefix)
  for _, v in ipairs(list) do
    if v:sub(1, #prefix) ~= prefix then return false end
  end
  return true
end

T.test("completion: globals, keywords and fields of tables, nested", function()
  local env = { ms = ms, print = print, pairs = pairs }
  local c = complete("ms.ze", env)
  T.truthy(has(c, "ms.zeros") and has(c, "ms.zeros_like") and #c == 2, table.concat(c, " "))
  T.truthy(all_start(c, "ms.ze"))
  T.truthy(has(complete("ms.cuda.is_", env), "ms.cuda.is_available"))
  T.truthy(has(complete("pr", env), "print"))
  T.truthy(has(complete("fun", env), "function"), "keywords")
  T.truthy(has(complete("y = ms.ones_l", env), "ms.ones_like"), "after an operator")
  T.eq(#complete("nothing.he", env), 0)
  T.eq(#complete("ms.zeros(1).su", env), 0, "a call is never evaluated")
  T.eq(#complete("ms..x", env), 0)
  T.eq(table.concat(complete("t.a", { t = { ["a b"] = 1, ab = 2, ["and"] = 3 } }), " "), "t.ab",
    "only names that can follow a '.'")
end)

T.test("completion: tensor methods after ':' and fields after '.'", function()
  local env = { x = ms.zeros(3) }
  local c = complete("x:su", env)
  T.truthy(has(c, "x:sub") and has(c, "x:sum"), table.concat(c, " "))
  T.truthy(not has(c, "x:sub_"), "in-place variants wait for their full name")
  T.truthy(has(complete("x:sub", env), "x:sub_"))
  T.truthy(not has(complete("x:sh", env), "x:shape"), "a field is no method")
  T.truthy(has(complete("x.sh", env), "x.shape"))
  T.truthy(has(complete("x.requires", env), "x.requires_grad"))
end)

T.test("completion: a module's methods through its class chain, its children and parameters", function()
  local Net = nn.Module:extend("Net")
  function Net:init() self.fc1 = nn.Linear(2, 2) end
  function Net:forward(x) return self.fc1(x) end
  local env = { m = Net() }
  T.truthy(has(complete("m:forw", env), "m:forward"), "the class's own method")
  T.truthy(has(complete("m:param", env), "m:parameters"), "nn.Module's, up the chain")
  T.truthy(has(complete("m.fc", env), "m.fc1"), "a child")
  T.truthy(not has(complete("m:fc", env), "m:fc1"), "a child is no method")
  T.truthy(has(complete("m.fc1.we", env), "m.fc1.weight"), "a parameter, through the child")
  T.truthy(not has(complete("m:_g", env), "m:init") and not has(complete("m:", env), "m:_get_name"),
    "private names only when asked for")
  T.truthy(has(complete("m:_g", env), "m:_get_name"))
end)

T.test("completion: string methods and require names", function()
  T.truthy(has(complete("s:up", { s = "abc" }), "s:upper"))
  local c = complete('require "moonshard.op')
  T.truthy(has(c, "moonshard.optim"), table.concat(c, " "))
  T.truthy(has(complete("require('moonshard.nn_"), "moonshard.nn_layers"))
end)

T.test("the printer: nested, depth-limited, sorted, elided, cycles marked", function()
  T.eq(repl.format({ b = 2, a = 1, 10, 20 }), "{10, 20, a = 1, b = 2}")
  T.eq(repl.format({ x = { y = { z = { w = 1 } } } }), "{x = {y = {z = {...}}}}")
  T.eq(repl.format({ x = { y = 1 } }, { depth = 0 }), "{x = {...}}")
  T.eq(repl.format({ s = "a\nb", [1.5] = true, ["not id"] = 2.0 }), '{[1.5] = true, ["not id"] = 2.0, s = "a\\nb"}')
  local t = { name = "loop" }
  t.self = t
  T.eq(repl.format(t), '{name = "loop", self = <cycle>}')
  local shared = { 1 }
  T.eq(repl.format({ shared, shared }), "{{1}, {1}}", "the same table twice is no cycle")
  local big = {}
  for i = 1, 30 do big[i] = i end
  local text = repl.format(big)
  T.truthy(text:find("... (10 more)", 1, true), text)
  T.truthy(text:find("\n  1, 2, 3", 1, true), "short items share a row: " .. text)
  local wide = {}
  for i = 1, 6 do wide["key" .. i] = ("value %d"):format(i):rep(3) end
  T.eq(select(2, repl.format({ wide = wide }):gsub("\n", "")), 9, "one key a line when too wide")
  T.eq(repl.format({}), "{}")
  T.eq(repl.format(setmetatable({ a = 1 }, { __name = "Thing" })), "Thing {a = 1}")
end)

T.test("the printer: tensors and modules by their own text", function()
  local x = ms.zeros(2)
  T.eq(repl.format({ x = x }), "{x = " .. tostring(x) .. "}")
  local lin = nn.Linear(2, 3)
  T.eq(repl.format(lin), tostring(lin))
end)

T.test("typed lines: local kept, ';' quiet, '=' and '?'", function()
  local cases = {
    { "local x = 1", "x = 1", false },
    { "local a, b <const> = 1, 2", "a, b = 1, 2", false },
    { "local function f() end", "function f() end", false },
    { "local x", "x = nil", false },
    { "local a, b; print(a)", "a, b = nil; print(a)", false },
    { "local f <close> = g()", "local f <close> = g()", false },
    { "localx = 1", "localx = 1", false },
    { "x + 1;", "x + 1", true },
    { "=1 + 1", "1 + 1", false },
    { "?ms.zeros", "help(ms.zeros)", true },
    { "?", "help()", true },
    { "f(x) -- local y = 2", "f(x) -- local y = 2", false },
  }
  for _, c in ipairs(cases) do
    local code, quiet = repl.rewrite(c[1])
    T.eq(code, c[2], c[1])
    T.eq(quiet, c[3], c[1] .. " (quiet)")
  end
end)

T.test("load: an expression returns its values; incomplete input asks for more", function()
  local env = { y = 41 }
  local fn, quiet = repl.load("y + 1", env)
  T.eq(fn(), 42)
  T.eq(quiet, false)
  fn = repl.load("local z = y * 2", env)
  fn()
  T.eq(env.z, 82, "a top-level local stays for the next line")
  local none, err, more = repl.load("function f()", env)
  T.eq(none, nil)
  T.truthy(more and err:find("<eof>", 1, true), err)
  none, err, more = repl.load("1 +* 2", env)
  T.truthy(none == nil and not more and err:find("stdin:1", 1, true), err)
  fn, quiet = repl.load("y;", env)
  T.eq(fn(), 41)
  T.eq(quiet, true)
end)

T.test("show: _ holds the first result, ';' keeps quiet", function()
  local printed = {}
  local saved = print
  print = function(s) printed[#printed + 1] = s end -- luacheck: ignore (the REPL prints through print)
  repl.show(false, 42, "a")
  repl.show(true, 7)
  repl.show(false)
  print = saved
  T.eq(_G._, 7)
  T.eq(#printed, 1)
  T.eq(printed[1], "42\ta")
end)

T.test("setup: the REPL's globals", function()
  local env = {}
  repl.setup(env)
  T.eq(env.ms, ms)
  T.eq(env.nn, nn)
  T.eq(env.optim, optim)
  T.eq(env.F, require "moonshard.functional")
  local out = {}
  local write = io.write
  io.write = function(s) out[#out + 1] = s end -- luacheck: ignore (doc.help writes through it)
  local results = table.pack(env.help(ms.zeros))
  io.write = write
  T.eq(results.n, 0, "help prints; it returns nothing the REPL would print again")
  T.truthy(table.concat(out):find("ms.zeros(", 1, true), table.concat(out))
  T.truthy(tostring(env.help):find("?x", 1, true), "help alone says how to use it")
  T.eq(rawget(_G, "nn"), nil, "scripts get none of them")
end)

T.test("optimizers and schedulers print readably", function()
  local w = nn.Parameter(ms.zeros(2))
  local opt = optim.SGD({ w }, { lr = 0.1, momentum = 0.9 })
  local text = tostring(opt)
  T.truthy(text:find("^SGD %(\nParameter Group 1\n    params: 1 tensor\n"), text)
  T.truthy(text:find("\n    lr: 0.1\n", 1, true) and text:find("\n    momentum: 0.9\n", 1, true), text)
  T.truthy(tostring(optim.AdamW({ w }, { lr = 1e-3 })):find("betas: {0.9, 0.999}", 1, true))
  local sched = optim.lr_scheduler.StepLR(opt, { step_size = 3 })
  text = tostring(sched)
  T.truthy(text:find("^StepLR %(\n    last_lr: {0.1}\n"), text)
  T.truthy(text:find("step_size: 3", 1, true) and not text:find("optimizer", 1, true), text)
  T.eq(repl.format(opt), tostring(opt), "the REPL prints them the same way")
end)

T.test("fsdp.comm_stats's result prints its counters", function()
  local text = tostring(require("moonshard.fsdp_comm").stats({}))
  T.truthy(text:find("^FSDP communication over 0 units %(\n    allgather_bytes: 0\n"), text)
  T.truthy(text:find("\n    waits: 0\n%)$"), text)
end)

T.test("ms.Timer: a stopwatch, and a <close> scope that records", function()
  local t = ms.Timer("work", { quiet = true })
  T.truthy(tostring(t):find("^Timer%(work: .*, running%)$"), tostring(t))
  local s = t:stop()
  T.truthy(s >= 0 and t:elapsed() == s, "stopped: no more time counts")
  t:start()
  T.truthy(t:elapsed() >= s)
  T.eq(t:reset():elapsed(), 0)
  local times = {}
  do
    local _ <close> = ms.Timer("scope", { record = times, quiet = true })
  end
  T.eq(#times, 1)
  T.truthy(times[1] >= 0)
  T.raises(function() ms.Timer(3) end, "ms.Timer", "name", "string", "number")
  T.raises(function() ms.Timer("a", { recrod = {} }) end, "ms.Timer: unknown option 'recrod' (expected one of: quiet, record)")
  T.raises(function() ms.Timer("a", { record = 1 }) end, "record", "table")
end)

T.test("ms.timeit: per-call statistics that print as a line", function()
  local calls = 0
  local s = ms.timeit(function() calls = calls + 1 end, { n = 5, warmup = 2 })
  T.eq(calls, 7)
  T.eq(s.n, 5)
  T.truthy(s.min <= s.median and s.median <= s.max and s.min <= s.mean and s.mean <= s.max)
  T.truthy(tostring(s):find("per call %(median of 5; min .+, mean .+, max .+%)$"), tostring(s))
  calls = 0
  s = ms.timeit(function() calls = calls + 1 end)
  T.truthy(s.n >= 1 and s.n <= 1000 and calls == s.n + 2, "n found from one timed call, after one warm-up")
  T.raises(function() ms.timeit(42) end, "ms.timeit", "fn", "function", "number")
  T.raises(function() ms.timeit(print, { n = 0 }) end, "'n'", ">= 1", "0")
  T.raises(function() ms.timeit(print, { m = 1 }) end, "ms.timeit: unknown option 'm' (expected one of: n, warmup)")
end)

T.finish()
