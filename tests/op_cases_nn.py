"""Inputs and float64 NumPy references for padding, the norms and two activations
(``op_catalogue``): ``pad`` and ``pad3d`` in every mode, ``p_norm`` (the norm inside
``F.normalize``, whose composition test_norms_and_activations.py checks), ``rms_norm``,
``leaky_relu`` and ``silu``.

The padding references are NumPy's ``np.pad``, whose modes are Paddle's under other names
(``edge`` is replicate, ``wrap`` is circular); the argument orders they check are written
out here from Paddle's rules, independently of ``F.pad``'s code.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st
from op_cases import NONEMPTY_SIDE, Case, shape

import minitorch_amp.nn.functional as F
from minitorch_amp.autograd import apply, ops

NP_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}
LEAKY_SLOPE = 0.1


def ref_leaky_relu(x):
    return np.where(x > 0, x, LEAKY_SLOPE * x)


def ref_silu(x):
    return x / (1 + np.exp(-x))


# ---- pad (constant border, any rank) -------------------------------------------------------------
def make_pad(rng, s):
    """Widths per axis; ``pad`` written first-axis-first (all axes, ``left``) or
    last-axis-first for the trailing ``k`` axes (``k != ndim - 2``: not the spatial form)."""
    x = rng.uniform(-2, 2, s[0])
    n = x.ndim
    left = n == 0 or bool(rng.integers(2))
    k = n if left else int(rng.choice([k for k in range(1, n + 1) if k != n - 2]))
    pairs = [(0, 0)] * (n - k) + [tuple(int(w) for w in rng.integers(0, 3, 2)) for _ in range(k)]
    value = float(rng.choice([0.0, -1.5]))
    return Case([x], {"pairs": pairs, "k": k, "left": left, "value": value})


def _last_axis_first(pairs):
    return [w for pair in reversed(pairs) for w in pair]


def call_pad(x, pairs, k, left, value):
    if left:
        return F.pad(x, [w for pair in pairs for w in pair], value=value)
    widths = _last_axis_first(pairs[len(pairs) - k :])
    return F.pad(x, widths, value=value, pad_from_left_axis=False)


def ref_pad(x, pairs, k, left, value):
    return np.pad(x, pairs, constant_values=value) if x.ndim else x.copy()


# ---- pad3d (the spatial form, every mode) --------------------------------------------------------
@st.composite
def pad3d_spec(draw):
    """(mode, channels_last, shape, widths per spatial axis)."""
    mode = draw(st.sampled_from(sorted(NP_MODES)))
    spatial = draw(st.integers(1, 3))
    side = NONEMPTY_SIDE if mode != "constant" else st.integers(0, 3)
    sizes = draw(st.lists(side, min_size=spatial, max_size=spatial))
    batch, channels = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    limit = {"reflect": lambda n: n - 1, "circular": lambda n: n + 2}.get(mode, lambda n: 2)
    widths = [
        tuple(draw(st.integers(0, limit(n))) for _ in range(2)) for n in sizes
    ]  # reflect: smaller than the axis; circular: may wrap more than once (Paddle)
    return mode, draw(st.booleans()), batch, channels, sizes, widths


def make_pad3d(rng, s):
    mode, last, batch, channels, sizes, widths = s
    shape_ = (batch, *sizes, channels) if last else (batch, channels, *sizes)
    attrs = {"mode": mode, "last": last, "widths": widths, "value": 0.5}
    return Case([rng.uniform(-2, 2, shape_)], attrs)


def call_pad3d(x, mode, last, widths, value):
    formats = {3: ("NCL", "NLC"), 4: ("NCHW", "NHWC"), 5: ("NCDHW", "NDHWC")}[x.ndim]
    pad = _last_axis_first(widths)  # [left, right, top, bottom, front, back]
    return F.pad(x, pad, mode=mode, value=value, data_format=formats[last])


def ref_pad3d(x, mode, last, widths, value):
    pairs = [(0, 0), *widths, (0, 0)] if last else [(0, 0), (0, 0), *widths]
    extra = {"constant_values": value} if mode == "constant" else {}
    return np.pad(x, pairs, mode=NP_MODES[mode], **extra)


# ---- p_norm (normalize's norm) -----------------------------------------------------------------
def make_p_norm(rng, s):
    """Values away from 0 (|x| has a kink there) with distinct magnitudes (for p = +-inf)."""
    n = math.prod(s[0])
    magnitudes = rng.permutation(n) * 0.25 + 0.3 + rng.uniform(-0.05, 0.05, n)
    x = (magnitudes * rng.choice([-1.0, 1.0], n)).reshape(s[0])
    p = float(rng.choice([1.0, 2.0, 3.0, 1.5, np.inf, -np.inf, 0.0]))
    attrs = {
        "porder": p,
        "axis": int(rng.integers(-x.ndim, x.ndim)),
        "keepdim": bool(rng.integers(2)),
    }
    return Case([x], attrs)


def call_p_norm(x, porder, axis, keepdim):
    return apply(ops.PNorm, x, porder=porder, axis=axis, keepdim=keepdim)


def ref_p_norm(x, porder, axis, keepdim):
    return np.linalg.norm(x, ord=porder, axis=axis, keepdims=keepdim)


# ---- rms_norm ------------------------------------------------------------------------------------
def make_rms_norm(rng, s):
    lead, normalized = s
    has_weight, flat = (bool(b) for b in rng.integers(2, size=2))
    inputs = [rng.uniform(-2, 2, lead + normalized)]
    if has_weight:
        inputs.append(rng.uniform(0.5, 1.5, (math.prod(normalized),) if flat else normalized))
    return Case(inputs, {"k": len(normalized)})


def call_rms_norm(x, *weight, k):
    return F.rms_norm(x, x.shape[x.ndim - k :], *weight)


def ref_rms_norm(x, *weight, k):
    axes = tuple(range(x.ndim - k, x.ndim))
    out = x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + 1e-5)
    return out * weight[0].reshape(x.shape[x.ndim - k :]) if weight else out


RMS_NORM_SPEC = st.tuples(shape(0, 2), shape(1, 2, st.integers(2, 4)))
P_NORM_SPEC = st.tuples(shape(1, 3, NONEMPTY_SIDE))
