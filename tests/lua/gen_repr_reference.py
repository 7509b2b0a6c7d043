#!/usr/bin/python3
# gen_repr_reference.py: writes tests/lua/data/repr_reference.lua, the PyTorch oracle for
# lua/moonshard/tensor_repr.lua. Run with a Python that has torch 1.13 (Debian: /usr/bin/python3)
# from the repo root; each case records the tensor's values and torch's repr of it.
import math
import os
import sys

import torch
import torch._tensor_str as tstr

DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
    "float16": torch.float16, "int64": torch.int64, "int32": torch.int32,
    "uint8": torch.uint8, "bool": torch.bool,
}
FLOATS = {"float32", "float64", "bfloat16", "float16"}
INT64_MIN = -(2 ** 63)

nan, inf = float("nan"), float("inf")
cases = []


def gen_values(spec, n):
    """Deterministic values shared with the Lua test: x = (i*mul + add) % mod + offset for the
    0-based index i, then x / div and x * scale when given, then the patches (1-based index).
    A bool tensor holds x != 0."""
    out = []
    for i in range(n):
        x = (i * spec.get("mul", 1) + spec.get("add", 0)) % spec.get("mod", n) + spec.get("offset", 0)
        if "div" in spec:
            x = x / spec["div"]
        if "scale" in spec:
            x = x * spec["scale"]
        out.append(x)
    for idx, v in spec.get("patch", []):
        out[idx - 1] = v
    return out


def case(name, dtype, shape, values=None, gen=None, requires_grad=False, opts=None, device=None):
    n = math.prod(shape)
    flat = gen_values(gen, n) if gen is not None else list(values)
    assert len(flat) == n, name
    src_dtype = torch.bool if dtype == "bool" else (torch.float64 if dtype in FLOATS else torch.int64)
    t = torch.tensor(flat, dtype=src_dtype).to(DTYPES[dtype]).reshape(shape)
    if requires_grad:
        t.requires_grad_(True)
    stored = t.detach().reshape(-1).tolist()
    if gen is not None and dtype == "bool":
        flat = [x != 0 for x in flat]
    if gen is not None and dtype not in ("float32", "float64"):
        # The Lua side regenerates gen values and only knows float32 rounding; other dtypes
        # must hold them exactly.
        assert all(a == b or (a != a and b != b) for a, b in zip(stored, flat)), name
    torch.set_printoptions(profile="default")
    if opts:
        torch.set_printoptions(**opts)
    expected = with_device(t, device) if device else repr(t)
    torch.set_printoptions(profile="default")
    cases.append(dict(name=name, dtype=dtype, shape=list(shape), requires_grad=requires_grad,
                      values=None if gen is not None else stored, gen=gen, opts=opts,
                      device=device, expected=expected))


def with_device(t, device):
    """This machine has no GPU, so build the repr of a tensor on `device` from torch's own
    pieces, with the suffixes in the order _str_intern appends them."""
    prefix = "tensor("
    suffixes = ["device='%s'" % device]
    if t.numel() == 0:
        if t.dim() != 1:
            suffixes.append("size=" + str(tuple(t.shape)))
        if t.dtype != torch.get_default_dtype():
            suffixes.append("dtype=" + str(t.dtype))
        body = "[]"
    else:
        if t.dtype not in (torch.float32, torch.int64, torch.bool):
            suffixes.append("dtype=" + str(t.dtype))
        body = tstr._tensor_str(t.detach(), len(prefix))
    if t.requires_grad:
        suffixes.append("requires_grad=True")
    return tstr._add_suffixes(prefix + body, suffixes, len(prefix), False)


# ---- 0-dim, every dtype ----
case("scalar float32 int", "float32", [], [3.0])
case("scalar float32 zero", "float32", [], [0.0])
case("scalar float32 negzero", "float32", [], [-0.0])
case("scalar float32 0.1", "float32", [], [0.1])
case("scalar float32 tiny", "float32", [], [1e-5])
case("scalar float32 huge", "float32", [], [3e9])
case("scalar float32 huge int", "float32", [], [2.0 ** 40])
case("scalar float32 nan", "float32", [], [nan])
case("scalar float32 -inf", "float32", [], [-inf])
case("scalar float64", "float64", [], [0.5])
case("scalar bfloat16", "bfloat16", [], [0.1])
case("scalar float16", "float16", [], [-2.5])
case("scalar int64", "int64", [], [5])
case("scalar int32", "int32", [], [-7])
case("scalar uint8", "uint8", [], [200])
case("scalar bool", "bool", [], [True])
case("scalar bool false", "bool", [], [False])
case("scalar requires_grad", "float32", [], [1.25], requires_grad=True)
case("scalar float64 requires_grad", "float64", [], [-3.0], requires_grad=True)

# ---- 1-D, formatter modes ----
case("1d int mode", "float32", [3], [1.0, 2.0, 3.0])
case("1d int mode negative", "float32", [4], [-1.0, 20.0, -300.0, 0.0])
case("1d negzero fixed width", "float32", [2], [-0.0, 1.5])
case("1d negzero int width", "float32", [2], [-0.0, 5.0])
case("1d all zero", "float64", [3], [0.0, -0.0, 0.0])
case("1d zero and nan", "float32", [2], [0.0, nan])
case("1d int mode zeros", "float32", [3], [0.0, 0.0, -0.0])
case("1d fixed", "float32", [3], [1.5, -2.25, 3.0])
case("1d fixed tenths", "float32", [3], [0.1, 0.2, 0.3])
case("1d fixed negatives", "float64", [5], [-1.123456, 22.5, -333.75, 0.0, 999.9999])
case("1d sci tiny", "float32", [3], [1e-5, 1.0, 2.0])
case("1d sci tiny only", "float32", [2], [1e-5, 3e-5])
case("1d sci ratio", "float32", [3], [0.001, 2.5, 0.0])
case("1d sci huge", "float64", [3], [1.5e9, 1.0, -2.0])
case("1d sci int mode ratio", "float32", [3], [1.0, 5000.0, -2.0])
case("1d sci int mode huge", "float64", [2], [1e9, 2.0])
case("1d int mode 1e8", "float64", [2], [1e8, 123456.0])
case("1d sci negative exps", "float64", [4], [-1e-10, 2.5e-3, 1e20, -7.0])
case("1d nan mix", "float32", [3], [nan, 1.0, 2.0])
case("1d nan fixed", "float32", [3], [nan, 1.5, -2.0])
case("1d inf mix", "float32", [3], [inf, -inf, 1.5])
case("1d inf int mode", "float32", [4], [inf, -inf, 1.0, 100.0])
case("1d all nonfinite", "float32", [3], [nan, inf, -inf])
case("1d nan sci", "float64", [3], [nan, 1e-8, 1.0])
case("1d inf sci", "float64", [3], [-inf, 1e10, 0.5])
case("1d float64", "float64", [4], [0.1, 1.0 / 3.0, 2.0 / 3.0, 1e3])
case("1d float16", "float16", [4], [0.1, 1.0 / 3.0, -65504.0, 0.0])
case("1d float16 tiny", "float16", [3], [6e-5, 1.0, 0.5])
case("1d bfloat16", "bfloat16", [4], [0.1, 1.0 / 3.0, 3.0e38, -1.0])
case("1d bfloat16 int", "bfloat16", [3], [1.0, 257.0, -3.0])
case("1d int64", "int64", [5], [0, -1, 22, -333, 4444])
case("1d int64 extremes", "int64", [2], [2 ** 63 - 1, INT64_MIN])
case("1d int32", "int32", [4], [2 ** 31 - 1, -(2 ** 31), 0, 5])
case("1d uint8", "uint8", [4], [0, 7, 128, 255])
case("1d bool", "bool", [4], [True, False, False, True])
case("1d bool single", "bool", [1], [False])
case("1d single", "float32", [1], [2.0])
case("1d requires_grad", "float32", [3], [1.0, 2.5, -3.0], requires_grad=True)
case("1d float64 requires_grad", "float64", [2], [1.0, 2.0], requires_grad=True)
case("1d float16 requires_grad", "float16", [2], [1.0, 0.5], requires_grad=True)

# ---- 1-D line wrapping at linewidth ----
case("1d wrap fixed", "float32", [30], gen=dict(div=7))
case("1d wrap int64", "int64", [100], gen=dict(mul=37, mod=1000, offset=-500))
case("1d wrap bool", "bool", [40], gen=dict(mod=3))
case("1d wrap sci", "float64", [20], gen=dict(mul=13, mod=17, offset=1, div=3, scale=1e-6))
case("1d wrap uint8", "uint8", [60], gen=dict(mul=97, mod=256))
case("1d wrap requires_grad", "float64", [27], gen=dict(mul=3, mod=29, div=8), requires_grad=True)
case("1d wrap suffix fits", "float64", [9], gen=dict(div=4, offset=1))
case("1d wrap suffix newline", "float64", [11], gen=dict(div=4, offset=1))
case("1d wrap suffix newline rg", "float16", [11], gen=dict(div=4, offset=1), requires_grad=True)

# ---- empty tensors ----
case("empty 0", "float32", [0], [])
case("empty 0 int64", "int64", [0], [])
case("empty 0 bool", "bool", [0], [])
case("empty 0 float64", "float64", [0], [])
case("empty 0x3", "float32", [0, 3], [])
case("empty 3x0", "float32", [3, 0], [])
case("empty 2x0x4 int32", "int32", [2, 0, 4], [])
case("empty 0 requires_grad", "float32", [0], [], requires_grad=True)
case("empty 0x3 float16 requires_grad", "float16", [0, 3], [], requires_grad=True)

# ---- 2-D and higher ----
case("2d int64", "int64", [2, 2], [1, 2, 3, 4])
case("2d float int mode", "float32", [2, 3], [1.0, -2.0, 3.0, 40.0, 5.0, -600.0])
case("2d fixed", "float32", [3, 4], gen=dict(mul=5, mod=12, offset=-6, div=3))
case("2d sci", "float64", [2, 2], [1e-7, 2.0, -3.5, 1e4])
case("2d bool", "bool", [2, 3], [True, False, True, False, False, True])
case("2d wrap rows", "float32", [3, 15], gen=dict(mul=7, mod=45, div=9))
case("2d single column", "int32", [4, 1], [1, -22, 333, 0])
case("2d single row", "float64", [1, 3], [0.5, 1.0, 2.0])
case("2d requires_grad", "float32", [2, 2], [0.5, 1.5, -2.5, 3.5], requires_grad=True)
case("2d nan inf", "float32", [2, 3], [nan, 1.0, inf, -inf, 0.5, -2.0])
case("3d float", "float32", [2, 3, 4], gen=dict(mul=11, mod=24, offset=-12, div=4))
case("3d int64", "int64", [3, 2, 2], gen=dict(mul=5, mod=12, offset=-6))
case("3d uint8", "uint8", [2, 2, 3], gen=dict(mul=29, mod=256))
case("4d float", "float32", [2, 2, 2, 3], gen=dict(div=2))
case("4d bfloat16", "bfloat16", [2, 1, 2, 2], gen=dict(mul=3, mod=8, offset=-4, div=8))
case("5d int32", "int32", [2, 1, 2, 1, 2], gen=dict())
case("3d wrap rows", "float64", [2, 2, 12], gen=dict(mul=7, mod=48, offset=-20, div=3))
case("3d requires_grad sci", "float64", [2, 2, 2], [1e-5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
     requires_grad=True)

# ---- summarization (numel > threshold) ----
case("sum 1d 2000 float", "float32", [2000], gen=dict(div=10))
case("sum 1d 2000 int64", "int64", [2000], gen=dict())
case("sum 1d 1001 bool", "bool", [1001], gen=dict(mod=2, add=1))
case("sum 2d 40x40 int64", "int64", [40, 40], gen=dict(mul=7, mod=1601, offset=-800))
case("sum 2d 40x40 float", "float32", [40, 40], gen=dict(mul=13, mod=997, div=7))
case("sum 3d 10x10x20", "float32", [10, 10, 20], gen=dict(mul=17, mod=2000, div=3))
case("sum 2d 4x500", "float64", [4, 500], gen=dict(div=8))
case("sum 2d 500x4", "int32", [500, 4], gen=dict())
case("sum 4d 5x6x7x8", "float32", [5, 6, 7, 8], gen=dict(mul=3, mod=1680, div=16))
# stats come from the shown items only: the huge value sits in the elided middle
case("sum elided huge", "float32", [2000], gen=dict(div=4, patch=[[1000, 1e12]]))
case("sum shown huge", "float32", [2000], gen=dict(div=4, patch=[[2, 1e12]]))
case("sum elided nan", "float32", [2000], gen=dict(div=4, patch=[[1000, nan]]))
case("sum sci", "float64", [2000], gen=dict(offset=1, scale=1e-6))
case("sum requires_grad", "float32", [1500], gen=dict(div=2), requires_grad=True)
case("sum float16", "float16", [1200], gen=dict(mod=64, div=4))

# ---- print options ----
case("opt precision 2", "float32", [3], [1.12345, -2.5, 3.0], opts=dict(precision=2))
case("opt precision 6", "float64", [3], [1.12345, -2.5, 3.0], opts=dict(precision=6))
case("opt precision 0", "float64", [3], [1.5, -2.25, 3.0], opts=dict(precision=0))
case("opt precision 2 sci", "float64", [2], [1e-6, 1.0], opts=dict(precision=2))
case("opt threshold 5", "int64", [10], gen=dict(), opts=dict(threshold=5))
case("opt threshold 5 exact", "int64", [5], gen=dict(), opts=dict(threshold=5))
case("opt edgeitems 1", "float32", [20, 20], gen=dict(div=4), opts=dict(threshold=10, edgeitems=1))
case("opt edgeitems 5", "int64", [2000], gen=dict(), opts=dict(edgeitems=5))
case("opt linewidth 40", "float32", [20], gen=dict(div=3), opts=dict(linewidth=40))
case("opt linewidth 20 suffix", "float64", [6], gen=dict(div=3), opts=dict(linewidth=20))
case("opt linewidth 200", "int64", [60], gen=dict(mul=31, mod=997), opts=dict(linewidth=200))
case("opt sci_mode true", "float32", [3], [1.0, 2.5, 3.0], opts=dict(sci_mode=True))
case("opt sci_mode true int", "float32", [3], [1.0, 2.0, 30.0], opts=dict(sci_mode=True))
case("opt sci_mode false tiny", "float32", [3], [1e-5, 1.0, 2.0], opts=dict(sci_mode=False))
case("opt sci_mode false huge", "float64", [2], [1e12, 0.5], opts=dict(sci_mode=False))
case("opt sci_mode all zero", "float32", [2], [0.0, 0.0], opts=dict(sci_mode=True))
case("opt profile short", "float32", [2000], gen=dict(div=3), opts=dict(profile="short"))
case("opt profile full", "int64", [1200], gen=dict(mul=7, mod=100), opts=dict(profile="full"))
case("opt profile short override", "float32", [4], [0.12345, 1.0, 2.0, 3.0],
     opts=dict(profile="short", precision=3))
case("opt precision 2 ties", "float64", [4], [0.125, 0.375, 2.5, -0.625], opts=dict(precision=2))
case("opt precision 0 ties", "float64", [4], [0.5, 1.5, 2.5, -0.5], opts=dict(precision=0))
case("opt threshold 0 scalar", "float32", [], [2.5], opts=dict(threshold=0))
case("opt threshold 0 vector", "int64", [7], gen=dict(), opts=dict(threshold=0))
case("opt linewidth 5", "float32", [4], [1.5, 2.5, 3.5, 4.5], opts=dict(linewidth=5))
case("opt linewidth 5 2d", "int64", [2, 3], gen=dict(), opts=dict(linewidth=5))
case("opt sci_mode true nan", "float32", [3], [nan, 2.5, -inf], opts=dict(sci_mode=True))
case("opt sci_mode false int huge", "float64", [2], [1e9, 1.0], opts=dict(sci_mode=False))
case("opt sum int mode", "float32", [20, 20], gen=dict(mul=7, mod=400, offset=-200),
     opts=dict(threshold=100, edgeitems=2))
case("opt scalar precision", "float32", [], [3.14159265], opts=dict(precision=8))

# ---- non-cpu device (suffix only; composed from torch's own pieces) ----
case("device cuda scalar", "float32", [], [1.0], device="cuda:0")
case("device cuda vector", "float64", [3], [1.0, 2.0, 3.0], device="cuda:0", requires_grad=True)
case("device cuda empty", "int64", [0, 2], [], device="cuda:0")
case("device cuda wrap", "float16", [11], gen=dict(div=4, offset=1), device="cuda:1",
     requires_grad=True)


def lua_value(v, dtype):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int) and dtype not in FLOATS:
        return "math.mininteger" if v == INT64_MIN else str(v)
    v = float(v)
    if v != v:
        return "0/0"
    if math.isinf(v):
        return "1/0" if v > 0 else "-1/0"
    return repr(v)  # shortest round-trip form; always has '.' or 'e', so Lua reads a float


def lua_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def lua_table(d):
    parts = []
    for k, v in d.items():
        if isinstance(v, list):
            items = ", ".join(
                "{%s}" % ", ".join(lua_value(x, "float64") for x in item) if isinstance(item, list)
                else lua_value(item, "float64") for item in v)
            parts.append("%s={%s}" % (k, items))
        elif isinstance(v, bool):
            parts.append("%s=%s" % (k, "true" if v else "false"))
        elif isinstance(v, str):
            parts.append("%s=%s" % (k, lua_string(v)))
        elif isinstance(v, int):
            parts.append("%s=%d" % (k, v))
        else:
            parts.append("%s=%s" % (k, lua_value(v, "float64")))
    return "{" + ", ".join(parts) + "}"


def emit(path):
    out = ["-- Generated by tests/lua/gen_repr_reference.py with torch %s; do not edit.\n"
           "-- Each case: the tensor (values or a gen formula) and torch's repr of it.\n"
           "return {\n" % torch.__version__]
    for c in cases:
        fields = ["name=%s" % lua_string(c["name"]), "dtype=%s" % lua_string(c["dtype"]),
                  "shape={%s}" % ", ".join(str(s) for s in c["shape"]),
                  "requires_grad=%s" % ("true" if c["requires_grad"] else "false")]
        if c["gen"] is not None:
            fields.append("values=%s" % lua_table(dict(gen="mod", **c["gen"])))
        else:
            fields.append("values={%s}" % ", ".join(lua_value(v, c["dtype"]) for v in c["values"]))
        if c["opts"]:
            fields.append("opts=%s" % lua_table(c["opts"]))
        if c["device"]:
            fields.append("device=%s" % lua_string(c["device"]))
        fields.append("expected=%s" % lua_string(c["expected"]))
        out.append("  {" + ", ".join(fields[:-1]) + ",\n   " + fields[-1] + "},\n")
    out.append("}\n")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("".join(out))


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    target = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "data", "repr_reference.lua")
    emit(target)
    print("wrote %d cases to %s" % (len(cases), target))
