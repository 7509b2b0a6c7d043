# gen_conv_reference.py: records PyTorch 1.13's conv2d and pooling results and gradients on
# small inputs made by formula, as tests/lua/data/conv_reference.lua (read by test_conv.lua).
# Run with the system Python that has torch:  /usr/bin/python3 tests/lua/gen_conv_reference.py
import math
import os

import torch
import torch.nn.functional as F


def formula(shape, a, b, scale=1.0):
    """Deterministic float32 values scale * sin(a*i + b) over the flat index i (computed in
    float64, then rounded), which test_conv.lua rebuilds the same way instead of reading them."""
    n = math.prod(shape)
    v = torch.tensor([scale * math.sin(a * i + b) for i in range(n)], dtype=torch.float64)
    t = v.to(torch.float32).reshape(shape)
    t.formula = (a, b, scale)
    return t


def lua_formula(t):
    a, b, scale = t.formula
    return "{shape = {%s}, a = %r, b = %r, scale = %r}" % (", ".join(str(s) for s in t.shape), a, b, scale)


def lua_list(t):
    return "{" + ", ".join("%.9g" % v for v in t.detach().reshape(-1).tolist()) + "}"


def lua_tensor(t):
    return "{shape = {%s}, values = %s}" % (", ".join(str(s) for s in t.shape), lua_list(t))


def lua_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (tuple, list)):
        return "{" + ", ".join(lua_value(x) for x in v) + "}"
    return repr(v)


def lua_opts(opts):
    return "{" + ", ".join("%s = %s" % (k, lua_value(v)) for k, v in sorted(opts.items())) + "}"


def record(name, op, inputs, fn, arg=None, opts=None):
    """inputs: list of (name, tensor or None). fn(*tensors) -> output."""
    leaves = [(k, None if t is None else t.clone().requires_grad_()) for k, t in inputs]
    formulas = dict(inputs)
    out = fn(*[t for _, t in leaves])
    weight = formula(out.shape, 0.13, 0.7)
    out.backward(weight)
    lines = ["  {", "    name = %r, op = %r," % (name, op)]
    if arg is not None:
        lines.append("    arg = %s," % lua_value(arg))
    lines.append("    opts = %s," % lua_opts(opts or {}))
    lines.append("    inputs = {")
    for k, t in leaves:
        if t is not None:
            lines.append("      %s = %s," % (k, lua_formula(formulas[k])))
    lines.append("    },")
    lines.append("    weight = %s," % lua_formula(weight))
    lines.append("    out = %s," % lua_tensor(out))
    lines.append("    grads = {")
    for k, t in leaves:
        if t is not None:
            lines.append("      %s = %s," % (k, lua_tensor(t.grad)))
    lines.append("    },")
    lines.append("  },")
    return "\n".join(lines)


def conv_case(name, xs, ws, bias, stride=1, padding=0, dilation=1, groups=1):
    x, w = formula(xs, 0.37, 0.1), formula(ws, 0.53, 0.3, 0.5)
    b = formula((ws[0],), 0.71, 0.2) if bias else None
    opts = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
    fn = lambda x, w, b: F.conv2d(x, w, b, stride, padding, dilation, groups)
    return record(name, "conv2d", [("x", x), ("w", w), ("b", b)], fn, opts=opts)


def main():
    cases = [
        conv_case("conv basic", (2, 3, 7, 6), (4, 3, 3, 3), True),
        conv_case("conv stride pad dilation groups", (2, 4, 9, 8), (6, 2, 3, 2), True,
                  stride=2, padding=1, dilation=2, groups=2),
        conv_case("conv no bias, pairs", (3, 2, 6, 9), (3, 2, 2, 3), False,
                  stride=(1, 2), padding=(2, 1)),
        conv_case("conv pointwise", (2, 5, 4, 3), (3, 5, 1, 1), True),
        conv_case("conv depthwise", (2, 4, 6, 6), (4, 1, 3, 3), False, padding=1, groups=4),
    ]
    x = formula((2, 3, 9, 8), 0.37, 0.1)
    for name, k, opts in [
        ("max_pool plain", 2, {}),
        ("max_pool stride pad ceil", 3, {"stride": 2, "padding": 1, "ceil_mode": True}),
        ("max_pool dilation", (3, 2), {"stride": (2, 1), "dilation": (2, 2), "padding": (1, 0)}),
    ]:
        fn = lambda x, k=k, o=opts: F.max_pool2d(x, k, o.get("stride"), o.get("padding", 0),
                                                 o.get("dilation", 1), o.get("ceil_mode", False))
        cases.append(record(name, "max_pool2d", [("x", x)], fn, arg=k, opts=opts))
    for name, k, opts in [
        ("avg_pool plain", 2, {}),
        ("avg_pool stride pad ceil", 3, {"stride": 2, "padding": 1, "ceil_mode": True}),
        ("avg_pool exclude pad", (3, 2), {"stride": (2, 1), "padding": (1, 1), "ceil_mode": True,
                                          "count_include_pad": False}),
    ]:
        fn = lambda x, k=k, o=opts: F.avg_pool2d(x, k, o.get("stride"), o.get("padding", 0),
                                                 o.get("ceil_mode", False), o.get("count_include_pad", True))
        cases.append(record(name, "avg_pool2d", [("x", x)], fn, arg=k, opts=opts))
    for name, size in [("adaptive 4x3", (4, 3)), ("adaptive 1", 1), ("adaptive up 5x11", (5, 11))]:
        fn = lambda x, s=size: F.adaptive_avg_pool2d(x, s)
        cases.append(record(name, "adaptive_avg_pool2d", [("x", x)], fn, arg=size))
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "data", "conv_reference.lua"), "w") as f:
        f.write("-- conv_reference.lua: made by gen_conv_reference.py with PyTorch %s; do not edit.\n"
                % torch.__version__)
        f.write("return {\n" + "\n".join(cases) + "\n}\n")


if __name__ == "__main__":
    main()
