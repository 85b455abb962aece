"""Is an explanation faithful? Deletion and insertion curves (Petsiuk et al., 2018).

An attention map *looks* like an explanation; whether the model *uses* the patches it highlights is a
separate, testable question. Rank the patches by an explanation (most important first), then

- **deletion**: blank the patches one by one in that order and watch the probability of the true class;
  a faithful ranking makes it fall fast (a small area under the curve);
- **insertion**: start from a blank canvas and put the patches back in that order; a faithful ranking
  makes the probability rise fast (a large area under the curve).

A random order is the baseline every explanation must beat. The explanations compared in chapter 8:

    scores = {"rollout": cls_attention(attention_rollout(maps)),
              "last [CLS]": cls_attention(maps[-1].mean(1)),
              "grad x input": gradient_times_input(model, x, y, 4, fill),
              "random": torch.rand(B, 64)}
    deleted, inserted = deletion_insertion_curves(
        model, x, y, scores["rollout"], 4, fill)
    print(curve_area(deleted).mean(), curve_area(inserted).mean())
    # all four rankings in one call, (4, B, K + 1) each: the canvases they
    # share are computed once
    deleted, inserted = deletion_insertion_curves(
        model, x, y, torch.stack(list(scores.values())), 4, fill)

"Blank" is a value the model sees where there is no ink (``fill``): for canvases normalised with
``mean``/``std`` it is ``(0 - mean) / std``, the background, not 0. Compute it as the canvases were
computed (``((torch.zeros(()) - mean) / std).item()`` for float32 canvases), so that background pixels
equal it exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def _patch_pixels(patches: Tensor, grid_size: tuple[int, int], patch_size: int) -> Tensor:
    """Spread a value per patch over the patch's pixels.

    patches (batch, num_patches), row by row -> (batch, 1, grid_h * P, grid_w * P), each pixel the value of its
    patch.
    """
    grid_h, grid_w = grid_size
    grid = patches.reshape(-1, 1, grid_h, grid_w)
    return grid.repeat_interleave(patch_size, dim=-2).repeat_interleave(patch_size, dim=-1)


def patch_mask(order: Tensor, num_kept: int, grid_size: tuple[int, int], patch_size: int) -> Tensor:
    """Pixel mask of the first ``num_kept`` patches of ``order``.

    order (batch, num_patches) patch indices, row by row -> (batch, 1, grid_h * P, grid_w * P) float, 1 on
    the pixels of the chosen patches and 0 elsewhere.
    """
    chosen = torch.zeros(order.shape, device=order.device)
    chosen.scatter_(1, order[:, :num_kept], 1.0)  # (batch, num_patches)
    return _patch_pixels(chosen, grid_size, patch_size)


@torch.no_grad()
def deletion_insertion_curves(
    model: nn.Module, images: Tensor, labels: Tensor, scores: Tensor, patch_size: int, fill: float,
    step: int = 1, kept: Optional[Sequence[int]] = None, batch_size: int = 256,
) -> tuple[Tensor, Tensor]:
    """Probability of the true class as patches are deleted, and as they are inserted, in the order of ``scores``.

    images (batch, C, H, W) as the model takes them, labels (batch,), scores (batch, num_patches) with the
    highest score first -> (deletion, insertion), each (batch, K + 1) with K = ceil(num_patches / step):
    column k is after k * step patches were blanked (deletion) or restored on a blank canvas (insertion),
    so deletion[:, 0] is the intact image and insertion[:, -1] too. Ties in ``scores`` are broken by patch
    index (a stable sort), so the curves are reproducible. Several rankings of the same images at once:
    scores (orders, batch, num_patches) -> curves (orders, batch, K + 1).

    ``kept`` replaces the even steps by explicit numbers of patches, e.g. ``(0, 2, 4, 8, 16, 32, 64)``: fine
    where the curves fall or rise, coarse where they are flat, for fewer forward passes. It must start at 0,
    end at num_patches and increase; column k is then after kept[k] patches. Pass the same ``kept`` to
    :func:`curve_area`.

    Every distinct canvas goes through the model once (in batches of ``batch_size``), and many repeat: the
    intact image and the blank canvas end the curves of every ranking, and a patch whose pixels all equal
    ``fill`` already (background) looks the same blanked or kept, so two masks that differ only in such
    patches give the same canvas. A canvas is therefore named by its image and the non-blank patches it
    shows. (Compute ``fill`` as the images were normalised, in their dtype, or no background patch equals
    it exactly and fewer canvases are shared; the curves are the same either way.)
    """
    batch, _, height, width = images.shape
    grid = (height // patch_size, width // patch_size)
    num_patches = grid[0] * grid[1]
    one_ranking = scores.dim() == 2
    if scores.shape[-2:] != (batch, num_patches) or scores.dim() not in (2, 3):
        raise ValueError(f"expected one score per patch, (batch={batch}, {num_patches}) for a {grid[0]}x{grid[1]} "
                         f"grid of {patch_size}-pixel patches, or (orders, {batch}, {num_patches}) for several "
                         f"rankings; got {tuple(scores.shape)}")
    if step < 1:
        raise ValueError(f"step is the number of patches moved per point of the curve, at least 1; got {step}")
    points = [*range(0, num_patches, step), num_patches] if kept is None else [int(k) for k in kept]
    if points[0] != 0 or points[-1] != num_patches or any(b <= a for a, b in zip(points, points[1:])):
        raise ValueError(f"kept must start at 0, end at the {num_patches} patches and increase; got {list(kept)}")
    model.eval()
    scores = scores.to(images.device).reshape(-1, batch, num_patches)  # (orders, batch, num_patches)
    rank = scores.argsort(dim=-1, descending=True, stable=True).argsort(dim=-1)  # 0 = the highest score
    first_k = rank[:, :, None, :] < torch.tensor(points, device=images.device)[:, None]  # (orders, batch, K+1, P)
    shown = torch.stack([~first_k, first_k])  # (2, ...): deletion shows the other patches, insertion the first k
    # Patches that are not background: only these can make two canvases of one image differ.
    inked = F.max_pool2d((images != fill).any(dim=1, keepdim=True).float(), patch_size).flatten(1) > 0
    shown = shown & inked[:, None, :]  # (2, orders, batch, K+1, num_patches)
    image_of = torch.arange(batch, device=images.device)[:, None, None].expand(shown.shape[:-1] + (1,))
    names = torch.cat([image_of, shown.long()], dim=-1).flatten(0, -2)  # one row per canvas: image, patches
    distinct, which = torch.unique(names, dim=0, return_inverse=True)
    probs = []
    for part in distinct.split(batch_size):
        index, pixels = part[:, 0], _patch_pixels(part[:, 1:].to(images.dtype), grid, patch_size)
        canvases = images[index] * pixels + fill * (1 - pixels)  # (part, C, H, W)
        p = F.softmax(model(canvases).float(), dim=-1)  # (part, classes)
        probs.append(p.gather(1, labels[index, None])[:, 0])
    deletion, insertion = torch.cat(probs)[which].reshape(shown.shape[:-1])  # (orders, batch, K+1) each
    return (deletion[0], insertion[0]) if one_ranking else (deletion, insertion)


def curve_area(curve: Tensor, kept: Optional[Sequence[int]] = None) -> Tensor:
    """Area under a deletion or insertion curve, with the x axis scaled to [0, 1] (trapezoid rule).

    (batch, K + 1) -> (batch,). A curve that stays at 1 has area 1; one that drops to 0 at once has area ~0.
    Points are evenly spaced unless ``kept`` (the patches moved at each point, as given to
    :func:`deletion_insertion_curves`) says where they lie.
    """
    if kept is None:
        return torch.trapezoid(curve, dx=1.0 / (curve.shape[1] - 1), dim=1)
    if len(kept) != curve.shape[1]:
        raise ValueError(f"kept has {len(kept)} points but the curve {curve.shape[1]}; pass the same kept as to "
                         "deletion_insertion_curves")
    x = torch.tensor([float(k) for k in kept], dtype=curve.dtype, device=curve.device)
    return torch.trapezoid(curve, x / x[-1], dim=1)


def gradient_times_input(
    model: nn.Module, images: Tensor, labels: Tensor, patch_size: int, fill: float,
) -> Tensor:
    """Gradient x input per patch: the first-order estimate of what blanking each patch costs the true class.

    images (batch, C, H, W), labels (batch,) -> (batch, num_patches). For each pixel,
    d logit_y / d x * (x - fill): the change of the true class's logit, to first order, if that pixel went
    to the blank value; summed over a patch's pixels. Positive: the patch supports the true class.
    """
    model.eval()
    x = images.detach().clone().requires_grad_(True)
    logits = model(x)  # (batch, classes)
    (grad,) = torch.autograd.grad(logits.gather(1, labels[:, None]).sum(), x)
    contribution = (grad * (images - fill)).sum(dim=1, keepdim=True)  # (batch, 1, H, W)
    per_patch = F.avg_pool2d(contribution, patch_size) * patch_size**2  # (batch, 1, grid_h, grid_w): sums
    return per_patch.flatten(1).detach()


__all__ = ["curve_area", "deletion_insertion_curves", "gradient_times_input", "patch_mask"]
