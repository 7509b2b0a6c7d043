-- docs/nn_init.lua: the docstrings of nn.init (torch.nn.init): in-place initialisers that draw
-- from the global Philox generator under no_grad and return the tensor they filled.
return {
  title = "nn.init",

  { name = "nn.init.calculate_gain",
    sig = "nn.init.calculate_gain(nonlinearity, param = nil) -> number",
    doc = [[The recommended gain for a nonlinearity: "linear", "conv1d", "conv2d", "conv3d",
the "conv_transpose" ones and "sigmoid" give 1, "tanh" 5/3, "relu" sqrt(2), "selu" 3/4,
"leaky_relu" sqrt(2 / (1 + slope^2)) with `param` the negative slope (0.01 by default).]],
    example = [[
print(nn.init.calculate_gain("tanh"))                         --> 1.6666666666667
print(nn.init.calculate_gain("relu") == math.sqrt(2))         --> true
]] },

  { name = "nn.init.calculate_fan_in_and_fan_out",
    sig = "nn.init.calculate_fan_in_and_fan_out(tensor) -> fan_in, fan_out",
    doc = [[fan_in and fan_out of a weight laid out (out, in, k...) as torch's layers lay theirs
(PyTorch's private _calculate_fan_in_and_fan_out); at least 2 dims.]],
    example = [[
print(nn.init.calculate_fan_in_and_fan_out(ms.empty(32, 16, 3, 3)))  --> 144	288
]] },

  { name = "nn.init.uniform_",
    sig = "nn.init.uniform_(tensor, a = 0, b = 1) -> tensor",
    doc = [[Fills the tensor in place from U(a, b).]],
    example = [[
ms.manual_seed(0)
local w = nn.init.uniform_(ms.empty(100), -1, 1)
print(w:min():item() >= -1, w:max():item() <= 1)  --> true	true
]] },

  { name = "nn.init.normal_",
    sig = "nn.init.normal_(tensor, mean = 0, std = 1) -> tensor",
    doc = [[Fills the tensor in place from N(mean, std^2).]],
    example = [[
ms.manual_seed(0)
local w = nn.init.normal_(ms.empty(10000), 5, 0.1)
print(math.abs(w:mean():item() - 5) < 0.01)  --> true
]] },

  { name = "nn.init.constant_",
    sig = "nn.init.constant_(tensor, val) -> tensor",
    doc = [[Fills the tensor with `val`.]],
    example = [[
print(nn.init.constant_(ms.empty(3), 0.5))  --> tensor([0.5000, 0.5000, 0.5000])
]] },

  { name = "nn.init.zeros_",
    sig = "nn.init.zeros_(tensor) -> tensor",
    doc = [[Fills the tensor with 0.]],
    example = [[
local fc = nn.Linear(2, 2)
nn.init.zeros_(fc.bias)
print(fc.bias)  --> tensor([0., 0.], requires_grad=True)
]] },

  { name = "nn.init.ones_",
    sig = "nn.init.ones_(tensor) -> tensor",
    doc = [[Fills the tensor with 1.]],
    example = [[
print(nn.init.ones_(ms.empty(2)))  --> tensor([1., 1.])
]] },

  { name = "nn.init.xavier_uniform_",
    sig = "nn.init.xavier_uniform_(tensor, gain = 1) -> tensor",
    doc = [[Glorot initialisation: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)). Also
`xavier_uniform_(t, {gain =})`.]],
    opts = { { "gain", "number", "1", "the scaling factor" } },
    example = [[
ms.manual_seed(0)
local w = nn.init.xavier_uniform_(ms.empty(4, 2), nn.init.calculate_gain("tanh"))
print(w:abs():max():item() <= 5 / 3)  --> true
]] },

  { name = "nn.init.xavier_normal_",
    sig = "nn.init.xavier_normal_(tensor, gain = 1) -> tensor",
    doc = [[Glorot initialisation: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)).
Also `xavier_normal_(t, {gain =})`.]],
    opts = { { "gain", "number", "1", "the scaling factor" } },
    example = [[
ms.manual_seed(0)
local w = nn.init.xavier_normal_(ms.empty(200, 200))
print(math.abs(w:std():item() - math.sqrt(2 / 400)) < 0.005)  --> true
]] },

  { name = "nn.init.kaiming_uniform_",
    sig = "nn.init.kaiming_uniform_(tensor, a = 0, mode = \"fan_in\", nonlinearity = \"leaky_relu\") -> tensor",
    doc = [[He initialisation: U(-bound, bound) with bound = gain * sqrt(3 / fan), the gain of
`nonlinearity` (with negative slope `a`) and fan the fan_in or fan_out. Also
`kaiming_uniform_(t, {a =, mode =, nonlinearity =})`; nn.Linear uses `{a = math.sqrt(5)}`.]],
    opts = { { "a", "number", "0", "the negative slope of a leaky_relu" },
             { "mode", "string", "\"fan_in\"", "\"fan_in\" (keeps the forward variance) or \"fan_out\" (the backward's)" },
             { "nonlinearity", "string", "\"leaky_relu\"", "as nn.init.calculate_gain" } },
    example = [[
ms.manual_seed(0)
local w = nn.init.kaiming_uniform_(ms.empty(8, 6), {nonlinearity = "relu"})
print(w:abs():max():item() <= math.sqrt(2) * math.sqrt(3 / 6))  --> true
]] },

  { name = "nn.init.kaiming_normal_",
    sig = "nn.init.kaiming_normal_(tensor, a = 0, mode = \"fan_in\", nonlinearity = \"leaky_relu\") -> tensor",
    doc = [[He initialisation: N(0, std^2) with std = gain / sqrt(fan). Also
`kaiming_normal_(t, {a =, mode =, nonlinearity =})`.]],
    opts = { { "a", "number", "0", "the negative slope of a leaky_relu" },
             { "mode", "string", "\"fan_in\"", "\"fan_in\" or \"fan_out\"" },
             { "nonlinearity", "string", "\"leaky_relu\"", "as nn.init.calculate_gain" } },
    example = [[
ms.manual_seed(0)
local w = nn.init.kaiming_normal_(ms.empty(256, 128), {mode = "fan_out", nonlinearity = "relu"})
print(math.abs(w:std():item() - math.sqrt(2 / 256)) < 0.005)  --> true
]] },

  { name = "nn.init.eye_",
    sig = "nn.init.eye_(tensor) -> tensor",
    doc = [[Fills a 2-D tensor with the identity matrix (ones on the diagonal, zeros elsewhere).]],
    example = [==[
print(nn.init.eye_(ms.empty(2, 3)))
--> tensor([[1., 0., 0.],
-->         [0., 1., 0.]])
]==] },
}
