"""The loaders of a training run, for any data set of the book: ``make_loaders(config, device)``.

Each data set lives in its own room, and its loader returns a dict of splits, each a pair of tensors:

    # offline, 1,797 real 8x8 digits shipped inside vitedu
    from vitedu.digits import load_digits
    # (1259, 1, 8, 8) uint8 in [0, 16], (1259,) int64
    images, labels = load_digits()["train"]
    # downloads 163 MB once, verifies the MD5, then caches
    from vitedu.cifar import load_cifar10
    # (45000, 3, 32, 32) uint8 in [0, 255], (45000,) int64
    images, labels = load_cifar10("~/data")["train"]
    from vitedu.cluttered import load_cluttered_digits
    # (2000, 1, 32, 32) float32 in [0, 1]
    images, labels, boxes = load_cluttered_digits("test")

The rooms, one concept each: :mod:`vitedu.digits` (the shipped digits and the stratified split),
:mod:`vitedu.cifar` (CIFAR-10), :mod:`vitedu.cluttered` (one digit among clutter), :mod:`vitedu.imagefolder`
(your own images), :mod:`vitedu.augment` (augmentations) and :mod:`vitedu.loaders` (``TensorLoader``: batches on
the device); the datasets' statistics are in :mod:`vitedu.constants`. Images stay uint8 in memory; a
:class:`vitedu.loaders.TensorLoader` turns them into shuffled float batches on the device and applies the
augmentation there, a whole batch at a time. Everything is plain torch: torchvision is not needed.

``make_loaders(config, device)`` builds the train/val/test loaders of a training run (``vitedu.config.TrainConfig``)
for any of the data sets, including your own images (``vitedu.imagefolder``).

Splits (fixed, stratified: every class keeps its share in every split; seed 0)

    digits    train 1259 / val 179 / test 359
              (70 / 10 / 20 %; train + val is the usual 80 % split)
    cifar10   train 45000 / val 5000 / test 10000
              (val held out of the official training set)
"""

from __future__ import annotations

from typing import Any

import torch

from . import distributed, imagefolder
from .augment import AUGMENTATIONS
from .cifar import load_cifar10
from .cluttered import cluttered_loaders
from .constants import CIFAR10_MEAN, CIFAR10_STD, DIGITS_MEAN, DIGITS_STD
from .digits import DIGITS_MAX, load_digits, stratified_subset
from .loaders import TensorLoader
from .registry import model_kwargs

# The datasets make_loaders knows, by TrainConfig.dataset.
DATASETS = ("digits", "cluttered_digits", "cifar10", "imagefolder")


def make_loaders(config: Any, device: torch.device | str = "cpu") -> dict[str, Any]:
    """Train (shuffled, augmented), val and test loaders for ``config.dataset`` (a ``vitedu.config.TrainConfig``).

    Under torchrun each process's loaders hold its share of every batch (vitedu.distributed)."""
    if config.dataset == "cluttered_digits":
        process = distributed.current()
        return cluttered_loaders(config, device, rank=process.rank, world_size=process.world_size)
    if config.dataset == "digits":
        splits, mean, std, max_value = load_digits(), DIGITS_MEAN, DIGITS_STD, DIGITS_MAX
    elif config.dataset == "cifar10":
        splits, mean, std, max_value = load_cifar10(config.data_root), CIFAR10_MEAN, CIFAR10_STD, 255
    elif config.dataset == "imagefolder":
        img_size = model_kwargs(config.model, config.model_kwargs).get("img_size", 224)
        splits, _ = imagefolder.load_image_folder(config.data_root, img_size, config.seed)
        (mean, std), max_value = imagefolder.channel_stats(splits["train"][0]), 255
    else:
        raise ValueError(f"unknown dataset {config.dataset!r}; choose from {', '.join(DATASETS)} (imagefolder "
                         "with data_root, your folder of class folders)")
    if config.augment not in AUGMENTATIONS:
        raise ValueError(f"unknown augment {config.augment!r}; choose from {sorted(AUGMENTATIONS)}")
    train = stratified_subset(splits["train"], config.train_fraction, config.seed)
    if config.train_on_val:
        train = (torch.cat([train[0], splits["val"][0]]), torch.cat([train[1], splits["val"][1]]))
    process = distributed.current()
    common = dict(mean=mean, std=std, max_value=max_value, device=device, rank=process.rank,
                  world_size=process.world_size)
    return {
        "train": TensorLoader(*train, config.batch_size, shuffle=True, augment=AUGMENTATIONS[config.augment],
                              seed=config.seed, **common),
        "val": TensorLoader(*splits["val"], 500, **common),
        "test": TensorLoader(*splits["test"], 500, **common),
    }
