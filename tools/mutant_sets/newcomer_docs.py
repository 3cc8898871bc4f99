"""Issue 27: anchors validated, install lines that run, every example listed."""

from __future__ import annotations

from mutant_sets import Mutant

INSTALL = "tests/test_install_lines.py"
LINKS = "tests/test_docs_links.py"
LISTED = "tests/test_examples_listed.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "mkdocs-anchors-only-info",
        "mkdocs.yml",
        "  anchors: warn\n",
        "  anchors: info\n",
        (f"{LINKS}::test_a_strict_build_fails_on_a_broken_link_or_anchor",),
        "a link to a missing anchor is reported at INFO, so mkdocs build --strict passes it",
    ),
    Mutant(
        "benchmarks-links-a-stale-amp-anchor",
        "docs/benchmarks.md",
        "amp.md#7-what-it-costs-on-a-cpu",
        "amp.md#6-what-it-costs-on-a-cpu",
        ("tests/test_docs.py::test_the_docs_site_builds_strictly",),
        "benchmarks.md links to amp.md's old section 6 anchor, which no heading makes",
    ),
    Mutant(
        "device-error-names-an-index-install",
        "minitorch_amp/backend/device.py",
        '`python -m pip install -e ".[cuda12]"`',
        "`pip install minitorch_amp[cuda12]`",
        (
            f"{INSTALL}::test_a_pip_install_line_installs_this_checkout_editable_with_defined_extras",
        ),
        "MINITORCH_AMP_DEVICE=gpu's error says pip install minitorch_amp[cuda12]: on no index",
    ),
    Mutant(
        "launch-error-names-an-undefined-extra",
        "minitorch_amp/distributed/launch.py",
        "python -m pip install -e '.[dist]' ",
        "python -m pip install -e '.[mpi]' ",
        (
            f"{INSTALL}::test_a_pip_install_line_installs_this_checkout_editable_with_defined_extras",
        ),
        "the missing-mpiexec error names an extra pyproject.toml does not define",
    ),
    Mutant(
        "readme-clone-line-with-a-placeholder",
        "README.md",
        "```bash\npython3 -m venv .venv && . .venv/bin/activate\n```\n",
        "```bash\ngit clone <this repository's URL> minitorch_amp && cd minitorch_amp\n"
        "python3 -m venv .venv && . .venv/bin/activate\n```\n",
        (f"{INSTALL}::test_every_bash_block_of_a_page_is_valid_shell",),
        "the README's clone line has a <placeholder>: bash stops at unexpected EOF",
    ),
    Mutant(
        "plot-bf16-missing-from-the-examples-page",
        "docs/examples.md",
        "| `plot_bf16.py` |",
        "| plot_bf16.py |",
        (f"{LISTED}::test_an_example_has_a_row_in_the_examples_page",),
        "docs/examples.md's table has no row for examples/plot_bf16.py",
    ),
]
