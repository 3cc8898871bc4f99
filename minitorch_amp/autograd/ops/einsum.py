"""``einsum``: sums of products named by an equation (Paddle's rules), forward next to backward.

The equation is first made explicit (:func:`parse`): ``...`` becomes letters of its own,
an omitted output becomes the broadcast letters then the letters used once, alphabetically,
and size-1 dimensions that broadcast against a larger one are dropped from their operand.
Then both directions are plain ``einsum`` calls: the gradient of operand ``i`` is the einsum
of the output gradient with the other operands, giving ``i``'s letters; letters only ``i``
has (summed away in the forward) are broadcast back.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

import numpy as np

from ...backend import get_array_module
from ...backend.dtypes import accumulation_dtype
from ..op import WHITE, Op


@dataclass(frozen=True)
class Plan:
    """An explicit equation: per operand its letters and the shape einsum sees."""

    terms: tuple[str, ...]  # letters per operand, size-1 broadcast dims dropped
    output: str
    shapes: tuple[tuple[int, ...], ...]  # the operands' own shapes
    reduced: tuple[tuple[int, ...], ...]  # their shapes without the dropped dims

    @property
    def equation(self) -> str:
        return ",".join(self.terms) + "->" + self.output


def _fail(equation: str, why: str) -> ValueError:
    return ValueError(f"einsum {equation!r}: {why}")


def _split_term(equation: str, term: str) -> tuple[str, str, bool]:
    """(letters before '...', letters after, whether '...' is there)."""
    if term.count("...") > 1 or term.replace("...", "").count("."):
        raise _fail(equation, f"{term!r} may hold one '...' and letters only")
    before, ellipsis, after = term.partition("...")
    for c in before + after:
        if c not in string.ascii_letters:
            raise _fail(equation, f"{c!r} in {term!r} is not a letter (a-z, A-Z)")
    return before, after, bool(ellipsis)


def parse(equation: str, shapes) -> Plan:
    """The explicit :class:`Plan` of ``equation`` for operands of ``shapes``."""
    text = equation.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    if "->" in rhs:
        raise _fail(equation, "has more than one '->'")
    raw = lhs.split(",")
    if len(raw) != len(shapes):
        raise _fail(equation, f"names {len(raw)} operands but {len(shapes)} were given")
    parts = [_split_term(equation, t) for t in raw]
    used = set("".join(b + a for b, a, _ in parts) + rhs)
    free = [c for c in string.ascii_letters if c not in used]
    spans = []
    for (before, after, ell), shape in zip(parts, shapes):
        extra = len(shape) - len(before) - len(after)
        if extra < 0 or (extra and not ell):
            term = before + ("..." if ell else "") + after
            raise _fail(equation, f"{term!r} does not fit an operand of shape {list(shape)}")
        spans.append(extra)
    width = max(spans, default=0)
    if width > len(free):
        raise _fail(equation, "has too many dimensions for the letters left")
    broadcast = "".join(free[:width])
    terms = [b + broadcast[width - n :] + a for (b, a, _), n in zip(parts, spans)]
    for term in terms:
        repeated = sorted({c for c in term if term.count(c) > 1})
        if repeated:
            raise NotImplementedError(
                f"einsum {equation!r}: a label repeated within one operand ({repeated[0]!r}: "
                "a diagonal or trace) is not supported, as in Paddle; take the diagonal first"
            )
    if arrow:
        before, after, ell = _split_term(equation, rhs)
        if width and not ell:
            raise _fail(equation, "the operands have '...' dimensions; name them in the output")
        output = before + (broadcast if ell else "") + after
        if len(set(output)) != len(output):
            raise _fail(equation, "the output names a letter twice")
        unknown = set(output) - set("".join(terms))
        if unknown:
            raise _fail(equation, f"the output letter {sorted(unknown)[0]!r} is in no operand")
    else:
        counts = {c: sum(t.count(c) for t in terms) for c in set("".join(terms))}
        once = sorted(c for c, n in counts.items() if n == 1 and c not in broadcast)
        output = broadcast + "".join(once)
    sizes: dict[str, int] = {}  # per letter: its size after broadcasting (1 gives way)
    for term, shape in zip(terms, shapes):
        for c, n in zip(term, shape):
            known = sizes.setdefault(c, n)
            if known != n and 1 not in (known, n):
                raise _fail(
                    equation,
                    f"dimension {c!r} is {known} in one operand and {n} in another "
                    "(sizes must match or be 1)",
                )
            sizes[c] = n if known == 1 else known
    kept_terms, reduced = [], []
    for term, shape in zip(terms, shapes):
        keep = [i for i, (c, n) in enumerate(zip(term, shape)) if n != 1 or sizes[c] == 1]
        kept_terms.append("".join(term[i] for i in keep))
        reduced.append(tuple(shape[i] for i in keep))
    return Plan(tuple(kept_terms), output, tuple(map(tuple, shapes)), tuple(reduced))


def contract(equation: str, *arrays):
    """``einsum`` in the accumulation dtype (float32 for 16-bit inputs), rounded once."""
    xp = get_array_module(*arrays)
    dtype = np.result_type(*[a.dtype for a in arrays])
    acc = accumulation_dtype(dtype)
    wide = [a.astype(acc, copy=False) for a in arrays]
    out = xp.einsum(equation, *wide, **({"optimize": True} if xp is np else {}))
    return xp.asarray(out).astype(dtype, copy=False)


def grad_plan(plan: Plan, i: int) -> tuple[str, list[int], tuple[int, ...]]:
    """For operand ``i``: the equation of its gradient (``output, others -> letters``), the
    positions of the other operands, and the shape to give the result before it is
    broadcast to operand ``i``'s reduced shape (1 where a letter was summed in ``i`` alone).
    """
    others = [j for j in range(len(plan.terms)) if j != i]
    seen = set(plan.output).union(*(plan.terms[j] for j in others))
    term = plan.terms[i]
    kept = "".join(c for c in term if c in seen)
    equation = ",".join([plan.output, *(plan.terms[j] for j in others)]) + "->" + kept
    shape = tuple(n if c in seen else 1 for c, n in zip(term, plan.reduced[i]))
    return equation, others, shape


class Einsum(Op):
    """Sums of products of the operands named by ``equation`` (``"bij,bjk->bik"``)."""

    name = "einsum"
    amp = WHITE  # Paddle: einsum is on the white lists (float16 and bfloat16)
    promote = None  # every operand

    @staticmethod
    def forward(ctx, *operands, equation):
        plan = parse(equation, [a.shape for a in operands])
        arrays = [a.reshape(s) for a, s in zip(operands, plan.reduced)]
        ctx.plan, ctx.arrays = plan, arrays
        return contract(plan.equation, *arrays)

    @staticmethod
    def backward(ctx, grad):
        plan, grads = ctx.plan, []
        xp = get_array_module(grad)
        for i, wanted in enumerate(ctx.needs_grad):
            if not wanted:
                grads.append(None)
                continue
            equation, others, shape = grad_plan(plan, i)
            g = contract(equation, grad, *(ctx.arrays[j] for j in others)).reshape(shape)
            g = xp.broadcast_to(g, plan.reduced[i]).reshape(plan.shapes[i])
            grads.append(g)
        return tuple(grads)


__all__ = ["Einsum", "Plan", "contract", "grad_plan", "parse"]
