-- docs/nn_layers.lua: the docstrings of the layers and containers of `require "moonshard.nn"`.
-- Constructors take their arguments positionally, as PyTorch's, or as an options table last
-- (nn.Conv2d(1, 32, 3, {stride = 2})); an unknown option raises.
return {
  title = "Layers",

  { name = "nn.Linear",
    sig = "nn.Linear(in_features, out_features, bias = true) -> Module",
    doc = [[y = x W^T + b over the last dim: input (..., in_features), output (...,
out_features). `weight` is (out_features, in_features); torch's initialisation (kaiming_uniform_
with a = sqrt(5), the bias from U(-1/sqrt(in_features), 1/sqrt(in_features))). The options form
is `nn.Linear(in, out, {bias = false})`.]],
    opts = { { "bias", "boolean", "true", "learn an additive bias" } },
    example = [[
ms.manual_seed(0)
local fc = nn.Linear(4, 2)
print(fc)                         --> Linear(in_features=4, out_features=2, bias=True)
print(fc(ms.ones(3, 4)).shape)    --> torch.Size([3, 2])
print(nn.Linear(4, 2, {bias = false}).bias)  --> nil
]] },

  { name = "nn.Linear:reset_parameters",
    also = { "nn.Conv2d:reset_parameters" },
    sig = "layer:reset_parameters()",
    doc = [[Draws the weight and bias again with torch's default initialisation (from the global
generator: ms.manual_seed makes it reproducible).]],
    example = [[
local fc = nn.Linear(2, 2)
ms.manual_seed(3); fc:reset_parameters(); local a = fc.weight:clone()
ms.manual_seed(3); fc:reset_parameters()
print(ms.equal(a, fc.weight))  --> true
]] },

  { name = "nn.Conv2d",
    sig = "nn.Conv2d(in_channels, out_channels, kernel_size, stride = 1, padding = 0, dilation = 1, groups = 1, bias = true, padding_mode = \"zeros\") -> Module",
    doc = [[2-D convolution over (N, C_in, H, W) input, giving (N, C_out, H_out, W_out).
kernel_size, stride, padding and dilation are an integer or a pair {h, w}; padding may also be
"valid" or "same" (stride 1). Only padding_mode "zeros" exists. Any argument after the first
three may be given as an options table last.]],
    opts = { { "stride", "integer|{h, w}", "1", "the step of the kernel" },
             { "padding", "integer|{h, w}|string", "0", "zeros added on both sides, or \"valid\" / \"same\"" },
             { "dilation", "integer|{h, w}", "1", "the spacing of the kernel's taps" },
             { "groups", "integer", "1", "blocked connections: in and out channels divisible by it" },
             { "bias", "boolean", "true", "learn an additive bias" },
             { "padding_mode", "string", "\"zeros\"", "only \"zeros\"" } },
    example = [[
ms.manual_seed(0)
local conv = nn.Conv2d(1, 8, 3, {padding = 1})
print(conv)                                --> Conv2d(1, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
print(conv(ms.randn(2, 1, 28, 28)).shape)  --> torch.Size([2, 8, 28, 28])
]] },

  { name = "nn.MaxPool2d",
    sig = "nn.MaxPool2d(kernel_size, stride = kernel_size, padding = 0, dilation = 1, return_indices = false, ceil_mode = false) -> Module",
    doc = [[The maximum over each window of (N, C, H, W) input (4-D only; PyTorch also takes
(C, H, W)). With return_indices the module also returns the positions of the maxima, 1-based in
each plane.]],
    opts = { { "stride", "integer|{h, w}", "nil", "the step of the window (nil: kernel_size)" },
             { "padding", "integer|{h, w}", "0", "implicit -inf padding on both sides" },
             { "dilation", "integer|{h, w}", "1", "the spacing of the window's elements" },
             { "return_indices", "boolean", "false", "also return the positions of the maxima" },
             { "ceil_mode", "boolean", "false", "round the output size up rather than down" } },
    example = [==[
local pool = nn.MaxPool2d(2)
local x = ms.arange(1, 17):float():view(1, 1, 4, 4)
print(pool(x))
--> tensor([[[[ 6.,  8.],
-->           [14., 16.]]]])
]==] },

  { name = "nn.AvgPool2d",
    sig = "nn.AvgPool2d(kernel_size, stride = kernel_size, padding = 0, ceil_mode = false, count_include_pad = true) -> Module",
    doc = [[The mean over each window of (N, C, H, W) input (4-D only; PyTorch also takes
(C, H, W)).]],
    opts = { { "stride", "integer|{h, w}", "nil", "the step of the window (nil: kernel_size)" },
             { "padding", "integer|{h, w}", "0", "zeros added on both sides" },
             { "ceil_mode", "boolean", "false", "round the output size up rather than down" },
             { "count_include_pad", "boolean", "true", "count the padding zeros in the mean" } },
    example = [==[
local x = ms.arange(1, 17):float():view(1, 1, 4, 4)
print(nn.AvgPool2d(2)(x))
--> tensor([[[[ 3.5000,  5.5000],
-->           [11.5000, 13.5000]]]])
]==] },

  { name = "nn.AdaptiveAvgPool2d",
    sig = "nn.AdaptiveAvgPool2d(output_size) -> Module",
    doc = [[Average pooling of (N, C, H, W) input to a fixed output size (an integer or a pair
{h, w}) whatever the input's size, as torch's.]],
    example = [[
local pool = nn.AdaptiveAvgPool2d(1)
print(pool(ms.ones(2, 3, 7, 5)).shape)  --> torch.Size([2, 3, 1, 1])
]] },

  { name = "nn.Dropout",
    sig = "nn.Dropout(p = 0.5, inplace = false) -> Module",
    doc = [[While training, zeroes each element with probability p and scales the others by
1 / (1 - p), from the global Philox generator; in eval mode, the identity. `inplace` is accepted
for PyTorch's signature.]],
    opts = { { "p", "number", "0.5", "the probability of zeroing an element" },
             { "inplace", "boolean", "false", "accepted, as PyTorch's" } },
    example = [[
ms.manual_seed(0)
local drop = nn.Dropout(0.5)
local y = drop(ms.ones(1000))
print(y:max():item(), y:eq(0):sum():item() > 400)  --> 2.0	true
print(drop:eval()(ms.ones(3)))                     --> tensor([1., 1., 1.])
]] },

  { name = "nn.ReLU",
    sig = "nn.ReLU(inplace = false) -> Module",
    doc = [[max(0, x) elementwise. With inplace, the input itself is rectified and returned.]],
    opts = { { "inplace", "boolean", "false", "overwrite the input" } },
    example = [[
print(nn.ReLU()(ms.tensor({-1.0, 0.5})))  --> tensor([0.0000, 0.5000])
]] },

  { name = "nn.Tanh",
    sig = "nn.Tanh() -> Module",
    doc = [[tanh(x) elementwise.]],
    example = [[
print(nn.Tanh()(ms.tensor({0.0})))  --> tensor([0.])
]] },

  { name = "nn.Sigmoid",
    sig = "nn.Sigmoid() -> Module",
    doc = [[1 / (1 + exp(-x)) elementwise.]],
    example = [[
print(nn.Sigmoid()(ms.tensor({0.0})))  --> tensor([0.5000])
]] },

  { name = "nn.SiLU",
    sig = "nn.SiLU(inplace = false) -> Module",
    doc = [[x * sigmoid(x) elementwise (swish).]],
    opts = { { "inplace", "boolean", "false", "overwrite the input" } },
    example = [[
print(nn.SiLU()(ms.tensor({0.0, 1.0})))  --> tensor([0.0000, 0.7311])
]] },

  { name = "nn.Hardswish",
    sig = "nn.Hardswish(inplace = false) -> Module",
    doc = [[x * relu6(x + 3) / 6 elementwise.]],
    opts = { { "inplace", "boolean", "false", "overwrite the input" } },
    example = [[
print(nn.Hardswish()(ms.tensor({-4.0, 0.0, 4.0})))  --> tensor([-0., 0., 4.])
]] },

  { name = "nn.GELU",
    sig = "nn.GELU(approximate = \"none\") -> Module",
    doc = [[x * Phi(x) elementwise (Phi the standard normal CDF); approximate = "tanh" uses
GPT-2's tanh approximation.]],
    opts = { { "approximate", "string", "\"none\"", "\"none\" or \"tanh\"" } },
    example = [[
print(nn.GELU()(ms.tensor({1.0})))                        --> tensor([0.8413])
print(nn.GELU({approximate = "tanh"}))                    --> GELU(approximate='tanh')
]] },

  { name = "nn.Softplus",
    sig = "nn.Softplus(beta = 1, threshold = 20) -> Module",
    doc = [[log(1 + exp(beta x)) / beta elementwise, and x itself where beta x > threshold.]],
    opts = { { "beta", "number", "1", "the sharpness" },
             { "threshold", "number", "20", "above it, the identity" } },
    example = [[
print(nn.Softplus()(ms.tensor({0.0})))  --> tensor([0.6931])
]] },

  { name = "nn.Softmax",
    sig = "nn.Softmax(dim) -> Module",
    doc = [[exp(x) / sum(exp(x)) along `dim`, which is required and 1-based (negative from the
end): torch's Softmax(dim=1) is nn.Softmax(2).]],
    example = [==[
print(nn.Softmax(2)(ms.zeros(1, 4)))  --> tensor([[0.2500, 0.2500, 0.2500, 0.2500]])
]==] },

  { name = "nn.LogSoftmax",
    sig = "nn.LogSoftmax(dim) -> Module",
    doc = [[log(softmax(x)) along `dim` (required, 1-based), computed stably; the usual input of
nn.NLLLoss.]],
    example = [==[
print(nn.LogSoftmax(2)(ms.zeros(1, 2)))  --> tensor([[-0.6931, -0.6931]])
]==] },

  { name = "nn.Flatten",
    sig = "nn.Flatten(start_dim = 2, end_dim = -1) -> Module",
    doc = [[Flattens dims start_dim..end_dim (1-based) into one; the default keeps the batch dim,
as torch's Flatten() (whose start_dim=1 is 0-based).]],
    opts = { { "start_dim", "integer", "2", "the first dim flattened" },
             { "end_dim", "integer", "-1", "the last dim flattened" } },
    example = [[
print(nn.Flatten()(ms.zeros(2, 3, 4, 5)).shape)  --> torch.Size([2, 60])
]] },

  { name = "nn.Identity",
    sig = "nn.Identity() -> Module",
    doc = [[Returns its input: a placeholder, for instance to take a layer out of a model.]],
    example = [[
local x = ms.ones(2)
print(rawequal(nn.Identity()(x), x))  --> true
]] },

  { name = "nn.Embedding",
    sig = "nn.Embedding(num_embeddings, embedding_dim, padding_idx = nil) -> Module",
    doc = [[A lookup table: integer indices (any shape, 1-based) give rows of `weight`
(num_embeddings, embedding_dim), initialised from N(0, 1). The row padding_idx (1-based, negative
from the end) is zero and gets no gradient.]],
    opts = { { "padding_idx", "integer", "nil", "a row kept at zero, without gradient" } },
    example = [[
ms.manual_seed(0)
local emb = nn.Embedding(10, 3, {padding_idx = 1})
local idx = ms.tensor({{1, 2}, {4, 10}})
print(emb(idx).shape)     --> torch.Size([2, 2, 3])
print(emb(idx)[1][1])     --> tensor([0., 0., 0.], grad_fn=<SelectBackward0>)
]] },

  { name = "nn.Embedding:reset_parameters",
    sig = "embedding:reset_parameters()",
    doc = [[Draws the weight again from N(0, 1) and zeroes the padding row.]],
    example = [[
local emb = nn.Embedding(4, 2, 2)
emb:reset_parameters()
print(emb.weight[2])  --> tensor([0., 0.], grad_fn=<SelectBackward0>)
]] },

  { name = "nn.LayerNorm",
    sig = "nn.LayerNorm(normalized_shape, eps = 1e-5, elementwise_affine = true) -> Module",
    doc = [[Normalizes over the last dims (those of normalized_shape: an integer or a list) to
mean 0 and variance 1, then scales by `weight` (ones) and shifts by `bias` (zeros) when
elementwise_affine.]],
    opts = { { "eps", "number", "1e-5", "added to the variance" },
             { "elementwise_affine", "boolean", "true", "learn weight and bias" } },
    example = [[
local ln = nn.LayerNorm(4)
local y = ln(ms.tensor({{1.0, 2.0, 3.0, 4.0}}))
print(ms.allclose(y:mean(2), ms.zeros(1), {atol = 1e-6}))  --> true
]] },

  { name = "nn.BatchNorm1d",
    sig = "nn.BatchNorm1d(num_features, eps = 1e-5, momentum = 0.1, affine = true, track_running_stats = true) -> Module",
    doc = [[Batch normalization over (N, C) or (N, C, L) input: in training, each channel is
normalized with the batch's statistics and the running estimates (buffers running_mean,
running_var, num_batches_tracked) are updated; in eval mode the running estimates are used.
momentum = false gives a cumulative average (PyTorch's momentum=None).]],
    opts = { { "eps", "number", "1e-5", "added to the variance" },
             { "momentum", "number|false", "0.1", "the running estimates' update factor; false: cumulative average" },
             { "affine", "boolean", "true", "learn weight and bias" },
             { "track_running_stats", "boolean", "true", "keep running estimates (else batch statistics always)" } },
    example = [[
local bn = nn.BatchNorm1d(2)
bn(ms.tensor({{1.0, 10.0}, {3.0, 30.0}}))
print(bn.running_mean)  --> tensor([0.2000, 2.0000])
]] },

  { name = "nn.BatchNorm2d",
    sig = "nn.BatchNorm2d(num_features, eps = 1e-5, momentum = 0.1, affine = true, track_running_stats = true) -> Module",
    doc = [[Batch normalization over (N, C, H, W) input, per channel: as nn.BatchNorm1d.]],
    opts = { { "eps", "number", "1e-5", "added to the variance" },
             { "momentum", "number|false", "0.1", "the running estimates' update factor; false: cumulative average" },
             { "affine", "boolean", "true", "learn weight and bias" },
             { "track_running_stats", "boolean", "true", "keep running estimates (else batch statistics always)" } },
    example = [[
ms.manual_seed(0)
local bn = nn.BatchNorm2d(3)
local y = bn(ms.randn(4, 3, 5, 5))
print(y.shape, bn.num_batches_tracked:item())  --> torch.Size([4, 3, 5, 5])	1
]] },

  { name = "nn.BatchNorm2d:reset_running_stats",
    also = { "nn.BatchNorm1d:reset_running_stats" },
    sig = "bn:reset_running_stats()",
    doc = [[Resets the running estimates: mean 0, variance 1, num_batches_tracked 0.]],
    example = [[
local bn = nn.BatchNorm1d(2)
bn(ms.tensor({{1.0, 10.0}, {3.0, 30.0}}))
bn:reset_running_stats()
print(bn.running_mean, bn.num_batches_tracked:item())  --> tensor([0., 0.])	0
]] },

  -- ---- containers ----

  { name = "nn.Sequential",
    sig = "nn.Sequential(m1, m2, ...) | nn.Sequential({{name, m}, ...}) -> Module",
    doc = [[Runs its children in order, each one's output the next one's input. Children are
named "0", "1" and so on (torch's names, in state dicts) and indexed 1-based from Lua: `seq[1]`
is the first, `seq[-1]` the last, `#seq` the count, `ipairs(seq)` walks them; `seq[i] = m`
replaces one. The second form names them.]],
    example = [[
ms.manual_seed(0)
local net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
print(#net, net[-1])            --> 3	Linear(in_features=8, out_features=2, bias=True)
print(net(ms.ones(5, 4)).shape) --> torch.Size([5, 2])
local named = nn.Sequential({{"fc", nn.Linear(2, 2)}, {"act", nn.Tanh()}})
print(named.act)                --> Tanh()
]] },

  { name = "nn.Sequential:append",
    sig = "seq:append(module) -> seq",
    doc = [[Adds a module at the end (named by its position, "3" for the fourth).]],
    example = [[
local net = nn.Sequential(nn.Linear(2, 2)):append(nn.ReLU())
print(#net, net[2])  --> 2	ReLU()
]] },

  { name = "nn.ModuleList",
    sig = "nn.ModuleList({m1, m2, ...}) -> Module",
    doc = [[Holds modules in a list, registered (their parameters are the container's) and
indexed 1-based: `list[1]`, `list[-1]`, `#list`, `for i, m in ipairs(list)`. It has no forward:
call its modules yourself. The children are named "0", "1" and so on, as in torch.]],
    example = [[
local layers = nn.ModuleList({nn.Linear(2, 2), nn.Linear(2, 2)})
local x = ms.ones(1, 2)
for _, layer in ipairs(layers) do x = layer(x) end
print(#layers, x.shape, #layers:parameters())  --> 2	torch.Size([1, 2])	4
]] },

  { name = "nn.ModuleList:append",
    sig = "list:append(module) -> list",
    doc = [[Adds a module at the end.]],
    example = [[
local l = nn.ModuleList():append(nn.ReLU())
print(#l)  --> 1
]] },

  { name = "nn.ModuleList:extend",
    sig = "list:extend({m1, m2, ...} | ModuleList) -> list",
    doc = [[Appends every module of an array or of another ModuleList. (Called on the class,
`nn.ModuleList:extend("Name")` makes a subclass, as Module:extend.)]],
    example = [[
local l = nn.ModuleList({nn.ReLU()}):extend({nn.Tanh(), nn.Sigmoid()})
print(#l, l[3])  --> 3	Sigmoid()
]] },

  { name = "nn.ModuleList:insert",
    sig = "list:insert(index, module)",
    doc = [[Inserts a module before position `index` (1-based, negative from the end;
#list + 1 appends). The children are renamed by their new positions ("0" first), as in torch.]],
    example = [[
local l = nn.ModuleList({nn.ReLU(), nn.Tanh()})
l:insert(1, nn.Identity())
print(l[1], l[2])  --> Identity()	ReLU()
]] },

  { name = "nn.ModuleDict",
    sig = "nn.ModuleDict({{name, m}, ...} | {name = m, ...}) -> Module",
    doc = [[Holds modules by name, registered. An array of {name, module} pairs keeps that order;
a map is added in sorted key order (Lua tables have none). `dict.name` reads one; `#dict` counts
them. It has no forward.]],
    example = [[
local heads = nn.ModuleDict({{"cls", nn.Linear(4, 10)}, {"box", nn.Linear(4, 4)}})
print(#heads, heads.box)  --> 2	Linear(in_features=4, out_features=4, bias=True)
]] },

  { name = "nn.ModuleDict:update",
    sig = "dict:update({{name, m}, ...} | {name = m, ...}) -> dict",
    doc = [[Adds or replaces modules by name (pairs in their order, a map in sorted key order).]],
    example = [[
local d = nn.ModuleDict():update({b = nn.ReLU(), a = nn.Tanh()})
print(table.concat(d:keys(), ","))  --> a,b
]] },

  { name = "nn.ModuleDict:keys",
    sig = "dict:keys() -> {string, ...}",
    doc = [[The names, in order.]],
    example = [[
print(table.concat(nn.ModuleDict({{"z", nn.ReLU()}, {"y", nn.ReLU()}}):keys(), ","))  --> z,y
]] },

  { name = "nn.ModuleDict:values",
    sig = "dict:values() -> {Module, ...}",
    doc = [[The modules, in order.]],
    example = [[
print(nn.ModuleDict({{"act", nn.Tanh()}}):values()[1])  --> Tanh()
]] },

  { name = "nn.ModuleDict:items",
    sig = "for name, m in dict:items() do ... end",
    doc = [[Iterates the names and modules in order.]],
    example = [[
for name, m in nn.ModuleDict({{"a", nn.ReLU()}, {"b", nn.Tanh()}}):items() do print(name, m) end
--> a	ReLU()
--> b	Tanh()
]] },

  { name = "nn.ModuleDict:pop",
    sig = "dict:pop(name) -> Module",
    doc = [[Removes the module `name` and returns it (nil when absent).]],
    example = [[
local d = nn.ModuleDict({{"a", nn.ReLU()}, {"b", nn.Tanh()}})
print(d:pop("a"), #d)  --> ReLU()	1
]] },
}
