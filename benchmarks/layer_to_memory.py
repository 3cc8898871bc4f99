"""Peak device memory of converting an fp32 model to fp16, three ways, measured side by side.

* whole-model: every fp16 copy is made first, then swapped in (converting a state dict):
  the device holds the model and a full fp16 copy.
* ``to``, device has room: ``Layer.to`` with room to spare keeps every fp32 original until
  all fp16 copies exist (so that a failure can put the very same arrays back): the model and
  a full fp16 copy, as the whole-model way. With less room it converts tensor by tensor,
  peaking at the model plus one fp16 tensor.
* checked, tight budget: ``Layer.to`` with the device budget set to the model's own size:
  each cast that does not fit goes through the host, so the peak never exceeds the model.

Runs on the CPU with the device budget of ``minitorch_amp.device.set_memory_limit``.

    python benchmarks/layer_to_memory.py
"""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import minitorch_amp as mt
from minitorch_amp import device, nn
from minitorch_amp.utils.progress import progress, write


def build(width: int, depth: int):
    mt.seed(0)
    return nn.Sequential(*[nn.Linear(width, width) for _ in range(depth)])


def peak_of(convert, width: int, depth: int, tight: bool = False) -> tuple[int, int, int]:
    """(parameters, model bytes, peak bytes above what was allocated before the model)."""
    gc.collect()
    base = device.memory_allocated()
    model = build(width, depth)
    params = sum(p.size for p in model.parameters())
    model_bytes = device.memory_allocated() - base
    if tight:
        device.set_memory_limit(device.memory_allocated())
    device.reset_max_memory_allocated()
    try:
        convert(model)
    finally:
        device.set_memory_limit(None)
    return params, model_bytes, device.max_memory_allocated() - base


def whole_model(model) -> None:
    params = model.parameters()
    copies = [p.astype("float16").detach() for p in params]  # every fp16 copy, on the device
    for p, c in zip(params, copies):
        p._data = c._data


def per_tensor(model) -> None:
    model.to(dtype="float16")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)  # no options: --help, and a typo is an error, not a run
    mt.set_device("cpu")
    mib = 2**20
    print("peak device memory converting an fp32 model to fp16 (MiB above the start)")
    print(
        f"{'layers x width':<16}{'params':>12}{'fp32 model':>12}"
        f"{'whole-model':>13}{'to, room':>12}{'checked, tight':>16}"
    )
    configs = [(256, 4), (1024, 4), (1024, 12), (2048, 6)]
    for width, depth in progress(configs, desc="models"):
        params, model_bytes, whole = peak_of(whole_model, width, depth)
        _, _, direct = peak_of(per_tensor, width, depth)
        _, _, checked = peak_of(per_tensor, width, depth, tight=True)
        write(
            f"{f'{depth} x {width}':<16}{params:>12,}{model_bytes / mib:>12.2f}"
            f"{whole / mib:>13.2f}{direct / mib:>12.2f}{checked / mib:>16.2f}"
        )


if __name__ == "__main__":
    main()
