"""Accuracy against the digit's offset from the patch grid: does a model read the digit wherever it is?

A ViT cuts the canvas into P x P patches. A digit whose 8x8 cell starts on the patch grid always produces
the same tokens; shifted by one pixel, every one of its patches holds different pixels. A convolution
is translation equivariant by construction, so a CNN reads a shifted digit as it reads an unshifted one;
a ViT must *learn* this from data (Dosovitskiy et al., 2021, section 3.1). The experiment:

    # (4, 4): rows = row offset, columns = column offset
    acc = offset_accuracy(model, patch_size=4)
    acc.min()   # the worst sub-patch shift

Each entry is the accuracy on canvases whose digit cell starts at ``offset + patch_size * k`` on each
axis: the same digits of the split at every offset, other positions and clutter drawn with one seed.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .cluttered import load_cluttered_digits, normalise_canvases


@torch.no_grad()
def offset_accuracy(
    model: nn.Module, patch_size: int = 4, split: str = "val", num_images: int = 1_000, seed: int = 1,
    batch_size: int = 100,
) -> Tensor:
    """Accuracy of ``model`` at every sub-patch offset of the digit.

    -> (patch_size, patch_size) float tensor; entry [r, c] is the accuracy on ``num_images`` canvases of
    ``split`` whose digit cell sits at row offset r and column offset c from the patch grid. The model is
    put in eval mode and fed canvases normalised as in training (``vitedu.cluttered.normalise_canvases``).
    ``batch_size`` trades memory for speed only: the accuracies do not depend on it.
    """
    if patch_size < 1:
        raise ValueError(f"patch_size must be a positive number of pixels, got {patch_size}")
    model.eval()
    device = next(model.parameters()).device
    acc = torch.zeros(patch_size, patch_size)
    for r in range(patch_size):
        for c in range(patch_size):
            images, labels, _ = load_cluttered_digits(split, num_images, seed=seed, position_step=patch_size,
                                                      position_offset=(r, c))
            images = normalise_canvases(images)  # (N, 1, 32, 32)
            correct = 0
            for i in range(0, len(labels), batch_size):
                logits = model(images[i:i + batch_size].to(device))  # (batch, classes)
                correct += (logits.argmax(-1).cpu() == labels[i:i + batch_size]).sum().item()
            acc[r, c] = correct / len(labels)
    return acc


__all__ = ["offset_accuracy"]
