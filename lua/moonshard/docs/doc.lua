-- doc.lua: the docstrings of require "moonshard.doc", the docstring system itself: help() in the
-- REPL and what scripts/gen_api_docs.lua and the docs tests read.
local DOC = 'local doc = require "moonshard.doc"\n'

return {
  title = "Docstrings and help (doc)",
  {
    name = "doc.help",
    sig = "doc.help(x, out = io.write) -> entry or nil",
    doc = [[
Prints the documentation of `x`: its signature, description, options and example. `x` is a value
(`ms.zeros`, `x.sum`, `nn.Linear`), an instance (a module: its class's entry) or a name
(`"Tensor:sum"`, `"F.relu"`); aliases find the same entry. Something undocumented gets one line
saying so. `out` receives the text. What the REPL's `help(x)` and `?x` call.]],
    example = DOC .. [[
local text = {}
doc.help(ms.zeros, function(s) text[#text + 1] = s end)
print(table.concat(text):match("^[^\n]*"))   --> ms.zeros(size..., {dtype =, device =, requires_grad =}) -> Tensor
]],
  },
  {
    name = "doc.format",
    sig = "doc.format(entry) -> string",
    doc = [[The text `help` prints for an entry.]],
    example = DOC .. [[
print(doc.format(doc.entry("ms.zeros")):find("Options:", 1, true) ~= nil)   --> true
]],
  },
  {
    name = "doc.entry",
    sig = "doc.entry(name) -> entry or nil",
    doc = [[
The entry documenting `name` (its own name or one of its `also` names): a table with `name`,
`sig`, `doc`, `opts`, `example`, `needs` and `area`, as the area file wrote it.]],
    example = DOC .. [[
print(doc.entry("doc.help").area)   --> doc
]],
  },
  {
    name = "doc.entry_for",
    sig = "doc.entry_for(value) -> entry or nil",
    doc = [[The entry documenting a value (a function, class or option table), whatever name it was reached by.]],
    example = DOC .. [[
local x = ms.zeros(2)
print(doc.entry_for(ms.zeros).name, doc.entry_for(print))   --> ms.zeros	nil
]],
  },
  {
    name = "doc.resolve",
    sig = "doc.resolve(name) -> value or nil",
    doc = [[
The value a documented name stands for: `ms.f`, `Tensor:m`, `nn.Linear`, `Module:m`, `F.f`,
`optim.X`, `Optimizer:m`, `lr_scheduler.X`, `LRScheduler:m`, other modules by their require tail
(`fsdp.FSDP`, `gpt.GPT`); nil when it names nothing.]],
    example = DOC .. [[
print(doc.resolve("Tensor:sum") == ms.Tensor.sum, doc.resolve("ms.nothing"))   --> true	nil
]],
  },
  {
    name = "doc.areas",
    sig = "doc.areas() -> {{id =, title =, entries =}, ...}",
    doc = [[
Every area file `lua/moonshard/docs/<id>.lua` loaded, sorted by id: the pages of the API
reference. A new area file is found without being listed anywhere.]],
    example = DOC .. [[
local ids = {}
for _, a in ipairs(doc.areas()) do ids[a.id] = #a.entries end
print(ids.doc > 0)   --> true
]],
  },
  {
    name = "doc.area_modules",
    sig = "doc.area_modules() -> {string...}",
    doc = [[The module names of the area files ("moonshard.docs.<id>"), sorted: every one embedded in the binary.]],
    example = DOC .. [[
print(doc.area_modules()[1]:match("^moonshard%.docs%.") ~= nil)   --> true
]],
  },
  {
    name = "doc.public_modules",
    sig = "doc.public_modules() -> {string...}",
    doc = [[
The modules whose functions and classes are public: every embedded "moonshard.X" but the
implementation modules doc.lua lists as internal (nn_layers, fsdp_state, ...).]],
    example = DOC .. [[
local set = {}
for _, m in ipairs(doc.public_modules()) do set[m] = true end
print(set["moonshard.fsdp"], set["moonshard.fsdp_state"])   --> true	nil
]],
  },
  {
    name = "doc.public_names",
    sig = "doc.public_names() -> names, aliases, failed",
    doc = [[
Every public name of the Lua API: `names` is a list of `{name =, value =, area =}` (each distinct
value once, under the name users write); `aliases` maps a value to its other names; `failed` lists
the public modules that did not load. What the docs.coverage test checks against the entries.]],
    example = DOC .. [[
local names, aliases = doc.public_names()
local by = {}
for _, n in ipairs(names) do by[n.name] = n.value end
print(by["Tensor:flatten"] == ms.flatten, aliases[ms.flatten][1])   --> true	ms.flatten
]],
  },
}
