"""Were the digits preset's distillation settings (tau = 4, alpha = 0.7) a lucky pick? A check on validation.

The preset's tau and alpha were picked, long ago, among five settings with test accuracies in view. This script
re-runs the preset (100 epochs, CNN teacher trained for 20) for each of those settings, and without a teacher,
with three seeds each, and records the final *validation* accuracy only (179 images: one image = 0.56 points).
Chapter 7 prints the table. Nothing here reads the test split.

    nice -n 10 python benchmarks/distill_settings.py    # 18 runs, about 25 CPU-minutes on one thread

Results go to ``benchmarks/results/distill_settings.json`` (one row per run).
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import torch

from vitedu import train as T
from vitedu.config import PRESETS, TrainConfig

PRESET = PRESETS["digits"]
# (temperature, alpha): the preset's, two neighbours of each, hard distillation; None = no teacher at all.
SETTINGS = ((4.0, 0.7), (4.0, 0.5), (2.0, 0.7), (8.0, 0.7), (0.0, 0.5), (None, None))
SEEDS = (0, 1, 2)
OUT = Path(__file__).parent / "results" / "distill_settings.json"


def config_for(tau: float | None, alpha: float | None, seed: int) -> TrainConfig:
    if tau is None:
        return replace(PRESET, seed=seed, teacher_epochs=0)
    return replace(PRESET, seed=seed, distill_temperature=tau, distill_alpha=alpha)


def main() -> None:
    torch.set_num_threads(1)
    rows = []
    for seed in SEEDS:
        for tau, alpha in SETTINGS:
            start = time.time()
            result = T.fit(config_for(tau, alpha, seed), log=lambda line: None)
            rows.append(dict(tau=tau, alpha=alpha, seed=seed, val_acc=result.history.val_acc[-1],
                             s=time.time() - start))
            print(rows[-1], flush=True)
            OUT.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
