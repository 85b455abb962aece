"""Small helpers every chapter uses: pick a device, make a run repeatable, count parameters."""

from __future__ import annotations

import os
import random

import numpy as np
import torch
from torch import nn


def get_device(prefer: str | None = None) -> torch.device:
    """The best available accelerator: CUDA, then Apple's MPS, then the CPU.

    Code in vitedu never hard-codes a device; it creates new tensors *like* its inputs. Pass
    ``prefer="cpu"`` (or set the environment variable ``VITEDU_DEVICE=cpu``) to force a device.
    """
    prefer = prefer or os.environ.get("VITEDU_DEVICE")
    if prefer is not None:
        return torch.device(prefer)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int = 0) -> None:
    """Seed Python, NumPy and PyTorch (all devices) so that a run can be repeated exactly."""
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - the legacy global generator is what user code calls
    torch.manual_seed(seed)  # also seeds every CUDA device


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of scalar parameters in ``model`` (the ViT paper's "Params" column)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
