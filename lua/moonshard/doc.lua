-- doc.lua: the docstrings of moonshard's Lua API, kept once in lua/moonshard/docs/<area>.lua and
-- read both by help() in the REPL and by scripts/gen_api_docs.lua (docs/api/).
--
--   local doc = require "moonshard.doc"
--   doc.help(ms.zeros)          -- or doc.help(x.sum), doc.help(nn.Linear), doc.help("F.relu")
--
-- An area file returns { title = "...", entry, entry, ... }; an entry is
--   { name = "ms.zeros", also = {...}, sig = "...", doc = [[...]], opts = {{name, type, default,
--     description}, ...}, example = [[...]], needs = "cuda" | "mnist" | "mpi" }
-- Names are what a user writes: ms.f, Tensor:m, nn.Linear, Module:parameters, F.relu,
-- optim.AdamW, Optimizer:step, lr_scheduler.StepLR, LRScheduler:step, and other modules by their
-- require tail (datasets.MNIST, fsdp.FullyShardedDataParallel, gpt.GPT, ...).
--
-- The public API is enumerated, not listed: every embedded module "moonshard.X" that INTERNAL
-- does not name is public, and its functions, classes (callable tables), their methods and its
-- option tables (tables of constants) are public names (doc.public_names). Help and coverage
-- go by value, so an alias (ms.flatten and Tensor:flatten, nn.functional and F) needs no entry
-- of its own.
local ms = require "moonshard" -- also what makes the embedded files (the area files) requireable

local doc = {}

-- Modules that are implementation: reached through a public module, or not an API at all.
local INTERNAL = {
  ["moonshard.doc"] = false, -- public (doc.help); listed to say it was considered
  ["moonshard.plot_canvas"] = true, ["moonshard.plot_chart"] = true, -- ms.plot's raster, layout
  ["moonshard.plot_font"] = true,                                    -- and font (issue 21's watch)
  ["moonshard.plot"] = true, ["moonshard.summary"] = true, -- reached as ms.plot, ms.summary
  ["moonshard.nn_module"] = true, ["moonshard.nn_layers"] = true, ["moonshard.nn_containers"] = true,
  ["moonshard.nn_init"] = true, ["moonshard.nn_meta"] = true, ["moonshard.nn_utils"] = true,
  ["moonshard.fsdp_checkpoint"] = true, ["moonshard.fsdp_comm"] = true,
  ["moonshard.fsdp_memory"] = true, ["moonshard.fsdp_optim"] = true,
  ["moonshard.fsdp_state"] = true, ["moonshard.fsdp_wrap"] = true,
  ["moonshard.tensor_repr"] = true, ["moonshard.tensor_dataset"] = true,
  ["moonshard.seed_net"] = true, ["moonshard.spawn"] = true,
  ["moonshard.repl"] = true, ["moonshard.timer"] = true, -- the REPL's machinery; ms.Timer, ms.timeit
  ["moonshard.cuda_graphs"] = true, -- reached as ms.cuda.graph, ms.cuda.make_graphed_step
  ["moonshard.check_opts"] = true, -- the library's one options-table check
}

-- How users name a module: its require tail, but for these.
local PREFIX = { ["moonshard"] = "ms", ["moonshard.functional"] = "F" }

-- Modules walked first, so that a value reachable from several gets the name users expect
-- (Tensor:flatten rather than ms.flatten, F.relu rather than nn.functional.relu).
local FIRST = { "moonshard", "moonshard.functional", "moonshard.nn", "moonshard.lr_scheduler",
  "moonshard.optim" }

-- Base classes named without their module: Module:parameters, Optimizer:step.
local BARE = { Tensor = { "moonshard", "Tensor" }, Module = { "moonshard.nn", "Module" },
  Optimizer = { "moonshard.optim", "Optimizer" },
  LRScheduler = { "moonshard.lr_scheduler", "LRScheduler" } }

-- Objects whose class no module exports: name -> the table of their methods, found through
-- what makes them (the registry's metatables of the C bindings; a parser argparse builds).
local INSTANCES = {
  ["ms.cuda.Event"] = function() return debug.getregistry()["moonshard.cuda.Event"].__index end,
  ["ms.cuda.CUDAGraph"] = function() return debug.getregistry()["moonshard.cuda.CUDAGraph"].__index end,
  ProcessGroup = function() return debug.getregistry()["moonshard.ProcessGroup"].__index end,
  Work = function() return debug.getregistry()["moonshard.Work"].__index end,
  ["metrics.Logger"] = function() return getmetatable(require("moonshard.metrics").Logger(nil)) end,
  ["watch.Run"] = function() return getmetatable(require("moonshard.watch").Run({}, 1)) end,
  ["argparse.ArgumentParser"] = function()
    return getmetatable(require("moonshard.argparse").ArgumentParser { prog = "doc" })
  end,
}

local fmt, concat = string.format, table.concat

-- ---- reading values without tripping strict __index metamethods --------------------------------

local function get(t, k)
  local ok, v = pcall(function() return t[k] end)
  if ok then return v end
end

-- A class: callable to construct (nn.Linear), the metatable of its instances (TokenFile, made
-- by token_dataset.open_tokens), or a named base to extend (autograd.Function).
local function is_class(v)
  if type(v) ~= "table" then return false end
  local mt = getmetatable(v)
  return (type(mt) == "table" and mt.__call ~= nil) or rawget(v, "__index") == v or
      type(rawget(v, "__name")) == "string"
end

-- A table of constants (fsdp.ShardingStrategy): non-empty, every value a string, number or boolean.
local function is_option_table(v)
  if type(v) ~= "table" or getmetatable(v) ~= nil or next(v) == nil then return false end
  for _, x in pairs(v) do
    local t = type(x)
    if t ~= "string" and t ~= "number" and t ~= "boolean" then return false end
  end
  return true
end

-- Private: a leading `_`, and a module's `internal` table (what its tests reach into).
local function public_key(k) return type(k) == "string" and k:sub(1, 1) ~= "_" and k ~= "internal" end

-- Methods that are the constructor's, documented by the class's own entry: `new` (what
-- calling the class does) and `init` (what a subclass overrides to build).
local CONSTRUCTOR = { new = true, init = true }

local function sorted_keys(t)
  local keys = {}
  if type(t) ~= "table" then return keys end
  for k in pairs(t) do
    if public_key(k) then keys[#keys + 1] = k end
  end
  table.sort(keys)
  return keys
end

-- ---- modules ------------------------------------------------------------------------------------

-- Every public module name, FIRST ones first, then the rest sorted.
function doc.public_modules()
  local seen, out = {}, {}
  local function add(name)
    if not seen[name] and not INTERNAL[name] and not name:find("^moonshard%.docs%.") then
      seen[name] = true
      out[#out + 1] = name
    end
  end
  for _, name in ipairs(FIRST) do add(name) end
  local rest = {}
  for name in pairs(package.preload) do
    if type(name) == "string" and name:find("^moonshard%.") then rest[#rest + 1] = name end
  end
  table.sort(rest)
  for _, name in ipairs(rest) do add(name) end
  return out
end

local function prefix_of(modname)
  return PREFIX[modname] or modname:match("([^.]+)$")
end

local function load_module(modname)
  local ok, m = pcall(require, modname)
  if ok then return m end
  return nil, m
end

-- ---- the enumeration ------------------------------------------------------------------------------

-- The public modules loaded: { {modname, value}, ... }, roots (module table -> its prefix: a
-- namespace reached again is walked once, under its own name) and the ones that failed.
local function load_public()
  local loaded, roots, failed = {}, {}, {}
  for _, modname in ipairs(doc.public_modules()) do
    local m, err = load_module(modname)
    if m == nil then
      failed[#failed + 1] = fmt("%s: %s", modname, tostring(err))
    else
      loaded[#loaded + 1] = { modname, m }
      if type(m) == "table" and roots[m] == nil then roots[m] = prefix_of(modname) end
    end
  end
  return loaded, roots, failed
end

-- A list of names where each value goes once, under its first name (later ones are aliases).
local function new_collector()
  local c = { names = {}, by_value = {}, aliases = {}, classes = {} }
  function c.add(name, value, area)
    if c.by_value[value] then
      local a = c.aliases[value] or {}
      a[#a + 1] = name
      c.aliases[value] = a
      return false
    end
    c.by_value[value] = name
    c.names[#c.names + 1] = { name = name, value = value, area = area }
    return true
  end
  function c.add_class(name, cls, area)
    if c.add(name, cls, area) then c.classes[#c.classes + 1] = { name = name, cls = cls, area = area } end
  end
  return c
end

-- Adds the functions, classes and option tables of namespace t (named prefix) and of its
-- sub-namespaces (ms.cuda, nn.init), but not of another module's table (nn.functional is F).
local function walk(c, roots, t, prefix, area, visiting)
  visiting[t] = true
  for _, k in ipairs(sorted_keys(t)) do
    local v = rawget(t, k)
    local name = prefix .. "." .. k
    if type(v) == "function" or is_option_table(v) then
      c.add(name, v, area)
    elseif is_class(v) then
      c.add_class(name, v, area)
    elseif type(v) == "table" and not visiting[v] and (roots[v] == nil or roots[v] == prefix) then
      walk(c, roots, v, name, area, visiting)
    end
  end
end

local function walk_module(c, roots, modname, m)
  local prefix = prefix_of(modname)
  if modname == "moonshard" then
    -- tensor methods first: Tensor:flatten is the name, ms.flatten the alias
    local T = rawget(m, "Tensor")
    for _, k in ipairs(sorted_keys(T)) do
      if type(T[k]) == "function" then c.add("Tensor:" .. k, T[k], "Tensor") end
    end
    walk(c, roots, m, prefix, prefix, { [T] = true })
  elseif type(m) == "function" then
    c.add(prefix, m, prefix)
  elseif is_class(m) then
    c.add_class(prefix, m, prefix)
  elseif type(m) == "table" and roots[m] == prefix then
    walk(c, roots, m, prefix, prefix, {})
  end
end

local function add_instance_methods(c)
  for _, name in ipairs(sorted_keys(INSTANCES)) do
    local ok, methods = pcall(INSTANCES[name])
    if ok and type(methods) == "table" then
      for _, k in ipairs(sorted_keys(methods)) do
        if type(methods[k]) == "function" then c.add(name .. ":" .. k, methods[k], name:match("^[^.]+")) end
      end
    end
  end
end

local function parent(cls)
  local p = get(getmetatable(cls), "__index")
  if type(p) == "table" and p ~= cls then return p end
end

-- Methods: those a class defines itself (an override belongs to the public base that first has
-- it) and those of an unnamed base it inherits (datasets' shared methods); not the constructor's.
local function add_methods(c)
  local class_of = {}
  for _, cl in ipairs(c.classes) do class_of[cl.cls] = true end
  local function overrides(cls, k)
    local p = parent(cls)
    while p do
      if class_of[p] and rawget(p, k) ~= nil then return true end
      p = parent(p)
    end
    return false
  end
  for _, cl in ipairs(c.classes) do
    local last = cl.name:match("([^.]+)$")
    local label = BARE[last] and last or cl.name
    local t = cl.cls
    repeat
      for _, k in ipairs(sorted_keys(t)) do
        local v = rawget(t, k)
        if type(v) == "function" and not CONSTRUCTOR[k] and not overrides(cl.cls, k) and
            (t == cl.cls or rawget(cl.cls, k) == nil) then
          c.add(label .. ":" .. k, v, cl.area)
        end
      end
      t = parent(t)
    until t == nil or class_of[t]
  end
end

local function enumerate()
  local loaded, roots, failed = load_public()
  local c = new_collector()
  for _, lm in ipairs(loaded) do walk_module(c, roots, lm[1], lm[2]) end
  add_instance_methods(c)
  add_methods(c)
  return c.names, c.aliases, failed
end

-- Every public name: an array of { name =, value =, area = } in walk order, each distinct value
-- once; then aliases (value -> its other names) and the modules that failed to load.
function doc.public_names()
  return enumerate()
end

-- ---- resolving a name to its value -----------------------------------------------------------

local function module_by_prefix(p)
  for _, modname in ipairs(doc.public_modules()) do
    if prefix_of(modname) == p then return load_module(modname) end
  end
end

-- The value a documented name stands for (nil if it names nothing).
function doc.resolve(name)
  if type(name) ~= "string" then return nil end
  local path, method = name:match("^([%w_.]+):([%w_]+)$")
  path = path or name
  local segs = {}
  for s in path:gmatch("[^.]+") do segs[#segs + 1] = s end
  if #segs == 0 then return nil end
  local v
  local bare = BARE[segs[1]]
  if bare and (method or #segs > 1) then
    v = get(load_module(bare[1]), bare[2])
  else
    v = module_by_prefix(segs[1])
  end
  for i = 2, #segs do
    if type(v) ~= "table" then return nil end
    v = get(v, segs[i])
  end
  if method and INSTANCES[path] then
    local ok, methods = pcall(INSTANCES[path])
    v = ok and methods or nil
  end
  if method then
    if type(v) ~= "table" then return nil end
    v = get(v, method)
  end
  return v
end

-- ---- the docstrings -----------------------------------------------------------------------------

-- The area files' module names, sorted: every embedded lua/moonshard/docs/*.lua (the binary and
-- moonshard.so both preload the whole library), so a new area file needs no list to be found.
function doc.area_modules()
  local out = {}
  for name in pairs(package.preload) do
    if type(name) == "string" and name:find("^moonshard%.docs%.") then out[#out + 1] = name end
  end
  table.sort(out)
  return out
end

local cache -- { areas = {...}, by_name = {}, by_value = {} }, built on first use

-- Loads every area file: areas[i] = { id =, title =, entries = {...} }. An area file that fails
-- to load is an error: the docs are part of the library.
function doc.areas()
  if cache then return cache.areas end
  local areas, by_name = {}, {}
  for _, modname in ipairs(doc.area_modules()) do
    local t = require(modname)
    local area = { id = modname:match("([^.]+)$"), title = t.title or modname, entries = {} }
    for _, e in ipairs(t) do
      e.area = area.id
      area.entries[#area.entries + 1] = e
      by_name[e.name] = by_name[e.name] or e
      for _, a in ipairs(e.also or {}) do by_name[a] = by_name[a] or e end
    end
    areas[#areas + 1] = area
  end
  cache = { areas = areas, by_name = by_name }
  return areas
end

-- The entry documenting name (its own name or an `also` name), or nil.
function doc.entry(name)
  doc.areas()
  return cache.by_name[name]
end

-- The entry documenting a value (a function, class, option table), or nil.
function doc.entry_for(value)
  doc.areas()
  if not cache.by_value then
    local by_value = {}
    for _, area in ipairs(cache.areas) do
      for _, e in ipairs(area.entries) do
        for _, n in ipairs({ e.name, table.unpack(e.also or {}) }) do
          local v = doc.resolve(n)
          if v ~= nil and by_value[v] == nil then by_value[v] = e end
        end
      end
    end
    cache.by_value = by_value
  end
  return cache.by_value[value]
end

-- The entry for what help() was given: a name, a documented value, an instance of a class.
local function lookup(x)
  if type(x) == "string" then
    return doc.entry(x) or doc.entry_for(doc.resolve(x))
  end
  local e = x ~= nil and doc.entry_for(x)
  if e then return e end
  if ms.is_tensor(x) then return doc.entry("ms.Tensor") end
  local mt = getmetatable(x)
  if type(mt) ~= "table" then return nil end
  if type(x) == "table" and doc.entry_for(mt) then return doc.entry_for(mt) end
  -- an object of a class no module exports (a parser, an Event): the entry of what makes it
  for name, methods in pairs(INSTANCES) do
    local ok, t = pcall(methods)
    if ok and (t == mt or t == rawget(mt, "__index")) and doc.entry(name) then return doc.entry(name) end
  end
end

-- ---- formatting ------------------------------------------------------------------------------------

local function indent(text, pad)
  return (text:gsub("\n+$", ""):gsub("[^\n]+", function(line) return pad .. line end))
end

-- The options table as aligned text columns: name, type, default, description.
local function format_opts(opts)
  local w = { 0, 0, 0 }
  for _, o in ipairs(opts) do
    for i = 1, 3 do w[i] = math.max(w[i], #tostring(o[i] or "")) end
  end
  local lines = {}
  for _, o in ipairs(opts) do
    lines[#lines + 1] = fmt("  %-" .. w[1] .. "s  %-" .. w[2] .. "s  %-" .. w[3] .. "s  %s",
      o[1], o[2] or "", o[3] or "", o[4] or ""):gsub("%s+$", "")
  end
  return concat(lines, "\n")
end

-- What help prints for an entry: signature, description, options, example.
function doc.format(e)
  local parts = { e.sig or e.name }
  if e.also and #e.also > 0 then parts[#parts + 1] = "Also: " .. concat(e.also, ", ") end
  if e.doc then parts[#parts + 1] = (e.doc:gsub("^%s+", ""):gsub("%s+$", "")) end
  if e.opts and #e.opts > 0 then parts[#parts + 1] = "Options:\n" .. format_opts(e.opts) end
  if e.example then parts[#parts + 1] = "Example:\n" .. indent(e.example, "  ") end
  return concat(parts, "\n\n") .. "\n"
end

local function describe(x)
  if type(x) == "string" then return fmt("%q", x) end
  return fmt("this %s", type(x))
end

-- Prints the documentation of x (a value or a name); an undocumented x gets one line saying so.
-- `out` (default io.write) receives the text. Returns the entry, or nil.
function doc.help(x, out)
  out = out or io.write
  local e = lookup(x)
  if e then
    out(doc.format(e))
  else
    out(fmt("help: no documentation for %s (try help(\"ms.zeros\") or help(x.sum))\n", describe(x)))
  end
  return e
end

return doc
