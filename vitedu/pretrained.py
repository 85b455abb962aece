"""Load real checkpoints: Hugging Face ViTs (``google/vit-base-patch16-224``) and timm state_dicts.

Loading never runs code from the checkpoint: safetensors files hold only tensors, and ``.bin``/``.pth``
files are read with ``torch.load(weights_only=True)``, which refuses anything but tensors and plain
containers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from .vit import VisionTransformer

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


def hf_config_to_kwargs(config: dict[str, Any]) -> dict[str, Any]:
    """Translate a Hugging Face ``ViTConfig`` (as a dict from config.json) to VisionTransformer kwargs."""
    if config.get("model_type", "vit") != "vit":
        raise ValueError(f"expected a ViT checkpoint (model_type 'vit'), got model_type {config.get('model_type')!r}")
    if config.get("hidden_act", "gelu") != "gelu":
        raise ValueError(f"vitedu's MLP uses the exact GELU; this checkpoint uses {config['hidden_act']!r}")
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
        mlp_ratio=config.get("intermediate_size", 4 * hidden) / hidden,
        qkv_bias=config.get("qkv_bias", True),
        norm_eps=config.get("layer_norm_eps", 1e-12),
    )


def _read_weights(path: Path) -> dict[str, Tensor]:
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    state = torch.load(path, map_location="cpu", weights_only=True)  # tensors only: no code can run
    for wrapper in ("model", "state_dict", "model_state"):  # common training-script wrappers
        if isinstance(state, dict) and isinstance(state.get(wrapper), dict):
            state = state[wrapper]
    return state


def load_checked(model: nn.Module, state: dict[str, Tensor]) -> nn.Module:
    """``load_state_dict`` that names every missing key, unexpected key and shape mismatch at once."""
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    shapes = [
        f"{k}: checkpoint {tuple(state[k].shape)} vs model {tuple(expected[k].shape)}"
        for k in expected
        if k in state and state[k].shape != expected[k].shape
    ]
    if missing or unexpected or shapes:
        lines = ["the checkpoint does not match the model:"]
        lines += [f"  missing from checkpoint: {missing}"] if missing else []
        lines += [f"  unexpected in checkpoint: {unexpected}"] if unexpected else []
        lines += [f"  shape mismatch: {s}" for s in shapes]
        lines.append("Build the model with the checkpoint's configuration (patch size, width, depth, heads, classes).")
        raise ValueError("\n".join(lines))
    model.load_state_dict(state)
    return model


def _infer_timm_kwargs(state: dict[str, Tensor], overrides: dict[str, Any]) -> dict[str, Any]:
    """Read a ViT's configuration off the shapes in a timm state_dict."""
    if "patch_embed.proj.weight" not in state:
        raise ValueError("not a ViT state_dict: there is no 'patch_embed.proj.weight'")
    embed_dim, in_chans, patch, _ = state["patch_embed.proj.weight"].shape
    prefix = 1 if "cls_token" in state else 0
    grid = int((state["pos_embed"].shape[1] - prefix) ** 0.5)
    depth = len({k.split(".")[1] for k in state if k.startswith("blocks.")})
    known_heads = {192: 3, 384: 6, 768: 12, 1024: 16, 1280: 16}  # the standard family (Ti/S/B/L/H)
    if "num_heads" not in overrides and embed_dim not in known_heads:
        raise ValueError(f"a timm state_dict does not record the number of heads; pass num_heads=... "
                         f"(embed_dim is {embed_dim})")
    kwargs = dict(
        img_size=grid * patch, patch_size=patch, in_chans=in_chans, embed_dim=embed_dim, depth=depth,
        num_heads=known_heads.get(embed_dim), pool="cls" if prefix else "mean",
        num_classes=state["head.weight"].shape[0] if "head.weight" in state else 0,
        mlp_ratio=state["blocks.0.mlp.fc1.weight"].shape[0] / embed_dim,
        qkv_bias="blocks.0.attn.qkv.bias" in state,
        init_values=1e-5 if "blocks.0.ls1.gamma" in state else None,
    )
    return {**kwargs, **overrides}


def from_pretrained(path_or_hub_id: str | Path, **overrides: Any) -> VisionTransformer:
    """Build a VisionTransformer from a checkpoint and load its weights; returns it in eval mode.

    Accepts
    - a Hugging Face ViT directory (``config.json`` + ``model.safetensors`` or ``pytorch_model.bin``),
    - a Hugging Face hub id such as ``"google/vit-base-patch16-224"`` (downloaded with huggingface_hub),
    - a timm state_dict file (``.safetensors``, ``.pth``, ``.bin``); its configuration is read from the
      tensor shapes, and keyword arguments override it (e.g. ``num_heads=``).
    The model's ``class_names`` holds the checkpoint's label names when it has them.
    """
    path = Path(path_or_hub_id)
    if path.is_file():
        state = _read_weights(path)
        model = VisionTransformer(**_infer_timm_kwargs(state, overrides))
        model.class_names = None
        return load_checked(model, state).eval()
    if not path.is_dir():
        path = _download(str(path_or_hub_id))
    config_file = path / "config.json"
    if not config_file.is_file():
        raise ValueError(f"{path} is not a Hugging Face model directory: it has no config.json")
    config = json.loads(config_file.read_text())
    weights = [path / n for n in ("model.safetensors", "pytorch_model.bin") if (path / n).is_file()]
    if not weights:
        raise ValueError(f"{path} has a config.json but no model.safetensors or pytorch_model.bin")
    model = VisionTransformer(**{**hf_config_to_kwargs(config), **overrides})
    load_checked(model, convert_hf_state_dict(_read_weights(weights[0])))
    labels = config.get("id2label") or {}
    model.class_names = [labels[k] for k in sorted(labels, key=int)] if labels else None
    return model.eval()


def _download(hub_id: str) -> Path:
    """Fetch config.json and one weights file of a hub model (needs the internet and huggingface_hub).

    safetensors is preferred; the pickled ``pytorch_model.bin`` is fetched only when a repository has no
    ``model.safetensors`` (many ship both: downloading both would double the size).
    """
    if hub_id.count("/") != 1:
        raise ValueError(
            f"{hub_id!r} is neither an existing file or directory nor a hub id like 'google/vit-base-patch16-224'"
        )
    try:
        from huggingface_hub import hf_hub_download, list_repo_files
    except ImportError as err:
        raise ImportError("downloading from the hub needs huggingface_hub: pip install huggingface_hub") from err
    available = set(list_repo_files(hub_id))
    weights = next((n for n in ("model.safetensors", "pytorch_model.bin") if n in available), None)
    if "config.json" not in available or weights is None:
        raise ValueError(f"hub repository {hub_id!r} has no config.json with model.safetensors/pytorch_model.bin")
    hf_hub_download(hub_id, weights)
    return Path(hf_hub_download(hub_id, "config.json")).parent
