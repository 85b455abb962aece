"""The 1,797 handwritten 8x8 digits shipped with vitedu, in a fixed stratified train/val/test split.

    # offline: the digits live in vitedu/assets (45 kB)
    splits = load_digits()
    # (1259, 1, 8, 8) uint8 in [0, 16], (1259,) int64
    images, labels = splits["train"]

The digits are UCI's (scikit-learn's ``load_digits``); ``tools/make_digits_asset.py`` wrote the asset once.
Splits are fixed and stratified (every class keeps its share in every split; seed 0):
train 1259 / val 179 / test 359 (70 / 10 / 20 %; train + val is the usual 80 % split).
"""

from __future__ import annotations

import math
from importlib import resources

import numpy as np
import torch
from torch import Tensor

Split = tuple[Tensor, Tensor]  # (images (N, C, H, W) uint8, labels (N,) int64)


DIGITS_FILE = "digits.npz"
DIGITS_MAX = 16  # pixel values are counts 0..16 (each pixel summarises a 4x4 block of a 32x32 bitmap)
DIGITS_SPLIT_SIZES = {"train": 1259, "val": 179, "test": 359}


def digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """All 1,797 digits as NumPy arrays: images (1797, 8, 8) uint8 in [0, 16], labels (1797,) uint8."""
    with resources.files("vitedu").joinpath("assets", DIGITS_FILE).open("rb") as f:
        with np.load(f) as data:
            return data["images"], data["labels"]


def stratified_split(
    labels: np.ndarray, fractions: dict[str, float], seed: int = 0
) -> dict[str, np.ndarray]:
    """Split indices so that every class is shared out in the same proportions.

    labels (N,) -> {name: indices}. Within each class the examples are shuffled with ``seed`` and cut
    in the order given by ``fractions`` (the last split takes the remainder); the same labels and seed
    always give the same split. Each returned index array is sorted.
    """
    if not math.isclose(sum(fractions.values()), 1.0):
        raise ValueError(f"split fractions must sum to 1, got {fractions} (sum {sum(fractions.values())})")
    rng = np.random.default_rng(seed)
    names = list(fractions)
    parts: dict[str, list[np.ndarray]] = {name: [] for name in names}
    for cls in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == cls))
        start = 0
        for name in names[:-1]:
            stop = start + round(fractions[name] * len(idx))
            parts[name].append(idx[start:stop])
            start = stop
        parts[names[-1]].append(idx[start:])
    return {name: np.sort(np.concatenate(parts[name])) for name in names}


def stratified_subset(split: Split, fraction: float, seed: int = 0) -> Split:
    """The stratified share ``fraction`` of (images, labels), drawn with ``seed`` (every class keeps its share).

    For measuring how data-hungry a model is: ``fraction=1`` returns the split itself."""
    if not 0 < fraction <= 1:
        raise ValueError(f"train_fraction must be in (0, 1], got {fraction}")
    if fraction == 1:
        return split
    keep = stratified_split(split[1].numpy(), {"keep": fraction, "rest": 1 - fraction}, seed)["keep"]
    return split[0][keep], split[1][keep]


def load_digits(seed: int = 0) -> dict[str, Split]:
    """The digits in a fixed stratified train/val/test split (1259 / 179 / 359 with ``seed=0``).

    Returns {"train", "val", "test"} -> (images (N, 1, 8, 8) uint8 in [0, 16], labels (N,) int64).
    Divide by ``DIGITS_MAX`` to get [0, 1]; :class:`vitedu.loaders.TensorLoader` does that for you.
    """
    images, labels = digits_arrays()
    split = stratified_split(labels, {"test": 0.2, "val": 0.1, "train": 0.7}, seed)
    images_t = torch.from_numpy(images).unsqueeze(1)  # (1797, 1, 8, 8)
    labels_t = torch.from_numpy(labels.astype(np.int64))
    return {name: (images_t[split[name]], labels_t[split[name]]) for name in ("train", "val", "test")}
