"""Named model configurations and ``create_model``, as in timm (ViT paper, Table 1, plus small presets)."""

from __future__ import annotations

from importlib import resources
from typing import Any

from torch import nn

from .cait import Cait
from .convit import ConVit
from .deit import VisionTransformerDistilled
from .vit import VisionTransformer

# name -> keyword arguments of VisionTransformer
MODEL_CONFIGS: dict[str, dict[str, Any]] = {
    # The ViT family of Dosovitskiy et al. (2021); Ti and S come from DeiT (Touvron et al., 2021).
    "vit_tiny_patch16_224": dict(patch_size=16, embed_dim=192, depth=12, num_heads=3),
    "vit_small_patch16_224": dict(patch_size=16, embed_dim=384, depth=12, num_heads=6),
    "vit_base_patch16_224": dict(patch_size=16, embed_dim=768, depth=12, num_heads=12),
    "vit_large_patch16_224": dict(patch_size=16, embed_dim=1024, depth=24, num_heads=16),
    "vit_huge_patch14_224": dict(patch_size=14, embed_dim=1280, depth=32, num_heads=16),
    # Small presets that train on a laptop.
    # 8x8 grayscale digits (scikit-learn's load_digits): 2x2 patches -> a 4x4 grid of tokens.
    "vit_digits_patch2_8": dict(
        img_size=8, patch_size=2, in_chans=1, num_classes=10, embed_dim=64, depth=4, num_heads=4, mlp_ratio=2.0
    ),
    # The tuned digits model of chapter 7 (vitedu.train.PRESETS["digits"]): 4x4 patches -> a 2x2 grid of
    # tokens, mean pooling. Fewer, richer tokens learn faster than 16 tiny ones on 1,259 training images.
    "vit_digits_patch4_8": dict(
        img_size=8, patch_size=4, in_chans=1, num_classes=10, embed_dim=128, depth=4, num_heads=4, mlp_ratio=2.0,
        pool="mean",
    ),
    # Cluttered digits (vitedu.cluttered, PRESETS["cluttered_digits"]): one 8x8 digit on a 32x32 canvas of clutter.
    # 4x4 patches -> an 8x8 grid of 64 tokens + [CLS]; the digit covers 4-9 of them.
    "vit_cluttered_digits": dict(
        img_size=32, patch_size=4, in_chans=1, num_classes=10, embed_dim=64, depth=4, num_heads=4, mlp_ratio=2.0,
    ),
    # 32x32 RGB (CIFAR-10): 4x4 patches -> 8x8 = 64 tokens, about 6.3M parameters.
    "vit_cifar_patch4_32": dict(
        img_size=32, patch_size=4, in_chans=3, num_classes=10, embed_dim=256, depth=8, num_heads=8, mlp_ratio=4.0
    ),
}

# After ViT (chapter 9): name -> (model class, keyword arguments). timm's names and parameter counts;
# ConViT's embed_dim is the full width (timm's convit_tiny says 48 per head x 4 heads = 192).
VARIANT_CONFIGS: dict[str, tuple[type[nn.Module], dict[str, Any]]] = {
    "deit_tiny_distilled_patch16_224": (VisionTransformerDistilled, dict(embed_dim=192, depth=12, num_heads=3)),
    "deit_small_distilled_patch16_224": (VisionTransformerDistilled, dict(embed_dim=384, depth=12, num_heads=6)),
    "cait_xxs24_224": (Cait, dict(embed_dim=192, depth=24, num_heads=4, init_values=1e-5)),
    "cait_s24_224": (Cait, dict(embed_dim=384, depth=24, num_heads=8, init_values=1e-5)),
    "convit_tiny": (ConVit, dict(embed_dim=192, num_heads=4, local_up_to_layer=10)),
    "convit_small": (ConVit, dict(embed_dim=432, num_heads=9, local_up_to_layer=10)),
    # Digits presets: 2x2 patches -> a 4x4 grid (ConViT's local heads need a grid to be local on), the
    # width and depth of vit_digits_patch2_8. CaiT: init_values 0.1, the paper's choice for shallow nets.
    "deit_digits_patch2_8": (VisionTransformerDistilled, dict(
        img_size=8, patch_size=2, in_chans=1, num_classes=10, embed_dim=64, depth=4, num_heads=4, mlp_ratio=2.0)),
    "cait_digits_patch2_8": (Cait, dict(
        img_size=8, patch_size=2, in_chans=1, num_classes=10, embed_dim=64, depth=4, num_heads=4, mlp_ratio=2.0,
        mlp_ratio_token_only=2.0, init_values=0.1)),
    "convit_digits_patch2_8": (ConVit, dict(
        img_size=8, patch_size=2, in_chans=1, num_classes=10, embed_dim=64, depth=4, num_heads=4, mlp_ratio=2.0,
        local_up_to_layer=2)),
    # Cluttered digits (chapter 9's controlled comparison): the width, depth (4 blocks) and 8x8 grid of
    # vit_cluttered_digits. CaiT: 3 self-attention + 1 class-attention block; ConViT: 2 GPSA + 2 SA blocks.
    "deit_cluttered_digits": (VisionTransformerDistilled, dict(
        img_size=32, patch_size=4, in_chans=1, num_classes=10, embed_dim=64, depth=4, num_heads=4, mlp_ratio=2.0)),
    "cait_cluttered_digits": (Cait, dict(
        img_size=32, patch_size=4, in_chans=1, num_classes=10, embed_dim=64, depth=3, num_heads=4, mlp_ratio=2.0,
        depth_token_only=1, mlp_ratio_token_only=2.0, init_values=0.1)),
    "convit_cluttered_digits": (ConVit, dict(
        img_size=32, patch_size=4, in_chans=1, num_classes=10, embed_dim=64, depth=4, num_heads=4, mlp_ratio=2.0,
        local_up_to_layer=2)),
}


def list_models() -> list[str]:
    """Names accepted by :func:`create_model`."""
    return sorted([*MODEL_CONFIGS, *VARIANT_CONFIGS])


# name -> trained weights shipped inside the package (vitedu/assets), so they work offline and on Colab with
# the package alone. Each file is made by ``make weights`` (the training CLI); its safetensors metadata holds
# the training config and the measured test accuracy.
SHIPPED_WEIGHTS: dict[str, str] = {
    "vit_cluttered_digits": "vit_cluttered_digits.safetensors",
}


def create_model(name: str, pretrained: bool = False, **overrides: Any) -> nn.Module:
    """Build a named model; keyword arguments override the preset (e.g. ``num_classes=10``).

    ``pretrained=True`` loads the trained weights shipped with vitedu for that name (see ``SHIPPED_WEIGHTS``);
    overrides must then leave the architecture unchanged (e.g. ``drop_path_rate`` is fine, ``depth`` is not).
    For checkpoints from the Hugging Face hub or timm files, use ``vitedu.from_pretrained`` instead.
    """
    if name in VARIANT_CONFIGS and not pretrained:
        model_class, config = VARIANT_CONFIGS[name]
        return model_class(**{**config, **overrides})
    if pretrained and name not in SHIPPED_WEIGHTS:
        _shipped_file(name)  # raises the educational error listing the shipped models
    if name not in MODEL_CONFIGS:
        raise ValueError(f"unknown model {name!r}; available models: {', '.join(list_models())}")
    model = VisionTransformer(**{**MODEL_CONFIGS[name], **overrides})
    if pretrained:
        from .pretrained import load_checked  # here, not at the top: pretrained.py is the heavier module

        model = load_checked(model, load_shipped_weights(name))
    return model


def _shipped_file(name: str):  # -> importlib Traversable
    if name not in SHIPPED_WEIGHTS:
        raise ValueError(
            f"no trained weights are shipped with vitedu for {name!r}. Models with shipped weights: "
            f"{', '.join(sorted(SHIPPED_WEIGHTS))}. Use pretrained=False for a randomly initialised {name!r}, "
            "or vitedu.from_pretrained(...) for a checkpoint file or a Hugging Face hub id."
        )
    return resources.files("vitedu").joinpath("assets", SHIPPED_WEIGHTS[name])


def load_shipped_weights(name: str) -> dict[str, Any]:
    """The state_dict of a model trained and shipped with vitedu: {parameter name: tensor}."""
    from safetensors.torch import load

    return load(_shipped_file(name).read_bytes())


def shipped_metadata(name: str) -> dict[str, str]:
    """What the shipped file says about itself: the training config (JSON) and the measured test accuracy."""
    from safetensors import safe_open

    with resources.as_file(_shipped_file(name)) as path, safe_open(str(path), framework="pt") as f:
        return dict(f.metadata() or {})
