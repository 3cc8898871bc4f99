"""Central finite differences in float64: the reference every backward is checked against."""

from __future__ import annotations

import numpy as np


def numeric_grad(f, inputs: list[np.ndarray], eps: float = 1e-6) -> list[np.ndarray]:
    """d f(*inputs) / d inputs[i] for each input, by central differences.

    ``f`` maps float64 arrays to a Python float (a scalar loss). Each element of each input is
    nudged by ``+eps`` and ``-eps`` in turn: ``(f(x + eps) - f(x - eps)) / (2 eps)``, whose
    error is O(eps^2) from the function plus O(1e-16 / eps) from rounding.
    """
    # Private C-ordered copies: reshape(-1) of those is a view, so nudging it nudges x.
    inputs = [np.array(x, dtype=np.float64, order="C") for x in inputs]
    grads = []
    for x in inputs:
        g = np.zeros_like(x)
        flat, gflat = x.reshape(-1), g.reshape(-1)
        for i in range(flat.size):
            saved = flat[i]
            flat[i] = saved + eps
            up = f(*inputs)
            flat[i] = saved - eps
            down = f(*inputs)
            flat[i] = saved
            gflat[i] = (up - down) / (2 * eps)
        grads.append(g)
    return grads
