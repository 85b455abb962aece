"""vitedu: the Vision Transformer, built up one readable piece at a time.

    import vitedu
    model = vitedu.create_model("vit_tiny_patch16_224")
    logits = model(images)                       # (batch, 1000)
    maps = model.attention_maps(images)          # (depth, batch, heads, tokens, tokens)
"""

from . import attention, blocks, patching, pretrained
from .attention import MultiHeadSelfAttention, scaled_dot_product_attention
from .blocks import Block, DropPath, LayerScale, Mlp
from .models import MODEL_CONFIGS, create_model, list_models
from .patching import PatchEmbedding, patchify, resample_pos_embed, sincos_pos_embed_2d, unpatchify
from .pretrained import from_pretrained
from .utils import count_parameters, get_device, seed_everything
from .vit import VisionTransformer

__version__ = "0.1.0"

__all__ = [
    "Block", "DropPath", "LayerScale", "MODEL_CONFIGS", "Mlp", "MultiHeadSelfAttention", "PatchEmbedding",
    "VisionTransformer", "attention", "blocks", "count_parameters", "create_model", "from_pretrained",
    "get_device", "list_models", "patchify", "patching", "pretrained", "resample_pos_embed",
    "scaled_dot_product_attention", "seed_everything", "sincos_pos_embed_2d", "unpatchify",
]
