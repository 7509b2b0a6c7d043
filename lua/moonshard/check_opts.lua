-- check_opts.lua: the one check of an options table for the whole Lua library (private: the modules
-- that take options call it; users never do). Every function raises the same two messages:
--   DataLoader: expected an options table, got number
--   DataLoader: unknown option 'shufle' (expected one of: batch_size, drop_last, ...)
-- with the known names sorted. Value checks (types, ranges) stay with each function.
local M = {}

-- `known` is a list of names {"a", "b"}, a set {a = true}, or a table of defaults {a = 1, b = false}
-- (its string keys): the form each caller already has.
local function is_known(known, k)
  if type(k) ~= "string" then return false end
  if known[k] ~= nil then return true end
  for _, name in ipairs(known) do
    if name == k then return true end
  end
  return false
end

local function sorted_names(known)
  local names, seen = {}, {}
  local function add(n)
    if type(n) == "string" and not seen[n] then
      seen[n] = true
      names[#names + 1] = n
    end
  end
  for k in pairs(known) do add(k) end
  for _, n in ipairs(known) do add(n) end
  table.sort(names)
  return names
end

-- A key as the user wrote it: 'name' for a string, [1] for a list entry or another key.
local function show_key(k)
  if type(k) == "string" then return ("'%s'"):format(k) end
  return ("[%s]"):format(tostring(k))
end

-- Whether v, a function's last argument, is its options table rather than a positional value:
-- a plain table (no metatable: not a module, a class or an object) with no list part.
function M.is_options(v)
  return type(v) == "table" and getmetatable(v) == nil and v[1] == nil
end

-- What is wrong with `opts` (without the function's name), or nil when it is a plain table of
-- known keys. A table with a metatable is not options: a module or an object passed by mistake.
function M.problem(opts, known)
  if type(opts) ~= "table" then return ("expected an options table, got %s"):format(type(opts)) end
  if getmetatable(opts) ~= nil then return "expected an options table, got a table with a metatable" end
  for k in pairs(opts) do
    if not is_known(known, k) then
      return ("unknown option %s (expected one of: %s)"):format(show_key(k), table.concat(sorted_names(known), ", "))
    end
  end
  return nil
end

-- Checks opts (a nil is an error) and returns it. `level` is the level the caller would give
-- error() itself (2: the caller's caller's line). The library's `error` (l_errors.c) puts the
-- message at the first frame outside the library in any case; level is where none is found.
function M.check_given(fname, opts, known, level)
  local why = M.problem(opts, known)
  if why then error(("%s: %s"):format(fname, why), level + 1) end
  return opts
end

-- As check_given, for options that may be left out: nil gives {}.
function M.check(fname, opts, known, level)
  if opts == nil then return {} end
  M.check_given(fname, opts, known, level + 1) -- not a tail call: that would drop this level
  return opts
end

-- A flag given as PyTorch's positional argument (a boolean) or as an options table {key = b}, as
-- zero_grad(set_to_none) takes it: its value, `default` when left out (nil, or a table without it).
function M.flag(fname, v, key, default, level)
  if v == nil then return default end
  if type(v) == "boolean" then return v end
  if type(v) ~= "table" then
    error(("%s: expected an options table {%s =} or a boolean, got %s"):format(fname, key, type(v)), level + 1)
  end
  M.check_given(fname, v, {key}, level + 1)
  local x = v[key]
  if x ~= nil and type(x) ~= "boolean" then
    error(("%s: option '%s': expected a boolean, got %s"):format(fname, key, type(x)), level + 1)
  end
  if x == nil then return default end
  return x
end

-- The set of every name the tables list (string keys and list entries): one `known` for a
-- function whose options come from several tables (defaults and optional ones).
function M.union(...)
  local set = {}
  for i = 1, select("#", ...) do
    for _, n in ipairs(sorted_names((select(i, ...)))) do set[n] = true end
  end
  return set
end

return M
