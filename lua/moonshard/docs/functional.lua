-- docs/functional.lua: the docstrings of `local F = require "moonshard.functional"` (also
-- nn.functional), torch.nn.functional in Lua: torch's positional forms and an options table
-- last; dims and indices 1-based, negative from the end.
return {
  title = "Functional (F)",

  { name = "F.relu",
    sig = "F.relu(x, inplace = false) -> Tensor",
    doc = [[max(0, x) elementwise. With inplace, x itself is rectified (x:relu_()) and returned.]],
    example = [[
print(F.relu(ms.tensor({-1.0, 0.0, 1.0})))  --> tensor([0., 0., 1.])
]] },

  { name = "F.tanh",
    sig = "F.tanh(x) -> Tensor",
    doc = [[tanh(x) elementwise (the same as ms.tanh).]],
    example = [[
print(F.tanh(ms.tensor({-1.0, 0.0, 1.0})))  --> tensor([-0.7616,  0.0000,  0.7616])
]] },

  { name = "F.sigmoid",
    sig = "F.sigmoid(x) -> Tensor",
    doc = [[1 / (1 + exp(-x)) elementwise.]],
    example = [[
print(F.sigmoid(ms.tensor({-1.0, 0.0, 1.0})))  --> tensor([0.2689, 0.5000, 0.7311])
]] },

  { name = "F.gelu",
    sig = "F.gelu(x, approximate = \"none\") -> Tensor",
    doc = [[x * Phi(x) elementwise; approximate = "tanh" (also `F.gelu(x, {approximate =
"tanh"})`) uses the tanh approximation.]],
    opts = { { "approximate", "string", "\"none\"", "\"none\" or \"tanh\"" } },
    example = [[
local x = ms.tensor({-1.0, 0.0, 1.0})
print(F.gelu(x))          --> tensor([-0.1587,  0.0000,  0.8413])
print(F.gelu(x, "tanh"))  --> tensor([-0.1588,  0.0000,  0.8412])
]] },

  { name = "F.softplus",
    sig = "F.softplus(x, beta = 1, threshold = 20) -> Tensor",
    doc = [[log(1 + exp(beta x)) / beta elementwise, and x itself where beta x > threshold. Also
`F.softplus(x, {beta =, threshold =})`.]],
    opts = { { "beta", "number", "1", "the sharpness" },
             { "threshold", "number", "20", "above it, the identity" } },
    example = [[
print(F.softplus(ms.tensor({-1.0, 0.0, 1.0})))  --> tensor([0.3133, 0.6931, 1.3133])
]] },

  { name = "F.silu",
    sig = "F.silu(x, inplace = false) -> Tensor",
    doc = [[x * sigmoid(x) elementwise. With inplace, x takes the result and is returned.]],
    example = [[
print(F.silu(ms.tensor({-1.0, 0.0, 1.0})))  --> tensor([-0.2689,  0.0000,  0.7311])
]] },

  { name = "F.hardswish",
    sig = "F.hardswish(x, inplace = false) -> Tensor",
    doc = [[x * relu6(x + 3) / 6 elementwise. With inplace, x takes the result and is returned.]],
    example = [[
print(F.hardswish(ms.tensor({-1.0, 0.0, 1.0})))  --> tensor([-0.3333,  0.0000,  0.6667])
]] },

  { name = "F.softmax",
    sig = "F.softmax(x, dim) -> Tensor",
    doc = [[exp(x) / sum(exp(x)) along `dim` (required, 1-based: torch's dim=1 is 2 here).]],
    example = [==[
print(F.softmax(ms.tensor({{1.0, 2.0}}), 2))  --> tensor([[0.2689, 0.7311]])
]==] },

  { name = "F.log_softmax",
    sig = "F.log_softmax(x, dim) -> Tensor",
    doc = [[log(softmax(x)) along `dim` (required, 1-based), computed stably; F.nll_loss's input.]],
    example = [==[
print(F.log_softmax(ms.tensor({{1.0, 2.0}}), 2))  --> tensor([[-1.3133, -0.3133]])
]==] },

  { name = "F.dropout",
    sig = "F.dropout(x, p = 0.5, training = true, inplace = false) -> Tensor",
    doc = [[Zeroes each element with probability p and scales the others by 1 / (1 - p), from the
global Philox generator. As torch's, training defaults to true here (the nn.Dropout module passes
its own mode); with training false or p = 0, x itself is returned. Also
`F.dropout(x, {p =, training =})`.]],
    opts = { { "p", "number", "0.5", "the probability of zeroing an element" },
             { "training", "boolean", "true", "false: return x unchanged" },
             { "inplace", "boolean", "false", "accepted, as PyTorch's" } },
    example = [[
ms.manual_seed(0)
local y = F.dropout(ms.ones(1000), 0.2)
print(y:max():item(), math.abs(y:mean():item() - 1) < 0.1)  --> 1.25	true
print(F.dropout(ms.ones(2), {training = false}))            --> tensor([1., 1.])
]] },

  { name = "F.linear",
    sig = "F.linear(x, weight, bias = nil) -> Tensor",
    doc = [[x W^T + b: x (..., in), weight (out, in), bias (out).]],
    example = [==[
print(F.linear(ms.ones(1, 2), ms.ones(3, 2), ms.zeros(3)))  --> tensor([[2., 2., 2.]])
]==] },

  { name = "F.conv2d",
    sig = "F.conv2d(x, weight, bias = nil, stride = 1, padding = 0, dilation = 1, groups = 1) -> Tensor",
    doc = [[2-D convolution of x (N, C_in, H, W) with weight (C_out, C_in / groups, kH, kW).
stride, padding and dilation are an integer or a pair; padding may be "valid" or "same" (stride
1). Any argument after weight may come as an options table last:
`F.conv2d(x, w, {bias = b, padding = 1})`.]],
    opts = { { "bias", "Tensor", "nil", "(C_out)" },
             { "stride", "integer|{h, w}", "1", "the step of the kernel" },
             { "padding", "integer|{h, w}|string", "0", "zeros on both sides, or \"valid\" / \"same\"" },
             { "dilation", "integer|{h, w}", "1", "the spacing of the kernel's taps" },
             { "groups", "integer", "1", "blocked connections" } },
    example = [==[
print(F.conv2d(ms.ones(1, 1, 3, 3), ms.ones(1, 1, 2, 2)))
--> tensor([[[[4., 4.],
-->           [4., 4.]]]])
print(F.conv2d(ms.ones(1, 1, 3, 3), ms.ones(1, 1, 3, 3), {padding = "same"}).shape)  --> torch.Size([1, 1, 3, 3])
]==] },

  { name = "F.max_pool2d",
    sig = "F.max_pool2d(x, kernel_size, stride = kernel_size, padding = 0, dilation = 1, ceil_mode = false, return_indices = false) -> Tensor[, Tensor]",
    doc = [[The maximum over each window of (N, C, H, W) input (4-D only; PyTorch also takes
(C, H, W)); with return_indices, also the positions of the maxima (int64, 1-based in each plane).
Arguments after kernel_size may come as an options table last.]],
    opts = { { "stride", "integer|{h, w}", "nil", "the step of the window (nil: kernel_size)" },
             { "padding", "integer|{h, w}", "0", "implicit -inf padding" },
             { "dilation", "integer|{h, w}", "1", "the spacing of the window's elements" },
             { "ceil_mode", "boolean", "false", "round the output size up" },
             { "return_indices", "boolean", "false", "also return the positions of the maxima" } },
    example = [==[
local x = ms.arange(1, 17):float():view(1, 1, 4, 4)
local y, idx = F.max_pool2d(x, 2, {return_indices = true})
print(y:flatten(), idx:flatten())  --> tensor([ 6.,  8., 14., 16.])	tensor([ 6,  8, 14, 16])
]==] },

  { name = "F.avg_pool2d",
    sig = "F.avg_pool2d(x, kernel_size, stride = kernel_size, padding = 0, ceil_mode = false, count_include_pad = true) -> Tensor",
    doc = [[The mean over each window of (N, C, H, W) input (4-D only; PyTorch also takes
(C, H, W)); arguments after kernel_size may come as an options table last.]],
    opts = { { "stride", "integer|{h, w}", "nil", "the step of the window (nil: kernel_size)" },
             { "padding", "integer|{h, w}", "0", "zeros on both sides" },
             { "ceil_mode", "boolean", "false", "round the output size up" },
             { "count_include_pad", "boolean", "true", "count the padding zeros in the mean" } },
    example = [[
local x = ms.arange(1, 17):float():view(1, 1, 4, 4)
print(F.avg_pool2d(x, 2):flatten())  --> tensor([ 3.5000,  5.5000, 11.5000, 13.5000])
]] },

  { name = "F.adaptive_avg_pool2d",
    sig = "F.adaptive_avg_pool2d(x, output_size) -> Tensor",
    doc = [[Average pooling to output_size (an integer or a pair) whatever the input's size.]],
    example = [[
local x = ms.arange(1, 17):float():view(1, 1, 4, 4)
print(F.adaptive_avg_pool2d(x, 1):item())  --> 8.5
]] },

  { name = "F.embedding",
    sig = "F.embedding(idx, weight, padding_idx = nil) -> Tensor",
    doc = [[The rows of weight (num, dim) at the integer indices idx (any shape, **1-based**): the
result has idx's shape plus dim. padding_idx (1-based; also `{padding_idx =}`) gets no gradient.]],
    opts = { { "padding_idx", "integer", "nil", "a row that gets no gradient" } },
    example = [==[
local w = ms.tensor({{1.0, 2.0}, {3.0, 4.0}})
print(F.embedding(ms.tensor({2, 1}), w))
--> tensor([[3., 4.],
-->         [1., 2.]])
]==] },

  { name = "F.layer_norm",
    sig = "F.layer_norm(x, normalized_shape, weight = nil, bias = nil, eps = 1e-5) -> Tensor",
    doc = [[Normalizes over the last dims (normalized_shape: an integer or a list) to mean 0 and
variance 1, then scales and shifts when weight and bias are given. Arguments after
normalized_shape may come as an options table last.]],
    opts = { { "weight", "Tensor", "nil", "the scale, of normalized_shape" },
             { "bias", "Tensor", "nil", "the shift, of normalized_shape" },
             { "eps", "number", "1e-5", "added to the variance" } },
    example = [==[
print(F.layer_norm(ms.tensor({{1.0, 3.0}}), 2))  --> tensor([[-1.0000,  1.0000]])
]==] },

  { name = "F.batch_norm",
    sig = "F.batch_norm(x, running_mean, running_var, weight = nil, bias = nil, training = false, momentum = 0.1, eps = 1e-5) -> Tensor",
    doc = [[Batch normalization per channel (dim 2). With training, the batch's statistics are
used and the running ones (when given) updated with momentum; otherwise the running ones are
used. As torch, training defaults to false. Arguments after running_var may come as an options
table last.]],
    opts = { { "weight", "Tensor", "nil", "the scale (C)" },
             { "bias", "Tensor", "nil", "the shift (C)" },
             { "training", "boolean", "false", "use (and update) batch statistics" },
             { "momentum", "number", "0.1", "the running estimates' update factor" },
             { "eps", "number", "1e-5", "added to the variance" } },
    example = [==[
print(F.batch_norm(ms.tensor({{1.0}, {3.0}}), nil, nil, {training = true}))
--> tensor([[-1.0000],
-->         [ 1.0000]])
]==] },

  { name = "F.nll_loss",
    sig = "F.nll_loss(input, target, weight = nil, ignore_index = -100, reduction = \"mean\") -> Tensor",
    doc = [[The negative log likelihood: input (N, C) log-probabilities (or (N, C, d...)), target
(N) class indices in **1..C**, int64 (PyTorch's 0-based class plus one; a target out of range
raises, saying so). Also with an options table: `F.nll_loss(out, target, {reduction = "sum"})`.]],
    opts = { { "weight", "Tensor", "nil", "a weight per class (C)" },
             { "ignore_index", "integer", "-100", "a target value that contributes nothing (compared as written)" },
             { "reduction", "string", "\"mean\"", "\"mean\", \"sum\" or \"none\"" } },
    example = [==[
local logp = F.log_softmax(ms.tensor({{1.0, 2.0}}), 2)
print(F.nll_loss(logp, ms.tensor({2})))  --> tensor(0.3133)
]==] },

  { name = "F.cross_entropy",
    sig = "F.cross_entropy(input, target, weight = nil, ignore_index = -100, reduction = \"mean\", label_smoothing = 0) -> Tensor",
    doc = [[log_softmax over dim 2 then F.nll_loss, as one op: input (N, C) logits, target (N)
class indices in **1..C**. Options as F.nll_loss, plus label_smoothing.]],
    opts = { { "weight", "Tensor", "nil", "a weight per class (C)" },
             { "ignore_index", "integer", "-100", "a target value that contributes nothing" },
             { "reduction", "string", "\"mean\"", "\"mean\", \"sum\" or \"none\"" },
             { "label_smoothing", "number", "0", "mixes the target with the uniform distribution, in [0, 1]" } },
    example = [==[
local logits = ms.tensor({{2.0, 1.0, 0.1}, {0.5, 2.5, 0.3}})
print(F.cross_entropy(logits, ms.tensor({1, 2})))                          --> tensor(0.3185)
print(F.cross_entropy(logits, ms.tensor({1, 2}), {label_smoothing = 0.1})) --> tensor(0.4369)
]==] },

  { name = "F.mse_loss",
    sig = "F.mse_loss(input, target, reduction = \"mean\") -> Tensor",
    doc = [[The mean (or sum, or elementwise with "none") of the squared differences. Also
`F.mse_loss(a, b, {reduction = "sum"})`.]],
    opts = { { "reduction", "string", "\"mean\"", "\"mean\", \"sum\" or \"none\"" } },
    example = [[
print(F.mse_loss(ms.tensor({1.0, 2.0}), ms.tensor({1.0, 4.0}), "sum"))  --> tensor(4.)
]] },

  { name = "F.scaled_dot_product_attention",
    sig = "F.scaled_dot_product_attention(q, k, v, attn_mask = nil, dropout_p = 0, is_causal = false, scale = nil) -> Tensor",
    doc = [[softmax(q k^T * scale + mask) v as one fused op that never holds an L x S matrix per
head: q (..., L, E), k (..., S, E), v (..., S, Ev) give (..., L, Ev). attn_mask is a bool mask
(true takes part) or a tensor of q's dtype (added), broadcast to (..., L, S); is_causal masks the
future; scale defaults to 1 / sqrt(E). dropout_p applies whatever the module's mode (as torch):
pass 0 in evaluation. Also with an options table after v.]],
    opts = { { "attn_mask", "Tensor", "nil", "bool (true takes part) or additive" },
             { "dropout_p", "number", "0", "dropout on the attention weights" },
             { "is_causal", "boolean", "false", "each position attends to itself and earlier ones only" },
             { "scale", "number", "nil", "the factor of q k^T (nil: 1 / sqrt(E))" } },
    example = [[
ms.manual_seed(0)
local q, k, v = ms.randn(2, 4, 5, 8), ms.randn(2, 4, 5, 8), ms.randn(2, 4, 5, 8)
local y = F.scaled_dot_product_attention(q, k, v, {is_causal = true})
print(y.shape)                                  --> torch.Size([2, 4, 5, 8])
print(ms.allclose(y:select(3, 1), v:select(3, 1)))  --> true
]] },

  { name = "F.flatten",
    sig = "F.flatten(x, start_dim = 1, end_dim = -1) -> Tensor",
    doc = [[Flattens dims start_dim..end_dim (1-based) into one, as torch.flatten: by default
every dim (nn.Flatten keeps the batch dim instead).]],
    example = [[
print(F.flatten(ms.zeros(2, 3, 4)).shape, F.flatten(ms.zeros(2, 3, 4), 2).shape)  --> torch.Size([24])	torch.Size([2, 12])
]] },
}
