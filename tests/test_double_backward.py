"""Double backward, op by op: the Hessian-vector product ``grad(<grad(f, x, create_graph), v>,
x)`` against central differences of the first gradient, in float64.

Each case composes the op with something nonlinear, so the recorded backward of the op is
differentiated for real. The first gradient is the engine's ordinary backward, itself checked
against finite differences in test_ops.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp.autograd.higher_order import DOUBLE_BACKWARD
from minitorch_amp.nn import functional as F

RNG = np.random.default_rng(0)


def _pos(*shape):
    return RNG.uniform(0.5, 1.5, size=shape)


def _any(*shape):
    return RNG.uniform(-1.0, 1.0, size=shape)


def _away(*shape):  # magnitudes in [0.3, 1]: away from the kinks of relu, abs and clip
    return RNG.uniform(0.3, 1.0, size=shape) * RNG.choice([-1.0, 1.0], size=shape)


CASES = {
    "add+pow": (lambda x, y: ((x + y) ** 3).sum(), [_any(2, 3), _any(2, 3)]),
    "broadcast add": (lambda x, y: ((x + y) ** 3).sum(), [_any(2, 3), _any(1, 3)]),
    "subtract": (lambda x, y: ((x - y) * (x - y) * x).sum(), [_any(3), _any(3)]),
    "multiply/divide": (lambda x, y: (x / y * x).sum(), [_any(2, 2), _pos(2, 2)]),
    "neg": (lambda x: (-(x * x * x)).sum(), [_any(4)]),
    "pow by a tensor": (lambda x, y: (x**y).sum(), [_pos(3), _any(3)]),
    "square": (lambda x: x.square().square().sum(), [_any(3)]),
    "sqrt": (lambda x: (x.sqrt() * x).sum(), [_pos(3)]),
    "exp": (lambda x: (x.exp() * x).sum(), [_any(3)]),
    "log": (lambda x: (x.log() * x).sum(), [_pos(3)]),
    "abs": (lambda x: (x.abs() * x * x).sum(), [_away(4)]),
    "tanh": (lambda x: x.tanh().sum(), [_any(4)]),
    "sigmoid": (lambda x: x.sigmoid().sum(), [_any(4)]),
    "relu": (lambda x: (F.relu(x) * F.relu(x) * x).sum(), [_away(5)]),
    "clip": (lambda x: (x.clip(-0.2, 0.2) * x * x).sum(), [_away(5)]),
    "sum over an axis": (lambda x: (x.sum(axis=1) ** 3).sum(), [_any(2, 3)]),
    "mean keepdim": (lambda x: (x.mean(axis=0, keepdim=True) ** 3 * x).sum(), [_any(2, 3)]),
    "max": (lambda x: (x.max(axis=1) ** 3).sum(), [np.array([[0.1, 0.7, -0.2], [0.9, 0.3, 0.5]])]),
    "matmul": (lambda x, y: x.matmul(y).tanh().sum(), [_any(2, 3), _any(3, 4)]),
    "matmul transposed": (
        lambda x, y: x.matmul(y, transpose_x=True, transpose_y=True).tanh().sum(),
        [_any(3, 2), _any(4, 3)],
    ),
    "matmul batched, vector": (lambda x, y: x.matmul(y).tanh().sum(), [_any(2, 2, 3), _any(3)]),
    "linear": (lambda x, w, b: F.linear(x, w, b).tanh().sum(), [_any(2, 3), _any(3, 2), _any(2)]),
    "reshape/transpose": (
        lambda x: (x.reshape([3, 2]).transpose([1, 0]) ** 3 * x.reshape([2, 3])).sum(),
        [_any(2, 3)],
    ),
    "getitem": (lambda x: (x[1:, ::2] ** 3).sum() + (x[[0, 0, 1]] ** 3).sum(), [_any(3, 4)]),
    "concat/stack": (
        lambda x, y: (mt.concat([x, y], axis=1) ** 3).sum() + (mt.stack([x, y]) ** 3).sum(),
        [_any(2, 2), _any(2, 2)],
    ),
    "where": (lambda x, y: (mt.where(x > 0, x * x, y * y * y)).sum(), [_away(4), _any(4)]),
    "softmax": (lambda x: (F.softmax(x, axis=-1) ** 2).sum(), [_any(2, 4)]),
    "log_softmax": (lambda x: (F.log_softmax(x, axis=0) * x).sum(), [_any(3, 2)]),
    "mse_loss": (lambda x, y: F.mse_loss(x.tanh(), y), [_any(2, 3), _any(2, 3)]),
    "mse_loss sum, label needs grad": (
        lambda x, y: F.mse_loss(x, y.tanh(), reduction="sum") * x.sum(),
        [_any(3), _any(3)],
    ),
    "cast": (lambda x: (x.astype("float64") ** 3).sum(), [_any(3)]),
    "dropout (eval)": (lambda x: (F.dropout(x, 0.5, training=False) ** 3).sum(), [_any(3)]),
    # the issue-26 tensor ops (their rules: minitorch_amp/autograd/higher_order_more.py)
    "tril/triu": (lambda x: (mt.tril(x) ** 3).sum() + (mt.triu(x, 1) ** 3).sum(), [_any(3, 3)]),
    "masked_fill, value a tensor": (
        lambda x, v: (mt.masked_fill(x, mt.to_tensor([[True, False, True]]), v) ** 3).sum(),
        [_any(2, 3), _any(1)],
    ),
    "split/chunk/unbind": (
        lambda x: (
            sum(((p * (i + 1.0)) ** 3).sum() for i, p in enumerate(mt.split(x, [1, -1], 1)))
            + (mt.chunk(x, 2)[0] ** 3).sum()
            + (mt.unbind(x, axis=1)[2] ** 3).sum()
        ),
        [_any(2, 3)],
    ),
    "index_select/gather/take_along_axis": (
        lambda x: (
            (mt.index_select(x, mt.to_tensor([2, 0, 2]), axis=1) ** 3).sum()
            + (mt.gather(x, mt.to_tensor(1)) ** 3).sum()
            + (mt.take_along_axis(x, mt.to_tensor([[1, 1], [0, 2]]), axis=1) ** 3).sum()
        ),
        [_any(2, 3)],
    ),
    "sort/topk": (
        lambda x: (mt.sort(x, descending=True) ** 3 * x).sum() + (mt.topk(x, 2)[0] ** 3).sum(),
        [np.array([[0.3, -0.8, 0.5], [0.9, 0.1, -0.4]])],
    ),
    "clone": (lambda x: (x.clone() ** 3).sum(), [_any(3)]),
    "cumsum": (
        lambda x: (mt.cumsum(x, axis=1) ** 3).sum() + (mt.cumsum(x) ** 3).sum(),
        [_any(2, 3)],
    ),
    "rsqrt": (lambda x: (mt.rsqrt(x) * x * x).sum(), [_pos(4)]),
    "einsum": (
        lambda x, y: (
            mt.einsum("ij,jk->ik", x, y).tanh().sum()
            + (mt.einsum("ij->i", x) ** 3).sum()
            + mt.einsum("...j,j->...", x, y[:, 0]).tanh().sum()
        ),
        [_any(2, 3), _any(3, 4)],
    ),
    "bmm": (lambda x, y: mt.bmm(x, y).tanh().sum(), [_any(2, 2, 3), _any(2, 3, 2)]),
}


def _first(fn, arrays):
    ts = [mt.to_tensor(a, stop_gradient=False) for a in arrays]
    grads = mt.grad(fn(*ts), ts, allow_unused=True)
    return [np.zeros_like(a) if g is None else g.numpy() for a, g in zip(arrays, grads)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_hessian_vector_product_matches_finite_differences(name):
    fn, arrays = CASES[name]
    vs = [RNG.standard_normal(a.shape) for a in arrays]
    xs = [mt.to_tensor(a, stop_gradient=False) for a in arrays]
    grads = mt.grad(fn(*xs), xs, create_graph=True)
    dot = None
    for g, v in zip(grads, vs):
        term = (g * mt.to_tensor(v)).sum()
        dot = term if dot is None else dot + term
    hv = mt.grad(dot, xs, allow_unused=True)
    eps = 1e-6
    plus = _first(fn, [a + eps * v for a, v in zip(arrays, vs)])
    minus = _first(fn, [a - eps * v for a, v in zip(arrays, vs)])
    for got, p, m in zip(hv, plus, minus):
        want = (p - m) / (2 * eps)
        got = np.zeros_like(want) if got is None else got.numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_the_catalogue_covers_every_op_with_a_double_backward():
    internal = {"getitem_grad", "py_layer", "py_layer_output", "split_output"}
    names = {op.name for op in DOUBLE_BACKWARD} - internal
    covered = {
        "add", "subtract", "multiply", "divide", "neg", "pow", "square", "sqrt", "exp", "log",
        "abs", "tanh", "sigmoid", "relu", "clip", "sum", "mean", "max", "matmul", "linear",
        "reshape", "transpose", "getitem", "concat", "stack", "where", "softmax", "log_softmax",
        "mse_loss", "cast", "dropout",
        "tril", "triu", "masked_fill", "split", "unbind", "index_select", "gather",
        "take_along_axis", "assign", "cumsum", "rsqrt", "einsum", "bmm",
    }  # fmt: skip
    assert names <= covered | {"copy_to"}, names - covered


def test_the_docs_list_exactly_the_ops_with_a_double_backward():
    import re
    from pathlib import Path

    from minitorch_amp.autograd.higher_order import DOUBLE_BACKWARD

    page = (Path(__file__).resolve().parents[1] / "docs" / "autograd.md").read_text()
    paragraph = page.split("Ops with a double backward", 1)[1].split("and PyLayers", 1)[0]
    listed = set(re.findall(r"`(\w+)`", paragraph)) - {"tests"}
    internal = {"getitem_grad", "py_layer", "py_layer_output", "split_output"}
    assert listed == {op.name for op in DOUBLE_BACKWARD} - internal
