#!/usr/bin/python3
# gen_optim_reference.py: reference values for tests/lua/test_optim.lua, from PyTorch 1.13
# (run with /usr/bin/python3, which has torch): parameters after each step of every optimizer
# under several option sets (gradients set directly, one of them missing on one step), the
# learning rates of every scheduler step by step, and clip_grad_norm_/clip_grad_value_ results.
# Writes tests/lua/data/optim_reference.lua.
import math
import os

import torch

torch.manual_seed(0)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "optim_reference.lua")
SHAPES = [(3, 4), (5,)]
STEPS = 4


def lua(v, indent=""):
    """A Lua literal for v (numbers at full precision, tuples and lists as arrays)."""
    if v is None:
        return "false"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "0/0"
        if math.isinf(v):
            return "math.huge" if v > 0 else "-math.huge"
        return repr(v)
    if isinstance(v, str):
        return '"%s"' % v
    if isinstance(v, (list, tuple)):
        return "{" + ", ".join(lua(x, indent) for x in v) + "}"
    if isinstance(v, dict):
        inner = indent + "  "
        items = ["%s%s = %s" % (inner, k, lua(x, inner)) for k, x in v.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    raise TypeError(type(v))


def flat(t):
    return [float(x) for x in t.detach().reshape(-1).tolist()]


def optim_case(name, opts, dtype, groups=None):
    params = [torch.randn(s, dtype=torch.float64).to(dtype).requires_grad_() for s in SHAPES]
    init = [flat(p) for p in params]
    grads, expected = [], []
    if groups is None:
        arg = params
    else:  # groups: list of option dicts, group i holding params[i]
        arg = [dict(g, params=[params[i]]) for i, g in enumerate(groups)]
    opt = getattr(torch.optim, name)(arg, **opts)
    for step in range(STEPS):
        gs = []
        for i, p in enumerate(params):
            if step == 2 and i == 1:  # a parameter without a gradient is skipped
                p.grad = None
                gs.append(None)
                continue
            g = torch.randn(p.shape, dtype=torch.float64).to(dtype)
            p.grad = g
            gs.append(flat(g))
        opt.step()
        grads.append(gs)
        expected.append([flat(p) for p in params])
    return {"name": name, "opts": opts, "groups": groups, "dtype": str(dtype)[6:],
            "shapes": [list(s) for s in SHAPES], "init": init, "grads": grads,
            "expected": expected}


OPTIM_CASES = [
    ("Adadelta", {}),
    ("Adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-5, "weight_decay": 0.1}),
    ("Adadelta", {"maximize": True}),
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
    ("SGD", {"lr": 0.05, "momentum": 0.5, "maximize": True, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.01}),
    ("Adam", {"lr": 0.01, "betas": (0.8, 0.9), "weight_decay": 0.1, "amsgrad": True}),
    ("Adam", {"maximize": True, "eps": 1e-6}),
    ("AdamW", {"lr": 0.01}),
    ("AdamW", {"lr": 0.01, "weight_decay": 0.1, "amsgrad": True}),
    ("AdamW", {"lr": 0.02, "betas": (0.5, 0.7), "maximize": True}),
    ("Adagrad", {"lr": 0.1}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.01, "initial_accumulator_value": 0.1, "weight_decay": 0.1}),
    ("Adagrad", {"maximize": True, "eps": 1e-6}),
    ("RMSprop", {"lr": 0.01}),
    ("RMSprop", {"lr": 0.01, "alpha": 0.9, "centered": True}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9, "weight_decay": 0.1}),
    ("RMSprop", {"centered": True, "momentum": 0.5, "maximize": True}),
]


def optim_cases():
    cases = []
    for dtype in (torch.float32, torch.float64):
        for name, opts in OPTIM_CASES:
            cases.append(optim_case(name, opts, dtype))
    # per-group options: the second group overrides lr and one more option
    cases.append(optim_case("Adam", {"lr": 0.01}, torch.float32,
                            groups=[{}, {"lr": 0.1, "weight_decay": 0.5}]))
    cases.append(optim_case("SGD", {"lr": 0.1, "momentum": 0.9}, torch.float64,
                            groups=[{"lr": 0.01}, {"nesterov": True}]))
    return cases


# ---- schedulers ----------------------------------------------------------------------------
SCHED_STEPS = 15
LAMBDAS = {"inverse": lambda e: 1.0 / (e + 1), "pow95": lambda e: 0.95 ** e}
SCHED_CASES = [
    ("StepLR", {"step_size": 1, "gamma": 0.7}),
    ("StepLR", {"step_size": 3, "gamma": 0.5}),
    ("MultiStepLR", {"milestones": [2, 5, 9], "gamma": 0.1}),
    ("MultiStepLR", {"milestones": [3, 3, 6]}),
    ("ExponentialLR", {"gamma": 0.9}),
    ("CosineAnnealingLR", {"T_max": 5, "eta_min": 0.001}),
    ("CosineAnnealingLR", {"T_max": 10}),
    ("LinearLR", {"start_factor": 0.25, "end_factor": 1.0, "total_iters": 4}),
    ("LinearLR", {}),
    ("LinearLR", {"start_factor": 1.0, "end_factor": 0.1, "total_iters": 10}),
    ("OneCycleLR", {"max_lr": 1.0, "total_steps": 16}),
    ("OneCycleLR", {"max_lr": [0.5, 0.25], "total_steps": 16, "anneal_strategy": "linear",
                    "three_phase": True, "div_factor": 10.0, "final_div_factor": 100.0,
                    "base_momentum": 0.8, "max_momentum": 0.9}),
    ("OneCycleLR", {"max_lr": 0.3, "epochs": 4, "steps_per_epoch": 4, "pct_start": 0.5}),
    ("LambdaLR", {"lr_lambda": "inverse"}),
    ("LambdaLR", {"lr_lambda": "pow95"}),
]


def sched_case(name, opts, optname):
    p1 = torch.zeros(2, requires_grad=True)
    p2 = torch.zeros(2, requires_grad=True)
    if optname == "SGD":
        opt = torch.optim.SGD([{"params": [p1]}, {"params": [p2], "lr": 0.05}], lr=0.1, momentum=0.9)
    else:
        opt = torch.optim.Adam([{"params": [p1]}, {"params": [p2], "lr": 0.05}], lr=0.1)
    kw = dict(opts)
    if name == "LambdaLR":
        kw["lr_lambda"] = LAMBDAS[kw["lr_lambda"]]
    sched = getattr(torch.optim.lr_scheduler, name)(opt, **kw)
    lrs = [list(sched.get_last_lr())]
    moms = [[g["momentum"] if "momentum" in g else g["betas"][0] for g in opt.param_groups]]
    for _ in range(SCHED_STEPS):
        opt.step()
        sched.step()
        lrs.append(list(sched.get_last_lr()))
        moms.append([g["momentum"] if "momentum" in g else g["betas"][0] for g in opt.param_groups])
    return {"name": name, "opts": opts, "optimizer": optname, "lrs": lrs, "momentums": moms}


def sched_cases():
    cases = [sched_case(name, opts, "SGD") for name, opts in SCHED_CASES]
    cases.append(sched_case("OneCycleLR", {"max_lr": 1.0, "total_steps": 16}, "Adam"))
    return cases


# ---- gradient clipping ---------------------------------------------------------------------
def clip_cases():
    cases = []
    for norm_type, max_norm in [(2.0, 1.0), (2.0, 100.0), (1.0, 2.0), (math.inf, 0.5), (3.0, 0.7)]:
        grads = [torch.randn(s) for s in SHAPES]
        params = [torch.zeros(s, requires_grad=True) for s in SHAPES]
        for p, g in zip(params, grads):
            p.grad = g.clone()
        total = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=norm_type)
        cases.append({"kind": "norm", "max_norm": max_norm, "norm_type": norm_type,
                      "grads": [flat(g) for g in grads], "total": float(total),
                      "clipped": [flat(p.grad) for p in params]})
    grads = [torch.randn(s) for s in SHAPES]
    params = [torch.zeros(s, requires_grad=True) for s in SHAPES]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    torch.nn.utils.clip_grad_value_(params, 0.5)
    cases.append({"kind": "value", "clip_value": 0.5, "grads": [flat(g) for g in grads],
                  "clipped": [flat(p.grad) for p in params]})
    return cases


# ---- a training loop with autograd: least squares, Adadelta + StepLR, grads clipped ---------
def train_case():
    w0 = torch.randn(3, 2, dtype=torch.float64)
    x = torch.randn(4, 3, dtype=torch.float64)
    y = torch.randn(4, 2, dtype=torch.float64)
    w = w0.clone().requires_grad_()
    opt = torch.optim.Adadelta([w], lr=1.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
    losses, ws = [], []
    for _ in range(6):
        opt.zero_grad()
        loss = ((x @ w - y) ** 2).sum()
        loss.backward()
        torch.nn.utils.clip_grad_norm_([w], 5.0)
        opt.step()
        sched.step()
        losses.append(float(loss))
        ws.append(flat(w))
    return {"w0": flat(w0), "x": flat(x), "y": flat(y), "losses": losses, "w": ws}


def main():
    data = {"shapes": [list(s) for s in SHAPES], "optim": optim_cases(), "sched": sched_cases(),
            "clip": clip_cases(), "train": train_case()}
    with open(OUT, "w") as f:
        f.write("-- Generated by tests/lua/gen_optim_reference.py (PyTorch %s). Do not edit.\n"
                % torch.__version__)
        f.write("return " + lua(data) + "\n")


if __name__ == "__main__":
    main()
