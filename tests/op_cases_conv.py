"""Inputs and float64 NumPy references for convolution, pooling and expand (``op_catalogue``).

The references are written the slow, obvious way (a loop over output positions reading each
window), independent of the im2col / strided-view code they check. Paddle's rules: SAME
padding and output sizes (``ConvOutputSize`` / ``PoolOutputSize``), padding that never takes
part in a max, ``exclusive`` averages that count only input elements.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st
from op_cases import Case, distinct

import minitorch_amp.nn.functional as F


# ---- convolution ---------------------------------------------------------------------------------
@st.composite
def conv_spec(draw, depthwise: bool):
    """(N, C, O, groups, H, W, kernel, stride, dilation, pads, has_bias)."""
    n = draw(st.sampled_from((1, 2, 0)))
    if depthwise:  # Paddle's depthwise rule: groups == C != 1, O a multiple of C
        groups = c = draw(st.integers(2, 3))
        o = c * draw(st.integers(1, 2))
    else:  # groups of >= 2 channels (one channel per group would be depthwise)
        groups = draw(st.integers(1, 2))
        c = groups * draw(st.integers(1, 2) if groups == 1 else st.just(2))
        o = groups * draw(st.integers(1, 2))
    kernel = draw(st.tuples(st.integers(1, 3), st.integers(1, 3)))
    stride = draw(st.tuples(st.integers(1, 2), st.integers(1, 2)))
    dilation = draw(st.tuples(st.integers(1, 2), st.integers(1, 2)))
    pads = draw(st.lists(st.integers(0, 2), min_size=4, max_size=4))
    sizes = draw(st.tuples(st.integers(1, 4), st.integers(1, 4)))
    has_bias = draw(st.booleans())
    return n, c, o, groups, sizes, kernel, stride, dilation, pads, has_bias


def make_conv(rng, s):
    n, c, o, groups, sizes, kernel, stride, dilation, pads, has_bias = s
    # at least one output position: the dilated kernel fits into the padded input
    h, w = (
        max(size, d * (k - 1) + 1 - p0 - p1)
        for size, k, d, p0, p1 in zip(sizes, kernel, dilation, pads[0::2], pads[1::2])
    )
    inputs = [rng.uniform(-2, 2, (n, c, h, w)), rng.uniform(-1, 1, (o, c // groups, *kernel))]
    if has_bias:
        inputs.append(rng.uniform(-1, 1, o))
    attrs = {"stride": list(stride), "padding": list(pads), "dilation": list(dilation)}
    return Case(inputs, {**attrs, "groups": groups})


def call_conv(x, weight, *bias, stride, padding, dilation, groups):
    b = bias[0] if bias else None
    return F.conv2d(x, weight, b, stride, padding, dilation, groups)


def ref_conv(x, weight, *bias, stride, padding, dilation, groups):
    n, _, h, w = x.shape
    o, c_group, kh, kw = weight.shape
    top, bottom, left, right = padding
    xpad = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    oh = (h + top + bottom - (dilation[0] * (kh - 1) + 1)) // stride[0] + 1
    ow = (w + left + right - (dilation[1] * (kw - 1) + 1)) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    per_group = o // groups
    for f in range(o):
        channels = slice((f // per_group) * c_group, (f // per_group + 1) * c_group)
        for i in range(oh):
            for j in range(ow):
                rows = i * stride[0] + dilation[0] * np.arange(kh)
                cols = j * stride[1] + dilation[1] * np.arange(kw)
                window = xpad[:, channels][:, :, rows][:, :, :, cols]
                out[:, f, i, j] = (window * weight[f]).sum(axis=(1, 2, 3))
    return out + (bias[0].reshape(1, -1, 1, 1) if bias else 0.0)


# ---- pooling -------------------------------------------------------------------------------------
@st.composite
def pool_spec(draw, kind: str):
    """(N, C, H, W, kernel, stride, pads, ceil_mode, exclusive); adaptive: (..., out_size)."""
    n, c = draw(st.sampled_from((1, 2, 0))), draw(st.integers(1, 2))
    h, w = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    if kind == "adaptive":
        return n, c, h, w, (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    pads = [draw(st.integers(0, kernel[i // 2] // 2)) for i in range(4)]  # pooling's limit
    return n, c, h, w, kernel, stride, pads, draw(st.booleans()), draw(st.booleans())


def _pool_out(size, kernel, before, after, stride, ceil):
    return (size + before + after - kernel + (stride - 1 if ceil else 0)) // stride + 1


def _windows_ok(size, kernel, before, after, stride, ceil) -> bool:
    """Every window holds an input element (else max is -inf and the mean 0 / 0)."""
    out = _pool_out(size, kernel, before, after, stride, ceil)
    starts = np.arange(out) * stride - before
    return out > 0 and bool(np.all((starts < size) & (starts + kernel > 0)))


def make_pool(kind: str):
    def make(rng, s):
        n, c, h, w = s[:4]
        values = distinct if kind == "max" else (lambda r, shape: r.uniform(-2, 2, shape))
        if kind == "adaptive":
            return Case([values(rng, (n, c, h, w))], {"output_size": list(s[4])})
        kernel, stride, pads, ceil, exclusive = s[4:]

        def sizes(pads):  # the input must hold one kernel, padding included
            return max(h, kernel[0] - pads[0] - pads[1]), max(w, kernel[1] - pads[2] - pads[3])

        fits = all(
            _windows_ok(size, k, pads[2 * i], pads[2 * i + 1], step, ceil)
            for i, (size, k, step) in enumerate(zip(sizes(pads), kernel, stride))
        )
        if not fits:
            pads, ceil = [0, 0, 0, 0], False
        h, w = sizes(pads)
        attrs = {"kernel_size": list(kernel), "stride": list(stride), "padding": pads}
        attrs["ceil_mode"] = ceil
        if kind == "avg":
            attrs["exclusive"] = exclusive
        return Case([values(rng, (n, c, h, w))], attrs)

    return make


def ref_pool(kind: str):
    def ref(x, kernel_size, stride, padding, ceil_mode, exclusive=True):
        n, c, h, w = x.shape
        (kh, kw), (sh, sw), (top, bottom, left, right) = kernel_size, stride, padding
        oh = _pool_out(h, kh, top, bottom, sh, ceil_mode)
        ow = _pool_out(w, kw, left, right, sw, ceil_mode)
        out = np.zeros((n, c, oh, ow))
        for i in range(oh):
            for j in range(ow):
                r0, c0 = i * sh - top, j * sw - left
                window = x[:, :, max(r0, 0) : r0 + kh, max(c0, 0) : c0 + kw]
                if kind == "max":
                    out[:, :, i, j] = window.max(axis=(2, 3)) if window.size else -np.inf
                else:
                    count = window.shape[2] * window.shape[3] if exclusive else kh * kw
                    out[:, :, i, j] = window.sum(axis=(2, 3)) / count
        return out

    return ref


def ref_adaptive_avg(x, output_size):
    n, c, h, w = x.shape
    oh, ow = output_size
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            rows = slice(i * h // oh, math.ceil((i + 1) * h / oh))
            cols = slice(j * w // ow, math.ceil((j + 1) * w / ow))
            out[:, :, i, j] = x[:, :, rows, cols].mean(axis=(2, 3))
    return out


# ---- expand --------------------------------------------------------------------------------------
def make_expand(rng, s):
    """``x``'s shape is a suffix of the target's with some dimensions set to 1."""
    target = s[0]
    k = int(rng.integers(0, len(target) + 1))
    ones = rng.integers(2, size=k).astype(bool)
    shape = tuple(1 if one else d for one, d in zip(ones, target[len(target) - k :]))
    return Case([rng.uniform(-2, 2, shape)], {"shape": list(target)})
