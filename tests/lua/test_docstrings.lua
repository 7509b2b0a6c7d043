-- test_docstrings.lua: the docstrings of lua/moonshard/docs/*.lua and help() (lua/moonshard/doc.lua).
-- Every entry names something public (no stale docs) and once, has a signature, a description and
-- an example, and its example runs and prints what its `-->` comments say. That every public name
-- HAS an entry is docs_coverage.lua (ctest docs.coverage), so its count shows on its own.
local T = require "testing"
local DT = require "doc_testing"
local ms = require "moonshard"
local nn = require "moonshard.nn"
local F = require "moonshard.functional"
local doc = require "moonshard.doc"

local function each_entry(fn)
  for _, area in ipairs(doc.areas()) do
    for _, e in ipairs(area.entries) do fn(e, area) end
  end
end

local function capture(x)
  local buf = {}
  local e = doc.help(x, function(s) buf[#buf + 1] = s end)
  return table.concat(buf), e
end

-- ---- help() ----------------------------------------------------------------------------------

T.test("help(ms.zeros) prints the signature, the description, the options and the example", function()
  local text, e = capture(ms.zeros)
  T.eq(e and e.name, "ms.zeros")
  T.truthy(text:find("ms.zeros(size...", 1, true), text)
  T.truthy(text:find("filled with 0", 1, true), text)
  T.truthy(text:find("Options:\n  dtype", 1, true), text)
  T.truthy(text:find("Example:\n  local x = ms.zeros(2, 3)", 1, true), text)
end)

T.test("help by name, by value, by an alias and by an instance find the same entry", function()
  T.eq(select(2, capture("ms.zeros")).name, "ms.zeros")
  -- an entry resolves its own name to a value: the value finds it whatever the name used
  local x = ms.zeros(2)
  local e = doc.entry("ms.zeros")
  T.eq(doc.resolve("ms.zeros"), ms.zeros)
  T.eq(doc.entry_for(ms.zeros), e)
  T.eq(doc.resolve("Tensor:sum"), x.sum)
  T.eq(doc.resolve("Module:parameters"), nn.Module.parameters)
  T.eq(doc.resolve("nn.Linear"), nn.Linear)
  T.eq(doc.resolve("F.relu"), F.relu)
  T.eq(doc.resolve("optim.AdamW"), require("moonshard.optim").AdamW)
  T.eq(doc.resolve("Optimizer:step"), require("moonshard.optim").Optimizer.step)
  T.eq(doc.resolve("fsdp.ShardingStrategy"), require("moonshard.fsdp").ShardingStrategy)
  T.eq(doc.resolve("ms.no_such_thing"), nil)
  T.eq(doc.resolve("nn.Linear:no_such_method"), nil)
end)

T.test("help of an instance is its class's entry", function()
  T.eq(getmetatable(nn.Linear(2, 2)), nn.Linear)
  local _, e = capture(nn.Linear(2, 2))
  T.eq(e, doc.entry_for(nn.Linear))
end)

T.test("help of something undocumented says so in one line", function()
  local text, e = capture(function() end)
  T.eq(e, nil)
  T.truthy(text:find("^help: no documentation for this function"), text)
  T.eq(select(2, text:gsub("\n", "")), 1)
  text = capture("ms.no_such_thing")
  T.truthy(text:find('no documentation for "ms.no_such_thing"', 1, true), text)
end)

-- ---- the enumeration ------------------------------------------------------------------------

T.test("public_names: functions, tensor methods, classes, their own methods, option tables; no privates", function()
  local names, aliases = doc.public_names()
  local by = {}
  for _, n in ipairs(names) do
    T.eq(by[n.name], nil, "listed twice: " .. n.name)
    by[n.name] = n.value
  end
  T.eq(by["ms.zeros"], ms.zeros)
  T.eq(by["Tensor:sum"], ms.Tensor.sum)
  T.eq(by["nn.Linear"], nn.Linear)
  T.eq(by["Module:parameters"], nn.Module.parameters)
  T.eq(by["F.relu"], F.relu)
  T.eq(by["fsdp.ShardingStrategy"], require("moonshard.fsdp").ShardingStrategy)
  T.eq(by["lr_scheduler.StepLR"], require("moonshard.lr_scheduler").StepLR)
  -- overrides belong to the base class; aliases are one value under its first name
  T.eq(by["nn.Linear:forward"], nil)
  T.eq(by["nn.functional.relu"], nil)
  T.eq(by["optim.lr_scheduler.StepLR"], nil)
  T.eq(by["ms.flatten"], nil)
  T.truthy(by["Tensor:flatten"])
  T.truthy(aliases[ms.Tensor.flatten])
  for name in pairs(by) do
    T.truthy(not name:find("[.:]_"), "a private name is listed: " .. name)
    T.truthy(not name:find(":new$") and not name:find(":init$"), "a constructor is listed as a method: " .. name)
  end
end)

-- ---- the entries ------------------------------------------------------------------------------

T.test("every area has a title and entries", function()
  T.truthy(#doc.areas() > 0, "no area files found")
  for _, area in ipairs(doc.areas()) do
    T.truthy(type(area.title) == "string" and area.title ~= "", area.id .. ": no title")
    T.truthy(#area.entries > 0, area.id .. ": no entries")
  end
end)

T.test("every entry names something public, once (no stale or doubled docs)", function()
  local seen, bad = {}, {}
  each_entry(function(e, area)
    local value = doc.resolve(e.name)
    if value == nil then bad[#bad + 1] = ("%s: %s names nothing"):format(area.id, tostring(e.name)) end
    for _, n in ipairs({ e.name, table.unpack(e.also or {}) }) do
      if seen[n] then bad[#bad + 1] = ("%s is documented twice: %s and %s"):format(n, seen[n], area.id) end
      seen[n] = area.id
      if tostring(n):find("[.:]_") then bad[#bad + 1] = ("%s: %s is private"):format(area.id, n) end
      if n ~= e.name and doc.resolve(n) ~= value then
        bad[#bad + 1] = ("%s: also-name %s is not the same value as %s"):format(area.id, n, e.name)
      end
    end
  end)
  table.sort(bad)
  T.truthy(#bad == 0, #bad .. " stale entries:\n  " .. table.concat(bad, "\n  "))
end)

T.test("every entry has sig, doc and example, and well-formed opts and needs", function()
  local bad = {}
  local function need(cond, e, what) if not cond then bad[#bad + 1] = ("%s: %s"):format(tostring(e.name), what) end end
  each_entry(function(e)
    for _, f in ipairs({ "sig", "doc", "example" }) do
      need(type(e[f]) == "string" and e[f]:find("%S"), e, "no " .. f)
    end
    need(e.also == nil or type(e.also) == "table", e, "also is not a list")
    for i, o in ipairs(e.opts or {}) do
      need(type(o[1]) == "string" and type(o[2]) == "string" and type(o[4]) == "string", e,
        ("opts[%d] is not {name, type, default, description}"):format(i))
    end
    need(e.needs == nil or DT.NEEDS[e.needs], e, "needs must be cuda, mnist or mpi")
  end)
  T.truthy(#bad == 0, #bad .. " incomplete entries:\n  " .. table.concat(bad, "\n  "))
end)

T.test("every example runs and prints what it says", function()
  local bad, ran, skipped = {}, 0, 0
  each_entry(function(e)
    if type(e.example) ~= "string" then return end
    if DT.missing(e.needs) then
      skipped = skipped + 1
      return
    end
    ms.manual_seed(0)
    local ok, err = DT.run(e.example, "example of " .. e.name)
    ran = ran + 1
    if not ok then bad[#bad + 1] = err end
  end)
  print(("examples: %d ran, %d skipped (needs not met here), %d failed"):format(ran, skipped, #bad))
  T.truthy(#bad == 0, table.concat(bad, "\n\n"))
end)

-- ---- the runner itself can fail ----------------------------------------------------------------

T.test("the example runner catches an error, a wrong --> claim and a silent claimed line", function()
  T.truthy(DT.run("print(1 + 1)  --> 2\n", "ok"))
  T.truthy(DT.run("print(ms.zeros(2):sum():item())  --> 0.0\n", "ms is predefined"))
  T.truthy(DT.run("print('a long line of text')  --> a long ...\n", "prefix"))
  T.eq(DT.run("error('boom')\n", "e"), false)
  local ok, msg = DT.run("print(1 + 1)  --> 3\n", "wrong")
  T.eq(ok, false)
  T.truthy(msg:find("wrong:1: the comment says it prints", 1, true), msg)
  ok, msg = DT.run("local x = 1  --> 1\n", "silent")
  T.eq(ok, false)
  T.truthy(msg:find("printed nothing", 1, true), msg)
  -- each example has its own environment: a global of one is not seen by the next
  T.truthy(DT.run("leak = 1\n", "a"))
  T.truthy(DT.run("assert(leak == nil)\n", "b"))
end)

T.finish()
