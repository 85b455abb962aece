"""The one model registry: name -> (model class, keyword arguments, where trained weights come from).

Every named model of vitedu is one ``ModelEntry`` in ``MODELS``: the book's small presets, the ViT family of the
paper, its successors of chapter 9, and every timm architecture that vitedu computes exactly. What other modules
need is a view of this one table: ``vitedu.models.MODEL_CONFIGS`` (the plain ViTs), ``VARIANT_CONFIGS`` (DeiT,
CaiT, ConViT), ``vitedu.timm_configs.TIMM_ARCHITECTURES`` / ``TIMM_VARIANTS`` (the names timm's checkpoints carry).

An entry also says how its inputs are prepared (``mean``, ``std``, ``interpolation``, ``crop_pct``): the
values every model built from it carries in ``model.pretrained_cfg`` (see ``vitedu.preprocess``). Where the entry
cannot know them (a timm architecture: the checkpoint's tag decides, ``augreg`` 0.5 and ``deit`` ImageNet's
statistics), they are ``None``, and the checkpoint fills them in (``vitedu.from_pretrained``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from torch import nn

from .cait import Cait
from .constants import (
    CIFAR10_CLASSES,
    CIFAR10_MEAN,
    CIFAR10_STD,
    CLUTTERED_MEAN,
    CLUTTERED_STD,
    DIGIT_NAMES,
    DIGITS_MEAN,
    DIGITS_STD,
)
from .convit import ConVit
from .deit import VisionTransformerDistilled
from .frozen import FrozenDict
from .vit import VisionTransformer


class FrozenSettings(FrozenDict):
    """A registry entry's keyword arguments: a dict that refuses changes, because every ``create_model`` call (and
    every reader of ``MODEL_CONFIGS``) shares it. A variant is built with overrides, never by editing the table."""

    refusal = ("the registry's settings are shared by every create_model call and cannot change; build a variant "
               "with overrides instead, e.g. vitedu.create_model(name, depth=2), or copy them first: "
               "settings = dict(vitedu.MODEL_CONFIGS[name])")


@dataclass(frozen=True)
class ModelEntry:
    """One named model: its class, its keyword arguments, and where trained weights for it come from.

    ``pretrained``: ``"vitedu"`` when trained weights ship inside the package (``weights`` names the file in
    vitedu/assets), ``"timm"`` when it is a timm architecture whose checkpoints ``vitedu.from_pretrained`` loads
    exactly (e.g. ``"timm/vit_base_patch16_224.augreg2_in21k_ft_in1k"``), ``None`` when only random weights exist.
    ``mean``/``std``/``label_names``: the normalisation and classes of the data the name is made for (``None``:
    not known from the name alone).
    """

    model_class: type[nn.Module]
    kwargs: dict[str, Any]
    pretrained: Optional[str] = None
    weights: Optional[str] = None
    mean: Optional[tuple[float, ...]] = None
    std: Optional[tuple[float, ...]] = None
    label_names: Optional[tuple[str, ...]] = None
    interpolation: str = "bicubic"
    crop_pct: float = 1.0
    notes: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kwargs", FrozenSettings(self.kwargs))  # frozen: the entry is shared


def _timm(model_class: type[nn.Module], patch: int, dim: int, depth: int, heads: int, img: int = 224,
          **extra: Any) -> ModelEntry:
    """A timm architecture (timm's own values, see timm/models/vision_transformer.py): loads timm checkpoints.

    crop_pct 0.9 is timm's default eval crop for 224-pixel ViTs; the checkpoint's config overrides it."""
    kwargs = dict(img_size=img, patch_size=patch, embed_dim=dim, depth=depth, num_heads=heads, **extra)
    return ModelEntry(model_class, kwargs, pretrained="timm", crop_pct=0.9 if img == 224 else 1.0)


def _vit(patch: int, dim: int, depth: int, heads: int, img: int = 224, **extra: Any) -> ModelEntry:
    return _timm(VisionTransformer, patch, dim, depth, heads, img, **extra)


def _digits(model_class: type[nn.Module], **kwargs: Any) -> ModelEntry:
    """A model for the 8x8 digits (vitedu.digits): inputs scaled to [0, 1], then normalised with the digits'
    statistics, as ``vitedu.train`` trains it."""
    return ModelEntry(model_class, dict(img_size=8, in_chans=1, num_classes=10, **kwargs), mean=DIGITS_MEAN,
                      std=DIGITS_STD, label_names=DIGIT_NAMES)


def _cluttered(model_class: type[nn.Module], weights: Optional[str] = None, **kwargs: Any) -> ModelEntry:
    """A model for cluttered digits (vitedu.cluttered): 32x32 canvases in [0, 1], normalised with the training
    canvases' statistics, as ``vitedu.train`` trains it."""
    return ModelEntry(model_class, dict(img_size=32, patch_size=4, in_chans=1, **{"num_classes": 10, **kwargs}),
                      pretrained="vitedu" if weights else None, weights=weights, mean=CLUTTERED_MEAN,
                      std=CLUTTERED_STD, label_names=DIGIT_NAMES)


_SMALL = dict(embed_dim=64, depth=4, num_heads=4, mlp_ratio=2.0)  # the width and depth of the book's small models

MODELS: dict[str, ModelEntry] = {
    # The ViT family of Dosovitskiy et al. (2021); Ti and S come from DeiT (Touvron et al., 2021).
    "vit_tiny_patch16_224": _vit(16, 192, 12, 3),
    "vit_tiny_patch16_384": _vit(16, 192, 12, 3, 384),
    "vit_small_patch32_224": _vit(32, 384, 12, 6),
    "vit_small_patch32_384": _vit(32, 384, 12, 6, 384),
    "vit_small_patch16_224": _vit(16, 384, 12, 6),
    "vit_small_patch16_384": _vit(16, 384, 12, 6, 384),
    "vit_small_patch8_224": _vit(8, 384, 12, 6),
    "vit_base_patch32_224": _vit(32, 768, 12, 12),
    "vit_base_patch32_384": _vit(32, 768, 12, 12, 384),
    "vit_base_patch16_224": _vit(16, 768, 12, 12),
    "vit_base_patch16_384": _vit(16, 768, 12, 12, 384),
    "vit_base_patch8_224": _vit(8, 768, 12, 12),
    "vit_large_patch32_224": _vit(32, 1024, 24, 16),
    "vit_large_patch32_384": _vit(32, 1024, 24, 16, 384),
    "vit_large_patch16_224": _vit(16, 1024, 24, 16),
    "vit_large_patch16_384": _vit(16, 1024, 24, 16, 384),
    "vit_large_patch14_224": _vit(14, 1024, 24, 16),
    "vit_huge_patch14_224": _vit(14, 1280, 32, 16),
    "vit_giant_patch14_224": _vit(14, 1408, 40, 16, mlp_ratio=48 / 11),
    "vit_gigantic_patch14_224": _vit(14, 1664, 48, 16, mlp_ratio=64 / 13),
    "vit_base_patch16_224_miil": _vit(16, 768, 12, 12, qkv_bias=False),
    "vit_base_patch32_plus_256": _vit(32, 896, 12, 14, 256, init_values=1e-5),
    "vit_base_patch16_plus_240": _vit(16, 896, 12, 14, 240, init_values=1e-5),
    # DINOv2 (Oquab et al., 2023) without registers: a plain ViT with LayerScale, trained at 518 pixels.
    "vit_small_patch14_dinov2": _vit(14, 384, 12, 6, 518, init_values=1e-5),
    "vit_base_patch14_dinov2": _vit(14, 768, 12, 12, 518, init_values=1e-5),
    "vit_large_patch14_dinov2": _vit(14, 1024, 24, 16, 518, init_values=1e-5),
    # DeiT (Touvron et al., 2021) without the distillation token is the same network as ViT.
    "deit_tiny_patch16_224": _vit(16, 192, 12, 3),
    "deit_small_patch16_224": _vit(16, 384, 12, 6),
    "deit_base_patch16_224": _vit(16, 768, 12, 12),
    "deit_base_patch16_384": _vit(16, 768, 12, 12, 384),
    # After ViT (chapter 9), with timm's names, keys and parameter counts. ConViT's embed_dim is the full width
    # (timm's convit_tiny says 48 per head x 4 heads = 192).
    "deit_tiny_distilled_patch16_224": _timm(VisionTransformerDistilled, 16, 192, 12, 3),
    "deit_small_distilled_patch16_224": _timm(VisionTransformerDistilled, 16, 384, 12, 6),
    "cait_xxs24_224": _timm(Cait, 16, 192, 24, 4, init_values=1e-5),
    "cait_s24_224": _timm(Cait, 16, 384, 24, 8, init_values=1e-5),
    "convit_tiny": _timm(ConVit, 16, 192, 12, 4, local_up_to_layer=10),
    "convit_small": _timm(ConVit, 16, 432, 12, 9, local_up_to_layer=10),
    # Small presets that train on a laptop.
    # 8x8 grayscale digits (vitedu.digits): 2x2 patches -> a 4x4 grid of tokens.
    "vit_digits_patch2_8": _digits(VisionTransformer, patch_size=2, **_SMALL),
    # The tuned digits model of chapter 7 (vitedu.config.PRESETS["digits"]): 4x4 patches -> a 2x2 grid of
    # tokens, mean pooling. Fewer, richer tokens learn faster than 16 tiny ones on 1,259 training images.
    "vit_digits_patch4_8": _digits(VisionTransformer, patch_size=4, **{**_SMALL, "embed_dim": 128}, pool="mean"),
    # Digits presets of chapter 9: 2x2 patches -> a 4x4 grid (ConViT's local heads need a grid to be local on),
    # the width and depth of vit_digits_patch2_8. CaiT: init_values 0.1, the paper's choice for shallow nets.
    "deit_digits_patch2_8": _digits(VisionTransformerDistilled, patch_size=2, **_SMALL),
    "cait_digits_patch2_8": _digits(Cait, patch_size=2, **_SMALL, mlp_ratio_token_only=2.0, init_values=0.1),
    "convit_digits_patch2_8": _digits(ConVit, patch_size=2, **_SMALL, local_up_to_layer=2),
    # Cluttered digits (vitedu.cluttered, PRESETS["cluttered_digits"]): one 8x8 digit on a 32x32 canvas of clutter.
    # 4x4 patches -> an 8x8 grid of 64 tokens + [CLS]; the digit touches 2-9 of them. Trained weights ship with
    # vitedu (made by `make weights`; the file's metadata holds the training config and the test accuracy).
    "vit_cluttered_digits": _cluttered(VisionTransformer, weights="vit_cluttered_digits.safetensors", **_SMALL),
    # Chapter 10's masked autoencoder (vitedu.mae, pre-trained by tools/pretrain_mae.py on unlabelled canvases, the
    # digit at any pixel): its encoder alone, as the official MAE checkpoints ship it. No head (num_classes=0),
    # MAE's fixed sin-cos positions; forward_features -> (batch, 1 + 64, 64). The decoder that draws its
    # reconstructions ships beside it: vitedu.shipped_mae.load_shipped_mae() gives the whole MaskedAutoencoder.
    "vit_cluttered_digits_mae": _cluttered(VisionTransformer, weights="vit_cluttered_digits_mae.safetensors",
                                           **_SMALL, num_classes=0, pos_embed="sincos"),
    # Chapter 9's controlled comparison: the width, depth (4 blocks) and 8x8 grid of vit_cluttered_digits.
    # CaiT: 3 self-attention + 1 class-attention block; ConViT: 2 GPSA + 2 SA blocks.
    "deit_cluttered_digits": _cluttered(VisionTransformerDistilled, **_SMALL),
    "cait_cluttered_digits": _cluttered(Cait, **{**_SMALL, "depth": 3}, depth_token_only=1, mlp_ratio_token_only=2.0,
                                        init_values=0.1),
    "convit_cluttered_digits": _cluttered(ConVit, **_SMALL, local_up_to_layer=2),
    # 32x32 RGB (CIFAR-10): 4x4 patches -> 8x8 = 64 tokens, about 6.3M parameters.
    "vit_cifar_patch4_32": ModelEntry(VisionTransformer, dict(
        img_size=32, patch_size=4, in_chans=3, num_classes=10, embed_dim=256, depth=8, num_heads=8, mlp_ratio=4.0),
        mean=CIFAR10_MEAN, std=CIFAR10_STD, label_names=CIFAR10_CLASSES),
}


def get_entry(name: str) -> ModelEntry:
    """The registry entry of a model name, or a ValueError listing the names there are."""
    if not isinstance(name, str) or name not in MODELS:
        raise ValueError(f"unknown model {name!r}; available models: {', '.join(sorted(MODELS))}")
    return MODELS[name]


def model_kwargs(name: str, overrides: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The full keyword arguments of a named model: its entry's with ``overrides`` on top."""
    return {**get_entry(name).kwargs, **(overrides or {})}


def shipped_names() -> list[str]:
    """Names whose trained weights ship inside the package."""
    return sorted(name for name, entry in MODELS.items() if entry.pretrained == "vitedu")


def timm_names() -> list[str]:
    """timm architecture names that vitedu loads exactly, in the registry's order."""
    return [name for name, entry in MODELS.items() if entry.pretrained == "timm"]


__all__ = ["FrozenSettings", "MODELS", "ModelEntry", "get_entry", "model_kwargs", "shipped_names", "timm_names"]
