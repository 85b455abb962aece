"""vitedu: the Vision Transformer, built up one readable piece at a time.

    import vitedu
    model = vitedu.create_model("vit_tiny_patch16_224")
    logits = model(images)                       # (batch, 1000)
    maps = model.attention_maps(images)          # (depth, batch, heads, tokens, tokens)
"""

import importlib

from . import attention, blocks, checks, data, interpret, patching, pretrained
from .attention import MultiHeadSelfAttention, scaled_dot_product_attention
from .blocks import Block, DropPath, LayerScale, Mlp
from .data import TensorLoader, load_cifar10, load_digits
from .models import MODEL_CONFIGS, create_model, list_models
from .patching import PatchEmbedding, patchify, resample_pos_embed, sincos_pos_embed_2d, unpatchify
from .pretrained import from_pretrained
from .utils import count_parameters, get_device, seed_everything
from .vit import VisionTransformer

__version__ = "0.1.0"

_LAZY_FROM_TRAIN = ("PRESETS", "TrainConfig", "fit", "load_trained")


def __getattr__(name: str):
    # vitedu.train is imported on first use, so that `python -m vitedu.train` does not find it imported already.
    if name == "train" or name in _LAZY_FROM_TRAIN:
        train = importlib.import_module(".train", __name__)
        return train if name == "train" else getattr(train, name)
    raise AttributeError(f"module 'vitedu' has no attribute {name!r}")

__all__ = [
    "PRESETS", "Block", "DropPath", "LayerScale", "MODEL_CONFIGS", "Mlp", "MultiHeadSelfAttention", "PatchEmbedding",
    "TensorLoader", "TrainConfig", "VisionTransformer", "attention", "blocks", "checks", "count_parameters",
    "create_model", "data", "fit", "from_pretrained", "get_device", "interpret", "list_models", "load_cifar10",
    "load_digits",
    "load_trained", "patchify", "patching", "pretrained", "resample_pos_embed", "scaled_dot_product_attention",
    "seed_everything", "sincos_pos_embed_2d", "train", "unpatchify",
]
