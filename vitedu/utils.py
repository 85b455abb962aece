"""Small helpers every chapter uses: pick a device, make a run repeatable, count parameters, read a stored result."""

from __future__ import annotations

import os
import random
import urllib.request
from pathlib import Path

import numpy as np
import torch
from torch import nn


class DeviceError(ValueError):
    """A device name torch does not know, or a device this machine lacks; the message says what to use."""


def check_device(name: str | None) -> None:
    """A DeviceError when ``name`` (e.g. a ``--device`` option) is no device torch knows, or one this machine lacks.
    ``None`` means "the best available" and is always fine."""
    if name is None:
        return
    try:
        device = torch.device(name)
    except RuntimeError:
        raise DeviceError(f"device must be cpu, cuda, cuda:N or mps; got {name!r} (leave it unset for the best "
                          f"available)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise DeviceError(f"device {name!r} asks for a CUDA GPU, but torch sees none on this machine; use 'cpu', or "
                          f"leave it unset for the best available")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise DeviceError(f"device {name!r}: this machine has {torch.cuda.device_count()} CUDA GPU(s), numbered from 0")
    mps = getattr(torch.backends, "mps", None)
    if device.type == "mps" and not (mps is not None and mps.is_available()):
        raise DeviceError(f"device {name!r} asks for Apple's MPS, which this machine lacks; use 'cpu'")
    if device.type not in ("cpu", "cuda", "mps"):
        raise DeviceError(f"device must be cpu, cuda, cuda:N or mps; got {name!r}")


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


RESULTS_URL = "https://raw.githubusercontent.com/vitedu/vitedu/main/benchmarks/results/"


def stored_result(name: str) -> Path:
    """A file of the repository's ``benchmarks/results/`` (a stored run a chapter reads), e.g.
    ``stored_result("speedrun/summary.json")``: from the clone this vitedu comes from, else downloaded once into
    the working folder (on Colab, where only the package is installed) and read from there afterwards."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / name
    if path.exists():
        return path
    local = Path(name.replace("/", "_"))
    if not local.exists():
        urllib.request.urlretrieve(RESULTS_URL + name, local)
    return local
