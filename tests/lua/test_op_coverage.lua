-- test_op_coverage.lua: the plan of test_cuda_op_coverage.lua (op_coverage.lua) covers every op
-- of the engine's tables, on any machine: an op added to a table without a tolerance family, or
-- a new table without a rule, fails here even where no GPU runs the comparison. Every case also
-- runs on the CPU (its inputs and call are valid, floating ops give gradients).
local T = require "testing"
local ms = require "moonshard"
local cov = require "op_coverage"

-- A copy of the op tables (rows shared), so that a mutation touches nothing else.
local function info_copy()
  local out = {}
  for kind, rows in pairs(ms._op_info) do out[kind] = { table.unpack(rows) } end
  return out
end

T.test("every op of every table has cases, in every dtype", function()
  local seen = {}
  for _, c in ipairs(cov.plan()) do seen[c.kind .. " " .. c.name .. " " .. c.dtype] = true end
  local kinds = 0
  for kind, rows in pairs(ms._op_info) do
    kinds = kinds + 1
    T.truthy(#rows > 0, kind)
    for _, row in ipairs(rows) do
      for _, dt in ipairs(cov.DTYPES) do T.truthy(seen[kind .. " " .. row.name .. " " .. dt], kind .. " " .. row.name .. " " .. dt) end
    end
  end
  T.eq(kinds, 5, "unary, binary, activation, reduce and triangle")
  for _, name in ipairs { "log1p", "expm1", "softplus" } do T.truthy(seen["unary " .. name .. " float32"], name) end
end)

T.test("a new op or table without a rule fails the plan, naming it", function()
  local info = info_copy()
  table.insert(info.unary, { name = "frobnicate", dtypes = "floating", domain = "real" })
  T.raises(function() cov.plan(info) end, "unary op frobnicate has no tolerance family")
  info = info_copy()
  table.insert(info.binary, { name = "hypot" })
  T.raises(function() cov.plan(info) end, "binary op hypot has no tolerance family")
  info = info_copy()
  table.insert(info.unary, { name = "log", dtypes = "floating", domain = "below_one" })
  T.raises(function() cov.plan(info) end, "unary op log has domain below_one")
  info = info_copy()
  table.insert(info.triangle, { name = "band", node = "BandBackward0" })
  T.raises(function() cov.plan(info) end, "triangle op band has no tolerance family")
  info = info_copy()
  info.scan = { { name = "cummax" } }
  T.raises(function() cov.plan(info) end, "ms._op_info.scan", "without a rule")
end)

T.test("every family gives its reason; tolerances are exact for integers", function()
  for name, f in pairs(cov.FAMILIES) do
    T.truthy(type(f.why) == "string" and #f.why > 40, name)
    T.truthy(f.fwd >= 0 and f.bwd >= 0 and f.int >= 0, name)
  end
  for kind, map in pairs(cov.FAMILY_OF) do
    for op, family in pairs(map) do T.truthy(cov.FAMILIES[family], kind .. " " .. op .. ": " .. family) end
  end
  local c = { family = "libm", dtype = "float32" }
  T.eq(cov.tolerance(c, "float32"), 8 * 2 ^ -23)
  T.eq(cov.tolerance(c, "float32", true), 64 * 2 ^ -23)
  T.eq(cov.tolerance(c, "int64"), 0)
  T.eq(cov.tolerance({ family = "libm", dtype = "int64" }, "float32"), 2 ^ -23)
end)

T.test("every case runs on the CPU; floating ops with a node give gradients", function()
  local ran, refused, with_grad = 0, 0, 0
  for _, c in ipairs(cov.plan()) do
    local r = cov.run(c, "cpu")
    if r.ok then
      ran = ran + 1
      T.eq(r.y.device, "cpu", c.label)
      if #r.grads > 0 then with_grad = with_grad + 1 end
      T.eq(cov.differ(r.y, r.y, 0), nil, c.label)
    else
      refused = refused + 1
      -- a refusal names the op: the CUDA run must refuse alike (test_cuda_op_coverage)
      T.truthy(r.err:find(c.name, 1, true), c.label .. ": " .. r.err)
      T.truthy(c.dtype == "int64" or c.what == "number", c.label .. " refused: " .. r.err)
    end
  end
  print(("%d cases run on the CPU (%d with gradients), %d refused"):format(ran, with_grad, refused))
  T.truthy(ran > 150 and with_grad > 60, "ran " .. ran .. ", with gradients " .. with_grad)
end)

T.test("differ finds a difference beyond the tolerance, and only then", function()
  local b = ms.tensor({ 1, 2, 1000 }):double()
  T.eq(cov.differ(b + 0, b, 0), nil)
  T.truthy(cov.differ(b + ms.tensor({ 0, 0, 1e-3 }), b, 1e-7):find("[3]", 1, true))
  T.eq(cov.differ(b + ms.tensor({ 0, 0, 1e-3 }), b, 2e-6), nil) -- relative to |b| above 1
  T.eq(cov.differ(ms.tensor({ 0 / 0 }), ms.tensor({ 0 / 0 }), 0), nil)
  T.truthy(cov.differ(b:float(), b, 0):find("dtype"))
  T.truthy(cov.differ(b:view(3, 1), b, 0):find("shape"))
end)

T.finish()
