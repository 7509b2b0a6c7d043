-- summary.lua: ms.summary(model, input), torchinfo's summary table: every module in the order
-- of named_modules (indented by depth) with its type, the shape of its output on one forward
-- of the given input, and its parameter count (its whole subtree's); then the totals (trainable
-- and not) and the memory: input, parameters, and the forward/backward activations estimated as
-- twice the bytes of every leaf module's outputs (each kept for backward, and its gradient).
--   print(ms.summary(Net(), {1, 1, 28, 28}))
local ms = require "moonshard"
local options = require "moonshard.check_opts"

local MB = 2 ^ 20

local Summary = {}
Summary.__index = Summary

local Mistake = {}
local function fail(fmt, ...) error(setmetatable({ "summary: " .. fmt:format(...) }, Mistake), 0) end

-- The input as a tensor: a tensor as is, or a shape filled with zeros (ones for an integer
-- dtype: 1-based class and token indices).
local function input_of(input, opts)
  if ms.is_tensor(input) then return input end
  if type(input) ~= "table" or #input == 0 then
    fail("argument 2 (input) must be a tensor or an input shape such as {1, 1, 28, 28}, got %s", type(input))
  end
  for i, n in ipairs(input) do
    if math.type(n) ~= "integer" or n < 1 then fail("input shape[%d] must be a positive integer, got %s", i, tostring(n)) end
  end
  local dtype = opts.dtype or ms.float32
  local t = ms.zeros(input, { dtype = dtype, device = opts.device })
  if not t:is_floating_point() then t:fill_(1) end
  return t
end

local function bytes_of(t) return t:numel() * t:element_size() end

-- The tensors among a forward's results (a tensor, or a table of them), in order.
local function tensors_in(out)
  local ts = {}
  for i = 1, out.n do
    local v = out[i]
    if ms.is_tensor(v) then ts[#ts + 1] = v
    elseif type(v) == "table" then
      for _, x in ipairs(v) do if ms.is_tensor(x) then ts[#ts + 1] = x end end
    end
  end
  return ts
end

local function shape_text(ts)
  local parts = {}
  for i, t in ipairs(ts) do
    local dims = {}
    for d = 1, t:dim() do dims[d] = tostring(t:size(d)) end
    parts[i] = "[" .. table.concat(dims, ", ") .. "]"
  end
  return #parts > 0 and table.concat(parts, ", ") or "--"
end

local function count(params, trainable_only)
  local n = 0
  for _, p in ipairs(params) do
    if not trainable_only or p.requires_grad then n = n + p:numel() end
  end
  return n
end

-- Runs the forward with a hook on every module, in eval mode and without autograd (so nothing
-- is learnt and batch norm's running statistics are left alone), then restores each module's mode.
local function trace(model, x)
  local seen, handles, modes = {}, {}, {}
  for _, m in ipairs(model:modules()) do
    modes[m] = m.training
    handles[#handles + 1] = m:register_forward_hook(function(mod, _, ...)
      if not seen[mod] then seen[mod] = tensors_in(table.pack(...)) end
    end)
  end
  model:eval()
  local ok, err = pcall(function()
    local _ <close> = ms.no_grad()
    model(x)
  end)
  for _, h in ipairs(handles) do h:remove() end
  for m, mode in pairs(modes) do rawset(m, "training", mode) end
  if not ok then error(err, 0) end
  return seen
end

local function summarize(model, input, opts)
  if type(model) ~= "table" or type(model.named_modules) ~= "function" then
    fail("argument 1 (model) must be an nn.Module, got %s", type(model))
  end
  opts = opts or {}
  local why = options.problem(opts, { "dtype", "device" })
  if why then fail("%s", why) end
  local x = input_of(input, opts)
  local outputs = trace(model, x)
  local s = setmetatable({ rows = {}, input_bytes = bytes_of(x), activation_bytes = 0 }, Summary)
  for name, m in model:named_modules() do
    local depth = name == "" and 0 or select(2, name:gsub("%.", "")) + 1
    local ts = outputs[m] or {}
    s.rows[#s.rows + 1] = { name = name, type = m:_get_name(), depth = depth, output_shape = shape_text(ts),
                            params = count(m:parameters()) }
    if #m:children() == 0 then
      for _, t in ipairs(ts) do s.activation_bytes = s.activation_bytes + 2 * bytes_of(t) end
    end
  end
  local params = model:parameters()
  s.total_params, s.trainable_params = count(params), count(params, true)
  s.non_trainable_params = s.total_params - s.trainable_params
  s.param_bytes = 0
  for _, p in ipairs(params) do s.param_bytes = s.param_bytes + bytes_of(p) end
  for _, b in ipairs(model:buffers()) do s.param_bytes = s.param_bytes + bytes_of(b) end
  return s
end

-- 1199882 -> "1,199,882"
local function grouped(n)
  local s = tostring(math.tointeger(n) or n)
  local head, digits = s:match("^(-?)(%d+)$")
  if not digits then return s end
  return head .. digits:reverse():gsub("(%d%d%d)", "%1,"):reverse():gsub("^,", "")
end

function Summary:__tostring()
  local out, w1, w2 = {}, 30, 24
  for _, r in ipairs(self.rows) do
    local label = r.depth == 0 and r.type or ("  "):rep(r.depth - 1) .. r.name:match("[^.]*$") .. " (" .. r.type .. ")"
    r.label = label
    w1, w2 = math.max(w1, #label + 2), math.max(w2, #r.output_shape + 2)
  end
  local width = w1 + w2 + 14
  local rule, double = ("-"):rep(width), ("="):rep(width)
  local function row(a, b, c) out[#out + 1] = a .. (" "):rep(w1 - #a) .. b .. (" "):rep(w2 - #b) .. c end
  out[#out + 1] = rule
  row("Layer (type)", "Output Shape", "Param #")
  out[#out + 1] = double
  for _, r in ipairs(self.rows) do row(r.label, r.output_shape, grouped(r.params)) end
  out[#out + 1] = double
  out[#out + 1] = "Total params: " .. grouped(self.total_params)
  out[#out + 1] = "Trainable params: " .. grouped(self.trainable_params)
  out[#out + 1] = "Non-trainable params: " .. grouped(self.non_trainable_params)
  out[#out + 1] = rule
  local total = self.input_bytes + self.activation_bytes + self.param_bytes
  out[#out + 1] = ("Input size (MB): %.2f"):format(self.input_bytes / MB)
  out[#out + 1] = ("Forward/backward pass size (MB): %.2f"):format(self.activation_bytes / MB)
  out[#out + 1] = ("Params size (MB): %.2f"):format(self.param_bytes / MB)
  out[#out + 1] = ("Estimated Total Size (MB): %.2f"):format(total / MB)
  out[#out + 1] = rule
  return table.concat(out, "\n")
end

-- ms.summary(model, input_shape_or_tensor [, {dtype = ms.float32, device =}]) -> a Summary
-- (print it for the table; its fields: rows, total_params, trainable_params, ...)
return function(...)
  local ok, result = pcall(summarize, ...)
  if ok then return result end
  -- the user's line: level 2, or 3 when ms.summary (a C function that requires this file) called us
  if getmetatable(result) == Mistake then error(result[1], debug.getinfo(2, "S").what == "C" and 3 or 2) end
  error(result, 0)
end
