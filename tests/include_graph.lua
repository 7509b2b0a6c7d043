-- The file-level include graph of engine/ and kernels/ (C, headers, CUDA) and its cycles, as a
-- ratchet: every strongly connected component of more than one file must be listed in
-- tests/include_cycles.allowed, and every listed one must still exist, so the list can only
-- shrink as issue 18 untangles the layers. Plain Lua 5.4 (lua5.4 or build/moonshard runs it).
--
--   include_graph.lua [--root DIR] [--allowed FILE] [--print]   check (or --print the cycles)
--   include_graph.lua --self-test                                 the checker on a made-up tree
--
-- Two graphs are checked, each line of the allowed file says which:
--   include  A -> H when A has `#include "H"` (or <H>) and H resolves to a file of the tree.
--   defines  A -> B when A includes a header declaring a function that B defines: the include
--            graph with each header replaced by the files that implement it. An include cycle
--            is rare (guards hide it); this is where one layer reaching up into another shows.
-- A component is "across" when its files lie in more than one folder, else "within".

-- The files and their includes come from tests/source_tree.lua, beside this script.
local tree_lib = dofile(((arg and arg[0] or ""):match("^(.*)/") or ".") .. "/source_tree.lua")
local folder, exists = tree_lib.folder, tree_lib.exists

local function build(root)
  local tree = tree_lib.scan(root)
  local files, text, incl = tree.files, tree.text, tree.incl
  -- defines: who implements each header's declarations
  local definer = {}
  for _, f in ipairs(files) do
    if not f:match("%.h$") and not f:match("%.cuh$") then
      for name in pairs(tree_lib.defined(text[f])) do
        definer[name] = definer[name] or {}
        definer[name][f] = true
      end
    end
  end
  local impl = {}
  for _, f in ipairs(files) do
    if f:match("%.h$") or f:match("%.cuh$") then
      impl[f] = {}
      for name in pairs(tree_lib.declared(text[f])) do
        for d in pairs(definer[name] or {}) do impl[f][d] = true end
      end
    end
  end
  -- a file sees every header its includes pull in, so it can call what they declare
  local function seen(f, acc)
    for h in pairs(incl[f]) do
      if not acc[h] then acc[h] = true; seen(h, acc) end
    end
    return acc
  end
  local defs = {}
  for _, f in ipairs(files) do
    defs[f] = {}
    for h in pairs(seen(f, {})) do
      for d in pairs(impl[h] or {}) do
        -- the edge remembers one header it goes through (the same one each run), for the chain
        if d ~= f and (defs[f][d] == nil or h < defs[f][d]) then defs[f][d] = h end
      end
    end
  end
  return files, {include = incl, defines = defs}
end

-- Tarjan's strongly connected components; returns those of more than one file, sorted.
local function components(files, edges)
  local index, low, on, stack, out, n = {}, {}, {}, {}, {}, 0
  local function sorted_targets(v)
    local t = {}
    for w in pairs(edges[v]) do t[#t + 1] = w end
    table.sort(t)
    return t
  end
  local function visit(v)
    n = n + 1; index[v], low[v] = n, n
    stack[#stack + 1] = v; on[v] = true
    for _, w in ipairs(sorted_targets(v)) do
      if not index[w] then visit(w); low[v] = math.min(low[v], low[w])
      elseif on[w] then low[v] = math.min(low[v], index[w]) end
    end
    if low[v] == index[v] then
      local comp = {}
      repeat
        local w = table.remove(stack); on[w] = nil; comp[#comp + 1] = w
      until w == v
      if #comp > 1 then table.sort(comp); out[#out + 1] = comp end
    end
  end
  for _, f in ipairs(files) do if not index[f] then visit(f) end end
  table.sort(out, function(a, b) return a[1] < b[1] end)
  return out
end

local function kind(comp)
  local dirs = {}
  for _, f in ipairs(comp) do dirs[folder(f)] = true end
  return next(dirs, next(dirs)) and "across" or "within"
end

-- The chain to print: a shortest cycle of the component, through files of different folders
-- when there is one. A defines edge shows the header it goes through: a -[h]-> b.
local function shortest_cycle(start, inside, edges)
  local prev, queue, seen, i = {}, {start}, {}, 1
  while queue[i] do
    local v = queue[i]; i = i + 1
    local targets = {}
    for w in pairs(edges[v]) do targets[#targets + 1] = w end
    table.sort(targets)
    for _, w in ipairs(targets) do
      if w == start then
        local path, u = {start}, v
        while u ~= start do table.insert(path, 2, u); u = prev[u] end
        path[#path + 1] = start
        return path
      end
      if inside[w] and not seen[w] then seen[w] = true; prev[w] = v; queue[#queue + 1] = w end
    end
  end
end

-- `known`: file -> the listed component it is in; a cycle with an edge between two different
-- (or no) listed components is preferred, as that edge is what is new.
local function chain(comp, edges, known)
  local inside = {}
  for _, f in ipairs(comp) do inside[f] = true end
  local best
  local function score(path)
    local fresh = 0
    for j = 2, #path do
      local a, b = known and known[path[j - 1]], known and known[path[j]]
      if known and (a == nil or a ~= b) then fresh = 1 end
    end
    return fresh * 4 + (kind(path) == "across" and 2 or 0)
  end
  for _, start in ipairs(comp) do
    local path = shortest_cycle(start, inside, edges)
    if path then
      local sc = score(path)
      if not best or sc > best.score or (sc == best.score and #path < #best.path) then
        best = {path = path, score = sc}
      end
    end
  end
  local out = {best.path[1]}
  for j = 2, #best.path do
    local via = edges[best.path[j - 1]][best.path[j]]
    out[#out + 1] = (type(via) == "string" and ("-[" .. via .. "]-> ") or "-> ") .. best.path[j]
  end
  return table.concat(out, " ")
end

local function key(graph, comp) return graph .. " " .. kind(comp) .. ": " .. table.concat(comp, " ") end

-- The allowed file: a line "GRAPH KIND:" then the component's files, one per indented line;
-- '#' starts a comment. (--print writes exactly this form.)
local function load_allowed(path)
  local allowed, order, current = {}, {}, nil
  local function finish()
    if not current then return end
    table.sort(current.files)
    local k = current.head .. " " .. table.concat(current.files, " ")
    allowed[k] = true; order[#order + 1] = k
    current = nil
  end
  if not exists(path) then return allowed, order end
  for line in io.lines(path) do
    line = line:gsub("#.*", ""):gsub("%s+$", "")
    local head = line:match("^(%w+ %w+:)$")
    if head then finish(); current = {head = head, files = {}}
    elseif line:match("^%s+%S+$") then
      assert(current, path .. ": a file before any 'GRAPH KIND:' line: " .. line)
      current.files[#current.files + 1] = line:match("%S+")
    else
      assert(line == "", path .. ": cannot read line: " .. line)
    end
  end
  finish()
  return allowed, order
end

local function format_entry(graph, comp, edges)
  return ("%s %s:\n  %s\n  # chain: %s"):format(graph, kind(comp), table.concat(comp, "\n  "),
                                                chain(comp, edges))
end

-- Returns the problems found (empty when the tree matches the allowed list) and the report.
local function check(root, allowed_path)
  local files, graphs = build(root)
  local allowed, order = load_allowed(allowed_path)
  local known = {include = {}, defines = {}}
  for _, k in ipairs(order) do
    local graph, files = k:match("^(%w+) %w+: (.*)$")
    for f in files:gmatch("%S+") do if known[graph] then known[graph][f] = k end end
  end
  local problems, found, report = {}, {}, {}
  for _, graph in ipairs({"include", "defines"}) do
    for _, comp in ipairs(components(files, graphs[graph])) do
      local k = key(graph, comp)
      found[k] = true
      report[#report + 1] = format_entry(graph, comp, graphs[graph])
      if not allowed[k] then
        problems[#problems + 1] = ("new %s cycle (%s folders, %d files) not in %s:\n    %s\n    chain: %s")
          :format(graph, kind(comp), #comp, allowed_path, table.concat(comp, " "), chain(comp, graphs[graph], known[graph]))
      end
    end
  end
  for _, k in ipairs(order) do
    if not found[k] then
      problems[#problems + 1] = ("listed cycle is gone (good: delete its line from %s):\n    %s"):format(allowed_path, k)
    end
  end
  return problems, report
end

local function self_test()
  local dir = os.tmpname(); os.remove(dir)
  assert(os.execute(("mkdir -p '%s/engine/src/a' '%s/engine/src/b' '%s/kernels'"):format(dir, dir, dir)))
  local function write(path, text)
    local f <close> = assert(io.open(dir .. "/" .. path, "w")); f:write(text)
  end
  write("engine/src/a/x.h", "int a_x(void);\n")
  write("engine/src/a/x.c", '#include "a/x.h"\n#include "b/y.h"\nint a_x(void) { return b_y(); }\n')
  write("engine/src/b/y.h", "int b_y(void);\n")
  write("engine/src/b/y.c", '#include "b/y.h"\nint b_y(void) { return 1; }\n')
  write("kernels/k.h", "// #include \"kernels/k.h\"\nint k(void);\n")
  local allowed = dir .. "/allowed"
  write("allowed", "")
  local failures = 0
  local function expect(what, want)
    local problems = check(dir, allowed)
    local text = table.concat(problems, "\n")
    local ok = (want == nil and #problems == 0) or (want ~= nil and text:find(want, 1, true) ~= nil)
    if not ok then failures = failures + 1 end
    print(("%s: %s"):format(ok and "ok" or "FAILED", what))
    if not ok then print("  got: " .. (text == "" and "no problem" or text)) end
  end
  expect("an acyclic tree passes", nil)
  -- y.c reaches back up into a/: a defines cycle across folders
  write("engine/src/b/y.c", '#include "b/y.h"\n#include "a/x.h"\nint b_y(void) { return 1; }\n')
  expect("a defines cycle across folders fails",
         "new defines cycle (across folders, 2 files) not in " .. allowed)
  write("allowed", "defines across:\n  engine/src/b/y.c\n  engine/src/a/x.c  # either order\n")
  expect("the listed cycle passes", nil)
  write("engine/src/b/y.c", '#include "b/y.h"\nint b_y(void) { return 1; }\n')
  expect("a listed cycle that is gone fails", "listed cycle is gone")
  write("allowed", "")
  -- headers including each other inside one folder
  write("engine/src/a/x.h", '#include "a/w.h"\nint a_x(void);\n')
  write("engine/src/a/w.h", '#include "x.h"\n')
  expect("an include cycle within a folder fails", "new include cycle (within folders, 2 files)")
  expect("its chain is named", "chain: engine/src/a/w.h -> engine/src/a/x.h -> engine/src/a/w.h")
  write("engine/src/a/w.h", "")
  write("engine/src/b/y.c", '#include "b/y.h"\n#include "a/x.h"\nint b_y(void) { return 1; }\n')
  expect("a defines chain names its headers",
         "chain: engine/src/a/x.c -[engine/src/b/y.h]-> engine/src/b/y.c -[engine/src/a/x.h]-> engine/src/a/x.c")
  os.execute(("rm -rf '%s'"):format(dir))
  return failures == 0
end

local args, opts = {...}, {root = ".", allowed = nil}
local i = 1
while args[i] do
  local a = args[i]
  if a == "--root" then opts.root = args[i + 1]; i = i + 1
  elseif a == "--allowed" then opts.allowed = args[i + 1]; i = i + 1
  elseif a == "--print" then opts.print = true
  elseif a == "--self-test" then opts.self_test = true
  else io.stderr:write("include_graph: unknown argument " .. a .. "\n"); os.exit(2) end
  i = i + 1
end
if opts.self_test then os.exit(self_test() and 0 or 1) end
opts.allowed = opts.allowed or (opts.root .. "/tests/include_cycles.allowed")
local problems, report = check(opts.root, opts.allowed)
if opts.print then
  for _, entry in ipairs(report) do print(entry .. "\n") end
  os.exit(0)
end
for _, p in ipairs(problems) do io.stderr:write(p, "\n") end
if #problems > 0 then os.exit(1) end
print(("include_graph: %d cycles, all listed in %s"):format(#report, opts.allowed))
