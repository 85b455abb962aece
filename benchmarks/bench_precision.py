"""What bf16 autocast and torch.compile buy end to end: the digits recipe, timed and tested.

    make bench                                     # a short run: 5 epochs (teacher 1) per setting
    python benchmarks/bench_precision.py --full    # the whole recipe (100 epochs, teacher 20) per setting

Each setting trains vitedu.config.PRESETS["digits"] from the same seed with ``fit(precision=..., compile=...)``
and reports the median training time per epoch (from the logged throughput; evaluation excluded), the
first epoch alone (where torch.compile pays for compiling), and the final val and test accuracy, so a
speed-up that costs accuracy shows. The short run's accuracies are those of an unfinished recipe: compare
them with each other, not with the README's 98 %.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import torch
from bench_models import machine  # benchmarks/, this script's folder, is on the path

from vitedu import train as T
from vitedu.config import PRESETS
from vitedu.data import make_loaders

SETTINGS = [("fp32", False), ("bf16", False), ("fp32", True), ("bf16", True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="the whole recipe instead of a few epochs")
    parser.add_argument("--epochs", type=int, default=5, help="epochs of the short run (teacher: 1)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--no-compile", action="store_true", help="leave out the torch.compile settings")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    config = PRESETS["digits"] if args.full else replace(PRESETS["digits"], epochs=args.epochs, teacher_epochs=1)
    print(f"machine: {machine()}")
    print(f"4. the digits recipe, {config.epochs} epochs (teacher {config.teacher_epochs}), batch {config.batch_size}, "
          f"seed {config.seed}, on the CPU")
    print(f"{'precision':<10} {'compile':<8} {'s/epoch':>8} {'1st epoch s':>12} {'total s':>8} {'val acc':>8} "
          f"{'test acc':>9}")
    train_size = len(make_loaders(config, torch.device("cpu"))["train"].images)
    baseline = None
    for precision, compiled in SETTINGS:
        if compiled and args.no_compile:
            continue
        torch._dynamo.reset()
        start = time.perf_counter()
        result = T.fit(config, device="cpu", progress=False, log=lambda _: None, precision=precision,
                       compile=compiled)
        total = time.perf_counter() - start
        epoch_s = [train_size / speed for speed in result.history.images_per_s]
        median = statistics.median(epoch_s)
        baseline = baseline or median
        print(f"{precision:<10} {'yes' if compiled else 'no':<8} {median:>8.2f} {epoch_s[0]:>12.1f} {total:>8.0f} "
              f"{result.history.val_acc[-1]:>8.4f} {result.test_acc:>9.4f}   {baseline / median:.2f}x fp32's speed")


if __name__ == "__main__":
    main()
