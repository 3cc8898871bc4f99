"""Inputs and float64 NumPy references for the op catalogue (``op_catalogue.py``).

Shape strategies (with size-1 and size-0 dims, and broadcastable tuples), value domains that
keep finite differences honest (positive for log/sqrt, no ties for max, nothing near a kink),
and for each structured op: ``make`` (spec -> :class:`Case`), the minitorch call, the reference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

import minitorch_amp as mt
import minitorch_amp.nn.functional as F


@dataclass
class Case:
    """Float64 values of the differentiable inputs, and fixed extras for ``fn`` and ``ref``."""

    inputs: list[np.ndarray]
    attrs: dict = field(default_factory=dict)


# ---- shapes --------------------------------------------------------------------------------------
# Sides are mostly 1..4, sometimes 0 (empty tensors must work too).
SIDE = st.sampled_from((2, 3, 1, 4, 2, 3, 1, 4, 0))
NONEMPTY_SIDE = st.integers(1, 4)


def shape(min_dims=0, max_dims=3, side=SIDE):
    return st.lists(side, min_size=min_dims, max_size=max_dims).map(tuple)


@st.composite
def broadcastable(draw, n=2, max_dims=3, side=SIDE):
    """``n`` shapes that broadcast together: suffixes of one shape with some dims set to 1."""
    full = draw(shape(0, max_dims, side))
    out = []
    for _ in range(n):
        k = draw(st.integers(0, len(full)))
        ones = draw(st.lists(st.booleans(), min_size=k, max_size=k))
        out.append(tuple(1 if one else d for one, d in zip(ones, full[len(full) - k :])))
    return tuple(out)


# ---- values --------------------------------------------------------------------------------------
def uniform(lo=-2.0, hi=2.0):
    return lambda rng, s: rng.uniform(lo, hi, s)


def away_from(*points, gap=0.1):
    """Uniform in [-2, 2] with nothing within ``gap`` of a kink."""

    def draw(rng, s):
        v = rng.uniform(-2.0, 2.0, s)
        for p in points:
            near = np.abs(v - p) < gap
            v = np.where(near, p + np.where(v >= p, gap, -gap), v)
        return v

    return draw


STANDARD = uniform()


def distinct(rng, s):
    """No two values within 0.1 of each other (so max has no ties, even in float16)."""
    n = math.prod(s)
    return (rng.permutation(n) * 0.25 - n * 0.125 + rng.uniform(-0.05, 0.05, n)).reshape(s)


def random_axes(rng, ndim):
    """None, one axis (maybe negative) or a tuple of axes, for a reduction."""
    kind = rng.integers(3) if ndim else 0
    if kind == 0:
        return None
    if kind == 1:
        return int(rng.integers(-ndim, ndim))
    return tuple(int(a) for a in rng.choice(ndim, size=rng.integers(1, ndim + 1), replace=False))


# ---- float64 references for the composite ops ----------------------------------------------------
_erf = np.vectorize(math.erf, otypes=[np.float64])


def ref_log_softmax(x, axis):
    z = x - x.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def ref_softmax(x, axis):
    return np.exp(ref_log_softmax(x, axis)) if x.size else x


def ref_gelu(x, approximate):
    if approximate:
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + _erf(x / np.sqrt(2)))


def ref_clip(x, min=None, max=None):  # noqa: A002
    lo = -np.inf if min is None else min
    hi = np.inf if max is None else max
    return np.minimum(np.maximum(x, lo), hi)


def ref_matmul(x, y, transpose_x, transpose_y):
    if transpose_x and x.ndim > 1:
        x = np.swapaxes(x, -1, -2)
    if transpose_y and y.ndim > 1:
        y = np.swapaxes(y, -1, -2)
    return np.matmul(x, y)


def ref_dropout(x, p, training, mode, seed):
    keep = np.random.default_rng(seed).random(x.shape, dtype=np.float32) >= p
    if not training:
        return x * (1 - p)
    return x * keep / (1 - p) if mode == "upscale_in_train" else x * keep


def ref_layer_norm(x, *params, k, has_weight, has_bias, flat):
    axes = tuple(range(x.ndim - k, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    out = (x - mean) / np.sqrt(var + 1e-5)
    params = list(params)
    if has_weight:
        out = out * params.pop(0).reshape(x.shape[x.ndim - k :])
    if has_bias:
        out = out + params.pop(0).reshape(x.shape[x.ndim - k :])
    return out


def ref_batch_norm(x, *params, training, has_weight, has_bias, mean=None, var=None):
    axes = (0, *range(2, x.ndim))
    per_channel = [1, x.shape[1]] + [1] * (x.ndim - 2)
    if training:
        mean = x.mean(axis=axes)
        var = ((x - mean.reshape(per_channel)) ** 2).mean(axis=axes)
    out = (x - mean.reshape(per_channel)) / np.sqrt(var.reshape(per_channel) + 1e-5)
    params = list(params)
    if has_weight:
        out = out * params.pop(0).reshape(per_channel)
    if has_bias:
        out = out + params.pop(0).reshape(per_channel)
    return out


def ref_cross_entropy(x, label, reduction, ignore_index, axis, weight):
    lsm = np.moveaxis(ref_log_softmax(x, axis) if x.size else x, axis, -1)
    flat = label.reshape(lsm.shape[:-1])
    valid = flat != ignore_index
    safe = np.where(valid, flat, 0)
    w = (np.ones(safe.shape) if weight is None else weight[safe]) * valid
    losses = -np.take_along_axis(lsm, safe[..., None], -1)[..., 0] * w
    if reduction == "none":
        return losses.reshape(label.shape)
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / (w.sum() or 1.0)  # Paddle: 0 when every label is ignored


def ref_mse(x, y, reduction):
    sq = (x - y) ** 2
    return {"none": sq, "sum": sq.sum(), "mean": sq.mean() if sq.size else np.nan}[reduction]


def reshape_target(s):
    """Reversed dims with one -1; Paddle's 0 means "copy this input dim", so keep zeros put."""
    if 0 in s:
        return [*s, 1]
    target = list(reversed(s))
    return [-1, *target[1:]] if target else target


# ---- structured specs ----------------------------------------------------------------------------
def make_clip(rng, s):
    bounds = {"min": [None, -0.5][rng.integers(2)], "max": [None, 0.5][rng.integers(2)]}
    return Case([away_from(-0.5, 0.5)(rng, s[0])], bounds)


def make_reshape(rng, s):
    return Case([rng.uniform(-2, 2, s[0])], {"shape": reshape_target(s[0])})


def make_flatten(rng, s):
    return Case([rng.uniform(-2, 2, s[0])], {"start_axis": int(rng.integers(len(s[0])))})


def make_transpose(rng, s):
    return Case([rng.uniform(-2, 2, s[0])], {"perm": list(rng.permutation(len(s[0])))})


def make_softmax(rng, s):
    x = rng.uniform(-3, 3, s[0])
    return Case([x], {"axis": int(rng.integers(-x.ndim, x.ndim))})


@st.composite
def concat_spec(draw, new_axis):
    base = draw(shape(0 if new_axis else 1, 3))
    count = draw(st.integers(1, 3))
    ndim = len(base) + new_axis
    axis = draw(st.integers(-ndim, ndim - 1))
    sizes = [draw(SIDE) for _ in range(count)]
    if new_axis:
        return [base] * count, axis
    a = axis % len(base)
    return [base[:a] + (n,) + base[a + 1 :] for n in sizes], axis


def make_join(rng, s):
    shapes, axis = s
    return Case([rng.uniform(-2, 2, sh) for sh in shapes], {"axis": axis})


def make_where(rng, s):
    return Case(
        [rng.uniform(-2, 2, s[1]), rng.uniform(-2, 2, s[2])],
        {"condition": rng.random(s[0]) < 0.5},
    )


@st.composite
def matmul_spec(draw):
    n, k, m = draw(SIDE), draw(SIDE), draw(SIDE)
    vector_x, vector_y = draw(st.booleans()), draw(st.booleans())
    bx, by = draw(broadcastable(2, max_dims=2))
    tx, ty = draw(st.booleans()), draw(st.booleans())
    x = (k,) if vector_x else bx + ((k, n) if tx else (n, k))
    y = (k,) if vector_y else by + ((m, k) if ty else (k, m))
    return x, y, tx, ty


def make_matmul(rng, s):
    x, y, tx, ty = s
    return Case(
        [rng.uniform(-2, 2, x), rng.uniform(-2, 2, y)], {"transpose_x": tx, "transpose_y": ty}
    )


def make_linear(rng, s):
    lead, n_in, n_out, has_bias = s
    inputs = [rng.uniform(-2, 2, (*lead, n_in)), rng.uniform(-1, 1, (n_in, n_out))]
    if has_bias:
        inputs.append(rng.uniform(-1, 1, n_out))
    return Case(inputs)


def make_getitem_basic(rng, s):
    x = rng.uniform(-2, 2, s[0])
    choices = [(slice(None, None, 2),), (Ellipsis, slice(1, None)), (None, slice(None, None, -1))]
    if x.shape[0] > 0:
        choices.append((0, Ellipsis, None))
    return Case([x], {"index": choices[rng.integers(len(choices))]})


def make_getitem_array(rng, s):
    x = rng.uniform(-2, 2, s[0])
    return Case([x], {"index": rng.integers(0, x.shape[0], size=(2, 3))})  # repeats likely


def make_dropout(rng, s):
    training = bool(rng.integers(4))  # inference only in downscale mode (upscale returns x)
    mode = "upscale_in_train" if training and rng.integers(2) else "downscale_in_infer"
    # p = 0 returns x itself with no op recorded (test_ops.py tests that fast return)
    p = float(rng.choice([0.3, 0.5, 0.9]))
    attrs = {"p": p, "training": training, "mode": mode, "seed": int(rng.integers(1000))}
    return Case([rng.uniform(-2, 2, s[0])], attrs)


def call_dropout(x, p, training, mode, seed):
    mt.seed(seed)  # the same mask on every call: finite differences see one function
    return F.dropout(x, p=p, training=training, mode=mode)


def make_layer_norm(rng, s):
    lead, normalized = s
    has_weight, has_bias, flat = (bool(b) for b in rng.integers(2, size=3))
    # NOTE: a spread in every normalized group (a ramp plus noise): two nearly equal values
    # have a variance float32 cannot resolve against their mean (x - mean cancels), an
    # ill-conditioned case that no tolerance of float32 arithmetic covers.
    size = math.prod(normalized)
    ramp = np.linspace(-2, 2, size).reshape(normalized) if size > 1 else np.zeros(normalized)
    inputs = [ramp + rng.uniform(-1, 1, lead + normalized)]
    param_shape = (size,) if flat else normalized
    inputs += [rng.uniform(0.5, 1.5, param_shape)] if has_weight else []
    inputs += [rng.uniform(-1, 1, param_shape)] if has_bias else []
    attrs = {"k": len(normalized), "has_weight": has_weight, "has_bias": has_bias, "flat": flat}
    return Case(inputs, attrs)


def call_layer_norm(x, *params, k, has_weight, has_bias, flat):
    params = list(params)
    weight = params.pop(0) if has_weight else None
    bias = params.pop(0) if has_bias else None
    return F.layer_norm(x, x.shape[x.ndim - k :], weight, bias)


def batch_norm_spec(training):
    """``[N, C, *rest]``; training needs every channel non-empty (it divides by the count)."""
    n = st.integers(2, 4) if training else SIDE
    rest = shape(0, 1, NONEMPTY_SIDE if training else SIDE)
    return st.tuples(n, NONEMPTY_SIDE, rest).map(lambda t: (t[0], t[1], *t[2]))


def make_batch_norm(training):
    def make(rng, s):
        has_weight, has_bias = (bool(b) for b in rng.integers(2, size=2))
        x = rng.uniform(-2, 2, s)
        axes = tuple(i for i in range(x.ndim) if i != 1)
        while training and x.var(axis=axes).min() < 1e-3:
            # Ill-conditioned: float32 rounds the batch mean by up to an ulp of |x|, and the
            # output multiplies that by 1 / sqrt(var + 1e-5), up to 316 when a channel's
            # values nearly coincide (hypothesis found such a batch: error 9.6e-6 against the
            # 2e-6 float32 tolerance). Every float32 batch norm does that; keep var >= 1e-3.
            x = rng.uniform(-2, 2, s)
        inputs = [x]
        c = s[1]
        inputs += [rng.uniform(0.5, 1.5, c)] if has_weight else []
        inputs += [rng.uniform(-1, 1, c)] if has_bias else []
        attrs = {"training": training, "has_weight": has_weight, "has_bias": has_bias}
        if not training:
            attrs.update(mean=rng.uniform(-1, 1, c), var=rng.uniform(0.5, 2, c))
        return Case(inputs, attrs)

    return make


def call_batch_norm(x, *params, training, has_weight, has_bias, mean=None, var=None):
    params = list(params)
    weight = params.pop(0) if has_weight else None
    bias = params.pop(0) if has_bias else None
    stats_dtype = "float32" if x.dtype == mt.float16 else x.dtype
    c = x.shape[1]
    running_mean = mt.zeros([c], stats_dtype) if mean is None else mt.to_tensor(mean, stats_dtype)
    running_var = mt.ones([c], stats_dtype) if var is None else mt.to_tensor(var, stats_dtype)
    return F.batch_norm(x, running_mean, running_var, weight, bias, training=training)


def make_embedding(rng, s):
    ids_shape, rows, dim = s
    padding_idx = None if rng.integers(2) else int(rng.integers(-rows, rows))
    ids = rng.integers(0, rows, size=ids_shape)
    return Case([rng.uniform(-2, 2, (rows, dim))], {"ids": ids, "padding_idx": padding_idx})


def ref_embedding(weight, ids, padding_idx):
    out = weight[ids]
    if padding_idx is not None:
        out[ids == padding_idx % weight.shape[0]] = 0
    return out


@st.composite
def cross_entropy_spec(draw):
    lead = draw(shape(1, 2))
    classes = draw(NONEMPTY_SIDE)
    axis = draw(st.sampled_from([-1, 0])) if len(lead) > 1 else -1
    return lead, classes, axis


def make_cross_entropy(rng, s):
    lead, classes, axis = s
    x = np.moveaxis(rng.uniform(-3, 3, (*lead, classes)), -1, axis)
    ignore_index = int(rng.choice([-100, 0]))
    label = rng.integers(0, classes, size=lead)
    label[rng.random(lead) < 0.2] = ignore_index
    if rng.integers(2):  # Paddle's [N, 1] form: size 1 on the class axis
        label = np.expand_dims(label, axis)
    weighted = bool(rng.integers(2))
    attrs = {
        "label": label,
        "reduction": str(rng.choice(["mean", "sum", "none"])),
        "ignore_index": ignore_index,
        "axis": axis,
    }
    return Case([x], {**attrs, "weight": rng.uniform(0.5, 2, classes) if weighted else None})


def call_cross_entropy(x, label, reduction, ignore_index, axis, weight):
    w = None if weight is None else mt.to_tensor(weight, dtype=x.dtype)
    return F.cross_entropy(
        x, mt.to_tensor(label), w, ignore_index=ignore_index, reduction=reduction, axis=axis
    )


def make_mse(rng, s):
    return Case(
        [rng.uniform(-2, 2, s[0]), rng.uniform(-2, 2, s[0])],
        {"reduction": str(rng.choice(["mean", "sum", "none"]))},
    )


def make_compare(rng, s):
    return Case([rng.integers(-2, 3, s[0]) * 0.5, rng.integers(-2, 3, s[1]) * 0.5])


RELATIONS = {
    "equal": np.equal,
    "not_equal": np.not_equal,
    "less_than": np.less,
    "less_equal": np.less_equal,
    "greater_than": np.greater,
    "greater_equal": np.greater_equal,
}
