"""The small convnet of the book: DeiT's teacher, and the baseline a ViT is compared with.

    teacher = ConvTeacher(in_chans=1, num_classes=10)   # (batch, 1, H, W) -> (batch, 10), any H, W >= 2

Convolutions build in locality and translation equivariance, which a ViT must otherwise learn from data;
distilling the convnet's predictions (``vitedu.deit.distillation_loss``) hands that bias to the ViT without
changing the ViT itself.
"""

from __future__ import annotations

from torch import nn


class ConvTeacher(nn.Sequential):
    """A small convnet, the teacher of DeiT-style distillation (Touvron et al., 2021).

    (batch, in_chans, H, W) -> (batch, num_classes). Three 3x3 convolutions (``width``, 2 ``width``, 2 ``width``
    channels), one max-pool, an adaptive 2x2 average pool, then a two-layer classifier with dropout.
    """

    def __init__(self, in_chans: int, num_classes: int, width: int = 32) -> None:
        super().__init__(
            nn.Conv2d(in_chans, width, 3, padding=1), nn.GELU(),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.GELU(), nn.MaxPool2d(2),
            nn.Conv2d(2 * width, 2 * width, 3, padding=1), nn.GELU(), nn.AdaptiveAvgPool2d(2),
            nn.Flatten(), nn.Linear(8 * width, 4 * width), nn.GELU(), nn.Dropout(0.3),
            nn.Linear(4 * width, num_classes),
        )


__all__ = ["ConvTeacher"]
