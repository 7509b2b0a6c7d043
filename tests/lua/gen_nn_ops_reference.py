#!/usr/bin/python3
# gen_nn_ops_reference.py: writes tests/lua/data/nn_ops_reference.lua, the PyTorch oracle for the
# functional NN layers (softmax, activations, linear, embedding, normalization, losses). Run with
# a Python that has torch 1.13 (Debian: /usr/bin/python3) from the repo root. Each case holds its
# float32 inputs, the output, the upstream gradient fed to backward and the resulting input
# gradients; tests/lua/test_nn_ops.lua rebuilds the same call by the case's name. Class targets
# and embedding indices are written 1-based, as the Lua API takes them.
import os
import subprocess

import torch
import torch.nn.functional as F

torch.manual_seed(1234)
cases = []  # (name, inputs {key: (kind, tensor)}, output, upstream grad, grads {key: tensor})


def fmt(v):
    return "%.9g" % v if v == v else "0/0"


def lua_tensor(t, shift=0):
    vals = ", ".join(fmt(float(v) + shift) if t.is_floating_point() else str(int(v) + shift)
                     for v in t.reshape(-1).tolist())
    return "{shape = {%s}, values = {%s}}" % (", ".join(str(s) for s in t.shape), vals)


def case(name, fn, floats, ints=None, extra=None):
    """floats: {key: float32 tensor (requires grad)}, ints: {key: int64 index tensor (0-based)},
    extra: {key: float32 tensor without grad}. fn(**all) returns the output."""
    ints, extra = ints or {}, extra or {}
    leaves = {k: v.clone().requires_grad_() for k, v in floats.items()}
    out = fn(**leaves, **ints, **{k: v.clone() for k, v in extra.items()})  # fn may update extras
    gout = torch.randn(out.shape)
    grad_fn = out.grad_fn.name()
    out.backward(gout)
    cases.append((name, floats, ints, extra, out.detach(), gout,
                  {k: v.grad for k, v in leaves.items()}, grad_fn))


def r(*shape):
    return torch.randn(*shape)


x35, x234 = r(3, 5), r(2, 3, 4)
case("softmax_d2", lambda x: F.softmax(x, 1), {"x": x35})
case("softmax_d1_3d", lambda x: F.softmax(x, 0), {"x": x234})
case("log_softmax_d2", lambda x: F.log_softmax(x, 1), {"x": x35})
case("log_softmax_d2_3d", lambda x: F.log_softmax(x, 1), {"x": x234})
case("log_softmax_last_3d", lambda x: F.log_softmax(x, -1), {"x": x234 * 4})

def engine_activations():
    """The functions of the engine's activation table (ms._op_info.activation), read from the
    moonshard binary ($MOONSHARD, default build/moonshard): an activation added to the table gets
    its case with no edit here."""
    code = 'for _, r in ipairs(require("moonshard")._op_info.activation) do print(r.name) end'
    return subprocess.check_output([os.environ.get("MOONSHARD", "build/moonshard"), "-e", code], text=True).split()


for act in engine_activations():
    case(act, lambda x, f=getattr(F, act): f(x), {"x": x35 * 2})
case("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), {"x": x35 * 2})
case("softplus_beta_threshold", lambda x: F.softplus(x, 2, 3), {"x": x35 * 2})
case("linear_bias", lambda x, w, b: F.linear(x, w, b), {"x": r(4, 5), "w": r(3, 5), "b": r(3)})
case("linear_nobias_3d", lambda x, w: F.linear(x, w), {"x": r(2, 4, 5), "w": r(3, 5)})
case("embedding", lambda w, idx: F.embedding(idx, w), {"w": r(6, 3)},
     {"idx": torch.tensor([[0, 2, 5], [2, 2, 1]])})
case("embedding_padding", lambda w, idx: F.embedding(idx, w, padding_idx=2), {"w": r(6, 3)},
     {"idx": torch.tensor([0, 2, 5, 2, 1])})
case("layer_norm", lambda x, w, b: F.layer_norm(x, (4,), w, b), {"x": r(2, 3, 4), "w": r(4), "b": r(4)})
case("layer_norm_2d_noaffine", lambda x: F.layer_norm(x, (3, 4), eps=1e-3), {"x": r(2, 3, 4)})
bn_x = r(4, 3, 2, 2)
case("batch_norm_train", lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.2),
     {"x": bn_x, "w": r(3), "b": r(3)}, extra={"rm": torch.zeros(3), "rv": torch.ones(3)})
case("batch_norm_eval", lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, training=False),
     {"x": bn_x, "w": r(3), "b": r(3)}, extra={"rm": r(3), "rv": torch.rand(3) + 0.5})
case("batch_norm_train_2d", lambda x: F.batch_norm(x, None, None, training=True), {"x": r(5, 3)})

logits, tgt = r(5, 4), torch.tensor([0, 3, 1, 3, 2])
tgt_ign = torch.tensor([0, -100, 1, 3, -100])
cw = torch.rand(4) + 0.5
lp = F.log_softmax(logits, 1)
case("nll_mean", lambda x, t: F.nll_loss(x, t), {"x": lp}, {"t": tgt})
case("nll_sum_weight", lambda x, t, w: F.nll_loss(x, t, weight=w, reduction="sum"), {"x": lp}, {"t": tgt},
     {"w": cw})
case("nll_mean_weight_ignore", lambda x, t, w: F.nll_loss(x, t, weight=w), {"x": lp}, {"t": tgt_ign}, {"w": cw})
case("nll_none_ignore", lambda x, t: F.nll_loss(x, t, reduction="none"), {"x": lp}, {"t": tgt_ign})
x3 = F.log_softmax(r(2, 4, 3), 1)
t3 = torch.tensor([[0, 3, 1], [2, 2, 0]])
case("nll_3d", lambda x, t: F.nll_loss(x, t), {"x": x3}, {"t": t3})
case("ce_mean", lambda x, t: F.cross_entropy(x, t), {"x": logits}, {"t": tgt})
case("ce_none_weight", lambda x, t, w: F.cross_entropy(x, t, weight=w, reduction="none"), {"x": logits},
     {"t": tgt}, {"w": cw})
case("ce_smooth_ignore", lambda x, t: F.cross_entropy(x, t, label_smoothing=0.2), {"x": logits}, {"t": tgt_ign})
case("ce_smooth_weight_ignore", lambda x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.3),
     {"x": logits}, {"t": tgt_ign}, {"w": cw})
case("ce_smooth_sum_3d", lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1, reduction="sum"),
     {"x": r(2, 4, 3)}, {"t": t3})
case("ce_smooth_none", lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1, reduction="none"),
     {"x": logits}, {"t": tgt_ign})
case("mse_mean", lambda a, b: F.mse_loss(a, b), {"a": r(3, 4), "b": r(3, 4)})
case("mse_sum", lambda a, b: F.mse_loss(a, b, reduction="sum"), {"a": r(3, 4), "b": r(3, 4)})
case("mse_none", lambda a, b: F.mse_loss(a, b, reduction="none"), {"a": r(3, 4), "b": r(3, 4)})


def running_stats():
    """The running statistics after the training case above, to check the in-place update."""
    rm, rv = torch.zeros(3), torch.ones(3)
    F.batch_norm(bn_x, rm, rv, training=True, momentum=0.2)
    return rm, rv


with open("tests/lua/data/nn_ops_reference.lua", "w") as f:
    f.write("-- Generated by tests/lua/gen_nn_ops_reference.py (torch %s); do not edit.\n" % torch.__version__)
    f.write("-- Targets and indices are 1-based (ignore_index -100 stays as it is).\n")
    f.write("return {\n")
    for name, floats, ints, extra, out, gout, grads, grad_fn in cases:
        f.write("  %s = {\n    grad_fn = \"%s\",\n" % (name, grad_fn))
        for group, items in (("inputs", floats), ("extra", extra)):
            f.write("    %s = {%s},\n" % (group, ", ".join("%s = %s" % (k, lua_tensor(v)) for k, v in items.items())))
        f.write("    ints = {%s},\n" % ", ".join(
            "%s = %s" % (k, lua_tensor(torch.where(v == -100, v - 1, v), 1)) for k, v in ints.items()))
        f.write("    out = %s,\n    gout = %s,\n" % (lua_tensor(out), lua_tensor(gout)))
        f.write("    grads = {%s},\n  },\n" % ", ".join("%s = %s" % (k, lua_tensor(v)) for k, v in grads.items()))
    rm, rv = running_stats()
    f.write("  batch_norm_running = {mean = %s, var = %s},\n" % (lua_tensor(rm), lua_tensor(rv)))
    f.write("}\n")
