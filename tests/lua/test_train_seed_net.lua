-- test_train_seed_net.lua: the seed's Net (two convs, two dropouts, two linears) learns a small
-- generated 10-class image task with Adadelta and StepLR: the loss falls over 50 steps, and a
-- checkpoint of the trained model reloads into a fresh one that predicts the same.
local T = require "testing"
local ms = require "moonshard"
local F = require "moonshard.functional"
local optim = require "moonshard.optim"

local Net = require "moonshard.seed_net"

-- Class c (1..10) is a bright horizontal bar at row 2c+3 of a 28x28 image, plus noise.
local function make_batch(n)
  local labels = ms.randint(1, 11, {n})
  local images = ms.randn(n, 1, 28, 28) * 0.3
  for i = 1, n do
    local row = 2 * labels[i]:item() + 3
    images[i][1][row] = images[i][1][row] + 2.5
  end
  return images, labels
end

T.test("the seed's Net learns a generated task in 50 steps", function()
  ms.manual_seed(1)
  local model = Net()
  local optimizer = optim.Adadelta(model:parameters(), {lr = 1.0})
  local scheduler = optim.lr_scheduler.StepLR(optimizer, {step_size = 25, gamma = 0.7})
  local first, last = {}, {}
  model:train()
  for step = 1, 50 do
    local data, target = make_batch(16)
    optimizer:zero_grad()
    local loss = F.nll_loss(model(data), target, {reduction = "sum"})
    loss:backward()
    optimizer:step()
    scheduler:step()
    local per_sample = loss:item() / 16
    if step <= 5 then first[#first + 1] = per_sample end
    if step > 45 then last[#last + 1] = per_sample end
  end
  local function mean(t) local s = 0 for _, v in ipairs(t) do s = s + v end return s / #t end
  T.truthy(mean(first) > 1.5, ("starts near log(10): %.3f"):format(mean(first)))
  T.truthy(mean(last) < 0.5 * mean(first), ("loss fell from %.3f to %.3f"):format(mean(first), mean(last)))
  T.near(scheduler:get_last_lr()[1], 0.49, 1e-12)

  model:eval()
  local data, target = make_batch(64)
  local correct
  do
    local _ <close> = ms.no_grad()
    correct = model(data):argmax(2):eq(target):sum():item()
  end
  T.truthy(correct >= 48, ("accuracy %d/64 after 50 steps"):format(correct))

  local path = os.tmpname()
  ms.save(model:state_dict(), path)
  local fresh = Net()
  fresh:load_state_dict((ms.load(path)))
  fresh:eval()
  os.remove(path)
  local _ <close> = ms.no_grad()
  T.truthy(ms.equal(fresh(data), model(data)), "the reloaded model predicts the same")
end)

T.finish()
