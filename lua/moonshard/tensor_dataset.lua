-- tensor_dataset.lua: PyTorch's TensorDataset, tensors that share their first dimension seen as
-- one dataset of rows (re-exported as ms.data.TensorDataset by moonshard.data).
--
--   local ds = TensorDataset(x, y)   -- x (N, ...), y (N, ...)
--   #ds                              -- N
--   local xi, yi = ds:get(i)         -- x[i], y[i]: views (0-dim tensors for 1-D inputs)
--   local sample = ds[i]             -- the same as a table {x[i], y[i]}
--
-- i is 1-based, negative counts from the end. A Lua indexing expression yields one value,
-- hence ds[i] gives a table and ds:get(i) the values themselves. ds.tensors holds the tensors.
local ms = require "moonshard"

local TensorDataset = {__name = "TensorDataset"}

function TensorDataset:get(i)
  local n = #self
  local j = math.tointeger(i)
  if not j then error(("TensorDataset: index must be an integer, got %s"):format(tostring(i)), 2) end
  if j < -n or j == 0 or j > n then
    error(("TensorDataset: index %d is out of range for %d items (1 to %d, or -%d to -1)"):format(j, n, n, n), 2)
  end
  if j < 0 then j = j + n + 1 end
  local row = {}
  for k, t in ipairs(self.tensors) do row[k] = t[j] end
  return table.unpack(row)
end

TensorDataset.__index = function(self, key)
  if math.type(key) == "integer" then return {self:get(key)} end
  return TensorDataset[key]
end

TensorDataset.__len = function(self) return self.tensors[1]:size(1) end

TensorDataset.__tostring = function(self)
  local shapes = {}
  for k, t in ipairs(self.tensors) do shapes[k] = tostring(t.shape) end
  return ("TensorDataset(%s)"):format(table.concat(shapes, ", "))
end

local function new(_, ...)
  local tensors = table.pack(...)
  if tensors.n == 0 then error("TensorDataset: needs at least one tensor", 2) end
  for k = 1, tensors.n do
    local t = tensors[k]
    if not ms.is_tensor(t) then error(("TensorDataset: argument #%d must be a tensor, got %s"):format(k, type(t)), 2) end
    if t:dim() == 0 then error(("TensorDataset: argument #%d is a 0-dim tensor; rows need a first dimension"):format(k), 2) end
  end
  local n = tensors[1]:size(1)
  for k = 2, tensors.n do
    if tensors[k]:size(1) ~= n then
      local sizes = {}
      for m = 1, tensors.n do sizes[m] = tostring(tensors[m].shape) end
      error(("TensorDataset: size mismatch between tensors: all need the same first dimension, got %s"):format(
        table.concat(sizes, ", ")), 2)
    end
  end
  tensors.n = nil
  return setmetatable({tensors = tensors}, TensorDataset)
end

return setmetatable(TensorDataset, {__call = new})
