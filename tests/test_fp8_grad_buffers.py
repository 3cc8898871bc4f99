"""An FP8 Linear's backward, as lean as a Linear's: the weight gradient's GEMM writes into
the weight's stale ``.grad`` buffer, the bias gradient is ``backend.bias_grad`` (one kernel
on a GPU, into the bias's buffer), and a ReLU after the layer leaves its mask to that kernel
(``autograd/relu_fold.py``). On the GPU code path each is a launch fewer per layer (a
copy, a copy and a sum's two launches, a ReLU backward); the bits stay the unfused,
copied ones, which these tests hold them to on the CPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.amp.fp8 import gemm as fp8_gemm_ops
from minitorch_amp.autograd import engine, relu_fold
from minitorch_amp.autograd.ops.activation import Relu
from minitorch_amp.backend import fp8, fp8_gemm
from minitorch_amp.backend.dtypes import bfloat16, float8_e4m3fn


def mlp():
    mt.seed(0)
    return nn.Sequential(
        nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 8)
    )


def train(level, steps=2, monkeypatch=None, fold=True, into_buffers=True):
    """The parameters' gradient arrays after each of ``steps`` FP8 steps of a fresh model
    (fresh scaling states: each run casts alike), and the arrays themselves."""
    if monkeypatch is not None and not fold:
        monkeypatch.setattr(relu_fold, "defer", lambda node, grad, capture: None)
    if monkeypatch is not None and not into_buffers:
        monkeypatch.setattr(engine, "_destinations", lambda inputs: None)
    model = mlp()
    opt = mt.optimizer.SGD(learning_rate=0.05, parameters=model.parameters())
    if level == "O2":
        model, opt = amp.decorate(model, opt, level="O2", dtype="bfloat16")
    mt.seed(1)
    batches = [mt.randn([8, 16]) for _ in range(steps)]
    values, arrays = [], []
    for x in batches:
        with amp.auto_cast(level=level, dtype="bfloat16"), amp.fp8_autocast():
            out = model(x)
        (out.astype("float32") ** 2).mean().backward()
        values.append([p.grad.numpy().copy() for p in model.parameters()])
        arrays.append([p.grad._data for p in model.parameters()])
        opt.step()
        opt.clear_grad()
    if monkeypatch is not None:
        monkeypatch.undo()
    return values, arrays


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_the_relu_masks_go_to_the_fp8_bias_gradient_bit_for_bit(level, monkeypatch):
    relu_backwards = []
    plain = Relu.backward
    monkeypatch.setattr(
        Relu, "backward", staticmethod(lambda ctx, g: relu_backwards.append(1) or plain(ctx, g))
    )
    folded, _ = train(level)
    assert relu_backwards == []  # both ReLUs left their mask to the FP8 Linear before them
    unfused, _ = train(level, monkeypatch=monkeypatch, fold=False)
    for step_folded, step_unfused in zip(folded, unfused):
        for a, b in zip(step_folded, step_unfused):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("level", ["O1", "O2"])
def test_parameter_gradients_are_written_into_their_buffers_with_the_copied_bits(
    level, monkeypatch
):
    copies = []
    plain = engine.copy_into
    monkeypatch.setattr(engine, "copy_into", lambda out, x: copies.append(1) or plain(out, x))
    written, arrays = train(level)
    # the second step's gradients live where the first step's did, and nothing was copied
    # there: the GEMM and the bias kernel wrote them
    assert all(a is b for a, b in zip(arrays[0], arrays[1])) and copies == []
    copied, copied_arrays = train(level, monkeypatch=monkeypatch, into_buffers=False)
    assert all(a is b for a, b in zip(copied_arrays[0], copied_arrays[1]))
    assert len(copies) == 6  # the engine copied each of the six in (the second step)
    for step_written, step_copied in zip(written, copied):
        for a, b in zip(step_written, step_copied):
            np.testing.assert_array_equal(a, b)


def test_the_fp8_bias_gradient_is_the_float32_sum_rounded_once():
    # the bias gradient the FP8 Linear hands back: a float32 sum of the rows, one rounding
    rng = np.random.default_rng(3)
    g = rng.standard_normal((64, 24)).astype(bfloat16)
    gb, same = fp8_gemm_ops._bias_grad(g, g.dtype, None, None)
    assert same is g
    np.testing.assert_array_equal(gb, g.sum(axis=0, dtype=np.float32).astype(bfloat16))
    mask = np.maximum(rng.standard_normal((64, 24)), 0).astype(bfloat16)
    gb, masked = fp8_gemm_ops._bias_grad(g, np.float32, mask, None)
    expected = g * (mask > 0)
    np.testing.assert_array_equal(masked, expected)
    np.testing.assert_array_equal(gb, expected.sum(axis=0, dtype=np.float32))
    # a float32 gradient for a bfloat16 bias (no kernel instance): the same sum, then a cast
    g32 = g.astype(np.float32)
    gb, _ = fp8_gemm_ops._bias_grad(g32, bfloat16, None, None)
    assert gb.dtype == bfloat16
    np.testing.assert_array_equal(gb, g32.sum(axis=0, dtype=np.float32).astype(bfloat16))


def operands():
    rng = np.random.default_rng(0)
    a = rng.integers(-4, 5, (6, 32)).astype(np.float32).astype(float8_e4m3fn)
    b = rng.integers(-4, 5, (32, 5)).astype(np.float32).astype(float8_e4m3fn)
    return a, b, np.float32([0.5]), np.float32([0.25])


@pytest.mark.parametrize("gemm", [fp8.fp8_matmul, fp8_gemm.fp8_gemm], ids=["matmul", "kernel"])
def test_an_fp8_gemm_writes_its_result_into_out_and_returns_it(gemm):
    a, b, sa, sb = operands()
    expected = gemm(a, b, sa, sb, bfloat16)
    out = np.full((6, 5), 7.0, bfloat16)
    assert gemm(a, b, sa, sb, bfloat16, out=out) is out
    np.testing.assert_array_equal(out.view(np.uint16), expected.view(np.uint16))


@pytest.mark.parametrize("gemm", [fp8.fp8_matmul, fp8_gemm.fp8_gemm], ids=["matmul", "kernel"])
@pytest.mark.parametrize(
    "bad, error",
    [
        (np.zeros((6, 5), np.float32), ValueError),  # another dtype than out_dtype
        (np.zeros((5, 6), bfloat16), ValueError),  # another shape
        (np.zeros((5, 6), bfloat16).T, ValueError),  # the shape, not C-contiguous
        ([[0.0] * 5] * 6, TypeError),  # not an array
    ],
    ids=["dtype", "shape", "strided", "list"],
)
def test_a_wrong_out_is_refused_and_left_as_it_was(gemm, bad, error):
    a, b, sa, sb = operands()
    before = np.array(bad, copy=True)
    with pytest.raises(error, match="out"):
        gemm(a, b, sa, sb, bfloat16, out=bad)
    np.testing.assert_array_equal(np.asarray(bad), before)
