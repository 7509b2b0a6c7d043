-- argparse.lua: the command-line parser every script of moonshard uses, shaped after Python's
-- argparse so the seed's options read as they do in PyTorch's examples:
--   local argparse = require "moonshard.argparse"
--   local parser = argparse.ArgumentParser{description = "PyTorch MNIST Example"}
--   parser:add_argument("--batch-size", {type = "int", default = 64, metavar = "N", min = 1,
--                                        help = "input batch size for training"})
--   parser:add_argument("--no-cuda", {action = "store_true", help = "disables CUDA training"})
--   parser:add_argument("--mixed-precision", {choices = {"none", "bfloat16"}, default = "none"})
--   parser:add_argument("root", {nargs = "?", default = "data", help = "where MNIST/raw is"})
--   local args = parser:parse_args(arg)      -- args.batch_size, args.no_cuda, args.root
-- Options are long ("--name value" or "--name=value"; the last one given wins); positionals fill
-- in order; "--" ends the options. Types: "string" (the default), "int", "float", or a function
-- string -> value or nil, why (Python's callable type). `min` bounds a number; `choices` lists
-- the accepted values; `required` makes an option mandatory; `dest` renames the field.
-- -h/--help prints the help (defaults shown) and exits 0. A usage error prints the usage and one
-- line "prog: error: why" on stderr and exits 2, as Python's argparse does: no traceback.
-- Pure Lua, no moonshard dependency (moonshard.check_opts is pure Lua too), so any Lua 5.4 can use
-- it (bench/report.lua does).
local options = require "moonshard.check_opts"

local M = {}

local Parser = {}
Parser.__index = Parser

local ACTIONS = {store = true, store_true = true, store_false = true}
local TYPE_NAMES = {string = true, int = true, float = true}

-- Python's dest: "--batch-size" -> "batch_size".
local function dest_of(name) return (name:gsub("^%-%-", ""):gsub("%-", "_")) end

local function is_option(name) return name:sub(1, 2) == "--" end

-- The parser's name: the script's file name, as Python takes sys.argv[0]'s basename.
local function default_prog()
  local a = rawget(_G, "arg")
  local script = type(a) == "table" and a[0]
  return type(script) == "string" and script:match("[^/]*$") or "script"
end

-- Under an MPI launcher every rank runs the same command line and would print the same help or
-- error once per rank: only rank 0 prints, the others exit with the same status.
local function quiet_rank()
  local rank = os.getenv("OMPI_COMM_WORLD_RANK") or os.getenv("PMI_RANK")
  return rank ~= nil and rank ~= "0"
end

function M.ArgumentParser(opts)
  opts = options.check("argparse.ArgumentParser", opts, { "prog", "description", "epilog", "exit_on_error" }, 2)
  local self = setmetatable({prog = opts.prog or default_prog(), description = opts.description,
                             epilog = opts.epilog, exit_on_error = opts.exit_on_error ~= false,
                             options = {}, by_name = {}, positionals = {}}, Parser)
  return self
end

-- ---- declaring arguments ------------------------------------------------------------------------

local function check_spec(name, spec)
  local function bad(why) error(("argparse: add_argument(%q): %s"):format(name, why), 4) end
  if not ACTIONS[spec.action or "store"] then bad(("unknown action %q"):format(tostring(spec.action))) end
  local t = spec.type
  if t ~= nil and not TYPE_NAMES[t] and type(t) ~= "function" then
    bad(("type must be \"string\", \"int\", \"float\" or a function, got %s"):format(tostring(t)))
  end
  if spec.choices ~= nil and type(spec.choices) ~= "table" then bad("choices must be a list") end
  if spec.nargs ~= nil and spec.nargs ~= "?" then bad("nargs may only be \"?\"") end
  if spec.nargs and is_option(name) then bad("nargs is for positional arguments") end
  if spec.action and spec.action ~= "store" and not is_option(name) then bad("a flag must start with --") end
end

-- add_argument("--name", {...}) declares an option, add_argument("name", {...}) a positional.
function Parser:add_argument(name, spec)
  if type(name) ~= "string" or name == "" or name == "--" or (name:sub(1, 1) == "-" and not is_option(name)) then
    error(("argparse: add_argument: name must be \"--long-name\" or a positional's name, got %s"):format(
      tostring(name)), 2)
  end
  spec = spec or {}
  if type(spec) ~= "table" then error(("argparse: add_argument(%q): spec must be a table"):format(name), 2) end
  check_spec(name, spec)
  local a = {name = name, dest = spec.dest or dest_of(name), action = spec.action or "store", type = spec.type or "string",
             default = spec.default, help = spec.help, metavar = spec.metavar, choices = spec.choices, min = spec.min,
             required = spec.required, optional = spec.nargs == "?"}
  if a.action == "store_true" and a.default == nil then a.default = false end
  if a.action == "store_false" and a.default == nil then a.default = true end
  if is_option(name) then
    if self.by_name[name] or name == "--help" then error(("argparse: option %s declared twice"):format(name), 2) end
    self.by_name[name] = a
    self.options[#self.options + 1] = a
  else
    self.positionals[#self.positionals + 1] = a
  end
  return self
end

-- ---- help -----------------------------------------------------------------------------------------

local function quote_value(v) return type(v) == "string" and ("'%s'"):format(v) or tostring(v) end

local function metavar_of(a)
  if a.metavar then return a.metavar end
  if a.choices then
    local names = {}
    for i, c in ipairs(a.choices) do names[i] = tostring(c) end
    return "{" .. table.concat(names, ",") .. "}"
  end
  return is_option(a.name) and a.dest:upper() or a.name
end

local function is_flag(a) return a.action ~= "store" end

-- "--batch-size N", "--no-cuda", "root"
local function invocation(a)
  if not is_option(a.name) then return metavar_of(a) end
  return is_flag(a) and a.name or a.name .. " " .. metavar_of(a)
end

-- Lines of at most `width` characters from words, the first after `first`, the rest after `indent`.
local function wrap(words, first, indent, width)
  local lines, line = {}, first
  for _, w in ipairs(words) do
    if #line + 1 + #w > width and line ~= first and line ~= indent then
      lines[#lines + 1] = line
      line = indent .. w
    else
      line = (line == first or line == indent) and line .. w or line .. " " .. w
    end
  end
  lines[#lines + 1] = line
  return table.concat(lines, "\n")
end

local WIDTH = 100

function Parser:format_usage()
  local words = {"[-h]"}
  for _, a in ipairs(self.options) do
    words[#words + 1] = a.required and invocation(a) or "[" .. invocation(a) .. "]"
  end
  for _, a in ipairs(self.positionals) do
    words[#words + 1] = a.optional and "[" .. invocation(a) .. "]" or invocation(a)
  end
  local first = "usage: " .. self.prog .. " "
  return wrap(words, first, (" "):rep(#first), WIDTH)
end

-- The help text of one argument, with its default as Python's ArgumentDefaultsHelpFormatter adds it
-- (flags, whose default is the flag's absence, and help texts that already say it, excepted).
local function help_of(a)
  local text = a.help or ""
  if a.default ~= nil and not is_flag(a) and not text:find("(default", 1, true) then
    text = (text == "" and "" or text .. " ") .. ("(default: %s)"):format(tostring(a.default))
  end
  return text
end

local function format_section(title, args, lines)
  if #args == 0 then return end
  lines[#lines + 1] = ""
  lines[#lines + 1] = title
  local col = 2
  for _, a in ipairs(args) do col = math.max(col, #invocation(a) + 4) end
  col = math.min(col, 30)
  for _, a in ipairs(args) do
    local head = "  " .. invocation(a)
    local words = {}
    for w in help_of(a):gmatch("%S+") do words[#words + 1] = w end
    local pad = (" "):rep(col)
    if #head + 2 > col then
      lines[#lines + 1] = head
      if #words > 0 then lines[#lines + 1] = wrap(words, pad, pad, WIDTH) end
    else
      lines[#lines + 1] = wrap(words, head .. (" "):rep(col - #head), pad, WIDTH)
    end
  end
end

function Parser:format_help()
  local lines = {self:format_usage()}
  if self.description then
    lines[#lines + 1] = ""
    lines[#lines + 1] = self.description
  end
  format_section("positional arguments:", self.positionals, lines)
  local help = {name = "-h, --help", action = "store_true", help = "show this help message and exit"}
  local flags = {help}
  for _, a in ipairs(self.options) do flags[#flags + 1] = a end
  format_section("options:", flags, lines)
  if self.epilog then
    lines[#lines + 1] = ""
    lines[#lines + 1] = self.epilog
  end
  return table.concat(lines, "\n") .. "\n"
end

function Parser:print_help()
  if not quiet_rank() then
    io.stdout:write(self:format_help())
    io.stdout:flush()
  end
end

-- ---- errors ---------------------------------------------------------------------------------------

-- Python's parser.error: the usage and "prog: error: message" on stderr, exit status 2. With
-- exit_on_error = false it raises message instead (tests, and callers that handle it).
function Parser:error(message)
  message = tostring(message):match("^[^\n]*") -- one line, whatever the caller passed
  if not self.exit_on_error then error(message, 0) end
  if not quiet_rank() then
    io.stdout:flush()
    io.stderr:write(self:format_usage(), "\n", ("%s: error: %s\n"):format(self.prog, message))
    io.stderr:flush()
  end
  os.exit(2)
end

-- Ends the script with one line "prog: error: message" and `status` (default 1): for a mistake
-- found while running (a download that failed, a corrupt file) that the usage would not explain.
-- Unlike error it prints on whichever rank meets it, naming the rank as the executable does.
function Parser:fail(message, status)
  message = tostring(message):match("^[^\n]*")
  if not self.exit_on_error then error(message, 0) end
  local rank = os.getenv("OMPI_COMM_WORLD_RANK") or os.getenv("PMI_RANK")
  io.stdout:flush()
  io.stderr:write(("%s: %serror: %s\n"):format(self.prog, rank and ("[rank %s] "):format(rank) or "", message))
  io.stderr:flush()
  os.exit(status or 1)
end

-- ---- parsing --------------------------------------------------------------------------------------

local CONVERT = {
  string = function(s) return s end,
  int = function(s) return math.tointeger(tonumber(s)) end,
  float = function(s)
    local v = tonumber(s)
    return v and v == v and v > -math.huge and v < math.huge and v + 0.0 or nil
  end,
}

-- The value of argument a from the text s; nil, why when it is not one.
local function convert(a, s)
  local label = is_option(a.name) and "argument " .. a.name or "argument " .. metavar_of(a)
  local v, why
  if type(a.type) == "function" then
    v, why = a.type(s)
    if v == nil then
      return nil, ("%s: invalid value: '%s'%s"):format(label, s, why and " (" .. why .. ")" or "")
    end
  else
    v = CONVERT[a.type](s)
    if v == nil then return nil, ("%s: invalid %s value: '%s'"):format(label, a.type, s) end
  end
  if a.choices then
    local ok = false
    for _, c in ipairs(a.choices) do ok = ok or c == v end
    if not ok then
      local names = {}
      for i, c in ipairs(a.choices) do names[i] = quote_value(c) end
      return nil, ("%s: invalid choice: %s (choose from %s)"):format(label, quote_value(v), table.concat(names, ", "))
    end
  end
  if a.min and v < a.min then return nil, ("%s: must be at least %s, got %s"):format(label, a.min, s) end
  return v
end

-- A word that can be an option's value: anything but an option name ("-1.5" is a value).
local function is_value(w) return w ~= nil and (w:sub(1, 1) ~= "-" or tonumber(w) ~= nil) end

-- Handles the option word argv[i]; returns the index of the next word, or nil, why.
function Parser:_take_option(argv, i, out, seen)
  local word = argv[i]
  local name, inline = word:match("^(%-%-[^=]+)=(.*)$")
  name = name or word
  local a = self.by_name[name]
  if not a then return nil, ("unrecognized arguments: %s"):format(word) end
  seen[a] = true
  if is_flag(a) then
    if inline then return nil, ("argument %s: ignored explicit argument '%s'"):format(name, inline) end
    out[a.dest] = a.action == "store_true"
    return i + 1
  end
  local text = inline
  if text == nil then
    if not is_value(argv[i + 1]) then return nil, ("argument %s: expected one argument"):format(name) end
    text, i = argv[i + 1], i + 1
  end
  local v, why = convert(a, text)
  if v == nil then return nil, why end
  out[a.dest] = v
  return i + 1
end

-- The parsed table, or nil and the one-line reason; "help" when -h/--help was given.
function Parser:_parse(argv)
  local out, seen, words = {}, {}, {}
  local i, n, only_positionals = 1, #argv, false
  while i <= n do
    local w = argv[i]
    if type(w) ~= "string" then return nil, ("argument %d is a %s, not a string"):format(i, type(w)) end
    if only_positionals or w == "-" or not w:match("^%-") or tonumber(w) then
      words[#words + 1] = w
      i = i + 1
    elseif w == "--" then
      only_positionals, i = true, i + 1
    elseif w == "-h" or w == "--help" then
      return nil, "help"
    else
      local next_i, why = self:_take_option(argv, i, out, seen)
      if not next_i then return nil, why end
      i = next_i
    end
  end
  local missing = {}
  for k, a in ipairs(self.positionals) do
    local w = words[k]
    if w ~= nil then
      local v, why = convert(a, w)
      if v == nil then return nil, why end
      out[a.dest] = v
    elseif not a.optional then
      missing[#missing + 1] = metavar_of(a)
    end
  end
  if #words > #self.positionals then
    return nil, "unrecognized arguments: " .. table.concat(words, " ", #self.positionals + 1)
  end
  for _, a in ipairs(self.options) do
    if a.required and not seen[a] then missing[#missing + 1] = a.name end
  end
  if #missing > 0 then return nil, "the following arguments are required: " .. table.concat(missing, ", ") end
  for _, list in ipairs({self.options, self.positionals}) do
    for _, a in ipairs(list) do
      if out[a.dest] == nil and a.default ~= nil then
        local v, why = a.default, nil
        -- a string default goes through the type, as Python's argparse does ("1,2" -> {1, 2})
        if type(v) == "string" and a.type ~= "string" then v, why = convert(a, v) end
        if v == nil then return nil, why end
        out[a.dest] = v
      end
    end
  end
  return out
end

-- argv: a list of strings (the script's `arg`; its entries at 0 and below are the interpreter's
-- and are not read). Returns the table of values by dest; exits on -h/--help and on an error.
function Parser:parse_args(argv)
  argv = argv or rawget(_G, "arg") or {}
  if type(argv) ~= "table" then error(("argparse: parse_args: argv must be a table, got %s"):format(type(argv)), 2) end
  local out, why = self:_parse(argv)
  if out then return out end
  if why == "help" then
    self:print_help()
    os.exit(0)
  end
  self:error(why)
end

return M
