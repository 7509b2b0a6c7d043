-- test_cuda_nogpu.lua: a machine with no usable GPU (or a build without CUDA): ms.cuda says so,
-- every request for a device raises a clear error naming why, and CPU work is unaffected.
-- Skipped (77) where a GPU is usable: tests/lua/test_cuda_ops.lua covers that side.
local T = require "testing"
local ms = require "moonshard"

if ms.cuda.is_available() then
  print("a CUDA device is available: the no-GPU behaviour is not testable here")
  os.exit(77)
end

local reason = ms.cuda.unavailable_reason()

T.test("ms.cuda answers without a device, and says why", function()
  T.eq(ms.cuda.is_available(), false)
  T.eq(ms.cuda.device_count(), 0)
  T.truthy(type(reason) == "string" and #reason > 10, "a reason is given")
  -- a build with CUDA names the driver or the device; one without says so
  T.truthy(reason:find("driver", 1, true) or reason:find("device", 1, true) or
           reason:find("built without CUDA", 1, true), reason)
  ms.cuda.empty_cache() -- nothing to free: a no-op, as in PyTorch
end)

T.test("every GPU request raises a clear error", function()
  local x = ms.arange(6):float():view(2, 3)
  T.raises(function() return x:cuda() end, "to", "cuda:0", "CUDA is not available", reason)
  T.raises(function() return x:cuda(1) end, "cuda:1", "not available")
  T.raises(function() return x:to("cuda:1") end, "to", "cuda:1", "not available")
  T.raises(function() return x:to("cuda") end, "to", "cuda:0", "not available")
  T.raises(function() return x:to({ device = "cuda" }) end, "not available")
  T.raises(function() return x:to(0) end, "cuda:0", "not available")
  T.raises(function() return ms.zeros(2, { device = "cuda" }) end, "zeros", "option 'device'", "not available")
  T.raises(function() return ms.randn(2, { device = "cuda:0" }) end, "randn", "not available")
  T.raises(function() return ms.cuda.Event({ enable_timing = true }) end, "Event", "not available")
  T.raises(function() ms.cuda.set_device(0) end, "set_device", "not available")
  T.raises(function() ms.cuda.synchronize() end, "synchronize", "not available")
  T.raises(function() ms.cuda.current_device() end, "current_device", "not available")
  T.raises(function() return ms.cuda.memory_allocated() end, "not available")
  T.raises(function() return ms.cuda.max_memory_allocated(0) end, "not available")
  T.raises(function() return ms.cuda.get_device_name(0) end, "not available")
  T.raises(function() return x:to("gpu") end, "to", "#2")
  T.raises(function() return x:cuda("cpu") end, "cuda", "a CUDA device")
  T.raises(function() return ms.cuda.Event({ enable_timin = true }) end, "Event", "enable_timin")
end)

T.test("CPU tensors are unaffected: device fields, moves to the CPU, printing", function()
  local x = ms.arange(6):float():view(2, 3)
  T.eq(x.device, "cpu")
  T.eq(x.is_cuda, false)
  local c = x:cpu()
  T.eq(c.device, "cpu")
  T.same(c:tolist(), x:tolist())
  T.eq(x:to({ device = "cpu", dtype = "float64" }).dtype, "float64")
  T.eq(ms.zeros_like(x).device, "cpu")
  T.eq(tostring(x), "tensor([[0., 1., 2.],\n        [3., 4., 5.]])")
  -- a gradient flows through a (no-op) move to the CPU
  local w = ms.ones(3, { requires_grad = true })
  local y = (w:cpu() * 2):sum()
  y:backward()
  T.same(w.grad:tolist(), { 2, 2, 2 })
  -- ops and their results are what they always were
  T.same((x + 1):sum(2):tolist(), { 6, 15 })
  T.same(x:mm(x:t()):tolist(), { { 5, 14 }, { 14, 50 } })
end)

T.finish()
