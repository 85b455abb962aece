"""The numbers the model registry needs about the datasets, without loading the datasets' code.

``vitedu.registry`` records for each named model how its inputs are normalised and what its classes are called;
those numbers live here, so that ``import vitedu.models`` does not import the data loaders (as timm keeps
ImageNet's statistics in ``timm/data/constants.py``). Each mean and std is per channel, of the training
images scaled to [0, 1]; the data tests re-measure them.
"""

from __future__ import annotations

# 8x8 digits (vitedu.digits): pixel counts 0..16 scaled to [0, 1], training split.
DIGITS_MEAN, DIGITS_STD = (0.3057,), (0.3763,)
DIGIT_NAMES = tuple(str(d) for d in range(10))

# Cluttered digits (vitedu.cluttered): the pixels of training canvases.
CLUTTERED_MEAN, CLUTTERED_STD = (0.0807,), (0.2384,)

# CIFAR-10 (vitedu.cifar): over the 50,000 training images.
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)
