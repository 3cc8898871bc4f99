"""float16 <-> float32 on the CPU: the compiled ``csrc/float16.c`` against NumPy's ``astype``.

One row per (direction, size, values): the µs of one conversion by each, timed taking turns
in one process (``timing.interleave_rounds``), and their paired ratio. The sizes are those of
the tiny AMP step's conversions (512: an activation, 4096: a 64 x 64 weight, 12,480: the
three layers' parameters) and of a large tensor; "small" values are float32 values that round
into float16's subnormals, where NumPy takes a slow path (unscaled gradients land there).

    python benchmarks/float16_convert.py            # ~20 s on 2 CPU cores
    python benchmarks/float16_convert.py --sizes 4096 --rounds 40

Both give the same bits (``tests/test_float16_rounding.py``); without a C compiler there is
nothing to compare, and the script says why.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout

from timing import interleave_rounds, paired_ratio

from minitorch_amp.backend import host_c, host_float16


def rows(sizes, rounds: int):
    c = host_float16.compiled()
    rng = np.random.default_rng(0)
    for direction in ("float32 -> float16", "float16 -> float32"):
        for size in sizes:
            for values in ("normal", "small") if direction.startswith("float32") else ("normal",):
                x = rng.standard_normal(size).astype(np.float32)
                if values == "small":
                    x *= np.float32(1e-6)
                if direction.startswith("float32"):
                    out, convert, target = np.empty(size, np.float16), c.from_float32, np.float16
                else:
                    x = x.astype(np.float16)
                    out, convert, target = np.empty(size, np.float32), c.to_float32, np.float32
                calls = max(1, 200_000 // size)  # per timed step: ~1 ms of NumPy or more

                def ours(x=x, out=out, convert=convert, calls=calls):
                    for _ in range(calls):
                        convert(x, np.empty_like(out))  # (a new array, as astype makes)

                def numpy(x=x, target=target, calls=calls):
                    for _ in range(calls):
                        x.astype(target)

                runs = {"C": (ours, lambda: None), "astype": (numpy, lambda: None)}
                medians, turns = interleave_rounds(runs, rounds, 2, block=1, warmup_s=0.0)
                yield (
                    direction,
                    size,
                    values,
                    medians["C"] / calls * 1e6,
                    medians["astype"] / calls * 1e6,
                    paired_ratio(turns, "astype", "C"),
                )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 4096, 12480, 1 << 20])
    parser.add_argument("--rounds", type=int, default=20, help="timed turns of each")
    args = parser.parse_args(argv)
    if host_float16.compiled() is None:
        raise SystemExit(f"the C file is not in use here: {host_c.status('float16')}")
    print(f"cpu float16: {host_c.status('float16')}")
    print("| conversion | elements | values | C µs | astype µs | astype / C |")
    print("|---|---|---|---|---|---|")
    for direction, size, values, ours, numpy, ratio in rows(args.sizes, args.rounds):
        print(f"| {direction} | {size} | {values} | {ours:.2f} | {numpy:.2f} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
