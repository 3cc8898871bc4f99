"""benchmarks/gpu_check.sh, the GPU acceptance check, is right without a GPU.

Its commands name scripts and options that exist today, its budgets fit in 8 minutes, and its
bookkeeping works: in a fake checkout whose scripts are stubs (one passes, one fails, one
hangs, one is missing) every stage runs, the summary says which failed and quotes each
stage's table, and the exit status is non-zero. The real stages need a GPU
(docs/benchmarks.md, "The GPU check").
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"
STAGES = ["device", "pytest", "kernels", "simple_net", "optimizer", "host_profile", "compare"]
LIMIT_S = 480  # the check's promise: under 8 minutes on an H100
ENV = {k: v for k, v in os.environ.items() if k not in ("OUT", "PYTHONPATH")}


def check(*args: str, cwd: Path = ROOT, script: Path = SCRIPT, **env: str):
    """Run the check with ``args``; the completed process (stdout and stderr as text)."""
    return subprocess.run(
        ["bash", str(script), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={**ENV, "PYTHON": sys.executable, **env},
    )


def dry_run(*args: str) -> dict[str, tuple[int, str]]:
    """Stage name -> (budget s, command), as ``--dry-run`` prints them."""
    done = check("--dry-run", *args)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = lines.index("stage         budget  command")
    stages = {}
    for line in lines[header + 1 :]:
        name, budget, command = re.fullmatch(r"(\S+) +(\d+) s  (.*)", line).groups()
        stages[name] = (int(budget), command)
    return stages


def test_the_script_is_clean_shell():
    """shellcheck where it is installed; bash's own syntax check everywhere."""
    done = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    if shutil.which("shellcheck"):
        done = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout


def test_dry_run_lists_every_stage_within_eight_minutes_and_runs_nothing(tmp_path):
    out = tmp_path / "out"
    done = check("--dry-run", "--out", str(out))
    assert done.returncode == 0, done.stderr
    stages = dry_run()
    assert list(stages) == STAGES
    total = re.search(r"at most (\d+) s \(limit (\d+) s", done.stdout).groups()
    assert int(total[1]) == LIMIT_S
    assert sum(budget for budget, _ in stages.values()) < int(total[0]) <= LIMIT_S
    assert not out.exists(), "a dry run made the output folder"


def test_stages_picks_and_caps():
    assert list(dry_run("--stages", "compare,kernels")) == ["kernels", "compare"]  # in order
    assert {budget for budget, _ in dry_run("--max-stage-s", "7").values()} == {7}
    bad = check("--stages", "kernels,gemm")
    assert bad.returncode == 2
    assert "no stage 'gemm'" in bad.stderr and "host_profile" in bad.stderr
    empty = check("--stages", ",")
    assert empty.returncode == 2 and empty.stderr.startswith("gpu_check.sh: no stage ''")


def simple_commands(line: str) -> list[list[str]]:
    """The words of each command in a shell line, split at ``;``, ``&&`` and ``||``."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    for token in lexer:
        if token in (";", "&&", "||"):
            commands.append([])
        else:
            commands[-1].append(token)
    return [words for words in commands if words]


def test_every_command_names_a_script_and_options_that_exist():
    """Each ``python x.py --opt`` names a script of the checkout whose parser has ``--opt``
    (a missing script only where the stage is optional); ``-m`` names our package or pytest
    with a marker the project registers."""
    markers, checked = (ROOT / "pyproject.toml").read_text(), []
    for name, (_, line) in dry_run().items():
        command, _, note = line.partition("  [optional: skipped when ")
        for words in simple_commands(command):
            if words[:3] == ["timeout", "-s", "INT"]:
                words = words[4:]  # (an interrupt before the stage's budget ends)
            if not Path(words[0]).name.startswith("python") or words[1] == "-c":
                continue  # nvidia-smi, the stage's status; a one-line check
            if words[1] == "-m":
                module, options = words[2], words[3:]
                if module == "pytest":
                    assert options[:2] == ["-m", "gpu"] and '"gpu: ' in markers, name
                    continue
                path = ROOT / module / "__main__.py"
            else:
                path, options = ROOT / words[1], words[2:]
            if not path.exists():
                assert note.startswith(words[1]), f"{name}: {path} is missing"
                continue
            source = path.read_text()
            for option in (word for word in options if word.startswith("--")):
                assert f'"{option}"' in source, f"{name}: {path.name} has no {option}"
                checked.append(f"{path.relative_to(ROOT)} {option}")
    assert {"minitorch_amp/__main__.py --no-compile", "examples/simple_net.py --graph"} <= set(
        checked
    )


def test_the_stages_run_the_gpu_tests_the_tables_and_the_example():
    """pytest -m gpu, the kernel table (bf16 rows are its default) and the FP8 GEMM's after it,
    SimpleNet with its graph rows, the host profile, the example's --compare --full --graph
    with the bf16 and FP8 rows (issue 28 compares the FP8 graph step with the float16 one);
    all on the GPU."""
    stages = dry_run()
    command = {name: stages[name][1] for name in stages}
    assert re.fullmatch(
        r"timeout -s INT (\d+) \S+ -m pytest -m gpu -q --durations=15( -n 8 --dist loadfile)?",
        command["pytest"],
    )
    interrupt_s = int(command["pytest"].split()[3])
    assert interrupt_s <= stages["pytest"][0] - 10  # its summary printed before the kill
    assert command["kernels"].endswith("benchmarks/kernels.py --fp8")  # no --sweep: the table
    assert "--modes" not in command["simple_net"]  # every mode: graph and bf16 rows
    assert "examples/simple_net.py --compare --full --graph --dtype float8" in command["compare"]
    for name in ("simple_net", "optimizer", "host_profile", "compare"):
        assert "--device gpu" in command[name], name


def test_the_device_stage_fills_the_kernel_cache_on_every_core_before_the_report():
    """The first run on an H200 timed out in four stages compiling kernels one at a time in
    each process: the device stage compiles them all at once first, into CuPy's cache."""
    parts = [" ".join(words) for words in simple_commands(dry_run()["device"][1])]
    cores = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    assert parts[1].endswith(f"-m minitorch_amp --warm-kernel-cache -j {cores}")
    assert parts[3] == "nvidia-smi" and parts[5].endswith("-m minitorch_amp --no-compile")


FAKE_PYTHON = """#!/usr/bin/env bash
case "$*" in
    *--warm-kernel-cache*) echo "gemm_fp8_sm90.cu FAILED: CompileException"; exit 1 ;;
    *"-m minitorch_amp --no-compile"*) echo "minitorch_amp environment report"; exit 0 ;;
    *) exec %s "$@" ;;
esac
"""


def test_a_kernel_that_fails_to_compile_does_not_hide_the_device_report(tmp_path):
    """The device stage runs every part: the warm-up's failure fails the stage, and the
    environment report (each kernel against its twin) still runs and reaches the summary."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "python").write_text(FAKE_PYTHON % shlex.quote(sys.executable))
    (bin_ / "nvidia-smi").write_text("#!/usr/bin/env bash\necho 'NVIDIA H200, 143771 MiB'\n")
    for tool in bin_.iterdir():
        tool.chmod(0o755)
    out = tmp_path / "out"
    done = check(
        "--stages", "device", "--out", str(out),
        PYTHON=str(bin_ / "python"), PATH=f"{bin_}:{os.environ['PATH']}",
    )  # fmt: skip
    assert done.returncode == 1
    log = (out / "device.log").read_text()
    assert "FAILED: CompileException" in log and "NVIDIA H200" in log
    assert "minitorch_amp environment report" in log


def fake_module(folder: Path, name: str, text: str) -> dict[str, str]:
    """The environment that puts a module ``name`` with ``text`` first on Python's path."""
    folder.mkdir()
    (folder / f"{name}.py").write_text(text)
    return {"PYTHONPATH": str(folder)}


@pytest.mark.parametrize(
    "xdist, tail",
    [("", " -n 8 --dist loadfile"), ("raise ImportError('not installed')", "")],
    ids=["with pytest-xdist", "without"],
)
def test_pytest_runs_in_8_processes_where_pytest_xdist_is_installed(tmp_path, xdist, tail):
    env = fake_module(tmp_path / "site", "xdist", xdist)
    done = check("--dry-run", "--stages", "pytest", **env)
    assert done.returncode == 0, done.stderr
    assert (
        re.search(r"^pytest +\d+ s  (.*)$", done.stdout, re.M)
        .group(1)
        .endswith(f"-m pytest -m gpu -q --durations=15{tail}")
    )


def test_the_docs_list_the_stages_and_budgets_the_script_has():
    """docs/benchmarks.md's stage table and its total are the script's."""
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    section = page.split("## The GPU check", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| (\d+) s \| ", section, re.MULTILINE)
    assert [(name, int(budget)) for name, budget in rows] == [
        (name, budget) for name, (budget, _) in dry_run().items()
    ]
    total = re.search(r"at most (\d+) s", check("--dry-run").stdout).group(1)
    assert f"add up to {total} s" in " ".join(section.split())


def fake_checkout(root: Path) -> Path:
    """A checkout with the check and stub scripts: kernels passes, simple_net fails,
    the example hangs, host_profile.py is absent; one gpu test passes."""
    (root / "benchmarks").mkdir(parents=True)
    (root / "examples").mkdir()
    (root / "tests").mkdir()
    shutil.copy(SCRIPT, root / "benchmarks" / "gpu_check.sh")
    stubs = {
        "benchmarks/kernels.py": """
            print("compiling the kernels")
            print("raw kernels on Fake GPU, median of 50 runs")
            print("bf16 GEMM 4096^3    TFLOP/s   700.0   760.0   0.92")
            print("FP8 GEMM (E4M3 x E4M3 -> bf16) on Fake GPU, kernel time:")
            print("| 8192x8192x8192 | 1100 | 1250 | 0.88x | 3.1e-03 |")
            print("worst ratio 0.88x: meets the target of 0.8x torch._scaled_mm")
        """,
        "benchmarks/simple_net.py": """
            import sys
            print("SimpleNet on gpu:0: width 4096")
            sys.exit("RuntimeError: the stub's step failed")
        """,
        "examples/simple_net.py": """
            import time
            print("SimpleNet on gpu:0: width 4096", flush=True)
            time.sleep(60)
        """,
        "tests/test_stub.py": """
            import pytest

            @pytest.mark.gpu
            def test_on_the_gpu():
                pass

            def test_on_the_cpu():
                pass
        """,
        "pytest.ini": """
            [pytest]
            markers = gpu: needs a GPU
        """,
    }
    for path, text in stubs.items():
        (root / path).write_text(textwrap.dedent(text).lstrip())
    return root / "benchmarks" / "gpu_check.sh"


def test_every_stage_runs_and_the_summary_says_which_failed(tmp_path):
    script = fake_checkout(tmp_path / "checkout")
    out = tmp_path / "out"
    stages = "pytest,kernels,simple_net,host_profile,compare"
    # 5 s: the stub pytest run takes about 1 s on a loaded 2-core machine, the hang all 5
    fast = {"OUT": str(out), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    # and the stub run in one process: with autoload off, xdist's -n would be refused
    fast |= fake_module(tmp_path / "site", "xdist", "raise ImportError('not here')")
    done = check("--stages", stages, "--max-stage-s", "5", cwd=tmp_path, script=script, **fast)
    assert done.returncode == 1, done.stdout + done.stderr

    summary = (out / "summary.md").read_text()
    assert summary in done.stdout  # printed at the end, too
    stage_table = summary.split("\n## ", 1)[0]  # the quoted tables follow, one section each
    rows = dict(re.findall(r"^\| (\w+) \| ([^|]+?) \|", stage_table, re.MULTILINE))
    assert rows == {
        "stage": "status",
        "pytest": "ok",
        "kernels": "ok",
        "simple_net": "FAILED (exit 1)",
        "host_profile": "skipped: not in this checkout",
        "compare": "TIMED OUT after 5 s",
    }
    assert "- result: FAILED: simple_net compare; 2 ok, 1 skipped" in summary
    assert re.search(r"^- device: \S", summary, re.MULTILINE)
    assert f"Python {sys.version.split()[0]}" in summary

    # what the summary quotes: the test counts, the table from its first line, the error
    assert re.search(r"^1 passed, 1 deselected in [0-9.]+s$", summary, re.MULTILINE)
    assert "raw kernels on Fake GPU" in summary and "bf16 GEMM 4096^3" in summary
    assert "| 8192x8192x8192 | 1100 | 1250 | 0.88x |" in summary  # the FP8 GEMM's table
    assert "worst ratio 0.88x: meets the target" in summary
    assert "compiling the kernels" not in summary
    assert "RuntimeError: the stub's step failed" in summary
    assert "The end of compare.log" in summary

    # every stage's whole output is in its log; a skipped stage leaves none
    logs = ["compare.log", "kernels.log", "pytest.log", "simple_net.log", "summary.md"]
    assert sorted(p.name for p in out.iterdir()) == logs
    assert "compiling the kernels" in (out / "kernels.log").read_text()


def test_no_failure_exits_zero(tmp_path):
    """A skipped stage is no failure; what an earlier run left of these stages is gone."""
    script = fake_checkout(tmp_path / "checkout")
    out = tmp_path / "out"
    out.mkdir()
    (out / "kernels.log").write_text("an earlier run's log")
    (out / "host_profile.log").write_text("an earlier run's log")
    done = check("--stages", "kernels,host_profile", "--out", "out", cwd=tmp_path, script=script)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "- result: no stage failed; 1 ok, 1 skipped" in (out / "summary.md").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["kernels.log", "summary.md"]
    assert "raw kernels on Fake GPU" in (out / "kernels.log").read_text()
