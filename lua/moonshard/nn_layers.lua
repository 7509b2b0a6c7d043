-- nn_layers.lua: the layers of moonshard.nn with torch's defaults, init and printouts (Linear,
-- Conv2d, pooling, Dropout, activations, Softmax/LogSoftmax, Flatten, Identity, Embedding,
-- LayerNorm, BatchNorm1d/2d). They register themselves on the nn table of nn_module.lua.
local ms = require "moonshard"
local F = require "moonshard.functional"
local options = require "moonshard.check_opts"
local nn = require "moonshard.nn_module"
local Module = nn.Module
local init = nn.init
local pyval, pack = nn.internal.pyval, nn.internal.pack
local fmt = string.format
-- ---- argument parsing for layer constructors --------------------------------------------------

-- Positional args in the order of `names`, or an options table last; unknown keys raise.
local function layer_args(cls, names, ...)
  local n = select("#", ...)
  local args = pack(...)
  local r = {}
  if n > 0 and options.is_options(args[n]) then
    for k, v in pairs(options.check_given(cls, args[n], names, 4)) do r[k] = v end
    n = n - 1
  end
  if n > #names then error(fmt("%s: takes at most %d arguments, got %d", cls, #names, n), 4) end
  for i = 1, n do
    if args[i] ~= nil then
      if r[names[i]] ~= nil then
        error(fmt("%s: got '%s' both as an argument and as an option", cls, names[i]), 4)
      end
      r[names[i]] = args[i]
    end
  end
  return r
end

local function check_int(cls, what, v, min)
  if math.type(v) ~= "integer" or v < (min or 0) then
    error(fmt("%s: %s must be an integer >= %d, got %s", cls, what, min or 0, tostring(v)), 4)
  end
  return v
end

-- An int or a pair as a pair {a, b}.
local function pair(cls, what, v, min)
  if math.type(v) == "integer" then v = { v, v } end
  if type(v) ~= "table" or #v ~= 2 then
    error(fmt("%s: %s must be an integer or a pair of integers, got %s", cls, what, tostring(v)), 4)
  end
  return { check_int(cls, what, v[1], min), check_int(cls, what, v[2], min) }
end

local function new_param(...)
  return nn.Parameter(ms.empty(...))
end

-- ---- layers -----------------------------------------------------------------------------------

-- Linear(in_features, out_features, bias = true): y = x W^T + b.
local Linear = Module:extend("Linear")
nn.Linear = Linear

function Linear:init(...)
  local a = layer_args("Linear", { "in_features", "out_features", "bias" }, ...)
  self.in_features = check_int("Linear", "in_features", a.in_features)
  self.out_features = check_int("Linear", "out_features", a.out_features)
  self.weight = new_param(self.out_features, self.in_features)
  if a.bias ~= false then self.bias = new_param(self.out_features) else self.bias = nil end -- reads nil, as torch's None
  self:reset_parameters()
end

-- torch's default: kaiming_uniform_(a = sqrt(5)) and a bias from U(-1/sqrt(fan_in), ..).
local function reset_weight_and_bias(self)
  init.kaiming_uniform_(self.weight, { a = math.sqrt(5) })
  if self.bias ~= nil then
    local fan_in = init.calculate_fan_in_and_fan_out(self.weight)
    local bound = fan_in > 0 and 1 / math.sqrt(fan_in) or 0
    init.uniform_(self.bias, -bound, bound)
  end
end
Linear.reset_parameters = reset_weight_and_bias

function Linear:forward(x) return F.linear(x, self.weight, self.bias) end

function Linear:extra_repr()
  return fmt("in_features=%d, out_features=%d, bias=%s", self.in_features, self.out_features,
    pyval(self.bias ~= nil))
end

-- Conv2d(in, out, kernel_size, stride = 1, padding = 0, dilation = 1, groups = 1, bias = true,
-- padding_mode = "zeros"), positional or as options last: nn.Conv2d(1, 32, 3, {stride = 1}).
local Conv2d = Module:extend("Conv2d")
nn.Conv2d = Conv2d

local CONV_ARGS = { "in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation",
  "groups", "bias", "padding_mode" }

function Conv2d:init(...)
  local a = layer_args("Conv2d", CONV_ARGS, ...)
  local in_c = check_int("Conv2d", "in_channels", a.in_channels)
  local out_c = check_int("Conv2d", "out_channels", a.out_channels)
  local groups = check_int("Conv2d", "groups", a.groups or 1, 1)
  if in_c % groups ~= 0 then error("Conv2d: in_channels must be divisible by groups", 3) end
  if out_c % groups ~= 0 then error("Conv2d: out_channels must be divisible by groups", 3) end
  local padding = a.padding or 0
  if type(padding) == "string" then
    if padding ~= "same" and padding ~= "valid" then
      error(fmt("Conv2d: invalid padding string '%s', should be one of 'valid', 'same'", padding), 3)
    end
  else
    padding = pair("Conv2d", "padding", padding)
  end
  if a.padding_mode ~= nil and a.padding_mode ~= "zeros" then
    error(fmt("Conv2d: padding_mode '%s' is not supported (only 'zeros')", tostring(a.padding_mode)), 3)
  end
  self.in_channels, self.out_channels, self.groups = in_c, out_c, groups
  self.kernel_size = pair("Conv2d", "kernel_size", a.kernel_size, 1)
  self.stride = pair("Conv2d", "stride", a.stride or 1, 1)
  self.padding = padding
  self.dilation = pair("Conv2d", "dilation", a.dilation or 1, 1)
  self.padding_mode = "zeros"
  if padding == "same" and (self.stride[1] ~= 1 or self.stride[2] ~= 1) then
    error("Conv2d: padding='same' is not supported for strided convolutions", 3)
  end
  self.weight = new_param(out_c, in_c // groups, self.kernel_size[1], self.kernel_size[2])
  if a.bias ~= false then self.bias = new_param(out_c) else self.bias = nil end
  self:reset_parameters()
end

Conv2d.reset_parameters = reset_weight_and_bias

function Conv2d:forward(x)
  return F.conv2d(x, self.weight, self.bias, {
    stride = self.stride, padding = self.padding, dilation = self.dilation, groups = self.groups,
  })
end

local function is_pair_of(t, v) return t[1] == v and t[2] == v end

function Conv2d:extra_repr()
  local s = fmt("%d, %d, kernel_size=%s, stride=%s", self.in_channels, self.out_channels,
    pyval(self.kernel_size), pyval(self.stride))
  local padding = self.padding
  if type(padding) == "string" then
    s = s .. ", padding=" .. padding
  elseif not is_pair_of(padding, 0) then
    s = s .. ", padding=" .. pyval(padding)
  end
  if not is_pair_of(self.dilation, 1) then s = s .. ", dilation=" .. pyval(self.dilation) end
  if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
  if self.bias == nil then s = s .. ", bias=False" end
  return s
end

-- Pool sizes keep the form they were given in (int or pair), as torch prints them.
local function size_arg(cls, what, v, min)
  if math.type(v) == "integer" then return check_int(cls, what, v, min) end
  local p = pair(cls, what, v, min)
  return p
end

-- MaxPool2d(kernel_size, stride = kernel_size, padding = 0, dilation = 1, return_indices =
-- false, ceil_mode = false); with return_indices, forward also returns the 1-based positions.
local MaxPool2d = Module:extend("MaxPool2d")
nn.MaxPool2d = MaxPool2d

function MaxPool2d:init(...)
  local a = layer_args("MaxPool2d",
    { "kernel_size", "stride", "padding", "dilation", "return_indices", "ceil_mode" }, ...)
  self.kernel_size = size_arg("MaxPool2d", "kernel_size", a.kernel_size, 1)
  self.stride = a.stride ~= nil and size_arg("MaxPool2d", "stride", a.stride, 1) or self.kernel_size
  self.padding = size_arg("MaxPool2d", "padding", a.padding or 0)
  self.dilation = size_arg("MaxPool2d", "dilation", a.dilation or 1, 1)
  self.return_indices = a.return_indices == true
  self.ceil_mode = a.ceil_mode == true
end

function MaxPool2d:forward(x)
  return F.max_pool2d(x, self.kernel_size, {
    stride = self.stride, padding = self.padding, dilation = self.dilation, ceil_mode = self.ceil_mode,
    return_indices = self.return_indices,
  })
end

function MaxPool2d:extra_repr()
  return fmt("kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=%s", pyval(self.kernel_size),
    pyval(self.stride), pyval(self.padding), pyval(self.dilation), pyval(self.ceil_mode))
end

-- AvgPool2d(kernel_size, stride = kernel_size, padding = 0, ceil_mode = false,
-- count_include_pad = true).
local AvgPool2d = Module:extend("AvgPool2d")
nn.AvgPool2d = AvgPool2d

function AvgPool2d:init(...)
  local a = layer_args("AvgPool2d", { "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad" }, ...)
  self.kernel_size = size_arg("AvgPool2d", "kernel_size", a.kernel_size, 1)
  self.stride = a.stride ~= nil and size_arg("AvgPool2d", "stride", a.stride, 1) or self.kernel_size
  self.padding = size_arg("AvgPool2d", "padding", a.padding or 0)
  self.ceil_mode = a.ceil_mode == true
  self.count_include_pad = a.count_include_pad ~= false
end

function AvgPool2d:forward(x)
  return F.avg_pool2d(x, self.kernel_size, {
    stride = self.stride, padding = self.padding, ceil_mode = self.ceil_mode,
    count_include_pad = self.count_include_pad,
  })
end

function AvgPool2d:extra_repr()
  return fmt("kernel_size=%s, stride=%s, padding=%s", pyval(self.kernel_size), pyval(self.stride),
    pyval(self.padding))
end

-- AdaptiveAvgPool2d(output_size): an int or a pair.
local AdaptiveAvgPool2d = Module:extend("AdaptiveAvgPool2d")
nn.AdaptiveAvgPool2d = AdaptiveAvgPool2d

function AdaptiveAvgPool2d:init(output_size)
  self.output_size = size_arg("AdaptiveAvgPool2d", "output_size", output_size, 1)
end

function AdaptiveAvgPool2d:forward(x) return F.adaptive_avg_pool2d(x, self.output_size) end

function AdaptiveAvgPool2d:extra_repr() return "output_size=" .. pyval(self.output_size) end

-- Dropout(p = 0.5): zeroes elements with probability p while training, scaling the rest by
-- 1 / (1 - p); the identity in eval mode.
local Dropout = Module:extend("Dropout")
nn.Dropout = Dropout

function Dropout:init(...)
  local a = layer_args("Dropout", { "p", "inplace" }, ...)
  local p = a.p == nil and 0.5 or a.p
  if type(p) ~= "number" or p < 0 or p > 1 then
    error(fmt("Dropout: dropout probability has to be between 0 and 1, but got %s", tostring(p)), 3)
  end
  self.p = p
  self.inplace = a.inplace == true
end

function Dropout:forward(x) return F.dropout(x, { p = self.p, training = self.training }) end

function Dropout:extra_repr() return fmt("p=%s, inplace=%s", pyval(self.p), pyval(self.inplace)) end

-- Activations without state.
local function activation(name, fn, inplace_arg)
  local cls = Module:extend(name)
  nn[name] = cls
  if inplace_arg then
    function cls:init(...)
      local a = layer_args(name, { "inplace" }, ...)
      self.inplace = a.inplace == true
    end
    function cls:extra_repr() return self.inplace and "inplace=True" or "" end
  end
  function cls:forward(x) return fn(x, self.inplace) end
  return cls
end

activation("ReLU", F.relu, true)
activation("Tanh", F.tanh)
activation("Sigmoid", F.sigmoid)
-- every other activation of the engine's table but GELU (below: it takes approximate), with
-- torch's inplace argument: nn.SiLU, ...
for _, row in ipairs(ms._op_info.activation) do
  if row.module ~= "GELU" and nn[row.module] == nil then activation(row.module, F[row.name], true) end
end

-- GELU(approximate = "none" | "tanh").
local GELU = Module:extend("GELU")
nn.GELU = GELU

function GELU:init(...)
  local a = layer_args("GELU", { "approximate" }, ...)
  local approx = a.approximate or "none"
  if approx ~= "none" and approx ~= "tanh" then
    error(fmt("GELU: approximate must be 'none' or 'tanh', got %s", tostring(approx)), 3)
  end
  self.approximate = approx
end

function GELU:forward(x)
  if self.approximate == "none" then return F.gelu(x) end
  return F.gelu(x, { approximate = self.approximate })
end

function GELU:extra_repr() return fmt("approximate='%s'", self.approximate) end

-- Softplus(beta = 1, threshold = 20).
local Softplus = Module:extend("Softplus")
nn.Softplus = Softplus

function Softplus:init(...)
  local a = layer_args("Softplus", { "beta", "threshold" }, ...)
  self.beta, self.threshold = a.beta or 1, a.threshold or 20
  for _, k in ipairs({ "beta", "threshold" }) do
    if type(self[k]) ~= "number" then error(fmt("Softplus: %s must be a number, got %s", k, tostring(self[k])), 3) end
  end
end

function Softplus:forward(x) return F.softplus(x, self.beta, self.threshold) end

function Softplus:extra_repr() return fmt("beta=%s, threshold=%s", pyval(self.beta), pyval(self.threshold)) end

-- Softmax(dim) and LogSoftmax(dim); the dim is required (1-based, negative from the end).
local function softmax_class(name, fn)
  local cls = Module:extend(name)
  nn[name] = cls
  function cls:init(...)
    local a = layer_args(name, { "dim" }, ...)
    if math.type(a.dim) ~= "integer" then
      error(fmt("%s: dim must be given as an integer (1-based), got %s", name, tostring(a.dim)), 3)
    end
    self.dim = a.dim
  end
  function cls:forward(x) return fn(x, self.dim) end
  function cls:extra_repr() return "dim=" .. self.dim end
end

softmax_class("Softmax", F.softmax)
softmax_class("LogSoftmax", F.log_softmax)

-- Flatten(start_dim = 2, end_dim = -1): keeps the batch dim, as torch's Flatten().
local Flatten = Module:extend("Flatten")
nn.Flatten = Flatten

function Flatten:init(...)
  local a = layer_args("Flatten", { "start_dim", "end_dim" }, ...)
  self.start_dim = a.start_dim or 2
  self.end_dim = a.end_dim or -1
end

function Flatten:forward(x) return F.flatten(x, self.start_dim, self.end_dim) end

function Flatten:extra_repr() return fmt("start_dim=%d, end_dim=%d", self.start_dim, self.end_dim) end

-- Identity(): returns its input.
local Identity = Module:extend("Identity")
nn.Identity = Identity

function Identity:forward(x) return x end

-- Embedding(num_embeddings, embedding_dim, padding_idx = nil): a lookup table initialised
-- from N(0, 1), with the padding row (1-based, negative from the end) zeroed.
local Embedding = Module:extend("Embedding")
nn.Embedding = Embedding

function Embedding:init(...)
  local a = layer_args("Embedding", { "num_embeddings", "embedding_dim", "padding_idx" }, ...)
  local n = check_int("Embedding", "num_embeddings", a.num_embeddings)
  self.num_embeddings = n
  self.embedding_dim = check_int("Embedding", "embedding_dim", a.embedding_dim)
  local pi = a.padding_idx
  if pi ~= nil then
    if math.type(pi) ~= "integer" or pi == 0 or pi > n or pi < -n then
      error(fmt("Embedding: padding_idx must be within num_embeddings (1..%d or -%d..-1), got %s", n, n,
        tostring(pi)), 3)
    end
  end
  self.padding_idx = pi
  self.weight = new_param(n, self.embedding_dim)
  self:reset_parameters()
end

function Embedding:reset_parameters()
  init.normal_(self.weight)
  if self.padding_idx ~= nil then
    local _ <close> = ms.no_grad()
    local row = self.padding_idx < 0 and self.num_embeddings + self.padding_idx + 1 or self.padding_idx
    self.weight[row]:fill_(0)
  end
end

function Embedding:forward(idx)
  if self.padding_idx == nil then return F.embedding(idx, self.weight) end
  return F.embedding(idx, self.weight, { padding_idx = self.padding_idx })
end

function Embedding:extra_repr()
  local s = fmt("%d, %d", self.num_embeddings, self.embedding_dim)
  if self.padding_idx ~= nil then s = s .. ", padding_idx=" .. self.padding_idx end
  return s
end

-- LayerNorm(normalized_shape, eps = 1e-5, elementwise_affine = true).
local LayerNorm = Module:extend("LayerNorm")
nn.LayerNorm = LayerNorm

function LayerNorm:init(...)
  local a = layer_args("LayerNorm", { "normalized_shape", "eps", "elementwise_affine" }, ...)
  local s = a.normalized_shape
  if math.type(s) == "integer" then s = { s } end
  if type(s) ~= "table" or #s == 0 then
    error(fmt("LayerNorm: normalized_shape must be an integer or a list of integers, got %s", tostring(s)), 3)
  end
  local shape = {}
  for i = 1, #s do shape[i] = check_int("LayerNorm", "normalized_shape", s[i], 1) end
  self.normalized_shape = shape
  self.eps = a.eps or 1e-5
  self.elementwise_affine = a.elementwise_affine ~= false
  if self.elementwise_affine then
    self.weight = nn.Parameter(ms.ones(shape))
    self.bias = nn.Parameter(ms.zeros(shape))
  else
    self.weight, self.bias = nil, nil
  end
end

function LayerNorm:forward(x)
  return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, { eps = self.eps })
end

function LayerNorm:extra_repr()
  return fmt("%s, eps=%s, elementwise_affine=%s", pyval(self.normalized_shape), pyval(self.eps),
    pyval(self.elementwise_affine))
end

-- BatchNorm1d / BatchNorm2d(num_features, eps = 1e-5, momentum = 0.1, affine = true,
-- track_running_stats = true); momentum = false means a cumulative average (torch's None).
local BatchNorm = Module:extend("_BatchNorm")
nn._BatchNorm = BatchNorm

function BatchNorm:init(...)
  local name = self:_get_name()
  local a = layer_args(name, { "num_features", "eps", "momentum", "affine", "track_running_stats" }, ...)
  local n = check_int(name, "num_features", a.num_features, 1)
  self.num_features = n
  self.eps = a.eps or 1e-5
  if a.momentum == false then self.momentum = false else self.momentum = a.momentum or 0.1 end
  self.affine = a.affine ~= false
  self.track_running_stats = a.track_running_stats ~= false
  if self.affine then
    self.weight = nn.Parameter(ms.ones(n))
    self.bias = nn.Parameter(ms.zeros(n))
  else
    self.weight, self.bias = nil, nil
  end
  if self.track_running_stats then
    self:register_buffer("running_mean", ms.zeros(n))
    self:register_buffer("running_var", ms.ones(n))
    self:register_buffer("num_batches_tracked", ms.tensor(0, { dtype = "int64" }))
  else
    self.running_mean, self.running_var, self.num_batches_tracked = nil, nil, nil
  end
end

function BatchNorm:reset_running_stats()
  if not self.track_running_stats then return end
  local _ <close> = ms.no_grad()
  self.running_mean:fill_(0)
  self.running_var:fill_(1)
  self.num_batches_tracked:fill_(0)
end

function BatchNorm:forward(x)
  self:_check_input_dim(x)
  local factor = self.momentum or 0.0
  if self.training and self.track_running_stats then
    local nbt = self.num_batches_tracked
    do
      local _ <close> = ms.no_grad()
      nbt:add_(1)
    end
    if self.momentum == false then factor = 1.0 / nbt:item() end
  end
  local bn_training = self.training or not self.track_running_stats
  local use_stats = not self.training or self.track_running_stats
  return F.batch_norm(x, use_stats and self.running_mean or nil, use_stats and self.running_var or nil,
    self.weight, self.bias, { training = bn_training, momentum = factor, eps = self.eps })
end

function BatchNorm:extra_repr()
  return fmt("%d, eps=%s, momentum=%s, affine=%s, track_running_stats=%s", self.num_features, pyval(self.eps),
    self.momentum == false and "None" or pyval(self.momentum), pyval(self.affine), pyval(self.track_running_stats))
end

local BatchNorm1d = BatchNorm:extend("BatchNorm1d")
nn.BatchNorm1d = BatchNorm1d

function BatchNorm1d:_check_input_dim(x)
  local d = x:dim()
  if d ~= 2 and d ~= 3 then error(fmt("BatchNorm1d: expected 2D or 3D input (got %dD input)", d), 3) end
end

local BatchNorm2d = BatchNorm:extend("BatchNorm2d")
nn.BatchNorm2d = BatchNorm2d

function BatchNorm2d:_check_input_dim(x)
  local d = x:dim()
  if d ~= 4 then error(fmt("BatchNorm2d: expected 4D input (got %dD input)", d), 3) end
end


-- ---- loss modules: PyTorch's nn.*Loss, the functional loss with the options given at
-- construction (module attributes, as PyTorch's); a class weight is a buffer, so it follows the
-- module's :to() and is in its state_dict ----------------------------------------------------------

local function loss_module(name, fn, keys)
  local cls = Module:extend(name)
  nn[name] = cls
  function cls:init(...)
    local a = layer_args(name, keys, ...) -- the values are checked by fn at the call, as PyTorch does
    for _, k in ipairs(keys) do
      if k == "weight" then self:register_buffer("weight", a.weight)
      elseif k == "reduction" then self.reduction = a.reduction or "mean"
      else self[k] = a[k] end
    end
  end
  function cls:forward(input, target)
    local o = {}
    for _, k in ipairs(keys) do o[k] = self[k] end
    return fn(input, target, o)
  end
  return cls
end

loss_module("CrossEntropyLoss", F.cross_entropy, { "weight", "ignore_index", "reduction", "label_smoothing" })
loss_module("NLLLoss", F.nll_loss, { "weight", "ignore_index", "reduction" })
loss_module("MSELoss", F.mse_loss, { "reduction" })

return nn
