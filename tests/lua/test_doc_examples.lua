-- test_doc_examples.lua: every ```lua block of README.md, docs/ (but docs/api/, generated from the
-- docstrings, whose examples test_docstrings.lua runs) and examples/**.md runs, each in a fresh
-- environment with ms, nn, F and optim predefined (doc_testing.lua), and prints what its `-->`
-- comments say. A block's first line may mark it:
--   -- needs: cuda | mpi | mnist    run only where that is available (skipped otherwise)
--   -- fragment                     deliberately partial code: compiled, never run
local T = require "testing"
local DT = require "doc_testing"
local ms = require "moonshard"

local ROOTS = { "README.md", "docs", "examples" }
local SKIP = { ["docs/api"] = true }

local function is_dir(path) return (pcall(ms._list_dir, path)) end

-- The Markdown files under path (a file or a folder), sorted.
local function markdown_files(path, out)
  if SKIP[path] then return out end
  if is_dir(path) then
    local names = ms._list_dir(path)
    table.sort(names)
    for _, n in ipairs(names) do markdown_files(path .. "/" .. n, out) end
  elseif path:find("%.md$") then
    out[#out + 1] = path
  end
  return out
end

-- The ```lua blocks of a Markdown text: { line =, src = } (line: the fence's line number).
local function lua_blocks(text)
  local blocks, cur, n = {}, nil, 0
  for line in (text .. "\n"):gmatch("(.-)\n") do
    n = n + 1
    if cur then
      if line:find("^%s*```%s*$") then
        cur.src = table.concat(cur.lines, "\n") .. "\n"
        blocks[#blocks + 1] = cur
        cur = nil
      else
        cur.lines[#cur.lines + 1] = line
      end
    elseif line:find("^%s*```lua%s*$") then
      cur = { line = n, lines = {} }
    end
  end
  return blocks
end

-- The marker on a block's first line: "fragment", a need, or nil.
local function marker(src)
  local first = src:match("^[^\n]*")
  if first:find("^%s*%-%-%s*fragment") then return "fragment" end
  return first:match("^%s*%-%-%s*needs:%s*(%w+)")
end

local read = T.read_file

T.test("the block finder and the markers", function()
  local blocks = lua_blocks("text\n```lua\nprint(1)\n```\n```c\nint x;\n```\n  ```lua\n-- fragment\nx()\n  ```\n")
  T.eq(#blocks, 2)
  T.eq(blocks[1].line, 2)
  T.eq(blocks[1].src, "print(1)\n")
  T.eq(marker(blocks[2].src), "fragment")
  T.eq(marker("-- needs: cuda\nx()\n"), "cuda")
  T.eq(marker("print(1)\n"), nil)
end)

T.test("every Lua example of the docs runs", function()
  local files = {}
  for _, root in ipairs(ROOTS) do markdown_files(root, files) end
  local bad, ran, skipped, fragments = {}, 0, 0, 0
  for _, path in ipairs(files) do
    for _, b in ipairs(lua_blocks(read(path))) do
      local name = ("%s:%d"):format(path, b.line)
      local mark = marker(b.src)
      if mark == "fragment" then
        fragments = fragments + 1
        local ok, err = load(b.src, "=" .. name)
        if not ok then bad[#bad + 1] = name .. ": a fragment that does not compile: " .. err end
      elseif mark and DT.missing(mark) then
        skipped = skipped + 1
      else
        ms.manual_seed(0)
        local ok, err = DT.run(b.src, name)
        ran = ran + 1
        if not ok then bad[#bad + 1] = err end
      end
    end
  end
  print(("doc examples: %d files, %d blocks ran, %d skipped (needs not met here), %d fragments, %d failed")
    :format(#files, ran, skipped, fragments, #bad))
  T.truthy(#bad == 0, #bad .. " example(s) failed:\n" .. table.concat(bad, "\n\n"))
end)

T.finish()
