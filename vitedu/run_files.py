"""A training run's files: checkpoints that resume it exactly, and the weights of a finished model.

    # after every epoch
    save_checkpoint(out, model, optimizer, scaler, config, history, epoch, step)
    # resume
    state = load_checkpoint(out, model, optimizer, scaler)

Tensors go into safetensors files (no pickle, so loading cannot run code), everything else into JSON; every file
is written atomically (a temporary name, then a rename), and each carries the epoch, so a checkpoint torn by a
crash while saving is refused, not half-loaded. ``save_weights`` writes a finished model for shipping.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Optional

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from .checkpoints import CheckpointError

MODEL_FILE, OPTIMIZER_FILE, STATE_FILE = "model.safetensors", "optimizer.safetensors", "train_state.json"
TEACHER_FILE = "teacher.safetensors"


def refuse_file_as_folder(out: str | os.PathLike | None, name: str = "out") -> None:
    """A CheckpointError, before any work, when the checkpoint folder ``out`` is an existing file (the first save,
    after a whole epoch, would fail). ``name``: how the caller's user gave it (``"--out"`` on a command line)."""
    if out is not None and Path(out).exists() and not Path(out).is_dir():
        raise CheckpointError(f"{name} must be a folder for the run's checkpoints; got {str(out)!r}, which is a "
                              f"file: pick another path")


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write`` on a temporary name beside ``path``, then rename: a crash mid-write leaves the old file."""
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


def save_state_dict(path: Path, module: nn.Module, metadata: Optional[dict[str, str]] = None) -> None:
    """A module's weights as a safetensors file (CPU, contiguous), written atomically."""
    weights = {k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}
    atomic_write(Path(path), lambda p: save_file(weights, str(p), metadata=metadata))


def save_checkpoint(
    out: str | os.PathLike, model: nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
    config: Any, history: Any, epoch: int, step: int,
) -> None:
    """Write model weights, optimizer state and a JSON of everything else (``config`` and ``history`` are the run's
    dataclasses, the model's ``pretrained_cfg``, the step) into the folder ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = {"epoch": str(epoch), "step": str(step)}  # in every file, to detect a torn checkpoint
    opt = optimizer.state_dict()
    # AdamW's state is {param index: {"step", "exp_avg", "exp_avg_sq"}}: flatten to "state.3.exp_avg".
    opt_tensors = {f"state.{i}.{k}": v.detach().cpu().contiguous().clone()
                   for i, s in opt["state"].items() for k, v in s.items()}
    state = {"config": asdict(config), "history": asdict(history), "epoch": epoch, "step": step,
             "optimizer_param_groups": opt["param_groups"], "scaler": scaler.state_dict()}
    cfg = getattr(model, "pretrained_cfg", None)
    if cfg is not None:
        state["pretrained_cfg"] = cfg
    save_state_dict(out / MODEL_FILE, model, stamp)
    atomic_write(out / OPTIMIZER_FILE, lambda p: save_file(opt_tensors, str(p), metadata=stamp))
    atomic_write(out / STATE_FILE, lambda p: p.write_text(json.dumps(state, indent=1)))


def load_checkpoint(
    out: str | os.PathLike, model: nn.Module, optimizer: Optional[torch.optim.Optimizer] = None,
    scaler: Optional[torch.amp.GradScaler] = None,
) -> dict[str, Any]:
    """Restore ``model`` (and optimizer, scaler) in place from the folder ``out``; return the JSON state."""
    out = Path(out)
    state = json.loads((out / STATE_FILE).read_text())
    device = next(model.parameters()).device
    model.load_state_dict(load_file(str(out / MODEL_FILE), device=str(device)))
    if optimizer is not None:
        flat = load_file(str(out / OPTIMIZER_FILE), device=str(device))
        nested: dict[int, dict[str, Tensor]] = {}
        for key, value in flat.items():
            _, index, name = key.split(".", 2)
            nested.setdefault(int(index), {})[name] = value
        optimizer.load_state_dict({"state": nested, "param_groups": state["optimizer_param_groups"]})
    if scaler is not None and state.get("scaler"):
        scaler.load_state_dict(state["scaler"])
    for name in (MODEL_FILE, OPTIMIZER_FILE) if optimizer is not None else (MODEL_FILE,):
        with safe_open(str(out / name), framework="pt") as f:
            meta = f.metadata() or {}
        if meta.get("epoch") != str(state["epoch"]):
            raise CheckpointError(f"{out / name} is from epoch {meta.get('epoch')} but {STATE_FILE} says epoch "
                             f"{state['epoch']}: the checkpoint was interrupted while saving; re-run that epoch")
    return state



def save_weights(path: str | os.PathLike, model: nn.Module, config: Any, val_acc: float, test_acc: float) -> None:
    """Write a trained model for shipping: weights only (no optimizer); the recipe (``config``, a
    ``TrainConfig``), the accuracies and the model's ``pretrained_cfg`` (input size, mean, std) as metadata.

    ``vitedu.create_model(config.model, pretrained=True)`` loads such a file once its registry entry names it
    (``vitedu.registry.MODELS``); ``vitedu.shipped.shipped_metadata`` reads the metadata back.
    """
    meta = {"model": config.model, "config": json.dumps(asdict(config)), "val_acc": f"{val_acc:.4f}",
            "test_acc": f"{test_acc:.4f}"}
    cfg = getattr(model, "pretrained_cfg", None)
    if cfg is not None:
        meta["pretrained_cfg"] = json.dumps({k: v for k, v in cfg.items() if k not in ("source", "trained")})
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    save_state_dict(Path(path), model, meta)


__all__ = ["MODEL_FILE", "OPTIMIZER_FILE", "STATE_FILE", "TEACHER_FILE", "atomic_write", "load_checkpoint",
           "refuse_file_as_folder", "save_checkpoint", "save_state_dict", "save_weights"]
