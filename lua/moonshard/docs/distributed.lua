-- distributed.lua: the docstrings of ms.distributed (PyTorch's torch.distributed). The examples
-- run on the "self" backend, a world of one in this process; under mpirun every rank runs the same
-- lines with the "mpi" backend (or "auto").
local RANKS = [[Ranks are 0-based process ids as in PyTorch: they name processes, not positions in a Lua list.]]
local COLL = [[
Every rank of the group must make the same call. Options: `group` (default the world),
`async_op = true` returns a `Work` handle to `:wait()` on instead of blocking.]]

local function example(body)
  return 'ms.distributed.init_process_group("self")\n' .. body .. "ms.distributed.destroy_process_group()\n"
end

return {
  title = "Distributed: process groups and collectives (ms.distributed)",
  {
    name = "ms.distributed.init_process_group",
    sig = 'ms.distributed.init_process_group(backend | {backend = "auto", timeout =})',
    doc = [[
Starts this process's membership of the world (PyTorch's `init_process_group`). Backends:
`"mpi"` (Open MPI: start the job with `mpirun -np N build/moonshard script.lua`), `"nccl"` (GPU
tensors, started through MPI), `"self"` (a world of one) and `"auto"`, the default (mpi when
launched by mpirun, else self). `timeout` (seconds) bounds every wait: a rank that does not arrive
fails the call on every rank, naming it, instead of hanging (default `$MS_DIST_TIMEOUT`, else 300).
A second call without `destroy_process_group` is an error.]],
    opts = {
      { "backend", "string", '"auto"', '"mpi", "nccl", "self" or "auto"' },
      { "timeout", "number", "300", "seconds any wait may take before it fails" },
    },
    example = [[
ms.distributed.init_process_group({backend = "self", timeout = 60})
print(ms.distributed.get_rank(), ms.distributed.get_world_size())   --> 0	1
ms.distributed.destroy_process_group()
]],
  },
  {
    name = "ms.distributed.destroy_process_group",
    sig = "ms.distributed.destroy_process_group()",
    doc = [[
Ends the world and every group made from it; `init_process_group` may then be called again. MPI
itself stays up until the process exits.]],
    example = [[
ms.distributed.init_process_group("self")
ms.distributed.destroy_process_group()
print(ms.distributed.is_initialized())   --> false
]],
  },
  {
    name = "ms.distributed.is_initialized",
    sig = "ms.distributed.is_initialized() -> boolean",
    doc = [[Whether `init_process_group` has run (and `destroy_process_group` not since).]],
    example = [[
print(ms.distributed.is_initialized())   --> false
]],
  },
  {
    name = "ms.distributed.is_available",
    sig = "ms.distributed.is_available() -> boolean",
    doc = [[Always true: the "self" backend is always built. `is_mpi_available` says whether multi-process runs are.]],
    example = [[
print(ms.distributed.is_available())   --> true
]],
  },
  {
    name = "ms.distributed.is_mpi_available",
    sig = "ms.distributed.is_mpi_available() -> boolean",
    doc = [[Whether the "mpi" backend was built (CMake found MPI): runs of several processes under mpirun.]],
    example = [[
print(type(ms.distributed.is_mpi_available()))   --> boolean
]],
  },
  {
    name = "ms.distributed.is_nccl_available",
    sig = "ms.distributed.is_nccl_available() -> boolean",
    doc = [[
Whether the "nccl" backend was built (CUDA, NCCL and MPI found). A GPU is still needed at
`init_process_group("nccl")`.]],
    example = [[
print(type(ms.distributed.is_nccl_available()))   --> boolean
]],
  },
  {
    name = "ms.distributed.get_rank",
    sig = "ms.distributed.get_rank(group) -> integer",
    doc = [[This process's rank in the world, or in `group` (-1 when not a member). ]] .. RANKS,
    example = example([[
print(ms.distributed.get_rank())   --> 0
]]),
  },
  {
    name = "ms.distributed.get_world_size",
    sig = "ms.distributed.get_world_size(group) -> integer",
    doc = [[The number of processes in the world, or in `group`.]],
    example = example([[
print(ms.distributed.get_world_size())   --> 1
]]),
  },
  {
    name = "ms.distributed.get_local_rank",
    sig = "ms.distributed.get_local_rank() -> integer",
    doc = [[
This process's rank on its node, from the launcher (`OMPI_COMM_WORLD_LOCAL_RANK`, else
`LOCAL_RANK`), else 0: the usual choice of GPU (`ms.cuda.set_device(local_rank)`). Works before
`init_process_group`.]],
    example = [[
print(ms.distributed.get_local_rank() >= 0)   --> true
]],
  },
  {
    name = "ms.distributed.get_backend",
    sig = "ms.distributed.get_backend() -> string",
    doc = [[The world's backend: "mpi", "nccl" or "self".]],
    example = example([[
print(ms.distributed.get_backend())   --> self
]]),
  },
  {
    name = "ms.distributed.new_group",
    sig = "ms.distributed.new_group(ranks) -> ProcessGroup",
    doc = [[
A group of the given world ranks (any order; group ranks follow sorted order, as PyTorch); nil
means every rank. Every rank of the world must call it with the same list; a non-member gets a
group whose rank is -1, on which collectives do nothing. ]] .. RANKS,
    example = example([[
local g = ms.distributed.new_group({0})
print(g, g:size())   --> ProcessGroup(rank=0, size=1)	1
]]),
  },
  {
    name = "ms.distributed.get_process_group_ranks",
    sig = "ms.distributed.get_process_group_ranks(group) -> {integer...}",
    doc = [[The world ranks of the group's members, in group-rank order.]],
    example = example([[
local g = ms.distributed.new_group({0})
print(ms.distributed.get_process_group_ranks(g)[1])   --> 0
]]),
  },
  {
    name = "ms.distributed.ReduceOp",
    sig = "ms.distributed.ReduceOp.SUM | AVG | MAX | MIN | PRODUCT",
    doc = [[
The reductions, as PyTorch spells them; each value is the option string it stands for
("sum", "avg", ...), so `{op = "max"}` works too. AVG on integers divides truncating.]],
    example = example([[
local t = ms.tensor({1.0, 4.0})
ms.distributed.all_reduce(t, {op = ms.distributed.ReduceOp.MAX})
print(ms.distributed.ReduceOp.MAX, t)   --> max	tensor([1., 4.])
]]),
  },
  {
    name = "ms.distributed.all_reduce",
    sig = 'ms.distributed.all_reduce(tensor, {op = "sum", group =, async_op = false}) -> nil | Work',
    doc = [[Reduces `tensor` across the group, in place: every rank ends with the result. ]] .. COLL,
    opts = {
      { "op", "string", '"sum"', "a ReduceOp: sum, avg, max, min, product" },
      { "group", "ProcessGroup", "the world", "the ranks taking part" },
      { "async_op", "boolean", "false", "return a Work handle instead of waiting" },
    },
    example = example([[
local t = ms.tensor({1.0, 2.0}) * (ms.distributed.get_rank() + 1)
ms.distributed.all_reduce(t)             -- on N ranks: the sum of every rank's t
print(t)   --> tensor([1., 2.])
]]),
  },
  {
    name = "ms.distributed.all_gather_into_tensor",
    sig = "ms.distributed.all_gather_into_tensor(output, input, {group =, async_op =}) -> nil | Work",
    doc = [[
Every rank's `input` side by side in `output`, which has world-size times its elements: rank r's
lands at elements r * numel(input) + 1 onward. Same dtype on both. ]] .. COLL,
    example = example([[
local out = ms.zeros(2 * ms.distributed.get_world_size())
ms.distributed.all_gather_into_tensor(out, ms.tensor({5.0, 6.0}))
print(out)   --> tensor([5., 6.])
]]),
  },
  {
    name = "ms.distributed.all_gather",
    sig = "ms.distributed.all_gather(tensor_list, tensor, {group =, async_op =}) -> nil | Work",
    doc = [[
Every rank's `tensor` into `tensor_list`, one per rank: `tensor_list[r + 1]` receives rank r's
(a Lua list is 1-based, ranks are not). Each list tensor has `tensor`'s numel and dtype. ]] .. COLL,
    example = example([[
local list = {}
for r = 1, ms.distributed.get_world_size() do list[r] = ms.zeros(2) end
ms.distributed.all_gather(list, ms.tensor({7.0, 8.0}))
print(list[1])   --> tensor([7., 8.])
]]),
  },
  {
    name = "ms.distributed.reduce_scatter_tensor",
    sig = 'ms.distributed.reduce_scatter_tensor(output, input, {op = "sum", group =, async_op =}) -> nil | Work',
    doc = [[
`input` holds world-size slices of numel(output) elements; rank r's `output` receives the
reduction of slice r of every rank's input (what FSDP does with gradients). ]] .. COLL,
    example = example([[
local out = ms.zeros(2)
ms.distributed.reduce_scatter_tensor(out, ms.tensor({1.0, 2.0}))
print(out)   --> tensor([1., 2.])
]]),
  },
  {
    name = "ms.distributed.broadcast",
    sig = "ms.distributed.broadcast(tensor, {src = 0, group =, async_op =}) -> nil | Work",
    doc = [[Copies rank `src`'s `tensor` into every other rank's, in place. ]] .. COLL,
    example = example([[
local t = ms.tensor({3.0}) + ms.distributed.get_rank()
ms.distributed.broadcast(t, {src = 0})   -- every rank now holds rank 0's value
print(t)   --> tensor([3.])
]]),
  },
  {
    name = "ms.distributed.reduce",
    sig = 'ms.distributed.reduce(tensor, {dst = 0, op = "sum", group =, async_op =}) -> nil | Work',
    doc = [[Like `all_reduce`, but only rank `dst`'s tensor receives the result. ]] .. COLL,
    example = example([[
local t = ms.tensor({2.0})
ms.distributed.reduce(t, {dst = 0})
print(t)   --> tensor([2.])
]]),
  },
  {
    name = "ms.distributed.barrier",
    sig = "ms.distributed.barrier({group =, async_op =}) -> nil | Work",
    doc = [[Returns when every rank of the group has reached it.]],
    example = example([[
ms.distributed.barrier()
print("all here")   --> all here
]]),
  },
  {
    name = "ProcessGroup:rank",
    sig = "group:rank() -> integer",
    doc = [[This process's rank in the group (0-based), or -1 when it is not a member.]],
    example = example([[
print(ms.distributed.new_group({0}):rank())   --> 0
]]),
  },
  {
    name = "ProcessGroup:size",
    sig = "group:size() -> integer",
    doc = [[The number of ranks in the group.]],
    example = example([[
print(ms.distributed.new_group({0}):size())   --> 1
]]),
  },
  {
    name = "Work:wait",
    sig = "work:wait()",
    doc = [[
Waits for a collective issued with `async_op = true` to finish; its tensors then hold the result.
A rank that never arrives fails it (the timeout), naming the rank. On the nccl backend, as in
PyTorch, the wait is on the device: work queued after it (on the current stream) runs after the
collective, and the host does not block, so a training step runs ahead of the GPU and can be
captured in a CUDA graph; a hang then shows at the next host wait (a copy to the host).]],
    example = example([[
local t = ms.tensor({1.0, 2.0})
local work = ms.distributed.all_reduce(t, {async_op = true})
work:wait()
print(t)   --> tensor([1., 2.])
]]),
  },
  {
    name = "Work:is_completed",
    sig = "work:is_completed() -> boolean",
    doc = [[Whether the collective has finished, without waiting.]],
    example = example([[
local work = ms.distributed.barrier({async_op = true})
work:wait()
print(work:is_completed())   --> true
]]),
  },
}
