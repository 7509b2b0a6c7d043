#!/usr/bin/python3
# gen_nn_reference.py: prints the PyTorch 1.13 oracle strings pasted into tests/lua/test_nn.lua:
# the seed's Net repr, its parameter names, shapes and count, every layer's repr, BatchNorm's
# state_dict keys and calculate_gain values. Run with Debian's /usr/bin/python3 (torch 1.13).
import torch, torch.nn as nn, torch.nn.functional as F
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)
m = Net()
print(repr(m))
for n,p in m.named_parameters(): print(n, tuple(p.shape))
print(sum(p.numel() for p in m.parameters()))
L = [
 nn.Linear(3, 4), nn.Linear(3, 4, bias=False),
 nn.Conv2d(1, 32, 3, 1), nn.Conv2d(3, 8, (3, 5), stride=2, padding=1, dilation=2, groups=1, bias=False),
 nn.Conv2d(4, 8, 3, padding=(1,2), groups=2), nn.Conv2d(4,8,1),
 nn.MaxPool2d(2), nn.MaxPool2d(3, stride=2, padding=1, dilation=1, ceil_mode=True),
 nn.AvgPool2d(2), nn.AvgPool2d(3, stride=1, padding=1, ceil_mode=True, count_include_pad=False),
 nn.AdaptiveAvgPool2d((1,1)), nn.AdaptiveAvgPool2d(7),
 nn.Dropout(0.25), nn.Dropout(), nn.ReLU(), nn.GELU(), nn.GELU(approximate='tanh'), nn.SiLU(), nn.Tanh(), nn.Sigmoid(),
 nn.Softmax(dim=1), nn.LogSoftmax(dim=1), nn.Softmax(dim=-1), nn.Flatten(), nn.Flatten(0, -1), nn.Identity(),
 nn.Embedding(10, 3), nn.Embedding(10, 3, padding_idx=0), nn.LayerNorm(8), nn.LayerNorm((4, 8), eps=1e-6, elementwise_affine=False),
 nn.BatchNorm1d(16), nn.BatchNorm2d(8, eps=1e-3, momentum=0.2, affine=False, track_running_stats=True),
 nn.Sequential(nn.Linear(2,3), nn.ReLU()), nn.ModuleList([nn.ReLU(), nn.Linear(1,2)]), nn.ModuleDict({'act': nn.ReLU(), 'fc': nn.Linear(1,2)}),
 nn.Sequential(), nn.Sequential(nn.Sequential(nn.ReLU()), nn.Tanh()),
]
for l in L: print(repr(repr(l)))
print(list(nn.BatchNorm2d(8).state_dict().keys()))
print(nn.init.calculate_gain('leaky_relu', 5**0.5), nn.init.calculate_gain('tanh'), nn.init.calculate_gain('relu'), nn.init.calculate_gain('selu'))
