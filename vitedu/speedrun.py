"""The book's ViT from scratch in minutes on a laptop's CPU: one command, one line of results.

    # trains vit_cluttered_digits, both threads
    python -m vitedu.speedrun --seed 0 --out runs/speedrun
    # the trained model, in eval mode
    model, config = vitedu.load_trained("runs/speedrun")

It trains ``PRESETS["speedrun"]`` with ``vitedu.train.fit`` (checkpoints after every epoch in ``--out``), then
scores the model as chapter 8 scores the shipped one: accuracy on the 2,000 test canvases with the digit
anywhere, and the worst of the 16 sub-patch offsets of the digit (``vitedu.shift.offset_accuracy``, 1,000 test
canvases each). The last line it prints is

    speedrun: test accuracy A %, worst offset W %, S s on T threads

where the seconds are the whole command's wall time, data and scoring included. The recipe differs from the
shipped model's (``PRESETS["cluttered_digits"]``, 3 million canvases) where a CPU pays: no convnet teacher (on a
CPU its forward pass alone costs more than the ViT's whole training step), a sixth of the canvases, and Muon for
the blocks' weight matrices (``vitedu.optimizers``), which learns more from each canvas; benchmarks/README.md
("The CPU speedrun") has the measurements behind each choice, and what did not help. ``speedrun.json`` in
``--out`` records the numbers of the last line.

    # two one-thread processes share every batch
    python -m vitedu.speedrun --processes 2 --out runs/sr2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional

import torch
from torch import nn

from . import distributed
from .checkpoints import CheckpointError
from .config import PRESETS, ConfigError, TrainConfig
from .loaders import DatasetError
from .run_files import STATE_FILE, refuse_file_as_folder
from .shift import offset_accuracy
from .train import History, fit
from .utils import DeviceError, check_device, get_device

RESULT_FILE = "speedrun.json"
# How chapter 8 and tests/test_shipped.py read the shipped model's offsets: the test split, 1,000 canvases per
# offset, canvas seed 11.
OFFSET_SPLIT, OFFSET_IMAGES, OFFSET_SEED = "test", 1_000, 11
# Under --processes, the launcher's start time (time.time()) for the copies, so the last line counts the launch.
START = "VITEDU_SPEEDRUN_START"
# Validation is scored (and a line logged) every this many epochs, not after each: 2,000 canvases less to score
# in most epochs.
VALIDATE_EVERY = 5


@dataclass
class SpeedrunResult:
    model: nn.Module
    config: TrainConfig
    history: History
    test_acc: float  # on the 2,000 test canvases, the digit anywhere
    offsets: torch.Tensor  # (4, 4) accuracy per sub-patch offset of the digit's cell
    seconds: float  # wall time, from the command's start to the scores
    threads: int  # CPU threads in all: processes x threads per process
    device: torch.device
    resumed: bool
    processes: int = 1

    @property
    def worst_offset(self) -> float:
        return self.offsets.min().item()

    def line(self) -> str:
        """The command's last line: ``speedrun: test accuracy A %, worst offset W %, S s on T threads``."""
        plural = "thread" if self.threads == 1 else "threads"
        where = f"{self.threads} {plural}" if self.device.type == "cpu" else f"{self.device.type}"
        if self.processes > 1:
            where += f" ({self.processes} processes)"
        resumed = " (resumed: the seconds are this command's only)" if self.resumed else ""
        return (f"speedrun: test accuracy {100 * self.test_acc:.1f} %, worst offset {100 * self.worst_offset:.1f} %, "
                f"{self.seconds:.0f} s on {where}{resumed}")


def speedrun(
    seed: int = 0, out: str | os.PathLike | None = None, resume: bool = False,
    device: torch.device | str | None = None,
    progress: Optional[bool] = None, log: Callable[[str], None] = print, config: Optional[TrainConfig] = None,
) -> Optional[SpeedrunResult]:
    """Train ``config`` (default: ``PRESETS["speedrun"]`` with ``seed``) from scratch and score it.

    ``out`` receives a checkpoint after every epoch (``resume=True`` carries on from the last one) and, at the
    end, ``speedrun.json`` with the scores. A folder that already holds a run is refused unless ``resume``
    (``check_out``). Under torchrun every process trains; rank 0 scores and returns the result, the others None.
    """
    start = float(os.environ.get(START, time.time()))  # the launcher's clock, under --processes
    device = torch.device(device) if device is not None else get_device()
    check_out(out, resume)
    config = recipe(seed) if config is None else config
    resumed = resume and out is not None and (Path(out) / STATE_FILE).exists()  # an empty --out starts afresh
    result = fit(config, out=out, resume=resume, device=device, progress=progress, log=log, precision="fp32",
                 log_every=VALIDATE_EVERY, validate_every=VALIDATE_EVERY)
    process = distributed.current()
    if not process.is_main:  # rank 0 scores and writes; the others are done
        return None
    offsets = offset_accuracy(result.model, 4, OFFSET_SPLIT, OFFSET_IMAGES, OFFSET_SEED)
    run = SpeedrunResult(result.model.eval(), result.config, result.history, result.test_acc, offsets,
                         time.time() - start, torch.get_num_threads() * process.world_size, device,
                         resumed=resumed, processes=process.world_size)
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        record = {"test_acc": run.test_acc, "worst_offset": run.worst_offset, "offsets": offsets.tolist(),
                  "seconds": round(run.seconds, 1), "threads": run.threads, "device": str(device),
                  "processes": run.processes, "resumed": run.resumed, "seed": run.config.seed, "line": run.line()}
        (Path(out) / RESULT_FILE).write_text(json.dumps(record, indent=1) + "\n")
    return run


def recipe(seed: int = 0, epochs: Optional[int] = None) -> TrainConfig:
    """``PRESETS["speedrun"]`` with ``seed``; ``epochs`` shortens or lengthens it, the grid phase in proportion."""
    preset = PRESETS["speedrun"]
    if epochs is None:
        return replace(preset, seed=seed)
    grid = round(preset.grid_epochs * epochs / preset.epochs) if isinstance(epochs, int) and epochs > 0 else 0
    return replace(preset, seed=seed, epochs=epochs, grid_epochs=grid)


def check_out(out: str | os.PathLike | None, resume: bool) -> None:
    """Refuse a folder that already holds a run, unless resuming: a speedrun's time means nothing if it silently
    continues an earlier run."""
    if out is not None and (Path(out) / STATE_FILE).exists() and not resume:
        raise FileExistsError(f"{out} already holds a training run ({STATE_FILE}); a speedrun starts from scratch. "
                              f"Choose a new --out, delete that folder, or pass --resume to finish that run")


def launch(processes: int, argv: list[str]) -> None:
    """Start ``processes`` copies of this command under torchrun (in this process: its launcher is a function),
    each training on its share of every batch with one CPU thread; the copies read the start time from the
    environment, so the last line counts the launch too. Raises if a copy failed."""
    from torch.distributed.run import main as torchrun

    os.environ[START] = repr(time.time())
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torchrun(["--standalone", f"--nproc_per_node={processes}", "-m", "vitedu.speedrun", *argv])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m vitedu.speedrun", description="Train the book's cluttered-digits ViT from scratch with the "
        "speedrun recipe (vitedu.PRESETS['speedrun']) and print its test accuracy, its worst sub-patch offset and "
        "the wall time on the last line.")
    p.add_argument("--seed", type=int, default=0, help="seed for initialisation, canvases and batch order")
    p.add_argument("--out", help="folder for the checkpoints (after every epoch) and speedrun.json; "
                   "vitedu.load_trained(OUT) reads the model back")
    p.add_argument("--resume", action="store_true", help="finish the run saved in --out")
    p.add_argument("--epochs", type=int, help="a shorter (or longer) run of the same recipe: the grid phase and the "
                   "schedule keep their share of the epochs (default: the preset's)")
    p.add_argument("--threads", type=int, help="CPU threads per process (default: torch's choice, one per core, "
                   "shared among the processes)")
    p.add_argument("--processes", type=int, default=1, help="training processes, each with its share of every "
                   "batch (torchrun, Gloo): on a CPU two processes of one thread each train faster than one "
                   "process of two threads (benchmarks/README.md, 'The CPU speedrun')")
    p.add_argument("--device", help="cpu, cuda or mps (default: the best available)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="a progress bar per epoch (default: only when writing to a terminal)")
    return p


# Errors whose message says what went wrong and what to do: the command prints them as one line.
EXPLAINED_ERRORS = (ConfigError, FileExistsError, DatasetError, CheckpointError, DeviceError)


def main(argv: Optional[list[str]] = None) -> Optional[SpeedrunResult]:
    """The command line. A wrong option or an existing run in --out ends as one line on stderr, not a traceback.
    With ``--processes N`` it starts N copies of itself (``launch``); rank 0 prints the last line."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads is a number of CPU threads, at least 1; got {args.threads}")
    if args.processes < 1:
        parser.error(f"--processes is a number of training processes, at least 1; got {args.processes}")
    if args.resume and not args.out:
        parser.error("--resume finishes the run saved in --out: give --out too")
    try:
        config = recipe(args.seed, args.epochs)  # a bad seed or length fails here, before any process starts
        check_out(args.out, args.resume)
        check_device(args.device)
        refuse_file_as_folder(args.out, "--out")
    except (ConfigError, FileExistsError, DeviceError, CheckpointError) as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    if args.processes > 1 and "WORLD_SIZE" not in os.environ:  # the launcher: start the copies, they report
        launch(args.processes, argv)
        return None
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        process, device, started = distributed.setup(args.device)  # under torchrun: join the other copies
    except distributed.SetupError as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    try:
        run = speedrun(args.seed, args.out, args.resume, device, args.progress,
                       log=print if process.is_main else _silent, config=config)
    except EXPLAINED_ERRORS as err:  # anything else is a bug and keeps its traceback
        if process.is_main:
            print(f"{parser.prog}: error: {err}", file=sys.stderr)
        raise SystemExit(2 if isinstance(err, (ConfigError, FileExistsError)) else 1) from None
    finally:
        distributed.cleanup(started)
    if run is not None:
        print(run.line())
    return run


def _silent(_: str) -> None:
    pass


if __name__ == "__main__":
    main()


__all__ = ["RESULT_FILE", "SpeedrunResult", "check_out", "launch", "main", "recipe", "speedrun"]
