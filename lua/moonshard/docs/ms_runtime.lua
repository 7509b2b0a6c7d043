-- Docstrings: the process-wide functions of require "moonshard": seeds and generator state,
-- threads, grad mode, the default device, memory statistics, timing, files and launching ranks.
-- The entry format is described in lua/moonshard/doc.lua.
return {
  title = "Runtime: seeds, threads, grad mode, memory, files",
  { name = "ms.manual_seed",
    sig = "ms.manual_seed(seed) -> nil",
    doc = [[Seeds the engine's one random generator (Philox), which every random factory, fill, dropout
and layer initialisation draws from, on the CPU and on CUDA alike: the same seed gives the same numbers on
either device.]],
    example = [==[
ms.manual_seed(42)
local a = ms.rand(3)
ms.manual_seed(42)
print(ms.rand(3):equal(a))                 --> true
]==] },
  { name = "ms.initial_seed",
    sig = "ms.initial_seed() -> integer",
    doc = [[The seed the generator was last seeded with (by `manual_seed`, or at start-up).]],
    example = [==[
ms.manual_seed(1234)
print(ms.initial_seed())                   --> 1234
]==] },
  { name = "ms.get_rng_state",
    sig = "ms.get_rng_state() -> Tensor",
    doc = [[The generator's state as a 16-byte uint8 tensor (the Philox seed and offset), to save with a
checkpoint and restore with `ms.set_rng_state`, so that a resumed run draws the same dropout masks.
`ms.cuda.get_rng_state` is the same one generator.]],
    example = [==[
local state = ms.get_rng_state()
local a = ms.rand(2)
ms.set_rng_state(state)
print(state.dtype, state:numel(), ms.rand(2):equal(a)) --> uint8 16 true
]==] },
  { name = "ms.set_rng_state",
    sig = "ms.set_rng_state(state) -> nil",
    doc = [[Restores the generator to a state from `ms.get_rng_state` (a uint8 tensor of 16 bytes, possibly
loaded from a checkpoint).]],
    example = [==[
local state = ms.get_rng_state()
local first = ms.randn(4)
ms.set_rng_state(state)
print(ms.randn(4):equal(first))            --> true
]==] },
  { name = "ms.set_num_threads",
    sig = "ms.set_num_threads(n) -> nil",
    doc = [[Sets the number of threads the CPU kernels use (1..1024). By default: `MS_NUM_THREADS`, else the
online cores divided among the ranks an MPI launcher put on the node, at least 1.]],
    example = [==[
local before = ms.get_num_threads()
ms.set_num_threads(1)
print(ms.get_num_threads())                --> 1
ms.set_num_threads(before)
]==] },
  { name = "ms.get_num_threads",
    sig = "ms.get_num_threads() -> integer",
    doc = [[The number of threads the CPU kernels use (see `ms.set_num_threads`).]],
    example = [==[
print(ms.get_num_threads() >= 1)           --> true
]==] },
  { name = "ms.no_grad",
    sig = "local _ <close> = ms.no_grad(); ms.no_grad(fn, ...) -> fn's results",
    doc = [[Turns autograd's recording off: until the returned scope is closed (bind it with `<close>`, as
PyTorch's `with torch.no_grad():`), or for one call of `fn(...)`, whose results it returns. The previous mode
comes back afterwards, even on an error. Use it for evaluation and for updating parameters by hand.]],
    example = [==[
local w = ms.ones(2, {requires_grad = true})
do
  local _ <close> = ms.no_grad()
  print((w * 2).requires_grad, ms.is_grad_enabled()) --> false false
end
print((w * 2).requires_grad)               --> true
print(ms.no_grad(function(x) return (x * 2).requires_grad end, w)) --> false
]==] },
  { name = "ms.enable_grad",
    sig = "local _ <close> = ms.enable_grad(); ms.enable_grad(fn, ...) -> fn's results",
    doc = [[Turns autograd's recording on inside a `no_grad` region: until the returned scope is closed (bind
it with `<close>`), or for one call of `fn(...)`.]],
    example = [==[
local w = ms.ones(2, {requires_grad = true})
local _ <close> = ms.no_grad()
do
  local _ <close> = ms.enable_grad()
  print((w * 2).requires_grad)             --> true
end
print((w * 2).requires_grad)               --> false
]==] },
  { name = "ms.set_grad_enabled",
    sig = "ms.set_grad_enabled(enabled) -> nil",
    doc = [[Switches autograd's recording on or off for the whole thread until switched back (PyTorch's
function form). Prefer the scoped `ms.no_grad()`, which cannot be left off by mistake.]],
    example = [==[
ms.set_grad_enabled(false)
print(ms.is_grad_enabled())                --> false
ms.set_grad_enabled(true)
]==] },
  { name = "ms.is_grad_enabled",
    sig = "ms.is_grad_enabled() -> boolean",
    doc = [[Whether autograd records operations now (false inside `no_grad`).]],
    example = [==[
print(ms.is_grad_enabled())                --> true
]==] },
  { name = "ms.device",
    sig = "local _ <close> = ms.device(name)",
    doc = [[Makes `name` ("cpu", "cuda", "cuda:N" or "meta") the default device of the factories (`ms.zeros`,
`ms.randn`, layer construction ...) until the returned scope is closed: PyTorch 2's `with
torch.device("meta"):`. On "meta" tensors have shapes and dtypes but no memory (see `nn.deferred_init`).]],
    example = [==[
do
  local _ <close> = ms.device("meta")
  local big = ms.zeros(100000, 100000)
  print(big.device, big.shape, ms.get_default_device()) --> meta torch.Size([100000, 100000]) meta
end
print(ms.get_default_device())             --> cpu
]==] },
  { name = "ms.get_default_device",
    sig = "ms.get_default_device() -> string",
    doc = [[The device new tensors are made on when no `device` option is given ("cpu" unless an
`ms.device` scope is open).]],
    example = [==[
print(ms.get_default_device())             --> cpu
]==] },
  { name = "ms.is_tensor",
    sig = "ms.is_tensor(value) -> boolean",
    doc = [[Whether value is a tensor.]],
    example = [==[
print(ms.is_tensor(ms.zeros(1)), ms.is_tensor({1, 2}), ms.is_tensor(3)) --> true false false
]==] },
  { name = "ms.memory_stats",
    sig = "ms.memory_stats() -> table",
    doc = [[The CPU memory the engine holds for tensors, in bytes: `current`, `peak` (since the last
`reset_peak_memory_stats`), `allocations`, `cached` (freed blocks kept for reuse) and `cache_bound`, the
process's peak resident memory `process_peak`, and `by_category` (params, grads, activations, optimizer ...).
`ms.cuda.memory_stats()` is the GPU's.]],
    example = [==[
local before = ms.memory_stats().current
local x = ms.zeros(1024, 256)
print(ms.memory_stats().current - before >= 1024 * 256 * 4) --> true
]==] },
  { name = "ms.reset_peak_memory_stats",
    sig = "ms.reset_peak_memory_stats() -> nil",
    doc = [[Sets the engine's peak (`memory_stats().peak`) to the current amount, to measure the peak of one
phase (a step, an epoch). `process_peak` is the operating system's and is not reset.]],
    example = [==[
ms.reset_peak_memory_stats()
local s = ms.memory_stats()
print(s.peak == s.current)                 --> true
]==] },
  { name = "ms.empty_cache",
    sig = "ms.empty_cache() -> nil",
    doc = [[Returns the engine's cached free CPU blocks to the system (`memory_stats().cached` drops to 0);
the cache refills as tensors are freed. `ms.cuda.empty_cache()` is the GPU's.]],
    example = [==[
do local x <close> = ms.zeros(1024, 1024) end
ms.empty_cache()
print(ms.memory_stats().cached)            --> 0
]==] },
  { name = "ms.perf_counter",
    sig = "ms.perf_counter() -> number",
    doc = [[Seconds from a monotonic clock, for timing (Python's `time.perf_counter`; Lua's `os.clock` counts
the CPU time of every thread). On CUDA, synchronise before reading it.]],
    example = [==[
local t0 = ms.perf_counter()
local y = ms.randn(256, 256):mm(ms.randn(256, 256))
print(ms.perf_counter() - t0 >= 0)         --> true
]==] },
  { name = "ms.save",
    sig = "ms.save(tensors, path, {metadata =, nested =}) -> nil",
    doc = [[Writes a table of named tensors to a safetensors file, atomically (a temporary file renamed over
path), byte-identical to `safetensors.torch.save_file`. Nested tables (a state dict with optimizer state,
numbers, strings, booleans) are flattened to dotted names and rebuilt by `ms.load`. `metadata` is a table of
strings stored in the header.]],
    opts = {{"metadata", "table", "nil", "string keys to string values, stored in the file's header"},
            {"nested", "boolean", "nil", "force or refuse the nested encoding; nil: nested when the table is not flat"}},
    example = [==[
local path = os.tmpname()
ms.save({w = ms.ones(2, 2), step = {n = 3}}, path, {metadata = {epoch = "1"}})
local t, meta = ms.load(path)
print(t.w:sum():item(), t.step.n, meta.epoch) --> 4.0 3 1
os.remove(path)
]==] },
  { name = "ms.load",
    sig = "ms.load(path, {nested =}) -> tensors, metadata",
    doc = [[Reads a safetensors file (moonshard's or PyTorch's): a table of named tensors (or the nested table
`ms.save` flattened) and the header's metadata table. The file is mapped, and pages are read as tensors are
used.]],
    opts = {{"nested", "boolean", "nil", "rebuild nested tables; nil: when the file says it was saved nested"}},
    example = [==[
local path = os.tmpname()
ms.save({bias = ms.tensor({1.5, 2.5})}, path)
local t = ms.load(path)
print(t.bias)                              --> tensor([1.5000, 2.5000])
os.remove(path)
]==] },
  { name = "ms.read_idx",
    sig = "ms.read_idx(path) -> Tensor",
    doc = [[Reads a uint8 IDX file (MNIST's format; raw or `.gz`) into a uint8 tensor of the file's shape,
checking the header against the file's size. The datasets (`datasets.MNIST`) are built on it.]],
    example = [==[
local path = os.tmpname()
local f = assert(io.open(path, "wb"))
f:write(string.pack(">I4I4I4", 0x0802, 2, 3), "\1\2\3\4\5\6"); f:close()
print(ms.read_idx(path))                   --> tensor([[1, 2, 3], [4, 5, 6]], dtype=torch.uint8)
os.remove(path)
]==] },
  { name = "ms.spawn",
    sig = "ms.spawn(main, nprocs, ...) -> main's results",
    doc = [[`torch.multiprocessing.spawn` over MPI ranks: in each rank calls `main(rank, world_size, ...)`
(rank from 0). Where ranks are not running yet and nprocs > 1, this process becomes the launcher: it re-runs the
same command line under `mpirun -np nprocs` and exits with the job's status; with nprocs = 1 it calls main here.]],
    example = [==[
local results = table.pack(ms.spawn(function(rank, world_size, msg)
  return ("%s from rank %d of %d"):format(msg, rank, world_size)
end, 1, "hello"))
print(results[1])                          --> hello from rank 0 of 1
]==] },
}
