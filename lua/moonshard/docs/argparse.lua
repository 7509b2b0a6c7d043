-- argparse.lua: the docstrings of require "moonshard.argparse", the command-line parser of every
-- script, shaped after Python's argparse.
local PARSER = [[
local argparse = require "moonshard.argparse"
local parser = argparse.ArgumentParser{prog = "train.lua", description = "Train a model",
                                       exit_on_error = false}
parser:add_argument("--epochs", {type = "int", default = 10, min = 1, help = "passes over the data"})
parser:add_argument("--no-cuda", {action = "store_true", help = "train on the CPU"})
]]

return {
  title = "Command lines (argparse)",
  {
    name = "argparse.ArgumentParser",
    sig = "argparse.ArgumentParser({prog =, description =, epilog =, exit_on_error = true}) -> parser",
    doc = [[
A command-line parser as Python's `argparse.ArgumentParser`: declare arguments with
`add_argument`, read them with `parse_args(arg)`. Options are long (`--name value` or
`--name=value`; the last one given wins); positionals fill in order; `--` ends the options.
`-h`/`--help` prints the help and exits 0; a mistake prints the usage and one line
`prog: error: why` on stderr and exits 2, no traceback. Under mpirun only rank 0 prints. Pure Lua:
any Lua 5.4 can use it.]],
    opts = {
      { "prog", "string", "the script's file name", "the name in the usage and errors" },
      { "description", "string", "nil", "the text under the usage in --help" },
      { "epilog", "string", "nil", "the text at the end of --help" },
      { "exit_on_error", "boolean", "true", "false: raise the message instead of exiting (tests)" },
    },
    example = PARSER .. [[
local args = parser:parse_args({"--epochs=3", "--no-cuda"})
print(args.epochs, args.no_cuda)   --> 3	true
]],
  },
  {
    name = "argparse.ArgumentParser:add_argument",
    sig = 'parser:add_argument(name, {type =, default =, help =, action =, choices =, min =, required =, dest =, metavar =, nargs =}) -> parser',
    doc = [[
Declares an option (`"--batch-size"`, read as `args.batch_size`) or a positional (`"root"`).
A mistake in the declaration itself raises at once, naming the argument.]],
    opts = {
      { "type", "string or function", '"string"', '"string", "int", "float", or a function s -> value or nil, why' },
      { "default", "any", "nil", "the value when the argument is not given (shown in --help)" },
      { "help", "string", "nil", "its line in --help" },
      { "action", "string", '"store"', '"store", "store_true" or "store_false" (a flag, options only)' },
      { "choices", "list", "nil", "the accepted values" },
      { "min", "number", "nil", "the least accepted number" },
      { "required", "boolean", "false", "an option that must be given" },
      { "dest", "string", "the name, - as _", "the field of the result" },
      { "metavar", "string", "DEST", "the value's name in the usage" },
      { "nargs", "string", "nil", '"?": an optional positional (its default when absent)' },
    },
    example = [[
local parser = require("moonshard.argparse").ArgumentParser{prog = "fetch", exit_on_error = false}
parser:add_argument("root", {nargs = "?", default = "data"})
parser:add_argument("--split", {choices = {"train", "test"}, default = "train"})
local args = parser:parse_args({"--split", "test"})
print(args.root, args.split)   --> data	test
]],
  },
  {
    name = "argparse.ArgumentParser:parse_args",
    sig = "parser:parse_args(argv) -> table",
    doc = [[
Parses `argv` (default: the script's global `arg`; entries at 0 and below, the interpreter's,
are not read) into a table by dest, defaults filled in. Exits 0 after printing the help on
`-h`/`--help`, and 2 with the usage and one error line on a mistake (or raises the message, with
`exit_on_error = false`).]],
    example = PARSER .. [[
print(parser:parse_args({}).epochs)   --> 10
print(select(2, pcall(parser.parse_args, parser, {"--epochs", "0"})))   --> argument --epochs: must be at least 1, got 0
]],
  },
  {
    name = "argparse.ArgumentParser:format_usage",
    sig = "parser:format_usage() -> string",
    doc = [[The one-line usage, as `--help` and errors print it.]],
    example = PARSER .. [[
print(parser:format_usage())   --> usage: train.lua [-h] [--epochs EPOCHS] [--no-cuda]
]],
  },
  {
    name = "argparse.ArgumentParser:format_help",
    sig = "parser:format_help() -> string",
    doc = [[The whole help text: usage, description, then each argument with its help and default.]],
    example = PARSER .. [[
print(parser:format_help():find("passes over the data", 1, true) ~= nil)   --> true
]],
  },
  {
    name = "argparse.ArgumentParser:print_help",
    sig = "parser:print_help()",
    doc = [[Writes `format_help()` to stdout (on rank 0 only under mpirun).]],
    example = PARSER .. [[
parser:print_help()
]],
  },
  {
    name = "argparse.ArgumentParser:error",
    sig = "parser:error(message)",
    doc = [[
Python's `parser.error`: the usage and `prog: error: message` on stderr, then exit status 2 — for
a mistake in the command line that the script finds itself (two options that do not go
together). With `exit_on_error = false` it raises `message` instead.]],
    example = PARSER .. [[
local ok, why = pcall(parser.error, parser, "--epochs and --steps do not go together")
print(why)   --> --epochs and --steps do not go together
]],
  },
  {
    name = "argparse.ArgumentParser:fail",
    sig = "parser:fail(message, status = 1)",
    doc = [[
Ends the script with one line `prog: error: message` on stderr and `status`: for a mistake found
while running (a missing file, a failed download) that the usage would not explain. Unlike
`error` it prints on whichever rank meets it, naming the rank. With `exit_on_error = false` it
raises `message` instead.]],
    example = PARSER .. [[
local ok, why = pcall(parser.fail, parser, "no MNIST files under data/")
print(why)   --> no MNIST files under data/
]],
  },
}
