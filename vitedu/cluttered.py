"""Cluttered digits: one 8x8 digit somewhere on a larger canvas, among fragments of other digits.

A task where attention has to *localise*. The label is the class of the one whole digit; the rest of
the canvas holds fragments cut from other digits, so the ink of the whole canvas is mostly not the
answer. A model that averages over the canvas without looking where (a "bag of patches") mixes the
digit's evidence with the clutter's; a model that finds the digit first and reads it does well.
The idea is the cluttered MNIST of Mnih et al. (2014), built here from the 8x8 digits shipped with
vitedu, so it needs no download.

    images, labels, boxes = load_cluttered_digits("train")
    # images (N, 1, 32, 32) float32 in [0, 1], labels (N,) int64,
    # boxes (N, 4) int64 (top, left, height, width)

The digit may sit at any pixel by default (``position_step=1``; see ``POSITION_STEP``), the clutter
anywhere. ``position_step=4`` puts it on the 4-pixel grid of the model's patches: the easy case, and the
start of the training curriculum (``grid_epochs``).

Rules that keep the task honest:
- canvases of a split are made only from digits of the same split of :func:`vitedu.digits.load_digits`
  (the whole digit *and* the clutter), so no test digit, or piece of one, is ever seen in training;
- clutter never overlaps the digit's 8x8 cell, so the digit is never occluded;
- the box is the tight box around the digit's ink, so "attention on the box" measures localisation;
- everything is drawn from one seeded ``torch.Generator``: the same arguments give the same canvases.

Generation is vectorised: every canvas of a batch is drawn at once with ``scatter_reduce`` (max of the
digit and the fragments at each pixel), so 10,000 canvases take a fraction of a second.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from .augment import AUGMENTATIONS, Augment
from .constants import CLUTTERED_MEAN, CLUTTERED_STD
from .digits import DIGITS_MAX, load_digits, stratified_subset
from .loaders import TensorLoader

CANVAS_SIZE = 32  # 32x32 = 1,024 pixels; the 8x8 digit cell covers 6.25 % of it
FRAGMENT_SIZE = 4  # each piece of clutter is a 4x4 crop of another digit
NUM_FRAGMENTS = 10
# The digit's cell starts at multiples of this: 1, anywhere (the honest task), or 4, on the 4x4 patch grid of
# vit_cluttered_digits (one of 7 x 7 = 49 positions, exactly 2 x 2 patches). A convolution reads a shifted digit
# with the same weights; a ViT has no such prior and must learn every digit at every sub-patch shift from data.
# On the grid it only has to learn *where* the digit is, and a model trained there alone fails one pixel off it
# (chapter 8's shift experiment). Training uses the grid only as a first lesson (TrainConfig.grid_epochs); every
# score is with the digit anywhere.
POSITION_STEP = 1
# The patch grid of vit_cluttered_digits (4x4 patches): position_step=GRID_STEP puts the digit on it.
GRID_STEP = 4
# Canvases per split made by load_cluttered_digits when num_images is not given. Val and test reuse each of
# their 179 / 359 digits about 11 / 6 times at other positions and with other clutter.
CLUTTERED_SIZES = {"train": 10_000, "val": 2_000, "test": 2_000}
# The split seeds are far apart, so the canvases of different splits never share random draws.
_SPLIT_SEED = {"train": 0, "val": 1_000_003, "test": 2_000_003}


def ink_boxes(digits: Tensor) -> Tensor:
    """Tight box around the nonzero pixels of each image.

    (N, 1, h, w) -> (N, 4) int64 as (top, left, height, width); an empty image gets (0, 0, 0, 0).
    """
    rows = digits.flatten(1, 2).amax(dim=-1) > 0  # (N, h): which rows have ink
    cols = digits.flatten(1, 2).amax(dim=-2) > 0  # (N, w)
    h, w = rows.shape[1], cols.shape[1]
    top = torch.where(rows.any(1), rows.float().argmax(1), 0)
    bottom = torch.where(rows.any(1), h - rows.flip(1).float().argmax(1), 0)  # one past the last ink row
    left = torch.where(cols.any(1), cols.float().argmax(1), 0)
    right = torch.where(cols.any(1), w - cols.flip(1).float().argmax(1), 0)
    return torch.stack([top, left, bottom - top, right - left], dim=1).long()


def rescale_digits(digits: Tensor, size: int) -> Tensor:
    """Resize square digits to ``size`` x ``size`` pixels by antialiased bilinear interpolation (a nuisance test).

    (M, 1, h, w) in [0, 1] -> (M, 1, size, size) float32 in [0, 1]. The task draws every digit at one size
    (8x8); a model tested only there may have learned that size. Chapter 8 reads the shipped model on
    digits rescaled to 6, 10 and 12 pixels with :func:`load_cluttered_digits` (``digit_size``), the
    clutter unchanged. Antialiased (``antialias=True``, ``align_corners=False``): shrinking averages every
    pixel of a stroke into the smaller digit instead of sampling some and skipping the rest, so a thin stroke
    is not lost to the resampler; enlarging is plain bilinear. Clamped to [0, 1].
    """
    if digits.dim() != 4 or digits.shape[-1] != digits.shape[-2]:
        raise ValueError(f"expected square digits (M, 1, h, h), got {tuple(digits.shape)}")
    if size < 1:
        raise ValueError(f"size is the new side of each digit in pixels, at least 1; got {size}")
    resized = F.interpolate(digits.float(), size=(size, size), mode="bilinear", align_corners=False,
                            antialias=True)
    return resized.clamp(0.0, 1.0)


def window_patches(boxes: Tensor, window: int, grid: int, patch: int, generator: torch.Generator) -> Tensor:
    """The patches of a random ``window`` x ``window`` block of the patch grid that holds each digit's ink box.

    boxes (N, 4) as (top, left, height, width) in pixels -> (N, window * window) int64, row-major indices into
    the ``grid`` x ``grid`` patches of ``patch`` pixels, ready for ``VisionTransformer.forward(images, keep=...)``.

    Training on a window is a cheaper step on the same canvas: the model reads the digit among the clutter
    around it, with every patch at its true position, in window² + 1 tokens instead of grid² + 1 (a 4 x 4
    window of the 8 x 8 grid: 17 tokens, not 65). The window is placed uniformly among the placements that
    contain the box, so the digit is not always at its centre. An 8-pixel digit touches at most 3 patches of
    4 pixels a side, so ``window`` >= 3 always fits it.
    """
    first = torch.div(boxes[:, :2], patch, rounding_mode="floor")  # (N, 2) first patch row, column of the ink
    last = torch.div(boxes[:, :2] + boxes[:, 2:].clamp(min=1) - 1, patch, rounding_mode="floor")  # (N, 2) last
    if window > grid or bool((last - first + 1 > window).any()):
        raise ValueError(f"a window of {window} x {window} patches must hold every digit's ink on the {grid} x "
                         f"{grid} grid (the widest spans {int((last - first + 1).max())} patches); use a window from "
                         f"{int((last - first + 1).max())} to {grid}")
    low = (last - window + 1).clamp(min=0)  # (N, 2) the window's first row/column may go from here ...
    high = first.clamp(max=grid - window)  # ... to here
    start = low + (torch.rand(low.shape, generator=generator) * (high - low + 1)).long()  # (N, 2) uniform
    offsets = torch.arange(window)
    rows = start[:, :1, None] + offsets[None, :, None]  # (N, window, 1)
    cols = start[:, 1:, None] + offsets[None, None, :]  # (N, 1, window)
    return (rows * grid + cols).flatten(1)  # (N, window * window)


def _paste_indices(top: Tensor, left: Tensor, size: int, canvas_size: int) -> Tensor:
    """Flat canvas indices of a size x size square at (top, left). (N, k) -> (N, k * size * size)"""
    r = torch.arange(size)
    rows = top[..., None, None] + r[:, None]  # (N, k, size, 1)
    cols = left[..., None, None] + r[None, :]  # (N, k, 1, size)
    return (rows * canvas_size + cols).flatten(1)


def make_cluttered(
    digits: Tensor,
    labels: Tensor,
    num_images: int,
    generator: torch.Generator,
    canvas_size: int = CANVAS_SIZE,
    num_fragments: int = NUM_FRAGMENTS,
    fragment_size: int = FRAGMENT_SIZE,
    position_step: int = POSITION_STEP,
    position_offset: tuple[int, int] = (0, 0),
    clutter_pool: Optional[Tensor] = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Draw ``num_images`` cluttered canvases from a pool of digits (all canvases at once, no Python loop).

    digits (M, 1, 8, 8) in [0, 1], labels (M,) -> images (N, 1, S, S) float32, labels (N,) int64,
    boxes (N, 4) int64 as (top, left, height, width) of the digit's ink, in canvas pixels.

    For each canvas: pick a digit and a position for its 8x8 cell; pick ``num_fragments`` other digits
    of the pool, cut a random ``fragment_size`` square out of each, and drop it anywhere that does not
    overlap the cell. Overlapping pieces of clutter combine by maximum, like ink on paper.

    The cell's top-left corner is at ``position_offset + position_step * k`` on each axis (k = 0, 1, ...
    while the cell fits): ``position_step=4`` with offset (0, 0) puts the digit on a 4-pixel patch grid,
    offset (1, 2) shifts every such position by one row and two columns (the shift experiment of chapter 8).

    ``clutter_pool`` (M, 1, c, c), the same digits in the same order at another size, is where the
    fragments are cut from instead of ``digits``: rescaled digits (:func:`rescale_digits`) among the usual
    clutter of 8x8 digits. ``None`` cuts them from ``digits`` (the same random draws either way).
    """
    if digits.dim() != 4 or digits.shape[1] != 1 or len(digits) != len(labels):
        raise ValueError(f"expected digits (M, 1, h, w) and labels (M,), got {tuple(digits.shape)} and "
                         f"{tuple(labels.shape)}")
    cell = digits.shape[-1]
    pool = digits if clutter_pool is None else clutter_pool
    if pool.dim() != 4 or len(pool) != len(digits) or pool.shape[-1] != pool.shape[-2]:
        raise ValueError(f"clutter_pool must hold the same {len(digits)} digits, square, as (M, 1, c, c); got "
                         f"{tuple(pool.shape)}")
    pool_cell = pool.shape[-1]
    if digits.shape[-2] != cell or canvas_size < 2 * cell:
        raise ValueError(f"the canvas ({canvas_size}) must be at least twice the (square) digit ({digits.shape[-2]}x"
                         f"{digits.shape[-1]}) so that there is room for clutter; use canvas_size >= {2 * cell}")
    if not 1 <= fragment_size <= pool_cell or num_fragments < 0 or num_images < 0 or position_step < 1:
        raise ValueError(f"need 1 <= fragment_size <= {pool_cell}, num_fragments >= 0, num_images >= 0 and "
                         f"position_step >= 1; got fragment_size={fragment_size}, num_fragments={num_fragments}, "
                         f"num_images={num_images}, position_step={position_step}")
    off_r, off_c = position_offset
    if not (0 <= off_r <= canvas_size - cell and 0 <= off_c <= canvas_size - cell):
        raise ValueError(f"position_offset must leave room for the {cell}x{cell} cell on the {canvas_size}x"
                         f"{canvas_size} canvas (each entry in 0..{canvas_size - cell}); got {position_offset}")
    if len(digits) < 2:
        raise ValueError("need at least two digits: clutter is cut from digits other than the one on the canvas")
    n, k, s, m = num_images, num_fragments, canvas_size, len(digits)
    g = generator
    which = torch.randint(0, m, (n,), generator=g)  # (N,) the digit of each canvas
    rows, cols = (s - cell - off_r) // position_step + 1, (s - cell - off_c) // position_step + 1  # cell positions
    top = off_r + torch.randint(0, rows, (n,), generator=g) * position_step  # (N,) where its cell goes
    left = off_c + torch.randint(0, cols, (n,), generator=g) * position_step

    # Clutter: other digits (a random nonzero shift mod M never picks the canvas's own digit), a random
    # square of each, and a position that keeps clear of the cell. Positions are drawn from the free ones
    # directly: take 8 candidates per fragment and keep the first k that miss the cell (a fragment that
    # finds no free candidate, which needs 8 misses in a row, is dropped).
    donors = (which[:, None] + torch.randint(1, m, (n, k), generator=g)) % m  # (N, k)
    cut_r = torch.randint(0, pool_cell - fragment_size + 1, (n, k), generator=g)
    cut_c = torch.randint(0, pool_cell - fragment_size + 1, (n, k), generator=g)
    tries = 8 * k
    cand_r = torch.randint(0, s - fragment_size + 1, (n, tries), generator=g)
    cand_c = torch.randint(0, s - fragment_size + 1, (n, tries), generator=g)
    overlap = ((cand_r < top[:, None] + cell) & (cand_r + fragment_size > top[:, None])
               & (cand_c < left[:, None] + cell) & (cand_c + fragment_size > left[:, None]))  # (N, tries)
    # Stable sort puts the free candidates first, in their random order.
    order = torch.sort(overlap.to(torch.uint8), dim=1, stable=True).indices[:, :k]  # (N, k)
    frag_r, frag_c = cand_r.gather(1, order), cand_c.gather(1, order)
    free = ~overlap.gather(1, order)  # (N, k) False only if fewer than k candidates were free

    # Gather the pixels: the digit (N, cell*cell) and the fragments (N, k*f*f), then one scatter by max.
    flat = digits.reshape(m, cell * cell).float()
    pool_flat = pool.reshape(m, pool_cell * pool_cell).float()
    f = torch.arange(fragment_size)
    src_r = cut_r[..., None, None] + f[:, None]  # (N, k, f, 1) rows inside the donor digit
    src_c = cut_c[..., None, None] + f[None, :]  # (N, k, 1, f)
    pieces = pool_flat[donors[..., None, None], src_r * pool_cell + src_c]  # (N, k, f, f)
    pieces = (pieces * free[..., None, None]).flatten(1)  # (N, k*f*f)
    index = torch.cat([_paste_indices(top[:, None], left[:, None], cell, s),
                       _paste_indices(frag_r, frag_c, fragment_size, s)], dim=1)  # (N, cell^2 + k*f*f)
    values = torch.cat([flat[which], pieces], dim=1)
    canvas = torch.zeros(n, s * s).scatter_reduce_(1, index, values, reduce="amax")  # (N, S*S)
    boxes = ink_boxes(digits[which])  # (N, 4) inside the cell
    boxes[:, 0] += top
    boxes[:, 1] += left
    return canvas.reshape(n, 1, s, s), labels[which].long(), boxes


def load_cluttered_digits(
    split: str = "train",
    num_images: Optional[int] = None,
    seed: int = 0,
    canvas_size: int = CANVAS_SIZE,
    num_fragments: int = NUM_FRAGMENTS,
    fragment_size: int = FRAGMENT_SIZE,
    position_step: int = POSITION_STEP,
    position_offset: tuple[int, int] = (0, 0),
    fraction: float = 1.0,
    digit_size: Optional[int] = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """A fixed set of cluttered canvases for one split, made only from that split's digits.

    Returns images (N, 1, S, S) float32 in [0, 1], labels (N,) int64 and boxes (N, 4) int64 as
    (top, left, height, width) of the digit's ink in pixels. N defaults to ``CLUTTERED_SIZES[split]``
    (10,000 / 2,000 / 2,000). The same arguments always give the same canvases; ``seed`` draws another
    set from the same digits (the digit split itself is the fixed one of :func:`vitedu.digits.load_digits`).
    ``fraction`` < 1 makes the canvases from a stratified share of the split's digits only, drawn with ``seed``
    as ``TrainConfig.train_fraction`` draws it (fewer distinct digits, as many canvases).
    ``digit_size`` rescales every whole digit to that many pixels a side (:func:`rescale_digits`, bilinear)
    while the clutter stays 4x4 pieces of the 8x8 digits: a test of what the task's one digit size taught a
    model (chapter 8). ``None`` (or 8) is the task as trained; the random draws are the same for every size.
    Training in :mod:`vitedu.train` draws *fresh* training canvases every epoch with :func:`make_cluttered`.
    """
    splits = load_digits()
    if split not in splits:
        raise ValueError(f"split must be one of {sorted(splits)}, got {split!r}")
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction is the share of the {split} digits to make canvases from, in (0, 1]; got "
                         f"{fraction!r} (1 uses them all)")
    digits, labels = stratified_subset(splits[split], fraction, seed)
    generator = torch.Generator().manual_seed(seed * 7_919 + _SPLIT_SEED[split])
    n = CLUTTERED_SIZES[split] if num_images is None else num_images
    pool = digits.float() / DIGITS_MAX  # (M, 1, 8, 8) in [0, 1]
    whole = pool if digit_size is None else rescale_digits(pool, digit_size)
    if 2 * whole.shape[-1] > canvas_size:
        raise ValueError(f"digit_size={digit_size} leaves no room for clutter on a {canvas_size}x{canvas_size} "
                         f"canvas; use at most {canvas_size // 2}")
    return make_cluttered(whole, labels, n, generator, canvas_size=canvas_size,
                          num_fragments=num_fragments, fragment_size=fragment_size, position_step=position_step,
                          position_offset=position_offset, clutter_pool=pool)


def normalise_canvases(images: Tensor) -> Tensor:
    """Canvases in [0, 1] -> what the cluttered-digit models read: ``(images - CLUTTERED_MEAN) / CLUTTERED_STD``.
    The one normalisation of the task: :class:`ClutteredLoader` applies it in training, and the models' own
    ``pretrained_cfg`` records it, so ``vitedu.create_transform(model)(images)`` gives the same for a model
    that carries one; this function serves the rest (a convnet, a bare encoder)."""
    return (images - CLUTTERED_MEAN[0]) / CLUTTERED_STD[0]


class ClutteredLoader:
    """Mini-batches of *fresh* cluttered canvases: every epoch draws new positions and new clutter.

    for images, labels in loader:   # images (batch, 1, S, S) float32, normalised; labels (batch,) int64

    A fixed training set of canvases would let a model memorise them; drawing new ones every epoch is
    data augmentation for free (the digits stay the same 1,259 training digits). Like
    :class:`vitedu.loaders.TensorLoader`, ``set_epoch(e)`` makes the canvases depend only on (seed, epoch),
    so a resumed run sees the same batches as an uninterrupted one. ``augment`` (e.g.
    :func:`vitedu.augment.digits_augment`) transforms the pool of 8x8 digits before each epoch's canvases are
    drawn, so the digit varies *inside* its cell too; the boxes follow the augmented ink.

    ``grid_epochs`` > 0 is a curriculum: the first ``grid_epochs`` epochs put the digit on the patch grid
    (``position_step=GRID_STEP``), the easy case where every digit looks the same to the patch embedding, and
    only then at the loader's own ``position_step`` (e.g. 1, anywhere): the model learns to read a digit first,
    then to read it at every shift.

    Several processes (``world_size`` > 1, see vitedu.distributed): every process draws the same canvases and
    keeps share ``rank`` of each batch (canvases rank, rank + world_size, ...), as ``TensorLoader`` does.

    ``window`` > 0 with ``window_epochs`` > 0 makes ``window_epochs`` epochs from epoch ``window_start`` on
    cheaper: each batch also carries the patches of a ``window`` x ``window`` block around its digit
    (:func:`window_patches`), and the model sees only those (``for images, labels, keep in loader``;
    ``model(images, keep=keep)``).
    """

    def __init__(
        self, digits: Tensor, labels: Tensor, num_images: int, batch_size: int,
        mean: tuple[float, ...] = CLUTTERED_MEAN, std: tuple[float, ...] = CLUTTERED_STD,
        device: torch.device | str = "cpu", seed: int = 0, augment: Optional[Augment] = None,
        grid_epochs: int = 0, window: int = 0, window_epochs: int = 0, window_start: int = 0,
        patch_size: int = GRID_STEP, rank: int = 0, world_size: int = 1,
        **generator_kwargs: int,
    ) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, world_size) = [0, {world_size}), got rank {rank}")
        if world_size > 1 and (batch_size < world_size or 0 < num_images % batch_size < world_size):
            raise ValueError(f"{world_size} processes cannot share every batch of {batch_size} canvases out of "
                             f"{num_images} (the last has {num_images % batch_size}): every process needs at least "
                             f"one canvas of each; change the batch size or the number of processes")
        self.digits, self.labels = digits.float() / DIGITS_MAX, labels  # (M, 1, 8, 8) in [0, 1], (M,)
        self.augment = augment
        self.num_images, self.batch_size, self.generator_kwargs = num_images, batch_size, generator_kwargs
        self.device, self.seed, self.epoch = torch.device(device), seed, 0
        self.grid_epochs = grid_epochs
        self.window, self.window_epochs, self.window_start = window, window_epochs, window_start
        self.patch_size, self.rank, self.world_size = patch_size, rank, world_size
        self.mean, self.std = mean[0], std[0]

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return math.ceil(self.num_images / self.batch_size)

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        generator = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        digits = self.digits if self.augment is None else self.augment(self.digits, generator)  # (M, 1, 8, 8)
        kwargs = self.generator_kwargs
        if self.epoch < self.grid_epochs:  # the curriculum's first part: the digit on the patch grid
            kwargs = {**kwargs, "position_step": GRID_STEP}
        images, labels, boxes = make_cluttered(digits, self.labels, self.num_images, generator,
                                               **kwargs)  # drawn in random order already
        images = (images - self.mean) / self.std
        keep = None
        if self.window and 0 <= self.epoch - self.window_start < self.window_epochs:  # a window of patches each
            grid = images.shape[-1] // self.patch_size
            keep = window_patches(boxes, self.window, grid, self.patch_size, generator)  # (N, window^2)
        for i in range(len(self)):
            batch = slice(i * self.batch_size + self.rank, (i + 1) * self.batch_size, self.world_size)  # this share
            if keep is None:
                yield images[batch].to(self.device), labels[batch].to(self.device)
            else:
                yield images[batch].to(self.device), labels[batch].to(self.device), keep[batch].to(self.device)


def cluttered_loaders(config: Any, device: torch.device | str = "cpu", rank: int = 0,
                      world_size: int = 1) -> dict[str, Any]:
    """Cluttered digits for training: fresh training canvases every epoch, fixed val and test canvases.

    ``config`` is a ``vitedu.config.TrainConfig`` (its ``augment``, ``batch_size``, ``seed``, ``position_step``,
    ``grid_epochs``, ``train_fraction`` and ``train_on_val`` are read). ``train_fraction`` < 1 keeps a stratified
    share of the training *digits* (the whole digits and the clutter are both cut from that share); every epoch
    still draws the same number of canvases from them. ``rank`` of ``world_size`` processes trains on its share of
    every batch and scores its share of val and test (``vitedu.train.evaluate`` adds the shares up).
    Returns {"train": ClutteredLoader, "val"/"test": TensorLoader}."""
    if config.augment not in ("none", "digits", "digits_warp"):
        raise ValueError("cluttered_digits draws new canvases every epoch, and can shift each digit inside its cell "
                         "(augment='digits') or warp it about its centre (augment='digits_warp'): use augment "
                         f"'none', 'digits' or 'digits_warp', got {config.augment!r}")
    splits = load_digits()
    train = stratified_subset(splits["train"], config.train_fraction, config.seed)
    if config.train_on_val:
        train = (torch.cat([train[0], splits["val"][0]]), torch.cat([train[1], splits["val"][1]]))
    common = dict(mean=CLUTTERED_MEAN, std=CLUTTERED_STD, device=device, rank=rank, world_size=world_size)
    step = config.position_step
    fixed = {name: load_cluttered_digits(name, position_step=step)[:2] for name in ("val", "test")}
    return {
        "train": ClutteredLoader(*train, CLUTTERED_SIZES["train"], config.batch_size, seed=config.seed,
                                 augment=AUGMENTATIONS[config.augment], position_step=step,
                                 grid_epochs=config.grid_epochs, window=config.window_tokens,
                                 window_epochs=config.window_epochs, window_start=config.window_start,
                                 **common),
        **{name: TensorLoader(*fixed[name], 500, max_value=1.0, **common) for name in fixed},
    }


__all__ = ["CANVAS_SIZE", "CLUTTERED_SIZES", "ClutteredLoader", "FRAGMENT_SIZE",
           "GRID_STEP", "NUM_FRAGMENTS", "POSITION_STEP", "cluttered_loaders", "ink_boxes", "load_cluttered_digits",
           "make_cluttered", "normalise_canvases", "rescale_digits", "window_patches"]
