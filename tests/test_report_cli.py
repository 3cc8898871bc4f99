"""``python -m minitorch_amp`` as a command: it talks while it works, and says its options.

The report's header comes at once and each kernel's line as that kernel is done (PyTorch's
``collect_env`` answers in seconds; ours compiles for minutes without a GPU); ``--help``
lists every option with its default.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


# ---- the command talks while it works -------------------------------------------------------
# The child's NVRTC is a fake that compiles kernel i only once the parent has read every line
# printed before it (the parent says so with a file named i): a header or a kernel line left
# in the child's buffer stops the exchange, and the parent's read times out.
SLOW_REPORT = """
import sys, time
from pathlib import Path
from minitorch_amp.backend import nvrtc
from minitorch_amp.__main__ import main

said, calls = Path(sys.argv[1]), []


def compile_source(source, name, options=(), names=(), arch="compute_80"):
    deadline = time.monotonic() + 10
    while not (said / str(len(calls))).exists():
        if time.monotonic() > deadline:
            raise RuntimeError("the lines before this kernel were not read: not flushed?")
        time.sleep(0.01)
    calls.append(name)
    return {"ptx": name, "log": "", "lowered": {n: n for n in names}}


nvrtc.compile_source, nvrtc.version = compile_source, lambda: (12, 8)
nvrtc.include_dir = lambda: Path("/cuda/include")
sys.exit(main(["--no-cache"]))
"""


def test_the_header_comes_at_once_and_each_kernel_line_as_it_is_compiled(tmp_path):
    import queue
    import threading

    from minitorch_amp.backend import kernels

    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # a pipe buffers
    env.update(PYTHONPATH=str(ROOT), MINITORCH_AMP_DEVICE="cpu")
    child = subprocess.Popen(
        [sys.executable, "-c", SLOW_REPORT, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in child.stdout], daemon=True).start()
    try:
        assert lines.get(timeout=60) == "minitorch_amp environment report\n"
        while not (line := lines.get(timeout=20)).startswith("kernels (cuda/*.cu)"):
            assert ".cu " not in line  # no kernel before its heading
        for i, file in enumerate(kernels.REGISTRY):
            (tmp_path / str(i)).touch()  # the parent has read everything before kernel i
            row = lines.get(timeout=20)  # read before kernel i + 1 compiles
            assert row.split()[0] == file and "compiled in" in row, row
        (tmp_path / str(len(kernels.REGISTRY))).touch()
        assert child.wait(timeout=60) == 0
    finally:
        child.kill()
        child.wait()


def test_help_lists_every_option_with_its_default(capsys, monkeypatch, tmp_path):
    from minitorch_amp.__main__ import main

    monkeypatch.setenv("MINITORCH_AMP_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "400")  # argparse wraps to the terminal, at hyphens too
    with pytest.raises(SystemExit) as stopped:
        main(["--help"])
    assert stopped.value.code == 0
    text = capsys.readouterr().out
    for option in ("--no-compile", "--no-cache", "--cache-dir DIR", "--warm-kernel-cache", "-j N"):
        assert option in text
    assert text.count("(default: False)") == 3  # the three switches
    assert "(default: None)" in text  # -j: one process per CPU core
    assert f"(default: {tmp_path})" in text


def test_no_cache_and_cache_dir_choose_the_cache_the_kernels_use(monkeypatch, tmp_path):
    from minitorch_amp import __main__

    used = []

    def check_kernels(compile_without_gpu, cache):
        used.append(cache.directory)
        return "kernels (cuda/*.cu):", iter([])

    monkeypatch.setattr(__main__.kernel_check, "check_kernels", check_kernels)
    monkeypatch.setattr(__main__, "run_check", lambda: None)
    monkeypatch.setenv("MINITORCH_AMP_KERNEL_CACHE", str(tmp_path / "env"))
    assert __main__.main([]) == 0
    assert __main__.main(["--cache-dir", str(tmp_path / "flag")]) == 0
    assert __main__.main(["--no-cache"]) == 0
    assert used == [tmp_path / "env", tmp_path / "flag", None]
