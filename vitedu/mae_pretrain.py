"""MAE pre-training (He et al., 2022), scaled down to the cluttered digits: the recipe and the loop (chapter 10).

    from vitedu.mae_pretrain import MAEConfig, pretrain
    config = MAEConfig(epochs=200, base_lr=1.5e-3, warmup_epochs=10)
    model, history, steps = pretrain(config, out="runs/mae")

A ``vitedu.mae.MaskedAutoencoder`` whose encoder has the size of ``vit_cluttered_digits`` (embed_dim 64, depth 4,
4 heads, mlp_ratio 2, 4x4 patches of a 32x32x1 canvas) and a lighter decoder (width 48, one block), trained on
*fresh* canvases every epoch, the digit at any pixel (``position_step=1``). The canvases are made from the training
digits' images alone: the labels are never loaded (``make_cluttered`` is handed placeholder labels, and its labels
output is dropped). The recipe is the paper's: AdamW with betas (0.9, 0.95), weight decay 0.05,
lr = base_lr * batch / 256, linear warm-up then a half cosine to 0, 75 % of the patches hidden, per-patch
normalised pixel targets (``norm_pix_loss``). With ``out``, every epoch is checkpointed there
(``vitedu.run_files.save_checkpoint``: safetensors + JSON), and a run started again with the same ``out``
resumes after its last complete epoch, with the batches and masks an uninterrupted run would have drawn.
At the end ``save_encoder`` writes the encoder alone (``ENCODER_FILE``), with how to rebuild it in its metadata.
``tools/pretrain_mae.py`` is the command line around it; ``vitedu.linear_probe`` measures what it learned.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional

import torch
from torch import Tensor

from .cluttered import make_cluttered, normalise_canvases
from .config import ConfigError
from .constants import CLUTTERED_MEAN, CLUTTERED_STD
from .digits import DIGITS_MAX, load_digits
from .mae import MaskedAutoencoder
from .optimizers import param_groups
from .run_files import STATE_FILE, load_checkpoint, refuse_file_as_folder, save_checkpoint, save_state_dict
from .train import lr_at


@dataclass
class MAEConfig:
    """Everything that defines a pre-training run (saved in every checkpoint; a resumed run reads it back)."""

    epochs: int = 400
    batch_size: int = 256
    canvases_per_epoch: int = 10_000
    base_lr: float = 1.5e-4  # lr = base_lr * batch_size / 256, the paper's scaling rule
    min_lr: float = 0.0
    warmup_epochs: float = 40.0  # the paper warms up 40 of its 800 epochs
    weight_decay: float = 0.05
    betas: tuple[float, float] = (0.9, 0.95)
    mask_ratio: float = 0.75
    norm_pix_loss: bool = True
    position_step: int = 1  # the digit at any pixel
    seed: int = 0
    encoder: dict = field(default_factory=lambda: dict(embed_dim=64, depth=4, num_heads=4, mlp_ratio=2.0))
    decoder: dict = field(default_factory=lambda: dict(decoder_embed_dim=48, decoder_depth=1, decoder_num_heads=4))

    def __post_init__(self) -> None:
        problems = mae_config_problems(self)
        if problems:
            raise ConfigError("this MAEConfig cannot be pre-trained:\n  " + "\n  ".join(problems))

    @property
    def lr(self) -> float:
        return self.base_lr * self.batch_size / 256


PATCHES = (32 // 4) ** 2  # the 64 patches of a canvas the encoder sees or not


def _whole(value: object, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def mae_config_problems(c: MAEConfig) -> list[str]:
    """One line per field of ``c`` that cannot be pre-trained: ``field must be ...; got ...``, as
    ``vitedu.config.config_problems`` writes them for a ``TrainConfig``."""
    ratio_ok = _real(c.mask_ratio) and 0 < c.mask_ratio < 1 and round(PATCHES * (1 - c.mask_ratio)) >= 1
    checks = [
        ("epochs", _whole(c.epochs, 1), "a whole number >= 1 (0 epochs would save an untrained encoder)"),
        ("batch_size", _whole(c.batch_size, 1), "a whole number >= 1"),
        ("canvases_per_epoch", _whole(c.canvases_per_epoch, 1), "a whole number >= 1"),
        ("base_lr", _real(c.base_lr) and c.base_lr > 0, "a finite number > 0"),
        ("min_lr", _real(c.min_lr) and c.min_lr >= 0, "a finite number >= 0"),
        ("warmup_epochs", _real(c.warmup_epochs) and 0 <= c.warmup_epochs <= (c.epochs if _real(c.epochs) else 0),
         f"a number from 0 to epochs ({c.epochs!r}): lower warmup_epochs or raise epochs (a longer warm-up never "
         f"reaches the peak learning rate)"),
        ("weight_decay", _real(c.weight_decay) and c.weight_decay >= 0, "a finite number >= 0"),
        ("betas", isinstance(c.betas, (tuple, list)) and len(c.betas) == 2
         and all(_real(b) and 0 <= b < 1 for b in c.betas), "two numbers in [0, 1), e.g. (0.9, 0.95)"),
        ("mask_ratio", ratio_ok, f"the share of the {PATCHES} patches hidden, in (0, 1) and keeping at least one "
         f"(the paper hides 0.75)"),
        ("norm_pix_loss", isinstance(c.norm_pix_loss, bool), "True or False"),
        ("position_step", _whole(c.position_step, 1), "a whole number >= 1 (1: the digit at any pixel)"),
        ("seed", _whole(c.seed, 0), "a whole number >= 0"),
        ("encoder", isinstance(c.encoder, dict), "a dict of encoder sizes, e.g. dict(embed_dim=64, depth=4, ...)"),
        ("decoder", isinstance(c.decoder, dict), "a dict of decoder sizes, e.g. dict(decoder_embed_dim=48, ...)"),
    ]
    return [f"{name} must be {allowed}; got {getattr(c, name)!r}" for name, ok, allowed in checks if not ok]


@dataclass
class MAEHistory:
    """One entry per epoch: the reconstruction loss (hidden patches) on training and fixed val canvases."""

    epoch: list = field(default_factory=list)
    train_loss: list = field(default_factory=list)
    val_loss: list = field(default_factory=list)
    lr: list = field(default_factory=list)
    seconds: list = field(default_factory=list)


def mae_kwargs(config: MAEConfig) -> dict:
    """The ``MaskedAutoencoder`` keyword arguments of ``config``: 4x4 patches of a 32x32x1 canvas."""
    return dict(img_size=32, patch_size=4, in_chans=1, norm_pix_loss=config.norm_pix_loss, **config.encoder,
                **config.decoder)


def build_mae(config: MAEConfig) -> MaskedAutoencoder:
    """The MAE of ``config``, initialised from ``config.seed`` (the random-encoder baseline is this, untrained)."""
    torch.manual_seed(config.seed)
    return MaskedAutoencoder(**mae_kwargs(config))


def unlabelled_canvases(split: str, num_images: int, seed: int, position_step: int = 1) -> Tensor:
    """Normalised cluttered canvases of ``split`` made from its digit *images* only; no label is ever read.

    -> (num_images, 1, 32, 32). ``make_cluttered`` wants labels to hand back: it gets placeholders (zeros), and
    what it hands back is dropped.
    """
    digits = load_digits()[split][0].float() / DIGITS_MAX  # (M, 1, 8, 8) in [0, 1]: images only
    placeholders = torch.zeros(len(digits), dtype=torch.long)
    generator = torch.Generator().manual_seed(seed)
    images, _, _ = make_cluttered(digits, placeholders, num_images, generator, position_step=position_step)
    return normalise_canvases(images)


def epoch_canvases(config: MAEConfig, epoch: int) -> Tensor:
    """The training canvases of one epoch: a function of (seed, epoch) alone, so a resumed run draws the same."""
    return unlabelled_canvases("train", config.canvases_per_epoch, config.seed * 100_003 + epoch,
                               config.position_step)


@torch.no_grad()
def reconstruction_loss(model: MaskedAutoencoder, images: Tensor, mask_ratio: float, seed: int = 0) -> float:
    """Mean loss on hidden patches over ``images``, with masks drawn from ``seed`` (the same every epoch)."""
    model.eval()
    device = next(model.parameters()).device
    generator = torch.Generator(device).manual_seed(seed)
    losses = [model(images[i:i + 500].to(device), mask_ratio, generator)[0].item() * len(images[i:i + 500])
              for i in range(0, len(images), 500)]
    return sum(losses) / len(images)


def pretrain(
    config: MAEConfig, out: Optional[str | Path] = None, device: str = "cpu", stop_after: Optional[int] = None,
    log: Callable[[str], None] = print, val_images: Optional[Tensor] = None,
) -> tuple[MaskedAutoencoder, MAEHistory, int]:
    """Pre-train (or resume the run in ``out``); returns (model, history, optimizer steps taken).

    ``stop_after=e`` ends after epoch e, as if interrupted. ``val_images`` default to 2,000 val canvases.
    """
    refuse_file_as_folder(out)
    device = torch.device(device)
    resuming = out is not None and (Path(out) / STATE_FILE).exists()
    if resuming:
        saved = json.loads((Path(out) / STATE_FILE).read_text())["config"]
        config = MAEConfig(**{**saved, "betas": tuple(saved["betas"])})
    model = build_mae(config).to(device)
    optimizer = torch.optim.AdamW(param_groups(model, config.weight_decay), lr=config.lr, betas=config.betas)
    scaler = torch.amp.GradScaler(device.type, enabled=False)  # fp32: kept for save_checkpoint's format
    start, step, history = 0, 0, MAEHistory()
    if resuming:
        state = load_checkpoint(out, model, optimizer, scaler)
        start, step, history = state["epoch"], state["step"], MAEHistory(**state["history"])
        log(f"resuming {out} after epoch {start} of {config.epochs} (step {step})")
    if val_images is None:
        val_images = unlabelled_canvases("val", 2_000, seed=1_000_003, position_step=config.position_step)
    steps_per_epoch = math.ceil(config.canvases_per_epoch / config.batch_size)
    total, warmup = config.epochs * steps_per_epoch, round(config.warmup_epochs * steps_per_epoch)
    for epoch in range(start, config.epochs if stop_after is None else min(stop_after, config.epochs)):
        began = time.perf_counter()
        images = epoch_canvases(config, epoch)  # (canvases, 1, 32, 32), already in random order
        torch.manual_seed(config.seed * 1_000 + epoch)  # the masks depend on (seed, epoch) only
        model.train()
        loss_sum = 0.0
        for i in range(0, len(images), config.batch_size):
            batch = images[i:i + config.batch_size].to(device)  # (batch, 1, 32, 32)
            lr = lr_at(step, total, warmup, config.lr, config.min_lr)
            for group in optimizer.param_groups:
                group["lr"] = lr
            loss = model(batch, config.mask_ratio)[0]
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            loss_sum += loss.item() * len(batch)
        val_loss = reconstruction_loss(model, val_images, config.mask_ratio)
        history.epoch.append(epoch + 1)
        history.train_loss.append(loss_sum / len(images))
        history.val_loss.append(val_loss)
        history.lr.append(lr)
        history.seconds.append(time.perf_counter() - began)
        log(f"epoch {epoch + 1:4d}/{config.epochs}  train {history.train_loss[-1]:.4f}  val {val_loss:.4f}  "
            f"lr {lr:.2e}  {history.seconds[-1]:.1f} s")
        if out is not None:
            save_checkpoint(out, model, optimizer, scaler, config, history, epoch + 1, step)
    return model, history, step


ENCODER_FILE = "encoder.safetensors"  # the finished run's encoder, in the run's folder
SHIPPED_NAME = "vit_cluttered_digits_mae"  # the registry name of the shipped encoder (vitedu.registry.MODELS)


def encoder_metadata(config: MAEConfig, history: MAEHistory, model: str) -> dict[str, str]:
    """What an encoder file says about itself: how to rebuild it (``create_model(model, **model_kwargs)``) and how
    it was made (the pre-training config, epochs done, final val reconstruction loss, its inputs' normalisation)."""
    kwargs = dict(img_size=32, patch_size=4, in_chans=1, num_classes=0, pos_embed="sincos", **config.encoder)
    return {
        "model": model, "model_kwargs": json.dumps(kwargs), "config": json.dumps(asdict(config)),
        "epochs_done": str(len(history.epoch)),
        "val_recon_loss": f"{history.val_loss[-1]:.4f}" if history.val_loss else "",
        "pretrained_cfg": json.dumps({"input_size": [1, 32, 32], "mean": CLUTTERED_MEAN, "std": CLUTTERED_STD}),
    }


def save_encoder(path: str | Path, model: MaskedAutoencoder, config: MAEConfig, history: MAEHistory) -> None:
    """The encoder alone as safetensors, with ``encoder_metadata`` (``vit_cluttered_digits`` rebuilds it)."""
    save_state_dict(Path(path), model.encoder, encoder_metadata(config, history, "vit_cluttered_digits"))

