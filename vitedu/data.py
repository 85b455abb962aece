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
Images stay uint8 in memory; a :class:`TensorLoader` turns them into shuffled float batches on the device and
applies the augmentation there, a whole batch at a time. Everything is plain torch: torchvision is not needed.

Splits (fixed, stratified: every class keeps its share in every split; seed 0)

    digits    train 1259 / val 179 / test 359   (70 / 10 / 20 %; train + val is the usual 80 % split)
    cifar10   train 45000 / val 5000 / test 10000   (val held out of the official training set)
"""

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
    CIFAR10_CLASSES,
    CIFAR10_DIR,
    CIFAR10_FILES,
    CIFAR10_MD5,
    CIFAR10_MEAN,
    CIFAR10_STD,
    CIFAR10_URL,
    load_cifar10,
    md5sum,
)
from .cluttered import CLUTTERED_MEAN, CLUTTERED_STD, ClutteredLoader, load_cluttered_digits
from .digits import (
    DIGITS_MAX,
    DIGITS_MEAN,
    DIGITS_SPLIT_SIZES,
    DIGITS_STD,
    Split,
    digits_arrays,
    load_digits,
    stratified_split,
)
from .loaders import DatasetError, TensorLoader, denormalize

__all__ = [
    "AUGMENTATIONS", "Augment", "CIFAR10_ARCHIVE", "CIFAR10_CLASSES", "CIFAR10_DIR", "CIFAR10_FILES", "CIFAR10_MD5",
    "CIFAR10_MEAN", "CIFAR10_STD", "CIFAR10_URL", "CLUTTERED_MEAN", "CLUTTERED_STD", "ClutteredLoader", "DIGITS_MAX",
    "DIGITS_MEAN", "DIGITS_SPLIT_SIZES", "DIGITS_STD", "DatasetError", "Split", "TensorLoader", "cifar_augment",
    "cifar_augment_strong", "denormalize", "digits_arrays", "digits_augment", "digits_warp", "load_cifar10",
    "load_cluttered_digits", "load_digits", "md5sum", "rand_augment_light", "random_affine", "random_crop",
    "random_hflip", "stratified_split",
]
