"""The testing kit's defects a review found (2026-11-28, evening), each stated as the behaviour
the kit now has."""

from __future__ import annotations

import subprocess
import sys
import warnings

import ml_dtypes
import numpy as np
import pytest
from hypothesis import find, given, settings

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.optimizer import SGD
from minitorch_amp.testing import (
    AmpDivergenceError,
    AmpNotFiniteError,
    LossScaleError,
    adversarial_tensors,
    assert_close,
    assert_fp8_bit_equal,
    check_close_to_fp32,
    check_finite_under_amp,
    check_loss_scale_stream,
    fp8_error_in_ulps,
    gradient_magnitudes,
    log_uniform_tensors,
    tensors,
    ulp_distance,
)

QUIET = settings(database=None, deadline=None, derandomize=True)


class CastAfterLinear(nn.Layer):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).astype("float64") * 0.5  # the model's own cast


def test_a_cast_amp_inserted_is_not_paired_with_the_models_own_cast():
    mt.seed(0)
    with pytest.raises(AmpNotFiniteError) as info:  # AMP's cast of 70000 to float16: inf
        check_finite_under_amp(CastAfterLinear(), mt.full([2, 4], 70000.0))
    report = info.value.report
    assert (report.op.op, report.op.amp_cast, report.op.occurrence) == ("cast", True, 0)
    assert report.fp32 is None
    assert "no such op (a cast AMP inserted)" in str(info.value)


def test_the_backward_of_a_cast_amp_inserted_is_counted_apart_from_the_models_own():
    from minitorch_amp.testing.op_trace import OpTrace

    model, x = CastAfterLinear(), mt.ones([2, 4])
    with OpTrace() as trace, amp.auto_cast(level="O1"):
        model(x).sum().backward()
    assert trace.counts["cast"] == trace.counts["cast_grad"] == 1  # the model's float64 cast
    assert trace.counts["cast (AMP)"] == 2  # x's and the weight's: only the weight's has a
    assert trace.counts["cast_grad (AMP)"] == 1  # gradient


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_tensors_draw_finite_values_of_their_format(dtype):
    seen = set()

    @given(tensors(shape=(8,), dtype=dtype))
    @settings(QUIET, max_examples=30)
    def draw(x):
        assert str(x.numpy().dtype) == dtype
        values = x.numpy().astype(np.float32)
        assert np.isfinite(values).all()
        seen.update(values.tolist())

    draw()
    assert len(seen) > 20


def test_tensors_refuses_a_dtype_it_cannot_draw_when_built():
    with pytest.raises(TypeError, match="unsupported dtype 'complex64'"):
        tensors(shape=(2,), dtype="complex64")


def test_assert_close_honours_explicit_tolerances_between_integers():
    assert_close(np.int32([100]), np.int32([101]), atol=5)
    with pytest.raises(AssertionError, match=r"exact comparison: rtol=0, atol=0"):
        assert_close(np.int32([100]), np.int32([101]))


def test_assert_close_tells_big_integers_apart_and_prints_them_exactly():
    with pytest.raises(AssertionError) as info:
        assert_close(np.int64([2**62]), np.int64([2**62 + 1]))
    assert "actual 4611686018427387904, expected 4611686018427387905 (|diff| 1 > allowed 0)" in (
        str(info.value)
    )


class Pair(nn.Layer):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        y = self.lin(x)
        return y, y * 1.0


class PairNet(nn.Layer):
    def __init__(self):
        super().__init__()
        self.pair = Pair()

    def forward(self, x):
        a, b = self.pair(x)
        return a + b


def test_a_per_layer_rtol_holds_for_a_layer_that_returns_a_tuple():
    mt.seed(0)
    net, x = PairNet(), mt.randn([4, 8])
    with pytest.raises(AmpDivergenceError) as info:  # float16 cannot match to 1e-6
        check_close_to_fp32(net, x, rtol={"pair": 1e-6, "pair.lin": 1.0}, level="O2")
    assert info.value.report.layer == "pair[0]"


def test_fp8_error_in_ulps_is_inf_for_an_infinity_against_a_finite_value():
    e5 = np.float32([np.inf, 1.0]).astype(ml_dtypes.float8_e5m2)
    e4 = np.float32([448.0]).astype(ml_dtypes.float8_e4m3fn)
    assert fp8_error_in_ulps(e5, [1.0, 1.0]).tolist() == [np.inf, 0.0]
    assert fp8_error_in_ulps(e4, [np.inf]).tolist() == [np.inf]


def test_assert_fp8_bit_equal_refuses_an_array_of_another_format_than_dtype():
    e4 = np.float32([1.0]).astype(ml_dtypes.float8_e4m3fn)  # byte 0x38
    e5 = np.float32([0.5]).astype(ml_dtypes.float8_e5m2)  # byte 0x38 too
    with pytest.raises(AssertionError, match="format mismatch: dtype= is E4M3, expected is E5M2"):
        assert_fp8_bit_equal(e4, e5, dtype="float8_e4m3fn")
    with pytest.raises(AssertionError, match="format mismatch: dtype= is E4M3, actual is E5M2"):
        assert_fp8_bit_equal(e5, e4, dtype="float8_e4m3fn")


def test_signalling_bfloat16_nans_compare_without_warnings():
    x = np.uint16([0x7F81, 0x3F80]).view(ml_dtypes.bfloat16)  # a signalling NaN, 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_close(x, x)
        assert np.isnan(ulp_distance(x, x)[0]) and ulp_distance(x, x)[1] == 0


def test_log_uniform_tensors_draw_each_elements_exponent():
    exponents = []

    @given(log_uniform_tensors((64,), "float16"))
    @settings(QUIET, max_examples=50)
    def draw(x):
        exponents.append(np.floor(np.log2(np.abs(x.numpy()))))

    draw()
    e = np.concatenate(exponents)
    assert (e == 0).mean() < 0.2  # 40 binades: 2.5% each if uniform; one fill value: ~50%
    assert len(np.unique(e)) == 40


def test_without_hypothesis_the_fp8_strategies_say_how_to_get_it_and_star_import_works():
    script = (
        "import sys\n"
        "for name in ('hypothesis', 'hypothesis.strategies', 'hypothesis.extra'):\n"
        "    sys.modules[name] = None\n"
        "from minitorch_amp.testing import *\n"
        "import minitorch_amp.testing as T\n"
        "try:\n"
        "    T.fp8_values\n"
        "except ImportError as err:\n"
        "    print(err)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "fp8_strategies needs Hypothesis: pip install hypothesis" in out.stdout


@pytest.mark.parametrize("low, high", [(-1100, -1100), (1024, 1024), (-1023, 0)])
def test_gradient_magnitudes_refuses_exponents_past_float64s_range(low, high):
    with pytest.raises(ValueError, match=r"must lie in \[-1022, 1023\]"):
        gradient_magnitudes(low, high)


def test_adversarial_tensors_draw_empty_tensors_of_one_large():
    x = find(adversarial_tensors((0, 3), 100.0, kinds=("one_large",)), lambda x: True)
    assert x.shape == [0, 3]


def test_a_skipped_step_that_writes_only_the_master_weights_is_caught(monkeypatch):
    def sgd_writing_masters(params):  # a planted bug: every step also moves each master
        opt = SGD(learning_rate=0.01, parameters=params, multi_precision=True)
        step = opt.step

        def step_and_write_masters():
            step()
            for master in opt._master_weights.values():
                master._data += 1.0

        monkeypatch.setattr(opt, "step", step_and_write_masters)
        return opt

    mt.seed(0)
    batches = [mt.full([3, 4], 1.0), mt.full([3, 4], 1e5)]  # the second overflows: skipped
    with pytest.raises(LossScaleError, match="changed the optimizer's state") as info:
        check_loss_scale_stream(
            nn.Linear(4, 2),
            batches,
            optimizer=sgd_writing_masters,
            scaler=lambda: amp.GradScaler(init_loss_scaling=1024.0),
            level="O2",
        )
    assert info.value.step == 1 and "master_weights/" in str(info.value)
