"""What the controlled comparisons (``data_hunger.py``, chapter 7; ``variants.py``, chapter 9) share: the key
of a run, the choice on validation, and the command line that resumes from the runs already stored."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any


def key(arm: str, config: Any) -> str:
    """A run's identity: its arm and every field of its TrainConfig."""
    return arm + json.dumps(asdict(config), sort_keys=True)


def pick(records: list[dict]) -> dict:
    """Highest validation accuracy; ties broken by lower validation loss. Reads no test number."""
    return max(records, key=lambda r: (r["val_acc"], -r["val_loss"]))


def command_line(description: str, out: Path, fractions: tuple, seeds: tuple) -> tuple[argparse.Namespace, dict]:
    """Parse --workers/--out/--fresh/--fractions/--seeds; return the arguments and the runs stored in --out
    (by key), which are not run again unless --fresh."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--workers", type=int, default=1, help="processes in parallel (1 thread each)")
    p.add_argument("--out", type=Path, default=out)
    p.add_argument("--fresh", action="store_true", help="ignore runs already saved in --out")
    p.add_argument("--fractions", type=float, nargs="+", default=fractions, help="training-set fractions")
    p.add_argument("--seeds", type=int, nargs="+", default=seeds)
    args = p.parse_args()
    args.fractions, args.seeds = tuple(args.fractions), tuple(args.seeds)
    done: dict = {}
    if args.out.exists() and not args.fresh:
        done = {r["key"]: r for r in json.loads(args.out.read_text())["runs"]}
    return args, done
