-- nn.lua: torch.nn for Lua (`local nn = require "moonshard.nn"`): the Module class system and
-- nn.Parameter (nn_module.lua), the layers (nn_layers.lua), the containers (nn_containers.lua),
-- nn.functional, nn.init and nn.utils.
--
-- Classes: `local Net = nn.Module:extend("Net")`, `function Net:init(...)` builds (the base
-- state exists before init runs, so no super call is needed), `Net(...)` constructs, and
-- `model(x)` runs forward through the hooks. Assigning a Module or an nn.Parameter to a field
-- registers it in assignment order; everything else is a plain attribute. Reads look in
-- parameters, submodules, buffers, plain attributes, then the class.
--
-- Dims and indices are 1-based as everywhere in moonshard: nn.Flatten() is torch's
-- Flatten(start_dim=1) and prints as Flatten(start_dim=2, end_dim=-1); nn.Softmax(2) is torch's
-- Softmax(dim=1). Reprs show the values as the Lua caller gave them.
local nn = require "moonshard.nn_module"
require "moonshard.nn_layers"
require "moonshard.nn_containers"
require "moonshard.nn_meta" -- nn.deferred_init, nn.materialize_module, Module:to_empty

-- nn.utils: clip_grad_norm_ and clip_grad_value_ (nn_utils.lua).
nn.utils = require "moonshard.nn_utils"

return nn
