#!/usr/bin/python3
# gen_ops_reference.py: writes tests/lua/data/ops_reference.lua, the PyTorch oracle for the math
# ops (elementwise, promotion, reductions, matrix products, in-place forms). Run with a Python that
# has torch 1.13 (Debian: /usr/bin/python3) from the repo root. Each case names a moonshard
# function, its arguments written in Lua's conventions (1-based dims, Lua integers versus floats),
# and either the expected result or expected_error; tests/lua/test_ops_reference.lua replays them.
import math
import os
import subprocess
import sys

import numpy
import torch

DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
    "float16": torch.float16, "int64": torch.int64, "int32": torch.int32,
    "uint8": torch.uint8, "bool": torch.bool,
}
NAMES = {v: k for k, v in DTYPES.items()}
FLOATS = {"float32", "float64", "bfloat16", "float16"}
ALL = list(DTYPES)

inputs = {}  # name -> (dtype name, shape, flat values)
cases = []


SHORT = {"float32": "f32", "float64": "f64", "bfloat16": "bf16", "float16": "f16", "int64": "i64",
         "int32": "i32", "uint8": "u8", "bool": "b"}


def short(name):
    """Input names end in a dtype, written short to keep the data file small."""
    for long_name, s in SHORT.items():
        if name.endswith("_" + long_name): return name[:-len(long_name)] + s
    return name


class Ref:
    """A tensor argument: an input by name, optionally transposed with :t() in Lua."""

    def __init__(self, name, t=False):
        self.name, self.t = short(name), t


def tensor_in(name, dtype, shape, values):
    """Registers an input; values are rounded to the dtype here so Lua builds the same tensor."""
    t = torch.tensor(values, dtype=torch.float64).to(DTYPES[dtype]) if dtype != "bool" else \
        torch.tensor([bool(v) for v in values])
    if dtype in ("int64", "int32", "uint8"):
        t = torch.tensor([int(v) for v in values], dtype=DTYPES[dtype])
    t = t.reshape(shape)
    inputs[short(name)] = (dtype, list(shape), flat(t))
    return Ref(name)


def formula(dtype, n, seed):
    """Deterministic values with negatives, zeros and fractions (integers for integral dtypes)."""
    out = []
    for i in range(n):
        k = (i * 7 + seed * 3) % 11
        if dtype in FLOATS: out.append((k - 5) * 0.5 + (0.25 if i % 4 == 3 else 0))
        elif dtype == "uint8": out.append((i * 53 + seed * 29) % 256 if i % 3 == 2 else k)
        elif dtype == "bool": out.append(k % 3 == 0)
        else: out.append(k - 5)
    return out


def flat(t):
    if t.dtype == torch.bool: return [bool(v) for v in t.reshape(-1).tolist()]
    if t.dtype in (torch.bfloat16, torch.float16): t = t.float()
    return t.reshape(-1).tolist()


def torch_arg(a):
    if isinstance(a, Ref):
        dt, shape, vals = inputs[a.name]
        t = torch.tensor(vals, dtype=torch.float64 if dt in FLOATS else None)
        t = t.to(DTYPES[dt]).reshape(shape)
        return t.t() if a.t else t
    return a


def describe(out, plus_one=False):
    if isinstance(out, bool): return {"value": out}
    if plus_one: out = out + 1
    return {"dtype": NAMES[out.dtype], "shape": list(out.shape), "values": flat(out)}


def run_with_fallback(fn, targs):
    """PyTorch 1.13's CPU build lacks some kernels for 16-bit floats (exp, prod, clamp on
    float16...); later versions compute them in float32 and round, as moonshard does, so the
    reference is made that way. Any other error stands."""
    try:
        return fn(*targs)
    except RuntimeError as e:
        low = [a.dtype for a in targs if isinstance(a, torch.Tensor) and a.dtype in (torch.float16, torch.bfloat16)]
        if "not implemented for 'Half'" not in str(e) and "not implemented for 'BFloat16'" not in str(e):
            raise
    wide = [a.float() if isinstance(a, torch.Tensor) and a.dtype in low else a for a in targs]
    out = fn(*wide)
    back = lambda t: t.to(low[0]) if t.dtype == torch.float32 else t
    return tuple(back(t) for t in out) if isinstance(out, tuple) else back(out)


def case(op, args, fn, plus_one=(), error_has=None, note=None):
    """fn gets the torch forms of args (Lua conventions kept: dims 1-based); its result (a
    tensor, a tuple of tensors or a bool) becomes the expectation, an exception expected_error."""
    c = {"op": op, "args": args}
    try:
        out = run_with_fallback(fn, [torch_arg(a) for a in args])
    except (RuntimeError, TypeError, ValueError, IndexError):
        c["expected_error"] = True
        if error_has: c["error_has"] = error_has
    else:
        assert not error_has, (op, "torch raised nothing")
        if isinstance(out, tuple):
            c["expected"] = describe(out[0], 0 in plus_one)
            c["expected2"] = describe(out[1], 1 in plus_one)
        else:
            c["expected"] = describe(out, 0 in plus_one)
    if note: c["note"] = note
    cases.append(c)


def pydim(d):
    return d - 1 if d > 0 else d


# ---- binary ops ---------------------------------------------------------------------------------

def engine_ops(kind):
    """The names of the engine's op table (ms._op_info), read from the moonshard binary ($MOONSHARD,
    default build/moonshard), so that an op added to the table gets its cases with no edit here."""
    code = 'for _, r in ipairs(require("moonshard")._op_info.%s) do print(r.name) end' % kind
    return subprocess.check_output([os.environ.get("MOONSHARD", "build/moonshard"), "-e", code], text=True).split()



def is_scalar(x):
    return not isinstance(x, torch.Tensor)


def scalar_tensor(tensor, s):
    """A PyTorch op that takes no Python number gets one as a tensor of the promoted dtype."""
    rt = torch.result_type(tensor, s)
    return torch.tensor(s, dtype=rt)


def both_tensors(a, b):
    if is_scalar(a): a = scalar_tensor(b, a); b = b.to(a.dtype)
    elif is_scalar(b): b = scalar_tensor(a, b); a = a.to(b.dtype)
    return a, b


BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "pow": lambda a, b: a ** b,
    "maximum": lambda a, b: torch.maximum(*both_tensors(a, b)),
    "minimum": lambda a, b: torch.minimum(*both_tensors(a, b)),
    "eq": lambda a, b: a == b if not is_scalar(a) else b == a,
    "ne": lambda a, b: a != b if not is_scalar(a) else b != a,
    "lt": lambda a, b: a < b if not is_scalar(a) else b > a,
    "le": lambda a, b: a <= b if not is_scalar(a) else b >= a,
    "gt": lambda a, b: a > b if not is_scalar(a) else b < a,
    "ge": lambda a, b: a >= b if not is_scalar(a) else b <= a,
    "logical_and": lambda a, b: torch.logical_and(*both_tensors(a, b)),
    "logical_or": lambda a, b: torch.logical_or(*both_tensors(a, b)),
}
BINARY_OPS = engine_ops("binary")
for op in BINARY_OPS:  # a row added to the engine's table needs its PyTorch formula above
    if op not in BINARY: sys.exit("gen_ops_reference.py: the engine's binary op %s has no PyTorch formula in BINARY" % op)
# Python's bool scalars on the left of - and ** would be plain Python ints; PyTorch's reflected
# ops see them as bools, which is what moonshard gets from a Lua boolean.
PAIR_OPS = ["add", "sub", "mul", "div", "pow", "maximum", "eq", "lt", "logical_and"]
# Every other op of the table, one per dtype pair in turn (on 0-dim operands, below).
OTHER_OPS = [op for op in BINARY_OPS if op not in PAIR_OPS]

for da in ALL:  # every dtype pair, (2, 3) against a row (3,)
    tensor_in("a_" + da, da, (2, 3), formula(da, 6, 1))
    tensor_in("r_" + da, da, (3,), formula(da, 3, 2))
    tensor_in("z_" + da, da, (), formula(da, 1, 3))
for da in ALL:
    for db in ALL:
        for op in PAIR_OPS:
            case(op, [Ref("a_" + da), Ref("r_" + db)], BINARY[op])

SCALARS = [2, 2.5, True, -1.0]
SCALAR_OPS = ["add", "sub", "mul", "div", "pow", "maximum", "eq", "lt", "logical_and"]
for da in ALL:  # the other comparisons and logical_or once per dtype pair, on 0-dim operands
    for j, db in enumerate(ALL):
        op = OTHER_OPS[(ALL.index(da) + j) % len(OTHER_OPS)]
        case(op, [Ref("z_" + da), Ref("z_" + db)], BINARY[op])
for da in ALL:  # Lua numbers and booleans on either side
    for s in SCALARS:
        for op in SCALAR_OPS:
            if s == -1.0 and op not in ("div", "pow"): continue
            case(op, [Ref("a_" + da), s], BINARY[op])
            case(op, [s, Ref("a_" + da)], BINARY[op])
for da in ALL:  # 0-dim tensors count less than dimensioned ones, more than numbers
    for db in ALL:
        for op in ("add", "div"):
            case(op, [Ref("r_" + da), Ref("z_" + db)], BINARY[op])
    case("add", [Ref("z_" + da), Ref("z_float16")], BINARY["add"])
    case("mul", [Ref("z_" + da), 3], BINARY["mul"])
    case("mul", [Ref("z_" + da), 0.5], BINARY["mul"])

# alpha, broadcasting shapes and special values
tensor_in("b213", "float32", (2, 1, 3), [1.5, -2, 0.25, 3, 0, -0.5])
tensor_in("b41", "float32", (4, 1), [1, -1, 2.5, 0])
tensor_in("col", "float32", (2, 1), [10, -3])
tensor_in("i213", "int64", (2, 1, 3), [1, -2, 7, 3, 0, -5])
tensor_in("i41", "int32", (4, 1), [2, -1, 3, 0])
for op in ("add", "sub", "mul", "div", "maximum", "lt"):
    case(op, [Ref("b213"), Ref("b41")], BINARY[op])
    case(op, [Ref("b41"), Ref("b213")], BINARY[op])
    case(op, [Ref("col"), Ref("a_float32")], BINARY[op])
    case(op, [Ref("i213"), Ref("i41")], BINARY[op])
for da in ("float32", "int64", "uint8", "float16", "bool"):
    for alpha in (2, 0.5, -1):
        case("add", [Ref("a_" + da), Ref("r_int64"), {"alpha": alpha}],
             lambda a, b, o: torch.add(a, b, alpha=o["alpha"]))
        case("sub", [Ref("a_" + da), Ref("r_float32"), {"alpha": alpha}],
             lambda a, b, o: torch.sub(a, b, alpha=o["alpha"]))
case("add", [Ref("a_int64"), 3, {"alpha": 2}], lambda a, b, o: torch.add(a, b, alpha=o["alpha"]))
case("add", [Ref("b213"), Ref("b41"), {"alpha": -0.5}], lambda a, b, o: torch.add(a, b, alpha=o["alpha"]))

nan, inf = float("nan"), float("inf")
SPECIAL = [-inf, -3.5, -1.0, -0.5, 0.0, 0.5, 1.0, 2.5, 100.0, inf, nan, 1e-8]
tensor_in("sp32", "float32", (12,), SPECIAL)
tensor_in("sp64", "float64", (12,), SPECIAL)
tensor_in("sp32r", "float32", (12,), list(reversed(SPECIAL)))
tensor_in("big32", "float32", (4,), [1e30, -1e30, 3e38, 1e-30])
tensor_in("ipow_b", "int64", (8,), [2, 3, -2, 0, 1, -1, 7, 10])
tensor_in("ipow_e", "int64", (8,), [10, 3, 3, 0, -4, -3, 0, 20])
tensor_in("iz", "int64", (4,), [0, 5, -5, 0])
tensor_in("i32z", "int32", (4,), [0, 0, 2, -7])
for op in ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "lt", "ge", "logical_and"):
    case(op, [Ref("sp32"), Ref("sp32r")], BINARY[op])
    case(op, [Ref("sp64"), Ref("sp32r")], BINARY[op])
for op in ("mul", "add"):
    case(op, [Ref("big32"), Ref("big32")], BINARY[op])
case("pow", [Ref("ipow_b"), Ref("ipow_e")], BINARY["pow"])
case("pow", [Ref("ipow_b"), 2], BINARY["pow"])
case("pow", [Ref("ipow_b"), -1], BINARY["pow"], note="negative integer power of integers")
case("pow", [Ref("ipow_b"), 0.5], BINARY["pow"])
case("pow", [2, Ref("ipow_e")], BINARY["pow"])
case("pow", [Ref("sp32"), 2], BINARY["pow"])
case("pow", [Ref("sp32"), 0.5], BINARY["pow"])
case("div", [Ref("iz"), Ref("i32z")], BINARY["div"])
case("div", [Ref("iz"), 0], BINARY["div"])
case("div", [7, Ref("iz")], BINARY["div"])
case("div", [Ref("iz"), Ref("z_bool")], BINARY["div"])

# ---- unary ops ----------------------------------------------------------------------------------

def torch_fn(op):
    """torch.<op>, or torch.nn.functional.<op> for the activations that live there (softplus)."""
    return getattr(torch, op, None) or getattr(torch.nn.functional, op)


UNARY = engine_ops("unary")
tensor_in("round32", "float32", (10,), [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -0.49, 0.51, 1e7 + 1])
tensor_in("u_bf16", "bfloat16", (8,), [-3.5, -1, -0.5, 0, 0.5, 1, 2.5, 100])
tensor_in("u_f16", "float16", (8,), [-3.5, -1, -0.5, 0, 0.5, 1, 2.5, 100])
tensor_in("u_i64", "int64", (7,), [-7, -1, 0, 1, 2, 9, 100])
tensor_in("u_i32", "int32", (7,), [-7, -1, 0, 1, 2, 9, 100])
tensor_in("u_u8", "uint8", (7,), [0, 1, 2, 9, 100, 200, 255])
tensor_in("u_bool", "bool", (4,), [True, False, False, True])
for op in UNARY:
    fn = torch_fn(op)
    for name in ("sp32", "sp64", "u_bf16", "u_f16", "u_i64", "u_i32", "u_u8", "u_bool"):
        case(op, [Ref(name)], fn)
    if op in ("neg", "exp", "sign", "round", "logical_not"): case(op, [Ref("a_float32", t=True)], fn)
case("round", [Ref("round32")], torch.round)
case("sigmoid", [Ref("big32")], torch.sigmoid)
case("tanh", [Ref("big32")], torch.tanh)
case("exp", [Ref("big32")], torch.exp)
for op in ("neg", "abs", "exp", "sqrt", "floor", "sign", "square", "relu", "logical_not"):
    for name in ("sp32", "u_i64", "u_u8", "u_bool"):
        case(op + "_", [Ref(name)], lambda t, op=op: getattr(t, op + "_")())

# ---- clamp, where, masked_fill -----------------------------------------------------------------

tensor_in("ci", "int64", (6,), [-9, -2, 0, 3, 5, 12])
tensor_in("cu8", "uint8", (4,), [0, 3, 9, 250])
for name in ("sp32", "sp64", "ci", "cu8", "u_f16", "u_i32", "u_bool"):
    for lo, hi in ((-1, None), (None, 2), (-1, 2), (-0.5, 2.5), (2.0, None), (3, -1), (0.5, 0.5)):
        case("clamp", [Ref(name), lo, hi],
             lambda t, lo, hi: torch.clamp(t, lo, hi))
    case("clamp", [Ref(name), {"min": 0, "max": 3}], lambda t, o: torch.clamp(t, o["min"], o["max"]))
    for lo, hi in ((-1, 2), (0.5, None)):
        case("clamp_", [Ref(name), lo, hi], lambda t, lo, hi: t.clamp_(lo, hi))
case("clamp", [Ref("sp32")], lambda t: torch.clamp(t), note="no bound")

tensor_in("cond23", "bool", (2, 3), [True, False, True, False, False, True])
tensor_in("cond3", "bool", (3,), [False, True, True])
tensor_in("cond21", "bool", (2, 1), [True, False])
for x, y in ((Ref("a_float32"), Ref("a_int64")), (Ref("a_int64"), 2), (2, Ref("a_int64")),
             (Ref("a_int64"), 2.5), (1.5, 0), (True, False), (Ref("a_float16"), Ref("r_float64")),
             (Ref("r_uint8"), Ref("a_bool")), (Ref("col"), Ref("r_int32")), (Ref("z_float64"), Ref("a_int32"))):
    for c in ("cond23", "cond3", "cond21"):
        case("where", [Ref(c), x, y], torch.where)
case("where", [Ref("a_float32"), 1, 2], torch.where, note="condition must be bool")
for name in ("a_float32", "a_int64", "a_uint8", "a_bool", "a_float16"):
    for mask in ("cond23", "cond3", "cond21"):
        for v in (9.5, -1, True):
            case("masked_fill", [Ref(name), Ref(mask), v], lambda t, m, v: t.masked_fill(m, v))
    case("masked_fill_", [Ref(name), Ref("cond3"), 7], lambda t, m, v: t.masked_fill_(m, v))
case("masked_fill", [Ref("a_float32"), Ref("a_int64"), 1.0], lambda t, m, v: t.masked_fill(m, v))
case("masked_fill", [Ref("r_float32"), Ref("cond23"), 1.0], lambda t, m, v: t.masked_fill(m, v),
     note="the mask may not broadcast the tensor")
case("masked_fill_", [Ref("r_float32"), Ref("cond23"), 1.0], lambda t, m, v: t.masked_fill_(m, v))

# ---- reductions ---------------------------------------------------------------------------------

tensor_in("m34", "float32", (3, 4), [0.5, -1.25, 3, 2, -4, 0, 7.5, 1, 2.25, 9, -3, 0.125])
tensor_in("m234", "float64", (2, 3, 4), [((i * 5 + 3) % 13 - 6) * 0.375 + i * 0.01 for i in range(24)])
tensor_in("mnan", "float32", (3, 4), [1, nan, 3, 2, -4, 0, 7.5, 1, 2.25, 9, -3, nan])
tensor_in("minf", "float64", (2, 3), [1, inf, -2, -inf, 0, 3])
tensor_in("mi64", "int64", (3, 4), [5, -3, 12, 0, 7, 7, -8, 2, 100, -100, 1, 4])
tensor_in("mi32", "int32", (2, 3), [2147483647, 1, 3, -4, 9, 0])
tensor_in("mu8", "uint8", (2, 3), [250, 10, 3, 0, 200, 255])
tensor_in("mbool", "bool", (2, 3), [True, True, False, False, True, True])
tensor_in("mbf16", "bfloat16", (2, 3), [1.5, -2, 300, 0.125, 7, -1])
tensor_in("mf16", "float16", (2, 3), [1.5, -2, 300, 0.125, 7, -1])
tensor_in("m0", "float32", (0, 3), [])
tensor_in("s0", "float64", (), [2.5])

REDUCE = {
    "sum": lambda t, *d: torch.sum(t, *d), "mean": lambda t, *d: torch.mean(t, *d),
    "prod": lambda t, *d: torch.prod(t, *d), "argmax": lambda t, *d: torch.argmax(t, *d),
    "argmin": lambda t, *d: torch.argmin(t, *d),
}


def reduce_fn(op):
    def fn(t, *rest):
        if not rest: return getattr(torch, op)(t)
        dim, keep = pydim(rest[0]), rest[1] if len(rest) > 1 else False
        return getattr(torch, op)(t, dim, keepdim=keep)
    return fn


for name, dims in (("m34", (1, 2, -1)), ("m234", (1, 2, 3, -2)), ("mnan", (1, 2)), ("minf", (1, 2)),
                   ("mi64", (1, 2)), ("mi32", (2,)), ("mu8", (1, 2)), ("mbool", (1, 2)),
                   ("mbf16", (2,)), ("mf16", (1,)), ("m0", (1, 2)), ("s0", (1, -1))):
    for op in ("sum", "mean", "prod", "argmax", "argmin", "max", "min"):
        po = (0,) if op.startswith("arg") else ()
        case(op, [Ref(name)], reduce_fn(op), plus_one=po)
        for d in dims:
            if op in ("max", "min"):
                case(op, [Ref(name), d], lambda t, d, op=op: tuple(getattr(torch, op)(t, pydim(d))),
                     plus_one=(1,))
                case(op, [Ref(name), d, True],
                     lambda t, d, k, op=op: tuple(getattr(torch, op)(t, pydim(d), keepdim=k)), plus_one=(1,))
            else:
                case(op, [Ref(name), d], reduce_fn(op), plus_one=po)
                case(op, [Ref(name), d, True], reduce_fn(op), plus_one=po)
    for op in ("var", "std"):
        for corr in (0, 1):
            case(op, [Ref(name), {"correction": corr}],
                 lambda t, o, op=op: getattr(torch, op)(t, unbiased=bool(o["correction"])))
            for d in dims[:2]:
                case(op, [Ref(name), d, {"correction": corr, "keepdim": d == 1}],
                     lambda t, d, o, op=op: getattr(torch, op)(t, pydim(d), unbiased=bool(o["correction"]),
                                                             keepdim=o["keepdim"]))
        case(op, [Ref(name), {"dim": dims[0], "unbiased": False}],
             lambda t, o, op=op: getattr(torch, op)(t, pydim(o["dim"]), unbiased=o["unbiased"]))
    for p in (1, 2, 3, inf):
        case("norm", [Ref(name), p], lambda t, p: torch.norm(t, p))
        for d in dims[:1]:
            case("norm", [Ref(name), p, d, p == 2], lambda t, p, d, k: torch.norm(t, p, pydim(d), k))
    case("norm", [Ref(name)], lambda t: torch.norm(t))
    case("norm", [Ref(name), "inf"], lambda t, p: torch.norm(t, inf))
# non-contiguous inputs, and int64 values past 2^53 (exact only if nothing passes a double)
for op in ("sum", "prod", "argmax"):
    case(op, [Ref("m34", t=True), 1], reduce_fn(op), plus_one=(0,) if op == "argmax" else ())
case("max", [Ref("m34", t=True), 2], lambda t, d: tuple(torch.max(t, pydim(d))), plus_one=(1,))
case("var", [Ref("m34", t=True), -1, {"correction": 1, "keepdim": False}],
     lambda t, d, o: torch.var(t, pydim(d)))
case("norm", [Ref("m34", t=True), 3, 2, False], lambda t, p, d, k: torch.norm(t, p, pydim(d), k))
tensor_in("v2", "float64", (2,), [0.5, -4])
case("add", [Ref("a_float32", t=True), Ref("v2")], BINARY["add"])
case("mul", [Ref("a_int32", t=True), Ref("a_int64", t=True)], BINARY["mul"])
tensor_in("big64", "int64", (2, 2), [2 ** 53 + 1, -(2 ** 62) - 3, 2 ** 63 - 1, 12345678901234567])
tensor_in("big64b", "int64", (2,), [3, 2 ** 40 + 7])
for op in ("add", "sub", "mul", "maximum", "eq"):
    case(op, [Ref("big64"), Ref("big64b")], BINARY[op])
case("add", [Ref("big64"), 1], BINARY["add"])
for op in ("sum", "prod", "max", "argmin"):
    case(op, [Ref("big64"), 2], lambda t, d, op=op: (lambda r: tuple(r) if op == "max" else r)(getattr(torch, op)(t, pydim(d))),
         plus_one=(1,) if op == "max" else (0,) if op == "argmin" else ())
case("matmul", [Ref("big64"), Ref("big64b")], torch.matmul)
case("neg", [Ref("big64")], torch.neg)
case("abs", [Ref("big64")], torch.abs)
# Bounds (and plain-number operands) reach the engine as doubles: past 2^53 they must be exact
# in a double to compare exactly, hence 2^60 rather than 2^60 + 1.
case("clamp", [Ref("big64"), -(2 ** 62), 2 ** 60], torch.clamp)
case("copy_", [Ref("a_int64"), Ref("big64b")], lambda d, s: d.copy_(s))
case("where", [Ref("cond3"), Ref("big64b"), Ref("r_int32")], torch.where)

tensor_in("ties", "int64", (2, 4), [3, 9, 9, 1, -2, -2, 5, -2])
for op in ("argmax", "argmin"):
    case(op, [Ref("ties")], reduce_fn(op), plus_one=(0,))
    case(op, [Ref("ties"), 2], reduce_fn(op), plus_one=(0,))
case("max", [Ref("m34"), 3], lambda t, d: t.max(pydim(d)), note="dim out of range")
case("sum", [Ref("m34"), -3], lambda t, d: t.sum(pydim(d)), note="dim out of range")
case("max", [Ref("m0"), 1], lambda t, d: t.max(pydim(d)), note="empty dim")
case("max", [Ref("a_float32"), Ref("r_int64")], lambda a, b: torch.maximum(a, b))
case("min", [Ref("a_int32"), Ref("z_float64")], lambda a, b: torch.minimum(a, b))
case("mean", [Ref("mi64")], torch.mean, error_has=["mean", "floating point"])
case("mean", [Ref("mi64"), 1], lambda t, d: torch.mean(t, pydim(d)), error_has=["floating point"])
case("var", [Ref("mu8")], torch.var, error_has=["floating point"])

# ---- matrix products ----------------------------------------------------------------------------

MM = {"float32": [], "float64": [], "int64": []}
for dt in MM:
    base = lambda n, s: [((i * 7 + s) % 11 - 5) * (0.5 if dt != "int64" else 1) for i in range(n)]
    tensor_in("A34_" + dt, dt, (3, 4), base(12, 1))
    tensor_in("B42_" + dt, dt, (4, 2), base(8, 2))
    tensor_in("A43_" + dt, dt, (4, 3), base(12, 3))
    tensor_in("B24_" + dt, dt, (2, 4), base(8, 4))
    tensor_in("v4_" + dt, dt, (4,), base(4, 5))
    tensor_in("v3_" + dt, dt, (3,), base(3, 6))
    tensor_in("bA_" + dt, dt, (2, 1, 3, 4), base(24, 7))
    tensor_in("bB_" + dt, dt, (5, 4, 2), base(40, 8))
    tensor_in("bm1_" + dt, dt, (2, 3, 4), base(24, 9))
    tensor_in("bm2_" + dt, dt, (2, 4, 5), base(40, 10))
    tensor_in("C32_" + dt, dt, (3, 2), base(6, 11))
    tensor_in("C2_" + dt, dt, (2,), base(2, 12))
    s = "_" + dt
    mm = lambda a, b: torch.mm(a, b)
    case("mm", [Ref("A34" + s), Ref("B42" + s)], torch.mm)
    case("mm", [Ref("A43" + s, t=True), Ref("B24" + s, t=True)], torch.mm)
    case("mm", [Ref("A34" + s), Ref("B24" + s, t=True)], torch.mm)
    case("matmul", [Ref("A34" + s), Ref("B42" + s)], torch.matmul)
    case("matmul", [Ref("v4" + s), Ref("B42" + s)], torch.matmul)
    case("matmul", [Ref("A34" + s), Ref("v4" + s)], torch.matmul)
    case("matmul", [Ref("v4" + s), Ref("v4" + s)], torch.matmul)
    case("matmul", [Ref("bA" + s), Ref("bB" + s)], torch.matmul)
    case("matmul", [Ref("bm1" + s), Ref("v4" + s)], torch.matmul)
    case("matmul", [Ref("v3" + s), Ref("bm1" + s)], torch.matmul)
    case("matmul", [Ref("bm1" + s), Ref("B42" + s)], torch.matmul)
    case("matmul", [Ref("A43" + s, t=True), Ref("bm2" + s)], torch.matmul)
    case("bmm", [Ref("bm1" + s), Ref("bm2" + s)], torch.bmm)
    case("dot", [Ref("v4" + s), Ref("v4" + s)], torch.dot)
    for c in ("C32", "C2"):
        for beta, alpha in ((1, 1), (0.5, 2), (0, 1), (2, 0)):
            o = {"beta": beta, "alpha": alpha}
            case("addmm", [Ref(c + s), Ref("A34" + s), Ref("B42" + s), o],
                 lambda c, a, b, o: torch.addmm(c, a, b, beta=o["beta"], alpha=o["alpha"]))
for dt in ("bfloat16", "float16"):  # 16-bit products run in float32 and round once
    tensor_in("A23_" + dt, dt, (2, 3), [1.5, -2, 0.25, 3, 100, -0.5])
    tensor_in("B32_" + dt, dt, (3, 2), [0.75, 2, -1, 4, 8, -3])
    case("mm", [Ref("A23_" + dt), Ref("B32_" + dt)], torch.mm)
    case("matmul", [Ref("B32_" + dt, t=True), Ref("A23_" + dt, t=True)], torch.matmul)
tensor_in("Cnan", "float32", (3, 2), [nan, 1, 2, inf, 0, nan])
case("addmm", [Ref("Cnan"), Ref("A34_float32"), Ref("B42_float32"), {"beta": 0}],
     lambda c, a, b, o: torch.addmm(c, a, b, beta=0), note="beta 0 ignores NaN in the input")
case("mm", [Ref("A34_float32"), Ref("A34_float32")], torch.mm, error_has=["mm", "(3, 4)"])
case("mm", [Ref("A34_float32"), Ref("B42_float64")], torch.mm, error_has=["float32", "float64"])
case("matmul", [Ref("bA_float32"), Ref("bm2_float32")], torch.matmul)
case("bmm", [Ref("bm1_float32"), Ref("bm1_float32")], torch.bmm)
case("dot", [Ref("v4_float32"), Ref("v3_float32")], torch.dot)

# ---- in-place ops, fills, copies, equal, allclose ----------------------------------------------

INPLACE = {"add_": "add_", "sub_": "sub_", "mul_": "mul_", "div_": "div_", "pow_": "pow_",
           "maximum_": None, "minimum_": None}
for da in ("float32", "int64", "uint8", "float16", "bool"):
    for other in (Ref("r_int64"), Ref("r_float32"), Ref("r_bool"), 2, 2.5, True, Ref("z_float64")):
        for op in ("add_", "sub_", "mul_", "div_"):
            case(op, [Ref("a_" + da), other], lambda a, b, op=op: getattr(a, op)(b))
case("add_", [Ref("a_float32"), Ref("r_float32"), {"alpha": 2}], lambda a, b, o: a.add_(b, alpha=2))
case("sub_", [Ref("a_int64"), Ref("r_int32"), {"alpha": 3}], lambda a, b, o: a.sub_(b, alpha=3))
case("add_", [Ref("a_int64"), Ref("r_int32"), {"alpha": 0.5}], lambda a, b, o: a.add_(b, alpha=0.5))
case("add_", [Ref("r_float32"), Ref("a_float32")], lambda a, b: a.add_(b), note="broadcast into self")
case("pow_", [Ref("a_float32"), 2], lambda a, b: a.pow_(b))
case("pow_", [Ref("a_int64"), 2], lambda a, b: a.pow_(b))
case("div_", [Ref("a_int64"), 2], lambda a, b: a.div_(b), error_has=["can't be cast"])
case("div_", [Ref("a_int32"), Ref("r_int32")], lambda a, b: a.div_(b), error_has=["can't be cast"])
case("mul_", [Ref("a_int64"), 2.5], lambda a, b: a.mul_(b), error_has=["can't be cast"])
case("eq_", [Ref("a_float32"), Ref("r_float32")], lambda a, b: a.eq_(b))
case("lt_", [Ref("a_int64"), 0], lambda a, b: a.lt_(b))
case("maximum_", [Ref("a_float32"), Ref("r_float32")], lambda a, b: torch.maximum(a, b, out=a))

for name in ("a_float32", "a_int64", "a_uint8", "a_bool", "a_bfloat16"):
    for v in (2.7, -3, True, 0):
        case("fill_", [Ref(name), v], lambda t, v: t.fill_(v))
    case("zero_", [Ref(name)], lambda t: t.zero_())
tensor_in("cpf", "float64", (3,), [-2.7, 0.5, 300.9])
tensor_in("cpneg", "int64", (3,), [-1, 256, 257])
for dst in ("a_float32", "a_int32", "a_uint8", "a_bool", "a_float16", "a_bfloat16", "a_int64"):
    for src in ("cpf", "cpneg", "r_bool", "a_float64", "z_float32", "r_float16"):
        if dst == "a_uint8" and src == "cpf": continue  # negative float to uint8 is undefined in C
        case("copy_", [Ref(dst), Ref(src)], lambda d, s: d.copy_(s))
case("copy_", [Ref("r_float32"), Ref("a_float32")], lambda d, s: d.copy_(s), note="src larger than dst")
case("copy_", [Ref("a_float32", t=True), Ref("C2_float64")], lambda d, s: d.copy_(s),
     note="a row broadcast into a transposed view")

tensor_in("eqa", "float32", (3,), [1, 2, 3])
tensor_in("eqb", "float32", (3,), [1, 2, 3.0001])
tensor_in("eqi", "int64", (3,), [1, 2, 3])
tensor_in("eqn", "float32", (3,), [1, nan, 3])
tensor_in("eqinf", "float64", (3,), [1, inf, -inf])
tensor_in("eqinf2", "float64", (3,), [1, inf, inf])
tensor_in("eq13", "float32", (1, 3), [1, 2, 3])
for a, b in (("eqa", "eqa"), ("eqa", "eqb"), ("eqa", "eqi"), ("eqn", "eqn"), ("eqa", "eq13"),
             ("eqinf", "eqinf"), ("eqinf", "eqinf2")):
    case("equal", [Ref(a), Ref(b)], torch.equal)
    case("allclose", [Ref(a), Ref(b)], torch.allclose)
    case("allclose", [Ref(a), Ref(b), {"rtol": 0, "atol": 1e-3}],
         lambda a, b, o: torch.allclose(a, b, rtol=o["rtol"], atol=o["atol"]))
    case("allclose", [Ref(a), Ref(b), {"rtol": 1e-6, "atol": 0}],
         lambda a, b, o: torch.allclose(a, b, rtol=o["rtol"], atol=o["atol"]))

# ---- error messages -----------------------------------------------------------------------------
case("add", [Ref("a_float32"), Ref("v4_float32")], BINARY["add"], error_has=["add", "(2, 3)", "(4,)"])
case("mul", [Ref("b41"), Ref("a_float32")], BINARY["mul"], error_has=["mul", "(4, 1)", "(2, 3)"])
case("add_", [Ref("r_float32"), Ref("a_float32")], lambda a, b: a.add_(b), error_has=["(3,)", "(2, 3)"])
case("eq", [Ref("a_float32"), Ref("v4_float32")], BINARY["eq"], error_has=["(2, 3)", "(4,)"])
case("where", [Ref("cond23"), Ref("v4_float32"), 0], torch.where, error_has=["where", "(4,)"])

# ---- writing ------------------------------------------------------------------------------------


def lua_num(v, dtype=None):
    if isinstance(v, bool): return "true" if v else "false"
    if isinstance(v, int): return "math.mininteger" if v == -2 ** 63 else str(v)  # else a float
    if math.isnan(v): return "nan"
    if math.isinf(v): return "inf" if v > 0 else "-inf"
    if dtype == "float16": s = str(numpy.float16(v))  # shortest digits that round-trip
    elif dtype in ("float32", "bfloat16"): s = str(numpy.float32(v))
    else: s = repr(v)
    if s.endswith(".0"): s = s[:-2]
    if dtype is None and not any(ch in s for ch in ".en"): s += ".0"  # a Lua float, not an integer
    return s


def lua(v, dtype=None):
    if v is None: return "nil"
    if isinstance(v, Ref): return ('Tt"%s"' if v.t else 'T"%s"') % v.name
    if isinstance(v, str): return '"%s"' % v
    if isinstance(v, (bool, int, float)): return lua_num(v, dtype)
    if isinstance(v, list): return "{" + ",".join(lua(x, dtype) for x in v) + "}"
    if isinstance(v, dict):
        return "{" + ",".join("%s=%s" % (k, lua(x, v.get("dtype") if k == "values" else None))
                              for k, x in v.items()) + "}"
    raise TypeError(v)


def lua_args(args):
    body = ",".join(lua(a) for a in args)
    return "{%s,n=%d}" % (body, len(args)) if any(a is None for a in args) else "{%s}" % body


def grad_fns():
    """The grad_fn name PyTorch gives each differentiable unary and binary op of the engine's
    tables (the comparisons and logical ops have none)."""
    x = torch.tensor([0.5, 1.5], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([1.7, 2.5], dtype=torch.float64, requires_grad=True)
    names = {op: torch_fn(op)(x).grad_fn.name() for op in UNARY if op != "logical_not"}
    for op in BINARY_OPS:
        r = BINARY[op](x, y)
        if r.grad_fn is not None: names[op] = r.grad_fn.name()
    return names


def number_grad_fns():
    """The grad_fn names of each differentiable binary op with a number on the right (t, n) and on
    the left (n, t): PyTorch names some of these forms apart (pow, rsub, a number over a tensor)."""
    x = torch.tensor([0.5, 1.5], dtype=torch.float64, requires_grad=True)
    names = {}
    for op in BINARY_OPS:
        right, left = BINARY[op](x, 1.7), BINARY[op](0.75, x)
        if right.grad_fn is not None: names[op] = (right.grad_fn.name(), left.grad_fn.name())
    return names


def main():
    out = ["-- Generated by tests/lua/gen_ops_reference.py from PyTorch %s; do not edit." % torch.__version__,
           "-- inputs: name = {dtype, shape, flat values}; T\"name\" is that input, Tt\"name\" its :t().",
           "local nan, inf = 0/0, math.huge",
           "local function T(name) return {ref = name} end",
           "local function Tt(name) return {ref = name, t = true} end",
           "return {", "inputs = {"]
    for name, (dt, shape, vals) in inputs.items():
        out.append("%s={%s,%s,%s}," % (name, lua(dt), lua(shape), lua(vals, dt)))
    out.append("},")
    out.append("cases = {")
    for c in cases:
        parts = ["op=%s" % lua(c["op"]), "args=%s" % lua_args(c["args"])]
        for k in ("expected", "expected2", "error_has", "note"):
            if k in c: parts.append("%s=%s" % (k, lua(c[k])))
        if c.get("expected_error"): parts.append("expected_error=true")
        out.append("{" + ",".join(parts) + "},")
    out.append("},")
    out.append("grad_fns = {")
    for op, node in grad_fns().items():
        out.append("%s=%s," % (op, lua(node)))
    out.append("},")
    out.append("number_grad_fns = {")
    for op, (right, left) in number_grad_fns().items():
        out.append("%s={right=%s,left=%s}," % (op, lua(right), lua(left)))
    out.append("}}")
    path = os.path.join("tests", "lua", "data", "ops_reference.lua")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote %s: %d inputs, %d cases, %d bytes" % (path, len(inputs), len(cases), os.path.getsize(path)))


def promotion_table():
    """Prints torch.result_type for every dtype pair and operand kind as C rows; they are pasted
    into tests/c/test_promotion.c (python3 tests/lua/gen_ops_reference.py --c-table)."""
    enum = {k: "MS_" + k.upper() for k in DTYPES}
    kinds = {"T": "MS_OPERAND_TENSOR", "Z": "MS_OPERAND_ZERO_DIM", "S": "MS_OPERAND_SCALAR"}
    scalars = {"int64": 2, "float64": 2.5, "bool": True}  # a Lua integer, float, boolean

    def operand(dt, kind):
        if kind == "S": return scalars[dt]
        return torch.ones((2,) if kind == "T" else (), dtype=DTYPES[dt])

    for ka in "TZS":
        for kb in "TZS":
            for da in (scalars if ka == "S" else DTYPES):
                for db in (scalars if kb == "S" else DTYPES):
                    r = NAMES[torch.result_type(operand(da, ka), operand(db, kb))]
                    print("    {%s, %s, %s, %s, %s}," % (enum[da], kinds[ka], enum[db], kinds[kb], enum[r]))


if __name__ == "__main__":
    import sys
    promotion_table() if sys.argv[1:] == ["--c-table"] else main()
