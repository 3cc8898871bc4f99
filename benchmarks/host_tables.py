"""The tables ``host_profile.py`` prints (``gpt_step.py --profile`` too): the step with and
without instrumentation, its parts, its ops and phases, its functions. Each takes the
:class:`host_profile.ModeProfile` s of a run, by mode."""

from __future__ import annotations

from host_parts import LAUNCH, OTHER, PARTS


def _us(x: float) -> str:
    return f"{x:.1f}" if abs(x) < 100 else f"{x:.0f}"


def _calls(n: float) -> str:
    """Calls per step: a whole number, or one decimal when not every step makes them all."""
    return f"{n:.0f}" if abs(n - round(n)) < 0.05 else f"{n:.1f}"


def _row(*cells) -> None:
    print("| " + " | ".join(str(c) for c in cells) + " |")


def print_steps(results: dict) -> None:
    """The step with and without instrumentation, and the instrumentation's cost."""
    rs = list(results.values())
    _row("µs per step", *results)
    _row(*["---"] * (len(rs) + 1))
    _row("uninstrumented, median", *(_us(r.plain_median) for r in rs))
    _row("uninstrumented, mean of the middle half", *(_us(r.plain_mean) for r in rs))
    _row("instrumented", *(_us(r.raw) for r in rs))
    _row("wrapped calls", *(f"{r.wrapped_calls:.0f}" for r in rs))
    _row("µs per wrapped call, empty function", *(f"{r.loop_cost.per_call * 1e6:.2f}" for r in rs))
    _row("µs per wrapped call, in the step", *(f"{r.cost.per_call * 1e6:.2f}" for r in rs))
    _row("instrumentation: calls x µs in the step", *(_us(r.raw - r.total) for r in rs))
    _row("instrumented less instrumentation: the parts' total", *(_us(r.total) for r in rs))
    _row(
        "the total against the uninstrumented mean (the method's error)",
        *(f"{100 * (r.total / r.plain_mean - 1):+.0f}%" for r in rs),
    )
    if rs[0].gpu is not None:
        _row("GPU time (CUDA events)", *(_us(r.gpu) for r in rs))
        launches = (r.functions.get(LAUNCH, {}).get("calls", 0) for r in rs)
        _row("raw kernel launches (kernels.launch)", *(f"{n:.0f}" for n in launches))
        _row("GPU activities (torch.profiler)", *(r.activities or "n/a" for r in rs))


def print_parts(results: dict) -> None:
    """µs per step and % of the step of every part, the modes side by side."""
    _row("part", *(f"{m} {unit}" for m in results for unit in ("µs", "%")))
    _row(*["---"] * (2 * len(results) + 1))
    for part in (*PARTS, OTHER, "total"):
        cells = []
        for r in results.values():
            us = r.total if part == "total" else r.parts[part]
            cells += [_us(us), f"{100 * us / r.total:.1f}"]
        _row(part, *cells)


def print_ops(mode: str, r, top: int) -> None:
    """The ops and phases by host µs per step: calls, µs per call, the parts per call."""
    rows = sorted(r.ops.items(), key=lambda kv: -sum(v for k, v in kv[1].items() if k != "calls"))
    rows = rows[:top]
    parts = [p for p in PARTS if any(abs(row.get(p, 0.0)) >= 0.05 for _, row in rows)]
    print(f"\n{mode}: the top {len(rows)} ops and phases by host µs per step")
    _row("op", "calls", "µs per step", "µs per call", *(f"{p} µs/call" for p in parts))
    _row(*["---"] * (len(parts) + 4))
    for op, row in rows:
        calls = row.get("calls") or 1.0
        us = sum(v for k, v in row.items() if k != "calls")
        split = [_us(row.get(p, 0.0) / calls) for p in parts]
        _row(op, _calls(calls), _us(us), _us(us / calls), *split)


def print_functions(results: dict, top: int) -> None:
    """The wrapped functions by own µs per step (the most in any mode): calls, µs per call."""
    names = {f for r in results.values() for f in r.functions}
    most = {f: max(r.functions.get(f, {}).get("us", 0.0) for r in results.values()) for f in names}
    print(f"\nthe top {top} functions by own µs per step (calls per step, µs per call)")
    _row("function", "part", *(f"{m} {unit}" for m in results for unit in ("calls", "µs/call")))
    _row(*["---"] * (2 * len(results) + 2))
    for f in sorted(names, key=lambda f: -most[f])[:top]:
        part = next(r.functions[f]["part"] for r in results.values() if f in r.functions)
        cells = []
        for r in results.values():
            row = r.functions.get(f, {"calls": 0.0, "us": 0.0})
            cells += [_calls(row["calls"]), _us(row["us"] / row["calls"]) if row["calls"] else ""]
        _row(f"`{f}`", part, *cells)
