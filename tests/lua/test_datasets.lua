-- test_datasets.lua: MNIST / FashionMNIST over small IDX files made here in torchvision's
-- layout (split selection, indexing, transforms, errors, download through a stand-in fetcher),
-- ms.read_idx, and TensorDataset. Nothing reaches the network.
local T = require "testing"
local ms = require "moonshard"
local datasets = require "moonshard.datasets"
local TensorDataset = require "moonshard.tensor_dataset"

local tmp = os.tmpname()
os.remove(tmp)
assert(os.execute("mkdir -p '" .. tmp .. "'"))
local have_gzip = os.execute("command -v gzip >/dev/null 2>&1") == true

local function write(path, bytes)
  local f <close> = assert(io.open(path, "wb"))
  f:write(bytes)
end

local function read(path)
  local f <close> = assert(io.open(path, "rb"))
  return f:read("a")
end

-- IDX bytes: magic 0x00000800 + ndim, big-endian sizes, then the uint8 values.
local function idx(sizes, values)
  local parts = {string.pack(">I4", 0x800 + #sizes)}
  for _, s in ipairs(sizes) do parts[#parts + 1] = string.pack(">I4", s) end
  for _, v in ipairs(values) do parts[#parts + 1] = string.char(v) end
  return table.concat(parts)
end

-- n images of h x w whose pixels are (item * 31 + position) % 256, and their labels.
local function images(n, h, w)
  local v = {}
  for item = 0, n - 1 do
    for p = 0, h * w - 1 do v[#v + 1] = (item * 31 + p) % 256 end
  end
  return idx({n, h, w}, v)
end

-- Writes a split under root/<folder>/raw, gzip-compressed when asked (and gzip exists).
local function make_split(root, folder, prefix, labels, gz)
  local raw = ("%s/%s/raw"):format(root, folder)
  assert(os.execute("mkdir -p '" .. raw .. "'"))
  local img_path, lbl_path = raw .. "/" .. prefix .. "-images-idx3-ubyte", raw .. "/" .. prefix .. "-labels-idx1-ubyte"
  write(img_path, images(#labels, 4, 3))
  write(lbl_path, idx({#labels}, labels))
  if gz and have_gzip then assert(os.execute(("gzip -f '%s' '%s'"):format(img_path, lbl_path))) end
  return raw
end

local root = tmp .. "/root"
make_split(root, "MNIST", "train", {5, 0, 4, 1, 9})
make_split(root, "MNIST", "t10k", {7, 2, 1})

T.test("MNIST train split: sizes, fields, 1-based targets", function()
  local ds = datasets.MNIST(root)
  T.eq(#ds, 5)
  T.eq(ds.train, true)
  T.eq(ds.root, root)
  T.eq(ds.data.dtype, "uint8")
  T.same(ds.data.shape, {5, 4, 3})
  T.eq(ds.targets.dtype, "int64")
  T.same(ds.targets:tolist(), {6, 1, 5, 2, 10})
  T.eq(ds.classes[ds.targets[1]:item()], "5 - five")
  T.eq(#ds.classes, 10)
  T.truthy(tostring(ds):find("Number of datapoints: 5", 1, true))
  T.truthy(tostring(ds):find("Split: Train", 1, true))
end)

T.test("MNIST test split with train = false", function()
  local ds = datasets.MNIST(root, {train = false})
  T.eq(#ds, 3)
  T.eq(ds.train, false)
  T.same(ds.targets:tolist(), {8, 3, 2})
end)

T.test("MNIST get(i) and ds[i]: uint8 views, labels, negative indices", function()
  local ds = datasets.MNIST(root)
  local image, label = ds:get(2)
  T.eq(image.dtype, "uint8")
  T.same(image.shape, {4, 3})
  T.eq(image[1][1]:item(), 31)
  T.eq(image[4][3]:item(), 31 + 11)
  T.eq(label, 1)
  T.eq(math.type(label), "integer")
  local sample = ds[3]
  T.eq(#sample, 2)
  T.eq(sample[2], 5)
  T.eq(sample[1][1][1]:item(), 62)
  local _, last = ds:get(-1)
  T.eq(last, 10)
  T.eq(ds[-5][2], 6)
  T.raises(function() return ds:get(6) end, "MNIST: index 6 is out of range for 5 items (1 to 5, or -5 to -1)")
  T.raises(function() return ds[0] end, "index 0 is out of range")
  T.raises(function() return ds:get(-6) end, "index -6 is out of range")
  T.raises(function() return ds:get(1.5) end, "index must be an integer")
end)

T.test("MNIST transform and target_transform are applied per item", function()
  local seen = {}
  local ds = datasets.MNIST(root, {
    transform = function(img) seen[#seen + 1] = img.dtype; return img:float():div(255) end,
    target_transform = function(l) return l - 1 end, -- back to the digit
  })
  local image, digit = ds:get(1)
  T.eq(image.dtype, "float32")
  T.near(image[1][2]:item(), 1 / 255, 1e-7)
  T.eq(digit, 5)
  T.same(seen, {"uint8"})
  T.eq(ds[5][2], 9)
  T.eq(ds.data.dtype, "uint8") -- the stored images are untouched
end)

T.test("MNIST images of a raw file are read on demand, the same batches as from ds.data", function()
  local transforms = require "moonshard.transforms"
  local tr = transforms.Compose({transforms.ToTensor(), transforms.Normalize({0.5}, {0.25})})
  local lazy = datasets.MNIST(root, {transform = tr})
  T.eq(rawget(lazy, "data"), nil) -- nothing read whole yet
  T.truthy(lazy:data_rows() ~= nil, "a rows source")
  local image = lazy:get(2) -- one row from the file
  T.eq(rawget(lazy, "data"), nil)
  local eager = datasets.MNIST(root, {transform = tr})
  T.same(eager.data.shape, {5, 4, 3}) -- touching ds.data reads the images whole
  T.eq(eager:data_rows(), nil)
  -- (get returns image, label: the parentheses keep the image alone)
  T.truthy(image:equal((eager:get(2))), "get(2) from the file and from ds.data")
  for _, workers in ipairs({0, 2}) do
    local opts = {batch_size = 2, shuffle = true, num_workers = workers}
    ms.manual_seed(7)
    local a = ms.data.DataLoader(lazy, opts)
    T.truthy(a:is_native(), "native path on file rows")
    local got = {}
    for _, x, y in a:iter() do got[#got + 1] = {x, y} end
    ms.manual_seed(7)
    local k = 0
    for _, x, y in ms.data.DataLoader(eager, opts):iter() do
      k = k + 1
      T.truthy(got[k][1]:equal(x) and got[k][2]:equal(y), ("batch %d, %d workers"):format(k, workers))
    end
    T.eq(k, 3)
    T.eq(#got, 3)
  end
  T.eq(rawget(lazy, "data"), nil) -- the loader never read the images whole
end)

T.test("MNIST .gz images are read whole (no rows source)", function()
  if not have_gzip then return end
  local groot = tmp .. "/gzroot"
  make_split(groot, "MNIST", "train", {5, 0, 4}, true)
  local ds = datasets.MNIST(groot)
  T.eq(ds:data_rows(), nil)
  T.same(rawget(ds, "data").shape, {3, 4, 3})
end)

T.test("MNIST options are checked", function()
  T.raises(function() datasets.MNIST(root, {trian = true}) end,
    "MNIST: unknown option 'trian' (expected one of: download, target_transform, train, transform)")
  T.raises(function() datasets.MNIST(root, true) end, "MNIST: expected an options table, got boolean")
  T.raises(function() datasets.MNIST(root, {train = 1}) end, "option train must be a boolean, got number")
  T.raises(function() datasets.MNIST(root, {transform = "x"}) end, "option transform must be a function")
  T.raises(function() datasets.MNIST(nil) end, "root must be a string")
end)

T.test("missing files: the error names the expected paths and the ways to get them", function()
  local where = tmp .. "/empty"
  T.raises(function() datasets.MNIST(where) end, "MNIST: dataset not found",
           where .. "/MNIST/raw/train-images-idx3-ubyte[.gz]", where .. "/MNIST/raw/train-labels-idx1-ubyte[.gz]",
           "Put the IDX files (raw or .gz) in " .. where .. "/MNIST/raw", "{download = true}",
           "scripts/fetch-mnist.sh " .. where, "https://ossci-datasets.s3.amazonaws.com/mnist/")
  T.raises(function() datasets.MNIST(where, {train = false}) end, where .. "/MNIST/raw/t10k-images-idx3-ubyte[.gz]")
  T.raises(function() datasets.FashionMNIST(where) end, "FashionMNIST: dataset not found",
           where .. "/FashionMNIST/raw/train-images-idx3-ubyte[.gz]")
end)

T.test("missing_files: what a script checks --data against, nothing created", function()
  T.same(datasets.MNIST:missing_files(root), {})
  local where = tmp .. "/none"
  local raw = where .. "/MNIST/raw/"
  T.same(datasets.MNIST:missing_files(where), {raw .. "train-images-idx3-ubyte[.gz]", raw .. "train-labels-idx1-ubyte[.gz]",
                                               raw .. "t10k-images-idx3-ubyte[.gz]", raw .. "t10k-labels-idx1-ubyte[.gz]"})
  T.truthy(io.open(where) == nil, "a directory was created")
  T.eq(datasets.FashionMNIST:missing_files(root)[1], root .. "/FashionMNIST/raw/train-images-idx3-ubyte[.gz]")
end)

T.test("root_problem and open: a script's --data in one line, nothing created", function()
  T.eq(datasets.MNIST:root_problem(root), nil)
  local why, fetchable = datasets.MNIST:root_problem(tmp .. "/none")
  T.eq(why, "no such directory (expected the directory holding MNIST/raw)")
  T.eq(fetchable, nil)
  os.execute("mkdir -p " .. T.quote(tmp .. "/bare"))
  why, fetchable = datasets.FashionMNIST:root_problem(tmp .. "/bare")
  T.eq(why, ("no %s/bare/FashionMNIST/raw/train-images-idx3-ubyte[.gz] (expected FashionMNIST's four IDX files there)")
    :format(tmp))
  T.eq(fetchable, true)
  T.eq(datasets.MNIST:root_problem(tmp .. "/bare", true), nil, "download may fetch them")
  T.truthy(io.open(tmp .. "/bare/MNIST") == nil, "a directory was created")
  T.eq(#datasets.MNIST:open(root), #datasets.MNIST(root))
  local ds, err = datasets.MNIST:open(tmp .. "/bare")
  T.eq(ds, nil)
  T.truthy(not err:find("\n") and err:find("dataset not found", 1, true), err)
end)

T.test("FashionMNIST reads its own folder (gzip files when gzip exists)", function()
  local froot = tmp .. "/fashion"
  make_split(froot, "FashionMNIST", "train", {9, 0, 0, 3}, true)
  make_split(froot, "FashionMNIST", "t10k", {1, 2}, true)
  local ds = datasets.FashionMNIST(froot)
  T.eq(#ds, 4)
  T.same(ds.targets:tolist(), {10, 1, 1, 4})
  T.eq(ds.classes[ds[1][2]], "Ankle boot")
  T.eq(#datasets.FashionMNIST(froot, {train = false}), 2)
  T.raises(function() datasets.MNIST(froot) end, froot .. "/MNIST/raw/train-images-idx3-ubyte[.gz]")
end)

T.test("inconsistent files are errors naming the files", function()
  local bad = tmp .. "/bad"
  local raw = make_split(bad, "MNIST", "train", {1, 2, 3})
  write(raw .. "/train-labels-idx1-ubyte", idx({2}, {1, 2}))
  T.raises(function() datasets.MNIST(bad) end, raw .. "/train-images-idx3-ubyte has 3 images but",
           raw .. "/train-labels-idx1-ubyte has 2 labels")
  write(raw .. "/train-labels-idx1-ubyte", idx({3}, {1, 10, 2}))
  T.raises(function() datasets.MNIST(bad) end, "holds label 10, but there are only 10 classes (0 to 9)")
  write(raw .. "/train-labels-idx1-ubyte", idx({3, 1}, {1, 2, 3}))
  T.raises(function() datasets.MNIST(bad) end, "expected labels (N)")
  write(raw .. "/train-labels-idx1-ubyte", idx({3}, {1, 2, 3}))
  write(raw .. "/train-images-idx3-ubyte", idx({3, 4}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}))
  T.raises(function() datasets.MNIST(bad) end, "expected images (N, H, W)")
  write(raw .. "/train-images-idx3-ubyte", images(3, 4, 3):sub(1, -2))
  T.raises(function() datasets.MNIST(bad) end, "read_idx '" .. raw .. "/train-images-idx3-ubyte'", "(truncated)")
end)

T.test("ms.read_idx: shapes and errors", function()
  local p = tmp .. "/one.idx"
  write(p, idx({2, 3}, {1, 2, 3, 4, 5, 6}))
  local t = ms.read_idx(p)
  T.same(t:tolist(), {{1, 2, 3}, {4, 5, 6}})
  write(p, "\1\0\8\1" .. string.pack(">I4", 1) .. "x")
  T.raises(function() ms.read_idx(p) end, "read_idx '" .. p .. "': bad magic number")
  write(p, idx({0}, {}))
  T.raises(function() ms.read_idx(p) end, "contains no items")
  T.raises(function() ms.read_idx(tmp .. "/nope") end, "could not open")
  T.raises(function() ms.read_idx(42) end, "read_idx", "path")
end)

T.test("md5 of known strings", function()
  T.eq(datasets._md5(""), "d41d8cd98f00b204e9800998ecf8427e")
  T.eq(datasets._md5("abc"), "900150983cd24fb0d6963f7d28e17f72")
  T.eq(datasets._md5(("a"):rep(1000)), "cabe45dcc9ae5b66ba86600cca6b8ba8")
  -- lengths around the padding boundaries (values from Python's hashlib)
  T.eq(datasets._md5(("x"):rep(55)), "04364420e25c512fd958a70738aa8f72")
  T.eq(datasets._md5(("x"):rep(56)), "668a72d5ba17f08e62dabcafad6db14b")
  T.eq(datasets._md5(("x"):rep(64)), "c1bb4f81d892b2d57947682aeb252456")
  T.eq(datasets._md5(("x"):rep(119)), "ab347a5f68c8a443cfcddc633f12c24f")
end)

-- download = true through a stand-in for curl/wget that "serves" files from a local folder.
T.test("download: fetched files are checked against their MD5 and then used", function()
  local served = tmp .. "/served"
  local src = make_split(served, "MNIST", "train", {3, 1, 4, 1}, true)
  make_split(served, "MNIST", "t10k", {5, 9}, true)
  local class, fetch = datasets.MNIST, datasets._fetch
  local saved = class.resources
  local resources, urls = {}, {}
  for _, name in ipairs({"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                         "t10k-labels-idx1-ubyte"}) do
    local file = have_gzip and src .. "/" .. name .. ".gz" or src .. "/" .. name
    resources[#resources + 1] = {name .. ".gz", datasets._md5(read(file)), file}
  end
  datasets._fetch = function(url, dest)
    urls[#urls + 1] = url
    for _, r in ipairs(resources) do
      if url:sub(-#r[1]) == r[1] then write(dest, read(r[3])); return true end
    end
    return nil, "404"
  end
  local ok, err = pcall(function()
    class.resources = resources
    local where = tmp .. "/downloaded"
    local ds = datasets.MNIST(where, {download = true})
    T.eq(#ds, 4)
    T.same(ds.targets:tolist(), {4, 2, 5, 2})
    T.eq(#urls, 4) -- every missing file of both splits, as torchvision does
    T.eq(urls[1], class.mirrors[1] .. "train-images-idx3-ubyte.gz")
    T.eq(#datasets.MNIST(where, {train = false, download = true}), 2)
    T.eq(#urls, 4) -- nothing fetched again

    resources[1][2] = ("0"):rep(32) -- the served file no longer matches: every mirror is tried
    urls = {}
    local bad = tmp .. "/mismatch"
    T.raises(function() datasets.MNIST(bad, {download = true}) end, "download failed",
             class.mirrors[1] .. "train-images-idx3-ubyte.gz: MD5 ", "expected " .. ("0"):rep(32),
             class.mirrors[2] .. "train-images-idx3-ubyte.gz: MD5 ", bad .. "/MNIST/raw/train-images-idx3-ubyte[.gz]")
    T.eq(#urls, #class.mirrors)
    T.eq(io.open(bad .. "/MNIST/raw/train-images-idx3-ubyte.gz.part"), nil)
    T.eq(io.open(bad .. "/MNIST/raw/train-images-idx3-ubyte.gz"), nil)

    datasets._fetch = function() return nil, "neither curl nor wget is installed" end
    T.raises(function() datasets.MNIST(tmp .. "/offline", {download = true}) end,
             "download failed", "neither curl nor wget is installed", "scripts/fetch-mnist.sh")
  end)
  class.resources, datasets._fetch = saved, fetch
  assert(ok, err)
end)

-- ---- TensorDataset ---------------------------------------------------------------------------
T.test("TensorDataset: rows of every tensor", function()
  local x = ms.arange(12):view(4, 3):float()
  local y = ms.tensor({10, 20, 30, 40}, {dtype = "int64"})
  local ds = TensorDataset(x, y)
  T.eq(#ds, 4)
  T.eq(#ds.tensors, 2)
  T.eq(ds.tensors[1], x)
  local xi, yi = ds:get(2)
  T.same(xi:tolist(), {3, 4, 5})
  T.eq(yi:dim(), 0)
  T.eq(yi:item(), 20)
  local sample = ds[-1]
  T.same(sample[1]:tolist(), {9, 10, 11})
  T.eq(sample[2]:item(), 40)
  T.eq(select("#", TensorDataset(x):get(1)), 1)
  T.raises(function() return ds:get(5) end, "TensorDataset: index 5 is out of range for 4 items")
  T.eq(tostring(ds), "TensorDataset(torch.Size([4, 3]), torch.Size([4]))")
end)

T.test("TensorDataset: arguments are checked", function()
  T.raises(function() TensorDataset(ms.zeros(4, 2), ms.zeros(3)) end,
           "size mismatch between tensors", "torch.Size([4, 2]), torch.Size([3])")
  T.raises(function() TensorDataset() end, "needs at least one tensor")
  T.raises(function() TensorDataset(ms.zeros(2), {1, 2}) end, "argument #2 must be a tensor, got table")
  T.raises(function() TensorDataset(ms.tensor(3)) end, "argument #1 is a 0-dim tensor")
end)

os.execute("rm -rf '" .. tmp .. "'")
T.finish()
