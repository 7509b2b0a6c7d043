-- docs_coverage.lua (ctest docs.coverage): every public name of the Lua API has a docstring in
-- lua/moonshard/docs/*.lua. The public names are enumerated (doc.public_names: every public
-- module's functions, classes, their methods and option tables); a name is covered when an
-- entry documents its value, under that name or another. Prints the count, then the missing
-- names grouped by area, so the next docstring to write is plain.
local doc = require "moonshard.doc"

local names, _, failed = doc.public_names()
local missing, total = {}, 0
for _, n in ipairs(names) do
  total = total + 1
  if not doc.entry_for(n.value) and not doc.entry(n.name) then
    local group = missing[n.area] or {}
    group[#group + 1] = n.name
    missing[n.area] = group
  end
end

local areas, count = {}, 0
for area, list in pairs(missing) do
  table.sort(list)
  areas[#areas + 1] = area
  count = count + #list
end
table.sort(areas)

print(("docs.coverage: %d of %d public names documented, %d missing"):format(total - count, total, count))
for _, area in ipairs(areas) do
  print(("%s (%d):"):format(area, #missing[area]))
  print("  " .. table.concat(missing[area], "\n  "))
end
for _, f in ipairs(failed) do print("module failed to load: " .. f) end
if count > 0 or #failed > 0 then
  print(("FAIL: %d public names have no docstring (write them in lua/moonshard/docs/<area>.lua)"):format(count))
  os.exit(1)
end
