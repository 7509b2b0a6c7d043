-- test_mnist_real.lua: the real MNIST files, when they are on this machine (data/MNIST/raw
-- under the repository root, or $MS_MNIST_ROOT/MNIST/raw): item counts and the first labels
-- every MNIST user knows. Skipped (exit 77) where the files are not there; tests never fetch.
local T = require "testing"
local ms = require "moonshard"
local datasets = require "moonshard.datasets"

local root = os.getenv("MS_MNIST_ROOT") or "data"
local function present(name)
  for _, suffix in ipairs({"", ".gz"}) do
    local f = io.open(("%s/MNIST/raw/%s%s"):format(root, name, suffix), "rb")
    if f then f:close() return true end
  end
  return false
end
for _, name in ipairs({"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                       "t10k-labels-idx1-ubyte"}) do
  if not present(name) then
    print(("skip: no %s/MNIST/raw/%s[.gz] (run scripts/fetch-mnist.sh, or set MS_MNIST_ROOT)"):format(root, name))
    os.exit(77)
  end
end

T.test("training split: 60000 images of 28x28, first labels 5 0 4 1 9 2 1 3 1 4", function()
  local ds = datasets.MNIST(root)
  T.eq(#ds, 60000)
  T.same(ds.data.shape, {60000, 28, 28})
  T.eq(ds.data.dtype, "uint8")
  T.same(ds.targets:narrow(1, 1, 10):tolist(), {6, 1, 5, 2, 10, 3, 2, 4, 2, 5})
  local image, label = ds:get(1)
  T.eq(ds.classes[label], "5 - five")
  T.eq(image:long():sum():item(), 27525) -- the well-known first "5": its pixel sum
  -- the mean the PyTorch example normalises with (0.1307)
  T.near(ds.data:double():mean():item() / 255, 0.1307, 5e-5)
end)

T.test("test split: 10000 images, first labels 7 2 1 0 4", function()
  local ds = datasets.MNIST(root, {train = false})
  T.eq(#ds, 10000)
  T.same(ds.targets:narrow(1, 1, 5):tolist(), {8, 3, 2, 1, 5})
  local counts = ms.zeros(10, {dtype = "int64"})
  for i = 1, #ds do counts[ds.targets[i]:item()] = counts[ds.targets[i]:item()]:item() + 1 end
  T.same(counts:tolist(), {980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009})
end)

T.finish()
