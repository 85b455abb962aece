"""Named model configurations and ``create_model``, as in timm (ViT paper, Table 1, plus small presets)."""

from __future__ import annotations

from typing import Any

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
    # 32x32 RGB (CIFAR-10): 4x4 patches -> 8x8 = 64 tokens, about 6.3M parameters.
    "vit_cifar_patch4_32": dict(
        img_size=32, patch_size=4, in_chans=3, num_classes=10, embed_dim=256, depth=8, num_heads=8, mlp_ratio=4.0
    ),
}


def list_models() -> list[str]:
    """Names accepted by :func:`create_model`."""
    return sorted(MODEL_CONFIGS)


def create_model(name: str, **overrides: Any) -> VisionTransformer:
    """Build a named ViT; keyword arguments override the preset (e.g. ``num_classes=10``)."""
    if name not in MODEL_CONFIGS:
        raise ValueError(f"unknown model {name!r}; available models: {', '.join(list_models())}")
    return VisionTransformer(**{**MODEL_CONFIGS[name], **overrides})
