-- cuda.lua: the docstrings of ms.cuda (devices, memory statistics, events, CUDA graphs). Device indices are
-- CUDA's own, 0-based as in PyTorch: they name devices, they are not positions in a list.
local DEV = [[`device` is nil (the current device), an index, `"cuda:N"` or a CUDA tensor's device.]]

return {
  title = "CUDA: devices, memory, events, graphs (ms.cuda)",
  {
    name = "ms.cuda.is_available",
    sig = "ms.cuda.is_available() -> boolean",
    doc = [[
Whether a CUDA device can be used: the build has CUDA, a driver new enough is installed and a
device is there. Without one, the same binary runs everything on the CPU, and
`ms.cuda.unavailable_reason()` says why.]],
    example = [[
local device = ms.cuda.is_available() and "cuda" or "cpu"
print(ms.zeros(2, {device = device}):sum():item())   --> 0.0
]],
  },
  {
    name = "ms.cuda.unavailable_reason",
    sig = "ms.cuda.unavailable_reason() -> string or nil",
    doc = [[
Why CUDA cannot be used ("built without CUDA", "no usable NVIDIA driver: ..."), or nil when it
can: for scripts that fall back to the CPU and say so.]],
    example = [[
local why = ms.cuda.unavailable_reason()
print(why == nil or type(why) == "string")   --> true
]],
  },
  {
    name = "ms.cuda.device_count",
    sig = "ms.cuda.device_count() -> integer",
    doc = [[The number of usable CUDA devices; 0 without CUDA.]],
    example = [[
print(ms.cuda.device_count() >= 0)   --> true
]],
  },
  {
    name = "ms.cuda.set_device",
    sig = "ms.cuda.set_device(device)",
    doc = [[
Makes `device` the current CUDA device of this thread: where `"cuda"` (no index) and
`t:cuda()` put tensors. ]] .. DEV .. [[ Raises without CUDA.]],
    example = [[
ms.cuda.set_device(0)
print(ms.cuda.current_device())   --> 0
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.current_device",
    sig = "ms.cuda.current_device() -> integer",
    doc = [[The index of the current CUDA device (0-based, as PyTorch). Raises without CUDA.]],
    example = [[
print(ms.cuda.current_device())   --> 0
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.get_device_name",
    sig = "ms.cuda.get_device_name(device) -> string",
    doc = [[The device's name ("NVIDIA H100 80GB HBM3", ...). ]] .. DEV,
    example = [[
print(type(ms.cuda.get_device_name()))   --> string
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.synchronize",
    sig = "ms.cuda.synchronize(device)",
    doc = [[
Waits until all work queued on the device has finished: needed before reading a wall-clock time
around GPU work. ]] .. DEV,
    example = [[
local x = ms.randn(256, 256, {device = "cuda"})
local t0 = ms.perf_counter()
local y = x:mm(x)
ms.cuda.synchronize()
print(ms.perf_counter() - t0 > 0)   --> true
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.empty_cache",
    sig = "ms.cuda.empty_cache()",
    doc = [[
Returns the cached, unused device blocks of the caching allocator to the driver (what
`memory_reserved` counts beyond `memory_allocated`). Live tensors are untouched; without CUDA it
does nothing.]],
    example = [[
ms.cuda.empty_cache()
print("ok")   --> ok
]],
  },
  {
    name = "ms.cuda.memory_allocated",
    sig = "ms.cuda.memory_allocated(device) -> integer",
    doc = [[Bytes of live tensors on the device. ]] .. DEV,
    example = [[
local before = ms.cuda.memory_allocated()
local x = ms.zeros(1024, {device = "cuda"})
print(ms.cuda.memory_allocated() - before >= 4096)   --> true
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.max_memory_allocated",
    sig = "ms.cuda.max_memory_allocated(device) -> integer",
    doc = [[The peak of `memory_allocated` since start or the last `reset_peak_memory_stats`. ]] .. DEV,
    example = [[
ms.cuda.reset_peak_memory_stats()
local x = ms.zeros(1024, {device = "cuda"})
print(ms.cuda.max_memory_allocated() >= 4096)   --> true
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.memory_reserved",
    sig = "ms.cuda.memory_reserved(device) -> integer",
    doc = [[
Bytes the caching allocator holds from the driver: live tensors plus cached blocks ready for
reuse (`empty_cache` returns those). ]] .. DEV,
    example = [[
local x = ms.zeros(1024, {device = "cuda"})
print(ms.cuda.memory_reserved() >= ms.cuda.memory_allocated())   --> true
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.max_memory_reserved",
    sig = "ms.cuda.max_memory_reserved(device) -> integer",
    doc = [[The peak of `memory_reserved` since start or the last `reset_peak_memory_stats`. ]] .. DEV,
    example = [[
local x = ms.zeros(1024, {device = "cuda"})
print(ms.cuda.max_memory_reserved() >= ms.cuda.memory_reserved())   --> true
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.memory_stats",
    sig = "ms.cuda.memory_stats(device) -> table",
    doc = [[
The device's memory statistics in bytes: `current`, `peak`, `allocations`, `cached`,
`reserved`, `reserved_peak`, `by_category` (bytes per kind of use) and `device` ("cuda:0"). The
CPU's are `ms.memory_stats()`. ]] .. DEV,
    example = [[
local s = ms.cuda.memory_stats()
print(s.device, s.current <= s.peak)   --> cuda:0	true
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.reset_peak_memory_stats",
    sig = "ms.cuda.reset_peak_memory_stats(device)",
    doc = [[Starts the peaks (`max_memory_allocated`, `max_memory_reserved`) again from the current values. ]] .. DEV,
    example = [[
ms.cuda.reset_peak_memory_stats()
print(ms.cuda.max_memory_allocated() == ms.cuda.memory_allocated())   --> true
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.pinned_memory_stats",
    sig = "ms.cuda.pinned_memory_stats() -> {live =, cached =}",
    doc = [[
Bytes of page-locked host memory (what `t:pin_memory()` and FSDP's `cpu_offload` use): `live`
in use, `cached` kept for reuse, all devices together. Zeros without CUDA.]],
    example = [[
local s = ms.cuda.pinned_memory_stats()
print(s.live >= 0, s.cached >= 0)   --> true	true
]],
  },
  {
    name = "ms.cuda.get_rng_state",
    sig = "ms.cuda.get_rng_state() -> Tensor",
    doc = [[
The random generator's state as a uint8 tensor, for checkpoints: `set_rng_state` with it replays
the same numbers. The CPU and CUDA draw from one Philox generator, so this is the state of
`ms.get_rng_state()` as well.]],
    example = [[
local state = ms.cuda.get_rng_state()
local a = ms.rand(3)
ms.cuda.set_rng_state(state)
print(ms.equal(a, ms.rand(3)))   --> true
]],
  },
  {
    name = "ms.cuda.set_rng_state",
    sig = "ms.cuda.set_rng_state(state)",
    doc = [[Restores a state that `ms.cuda.get_rng_state()` returned.]],
    example = [[
local state = ms.cuda.get_rng_state()
local a = ms.randn(2)
ms.cuda.set_rng_state(state)
print(ms.equal(a, ms.randn(2)))   --> true
]],
  },
  {
    name = "ms.cuda.Event",
    sig = "ms.cuda.Event({enable_timing = false, blocking = false}) -> Event",
    doc = [[
A CUDA event (PyTorch's `torch.cuda.Event`): a mark in the device's work queue, to time GPU work
or wait for it. `interprocess` events are not supported. Released by `ev:release()`, `<close>` or
the collector.]],
    opts = {
      { "enable_timing", "boolean", "false", "record times, for elapsed_time" },
      { "blocking", "boolean", "false", "accepted for PyTorch's sake: synchronize blocks either way" },
    },
    example = [[
local start, stop = ms.cuda.Event{enable_timing = true}, ms.cuda.Event{enable_timing = true}
local x = ms.randn(512, 512, {device = "cuda"})
start:record(); local y = x:mm(x); stop:record()
stop:synchronize()
print(start:elapsed_time(stop) >= 0)   --> true
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.Event:record",
    sig = "ev:record() -> ev",
    doc = [[Queues the event on the current device's stream: it completes when the work queued before it has.]],
    example = [[
local ev = ms.cuda.Event()
ev:record()
ev:synchronize()
print(ev:query())   --> true
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.Event:synchronize",
    sig = "ev:synchronize()",
    doc = [[Waits until the event has completed (the work queued before its `record`).]],
    example = [[
local ev = ms.cuda.Event():record()
ev:synchronize()
print(ev:query())   --> true
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.Event:query",
    sig = "ev:query() -> boolean",
    doc = [[Whether the event has completed, without waiting.]],
    example = [[
local ev = ms.cuda.Event():record()
ev:synchronize()
print(ev:query())   --> true
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.Event:elapsed_time",
    sig = "start:elapsed_time(stop) -> number",
    doc = [[
Milliseconds from `start`'s record to `stop`'s (PyTorch's `Event.elapsed_time`). Both need
`enable_timing = true`, both recorded, and `stop` completed.]],
    example = [[
local a, b = ms.cuda.Event{enable_timing = true}, ms.cuda.Event{enable_timing = true}
a:record(); b:record(); b:synchronize()
print(a:elapsed_time(b) >= 0)   --> true
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.Event:release",
    sig = "ev:release()",
    doc = [[Frees the event now (the collector and `<close>` do it too); using it afterwards is an error.]],
    example = [[
local ev <close> = ms.cuda.Event()   -- released at the end of the scope
ev:record()
print(tostring(ev):find("Event") ~= nil)   --> true
]],
    needs = "cuda",
  },

  -- ---- CUDA graphs (docs/cuda-graphs.md) ----
  {
    name = "ms.cuda.make_graphed_step",
    sig = "ms.cuda.make_graphed_step(fn, {warmup = 3, enabled = true, max_graphs = 8}) -> step",
    doc = [[
A function that runs `fn` (a training step) as a CUDA graph (in the spirit of PyTorch's
`make_graphed_callables`): calls whose arguments have the same signature (each tensor's device,
dtype and shape; every other argument's value) run `fn` eagerly `warmup` times on the graph's
side stream, then capture `fn` once into a graph and replay it from then on, one launch a step.
A replay copies the call's tensors into the step's static inputs and returns the outputs of the
capture: the same tensors each call, overwritten by the next replay (clone one to keep it).
A new signature (another batch size, another learning rate passed as an argument) warms up and
is captured on its own; at most `max_graphs` signatures are kept, the least recently used one
giving its memory back. Host code inside `fn` runs only while capturing: what changes between
steps must be a tensor argument or a replay hook (`ms.cuda.current_graph():add_replay_hook`).
Dropout draws fresh masks each replay, the ones the eager steps would draw. A copy to the host
(`item()`, `tolist()`, printing) or a synchronize inside `fn` fails the capture with an error
naming it. On CPU tensors, without a GPU or with `enabled = false`, `fn` runs eagerly at every
call, with exactly the eager results.]],
    opts = {
      { "warmup", "integer", "3", "eager calls of a signature before it is captured (0: capture at once)" },
      { "enabled", "boolean", "true", "false: always eager (scripts' --no-cuda-graphs)" },
      { "max_graphs", "integer", "8", "signatures (graphs) kept at once" },
    },
    example = [[
local w = ms.ones(3)
local step = ms.cuda.make_graphed_step(function(x) return (x * w):sum() end, {warmup = 1})
print(step(ms.full(3, 2.0)):item(), step(ms.ones(3)):item())   --> 6.0 3.0
]],
  },
  {
    name = "ms.cuda.CUDAGraph",
    sig = "ms.cuda.CUDAGraph() -> CUDAGraph",
    doc = [[
A CUDA graph (PyTorch's `torch.cuda.CUDAGraph`) on the current device: `capture_begin` ...
`capture_end` records the work queued in between (on the device's side stream, joined to the
current stream), `replay` launches all of it again. What the capture allocates comes from the
graph's private memory pool, so every replay writes the same tensors. Released by
`g:release()`, `<close>` or the collector. Raises without CUDA ("CUDA graphs need a CUDA build
and a CUDA device").]],
    example = [[
local x = ms.ones(4, {device = "cuda"})
local g = ms.cuda.CUDAGraph()
g:capture_begin(); local y = x * 2; g:capture_end()
x:fill_(5); g:replay()
print(y:sum():item())   --> 40.0
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.CUDAGraph:capture_begin",
    sig = "g:capture_begin()",
    doc = [[
Starts capturing this thread's work on g's device into g (which must be empty: `reset` it
first). Captures do not nest. Until `capture_end`, nothing runs: the work is recorded; a copy to
the host or a synchronize raises instead.]],
    example = [[
local g = ms.cuda.CUDAGraph()
g:capture_begin(); print(ms.cuda.is_current_stream_capturing()); g:capture_end()   --> true
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.CUDAGraph:capture_end",
    sig = "g:capture_end()",
    doc = [[
Ends g's capture and makes it replayable. A capture that failed (an operation CUDA cannot record)
raises saying why and leaves g empty; the thread's stream is restored either way.]],
    example = [[
local g = ms.cuda.CUDAGraph()
g:capture_begin(); g:capture_end()
print(g:is_captured())   --> true
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.CUDAGraph:replay",
    sig = "g:replay()",
    doc = [[
Runs g's replay hooks in the order they were added, then queues one launch of the captured work
on the current stream. Random ops inside draw from the generator as the eager work would: each
replay reserves the numbers of one step.]],
    example = [[
local x = ms.zeros(2, {device = "cuda"})
local g = ms.cuda.CUDAGraph()
g:capture_begin(); x:add_(1); g:capture_end()
g:replay(); g:replay()
print(x:sum():item())   --> 4.0
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.CUDAGraph:reset",
    sig = "g:reset()",
    doc = [[Empties g: the capture and its replay hooks are dropped and its memory pool given back.]],
    example = [[
local g = ms.cuda.CUDAGraph()
g:capture_begin(); g:capture_end(); g:reset()
print(g:is_captured())   --> false
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.CUDAGraph:add_replay_hook",
    sig = "g:add_replay_hook(fn)",
    doc = [[
Registers fn(g), called by every `g:replay()` before the launch, in registration order: how host
state that a capture would bake in (an optimizer's step count, learning rate) is refreshed, by
uploading the new values into device memory the captured kernels read. Code being captured finds
its graph through `ms.cuda.current_graph()`. A new capture starts with no hooks.]],
    example = [[
local g, n = ms.cuda.CUDAGraph(), 0
g:capture_begin(); g:capture_end()
g:add_replay_hook(function() n = n + 1 end)
g:replay(); g:replay()
print(n)   --> 2
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.CUDAGraph:is_captured",
    sig = "g:is_captured() -> boolean",
    doc = [[Whether g holds a capture to replay.]],
    example = [[
print(ms.cuda.CUDAGraph():is_captured())   --> false
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.CUDAGraph:release",
    sig = "g:release()",
    doc = [[Frees g now (its capture, side stream and memory pool) rather than at collection.]],
    example = [[
local g = ms.cuda.CUDAGraph()
g:release()
print(tostring(g))   --> cuda.CUDAGraph(released)
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.graph",
    sig = "ms.cuda.graph(g) -> scope",
    doc = [[
Captures a scope into g (PyTorch's `with torch.cuda.graph(g)`): `local _ <close> = ms.cuda.graph(g)`
begins the capture, leaving the scope ends it. Left by an error, the capture is dropped and the
error is the scope's own.]],
    example = [[
local x, g = ms.ones(2, {device = "cuda"}), ms.cuda.CUDAGraph()
local y
do
  local _ <close> = ms.cuda.graph(g)
  y = x + 1
end
g:replay()
print(y:sum():item())   --> 4.0
]],
    needs = "cuda",
  },
  {
    name = "ms.cuda.is_current_stream_capturing",
    sig = "ms.cuda.is_current_stream_capturing() -> boolean",
    doc = [[Whether this thread is capturing a CUDA graph on the current device; false without CUDA.]],
    example = [[
print(ms.cuda.is_current_stream_capturing())   --> false
]],
  },
  {
    name = "ms.cuda.current_graph",
    sig = "ms.cuda.current_graph() -> CUDAGraph or nil",
    doc = [[The graph this thread is capturing, or nil: where captured code registers replay hooks.]],
    example = [[
print(ms.cuda.current_graph())   --> nil
]],
  },
}
