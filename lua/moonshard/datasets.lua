-- datasets.lua: torchvision's MNIST and FashionMNIST (`require "moonshard.datasets"`), read
-- from the IDX files (raw or .gz) under torchvision's layout: root/MNIST/raw/train-images-idx3-ubyte
-- [.gz] and so on, root/FashionMNIST/raw/... Labels are read whole (ms.read_idx). Images of a raw
-- file are read on demand (ms._idx_rows: the DataLoader preads each batch's rows, so a process
-- holds no copy of the images; the page cache, shared by every rank, does); ds.data reads them
-- whole the first time it is touched. A .gz file is read whole at once (it cannot be read in
-- place). Images stay uint8 and are converted per batch by the transforms.
--
--   local datasets = require "moonshard.datasets"
--   local ds = datasets.MNIST("data", {train = true, download = false,
--                                      transform = fn, target_transform = fn})
--   #ds                    -- 60000
--   local image, label = ds:get(i)  -- i 1-based; negative counts from the end
--   local sample = ds[i]            -- the same pair as a table {image, label}
--
-- Labels are 1-BASED CLASS INDICES, as every index is in Lua: digit d (FashionMNIST class d)
-- is label d + 1, which is what nll_loss / cross_entropy take and what argmax returns, and
-- ds.classes[label] names it ("5 - five" for label 6). ds.targets (int64, N) holds them.
-- A Lua indexing expression yields one value, hence ds[i] gives a table and ds:get(i) the two
-- values. image is ds.data[i] (a uint8 28x28 tensor: a view of ds.data once that was read, else
-- the row read from the file) passed through transform when there is one; label is a Lua
-- integer passed through target_transform.
--
-- download = true fetches missing files from torchvision's mirrors with an external curl or
-- wget (never required) and checks torchvision's MD5 sums; the .gz files are kept as they are.
local ms = require "moonshard"
local options = require "moonshard.check_opts"

local M = {}

-- The MD5 of a string, as 32 lowercase hex digits (engine/src/io/md5.c; no md5sum needed).
M._md5 = ms._md5

-- ---- files and the outside world ----------------------------------------------------------------
local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- gzip's magic bytes 1f 8b: such a file is read whole, as its rows cannot be read in place.
local function is_gzip(path)
  local f <close> = assert(io.open(path, "rb"))
  return f:read(2) == "\x1f\x8b"
end

local function read_all(path)
  local f <close> = assert(io.open(path, "rb"))
  return f:read("a")
end

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function have(cmd) return os.execute("command -v " .. cmd .. " >/dev/null 2>&1") == true end

-- Fetches url into dest: true, or nil and why. Tests replace it (nothing here may need a network).
function M._fetch(url, dest)
  local cmd
  if have("curl") then cmd = ("curl -fsSL --connect-timeout 30 --retry 2 -o %s %s"):format(quote(dest), quote(url))
  elseif have("wget") then cmd = ("wget -q --timeout=30 --tries=2 -O %s %s"):format(quote(dest), quote(url))
  else return nil, "neither curl nor wget is installed" end
  if os.execute(cmd) then return true end
  return nil, cmd:match("^%S+") .. " failed"
end

-- ---- the classes ----------------------------------------------------------------------------
local MNIST_CLASSES = {"0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five", "6 - six",
                       "7 - seven", "8 - eight", "9 - nine"}
local FASHION_CLASSES = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
                         "Bag", "Ankle boot"}
local SPLITS = {
  [true] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"},
  [false] = {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"},
}
local OPTIONS = {train = "boolean", download = "boolean", transform = "function", target_transform = "function"}

local Base = {} -- the methods every MNIST-like class shares

function Base:raw_folder() return self.root .. "/" .. self.__name .. "/raw" end

-- A file of the data set under raw/, raw or gzip-compressed; nil when neither is there.
local function find(raw, name)
  for _, candidate in ipairs({raw .. "/" .. name, raw .. "/" .. name .. ".gz"}) do
    if exists(candidate) then return candidate end
  end
end

local function missing_error(self, missing, why)
  local raw = self:raw_folder()
  local lines = {("%s: dataset not found: no %s"):format(self.__name, table.concat(missing, ", no "))}
  if why then lines[#lines + 1] = "download failed: " .. why end
  lines[#lines + 1] = ("Put the IDX files (raw or .gz) in %s,"):format(raw)
  local how = ("or pass {download = true} to fetch them from %s"):format(table.concat(self.mirrors, " or "))
  if self.fetch_script then
    how = how .. (", or run `%s %s` (it uses the npm registry)"):format(self.fetch_script, self.root)
  end
  lines[#lines + 1] = how .. "."
  error(table.concat(lines, "\n"), 0)
end

-- One .gz into raw/ from the first mirror that serves it with the right MD5; nil, why otherwise.
local function download_one(self, name, md5)
  local dest = self:raw_folder() .. "/" .. name
  local part, why = dest .. ".part", {}
  for _, mirror in ipairs(self.mirrors) do
    local url = mirror .. name
    local ok, err = M._fetch(url, part)
    if ok then
      local got = exists(part) and M._md5(read_all(part)) or "nothing"
      if got == md5 and os.rename(part, dest) then return true end
      err = ("MD5 %s, expected %s"):format(got, md5)
    end
    os.remove(part)
    why[#why + 1] = url .. ": " .. err
  end
  return nil, table.concat(why, "; ")
end

-- torchvision's download(): every file of both splits that is missing, from the mirrors.
function Base:download()
  local raw = self:raw_folder()
  os.execute("mkdir -p " .. quote(raw))
  for _, res in ipairs(self.resources) do
    local name, md5 = res[1], res[2]
    if not find(raw, (name:gsub("%.gz$", ""))) then
      io.stderr:write(("Downloading %s%s to %s\n"):format(self.mirrors[1], name, raw))
      local ok, why = download_one(self, name, md5)
      if not ok then return nil, why end
    end
  end
  return true
end

local function load_split(self)
  local raw = self:raw_folder()
  local names, paths, missing = SPLITS[self.train], {}, {}
  for i, name in ipairs(names) do
    paths[i] = find(raw, name)
    if not paths[i] then missing[#missing + 1] = ("%s/%s[.gz]"):format(raw, name) end
  end
  return paths, missing
end

-- The files of both splits missing under root ("PATH[.gz]" each), nothing read, created or fetched:
-- what a script checks its --data against before it starts. datasets.MNIST:missing_files("data")
function Base.missing_files(class, root)
  local missing = {}
  for _, train in ipairs({true, false}) do
    local _, m = load_split(setmetatable({root = root, train = train}, class))
    table.move(m, 1, #m, #missing + 1, missing)
  end
  return missing
end

-- Why root cannot serve this data set, as one line (nil when it can): not a directory, or,
-- unless download may fetch them, a file missing (the first one named; a second result true
-- says that fetching the files would help). Nothing is read, created or fetched: a script
-- checks its --data with it before it starts.
function Base.root_problem(class, root, download)
  local dir = io.open(root .. "/") -- opens a directory only (Linux)
  if not dir then return "no such directory (expected the directory holding MNIST/raw)" end
  dir:close()
  local missing = class:missing_files(root)
  if #missing > 0 and not download then
    return ("no %s (expected %s's four IDX files there)"):format(missing[1], class.__name), true
  end
end

-- The data set, or nil and one line saying what is missing or wrong (with why a download
-- failed), io.open's way: for a script to report without a traceback.
function Base.open(class, root, opts)
  local ok, ds = pcall(class, root, opts)
  if ok then return ds end
  -- the error's first line says what is wrong, a second one why a download failed; the rest is
  -- advice for a Lua caller (an options table), not for a command line
  local msg = tostring(ds)
  local download = msg:match("\n(download failed: [^\n]*)")
  return nil, msg:match("^[^\n]*") .. (download and "; " .. download or "")
end

-- The images (N, H, W) and labels (N) must agree, and every label must name a class. images is a
-- tensor or a rows object (ms._idx_rows); only its shape is looked at.
local function check_contents(self, images, labels, paths)
  local name = self.__name
  local shape = ms.is_tensor(images) and images.shape or images:shape()
  if #shape ~= 3 then
    error(("%s: %s holds a tensor of shape %s, expected images (N, H, W)"):format(name, paths[1], shape), 0)
  end
  if labels:dim() ~= 1 then
    error(("%s: %s holds a tensor of shape %s, expected labels (N)"):format(name, paths[2], labels.shape), 0)
  end
  if shape[1] ~= labels:size(1) then
    error(("%s: %s has %d images but %s has %d labels"):format(name, paths[1], shape[1], paths[2],
                                                            labels:size(1)), 0)
  end
  local top = labels:max():item()
  if top >= #self.classes then
    error(("%s: %s holds label %d, but there are only %d classes (0 to %d)"):format(name, paths[2], top,
                                                                                 #self.classes, #self.classes - 1), 0)
  end
end

local function check_options(name, opts)
  opts = options.check(name, opts, OPTIONS, 3)
  for k, v in pairs(opts) do
    local want = OPTIONS[k]
    if type(v) ~= want and not (want == "function" and getmetatable(v) and getmetatable(v).__call) then
      error(("%s: option %s must be a %s, got %s"):format(name, k, want, type(v)), 3)
    end
  end
  return opts
end

local function new(class, root, opts)
  local name = class.__name
  if type(root) ~= "string" then error(("%s: root must be a string (a directory), got %s"):format(name, type(root)), 2) end
  opts = check_options(name, opts)
  local self = setmetatable({root = root, train = opts.train ~= false, transform = opts.transform,
                             target_transform = opts.target_transform, classes = class.classes}, class)
  local paths, missing = load_split(self)
  if #missing > 0 and opts.download then
    local ok, why = self:download()
    if not ok then missing_error(self, missing, why) end
    paths, missing = load_split(self)
  end
  if #missing > 0 then missing_error(self, missing) end
  local images = is_gzip(paths[1]) and ms.read_idx(paths[1]) or ms._idx_rows(paths[1])
  local labels = ms.read_idx(paths[2])
  check_contents(self, images, labels, paths)
  if ms.is_tensor(images) then self.data = images else self._rows, self._images_path = images, paths[1] end
  self.targets = labels:long():add_(1) -- 1-based class indices (see the top of the file)
  return self
end

-- The images read whole (ds.data, on first use) when they were being read on demand.
local function load_data(self)
  local images = ms.read_idx(self._images_path)
  rawset(self, "data", images)
  return images
end

-- The DataLoader's native source for the images: the rows object while ds.data was never read
-- (or was, and may since have been replaced by the user), else nil and it uses ds.data.
function Base:data_rows()
  if rawget(self, "data") == nil then return rawget(self, "_rows") end
end

-- (image, label) of item i (1-based; negative counts from the end).
function Base:get(i)
  local n = self.targets:size(1)
  local j = math.tointeger(i)
  if not j then error(("%s: index must be an integer, got %s"):format(self.__name, tostring(i)), 2) end
  if j < -n or j == 0 or j > n then
    error(("%s: index %d is out of range for %d items (1 to %d, or -%d to -1)"):format(self.__name, j, n, n, n), 2)
  end
  if j < 0 then j = j + n + 1 end
  local data, rows = rawget(self, "data"), self:data_rows()
  local image, label = data and data[j] or rows:get(j), self.targets[j]:item()
  if self.transform then image = self.transform(image) end
  if self.target_transform then label = self.target_transform(label) end
  return image, label
end

local function make_class(name, mirrors, resources, classes, fetch_script)
  local class = {__name = name, mirrors = mirrors, resources = resources, classes = classes,
                 fetch_script = fetch_script}
  class.__index = function(self, key)
    if math.type(key) == "integer" then return {self:get(key)} end
    if key == "data" and rawget(self, "_rows") then return load_data(self) end
    return class[key]
  end
  class.__len = function(self) return self.targets:size(1) end
  class.__tostring = function(self)
    return ("Dataset %s\n    Number of datapoints: %d\n    Root location: %s\n    Split: %s"):format(
      name, #self, self.root, self.train and "Train" or "Test")
  end
  return setmetatable(class, {__index = Base, __call = new, __name = name})
end

-- torchvision's mirrors and the MD5 sums of its .gz files (torchvision/datasets/mnist.py).
M.MNIST = make_class("MNIST", {"https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/"}, {
  {"train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873"},
  {"train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432"},
  {"t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3"},
  {"t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c"},
}, MNIST_CLASSES, "scripts/fetch-mnist.sh")

M.FashionMNIST = make_class("FashionMNIST", {"http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"}, {
  {"train-images-idx3-ubyte.gz", "8d4fb7e6c68d591d4c3dfef9ec88bf0d"},
  {"train-labels-idx1-ubyte.gz", "25c81989df183df01b3e8a0aad5dffbe"},
  {"t10k-images-idx3-ubyte.gz", "bef4ecab320f06d8554ea6380940ec79"},
  {"t10k-labels-idx1-ubyte.gz", "bb300cfdad3c16e7a12a480ee83cd310"},
}, FASHION_CLASSES)

return M
