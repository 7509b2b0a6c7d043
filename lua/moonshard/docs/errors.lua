-- Docstrings: the library's modules as fields of require "moonshard" (loaded on first read, so a
-- script needs one require). How errors are reported is docs/errors.md. The entry format is
-- described in lua/moonshard/doc.lua.
local function module_entry(field, module, what, example)
  return { name = "ms." .. field,
    sig = ("ms.%s -> the module require \"%s\""):format(field, module),
    doc = ([[%s: the same table as `require "%s"`, loaded the first time the field is read (so `local ms =
require "moonshard"` is the one require a script needs). Requiring the module directly works as well, before or
after "moonshard", in the executable and in a stock lua5.4.]]):format(what, module),
    example = example }
end

return {
  title = "The library's modules on ms",
  module_entry("nn", "moonshard.nn", "torch.nn: modules, layers, containers, nn.init, nn.utils", [==[
print(ms.nn.Linear(4, 2))                  --> Linear(in_features=4, out_features=2, bias=True)
print(ms.nn == require "moonshard.nn")     --> true
]==]),
  module_entry("optim", "moonshard.optim", "torch.optim: SGD, Adam, AdamW, ...", [==[
local w = ms.nn.Parameter(ms.ones(2))
local opt = ms.optim.SGD({w}, {lr = 0.5})
w:sum():backward()
opt:step()
print(w)                                   --> tensor([0.5000, 0.5000], requires_grad=True)
]==]),
  { name = "ms.F", also = {"ms.functional"},
    sig = "ms.F -> the module require \"moonshard.functional\"",
    doc = [[torch.nn.functional (F.relu, F.cross_entropy, F.linear, ...): the same table as `require
"moonshard.functional"` (and `nn.functional`), loaded the first time the field is read.]],
    example = [==[
print(ms.F.relu(ms.tensor({-1.0, 2.0})))   --> tensor([0., 2.])
print(ms.F == ms.functional)               --> true
]==] },
  module_entry("lr_scheduler", "moonshard.lr_scheduler", "torch.optim.lr_scheduler: StepLR, CosineAnnealingLR, ...", [==[
print(type(ms.lr_scheduler.StepLR))        --> table
]==]),
  module_entry("datasets", "moonshard.datasets", "torchvision.datasets: MNIST", [==[
print(type(ms.datasets.MNIST))             --> table
]==]),
  module_entry("transforms", "moonshard.transforms", "torchvision.transforms: Compose, ToTensor, Normalize", [==[
print(type(ms.transforms.Normalize))       --> table
]==]),
  module_entry("samplers", "moonshard.samplers", "torch.utils.data's samplers: RandomSampler, DistributedSampler, ...", [==[
print(type(ms.samplers.DistributedSampler)) --> table
]==]),
  module_entry("fsdp", "moonshard.fsdp", "torch.distributed.fsdp: FullyShardedDataParallel and its options", [==[
print(type(ms.fsdp.FullyShardedDataParallel)) --> table
]==]),
}
