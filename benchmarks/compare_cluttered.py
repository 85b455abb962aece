"""ViT vs a small CNN on cluttered digits: the same data, steps, schedule and optimiser, several seeds.

    python benchmarks/compare_cluttered.py --epochs 4 --seeds 0 1 2          # val accuracy of each run
    python benchmarks/compare_cluttered.py --epochs 4 --seeds 0 1 2 --test   # and test, for the final runs

The ViT is PRESETS["cluttered_digits"] (vitedu.models "vit_cluttered_digits"); the CNN is vitedu.train's
ConvTeacher, trained by the same loop (train_teacher) on the same fresh canvases, with its own learning rate
(--cnn-lr). Prints one line per run and a mean +- std per model. Choose settings on the val accuracy; test
accuracy is computed and printed only with --test, for the final runs of the chosen settings.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import torch

from vitedu.config import PRESETS
from vitedu.data import make_loaders
from vitedu.train import evaluate, fit, train_teacher
from vitedu.utils import count_parameters, seed_everything


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, help="epochs for both models (default: the preset's)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--cnn-lr", type=float, default=None, help="peak learning rate of the CNN (default: the ViT's)")
    p.add_argument("--models", nargs="+", default=["vit", "cnn"], choices=["vit", "cnn"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--test", action="store_true", help="also measure test accuracy (only for the final runs)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    base = PRESETS["cluttered_digits"]
    base = replace(base, epochs=args.epochs or base.epochs, teacher_epochs=0)
    device = torch.device("cpu")
    splits = ("val", "test") if args.test else ("val",)
    results: dict[str, dict[str, list[float]]] = {m: {split: [] for split in splits} for m in args.models}
    for seed in args.seeds:
        config = replace(base, seed=seed)
        for name in args.models:
            start = time.perf_counter()
            if name == "vit":
                result = fit(config, device=device, progress=False, log=lambda s: None)
                model, acc = result.model, {"val": result.history.val_acc[-1], "test": result.test_acc}
                acc = {split: acc[split] for split in splits}
            else:
                seed_everything(seed)
                loaders = make_loaders(config, device)
                cnn_config = replace(config, teacher_epochs=config.epochs, lr=args.cnn_lr or config.lr)
                model = train_teacher(cnn_config, loaders, device, log=lambda s: None)
                acc = {split: evaluate(model, loaders[split])[1] for split in splits}
            for split in acc:
                results[name][split].append(acc[split])
            scores = ", ".join(f"{split} acc {a:.4f}" for split, a in acc.items())
            print(f"{name} seed {seed}: {count_parameters(model):,} parameters, {scores}, "
                  f"{time.perf_counter() - start:.0f} s", flush=True)
    for name, by_split in results.items():
        for split, accs in by_split.items():
            spread = statistics.stdev(accs) if len(accs) > 1 else 0.0
            print(f"{name}: {split} acc {statistics.mean(accs):.4f} +- {spread:.4f} over seeds {args.seeds}")


if __name__ == "__main__":
    main()
