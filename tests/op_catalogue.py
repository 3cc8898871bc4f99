"""The op catalogue: one entry per op (and a few variants), driving ``test_ops.py``.

An entry says how to call minitorch (``fn``), what the answer is in float64 NumPy (``ref``),
which inputs to try (``spec``, a hypothesis strategy, turned into arrays by ``make``), how
close each dtype must come (``tol``), whether inputs broadcast, and which ``OP_TABLE`` names it
exercises (``ops``; a test checks that every op in the table is claimed, and that each claim
shows up in the recorded graph).

``make(rng, spec)`` returns a :class:`~op_cases.Case`: the float64 values of the
differentiable inputs (the tests cast them to the dtype under test and wrap them as Tensors)
and ``attrs``, fixed extras (labels, axes, flags) passed to both ``fn`` and ``ref``.
Inputs and references for the structured ops live in ``op_cases.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st
from op_cases import (
    NONEMPTY_SIDE,
    RELATIONS,
    SIDE,
    STANDARD,
    Case,
    away_from,
    batch_norm_spec,
    broadcastable,
    call_batch_norm,
    call_cross_entropy,
    call_dropout,
    call_layer_norm,
    concat_spec,
    cross_entropy_spec,
    distinct,
    make_batch_norm,
    make_clip,
    make_compare,
    make_cross_entropy,
    make_dropout,
    make_embedding,
    make_flatten,
    make_getitem_array,
    make_getitem_basic,
    make_join,
    make_layer_norm,
    make_linear,
    make_matmul,
    make_mse,
    make_reshape,
    make_softmax,
    make_transpose,
    make_where,
    matmul_spec,
    random_axes,
    ref_batch_norm,
    ref_clip,
    ref_cross_entropy,
    ref_dropout,
    ref_embedding,
    ref_gelu,
    ref_layer_norm,
    ref_log_softmax,
    ref_matmul,
    ref_mse,
    ref_softmax,
    shape,
    uniform,
)
from op_cases_conv import (
    call_conv,
    conv_spec,
    make_conv,
    make_expand,
    make_pool,
    pool_spec,
    ref_adaptive_avg,
    ref_conv,
    ref_pool,
)
from op_cases_nn import (
    LEAKY_SLOPE,
    P_NORM_SPEC,
    RMS_NORM_SPEC,
    call_p_norm,
    call_pad,
    call_pad3d,
    call_rms_norm,
    make_p_norm,
    make_pad,
    make_pad3d,
    make_rms_norm,
    pad3d_spec,
    ref_leaky_relu,
    ref_p_norm,
    ref_pad,
    ref_pad3d,
    ref_rms_norm,
    ref_silu,
)
from op_cases_tensor import ENTRIES as TENSOR_ENTRIES
from op_cases_tensor import NOT_DIFFERENTIABLE as TENSOR_NOT_DIFFERENTIABLE

import minitorch_amp as mt
import minitorch_amp.nn.functional as F
from minitorch_amp.autograd import apply, ops

# (rtol, atol) per dtype of the inputs. float16 keeps ~3 decimal digits: a few units in the
# last place; float32 results are computed in float32, float64 ones must be nearly exact.
TOL = {"float16": (3e-3, 3e-3), "float32": (2e-5, 2e-6), "float64": (1e-10, 1e-12)}
# bfloat16 keeps 8 significant bits (~2.4 decimal digits): the same few units in the last
# place are 8x wider than float16's.
TOL["bfloat16"] = (2.5e-2, 2.5e-2)
LOOSE16 = {**TOL, "float16": (5e-3, 5e-3), "bfloat16": (4e-2, 4e-2)}  # long float32 sums

# Ops in OP_TABLE without a gradient: they are checked forward-only.
NOT_DIFFERENTIABLE = {"compare": "bool result", "argmax": "integer result"}


@dataclass(frozen=True)
class Entry:
    name: str
    ops: tuple[str, ...]
    fn: Callable
    ref: Callable
    spec: st.SearchStrategy
    make: Callable[[np.random.Generator, object], Case]
    tol: dict = field(default_factory=lambda: TOL)
    broadcasts: int = 0  # how many operands broadcast together (0: they do not)
    out_dtype: str | None = None  # the result's dtype when it is not the inputs'
    differentiable: bool = True


# ---- entry builders ------------------------------------------------------------------------------
def unary(name, fn, ref, values=STANDARD, op=None, **extra):
    return Entry(
        name,
        (op or name,),
        fn,
        ref,
        st.tuples(shape()),
        lambda rng, s: Case([values(rng, s[0])]),
        **extra,
    )


def binary(name, fn, ref, x_values=STANDARD, y_values=STANDARD):
    return Entry(
        name,
        (name,),
        fn,
        ref,
        broadcastable(2),
        lambda rng, s: Case([x_values(rng, s[0]), y_values(rng, s[1])]),
        broadcasts=2,
    )


def reduction(name, fn, ref, values=STANDARD, side=SIDE):
    def make(rng, s):
        x = values(rng, s[0])
        return Case([x], {"axis": random_axes(rng, x.ndim), "keepdim": bool(rng.integers(2))})

    return Entry(name, (name,), fn, ref, st.tuples(shape(0, 3, side)), make)


def _compare_entry(name):
    return Entry(
        f"compare_{name}",
        ("compare",),
        getattr(mt, name),
        RELATIONS[name],
        broadcastable(2),
        make_compare,
        broadcasts=2,
        out_dtype="bool",
        differentiable=False,
    )


# ---- the catalogue -------------------------------------------------------------------------------
ANY = st.tuples(shape())

CATALOGUE: list[Entry] = [
    # elementwise, broadcasting
    binary("add", mt.add, np.add),
    binary("subtract", mt.subtract, np.subtract),
    binary("multiply", mt.multiply, np.multiply),
    binary("divide", mt.divide, np.divide, y_values=away_from(0.0, gap=0.3)),
    binary("pow", mt.pow, np.power, x_values=uniform(0.5, 2.0), y_values=uniform(-2.0, 2.0)),
    unary("pow_scalar", lambda x: x**3, lambda x: x**3, op="pow"),
    # elementwise, unary
    unary("neg", mt.neg, np.negative),
    unary("square", mt.square, np.square),
    unary("sqrt", mt.sqrt, np.sqrt, uniform(0.2, 3.0)),
    unary("exp", mt.exp, np.exp, uniform(-3.0, 3.0)),
    unary("log", mt.log, np.log, uniform(0.2, 3.0)),
    unary("abs", mt.abs, np.abs, away_from(0.0)),
    unary("tanh", mt.tanh, np.tanh),
    unary("sigmoid", mt.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    unary("relu", F.relu, lambda x: np.maximum(x, 0), away_from(0.0)),
    unary("gelu", F.gelu, lambda x: ref_gelu(x, False), uniform(-4.0, 4.0)),
    unary(
        "gelu_tanh",
        lambda x: F.gelu(x, approximate=True),
        lambda x: ref_gelu(x, True),
        uniform(-4.0, 4.0),
        op="gelu",
    ),
    Entry("clip", ("clip",), mt.clip, ref_clip, ANY, make_clip),
    Entry("softmax", ("softmax",), F.softmax, ref_softmax, st.tuples(shape(1)), make_softmax),
    Entry(
        "log_softmax",
        ("log_softmax",),
        F.log_softmax,
        ref_log_softmax,
        st.tuples(shape(1, side=NONEMPTY_SIDE)),
        make_softmax,
    ),
    # reductions
    reduction("sum", mt.sum, lambda x, axis, keepdim: np.sum(x, axis, keepdims=keepdim)),
    reduction(
        "mean",
        mt.mean,
        lambda x, axis, keepdim: np.mean(x, axis, keepdims=keepdim),
        side=NONEMPTY_SIDE,
    ),
    reduction(
        "max",
        mt.max,
        lambda x, axis, keepdim: np.max(x, axis, keepdims=keepdim),
        values=distinct,
        side=NONEMPTY_SIDE,
    ),
    # shape
    Entry(
        "reshape",
        ("reshape",),
        mt.reshape,
        lambda x, shape: x.reshape(shape),
        ANY,
        make_reshape,
    ),
    Entry(
        "flatten",
        ("reshape",),
        mt.flatten,
        lambda x, start_axis: x.reshape(x.shape[:start_axis] + (-1,)),
        st.tuples(shape(1, side=NONEMPTY_SIDE)),
        make_flatten,
    ),
    unary(
        "unsqueeze_squeeze",
        lambda x: mt.squeeze(mt.unsqueeze(x, [0, -1]), [0]),
        lambda x: x[..., None],
        op="reshape",
    ),
    Entry(
        "transpose",
        ("transpose",),
        mt.transpose,
        lambda x, perm: np.transpose(x, perm),
        ANY,
        make_transpose,
    ),
    Entry(
        "getitem_basic",
        ("getitem",),
        lambda x, index: x[index],
        lambda x, index: x[index],
        st.tuples(shape(1)),
        make_getitem_basic,
    ),
    Entry(
        "getitem_int_array",
        ("getitem",),
        lambda x, index: x[mt.to_tensor(index)],
        lambda x, index: x[index],
        st.tuples(shape(1, side=NONEMPTY_SIDE)),
        make_getitem_array,
    ),
    Entry(
        "concat",
        ("concat",),
        lambda *xs, axis: mt.concat(list(xs), axis=axis),
        lambda *xs, axis: np.concatenate(xs, axis=axis),
        concat_spec(new_axis=False),
        make_join,
    ),
    Entry(
        "stack",
        ("stack",),
        lambda *xs, axis: mt.stack(list(xs), axis=axis),
        lambda *xs, axis: np.stack(xs, axis=axis),
        concat_spec(new_axis=True),
        make_join,
    ),
    Entry(
        "where",
        ("where",),
        lambda x, y, condition: mt.where(mt.to_tensor(condition), x, y),
        lambda x, y, condition: np.where(condition, x, y),
        broadcastable(3),
        make_where,
        broadcasts=3,
    ),
    unary("cast", lambda x: x.astype("float64"), lambda x: x, out_dtype="float64"),
    unary("copy_to", lambda x: apply(ops.CopyTo, x, place=mt.Place("cpu")), lambda x: x),
    # linear algebra
    Entry("matmul", ("matmul",), mt.matmul, ref_matmul, matmul_spec(), make_matmul, LOOSE16),
    Entry(
        "linear",
        ("linear",),
        F.linear,
        lambda x, w, b=0.0: x @ w + b,
        st.tuples(shape(0, 2), SIDE, SIDE, st.booleans()),
        make_linear,
        LOOSE16,
    ),
    Entry(
        "expand",
        ("expand",),
        mt.expand,
        lambda x, shape: np.broadcast_to(x, shape),
        st.tuples(shape()),
        make_expand,
    ),
    Entry(
        "expand_as",
        ("expand_as",),
        lambda x, shape: mt.expand_as(x, mt.zeros(shape)),
        lambda x, shape: np.broadcast_to(x, shape),
        st.tuples(shape()),
        make_expand,
    ),
    # convolution and pooling
    Entry("conv2d", ("conv2d",), call_conv, ref_conv, conv_spec(False), make_conv, LOOSE16),
    Entry(
        "depthwise_conv2d",
        ("depthwise_conv2d",),
        call_conv,
        ref_conv,
        conv_spec(True),
        make_conv,
        LOOSE16,
    ),
    Entry(
        "max_pool2d", ("pool2d",), F.max_pool2d, ref_pool("max"), pool_spec("max"), make_pool("max")
    ),
    Entry(
        "avg_pool2d", ("pool2d",), F.avg_pool2d, ref_pool("avg"), pool_spec("avg"), make_pool("avg")
    ),
    Entry(
        "adaptive_avg_pool2d",
        ("pool2d",),
        F.adaptive_avg_pool2d,
        ref_adaptive_avg,
        pool_spec("adaptive"),
        make_pool("adaptive"),
    ),
    # neural-network ops
    Entry("dropout", ("dropout",), call_dropout, ref_dropout, ANY, make_dropout),
    Entry(
        "layer_norm",
        ("layer_norm",),
        call_layer_norm,
        ref_layer_norm,
        st.tuples(shape(0, 2), shape(1, 2, st.integers(2, 4))),
        make_layer_norm,
        LOOSE16,
    ),
    Entry(
        "batch_norm_train",
        ("batch_norm",),
        call_batch_norm,
        ref_batch_norm,
        batch_norm_spec(training=True),
        make_batch_norm(training=True),
        LOOSE16,
    ),
    Entry(
        "batch_norm_eval",
        ("batch_norm",),
        call_batch_norm,
        ref_batch_norm,
        batch_norm_spec(training=False),
        make_batch_norm(training=False),
        LOOSE16,
    ),
    Entry(
        "embedding",
        ("embedding",),
        lambda w, ids, padding_idx: F.embedding(mt.to_tensor(ids), w, padding_idx),
        ref_embedding,
        st.tuples(shape(0, 2), NONEMPTY_SIDE, SIDE),
        make_embedding,
    ),
    Entry(
        "cross_entropy",
        ("cross_entropy",),
        call_cross_entropy,
        ref_cross_entropy,
        cross_entropy_spec(),
        make_cross_entropy,
        LOOSE16,
    ),
    Entry("mse_loss", ("mse_loss",), F.mse_loss, ref_mse, st.tuples(shape()), make_mse),
    # padding, norms and two activations (op_cases_nn.py)
    unary("leaky_relu", lambda x: F.leaky_relu(x, LEAKY_SLOPE), ref_leaky_relu, away_from(0.0)),
    unary("silu", F.silu, ref_silu, uniform(-4.0, 4.0)),
    Entry("pad", ("pad",), call_pad, ref_pad, ANY, make_pad),
    Entry("pad3d", ("pad3d",), call_pad3d, ref_pad3d, pad3d_spec(), make_pad3d),
    Entry("p_norm", ("p_norm",), call_p_norm, ref_p_norm, P_NORM_SPEC, make_p_norm),
    Entry(
        "rms_norm",
        ("rms_norm",),
        call_rms_norm,
        ref_rms_norm,
        RMS_NORM_SPEC,
        make_rms_norm,
        LOOSE16,
    ),
    # forward-only
    *[_compare_entry(name) for name in RELATIONS],
    Entry(
        "argmax",
        ("argmax",),
        lambda x, axis: mt.argmax(x, axis=axis),
        lambda x, axis: np.argmax(x.reshape(-1) if axis is None else x, axis=axis),
        st.tuples(shape(1, side=NONEMPTY_SIDE)),
        lambda rng, s: Case(
            [distinct(rng, s[0])], {"axis": [None, int(rng.integers(len(s[0])))][rng.integers(2)]}
        ),
        out_dtype="int64",
        differentiable=False,
    ),
]

# Indexing, sorting, triangles, einsum and the running sum (issue 26): tests/op_cases_tensor.py.
CATALOGUE += [Entry(**{**kw, "tol": {**TOL, **kw.get("tol", {})}}) for kw in TENSOR_ENTRIES]
NOT_DIFFERENTIABLE.update(TENSOR_NOT_DIFFERENTIABLE)
