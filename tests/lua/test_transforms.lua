-- test_transforms.lua: moonshard.transforms. ToTensor and Normalize against values computed by
-- hand in float32, on a sample and on a batch; the fused native pass of a Compose against the
-- same transforms applied one by one (bit for bit); Lambda; repr; and the error messages.
local T = require "testing"
local ms = require "moonshard"
local transforms = require "moonshard.transforms"

local ToTensor, Normalize = transforms.ToTensor, transforms.Normalize
local Lambda, Compose = transforms.Lambda, transforms.Compose

-- v as float32 stores it: the expected results are rounded after every operation as float32
-- arithmetic would (each of these correctly rounded ops gives the same bits computed in double
-- and rounded once).
local function f32(v) return (string.unpack("f", string.pack("f", v))) end

local function shape(x)
  local s = {}
  for i = 1, x:dim() do s[i] = x:size(i) end
  return s
end

local function u8(values) return ms.tensor(values, { dtype = "uint8" }) end

-- every byte value once, as a (16, 16) image
local function all_bytes()
  local rows = {}
  for r = 0, 15 do
    rows[r + 1] = {}
    for c = 0, 15 do rows[r + 1][c + 1] = r * 16 + c end
  end
  return u8(rows)
end

local function flat(x) return x:reshape(-1):tolist() end

-- ---- ToTensor ---------------------------------------------------------------------------------

T.test("ToTensor: uint8 (H, W) -> float32 (1, H, W) in [0, 1]", function()
  local y = ToTensor()(u8({ { 0, 1, 127 }, { 128, 254, 255 } }))
  T.eq(y.dtype, "float32")
  T.same(shape(y), { 1, 2, 3 })
  local want = {}
  for i, v in ipairs({ 0, 1, 127, 128, 254, 255 }) do want[i] = f32(f32(v) / f32(255)) end
  T.same(flat(y), want)
  local all = flat(ToTensor()(all_bytes()))
  for v = 0, 255 do T.eq(all[v + 1], f32(v / 255), "byte " .. v) end
  T.eq(all[1], 0.0)
  T.eq(all[256], 1.0)
end)

T.test("ToTensor: a batch (B, H, W) -> (B, 1, H, W), each sample as alone", function()
  local x = ms.randint(0, 256, { 5, 4, 3 }, { dtype = "uint8" })
  local y = ToTensor()(x)
  T.same(shape(y), { 5, 1, 4, 3 })
  for b = 1, 5 do
    T.truthy(ms.equal(y:select(1, b), ToTensor()(x:select(1, b))), "sample " .. b)
  end
  -- a non-contiguous view reads the same values
  local xt = x:transpose(2, 3)
  T.truthy(ms.equal(ToTensor()(xt), ToTensor()(xt:contiguous())), "transposed input")
  T.same(shape(ToTensor()(ms.zeros(0, 2, 2, { dtype = "uint8" }))), { 0, 1, 2, 2 })
end)

-- ---- Normalize --------------------------------------------------------------------------------

T.test("Normalize: (x - mean[c]) / std[c] on (C, H, W)", function()
  local x = ms.tensor({ { { 0.0, 0.5 } }, { { 1.0, 0.25 } } }) -- (2, 1, 2)
  local y = Normalize({ 0.5, 0.25 }, { 0.5, 2.0 })(x)
  T.eq(y.dtype, "float32")
  T.same(shape(y), { 2, 1, 2 })
  T.same(flat(y), { -1.0, 0.0, 0.375, 0.0 })
  -- one number for every channel, and rounding as float32
  local z = Normalize(0.1307, 0.3081)(ms.tensor({ { { 0.2, 0.9 } } }))
  local function norm(v) return f32(f32(f32(v) - f32(0.1307)) / f32(0.3081)) end
  T.same(flat(z), { norm(0.2), norm(0.9) })
  T.same(flat(Normalize({ 1 }, { 2 })(ms.ones(3, 1, 1))), { 0, 0, 0 }, 0, "one entry broadcasts")
  -- float64 stays float64
  local d = Normalize(0.5, 0.5)(ms.ones(1, 1, 1, { dtype = "float64" }))
  T.eq(d.dtype, "float64")
  T.eq(d:item(), 1.0)
end)

T.test("Normalize: a batch (B, C, H, W) equals each sample alone", function()
  local x = ms.rand(4, 3, 5, 2)
  local n = Normalize({ 0.485, 0.456, 0.406 }, { 0.229, 0.224, 0.225 })
  local y = n(x)
  T.same(shape(y), { 4, 3, 5, 2 })
  for b = 1, 4 do T.truthy(ms.equal(y:select(1, b), n(x:select(1, b))), "sample " .. b) end
end)

-- ---- Compose: fused native pass == one by one -------------------------------------------------

T.test("Compose(ToTensor, Normalize) fused equals the transforms one by one, bit for bit", function()
  local pipes = {
    { Normalize(0.1307, 0.3081) },
    { Normalize({ 0.5 }, { 0.5 }) },
    { Normalize(0.1307, 0.3081), Normalize(-0.25, 3.0) }, -- a chain fuses too
    {},
  }
  local inputs = { all_bytes(), ms.randint(0, 256, { 8, 28, 28 }, { dtype = "uint8" }) }
  for p, norms in ipairs(pipes) do
    local members = { ToTensor(), table.unpack(norms) }
    local c = Compose(members)
    T.truthy(c:native_spec(), "pipeline " .. p .. " is native")
    for k, x in ipairs(inputs) do
      local one_by_one = x
      for _, t in ipairs(members) do one_by_one = t(one_by_one) end
      local fused = c(x)
      T.same(shape(fused), shape(one_by_one))
      T.truthy(ms.equal(fused, one_by_one), ("pipeline %d input %d: fused == separate"):format(p, k))
      T.truthy(ms.equal(fused, ms.transform_batch(x, c:native_spec())), "ms.transform_batch")
    end
  end
end)

T.test("Compose of Normalize alone on float32 fuses; other dtypes run in Lua", function()
  local x = ms.randn(2, 3, 4, 4)
  local a, b = Normalize({ 0.1, 0.2, 0.3 }, { 1.5, 0.5, 2.0 }), Normalize(1.0, 4.0)
  local c = Compose({ a, b })
  T.truthy(ms.equal(c(x), b(a(x))), "float32 fused == separate")
  T.truthy(ms.equal(ms.transform_batch(x, c:native_spec()), b(a(x))))
  local xd = x:double()
  T.truthy(ms.equal(c(xd), b(a(xd))), "float64 through Lua")
  T.eq(c(xd).dtype, "float64")
end)

T.test("native_spec", function()
  T.same(ToTensor():native_spec(), { kind = "to_tensor" })
  local n = Normalize({ 0.5, 0.25 }, { 0.5, 2 }):native_spec()
  T.eq(n.kind, "normalize")
  T.same(n.mean, { 0.5, 0.25 })
  T.same(n.std, { 0.5, 2 })
  local c = Compose({ ToTensor(), Compose({ Normalize(0.1, 0.2) }) }):native_spec()
  T.eq(#c, 2, "nested Compose flattens")
  T.eq(c[1].kind, "to_tensor")
  T.eq(c[2].kind, "normalize")
  T.eq(Lambda(function(x) return x end):native_spec(), nil)
  T.eq(Compose({ ToTensor(), Lambda(function(x) return x end) }):native_spec(), nil)
  T.eq(Compose({ ToTensor(), function(x) return x end }):native_spec(), nil)
  -- a single spec is accepted by transform_batch as well as a list
  local x = all_bytes()
  T.truthy(ms.equal(ms.transform_batch(x, ToTensor():native_spec()), ToTensor()(x)))
  T.truthy(ms.equal(ms.transform_batch(x, {}), x), "an empty pipeline returns the input")
end)

-- ---- Lambda -----------------------------------------------------------------------------------

T.test("Lambda and Lua functions in a Compose", function()
  local x = ms.randint(0, 256, { 3, 4, 4 }, { dtype = "uint8" })
  local double = Lambda(function(t) return t * 2 end)
  T.truthy(ms.equal(double(ms.ones(2)), ms.full({ 2 }, 2)))
  local c = Compose({ ToTensor(), double, Normalize(0.5, 0.5) })
  local want = Normalize(0.5, 0.5)(ToTensor()(x) * 2)
  T.truthy(ms.equal(c(x), want), "Lua path")
  local plain = Compose({ ToTensor(), function(t) return t:flatten(2) end })
  T.same(shape(plain(x)), { 3, 16 })
  T.eq(#c, 3)
  T.eq(Compose({})(x), x, "an empty Compose is the identity")
end)

T.test("repr", function()
  T.eq(tostring(Compose({ ToTensor(), Normalize(0.1307, 0.3081) })),
    "Compose(\n    ToTensor()\n    Normalize(mean=0.1307, std=0.3081)\n)")
  T.eq(tostring(Normalize({ 0.5, 0.5, 0.5 }, { 1, 1, 1 })), "Normalize(mean=(0.5, 0.5, 0.5), std=(1, 1, 1))")
  T.eq(tostring(Normalize({ 0.1307 }, { 0.3081 })), "Normalize(mean=(0.1307,), std=(0.3081,))")
  T.eq(tostring(Lambda(print)), "Lambda()")
end)

-- ---- errors -----------------------------------------------------------------------------------

T.test("errors", function()
  local img = ms.randint(0, 256, { 28, 28 }, { dtype = "uint8" })
  T.raises(function() ToTensor()(ms.rand(28, 28)) end,
    "ToTensor: expected a uint8 image (H, W) or a batch of them (B, H, W), got a float32 tensor of shape (28, 28)")
  T.raises(function() ToTensor()(ms.zeros(2, 2, 2, 2, { dtype = "uint8" })) end, "got a uint8 tensor of shape (2, 2, 2, 2)")
  T.raises(function() ToTensor()({}) end, "ToTensor: expected a tensor, got table")
  T.raises(function() ToTensor(1) end, "ToTensor: takes no arguments")
  -- three channels of mean/std for a one-channel image, in Lua and fused
  local rgb = Normalize({ 0.5, 0.5, 0.5 }, { 0.2, 0.2, 0.2 })
  T.raises(function() rgb(ToTensor()(img)) end,
    "Normalize: mean and std have 3 entries but the input of shape (1, 28, 28) has 1 channel(s)")
  T.raises(function() Compose({ ToTensor(), rgb })(img) end,
    "Normalize: mean and std have 3 entries but the input (28, 28) has 1 channel(s)")
  T.raises(function() Normalize(0.5, 0.5)(ms.rand(28, 28)) end,
    "Normalize: expected a floating tensor of shape (C, H, W) or (B, C, H, W), got a float32 tensor of shape (28, 28)")
  T.raises(function() Normalize(0.5, 0.5)(ms.zeros(1, 2, 2, { dtype = "uint8" })) end, "got a uint8 tensor")
  T.raises(function() Normalize({ 0.5, 0.5 }, { 0.5 }) end, "mean and std must have the same number of entries, got 2 and 1")
  T.raises(function() Normalize(0.5, 0) end, "std[1] evaluated to zero")
  T.raises(function() Normalize(0.5, 1e-50) end, "std[1] evaluated to zero after conversion to float32")
  T.raises(function() Normalize("a", 1) end, "mean must be a number or a non-empty table of numbers")
  T.raises(function() Normalize({ 1, "x" }, { 1, 1 }) end, "mean[2] must be a number")
  T.raises(function() Lambda(3) end, "Lambda: expected a function, got number")
  T.raises(function() Compose(ToTensor()) end, "Compose: expected a table of transforms")
  T.raises(function() Compose({ ToTensor(), 5 }) end, "transforms[2] must be a transform or a function")
  -- ToTensor twice: the second gets float32, in Lua as fused
  T.raises(function() Compose({ ToTensor(), ToTensor() })(img) end, "ToTensor: expected a uint8 image")
  -- spec lists handed to the native pass directly
  T.raises(function() ms.transform_batch(img, { { kind = "resize" } }) end,
    "transform spec 1: 'kind': expected \"to_tensor\" or \"normalize\"")
  T.raises(function() ms.transform_batch(img, { { kind = "normalize", mean = 0.5, std = 0 }, { kind = "to_tensor" } }) end,
    "std[1] is zero")
  T.raises(function() ms.transform_batch(img, { { kind = "normalize", mean = 1, std = 1 }, { kind = "to_tensor" } }) end,
    "spec 2 (to_tensor) must come first")
  T.raises(function() ms.transform_batch(img, { { kind = "normalize", mean = { 1, 2 }, std = { 1 } } }) end,
    "mean and std must have the same number of entries")
  T.raises(function() ms.transform_batch(img, { { kind = "normalize", mean = {}, std = {} } }) end,
    "'mean' must have 1 to 16 entries")
  T.raises(function() ms.transform_batch(img, 3) end, "transform_batch", "specs")
end)

T.finish()
