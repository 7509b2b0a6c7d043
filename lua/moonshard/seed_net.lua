-- seed_net.lua: the seed's Net (PyTorch's MNIST example model: two convs, two dropouts, two
-- linears), shared by scripts/mnist.lua, scripts/mnist_fsdp.lua and the tests.
--   local Net = require "moonshard.seed_net"; local model = Net()
local ms = require "moonshard"
local nn = require "moonshard.nn"
local F = require "moonshard.functional"

local Net = nn.Module:extend("Net")

function Net:init()
  self.conv1 = nn.Conv2d(1, 32, 3, 1)
  self.conv2 = nn.Conv2d(32, 64, 3, 1)
  self.dropout1 = nn.Dropout(0.25)
  self.dropout2 = nn.Dropout(0.5)
  self.fc1 = nn.Linear(9216, 128)
  self.fc2 = nn.Linear(128, 10)
end

-- x: (N, 1, 28, 28) normalised images; returns (N, 10) log-probabilities.
function Net:forward(x)
  x = F.relu(self.conv1(x))
  x = F.relu(self.conv2(x))
  x = F.max_pool2d(x, 2)
  x = self.dropout1(x)
  x = ms.flatten(x, 2)
  x = F.relu(self.fc1(x))
  x = self.dropout2(x)
  return F.log_softmax(self.fc2(x), 2)
end

return Net
