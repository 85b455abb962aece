"""House style of the notebooks that can be checked mechanically (GUIDE.md, section 3).

Code lines in notebooks stay within 88 characters: the rendered book shows about that many before a
code cell scrolls sideways (the package itself may use 120, see pyproject.toml's ruff settings).
Checked for every chapter, every assignment source and every generated student release. Fast: reads the
.ipynb files only.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_CODE_LINE = 88
NOTEBOOKS = sorted(
    path
    for pattern in ("notebooks/*.ipynb", "notebooks/assignments/source/**/*.ipynb",
                    "notebooks/assignments/release/**/*.ipynb")
    for path in ROOT.glob(pattern)
    if ".ipynb_checkpoints" not in path.parts
)


def long_code_lines(path: Path, limit: int = MAX_CODE_LINE) -> list[str]:
    """One readable entry per code line longer than `limit`: cell number (0-based, as nbval counts),
    line number in the cell (1-based), length, and the start of the line."""
    notebook = nbformat.read(path, as_version=4)
    found = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        for number, line in enumerate(cell.source.splitlines(), start=1):
            if len(line) > limit:
                found.append(f"cell {index}, line {number} ({len(line)} chars): {line[:limit]}…")
    return found


def test_there_are_notebooks_to_check() -> None:
    assert any(path.parent == ROOT / "notebooks" for path in NOTEBOOKS), "no chapter notebooks found"
    assert any("source" in path.parts for path in NOTEBOOKS), "no assignment sources found"


def test_long_lines_are_found_and_located(tmp_path: Path) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell("x" * 200),  # prose wraps in the book: not a code line
        nbformat.v4.new_code_cell("ok = 1\n" + "y = " + "1" * (MAX_CODE_LINE - 4)),  # exactly at the limit
        nbformat.v4.new_code_cell("a = 1\nb = 2\n" + "z = " + "2" * (MAX_CODE_LINE - 3)),  # one over
    ]
    path = tmp_path / "example.ipynb"
    nbformat.write(notebook, path)
    assert long_code_lines(path) == [f"cell 2, line 3 ({MAX_CODE_LINE + 1} chars): z = {'2' * (MAX_CODE_LINE - 4)}…"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.relative_to(ROOT).as_posix() for path in NOTEBOOKS])
def test_notebook_code_lines_fit_the_page(path: Path) -> None:
    found = long_code_lines(path)
    assert not found, (
        f"{path.relative_to(ROOT).as_posix()}: {len(found)} code line(s) longer than {MAX_CODE_LINE} "
        "characters (the rendered book scrolls them sideways); break them:\n" + "\n".join(found)
    )
