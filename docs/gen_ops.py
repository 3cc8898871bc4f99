"""Write docs/ops.md from the op table: every op, its family and AMP category.

python docs/gen_ops.py          # rewrite docs/ops.md
python docs/gen_ops.py --check  # exit 1 if docs/ops.md is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minitorch_amp.autograd import OP_TABLE  # noqa: E402

TARGET = ROOT / "docs" / "ops.md"


def render() -> str:
    lines = [
        "# The op table",
        "",
        "Generated from `minitorch_amp.autograd.OP_TABLE` by `python docs/gen_ops.py`; do not",
        "edit by hand. Every op has its forward and backward side by side in the file named.",
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
            "all floating" if op.amp_inputs is None else ", ".join(f"#{i}" for i in op.amp_inputs)
        )
        lines.append(
            f"| `{name}` | `{op.__name__}` | `{module}` | {op.amp} | {casts} | {summary} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    text = render()
    if "--check" in sys.argv:
        current = TARGET.read_text() if TARGET.exists() else ""
        if current != text:
            print("docs/ops.md is out of date: run python docs/gen_ops.py", file=sys.stderr)
            sys.exit(1)
    else:
        TARGET.write_text(text)
        print(f"wrote {TARGET.relative_to(ROOT)} ({len(OP_TABLE)} ops)")
