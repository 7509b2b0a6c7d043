-- tensor_repr.lua: formats a tensor the way PyTorch 1.13 prints one (`repr(t)`), so output
-- reads the same to PyTorch users and can be diffed against torch. The tensor userdata's
-- __tostring calls M.format; print options follow torch.set_printoptions.
local options = require "moonshard.check_opts"
local M = {}

local inf = math.huge
local concat, rep, fmt = table.concat, string.rep, string.format

M.options = { precision = 4, threshold = 1000, edgeitems = 3, linewidth = 80, sci_mode = nil }

local PROFILES = {
  default = { precision = 4, threshold = 1000, edgeitems = 3, linewidth = 80 },
  short   = { precision = 2, threshold = 1000, edgeitems = 2, linewidth = 80 },
  full    = { precision = 4, threshold = inf,  edgeitems = 3, linewidth = 80 },
}
local OPTION_KEYS = { "precision", "threshold", "edgeitems", "linewidth" }

-- As in torch, every call resets sci_mode to what it is given (nil = choose automatically),
-- while the other keys keep their value unless given or set by a profile.
function M.set_printoptions(opts)
  opts = options.check("set_printoptions", opts, options.union(OPTION_KEYS, { "profile", "sci_mode" }), 2)
  local o = M.options
  if opts.profile ~= nil then
    local p = PROFILES[opts.profile]
    if not p then
      error(("set_printoptions: profile must be 'default', 'short' or 'full', got %s")
        :format(tostring(opts.profile)), 2)
    end
    for _, k in ipairs(OPTION_KEYS) do o[k] = p[k] end
  end
  for _, k in ipairs(OPTION_KEYS) do
    if opts[k] ~= nil then o[k] = opts[k] end
  end
  o.sci_mode = opts.sci_mode
end

local FLOATING = { float32 = true, float64 = true, float16 = true, bfloat16 = true }
-- Dtypes torch infers from the printed values, hence prints no dtype= for (when non-empty).
local INFERRED = { float32 = true, int64 = true, bool = true }
local DEFAULT_DTYPE = "float32"

-- Marks an elided run of items or slices in gathered data.
local ELLIPSIS = setmetatable({}, { __name = "ellipsis" })

---------------------------------------------------------------------------------------------
-- Gathering: pull only the items that will be shown into nested Lua tables, so printing a
-- huge tensor costs O(shown items), never a full copy.

local function gather_summarized(t, edge)
  local n = t:size()[1]
  if t:dim() == 1 then
    if n <= 2 * edge then return t:tolist() end
    local out = t:narrow(1, 1, edge):tolist()
    out[#out + 1] = ELLIPSIS
    -- torch slices the tail as t[-edge:], which is the whole tensor when edge is 0
    local tail = edge > 0 and t:narrow(1, n - edge + 1, edge):tolist() or t:tolist()
    for _, v in ipairs(tail) do out[#out + 1] = v end
    return out
  end
  local out = {}
  local function take(i) out[#out + 1] = gather_summarized(t:select(1, i), edge) end
  if n <= 2 * edge then
    for i = 1, n do take(i) end
  else
    for i = 1, edge do take(i) end
    out[#out + 1] = ELLIPSIS
    for i = n - edge + 1, n do take(i) end
  end
  return out
end

-- Calls fn on every gathered value (skipping ellipses); depth is the number of list levels.
local function each_value(data, depth, fn)
  for _, v in ipairs(data) do
    if v ~= ELLIPSIS then
      if depth == 1 then fn(v) else each_value(v, depth - 1, fn) end
    end
  end
end

---------------------------------------------------------------------------------------------
-- Element formatters. Each is { width = w, str = function(v) -> unpadded text }; values are
-- right-aligned to the common width, which is measured on the shown values only.

-- Python spells non-finite floats nan/inf/-inf whatever the sign bit of a NaN; C may not.
local function float_text(spec, v)
  if v ~= v then return "nan" end
  if v == inf then return "inf" end
  if v == -inf then return "-inf" end
  return fmt(spec, v)
end

local function is_finite(v) return v == v and v ~= inf and v ~= -inf end

local function max_len(values, to_text, extra)
  local w = 1
  for _, v in ipairs(values) do
    local len = #to_text(v) + (extra or 0)
    if len > w then w = len end
  end
  return w
end

local function float_formatter(values, opts)
  local p = opts.precision
  local fixed_spec, sci_spec = "%." .. p .. "f", "%." .. p .. "e"
  local nonzero, lo, hi, whole = {}, inf, 0.0, true
  for _, v in ipairs(values) do
    if is_finite(v) and v ~= 0 then
      nonzero[#nonzero + 1] = v
      local a = math.abs(v)
      if a < lo then lo = a end
      if a > hi then hi = a end
      if v ~= math.ceil(v) then whole = false end
    end
  end
  local f = { int_mode = whole, sci_mode = false, width = 1 }
  -- With no finite non-zero value torch keeps int mode and ignores a forced sci_mode.
  if #nonzero > 0 then
    local wide_range = hi / lo > 1000.0 or hi > 1.0e8
    if wide_range or (not whole and lo < 1.0e-4) then
      f.sci_mode = true
      f.width = max_len(nonzero, function(v) return fmt(sci_spec, v) end)
    elseif whole then
      -- one more column for the trailing "." that marks a float
      f.width = max_len(nonzero, function(v) return fmt("%.0f", v) end, 1)
    else
      f.width = max_len(nonzero, function(v) return fmt(fixed_spec, v) end)
    end
    if opts.sci_mode ~= nil then f.sci_mode = opts.sci_mode end
  end
  function f.str(v)
    if f.sci_mode then return float_text(sci_spec, v) end
    if f.int_mode then
      return float_text("%.0f", v) .. (is_finite(v) and "." or "")
    end
    return float_text(fixed_spec, v)
  end
  return f
end

local function int_text(v) return fmt("%d", v) end
local function bool_text(v) return v and "True" or "False" end

local function plain_formatter(values, to_text)
  return { width = max_len(values, to_text), str = to_text }
end

local function make_formatter(dtype, values, opts)
  if FLOATING[dtype] then return float_formatter(values, opts) end
  if dtype == "bool" then return plain_formatter(values, bool_text) end
  return plain_formatter(values, int_text)
end

local function padded(f, v)
  local s = f.str(v)
  return rep(" ", f.width - #s) .. s
end

---------------------------------------------------------------------------------------------
-- Layout: rows wrap at linewidth; slices of a k-D tensor are separated by k-1 newlines.

local function vector_str(row, indent, f, opts)
  local per_line = math.max(1, (opts.linewidth - indent) // (f.width + 2))
  local lines, line = {}, {}
  for _, v in ipairs(row) do
    line[#line + 1] = v == ELLIPSIS and " ..." or padded(f, v)
    if #line == per_line then
      lines[#lines + 1] = concat(line, ", ")
      line = {}
    end
  end
  if #line > 0 then lines[#lines + 1] = concat(line, ", ") end
  return "[" .. concat(lines, ",\n" .. rep(" ", indent + 1)) .. "]"
end

local function nested_str(data, depth, indent, f, opts)
  if depth == 1 then return vector_str(data, indent, f, opts) end
  local slices = {}
  for i, sub in ipairs(data) do
    slices[i] = sub == ELLIPSIS and "..." or nested_str(sub, depth - 1, indent + 1, f, opts)
  end
  return "[" .. concat(slices, "," .. rep("\n", depth - 1) .. rep(" ", indent + 1)) .. "]"
end

local function body_str(t, indent, opts)
  local dtype, depth = t.dtype, t:dim()
  if depth == 0 then
    local v = t:item()
    return padded(make_formatter(dtype, { v }, opts), v)
  end
  local data
  if t:numel() > opts.threshold then
    data = gather_summarized(t, opts.edgeitems)
  else
    data = t:tolist()
  end
  local values = {}
  each_value(data, depth, function(v) values[#values + 1] = v end)
  return nested_str(data, depth, indent, make_formatter(dtype, values, opts), opts)
end

---------------------------------------------------------------------------------------------
-- Suffixes (device, size, dtype, requires_grad) go after the data, on a new line when the
-- last line would pass linewidth.

local function size_str(sizes)
  return "(" .. concat(sizes, ", ") .. (#sizes == 1 and ",)" or ")")
end

local function add_suffixes(s, suffixes, indent, opts)
  local out = { s }
  -- torch measures the last line with a quirk: two more than its true length
  local last_nl = s:match(".*()\n") or 0
  local last_len = #s - last_nl + 2
  for _, suffix in ipairs(suffixes) do
    if last_len + #suffix + 2 > opts.linewidth then
      out[#out + 1] = ",\n" .. rep(" ", indent) .. suffix
      last_len = indent + #suffix
    else
      out[#out + 1] = ", " .. suffix
      last_len = last_len + #suffix + 2
    end
  end
  out[#out + 1] = ")"
  return concat(out)
end

function M.format(t)
  local opts = M.options
  local prefix = "tensor("
  local indent = #prefix
  local dtype = t.dtype
  local suffixes = {}
  local device = t.device
  if device ~= nil and device ~= "cpu" then
    suffixes[#suffixes + 1] = "device='" .. device .. "'"
  end
  local body
  if t.is_meta then -- no values to show, as PyTorch: tensor(..., device='meta', size=(2, 3))
    suffixes[#suffixes + 1] = "size=" .. size_str(t:size())
    if dtype ~= DEFAULT_DTYPE then suffixes[#suffixes + 1] = "dtype=torch." .. dtype end
    body = "..."
  elseif t:numel() == 0 then
    -- nothing to infer the dtype from, so only the default dtype goes unnamed
    if t:dim() ~= 1 then suffixes[#suffixes + 1] = "size=" .. size_str(t:size()) end
    if dtype ~= DEFAULT_DTYPE then suffixes[#suffixes + 1] = "dtype=torch." .. dtype end
    body = "[]"
  else
    if not INFERRED[dtype] then suffixes[#suffixes + 1] = "dtype=torch." .. dtype end
    -- a device's values are printed from one copy on the CPU, not read element by element
    body = body_str(t.is_cuda and t:detach():cpu() or t, indent, opts)
  end
  -- a computed tensor names the node that made it; a leaf only says it requires grad
  local grad_fn = t.grad_fn
  if grad_fn then suffixes[#suffixes + 1] = ("grad_fn=<%s>"):format(grad_fn)
  elseif t.requires_grad then suffixes[#suffixes + 1] = "requires_grad=True" end
  return add_suffixes(prefix .. body, suffixes, indent, opts)
end

return M
