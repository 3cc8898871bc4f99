"""Every op class, one flat namespace. Importing this package fills ``OP_TABLE``."""

from .cast import Cast, CopyTo
from .elementwise import (
    Abs,
    Add,
    Clip,
    Compare,
    Divide,
    Exp,
    Log,
    Multiply,
    Neg,
    Pow,
    Sigmoid,
    Sqrt,
    Square,
    Subtract,
    Tanh,
)
from .linalg import Linear, Matmul
from .reduce import ArgMax, Max, Mean, Sum
from .shape import GetItem, Reshape, Transpose
