-- docs/nn_losses.lua: the docstrings of the loss modules of `require "moonshard.nn"`.
-- Class targets are 1-based class indices (1..C), as every index in Lua.
return {
  title = "Loss modules",

  { name = "nn.CrossEntropyLoss",
    sig = "nn.CrossEntropyLoss({weight =, ignore_index = -100, reduction = \"mean\", label_smoothing = 0}) -> Module",
    doc = [[`criterion(input, target)` is F.cross_entropy with the options given at
construction: log_softmax over the class dim then the negative log likelihood. input is (N, C)
logits (or (N, C, d...)), target (N) class indices **1..C** (an int64 tensor: PyTorch's 0..C-1
plus one). A class weight is a buffer, so it follows `criterion:to()` and is in the state dict.
Positional arguments are also accepted in that order.]],
    opts = { { "weight", "Tensor", "nil", "a weight per class (C)" },
             { "ignore_index", "integer", "-100", "a target value that contributes nothing (compared as written)" },
             { "reduction", "string", "\"mean\"", "\"mean\", \"sum\" or \"none\" (one loss per sample)" },
             { "label_smoothing", "number", "0", "mixes the target with the uniform distribution, in [0, 1]" } },
    example = [[
local criterion = nn.CrossEntropyLoss()
local logits = ms.tensor({{2.0, 1.0, 0.1}, {0.5, 2.5, 0.3}})
local target = ms.tensor({1, 2})      -- 1-based classes
print(criterion(logits, target))      --> tensor(0.3185)
print(nn.CrossEntropyLoss({reduction = "none"})(logits, target))  --> tensor([0.4170, 0.2200])
]] },

  { name = "nn.NLLLoss",
    sig = "nn.NLLLoss({weight =, ignore_index = -100, reduction = \"mean\"}) -> Module",
    doc = [[`criterion(input, target)` is F.nll_loss: the negative log likelihood of
log-probabilities input (N, C) (a LogSoftmax's output) at targets (N) in **1..C**. With a weight,
"mean" divides by the sum of the targets' weights, as PyTorch.]],
    opts = { { "weight", "Tensor", "nil", "a weight per class (C)" },
             { "ignore_index", "integer", "-100", "a target value that contributes nothing" },
             { "reduction", "string", "\"mean\"", "\"mean\", \"sum\" or \"none\"" } },
    example = [[
local logp = F.log_softmax(ms.tensor({{2.0, 1.0, 0.1}, {0.5, 2.5, 0.3}}), 2)
print(nn.NLLLoss()(logp, ms.tensor({1, 2})))                    --> tensor(0.3185)
print(nn.NLLLoss({reduction = "sum"})(logp, ms.tensor({1, 2}))) --> tensor(0.6371)
]] },

  { name = "nn.MSELoss",
    sig = "nn.MSELoss({reduction = \"mean\"}) -> Module",
    doc = [[`criterion(input, target)` is F.mse_loss: the squared differences, averaged (or
summed, or one per element with "none"). input and target have the same shape.]],
    opts = { { "reduction", "string", "\"mean\"", "\"mean\", \"sum\" or \"none\"" } },
    example = [[
local a, b = ms.tensor({1.0, 2.0}), ms.tensor({1.0, 4.0})
print(nn.MSELoss()(a, b), nn.MSELoss({reduction = "sum"})(a, b))  --> tensor(2.)	tensor(4.)
]] },
}
