-- nn_init.lua: torch.nn.init in Lua (`require "moonshard.nn".init`): in-place initializers
-- that draw from the one Philox generator (so ms.manual_seed makes them reproducible) and
-- run under ms.no_grad(), so they may fill parameters. Each returns the tensor it filled.
local ms = require "moonshard"
local options = require "moonshard.check_opts"

local init = {}

local sqrt = math.sqrt

local function check_tensor(fname, t)
  if not ms.is_tensor(t) then
    error(("nn.init.%s: bad argument #1 (tensor): expected a tensor, got %s"):format(fname, type(t)), 3)
  end
end

-- Runs fn(t) with gradient recording off, whatever the caller's mode.
local function no_grad(fn, ...)
  local _ <close> = ms.no_grad()
  return fn(...)
end

-- Options as a table last, or positional in the order of `names`.
local function args_of(fname, names, ...)
  local n = select("#", ...)
  local first = ...
  if n == 1 and type(first) == "table" then
    options.check_given("nn.init." .. fname, first, names, 3)
    return first
  end
  local o = {}
  for i = 1, math.min(n, #names) do o[names[i]] = (select(i, ...)) end
  return o
end

local GAINS = {
  linear = 1, conv1d = 1, conv2d = 1, conv3d = 1, conv_transpose1d = 1, conv_transpose2d = 1,
  conv_transpose3d = 1, sigmoid = 1, tanh = 5 / 3, relu = sqrt(2), selu = 3 / 4,
}

-- The recommended gain for a nonlinearity, as torch.nn.init.calculate_gain.
function init.calculate_gain(nonlinearity, param)
  if nonlinearity == "leaky_relu" then
    local slope = 0.01
    if param ~= nil then
      if type(param) ~= "number" then
        error(("nn.init.calculate_gain: negative_slope %s is not a valid number"):format(tostring(param)), 2)
      end
      slope = param
    end
    return sqrt(2 / (1 + slope ^ 2))
  end
  local g = GAINS[nonlinearity]
  if not g then error(("nn.init.calculate_gain: unsupported nonlinearity %s"):format(tostring(nonlinearity)), 2) end
  return g
end

-- fan_in and fan_out of a weight laid out (out, in, k...) as torch's layers lay theirs.
function init.calculate_fan_in_and_fan_out(t)
  check_tensor("calculate_fan_in_and_fan_out", t)
  local shape = t.shape
  if #shape < 2 then
    error("nn.init: fan in and fan out can not be computed for a tensor with fewer than 2 dimensions", 3)
  end
  local receptive = 1
  for i = 3, #shape do receptive = receptive * shape[i] end
  return shape[2] * receptive, shape[1] * receptive
end

local function calculate_fan(t, mode)
  if mode ~= "fan_in" and mode ~= "fan_out" then
    error(("nn.init: mode %s not supported, please use one of fan_in, fan_out"):format(tostring(mode)), 3)
  end
  local fan_in, fan_out = init.calculate_fan_in_and_fan_out(t)
  return mode == "fan_in" and fan_in or fan_out
end

-- In place from U(a, b).
function init.uniform_(t, a, b)
  check_tensor("uniform_", t)
  return no_grad(t.uniform_, t, a or 0, b or 1)
end

-- In place from N(mean, std^2).
function init.normal_(t, mean, std)
  check_tensor("normal_", t)
  return no_grad(t.normal_, t, mean or 0, std or 1)
end

function init.constant_(t, val)
  check_tensor("constant_", t)
  if type(val) ~= "number" then error("nn.init.constant_: bad argument #2 (val): expected a number", 2) end
  return no_grad(t.fill_, t, val)
end

function init.zeros_(t)
  check_tensor("zeros_", t)
  return no_grad(t.fill_, t, 0)
end

function init.ones_(t)
  check_tensor("ones_", t)
  return no_grad(t.fill_, t, 1)
end

-- Glorot: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)).
function init.xavier_uniform_(t, ...)
  check_tensor("xavier_uniform_", t)
  local o = args_of("xavier_uniform_", { "gain" }, ...)
  local fan_in, fan_out = init.calculate_fan_in_and_fan_out(t)
  local std = (o.gain or 1) * sqrt(2 / (fan_in + fan_out))
  local a = sqrt(3) * std
  return init.uniform_(t, -a, a)
end

function init.xavier_normal_(t, ...)
  check_tensor("xavier_normal_", t)
  local o = args_of("xavier_normal_", { "gain" }, ...)
  local fan_in, fan_out = init.calculate_fan_in_and_fan_out(t)
  return init.normal_(t, 0, (o.gain or 1) * sqrt(2 / (fan_in + fan_out)))
end

local KAIMING = { "a", "mode", "nonlinearity" }

-- He: U(-bound, bound), bound = gain * sqrt(3 / fan). kaiming_uniform_(t, a, mode, nonlinearity)
-- or kaiming_uniform_(t, {a =, mode =, nonlinearity =}); defaults 0, "fan_in", "leaky_relu".
function init.kaiming_uniform_(t, ...)
  check_tensor("kaiming_uniform_", t)
  local o = args_of("kaiming_uniform_", KAIMING, ...)
  local fan = calculate_fan(t, o.mode or "fan_in")
  if fan == 0 then return t end -- torch warns and leaves a zero-element tensor alone
  local gain = init.calculate_gain(o.nonlinearity or "leaky_relu", o.a or 0)
  local bound = sqrt(3) * gain / sqrt(fan)
  return init.uniform_(t, -bound, bound)
end

function init.kaiming_normal_(t, ...)
  check_tensor("kaiming_normal_", t)
  local o = args_of("kaiming_normal_", KAIMING, ...)
  local fan = calculate_fan(t, o.mode or "fan_in")
  if fan == 0 then return t end
  local gain = init.calculate_gain(o.nonlinearity or "leaky_relu", o.a or 0)
  return init.normal_(t, 0, gain / sqrt(fan))
end

-- The identity matrix (2-D tensors only).
function init.eye_(t)
  check_tensor("eye_", t)
  if t:dim() ~= 2 then error("nn.init.eye_: only tensors with 2 dimensions are supported", 2) end
  local _ <close> = ms.no_grad()
  t:fill_(0)
  local shape = t.shape
  -- fill_ on each diagonal element's view (not t[i][i] = 1): a meta t records it (nn_meta.lua)
  for i = 1, math.min(shape[1], shape[2]) do t[i][i]:fill_(1) end
  return t
end

return init
