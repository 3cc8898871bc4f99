"""The op table: every differentiable op is one :class:`Op` subclass, declared once.

An op is a class that is never instantiated. It names itself, says how AMP treats it, and
holds its forward and backward side by side, both written with plain array maths::

    class Multiply(Op):
        name = "multiply"

        @staticmethod
        def forward(ctx, x, y):
            ctx.x, ctx.y = x, y          # whatever backward needs
            return x * y

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.y, grad * ctx.x   # one entry per positional input

Declaring the class registers it in :data:`OP_TABLE` under its name. Ops run only through
:func:`minitorch_amp.autograd.dispatch.apply`, which records the graph.

Rules for ``backward``: return one gradient per positional input (``None`` for inputs that
take none). A gradient may be the incoming ``grad`` itself or a view of it; otherwise it must
be a fresh array, never the same array for two inputs. Shapes and dtypes need not match the
inputs: the engine un-broadcasts and casts back.
"""

from __future__ import annotations

from typing import ClassVar

# AMP categories (Paddle's per-op rule, applied by the AMP layer at the dispatch point):
WHITE = "white"  # run in low precision under O1/O2/OD
BLACK = "black"  # run in float32 under O1
EXTRA_BLACK = "extra_black"  # float32 under O1 and O2 (Paddle's EXTRA_BLACK_LIST)
GRAY = "gray"  # follow the inputs: float32 if any floating input is float32
NONE = "none"  # never cast (casts themselves, comparisons, integer results)
AMP_CATEGORIES = (WHITE, BLACK, EXTRA_BLACK, GRAY, NONE)

OP_TABLE: dict[str, type[Op]] = {}


class Context:
    """Scratch space an op's forward fills for its backward (attributes set freely).

    When the op is recorded, ``apply`` also sets ``ctx.needs_grad``: one bool per positional
    input, True when that input gets a gradient. A backward may return None for the others
    and skip computing them.

    Before each backward the engine sets ``ctx.grad_out``: None, or per input the stale
    gradient buffer of a parameter (``clear_grad()`` left it to be overwritten). A backward
    may write that input's gradient into it and return it; the engine then skips its copy.
    """


class Op:
    """Base class of every op; subclasses set ``name`` and implement forward/backward."""

    name: ClassVar[str]
    amp: ClassVar[str] = GRAY
    # Positions of the inputs AMP looks at and casts; None means every floating input.
    # Norm ops say (0,): only ``x`` is cast, their scale/bias stay float32 (Paddle).
    amp_inputs: ClassVar[tuple[int, ...] | None] = None
    # More op names whose AMP list entries decide this op (Linear's product is Paddle's
    # matmul): float32 if any of them is black, low precision if any is white.
    amp_also: ClassVar[tuple[str, ...]] = ()
    # The position of an input that Paddle adds in a separate op after this one (Linear's
    # bias): AMP casts it by the add's rule, given this op's result dtype, not by this op's.
    amp_bias: ClassVar[int | None] = None
    # Positions of the inputs brought to one dtype before AMP looks at them (Paddle's type
    # promotion, ``dispatch.promote``); None means every input (concat, stack); () none.
    promote: ClassVar[tuple[int, ...] | None] = ()

    def __init_subclass__(cls, register: bool = True, **kwargs):
        # register=False: an op used only inside the autograd machinery (a PyLayer's node, a
        # double-backward helper), never called by users: it stays out of the op table.
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("name")
        if name is None:
            raise TypeError(f"op class {cls.__name__} must set a `name`")
        if not register:
            return
        if name in OP_TABLE:
            raise TypeError(
                f"op {name!r} is declared twice ({OP_TABLE[name].__name__}, {cls.__name__})"
            )
        if cls.amp not in AMP_CATEGORIES:
            raise TypeError(f"op {name!r}: amp category {cls.amp!r} is not one of {AMP_CATEGORIES}")
        OP_TABLE[name] = cls

    @staticmethod
    def forward(ctx: Context, *inputs, **attrs):  # pragma: no cover - abstract
        raise NotImplementedError

    @staticmethod
    def backward(ctx: Context, grad):  # pragma: no cover - abstract
        raise NotImplementedError
