-- mnist_subset.lua: writes the first TRAIN training and TEST test samples of MNIST's raw IDX files
-- as a smaller MNIST (same layout), so bench/run.sh --quick runs the real pipeline on a fraction
-- of an epoch. Run: build/moonshard bench/mnist_subset.lua SRC_ROOT DST_ROOT TRAIN TEST
local src, dst, ntrain, ntest = arg[1], arg[2], math.tointeger(tonumber(arg[3] or "")), math.tointeger(tonumber(arg[4] or ""))
if not (src and dst and ntrain and ntest) then
  error("usage: mnist_subset.lua SRC_ROOT DST_ROOT TRAIN TEST", 0)
end

-- IDX: magic (0, 0, type, ndim), ndim big-endian uint32 sizes, then the data, row-major.
local function head(name, count)
  local f = assert(io.open(("%s/MNIST/raw/%s"):format(src, name), "rb"))
  local magic = f:read(4)
  local ndim = magic:byte(4)
  local dims = { string.unpack((">I4"):rep(ndim), f:read(4 * ndim)) }
  dims[ndim + 1] = nil -- string.unpack's next position
  if count > dims[1] then error(("mnist_subset.lua: %s has only %d samples"):format(name, dims[1]), 0) end
  local row = 1
  for i = 2, ndim do row = row * dims[i] end
  dims[1] = count
  local out = assert(io.open(("%s/MNIST/raw/%s"):format(dst, name), "wb"))
  out:write(magic, string.pack((">I4"):rep(ndim), table.unpack(dims)), f:read(count * row))
  out:close()
  f:close()
end

head("train-images-idx3-ubyte", ntrain)
head("train-labels-idx1-ubyte", ntrain)
head("t10k-images-idx3-ubyte", ntest)
head("t10k-labels-idx1-ubyte", ntest)
