-- docs/data.lua: the docstrings of the data stack: `ms.data` (require "moonshard.data": the
-- DataLoader, with the samplers and TensorDataset re-exported), require "moonshard.samplers",
-- require "moonshard.transforms", require "moonshard.datasets" and
-- require "moonshard.tensor_dataset". Indices are 1-based; MNIST labels are classes 1..10.
return {
  title = "Data: loaders, datasets, samplers, transforms",

  -- ---- DataLoader ----

  { name = "data.DataLoader",
    sig = "ms.data.DataLoader(dataset, {batch_size = 1, shuffle = false, sampler =, batch_sampler =, num_workers = 0, collate_fn =, pin_memory = false, drop_last = false, prefetch_factor = 2, persistent_workers = false, device =, device_prefetch = 2, transform_on_device = true}) -> DataLoader",
    doc = [[Batches of a dataset, as torch.utils.data.DataLoader. Loop over an epoch with
`for batch_idx, data, target in loader:iter() do ... end` (batch_idx from 1); `#loader` is the
number of batches. A dataset is anything with `#ds` and samples by 1-based index: `ds:get(i)`
returning the sample's values when it has that method, else `ds[i]` (a value, or a plain table
of values that is unpacked). The default collate stacks tensors along a new first dim and makes
int64 / float64 / bool tensors of Lua integers / floats / booleans.

A TensorDataset or an MNIST-like dataset (with no Lua transform, no collate_fn) is loaded by
native worker threads (num_workers of them, prefetching prefetch_factor * num_workers batches in
order); any other dataset is read in Lua on the calling thread (num_workers is then ignored). Both
give the same batches; the batches are drawn in Lua from the sampler, so they are the same for any
num_workers. Leaving the loop (break or error) stops the workers.

device = "cuda:N" (ours; PyTorch moves batches in the loop) yields device tensors: batches are
pinned and copied ahead on a side stream, device_prefetch at once counting the one in use (2:
batch k + 1 crosses while step k runs), the step's stream waiting on an event, never the host. A
native dataset whose transform starts with ToTensor (ToTensor + Normalize) then ships raw uint8
images and is normalised on the GPU, the CPU's float32 values bit for bit. A device that cannot be
used raises here. See docs/data-loading.md.]],
    opts = { { "batch_size", "integer", "1", "samples per batch" },
             { "shuffle", "boolean", "false", "a new random order each epoch (a RandomSampler)" },
             { "sampler", "sampler", "nil", "the order of the indices (excludes shuffle)" },
             { "batch_sampler", "sampler", "nil", "yields whole batches of indices (excludes batch_size, shuffle, sampler, drop_last)" },
             { "num_workers", "integer", "0", "native worker threads (0: batches made on the calling thread)" },
             { "collate_fn", "function", "nil", "collate_fn(samples) -> the batch's values; samples are table.pack'ed" },
             { "pin_memory", "boolean", "false", "batches in page-locked memory when a GPU is usable" },
             { "drop_last", "boolean", "false", "drop the last, incomplete batch" },
             { "prefetch_factor", "integer", "2", "batches prepared ahead per worker" },
             { "persistent_workers", "boolean", "false", "accepted, as PyTorch's" },
             { "device", "string", "nil", "\"cuda\", \"cuda:N\" or an index: batches copied there ahead of the step (nil or \"cpu\": they stay)" },
             { "device_prefetch", "integer", "2", "with device: batches on the device at once, the one in use included (1..16)" },
             { "transform_on_device", "boolean", "true", "with device: a ToTensor-first transform runs on the GPU after the copy of the raw images" } },
    example = [[
local ds = ms.data.TensorDataset(ms.arange(1, 11):float():view(10, 1), ms.arange(1, 11))
local loader = ms.data.DataLoader(ds, {batch_size = 4})
print(loader)  --> DataLoader(3 batches, num_workers=0)
for i, x, y in loader:iter() do print(i, x.shape, y) end
--> 1	torch.Size([4, 1])	tensor([1, 2, 3, 4])
--> 2	torch.Size([4, 1])	tensor([5, 6, 7, 8])
--> 3	torch.Size([2, 1])	tensor([ 9, 10])
]] },

  { name = "data.DataLoader:iter",
    sig = "for batch_idx, values... in loader:iter() do ... end",
    doc = [[One epoch: iterates the batches, batch_idx from 1, then the batch's values (data,
target, ...). With shuffle, each call draws a new order from the global generator.]],
    example = [[
ms.manual_seed(0)
local loader = ms.data.DataLoader({10, 20, 30, 40, 50}, {batch_size = 2, shuffle = true})
for i, batch in loader:iter() do print(i, batch) end
--> 1	tensor([40, 50])
--> 2	tensor([30, 20])
--> 3	tensor([10])
]] },

  { name = "data.DataLoader:is_native",
    sig = "loader:is_native() -> boolean",
    doc = [[Whether iter() takes the native path (worker threads) rather than reading samples in Lua.]],
    example = [[
local tds = ms.data.TensorDataset(ms.zeros(4, 2))
print(ms.data.DataLoader(tds):is_native(), ms.data.DataLoader({1, 2}):is_native())  --> true	false
]] },

  -- ---- TensorDataset ----

  { name = "data.TensorDataset",
    sig = "ms.data.TensorDataset(t1, t2, ...) -> TensorDataset",
    doc = [[Tensors sharing their first dimension seen as one dataset of rows (PyTorch's
TensorDataset; also `require "moonshard.tensor_dataset"`). `#ds` is the row count;
`ds:get(i)` gives the i-th row of each tensor (i 1-based, negative from the end) and `ds[i]`
the same as a table; `ds.tensors` holds the tensors.]],
    example = [[
local ds = ms.data.TensorDataset(ms.arange(1, 7):float():view(3, 2), ms.tensor({1, 2, 3}))
print(ds, #ds)  --> TensorDataset(torch.Size([3, 2]), torch.Size([3]))	3
local x, y = ds:get(-1)
print(x, y)     --> tensor([5., 6.])	tensor(3)
]] },

  { name = "data.TensorDataset:get",
    sig = "ds:get(i) -> values...",
    doc = [[Row i of each tensor (views; 0-dim tensors for 1-D inputs); i is 1-based, negative
from the end, and out of range raises naming the range.]],
    example = [[
local ds = ms.data.TensorDataset(ms.tensor({10, 20, 30}))
print(ds:get(2), ds[3][1])  --> tensor(20)	tensor(30)
]] },

  -- ---- samplers ----

  { name = "samplers.SequentialSampler",
    also = { "data.SequentialSampler" },
    sig = "samplers.SequentialSampler(data_source) -> Sampler",
    doc = [[The indices 1..#data_source in order (`require "moonshard.samplers"`, also
ms.data.SequentialSampler). Every sampler has `s:iter()` and `#s`.]],
    example = [[
local s = ms.data.SequentialSampler({"a", "b", "c"})
local t = {}
for i in s:iter() do t[#t + 1] = i end
print(table.concat(t, " "), #s)  --> 1 2 3	3
]] },

  { name = "samplers.SequentialSampler:iter",
    also = { "data.SequentialSampler:iter" },
    sig = "for i in sampler:iter() do ... end",
    doc = [[Iterates 1, 2, ..., #data_source.]],
    example = [[
for i in ms.data.SequentialSampler({0, 0}):iter() do print(i) end
--> 1
--> 2
]] },

  { name = "samplers.RandomSampler",
    also = { "data.RandomSampler" },
    sig = "samplers.RandomSampler(data_source, {replacement = false, num_samples = #data_source}) -> Sampler",
    doc = [[Random indices from the global generator (ms.manual_seed makes them reproducible):
without replacement, whole permutations of 1..n back to back cut to num_samples (PyTorch's
order of draws); with replacement, num_samples uniform draws.]],
    opts = { { "replacement", "boolean", "false", "draw with replacement" },
             { "num_samples", "integer", "nil", "how many indices per epoch (nil: #data_source)" } },
    example = [[
ms.manual_seed(0)
local s = ms.data.RandomSampler({1, 2, 3, 4, 5, 6}, {num_samples = 4})
local t = {}
for i in s:iter() do t[#t + 1] = i end
print(#t, #s)  --> 4	4
]] },

  { name = "samplers.RandomSampler:iter",
    also = { "data.RandomSampler:iter" },
    sig = "for i in sampler:iter() do ... end",
    doc = [[Iterates this epoch's random indices (new ones at each call).]],
    example = [[
ms.manual_seed(0)
local seen = {}
for i in ms.data.RandomSampler({0, 0, 0}):iter() do seen[i] = true end
print(seen[1] and seen[2] and seen[3])  --> true
]] },

  { name = "samplers.RandomSampler:num_samples",
    also = { "data.RandomSampler:num_samples" },
    sig = "sampler:num_samples() -> integer",
    doc = [[The number of indices per epoch: num_samples if given, else #data_source.]],
    example = [[
print(ms.data.RandomSampler({1, 2, 3}):num_samples())  --> 3
]] },

  { name = "samplers.BatchSampler",
    also = { "data.BatchSampler" },
    sig = "samplers.BatchSampler(sampler, batch_size, drop_last = false) -> Sampler",
    doc = [[Groups the indices of a sampler (or of a plain list of indices) into batches of
batch_size; the last one shorter unless drop_last.]],
    example = [[
local b = ms.data.BatchSampler({1, 2, 3, 4, 5}, 2, false)
for batch in b:iter() do print(table.concat(batch, ",")) end
--> 1,2
--> 3,4
--> 5
print(#b, #ms.data.BatchSampler({1, 2, 3, 4, 5}, 2, true))  --> 3	2
]] },

  { name = "samplers.BatchSampler:iter",
    also = { "data.BatchSampler:iter" },
    sig = "for batch in sampler:iter() do ... end",
    doc = [[Iterates the batches, each a new table of indices (a caller may keep them).]],
    example = [[
local n = 0
for batch in ms.data.BatchSampler(ms.data.SequentialSampler({0, 0, 0}), 2):iter() do n = n + #batch end
print(n)  --> 3
]] },

  { name = "samplers.DistributedSampler",
    also = { "data.DistributedSampler" },
    sig = "samplers.DistributedSampler(dataset, {num_replicas = 1, rank = 0, shuffle = true, seed = 0, drop_last = false}) -> Sampler",
    doc = [[This rank's share of the indices, as PyTorch's DistributedSampler. The list (shuffled
with seed + epoch, the same permutation on every rank) is padded by repeating its start (or cut,
with drop_last) to a multiple of num_replicas R, and rank r (0-based, as in MPI) takes every R-th
index from position r. Call set_epoch(epoch) before each epoch for a new shuffle.]],
    opts = { { "num_replicas", "integer", "1", "the number of ranks (the world size)" },
             { "rank", "integer", "0", "this rank, 0-based" },
             { "shuffle", "boolean", "true", "shuffle with seed + epoch" },
             { "seed", "integer", "0", "the shuffle's seed, the same on every rank" },
             { "drop_last", "boolean", "false", "cut the tail rather than pad" } },
    example = [[
local ds = {0, 0, 0, 0, 0}
local s = ms.data.DistributedSampler(ds, {num_replicas = 2, rank = 1, shuffle = false})
print(table.concat(s:indices(), " "), #s)  --> 2 4 1	3
]] },

  { name = "samplers.DistributedSampler:set_epoch",
    also = { "data.DistributedSampler:set_epoch" },
    sig = "sampler:set_epoch(epoch)",
    doc = [[Sets the epoch that, with the seed, decides the shuffle; call it before each epoch
with the same value on every rank.]],
    example = [[
local s = ms.data.DistributedSampler({0, 0, 0, 0, 0, 0, 0, 0})
local a = table.concat(s:indices(), " ")
s:set_epoch(1)
print(a ~= table.concat(s:indices(), " "))  --> true
]] },

  { name = "samplers.DistributedSampler:indices",
    also = { "data.DistributedSampler:indices" },
    sig = "sampler:indices() -> {integer, ...}",
    doc = [[This rank's indices for the current epoch, as a list.]],
    example = [[
local s = ms.data.DistributedSampler({0, 0, 0, 0}, {num_replicas = 2, rank = 0, shuffle = false})
print(table.concat(s:indices(), " "))  --> 1 3
]] },

  { name = "samplers.DistributedSampler:iter",
    also = { "data.DistributedSampler:iter" },
    sig = "for i in sampler:iter() do ... end",
    doc = [[Iterates this rank's indices for the current epoch.]],
    example = [[
for i in ms.data.DistributedSampler({0, 0, 0}, {num_replicas = 3, rank = 2, shuffle = false}):iter() do print(i) end
--> 3
]] },

  { name = "samplers.DistributedSampler:state_dict",
    also = { "data.DistributedSampler:state_dict" },
    sig = "sampler:state_dict() -> {epoch =, seed =}",
    doc = [[What a resumed run needs to draw the same epochs: the epoch and the seed (the position
inside the epoch is the caller's).]],
    example = [[
local s = ms.data.DistributedSampler({0, 0}, {seed = 7})
s:set_epoch(3)
local sd = s:state_dict()
print(sd.epoch, sd.seed)  --> 3	7
]] },

  { name = "samplers.DistributedSampler:load_state_dict",
    also = { "data.DistributedSampler:load_state_dict" },
    sig = "sampler:load_state_dict({epoch =, seed =})",
    doc = [[Restores the epoch and the seed of a state_dict.]],
    example = [[
local s = ms.data.DistributedSampler({0, 0})
s:load_state_dict({epoch = 5, seed = 1})
print(s.epoch, s.seed)  --> 5	1
]] },

  -- ---- transforms ----

  { name = "transforms.ToTensor",
    sig = "transforms.ToTensor() -> Transform",
    doc = [[torchvision's ToTensor for uint8 images (`require "moonshard.transforms"`): an image
(H, W) or a batch (B, H, W) becomes float32 (1, H, W) or (B, 1, H, W) in [0, 1]. A transform is
called on a sample or a batch: `t(x)`.]],
    example = [==[
local T = require "moonshard.transforms"
local img = ms.tensor({{0, 255}, {51, 102}}, {dtype = "uint8"})
print(T.ToTensor()(img))
--> tensor([[[0.0000, 1.0000],
-->          [0.2000, 0.4000]]])
]==] },

  { name = "transforms.Normalize",
    sig = "transforms.Normalize(mean, std) -> Transform",
    doc = [[(x - mean) / std per channel of a float (C, H, W) or (B, C, H, W) tensor; mean and std
are numbers or lists with one entry per channel (or one for all), as torchvision's.]],
    example = [==[
local T = require "moonshard.transforms"
local norm = T.Normalize({0.1307}, {0.3081})
print(norm)  --> Normalize(mean=(0.1307,), std=(0.3081,))
print(T.Normalize(0.5, 0.5)(ms.ones(1, 1, 2)))  --> tensor([[[1., 1.]]])
]==] },

  { name = "transforms.Lambda",
    sig = "transforms.Lambda(fn) -> Transform",
    doc = [[A transform that calls fn(x). It runs in Lua, so a DataLoader reads a dataset using it
on the calling thread.]],
    example = [[
local T = require "moonshard.transforms"
print(T.Lambda(function(x) return x * 2 end)(ms.ones(2)))  --> tensor([2., 2.])
]] },

  { name = "transforms.Compose",
    sig = "transforms.Compose({t1, t2, ...}) -> Transform",
    doc = [[Applies the transforms (or functions) in order. A Compose of ToTensor and Normalize
runs as one fused native pass (x read once, (x / 255 - mean) / std written once), also in the
DataLoader's worker threads; `#c` is the number of members.]],
    example = [==[
local T = require "moonshard.transforms"
local c = T.Compose({T.ToTensor(), T.Normalize(0.5, 0.5)})
print(#c, c(ms.tensor({{0, 255}}, {dtype = "uint8"})))  --> 2	tensor([[[-1.,  1.]]])
]==] },

  { name = "transforms.ToTensor:forward",
    sig = "to_tensor:forward(x) -> Tensor",
    doc = [[What calling the transform does (`t(x)` is `t:forward(x)`): uint8 (H, W) or
(B, H, W) to float32 (1, H, W) or (B, 1, H, W) divided by 255, in one native pass.]],
    example = [[
local T = require "moonshard.transforms"
print(T.ToTensor():forward(ms.zeros(2, 28, 28, {dtype = "uint8"})).shape)  --> torch.Size([2, 1, 28, 28])
]] },

  { name = "transforms.Normalize:forward",
    sig = "normalize:forward(x) -> Tensor",
    doc = [[What calling the transform does: (x - mean) / std with mean and std shaped (C, 1, 1) in
x's dtype, broadcast over H, W and any batch dims. x must be floating, (C, H, W) or (B, C, H, W),
with as many channels as entries (or one entry).]],
    example = [==[
local T = require "moonshard.transforms"
print(T.Normalize({1, 2}, {1, 2}):forward(ms.full({2, 1, 1}, 4.0)):flatten())  --> tensor([3., 1.])
]==] },

  { name = "transforms.Lambda:forward",
    sig = "lambda:forward(x) -> fn(x)",
    doc = [[What calling the transform does: fn(x).]],
    example = [[
local T = require "moonshard.transforms"
print(T.Lambda(function(x) return x + 1 end):forward(ms.zeros(1)))  --> tensor([1.])
]] },

  { name = "transforms.Compose:forward",
    sig = "compose:forward(x) -> Tensor",
    doc = [[What calling the Compose does: one fused native pass when every member is native and
x is what it reads (uint8 for a leading ToTensor, float32 for Normalize), else the members one
after the other.]],
    example = [==[
local T = require "moonshard.transforms"
local c = T.Compose({T.ToTensor(), T.Lambda(function(x) return x * 2 end)})
print(c:forward(ms.full({1, 1}, 255, {dtype = "uint8"})))  --> tensor([[[2.]]])
]==] },

  { name = "transforms.ToTensor:native_spec",
    sig = "transform:native_spec() -> table | nil",
    doc = [[How the transform describes itself to the native loader: a plain table ({kind =
"to_tensor"}, {kind = "normalize", mean =, std =}), a list of them for a Compose, or nil for a
transform that must run in Lua (Lambda, a Compose with a Lua member).]],
    example = [[
local T = require "moonshard.transforms"
print(T.ToTensor():native_spec().kind, T.Lambda(print):native_spec())  --> to_tensor	nil
]] },

  { name = "transforms.Normalize:native_spec",
    sig = "normalize:native_spec() -> {kind = \"normalize\", mean =, std =}",
    doc = [[Normalize's description for the native loader: its means and standard deviations as
lists.]],
    example = [[
local T = require "moonshard.transforms"
local spec = T.Normalize({0.5}, {0.25}):native_spec()
print(spec.kind, spec.mean[1], spec.std[1])  --> normalize	0.5	0.25
]] },

  { name = "transforms.Compose:native_spec",
    sig = "compose:native_spec() -> {spec, ...} | nil",
    doc = [[The members' specs flattened into one list, or nil when a member runs in Lua (then a
DataLoader reads the dataset in Lua).]],
    example = [[
local T = require "moonshard.transforms"
print(#T.Compose({T.ToTensor(), T.Normalize(0.5, 0.5)}):native_spec())  --> 2
print(T.Compose({T.ToTensor(), function(x) return x end}):native_spec())  --> nil
]] },

  { name = "transforms.Lambda:native_spec",
    sig = "lambda:native_spec() -> nil",
    doc = [[Always nil: a Lambda runs in Lua.]],
    example = [[
local T = require "moonshard.transforms"
print(T.Lambda(function(x) return x end):native_spec())  --> nil
]] },

  -- ---- datasets ----

  { name = "datasets.MNIST",
    sig = "datasets.MNIST(root, {train = true, download = false, transform =, target_transform =}) -> Dataset",
    doc = [[torchvision's MNIST (`require "moonshard.datasets"`), read from the IDX files (raw or
.gz) under root/MNIST/raw in torchvision's layout. `#ds` items; `local image, label = ds:get(i)`
(i 1-based) or `ds[i]` as a table. Images stay uint8 (28 x 28, `ds.data`) until a transform;
**labels are 1-based class indices**: digit d is label d + 1 (`ds.targets`, int64), what
nll_loss takes and argmax returns; `ds.classes[label]` names it. download = true fetches missing
files from torchvision's mirrors with curl or wget and checks their MD5 sums; otherwise the error
says which files to put where (scripts/fetch-mnist.sh DIR fetches them).]],
    opts = { { "train", "boolean", "true", "the training split (60000 items), else the test split (10000)" },
             { "download", "boolean", "false", "fetch missing files" },
             { "transform", "function", "nil", "applied to each image (a transforms.* object runs natively)" },
             { "target_transform", "function", "nil", "applied to each label" } },
    example = [[
local datasets = require "moonshard.datasets"
local root = os.getenv("MS_MNIST_ROOT") or "data"   -- the folder holding MNIST/raw
local ds = datasets.MNIST(root, {train = false})
local image, label = ds:get(1)
print(#ds, image.shape, label, ds.classes[label])  --> 10000	torch.Size([28, 28])	8	7 - seven
]],
    needs = "mnist" },

  { name = "datasets.FashionMNIST",
    sig = "datasets.FashionMNIST(root, {train = true, download = false, transform =, target_transform =}) -> Dataset",
    doc = [[torchvision's FashionMNIST, under root/FashionMNIST/raw: the same interface as
datasets.MNIST, with the ten clothing classes (labels 1..10).]],
    opts = { { "train", "boolean", "true", "the training split, else the test split" },
             { "download", "boolean", "false", "fetch missing files" },
             { "transform", "function", "nil", "applied to each image" },
             { "target_transform", "function", "nil", "applied to each label" } },
    example = [[
local datasets = require "moonshard.datasets"
print(#datasets.FashionMNIST.classes, datasets.FashionMNIST.classes[1])  --> 10	T-shirt/top
]] },

  { name = "datasets.MNIST:get",
    also = { "datasets.FashionMNIST:get" },
    sig = "ds:get(i) -> image, label",
    doc = [[Item i (1-based, negative from the end): the image (a uint8 28 x 28 tensor, through
transform when there is one) and the label (a Lua integer in 1..10, through target_transform).]],
    example = [[
local datasets = require "moonshard.datasets"
local root = os.getenv("MS_MNIST_ROOT") or "data"   -- the folder holding MNIST/raw
local ds = datasets.MNIST(root)
local image, label = ds:get(-1)
print(image.dtype, label >= 1 and label <= 10)  --> uint8	true
]],
    needs = "mnist" },

  { name = "datasets.MNIST:missing_files",
    also = { "datasets.FashionMNIST:missing_files" },
    sig = "datasets.MNIST:missing_files(root) -> {string, ...}",
    doc = [[The files of both splits missing under root ("PATH[.gz]" each); nothing is read,
created or fetched.]],
    example = [[
local datasets = require "moonshard.datasets"
local missing = datasets.MNIST:missing_files("/nonexistent")
print(#missing, missing[1])  --> 4	/nonexistent/MNIST/raw/train-images-idx3-ubyte[.gz]
]] },

  { name = "datasets.MNIST:root_problem",
    also = { "datasets.FashionMNIST:root_problem" },
    sig = "datasets.MNIST:root_problem(root, download = false) -> string | nil[, boolean]",
    doc = [[Why root cannot serve the dataset, in one line (nil when it can): not a directory,
or (unless download) a missing file, with true as a second result when downloading would help.
Nothing is read, created or fetched: a script checks its --data with it before it starts.]],
    example = [[
local datasets = require "moonshard.datasets"
print(datasets.MNIST:root_problem("/nonexistent"))  --> no such directory (expected the directory holding MNIST/raw)
]] },

  { name = "datasets.MNIST:open",
    also = { "datasets.FashionMNIST:open" },
    sig = "datasets.MNIST:open(root, opts) -> ds | nil, message",
    doc = [[The dataset, or nil and one line saying what is missing (and why a download failed),
io.open's way: for a script to report without a traceback. opts as datasets.MNIST.]],
    example = [[
local datasets = require "moonshard.datasets"
local ds, err = datasets.MNIST:open("/nonexistent")
print(ds, err:match("^MNIST: dataset not found") ~= nil)  --> nil	true
]] },

  { name = "datasets.MNIST:raw_folder",
    also = { "datasets.FashionMNIST:raw_folder" },
    sig = "ds:raw_folder() -> string",
    doc = [[The folder the IDX files are read from: root .. "/MNIST/raw" (or "/FashionMNIST/raw").]],
    example = [[
local datasets = require "moonshard.datasets"
local root = os.getenv("MS_MNIST_ROOT") or "data"
local ds = datasets.MNIST(root)
print(ds:raw_folder() == root .. "/MNIST/raw")  --> true
]],
    needs = "mnist" },

  { name = "datasets.MNIST:download",
    also = { "datasets.FashionMNIST:download" },
    sig = "ds:download() -> true | nil, why",
    doc = [[Fetches every file of both splits missing under raw_folder() from torchvision's
mirrors (curl or wget) and checks its MD5; the .gz files are kept as they are. Called by the
constructor with {download = true}.]],
    example = [[
local datasets = require "moonshard.datasets"
local root = os.getenv("MS_MNIST_ROOT") or "data"   -- the folder holding MNIST/raw
local ds = datasets.MNIST(root)
print(ds:download())  --> true
]],
    needs = "mnist" },

  { name = "datasets.MNIST:data_rows",
    also = { "datasets.FashionMNIST:data_rows" },
    sig = "ds:data_rows() -> rows | nil",
    doc = [[The DataLoader's native source of images read from the file per batch (so a process
holds no copy of them), or nil once ds.data was read whole (a .gz file always is).]],
    example = [[
local datasets = require "moonshard.datasets"
local root = os.getenv("MS_MNIST_ROOT") or "data"   -- the folder holding MNIST/raw
local ds = datasets.MNIST(root, {train = false})
local before = ds:data_rows() ~= nil
local _ = ds.data   -- reads the images whole
print(before, ds:data_rows() == nil)  --> true	true
]],
    needs = "mnist" },
}
