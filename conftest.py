"""What `pytest --nbval`, run from the repository root with no other flag, checks.

pyproject.toml's `testpaths` is ["notebooks", "tests"], so plain `pytest` runs the unit and book tests,
and `pytest --nbval` also re-executes every chapter notebook and every assignment *source* notebook and
compares each cell's output with the stored one. For that run this file supplies what nbval would
otherwise need on the command line:
- `--nbval-current-env`: the kernel is this environment's Python (the one with vitedu and its pins), not
  whatever kernel name a notebook happens to store;
- `--nbval-sanitize-with tests/nbval_sanitize.cfg`: memory addresses and figure sizes are masked;
- under pytest-xdist (`make test` runs two processes) each kernel gets its share of the cores
  (OMP_NUM_THREADS, read by torch when the kernel imports it): two kernels of two threads each on two
  cores make tiny operations up to 60 times slower while their threads wait for each other;
- a kernel may take up to 5 minutes to start (nbval's default is 60 s), so a busy machine, e.g. two
  pytest-xdist processes starting kernels beside other work, does not fail a notebook before it ran.
Flags given on the command line win (e.g. `--nbval-kernel-name`, another sanitize file).

The student releases (notebooks/assignments/release) are generated from the sources with the
solutions removed, so they cannot pass nbval: tests/test_assignments.py checks them instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
SANITIZE = ROOT / "tests" / "nbval_sanitize.cfg"

# Relative to this file. _build/jupyter_execute holds copies of the notebooks made by the book build.
collect_ignore = ["notebooks/assignments/release", "_build"]


@pytest.hookimpl(trylast=True)  # after nbval's own pytest_configure has resolved its deprecated aliases
def pytest_configure(config: pytest.Config) -> None:
    option = config.option
    # pytest-xdist's loadscope would reorder the scopes by their number of tests (a notebook of 30 quick cells
    # before a browser test of 20 slow pages); keep the order of pytest_collection_modifyitems below instead.
    if hasattr(option, "loadscopereorder"):
        option.loadscopereorder = False
    if not (getattr(option, "nbval", False) or getattr(option, "nbval_lax", False)):
        return
    if option.nbval_sanitize_with is None:
        option.nbval_sanitize_with = str(SANITIZE)
    if not option.nbval_kernel_name:
        option.nbval_current_env = True
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))
    if int(option.nbval_kernel_startup_timeout) == 60:  # nbval's default, not given on the command line
        option.nbval_kernel_startup_timeout = 300


def _rank(item: pytest.Item) -> int:
    """0: the rendered-book tests (Chromium opens every page); 1: the notebooks and the modules with slow tests;
    2: the rest (many short tests)."""
    if item.get_closest_marker("book"):
        return 0
    if item.path.suffix == ".ipynb" or item.get_closest_marker("slow"):
        return 1
    return 2


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long scopes (a test module, a notebook) run first, so that under pytest-xdist (`make test`: two
    processes, --dist loadscope) both processes end on short test files together, rather than one running a
    long notebook alone at the end. A scope keeps its items in their order (a notebook's cells, above all)."""
    scope_rank: dict[str, int] = {}
    for item in items:
        scope = item.nodeid.split("::", 1)[0]
        scope_rank[scope] = min(scope_rank.get(scope, 2), _rank(item))
    items.sort(key=lambda item: scope_rank[item.nodeid.split("::", 1)[0]])  # stable: order within a rank kept

