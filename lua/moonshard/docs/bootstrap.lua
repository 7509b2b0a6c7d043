-- bootstrap.lua: the first entry, so help(ms.zeros) works before the tensor areas land. Part
-- docsa's tensor area documents ms.zeros too: when both are merged, delete this file
-- (test_docstrings fails on a name documented twice).
return {
  title = "Tensors: ms.zeros",
  {
    name = "ms.zeros",
    sig = "ms.zeros(size..., {dtype =, device =, requires_grad =}) -> Tensor",
    doc = [[
A new tensor of the given size filled with 0 (PyTorch's `torch.zeros`). The size is given as
integers (`ms.zeros(2, 3)`) or as one table (`ms.zeros({2, 3})`); no size gives a 0-dim tensor.
The element type is float32 unless `dtype` says otherwise.]],
    opts = {
      { "dtype", "dtype", "ms.float32", "the element type" },
      { "device", "string or device", '"cpu"', 'where the tensor lives ("cpu", "cuda", "cuda:1", "meta")' },
      { "requires_grad", "boolean", "false", "record operations on it for autograd" },
    },
    example = [[
local x = ms.zeros(2, 3)
print(x:size(1), x:size(2))          --> 2	3
print(x:sum():item())                --> 0.0
print(ms.zeros({4}, {dtype = ms.int64}).dtype)   --> int64
]],
  },
}
