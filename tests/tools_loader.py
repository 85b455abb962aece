"""Import a script of tools/ or benchmarks/ (not packages: they are run as ``python tools/<name>.py``) for a test."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
TOOLS, BENCHMARKS = ROOT / "tools", ROOT / "benchmarks"


def _import(key: str, path: Path) -> ModuleType:
    """The module of ``path``, imported once and cached in ``sys.modules`` under ``key``."""
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module  # before running it: a dataclass in the script looks its module up there
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[key]
            raise
    return sys.modules[key]


def load_tool(name: str) -> ModuleType:
    """The module ``tools/<name>.py``, cached under ``tools_<name>``."""
    return _import(f"tools_{name}", TOOLS / f"{name}.py")


def load_benchmark(name: str) -> ModuleType:
    """The module ``benchmarks/<name>.py`` under its own name, with benchmarks/ on the path as when it runs as a
    script (so it can import its neighbours, e.g. honest_study imports honest_arms)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return _import(name, BENCHMARKS / f"{name}.py")
