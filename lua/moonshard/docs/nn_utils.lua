-- docs/nn_utils.lua: the docstrings of nn.utils (require "moonshard.nn_utils", also nn.utils):
-- gradient clipping and chunked evaluation.
return {
  title = "nn.utils",

  { name = "nn.utils.clip_grad_norm_",
    sig = "nn.utils.clip_grad_norm_(parameters, max_norm, {norm_type = 2, error_if_nonfinite = false}) -> Tensor",
    doc = [[Scales the gradients in place so that their joint norm (all gradients as one vector)
is at most max_norm; returns the norm they had, a 0-dim tensor. parameters is a tensor, an array
of tensors (`model:parameters()`) or an iterator; parameters without a gradient are skipped.
PyTorch 1.13's semantics (the scale max_norm / (norm + 1e-6), clamped at 1). Under FSDP use
fsdp.clip_grad_norm_ (the global norm).]],
    opts = { { "norm_type", "number|\"inf\"", "2", "the p of the p-norm; math.huge or \"inf\" for the max norm" },
             { "error_if_nonfinite", "boolean", "false", "raise when the total norm is nan or inf" } },
    example = [[
local w = nn.Parameter(ms.zeros(2))
w.grad = ms.tensor({3.0, 4.0})
local total = nn.utils.clip_grad_norm_({w}, 1.0)
print(total:item(), w.grad)  --> 5.0	tensor([0.6000, 0.8000])
]] },

  { name = "nn.utils.clip_grad_value_",
    sig = "nn.utils.clip_grad_value_(parameters, clip_value)",
    doc = [[Clamps every gradient element into [-clip_value, clip_value] in place.]],
    example = [[
local w = nn.Parameter(ms.zeros(3))
w.grad = ms.tensor({-5.0, 0.5, 5.0})
nn.utils.clip_grad_value_({w}, 1.0)
print(w.grad)  --> tensor([-1.0000,  0.5000,  1.0000])
]] },

  { name = "nn.utils.forward_in_chunks",
    sig = "nn.utils.forward_in_chunks(model, input, {chunk_size = n}) -> Tensor",
    doc = [[`model(input)` computed on near-equal slices of at most chunk_size samples along
dim 1 and concatenated: the same values for a model that treats samples independently (eval
mode), with the memory of one slice's activations. For evaluating a large test batch.]],
    opts = { { "chunk_size", "integer", "nil", "required: the most samples per slice" } },
    example = [[
ms.manual_seed(0)
local model = nn.Linear(4, 2)
local x = ms.randn(10, 4)
local y = nn.utils.forward_in_chunks(model, x, {chunk_size = 3})
print(y.shape, ms.allclose(y, model(x)))  --> torch.Size([10, 2])	true
]] },
}
