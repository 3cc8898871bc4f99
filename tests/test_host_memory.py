"""backend.host_memory: a step's large temporaries stay in the heap instead of faulting in anew."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# Ten 8 MB arrays alive at once, then all freed: more than glibc's trim threshold is free at the
# heap's top, so with its defaults the next round's arrays are faulted in page by page again.
CHURN = """
import resource, numpy as np, minitorch_amp
from minitorch_amp.backend import host_memory
def churn():
    arrays = [np.ones(2_000_000, np.float32) for _ in range(10)]
    del arrays
churn(); churn()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
churn()
print(host_memory.HEAP_TUNED, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")


def churn_faults(setting: str | None) -> tuple[str, int]:
    env = {k: v for k, v in os.environ.items() if k != "MINITORCH_AMP_MALLOC"}
    if setting is not None:
        env["MINITORCH_AMP_MALLOC"] = setting
    out = subprocess.run(
        [sys.executable, "-c", CHURN], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    tuned, faults = out.stdout.split()
    return tuned, int(faults)


@linux_only
def test_freed_temporaries_are_reused_without_page_faults():
    tuned, faults = churn_faults(None)
    assert tuned == "True"
    assert faults < 500, f"{faults} page faults for 80 MB of reused temporaries"


@linux_only
def test_the_system_setting_leaves_glibc_alone_and_then_the_pages_fault_again():
    tuned, faults = churn_faults("system")
    assert tuned == "False"
    assert faults > 2_000  # 80 MB in pages (NumPy asks for huge ones): what the default removes


def test_an_unknown_setting_is_refused_with_the_accepted_ones():
    env = dict(os.environ, MINITORCH_AMP_MALLOC="big")
    out = subprocess.run(
        [sys.executable, "-c", "import minitorch_amp"], capture_output=True, text=True, env=env
    )
    assert out.returncode != 0
    assert "MINITORCH_AMP_MALLOC='big': use 'heap' (the default) or 'system'" in out.stderr
