-- mnist_fsdp.lua: the seed's program, the PyTorch "FSDP MNIST" example in Lua: the seed's Net
-- trained with Fully Sharded Data Parallel across ranks (one process each), every rank reading
-- its DistributedSampler slice of MNIST, losses and accuracy all-reduced and printed by rank 0.
--   build/moonshard scripts/mnist_fsdp.lua [--nproc N] [--epochs N] ...   (launches N ranks)
--   build/moonshard -n 2 scripts/mnist_fsdp.lua ...                       (already launched)
--   build/moonshard scripts/mnist_fsdp.lua --help                          (the options)
-- Data: the four MNIST IDX files under DIR/MNIST/raw (--data DIR, default "data"; DIR must
-- exist), downloaded there by rank 0 when missing as the seed does, unless --no-download
-- (scripts/fetch-mnist.sh DIR fetches them by hand).
local ms = require "moonshard"
local F = require "moonshard.functional"
local nn_utils = require "moonshard.nn_utils"
local optim = require "moonshard.optim"
local datasets = require "moonshard.datasets"
local transforms = require "moonshard.transforms"
local argparse = require "moonshard.argparse"
local watch = require "moonshard.watch"
local fsdp = require "moonshard.fsdp"
local fsdp_wrap = require "moonshard.fsdp_wrap"
local Net = require "moonshard.seed_net"
local dist = ms.distributed

-- ---- options: the seed's argparse options, plus the launch, data and wrapping knobs -------------
-- --epochs defaults to 10 as the seed's code does (its help text says 14). The seed builds a
-- min_num_params=100 policy it never passes and then passes 20000: 20000 is the default here.
local parser = argparse.ArgumentParser{description = "PyTorch MNIST Example (the seed: FSDP), in moonshard"}
parser:add_argument("--batch-size", {type = "int", default = 64, min = 1, metavar = "N",
                                     help = "input batch size for training"})
parser:add_argument("--test-batch-size", {type = "int", default = 1000, min = 1, metavar = "N",
                                          help = "input batch size for testing"})
parser:add_argument("--epochs", {type = "int", default = 10, min = 0, metavar = "N", help = "number of epochs to train"})
parser:add_argument("--lr", {type = "float", default = 1.0, metavar = "LR", help = "learning rate"})
parser:add_argument("--gamma", {type = "float", default = 0.7, metavar = "M", help = "Learning rate step gamma"})
parser:add_argument("--no-cuda", {action = "store_true", help = "disables CUDA training"})
parser:add_argument("--seed", {type = "int", default = 1, metavar = "S", help = "random seed"})
parser:add_argument("--save-model", {action = "store_true", help = "save the full state dict to mnist_cnn.safetensors"})
parser:add_argument("--nproc", {type = "int", default = 0, min = 0, metavar = "N",
                                help = "ranks to run; 0: the launched world, else one per GPU, else 2"})
parser:add_argument("--auto-wrap-min-params", {type = "int", default = 20000, min = 0, metavar = "N",
                                               help = "size_based_auto_wrap_policy's min_num_params"})
parser:add_argument("--data", {default = "data", metavar = "DIR", help = "the directory holding MNIST/raw"})
parser:add_argument("--no-download", {action = "store_false", dest = "download",
                                      help = "never fetch missing MNIST files (the seed downloads them into DIR)"})
parser:add_argument("--dry-run", {action = "store_true", help = "one batch per epoch, to check the pipeline quickly"})
parser:add_argument("--log-interval", {type = "int", default = 10, min = 1, metavar = "N",
                                       help = "batches between rows of --metrics, and between progress lines when "
                                         .. "stderr is not a terminal"})
watch.add_arguments(parser) -- --no-progress, --metrics FILE, --plot FILE.png, --summary
parser:add_argument("--no-cuda-graphs", {action = "store_true",
                                          help = "run each training step eagerly instead of replaying a CUDA graph"})
parser:add_argument("--mixed-precision", {choices = {"none", "bfloat16", "float16"}, default = "none",
                                          help = "FSDP mixed precision: parameters, gradient reduction and "
                                            .. "buffers in this dtype (none: float32 throughout)"})

local function launched_world() return math.tointeger(tonumber(os.getenv("OMPI_COMM_WORLD_SIZE") or "")) end

-- What every rank would find wrong alike, found before any rank starts (one line, no traceback):
-- --metrics and --plot must be files that can be written; --data must be a directory and, unless the seed's download may fetch them, hold the IDX files;
-- --nproc must agree with a launcher's world.
local function check_args(args)
  watch.check_arguments(parser, args)
  local why, fetchable = datasets.MNIST:root_problem(args.data, args.download)
  if why then
    parser:error(("--data %s: %s%s"):format(args.data, why, fetchable
                 and ("; scripts/fetch-mnist.sh %s fetches them"):format(args.data) or ""))
  end
  local world = launched_world()
  if world and args.nproc > 0 and args.nproc ~= world then
    parser:error(("--nproc %d, but the launcher started %d ranks"):format(args.nproc, world))
  end
end

-- A data set, or one line naming --data and what went wrong (a failed download, a corrupt file).
local function open_mnist(args, opts)
  local ds, why = datasets.MNIST:open(args.data, opts)
  if not ds then parser:fail(("--data %s: %s"):format(args.data, why)) end
  return ds
end

-- CUDA where the build has it, a device is there and --no-cuda is not given.
local function cuda_available(args)
  local cuda = rawget(ms, "cuda")
  return not args.no_cuda and type(cuda) == "table" and type(cuda.is_available) == "function"
    and cuda.is_available() and cuda.device_count() > 0
end

-- The seed's WORLD_SIZE: --nproc, else the world a launcher (mpirun, moonshard -n) already
-- started, else one rank per GPU, else 2 CPU ranks.
local function world_size_of(args)
  if args.nproc > 0 then return args.nproc end
  local launched = launched_world()
  if launched then return launched end
  if cuda_available(args) then return ms.cuda.device_count() end
  return 2
end

-- ---- train and test, as the seed's functions ---------------------------------------------------

local NB = { non_blocking = true }

-- The metrics add up where the batches are, in float64 as the seed's Python floats do (the same
-- sums, bit for bit), and are read once an epoch: no step waits for the device.
local function metric(device) return ms.zeros(1, { dtype = "float64", device = device }) end

-- The bar (rank 0, stderr) shows rank 0's running loss per sample: a tensor it reads only when it
-- redraws, so no step waits for the device on its account.
local function train(args, run, model, rank, device, train_loader, optimizer, epoch, sampler, step)
  model:train()
  if sampler then sampler:set_epoch(epoch) end
  local loss_sum, count = metric(device), 0
  local bar <close> = run:bar{total = #train_loader, desc = ("epoch %d"):format(epoch)}
  for i, data, target in train_loader:iter() do
    -- the seed's .to(rank): the device loader's batches are there already (this returns them)
    if device then data, target = data:to(device, NB), target:to(device, NB) end
    local loss = step(data, target)
    loss_sum:add_(loss)
    local n = data:size(1)
    count = count + n
    bar:step(n, { loss = loss:detach() / n })
    if run:logging() and (i - 1) % args.log_interval == 0 then
      run:log{ kind = "step", step = (epoch - 1) * #train_loader + i, epoch = epoch, loss = loss:item() / n,
               lr = optimizer.param_groups[1].lr, samples_per_s = bar:stats().rate }
    end
    if args.dry_run then break end
  end
  bar:close()
  -- one collective for both numbers (float64 keeps the count exact), on the rank's device as
  -- the seed's ddp_loss: nccl moves CUDA tensors only
  local ddp_loss = ms.cat({ loss_sum, ms.tensor({ count }, { dtype = "float64", device = device }) })
  dist.all_reduce(ddp_loss, { op = "sum" })
  local total = ddp_loss:tolist()
  if rank == 0 then
    print(("Train Epoch: %d \tLoss: %.6f"):format(epoch, total[1] / total[2]))
  end
  return count, total[1] / total[2]
end

local function test(args, run, model, rank, device, test_loader, test_step)
  model:eval()
  local _ <close> = ms.no_grad()
  local loss_sum, correct, count = metric(device), metric(device), 0
  local bar <close> = run:bar{total = #test_loader, desc = "test"}
  for _, data, target in test_loader:iter() do
    if device then data, target = data:to(device, NB), target:to(device, NB) end
    -- on the CPU model(data) a training batch at a time: the same values, in the memory and
    -- cache of a training step instead of ~500 MB of activations for 1000 samples (nn_utils.lua);
    -- a GPU takes the batch whole (its forward is launch-bound: 16 chunks cost 16 forwards)
    local chunk = device and data:size(1) or args.batch_size
    local loss, hits = test_step(data, target, chunk)
    loss_sum:add_(loss)
    correct:add_(hits)
    count = count + data:size(1)
    bar:step(data:size(1))
    if args.dry_run then break end
  end
  bar:close()
  local ddp_loss = ms.cat({ loss_sum, correct, ms.tensor({ count }, { dtype = "float64", device = device }) })
  dist.all_reduce(ddp_loss, { op = "sum" })
  local total = ddp_loss:tolist()
  if rank == 0 then
    print(("Test set: Average loss: %.4f, Accuracy: %d/%d (%.2f%%)\n"):format(
      total[1] / total[3], math.tointeger(total[2]) or total[2], math.tointeger(total[3]) or total[3],
      100 * total[2] / total[3]))
  end
  return count, 100 * total[2] / total[3], total[1] / total[3]
end

-- Between training and testing the blocks one phase used sit idle in the allocator's cache while
-- the other maps its own (the test loader's 1000-sample batches are sizes training never
-- asks for): returning them at each switch keeps a rank's peak at the larger phase alone, not
-- their sum (~20 MB a rank on the full 2-rank epoch). The price is mapping them again, page
-- faults once per switch (~0.1 s a switch on the 2-core VM), nothing per step. The collection
-- first frees tensors Lua still holds as garbage, so their blocks are returned too.
local function release_cached_blocks()
  collectgarbage()
  ms.empty_cache()
end

-- ---- bench/run.sh's hook: with MS_BENCH_REPORT=1 each rank prints one machine-readable line ------

-- Seconds this rank has spent blocked on FSDP's collectives (the exposed communication).
local function comm_wait_seconds(model)
  return fsdp.comm_stats(model).wait_seconds
end

local function bench_report(rank, world_size, model, t)
  local hwm = ms.memory_stats().process_peak // 1024
  local exposed = t.train_wait and ("%.4f"):format(t.train_wait) or "n/a"
  io.write(("BENCH-RANK fsdp rank=%d world=%d train_s=%.4f test_s=%.4f train_samples=%d test_samples=%d vmhwm_kb=%d exposed_comm_s=%s accuracy=%.2f\n"):format(
    rank, world_size, t.train_s, t.test_s, t.train_n, t.test_n, hwm, exposed, t.accuracy or 0))
  io.stdout:flush()
end

-- ---- one rank ------------------------------------------------------------------------------------

local function fsdp_main(rank, world_size, args)
  -- the seed's device choice: rank r on cuda:r when CUDA is there (unless --no-cuda), which
  -- needs a GPU per rank (NCCL refuses two ranks on one GPU); nccl then ("auto" picks it under
  -- a launcher), the CPU and mpi (or self, for a world of one) otherwise
  local use_cuda = cuda_available(args) and world_size <= ms.cuda.device_count()
  if cuda_available(args) and not use_cuda and rank == 0 then
    print(("%d ranks but %d GPU(s): training on the CPU"):format(world_size, ms.cuda.device_count()))
  end
  dist.init_process_group(use_cuda and "auto" or (os.getenv("OMPI_COMM_WORLD_SIZE") and "mpi" or "self"))
  ms.manual_seed(args.seed) -- every rank builds the same initial Net

  local transform = transforms.Compose({
    transforms.ToTensor(),
    transforms.Normalize({ 0.1307 }, { 0.3081 }), -- MNIST's mean and standard deviation
  })
  -- rank 0 fetches missing files alone; the others wait for it and then read them
  local dataset1
  if rank == 0 then
    dataset1 = open_mnist(args, { train = true, download = args.download, transform = transform })
    dist.barrier()
  else
    dist.barrier()
    dataset1 = open_mnist(args, { train = true, transform = transform })
  end
  local dataset2 = open_mnist(args, { train = false, transform = transform })

  local sampler1 = ms.data.DistributedSampler(dataset1, { rank = rank, num_replicas = world_size, shuffle = true })
  local sampler2 = ms.data.DistributedSampler(dataset2, { rank = rank, num_replicas = world_size })

  -- the sampler shuffles, so the loader does not; on a GPU the loader copies batches ahead on a
  -- side stream and normalises the raw images there (docs/data-loading.md)
  local loader_opts = { num_workers = 2, pin_memory = true, shuffle = false }
  if use_cuda then loader_opts.device = "cuda:" .. dist.get_local_rank() end
  local train_kwargs = { batch_size = args.batch_size, sampler = sampler1 }
  local test_kwargs = { batch_size = args.test_batch_size, sampler = sampler2 }
  for k, v in pairs(loader_opts) do
    train_kwargs[k] = v
    test_kwargs[k] = v
  end
  local train_loader = ms.data.DataLoader(dataset1, train_kwargs)
  local test_loader = ms.data.DataLoader(dataset2, test_kwargs)

  local my_auto_wrap_policy = fsdp_wrap.size_based_auto_wrap_policy{
    min_num_params = args.auto_wrap_min_params,
  }

  local device
  local net = Net()
  local run = watch.Run(args, rank)
  run:summary(net, { 1, 1, 28, 28 }) -- rank 0, the whole Net before FSDP shards it
  if use_cuda then
    local local_rank = dist.get_local_rank()
    ms.cuda.set_device(local_rank)
    device = "cuda:" .. local_rank
    net:to(device)
  end
  -- PyTorch's FSDP tutorial's bfSixteen policy: one 16-bit dtype for all three
  local half = args.mixed_precision ~= "none" and args.mixed_precision or nil
  local mixed_precision = half and { param_dtype = half, reduce_dtype = half, buffer_dtype = half }
  local model = fsdp.FSDP(net, { auto_wrap_policy = my_auto_wrap_policy, mixed_precision = mixed_precision })

  local optimizer = optim.Adadelta(model:parameters(), { lr = args.lr })
  local scheduler = optim.lr_scheduler.StepLR(optimizer, { step_size = 1, gamma = args.gamma })
  -- The training step; on CUDA captured as a CUDA graph once its shapes repeat, then replayed
  -- in one launch (docs/cuda-graphs.md). Captured, Adadelta reads its rate from the device, and
  -- its replay hook writes StepLR's current rate there before each replay (docs/optimizers.md).
  local step = ms.cuda.make_graphed_step(function(data, target)
    optimizer:zero_grad()
    local output = model(data)
    local loss = F.nll_loss(output, target, { reduction = "sum" })
    loss:backward()
    optimizer:step()
    return loss:detach()
  end, { enabled = not args.no_cuda_graphs })
  -- The test pass's forward and metrics of a batch, graphed the same way (one signature).
  local test_step = ms.cuda.make_graphed_step(function(data, target, chunk)
    local output = nn_utils.forward_in_chunks(model, data, { chunk_size = chunk })
    local pred = output:argmax(2, true) -- the index of the max log-probability
    return F.nll_loss(output, target, { reduction = "sum" }), pred:eq(target:view_as(pred)):sum()
  end, { enabled = not args.no_cuda_graphs })

  local start = ms.perf_counter()
  local times = { train_s = 0, test_s = 0, train_n = 0, test_n = 0 } -- this rank's, for the bench
  for epoch = 1, args.epochs do
    local w0, t0 = comm_wait_seconds(model), ms.perf_counter()
    local lr = optimizer.param_groups[1].lr
    local trained, train_loss = train(args, run, model, rank, device, train_loader, optimizer, epoch, sampler1, step)
    times.train_n = times.train_n + trained
    local t1, w1 = ms.perf_counter(), comm_wait_seconds(model)
    times.train_wait = (times.train_wait or 0) + (w1 - w0)
    release_cached_blocks()
    local tested, test_loss
    tested, times.accuracy, test_loss = test(args, run, model, rank, device, test_loader, test_step)
    run:log{ kind = "epoch", step = epoch * #train_loader, epoch = epoch, loss = train_loss, test_loss = test_loss,
             accuracy = times.accuracy, lr = lr }
    release_cached_blocks()
    times.test_n = times.test_n + tested
    local t2 = ms.perf_counter()
    times.train_s, times.test_s = times.train_s + (t1 - t0), times.test_s + (t2 - t1)
    if rank == 0 and os.getenv("MS_BENCH_REPORT") == "1" then
      io.write(("BENCH-EPOCH fsdp epoch=%d train_s=%.4f test_s=%.4f\n"):format(epoch, t1 - t0, t2 - t1))
    end
    scheduler:step()
  end
  local elapsed = ms.perf_counter() - start

  if rank == 0 then
    print(("elapsed time: %.3fsec"):format(elapsed))
    print(tostring(model))
  end
  run:finish()
  if os.getenv("MS_BENCH_REPORT") == "1" then bench_report(rank, world_size, model, times) end

  if args.save_model then
    dist.barrier() -- every rank is done training
    -- every rank takes part in the gathers; only rank 0 keeps copies (FullStateDictConfig's rank0_only)
    local states = model:state_dict{rank0_only = true}
    if rank == 0 then ms.save(states, "mnist_cnn.safetensors") end
  end

  dist.destroy_process_group()
end

local args = parser:parse_args(arg)
check_args(args)
ms.manual_seed(args.seed)
ms.spawn(fsdp_main, world_size_of(args), args)
