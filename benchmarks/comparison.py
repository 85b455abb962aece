"""What the controlled comparisons (``data_hunger.py``, chapter 7; ``variants.py``, ``honest_study.py``, chapter 9;
``pretrain_pays.py``, chapter 10) share: the key of a run, the choice on validation, the command line that resumes
from the runs already stored, and the ``run`` command benchmarks/gpu_sweep.py calls a runner with."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import asdict
from multiprocessing import get_context
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


def run_all(jobs: list[tuple[str, Any]], done: dict, workers: int, job_star: Callable, save: Callable[[], None],
            keep: Callable[[Any], dict] = lambda result: result) -> None:
    """Run the (arm, config) jobs not yet in ``done`` in ``workers`` spawned processes of one thread each.

    ``job_star((arm, config))`` trains one run; ``keep`` turns what it returns into the record stored in ``done``
    (by key), and ``save()`` writes ``done`` after every run, so an interrupted comparison resumes where it stopped.
    """
    todo = list({key(*j): j for j in jobs if key(*j) not in done}.values())
    print(f"{len(jobs)} runs, {len(todo)} to do", flush=True)
    with get_context("spawn").Pool(workers) as pool:
        for result in pool.imap_unordered(job_star, todo):
            record = keep(result)
            done[record["key"]] = record
            save()
            print(f"{record['arm']:8s} f={record['fraction']:.2f} seed={record['seed']} lr={record['lr']:.0e} "
                  f"val {record['val_acc']:.4f} ({record['seconds']:.0f} s)", flush=True)


def add_run_command(sub: Any, help: str) -> None:
    """The ``run`` subcommand of a benchmarks/gpu_sweep.py runner: ``run --variants NAME --seeds S --device D
    --save-dir DIR --out FILE`` (``--workers`` is taken and ignored: one job a process; ``--epochs`` shortens a
    quick check)."""
    s = sub.add_parser("run", help=help)
    s.add_argument("--variants", nargs="+", required=True)
    s.add_argument("--seeds", type=int, nargs="+", default=[0])
    s.add_argument("--workers", type=int, default=1, help="ignored: one job a process")
    s.add_argument("--device", default="cpu")
    s.add_argument("--save-dir", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--epochs", type=int, help="fewer epochs, for a quick check")
