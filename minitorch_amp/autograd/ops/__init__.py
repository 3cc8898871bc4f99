"""Every op class, one flat namespace. Importing this package fills ``OP_TABLE``."""

from .activation import Gelu, LeakyRelu, LogSoftmax, Relu, Silu, Softmax
from .cast import Cast, CopyTo
from .combine import Concat, Stack, Where
from .conv import Conv2D, DepthwiseConv2D
from .einsum import Einsum
from .elementwise import Add, Clip, Compare, Divide, Multiply, Neg, Pow, Subtract
from .index import Assign, Gather, IndexSelect, Split, TakeAlongAxis, Unbind
from .linalg import Bmm, Linear, Matmul
from .loss import CrossEntropy, MseLoss
from .masking import MaskedFill, Tril, Triu
from .nn_ops import BatchNorm, Dropout, Embedding, LayerNorm
from .norm import PNorm, RmsNorm
from .padding import Pad, Pad3D
from .pool import Pool2D
from .reduce import ArgMax, Cumsum, Max, Mean, Sum
from .shape import Expand, ExpandAs, GetItem, Reshape, Transpose
from .sort import ArgSort, Multinomial, TopK
from .unary_math import Abs, Exp, Log, Rsqrt, Sigmoid, Sqrt, Square, Tanh
