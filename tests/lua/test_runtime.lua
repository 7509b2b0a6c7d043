-- test_runtime.lua: the module's process-wide functions: threads, seeding, the monotonic
-- clock, dtype constants and type tests.
local T = require "testing"
local ms = require "moonshard"

T.test("set_num_threads and get_num_threads", function()
  local n = ms.get_num_threads()
  T.truthy(n >= 1)
  ms.set_num_threads(1)
  T.eq(ms.get_num_threads(), 1)
  local a = ms.randn(300, 200)
  local one = a:mm(a:t())
  ms.set_num_threads(2)
  T.eq(ms.get_num_threads(), 2)
  local two = a:mm(a:t())
  T.truthy(ms.allclose(one, two, {rtol = 1e-5, atol = 1e-4}), "results agree across thread counts")
  ms.set_num_threads(n)
  T.raises(function() ms.set_num_threads(0) end, "set_num_threads", "n", "1..1024", "got 0")
  T.raises(function() ms.set_num_threads("x") end, "set_num_threads", "integer")
end)

T.test("MS_NUM_THREADS sets the default", function()
  local exe = os.getenv("MS_BUILD_DIR")
  if not exe then return end
  local p = io.popen(("MS_NUM_THREADS=3 %s/moonshard -e 'print(require(\"moonshard\").get_num_threads())'"):format(exe))
  local out = p:read("a")
  p:close()
  T.eq(out, "3\n")
end)

T.test("manual_seed replays random streams", function()
  ms.manual_seed(42)
  local a, b = ms.rand(5), ms.randn(3, 3)
  ms.manual_seed(42)
  T.truthy(ms.equal(a, ms.rand(5)))
  T.truthy(ms.equal(b, ms.randn(3, 3)))
  T.eq(ms.initial_seed(), 42)
  T.truthy(not ms.equal(ms.rand(5), a))
end)

T.test("perf_counter is monotonic seconds", function()
  local t0 = ms.perf_counter()
  local t1 = ms.perf_counter()
  T.eq(math.type(t0), "float")
  T.truthy(t1 >= t0)
end)

T.test("dtype constants and is_tensor", function()
  T.eq(ms.float32, "float32")
  T.eq(ms.float64, "float64")
  T.eq(ms.double, "float64")
  T.eq(ms.long, "int64")
  T.eq(ms.zeros(2, {dtype = ms.half}).dtype, "float16")
  T.truthy(ms.is_tensor(ms.zeros(1)))
  T.truthy(not ms.is_tensor({}))
  T.eq(type(ms.__version__), "string")
end)

T.test("ms.Tensor is the method table and can be extended from Lua", function()
  function ms.Tensor.double_it(t) return t * 2 end
  T.same(ms.tensor({1, 2}):double_it():tolist(), {2, 4})
  ms.Tensor.double_it = nil
end)

T.finish()
