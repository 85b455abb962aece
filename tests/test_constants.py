"""vitedu.constants: the registry's dataset numbers, without the datasets' code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_the_registry_loads_no_data_loader():
    code = ("import sys, vitedu.models; print(' '.join(sorted(m for m in sys.modules if m.startswith('vitedu'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            cwd=Path(__file__).resolve().parents[1]).stdout.split()
    assert "vitedu.constants" in loaded and "vitedu.models" in loaded
    data_rooms = {f"vitedu.{m}" for m in ("augment", "cifar", "cluttered", "data", "digits", "imagefolder", "loaders")}
    assert not data_rooms & set(loaded)

