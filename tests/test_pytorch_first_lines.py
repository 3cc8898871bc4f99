"""docs/porting.md's "A PyTorch script's first lines", row by row (issue 27 item 11).

The table is read from the page, so the page and this test cannot drift: a *works* line must
run as written; a *use* line must raise an AttributeError (or a DeviceError) whose message
names the replacement, and the replacement must run. ``torch`` stands for minitorch_amp.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import minitorch_amp
from minitorch_amp import nn
from minitorch_amp.backend.device_errors import DeviceError

PAGE = Path(__file__).resolve().parents[1] / "docs" / "porting.md"
HEADING = "## A PyTorch script's first lines"
# The first lines issue 27 names: the table must keep answering each.
ISSUE_LINES = {
    "torch.cuda.is_available()",
    "model.half()",
    "torch.manual_seed(0)",
    "nn.Module",
    "torch.tensor([1.0, 2.0], requires_grad=True)",
    "x.view(-1, 8)",
    "x.requires_grad",
    "opt.param_groups",
}


def table_rows() -> list[tuple[str, str, str | None]]:
    """``(line, verdict, replacement)`` per row: the first code span of each cell, and
    whether the second cell starts with 'works' or 'use'."""
    text = PAGE.read_text()
    section = text[text.index(HEADING) :].split("\n## ", 1)[0]
    rows = []
    for row in section.splitlines():
        if not row.startswith("| `"):
            continue
        pytorch, here = (cell.strip() for cell in row.strip("|").split(" | ", 1))
        line = re.match(r"`([^`]+)`", pytorch).group(1)
        verdict = re.match(r"(works|use)\b", here).group(1)  # a row saying neither fails
        spans = re.findall(r"`([^`]+)`", here)
        rows.append((line, verdict, spans[0] if verdict == "use" else None))
    return rows


ROWS = table_rows()


def namespace() -> dict:
    """What the lines name: ``torch``, ``nn``, a tensor, a model, its optimizer, a device."""
    torch = minitorch_amp
    model = nn.Linear(8, 2)
    scope = {
        "torch": torch,
        "mt": torch,
        "nn": nn,
        "x": torch.ones([2, 8]),
        "model": model,
        "opt": torch.optimizer.SGD(model.parameters(), lr=0.1),
    }
    exec('device = torch.device("cuda" if torch.cuda.is_available() else "cpu")', scope)
    return scope


def named(code: str) -> str:
    """The name a replacement calls (``model.float16()`` -> ``float16``) or is."""
    call = re.match(r"[\w.]*?(\w+)\(", code)
    return call.group(1) if call else re.findall(r"\w+", code)[-1]


def test_the_table_answers_every_first_line_the_issue_names():
    assert {line for line, _, _ in ROWS} >= ISSUE_LINES
    assert {verdict for _, verdict, _ in ROWS} == {"works", "use"}


@pytest.mark.parametrize(("line", "verdict", "replacement"), ROWS, ids=[r[0] for r in ROWS])
def test_each_row_does_what_the_table_says(line, verdict, replacement):
    scope = namespace()
    if verdict == "works":
        exec(line, scope)
        return
    with pytest.raises((AttributeError, DeviceError)) as info:
        exec(line, scope)
    assert re.search(rf"\b{re.escape(named(replacement))}\b", str(info.value)), (
        f"{line!r} raised {info.value!r}, which does not name {replacement!r}"
    )
    exec(replacement, namespace())


def test_requires_grad_is_the_opposite_of_stop_gradient_both_ways():
    x = minitorch_amp.ones([2])
    assert x.requires_grad is False and x.stop_gradient is True
    x.requires_grad = True
    assert x.stop_gradient is False
    assert x.requires_grad_(False) is x and x.stop_gradient is True
    with pytest.raises(TypeError, match="requires_grad must be True or False"):
        x.requires_grad = "yes"
    assert x.stop_gradient is True  # a refused value changes nothing
    y = minitorch_amp.ones([2]).requires_grad_()
    (y * y).sum().backward()
    assert y.grad is not None


def test_a_hint_is_still_an_attribute_error_so_hasattr_and_getattr_defaults_hold():
    scope = namespace()
    x, model, opt = scope["x"], scope["model"], scope["opt"]
    assert not hasattr(x, "view") and not hasattr(model, "half")
    assert not hasattr(opt, "param_groups") and not hasattr(minitorch_amp, "manual_seed")
    assert getattr(nn, "Module", None) is None and getattr(minitorch_amp.cuda, "x", 1) == 1
    with pytest.raises(AttributeError) as info:
        model.half()
    assert info.value.name == "half"


def test_names_without_a_hint_keep_pythons_message():
    with pytest.raises(AttributeError, match=r"^'Linear' object has no attribute 'nothing'$"):
        nn.Linear(2, 2).nothing  # noqa: B018
    with pytest.raises(AttributeError, match=r"^'Tensor' object has no attribute 'nothing'$"):
        minitorch_amp.ones([1]).nothing  # noqa: B018
    with pytest.raises(AttributeError, match=r"^module 'minitorch_amp' has no attribute 'no'$"):
        minitorch_amp.no  # noqa: B018


def test_tensors_still_convert_to_numpy_and_layers_find_their_parameters():
    x = minitorch_amp.ones([2, 3])
    assert np.asarray(x).shape == (2, 3)
    model = nn.Linear(2, 2)
    assert model.weight is model._parameters["weight"]


def test_calling_mt_device_gives_the_place_that_to_takes():
    place = minitorch_amp.device("cpu")
    assert place == minitorch_amp.CPUPlace() and minitorch_amp.ones([1]).to(place).place == place
    with pytest.raises(DeviceError, match="unknown device 'tpu'"):
        minitorch_amp.device("tpu")
    with pytest.raises(DeviceError, match="give the number once"):
        minitorch_amp.device("cuda:0", 1)
