"""The mutants ``tools/mutants.py`` plants: one module per area, each with a ``MUTANTS`` list.

A mutant is one search/replace in one file, a bug a reviewer would plant to see whether the
tests can fail. ``all_mutants()`` gathers every module's list in the order below.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

# module names under tools/mutant_sets, in listing order
SETS = (
    "core",
    "data_and_pooling",
    "state_and_scaler",
    "nn_functions",
    "attention",
    "tensor_ops",
    "amp_behaviours",
    "gelu_lr_io",
    "autograd_versions",
    "autograd_paddle_forms",
    "checkpoints",
    "gpt",
    "newcomer_docs",
    "newcomer_code",
    "step_speed",
    "docs_numbers",
    "device_errors",
    "model_properties",
    "fp8_kernels",
    "environment_report",
    "fp8_training",
    "gpu_check_fp8",
    "model_properties_fp8",
    "fp8_checkpoint",
    "docs_precision_numbers",
    "fewer_launches",
    "gpu_runs",
    "fp8_scale",
    "squared_error",
    "cross_entropy",
    "review_fixes",
    "write_versions_and_reviews",
    "review_ops_nov28",
    "review_tensor_writes_nov28",
    "review_nn_nov28",
    "review_optimizer_nov28",
    "review_testing_kit_nov28",
    "review_gpu_host_and_scripts",
    "review_debugging_nov28",
    "review_creation_nov28",
    "review_io_nov28",
    "review_device_nov28",
    "review_nov28_night",
    "review_lr_nov28_night",
    "review_graphs_nov28_night",
    "review_transformer_nov28_night",
    "review_clip_summary_nov28_night",
    "review_torch_spellings_nov28_night",
)


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # relative to the repository root
    search: str  # must occur exactly once in the file
    replace: str
    tests: tuple[str, ...]  # pytest node ids or files that must fail
    bug: str  # what the mutant does, in one line


def lines(*text: str) -> str:
    """Source lines, each ending in a newline (keeps long search texts readable)."""
    return "".join(f"{line}\n" for line in text)


def all_mutants() -> list[Mutant]:
    """Every set's mutants, in the order of ``SETS``."""
    found: list[Mutant] = []
    for name in SETS:
        found += importlib.import_module(f"mutant_sets.{name}").MUTANTS
    return found
