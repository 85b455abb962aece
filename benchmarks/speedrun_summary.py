"""The CPU speedrun's results in one file, as the speedrun appendix reads them.

    python benchmarks/speedrun_summary.py     # writes benchmarks/results/speedrun/summary.json

It gathers what was measured elsewhere, and measures nothing itself:

- the **recipe ladder** (validation only, one run each): the JSON lines that ``benchmarks/sweep_cluttered.py`` wrote
  for the speedrun's variants (``results/speedrun_sweep.jsonl``) with each run's validation curve, read from its
  epoch log (``results/speedrun/<variant>_seed<N>.log``: one line per epoch, validation on 2,000 canvases);
- the **command's runs** (``python -m vitedu.speedrun --processes 2``, one per seed, on the idle machine): the
  ``speedrun.json`` and ``train_state.json`` that each wrote, copied to ``results/speedrun/command/seed<N>/``;
- the **step** and its roofline: ``results/train_step.json`` (``benchmarks/train_step.py``).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
SWEEP = RESULTS / "speedrun_sweep.jsonl"
LOGS = RESULTS / "speedrun"
COMMAND = RESULTS / "speedrun" / "command"
SUMMARY = RESULTS / "speedrun" / "summary.json"
EPOCH_LINE = re.compile(r"epoch\s+(\d+)/(\d+)\s+train [\d.]+ [\d.]+%\s+val [\d.]+ ([\d.]+)%")


def curve(log: Path) -> list[float]:
    """Validation accuracy after each epoch (a fraction), read from an epoch log."""
    return [round(float(m.group(3)) / 100, 4) for m in map(EPOCH_LINE.search, log.read_text().splitlines()) if m]


def sweep_runs() -> list[dict]:
    """Every speedrun variant's record (``sr_*``) with its validation curve, in the order they were run; then the
    runs stopped before their end (a log and no record), as ``{"variant", "seed", "stopped": True, "val_curve"}``."""
    runs = []
    for line in SWEEP.read_text().splitlines():
        record = json.loads(line)
        log = LOGS / f"{record['variant']}_seed{record['seed']}.log"
        record["val_curve"] = curve(log) if log.exists() else []
        runs.append(record)
    finished = {f"{r['variant']}_seed{r['seed']}" for r in runs}
    for log in sorted(LOGS.glob("*_seed*.log")):
        variant, seed = log.stem.rsplit("_seed", 1)
        if log.stem not in finished:
            runs.append({"variant": variant, "seed": int(seed), "stopped": True, "val_curve": curve(log)})
    return runs


def command_runs() -> list[dict]:
    """The speedrun command's runs, by seed: its scores and its validation history."""
    runs = []
    for folder in sorted(COMMAND.glob("seed*")):
        record = json.loads((folder / "speedrun.json").read_text())
        history = json.loads((folder / "train_state.json").read_text())["history"]
        scored = [(e, a) for e, a in zip(history["epoch"], history["val_acc"]) if not math.isnan(a)]
        record["val_epochs"] = [e for e, _ in scored]
        record["val_curve"] = [a for _, a in scored]
        record["images_per_s"] = history["images_per_s"]
        runs.append(record)
    return runs


def main() -> None:
    summary = {"sweep": sweep_runs(), "command": command_runs(),
               "step": json.loads((RESULTS / "train_step.json").read_text())}
    SUMMARY.write_text(json.dumps(summary, indent=1) + "\n")
    print(f"{SUMMARY}: {len(summary['sweep'])} sweep runs, {len(summary['command'])} command runs")


if __name__ == "__main__":
    main()
