"""Catalogue entries for the indexing, sorting, triangle, einsum and scan ops (issue 26):
their inputs, the minitorch call and the float64 NumPy reference.

``ENTRIES`` holds the keyword arguments of ``op_catalogue.Entry`` (this module cannot import
that class: op_catalogue imports this one). Functions with several results are checked
through one tensor: the pieces of a split are weighted (piece i times i + 1) and joined, so
each piece's gradient is distinct; topk and sort give their values, their positions are
checked forward-only.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from op_cases import NONEMPTY_SIDE, SIDE, Case, broadcastable, distinct, shape

import minitorch_amp as mt


def _axis(rng, ndim: int) -> int:
    return int(rng.integers(-ndim, ndim))


def _weighted(pieces, join, axis):
    return join([p * float(i + 1) for i, p in enumerate(pieces)], axis=axis)


# ---- triangles and masks -------------------------------------------------------------------------
def make_triangle(rng, s):
    return Case([rng.uniform(-2, 2, s[0])], {"diagonal": int(rng.integers(-2, 3))})


def make_masked_fill(rng, s):
    x_shape, mask_shape = s
    return Case(
        [rng.uniform(-2, 2, x_shape)],
        {"mask": rng.random(mask_shape) < 0.5, "value": float(rng.choice([-1e4, 0.5, 3.0]))},
    )


def call_masked_fill(x, mask, value):
    return mt.masked_fill(x, mt.to_tensor(mask), value)


def make_masked_fill_tensor(rng, s):
    x = rng.uniform(-2, 2, s[0])
    return Case([x, rng.uniform(-2, 2, ())], {"mask": rng.random(x.shape) < 0.5})


# ---- split, chunk, unbind ------------------------------------------------------------------------
def make_split(rng, s):
    x = rng.uniform(-2, 2, s[0])
    axis = _axis(rng, x.ndim)
    size = x.shape[axis]
    if rng.integers(2):  # an int that divides the size
        sections = int(rng.choice([n for n in range(1, 5) if size % n == 0]))
    else:  # sizes that add up, maybe one -1
        cuts = np.sort(rng.integers(0, size + 1, size=int(rng.integers(0, 3))))
        sections = np.diff(np.concatenate([[0], cuts, [size]])).tolist()
        if rng.integers(2):
            sections[int(rng.integers(len(sections)))] = -1
    return Case([x], {"sections": sections, "axis": axis})


def call_split(x, sections, axis):
    return _weighted(mt.split(x, sections, axis=axis), mt.concat, axis)


def ref_split(x, sections, axis):
    size = x.shape[axis]
    if isinstance(sections, int):
        sizes = [size // sections] * sections
    else:
        sizes = [size - (sum(sections) + 1) if s == -1 else s for s in sections]
    pieces = np.split(x, np.cumsum(sizes)[:-1], axis=axis)
    return np.concatenate([p * (i + 1) for i, p in enumerate(pieces)], axis=axis)


def make_chunk(rng, s):
    x = rng.uniform(-2, 2, s[0])
    axis = _axis(rng, x.ndim)
    chunks = [n for n in range(1, 5) if x.shape[axis] % n == 0]
    return Case([x], {"chunks": int(rng.choice(chunks)), "axis": axis})


def make_unbind(rng, s):
    x = rng.uniform(-2, 2, s[0])
    return Case([x], {"axis": _axis(rng, x.ndim)})


def ref_unbind(x, axis):
    weights = np.arange(1, x.shape[axis] + 1).reshape([-1] + [1] * (x.ndim - axis % x.ndim - 1))
    return x * weights


# ---- selection by index tensors ------------------------------------------------------------------
def make_index_select(zero_d: bool):
    def make(rng, s):
        x = rng.uniform(-2, 2, s[0])
        axis = _axis(rng, x.ndim)
        n = x.shape[axis]
        if zero_d and n and rng.integers(2):
            index = np.array(rng.integers(n))  # 0-D: the axis goes away
        else:  # repeats likely: their gradients must add up
            index = rng.integers(0, n, size=int(rng.integers(0, 5)) if n else 0)
        return Case([x], {"index": index, "axis": axis})

    return make


def make_take_along_axis(rng, s):
    x = rng.uniform(-2, 2, s[0])
    axis = _axis(rng, x.ndim)
    broadcast = bool(rng.integers(2))
    shape_ = list(x.shape)
    shape_[axis] = int(rng.integers(0, 4)) if x.shape[axis] else 0
    for d in range(x.ndim):  # other axes: as large (or 1), or smaller without broadcasting
        if d != axis and x.shape[d] > 1 and rng.integers(3) == 0:
            shape_[d] = 1 if broadcast else int(rng.integers(1, x.shape[d]))
    indices = rng.integers(0, max(x.shape[axis], 1), size=shape_)
    return Case([x], {"indices": indices, "axis": axis, "broadcast": broadcast})


def ref_take_along_axis(x, indices, axis, broadcast):
    if not broadcast:  # PyTorch's gather reads the leading part of the other axes
        lead = [slice(0, n) for n in indices.shape]
        lead[axis] = slice(None)
        x = x[tuple(lead)]
    return np.take_along_axis(x, indices, axis)


# ---- sorting and sampling ------------------------------------------------------------------------
def make_sort(rng, s):
    x = distinct(rng, s[0])  # no ties: the gradient of a sort is defined
    return Case([x], {"axis": _axis(rng, x.ndim), "descending": bool(rng.integers(2))})


def ref_argsort(x, axis, descending):
    return np.argsort(-x if descending else x, axis=axis, kind="stable")


def ref_sort(x, axis, descending):
    return np.take_along_axis(x, ref_argsort(x, axis, descending), axis)


def make_topk(rng, s):
    x = distinct(rng, s[0])
    axis = _axis(rng, x.ndim)
    k = int(rng.integers(0, x.shape[axis] + 1))
    return Case([x], {"k": k, "axis": axis, "largest": bool(rng.integers(2))})


def ref_topk_indices(x, k, axis, largest):
    order = ref_argsort(x, axis, descending=largest)
    return np.take(order, np.arange(k), axis=axis)


def ref_topk(x, k, axis, largest):
    return np.take_along_axis(x, ref_topk_indices(x, k, axis, largest), axis)


def make_multinomial(rng, s):
    """Rows with exactly ``num_samples`` categories of p > 0: drawn without replacement they
    all come out, in some order; the sorted draws are those categories."""
    rows, classes = s
    num = int(rng.integers(1, classes + 1))
    p = np.zeros((rows or 1, classes))
    for r in range(p.shape[0]):
        p[r, rng.choice(classes, size=num, replace=False)] = rng.uniform(0.1, 1.0, num)
    return Case([p if rows else p[0]], {"num_samples": num})


def call_multinomial(x, num_samples):
    return mt.sort(mt.multinomial(x, num_samples), axis=-1)


def ref_multinomial(x, num_samples):
    return np.sort(np.argsort(x == 0, axis=-1, kind="stable")[..., :num_samples], axis=-1)


# ---- einsum, bmm, cumsum -------------------------------------------------------------------------
EQUATIONS = [  # (equation, operands' letters as written, with ... as "*")
    "ij,jk->ik",
    "ij,jk",  # implicit output: ik
    "bij,bjk->bik",
    "...ij,...jk->...ik",
    "i,j->ij",
    "ij->",
    "ij->ji",
    "ijk->kj",
    "i,i->",
    "ij,jk,kl->il",
    "ab,b->a",
    "...i,i->...",
]


@st.composite
def einsum_spec(draw):
    equation = draw(st.sampled_from(EQUATIONS))
    terms = equation.split("->")[0].split(",")
    sizes = {c: draw(SIDE) for c in "abijkl"}
    broadcast = draw(broadcastable(len(terms), max_dims=2))
    shapes = []
    for term, lead in zip(terms, broadcast):
        letters = term.replace("...", "")
        dims = [sizes[c] for c in letters]
        if "..." in term:
            dims = list(lead) + dims
        elif draw(st.booleans()) and dims:  # a size-1 dim broadcast against the others
            dims[draw(st.integers(0, len(dims) - 1))] = 1
        shapes.append(tuple(dims))
    return equation, shapes


def make_einsum(rng, s):
    equation, shapes = s
    return Case([rng.uniform(-1, 1, sh) for sh in shapes], {"equation": equation})


def call_einsum(*xs, equation):
    return mt.einsum(equation, *xs)


def ref_einsum(*xs, equation):
    # NumPy does not broadcast a size-1 dimension named by a letter: expand them first.
    terms = equation.replace("...", "").split("->")[0].split(",")
    sizes = {}
    for term, x in zip(terms, xs):
        for c, n in zip(term, x.shape[x.ndim - len(term) :]):
            sizes[c] = n if sizes.get(c, 1) == 1 else sizes[c]
    full = [
        np.broadcast_to(x, x.shape[: x.ndim - len(t)] + tuple(sizes[c] for c in t))
        for t, x in zip(terms, xs)
    ]
    return np.einsum(equation, *full)


def bmm_spec():
    return st.tuples(SIDE, SIDE, SIDE, SIDE)


def make_bmm(rng, s):
    b, n, k, m = s
    return Case([rng.uniform(-2, 2, (b, n, k)), rng.uniform(-2, 2, (b, k, m))])


def make_cumsum(rng, s):
    x = rng.uniform(-2, 2, s[0])
    axis = None if not x.ndim or rng.integers(3) == 0 else _axis(rng, x.ndim)
    return Case([x], {"axis": axis})


def ref_cumsum(x, axis):
    return np.cumsum(x.reshape(-1) if axis is None else x, axis=0 if axis is None else axis)


# ---- the entries -----------------------------------------------------------------------------
ANY = st.tuples(shape())
MATRICES = st.tuples(shape(2, 4))
NONEMPTY = st.tuples(shape(1, 3, NONEMPTY_SIDE))
LOOSE = {"float16": (5e-3, 5e-3), "bfloat16": (4e-2, 4e-2)}  # merged into TOL by op_catalogue

ENTRIES = [
    dict(name="tril", ops=("tril",), fn=lambda x, diagonal: mt.tril(x, diagonal),
         ref=lambda x, diagonal: np.tril(x, diagonal), spec=MATRICES, make=make_triangle),
    dict(name="triu", ops=("triu",), fn=lambda x, diagonal: x.triu(diagonal),
         ref=lambda x, diagonal: np.triu(x, diagonal), spec=MATRICES, make=make_triangle),
    dict(name="masked_fill", ops=("masked_fill",), fn=call_masked_fill,
         ref=lambda x, mask, value: np.where(mask, value, x), spec=broadcastable(2),
         make=make_masked_fill, broadcasts=2),
    dict(name="masked_fill_tensor_value", ops=("masked_fill",),
         fn=lambda x, v, mask: x.masked_fill(mt.to_tensor(mask), v),
         ref=lambda x, v, mask: np.where(mask, v, x), spec=ANY, make=make_masked_fill_tensor),
    dict(name="split", ops=("split",), fn=call_split, ref=ref_split,
         spec=st.tuples(shape(1, 3)), make=make_split),
    dict(name="chunk", ops=("split",),
         fn=lambda x, chunks, axis: _weighted(x.chunk(chunks, axis), mt.concat, axis),
         ref=lambda x, chunks, axis: ref_split(x, chunks, axis),
         spec=st.tuples(shape(1, 3)), make=make_chunk),
    dict(name="unbind", ops=("unbind",),
         fn=lambda x, axis: _weighted(mt.unbind(x, axis), mt.stack, axis),
         ref=ref_unbind, spec=NONEMPTY, make=make_unbind),
    dict(name="index_select", ops=("index_select",),
         fn=lambda x, index, axis: mt.index_select(x, mt.to_tensor(index), axis),
         ref=lambda x, index, axis: np.take(x, index, axis),
         spec=st.tuples(shape(1, 3)), make=make_index_select(zero_d=False)),
    dict(name="gather", ops=("gather",),
         fn=lambda x, index, axis: x.gather(mt.to_tensor(index), axis),
         ref=lambda x, index, axis: np.take(x, index, axis),
         spec=st.tuples(shape(1, 3)), make=make_index_select(zero_d=True)),
    dict(name="take_along_axis", ops=("take_along_axis",),
         fn=lambda x, indices, axis, broadcast: mt.take_along_axis(
             x, mt.to_tensor(indices), axis, broadcast),
         ref=ref_take_along_axis, spec=st.tuples(shape(1, 3)), make=make_take_along_axis),
    dict(name="sort", ops=("take_along_axis",), fn=mt.sort, ref=ref_sort,
         spec=st.tuples(shape(1, 3)), make=make_sort),
    dict(name="topk", ops=("take_along_axis",),
         fn=lambda x, k, axis, largest: mt.topk(x, k, axis, largest)[0],
         ref=ref_topk, spec=st.tuples(shape(1, 3)), make=make_topk),
    dict(name="clone", ops=("assign",), fn=lambda x: x.clone(), ref=lambda x: x, spec=ANY,
         make=lambda rng, s: Case([rng.uniform(-2, 2, s[0])])),
    dict(name="rsqrt", ops=("rsqrt",), fn=mt.rsqrt, ref=lambda x: 1 / np.sqrt(x), spec=ANY,
         make=lambda rng, s: Case([rng.uniform(0.2, 3.0, s[0])])),
    dict(name="cumsum", ops=("cumsum",), fn=mt.cumsum, ref=ref_cumsum, spec=ANY,
         make=make_cumsum, tol=LOOSE),
    dict(name="einsum", ops=("einsum",), fn=call_einsum, ref=ref_einsum, spec=einsum_spec(),
         make=make_einsum, tol=LOOSE),
    dict(name="bmm", ops=("bmm",), fn=mt.bmm, ref=np.matmul, spec=bmm_spec(), make=make_bmm,
         tol=LOOSE),
    # forward-only: positions and draws
    dict(name="argsort", ops=("argsort",), fn=mt.argsort, ref=ref_argsort,
         spec=st.tuples(shape(1, 3)),
         make=lambda rng, s: Case([rng.integers(-2, 3, s[0]) * 0.5],  # ties: stable order
                                  {"axis": _axis(rng, len(s[0])),
                                   "descending": bool(rng.integers(2))}),
         out_dtype="int64", differentiable=False),
    dict(name="topk_indices", ops=("topk",),
         fn=lambda x, k, axis, largest: mt.topk(x, k, axis, largest)[1],
         ref=ref_topk_indices, spec=st.tuples(shape(1, 3)), make=make_topk,
         out_dtype="int64", differentiable=False),
    dict(name="multinomial", ops=("multinomial",), fn=call_multinomial, ref=ref_multinomial,
         spec=st.tuples(st.integers(0, 3), NONEMPTY_SIDE), make=make_multinomial,
         out_dtype="int64", differentiable=False),
]  # fmt: skip

NOT_DIFFERENTIABLE = {
    "argsort": "integer result (sort's values go through take_along_axis)",
    "topk": "integer result (its values go through take_along_axis)",
    "multinomial": "integer result (random draws)",
}
