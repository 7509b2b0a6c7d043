-- The C, header and CUDA files of engine/ and kernels/, their comments stripped and their
-- #includes read: what tests/include_graph.lua (cycles) and tests/layers.lua (layer rules) check.
-- Loaded with dofile; returns a table of functions. Plain Lua 5.4.

local M = {}

M.DIRS = {"engine", "kernels"}
-- Where a quoted include is looked for after the including file's own folder (CMakeLists.txt:
-- ms_kernels puts the root on the path, ms_engine engine/include and engine/src).
local SEARCH = {"", "engine/include/", "engine/src/"}

function M.read(path)
  local f <close> = assert(io.open(path, "rb"))
  return f:read("a")
end

function M.exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

function M.list_sources(root)
  local files = {}
  for _, dir in ipairs(M.DIRS) do
    local p <close> = assert(io.popen(("cd '%s' && find %s -type f 2>/dev/null"):format(root, dir)))
    for line in p:lines() do
      if line:match("%.[ch]$") or line:match("%.cuh?$") then files[#files + 1] = line end
    end
  end
  table.sort(files)
  return files
end

function M.folder(path) return path:match("^(.*)/[^/]*$") or "." end

function M.is_header(path) return path:match("%.h$") or path:match("%.cuh$") end

-- Strips comments so a commented-out include or a call in a comment is not seen; newlines stay,
-- so line numbers still hold.
function M.strip_comments(text)
  text = text:gsub("/%*.-%*/", function(c) return (c:gsub("[^\n]", "")) end)
  return (text:gsub("//[^\n]*", ""))
end

function M.resolve(from, name, set)
  local candidates = {M.folder(from) .. "/" .. name}
  for _, prefix in ipairs(SEARCH) do candidates[#candidates + 1] = prefix .. name end
  for _, c in ipairs(candidates) do
    -- normalise a/b/../c
    local n repeat c, n = c:gsub("[^/]+/%.%./", "", 1) until n == 0
    if set[c] then return c end
  end
  return nil
end

-- Functions a header declares: an identifier followed by '(' at file scope, ending in ';'.
function M.declared(text)
  local names = {}
  for decl in text:gmatch("[^;{}#]+;") do
    local name = decl:match("([%a_][%w_]*)%s*%(")
    if name and not decl:match("^%s*typedef") and not decl:match("%(%s*%*") then names[name] = true end
  end
  return names
end

-- Functions a source defines: a non-static definition line `type name(args) {` at column 0.
function M.defined(text)
  local names = {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    local head = line:match("^[%a_][^(;=]-([%a_][%w_]*)%s*%(")
    -- a definition: no ';' before its body opens (a prototype or a call ends in one)
    if head and not line:match("^static") and not line:match("^extern") and not line:match("^typedef")
        and not line:match("^[^{]*;") then
      names[head] = true
    end
  end
  return names
end

-- Reads the tree under root. Returns
--   files    the sorted paths, relative to root
--   set      path -> true
--   text     path -> its text, comments stripped
--   incl     path -> {target = true} for the includes that resolve to a file of the tree
--   includes path -> list of {name =, line =, target = (nil when outside the tree)}
function M.scan(root)
  local files = M.list_sources(root)
  local tree = {files = files, set = {}, text = {}, incl = {}, includes = {}}
  for _, f in ipairs(files) do tree.set[f] = true end
  for _, f in ipairs(files) do
    local text = M.strip_comments(M.read(root .. "/" .. f))
    tree.text[f], tree.incl[f], tree.includes[f] = text, {}, {}
    local n = 0
    for line in (text .. "\n"):gmatch("([^\n]*)\n") do
      n = n + 1
      local name = line:match('^%s*#%s*include%s*["<]([^">]+)[">]')
      if name then
        local target = M.resolve(f, name, tree.set)
        if target then tree.incl[f][target] = true end
        table.insert(tree.includes[f], {name = name, line = n, target = target})
      end
    end
  end
  return tree
end

return M
