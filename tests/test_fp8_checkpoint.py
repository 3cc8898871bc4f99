"""FP8 scaling states travel with the model's checkpoint.

Each weight that has run FP8 GEMMs under delayed scaling saves its three scaling states
(input, weight, output gradient) in ``state_dict()`` under
``<weight's key>._fp8_meta.<role>.<scale|scale_inv|amax_history>``; loading restores them,
all or nothing, so a resumed run takes the very next step the original would have taken.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import amp, nn

RECIPE = amp.DelayedScaling(amax_history_len=4)
ROLES = ("input", "weight", "grad")
FIELDS = ("scale", "scale_inv", "amax_history")


def make_model(seed: int) -> nn.Layer:
    mt.seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def batch(step: int):
    rng = np.random.default_rng(step)
    return mt.to_tensor(rng.normal(0, 1 + step, (6, 8)).astype("float32"))


def train_step(model, optimizer, step: int, recipe=RECIPE):
    with amp.fp8_autocast(recipe=recipe):
        out = model(batch(step))
    loss = (out * out).mean()
    loss.backward()
    optimizer.step()
    optimizer.clear_grad()
    return out


def sgd(model):
    return mt.optimizer.SGD(learning_rate=0.05, parameters=model.parameters())


def trained(steps: int = 3, recipe=RECIPE):
    model = make_model(0)
    optimizer = sgd(model)
    for step in range(steps):
        train_step(model, optimizer, step, recipe)
    return model, optimizer


def fp8_arrays(model) -> dict:
    """Every scaling array of every weight with FP8 meta, copied to the host."""
    out = {}
    for name, param in model.named_parameters():
        meta = amp.fp8_meta(param)
        if meta is not None:
            for role in ROLES:
                for field in FIELDS:
                    array = getattr(getattr(meta, role), field)
                    out[f"{name}.{role}.{field}"] = np.array(array)
    return out


def assert_bit_identical(a: dict, b: dict):
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
        assert a[key].tobytes() == b[key].tobytes(), key


def test_state_dict_holds_the_scaling_states_of_weights_that_ran_in_fp8():
    model, _ = trained()
    state = model.state_dict()
    expected = {
        f"{layer}.weight._fp8_meta.{role}.{field}"
        for layer in ("0", "2")
        for role in ROLES
        for field in FIELDS
    }
    assert expected <= set(state)
    assert state["0.weight._fp8_meta.input.amax_history"].shape == [4]
    assert state["2.weight._fp8_meta.grad.scale"].shape == [1]
    meta = amp.fp8_meta(model[0].weight)
    assert state["0.weight._fp8_meta.input.scale"].numpy().tolist() == meta.input.scale.tolist()
    assert meta.input.scale.tolist() != [1.0]  # the scales moved: there is something to save


def test_each_role_saves_the_largest_value_of_the_format_its_scale_was_made_for():
    """HYBRID: the input and weight scales are E4M3's (448 / amax), the gradient's E5M2's."""
    state = trained(steps=2)[0].state_dict()
    saved = {role: state[f"0.weight._fp8_meta.{role}.fp8_max"].numpy() for role in ROLES}
    assert {role: value.tolist() for role, value in saved.items()} == {
        "input": [448.0],
        "weight": [448.0],
        "grad": [57344.0],
    }
    assert all(value.dtype == np.float32 for value in saved.values())


def legacy(state: dict) -> dict:
    """A checkpoint as saved before the format was: no ``fp8_max`` entries."""
    return {key: value for key, value in state.items() if not key.endswith(".fp8_max")}


def test_a_checkpoint_without_fp8_max_still_resumes_bit_for_bit_and_is_saved_with_it():
    model, optimizer = trained(steps=3)
    resumed = make_model(1)
    assert resumed.set_state_dict(legacy(model.state_dict())) == ([], [])
    assert "0.weight._fp8_meta.grad.fp8_max" not in resumed.state_dict()  # not known yet
    out_original = train_step(model, optimizer, 3)
    out_resumed = train_step(resumed, sgd(resumed), 3)
    assert out_resumed.numpy().tobytes() == out_original.numpy().tobytes()
    assert resumed.state_dict()["0.weight._fp8_meta.grad.fp8_max"].numpy().tolist() == [57344.0]


def test_a_loaded_state_saved_again_before_training_keeps_its_format():
    model, _ = trained(steps=2)
    passed_on = make_model(1)
    passed_on.set_state_dict(model.state_dict())
    state = passed_on.state_dict()
    assert state["2.weight._fp8_meta.grad.fp8_max"].numpy().tolist() == [57344.0]
    fresh = make_model(2)
    fresh.set_state_dict(state)
    with pytest.raises(ValueError, match="made for float8_e5m2"):
        train_step(
            fresh, sgd(fresh), 2, recipe=amp.DelayedScaling(amax_history_len=4, fp8_format="E4M3")
        )


E4M3_RECIPE = amp.DelayedScaling(amax_history_len=4, fp8_format="E4M3")


def test_a_loaded_state_is_taken_up_only_by_a_recipe_of_its_formats():
    """A HYBRID gradient scale is 57344 / amax: cast to E4M3 it would saturate every value
    above amax / 128 for a whole step."""
    model, _ = trained(steps=2)
    fresh = make_model(1)
    fresh.set_state_dict(model.state_dict())
    before = snapshot(fresh)
    with pytest.raises(ValueError, match=r"grad of a weight.*float8_e5m2.*float8_e4m3fn") as info:
        train_step(fresh, sgd(fresh), 2, recipe=E4M3_RECIPE)
    assert "resume with the saved fp8_format" in str(info.value)
    assert_unchanged(fresh, before)
    assert amp.fp8_meta(fresh[0].weight).recipe is None  # still waiting for its recipe
    train_step(fresh, sgd(fresh), 2)  # the saved HYBRID takes it up
    assert amp.fp8_meta(fresh[0].weight).recipe == RECIPE


def test_a_format_other_than_the_weights_recipe_is_refused_and_nothing_is_loaded():
    source, _ = trained(steps=3)  # HYBRID
    model, _ = trained(steps=1, recipe=E4M3_RECIPE)
    before = snapshot(model)
    with pytest.raises(ValueError, match="fp8_format=E4M3") as info:
        model.set_state_dict(source.state_dict())
    assert "nothing was loaded" in str(info.value)
    assert_unchanged(model, before)


def test_a_model_without_fp8_meta_saves_and_loads_exactly_as_before():
    model = make_model(0)
    assert list(model.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    fresh = make_model(1)
    assert fresh.set_state_dict(model.state_dict()) == ([], [])
    assert amp.fp8_meta(fresh[0].weight) is None


def test_current_scaling_keeps_nothing_to_save():
    model, _ = trained(steps=1, recipe=amp.Float8CurrentScaling())
    assert not any("_fp8_meta" in key for key in model.state_dict())


def test_a_resumed_run_takes_the_same_next_step_bit_for_bit(tmp_path):
    model, optimizer = trained(steps=3)
    path = str(tmp_path / "ckpt.pdparams")
    mt.save(model.state_dict(), path)

    resumed = make_model(1)  # other weights, no FP8 meta yet
    missing, unexpected = resumed.set_state_dict(mt.load(path))
    assert (missing, unexpected) == ([], [])
    assert_bit_identical(fp8_arrays(resumed), fp8_arrays(model))

    out_original = train_step(model, optimizer, 3)
    out_resumed = train_step(resumed, sgd(resumed), 3)
    assert out_resumed.numpy().tobytes() == out_original.numpy().tobytes()
    assert_bit_identical(fp8_arrays(resumed), fp8_arrays(model))
    for a, b in zip(model.parameters(), resumed.parameters()):
        assert a.numpy().tobytes() == b.numpy().tobytes()


def test_without_the_fp8_entries_a_resumed_run_restarts_its_scales():
    """What the checkpoint entries prevent: scales restarting at 1 change the next step."""
    model, optimizer = trained(steps=3)
    plain = {k: v for k, v in model.state_dict().items() if "_fp8_meta" not in k}
    resumed = make_model(1)
    resumed.set_state_dict(plain)
    out_original = train_step(model, optimizer, 3)
    out_resumed = train_step(resumed, sgd(resumed), 3)
    assert out_resumed.numpy().tobytes() != out_original.numpy().tobytes()


def test_loading_into_a_model_that_already_trains_in_fp8_overwrites_its_states_in_place():
    model, _ = trained(steps=3)
    other, _ = trained(steps=1)
    arrays = amp.fp8_meta(other[0].weight).input.amax_history  # a CUDA graph may hold it
    other.set_state_dict(model.state_dict())
    assert amp.fp8_meta(other[0].weight).input.amax_history is arrays
    assert_bit_identical(fp8_arrays(other), fp8_arrays(model))


def test_torch_style_strict_loading_accepts_the_fp8_entries_of_a_fresh_model():
    model, _ = trained(steps=2)
    fresh = make_model(1)
    result = fresh.load_state_dict(model.state_dict())  # strict=True
    assert (result.missing_keys, result.unexpected_keys) == ([], [])
    assert_bit_identical(fp8_arrays(fresh), fp8_arrays(model))


def test_a_loaded_state_is_taken_up_by_a_recipe_with_its_history_length():
    model, _ = trained(steps=2)
    fresh = make_model(1)
    fresh.set_state_dict(model.state_dict())
    with pytest.raises(ValueError, match="amax_history_len=4"):
        train_step(fresh, sgd(fresh), 2, recipe=amp.DelayedScaling(amax_history_len=8))
    assert_bit_identical(fp8_arrays(fresh), fp8_arrays(model))  # nothing changed


def snapshot(model) -> tuple:
    params = [p.numpy().copy() for p in model.parameters()]
    return params, fp8_arrays(model)


def assert_unchanged(model, before):
    params, arrays = snapshot(model)
    for a, b in zip(params, before[0]):
        assert a.tobytes() == b.tobytes()
    assert_bit_identical(arrays, before[1])


def corrupt(state: dict, key: str, value):
    state = dict(state)
    state[key] = value
    return state


BAD_ENTRIES = {
    "one history longer than the others": (
        "0.weight._fp8_meta.input.amax_history",
        np.zeros(8, "float32"),
        "amax histories",
    ),
    "a zero scale": ("2.weight._fp8_meta.grad.scale", np.zeros(1, "float32"), "scale"),
    "a NaN scale": ("0.weight._fp8_meta.weight.scale", np.full(1, np.nan, "float32"), "scale"),
    "an inverse that is not 1 / scale": (
        "0.weight._fp8_meta.input.scale_inv",
        np.full(1, 3.0, "float32"),
        "scale_inv",
    ),
    "a negative amax": (
        "2.weight._fp8_meta.input.amax_history",
        np.array([1.0, -2.0, 0.0, 0.0], "float32"),
        "negative",
    ),
    "strings": ("0.weight._fp8_meta.input.scale", np.array(["x"]), "floating-point numbers"),
    "a scale of two entries": (
        "0.weight._fp8_meta.input.scale",
        np.ones(2, "float32"),
        r"not \[1\]",
    ),
    "an unknown field": ("0.weight._fp8_meta.input.amax", np.ones(1, "float32"), "amax"),
    "an fp8_max of no FP8 format": (
        "0.weight._fp8_meta.grad.fp8_max",
        np.full(1, 100.0, "float32"),
        r"not \[448.0\] \(E4M3\) or \[57344.0\] \(E5M2\)",
    ),
    "an fp8_max of two entries": (
        "2.weight._fp8_meta.input.fp8_max",
        np.full(2, 448.0, "float32"),
        "E4M3",
    ),
}


@pytest.mark.parametrize("bad", BAD_ENTRIES.values(), ids=list(BAD_ENTRIES))
@pytest.mark.parametrize("target", ["fresh", "training"])
def test_a_corrupt_fp8_entry_is_refused_and_nothing_is_loaded(bad, target):
    source, _ = trained(steps=3)
    key, value, message = bad
    state = corrupt(source.state_dict(), key, value)
    model = make_model(1) if target == "fresh" else trained(steps=1)[0]
    before = snapshot(model)
    with pytest.raises(ValueError, match=message) as info:
        model.set_state_dict(state)
    assert "nothing was loaded" in str(info.value)
    assert_unchanged(model, before)


def test_a_history_length_other_than_the_weights_recipe_is_refused_and_nothing_is_loaded():
    source, _ = trained(steps=3, recipe=amp.DelayedScaling(amax_history_len=8))
    model, _ = trained(steps=1)  # trains with amax_history_len=4
    before = snapshot(model)
    with pytest.raises(ValueError, match="amax_history_len=4") as info:
        model.set_state_dict(source.state_dict())
    assert "nothing was loaded" in str(info.value)
    assert_unchanged(model, before)


def test_an_incomplete_fp8_state_is_refused():
    source, _ = trained(steps=2)
    state = source.state_dict()
    del state["0.weight._fp8_meta.grad.amax_history"]
    model = make_model(1)
    with pytest.raises(ValueError, match=r"grad\.amax_history"):
        model.set_state_dict(state)
    assert amp.fp8_meta(model[0].weight) is None


def test_a_plain_checkpoint_loaded_into_an_fp8_model_lists_the_fp8_entries_as_missing():
    model, _ = trained(steps=2)
    before = fp8_arrays(model)
    plain = {k: v for k, v in make_model(1).state_dict().items()}
    with pytest.warns(UserWarning, match="_fp8_meta"):
        missing, unexpected = model.set_state_dict(plain)
    assert "0.weight._fp8_meta.input.scale" in missing and unexpected == []
    assert_bit_identical(fp8_arrays(model), before)  # they keep their values


def test_save_dtype_casts_the_weights_but_never_rounds_a_scale():
    model, _ = trained(steps=3)
    model = amp.decorate(models=model, level="O2", dtype="bfloat16", save_dtype="float16")
    state = model.state_dict()
    assert state["0.weight"].dtype == np.float16
    scale = state["0.weight._fp8_meta.input.scale"]
    assert scale.dtype == np.float32
    assert scale.numpy().tolist() == amp.fp8_meta(model[0].weight).input.scale.tolist()


def test_current_scaling_after_a_load_starts_afresh_as_it_keeps_no_state():
    model, _ = trained(steps=2)
    fresh = make_model(1)
    fresh.set_state_dict(model.state_dict())
    train_step(fresh, sgd(fresh), 2, recipe=amp.Float8CurrentScaling())
    assert isinstance(amp.fp8_meta(fresh[0].weight).recipe, amp.Float8CurrentScaling)
