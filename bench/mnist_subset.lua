-- mnist_subset.lua: writes the first TRAIN training and TEST test samples of MNIST's raw IDX files
-- as a smaller MNIST (same layout), so bench/run.sh --quick runs the real pipeline on a fraction
-- of an epoch. Run: build/moonshard bench/mnist_subset.lua SRC_ROOT DST_ROOT TRAIN TEST
local argparse = require "moonshard.argparse"
local parser = argparse.ArgumentParser{description = "The first TRAIN and TEST samples of MNIST as a smaller MNIST"}
parser:add_argument("src", {metavar = "SRC_ROOT", help = "the directory holding MNIST/raw"})
parser:add_argument("dst", {metavar = "DST_ROOT", help = "where the smaller MNIST/raw is written (it must exist)"})
parser:add_argument("train", {type = "int", min = 0, metavar = "TRAIN", help = "training samples kept"})
parser:add_argument("test", {type = "int", min = 0, metavar = "TEST", help = "test samples kept"})
local args = parser:parse_args(arg)
local src, dst, ntrain, ntest = args.src, args.dst, args.train, args.test

-- IDX: magic (0, 0, type, ndim), ndim big-endian uint32 sizes, then the data, row-major.
local function head(name, count)
  local f, why = io.open(("%s/MNIST/raw/%s"):format(src, name), "rb")
  if not f then parser:fail(why .. " (expected MNIST's raw IDX files under SRC_ROOT/MNIST/raw)") end
  local magic = f:read(4)
  local ndim = magic:byte(4)
  local dims = { string.unpack((">I4"):rep(ndim), f:read(4 * ndim)) }
  dims[ndim + 1] = nil -- string.unpack's next position
  if count > dims[1] then parser:fail(("%s has only %d samples"):format(name, dims[1])) end
  local row = 1
  for i = 2, ndim do row = row * dims[i] end
  dims[1] = count
  local out, err = io.open(("%s/MNIST/raw/%s"):format(dst, name), "wb")
  if not out then parser:fail(err .. " (DST_ROOT/MNIST/raw must exist)") end
  out:write(magic, string.pack((">I4"):rep(ndim), table.unpack(dims)), f:read(count * row))
  out:close()
  f:close()
end

head("train-images-idx3-ubyte", ntrain)
head("train-labels-idx1-ubyte", ntrain)
head("t10k-images-idx3-ubyte", ntest)
head("t10k-labels-idx1-ubyte", ntest)
