-- transforms.lua: torchvision.transforms for Lua (`local transforms = require "moonshard.transforms"`):
-- ToTensor, Normalize, Lambda and Compose. Every transform is callable on one sample and on a
-- batch: ToTensor takes a uint8 image (H, W) or batch (B, H, W) to float32 (1, H, W) or
-- (B, 1, H, W) in [0, 1]; Normalize works on the channel dim of (C, H, W) or (B, C, H, W).
--
-- The known transforms describe themselves with t:native_spec() (a plain table; Lambda has none,
-- and a Compose has the list of its members' specs, or none if any member is a Lua function).
-- A Compose with a spec list runs as one fused native pass (ms.transform_batch: x is read once
-- and (x / 255 - mean) / std written once); the DataLoader hands the same list to its worker
-- threads. Anything else runs its members one after the other in Lua.
local ms = require "moonshard"

local M = {}
local fmt, concat = string.format, table.concat

-- A class whose instances are callable: `Cls(...)` builds through Cls.init, `obj(x)` runs
-- obj:forward(x).
local function class(name)
  local cls = { __name = name }
  cls.__index = cls
  cls.__call = function(self, x) return self:forward(x) end
  return setmetatable(cls, {
    __call = function(c, ...)
      local obj = setmetatable({}, c)
      obj:init(...)
      return obj
    end,
  })
end

-- Python's repr of a number, as torchvision prints the values given.
local function pynum(x)
  if math.type(x) == "integer" then return tostring(x) end
  for p = 1, 17 do
    local s = fmt("%." .. p .. "g", x)
    if tonumber(s) == x then return s:find("[%.en]") and s or s .. ".0" end
  end
  return tostring(x)
end

local function pyseq(v)
  if type(v) == "number" then return pynum(v) end
  local parts = {}
  for i = 1, #v do parts[i] = pynum(v[i]) end
  return #parts == 1 and "(" .. parts[1] .. ",)" or "(" .. concat(parts, ", ") .. ")"
end

-- "(2, 28, 28)", as the engine writes shapes in its messages.
local function shape_str(x)
  local dims = {}
  for i = 1, x:dim() do dims[i] = tostring(x:size(i)) end
  return "(" .. concat(dims, ", ") .. ")"
end

local function check_tensor(x, who)
  if not ms.is_tensor(x) then
    error(fmt("%s: expected a tensor, got %s", who, type(x)), 3)
  end
end

-- ---- ToTensor ---------------------------------------------------------------------------------

M.ToTensor = class("ToTensor")
local SPEC_TO_TENSOR = { kind = "to_tensor" }

function M.ToTensor:init(...)
  if select("#", ...) > 0 then error("ToTensor: takes no arguments", 3) end
end

-- The native kernel even alone: a 256-entry table lookup beats a convert then a divide.
function M.ToTensor:forward(x)
  check_tensor(x, "ToTensor")
  return ms.transform_batch(x, SPEC_TO_TENSOR)
end

function M.ToTensor:native_spec() return { kind = "to_tensor" } end
function M.ToTensor:__tostring() return "ToTensor()" end

-- ---- Normalize --------------------------------------------------------------------------------

M.Normalize = class("Normalize")
local MAX_CHANNELS = 16 -- the engine's MS_MAX_CHANNELS

-- mean or std as a list of numbers (a number is a list of one).
local function channel_list(v, what)
  if type(v) == "number" then return { v } end
  if type(v) ~= "table" or #v == 0 then
    error(fmt("Normalize: %s must be a number or a non-empty table of numbers, got %s", what, type(v)), 4)
  end
  if #v > MAX_CHANNELS then
    error(fmt("Normalize: %s has %d entries; at most %d channels are supported", what, #v, MAX_CHANNELS), 4)
  end
  local list = {}
  for i = 1, #v do
    if type(v[i]) ~= "number" then
      error(fmt("Normalize: %s[%d] must be a number, got %s", what, i, type(v[i])), 4)
    end
    list[i] = v[i]
  end
  return list
end

-- The value as float32 stores it (the dtype the means and stds are used in).
local function to_f32(v) return (string.unpack("f", string.pack("f", v))) end

-- Normalize(mean, std): mean and std are numbers or tables with one entry per channel (or one
-- entry for all channels), as torchvision.transforms.Normalize.
function M.Normalize:init(mean, std, ...)
  if select("#", ...) > 0 then error("Normalize: takes (mean, std); options are not supported", 3) end
  self.mean, self.std = mean, std -- as given, for the repr
  self._mean, self._std = channel_list(mean, "mean"), channel_list(std, "std")
  if #self._mean ~= #self._std then
    error(fmt("Normalize: mean and std must have the same number of entries, got %d and %d",
      #self._mean, #self._std), 3)
  end
  for i, s in ipairs(self._std) do
    if to_f32(s) == 0 then
      error(fmt("Normalize: std[%d] evaluated to zero after conversion to float32, leading to "
        .. "division by zero", i), 3)
    end
  end
end

-- (x - mean) / std with mean and std shaped (C, 1, 1) in x's dtype, broadcast over H, W and
-- any leading batch dims: torchvision's two float passes.
function M.Normalize:forward(x)
  check_tensor(x, "Normalize")
  if not x:is_floating_point() or x:dim() < 3 then
    error(fmt("Normalize: expected a floating tensor of shape (C, H, W) or (B, C, H, W), got a %s "
      .. "tensor of shape %s", x.dtype, shape_str(x)), 2)
  end
  local n, C = #self._mean, x:size(-3)
  if n ~= 1 and n ~= C then
    error(fmt("Normalize: mean and std have %d entries but the input of shape %s has %d channel(s) "
      .. "(expected 1 entry or one per channel)", n, shape_str(x), C), 2)
  end
  local mean = ms.tensor(self._mean, { dtype = x.dtype }):view(n, 1, 1)
  local std = ms.tensor(self._std, { dtype = x.dtype }):view(n, 1, 1)
  return (x - mean) / std
end

function M.Normalize:native_spec()
  return { kind = "normalize", mean = { table.unpack(self._mean) }, std = { table.unpack(self._std) } }
end

function M.Normalize:__tostring()
  return fmt("Normalize(mean=%s, std=%s)", pyseq(self.mean), pyseq(self.std))
end

-- ---- Lambda -----------------------------------------------------------------------------------

M.Lambda = class("Lambda")

local function is_callable(f)
  if type(f) == "function" then return true end
  local mt = getmetatable(f)
  return type(mt) == "table" and mt.__call ~= nil
end

function M.Lambda:init(fn)
  if not is_callable(fn) then error(fmt("Lambda: expected a function, got %s", type(fn)), 3) end
  self.fn = fn
end

function M.Lambda:forward(x) return self.fn(x) end
function M.Lambda:native_spec() return nil end
function M.Lambda:__tostring() return "Lambda()" end

-- ---- Compose ----------------------------------------------------------------------------------

M.Compose = class("Compose")

-- The members' specs flattened into one list, or nil when any member is not native.
local function spec_list(members)
  local list = {}
  for _, t in ipairs(members) do
    local s = type(t) == "table" and type(t.native_spec) == "function" and t:native_spec() or nil
    if s == nil then return nil end
    if s.kind then
      list[#list + 1] = s
    else
      table.move(s, 1, #s, #list + 1, list)
    end
  end
  return list
end

function M.Compose:init(members)
  if type(members) ~= "table" or getmetatable(members) ~= nil then
    error(fmt("Compose: expected a table of transforms, got %s", type(members)), 3)
  end
  self.transforms = {}
  for i, t in ipairs(members) do
    if not is_callable(t) then
      error(fmt("Compose: transforms[%d] must be a transform or a function, got %s", i, type(t)), 3)
    end
    self.transforms[i] = t
  end
  -- Members are fixed from here on, so the fused plan is decided once. The engine runs
  -- ToTensor only first; a list it would refuse runs in Lua instead (and fails as it would).
  local specs = spec_list(self.transforms)
  if specs and #specs > 0 and #specs <= 16 then
    local ok = true
    for i = 2, #specs do ok = ok and specs[i].kind ~= "to_tensor" end
    self._specs = ok and specs or nil
  end
end

-- One native pass when every member is native and x is what that pass reads (uint8 for a
-- leading ToTensor, float32 for Normalize); member by member otherwise.
function M.Compose:forward(x)
  local specs = self._specs
  if specs and ms.is_tensor(x) and (specs[1].kind == "to_tensor" or x.dtype == "float32") then
    return ms.transform_batch(x, specs)
  end
  for _, t in ipairs(self.transforms) do x = t(x) end
  return x
end

function M.Compose:native_spec() return spec_list(self.transforms) end

function M.Compose:__len() return #self.transforms end

function M.Compose:__tostring()
  local lines = { "Compose(" }
  for _, t in ipairs(self.transforms) do
    local s = type(t) == "function" and "<function>" or tostring(t)
    lines[#lines + 1] = "    " .. s:gsub("\n", "\n    ")
  end
  lines[#lines + 1] = ")"
  return concat(lines, "\n")
end

return M
