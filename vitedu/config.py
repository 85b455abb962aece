"""What defines a training run: ``TrainConfig``, checked when it is made, and the presets of the book.

A ``TrainConfig`` is frozen: the presets are shared by every chapter, test and script in a process, so a
change is a new config, ``dataclasses.replace(PRESETS["digits"], epochs=5)``, never an assignment. It refuses,
when it is made, every value that cannot be trained or makes no sense (``epochs=0``, ``lr=nan``, an unknown
dataset, ...), naming the field, the value and what is allowed; ``fit`` checks, before any work, that the
teacher file a config names is there (``check_runnable``). ``python -m vitedu.train`` builds its config here
too, so the command line shares these checks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import FrozenInstanceError, dataclass, field
from pathlib import Path
from typing import Any

from .augment import AUGMENTATIONS
from .cluttered import POSITION_STEP
from .data import DATASETS
from .frozen import FrozenDict
from .optimizers import OPTIMIZERS


class ConfigError(ValueError):
    """A ``TrainConfig`` that cannot be trained; the message names each field, its value and the valid range."""


class FrozenKwargs(FrozenDict):
    """``TrainConfig.model_kwargs``: a dict that refuses changes (a preset's overrides are shared)."""

    refusal = ("a TrainConfig's model_kwargs cannot change (the presets are shared): write "
               "dataclasses.replace(config, model_kwargs={**config.model_kwargs, 'drop_path_rate': 0.2})")


@dataclass
class TrainConfig:
    """Everything that defines a run; saved next to every checkpoint, so a run can be resumed."""

    dataset: str = "digits"  # a name of vitedu.data.DATASETS
    model: str = "vit_digits_patch2_8"  # a name from vitedu.list_models() (fit's build= may make others)
    model_kwargs: Mapping[str, Any] = field(default_factory=dict)  # overrides, e.g. {"drop_path_rate": 0.1}
    epochs: int = 100
    batch_size: int = 64
    lr: float = 2e-3  # peak learning rate, reached after the warm-up
    min_lr: float = 1e-5  # where the cosine ends
    warmup_epochs: float = 5.0
    weight_decay: float = 0.05
    optimizer: str = "adamw"  # "adamw", or "muon" for the blocks' weight matrices with AdamW for the rest
    label_smoothing: float = 0.1
    grad_clip: float = 1.0  # max global gradient norm (0 = off)
    augment: str = "digits"  # a key of vitedu.augment.AUGMENTATIONS
    teacher_epochs: int = 0  # > 0: first train a small CNN teacher this long, then distil it (DeiT)
    teacher_path: str = ""  # a trained convnet to distil instead (vitedu.cnn.save_conv_teacher's file)
    distill_alpha: float = 0.5  # weight of the distillation loss
    distill_temperature: float = 0.0  # 0: hard distillation (teacher's argmax); > 0: soft (Hinton), this T
    # A ViT learns labels and teacher through its one head (the Hinton-style baseline); a DeiT model
    # (create_model("deit_...")) learns the teacher through its distillation token (distillation_token_loss).
    position_step: int = POSITION_STEP  # cluttered_digits: the digit's cell at multiples of this (1: anywhere)
    grid_epochs: int = 0  # cluttered_digits: a curriculum, the first epochs with the digit on the patch grid
    window_tokens: int = 0  # cluttered_digits: > 0 trains window_epochs epochs from window_start on a window of
    window_epochs: int = 0  # patches (this many a side) around the digit, not the whole canvas: a cheaper step
    window_start: int = 0  # (vitedu.cluttered.window_patches)
    train_on_val: bool = False  # fit on train + val (after choosing the recipe on val)
    train_fraction: float = 1.0  # train on a stratified subset (to measure how data-hungry a model is)
    seed: int = 0
    data_root: str = "data"  # where CIFAR-10 is cached, or the image folder (dataset "imagefolder")

    def __post_init__(self) -> None:
        if isinstance(self.model_kwargs, Mapping):
            object.__setattr__(self, "model_kwargs", FrozenKwargs(self.model_kwargs))
        problems = config_problems(self)
        if problems:
            raise ConfigError("this TrainConfig cannot be trained:\n  " + "\n  ".join(problems))
        object.__setattr__(self, "_frozen", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, "_frozen", False):
            raise FrozenInstanceError(
                f"a TrainConfig cannot change (the presets are shared by everyone who reads them): instead of "
                f"config.{name} = {value!r}, write config = dataclasses.replace(config, {name}={value!r})")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"a TrainConfig cannot change: {name} cannot be deleted")


def _whole(value: Any, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def config_problems(config: TrainConfig) -> list[str]:
    """One line per field of ``config`` that cannot be trained: ``field = value: what is allowed``."""
    c = config
    checks = [
        ("dataset", c.dataset in DATASETS, f"one of {', '.join(DATASETS)}"),
        ("model", isinstance(c.model, str) and c.model != "", "a model name, e.g. from vitedu.list_models()"),
        ("model_kwargs", isinstance(c.model_kwargs, Mapping) and all(isinstance(k, str) for k in c.model_kwargs),
         "a dict of keyword arguments for the model, e.g. {'drop_path_rate': 0.1}"),
        ("epochs", _whole(c.epochs, 1), "a whole number >= 1"),
        ("batch_size", _whole(c.batch_size, 1), "a whole number >= 1"),
        ("lr", _real(c.lr) and c.lr > 0, "a finite number > 0"),
        ("min_lr", _real(c.min_lr) and 0 <= c.min_lr <= (c.lr if _real(c.lr) else math.inf),
         f"a finite number from 0 to lr ({c.lr!r})"),
        ("warmup_epochs", _real(c.warmup_epochs)
         and 0 <= c.warmup_epochs <= (c.epochs if _whole(c.epochs, 1) else math.inf),
         f"a number from 0 to epochs ({c.epochs!r}): lower warmup_epochs or raise epochs (a longer warm-up never "
         f"reaches the peak learning rate)"),
        ("weight_decay", _real(c.weight_decay) and c.weight_decay >= 0, "a finite number >= 0"),
        ("optimizer", c.optimizer in OPTIMIZERS, f"one of {', '.join(OPTIMIZERS)}"),
        ("label_smoothing", _real(c.label_smoothing) and 0 <= c.label_smoothing < 1, "a number in [0, 1)"),
        ("grad_clip", _real(c.grad_clip) and c.grad_clip >= 0, "a finite number >= 0 (0 switches clipping off)"),
        ("augment", c.augment in AUGMENTATIONS, f"one of {', '.join(AUGMENTATIONS)}"),
        ("teacher_epochs", _whole(c.teacher_epochs, 0), "a whole number >= 0 (0: no teacher trained)"),
        ("teacher_path", isinstance(c.teacher_path, str), "'' or a file written by vitedu.cnn.save_conv_teacher"),
        ("distill_alpha", _real(c.distill_alpha) and 0 <= c.distill_alpha <= 1, "a number in [0, 1]"),
        ("distill_temperature", _real(c.distill_temperature) and c.distill_temperature >= 0,
         "a finite number >= 0 (0: hard distillation)"),
        ("position_step", _whole(c.position_step, 1), "a whole number >= 1 (1: the digit at any pixel)"),
        ("grid_epochs", _whole(c.grid_epochs, 0), "a whole number >= 0"),
        ("window_tokens", c.window_tokens == 0 or _whole(c.window_tokens, 3),
         "0 (the whole canvas) or a window side of at least 3 patches (an 8-pixel digit spans up to 3)"),
        ("window_epochs", _whole(c.window_epochs, 0), "a whole number >= 0"),
        ("window_start", _whole(c.window_start, 0), "a whole number >= 0 (the first epoch on windows, from 0)"),
        ("train_on_val", isinstance(c.train_on_val, bool), "True or False"),
        ("train_fraction", _real(c.train_fraction) and 0 < c.train_fraction <= 1,
         "in (0, 1] (a share of the training set)"),
        ("seed", _whole(c.seed, 0), "a whole number >= 0"),
        ("data_root", isinstance(c.data_root, str), "a folder path"),
    ]
    problems = [f"{name} must be {allowed}; got {getattr(c, name)!r}" for name, ok, allowed in checks if not ok]
    if _whole(c.teacher_epochs, 1) and c.teacher_path:
        problems.append(f"teacher_epochs and teacher_path must not both be set; got {c.teacher_epochs} and "
                        f"{c.teacher_path!r}: teacher_epochs trains a teacher, teacher_path loads one")
    windowed = _whole(c.window_tokens, 1), _whole(c.window_epochs, 1)
    if windowed[0] != windowed[1] or (windowed[0] and c.dataset != "cluttered_digits"):
        problems.append(f"window_tokens and window_epochs go together, and only with dataset 'cluttered_digits' "
                        f"(the window is placed around its digit); got window_tokens={c.window_tokens!r}, "
                        f"window_epochs={c.window_epochs!r}, dataset={c.dataset!r}")
    return problems


def check_runnable(config: TrainConfig) -> None:
    """What a run needs beyond a valid config, checked when it starts (``fit``), before any work: the teacher
    file it names exists. (A config may name a teacher that an earlier job will write, so making one does not
    check the file.)"""
    if config.teacher_path and not Path(config.teacher_path).is_file():
        raise ConfigError(f"teacher_path must be an existing file written by vitedu.cnn.save_conv_teacher; got "
                          f"{config.teacher_path!r}, which does not exist (train that convnet first)")


# The presets: each is a recipe chosen on the validation split; benchmarks/README.md records how each was
# chosen and what it measures ("The digits preset", "The honest task", ...).
PRESETS: dict[str, TrainConfig] = {
    # 8x8 digits on a laptop CPU: 4x4 patches (a 2x2 grid of tokens and mean pooling) learn far faster than
    # 2x2 patches on 1,259 images, and soft distillation from a small convnet adds the locality prior a ViT
    # lacks (DeiT; soft targets as in Hinton et al.).
    "digits": TrainConfig(
        model="vit_digits_patch4_8",
        epochs=100, batch_size=32, lr=2e-3, warmup_epochs=3, weight_decay=0.05, label_smoothing=0.1,
        augment="digits", teacher_epochs=20, distill_alpha=0.7, distill_temperature=4.0,
    ),
    # One digit among clutter on a 32x32 canvas (vitedu.cluttered), at any pixel: attention has to find it, and
    # the model has to read it at every shift of its 4x4 patches. Fresh canvases every epoch; a curriculum
    # starts with the digit on the patch grid; attention starts local (mimetic initialisation, sin-cos-initialised
    # learned positions) and a convnet teacher is distilled. The shipped model is this recipe at seed 7
    # (`make weights`).
    "cluttered_digits": TrainConfig(
        dataset="cluttered_digits", model="vit_cluttered_digits", epochs=300,
        model_kwargs={"drop_path_rate": 0.1, "weight_init": "mimetic", "pos_embed": "learn_sincos"},
        batch_size=256, lr=4e-3, warmup_epochs=5.0, weight_decay=0.05, label_smoothing=0.1, augment="digits_warp",
        teacher_epochs=30, distill_alpha=0.5, distill_temperature=4.0, position_step=1, grid_epochs=60, seed=7,
    ),
    # The same task in minutes on a CPU (python -m vitedu.speedrun; benchmarks/README.md, "The CPU speedrun"):
    # no convnet teacher (on a CPU its forward pass costs more than the ViT's training step), a sixth of the
    # canvases, Muon for the blocks' matrices at four times AdamW's rate, and neither stochastic depth nor label
    # smoothing in so short a run (chosen on validation, seed 0: 96.6 % against 90.35 % for AdamW).
    "speedrun": TrainConfig(
        dataset="cluttered_digits", model="vit_cluttered_digits", epochs=50,
        model_kwargs={"drop_path_rate": 0.0, "weight_init": "mimetic", "pos_embed": "learn_sincos"},
        batch_size=256, lr=1.6e-2, warmup_epochs=3.0, weight_decay=0.05, optimizer="muon", label_smoothing=0.0,
        augment="digits_warp", teacher_epochs=0, position_step=1, grid_epochs=15,
    ),
    # The earlier, easier task with the digit on the 4-pixel patch grid (position_step=4): chapter 9's models,
    # the shift experiment's on-grid ViT and benchmarks/sweep_cluttered.py's variants start from it.
    "cluttered_digits_grid": TrainConfig(
        dataset="cluttered_digits", model="vit_cluttered_digits", epochs=30,
        model_kwargs={"drop_path_rate": 0.1, "weight_init": "mimetic", "pos_embed": "learn_sincos"},
        batch_size=32, lr=2e-3, warmup_epochs=0.5, weight_decay=0.05, label_smoothing=0.1, augment="none",
        teacher_epochs=4, distill_alpha=0.5, distill_temperature=4.0, position_step=4,
    ),
    # Your own images (vitedu.imagefolder): a folder per class, resized to the model's img_size (32 here; pick a
    # 224 model such as --model vit_tiny_patch16_224 for large photos). A starting point, not a tuned recipe.
    "imagefolder": TrainConfig(
        dataset="imagefolder", model="vit_cifar_patch4_32", model_kwargs={"drop_path_rate": 0.1}, epochs=100,
        batch_size=64, lr=1e-3, warmup_epochs=5, weight_decay=0.05, label_smoothing=0.1, augment="cifar",
    ),
    # CIFAR-10 from scratch on one GPU (benchmarks/README.md: no accuracy measured yet).
    "cifar10": TrainConfig(
        dataset="cifar10", model="vit_cifar_patch4_32", model_kwargs={"drop_path_rate": 0.1}, epochs=200,
        batch_size=256, lr=1e-3, warmup_epochs=10, weight_decay=0.05, label_smoothing=0.1,
        augment="cifar_strong",
    ),
}
