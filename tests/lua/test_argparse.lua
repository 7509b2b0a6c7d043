-- test_argparse.lua: moonshard.argparse, the parser of every script: defaults, both option forms,
-- every kind of usage error (in-process with exit_on_error = false), the help text, and, through
-- the executable, the exit statuses, the one-line error after the usage, and no traceback.
local T = require "testing"
local argparse = require "moonshard.argparse"

local function seed_parser(opts)
  opts = opts or {}
  local p = argparse.ArgumentParser{prog = "mnist.lua", description = "PyTorch MNIST Example",
                                    exit_on_error = opts.exit_on_error or false}
  p:add_argument("--batch-size", {type = "int", default = 64, min = 1, metavar = "N",
                                  help = "input batch size for training"})
  p:add_argument("--lr", {type = "float", default = 1.0, metavar = "LR", help = "learning rate"})
  p:add_argument("--no-cuda", {action = "store_true", help = "disables CUDA training"})
  p:add_argument("--no-download", {action = "store_false", dest = "download", help = "never fetch"})
  p:add_argument("--mixed-precision", {choices = {"none", "bfloat16", "float16"}, default = "none",
                                       help = "FSDP mixed precision"})
  p:add_argument("--data", {metavar = "DIR", help = "where MNIST/raw is"})
  p:add_argument("root", {nargs = "?", default = "data", help = "a positional"})
  return p
end

local function parse(...) return seed_parser():parse_args({...}) end

-- The one-line message the parser raises for argv.
local function fails(want, ...)
  local argv = {...}
  local ok, err = pcall(function() return seed_parser():parse_args(argv) end)
  T.truthy(not ok, "no error for " .. table.concat(argv, " "))
  T.eq(err, want)
end

T.test("defaults: typed, flags false, store_false true, positional default", function()
  local a = parse()
  T.eq(math.type(a.batch_size), "integer"); T.eq(a.batch_size, 64)
  T.eq(math.type(a.lr), "float"); T.eq(a.lr, 1.0)
  T.eq(a.no_cuda, false); T.eq(a.download, true)
  T.eq(a.mixed_precision, "none"); T.eq(a.data, nil); T.eq(a.root, "data")
end)

T.test("--opt value, --opt=value, the last one wins, negative values, --", function()
  local a = parse("--batch-size", "32", "--lr=0.5", "--no-cuda", "--no-download", "--mixed-precision=bfloat16", "x")
  T.eq(a.batch_size, 32); T.eq(a.lr, 0.5); T.eq(a.no_cuda, true); T.eq(a.download, false)
  T.eq(a.mixed_precision, "bfloat16"); T.eq(a.root, "x")
  a = parse("--batch-size=8", "--batch-size", "9", "--lr", "-2.5", "--data=a=b")
  T.eq(a.batch_size, 9); T.eq(a.lr, -2.5); T.eq(a.data, "a=b")
  T.eq(parse("--batch-size", "2e3").batch_size, 2000) -- a float that is an integer
  T.eq(parse("--", "--no-cuda").root, "--no-cuda")
  T.eq(parse("--data=").data, "")
end)

T.test("every usage error is one line, in argparse's words", function()
  fails("unrecognized arguments: --epochs", "--epochs", "3")
  fails("unrecognized arguments: -x", "-x")
  fails("argument --batch-size: expected one argument", "--batch-size")
  fails("argument --batch-size: expected one argument", "--batch-size", "--no-cuda")
  fails("argument --batch-size: invalid int value: 'two'", "--batch-size", "two")
  fails("argument --batch-size: invalid int value: '1.5'", "--batch-size=1.5")
  fails("argument --batch-size: must be at least 1, got 0", "--batch-size", "0")
  fails("argument --lr: invalid float value: 'x'", "--lr", "x")
  fails("argument --lr: invalid float value: 'nan'", "--lr", "nan")
  fails("argument --lr: invalid float value: '1e999'", "--lr", "1e999")
  fails("argument --mixed-precision: invalid choice: 'fp8' (choose from 'none', 'bfloat16', 'float16')",
        "--mixed-precision", "fp8")
  fails("argument --no-cuda: ignored explicit argument '1'", "--no-cuda=1")
  fails("unrecognized arguments: b c", "a", "b", "c")
end)

T.test("required arguments, custom types and their string defaults", function()
  local p = argparse.ArgumentParser{prog = "p", exit_on_error = false}
  local function list(s)
    local out = {}
    for w in (s .. ","):gmatch("([^,]*),") do
      local n = math.tointeger(tonumber(w))
      if not n then return nil, "integers separated by commas" end
      out[#out + 1] = n
    end
    return out
  end
  p:add_argument("--threads", {type = list, default = "1,2"})
  p:add_argument("--name", {required = true})
  p:add_argument("src", {})
  T.raises(function() p:parse_args({}) end, "the following arguments are required: src, --name")
  local a = p:parse_args({"s", "--name", "n"})
  T.same(a.threads, {1, 2}) -- the default went through the type
  T.same(p:parse_args({"s", "--name=n", "--threads=4"}).threads, {4})
  T.eq(T.raises(function() p:parse_args({"s", "--name=n", "--threads=4,x"}) end),
       "argument --threads: invalid value: '4,x' (integers separated by commas)")
  T.raises(function() p:parse_args({"s", "--name", "n", 5}) end, "argument 4 is a number, not a string")
end)

T.test("declaration mistakes are errors at add_argument", function()
  local p = argparse.ArgumentParser{prog = "p"}
  T.raises(function() p:add_argument("--a", {type = "integer"}) end, "add_argument(\"--a\")", "type must be")
  T.raises(function() p:add_argument("--a", {action = "count"}) end, "unknown action \"count\"")
  T.raises(function() p:add_argument("-a", {}) end, "name must be")
  T.raises(function() p:add_argument("x", {action = "store_true"}) end, "a flag must start with --")
  p:add_argument("--a", {})
  T.raises(function() p:add_argument("--a", {}) end, "option --a declared twice")
  T.raises(function() p:parse_args("--a") end, "argv must be a table")
end)

T.test("--help text: usage, description, every option with its default", function()
  local help = seed_parser():format_help()
  T.eq(help:match("^[^\n]*"), "usage: mnist.lua [-h] [--batch-size N] [--lr LR] [--no-cuda] [--no-download]")
  T.truthy(help:find("\n\nPyTorch MNIST Example\n", 1, true), help)
  T.truthy(help:find("\npositional arguments:\n  root", 1, true), help)
  T.truthy(help:find("\noptions:\n  -h, --help ", 1, true), help)
  local flat = help:gsub(" +", " ") -- the columns' padding aside
  T.truthy(flat:find(" --batch-size N input batch size for training (default: 64)\n", 1, true), help)
  T.truthy(flat:find(" --lr LR learning rate (default: 1.0)\n", 1, true), help)
  T.truthy(flat:find(" --no-cuda disables CUDA training\n", 1, true), help) -- a flag shows no default
  T.truthy(flat:find(" --mixed-precision {none,bfloat16,float16}\n FSDP mixed precision (default: none)\n", 1, true), help)
  T.truthy(flat:find(" --data DIR where MNIST/raw is\n", 1, true), help) -- no default, none shown
  for line in help:gmatch("[^\n]*") do T.truthy(#line <= 100, "line longer than 100: " .. line) end
end)

-- ---- through the executable ---------------------------------------------------------------------

local build = os.getenv("MS_BUILD_DIR")
if not build then
  print("skip: the executable cases need MS_BUILD_DIR (ctest sets it)")
  T.finish()
end
local exe = build .. "/moonshard"
local base = os.tmpname()
local script, out, err = base .. "_tool.lua", base .. ".out", base .. ".err"

T.write_file(script, [[
local argparse = require "moonshard.argparse"
local p = argparse.ArgumentParser{description = "A tool."}
p:add_argument("--count", {type = "int", default = 3, metavar = "N", help = "how many"})
p:add_argument("--broken", {action = "store_true", help = "fail after parsing"})
local args = p:parse_args(arg)
if args.broken then p:fail("the thing at /x is missing\nsecond line dropped") end
print("count", args.count)
]])

local function run(args, env)
  local _, _, code = os.execute(("%s %s %s %s > %s 2> %s"):format(env or "", T.quote(exe), T.quote(script), args,
                                                                 T.quote(out), T.quote(err)))
  return code, T.read_file(out), T.read_file(err)
end

local prog = script:match("[^/]*$")

T.test("a usage error: the usage, one line 'prog: error: ...', status 2, no traceback", function()
  local code, o, e = run("--count two")
  T.eq(code, 2); T.eq(o, "")
  T.eq(e, ("usage: %s [-h] [--count N] [--broken]\n%s: error: argument --count: invalid int value: 'two'\n"):format(
    prog, prog))
  code, o, e = run("--nope")
  T.eq(code, 2)
  T.eq(e:match("[^\n]*\n$"), prog .. ": error: unrecognized arguments: --nope\n")
  T.truthy(not e:find("traceback", 1, true), e)
end)

T.test("-h and --help print the help on stdout and exit 0", function()
  for _, flag in ipairs({"-h", "--help", "--count 2 --help"}) do
    local code, o, e = run(flag)
    T.eq(code, 0, flag); T.eq(e, "", flag)
    T.truthy(o:find("^usage: " .. prog:gsub("%p", "%%%0")), o)
    T.truthy(o:find("--count N   how many (default: 3)", 1, true), o)
    T.truthy(not o:find("count\t", 1, true), "the script ran on: " .. o)
  end
end)

T.test("fail: one line, status 1; under a launcher the rank is named", function()
  local code, o, e = run("--count=5 --broken")
  T.eq(code, 1); T.eq(o, "")
  T.eq(e, prog .. ": error: the thing at /x is missing\n")
  code, _, e = run("--broken", "OMPI_COMM_WORLD_RANK=1")
  T.eq(code, 1)
  T.eq(e, prog .. ": [rank 1] error: the thing at /x is missing\n")
end)

T.test("under a launcher only rank 0 prints a usage error or the help", function()
  local code, o, e = run("--nope", "OMPI_COMM_WORLD_RANK=1")
  T.eq(code, 2); T.eq(o, ""); T.eq(e, "")
  code, o = run("--help", "OMPI_COMM_WORLD_RANK=3")
  T.eq(code, 0); T.eq(o, "")
  code, _, e = run("--nope", "OMPI_COMM_WORLD_RANK=0")
  T.eq(code, 2); T.truthy(e:find("error: unrecognized arguments: --nope", 1, true), e)
  local ok = run("", "OMPI_COMM_WORLD_RANK=1")
  T.eq(ok, 0)
end)

os.remove(script); os.remove(out); os.remove(err); os.remove(base)
T.finish()
