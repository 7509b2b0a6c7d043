-- The layer rules of docs/architecture.md, checked on the files of engine/ and kernels/ so they
-- cannot silently regress (issue 18). Plain Lua 5.4 (lua5.4 or build/moonshard runs it).
--
--   layers.lua [--root DIR]     check the tree (default: the current folder); exit 1 on a violation
--   layers.lua --self-test      the checker on a made-up tree, one violation per rule
--
-- An include rule follows includes through headers: a file breaks it when any header it pulls
-- in, directly or not, includes what the rule forbids; the message shows the shortest chain.

local tree_lib = dofile(((arg and arg[0] or ""):match("^(.*)/") or ".") .. "/source_tree.lua")

-- A set of paths: entries ending in '/' are folders (everything under them), others files.
local function paths(list)
  return function(f)
    for _, p in ipairs(list) do
      if f == p or (p:sub(-1) == "/" and f:sub(1, #p) == p) then return true end
    end
    return false
  end
end

local function both(a, b) return function(f) return a(f) or b(f) end end
local function except(a, b) return function(f) return a(f) and not b(f) end end

local PUB = "engine/include/moonshard/"
local engine = paths({"engine/"})
local kernels = paths({"kernels/"})
-- autograd: the graph-recording public ops, nodes, grad mode and the backward walk
local autograd = paths({"engine/src/autograd/", PUB .. "autograd.h"})
-- fsdp: a client above autograd (registers its hooks through moonshard/autograd.h)
local fsdp = paths({"engine/src/fsdp/", PUB .. "fsdp.h", PUB .. "fsdp_runtime.h"})
-- the umbrella header a host program includes: every layer, by design
local umbrella = paths({PUB .. "moonshard.h"})
-- the native layer: compute only, below autograd
local native = paths({"engine/src/native/", "engine/src/nn/"})
-- the tensor core (and the headers that are its face)
local core = paths({
  "engine/src/tensor.c", "engine/src/storage.c", "engine/src/memory.c", "engine/src/dtype.c",
  "engine/src/tensor_iter.c", "engine/src/tensor_device.c", "engine/src/tensor_element.c",
  "engine/src/block_cache.c", "engine/src/error.c", "engine/src/random.c", "engine/src/meta_log.c",
  "engine/src/tensor_internal.h", "engine/src/tensor_iter.h", "engine/src/block_cache.h",
  "engine/src/random_state.h", "engine/src/meta_log.h",
  PUB .. "tensor_core.h", PUB .. "storage.h", PUB .. "memory.h", PUB .. "dtype.h", PUB .. "error.h",
  PUB .. "export.h", PUB .. "checked.h", PUB .. "op_types.h", PUB .. "op_list.h", PUB .. "nn_types.h",
})
-- the public headers whose ops record graphs (tensor.h: views and copies record theirs)
local recording = both(autograd, both(fsdp, paths({
  PUB .. "ops.h", PUB .. "nn_ops.h", PUB .. "nn_conv.h", PUB .. "tensor.h", PUB .. "moonshard.h",
  PUB .. "optim.h",
})))
-- the only engine header kernels/ may include (macros only)
local op_list = paths({PUB .. "op_list.h"})
-- the only kernels/ headers the engine may include
local kernel_face = paths({"kernels/kernels.h", "kernels/kernel_table.h"})
local LUA_HEADERS = {["lua.h"] = true, ["lauxlib.h"] = true, ["lualib.h"] = true,
                     ["luaconf.h"] = true, ["lua.hpp"] = true}

-- Each include rule: which files it governs, and whether one #include (its name, and its target
-- when it resolves to a file of the tree) is forbidden to them.
local INCLUDE_RULES = {
  {id = "autograd-above", files = except(engine, both(autograd, both(fsdp, umbrella))),
   says = "no file of engine/ outside engine/src/autograd/ and engine/src/fsdp/ includes an autograd header",
   forbids = function(inc) return inc.target and autograd(inc.target) end},
  {id = "native-below-autograd", files = both(native, core),
   says = "the native layer (engine/src/native/, engine/src/nn/) and the tensor core include no "
     .. "graph-recording header (ops.h, nn_ops.h, nn_conv.h, tensor.h, optim.h, autograd, fsdp)",
   forbids = function(inc) return inc.target and recording(inc.target) end},
  {id = "kernels-below-engine", files = kernels,
   says = "kernels/ includes no engine header but moonshard/op_list.h",
   forbids = function(inc)
     if inc.target then return engine(inc.target) and not op_list(inc.target) end
     return inc.name:match("^moonshard/") ~= nil and inc.name ~= "moonshard/op_list.h"
   end},
  {id = "engine-sees-kernels-face", files = engine,
   says = "engine/ includes from kernels/ only kernels/kernels.h and kernels/kernel_table.h",
   forbids = function(inc) return inc.target and kernels(inc.target) and not kernel_face(inc.target) end},
}

-- The Lua rule needs the root, to tell a header of lua/ from a system one.
local function lua_rule(root)
  return {id = "no-lua-below", files = both(engine, kernels),
    says = "engine/ and kernels/ include no Lua header (lua.h, lauxlib.h, ..., or a header of lua/)",
    forbids = function(inc)
      if LUA_HEADERS[inc.name:match("[^/]+$")] then return true end
      return not inc.target and (tree_lib.exists(root .. "/lua/" .. inc.name)
                                 or tree_lib.exists(root .. "/lua/include/" .. inc.name))
    end}
end

-- The shortest chain from f to an #include the rule forbids, as text; nil when there is none.
local function forbidden_chain(tree, f, rule)
  local prev, queue, seen, i = {}, {f}, {[f] = true}, 1
  while queue[i] do
    local v = queue[i]; i = i + 1
    for _, inc in ipairs(tree.includes[v]) do
      if rule.forbids(inc) then
        local path, u = {}, v
        while u do table.insert(path, 1, u); u = prev[u] end
        return ("%s -> %s (line %d of %s)"):format(table.concat(path, " -> "), inc.target or inc.name,
                                                   inc.line, v)
      end
    end
    for _, inc in ipairs(tree.includes[v]) do
      local w = inc.target
      if w and not seen[w] then seen[w] = true; prev[w] = v; queue[#queue + 1] = w end
    end
  end
end

-- Each line of the governed files that calls or declares one of `names` (a name followed by "(").
local function name_hits(tree, files, names, what)
  local out = {}
  for _, f in ipairs(tree.files) do
    if files(f) then
      local n = 0
      for line in (tree.text[f] .. "\n"):gmatch("([^\n]*)\n") do
        n = n + 1
        for name in line:gmatch("%f[%w_]([%a_][%w_]*)%s*%(") do
          if names[name] then out[#out + 1] = ("%s:%d: %s %s"):format(f, n, what, name) end
        end
      end
    end
  end
  return out
end

-- The functions engine/src/autograd/*.c defines (not static): the graph-recording ops and more.
local function autograd_functions(tree)
  local names = {}
  for _, f in ipairs(tree.files) do
    if autograd(f) and not tree_lib.is_header(f) then
      for name in pairs(tree_lib.defined(tree.text[f])) do names[name] = true end
    end
  end
  return names
end

-- Returns the violations found, each a line naming the rule, the file and the chain or line.
local function check(root)
  local tree = tree_lib.scan(root)
  local problems = {}
  local function add(id, says, where) problems[#problems + 1] = ("%s: %s\n    rule %s: %s"):format(id, where, id, says) end
  local rules = {table.unpack(INCLUDE_RULES)}
  rules[#rules + 1] = lua_rule(root)
  for _, rule in ipairs(rules) do
    for _, f in ipairs(tree.files) do
      if rule.files(f) then
        local chain = forbidden_chain(tree, f, rule)
        if chain then add(rule.id, rule.says, chain) end
      end
    end
  end
  local grad_mode = {id = "grad-mode", says = "no file of engine/ outside engine/src/autograd/ switches grad mode"}
  for _, hit in ipairs(name_hits(tree, except(engine, autograd), {ms_grad_set_enabled = true}, "uses")) do
    add(grad_mode.id, grad_mode.says, hit)
  end
  local calls = {id = "native-calls-no-autograd",
    says = "the native layer and the tensor core call no function that engine/src/autograd/ defines"}
  for _, hit in ipairs(name_hits(tree, both(native, core), autograd_functions(tree), "uses autograd's")) do
    add(calls.id, calls.says, hit)
  end
  return problems
end

local function self_test()
  local dir = os.tmpname(); os.remove(dir)
  local function write(path, text)
    assert(os.execute(("mkdir -p '%s/%s'"):format(dir, tree_lib.folder(path))))
    local f <close> = assert(io.open(dir .. "/" .. path, "w")); f:write(text)
  end
  -- a tree that keeps every rule
  write(PUB .. "op_list.h", "#define MS_OPS(X) X(neg)\n")
  write(PUB .. "tensor_core.h", "typedef struct ms_tensor ms_tensor;\n")
  write(PUB .. "tensor.h", '#include "moonshard/tensor_core.h"\nms_tensor *ms_tensor_view(ms_tensor *t);\n')
  write(PUB .. "autograd.h", '#include "moonshard/tensor.h"\nint ms_grad_set_enabled(int on);\n')
  write(PUB .. "ops.h", '#include "moonshard/tensor.h"\nms_tensor *ms_neg(ms_tensor *t);\n')
  write("engine/src/autograd/grad_unary.c", '#include "moonshard/autograd.h"\n#include "moonshard/ops.h"\n'
    .. "ms_tensor *ms_neg(ms_tensor *t) { int p = ms_grad_set_enabled(0); (void)p; return t; }\n")
  write("engine/src/native/native.h", '#include "moonshard/tensor_core.h"\nms_tensor *ms_native_neg(ms_tensor *t);\n')
  write("engine/src/native/unary.c", '#include "native/native.h"\n#include "kernels/kernels.h"\n'
    .. "/* not ms_neg(t): a comment */\nms_tensor *ms_native_neg(ms_tensor *t) { return t; }\n")
  write("engine/src/tensor.c", '#include "moonshard/tensor_core.h"\n')
  write("engine/src/optim/sgd.c", '#include "moonshard/ops.h"\n')
  write("kernels/kernels.h", '#include "moonshard/op_list.h"\n')
  write("kernels/cpu/unary.c", '#include "kernels/kernels.h"\n#include "kernels/cpu/simd.h"\n')
  write("kernels/cpu/simd.h", "#include <immintrin.h>\n")
  local failures = 0
  local function expect(what, want)
    local text = table.concat(check(dir), "\n")
    local ok = (want == nil and text == "") or (want ~= nil and text:find(want, 1, true) ~= nil)
    if not ok then failures = failures + 1 end
    print(("%s: %s"):format(ok and "ok" or "FAILED", what))
    if not ok then print("  got: " .. (text == "" and "no problem" or text)) end
  end
  -- breaks `path` with `text` appended, expects `want`, then puts the file back
  local function breaks(what, path, text, want)
    local f = io.open(dir .. "/" .. path, "rb")
    local old = f and f:read("a") or nil
    if f then f:close() end
    write(path, (old or "") .. text)
    expect(what, want)
    if old then write(path, old) else os.remove(dir .. "/" .. path) end
    expect("... and passes again once mended", nil)
  end
  expect("a tree that keeps the rules passes", nil)
  breaks("a header outside autograd including autograd.h fails", "engine/src/optim/helper.h",
         '#include "moonshard/autograd.h"\n',
         "autograd-above: engine/src/optim/helper.h -> engine/include/moonshard/autograd.h (line 1 of engine/src/optim/helper.h)")
  write("engine/src/optim/helper.h", '#include "moonshard/autograd.h"\n')
  write("engine/src/optim/sgd.c", '#include "moonshard/ops.h"\n#include "optim/helper.h"\n')
  expect("a file reaching autograd.h through a header fails, naming the chain",
         "autograd-above: engine/src/optim/sgd.c -> engine/src/optim/helper.h -> engine/include/moonshard/autograd.h (line 1 of engine/src/optim/helper.h)")
  os.remove(dir .. "/engine/src/optim/helper.h")
  write("engine/src/optim/sgd.c", '#include "moonshard/ops.h"\n')
  expect("... and passes again once mended", nil)
  breaks("switching grad mode outside autograd fails", "engine/src/optim/sgd.c",
         "void step(void) {\n  ms_grad_set_enabled (0);\n}\n",
         "grad-mode: engine/src/optim/sgd.c:3: uses ms_grad_set_enabled")
  breaks("the native layer including ops.h fails", "engine/src/native/native.h",
         '#include "moonshard/ops.h"\n',
         "native-below-autograd: engine/src/native/unary.c -> engine/src/native/native.h -> engine/include/moonshard/ops.h")
  breaks("the tensor core including tensor.h fails", "engine/src/tensor.c",
         '#include "moonshard/tensor.h"\n', "native-below-autograd: engine/src/tensor.c -> engine/include/moonshard/tensor.h")
  breaks("the native layer calling a recording op fails", "engine/src/native/unary.c",
         "ms_tensor *ms_neg(ms_tensor *t);\nstatic ms_tensor *f(ms_tensor *t) { return ms_neg(t); }\n",
         "native-calls-no-autograd: engine/src/native/unary.c:6: uses autograd's ms_neg")
  breaks("kernels including an engine header fails", "kernels/cpu/simd.h", '#include "moonshard/tensor_core.h"\n',
         "kernels-below-engine: kernels/cpu/unary.c -> kernels/cpu/simd.h -> engine/include/moonshard/tensor_core.h")
  breaks("kernels naming an engine header that is not in the tree fails", "kernels/cpu/unary.c",
         '#include "moonshard/dtype.h"\n', "kernels-below-engine: kernels/cpu/unary.c -> moonshard/dtype.h (line 3")
  breaks("op_list.h pulling an engine header into kernels fails", PUB .. "op_list.h", '#include "moonshard/tensor_core.h"\n',
         "kernels-below-engine: kernels/cpu/unary.c -> kernels/kernels.h -> engine/include/moonshard/op_list.h -> engine/include/moonshard/tensor_core.h")
  breaks("the engine including a kernel's private header fails", "engine/src/native/unary.c",
         '#include "kernels/cpu/simd.h"\n', "engine-sees-kernels-face: engine/src/native/unary.c -> kernels/cpu/simd.h")
  breaks("the engine including lua.h fails", "engine/src/optim/sgd.c", "#include <lauxlib.h>\n",
         "no-lua-below: engine/src/optim/sgd.c -> lauxlib.h (line 2 of engine/src/optim/sgd.c)")
  write("lua/include/moonshard/embed.h", "")
  breaks("the engine including a header of lua/ fails", "engine/src/tensor.c", '#include "moonshard/embed.h"\n',
         "no-lua-below: engine/src/tensor.c -> moonshard/embed.h")
  os.execute(("rm -rf '%s'"):format(dir))
  return failures == 0
end

local args, root, test = {...}, ".", false
local i = 1
while args[i] do
  if args[i] == "--root" and args[i + 1] then root = args[i + 1]; i = i + 1
  elseif args[i] == "--self-test" then test = true
  else io.stderr:write("layers: unknown argument " .. args[i] .. "\n"); os.exit(2) end
  i = i + 1
end
if test then os.exit(self_test() and 0 or 1) end
local problems = check(root)
for _, p in ipairs(problems) do io.stderr:write(p, "\n") end
if #problems > 0 then
  io.stderr:write(("layers: %d violations of the layer rules (docs/architecture.md)\n"):format(#problems))
  os.exit(1)
end
print(("layers: the %d files of engine/ and kernels/ keep the layer rules"):format(#tree_lib.list_sources(root)))
