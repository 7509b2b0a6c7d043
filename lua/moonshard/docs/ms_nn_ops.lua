-- Docstrings: the native neural-network functions on the module table (ms.conv2d, ms.nll_loss,
-- ...). `F.*` (moonshard.functional) is the PyTorch-shaped face over them; these are documented
-- for what they are: the calls F makes. The entry format is described in lua/moonshard/doc.lua.
local SEE_F = "`F.%s` is this op with PyTorch's signature (the one to use in models)."
local function see(f) return SEE_F:format(f) end
local REDUCTION = {"reduction", "string", "\"mean\"", "\"mean\", \"sum\" or \"none\" (one loss per sample)"}
local CLASS_OPTS = {
  {"weight", "Tensor", "nil", "a 1-D tensor of C weights, one per class"},
  {"ignore_index", "integer", "-100", "a target value that adds nothing to the loss nor to the mean's count"},
  REDUCTION,
}

return {
  title = "Native neural-network functions (ms.*)",
  { name = "Tensor:softmax", also = {"ms.softmax"},
    sig = "t:softmax(dim) -> Tensor",
    doc = [[exp(x) / sum(exp(x)) along `dim` (required, as PyTorch wants it; 1-based, negative from the end):
each slice becomes a probability distribution. Computed stably (the maximum is subtracted first).]],
    example = [==[
local p = ms.tensor({{1.0, 2.0, 3.0}}):softmax(2)
print(p, p:sum():item())                   --> tensor([[0.0900, 0.2447, 0.6652]]) 1.0
]==] },
  { name = "Tensor:log_softmax", also = {"ms.log_softmax"},
    sig = "t:log_softmax(dim) -> Tensor",
    doc = [[log(softmax(x)) along `dim` (required), computed in one stable pass: the input `nll_loss`
expects.]],
    example = [==[
print(ms.tensor({{0.0, 0.0}}):log_softmax(-1)) --> tensor([[-0.6931, -0.6931]])
]==] },
  { name = "ms.gelu",
    sig = "ms.gelu(x, {approximate = \"none\"}) -> Tensor",
    doc = [[The Gaussian error linear unit x * Phi(x), elementwise; `approximate = "tanh"` uses the tanh
formula (GPT-2's). ]] .. see("gelu"),
    opts = {{"approximate", "string", "\"none\"", "\"none\" (the exact erf form) or \"tanh\""}},
    example = [==[
local x = ms.tensor({-1.0, 0.0, 1.0})
print(ms.gelu(x), ms.gelu(x, {approximate = "tanh"})) --> tensor([-0.1587, 0.0000, 0.8413]) tensor([-0.1588, 0.0000, 0.8412])
]==] },
  { name = "ms.silu",
    sig = "ms.silu(x) -> Tensor",
    doc = [[x * sigmoid(x), elementwise (also called swish). ]] .. see("silu"),
    example = [==[
print(ms.silu(ms.tensor({-1.0, 0.0, 1.0}))) --> tensor([-0.2689, 0.0000, 0.7311])
]==] },
  { name = "ms.hardswish",
    sig = "ms.hardswish(x) -> Tensor",
    doc = [[x * relu6(x + 3) / 6, elementwise (MobileNetV3's activation). ]] .. see("hardswish"),
    example = [==[
print(ms.hardswish(ms.tensor({-1.0, 0.0, 1.0, 4.0}))) --> tensor([-0.3333, 0.0000, 0.6667, 4.0000])
]==] },
  { name = "ms.dropout",
    sig = "ms.dropout(x, {p = 0.5, training = true}) -> Tensor",
    doc = [[While training, zeroes each element with probability p and scales the rest by 1 / (1 - p); the
mask comes from the Philox generator (the same on the CPU and CUDA for a seed). With `training = false`, x
itself. ]] .. see("dropout"),
    opts = {{"p", "number", "0.5", "the probability of zeroing an element"},
            {"training", "boolean", "true", "false: no dropout"}},
    example = [==[
ms.manual_seed(0)
local y = ms.dropout(ms.ones(1000), {p = 0.5})
print(y:max():item(), y:eq(0):sum():item() > 400) --> 2.0 true
print(ms.dropout(ms.ones(2), {training = false})) --> tensor([1., 1.])
]==] },
  { name = "ms.linear",
    sig = "ms.linear(x, weight, bias_or_nil) -> Tensor",
    doc = [[x W^T + b: x (..., in_features), weight (out_features, in_features), bias (out_features) or nil.
]] .. see("linear"),
    example = [==[
local w = ms.tensor({{1.0, 0.0}, {0.0, 2.0}, {1.0, 1.0}})
print(ms.linear(ms.tensor({{3.0, 4.0}}), w, ms.tensor({0.0, 0.0, 1.0}))) --> tensor([[3., 8., 8.]])
]==] },
  { name = "ms.embedding",
    sig = "ms.embedding(indices, weight, {padding_idx =}) -> Tensor",
    doc = [[The rows of `weight` picked by the integer tensor `indices` (**1-based** row numbers): shape
indices.shape .. {embedding_dim}. The row `padding_idx` (1-based, negative from the end) gets no gradient.
]] .. see("embedding"),
    opts = {{"padding_idx", "integer", "nil", "a row whose gradient stays zero"}},
    example = [==[
local weight = ms.tensor({{0.0, 0.0}, {1.0, 1.0}, {2.0, 2.0}})
print(ms.embedding(ms.tensor({3, 1}), weight)) --> tensor([[2., 2.], [0., 0.]])
]==] },
  { name = "ms.layer_norm",
    sig = "ms.layer_norm(x, normalized_shape, weight_or_nil, bias_or_nil, {eps = 1e-5}) -> Tensor",
    doc = [[Normalises x over its last dims (those of `normalized_shape`, an integer or a table) to mean 0 and
variance 1, then scales by weight and shifts by bias (each nil or of normalized_shape). ]] .. see("layer_norm"),
    opts = {{"eps", "number", "1e-5", "added to the variance"}},
    example = [==[
local y = ms.layer_norm(ms.tensor({{1.0, 2.0, 3.0}}), 3, nil, nil)
print(y)                                   --> tensor([[-1.2247, 0.0000, 1.2247]])
]==] },
  { name = "ms.batch_norm",
    sig = "ms.batch_norm(x, running_mean, running_var, weight, bias, {training = false, momentum = 0.1, eps = 1e-5}) -> Tensor",
    doc = [[Normalises each channel (dim 2) of x (N, C, ...): in training with the batch's statistics, updating
running_mean and running_var in place by `momentum`; in evaluation with the running ones. Any of the four
tensors may be nil (the running ones only in training). ]] .. see("batch_norm"),
    opts = {{"training", "boolean", "false", "use the batch's statistics and update the running ones"},
            {"momentum", "number", "0.1", "the weight of the new batch in the running statistics"},
            {"eps", "number", "1e-5", "added to the variance"}},
    example = [==[
local x = ms.tensor({{1.0}, {3.0}})
local mean, var = ms.zeros(1), ms.ones(1)
print(ms.batch_norm(x, mean, var, nil, nil, {training = true})) --> tensor([[-1.0000], [ 1.0000]])
print(mean, var)                           --> tensor([0.2000]) tensor([1.1000])
]==] },
  { name = "ms.nll_loss",
    sig = "ms.nll_loss(input, target, {weight =, ignore_index = -100, reduction = \"mean\"}) -> Tensor",
    doc = [[The negative log likelihood loss: input (N, C) of log-probabilities (from `log_softmax`), target
(N) int64 of **1-based** class indices in 1..C; a target out of range raises, naming it. ]] .. see("nll_loss"),
    opts = CLASS_OPTS,
    example = [==[
local logp = ms.tensor({{-0.1, -2.4}, {-2.0, -0.5}})
print(("%.4f"):format(ms.nll_loss(logp, ms.tensor({1, 2})):item())) --> 0.3000
print(ms.nll_loss(logp, ms.tensor({1, 2}), {reduction = "none"})) --> tensor([0.1000, 0.5000])
]==] },
  { name = "ms.cross_entropy",
    sig = "ms.cross_entropy(input, target, {weight =, ignore_index = -100, reduction = \"mean\", label_smoothing = 0}) -> Tensor",
    doc = [[`nll_loss(log_softmax(input, 2), target)` in one op: input (N, C) of raw scores, target (N) of
**1-based** class indices. ]] .. see("cross_entropy"),
    opts = {CLASS_OPTS[1], CLASS_OPTS[2], REDUCTION,
            {"label_smoothing", "number", "0", "mix the one-hot target with the uniform distribution by this much"}},
    example = [==[
local logits = ms.tensor({{2.0, 0.0, 0.0}})
print(("%.4f"):format(ms.cross_entropy(logits, ms.tensor({1})):item())) --> 0.2395
]==] },
  { name = "ms.mse_loss",
    sig = "ms.mse_loss(input, target, {reduction = \"mean\"}) -> Tensor",
    doc = [[The mean squared error (input - target)^2, averaged, summed or kept per element. ]] .. see("mse_loss"),
    opts = {REDUCTION},
    example = [==[
local a, b = ms.tensor({1.0, 2.0}), ms.tensor({1.0, 4.0})
print(ms.mse_loss(a, b):item(), ms.mse_loss(a, b, {reduction = "sum"}):item()) --> 2.0 4.0
]==] },
  { name = "ms.scaled_dot_product_attention",
    sig = "ms.scaled_dot_product_attention(q, k, v, {attn_mask =, is_causal = false, dropout_p = 0, scale =}) -> Tensor",
    doc = [[softmax(q k^T * scale + mask) v as one op: q (..., L, E), k (..., S, E), v (..., S, Ev). A bool
mask keeps where true; a float mask is added. On the CPU a tiled online softmax that never holds the L x S
matrix. ]] .. see("scaled_dot_product_attention"),
    opts = {{"attn_mask", "Tensor", "nil", "bool (true takes part) or of q's dtype (added), broadcast to (..., L, S)"},
            {"is_causal", "boolean", "false", "each query attends to keys at or before its position"},
            {"dropout_p", "number", "0", "dropout on the attention weights (pass 0 in evaluation)"},
            {"scale", "number", "nil", "the factor of q k^T; nil: 1 / sqrt(E)"}},
    example = [==[
ms.manual_seed(0)
local q, k, v = ms.randn(1, 4, 8), ms.randn(1, 4, 8), ms.randn(1, 4, 8)
local y = ms.scaled_dot_product_attention(q, k, v, {is_causal = true})
print(y.shape, y[1][1]:allclose(v[1][1]))   --> torch.Size([1, 4, 8]) true
]==] },
  { name = "Tensor:conv2d", also = {"ms.conv2d"},
    sig = "ms.conv2d(input, weight, bias_or_nil, {stride = 1, padding = 0, dilation = 1, groups = 1}) -> Tensor",
    doc = [[The 2-D convolution (cross-correlation) of input (N, C_in, H, W) with weight (C_out, C_in / groups,
kH, kW), plus bias (C_out). stride, padding and dilation are an integer or a pair {h, w}. Without a bias the
options may come third. ]] .. see("conv2d"),
    opts = {{"stride", "integer|{h, w}", "1", "the step of the kernel"},
            {"padding", "integer|{h, w}", "0", "zeros added on each side"},
            {"dilation", "integer|{h, w}", "1", "the spacing of the kernel's taps"},
            {"groups", "integer", "1", "split the channels into this many independent groups"}},
    example = [==[
local x = ms.ones(1, 1, 4, 4)
local w = ms.ones(2, 1, 3, 3)
print(ms.conv2d(x, w, nil).shape, ms.conv2d(x, w, {padding = 1}).shape) --> torch.Size([1, 2, 2, 2]) torch.Size([1, 2, 4, 4])
print(ms.conv2d(x, w, nil)[1][1])          --> tensor([[9., 9.], [9., 9.]])
]==] },
  { name = "Tensor:max_pool2d", also = {"ms.max_pool2d"},
    sig = "ms.max_pool2d(input, kernel_size, {stride = kernel_size, padding = 0, dilation = 1, ceil_mode = false, return_indices = false}) -> Tensor [, indices]",
    doc = [[The maximum over each kernel_size window of input (N, C, H, W) (sizes an integer or {h, w}). With
`return_indices = true` also the **1-based** position of each maximum in its H x W plane. ]] .. see("max_pool2d"),
    opts = {{"stride", "integer|{h, w}", "kernel_size", "the step of the window"},
            {"padding", "integer|{h, w}", "0", "-inf added on each side"},
            {"dilation", "integer|{h, w}", "1", "the spacing of the window's taps"},
            {"ceil_mode", "boolean", "false", "round the output size up"},
            {"return_indices", "boolean", "false", "also return the positions of the maxima"}},
    example = [==[
local x = ms.arange(1, 17):view(1, 1, 4, 4):float()
local y, idx = ms.max_pool2d(x, 2, {return_indices = true})
print(y:flatten(), idx:flatten())          --> tensor([ 6., 8., 14., 16.]) tensor([ 6, 8, 14, 16])
]==] },
  { name = "Tensor:avg_pool2d", also = {"ms.avg_pool2d"},
    sig = "ms.avg_pool2d(input, kernel_size, {stride = kernel_size, padding = 0, ceil_mode = false, count_include_pad = true}) -> Tensor",
    doc = [[The mean over each kernel_size window of input (N, C, H, W) (sizes an integer or {h, w}). ]] ..
      see("avg_pool2d"),
    opts = {{"stride", "integer|{h, w}", "kernel_size", "the step of the window"},
            {"padding", "integer|{h, w}", "0", "zeros added on each side"},
            {"ceil_mode", "boolean", "false", "round the output size up"},
            {"count_include_pad", "boolean", "true", "count the padding zeros in each mean"}},
    example = [==[
local x = ms.arange(1, 17):view(1, 1, 4, 4):float()
print(ms.avg_pool2d(x, 2):flatten())       --> tensor([ 3.5000, 5.5000, 11.5000, 13.5000])
]==] },
  { name = "Tensor:adaptive_avg_pool2d", also = {"ms.adaptive_avg_pool2d"},
    sig = "ms.adaptive_avg_pool2d(input, output_size) -> Tensor",
    doc = [[Average pooling of input (N, C, H, W) with windows chosen so that the output is output_size (an
integer or {h, w}); 1 gives each channel's global mean. ]] .. see("adaptive_avg_pool2d"),
    example = [==[
local x = ms.arange(1, 17):view(1, 1, 4, 4):float()
print(ms.adaptive_avg_pool2d(x, 1):item(), ms.adaptive_avg_pool2d(x, {2, 1}).shape) --> 8.5 torch.Size([1, 1, 2, 1])
]==] },
  { name = "ms.transform_batch",
    sig = "ms.transform_batch(x, specs) -> Tensor",
    doc = [[Runs a pipeline of image transforms over a sample or a batch in one native pass: specs is a
list of (or one) `{kind = "to_tensor"}` (uint8 -> float32 in [0, 1]) and `{kind = "normalize", mean =, std =}`
(numbers or one per channel). `transforms.Compose` of ToTensor and Normalize runs through it.]],
    example = [==[
local img = ms.tensor({{0, 255}}, {dtype = ms.uint8})
print(ms.transform_batch(img, {{kind = "to_tensor"}, {kind = "normalize", mean = 0.5, std = 0.5}})) --> tensor([[[-1., 1.]]])
]==] },
}
