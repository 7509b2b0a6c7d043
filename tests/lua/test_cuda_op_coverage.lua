-- test_cuda_op_coverage.lua: every op of the engine's tables (unary, binary, activation, reduce;
-- the plan is op_coverage.lua's, derived from ms._op_info) on cuda:0 against the CPU on the same
-- data, in float32, float64 and int64: the forward, and the gradients where the op has one,
-- within the tolerance of the op's family (op_coverage.lua gives each family's reason). An op
-- the CPU refuses for a dtype must be refused on the GPU too. Exits 77 (skipped) without a GPU.
local T = require "testing"
local ms = require "moonshard"
local cov = require "op_coverage"

T.need_cuda()

local DEV = "cuda:0"

for _, kind in ipairs { "unary", "binary", "activation", "reduce" } do
  T.test(kind .. " ops: cuda:0 against the CPU, forward and backward", function()
    local compared, refused = 0, 0
    for _, c in ipairs(cov.plan()) do
      if c.kind == kind then
        local want, got = cov.run(c, "cpu"), cov.run(c, DEV)
        if not want.ok then
          refused = refused + 1
          if got.ok then error(c.label .. ": the CPU refuses (" .. want.err .. ") but cuda:0 computes", 0) end
        else
          if not got.ok then error(c.label .. ": cuda:0 raised: " .. got.err, 0) end
          T.eq(got.y.device, DEV, c.label .. " device")
          local d = cov.differ(got.y, want.y, cov.tolerance(c, want.y.dtype))
          if d then error(c.label .. ": " .. d, 0) end
          T.eq(#got.grads, #want.grads, c.label .. " gradients")
          for i, g in ipairs(want.grads) do
            local e = cov.differ(got.grads[i], g, cov.tolerance(c, g.dtype, true))
            if e then error(c.label .. " gradient " .. i .. ": " .. e, 0) end
          end
          compared = compared + 1
        end
      end
    end
    print(("%s: %d cases compared, %d refused on both devices"):format(kind, compared, refused))
    T.truthy(compared > 0, kind)
  end)
end

T.finish()
