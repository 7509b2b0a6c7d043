-- dist_auto_backend.lua: init_process_group("auto") under mpirun picks nccl exactly when every
-- rank has a GPU of its own (here: CUDA usable and no more ranks than GPUs on the machine), mpi
-- otherwise; all ranks agree, and a collective works on the tensors that backend moves.
local ms = require "moonshard"
local dist = ms.distributed

dist.init_process_group({ backend = "auto", timeout = 60 })
local R, W = dist.get_rank(), dist.get_world_size()
local gpus = ms.cuda.is_available() and ms.cuda.device_count() or 0
local want = (dist.is_nccl_available() and gpus > 0 and W <= gpus) and "nccl" or "mpi"
local function fail(msg)
  io.stderr:write(("FAIL [rank %d of %d] %s\n"):format(R, W, msg))
  os.exit(1)
end
if dist.get_backend() ~= want then fail(("backend %s, expected %s (%d GPUs)"):format(dist.get_backend(), want, gpus)) end
local t = ms.tensor({ R + 1 }, { dtype = "float32" })
if want == "nccl" then t = t:to("cuda:" .. ms.cuda.current_device()) end
dist.all_reduce(t)
if t:cpu():item() ~= W * (W + 1) / 2 then fail("all_reduce gave " .. t:cpu():item()) end
if R == 0 then print(("auto picked %s on %d rank(s): ok"):format(want, W)) end
dist.destroy_process_group()
