-- test_user_mistakes.lua: 20 common user mistakes, each a tiny script run by the executable. Each
-- must end with status != 0 and print one line on stderr that names the script and the line of
-- the mistake (or, for a command-line mistake, the usage and one line naming the option), with
-- the expected words and no traceback. docs/errors.md lists the same mistakes and messages.
local T = require "testing"

local build = os.getenv("MS_BUILD_DIR")
if not build then
  print("skip: MS_BUILD_DIR must name the build directory (ctest sets it)")
  os.exit(77)
end
local exe = build .. "/moonshard"
local root = (arg and arg[0] or ""):match("^(.-)tests/lua/[^/]*$") or ""
local quote = T.quote
local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p " .. quote(dir))

local PRELUDE = 'local ms = require "moonshard"; local nn, optim, F = ms.nn, ms.optim, ms.F\n'

-- Runs `moonshard <args>` in dir (so messages name the script by its short name) with the
-- environment `env`; returns the exit status, stdout and stderr.
local function run(args, env)
  local _, _, code = os.execute(("cd %s && %s %s %s > out 2> err"):format(quote(dir), env or "", quote(exe), args))
  return code, T.read_file(dir .. "/out"), T.read_file(dir .. "/err")
end

-- A mistake: the script's lines after the prelude; `line` is the line (counting the prelude) that
-- the message must name; `want` the words it must hold.
local MISTAKES = {
  { "a method called with '.' instead of ':'", [[
local model = nn.Linear(4, 2)
local y = model.forward(ms.randn(3, 4))]], 3, "Linear.forward: called with '.' instead of ':'", "model:forward(...)" },
  { "an optimizer given the class's parameters", [[
local Net = nn.Module:extend("Net")
function Net:init() self.fc = nn.Linear(4, 2) end
local opt = optim.SGD(Net:parameters(), {lr = 0.1})]], 4, "Net is a class", "local model = Net(...)" },
  { "an optimizer given the module itself", [[
local model = nn.Linear(4, 2)
local opt = optim.SGD(model, {lr = 0.1})]], 3, "SGD: bad argument #1 (params): expected model:parameters(), got a Module" },
  { "a device name PyTorch does not have", [[
local x = ms.zeros(2)
x = x:to("gpu")]], 3, "to: bad argument #2", "\"cuda:N\"", "float32", "got string 'gpu'" },
  { "0-based class labels", [[
local logits = ms.randn(3, 10)
local loss = F.cross_entropy(logits, ms.tensor({0, 1, 2}))]], 3, "target 0 is out of bounds", "1-based", "+ 1" },
  { "a typo in a tensor field", [[
local x = ms.ones(2, {requires_grad = true})
x:sum():backward()
print(x.gard)]], 4, "Tensor has no field 'gard' (did you mean 'grad'?)" },
  { "a table as a tensor index", [==[
local x = ms.zeros(3, 4)
local v = x[{1, 2}]]==], 3, "index: a tensor is indexed by an integer", "got table" },
  { "ms.no_grad() not bound to a scope", [[
local w = ms.ones(2, {requires_grad = true})
ms.no_grad()
local y = (w * 2):sum()]], 4, "ms.no_grad() on line 3", "local _ <close> = ms.no_grad()" },
  { "a typo in a module field", [[
local model = nn.Linear(4, 2)
print(model.wieght)]], 3, "Linear has no field 'wieght' (did you mean 'weight'?)" },
  { "a 0-based dimension", [[
local x = ms.ones(2, 3)
print(x:sum(0))]], 3, "sum: bad argument #2 (dim): expected a dimension in 1..2", "got 0" },
  { "a 0-based index", [[
local x = ms.ones(3)
print(x[0])]], 3, "expected an index in 1..3", "got 0" },
  { "an input of the wrong size for a layer", [[
local model = nn.Linear(4, 2)
local y = model(ms.randn(3, 5))]], 3, "linear" },
  { "a misspelt layer option", [[
local fc = nn.Linear(4, 2, {bais = false})]], 2,
    "Linear: unknown option 'bais' (expected one of: bias, in_features, out_features)" },
  { "a misspelt factory option", [[
local x = ms.zeros(2, 3, {dtyp = "float64"})]], 2,
    "zeros: unknown option 'dtyp' (expected one of: device, dtype, requires_grad)" },
  { "backward called with '.'", [[
local loss = (ms.ones(2, {requires_grad = true}) * 3):sum()
loss.backward()]], 3, "backward: bad argument #1", "got no value" },
  { "backward of a tensor that is not a scalar", [[
local y = ms.ones(2, {requires_grad = true}) * 3
y:backward()]], 3, "backward", "scalar" },
  { "item of a tensor with several elements", [[
local n = ms.ones(2, 3):sum(1):item()]], 2, "item", "2" },
  { "shapes that do not broadcast", [[
local z = ms.ones(2, 3) + ms.ones(4)]], 2, "add", "(2, 3)", "(4,)" },
  { "a view of another size", [[
local v = ms.arange(6):view(4, 2)]], 2, "view", "6" },
  { "loading a file that is not there", [[
local sd = ms.load("no_such_checkpoint.safetensors")]], 2, "no_such_checkpoint.safetensors" },
}

T.test("20 mistakes in scripts: one line naming the script's line, no traceback", function()
  T.eq(#MISTAKES, 20)
  for i, m in ipairs(MISTAKES) do
    local what, body, line = m[1], m[2], m[3]
    local name = ("mistake%02d.lua"):format(i)
    T.write_file(dir .. "/" .. name, PRELUDE .. body .. "\n")
    local code, out, err = run(name)
    T.truthy(code ~= 0, what .. ": exit status 0")
    local first = err:match("^[^\n]*\n$")
    T.truthy(first, what .. ": stderr is not one line: " .. err)
    T.truthy(not err:find("stack traceback", 1, true), what .. ": a traceback: " .. err)
    local at = ("moonshard: %s:%d: "):format(name, line)
    T.truthy(err:sub(1, #at) == at, ("%s: expected the message to start with %q, got %q"):format(what, at, err))
    for j = 4, #m do
      T.truthy(err:find(m[j], 1, true), ("%s: %q lacks %q"):format(what, err, m[j]))
    end
    T.truthy(out == "" or what:find("typo"), what .. ": stdout " .. out)
  end
end)

T.test("MOONSHARD_TRACEBACK=1 keeps the traceback of a mistake", function()
  T.write_file(dir .. "/tb.lua", PRELUDE .. "local x = ms.ones(2)\nprint(x.szie)\n")
  local code, _, err = run("tb.lua", "MOONSHARD_TRACEBACK=1")
  T.truthy(code ~= 0)
  T.truthy(err:find("tb.lua:3: Tensor has no field 'szie' (did you mean 'size'?)", 1, true), err)
  T.truthy(err:find("stack traceback", 1, true), err)
end)

T.test("the user's own errors keep their traceback; the library's message does not hide a bug", function()
  T.write_file(dir .. "/own.lua", "local function f() error('mine') end\nf()\n")
  local code, _, err = run("own.lua")
  T.truthy(code ~= 0)
  T.truthy(err:find("own.lua:1: mine", 1, true) and err:find("stack traceback", 1, true), err)
end)

T.test("a mistake caught by pcall: the message names the caller's line, nested library calls skipped", function()
  T.write_file(dir .. "/pc.lua", PRELUDE .. [[
local model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
local ok, err = pcall(function()
  local y = model(ms.randn(5, 7))
end)
print(err)
]])
  local code, out = run("pc.lua")
  T.eq(code, 0)
  T.truthy(out:find("^pc%.lua:4: "), out)
end)

T.test("command-line mistakes: the usage and one line naming the option", function()
  local mnist = root ~= "" and root .. "scripts/mnist.lua" or "scripts/mnist.lua"
  if not mnist:find("^/") then mnist = os.getenv("PWD") .. "/" .. mnist end
  local code, out, err = run(quote(mnist) .. " --epochs abc")
  T.eq(code, 2); T.eq(out, "")
  T.truthy(err:find("^usage: mnist.lua"), err)
  T.truthy(err:find("\nmnist.lua: error: argument %-%-epochs: [^\n]*'abc'\n$"), err)
  code, _, err = run(quote(mnist) .. " --data " .. quote(dir .. "/nonexistent"))
  T.eq(code, 2)
  T.truthy(err:find("^usage: mnist.lua"), err)
  T.truthy(err:find("\nmnist.lua: error: %-%-data [^\n]*nonexistent: no such directory[^\n]*\n$"), err)
  T.truthy(not err:find("traceback", 1, true), err)
end)

-- ---- the footguns, in this process -----------------------------------------------------------------

local ms = require "moonshard"

T.test("a bare ms.no_grad() is an error and changes nothing; scopes and the function form work", function()
  local ok, err = pcall(function()
    ms.no_grad()
    return 1
  end)
  T.truthy(not ok and err:find("local _ <close> = ms.no_grad()", 1, true), tostring(err))
  T.eq(ms.is_grad_enabled(), true)
  ok, err = pcall(function()
    ms.enable_grad()
  end)
  T.truthy(not ok and err:find("ms.enable_grad() on line", 1, true), tostring(err))
  do
    local _ <close> = ms.no_grad()
    T.eq(ms.is_grad_enabled(), false)
    do
      local _ <close> = ms.enable_grad()
      T.eq(ms.is_grad_enabled(), true)
    end
    T.eq(ms.is_grad_enabled(), false)
  end
  T.eq(ms.is_grad_enabled(), true)
  for _ = 1, 3 do local _ <close> = ms.no_grad() end
  local opened, scope = pcall(ms.no_grad) -- opened by C: not checked, the caller holds the scope
  T.truthy(opened and ms.is_grad_enabled() == false)
  getmetatable(scope).__close(scope)
  T.eq(ms.is_grad_enabled(), true)
  T.eq(ms.no_grad(function(a) return ms.is_grad_enabled(), a end, 7), false)
  -- a helper that opens the scope for its caller: the caller's <close> keeps it
  local function eval_scope() return ms.no_grad() end
  local function eval_scope2() local s = ms.no_grad(); return s end
  for _, helper in ipairs({ eval_scope, eval_scope2 }) do
    do
      local _ <close> = helper()
      T.eq(ms.is_grad_enabled(), false)
    end
    T.eq(ms.is_grad_enabled(), true)
  end
  ok, err = pcall(function()
    eval_scope() -- the helper's scope, dropped by its caller
    return 1
  end)
  T.truthy(not ok and err:find("its scope was not kept", 1, true), tostring(err))
  T.eq(ms.is_grad_enabled(), true)
  local held, s2 = pcall(eval_scope) -- handed to C: kept
  T.truthy(held and ms.is_grad_enabled() == false)
  getmetatable(s2).__close(s2)
  T.eq(ms.is_grad_enabled(), true)
  local function hook() end
  debug.sethook(hook, "c")
  do
    local _ <close> = ms.no_grad()
    T.eq(ms.is_grad_enabled(), false)
  end
  T.truthy(debug.gethook() == hook, "the user's hook is put back")
  debug.sethook()
end)

T.test("unknown fields: the user's reads raise, with the nearest name; declared ones read nil", function()
  local x = ms.ones(2, 3)
  T.raises(function() return x.szie end, "Tensor has no field 'szie' (did you mean 'size'?)")
  T.raises(function() return x.nosuchthing end, "Tensor has no field 'nosuchthing'", "called with ':'")
  T.raises(function() return x[{1, 2}] end, "a tensor is indexed by an integer", "got table")
  T.eq(x.shape[2], 3); T.eq(x:size(2), 3)
  local nn = ms.nn
  local Net = nn.Module:extend("Net")
  function Net:init() self.fc1 = nn.Linear(2, 2); self.fc2 = nn.Linear(2, 2); self.scale = nil end
  function Net:forward(v) return self.fc2(self.fc1(v)) * (self.scale or 1) end
  local model = Net()
  T.raises(function() return model.fc3 end, "Net has no field 'fc3' (did you mean 'fc1'?)")
  T.raises(function() return model.parametrs end, "did you mean 'parameters'?")
  T.eq(model.scale, nil)
  function Net:has_norm() return self.norm ~= nil end -- a method probing an optional member
  T.eq(model:has_norm(), false)
  local function probe(m) return m.norm end
  T.eq(probe(model), nil)
  T.eq(model._not_there, nil) -- private names are not checked
  T.eq(model(ms.ones(1, 2)).shape[2], 2)
  T.eq(model.forward(model, ms.ones(1, 2)).shape[2], 2) -- '.' with the module is fine
  T.eq(nn.Linear(3, 4, false).bias, nil)
  T.eq(nn.Conv2d(1, 2, 3, {bias = false}).bias, nil)
  local bn = nn.BatchNorm1d(3, {affine = false, track_running_stats = false})
  T.eq(bn.weight, nil); T.eq(bn.running_mean, nil)
  T.eq(nn.LayerNorm(3, {elementwise_affine = false}).weight, nil)
  T.raises(function() return Net:parameters() end, "Net is a class")
  -- through a wrapper (checkpoint_wrapper here; FSDP's two wrappers share the same lookup): reads
  -- reach the wrapped module, and a typo is still one
  local wrapped = require("moonshard.checkpoint").checkpoint_wrapper(model)
  T.truthy(rawequal(wrapped.fc1, model.fc1))
  T.raises(function() return wrapped.fc3 end, "Net has no field 'fc3' (did you mean 'fc1'?)")
  T.eq(wrapped.scale, nil, "a member declared nil reads nil through the wrapper")
  T.eq(probe(wrapped), nil, "a function handed the wrapper probes freely")
  local plain = require("moonshard.checkpoint").checkpoint_wrapper(nn.Linear(2, 2, false))
  T.eq(plain.bias, nil)
end)

T.test("ms.nn, ms.optim, ms.F and the other library modules resolve on first read", function()
  for field, module in pairs({nn = "nn", optim = "optim", F = "functional", functional = "functional",
                              data = "data", lr_scheduler = "lr_scheduler", datasets = "datasets",
                              transforms = "transforms", samplers = "samplers", fsdp = "fsdp"}) do
    T.truthy(rawequal(ms[field], require("moonshard." .. module)), "ms." .. field)
  end
  local code, out = run([[-e 'local ms = require "moonshard"; print(rawget(ms, "nn") == nil, ms.nn.Linear ~= nil, rawget(ms, "nn") ~= nil)']])
  T.eq(code, 0); T.eq(out, "true\ttrue\ttrue\n")
end)

T.test("a stock lua5.4 loads every library module first, in any order; errors name the user's line", function()
  local so = build .. "/moonshard.so"
  if not os.execute("command -v lua5.4 > /dev/null 2>&1") or not io.open(so) then
    print("skip: no lua5.4 or no moonshard.so")
    return
  end
  local lib = (root:find("^/") and root or os.getenv("PWD") .. "/" .. root) .. "lua"
  local env = ("LUA_CPATH=%s LUA_PATH=%s"):format(quote(build .. "/?.so"), quote(lib .. "/?.lua"))
  local ls = io.popen("cd " .. quote(lib) .. " && ls moonshard/*.lua moonshard/*/*.lua")
  local names = {}
  for path in ls:lines() do names[#names + 1] = path:gsub("%.lua$", ""):gsub("/", ".") end
  ls:close()
  T.truthy(#names >= 25, "modules found: " .. #names)
  local code, out, err
  for _, name in ipairs(names) do
    code, out, err = run(("-e 'io.write(type(require %q))'"):format(name))
    T.eq(code, 0, name .. " in moonshard: " .. err)
    local _, _, c = os.execute(("cd %s && %s lua5.4 -e 'require %q' > out 2> err"):format(quote(dir), env, name))
    T.eq(c, 0, name .. " in lua5.4: " .. T.read_file(dir .. "/err"))
  end
  os.execute(("cd %s && %s lua5.4 -e 'require \"moonshard.optim\"; local ms = require \"moonshard\"; "
    .. "local y = ms.zeros(2, {dtyp = 1})' > out 2> err"):format(quote(dir), env))
  err = T.read_file(dir .. "/err")
  T.truthy(err:find("(command line):1: zeros: unknown option 'dtyp'", 1, true), err)
end)

os.execute("rm -rf " .. quote(dir))
T.finish()
