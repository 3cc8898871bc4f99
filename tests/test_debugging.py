"""amp.debugging: operator statistics and the NaN/Inf checker, with Paddle's formats."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import nn
from minitorch_amp.amp import debugging as dbg
from minitorch_amp.amp.auto_cast import auto_cast
from minitorch_amp.amp.debugging import DebugMode, TensorCheckerConfig
from minitorch_amp.autograd.dispatch import hooks

HEADER = (
    "<--------------- Op Name ---------------- | -- FP16 Calls --- | -- BF16 Calls --- "
    "| --- FP32 Calls--- | -- Other Calls -->"
)


def _row(name, fp16=0, bf16=0, fp32=0, other=0):
    return {name: {"fp16": fp16, "bf16": bf16, "fp32": fp32, "other": other}}


def _counts(*rows):
    out = {}
    for row in rows:
        out.update(row)
    return out


@pytest.fixture(autouse=True)
def clean_debugging_state():
    """Every test starts and ends with no debugging observer and step counter 0."""
    before = hooks.observers
    TensorCheckerConfig.current_step_id = 0
    yield
    dbg.disable_tensor_checker()
    dbg.disable_operator_stats_collection()
    TensorCheckerConfig.current_step_id = 0
    assert hooks.observers == before


@pytest.fixture()
def x():
    return mt.to_tensor([[1.0, 2.0], [3.0, 4.0]])


# ---- operator statistics ------------------------------------------------------------------
def test_fp32_computation_counts_fp32_and_a_comparison_by_its_inputs_dtype(x):
    with dbg.collect_operator_stats() as stats:
        y = mt.matmul(x, x) + 1.0
        _ = y > 3.0
    assert stats.counts == _counts(
        _row("matmul", fp32=1), _row("add", fp32=1), _row("compare", fp32=1)
    )  # (a comparison's kernel runs in its inputs' dtype, as Paddle counts it)


def test_hand_cast_fp16_inputs_count_matmul_as_fp16_and_casts_by_their_source(x):
    with dbg.collect_operator_stats() as stats:
        h = x.astype("float16")
        _ = mt.matmul(h, h) < 2.0
        _ = x.astype("float64") * 2.0
        _ = h.astype("float64")
    assert stats.counts == _counts(
        # Paddle's cast kernel is chosen by its input's dtype: two casts from float32, one
        # from float16 (the float64 results do not matter)
        _row("cast", fp16=1, fp32=2),
        _row("matmul", fp16=1),
        _row("compare", fp16=1),
        _row("multiply", other=1),  # float64 is 'other'
    )


def test_auto_cast_casts_are_counted_as_cast_by_their_source_dtype(x):
    with dbg.collect_operator_stats() as stats, auto_cast():
        _ = mt.matmul(x, x) + x  # two casts from fp32 for matmul, one from fp16 for add
    assert stats.counts == _counts(
        _row("cast", fp16=1, fp32=2), _row("matmul", fp16=1), _row("add", fp32=1)
    )


def test_the_casts_of_backward_count_too_and_no_other_backward_op(x):
    # Paddle's cast_grad runs the cast kernel (counted); every other *_grad kernel is skipped
    x.stop_gradient = False
    with dbg.collect_operator_stats() as stats:
        h = x.astype("float16")  # from fp32; its backward casts a float16 grad back
        y = h.astype("float32")  # from fp16; its backward casts a float32 grad back
        y.sum().backward()
    assert stats.counts == _counts(_row("cast", fp16=2, fp32=2), _row("sum", fp32=1))
    assert x.grad.dtype == np.float32


def test_disable_prints_paddles_table_and_returns_the_counts(x, capsys):
    dbg.enable_operator_stats_collection()
    _ = mt.exp(x) * x
    _ = mt.exp(x)
    counts = dbg.disable_operator_stats_collection()
    assert counts == _counts(_row("exp", fp32=2), _row("multiply", fp32=1))
    assert capsys.readouterr().out.splitlines() == [
        "<------------------------------ op list ------------------------------>",
        HEADER,
        "  exp                                     |  0                |  0                |  2                |  0",  # noqa: E501
        "  multiply                                |  0                |  0                |  1                |  0",  # noqa: E501
        "<----------------------------- op count: 2 ----------------------------->",
    ]


def test_no_counting_after_disable_and_a_second_disable_is_a_quiet_none(x, capsys):
    dbg.enable_operator_stats_collection()
    _ = x + x
    counts = dbg.disable_operator_stats_collection()
    _ = x * x
    assert counts == _row("add", fp32=1)
    capsys.readouterr()
    assert dbg.disable_operator_stats_collection() is None
    assert capsys.readouterr().out == ""


def test_enabling_twice_installs_one_observer_and_restarts_the_counts(x):
    dbg.enable_operator_stats_collection()
    _ = x + x
    dbg.enable_operator_stats_collection()  # Paddle clears the previous stats
    _ = x * x
    assert len(hooks.observers) == 1
    assert dbg.disable_operator_stats_collection() == _row("multiply", fp32=1)


def test_nested_blocks_count_each_call_once_per_block(x):
    with dbg.collect_operator_stats() as outer:
        _ = x + x
        with dbg.collect_operator_stats() as inner:
            _ = x * x
    assert outer.counts == _counts(_row("add", fp32=1), _row("multiply", fp32=1))
    assert inner.counts == _row("multiply", fp32=1)


def test_context_restores_the_observers_on_an_exception(x):
    before = hooks.observers
    with pytest.raises(ZeroDivisionError), dbg.collect_operator_stats() as stats:
        _ = x + x
        raise ZeroDivisionError
    assert hooks.observers == before
    _ = x * x
    assert stats.counts == _row("add", fp32=1)


def test_backward_is_not_counted():
    w = mt.to_tensor([1.0, 2.0], stop_gradient=False)
    loss = (w * w).sum()
    with dbg.collect_operator_stats() as stats:
        loss.backward()
    assert stats.counts == {}
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 4.0])


# ---- NaN/Inf checker ----------------------------------------------------------------------
def _line(op, numel, nan, inf, zero, mx, mn, mean, dtype="fp32"):
    return (
        f"[PRECISION] [ERROR] in [device=cpu, op={op}, tensor=, dtype={dtype}], numel={numel}, "
        f"num_nan={nan}, num_inf={inf}, num_zero={zero}, max={mx}, min={mn}, mean={mean}"
    )


def test_abort_mode_raises_naming_the_first_op_and_stops_there():
    dbg.enable_tensor_checker(TensorCheckerConfig(enable=True))
    reached = []
    with pytest.raises(RuntimeError) as info, np.errstate(invalid="ignore"):
        y = mt.log(mt.to_tensor([-1.0, 2.0]))  # nan in 'log'
        reached.append(mt.exp(y))  # nan again, but never reached
    assert str(info.value) == (
        "(PreconditionNotMet) There are NAN or INF (num_nan=1, num_inf=0, num_zero=0) "
        "in [device=cpu, op=log, tensor=, dtype=fp32]."
    )
    assert reached == []


def test_print_mode_prints_paddles_line_and_goes_on(capsys):
    dbg.enable_tensor_checker(TensorCheckerConfig(True, DebugMode.CHECK_NAN_INF))
    with np.errstate(invalid="ignore"):
        y = mt.to_tensor([1.0, 0.0, 3.0]) / mt.to_tensor([0.5, 0.0, 2.0])
    out = (y + 1.0).numpy()  # goes on: the nan travels into 'add', reported again
    assert out[0] == 3.0 and np.isnan(out[1])
    assert capsys.readouterr().out.splitlines() == [
        _line("divide", 3, 1, 0, 0, "2.000000e+00", "1.500000e+00", "1.750000e+00"),
        _line("add", 3, 1, 0, 0, "3.000000e+00", "2.500000e+00", "2.750000e+00"),
    ]


def test_print_mode_counts_inf_and_zeros_and_skips_clean_and_integer_outputs(capsys):
    dbg.enable_tensor_checker(TensorCheckerConfig(True, DebugMode.CHECK_NAN_INF))
    with np.errstate(divide="ignore"):
        z = mt.to_tensor([1.0, -1.0, 0.0, 8.0]) / mt.to_tensor([0.0, 0.0, 4.0, 2.0])
    _ = z > 0.0  # bool output: not checked
    _ = mt.to_tensor([1.0]) + 1.0  # clean: silent at this level
    assert capsys.readouterr().out.splitlines() == [
        _line("divide", 4, 0, 2, 1, "4.000000e+00", "0.000000e+00", "2.000000e+00")
    ]


def test_skipped_and_checked_op_lists_filter_the_checked_ops():
    x = mt.to_tensor([-1.0, 2.0])
    with np.errstate(invalid="ignore"):
        dbg.enable_tensor_checker(TensorCheckerConfig(True, skipped_op_list=["log"]))
        with pytest.raises(RuntimeError, match=r"op=exp,"):
            mt.exp(mt.log(x))  # log's nan is not reported; exp's is
        dbg.enable_tensor_checker(TensorCheckerConfig(True, checked_op_list=("sqrt",)))
        y = mt.exp(mt.log(x))  # neither is checked
        with pytest.raises(RuntimeError, match=r"op=sqrt,"):
            mt.sqrt(y)


def test_debug_step_window_counts_enable_calls_inside_it_and_stops_at_its_end(capsys):
    # Paddle's rule (TensorCheckerConfig.update_and_check_step_id): only a call inside the
    # window moves current_step_id on, so it stops at the window's end; a window above the
    # counter is never entered.
    def run(config, calls):
        reported = []
        for _ in range(calls):
            dbg.enable_tensor_checker(config)
            with np.errstate(invalid="ignore"):
                mt.sqrt(mt.to_tensor([-1.0]))
            reported.append(len(capsys.readouterr().out.splitlines()))
        return reported

    config = TensorCheckerConfig(True, DebugMode.CHECK_NAN_INF, debug_step=[1, 3])
    assert run(config, 3) == [0, 0, 0] and TensorCheckerConfig.current_step_id == 0
    TensorCheckerConfig.current_step_id = 1
    assert run(config, 4) == [1, 1, 0, 0]
    assert TensorCheckerConfig.current_step_id == 3
    assert hooks.observers == ()  # outside the window the checker is off


def test_check_all_for_overflow_flags_fp32_values_beyond_fp16_range(capsys):
    dbg.enable_tensor_checker(TensorCheckerConfig(True, DebugMode.CHECK_ALL_FOR_OVERFLOW))
    _ = mt.to_tensor([70000.0, 1.0]) * 1.0
    _ = mt.to_tensor([-65504.0, 60000.0]) * 1.0  # inside the fp16 range: silent
    _ = mt.to_tensor([70000.0], dtype="float64") * 1.0  # only fp32 outputs are flagged
    assert capsys.readouterr().out.splitlines() == [
        "[PRECISION] in [device=cpu, op=multiply, tensor=, dtype=fp32], numel=2, num_zero=0, "
        "max=7.000000e+04, min=1.000000e+00, mean=3.500050e+04"
    ]


def test_check_all_prints_every_floating_output_to_output_dir(tmp_path, capsys):
    config = TensorCheckerConfig(True, DebugMode.CHECK_ALL, output_dir=str(tmp_path / "logs"))
    dbg.enable_tensor_checker(config)
    h = mt.to_tensor([0.0, 2.0]).astype("float16")
    _ = h > 1.0
    with np.errstate(invalid="ignore"):
        _ = mt.sqrt(h - 1.0)
    assert capsys.readouterr().out == ""
    lines = (tmp_path / "logs" / "worker_cpu.log").read_text().splitlines()
    assert lines == [
        "[PRECISION] in [device=cpu, op=cast, tensor=, dtype=fp16], numel=2, num_zero=1, "
        "max=2.000000e+00, min=0.000000e+00, mean=1.000000e+00",
        "[PRECISION] in [device=cpu, op=subtract, tensor=, dtype=fp16], numel=2, num_zero=0, "
        "max=1.000000e+00, min=-1.000000e+00, mean=0.000000e+00",
        _line("sqrt", 2, 1, 0, 0, "1.000000e+00", "1.000000e+00", "1.000000e+00", "fp16"),
    ]


def test_check_numerics_returns_stats_and_finite_values(capsys):
    t = mt.to_tensor([np.nan, np.inf, 0.0, 2.0, -4.0]).astype("float16")
    stats, values = dbg.check_numerics(t, "my_op", "t", DebugMode.CHECK_NAN_INF)
    assert stats.dtype == np.int64 and values.dtype == np.float32
    np.testing.assert_array_equal(stats.numpy(), [1, 1, 1])
    np.testing.assert_allclose(values.numpy(), [2.0, -4.0, -2.0 / 3.0], rtol=1e-6)
    assert capsys.readouterr().out.strip() == _line(
        "my_op", 5, 1, 1, 1, "2.000000e+00", "-4.000000e+00", "-6.666667e-01", "fp16"
    ).replace("tensor=,", "tensor=t,")
    with pytest.raises(RuntimeError, match=r"There are NAN or INF \(num_nan=1, num_inf=1"):
        dbg.check_numerics(t, "my_op", "t")  # default mode aborts


def test_check_numerics_without_finite_values_gives_nan_values():
    stats, values = dbg.check_numerics(mt.to_tensor([np.inf]), "op", "v", DebugMode.CHECK_NAN_INF)
    np.testing.assert_array_equal(stats.numpy(), [0, 1, 0])
    assert np.isnan(values.numpy()).all()
    with pytest.raises(TypeError, match="expects a Tensor"):
        dbg.check_numerics(np.ones(2), "op", "v")


class Scale(nn.Layer):
    def __init__(self):
        super().__init__()
        self.w = self.create_parameter([2])

    @dbg.check_layer_numerics
    def forward(self, x, shift=0.0):
        return mt.log(x + shift) * self.w


def test_check_layer_numerics_checks_the_input_and_ops_inside_forward(capsys):
    layer = Scale()
    out = layer(mt.to_tensor([1.0, 2.0]))
    assert out.shape == [2] and hooks.observers == ()
    with pytest.raises(RuntimeError, match=r"op=Scale.forward, tensor=input, dtype=fp32\]"):
        layer(mt.to_tensor([np.nan, 1.0]))
    with (
        pytest.raises(RuntimeError, match=r"op=log, tensor=, dtype=fp32\]"),
        np.errstate(invalid="ignore"),
    ):
        layer(mt.to_tensor([1.0, 2.0]), shift=-1.5)
    assert hooks.observers == ()  # restored after the exception
    with pytest.raises(RuntimeError, match="First input of this layer must be tensor"):
        layer([1.0, 2.0])


def test_check_layer_numerics_uses_the_checker_already_on(capsys):
    config = TensorCheckerConfig(True, DebugMode.CHECK_NAN_INF)
    dbg.enable_tensor_checker(config)
    with np.errstate(invalid="ignore"):
        Scale()(mt.to_tensor([1.0, 2.0]), shift=-1.5)  # prints instead of raising
    assert "op=log" in capsys.readouterr().out
    assert hooks.observers == (dbg.tensor_checker._check_op,)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"debug_mode": 1}, "debug_mode must be one of DebugMode.CHECK_NAN_INF_AND_ABORT"),
        ({"debug_step": 3}, "debug_step must be list or tuple"),
        ({"debug_step": [3, 3]}, r"debug_step must be \[start, end\), two ints with end > start"),
        ({"debug_step": [0, None]}, r"two ints with end > start, got \[0, None\]"),
        ({"debug_step": (0, 1, 2)}, r"debug_step must be \[start, end\)"),
        ({"checked_op_list": "log"}, "checked_op_list must be list or tuple"),
        ({"skipped_op_list": ["elementwise_ad"]}, r"unknown op 'elementwise_ad'.* add,"),
        ({"stack_height_limit": "1"}, "stack_height_limit must be int"),
    ],
)
def test_bad_configs_raise_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TensorCheckerConfig(True, **kwargs)


def test_enable_tensor_checker_needs_a_config_and_a_disabled_config_turns_it_off():
    with pytest.raises(TypeError, match="TensorCheckerConfig"):
        dbg.enable_tensor_checker(DebugMode.CHECK_ALL)
    dbg.enable_tensor_checker(TensorCheckerConfig(True))
    dbg.enable_tensor_checker(TensorCheckerConfig(False))
    assert hooks.observers == ()
    # no window: no step is counted (Paddle counts only inside a debug_step window)
    assert TensorCheckerConfig.current_step_id == 0
    dbg.enable_tensor_checker(TensorCheckerConfig(True, debug_step=[0, 5]))
    dbg.enable_tensor_checker(TensorCheckerConfig(False, debug_step=[0, 5]))
    assert TensorCheckerConfig.current_step_id == 1  # a disabled config counts no step


def test_disabling_restores_the_observers_exactly(x):
    def other(op, out):
        pass

    original = (other,)
    hooks.observers = original
    try:
        dbg.enable_tensor_checker(TensorCheckerConfig(True, DebugMode.CHECK_NAN_INF))
        dbg.enable_operator_stats_collection()
        assert hooks.observers == (
            other,
            dbg.tensor_checker._check_op,
            dbg.operator_stats._count_op,
        )
        dbg.disable_tensor_checker()  # off in any order, leaving the others alone
        assert hooks.observers == (other, dbg.operator_stats._count_op)
        dbg.disable_operator_stats_collection()
        assert hooks.observers == original and original == (other,)  # never mutated
    finally:
        hooks.observers = ()
