-- Docstrings: matrix products. The entry format is described in lua/moonshard/doc.lua.
return {
  title = "Tensors: matrix products",
  { name = "Tensor:matmul", also = {"ms.matmul"},
    sig = "t:matmul(other) -> Tensor",
    doc = [[The matrix product by the shapes, as `torch.matmul` (the `@` operator): vector . vector is a dot
product, matrix x vector a vector, matrix x matrix `mm`, and with more dims a batched product whose batch dims
broadcast. float32 products run the engine's GEMM (cuBLAS on CUDA).]],
    example = [==[
local a = ms.arange(1, 7):view(2, 3):float()
print(a:matmul(ms.ones(3)))                --> tensor([ 6., 15.])
print(ms.ones(5, 2, 3):matmul(ms.ones(3, 4)).shape) --> torch.Size([5, 2, 4])
]==] },
  { name = "Tensor:mm", also = {"ms.mm"},
    sig = "t:mm(other) -> Tensor",
    doc = [[The product of two matrices, (n x k) by (k x m) -> (n x m), without broadcasting.]],
    example = [==[
local a = ms.tensor({{1.0, 2.0}, {3.0, 4.0}})
print(a:mm(ms.eye(2)):equal(a), a:mm(a))   --> true tensor([[ 7., 10.], [15., 22.]])
]==] },
  { name = "Tensor:bmm", also = {"ms.bmm"},
    sig = "t:bmm(other) -> Tensor",
    doc = [[A batch of matrix products: (b x n x k) by (b x k x m) -> (b x n x m), the batch sizes equal.]],
    example = [==[
print(ms.ones(4, 2, 3):bmm(ms.ones(4, 3, 5)).shape) --> torch.Size([4, 2, 5])
]==] },
  { name = "Tensor:dot", also = {"ms.dot"},
    sig = "t:dot(other) -> Tensor",
    doc = [[The dot product of two 1-D tensors of the same length, as a 0-dim tensor.]],
    example = [==[
print(ms.tensor({1.0, 2.0, 3.0}):dot(ms.tensor({4.0, 5.0, 6.0})):item()) --> 32.0
]==] },
  { name = "Tensor:addmm", also = {"ms.addmm"},
    sig = "ms.addmm(input, mat1, mat2, {beta = 1, alpha = 1}) -> Tensor",
    doc = [[beta * input + alpha * (mat1 x mat2), with input broadcast to the product's shape (a bias row
does): a linear layer's forward in one call.]],
    opts = {{"beta", "number", "1", "the factor of input"}, {"alpha", "number", "1", "the factor of the product"}},
    example = [==[
local bias = ms.tensor({10.0, 20.0})
print(ms.addmm(bias, ms.ones(1, 3), ms.ones(3, 2))) --> tensor([[13., 23.]])
print(ms.addmm(bias, ms.ones(1, 3), ms.ones(3, 2), {beta = 0, alpha = 2})) --> tensor([[6., 6.]])
]==] },
}
