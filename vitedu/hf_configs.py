"""Hugging Face's ViT layout: its parameter names, its ``config.json`` and its ``preprocessor_config.json``.

A Hugging Face ViT keeps query, key and value as three Linear layers (timm fuses them into ``qkv``) and names
everything differently (``encoder.layer.N.attention.attention.query``); ``convert_hf_state_dict`` renames and fuses,
``hf_config_to_kwargs`` translates a ``ViTConfig``, ``hf_preprocessor_cfg`` the image processor's record of the
input normalisation. ``vitedu.pretrained`` uses them to load Hugging Face checkpoints.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from .checkpoints import read_json, require_types
from .preprocess import PIL_RESAMPLE, make_pretrained_cfg, model_input_size

# Hugging Face ViT parameter name -> timm/vitedu name. Files on disk and on the hub use the classic
# names ("encoder.layer.N...attention.query"); transformers >= 5 models hold "layers.N...q_proj" in memory.
_HF_TO_TIMM = [
    (r"embeddings\.cls_token", "cls_token"),
    (r"embeddings\.position_embeddings", "pos_embed"),
    (r"embeddings\.patch_embeddings\.projection\.(weight|bias)", r"patch_embed.proj.\1"),
    (r"encoder\.layer\.(\d+)\.layernorm_before\.(weight|bias)", r"blocks.\1.norm1.\2"),
    (r"encoder\.layer\.(\d+)\.attention\.attention\.(query|key|value)\.(weight|bias)", r"blocks.\1.attn.\2.\3"),
    (r"encoder\.layer\.(\d+)\.attention\.output\.dense\.(weight|bias)", r"blocks.\1.attn.proj.\2"),
    (r"encoder\.layer\.(\d+)\.layernorm_after\.(weight|bias)", r"blocks.\1.norm2.\2"),
    (r"encoder\.layer\.(\d+)\.intermediate\.dense\.(weight|bias)", r"blocks.\1.mlp.fc1.\2"),
    (r"encoder\.layer\.(\d+)\.output\.dense\.(weight|bias)", r"blocks.\1.mlp.fc2.\2"),
    (r"layers\.(\d+)\.attention\.([qkv])_proj\.(weight|bias)", r"blocks.\1.attn.\2.\3"),
    (r"layers\.(\d+)\.attention\.o_proj\.(weight|bias)", r"blocks.\1.attn.proj.\2"),
    (r"layers\.(\d+)\.layernorm_before\.(weight|bias)", r"blocks.\1.norm1.\2"),
    (r"layers\.(\d+)\.layernorm_after\.(weight|bias)", r"blocks.\1.norm2.\2"),
    (r"layers\.(\d+)\.mlp\.(fc1|fc2)\.(weight|bias)", r"blocks.\1.mlp.\2.\3"),
    (r"layernorm\.(weight|bias)", r"norm.\1"),
    (r"classifier\.(weight|bias)", r"head.\1"),
]
# Weights of ViTModel's "pooler" (a tanh layer used by BERT-style fine-tuning, not by ViT's classifier).
_HF_UNUSED = re.compile(r"pooler\.")


def convert_hf_state_dict(hf_state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Rename a Hugging Face ViT state_dict to timm's layout and fuse query/key/value into ``qkv``.

    HF keeps three Linear layers (query, key, value); timm one ``qkv`` Linear whose output rows are
    [q | k | v], so the fused weight is simply the three weights stacked.
    """
    out: dict[str, Tensor] = {}
    unknown = []
    for key, tensor in hf_state.items():
        key = key.removeprefix("vit.")
        if _HF_UNUSED.match(key):
            continue
        for pattern, replacement in _HF_TO_TIMM:
            if re.fullmatch(pattern, key):
                out[re.sub(pattern, replacement, key)] = tensor
                break
        else:
            unknown.append(key)
    if unknown:
        raise ValueError(f"not a Hugging Face ViT checkpoint: unrecognised keys {unknown[:8]}")
    for old, new in ((".attn.q.", ".attn.query."), (".attn.k.", ".attn.key."), (".attn.v.", ".attn.value.")):
        out = {k.replace(old, new): v for k, v in out.items()}
    for name in sorted({k.rsplit(".attn.", 1)[0] for k in out if ".attn.query." in k}):
        for kind in ("weight", "bias"):
            parts = [out.pop(f"{name}.attn.{p}.{kind}", None) for p in ("query", "key", "value")]
            if all(p is not None for p in parts):
                out[f"{name}.attn.qkv.{kind}"] = torch.cat(parts, dim=0)
    return out


def exact_mlp_ratio(hidden_dim: int, dim: int) -> float:
    """The ``mlp_ratio`` for which ``int(dim * mlp_ratio) == hidden_dim`` exactly.

    ``hidden_dim / dim`` is not always enough: 201 / 100 = 2.01, but 100 * 2.01 = 200.99999999999997 in floating
    point, which ``int`` rounds down to 200. Step the ratio up by one float until the product reaches the width.
    """
    ratio = hidden_dim / dim
    while int(dim * ratio) < hidden_dim:
        ratio = math.nextafter(ratio, math.inf)
    return ratio


def hf_config_to_kwargs(config: dict[str, Any]) -> dict[str, Any]:
    """Translate a Hugging Face ``ViTConfig`` (as a dict from config.json) to VisionTransformer kwargs."""
    if config.get("model_type", "vit") != "vit":
        raise ValueError(f"expected a ViT checkpoint (model_type 'vit'), got model_type {config.get('model_type')!r}")
    if config.get("hidden_act", "gelu") != "gelu":
        raise ValueError(f"vitedu's MLP uses the exact GELU; this checkpoint uses {config['hidden_act']!r}")
    missing = [k for k in ("hidden_size", "num_hidden_layers", "num_attention_heads") if k not in config]
    if missing:
        raise ValueError(f"a Hugging Face ViT config.json needs {missing}; this one has only {sorted(config)}")
    require_types(config, {"hidden_size": int, "num_hidden_layers": int, "num_attention_heads": int,
                            "intermediate_size": int, "image_size": int, "patch_size": int, "num_channels": int,
                            "id2label": dict, "layer_norm_eps": float, "qkv_bias": bool}, "config.json")
    hidden = config["hidden_size"]
    labels = config.get("id2label") or {}
    return dict(
        img_size=config.get("image_size", 224),
        patch_size=config.get("patch_size", 16),
        in_chans=config.get("num_channels", 3),
        num_classes=len(labels) if config.get("architectures", ["ViTForImageClassification"]) != ["ViTModel"] else 0,
        embed_dim=hidden,
        depth=config["num_hidden_layers"],
        num_heads=config["num_attention_heads"],
        mlp_ratio=exact_mlp_ratio(config.get("intermediate_size", 4 * hidden), hidden),
        qkv_bias=config.get("qkv_bias", True),
        norm_eps=config.get("layer_norm_eps", 1e-12),
    )


def hf_preprocessor_cfg(path: Path, model: nn.Module, labels: list[str] | None) -> dict[str, Any]:
    """The ``pretrained_cfg`` of a Hugging Face ViT directory, from its ``preprocessor_config.json``.

    ViTImageProcessor resizes both sides straight to ``size`` (crop_mode "squash") with ``resample`` (PIL's
    codes), rescales by 1/255 and normalises with ``image_mean``/``image_std``. Without that file nothing states
    the normalisation: mean, std and interpolation are None."""
    file = path / "preprocessor_config.json"
    common = dict(input_size=model_input_size(model), num_classes=model.num_classes, label_names=labels, trained=True)
    if not file.is_file():
        return make_pretrained_cfg(**common, mean=None, std=None, interpolation=None, crop_pct=None,
                                   source=f"{path} has no preprocessor_config.json: the normalisation is unknown")
    config = read_json(file)
    require_types(config, {"image_mean": list, "image_std": list, "resample": int, "do_normalize": bool,
                            "do_rescale": bool, "rescale_factor": float}, file)
    if config.get("do_rescale", True) and not math.isclose(config.get("rescale_factor", 1 / 255), 1 / 255):
        raise ValueError(f"{file}: rescale_factor {config['rescale_factor']} is not 1/255; vitedu's transform takes "
                         "images in [0, 1]")
    channels = common["input_size"][0]
    mean, std = config.get("image_mean"), config.get("image_std")
    if not config.get("do_normalize", True):
        mean, std = (0.0,) * channels, (1.0,) * channels
    resample = config.get("resample")
    interpolation = PIL_RESAMPLE.get(resample) if resample is not None else None
    if resample is not None and interpolation is None:
        raise ValueError(f"{file}: resample={resample} is not one vitedu's transform implements (PIL codes "
                         f"{sorted(PIL_RESAMPLE)}: {', '.join(PIL_RESAMPLE.values())})")
    return make_pretrained_cfg(**common, mean=mean, std=std, interpolation=interpolation, crop_pct=1.0,
                               crop_mode="squash" if config.get("do_resize", True) else "center", source=str(file))
