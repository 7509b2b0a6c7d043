-- nn_containers.lua: Sequential, ModuleList and ModuleDict, with torch's child names ("0", "1",
-- ...) and 1-based indexing from Lua. They register themselves on the nn table of nn_module.lua.
local nn = require "moonshard.nn_module"
local Module = nn.Module
local describe, is_module = nn.internal.describe, nn.internal.is_module
local od_new, od_set, od_remove = nn.internal.od_new, nn.internal.od_set, nn.internal.od_remove
local fmt = string.format
-- ---- containers ------------------------------------------------------------------------------

-- Position i (1-based, negative from the end) among the children, or nil.
local function child_name_at(self, i, cls)
  if math.type(i) ~= "integer" then error(fmt("%s: index must be an integer, got %s", cls, tostring(i)), 3) end
  local names = self._modules.names
  if i < 0 then i = #names + i + 1 end
  return names[i]
end

local function list_getitem(self, i)
  local name = child_name_at(self, i, self:_get_name())
  return name and self._modules.map[name]
end

local function list_setitem(self, i, m)
  local name = child_name_at(self, i, self:_get_name())
  if not name then error(fmt("%s: index %d is out of range", self:_get_name(), i), 3) end
  if not is_module(m) then error(fmt("%s: %s is not a Module subclass", self:_get_name(), describe(m)), 3) end
  self._modules.map[name] = m
end

local function list_len(self) return #self._modules.names end

-- Rebuilds the children as "0", "1", ... from an array of modules.
local function renumber(self, mods)
  local d = od_new()
  for i, m in ipairs(mods) do od_set(d, tostring(i - 1), m) end
  rawset(self, "_modules", d)
end

local function list_modules(self)
  local out = {}
  for i, name in ipairs(self._modules.names) do out[i] = self._modules.map[name] end
  return out
end

-- Sequential(m1, m2, ...): children named "0", "1", ... (torch's names); seq[1] is the first;
-- forward feeds each child's output to the next. Sequential({{"name", m}, ...}) names them.
local Sequential = Module:extend("Sequential")
nn.Sequential = Sequential
Sequential.__getitem = list_getitem
Sequential.__setitem = list_setitem
Sequential.__len = list_len

function Sequential:init(...)
  local first = ...
  if select("#", ...) == 1 and type(first) == "table" and not is_module(first) and getmetatable(first) == nil then
    for i, e in ipairs(first) do
      if type(e) ~= "table" or type(e[1]) ~= "string" or not is_module(e[2]) then
        error(fmt("Sequential: entry %d must be a {name, module} pair", i), 3)
      end
      self:add_module(e[1], e[2])
    end
    return
  end
  for i = 1, select("#", ...) do
    local m = select(i, ...)
    if not is_module(m) then error(fmt("Sequential: argument #%d is %s, not a Module", i, describe(m)), 3) end
    self:add_module(tostring(i - 1), m)
  end
end

function Sequential:forward(input, ...)
  for _, name in ipairs(self._modules.names) do
    input = self._modules.map[name](input, ...)
  end
  return input
end

function Sequential:append(m)
  self:add_module(tostring(#self._modules.names), m)
  return self
end

-- ModuleList({m1, m2, ...}): holds modules, indexed 1-based, named "0", "1", ... for torch.
local ModuleList = Module:extend("ModuleList")
nn.ModuleList = ModuleList
ModuleList.__getitem = list_getitem
ModuleList.__setitem = list_setitem
ModuleList.__len = list_len

function ModuleList:init(mods)
  if mods ~= nil then self:extend(mods) end
end

function ModuleList:append(m)
  if not is_module(m) then error(fmt("ModuleList.append: %s is not a Module subclass", describe(m)), 2) end
  self:add_module(tostring(#self._modules.names), m)
  return self
end

-- Appends every module of an array (named extend_ would clash with the class method extend).
function ModuleList:extend(mods)
  if getmetatable(self) == nil or rawget(self, "_modules") == nil then
    return Module.extend(self, mods) -- called on the class: make a subclass
  end
  if type(mods) ~= "table" then error("ModuleList.extend: expected an array of modules", 2) end
  local list = is_module(mods) and list_modules(mods) or mods
  for _, m in ipairs(list) do self:append(m) end
  return self
end

-- Inserts m before position i (1-based).
function ModuleList:insert(i, m)
  local mods = list_modules(self)
  if math.type(i) ~= "integer" then error("ModuleList.insert: index must be an integer", 2) end
  if i < 0 then i = #mods + i + 1 end
  if i < 1 or i > #mods + 1 then error(fmt("ModuleList.insert: index %d is out of range", i), 2) end
  if not is_module(m) then error(fmt("ModuleList.insert: %s is not a Module subclass", describe(m)), 2) end
  table.insert(mods, i, m)
  renumber(self, mods)
end

function ModuleList:forward()
  error("ModuleList has no forward: iterate over it and call its modules", 2)
end

-- ModuleDict(t): modules by name; t is {{name, m}, ...} (kept in that order) or a map (added in
-- sorted key order, since Lua tables have none).
local ModuleDict = Module:extend("ModuleDict")
nn.ModuleDict = ModuleDict
ModuleDict.__len = list_len

function ModuleDict:init(mods)
  if mods ~= nil then self:update(mods) end
end

function ModuleDict:update(mods)
  if type(mods) ~= "table" then error("ModuleDict.update: expected a table of modules", 2) end
  if mods[1] ~= nil then
    for i, e in ipairs(mods) do
      if type(e) ~= "table" or type(e[1]) ~= "string" or not is_module(e[2]) then
        error(fmt("ModuleDict.update: entry %d must be a {name, module} pair", i), 2)
      end
      self:_put(e[1], e[2])
    end
  else
    local keys = {}
    for k in pairs(mods) do keys[#keys + 1] = k end
    table.sort(keys)
    for _, k in ipairs(keys) do self:_put(k, mods[k]) end
  end
  return self
end

function ModuleDict:_put(name, m)
  if self._modules.map[name] ~= nil then od_remove(self._modules, name) end
  self:add_module(name, m)
end

function ModuleDict:keys()
  local out = {}
  for i, n in ipairs(self._modules.names) do out[i] = n end
  return out
end

function ModuleDict:values() return list_modules(self) end

-- for name, m in md:items() do ... end, in order.
function ModuleDict:items() return self:named_children() end

function ModuleDict:pop(name)
  local m = self._modules.map[name]
  od_remove(self._modules, name)
  return m
end

function ModuleDict:forward()
  error("ModuleDict has no forward: call its modules", 2)
end


return nn
