-- autograd_paths.lua: the autograd, view and nn tests (tests/lua/test_*.lua) under the
-- sanitizer build. They walk every recorded path, in-place ops under autograd included, where the public
-- ops hand tensors between the native layer, the record helpers and the walk; a reference
-- dropped or kept one time too many there shows only as a leak or a use after free, which the
-- plain suite cannot see. Each test runs as its own process (they end with os.exit) under the
-- same interpreter and sanitizer options; any failure or report fails this program.
local TESTS = {"test_autograd", "test_grad_ops", "test_grad_views", "test_grad_buffers", "test_views",
               "test_indexing", "test_index_select", "test_select_ops", "test_nn", "test_nn_ops", "test_nn_half", "test_nn_lowp", "test_conv",
               "test_conv_bf16", "test_matmul_half"}

-- arg[-1] is the interpreter running this file: the sanitizer build under scripts/sanitize.sh.
local exe = arg[-1]
local failed = 0
for _, name in ipairs(TESTS) do
  local cmd = ("'%s' tests/lua/%s.lua > /dev/null"):format(exe, name)
  local ok, how, code = os.execute(cmd)
  if not ok then
    failed = failed + 1
    io.stderr:write(("autograd_paths: %s failed (%s %s)\n"):format(name, how, tostring(code)))
  end
end
print(("autograd_paths: %d of %d tests clean"):format(#TESTS - failed, #TESTS))
os.exit(failed == 0 and 0 or 1)
