"""benchmarks/timing.py: the rounds of an interleaved run and the ratio paired by round."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

# loaded by path: benchmarks/ on sys.path would shadow examples/simple_net.py for other tests
_spec = importlib.util.spec_from_file_location(
    "benchmarks_timing", Path(__file__).resolve().parents[1] / "benchmarks" / "timing.py"
)
timing = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(timing)


def test_the_paired_ratio_is_the_median_of_each_rounds_ratio():
    # the machine slowed down 3x half-way: each round's ratio stays 1.2, the medians' not
    rounds = [{"ours": 1.2, "torch": 1.0}] * 3 + [{"ours": 3.6, "torch": 3.0}] * 3
    rounds += [{"ours": 9.0, "torch": 1.0}]  # one outlier round: the median ignores it
    assert timing.paired_ratio(rounds, "ours", "torch") == pytest.approx(1.2)
    assert timing.paired_ratio(rounds, "torch", "ours") == pytest.approx(1 / 1.2)


def test_a_round_missing_a_run_is_left_out_and_none_at_all_is_an_error():
    rounds = [{"ours": 2.0, "torch": 1.0}, {"ours": 5.0}, {"ours": 4.0, "torch": 1.0}]
    assert timing.paired_ratio(rounds, "ours", "torch") == pytest.approx(3.0)
    with pytest.raises(ValueError, match="no round timed both 'ours' and 'theirs'"):
        timing.paired_ratio(rounds, "ours", "theirs")


def test_interleave_rounds_times_each_run_in_turns_of_a_block(monkeypatch):
    monkeypatch.setattr(timing, "SETTLE_S", 0.0)
    calls = []
    runs = {name: (lambda name=name: calls.append(name), lambda: None) for name in ("a", "b")}
    medians, rounds = timing.interleave_rounds(runs, 5, 0, block=2, wake=0, warmup_s=0.0)
    assert set(medians) == {"a", "b"} and len(rounds) == 3  # blocks of 2, 2 and 1
    assert all(set(r) == {"a", "b"} for r in rounds)
    warm = ["a", "b"]  # warm_up's first call of each
    assert calls == warm + ["a", "a", "b", "b"] * 2 + ["a", "b"]
