-- repl.lua: the interactive REPL's logic, kept in Lua so that lua/main.c holds only the
-- terminal (readline) glue: completion candidates, the pretty printer, what a typed line
-- becomes before it is compiled (`?x`, `=expr`, a leading `local`, a trailing `;`), showing
-- results (and `_`), and the globals the REPL starts with. docs/tutorials/repl.md.
local M = {}

local fmt, concat, sort = string.format, table.concat, table.sort

local KEYWORDS = {}
for w in ([[and break do else elseif end false for function goto if in local nil not or
  repeat return then true until while]]):gmatch("%a+") do KEYWORDS[w] = true end

-- ---- completion --------------------------------------------------------------------------------

-- A tensor's fields (lua/l_tensor.c's push_field), read through its __index function.
local TENSOR_FIELDS = { "shape", "dtype", "device", "is_cuda", "is_meta", "requires_grad", "ndim", "is_leaf",
  "grad_fn", "grad" }

-- Adds the string keys of v, and of what its metatable's __index reaches, to names. An
-- __index function is looked into, never called: the tables among its upvalues (a tensor's
-- method table, an nn class behind its instance reader) are where its answers come from.
local function collect(v, names, depth, seen)
  if depth > 8 or v == nil or seen[v] then return end
  seen[v] = true
  if type(v) == "function" then
    for i = 1, 255 do
      local name, up = debug.getupvalue(v, i)
      if name == nil then break end
      if name ~= "_ENV" then collect(up, names, depth + 1, seen) end -- _ENV: every global
    end
    return
  end
  if type(v) == "table" then
    for k in next, v do
      if type(k) == "string" then names[k] = true end
    end
  end
  local mt = getmetatable(v)
  if type(mt) == "table" then collect(rawget(mt, "__index"), names, depth + 1, seen) end
end

-- The names reachable after `v.` (fields) or `v:` (methods: functions only, not a module's
-- callable children).
local function members(v, is_method)
  local names = {}
  collect(v, names, 0, {})
  local ms = package.loaded.moonshard
  if ms and ms.is_tensor(v) and not is_method then
    for _, f in ipairs(TENSOR_FIELDS) do names[f] = true end
  end
  local nn = package.loaded["moonshard.nn"]
  if nn and nn.is_module(v) then -- parameters, submodules, buffers and attributes by name
    for _, part in ipairs({ "_parameters", "_modules", "_buffers" }) do
      for k in pairs(rawget(v, part).map) do names[k] = true end
    end
    for k in pairs(rawget(v, "_attrs")) do names[k] = true end
  end
  if is_method then
    for k in pairs(names) do
      local ok, f = pcall(function() return v[k] end)
      if not ok or type(f) ~= "function" then names[k] = nil end
    end
  end
  return names
end

-- The value of a plain chain of names ("ms.cuda"), read field by field under pcall (an
-- __index may raise for an unknown name); nil when a piece is missing or is not plain.
local function resolve(chain, env)
  local v = env
  for name in chain:gmatch("[^.:]+") do
    if type(v) ~= "table" and type(v) ~= "userdata" and type(v) ~= "string" then return nil end
    local ok, x = pcall(function() return v[name] end)
    if not ok or x == nil then return nil end
    v = x
  end
  return v
end

-- Every embedded or loaded module name starting with prefix.
local function module_names(prefix)
  local names = {}
  for _, t in ipairs({ package.preload, package.loaded }) do
    for k in pairs(t) do
      if type(k) == "string" and k:sub(1, #prefix) == prefix then names[k] = true end
    end
  end
  return names
end

-- Private names (a leading _) come only once a _ is typed, and an in-place variant (sub_, zero_)
-- only once the prefix covers the name before its _: x:su offers sub and sum, x:sub offers
-- sub and sub_, and ms.ze completes to ms.zeros.
local function offered(k, prefix, any)
  if k:sub(1, #prefix) ~= prefix then return false end
  if not any and (not k:match("^[%a_][%w_]*$") or KEYWORDS[k]) then return false end -- t["a b"]
  if k:sub(1, 1) == "_" then return prefix:sub(1, 1) == "_" end
  return k:sub(-1) ~= "_" or #prefix >= #k - 1
end

local function sorted_matches(names, prefix, lead, any)
  local out = {}
  for k in pairs(names) do
    if offered(k, prefix, any) then out[#out + 1] = lead .. k end
  end
  sort(out)
  return out
end

-- The completions of the word line:sub(first, last) (what the cursor is at), each a
-- replacement for the whole word: globals and keywords, fields after `.`, methods after `:`,
-- module names inside `require "...`. env: the globals (default _G).
function M.complete(line, first, last, env)
  env = env or _G
  local word = line:sub(first, last)
  local before = line:sub(1, first - 1)
  if before:match("require%s*%(?%s*[\"']$") then return sorted_matches(module_names(word), word, "", true) end
  local chain, sep, prefix = word:match("^([%a_][%w_.:]-)([.:])([%a_]?[%w_]*)$")
  if chain then
    -- only a plain chain of names (a.b.c) is evaluated: nothing is called to complete
    if chain:gsub("[%a_][%w_]*", "n"):gsub("%.n", "") ~= "n" then return {} end
    local v = resolve(chain, env)
    if v == nil then return {} end
    return sorted_matches(members(v, sep == ":"), prefix, chain .. sep)
  end
  if not word:match("^[%a_]?[%w_]*$") then return {} end
  local out = sorted_matches(members(env, false), word, "")
  for k in pairs(KEYWORDS) do
    if k:sub(1, #word) == word then out[#out + 1] = k end
  end
  sort(out)
  return out
end

-- ---- the pretty printer -------------------------------------------------------------------------

local DEFAULTS = { depth = 2, items = 20, width = 80 }

local function quote(s) return (fmt("%q", s):gsub("\\\n", "\\n")) end

local function scalar(v)
  if type(v) == "string" then return quote(v) end
  if math.type(v) == "float" and v == math.floor(v) and v > -1e16 and v < 1e16 then
    return fmt("%.1f", v) -- 2.0, as Lua prints it, whatever the build's number format
  end
  return tostring(v)
end

local function key_text(k)
  if type(k) == "string" and k:match("^[%a_][%w_]*$") and not KEYWORDS[k] then return k end
  return "[" .. scalar(k) .. "]"
end

-- Keys in a stable order: numbers, then strings, then the rest by their text.
local RANK = { number = 1, string = 2 }
local function key_less(a, b)
  local ra, rb = RANK[type(a)] or 3, RANK[type(b)] or 3
  if ra ~= rb then return ra < rb end
  if ra == 3 then return tostring(a) < tostring(b) end
  return a < b
end

local function has_tostring(v)
  local mt = getmetatable(v)
  return type(mt) == "table" and rawget(mt, "__tostring") ~= nil
end

local format_value

-- The entries of t as text: the array part in order, then the other keys sorted.
local function entries(t, o, level, seen)
  local n, keys = rawlen(t), {}
  for k in next, t do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  sort(keys, key_less)
  local out, total = {}, n + #keys
  for i = 1, math.min(n, o.items) do out[#out + 1] = format_value(rawget(t, i), o, level + 1, seen) end
  for i = 1, math.min(#keys, o.items - #out) do
    local k = keys[i]
    out[#out + 1] = key_text(k) .. " = " .. format_value(rawget(t, k), o, level + 1, seen)
  end
  local positional = math.min(n, o.items)
  if total > #out then out[#out + 1] = fmt("... (%d more)", total - #out) end
  return out, positional
end

-- Rows of a table printed on several lines: the array items packed while they fit the width,
-- each keyed item on a row of its own.
local function rows_of(items, positional, room)
  local rows = {}
  for i, s in ipairs(items) do
    local last = rows[#rows]
    if i <= positional and i > 1 and #last + 2 + #s <= room and not (last .. s):find("\n") then
      rows[#rows] = last .. ", " .. s
    else
      rows[#rows + 1] = s
    end
  end
  return rows
end

local function format_table(t, o, level, seen)
  if seen[t] then return "<cycle>" end
  local mt = getmetatable(t)
  local name = type(mt) == "table" and rawget(mt, "__name")
  local head = type(name) == "string" and name .. " " or ""
  if next(t) == nil then return head .. "{}" end
  if level > o.depth then return head .. "{...}" end
  seen[t] = true
  local items, positional = entries(t, o, level, seen)
  seen[t] = nil
  local one = head .. "{" .. concat(items, ", ") .. "}"
  local indent = ("  "):rep(level)
  if #one + #indent <= o.width and not one:find("\n") then return one end
  local rows = rows_of(items, positional, o.width - #indent - 3)
  return head .. "{\n" .. indent .. "  " .. concat(rows, ",\n" .. indent .. "  ") .. ",\n" .. indent .. "}"
end

format_value = function(v, o, level, seen)
  if has_tostring(v) then return tostring(v) end
  if type(v) == "table" then return format_table(v, o, level, seen) end
  return scalar(v)
end

-- v as text: tables nested up to opts.depth (default 2) levels, at most opts.items (20)
-- entries each, sorted keys, cycles marked; a value with __tostring (tensors, modules,
-- optimizers) by its own text; a string quoted.
function M.format(v, opts)
  local o = {}
  for k, d in pairs(DEFAULTS) do o[k] = opts and opts[k] or d end
  return format_value(v, o, 0, {})
end

-- "key: value" lines of t's public fields (no leading _, no functions) in key order, each
-- after indent, skipping the keys of skip: the body of the library's result objects' text
-- (optimizers, schedulers, FSDP's comm_stats).
function M.fields(t, indent, skip)
  local keys = {}
  for k, v in pairs(t) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" and type(v) ~= "function" and not (skip and skip[k]) then
      keys[#keys + 1] = k
    end
  end
  sort(keys)
  local lines = {}
  for i, k in ipairs(keys) do lines[i] = indent .. k .. ": " .. M.format(t[k], { depth = 1 }) end
  return lines
end

-- ---- what a typed line becomes ---------------------------------------------------------------

-- `local a, b <const> = ...` -> `a, b = ...`; `local function f` -> `function f`; `local x` ->
-- `x = nil`: a REPL line is a chunk of its own, so a local would be gone at the next line (as
-- Torch7's trepl did). A `<close>` variable stays local: closing at the end of the line is what
-- it asks for. Anything else is left as it is.
local function rewrite_local(code)
  local lead, rest = code:match("^(%s*)local%s+(.*)$")
  if not lead then return code end
  if rest:match("^function%s") then return lead .. rest end
  local names, pos = {}, 1
  while true do
    local name, p = rest:match("^%s*([%a_][%w_]*)()", pos)
    if not name or KEYWORDS[name] then return code end
    local attrib, after = rest:match("^%s*<%s*([%a_][%w_]*)%s*>()", p)
    if attrib == "close" then return code end
    names[#names + 1] = name
    p = after or p
    local comma = rest:match("^%s*,()", p)
    if not comma then
      pos = p
      break
    end
    pos = comma
  end
  local eq = rest:match("^%s*=()", pos)
  if eq then return lead .. concat(names, ", ") .. " =" .. rest:sub(eq) end
  return lead .. concat(names, ", ") .. " = nil" .. rest:sub(pos)
end

-- The code to compile for a typed line, and whether its results stay unprinted (a trailing
-- `;`). `?x` is help(x); a leading `=` (Lua 5.1's "print this") is dropped.
function M.rewrite(code)
  local topic = code:match("^%s*%?(.-)%s*$")
  if topic then return "help(" .. topic .. ")", true end
  code = code:gsub("^%s*=", "", 1)
  local body = code:match("^(.-);%s*$")
  return rewrite_local(body or code), body ~= nil
end

-- Compiles a typed line (or lines): as an expression whose values print, else as statements.
-- Returns the function and whether to keep quiet, or nil, the message and whether the input
-- merely ended too soon (the statement goes on in the next line).
function M.load(code, env)
  local text, quiet = M.rewrite(code)
  env = env or _G
  local fn = load("return " .. text .. ";", "=stdin", "t", env)
  if fn then return fn, quiet end
  local err
  fn, err = load(text, "=stdin", "t", env)
  if fn then return fn, quiet end
  return nil, err, err:sub(-5) == "<eof>"
end

-- ---- results ------------------------------------------------------------------------------------

-- What the REPL prints for one result: a string as it is (as lua does), the rest through
-- M.format.
local function show_one(v)
  if type(v) == "string" then return v end
  return M.format(v)
end

-- After a line ran: `_` becomes its first result (when it had any), and the results print
-- unless quiet.
function M.show(quiet, ...)
  local n = select("#", ...)
  if n == 0 then return end
  _G._ = (...)
  if quiet then return end
  local out = {}
  for i = 1, n do out[i] = show_one((select(i, ...))) end
  print(concat(out, "\t"))
end

-- ---- the session's globals ----------------------------------------------------------------------

local HELP_INTRO = [[help(x) or ?x prints the documentation of x: a value (ms.zeros, x.sum, nn.Linear, a
module) or a name ("F.relu", "Tensor:sum"). TAB completes names; docs/api/ is the reference.]]

-- The REPL's help: a callable that prints, so that `help` alone says how to use it.
local function make_help(doc)
  local function call(_, ...)
    if select("#", ...) == 0 then return print(HELP_INTRO) end
    if not doc then
      return print("help: no documentation in this build (the module moonshard.doc is missing)")
    end
    doc.help((...)) -- its result (the entry) would print again after the text
  end
  return setmetatable({}, { __call = call, __tostring = function() return HELP_INTRO end })
end

-- The REPL's globals: ms, nn, F and optim loaded, help(x) (doc.help: the documentation of a
-- value or a name). Scripts get none of them.
function M.setup(env)
  env = env or _G
  local ok, doc = pcall(require, "moonshard.doc")
  env.help = make_help(ok and doc or nil)
  env.ms = require "moonshard"
  env.nn = require "moonshard.nn"
  env.F = require "moonshard.functional"
  env.optim = require "moonshard.optim"
  -- ms's lazy fields, read once, stay as fields: ms.<TAB> then offers them
  for _, k in ipairs({ "nn", "F", "optim" }) do pcall(function() return env.ms[k] end) end
end

return M
