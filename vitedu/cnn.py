"""The small convnet of the book: DeiT's teacher, and the baseline a ViT is compared with.

    # (batch, 1, H, W) -> (batch, 10), any H, W >= 2
    teacher = ConvTeacher(in_chans=1, num_classes=10)
    # weights + the arguments that rebuild it
    save_conv_teacher("cnn.safetensors", teacher)
    # e.g. a trained baseline, distilled into a ViT
    teacher = load_conv_teacher("cnn.safetensors")

Convolutions build in locality and translation equivariance, which a ViT must otherwise learn from data;
distilling the convnet's predictions (``vitedu.deit.distillation_loss``) hands that bias to the ViT without
changing the ViT itself.
"""

from __future__ import annotations

import os

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn


class ConvTeacher(nn.Sequential):
    """A small convnet, the teacher of DeiT-style distillation (Touvron et al., 2021).

    (batch, in_chans, H, W) -> (batch, num_classes). Three 3x3 convolutions (``width``, 2 ``width``, 2 ``width``
    channels), one max-pool, an adaptive 2x2 average pool, then a two-layer classifier with dropout.

    ``stride=2`` makes the first convolution a strided stem: the later convolutions then see a quarter of the
    positions, so the network costs about a quarter of the compute with the very same parameters (a CNN
    baseline as fast per image as a small ViT on a CPU).
    """

    def __init__(self, in_chans: int, num_classes: int, width: int = 32, stride: int = 1) -> None:
        self.in_chans, self.num_classes, self.width, self.stride = in_chans, num_classes, width, stride
        super().__init__(
            nn.Conv2d(in_chans, width, 3, stride=stride, padding=1), nn.GELU(),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.GELU(), nn.MaxPool2d(2),
            nn.Conv2d(2 * width, 2 * width, 3, padding=1), nn.GELU(), nn.AdaptiveAvgPool2d(2),
            nn.Flatten(), nn.Linear(8 * width, 4 * width), nn.GELU(), nn.Dropout(0.3),
            nn.Linear(4 * width, num_classes),
        )


_ARGS = ("in_chans", "num_classes", "width", "stride")


def save_conv_teacher(path: str | os.PathLike, model: ConvTeacher, half: bool = False) -> None:
    """Write a ConvTeacher's weights and, as the file's metadata, the arguments that rebuild it.
    ``half`` stores float16 (half the size; ``load_conv_teacher`` returns float32 weights either way)."""
    weights = {k: (v.half() if half and v.is_floating_point() else v).detach().cpu().contiguous()
               for k, v in model.state_dict().items()}
    save_file(weights, str(path), metadata={name: str(getattr(model, name)) for name in _ARGS})


def load_conv_teacher(path: str | os.PathLike, device: torch.device | str = "cpu") -> ConvTeacher:
    """The ConvTeacher ``save_conv_teacher`` wrote to ``path``, in float32, in eval mode."""
    with safe_open(str(path), framework="pt") as f:
        metadata = f.metadata() or {}
        missing = [name for name in _ARGS if name not in metadata]
        if missing:
            raise ValueError(f"{path} does not say how to rebuild its convnet (no {', '.join(missing)} in its "
                             "metadata): write it with vitedu.cnn.save_conv_teacher")
        model = ConvTeacher(**{name: int(metadata[name]) for name in _ARGS})
        model.load_state_dict({k: f.get_tensor(k).float() for k in f.keys()})
    return model.to(device).eval()


__all__ = ["ConvTeacher", "load_conv_teacher", "save_conv_teacher"]
