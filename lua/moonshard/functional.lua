-- functional.lua: torch.nn.functional for Lua (`local F = require "moonshard.functional"`):
-- thin wrappers over the native ops on the `ms` table that accept torch's positional forms
-- (F.max_pool2d(x, 2), F.log_softmax(x, 2), F.conv2d(x, w, b, 1, 0)) as well as an options
-- table last. Dims and indices are 1-based, negative from the end, as everywhere in Lua.
local ms = require "moonshard"
local options = require "moonshard.check_opts"

local F = {}

-- The native op `name`, looked up at call time (the nn library loads before every op exists).
local function native(name)
  local fn = ms[name]
  if fn == nil then
    error(("F.%s: the native op ms.%s is not available in this build"):format(name, name), 3)
  end
  return fn
end
F._native = native

-- Parses (...) against positional `names`, with an options table allowed last; unknown option
-- keys and a value given both ways raise. Returns a table of the values (nil where absent).
local function parse(fname, names, ...)
  local n = select("#", ...)
  local args = table.pack(...)
  local opts
  if n > 0 and options.is_options(args[n]) then
    opts = args[n]
    n = n - 1
  end
  if n > #names then
    error(("%s: takes at most %d arguments after the required ones, got %d")
      :format(fname, #names, n), 3)
  end
  local r = {}
  for i = 1, n do r[names[i]] = args[i] end
  if opts then
    options.check_given(fname, opts, names, 3)
    for k, v in pairs(opts) do
      if r[k] ~= nil then
        error(("%s: got '%s' both as an argument and as an option"):format(fname, k), 3)
      end
      r[k] = v
    end
  end
  return r
end
F._parse = parse

-- An int or a pair {a, b}: passed on as one int when both are equal, else as the pair.
local function pair_arg(fname, what, v)
  if v == nil then return nil end
  if math.type(v) == "integer" then return v end
  if type(v) == "table" and #v == 2 and math.type(v[1]) == "integer" and math.type(v[2]) == "integer" then
    if v[1] == v[2] then return v[1] end
    return { v[1], v[2] }
  end
  error(("%s: %s must be an integer or a pair of integers, got %s"):format(fname, what, tostring(v)), 3)
end

-- Keeps the non-nil entries of the listed keys (nil stays absent so native defaults apply).
local function opts_of(r, keys)
  local o = {}
  for _, k in ipairs(keys) do
    if r[k] ~= nil then o[k] = r[k] end
  end
  return o
end

-- ---- activations --------------------------------------------------------------------------

-- F.relu(x, inplace): with inplace, x itself is rectified (x:relu_()) and returned.
function F.relu(x, inplace)
  if inplace then return x:relu_() end
  return native("relu")(x)
end
function F.tanh(x) return native("tanh")(x) end
function F.sigmoid(x) return native("sigmoid")(x) end

-- F.gelu(x), F.gelu(x, "tanh") or F.gelu(x, {approximate = "tanh"}).
function F.gelu(x, ...)
  local r = parse("F.gelu", { "approximate" }, ...)
  if r.approximate == nil then return native("gelu")(x) end
  if r.approximate ~= "none" and r.approximate ~= "tanh" then
    error(("F.gelu: approximate must be 'none' or 'tanh', got %s"):format(tostring(r.approximate)), 2)
  end
  return native("gelu")(x, { approximate = r.approximate })
end

-- F.softplus(x, beta, threshold) or F.softplus(x, {beta =, threshold =}): log(1 + exp(beta x)) /
-- beta, and x itself where beta x > threshold (defaults 1 and 20: the engine's softplus op).
function F.softplus(x, ...)
  local r = parse("F.softplus", { "beta", "threshold" }, ...)
  local beta, threshold = r.beta or 1, r.threshold or 20
  if type(beta) ~= "number" or type(threshold) ~= "number" then
    error(("F.softplus: beta and threshold must be numbers, got %s and %s"):format(type(beta), type(threshold)), 2)
  end
  if beta == 1 and threshold == 20 then return native("softplus")(x) end
  local z = x * beta
  return ms.where(z:gt(threshold), x, native("softplus")(z) / beta)
end

-- Every other activation of the engine's table (ms._op_info.activation: silu, ...), as torch's
-- F.<name>(x, inplace): with inplace, x takes the result and is returned.
for _, row in ipairs(ms._op_info.activation) do
  if F[row.name] == nil then
    local name = row.name
    F[name] = function(x, inplace)
      local r = native(name)(x)
      if inplace then return x:copy_(r) end
      return r
    end
  end
end

local function check_dim(fname, dim)
  if math.type(dim) ~= "integer" then
    error(("%s: dim must be given as an integer (1-based), got %s"):format(fname, tostring(dim)), 3)
  end
  return dim
end

function F.softmax(x, dim) return native("softmax")(x, check_dim("F.softmax", dim)) end
function F.log_softmax(x, dim) return native("log_softmax")(x, check_dim("F.log_softmax", dim)) end

-- F.dropout(x, p, training) or F.dropout(x, {p =, training =}); as torch, training defaults to
-- true here (the Dropout module passes its own flag). Returns x itself when nothing is dropped.
function F.dropout(x, ...)
  local r = parse("F.dropout", { "p", "training", "inplace" }, ...)
  local p = r.p == nil and 0.5 or r.p
  if type(p) ~= "number" or p < 0 or p > 1 then
    error(("F.dropout: dropout probability has to be between 0 and 1, but got %s"):format(tostring(p)), 2)
  end
  local training = r.training ~= false
  if not training or p == 0 then return x end
  return native("dropout")(x, { p = p, training = true })
end

-- ---- linear and convolution ------------------------------------------------------------------

function F.linear(x, weight, bias) return native("linear")(x, weight, bias) end

-- torch's padding="valid" / "same" (stride 1, symmetric padding) as integer padding.
local function string_padding(fname, padding, weight, stride, dilation)
  if padding == "valid" then return 0 end
  if padding ~= "same" then
    error(("%s: padding must be an integer, a pair, 'valid' or 'same', got %s"):format(fname, padding), 3)
  end
  local s = type(stride) == "table" and stride or { stride or 1, stride or 1 }
  if s[1] ~= 1 or s[2] ~= 1 then
    error(("%s: padding='same' is not supported for strided convolutions"):format(fname), 3)
  end
  local d = type(dilation) == "table" and dilation or { dilation or 1, dilation or 1 }
  local shape, pad = weight.shape, {}
  for i = 1, 2 do
    local total = d[i] * (shape[i + 2] - 1)
    if total % 2 ~= 0 then
      error(("%s: padding='same' needs an even total padding, got %d in spatial dim %d")
        :format(fname, total, i), 3)
    end
    pad[i] = total // 2
  end
  return pad
end

local CONV = { "bias", "stride", "padding", "dilation", "groups" }

-- F.conv2d(x, weight, bias, stride, padding, dilation, groups), or an options table last.
function F.conv2d(x, weight, ...)
  local r = parse("F.conv2d", CONV, ...)
  local padding = r.padding
  if type(padding) == "string" then
    padding = string_padding("F.conv2d", padding, weight, r.stride, r.dilation)
  end
  local o = {
    stride = pair_arg("F.conv2d", "stride", r.stride),
    padding = pair_arg("F.conv2d", "padding", padding),
    dilation = pair_arg("F.conv2d", "dilation", r.dilation),
    groups = r.groups,
  }
  return native("conv2d")(x, weight, r.bias, o)
end

-- ---- pooling --------------------------------------------------------------------------------

-- F.max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode, return_indices) or options
-- last; with return_indices it returns the values and the 1-based positions in each plane.
function F.max_pool2d(x, kernel_size, ...)
  local r = parse("F.max_pool2d", { "stride", "padding", "dilation", "ceil_mode", "return_indices" }, ...)
  local o = {
    stride = pair_arg("F.max_pool2d", "stride", r.stride),
    padding = pair_arg("F.max_pool2d", "padding", r.padding),
    dilation = pair_arg("F.max_pool2d", "dilation", r.dilation),
    ceil_mode = r.ceil_mode,
    return_indices = r.return_indices or nil,
  }
  return native("max_pool2d")(x, pair_arg("F.max_pool2d", "kernel_size", kernel_size), o)
end

-- F.avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad) or options last.
function F.avg_pool2d(x, kernel_size, ...)
  local r = parse("F.avg_pool2d", { "stride", "padding", "ceil_mode", "count_include_pad" }, ...)
  local o = {
    stride = pair_arg("F.avg_pool2d", "stride", r.stride),
    padding = pair_arg("F.avg_pool2d", "padding", r.padding),
    ceil_mode = r.ceil_mode,
    count_include_pad = r.count_include_pad,
  }
  return native("avg_pool2d")(x, pair_arg("F.avg_pool2d", "kernel_size", kernel_size), o)
end

function F.adaptive_avg_pool2d(x, output_size)
  return native("adaptive_avg_pool2d")(x, pair_arg("F.adaptive_avg_pool2d", "output_size", output_size))
end

-- ---- embedding and normalization ---------------------------------------------------------------

-- F.embedding(idx, weight, padding_idx) or F.embedding(idx, weight, {padding_idx =}); indices
-- and padding_idx are 1-based.
function F.embedding(idx, weight, ...)
  local r = parse("F.embedding", { "padding_idx" }, ...)
  return native("embedding")(idx, weight, opts_of(r, { "padding_idx" }))
end

local function shape_list(fname, s)
  if math.type(s) == "integer" then return { s } end
  if type(s) == "table" then
    local out = {}
    for i = 1, #s do out[i] = s[i] end
    return out
  end
  error(("%s: normalized_shape must be an integer or a list of integers, got %s"):format(fname, tostring(s)), 3)
end

-- F.layer_norm(x, normalized_shape, weight, bias, eps) or options last.
function F.layer_norm(x, normalized_shape, ...)
  local r = parse("F.layer_norm", { "weight", "bias", "eps" }, ...)
  return native("layer_norm")(x, shape_list("F.layer_norm", normalized_shape), r.weight, r.bias,
    opts_of(r, { "eps" }))
end

-- F.batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps) or options
-- last; training defaults to false as in torch.
function F.batch_norm(x, running_mean, running_var, ...)
  local r = parse("F.batch_norm", { "weight", "bias", "training", "momentum", "eps" }, ...)
  local o = opts_of(r, { "momentum", "eps" })
  o.training = r.training == true
  return native("batch_norm")(x, running_mean, running_var, r.weight, r.bias, o)
end

-- ---- losses --------------------------------------------------------------------------------

local REDUCTIONS = { mean = true, sum = true, none = true }

local function check_reduction(fname, r)
  if r.reduction ~= nil and not REDUCTIONS[r.reduction] then
    error(("%s: reduction must be 'mean', 'sum' or 'none', got %s"):format(fname, tostring(r.reduction)), 3)
  end
end

-- F.nll_loss(input, target, weight) or F.nll_loss(input, target, {weight =, ignore_index =,
-- reduction = "mean"|"sum"|"none"}); targets are class indices (1-based).
function F.nll_loss(input, target, ...)
  local r = parse("F.nll_loss", { "weight", "ignore_index", "reduction" }, ...)
  check_reduction("F.nll_loss", r)
  return native("nll_loss")(input, target, opts_of(r, { "weight", "ignore_index", "reduction" }))
end

-- As F.nll_loss, plus label_smoothing.
function F.cross_entropy(input, target, ...)
  local keys = { "weight", "ignore_index", "reduction", "label_smoothing" }
  local r = parse("F.cross_entropy", keys, ...)
  check_reduction("F.cross_entropy", r)
  return native("cross_entropy")(input, target, opts_of(r, keys))
end

-- F.mse_loss(a, b), F.mse_loss(a, b, "sum") or F.mse_loss(a, b, {reduction = "sum"}).
function F.mse_loss(input, target, ...)
  local r = parse("F.mse_loss", { "reduction" }, ...)
  check_reduction("F.mse_loss", r)
  return native("mse_loss")(input, target, opts_of(r, { "reduction" }))
end

-- ---- attention ---------------------------------------------------------------------------------

-- F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale) as torch's, or
-- with an options table {attn_mask =, dropout_p = 0, is_causal = false, scale =}: q (..., L, E),
-- k (..., S, E), v (..., S, Ev) -> (..., L, Ev). dropout_p applies whatever the mode (as torch):
-- pass 0 in evaluation. One fused op that never holds an L x S matrix per head.
function F.scaled_dot_product_attention(q, k, v, ...)
  local keys = { "attn_mask", "dropout_p", "is_causal", "scale" }
  return native("scaled_dot_product_attention")(q, k, v, opts_of(parse("F.scaled_dot_product_attention", keys, ...), keys))
end

-- ---- shape ------------------------------------------------------------------------------------

-- F.flatten(x, start_dim = 1, end_dim = -1), as torch.flatten (1-based dims).
function F.flatten(x, start_dim, end_dim)
  return native("flatten")(x, start_dim or 1, end_dim or -1)
end

return F
