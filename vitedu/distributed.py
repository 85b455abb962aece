"""Training on several processes with PyTorch's own engine: torchrun and DistributedDataParallel.

    # 2 processes
    torchrun --nproc_per_node=2 -m vitedu.train --dataset digits --out runs/ddp
    # 1 process, as before
    python -m vitedu.train --dataset digits --out runs/one

torchrun (installed with torch) starts N copies of the same program and tells each who it is through
environment variables: RANK (0 .. N-1), LOCAL_RANK (its index on this machine, which picks its GPU) and
WORLD_SIZE (N). Every process holds a full copy of the model and computes the loss on its own share of
each batch. After ``backward()``, DistributedDataParallel (DDP) averages the gradients over the
processes (an all-reduce), so every copy takes the same optimizer step from the same starting weights
(DDP copies rank 0's weights to the others when it wraps the model) and the copies stay identical.
The processes talk through NCCL between CUDA GPUs and through Gloo on CPUs.

How ``vitedu.train`` uses it:
- batches: ``--batch-size`` is the global batch; each process takes a disjoint share of it
  (``TensorLoader(rank=, world_size=)``), so the recipe and the number of steps do not change with N;
- metrics: sums (loss, correct, seen) are added up over the processes, so every rank logs the same
  numbers, those of the whole batch and the whole validation set;
- files: only rank 0 prints and writes checkpoints; on ``--resume`` every rank reads them (on one
  machine, or a folder all machines share).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

import torch
import torch.distributed as dist
from torch import nn


@dataclass(frozen=True)
class Process:
    """Who this process is: ``rank`` of ``world_size`` processes, ``local_rank`` on its own machine."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Rank 0 alone prints and writes files."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def current() -> Process:
    """This process, as the initialised process group sees it (a lone process when there is none)."""
    if not (dist.is_available() and dist.is_initialized()):
        return Process()
    return Process(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0)))


class SetupError(ValueError):
    """A process group that cannot start as asked (a device torchrun cannot use); the message says what to change."""


def setup(device: Optional[str] = None) -> tuple[Process, Optional[torch.device], bool]:
    """Join the process group that torchrun announced; returns (process, its device, whether we started it).

    Without torchrun (no WORLD_SIZE > 1 in the environment) nothing happens: (Process(), the requested
    device or None, False). Under torchrun, each process takes GPU number LOCAL_RANK and NCCL when CUDA
    is present (and ``device`` is not "cpu"), else the CPU and Gloo.
    """
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    if world_size <= 1 or dist.is_initialized():
        return current(), torch.device(device) if device else None, False
    if device is not None and device not in ("cpu", "cuda"):
        raise SetupError(f"multi-process training runs on 'cpu' (Gloo) or 'cuda' (NCCL), got --device {device!r}; "
                         "leave --device out to use the GPUs when there are any")
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    use_cuda = torch.cuda.is_available() and device != "cpu"
    if use_cuda:
        if local_rank >= torch.cuda.device_count():
            raise SetupError(f"process {local_rank} on this machine needs GPU {local_rank}, but there are only "
                             f"{torch.cuda.device_count()}: start at most that many (--nproc_per_node)")
        torch.cuda.set_device(local_rank)
    elif device == "cuda":
        raise SetupError("--device cuda was asked for, but torch sees no CUDA GPU; use --device cpu")
    dist.init_process_group("nccl" if use_cuda else "gloo")
    return current(), torch.device("cuda", local_rank) if use_cuda else torch.device("cpu"), True


def cleanup(started: bool) -> None:
    """Leave the process group, if ``setup`` started it."""
    if started and dist.is_initialized():
        dist.destroy_process_group()


def barrier() -> None:
    """Wait until every process gets here (nothing to wait for in a lone process)."""
    if current().distributed:
        dist.barrier()


def all_sum(values: list[float], device: torch.device) -> list[float]:
    """Add each number up over all processes; in a lone process, the numbers themselves."""
    if not current().distributed:
        return values
    total = torch.tensor(values, dtype=torch.float64, device=device)  # (len(values),)
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    return total.tolist()


def wrap(model: nn.Module, device: torch.device) -> nn.Module:
    """DistributedDataParallel(model) when there are several processes, else the model itself.

    Train through the wrapper (its backward averages the gradients); save, evaluate and inspect the model
    itself, whose parameters the wrapper shares. Every vitedu model uses all its parameters in each step (a DeiT
    without a teacher averages its two heads), so DDP need not search the graph for unused ones.
    """
    if not current().distributed:
        return model
    device_ids = [device.index] if device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=device_ids)


__all__ = ["Process", "SetupError", "all_sum", "barrier", "cleanup", "current", "setup", "wrap"]
