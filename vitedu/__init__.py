"""vitedu: the Vision Transformer, built up one readable piece at a time.

    import vitedu
    model = vitedu.create_model("vit_cluttered_digits", pretrained=True).eval()
    # (N, 1, 32, 32) in [0, 1]
    images, labels, _ = vitedu.load_cluttered_digits("test")
    # resize to input_size, normalise with mean/std
    x = vitedu.create_transform(model)(images)
    logits = model(x)                  # (N, 10)
    maps = model.attention_maps(x)     # (depth, N, heads, tokens, tokens)

``import vitedu`` loads the core (attention, patching, blocks, the ViT); every other module and name is loaded on
first use (``vitedu.train``, ``vitedu.checks``, ``vitedu.create_model``, ...), so the import stays light and
``python -m vitedu.train`` does not find its module imported already. ARCHITECTURE.md maps the modules.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import attention, blocks, patching
from .attention import MultiHeadSelfAttention, scaled_dot_product_attention
from .blocks import Block, DropPath, LayerScale, Mlp
from .patching import PatchEmbedding, patchify, resample_pos_embed, sincos_pos_embed_2d, unpatchify
from .utils import count_parameters, get_device, seed_everything
from .vit import VisionTransformer

__version__ = "0.1.0"

# name -> the module that defines it, imported on first use.
_LAZY = {
    "MODEL_CONFIGS": "models", "create_model": "models", "list_models": "models",
    "from_pretrained": "pretrained",
    "create_transform": "preprocess", "resolve_data_config": "preprocess",
    "TensorLoader": "loaders", "load_cifar10": "cifar", "load_digits": "digits",
    "load_cluttered_digits": "cluttered",
    "PRESETS": "config", "TrainConfig": "config", "fit": "train", "load_trained": "train",
}
_SUBMODULES = (
    "augment", "cait", "checkpoints", "checks", "cifar", "cluttered", "cnn", "config", "constants", "convit", "cost",
    "data", "deit", "digits", "distributed", "effects", "faithfulness", "frozen", "grading", "hf_configs",
    "imagefolder", "interpret", "linear_probe", "loaders", "mae", "mae_pretrain", "mimetic", "models", "optimizers",
    "preprocess", "pretrained", "probes", "registry", "run_files", "shift", "shipped", "shipped_mae", "speedrun",
    "state_dicts", "timm_configs", "train", "utils", "vit",
)


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'vitedu' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))


__all__ = [
    "MODEL_CONFIGS", "PRESETS", "Block", "DropPath", "LayerScale", "Mlp", "MultiHeadSelfAttention", "PatchEmbedding",
    "TensorLoader", "TrainConfig", "VisionTransformer", "attention", "blocks", "checks", "count_parameters",
    "create_model", "create_transform", "data", "fit", "from_pretrained", "get_device", "interpret", "list_models",
    "load_cifar10", "load_cluttered_digits", "load_digits", "load_trained", "patchify", "patching", "pretrained",
    "resample_pos_embed", "resolve_data_config", "scaled_dot_product_attention", "seed_everything",
    "sincos_pos_embed_2d", "train", "unpatchify",
]
