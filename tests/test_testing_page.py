"""book/testing.md: the mutation-testing table adds up, row by row and in its total. Its numbers are
measurements (make mutation); what can be checked without re-running them is that
they are consistent with each other."""

from __future__ import annotations

import re

import pytest
from book_pages import ROOT

PAGE = ROOT / "book" / "testing.md"


def _number(cell: str) -> int:
    return int(re.match(r"[*\s]*([\d,]+)", cell).group(1).replace(",", ""))


def _score(cell: str) -> float:
    return float(re.match(r"[*\s]*([\d.]+) %", cell).group(1))


def _table() -> tuple[dict[str, list[str]], list[str]]:
    lines = [line for line in PAGE.read_text().splitlines() if line.startswith("| ")]
    rows = [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines]
    header = next(i for i, row in enumerate(rows) if row[:2] == ["module", "mutants"])
    body = [row for row in rows[header + 1:] if row[0] != "---"]
    modules = {row[0]: row for row in body if not row[0].startswith("**total")}
    total = next(row for row in body if row[0].startswith("**total"))
    return modules, total


def _adds_up(row: list[str]) -> None:
    mutants, killed, survived, equivalent = (_number(cell) for cell in row[1:5])
    assert mutants == killed + survived + equivalent, f"{row[0]}: {mutants} != {killed} + {survived} + {equivalent}"
    assert _score(row[5]) == pytest.approx(100 * killed / (killed + survived), abs=0.05), row[0]


def test_every_row_adds_up():
    modules, _ = _table()
    assert len(modules) >= 10
    for row in modules.values():
        _adds_up(row)


def test_total_is_the_sum_of_the_rows_and_counts_the_configured_modules():
    modules, total = _table()
    for column in range(1, 5):
        assert _number(total[column]) == sum(_number(row[column]) for row in modules.values()), total[0]
    _adds_up(total)
    assert f"{len(modules)} modules" in total[0]


def test_a_row_that_does_not_add_up_is_caught():
    with pytest.raises(AssertionError):
        _adds_up(["x", "10", "7", "1", "1", "87.5 %"])  # 7 + 1 + 1 = 9
    with pytest.raises(AssertionError):
        _adds_up(["x", "10", "8", "1", "1", "90.0 %"])  # 8 / 9 is 88.9 %
