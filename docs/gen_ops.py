"""Write docs/ops.md from the op table: every op, its family and AMP category.

python docs/gen_ops.py          # rewrite docs/ops.md
python docs/gen_ops.py --check  # exit 1 if docs/ops.md is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minitorch_amp.amp import op_lists  # noqa: E402
from minitorch_amp.autograd import OP_TABLE  # noqa: E402

TARGET = ROOT / "docs" / "ops.md"
AMP_DOC = ROOT / "docs" / "levels.md"
BEGIN, END = "<!-- op-lists:begin -->", "<!-- op-lists:end -->"


def render() -> str:
    lines = [
        "# The op table",
        "",
        "Generated from `minitorch_amp.autograd.OP_TABLE` by `python docs/gen_ops.py`; "
        "do not",
        "edit by hand. Every op has its forward and backward side by side in the file "
        "named.",
        "",
        f"{len(OP_TABLE)} ops.",
        "",
        "| op | class | file | AMP category | inputs AMP casts | what it computes |",
        "|---|---|---|---|---|---|",
    ]
    for name in sorted(OP_TABLE):
        op = OP_TABLE[name]
        module = op.__module__.replace(".", "/") + ".py"
        summary = (op.__doc__ or "").strip().splitlines()
        summary = summary[0].replace("|", "\\|") if summary else ""
        casts = (
            "all floating"
            if op.amp_inputs is None
            else ", ".join(f"#{i}" for i in op.amp_inputs)
        )
        if op.amp_bias is not None:
            casts += f"; #{op.amp_bias} by the add's rule"
        lines.append(
            f"| `{name}` | `{op.__name__}` | `{module}` | {op.amp} | {casts} "
            f"| {summary} |"
        )
    return "\n".join(lines) + "\n"


def _names(ops) -> str:
    return ", ".join(f"`{n}`" for n in sorted(ops)) or "(none)"


def render_amp_lists() -> str:
    """The per-level lists, as a Markdown table, from op_lists.white_ops/black_ops."""
    never = sorted(n for n, op in OP_TABLE.items() if op.amp == "none")
    no_kernel = op_lists.no_kernel_ops("float16")
    lines = [
        BEGIN,
        "| level | float16 (white) | float32 (black) | follow the inputs (promote) |",
        "|---|---|---|---|",
    ]
    for level in ("OD", "O1", "O2"):
        white, black = op_lists.white_ops(level), op_lists.black_ops(level)
        if level == "OD":
            black_text, gray = "every other op", "(none)"
        else:
            black_text, gray = (
                _names(black),
                _names(set(OP_TABLE) - white - black - set(never) - no_kernel),
            )
        lines.append(f"| {level} | {_names(white)} | {black_text} | {gray} |")
    lines += [
        "",
        f"Never cast (casts, comparisons, integer results): {_names(never)}.",
        "",
        "No float16 kernel in Paddle, so float32 at every level, even when listed "
        f"white: {_names(no_kernel)}.",
        END,
    ]
    return "\n".join(lines)


BF16_BEGIN, BF16_END = "<!-- op-lists-bf16:begin -->", "<!-- op-lists-bf16:end -->"


def render_bf16_lists() -> str:
    """The per-level lists of auto_cast(dtype='bfloat16'), from op_lists.white_ops
    and op_lists.black_ops."""
    never = {n for n, op in OP_TABLE.items() if op.amp == "none"}
    no_kernel = op_lists.no_kernel_ops("bfloat16")
    lines = [
        BF16_BEGIN,
        "| level | bfloat16 (white) | float32 (black) | follow the inputs (promote) |",
        "|---|---|---|---|",
    ]
    for level in ("OD", "O1", "O2"):
        white = op_lists.white_ops(level, "bfloat16")
        black = op_lists.black_ops(level, "bfloat16")
        if level == "OD":
            black_text, gray = "every other op", "(none)"
        else:
            black_text = _names(black)
            gray = _names(set(OP_TABLE) - white - black - never - no_kernel)
        lines.append(f"| {level} | {_names(white)} | {black_text} | {gray} |")
    lines += [
        "",
        "No bfloat16 kernel in Paddle, so float32 at every level: "
        f"{_names(no_kernel)}.",
        BF16_END,
    ]
    return "\n".join(lines)


def _replace(current: str, begin: str, end: str, block: str) -> str:
    if begin not in current or end not in current:
        raise SystemExit(f"docs/levels.md needs the markers {begin} and {end}")
    head, rest = current.split(begin, 1)
    _, tail = rest.split(end, 1)
    return head + block + tail


def render_amp_doc(current: str) -> str:
    current = _replace(current, BEGIN, END, render_amp_lists())
    return _replace(current, BF16_BEGIN, BF16_END, render_bf16_lists())


if __name__ == "__main__":
    outputs = {TARGET: render(), AMP_DOC: render_amp_doc(AMP_DOC.read_text())}
    stale = [
        p
        for p, text in outputs.items()
        if (p.read_text() if p.exists() else "") != text
    ]
    if "--check" in sys.argv:
        if stale:
            names = ", ".join(str(p.relative_to(ROOT)) for p in stale)
            print(f"{names} out of date: run python docs/gen_ops.py", file=sys.stderr)
            sys.exit(1)
    else:
        for path, text in outputs.items():
            path.write_text(text)
        print(
            f"wrote docs/ops.md ({len(OP_TABLE)} ops) and the lists in docs/levels.md"
        )
