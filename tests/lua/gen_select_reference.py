#!/usr/bin/python3
# gen_select_reference.py: writes tests/lua/data/select_reference.lua, the PyTorch 1.13 oracle for
# gather, scatter, scatter_add, sort, argsort, topk, cumsum, cumprod, any and all. Run from the
# repo root with a Python that has torch 1.13 (Debian: /usr/bin/python3). Each case names a tensor
# method, its input tensor, its arguments in Lua's conventions (1-based dims and positions, Lua
# integers versus floats) and PyTorch's result(s); tests/lua/test_select_ops.lua replays them.
import math

import torch

DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
          "float16": torch.float16, "int64": torch.int64, "int32": torch.int32, "uint8": torch.uint8,
          "bool": torch.bool}
NAMES = {v: k for k, v in DTYPES.items()}
FLOATS = ["float32", "float64", "bfloat16", "float16"]
INTS = ["int64", "int32", "uint8"]
ALL = FLOATS + INTS + ["bool"]

cases = []
gen = torch.Generator().manual_seed(21)


def values_for(dtype, shape, distinct=False, nan=False):
    """Small values with ties (or all distinct), negatives for signed dtypes, NaN if asked."""
    n = math.prod(shape)
    if distinct:
        v = torch.randperm(max(n, 1), generator=gen)[:n].to(torch.float64) - (0 if dtype == "uint8" else n // 2)
    else:
        v = torch.randint(0 if dtype == "uint8" else -3, 4, (n,), generator=gen).to(torch.float64)
    if dtype in FLOATS: v = v * 0.5
    if nan and n > 2: v[1] = math.nan; v[n - 2] = math.nan
    if dtype == "bool": return (v > 0).reshape(shape)
    return v.to(DTYPES[dtype]).reshape(shape)


def spec(t):
    """A tensor as the Lua side builds it: dtype, shape, flat values."""
    flat = t.reshape(-1)
    if t.dtype == torch.bool: vals = [bool(x) for x in flat.tolist()]
    elif t.dtype.is_floating_point: vals = [float(x) for x in flat.float().tolist()] if t.dtype in (torch.bfloat16, torch.float16) else flat.tolist()
    else: vals = [int(x) for x in flat.tolist()]
    return {"dtype": NAMES[t.dtype], "shape": list(t.shape), "values": vals}


def widened(fn, *ts):
    """PyTorch 1.13's CPU lacks some 16-bit kernels (topk, cumprod on float16); later versions
    compute them in float32 and round, as moonshard does, so the reference is made that way."""
    try:
        return fn(*ts)
    except RuntimeError as e:
        if "not implemented for 'Half'" not in str(e) and "not implemented for 'BFloat16'" not in str(e): raise
    low = ts[0].dtype
    out = fn(*[t.float() if t.dtype == low else t for t in ts])
    back = lambda r: r.to(low) if r.dtype == torch.float32 else r
    return tuple(back(r) for r in out) if isinstance(out, tuple) else back(out)


def case(op, x, args, fn, index_out=(), t=False, error=False, note=""):
    """x: the input (transposed in Lua when t); args: Lua arguments (tensors as specs); fn(x) gives
    the torch result; outputs listed in index_out are positions, written 1-based."""
    c = {"op": op, "x": spec(x), "t": t, "args": args, "note": note}

    try:
        out = widened(fn, x)
    except (RuntimeError, IndexError) as e:
        assert error, (op, note, str(e))
        c["error"] = True
    else:
        assert not error, (op, note)
        outs = out if isinstance(out, tuple) else (out,)
        c["expected"] = [spec(o + 1 if i in index_out else o) for i, o in enumerate(outs)]
    cases.append(c)


def tensor_arg(t): return {"tensor": spec(t)}


def index_for(size_along, shape, dim, unique=False):
    """0-based positions in 0..size_along-1 of the given shape; unique along dim when asked."""
    if unique:
        perm = torch.stack([torch.randperm(size_along, generator=gen)[:shape[dim]] for _ in range(math.prod(shape) // shape[dim])])
        moved = list(shape[:dim]) + list(shape[dim + 1:]) + [shape[dim]]
        return perm.reshape(moved).movedim(-1, dim).contiguous()
    return torch.randint(0, size_along, shape, generator=gen)


# ---- gather ----
for dt in ALL:
    x = values_for(dt, (3, 5))
    for dim in (0, 1):
        idx = index_for(x.shape[dim], (2, 3) if dim == 1 else (4, 3), dim)
        case("gather", x, [dim + 1, tensor_arg(idx + 1)], lambda x, d=dim, i=idx: x.gather(d, i), note=dt)
x = values_for("float32", (4, 3))  # non-contiguous input: x:t() in Lua
idx = index_for(4, (3, 2), 1)
case("gather", x, [-1, tensor_arg(idx + 1)], lambda x, i=idx: x.t().gather(-1, i), t=True, note="transposed")
case("gather", values_for("float32", (3, 4)), [2, tensor_arg(torch.zeros(3, 0, dtype=torch.int64))],
     lambda x: x.gather(1, torch.zeros(3, 0, dtype=torch.int64)), note="empty index")
x3 = values_for("float64", (2, 3, 4))
idx3 = index_for(3, (2, 5, 4), 1)
case("gather", x3, [2, tensor_arg(idx3 + 1)], lambda x, i=idx3: x.gather(1, i), note="3-d, index longer along dim")

# ---- scatter (unique positions per line: PyTorch leaves repeated ones unspecified) ----
for dt in ALL:
    x = values_for(dt, (3, 5))
    src = values_for(dt, (3, 4))
    for dim in (0, 1):
        shape = (2, 3) if dim == 1 else (3, 3)
        idx = index_for(x.shape[dim], shape, dim, unique=True)
        case("scatter", x, [dim + 1, tensor_arg(idx + 1), tensor_arg(src)],
             lambda x, d=dim, i=idx, s=src: x.scatter(d, i, s), note=dt)
    if dt in ("float32", "int64"):
        idx = index_for(5, (3, 2), 1, unique=True)
        v = 7 if dt == "int64" else 2.5
        case("scatter", x, [2, tensor_arg(idx + 1), v], lambda x, i=idx, v=v: x.scatter(1, i, v), note=dt + " number")

# ---- scatter_add (repeated positions add up) ----
for dt in ["float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8"]:
    x = values_for(dt, (3, 5))
    src = values_for(dt, (4, 4))
    for dim in (0, 1):
        idx = index_for(x.shape[dim], (3, 4) if dim == 1 else (4, 4), dim)
        case("scatter_add", x, [dim + 1, tensor_arg(idx + 1), tensor_arg(src)],
             lambda x, d=dim, i=idx, s=src: x.scatter_add(d, i, s), note=dt)

# ---- sort / argsort (stable: the reference order of ties is PyTorch's) ----
for dt in ALL:
    x = values_for(dt, (4, 7), nan=dt in FLOATS)
    for dim in (0, 1):
        for desc in (False, True):
            case("sort", x, [{"opts": {"dim": dim + 1, "descending": desc, "stable": True}}],
                 lambda x, d=dim, ds=desc: x.sort(dim=d, descending=ds, stable=True), index_out=(1,), note=dt)
    case("sort", x, [], lambda x: x.sort(stable=True), index_out=(1,), note=dt + " default dim")
    case("argsort", x, [1, True], lambda x: x.sort(dim=0, descending=True, stable=True)[1], index_out=(0,), note=dt)
x = values_for("float64", (5, 3), nan=True)
case("sort", x, [{"opts": {"dim": 2, "stable": True}}], lambda x: x.t().sort(dim=1, stable=True), t=True,
     index_out=(1,), note="transposed")
case("sort", torch.zeros(0, 3), [1], lambda x: x.sort(dim=0, stable=True), index_out=(1,), note="empty")

# ---- topk (distinct values: PyTorch leaves the order of ties unspecified) ----
for dt in FLOATS + INTS:
    x = values_for(dt, (4, 6), distinct=True)
    for dim in (0, 1):
        for largest in (True, False):
            case("topk", x, [3, {"opts": {"dim": dim + 1, "largest": largest}}],
                 lambda x, d=dim, l=largest: x.topk(3, dim=d, largest=l), index_out=(1,), note=dt)
    case("topk", x, [2], lambda x: x.topk(2), index_out=(1,), note=dt + " default dim")
for dt in ("float32", "int64"):  # long rows: few of many are selected, not sorted
    x = values_for(dt, (3, 60), distinct=True)
    for largest in (True, False):
        case("topk", x, [4, 2, largest], lambda x, l=largest: x.topk(4, dim=1, largest=l), index_out=(1,), note=dt + " long rows")
x = torch.tensor([[1.0, math.nan, 2.0, -1.0]])
case("topk", x, [2], lambda x: x.topk(2), index_out=(1,), note="NaN is the largest")
case("topk", x, [2, 2, False], lambda x: x.topk(2, dim=1, largest=False), index_out=(1,), note="NaN is the largest")
case("topk", values_for("float32", (3, 4), distinct=True), [0, 1], lambda x: x.topk(0, dim=0), index_out=(1,), note="k = 0")
case("topk", values_for("bool", (5,)), [1], lambda x: x.topk(1), error=True, note="bool")

# ---- cumsum / cumprod ----
for dt in ALL:
    x = values_for(dt, (3, 5))
    for dim in (0, 1):
        case("cumsum", x, [dim + 1], lambda x, d=dim: x.cumsum(d), note=dt)
    if dt != "bool":
        case("cumprod", x, [2], lambda x: x.cumprod(1), note=dt)
case("cumsum", values_for("int32", (2, 3)), [2, {"opts": {"dtype": "float64"}}],
     lambda x: x.cumsum(1, dtype=torch.float64), note="dtype option")
case("cumsum", values_for("float32", (5, 3)), [1], lambda x: x.t().cumsum(0), t=True, note="transposed")
case("cumsum", torch.zeros(0), [1], lambda x: x.cumsum(0), note="empty")
case("cumsum", torch.tensor(2.5), [1], lambda x: x.cumsum(0), note="0-dim")

# ---- any / all ----
for dt in ALL:
    x = values_for(dt, (3, 4))
    x.view(-1)[5] = 0
    for op in ("any", "all"):
        case(op, x, [], lambda x, o=op: getattr(x, o)(), note=dt)
        case(op, x, [2], lambda x, o=op: getattr(x, o)(1), note=dt)
        case(op, x, [1, True], lambda x, o=op: getattr(x, o)(0, True), note=dt)
for op in ("any", "all"):
    case(op, torch.zeros(0), [], lambda x, o=op: getattr(x, o)(), note="empty")
    case(op, torch.tensor([0.0, math.nan]), [], lambda x, o=op: getattr(x, o)(), note="NaN is nonzero")


# ---- writing ----
def lua(v):
    if isinstance(v, bool): return "true" if v else "false"
    if isinstance(v, int): return str(v)
    if isinstance(v, float):
        if math.isnan(v): return "0/0"
        if math.isinf(v): return "1/0" if v > 0 else "-1/0"
        return repr(v) if v != int(v) or abs(v) >= 1e15 else "%.1f" % v
    if isinstance(v, str): return '"%s"' % v
    if isinstance(v, dict): return "{" + ", ".join("%s = %s" % (k, lua(x)) for k, x in v.items()) + "}"
    return "{" + ", ".join(lua(x) for x in v) + "}"


with open("tests/lua/data/select_reference.lua", "w") as f:
    f.write("-- Generated by tests/lua/gen_select_reference.py from PyTorch %s: do not edit.\n" % torch.__version__)
    f.write("return {\n")
    for c in cases: f.write("  %s,\n" % lua(c))
    f.write("}\n")
print("%d cases" % len(cases))
