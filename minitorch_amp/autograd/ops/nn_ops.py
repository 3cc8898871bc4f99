"""Neural-network ops with state or structure: dropout, layer/batch normalisation, embedding.

Statistics of float16 input are computed in float32 (``accumulation_dtype``) and the result
is rounded once to the input's dtype; scale, bias and running statistics keep their own dtype.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ...backend import get_array_module, sync
from ...backend import layer_norm as _layer_norm
from ...backend.dtypes import accumulation_dtype, float32
from ...backend.primitives import column_sums, scatter_add
from ...backend.random import generator
from ...backend.row_sums import column_dots, row_dots, row_means
from ..op import BLACK, EXTRA_BLACK, GRAY, Op
from .activation import float_only

DROPOUT_MODES = ("upscale_in_train", "downscale_in_infer")


def check_dropout(p, mode) -> None:
    """Raise unless ``p`` is a probability and ``mode`` a dropout mode (F.dropout checks
    them in every mode, as Paddle does, before its inference short cut)."""
    if isinstance(p, bool):
        raise TypeError(f"dropout probability p must be a number in [0, 1], got {p!r}")
    if not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"dropout probability p must be in [0, 1], got {p}")
    if mode not in DROPOUT_MODES:
        raise ValueError(f"dropout mode must be one of {DROPOUT_MODES}, got {mode!r}")


def check_dropout_axis(axis) -> list[int] | None:
    """``axis`` as a list of ints (None stays None), or an error; the input's rank is checked
    by :func:`dropout_axes`. nn.Dropout calls this at construction."""
    if axis is None:
        return None
    axes = [axis] if isinstance(axis, numbers.Integral) else axis
    if not isinstance(axes, (list, tuple)) or not all(
        isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in axes
    ):
        raise TypeError(f"dropout: axis must be None, an int or a list of ints, got {axis!r}")
    if not axes or any(a < 0 for a in axes):
        raise ValueError(
            f"dropout: axis {axis!r} must name axes in [0, ndim) (Paddle takes no negative "
            "axes here): write a negative axis a as a + x.ndim"
        )
    return [int(a) for a in axes]


def dropout_axes(axis, ndim: int) -> tuple[int, ...] | None:
    """The axes of an ``ndim``-D input the mask is drawn over (None: all), or ValueError.

    Paddle refuses an axis outside ``[0, ndim)`` and more axes than ``ndim``; wrapping it
    (``axis % ndim``) would draw the mask over another axis, silently.
    """
    axes = check_dropout_axis(axis)
    if axes is None:
        return None
    if len(axes) > ndim or max(axes) >= ndim:
        raise ValueError(
            f"dropout: axis {axis!r} is out of range for a {ndim}-D input; give at most {ndim} "
            f"axes in [0, {ndim})"
        )
    return tuple(axes)


class Dropout(Op):
    """Zero each element with probability ``p`` (Paddle's two modes).

    ``upscale_in_train``: train ``x * mask / (1 - p)``, infer ``x``.
    ``downscale_in_infer``: train ``x * mask``, infer ``x * (1 - p)``.
    The mask is drawn from the library's generator (``seed(n)`` makes it reproducible), over
    the dimensions in ``axis`` only (all when None) and broadcast over the rest.
    """

    name = "dropout"
    amp = GRAY

    @staticmethod
    def forward(ctx, x, p=0.5, training=True, mode="upscale_in_train", axis=None):
        check_dropout(p, mode)
        if x.dtype.kind in "biu":
            raise float_only("dropout", x.dtype)
        axes = dropout_axes(axis, x.ndim)
        acc = accumulation_dtype(x.dtype)
        if not training or p == 0.0:
            ctx.factor = 1.0 - p if mode == "downscale_in_infer" and not training else 1.0
            if ctx.factor == 1.0:
                return x.copy()
            return (x.astype(acc, copy=False) * ctx.factor).astype(x.dtype, copy=False)
        xp = get_array_module(x)
        axes = range(x.ndim) if axes is None else axes
        mask_shape = [n if i in axes else 1 for i, n in enumerate(x.shape)]
        keep = generator(xp).random(mask_shape, dtype=float32) >= p
        scale = 1.0 if mode == "downscale_in_infer" else (1.0 / (1.0 - p) if p < 1.0 else 0.0)
        ctx.factor = keep.astype(acc) * scale
        return (x * ctx.factor).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, grad):
        if isinstance(ctx.factor, float) and ctx.factor == 1.0:  # p = 0: nothing was dropped
            return grad
        return (grad * ctx.factor).astype(grad.dtype, copy=False)


class LayerNorm(Op):
    """Normalise over the trailing ``normalized_shape`` dims, then scale and shift.

    ``y = (x - mean) / sqrt(var + epsilon) * weight + bias`` with the biased variance.
    ``weight``/``bias`` may have ``normalized_shape`` or be flattened to one dimension.
    """

    name = "layer_norm"
    amp = BLACK  # Paddle: layer_norm is on the fp16 black list
    amp_inputs = (0,)

    @staticmethod
    def forward(ctx, x, weight=None, bias=None, normalized_shape=(), epsilon=1e-5):
        if x.dtype.kind in "biu":
            raise float_only("layer_norm", x.dtype)
        normalized_shape = tuple(normalized_shape)
        k = len(normalized_shape)
        if k == 0 or k > x.ndim or tuple(x.shape[x.ndim - k :]) != normalized_shape:
            raise ValueError(
                f"layer_norm: input of shape {list(x.shape)} does not end with "
                f"normalized_shape {list(normalized_shape)}"
            )
        for label, param in (("weight", weight), ("bias", bias)):
            if param is not None and param.size != math.prod(normalized_shape):
                raise ValueError(
                    f"layer_norm: {label} of shape {list(param.shape)} does not match "
                    f"normalized_shape {list(normalized_shape)}"
                )
        xp = get_array_module(x)
        acc = accumulation_dtype(x.dtype)
        n = math.prod(normalized_shape)
        # One row per normalised slice. On a GPU three kernels do it all (backend/layer_norm.py:
        # one launch forward, two backward; the row's mean and rstd kept, not xhat). Else the
        # row sums are matrix-vector products on the CPU (BLAS; reductions elsewhere:
        # backend/row_sums.py), and every elementwise step writes into a fresh temporary, so a
        # float32 input makes no float64 and a float16 one is widened once.
        rows = x.astype(acc, copy=False).reshape(math.prod(x.shape[: x.ndim - k]), n)
        w = None if weight is None else weight.reshape(n).astype(acc, copy=False)
        b = None if bias is None else bias.reshape(n).astype(acc, copy=False)
        ctx.w, ctx.dtype = w, x.dtype
        ctx.w_shape = None if weight is None else weight.shape
        ctx.b_shape = None if bias is None else bias.shape
        if _layer_norm.usable(rows, w, b):
            out, ctx.mean, ctx.rstd = _layer_norm.forward(rows, w, b, epsilon)
            ctx.rows, ctx.xhat = rows, None
            return out.reshape(x.shape).astype(x.dtype, copy=False)
        centred = xp.subtract(rows, row_means(rows)[:, None])
        var = row_dots(centred, centred) * (1.0 / n)
        rstd = (1.0 / xp.sqrt(var + epsilon))[:, None]
        xhat = xp.multiply(centred, rstd, out=centred)
        out = xhat.copy() if w is None else xhat * w
        if b is not None:
            out += b
        ctx.xhat, ctx.rstd = xhat, rstd
        return out.reshape(x.shape).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, grad):
        xp = get_array_module(grad)
        xhat, rstd = ctx.xhat, ctx.rstd
        if xhat is None:  # the forward ran on the GPU's kernel: so do the gradients
            rows = ctx.rows
            g = grad.astype(rows.dtype, copy=False).reshape(rows.shape)
            needs = (*ctx.needs_grad, False, False)
            wants_w, wants_b = (
                ctx.w_shape is not None and needs[1],
                ctx.b_shape is not None and needs[2],
            )
            # the parameters' float32 grad buffers, written by the kernel itself (no copy after)
            _, w_out, b_out = (*(getattr(ctx, "grad_out", None) or ()), None, None, None)[:3]
            w_out = w_out if wants_w and w_out is not None and w_out.dtype == float32 else None
            b_out = b_out if wants_b and b_out is not None and b_out.dtype == float32 else None
            gx, gw, gb = _layer_norm.backward(
                g, rows, ctx.w, ctx.mean, rstd, wants_w, wants_b, w_out, b_out
            )
            gw = gw if gw is None or gw is w_out else gw.reshape(ctx.w_shape)
            gb = gb if gb is None or gb is b_out else gb.reshape(ctx.b_shape)
            return gx.reshape(grad.shape).astype(ctx.dtype, copy=False), gw, gb
        n = xhat.shape[1]
        g = grad.astype(xhat.dtype, copy=False).reshape(xhat.shape)
        gw = None
        if ctx.w_shape is not None:
            gw = column_dots(g, xhat).reshape(ctx.w_shape)
        gb = None if ctx.b_shape is None else column_sums(g).reshape(ctx.b_shape)
        gxhat = g.copy() if ctx.w is None else g * ctx.w  # fresh: written in place below
        # d/dx of (x - mean) * rstd: remove the gradient's mean and its projection on xhat.
        mean_g = row_means(gxhat)[:, None]
        proj = row_dots(gxhat, xhat)[:, None] * (1.0 / n)
        gx = xp.subtract(gxhat, mean_g, out=gxhat)
        gx -= xhat * proj
        gx *= rstd
        return gx.reshape(grad.shape).astype(ctx.dtype, copy=False), gw, gb


class BatchNorm(Op):
    """Normalise each channel by batch statistics (training) or running statistics (eval).

    ``y = (x - mean) / sqrt(var + epsilon) * weight + bias`` per channel, the channel being
    axis 1 of ``[N, C]`` or ``[N, C, ...]`` (``channel_axis=-1`` for channels-last).
    In training the arrays ``running_mean``/``running_var`` are updated in place, Paddle's way:
    ``running = momentum * running + (1 - momentum) * batch_stat`` with the biased variance.
    """

    name = "batch_norm"
    amp = GRAY
    amp_inputs = (0,)

    @staticmethod
    def forward(
        ctx,
        x,
        weight=None,
        bias=None,
        running_mean=None,
        running_var=None,
        training=False,
        momentum=0.9,
        epsilon=1e-5,
        channel_axis=1,
    ):
        if x.dtype.kind in "biu":
            raise float_only("batch_norm", x.dtype)
        if x.ndim < 2:
            raise ValueError(
                f"batch_norm: input must be [N, C] or [N, C, ...], got shape {list(x.shape)}"
            )
        c_axis = channel_axis % x.ndim
        channels = x.shape[c_axis]
        params = {"running_mean": running_mean, "running_var": running_var}
        params.update(weight=weight, bias=bias)
        for label, arr in params.items():
            if arr is not None and tuple(arr.shape) != (channels,):
                raise ValueError(
                    f"batch_norm: {label} of shape {list(arr.shape)} does not match the "
                    f"{channels} channels of input shape {list(x.shape)}"
                )
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm needs running_mean and running_var arrays")
        xp = get_array_module(x)
        acc = accumulation_dtype(x.dtype)
        axes = tuple(i for i in range(x.ndim) if i != c_axis)
        per_channel = [channels if i == c_axis else 1 for i in range(x.ndim)]
        xa = x.astype(acc, copy=False)
        if training:
            if x.size == 0:
                raise ValueError(
                    f"batch_norm in training needs at least one value per channel, got input "
                    f"of shape {list(x.shape)}"
                )
            mean = xa.mean(axis=axes, keepdims=True)
            var = ((xa - mean) ** 2).mean(axis=axes, keepdims=True)
        else:
            mean = running_mean.astype(acc).reshape(per_channel)
            var = running_var.astype(acc).reshape(per_channel)
        rstd = 1.0 / xp.sqrt(var + epsilon)
        xhat = (xa - mean) * rstd
        scale = rstd if weight is None else rstd * weight.astype(acc).reshape(per_channel)
        out = xhat if weight is None else xhat * weight.astype(acc).reshape(per_channel)
        if bias is not None:
            out = out + bias.astype(acc).reshape(per_channel)
        if training:  # only now, so a failure above leaves the running statistics untouched
            running_mean *= momentum
            running_mean += (1.0 - momentum) * mean.reshape(-1)
            running_var *= momentum
            running_var += (1.0 - momentum) * var.reshape(-1)
        ctx.xhat, ctx.scale, ctx.axes, ctx.training, ctx.dtype = (
            xhat,
            scale,
            axes,
            training,
            x.dtype,
        )
        ctx.has_weight, ctx.has_bias = weight is not None, bias is not None
        return out.astype(x.dtype, copy=out is xhat)

    @staticmethod
    def backward(ctx, grad):
        xhat, axes = ctx.xhat, ctx.axes
        g = grad.astype(xhat.dtype, copy=False)
        gw = (g * xhat).sum(axis=axes) if ctx.has_weight else None
        gb = g.sum(axis=axes) if ctx.has_bias else None
        if ctx.training:  # the batch statistics depend on x too: same projection as layer_norm
            g = (
                g
                - g.mean(axis=axes, keepdims=True)
                - xhat * (g * xhat).mean(axis=axes, keepdims=True)
            )
        return (ctx.scale * g).astype(ctx.dtype, copy=False), gw, gb


class Embedding(Op):
    """Rows of ``weight`` picked by integer ``ids``: ``out[..., :] = weight[ids[...], :]``.

    Rows equal to ``padding_idx`` come out as zeros and send no gradient to ``weight``.
    Backward adds every occurrence of an id into its row (a scatter-add, repeats included).
    """

    name = "embedding"
    amp = EXTRA_BLACK

    @staticmethod
    def forward(ctx, ids, weight, padding_idx=None):
        if ids.dtype.kind not in "iu":
            raise TypeError(
                f"embedding: ids must be an integer tensor (int32/int64), got {ids.dtype} "
                f"of shape {list(ids.shape)}"
            )
        if weight.ndim != 2:
            raise ValueError(
                f"embedding: weight must be [num_embeddings, dim], got shape {list(weight.shape)}"
            )
        rows = weight.shape[0]
        # ids < 0 or ids >= rows in one comparison (one launch on a GPU, not three): read as
        # unsigned, a negative id is 2**bits + id, far past any table's rows
        bad = ids.view(np.dtype(f"u{ids.dtype.itemsize}")) >= rows

        sync.check(  # no host read on the GPU: a device flag, reported at the next read
            ("embedding", rows), bad, ids, "id",
            lambda what: ValueError(
                f"embedding: {what} of ids of shape {list(ids.shape)} is out of range: weight "
                f"of shape {list(weight.shape)} has rows 0..{rows - 1}"
            ),
        )  # fmt: skip
        if not isinstance(ids, np.ndarray):
            ids = get_array_module(ids).where(bad, 0, ids)  # the GPU carries on, safely
        if padding_idx is not None:
            if not -rows <= padding_idx < rows:
                raise ValueError(
                    f"embedding: padding_idx {padding_idx} is out of range for weight of shape "
                    f"{list(weight.shape)}"
                )
            padding_idx %= rows
        out = weight[ids]
        ctx.pad = None if padding_idx is None else ids == padding_idx
        if ctx.pad is not None:
            out[ctx.pad] = 0
        ctx.ids, ctx.shape = ids, weight.shape
        return out

    @staticmethod
    def backward(ctx, grad):
        xp = get_array_module(grad)
        acc = accumulation_dtype(grad.dtype)
        rows = grad.reshape(ctx.ids.size, ctx.shape[1]).astype(acc, copy=False)
        if ctx.pad is not None:  # (not in place: rows may be the incoming gradient itself)
            rows = rows * ~ctx.pad.reshape(-1, 1)
        full = xp.zeros(ctx.shape, dtype=acc)
        scatter_add(full, ctx.ids.reshape(-1), rows)
        return None, full


__all__ = ["BatchNorm", "Dropout", "Embedding", "LayerNorm"]
