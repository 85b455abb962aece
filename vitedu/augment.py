"""Data augmentation: whole batches at once, on the batch's device, in plain torch (no torchvision).

Every augmentation is a function ``(images (batch, C, H, W) in [0, 1], generator) -> same shape``. Randomness
comes from a CPU ``torch.Generator``, so a seed gives the same augmentations on CPU, CUDA and MPS.
``AUGMENTATIONS`` names the recipes the training presets use.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

Augment = Callable[[Tensor, torch.Generator], Tensor]  # (batch, C, H, W) in [0, 1] -> same shape


def _rand(shape: tuple[int, ...], generator: torch.Generator, like: Tensor) -> Tensor:
    return torch.rand(shape, generator=generator).to(like.device)


def random_crop(images: Tensor, padding: int, generator: torch.Generator) -> Tensor:
    """Pad with zeros, then cut a random H x W window per image: a shift by up to ``padding`` pixels.

    (batch, C, H, W) -> (batch, C, H, W). The standard CIFAR augmentation (padding 4); with padding 1 on
    8x8 digits it moves each digit by at most one pixel.
    """
    batch, _, height, width = images.shape
    padded = F.pad(images, (padding, padding, padding, padding))  # (batch, C, H + 2p, W + 2p)
    dy = torch.randint(0, 2 * padding + 1, (batch,), generator=generator).to(images.device)
    dx = torch.randint(0, 2 * padding + 1, (batch,), generator=generator).to(images.device)
    rows = (dy[:, None] + torch.arange(height, device=images.device))[:, None, :, None]  # (batch, 1, H, 1)
    cols = (dx[:, None] + torch.arange(width, device=images.device))[:, None, None, :]  # (batch, 1, 1, W)
    b = torch.arange(batch, device=images.device)[:, None, None, None]
    c = torch.arange(images.shape[1], device=images.device)[None, :, None, None]
    return padded[b, c, rows, cols]


def random_hflip(images: Tensor, generator: torch.Generator) -> Tensor:
    """Mirror each image left-right with probability 1/2 (never for digits: a mirrored 3 is no digit)."""
    flip = _rand((images.shape[0],), generator, images) < 0.5
    return torch.where(flip[:, None, None, None], images.flip(-1), images)


def random_affine(
    images: Tensor, generator: torch.Generator, degrees: float = 0.0, scale: float = 0.0,
    translate: float = 0.0, shear: float = 0.0,
) -> Tensor:
    """A random rotation (+-degrees), zoom (1 +- scale), shift (+- translate, as a fraction of the
    size) and shear (+-shear degrees) per image, resampled bilinearly with zero padding.

    (batch, C, H, W) -> (batch, C, H, W)
    """
    n = images.shape[0]
    u = _rand((5, n), generator, images) * 2 - 1  # five uniform numbers in [-1, 1] per image
    angle, zoom = u[0] * math.radians(degrees), 1 + u[1] * scale
    shift_x, shift_y, sh = u[2] * 2 * translate, u[3] * 2 * translate, u[4] * math.radians(shear)
    cos, sin = torch.cos(angle) / zoom, torch.sin(angle) / zoom
    # affine_grid maps output coordinates (in [-1, 1]) to input ones: the inverse transform.
    theta = torch.stack([
        torch.stack([cos, -sin + torch.tan(sh) * cos, shift_x], dim=1),
        torch.stack([sin, cos, shift_y], dim=1),
    ], dim=1)  # (batch, 2, 3)
    grid = F.affine_grid(theta.to(images.dtype), list(images.shape), align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def rand_augment_light(images: Tensor, generator: torch.Generator, magnitude: float = 0.3) -> Tensor:
    """A light RandAugment-style policy (Cubuk et al., 2020): each image gets one random photometric
    operation (brightness, contrast, saturation, solarize, equalise-like autocontrast, or nothing) and
    a random small affine warp, with strength ``magnitude`` in [0, 1].

    (batch, 3, H, W) in [0, 1] -> same shape
    """
    n = images.shape[0]
    op = (torch.rand(n, generator=generator) * 6).long().to(images.device)[:, None, None, None]
    m = (magnitude * (_rand((n,), generator, images) * 2 - 1))[:, None, None, None]  # signed strength
    gray = images.mean(dim=1, keepdim=True)  # (batch, 1, H, W)
    mean = gray.mean(dim=(2, 3), keepdim=True)  # (batch, 1, 1, 1)
    lo, hi = images.amin(dim=(1, 2, 3), keepdim=True), images.amax(dim=(1, 2, 3), keepdim=True)
    candidates = torch.stack([
        images,
        images * (1 + m),  # brightness
        mean + (images - mean) * (1 + m),  # contrast
        gray + (images - gray) * (1 + m),  # saturation
        torch.where(images > 1 - m.abs(), 1 - images, images),  # solarize the brightest pixels
        (images - lo) / (hi - lo).clamp_min(1e-3),  # autocontrast
    ])  # (ops, batch, C, H, W)
    out = candidates.gather(0, op.expand_as(images)[None]).squeeze(0).clamp(0, 1)
    return random_affine(out, generator, degrees=30 * magnitude, shear=15 * magnitude)


def digits_augment(images: Tensor, generator: torch.Generator) -> Tensor:
    """Shift each digit by up to one pixel (digits are small, 8x8, and their position varies a little)."""
    return random_crop(images, 1, generator)


def digits_warp(images: Tensor, generator: torch.Generator) -> Tensor:
    """Warp each digit a little about its centre, without moving it: rotate by up to 10 degrees, zoom by
    up to 10 %, shear by up to 10 degrees. New handwriting from the same digits, for cluttered digits, where
    the canvas already places each digit at a random pixel: a shift (``digits_augment``) would also move its ink
    off the patch grid during the on-grid epochs of the curriculum (``TrainConfig.grid_epochs``)."""
    return random_affine(images, generator, degrees=10.0, scale=0.1, shear=10.0)


def cifar_augment(images: Tensor, generator: torch.Generator) -> Tensor:
    """The standard CIFAR recipe: random crop with 4 pixels of padding, then a horizontal flip."""
    return random_hflip(random_crop(images, 4, generator), generator)


def cifar_augment_strong(images: Tensor, generator: torch.Generator) -> Tensor:
    """Crop + flip, then the light RandAugment-style policy."""
    return rand_augment_light(cifar_augment(images, generator), generator)


AUGMENTATIONS: dict[str, Optional[Augment]] = {
    "none": None, "digits": digits_augment, "digits_warp": digits_warp, "cifar": cifar_augment,
    "cifar_strong": cifar_augment_strong,
}
