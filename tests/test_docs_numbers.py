"""The numbers the docs show after a command are what that command prints today.

Each command runs once per session (a module fixture) and every page that shows its output is
compared with the run, cell by cell as printed: the deterministic columns (losses,
accuracies, bytes) exactly; the timings are measurements of one machine and moment, so the
test checks only that the page names the command and the device beside them.

Determinism: the losses and peak memory below are the same with 1 or 2 OpenBLAS threads and
with OpenBLAS's SkylakeX, Haswell and Prescott kernels (OPENBLAS_CORETYPE), so they are
compared exactly. The run pins one BLAS thread only for speed (OpenBLAS's threads made these
small GEMMs several times slower on a busy two-core machine).

amp.md's lesson on master weights quotes losses and counts of its own measurement (the
example's fp32 and O2 runs kept and evaluated, as the page describes): a second fixture
repeats it and checks each number in the prose.

Other tables are checked where their run already happens: docs/examples.md's digits CNN in
tests/test_digits_cnn.py, docs/bf16.md's and docs/fp8.md's in
tests/test_docs_precision_numbers.py. docs/layer_to.md's memory table is checked below.

Not checked: docs/benchmarks.md's `benchmarks/simple_net.py --full` peak MiB. The peak is
the same after 1 step as after 35 (width 256) or 6 (width 1024), but one step of the four
modes at width 4096 takes 86 s on the busy 2-core machine, over this suite's budget, and it
cannot be extrapolated from smaller widths: fp32's and O1's peaks are exact quadratics in the
width (808.2 and 916.2 MiB predicted and measured at 4096), O2's is not (the CPU optimizer
update works in cache-sized blocks: predicted 800.0, measured 800.2 MiB).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from docs_tables import columns, section_after, table_after
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

import simple_net  # noqa: E402

COMPARE = "`python examples/simple_net.py --compare`"
# The pages that show its table, after a line that starts with the command.
COMPARE_PAGES = ("amp.md", "benchmarks.md")


@pytest.fixture(scope="module")
def compare_rows() -> dict[str, tuple[str, str]]:
    """``python examples/simple_net.py --compare`` on the CPU: {mode: (final loss, peak MiB)}."""
    out = io.StringIO()
    with threadpool_limits(limits=1, user_api="blas"), contextlib.redirect_stdout(out):
        simple_net.main(["--compare", "--device", "cpu"])
    lines = out.getvalue().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("mode"))
    assert lines[header].split()[-4:] == ["final", "loss", "peak", "MiB"], lines[header]
    rows = {}
    for line in lines[header + 1 :]:
        *mode, _seconds, _speed_up, loss, peak = line.split()
        rows[" ".join(mode)] = (loss, peak)
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("page", COMPARE_PAGES)
def test_the_compare_table_shows_the_losses_and_memory_the_command_prints(compare_rows, page):
    shown = columns(table_after(page, COMPARE), "final loss", "peak MiB")
    assert shown == compare_rows, (
        f"docs/{page}'s {COMPARE} table is stale: the command printed {compare_rows}; "
        "copy the printed row into the page (and re-read the prose around it)"
    )


@pytest.mark.parametrize("page", COMPARE_PAGES)
def test_the_compare_tables_timings_name_their_command_and_device(page):
    paragraph = []
    for line in section_after(page, COMPARE):
        if line.startswith("|"):
            break
        paragraph.append(line)
    said = " ".join(paragraph)
    for words in ("2-core", "no GPU", "OPENBLAS_NUM_THREADS=", "load average"):
        assert words in said, f"docs/{page} should say {words!r} beside the timed table: {said}"


def test_amp_md_says_how_close_o1_comes_to_fp32_as_its_table_shows():
    # The lesson's sentence follows the table: the digits it claims are the digits shown.
    rows = columns(table_after("amp.md", COMPARE), "final loss")
    fp32, o1 = rows["fp32"][0], rows["O1"][0]
    first_difference = next(i for i, (a, b) in enumerate(zip(fp32, o1, strict=True)) if a != b)
    digit = first_difference  # counting significant digits: "1.2496" and "1.2497" differ in the 5th
    ordinal = {3: "third", 4: "fourth", 5: "fifth", 6: "sixth", 7: "seventh"}[digit]
    lesson = " ".join(section_after("amp.md", '"final loss" is the mean')[:2])
    assert f"differs from fp32 in the {ordinal} significant digit" in lesson, (fp32, o1, lesson)


# ---- amp.md's lesson on master weights: the numbers of "How these were measured" --------------
@pytest.fixture(scope="module")
def lesson() -> dict[str, str]:
    """The example's fp32 and O2 runs kept, evaluated as amp.md's section 7 says, as shown."""
    kept = {}
    original_net, original_data = simple_net.SimpleNet, simple_net.make_data
    original_sgd = simple_net.mt.optimizer.SGD

    class KeptNet(original_net):
        def __init__(self, *args):
            super().__init__(*args)
            kept["model"] = self
            kept["initial"] = {name: p.numpy().copy() for name, p in self.named_parameters()}

    def kept_sgd(**kwargs):
        kept["optimizer"] = original_sgd(**kwargs)
        return kept["optimizer"]

    def kept_data(*args):
        kept["data"] = original_data(*args)
        return kept["data"]

    def evaluate(params):  # the mean MSE over the 20 batches, in float32 arithmetic
        losses = []
        for x, y in zip(*kept["data"], strict=True):
            h = x.numpy()
            for i in (1, 2, 3):
                h = h @ params[f"linear{i}.weight"].astype(np.float32) + params[f"linear{i}.bias"]
                h = np.maximum(h, 0) if i < 3 else h
            losses.append(np.mean((h - y.numpy()) ** 2))
        return float(np.mean(losses))

    runs = {}
    with pytest.MonkeyPatch.context() as patch, threadpool_limits(limits=1, user_api="blas"):
        patch.setattr(simple_net, "SimpleNet", KeptNet)
        patch.setattr(simple_net, "make_data", kept_data)
        patch.setattr(simple_net.mt.optimizer, "SGD", kept_sgd)
        for mode in ("fp32", "O2"):
            simple_net.train(mode=mode, log=lambda *_: None)
            runs[mode] = dict(kept["model"].named_parameters())
    initial = {name: value.astype(np.float32) for name, value in kept["initial"].items()}
    start = evaluate(initial)
    fp32 = evaluate({name: p.numpy() for name, p in runs["fp32"].items()})
    half = {name: p.numpy() for name, p in runs["O2"].items()}
    masters = {n: kept["optimizer"]._master_weights[p.name].numpy() for n, p in runs["O2"].items()}
    moved = sum(int(np.sum(half[name] != initial[name].astype(np.float16))) for name in half)
    total = sum(value.size for value in half.values())
    o2 = evaluate(half)
    return {
        "start": f"{start:.6f}",
        "fp32 end": f"{fp32:.6f}",
        "fp32 drop": f"{start - fp32:.5f}",
        "O2 end": f"{o2:.6f}",
        "O2 drop": f"{start - o2:.5f}",
        "O2 share": f"{(start - o2) / (start - fp32):.0%}",
        "masters end": f"{evaluate(masters):.6f}",
        "moved": f"{moved / total:.1%} of the float16 weights ({moved:,} of {total:,})",
    }


LESSON = (  # what amp.md's section 7 says, as patterns around the numbers the fixture makes
    ("start", r"it starts at ([\d.]+) \(the initial model"),
    ("fp32 end", r"fp32 ends at ([\d.]+) on the same data"),
    ("fp32 drop", r"on the same data, a drop of ([\d.]+)\."),
    ("O2 end", r"float16 model ends at ([\d.]+),"),
    ("O2 drop", r"float16 model ends at [\d.]+, a drop of ([\d.]+):"),
    ("O2 share", r"a drop of [\d.]+: (\d+%) of fp32's progress"),
    ("masters end", r"evaluated in float32, end at ([\d.]+), where fp32 ended"),
    ("moved", r"had moved ([\d.]+% of the float16 weights \([\d,]+ of [\d,]+\))"),
)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "pattern"), LESSON, ids=[name for name, _ in LESSON])
def test_amp_md_lessons_numbers_are_what_its_measurement_gives(lesson, name, pattern):
    text = " ".join(section_after("amp.md", "## 7. What it costs on a CPU"))
    shown = re.search(pattern, text)
    assert shown, f"amp.md's section 7 no longer says {pattern!r}; update LESSON with the page"
    assert shown.group(1) == lesson[name], (name, lesson)


# ---- docs/layer_to.md's memory table: `python benchmarks/layer_to_memory.py` -----------------
def test_layer_to_md_shows_the_peak_memory_the_benchmark_prints():
    # Memory accounting, not timing: the same bytes on every machine (about 2 s).
    spec = importlib.util.spec_from_file_location(
        "layer_to_memory", ROOT / "benchmarks" / "layer_to_memory.py"
    )
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        benchmark.main([])
    printed = {}
    for line in out.getvalue().splitlines()[2:]:
        depth, _x, width, *cells = line.split()
        printed[f"{depth} × {width}"] = tuple(cells)
    table = table_after("layer_to.md", "`python benchmarks/layer_to_memory.py`")
    shown = {row["layers × width"]: tuple(list(row.values())[1:]) for row in table}
    assert shown == printed, (
        f"docs/layer_to.md's table is stale: the benchmark printed {printed}; copy it in"
    )
