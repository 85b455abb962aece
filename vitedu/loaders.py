"""Batches on the device: shuffled, scaled, augmented and normalised mini-batches of in-memory images.

    loader = TensorLoader(images, labels, 64, mean, std, max_value=16,
                          shuffle=True)
    # images (batch, C, H, W) float32, labels (batch,) int64
    for images, labels in loader:

``DatasetError`` is the one error every data set raises when it cannot be downloaded, verified or read.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Optional

import torch
from torch import Tensor

from .augment import Augment


class DatasetError(RuntimeError):
    """A dataset could not be downloaded, verified or read; the message says why and what to do."""


class TensorLoader:
    """Shuffled mini-batches of in-memory uint8 images, as normalised floats on ``device``.

    for images, labels in loader:   # images (batch, C, H, W) float32, labels (batch,) int64

    Each batch is scaled to [0, 1] (dividing by ``max_value``), augmented (training only), then
    normalised per channel with ``mean``/``std``. Call ``set_epoch(e)`` before each epoch: the order
    and the augmentations then depend only on (seed, epoch), so a resumed run sees the same batches
    as an uninterrupted one.

    Several processes (``world_size`` > 1, see vitedu.distributed): every process draws the same order,
    cuts each batch of ``batch_size`` images into ``world_size`` disjoint shares and keeps share ``rank``
    (images rank, rank + world_size, ...), so in one epoch every image is seen exactly once, by one process.
    A last batch too small to give every process an image is folded into the batch before it.
    """

    def __init__(
        self, images: Tensor, labels: Tensor, batch_size: int, mean: tuple[float, ...], std: tuple[float, ...],
        max_value: float = 255.0, shuffle: bool = False, augment: Optional[Augment] = None,
        device: torch.device | str = "cpu", seed: int = 0, drop_last: bool = False, rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if images.dim() != 4 or len(images) != len(labels):
            raise ValueError(f"expected images (N, C, H, W) and labels (N,), got {tuple(images.shape)} and "
                             f"{tuple(labels.shape)}")
        if len(mean) != images.shape[1] or len(std) != images.shape[1]:
            raise ValueError(f"mean/std need one value per channel ({images.shape[1]}), got {mean} and {std}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, world_size) = [0, {world_size}), got rank {rank}")
        if world_size > 1 and min(batch_size, len(images)) < world_size:
            raise ValueError(f"{world_size} processes cannot share batches of {min(batch_size, len(images))} "
                             f"images ({len(images)} in all): every process needs at least one image per step. "
                             f"Use a batch size of at least {world_size}, or fewer processes")
        self.images, self.labels = images, labels
        self.batch_size, self.shuffle, self.augment, self.drop_last = batch_size, shuffle, augment, drop_last
        self.device, self.max_value, self.seed, self.epoch = torch.device(device), max_value, seed, 0
        self.rank, self.world_size = rank, world_size
        self.mean = torch.tensor(mean, device=self.device)[None, :, None, None]  # (1, C, 1, 1)
        self.std = torch.tensor(std, device=self.device)[None, :, None, None]

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        n = len(self.images)
        if self.drop_last:
            return n // self.batch_size
        batches = math.ceil(n / self.batch_size)
        if self.world_size > 1 and batches > 1 and 0 < n % self.batch_size < self.world_size:
            batches -= 1  # the small tail joins the batch before it
        return batches

    def shares(self, generator: Optional[torch.Generator] = None) -> list[Tensor]:
        """This process's image indices, batch by batch, for the current epoch: [(share,) int64, ...]."""
        if generator is None:
            generator = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        n = len(self.images)
        order = torch.randperm(n, generator=generator) if self.shuffle else torch.arange(n)
        starts = [i * self.batch_size for i in range(len(self))]
        ends = starts[1:] + [len(self) * self.batch_size if self.drop_last else n]
        return [order[a:b][self.rank :: self.world_size] for a, b in zip(starts, ends)]

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        generator = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        shares = self.shares(generator)
        if self.world_size > 1:  # same order on every process; augmentations drawn per process
            generator = torch.Generator().manual_seed((self.seed * 100_003 + self.epoch) * 1_009 + 1 + self.rank)
        for idx in shares:
            x = self.images[idx].to(self.device, non_blocking=True).float() / self.max_value  # (batch, C, H, W)
            if self.augment is not None:
                x = self.augment(x, generator)
            yield (x - self.mean) / self.std, self.labels[idx].to(self.device, non_blocking=True)


def denormalize(images: Tensor, mean: tuple[float, ...], std: tuple[float, ...]) -> Tensor:
    """Undo the normalisation, for plotting: (batch, C, H, W) -> same, back in [0, 1]."""
    m = torch.tensor(mean, device=images.device)[None, :, None, None]
    s = torch.tensor(std, device=images.device)[None, :, None, None]
    return (images * s + m).clamp(0, 1)


