"""examples/gpt.py trains a character-level GPT as a Paddle user writes one: every level
learns, weights are tied, decay spares biases and norms, sampling obeys temperature and top-k.

The tests use a small model (one layer, width 32) so that they take seconds
(tests/test_gpt_parity.py runs the example's own configuration against PyTorch).
"""

from __future__ import annotations

import functools
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import minitorch_amp as mt

ROOT = Path(__file__).resolve().parents[1]
TINY = {"context": 16, "width": 32, "num_layers": 1, "num_heads": 2}


@pytest.fixture
def gpt(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    import gpt

    return gpt


def test_the_command_line_trains_reports_a_final_loss_and_prints_a_sample():
    out = subprocess.run(
        [
            sys.executable, str(ROOT / "examples" / "gpt.py"), "--device", "cpu",
            "--steps", "4", "--warmup", "2", "--eval-every", "2", "--batch-size", "4",
            "--context", "16", "--width", "32", "--layers", "1", "--heads", "2",
            "--sample-length", "12", "--prompt", "The",
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("GPT on cpu, fp32: 1 layers, 2 heads, width 32, context 16")
    assert sum(line.startswith("step ") for line in lines) == 2  # steps 2 and 4
    assert any(line.startswith("final loss: train ") for line in lines)
    header = next(line for line in lines if line.startswith("sample (temperature 0.8, top-k 10)"))
    sample = out.stdout.split(header + "\n", 1)[1].removesuffix("\n")  # print's own newline
    assert sample.startswith("The") and len(sample) == len("The") + 12  # the prompt, 12 more


def test_compare_trains_every_level_on_the_same_text_and_prints_a_table():
    out = subprocess.run(
        [
            sys.executable, str(ROOT / "examples" / "gpt.py"), "--device", "cpu", "--compare",
            "--steps", "3", "--warmup", "1", "--batch-size", "2", "--context", "8",
            "--width", "16", "--layers", "1", "--heads", "2",
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("GPT on cpu, every level: 1 layers")
    table = lines[lines.index(next(x for x in lines if x.startswith("level "))) + 1 :]
    assert [row.split()[0] for row in table] == ["fp32", "O1", "O2", "bf16"]
    assert table[0].endswith("+0.000%")  # fp32 against itself


def test_bad_sizes_are_refused_with_the_option_to_change():
    script = str(ROOT / "examples" / "gpt.py")
    out = subprocess.run(
        [sys.executable, script, "--width", "30", "--heads", "4"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2 and "--width (30) must be a multiple of --heads (4)" in out.stderr


@pytest.mark.parametrize("flag", [["--top-k", "0"], ["--temperature", "0"]])
def test_bad_sampling_flags_are_refused_before_training(flag, gpt, monkeypatch, capsys):
    monkeypatch.setattr(gpt, "train", lambda **_: pytest.fail("trained before the check"))
    with pytest.raises(SystemExit) as done:
        gpt.main([*flag, "--device", "cpu"])
    assert done.value.code == 2 and "--top-k at least 1" in capsys.readouterr().err


def test_generate_refuses_a_top_k_below_1(gpt, cpu):
    model = gpt.GPT(8, context=4, width=8, num_layers=1, num_heads=2)
    with pytest.raises(ValueError, match="top_k must be at least 1"):
        model.generate(mt.zeros([1, 1], dtype="int64"), 2, top_k=0)


RUN = dict(
    steps=100,
    batch_size=16,
    warmup=10,
    eval_every=100,
    learning_rate=3e-3,
    dropout=0.0,
    log=lambda *a: None,
)


@functools.cache
def final_val_loss(gpt, level: str) -> tuple[float, int]:
    """The validation loss after training the tiny GPT at ``level``, and the vocabulary size."""
    _, tokenizer, history = gpt.train(level=level, **RUN, **TINY)
    return history[-1][2], tokenizer.vocab_size


@pytest.mark.slow
@pytest.mark.parametrize("level", ["fp32", "O1", "O2", "bf16"])
def test_every_level_learns_the_corpus_and_stays_near_fp32(gpt, cpu, level):
    val_loss, vocab_size = final_val_loss(gpt, level)
    assert val_loss < math.log(vocab_size) - 1.0  # far below a uniform guess
    reference, _ = final_val_loss(gpt, "fp32")
    tolerance = {"fp32": 0.0, "O1": 0.01, "O2": 0.01, "bf16": 0.02}[level]
    assert abs(val_loss - reference) <= tolerance * reference


def test_o2_keeps_float16_weights_and_float32_layer_norms(gpt, cpu):
    model, _, _ = gpt.train(level="O2", steps=2, warmup=1, log=lambda *a: 0, **TINY)
    assert model.token_embedding.weight.dtype == mt.float16  # also the output projection
    assert model.blocks.layers[0].linear1.weight.dtype == mt.float16
    assert model.blocks.layers[0].norm1.weight.dtype == mt.float32


def test_the_output_projection_is_the_token_embedding(gpt, cpu):
    mt.seed(0)
    model = gpt.GPT(vocab_size=11, **TINY)
    big = [p for p in model.parameters() if 11 in p.shape]
    assert big == [model.token_embedding.weight]  # no separate [width, vocab] projection
    model.eval()
    tokens = mt.to_tensor(np.array([[1, 2, 3]]))
    before = model(tokens).numpy()
    model.token_embedding.weight.set_value(np.zeros([11, 32], np.float32))
    assert np.all(model(tokens).numpy() == 0) and np.any(before != 0)


def test_weight_decay_shrinks_the_2d_weights_only(gpt, cpu):
    mt.seed(0)
    model = gpt.GPT(vocab_size=11, dropout=0.0, **TINY)
    opt, schedule = gpt.build_optimizer(
        model, learning_rate=0.5, steps=4, warmup=1, weight_decay=0.1
    )
    schedule.step()  # past the warmup's lr of 0
    before = {p.name: p.numpy().copy() for p in model.parameters()}
    (model(mt.to_tensor(np.array([[1, 2]]))) * 0.0).sum().backward()  # zero gradients
    opt.step()  # Adam's part is 0 / (0 + eps): only the decay moves anything
    for p in model.parameters():
        factor = 1 - 0.5 * 0.1 if p.ndim == 2 else 1.0
        np.testing.assert_allclose(p.numpy(), before[p.name] * factor, rtol=1e-6, err_msg=p.name)


def test_generate_with_top_k_1_is_greedy_and_keeps_the_prompt(gpt, cpu):
    mt.seed(0)
    model = gpt.GPT(vocab_size=11, **TINY)
    prompt = mt.to_tensor(np.array([[3, 1, 4]]))
    out = model.generate(prompt, length=20, temperature=0.7, top_k=1).numpy()[0]
    assert out.shape == (23,) and list(out[:3]) == [3, 1, 4]  # beyond the context of 16 too
    assert model.training  # generate() evaluates in eval mode and restores the mode it found
    model.eval()
    for i in range(3, 23):
        window = mt.to_tensor(out[None, max(0, i - 16) : i])
        assert out[i] == int(np.argmax(model(window).numpy()[0, -1]))


def test_generate_samples_only_among_the_top_k(gpt, cpu):
    mt.seed(0)
    model = gpt.GPT(vocab_size=11, **TINY)
    prompt = mt.to_tensor(np.array([[5]]))
    model.eval()
    allowed = set(np.argsort(model(prompt).numpy()[0, -1])[-3:].tolist())
    draws = {
        int(model.generate(prompt, 1, temperature=5.0, top_k=3).numpy()[0, 1]) for _ in range(60)
    }
    assert draws <= allowed and len(draws) > 1  # a high temperature spreads over all three
    with pytest.raises(ValueError, match="temperature must be > 0"):
        model.generate(prompt, 1, temperature=0.0)


@pytest.mark.parametrize("level", ["fp32", "O1", "O2", "bf16"])
def test_a_training_step_neither_reads_the_host_nor_uploads_after_the_first(gpt, cpu, level):
    """What a CUDA graph capture refuses (docs/graphs.md): the sync debug mode, which the CPU
    backend runs at the places a GPU would wait or upload, hears nothing in the third step."""
    from minitorch_amp import amp
    from minitorch_amp.device import sync_debug_mode

    mt.seed(0)
    model = gpt.GPT(20, dropout=0.0, **TINY)
    opt, schedule = gpt.build_optimizer(model, 1e-3, 8, 2, 0.1)
    cast = gpt.amp_settings(level)
    if level in ("O2", "bf16"):
        model, opt = amp.decorate(models=model, optimizers=opt, level="O2", dtype=cast["dtype"])
    scaler = amp.GradScaler(enable=level != "bf16")
    rng = np.random.default_rng(0)
    for step in range(3):
        x, y = (mt.to_tensor(rng.integers(0, 20, (2, TINY["context"]))) for _ in "xy")
        with sync_debug_mode("error" if step == 2 else "default"):
            scaler.scale(gpt.loss_fn(model, x, y, cast)).backward()
            scaler.step(opt)
            scaler.update()
            opt.clear_grad()
            schedule.step()
