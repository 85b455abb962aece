"""Every data set of the book from one import: ``vitedu.data``.

Each loader returns a dict of splits, each a pair of tensors:

    splits = load_digits()                    # offline, 1,797 real 8x8 digits shipped inside vitedu
    images, labels = splits["train"]          # (1259, 1, 8, 8) uint8 in [0, 16], (1259,) int64
    splits = load_cifar10("~/data")           # downloads 163 MB once, verifies the MD5, then caches
    images, labels = splits["train"]          # (45000, 3, 32, 32) uint8 in [0, 255], (45000,) int64
    images, labels, boxes = load_cluttered_digits("test")   # (2000, 1, 32, 32) float32 in [0, 1]

The rooms behind this door, one concept each: :mod:`vitedu.digits` (the shipped digits and the stratified
split), :mod:`vitedu.cifar` (CIFAR-10), :mod:`vitedu.cluttered` (one digit among clutter),
:mod:`vitedu.augment` (augmentations) and :mod:`vitedu.loaders` (``TensorLoader``: batches on the device).
Images stay uint8 in memory; a :class:`vitedu.loaders.TensorLoader` turns them into shuffled float batches on
the device and applies the augmentation there, a whole batch at a time.
Everything is plain torch: torchvision is not needed.

``make_loaders(config, device)`` builds the train/val/test loaders of a training run (``vitedu.train.TrainConfig``)
for any of the data sets, including your own images (``vitedu.imagefolder``).

Splits (fixed, stratified: every class keeps its share in every split; seed 0)

    digits    train 1259 / val 179 / test 359   (70 / 10 / 20 %; train + val is the usual 80 % split)
    cifar10   train 45000 / val 5000 / test 10000   (val held out of the official training set)
"""

from __future__ import annotations

from typing import Any

import torch

from . import distributed, imagefolder
from .augment import (
    AUGMENTATIONS,
    Augment,
    cifar_augment,
    cifar_augment_strong,
    digits_augment,
    digits_warp,
    rand_augment_light,
    random_affine,
    random_crop,
    random_hflip,
)
from .cifar import (
    CIFAR10_ARCHIVE,
    CIFAR10_DIR,
    CIFAR10_FILES,
    CIFAR10_MD5,
    CIFAR10_URL,
    load_cifar10,
    md5sum,
)
from .cluttered import ClutteredLoader, cluttered_loaders, load_cluttered_digits
from .constants import (
    CIFAR10_CLASSES,
    CIFAR10_MEAN,
    CIFAR10_STD,
    CLUTTERED_MEAN,
    CLUTTERED_STD,
    DIGITS_MEAN,
    DIGITS_STD,
)
from .digits import (
    DIGITS_MAX,
    DIGITS_SPLIT_SIZES,
    Split,
    digits_arrays,
    load_digits,
    stratified_split,
    stratified_subset,
)
from .loaders import DatasetError, TensorLoader, denormalize
from .registry import model_kwargs

# The datasets make_loaders knows, by TrainConfig.dataset.
DATASETS = ("digits", "cluttered_digits", "cifar10", "imagefolder")


def make_loaders(config: Any, device: torch.device | str = "cpu") -> dict[str, Any]:
    """Train (shuffled, augmented), val and test loaders for ``config.dataset`` (a ``vitedu.train.TrainConfig``).

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


__all__ = [
    "AUGMENTATIONS", "Augment", "CIFAR10_ARCHIVE", "CIFAR10_CLASSES", "CIFAR10_DIR", "CIFAR10_FILES", "CIFAR10_MD5",
    "CIFAR10_MEAN", "CIFAR10_STD", "CIFAR10_URL", "CLUTTERED_MEAN", "CLUTTERED_STD", "ClutteredLoader", "DATASETS",
    "DIGITS_MAX",
    "DIGITS_MEAN", "DIGITS_SPLIT_SIZES", "DIGITS_STD", "DatasetError", "Split", "TensorLoader", "cifar_augment",
    "cifar_augment_strong", "cluttered_loaders", "denormalize", "digits_arrays", "digits_augment", "digits_warp",
    "load_cifar10", "load_cluttered_digits", "load_digits", "make_loaders", "md5sum", "rand_augment_light",
    "random_affine", "random_crop", "random_hflip", "stratified_split", "stratified_subset",
]
