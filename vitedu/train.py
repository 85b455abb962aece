"""Train a ViT: the loop, its schedule, checkpoints that resume, and a command line.

    # 8x8 digits, offline, on a CPU
    python -m vitedu.train --dataset digits
    # a GPU and the internet (once)
    python -m vitedu.train --dataset cifar10 --out runs/c10
    # your own images, a folder per class
    python -m vitedu.train --dataset imagefolder --data-root my_images
    # 2 processes (vitedu.distributed)
    torchrun --nproc_per_node=2 -m vitedu.train --dataset digits

The recipe is DeiT's (Touvron et al., 2021) scaled down: AdamW, linear warm-up then cosine decay,
label smoothing, gradient clipping, weight decay on weight matrices only, data augmentation, and
mixed precision on CUDA (``precision="bf16"`` also on the CPU). ``fit`` is the whole story in one function;
everything else is a helper. Under torchrun the same ``fit`` trains one share of every batch per process.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import nn
from tqdm import tqdm  # console bars: tqdm.auto warns on import in a notebook without ipywidgets

from . import distributed, imagefolder
from .augment import AUGMENTATIONS
from .checkpoints import CheckpointError
from .cnn import ConvTeacher, load_conv_teacher
from .config import PRESETS, ConfigError, TrainConfig, check_runnable
from .data import make_loaders
from .deit import distillation_loss, distillation_token_loss
from .loaders import DatasetError, TensorLoader
from .models import create_model
from .optimizers import make_optimizer, param_groups
from .preprocess import PRETRAINED_CFG_KEYS, attach_pretrained_cfg, make_pretrained_cfg, model_input_size
from .registry import MODELS, model_kwargs
from .run_files import (
    STATE_FILE,
    TEACHER_FILE,
    load_checkpoint,
    refuse_file_as_folder,
    save_checkpoint,
    save_state_dict,
    save_weights,
)
from .utils import DeviceError, check_device, count_parameters, get_device, seed_everything


@dataclass
class History:
    """One row per epoch; plain lists, so ``plt.plot(h.epoch, h.val_acc)`` just works."""

    epoch: list = field(default_factory=list)
    train_loss: list = field(default_factory=list)  # mean label-smoothed loss over the epoch
    train_acc: list = field(default_factory=list)  # on augmented batches, in train mode
    val_loss: list = field(default_factory=list)  # plain cross-entropy, eval mode
    val_acc: list = field(default_factory=list)
    lr: list = field(default_factory=list)  # at the end of the epoch
    images_per_s: list = field(default_factory=list)  # training throughput

    def append(self, **row: float) -> None:
        for name, value in row.items():
            getattr(self, name).append(value)

    def plot(self):  # -> matplotlib Figure
        """Loss and accuracy curves, train vs val, side by side."""
        import matplotlib.pyplot as plt

        fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(9, 3.2))
        ax_loss.plot(self.epoch, self.train_loss, label="train (smoothed labels)")
        ax_loss.plot(self.epoch, self.val_loss, label="val")
        ax_acc.plot(self.epoch, self.train_acc, label="train (augmented)")
        ax_acc.plot(self.epoch, self.val_acc, label="val")
        ax_loss.set(xlabel="epoch", ylabel="cross-entropy", yscale="log")
        scored = [acc for acc in self.val_acc if not math.isnan(acc)]  # epochs without validation hold NaN
        ax_acc.set(xlabel="epoch", ylabel="accuracy", ylim=(max(0.0, min(scored + [1.0]) - 0.05), 1.0))
        for ax in (ax_loss, ax_acc):
            ax.legend()
            ax.grid(alpha=0.3)
        fig.tight_layout()
        return fig


@dataclass
class Result:
    model: nn.Module
    history: History
    test_acc: float
    config: TrainConfig
    optimizer: torch.optim.Optimizer
    teacher: Optional[nn.Module] = None


# ----------------------------------------------------------------------------------------------------
# The pieces of the recipe.
# ----------------------------------------------------------------------------------------------------


def lr_at(step: int, total_steps: int, warmup_steps: int, lr: float, min_lr: float) -> float:
    """Linear warm-up from 0 to ``lr``, then a half cosine down to ``min_lr``."""
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return min_lr + (lr - min_lr) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))


def amp_dtype(device: torch.device) -> Optional[torch.dtype]:
    """bf16 on CUDA GPUs that support it, else fp16 (needs loss scaling); None (fp32) elsewhere."""
    if device.type != "cuda":
        return None
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


PRECISIONS = ("auto", "fp32", "bf16")


def autocast_dtype(device: torch.device, precision: str = "auto") -> Optional[torch.dtype]:
    """The dtype ``torch.autocast`` computes in, or None for plain fp32.

    "auto": mixed precision on CUDA only (``amp_dtype``); "fp32": never; "bf16": bfloat16 on any device,
    the CPU included (CPUs with AVX-512 BF16 or AMX multiply bf16 matrices several times faster). The
    weights and the optimizer stay in fp32 either way; only the matrix products run in the lower precision.
    """
    if precision not in PRECISIONS:
        raise ConfigError(f"unknown precision {precision!r}; choose from {PRECISIONS}")
    if precision == "auto":
        return amp_dtype(device)
    if precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ConfigError("this GPU does not support bfloat16; use precision 'auto' (float16 with loss scaling)")
    return torch.bfloat16 if precision == "bf16" else None


def loss_scaler(device: torch.device, precision: str) -> torch.amp.GradScaler:
    """Loss scaling, switched on for float16 only: its gradients underflow without it (bfloat16 has fp32's range)."""
    return torch.amp.GradScaler(device.type, enabled=autocast_dtype(device, precision) == torch.float16)


def prepare_config(config: TrainConfig) -> TrainConfig:
    """Fit the model to the data where only the data can say: an image folder sets the number of classes
    (its sub-folders) and three input channels (images are read as RGB)."""
    if config.dataset != "imagefolder":
        return config
    classes, _ = imagefolder.find_classes(_image_folder_root(config))
    return replace(config, model_kwargs={**config.model_kwargs, "num_classes": len(classes), "in_chans": 3})


def shortest_decimals(values: torch.Tensor) -> list[float]:
    """A float32 tensor's values as the shortest decimals that round to the same float32: 0.0807, not the
    0.08070000261068344 that ``.tolist()`` gives (what a weight file's metadata should say)."""
    out = []
    for v in values.flatten().tolist():  # Python floats holding float32 values
        digits = next(d for d in range(1, 10) if torch.tensor(float(f"{v:.{d}g}")).item() == v)  # 9 always do
        out.append(float(f"{v:.{digits}g}"))
    return out


def data_cfg(model: nn.Module, config: TrainConfig, loader: Any, trained: bool) -> dict[str, Any]:
    """The ``pretrained_cfg`` of a model trained on ``config.dataset``: the input size, mean and std its loaders
    use (an image folder's own statistics, not the registry's), so that ``vitedu.create_transform`` and
    ``save_weights`` pass them on."""
    cfg = model.pretrained_cfg
    return make_pretrained_cfg(
        input_size=model_input_size(model), num_classes=model.num_classes, mean=shortest_decimals(loader.mean),
        std=shortest_decimals(loader.std), interpolation=cfg["interpolation"] or "bicubic", crop_pct=1.0,
        label_names=cfg["label_names"], trained=trained,
        source=f"vitedu.train.fit: the normalisation of its training data ({config.dataset})",
    )


def _image_folder_root(config: TrainConfig) -> Path:
    root = Path(config.data_root).expanduser()
    return root / "train" if (root / "train").is_dir() and (root / "val").is_dir() else root


@torch.no_grad()
def evaluate(model: nn.Module, loader: TensorLoader) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of ``model`` over ``loader`` (eval mode, no smoothing)."""
    model.eval()
    loss_sum, correct, seen = 0.0, 0, 0
    for images, labels in loader:
        logits = model(images).float()  # (batch, classes)
        loss_sum += F.cross_entropy(logits, labels, reduction="sum").item()
        correct += (logits.argmax(-1) == labels).sum().item()
        seen += len(labels)
    loss_sum, correct, seen = distributed.all_sum([loss_sum, correct, seen], next(model.parameters()).device)
    return loss_sum / seen, correct / seen


# ----------------------------------------------------------------------------------------------------
# The loop.
# ----------------------------------------------------------------------------------------------------


def epoch_line(epoch: int, epochs: int, train_loss: float, train_acc: float, val_loss: float, val_acc: float,
               lr: float, images_per_s: float) -> str:
    """The line ``fit`` logs for an epoch; it fits the book's 76 columns (up to 100 % accuracy and 99999 img/s):

        epoch  10/100  train 0.643 83.1%  val 0.403 87.7%  lr 2.0e-03  1895 img/s

    For training (augmented batches, train mode) and validation: the loss, then the accuracy in per cent; the
    learning rate at the end of the epoch; the training throughput in images per second.
    """
    return (f"epoch {epoch:3d}/{epochs}  train {train_loss:.3f} {train_acc:.1%}  val {val_loss:.3f} {val_acc:.1%}  "
            f"lr {lr:.1e}  {images_per_s:.0f} img/s")


def train_one_epoch(
    model: nn.Module, loader: TensorLoader, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
    config: TrainConfig, step: int, total_steps: int, teacher: Optional[nn.Module] = None, progress: bool = False,
    desc: str = "", precision: str = "auto",
) -> tuple[float, float, float, int]:
    """One pass over ``loader``; returns (mean loss, accuracy, images per second, next step).

    ``model`` may be wrapped (DistributedDataParallel, torch.compile); the numbers returned are over all
    processes."""
    model.train()
    device = next(model.parameters()).device
    dtype = autocast_dtype(device, precision)
    warmup_steps = round(config.warmup_epochs * len(loader))
    loss_sum, correct, seen, start = 0.0, 0, 0, time.perf_counter()
    for images, labels, *window in tqdm(loader, desc=desc, disable=not progress, leave=False):
        lr = lr_at(step, total_steps, warmup_steps, config.lr, config.min_lr)
        for group in optimizer.param_groups:
            group["lr"] = lr
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            # (batch, classes), or DeiT's pair (cls_logits, dist_logits); a window: only those patches (cluttered)
            outputs = model(images, keep=window[0]) if window else model(images)
            teacher_logits = None
            if teacher is not None:  # distillation: also learn the teacher's decision
                with torch.no_grad():
                    teacher_logits = teacher(images).float()  # (batch, classes)
            if isinstance(outputs, tuple):  # DeiT: [CLS] learns the labels, [DIST] the teacher
                if teacher_logits is None:
                    raise ValueError("the model returns (cls_logits, dist_logits) but there is no teacher: "
                                     "set teacher_epochs > 0, or call model.set_distilled_training(False)")
                cls_logits, dist_logits = outputs[0].float(), outputs[1].float()
                loss = distillation_token_loss(cls_logits, dist_logits, labels, teacher_logits, config.distill_alpha,
                                               config.distill_temperature, config.label_smoothing)
                logits = (cls_logits + dist_logits) / 2  # what the model predicts at test time
            else:  # one head for everything; with a teacher, the Hinton-style baseline
                logits = outputs.float()
                loss = F.cross_entropy(logits, labels, label_smoothing=config.label_smoothing)
                if teacher_logits is not None:
                    distill = distillation_loss(logits, teacher_logits, config.distill_temperature)
                    loss = (1 - config.distill_alpha) * loss + config.distill_alpha * distill
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        if config.grad_clip:
            scaler.unscale_(optimizer)  # clip the true gradients, not the loss-scaled ones
            nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        scaler.step(optimizer)
        scaler.update()
        step += 1
        loss_sum += loss.item() * len(labels)
        correct += (logits.argmax(-1) == labels).sum().item()
        seen += len(labels)
    loss_sum, correct, seen = distributed.all_sum([loss_sum, correct, seen], device)
    return loss_sum / seen, correct / seen, seen / (time.perf_counter() - start), step


def fit(
    config: Optional[TrainConfig] = None, out: str | os.PathLike | None = None, resume: bool = False,
    device: torch.device | str | None = None, progress: Optional[bool] = None, stop_after: Optional[int] = None,
    log: Callable[[str], None] = print, log_every: int = 1, precision: str = "auto", compile: bool = False,
    build: Optional[Callable[[TrainConfig], nn.Module]] = None, validate_every: int = 1,
) -> Result:
    """Train ``config`` (default: ``PRESETS["digits"]``) from scratch, or resume the run saved in ``out``, and
    test the final model.

    Checkpoints go to ``out`` after every epoch when it is given. ``progress`` shows a tqdm bar (default:
    only in a terminal). ``stop_after=e`` ends after epoch e, as if interrupted; ``resume=True`` carries on
    with the saved config, weights, optimizer state, step and history. ``log`` receives one line every
    ``log_every`` epochs (and for the last one), as ``epoch_line`` writes it. ``validate_every=k`` scores the
    validation split only every k epochs (and after the last): the others record NaN, and a short run saves the
    time of scoring the validation split after every epoch.

    ``precision`` ("auto", "fp32", "bf16"; see ``autocast_dtype``) and ``compile`` (torch.compile the
    training forward pass) are how the run computes, like ``device``: they are not saved with the config,
    so pass them again when resuming. Under torchrun (vitedu.distributed) every process calls ``fit``; each
    trains on its share of every batch, and only rank 0 logs and writes ``out``.

    ``build(config)`` makes the model where the registry cannot (e.g. a CNN baseline; default:
    ``create_model(config.model, **config.model_kwargs)``); pass it again when resuming. Only a model with a patch
    embedding gets a ``pretrained_cfg`` (the input settings and the input check live there).
    """
    config = PRESETS["digits"] if config is None else config
    if not isinstance(validate_every, int) or validate_every < 1:
        raise ValueError(f"validate_every is a number of epochs, at least 1 (1 scores validation after every epoch); "
                         f"got {validate_every!r}")
    refuse_file_as_folder(out)
    device = torch.device(device) if device is not None else get_device()
    process = distributed.current()
    if not process.is_main:
        log = _silent
    progress = sys.stderr.isatty() and process.is_main if progress is None else progress and process.is_main
    resuming = resume and out is not None and (Path(out) / STATE_FILE).exists()
    distributed.barrier()  # every process has looked at `out` before rank 0 may write to it
    if resuming:
        config = TrainConfig(**json.loads((Path(out) / STATE_FILE).read_text())["config"])
    check_runnable(config)  # a missing teacher file fails now, not after the data is loaded
    config = prepare_config(config)
    autocast_dtype(device, precision)  # an unknown precision fails now, not after the teacher's training
    seed_everything(config.seed)
    loaders = make_loaders(config, device)
    model = (build(config) if build is not None else create_model(config.model, **config.model_kwargs)).to(device)
    has_cfg = hasattr(model, "patch_embed")  # vitedu's ViTs; a CNN baseline has no patches to check inputs at
    if config.window_tokens and "keep" not in inspect.signature(model.forward).parameters:
        raise ConfigError(f"window_tokens={config.window_tokens} trains on a window of patches, which needs a model "
                          f"whose forward takes keep= (VisionTransformer, DeiT); {type(model).__name__} does not: "
                          f"set window_tokens=0 and window_epochs=0")
    if has_cfg:
        attach_pretrained_cfg(model, data_cfg(model, config, loaders["test"], trained=False))
    optimizer = make_optimizer(model, config.optimizer, config.lr, config.weight_decay)
    scaler = loss_scaler(device, precision)
    teacher = (train_teacher(config, loaders, device, out, progress, log, precision)
               if config.teacher_epochs or config.teacher_path else None)
    if hasattr(model, "set_distilled_training"):  # DeiT: two outputs in training only when there is a teacher
        model.set_distilled_training(teacher is not None)
    stepped = distributed.wrap(model, device)  # what the steps call: DDP averages gradients over processes
    if compile:
        stepped = torch.compile(stepped)
    start_epoch, step, history = 0, 0, History()
    if resuming:
        state = load_checkpoint(out, model, optimizer, scaler)
        start_epoch, step, history = state["epoch"], state["step"], History(**state["history"])
        log(f"resuming {out} after epoch {start_epoch} of {config.epochs} (step {step})")
    total_steps = config.epochs * len(loaders["train"])

    for epoch in range(start_epoch, config.epochs if stop_after is None else min(stop_after, config.epochs)):
        loaders["train"].set_epoch(epoch)  # batch order and augmentation depend on (seed, epoch) only,
        torch.manual_seed(config.seed * 1000 + epoch + 7_919 * process.rank)  # and so do dropout / drop-path
        loss, acc, speed, step = train_one_epoch(stepped, loaders["train"], optimizer, scaler, config, step,
                                                 total_steps, teacher, progress, f"epoch {epoch + 1}/{config.epochs}",
                                                 precision)
        validate = (epoch + 1) % validate_every == 0 or epoch + 1 == config.epochs
        val_loss, val_acc = evaluate(model, loaders["val"]) if validate else (math.nan, math.nan)
        lr = optimizer.param_groups[0]["lr"]
        history.append(epoch=epoch + 1, train_loss=loss, train_acc=acc, val_loss=val_loss, val_acc=val_acc,
                       lr=lr, images_per_s=speed)
        if (epoch + 1) % log_every == 0 or epoch + 1 == config.epochs:
            log(epoch_line(epoch + 1, config.epochs, loss, acc, val_loss, val_acc, lr, speed))
        if out is not None and process.is_main:
            save_checkpoint(out, model, optimizer, scaler, config, history, epoch + 1, step)
    _, test_acc = evaluate(model, loaders["test"])
    distributed.barrier()  # the last checkpoint is complete before any process goes on (and perhaps reads it)
    if has_cfg:
        attach_pretrained_cfg(model, data_cfg(model, config, loaders["test"], trained=True))
    return Result(model, history, test_acc, config, optimizer, teacher)


def _silent(_: str) -> None:
    pass


def train_teacher(
    config: TrainConfig, loaders: dict[str, TensorLoader], device: torch.device,
    out: str | os.PathLike | None = None, progress: bool = False, log: Callable[[str], None] = print,
    precision: str = "auto",
) -> nn.Module:
    """Train the convnet teacher with the same recipe (or reload it from ``out``); return it in eval mode.
    With ``config.teacher_path`` the teacher was trained elsewhere (a CNN baseline's run): it is loaded as is."""
    if config.teacher_path:
        return load_conv_teacher(config.teacher_path, device)
    images, _ = next(iter(loaders["val"]))
    teacher = ConvTeacher(images.shape[1], int(loaders["val"].labels.max()) + 1).to(device)
    path = Path(out) / TEACHER_FILE if out is not None else None
    saved = path is not None and path.exists()
    distributed.barrier()  # all processes decide before rank 0 may write the file
    if saved:  # a resumed run distils from the very same teacher
        teacher.load_state_dict(load_file(str(path), device=str(device)))
        return teacher.eval()
    optimizer = torch.optim.AdamW(param_groups(teacher, config.weight_decay), lr=config.lr)
    scaler = loss_scaler(device, precision)
    teacher_config = replace(config, warmup_epochs=1.0)  # the student's recipe, one epoch of warm-up
    step, total_steps = 0, config.teacher_epochs * len(loaders["train"])
    torch.manual_seed(config.seed + 1 + 7_919 * distributed.current().rank)
    stepped = distributed.wrap(teacher, device)
    for epoch in range(config.teacher_epochs):
        loaders["train"].set_epoch(10_000 + epoch)  # batches of its own, independent of the student's
        _, _, _, step = train_one_epoch(stepped, loaders["train"], optimizer, scaler, teacher_config, step,
                                        total_steps, None, progress, f"teacher {epoch + 1}/{config.teacher_epochs}",
                                        precision)
    _, val_acc = evaluate(teacher, loaders["val"])
    log(f"teacher: {count_parameters(teacher):,}-parameter convnet, {config.teacher_epochs} epochs, "
        f"val acc {val_acc:.3f}")
    if path is not None and distributed.current().is_main:
        path.parent.mkdir(parents=True, exist_ok=True)
        save_state_dict(path, teacher)
    return teacher.eval()


def load_trained(out: str | os.PathLike, device: torch.device | str = "cpu") -> tuple[nn.Module, TrainConfig]:
    """Rebuild the model saved in ``out`` from its config and weights, ready for ``model.eval()``."""
    require_run(out, "load_trained")
    config = TrainConfig(**json.loads((Path(out) / STATE_FILE).read_text())["config"])
    model = create_model(config.model, **config.model_kwargs).to(device)
    state = load_checkpoint(out, model)
    recorded = state.get("pretrained_cfg")
    if recorded:  # the statistics of the data it was trained on (older checkpoints: the registry's)
        kept = {k: recorded[k] for k in PRETRAINED_CFG_KEYS if k in recorded}
        attach_pretrained_cfg(model, make_pretrained_cfg(**kept, source=f"{Path(out) / STATE_FILE}", trained=True))
    return model.eval(), config


def require_run(out: str | os.PathLike, who: str) -> None:
    """A FileNotFoundError that says why ``out`` holds no run (no folder, a file, or a folder without
    train_state.json) and which command writes one."""
    folder = Path(out)
    writes = f"python -m vitedu.train --out {folder} (or vitedu.fit(config, out={str(folder)!r})) writes one"
    if not folder.exists():
        raise FileNotFoundError(f"{who} reads a training run from a folder, but {str(folder)!r} does not exist; "
                                f"{writes}")
    if not folder.is_dir():
        raise NotADirectoryError(f"{who} reads a training run from a folder, but {str(folder)!r} is a file; "
                                 f"point it at the run's folder (the --out of python -m vitedu.train)")
    if not (folder / STATE_FILE).is_file():
        raise FileNotFoundError(f"{who}: the folder {str(folder)!r} holds no training run (no {STATE_FILE}), so there "
                                f"is nothing to load or resume; {writes}")


# ----------------------------------------------------------------------------------------------------
# Command line.
# ----------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m vitedu.train", description="Train a Vision Transformer from scratch. Options not given "
        "come from the dataset's preset (vitedu.config.PRESETS). The last line printed is the test accuracy.")
    p.add_argument("--dataset", choices=sorted(PRESETS), default="digits",
                   help="digits: 1,797 8x8 digits shipped with vitedu (offline); cluttered_digits: one of those "
                   "digits at any pixel of a 32x32 canvas among clutter (offline); cluttered_digits_grid: the same "
                   "with the digit on the 4-pixel patch grid (the earlier, easy task); speedrun: cluttered_digits "
                   "in minutes on a CPU (python -m vitedu.speedrun scores it too); cifar10: downloaded once; "
                   "imagefolder: your own images, one sub-folder per class, in --data-root (vitedu.imagefolder)")
    p.add_argument("--epochs", type=int, help="passes over the training set")
    p.add_argument("--out", help="folder for checkpoints (model.safetensors, optimizer.safetensors, "
                   "train_state.json), written after every epoch; default: none are written")
    p.add_argument("--resume", action="store_true",
                   help="continue the run saved in --out with its saved config (other options are ignored)")
    p.add_argument("--model", help="a model name from vitedu.list_models() whose input fits the dataset (drops the "
                   "preset's model overrides)")
    p.add_argument("--batch-size", type=int, help="images per optimisation step")
    p.add_argument("--lr", type=float, help="peak learning rate after warm-up")
    p.add_argument("--warmup-epochs", type=float, help="epochs of linear warm-up before the cosine decay")
    p.add_argument("--weight-decay", type=float, help="AdamW weight decay on weight matrices")
    p.add_argument("--label-smoothing", type=float, help="probability mass spread over all classes")
    p.add_argument("--grad-clip", type=float, help="max global gradient norm (0 disables clipping)")
    p.add_argument("--augment", choices=sorted(AUGMENTATIONS), help="training augmentation")
    p.add_argument("--teacher-epochs", type=int, help="train a small CNN teacher this many epochs first and "
                   "distil it into the ViT, as in DeiT (0 = no teacher)")
    p.add_argument("--distill-alpha", type=float, help="weight of the distillation loss (0..1)")
    p.add_argument("--seed", type=int, help="seed for initialisation, batch order and augmentation")
    p.add_argument("--data-root", help="where CIFAR-10 is downloaded and cached (default: ./data); with "
                   "--dataset imagefolder, the folder of class folders (or of train/ and val/ folders)")
    p.add_argument("--device", help="cpu, cuda or mps (default: the best available)")
    p.add_argument("--threads", type=int, help="CPU threads for torch (default: torch's choice)")
    p.add_argument("--precision", choices=PRECISIONS, default="auto", help="auto: mixed precision on CUDA only; "
                   "fp32: never; bf16: bfloat16 autocast on any device, the CPU included. Not saved "
                   "with the run: give it again with --resume")
    p.add_argument("--compile", action="store_true", help="torch.compile the training forward pass (the first "
                   "epoch pays the compilation; needs a C++ compiler on the CPU)")
    p.add_argument("--save-weights", help="also write the final model's weights to this safetensors file, with the "
                   "config and the val/test accuracy as metadata (how `make weights` makes the shipped models)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show a progress bar (default: only when writing to a terminal)")
    return p


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def cli_config(args: argparse.Namespace) -> TrainConfig:
    """The run the command line asks for: the dataset's preset with the options given on top (checked by
    ``TrainConfig`` itself, then by ``check_cli``; an unknown ``--model`` is refused here, before any data is read)."""
    if args.model is not None and args.model not in MODELS:
        raise ConfigError(f"model must be a name of vitedu.list_models(); got {args.model!r}")
    overrides = {f.name: getattr(args, f.name) for f in fields(TrainConfig)
                 if getattr(args, f.name, None) is not None and f.name != "dataset"}
    if args.model is not None and args.model != PRESETS[args.dataset].model:
        overrides["model_kwargs"] = {}  # the preset's overrides were tuned for its own model
    return replace(PRESETS[args.dataset], **overrides)


# The images each dataset of a fixed shape hands a model: (channels, pixels a side). An image folder has none: it is
# resized to the model's size, and prepare_config gives the model three channels.
DATASET_INPUTS = {"digits": (1, 8), "cluttered_digits": (1, 32), "cifar10": (3, 32)}


def model_input(name: str, overrides: Any = None) -> tuple[int, Any]:
    """(channels, pixels a side) that the registry model ``name`` takes, with ``overrides`` on top."""
    kwargs = model_kwargs(name, dict(overrides or {}))
    size = kwargs.get("img_size", 224)
    return kwargs.get("in_chans", 3), size[0] if isinstance(size, (tuple, list)) and len(set(size)) == 1 else size


def check_model_fits_data(config: TrainConfig) -> None:
    """A ConfigError, before any data is read, when the model's input is not the dataset's images (e.g. a 224-pixel
    RGB ViT on the 8x8 grey digits); it names the models of the registry that fit."""
    if config.model not in MODELS or config.dataset not in DATASET_INPUTS:
        return  # a model fit's build= makes, or a dataset without a fixed shape: checked when the data is read
    channels, size = DATASET_INPUTS[config.dataset]
    takes = model_input(config.model, config.model_kwargs)
    if takes == (channels, size):
        return
    fits = [n for n in sorted(MODELS) if model_input(n) == (channels, size)]
    example = ", ".join(fits[:4]) or "none: build one with create_model(name, in_chans=..., img_size=...)"
    raise ConfigError(f"model {config.model!r} takes {takes[0]}-channel {takes[1]}-pixel images, but the dataset "
                      f"{config.dataset!r} gives {channels}-channel {size}-pixel ones; pick a model from "
                      f"vitedu.list_models() that fits it, e.g. {example}")


def check_cli(args: argparse.Namespace, config: TrainConfig) -> None:
    """What the command line asks beyond a valid config, checked before any work: threads, device, the folders
    it writes, a resume that has something to resume, a warm-up that fits in the run, a model that fits the data."""
    if args.threads is not None and args.threads < 1:
        raise ConfigError(f"--threads must be a whole number >= 1 (CPU threads for torch); got {args.threads}: leave "
                          f"it out for torch's choice")
    check_device(args.device)
    refuse_file_as_folder(args.out, "--out")
    if args.save_weights is not None and Path(args.save_weights).is_dir():
        raise ConfigError(f"--save-weights must be a file path such as runs/vit.safetensors; got "
                          f"{args.save_weights!r}, which is a folder")
    if args.resume and args.out is None:
        raise ConfigError("--resume continues the run saved in --out, but no --out was given: add --out <run folder>")
    if args.resume and not (Path(args.out) / STATE_FILE).is_file():
        raise ConfigError(f"--resume: there is nothing to resume in {args.out!r} (no {STATE_FILE}); drop --resume to "
                          f"start a run there, or point --out at the folder of the run to continue")
    if args.resume:
        return  # the saved config is trained, not the options given
    check_model_fits_data(config)


def one_line(err: Exception) -> str:
    """A ConfigError's problems (one per indented line) as one line for a terminal: "...: first; second"."""
    return str(err).replace(":\n  ", ": ").replace("\n  ", "; ").replace("\n", " ")


# Errors whose message already says what went wrong and what to do: the command line prints them as one line.
# Any other exception is a bug, and keeps its traceback.
EXPLAINED_ERRORS = (ConfigError, DatasetError, CheckpointError)


def main(argv: Optional[list[str]] = None) -> float:
    """The command line: train, print the test accuracy last and return it. A configuration that cannot be
    trained stops before any work (exit status 2), and any explained error (a missing folder, an unreadable
    image, ...) ends the run as one line on stderr, not a traceback (exit status 1)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = cli_config(args)
        check_cli(args, config)
        process, device, started = distributed.setup(args.device)  # under torchrun: join the other processes
    except (ConfigError, CheckpointError, DeviceError, distributed.SetupError) as err:
        parser.error(one_line(err))
    if args.threads:
        torch.set_num_threads(args.threads)
    say = print if process.is_main else _silent
    try:
        if process.distributed:
            say(f"{process.world_size} processes ({'NCCL' if device.type == 'cuda' else 'Gloo'}), each training "
                f"on 1/{process.world_size} of every batch of {config.batch_size}")
        start = time.perf_counter()
        result = fit(config, out=args.out, resume=args.resume, device=device, progress=args.progress,
                     precision=args.precision, compile=args.compile)
        say(f"{sum(p.numel() for p in result.model.parameters()):,} parameters, "
            f"{time.perf_counter() - start:.0f} s wall time")
        if args.save_weights and process.is_main:
            save_weights(args.save_weights, result.model, result.config, result.history.val_acc[-1],
                         result.test_acc)
            say(f"weights written to {args.save_weights}")
        say(f"test accuracy: {result.test_acc:.4f}")
    except EXPLAINED_ERRORS as err:
        if process.is_main:
            print(f"{parser.prog}: error: {err}", file=sys.stderr)
        raise SystemExit(1) from None
    finally:
        distributed.cleanup(started)
    return result.test_acc


if __name__ == "__main__":
    main()
